//! `POST /account/deletion`: the tenant asks for its own deletion (the dashboard's
//! settings page, behind a typed confirmation).

use axum::Json;
use axum::extract::State;
use domain::erasure::{CONFIRMATION, Requested};
use http::StatusCode;
use serde::Serialize;
use shared::body::{Fields, JsonBody};
use shared::{ApiError, TenantId};

use crate::AppState;

/// The answer: the deletion as asked for.
#[derive(Debug, Serialize)]
pub struct DeletionBody {
    object: &'static str,
    status: &'static str,
    requested_at: String,
    keys_revoked: u64,
}

impl From<Requested> for DeletionBody {
    fn from(r: Requested) -> Self {
        Self {
            object: "account_deletion",
            status: "requested",
            requested_at: r.requested_at,
            keys_revoked: r.keys_revoked,
        }
    }
}

/// `POST /account/deletion` with `{"confirm": "delete my account"}`: 202. Every key of
/// the tenant is revoked before the answer (this one included: it is the last request
/// it makes); the janitor deletes every item of the tenant within minutes. A full key
/// only; 409 with a live subscription (cancel it first) or a deletion already asked for.
pub async fn request_deletion(
    State(state): State<AppState>,
    tenant: TenantId,
    JsonBody(body): JsonBody,
) -> Result<(StatusCode, Json<DeletionBody>), ApiError> {
    let mut f = Fields::new(body)?;
    f.required("confirm", |v| match v.as_str() {
        Some(CONFIRMATION) => Ok(()),
        _ => Err(format!("must be exactly {CONFIRMATION:?}: every record of the account is deleted for good")),
    });
    f.finish()?;
    let requested = state.erasures.request(&tenant, state.clock.now()).await?;
    Ok((StatusCode::ACCEPTED, Json(DeletionBody::from(requested))))
}
