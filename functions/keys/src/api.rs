//! The key endpoints.

use axum::Json;
use axum::extract::State;
use axum::response::Response;
use domain::keys::{Key, NAME_MAX};
use http::StatusCode;
use serde::Serialize;
use shared::body::{Fields, JsonBody, text};
use shared::idempotency::{self, Answer};
use shared::ids::{KeyId, PathId};
use shared::query::Query;
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
}

impl From<Key> for KeyBody {
    fn from(k: Key) -> Self {
        Self {
            id: k.id.to_string(),
            name: k.name,
            prefix: k.prefix,
            created_at: shared::time::format(k.created_at),
            revoked_at: k.revoked_at.map(shared::time::format),
        }
    }
}

/// The answer of `GET /keys`.
#[derive(Debug, Serialize)]
pub struct KeyList {
    items: Vec<KeyBody>,
    total: u64,
}

/// `GET /keys`: every key of the tenant, newest first, revoked ones included.
pub async fn list(State(state): State<AppState>, tenant: TenantId, query: Query) -> Result<Json<KeyList>, ApiError> {
    query.finish()?;
    let keys = state.keys.list(&tenant).await?;
    let total = keys.len() as u64;
    Ok(Json(KeyList { items: keys.into_iter().map(KeyBody::from).collect(), total }))
}

/// `POST /keys`: 201 with the new key and its secret, which is stored nowhere (only
/// its SHA-256 is). An `Idempotency-Key` replay answers the key with `key` null.
pub async fn create(
    State(state): State<AppState>,
    tenant: TenantId,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let mut f = Fields::new(body)?;
    let name = f.required("name", text(1, NAME_MAX));
    f.finish()?;
    // The answer an Idempotency-Key keeps has `key` null (a secret is never stored); it
    // is known before the write, so it is stored in the write's own transaction.
    let answer = |key: &Key, secret: Option<String>| {
        let mut body = serde_json::to_value(KeyBody::from(key.clone())).map_err(ApiError::internal)?;
        body["key"] = secret.map_or(serde_json::Value::Null, serde_json::Value::String);
        Answer::json(StatusCode::CREATED, &body)
    };
    let announce = |key: &Key| idempotency::announce(|| answer(key, None));
    let (key, secret) = state.keys.create(&tenant, name, state.clock.now(), &announce).await?;
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
