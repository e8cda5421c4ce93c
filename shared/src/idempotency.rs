//! `Idempotency-Key` on every authenticated POST, for every function alike.
//!
//! A key is the tenant's for 24 hours. The first request with it claims it with a
//! conditional write (table `idempotency`, key `tenant_id` + `idempotency_key`, TTL on
//! `expires_at`) together with the request's fingerprint (SHA-256 of method, path, query
//! and body). The claim joins the request's first write transaction (this module is a
//! [`WriteGate`] between the handler and the edge's gate), with the answer when the
//! handler announced it before the commit ([`announce`]); before an effect
//! outside DynamoDB (Stripe) the key is claimed on its own. A request that writes nothing
//! and fails is answered from an earlier request's record when there is one. Then:
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
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::types::{Put, TransactWriteItem};

use crate::dynamo::{Refusal, StoreError, Table, Tables, WriteGate, b, classify, get_item, n, s};
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

/// The middleware (inside authentication, which puts the [`TenantId`] in the request
/// and the edge's write gate around it).
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
    let pending = Arc::new(Pending {
        auth,
        tenant,
        key,
        fingerprint,
        outer: crate::dynamo::current_gate(),
        state: Mutex::new(ClaimState::default()),
    });
    let work = next.run(Request::from_parts(parts, Body::from(bytes)));
    let response = crate::dynamo::gated(pending.clone(), PENDING.scope(pending.clone(), work)).await;
    pending.finish(response).await
}

tokio::task_local! {
    static PENDING: Arc<Pending>;
}

/// An answer a handler knows before its write commits (its ids are made by Cairn): with
/// an `Idempotency-Key`, it is stored in the write's own transaction, beside the key's
/// record, so the request needs no round trip after its write.
#[derive(Debug, Clone)]
pub struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: bytes::Bytes,
}

impl Answer {
    /// `value` as a JSON answer with `status`.
    ///
    /// # Errors
    /// 500 if it cannot be serialized.
    pub fn json<T: serde::Serialize>(status: StatusCode, value: &T) -> Result<Self, ApiError> {
        // Into a `Vec`, as every other JSON Cairn writes (stored items, problems, the
        // Lambda response): a function that answers only through `Answer` carries one
        // instance of serde_json's writer, not also the one axum's `Json` uses.
        let body = serde_json::to_vec(value).map_err(ApiError::internal)?;
        let mut headers = HeaderMap::new();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        Ok(Self { status, headers, body: body.into() })
    }

    /// With `ETag: "<version>"`.
    #[must_use]
    pub fn tagged(mut self, version: u64) -> Self {
        if let Ok(etag) = HeaderValue::from_str(&format!("\"{version}\"")) {
            self.headers.insert(header::ETAG, etag);
        }
        self
    }

    /// With `Location: /api/v1/<path>`.
    ///
    /// # Errors
    /// 500 if the path cannot be a header value.
    pub fn located(mut self, path: &str) -> Result<Self, ApiError> {
        let location = HeaderValue::from_str(&format!("{}/{path}", crate::BASE_PATH)).map_err(ApiError::internal)?;
        self.headers.insert(header::LOCATION, location);
        Ok(self)
    }

    /// The answer.
    #[must_use]
    pub fn into_response(self) -> Response {
        let mut response = (self.status, self.body).into_response();
        *response.headers_mut() = self.headers;
        response
    }
}

/// Tells the request's `Idempotency-Key`, if it has one, that `render()` is the answer
/// if the next write commits, so that the key's record stores it in that write's own
/// transaction: call it just before the commit (a domain write's `before_commit`), and
/// answer with the same [`Answer`] once it has. Without a key, `render` is not called.
pub fn announce(render: impl FnOnce() -> Result<Answer, ApiError>) {
    if PENDING.try_with(|_| ()).is_ok()
        && let Ok(answer) = render()
    {
        let _ = PENDING.try_with(|pending| pending.announce(answer));
    }
}

/// Where a request's claim of its key stands.
#[derive(Debug, Default)]
struct ClaimState {
    /// The answer the handler announced for its next write.
    announced: Option<Answer>,
    /// The record added to the transaction in flight: its claim token, whether it holds
    /// the answer, and how many operations the edge's gate added before it.
    in_flight: Option<(String, bool, usize)>,
    claim: Claimed,
}

