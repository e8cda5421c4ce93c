//! `/settings/retention`: how long the tenant's ended executions and their checkpoints
//! are kept (`domain::retention`). Reading needs `executions:read`, changing
//! `executions:write`: the settings are the executions'.

use axum::extract::State;
use axum::response::Response;
use serde::Serialize;
use shared::body::{JsonBody, WireEnum};
use shared::{ApiError, TenantId};

use domain::retention::{Standing, max_days};

use crate::AppState;
use crate::api::ok;

/// The settings on the wire, with what the plan makes of them.
#[derive(Debug, Serialize)]
struct RetentionBody {
    object: &'static str,
    executions_days: Option<u32>,
    checkpoints: &'static str,
    checkpoints_days: Option<u32>,
    plan: Option<&'static str>,
    max_executions_days: u32,
    effective_executions_days: u32,
    updated_at: Option<String>,
}

impl From<&Standing> for RetentionBody {
    fn from(Standing { retention, plan, .. }: &Standing) -> Self {
        Self {
            object: "retention",
            executions_days: retention.executions_days,
            checkpoints: retention.checkpoints.wire(),
            checkpoints_days: retention.checkpoints_days,
            plan: plan.map(WireEnum::wire),
            max_executions_days: max_days(*plan),
            effective_executions_days: retention.effective_days(*plan),
            updated_at: retention.updated_at.map(shared::time::format),
        }
    }
}

/// `GET /settings/retention`
pub async fn get(State(state): State<AppState>, tenant: TenantId) -> Result<Response, ApiError> {
    ok(&RetentionBody::from(&state.runs.retention(&tenant).await?))
}

/// `PUT /settings/retention`: replaces the settings (a field left out takes its
/// default); they apply to executions that end from now on.
pub async fn put(
    State(state): State<AppState>,
    tenant: TenantId,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let standing = state.runs.retention(&tenant).await?;
    let mut errors = Vec::new();
    let Some(mut retention) = domain::retention::read(body, "", standing.plan, &mut errors) else {
        return Err(ApiError::Validation(errors));
    };
    retention.updated_at = Some(state.clock.now());
    state.runs.set_retention(&tenant, &retention).await?;
    ok(&RetentionBody::from(&Standing { retention, ..standing }))
}
