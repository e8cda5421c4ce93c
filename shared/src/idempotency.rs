//! `Idempotency-Key` on every authenticated POST, for every function alike.
//!
//! A key is the tenant's for 24 hours. The first request with it claims it with a
//! conditional write (table `idempotency`, key `tenant_id` + `idempotency_key`, TTL on
//! `expires_at`) together with the request's fingerprint (SHA-256 of method, path, query
//! and body). Then:
//!
//! - the request succeeds (2xx): its status, `Content-Type`, `Location`, `ETag` and body
//!   (compressed; in parts when large, so answers of every size are kept) are stored, and the same request with the same key gets them again with
//!   `Idempotent-Replayed: true`, without running again;
//! - the request fails (anything else): the claim is released, so the client can retry
//!   with the same key;
//! - a request with the same key and a different fingerprint: 422
//!   `idempotency_key_reused`;
//! - the same request while the first is still running: 409 `idempotency_in_progress`.
//!
//! A claim whose request never finished (the function was stopped) lapses after
//! [`LEASE_MS`]. Requests without the header are served as they come.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, header};
use sha2::{Digest, Sha256};

use crate::TenantId;
use crate::auth::AuthState;
use crate::dynamo::{StoreError, Table, Tables, b, classify, get_item, n, s};
use crate::error::ApiError;

/// The request header.
pub const HEADER: &str = "idempotency-key";
/// The response header that marks a replay.
pub const REPLAYED: &str = "idempotent-replayed";
/// How long a key stays the tenant's.
pub const WINDOW_SECS: i64 = 24 * 60 * 60;
/// How long a claim holds without an answer (the functions time out after 10 s).
pub const LEASE_MS: i64 = 30_000;
/// The longest key.
pub const MAX_KEY_LEN: usize = 255;
/// Request bodies are read whole to fingerprint them; no route accepts more.
const MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;
/// A stored answer is compressed; up to this size it sits in the key's item, larger
/// ones are split into parts (items of their own beside it, expiring with it), so that
/// answers of any size are kept without nearing DynamoDB's 400 KB item limit.
const INLINE_BODY_MAX: usize = 300 * 1024;
/// The size of one part of a large stored answer.
const PART_SIZE: usize = 350 * 1024;
/// The largest answer kept: far beyond any POST answer of Cairn's (an execution with
/// 256 KiB of input and of output is the largest), and within Lambda's 6 MB.
const MAX_STORED_BODY: usize = 6 * 1024 * 1024;
/// The answer headers a replay repeats.
const KEPT_HEADERS: [HeaderName; 3] = [header::CONTENT_TYPE, header::LOCATION, header::ETAG];

/// A response extension naming a top-level field of the JSON answer that holds a
/// secret (a new API key): the answer kept for replays has it as `null`, so a secret is
/// never stored, and a replay says it was shown once.
#[derive(Debug, Clone, Copy)]
pub struct Secret(pub &'static str);

/// `body` with the JSON field `field` set to null (unchanged when it is not a JSON
/// object).
fn without_secret(body: &[u8], field: &str) -> Vec<u8> {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(serde_json::Value::Object(mut map)) => {
            if let Some(value) = map.get_mut(field) {
                *value = serde_json::Value::Null;
            }
            serde_json::to_vec(&map).unwrap_or_default()
        }
        _ => body.to_vec(),
    }
}

/// The request's `Idempotency-Key`, if it has one.
///
/// # Errors
/// 422 naming `Idempotency-Key` when it is empty, longer than [`MAX_KEY_LEN`] or not
/// visible ASCII.
pub fn key_of(headers: &HeaderMap) -> Result<Option<String>, ApiError> {
    let Some(value) = headers.get(HEADER) else { return Ok(None) };
    value
        .to_str()
        .ok()
        .filter(|k| (1..=MAX_KEY_LEN).contains(&k.len()) && k.bytes().all(|c| c.is_ascii_graphic() || c == b' '))
        .map(|k| Some(k.to_owned()))
        .ok_or_else(|| ApiError::field("Idempotency-Key", "must be 1 to 255 visible ASCII characters"))
}