#[derive(Debug, Default, Clone, PartialEq, Eq)]
enum Claimed {
    /// Not claimed (nothing written yet).
    #[default]
    No,
    /// Claimed by this request; `answered` when its answer is stored with the claim.
    Yes { token: String, answered: bool },
    /// Held by an earlier request: nothing of this one was written.
    Held,
}

/// One request's `Idempotency-Key`, claimed inside its first write: the key's record
/// joins the first transaction (with the answer when the handler announced it), so a
/// request that is a retry of an answered one writes nothing and is answered with the
/// stored answer. It passes everything on to the edge's gate (`outer`) too.
#[derive(Debug)]
struct Pending {
    auth: AuthState,
    tenant: TenantId,
    key: String,
    fingerprint: String,
    outer: Option<Arc<dyn WriteGate>>,
    state: Mutex<ClaimState>,
}

impl Pending {
    fn records(&self) -> Records<'_> {
        Records { client: &self.auth.client, tables: &self.auth.tables, tenant: &self.tenant, key: &self.key }
    }

    fn claimed(&self) -> Claimed {
        self.state.lock().map_or(Claimed::No, |state| state.claim.clone())
    }

    fn set_claim(&self, claim: Claimed) {
        if let Ok(mut state) = self.state.lock() {
            state.claim = claim;
        }
    }

    fn announce(&self, answer: Answer) {
        if let Ok(mut state) = self.state.lock() {
            state.announced = Some(answer);
        }
    }

    /// Claims the key now, on its own (before an effect outside DynamoDB, or when the
    /// transaction has no room for the record).
    async fn claim_now(&self) -> Result<(), StoreError> {
        match self.records().claim(&self.fingerprint).await? {
            Ok(claim) => {
                self.set_claim(Claimed::Yes { token: claim.token, answered: false });
                Ok(())
            }
            Err(_) => {
                self.set_claim(Claimed::Held);
                Err(StoreError::Refused(Refusal::IdempotencyHeld))
            }
        }
    }

    async fn admit(&self, items: &[TransactWriteItem]) -> Result<Vec<TransactWriteItem>, StoreError> {
        let claimed = self.claimed();
        if let Claimed::Held = claimed {
            return Err(StoreError::Refused(Refusal::IdempotencyHeld));
        }
        // Only this transaction's record may be settled by its outcome.
        if let Ok(mut state) = self.state.lock() {
            state.in_flight = None;
        }
        let mut added = match &self.outer {
            Some(outer) => outer.admit(items).await?,
            None => Vec::new(),
        };
        if let Claimed::Yes { .. } = claimed {
            return Ok(added);
        }
        let announced = self.state.lock().ok().and_then(|state| state.announced.clone());
        let token = uuid::Uuid::now_v7().to_string();
        let fits = |record: &TransactWriteItem| crate::dynamo::has_room_for(items.iter().chain(&added), record);
        let record = |answer: Option<&Answer>| {
            let put = self.records().record(&self.fingerprint, &token, answer)?;
            Ok::<_, StoreError>(TransactWriteItem::builder().put(put).build())
        };
        let with_answer = announced.as_ref().map(|answer| record(Some(answer))).transpose()?;
        let (record, answered) = match with_answer {
            Some(with_answer) if fits(&with_answer) => (with_answer, true),
            _ => (record(None)?, false),
        };
        if !fits(&record) {
            self.claim_now().await?;
            return Ok(added);
        }
        if let Ok(mut state) = self.state.lock() {
            state.in_flight = Some((token, answered, added.len()));
        }
        added.push(record);
        Ok(added)
    }

    fn settle(&self, committed: bool, failed: Option<usize>) -> Option<StoreError> {
        // An announced answer holds for the next write only: one that did not commit
        // (a race the handler retries, or gives up on) leaves no answer behind.
        let in_flight = self.state.lock().ok().and_then(|mut state| {
            if !committed {
                state.announced = None;
            }
            state.in_flight.take()
        });
        let outer_added = in_flight.as_ref().map_or(usize::MAX, |(_, _, outer)| *outer);
        if let Some(index) = failed
            && index == outer_added
        {
            self.set_claim(Claimed::Held);
            return Some(StoreError::Refused(Refusal::IdempotencyHeld));
        }
        if committed && let Some((token, answered, _)) = in_flight {
            self.set_claim(Claimed::Yes { token, answered });
        }
        self.outer.as_ref().and_then(|outer| outer.settle(committed, failed))
    }

    async fn hold(&self) -> Result<(), StoreError> {
        if let Some(outer) = &self.outer {
            outer.hold().await?;
        }
        match self.claimed() {
            Claimed::No => self.claim_now().await,
            Claimed::Yes { .. } => Ok(()),
            Claimed::Held => Err(StoreError::Refused(Refusal::IdempotencyHeld)),
        }
    }

    /// The answer to give once the handler has answered `response`.
    async fn finish(&self, response: Response) -> Response {
        let records = self.records();
        match self.claimed() {
            Claimed::Held => self.held_answer().await.unwrap_or(response),
            Claimed::Yes { token, answered } => {
                let claim = Claim { token };
                if !response.status().is_success() {
                    records.release(&claim).await;
                    return response;
                }
                if answered {
                    return response;
                }
                self.complete(&claim, response).await
            }
            Claimed::No if response.status().is_success() => {
                // Answered without writing: keep the answer as any other.
                match records.claim(&self.fingerprint).await {
                    Ok(Ok(claim)) => self.complete(&claim, response).await,
                    Ok(Err(answer)) => answer,
                    Err(error) => {
                        tracing::warn!(error = %error, "an answer was not kept for its Idempotency-Key");
                        response
                    }
                }
            }
            // Failed without writing: a retry of an answered request fails its checks
            // (the execution is no longer running, say); it gets the stored answer.
            Claimed::No => self.held_answer().await.unwrap_or(response),
        }
    }

    /// What the key's record says to answer, when an earlier request holds it.
    async fn held_answer(&self) -> Option<Response> {
        match self.records().held(&self.fingerprint).await {
            Ok(answer) => answer,
            Err(error) => Some(ApiError::from(error).into_response()),
        }
    }

    /// Stores a successful answer under `claim` and gives it.
    async fn complete(&self, claim: &Claim, response: Response) -> Response {
        let records = self.records();
        let (parts, body) = response.into_parts();
        let Ok(body) = axum::body::to_bytes(body, usize::MAX).await else {
            records.release(claim).await;
            return ApiError::internal("the answer could not be read").into_response();
        };
        if body.len() > MAX_STORED_BODY {
            tracing::error!(bytes = body.len(), "an answer too large to keep for its Idempotency-Key");
            records.release(claim).await;
        } else if let Err(error) = match parts.extensions.get::<Secret>() {
            Some(Secret(field)) => {
                records.complete(claim, parts.status, &parts.headers, &without_secret(&body, field)).await
            }
            None => records.complete(claim, parts.status, &parts.headers, &body).await,
        } {
            // The work is done; the claim lapses and a retry would run again.
            tracing::warn!(error = %error, "the answer of an Idempotency-Key was not stored");
        }
        Response::from_parts(parts, Body::from(body))
    }
}

