//! The key endpoints.

use axum::Json;
use axum::extract::State;
use axum::response::Response;
use domain::keys::{Key, NAME_MAX, NewKey};
use http::StatusCode;
use serde::Serialize;
use serde_json::Value;
use shared::body::{Fields, JsonBody, text};
use shared::idempotency::{self, Answer};
use shared::ids::{KeyId, PathId};
use shared::query::Query;
use shared::scopes::Scopes;
use shared::{ApiError, TenantId};

use crate::AppState;

/// A key as the API shows it: never the secret (but in the answer that creates it).
#[derive(Debug, Serialize)]
pub struct KeyBody {
    id: String,
    name: Option<String>,
    prefix: String,
    created_at: String,
    revoked_at: Option<String>,
    scopes: Vec<String>,
    expires_at: Option<String>,
}

impl From<Key> for KeyBody {
    fn from(k: Key) -> Self {
        Self {
            id: k.id.to_string(),
            name: k.name,
            prefix: k.prefix,
            created_at: shared::time::format(k.created_at),
            revoked_at: k.revoked_at.map(shared::time::format),
            scopes: k.scopes.to_list(),
            expires_at: k.expires_at.map(shared::time::format),
        }
    }
}

/// The answer of `GET /keys`.
#[derive(Debug, Serialize)]
pub struct KeyList {
    items: Vec<KeyBody>,
    total: u64,
    limit: u32,
    has_more: bool,
}

/// Keys a page holds by default (every live key a tenant may have) and at most.
const LIMIT: u32 = 100;

/// `GET /keys`: the tenant's keys, newest first, revoked ones included: `limit` (1 to
/// 100, default 100) of them, after key `starting_after` when given.
pub async fn list(
    State(state): State<AppState>,
    tenant: TenantId,
    mut query: Query,
) -> Result<Json<KeyList>, ApiError> {
    let limit = query.integer("limit", LIMIT, 1, LIMIT);
    let after = shared::pagination::starting_after(&mut query);
    query.finish()?;
    let after = match after {
        Some(raw) => Some(KeyId::parse(&raw).ok_or_else(|| ApiError::not_found("key", raw.as_str()))?),
        None => None,
    };
    let (page, total) =
        tokio::try_join!(state.keys.page(&tenant, after.as_ref(), limit as usize), state.keys.count(&tenant))?;
    let items = page.items.into_iter().map(KeyBody::from).collect();
    Ok(Json(KeyList { items, total, limit, has_more: page.has_more }))
}

/// Reads `scopes`: a list of scopes ([`shared::scopes`]).
fn scopes(value: &Value) -> Result<Scopes, String> {
    let items = value.as_array().ok_or("must be an array of scopes, such as [\"executions:read\"]")?;
    let names = items.iter().map(|v| v.as_str().ok_or("each scope must be a string")).collect::<Result<Vec<_>, _>>()?;
    Scopes::parse(&names)
}

/// Reads `expires_at`: a time after now.
fn expiry(now: chrono::DateTime<chrono::Utc>) -> impl Fn(&Value) -> Result<chrono::DateTime<chrono::Utc>, String> {
    move |value| {
        let raw = value.as_str().ok_or("must be an RFC 3339 time, such as 2027-01-01T00:00:00Z")?;
        let at = chrono::DateTime::parse_from_rfc3339(raw)
            .map_err(|_| "must be an RFC 3339 time, such as 2027-01-01T00:00:00Z".to_owned())?
            .with_timezone(&chrono::Utc);
        if at <= now {
            return Err("must be in the future".to_owned());
        }
        Ok(at)
    }
}

/// `POST /keys`: 201 with the new key and its secret, which is stored nowhere (only
/// its SHA-256 is). An `Idempotency-Key` replay answers the key with `key` null.
pub async fn create(
    State(state): State<AppState>,
    tenant: TenantId,
    mine: Scopes,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let now = state.clock.now();
    let mut f = Fields::new(body)?;
    let name = f.required("name", text(1, NAME_MAX));
    let scopes = f.optional("scopes", scopes);
    let expires_at = f.optional("expires_at", expiry(now));
    // A key makes keys with at most its own scopes (absent: exactly its own).
    if let Some(asked) = &scopes
        && !mine.covers(asked)
    {
        f.reject("scopes", format!("may name only scopes this key holds: {}", mine.to_list().join(", ")));
    }
    f.finish()?;
    let new = NewKey { name, scopes: scopes.unwrap_or(mine), expires_at };
    // The answer an Idempotency-Key keeps has `key` null (a secret is never stored); it
    // is known before the write, so it is stored in the write's own transaction.
    let answer = |key: &Key, secret: Option<String>| {
        let mut body = serde_json::to_value(KeyBody::from(key.clone())).map_err(ApiError::internal)?;
        body["key"] = secret.map_or(serde_json::Value::Null, serde_json::Value::String);
        Answer::json(StatusCode::CREATED, &body)
    };
    let announce = |key: &Key| idempotency::announce(|| answer(key, None));
    let (key, secret) = state.keys.create(&tenant, new, now, &announce).await?;
    let mut response = answer(&key, Some(secret))?.into_response();
    response.extensions_mut().insert(idempotency::Secret("key"));
    Ok(response)
}

/// `DELETE /keys/{key_id}`: revokes the key (204); revoking a revoked key again is 204
/// too. The tenant's last live key: 409.
pub async fn revoke(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
) -> Result<StatusCode, ApiError> {
    let id = KeyId::parse(&raw).ok_or_else(|| ApiError::not_found("key", raw.as_str()))?;
    state.keys.revoke(&tenant, &id, state.clock.now()).await?;
    Ok(StatusCode::NO_CONTENT)
}