/// The middleware (inside authentication, which puts the [`TenantId`] in the request).
pub async fn layer(State(auth): State<AuthState>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let key = match key_of(request.headers()) {
        Ok(Some(key)) => key,
        Ok(None) => return next.run(request).await,
        Err(error) => return error.into_response(),
    };
    let Some(tenant) = request.extensions().get::<TenantId>().cloned() else {
        return next.run(request).await;
    };
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_REQUEST_BYTES).await else {
        return ApiError::PayloadTooLarge(format!("the body is over {MAX_REQUEST_BYTES} bytes")).into_response();
    };
    let fingerprint = fingerprint(&parts.method, &parts.uri, &bytes);
    let records = Records { client: &auth.client, tables: &auth.tables, tenant: &tenant, key: &key };
    let claim = match records.claim(&fingerprint).await {
        Ok(Ok(claim)) => claim,
        Ok(Err(answer)) => return answer,
        Err(error) => return ApiError::from(error).into_response(),
    };
    let response = next.run(Request::from_parts(parts, Body::from(bytes))).await;
    if !response.status().is_success() {
        records.release(&claim).await;
        return response;
    }
    let (parts, body) = response.into_parts();
    let Ok(body) = axum::body::to_bytes(body, usize::MAX).await else {
        records.release(&claim).await;
        return ApiError::internal("the answer could not be read").into_response();
    };
    if body.len() > MAX_STORED_BODY {
        tracing::error!(bytes = body.len(), "an answer too large to keep for its Idempotency-Key");
        records.release(&claim).await;
    } else if let Err(error) = match parts.extensions.get::<Secret>() {
        Some(Secret(field)) => {
            records.complete(&claim, parts.status, &parts.headers, &without_secret(&body, field)).await
        }
        None => records.complete(&claim, parts.status, &parts.headers, &body).await,
    } {
        // The work is done; the claim lapses and a retry would run again.
        tracing::warn!(error = %error, "the answer of an Idempotency-Key was not stored");
    }
    Response::from_parts(parts, Body::from(body))
}

fn fingerprint(method: &Method, uri: &http::Uri, body: &[u8]) -> String {
    let mut hash = Sha256::new();
    hash.update(method.as_str().as_bytes());
    hash.update(b"\n");
    hash.update(uri.path_and_query().map_or("", |p| p.as_str()).as_bytes());
    hash.update(b"\n");
    hash.update(body);
    hex::encode(hash.finalize())
}

/// A claim this request holds.
struct Claim {
    token: String,
}

/// One tenant's key.
struct Records<'a> {
    client: &'a Client,
    tables: &'a Tables,
    tenant: &'a TenantId,
    key: &'a str,
}