impl WriteGate for Pending {
    fn admit<'a>(
        &'a self,
        items: &'a [TransactWriteItem],
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<TransactWriteItem>, StoreError>> + Send + 'a>> {
        Box::pin(Pending::admit(self, items))
    }

    fn settle(&self, committed: bool, failed: Option<usize>) -> Option<StoreError> {
        Pending::settle(self, committed, failed)
    }

    fn hold(&self) -> std::pin::Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send + '_>> {
        Box::pin(Pending::hold(self))
    }

    fn carry<'a>(&'a self, table: &'a str, keys: &'a [crate::dynamo::Item]) -> Option<crate::dynamo::Read<'a>> {
        self.outer.as_ref().and_then(|outer| outer.carry(table, keys))
    }
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

    /// The condition under which a record may be written: the key is free, expired, or
    /// held by a claim whose lease lapsed.
    const FREE: &'static str = "attribute_not_exists(idempotency_key) OR expires_at < :now \
         OR (#state = :in_progress AND lease_until < :now_ms)";

    /// The key's record for a write's transaction: a claim with `token`, holding the
    /// answer when it is known (then already `done`).
    fn record(&self, fingerprint: &str, token: &str, answer: Option<&Answer>) -> Result<Put, StoreError> {
        let now = chrono::Utc::now();
        let mut put = Put::builder()
            .table_name(self.table())
            .item("tenant_id", s(self.tenant.as_str()))
            .item("idempotency_key", s(self.key))
            .item("fingerprint", s(fingerprint))
            .item("state", s("in_progress"))
            .item("claim", s(token))
            .item("lease_until", n(now.timestamp_millis() + LEASE_MS))
            .item("expires_at", n(now.timestamp() + WINDOW_SECS))
            .item("created_at", s(crate::time::format(now)))
            .condition_expression(Self::FREE)
            .expression_attribute_names("#state", "state")
            .expression_attribute_values(":now", n(now.timestamp()))
            .expression_attribute_values(":now_ms", n(now.timestamp_millis()))
            .expression_attribute_values(":in_progress", s("in_progress"));
        if let Some(answer) = answer {
            put = put
                .item("state", s("done"))
                .item("status", n(answer.status.as_u16()))
                .item("headers", AttributeValue::M(kept_headers(&answer.headers)));
            if !answer.body.is_empty() {
                put = put.item("body_deflate", b(crate::blob::compress(&answer.body)));
            }
        }
        crate::dynamo::built(put.build())
    }

    /// What an earlier request's record of the key says to answer: its stored answer
    /// (a replay), 422 for another request, 409 while it runs; `None` when the key is
    /// free.
    async fn held(&self, fingerprint: &str) -> Result<Option<Response>, StoreError> {
        let held =
            get_item(self.client, self.table(), &[("tenant_id", self.tenant.as_str()), ("idempotency_key", self.key)])
                .await?;
        let Some(held) = held else { return Ok(None) };
        let text = |name: &str| held.get(name).and_then(|v| v.as_s().ok()).map_or("", String::as_str);
        let number = |name: &str| held.get(name).and_then(|v| v.as_n().ok()).and_then(|v| v.parse::<i64>().ok());
        let now = chrono::Utc::now();
        let expired = number("expires_at").is_some_and(|expires| expires < now.timestamp());
        let lapsed =
            text("state") == "in_progress" && number("lease_until").is_some_and(|lease| lease < now.timestamp_millis());
        if expired || lapsed {
            return Ok(None);
        }
        if text("fingerprint") != fingerprint {
            return Ok(Some(ApiError::IdempotencyKeyReused.into_response()));
        }
        if text("state") == "done" {
            let body = self.stored_body(&held).await?;
            return Ok(Some(replay(&held, body)));
        }
        Ok(Some(ApiError::IdempotencyInProgress.into_response()))
    }

    /// Claims the key for this request, or the answer to give instead (a replay, 409
    /// or 422).
    async fn claim(&self, fingerprint: &str) -> Result<Result<Claim, Response>, StoreError> {
        for _ in 0..3 {
            let token = uuid::Uuid::now_v7().to_string();
            let record = self.record(fingerprint, &token, None)?;
            let put = self
                .client
                .put_item()
                .table_name(record.table_name())
                .set_item(Some(record.item().clone()))
                .set_condition_expression(record.condition_expression().map(str::to_owned))
                .set_expression_attribute_names(record.expression_attribute_names().cloned())
                .set_expression_attribute_values(record.expression_attribute_values().cloned());
            match put.send().await.map_err(classify) {
                Ok(_) => return Ok(Ok(Claim { token })),
                Err(StoreError::ConditionFailed { .. }) => {}
                Err(other) => return Err(other),
            }
            // Free again (released, or lapsed) since the claim failed: try again.
            if let Some(answer) = self.held(fingerprint).await? {
                return Ok(Err(answer));
            }
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
        let kept = kept_headers(headers);
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

/// The answer headers a replay repeats, as stored.
fn kept_headers(headers: &HeaderMap) -> std::collections::HashMap<String, AttributeValue> {
    KEPT_HEADERS
        .iter()
        .filter_map(|name| headers.get(name).and_then(|v| v.to_str().ok()).map(|v| (name.to_string(), s(v))))
        .collect()
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
