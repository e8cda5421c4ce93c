//! The failure endpoints: each parses its request, calls one `domain::runs` operation,
//! and answers.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use domain::runs::failures::model::{Failure, Settlement};
use domain::runs::{ListFailures, ListGroups};
use serde::Serialize;
use shared::body::WireEnum;
use shared::idempotency::{self, Answer};
use shared::ids::PathId;
use shared::ids::{FailureGroupId, FailureId};
use shared::pagination::OffsetBody;
use shared::query::Query;
use shared::{ApiError, TenantId};

use crate::AppState;
use domain::views::{FailureDetail, FailureItem, GroupBody};

/// `GET /failures`
pub async fn list(
    State(state): State<AppState>,
    tenant: TenantId,
    query: Query,
) -> Result<Json<OffsetBody<FailureItem>>, ApiError> {
    let (list, window) = ListFailures::from_query(query)?;
    let (items, total) = Box::pin(state.runs.list_failures(&tenant, &list)).await?;
    Ok(Json(window.respond(items.iter().map(FailureItem::from).collect(), total)))
}

fn parse_id(raw: &str) -> Result<FailureId, ApiError> {
    FailureId::parse(raw).ok_or_else(|| ApiError::not_found("failure", raw))
}

async fn load(state: &AppState, tenant: &TenantId, id: &FailureId) -> Result<Failure, ApiError> {
    Ok(state.runs.failure(tenant, id).await?)
}

/// `GET /failures/{failure_id}`
pub async fn get(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
) -> Result<Json<FailureDetail>, ApiError> {
    let id = parse_id(&raw)?;
    Ok(Json(load(&state, &tenant, &id).await?.into()))
}

/// Failure statistics.
#[derive(Debug, Serialize)]
pub struct Stats {
    total_failures: u64,
    open_failures: u64,
    resolved_failures: u64,
    ignored_failures: u64,
    failure_rate_last_30_days: f64,
}

/// `GET /failures/stats`: four counters and the 30 daily buckets, one batch read.
pub async fn stats(State(state): State<AppState>, tenant: TenantId) -> Result<Json<Stats>, ApiError> {
    let stats = state.runs.failure_stats(&tenant, state.clock.as_ref()).await?;
    Ok(Json(Stats {
        total_failures: stats.total,
        open_failures: stats.open,
        resolved_failures: stats.resolved,
        ignored_failures: stats.ignored,
        failure_rate_last_30_days: stats.rate_last_30_days,
    }))
}

/// The answer to resolve and ignore.
#[derive(Debug, Serialize)]
pub struct Settled {
    id: String,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    resolved_at: Option<String>,
    message: &'static str,
}

/// `POST /failures/{failure_id}/resolve`: open or ignored -> resolved; already resolved
/// answers 200 with the original `resolved_at`.
pub async fn resolve(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
) -> Result<Response, ApiError> {
    settle(&state, &tenant, &raw, Settlement::Resolve).await
}

/// `POST /failures/{failure_id}/ignore`: open -> ignored.
pub async fn ignore(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
) -> Result<Response, ApiError> {
    settle(&state, &tenant, &raw, Settlement::Ignore).await
}

/// Settles the failure and answers it; the answer is stored in the write's own
/// transaction when the request has an `Idempotency-Key`.
async fn settle(state: &AppState, tenant: &TenantId, raw: &str, settlement: Settlement) -> Result<Response, ApiError> {
    let id = parse_id(raw)?;
    let answer = |failure: &Failure| {
        let (resolved_at, message) = match settlement {
            Settlement::Resolve => (failure.resolved_at.map(shared::time::format), "Failure resolved"),
            Settlement::Ignore => (None, "Failure ignored"),
        };
        let body = Settled { id: failure.id.to_string(), status: failure.status.wire(), resolved_at, message };
        Answer::json(StatusCode::OK, &body)
    };
    let announce = |failure: &Failure| idempotency::announce(|| answer(failure));
    let settled = state.runs.settle_failure(tenant, &id, settlement, state.clock.as_ref(), &announce).await?;
    Ok(answer(&settled)?.into_response())
}

fn parse_group(raw: &str) -> Result<FailureGroupId, ApiError> {
    FailureGroupId::parse(raw).ok_or_else(|| ApiError::not_found("failure group", raw))
}

/// `GET /failures/groups`
pub async fn groups(
    State(state): State<AppState>,
    tenant: TenantId,
    query: Query,
) -> Result<Json<OffsetBody<GroupBody>>, ApiError> {
    let (list, window) = ListGroups::from_query(query)?;
    let (items, total) = state.runs.failure_groups(&tenant, &list, state.clock.as_ref()).await?;
    Ok(Json(window.respond(items.into_iter().map(GroupBody::from).collect(), total)))
}

/// `GET /failures/groups/{group_id}`
pub async fn group(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
) -> Result<Json<GroupBody>, ApiError> {
    let id = parse_group(&raw)?;
    Ok(Json(state.runs.failure_group(&tenant, &id, state.clock.as_ref()).await?.into()))
}

/// The answer to settling a group.
#[derive(Debug, Serialize)]
pub struct GroupSettledBody {
    #[serde(flatten)]
    group: GroupBody,
    settled: u64,
    remaining: bool,
}

/// `POST /failures/groups/{group_id}/resolve`: every open failure of the group resolved.
pub async fn resolve_group(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
) -> Result<Json<GroupSettledBody>, ApiError> {
    settle_group(&state, &tenant, &raw, Settlement::Resolve).await
}

/// `POST /failures/groups/{group_id}/ignore`: every open failure of the group ignored.
pub async fn ignore_group(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
) -> Result<Json<GroupSettledBody>, ApiError> {
    settle_group(&state, &tenant, &raw, Settlement::Ignore).await
}

async fn settle_group(
    state: &AppState,
    tenant: &TenantId,
    raw: &str,
    settlement: Settlement,
) -> Result<Json<GroupSettledBody>, ApiError> {
    let id = parse_group(raw)?;
    let done = state.runs.settle_group(tenant, &id, settlement, state.clock.as_ref()).await?;
    Ok(Json(GroupSettledBody { group: done.group.into(), settled: done.settled, remaining: done.remaining }))
}