impl Records<'_> {
    fn table(&self) -> &str {
        self.tables.name(Table::Idempotency)
    }

    /// Claims the key for this request, or the answer to give instead (a replay, 409
    /// or 422).
    async fn claim(&self, fingerprint: &str) -> Result<Result<Claim, Response>, StoreError> {
        for _ in 0..3 {
            let now = chrono::Utc::now();
            let token = uuid::Uuid::now_v7().to_string();
            let put = self
                .client
                .put_item()
                .table_name(self.table())
                .item("tenant_id", s(self.tenant.as_str()))
                .item("idempotency_key", s(self.key))
                .item("fingerprint", s(fingerprint))
                .item("state", s("in_progress"))
                .item("claim", s(&token))
                .item("lease_until", n(now.timestamp_millis() + LEASE_MS))
                .item("expires_at", n(now.timestamp() + WINDOW_SECS))
                .item("created_at", s(crate::time::format(now)))
                .condition_expression(
                    "attribute_not_exists(idempotency_key) OR expires_at < :now \
                     OR (#state = :in_progress AND lease_until < :now_ms)",
                )
                .expression_attribute_names("#state", "state")
                .expression_attribute_values(":now", n(now.timestamp()))
                .expression_attribute_values(":now_ms", n(now.timestamp_millis()))
                .expression_attribute_values(":in_progress", s("in_progress"));
            match put.send().await.map_err(classify) {
                Ok(_) => return Ok(Ok(Claim { token })),
                Err(StoreError::ConditionFailed { .. }) => {}
                Err(other) => return Err(other),
            }
            let held = get_item(
                self.client,
                self.table(),
                &[("tenant_id", self.tenant.as_str()), ("idempotency_key", self.key)],
            )
            .await?;
            // Gone (released) since the claim failed: try again.
            let Some(held) = held else { continue };
            let text = |name: &str| held.get(name).and_then(|v| v.as_s().ok()).map_or("", String::as_str);
            if text("fingerprint") != fingerprint {
                return Ok(Err(ApiError::IdempotencyKeyReused.into_response()));
            }
            if text("state") == "done" {
                let body = self.stored_body(&held).await?;
                return Ok(Err(replay(&held, body)));
            }
            return Ok(Err(ApiError::IdempotencyInProgress.into_response()));
        }
        Err(StoreError::Conflict)
    }

    /// The key of part `index` of a large answer: a newline cannot occur in a client's
    /// key, so parts never meet one.
    fn part_key(&self, index: usize) -> String {
        format!("{}\n{index}", self.key)
    }

    /// Stores the answer under the claim: compressed, in the key's item or, when large,
    /// in parts written first (a part without its record expires with the key's TTL).
    async fn complete(
        &self,
        claim: &Claim,
        status: StatusCode,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<(), StoreError> {
        let kept: std::collections::HashMap<String, AttributeValue> = KEPT_HEADERS
            .iter()
            .filter_map(|name| headers.get(name).and_then(|v| v.to_str().ok()).map(|v| (name.to_string(), s(v))))
            .collect();
        let mut update = self
            .client
            .update_item()
            .table_name(self.table())
            .key("tenant_id", s(self.tenant.as_str()))
            .key("idempotency_key", s(self.key))
            .condition_expression("#claim = :claim")
            .expression_attribute_names("#claim", "claim")
            .expression_attribute_names("#state", "state")
            .expression_attribute_names("#headers", "headers")
            .expression_attribute_values(":claim", s(&claim.token))
            .expression_attribute_values(":done", s("done"))
            .expression_attribute_values(":status", n(status.as_u16()))
            .expression_attribute_values(":headers", AttributeValue::M(kept));
        let packed = crate::blob::compress(body);
        update = if body.is_empty() {
            update.update_expression("SET #state = :done, #status = :status, #headers = :headers")
        } else if packed.len() <= INLINE_BODY_MAX {
            update
                .update_expression("SET #state = :done, #status = :status, #headers = :headers, #packed = :packed")
                .expression_attribute_names("#packed", "body_deflate")
                .expression_attribute_values(":packed", b(packed))
        } else {
            let expires_at = chrono::Utc::now().timestamp() + WINDOW_SECS;
            let chunks: Vec<&[u8]> = packed.chunks(PART_SIZE).collect();
            for (index, chunk) in chunks.iter().enumerate() {
                self.client
                    .put_item()
                    .table_name(self.table())
                    .item("tenant_id", s(self.tenant.as_str()))
                    .item("idempotency_key", s(self.part_key(index)))
                    .item("data", b(chunk.to_vec()))
                    .item("expires_at", n(expires_at))
                    .send()
                    .await
                    .map_err(classify)?;
            }
            update
                .update_expression("SET #state = :done, #status = :status, #headers = :headers, #parts = :parts")
                .expression_attribute_names("#parts", "body_parts")
                .expression_attribute_values(":parts", n(chunks.len()))
        };
        update.expression_attribute_names("#status", "status").send().await.map_err(classify)?;
        Ok(())
    }

    /// The answer kept in `held`: raw (as stored before answers were compressed),
    /// compressed, or in parts.
    async fn stored_body(&self, held: &crate::dynamo::Item) -> Result<Vec<u8>, StoreError> {
        let corrupt = || StoreError::Corrupt(format!("the stored answer of Idempotency-Key {:?}", self.key));
        let bytes = |item: &crate::dynamo::Item, name: &str| {
            item.get(name).and_then(|v| v.as_b().ok()).map(|b| b.as_ref().to_vec())
        };
        if let Some(raw) = bytes(held, "body") {
            return Ok(raw);
        }
        let packed = if let Some(packed) = bytes(held, "body_deflate") {
            packed
        } else if let Some(count) =
            held.get("body_parts").and_then(|v| v.as_n().ok()).and_then(|v| v.parse::<usize>().ok())
        {
            let mut packed = Vec::new();
            for index in 0..count {
                let key = self.part_key(index);
                let part = get_item(
                    self.client,
                    self.table(),
                    &[("tenant_id", self.tenant.as_str()), ("idempotency_key", &key)],
                )
                .await?;
                packed.extend(part.as_ref().and_then(|p| bytes(p, "data")).ok_or_else(corrupt)?);
            }
            packed
        } else {
            return Ok(Vec::new());
        };
        crate::blob::decompress(&packed, MAX_STORED_BODY).map_err(|_| corrupt())
    }

    /// Gives the key back after a failed request (if the claim is still this one's).
    async fn release(&self, claim: &Claim) {
        let deleted = self
            .client
            .delete_item()
            .table_name(self.table())
            .key("tenant_id", s(self.tenant.as_str()))
            .key("idempotency_key", s(self.key))
            .condition_expression("#claim = :claim")
            .expression_attribute_names("#claim", "claim")
            .expression_attribute_values(":claim", s(&claim.token))
            .send()
            .await;
        if let Err(error) = deleted {
            // The claim lapses after its lease instead.
            tracing::warn!(error = %classify(error), "an Idempotency-Key claim was not released");
        }
    }
}

/// The stored answer again, marked as a replay.
fn replay(held: &crate::dynamo::Item, body: Vec<u8>) -> Response {
    let status = held
        .get("status")
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse::<u16>().ok())
        .and_then(|v| StatusCode::from_u16(v).ok())
        .unwrap_or(StatusCode::OK);
    let mut response = (status, body).into_response();
    response.headers_mut().remove(header::CONTENT_TYPE);
    if let Some(headers) = held.get("headers").and_then(|v| v.as_m().ok()) {
        for (name, value) in headers {
            let parsed = (HeaderName::from_bytes(name.as_bytes()), value.as_s().map(|v| HeaderValue::from_str(v)));
            if let (Ok(name), Ok(Ok(value))) = parsed {
                response.headers_mut().insert(name, value);
            }
        }
    }
    response.headers_mut().insert(REPLAYED, HeaderValue::from_static("true"));
    response
}
