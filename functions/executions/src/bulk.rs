//! The bulk endpoints (`/executions/bulk`): one action on every execution a filter
//! matches, as a job run in rounds by the jobs function (`domain::runs::bulk`).

use std::collections::BTreeMap;

use axum::extract::State;
use axum::response::Response;
use http::StatusCode;
use serde::Serialize;
use serde_json::{Map, Value};
use shared::body::{Fields, JsonBody, WireEnum, boolean, one_of, text};
use shared::error::FieldError;
use shared::idempotency::{self, Answer};
use shared::ids::{BulkJobId, FailureGroupId, PathId, WorkflowId};
use shared::pagination::PageRequest;
use shared::query::Query;
use shared::{ApiError, TenantId};

use domain::runs::bulk::model::{BulkAction, BulkFilter, BulkJob};
use domain::runs::executions::model::ExecutionStatus;

use crate::AppState;
use domain::views::ExecutionSummary;

/// Executions a dry run shows.
const DRY_RUN_SHOWN: usize = 20;
/// Default `page_size` of the list of jobs.
const DEFAULT_PAGE_SIZE: u32 = 20;
/// Longest `error_type` a filter names (an error's type is at most this long).
const ERROR_TYPE_MAX: usize = 255;
/// Most tags a filter names.
const TAGS_MAX: usize = 16;

/// A job on the wire.
#[derive(Debug, Serialize)]
pub struct JobBody {
    id: String,
    object: &'static str,
    action: &'static str,
    filter: Map<String, Value>,
    status: &'static str,
    matched: u64,
    done: u64,
    skipped: u64,
    skipped_by_reason: BTreeMap<String, u64>,
    failed: u64,
    failed_by_reason: BTreeMap<String, u64>,
    credits_needed: i64,
    error: Option<String>,
    created_at: String,
    updated_at: String,
    ended_at: Option<String>,
}

impl From<&BulkJob> for JobBody {
    fn from(job: &BulkJob) -> Self {
        Self {
            id: job.id.to_string(),
            object: "bulk_job",
            action: job.action.wire(),
            filter: filter_body(&job.filter),
            status: job.status.wire(),
            matched: job.matched,
            done: job.tally.done,
            skipped: job.tally.skipped.values().sum(),
            skipped_by_reason: job.tally.skipped.clone(),
            failed: job.tally.failed.values().sum(),
            failed_by_reason: job.tally.failed.clone(),
            credits_needed: job.credits_needed,
            error: job.error.clone(),
            created_at: shared::time::format(job.created_at),
            updated_at: shared::time::format(job.updated_at),
            ended_at: job.ended_at.map(shared::time::format),
        }
    }
}

/// The filter as a client would send it (only what it names).
fn filter_body(f: &BulkFilter) -> Map<String, Value> {
    let mut body = Map::new();
    let mut put = |name: &str, value: Option<String>| {
        if let Some(value) = value {
            body.insert(name.to_owned(), Value::String(value));
        }
    };
    put("status", f.status.map(|s| s.wire().to_owned()));
    put("workflow_id", f.workflow_id.as_ref().map(ToString::to_string));
    put("failure_group", f.failure_group.as_ref().map(ToString::to_string));
    put("error_type", f.error_type.clone());
    put("created_after", f.created_after.map(shared::time::format));
    put("created_before", f.created_before.map(shared::time::format));
    if !f.tags.is_empty() {
        body.insert("tag".to_owned(), f.tags.iter().map(|(k, v)| Value::String(format!("{k}:{v}"))).collect());
    }
    body
}

/// A filter's ids as sent: checked for form after every field is (a malformed id is an
/// unknown one: 404).
struct SentFilter {
    filter: BulkFilter,
    workflow: Option<String>,
    group: Option<String>,
}

/// Reads `filter`, naming each problem `filter.<field>`.
fn read_filter(value: Value, errors: &mut Vec<FieldError>) -> Option<SentFilter> {
    let Ok(mut f) = Fields::new(value) else {
        errors.push(FieldError::new("filter", "must be a JSON object"));
        return None;
    };
    if f.is_empty() {
        errors.push(FieldError::new("filter", "must name at least one condition (status, say)"));
    }
    let status = f.optional("status", one_of(ExecutionStatus::ALL));
    let workflow = f.optional("workflow_id", text(1, 100));
    let tags = f.optional("tag", read_tags);
    let group = f.optional("failure_group", text(1, 100));
    let error_type = f.optional("error_type", text(1, ERROR_TYPE_MAX));
    let created_after = f.optional("created_after", timestamp);
    let created_before = f.optional("created_before", timestamp);
    if let Err(ApiError::Validation(found)) = f.finish() {
        errors.extend(found.into_iter().map(|e| FieldError::new(format!("filter.{}", e.field), e.message)));
    }
    let filter = BulkFilter {
        status,
        workflow_id: None,
        tags: tags.unwrap_or_default(),
        failure_group: None,
        error_type,
        created_after,
        created_before,
    };
    Some(SentFilter { filter, workflow, group })
}

fn timestamp(value: &Value) -> Result<chrono::DateTime<chrono::Utc>, String> {
    shared::time::parse(value.as_str().ok_or("must be an RFC 3339 timestamp")?)
}

/// `tag`: one `key:value`, or a list of them with distinct keys.
fn read_tags(value: &Value) -> Result<Vec<(String, String)>, String> {
    let raw: Vec<&str> = match value {
        Value::String(one) => vec![one.as_str()],
        Value::Array(many) if many.len() <= TAGS_MAX => {
            many.iter().map(|v| v.as_str().ok_or("must be key:value strings")).collect::<Result<_, _>>()?
        }
        Value::Array(_) => return Err(format!("must name at most {TAGS_MAX} tags")),
        _ => return Err("must be a key:value string or a list of them".to_owned()),
    };
    let tags = raw.into_iter().map(shared::tags::parse_filter).collect::<Result<Vec<_>, _>>()?;
    let mut keys: Vec<&str> = tags.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort_unstable();
    if keys.windows(2).any(|pair| pair[0] == pair[1]) {
        return Err("names a tag key twice".to_owned());
    }
    Ok(tags)
}

/// `POST /executions/bulk`
pub async fn create(
    State(state): State<AppState>,
    tenant: TenantId,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let mut f = Fields::new(body)?;
    let action = f.required("action", one_of(BulkAction::ALL));
    let filter = f.required("filter", |v| Ok(v.clone()));
    let dry_run = f.optional("dry_run", boolean).unwrap_or(false);
    let mut errors = Vec::new();
    let sent = filter.and_then(|filter| read_filter(filter, &mut errors));
    errors.iter().for_each(|e| f.reject(e.field.clone(), e.message.clone()));
    f.finish()?;
    let (Some(action), Some(SentFilter { mut filter, workflow, group })) = (action, sent) else {
        return Err(ApiError::field("body", "is not a bulk request"));
    };
    if let Some(raw) = workflow {
        filter.workflow_id = Some(WorkflowId::parse(&raw).ok_or_else(|| ApiError::not_found("workflow", &raw))?);
    }
    if let Some(raw) = group {
        let id = FailureGroupId::parse(&raw).ok_or_else(|| ApiError::not_found("failure group", &raw))?;
        filter.failure_group = Some(id);
    }
    if dry_run {
        let matched = Box::pin(state.runs.bulk_matched(&tenant, &filter, DRY_RUN_SHOWN)).await?;
        let price = match action {
            BulkAction::Replay => shared::config::execution_cost_credits(),
            BulkAction::Cancel => 0,
        };
        let executions: Vec<ExecutionSummary> = matched.first.into_iter().map(ExecutionSummary::from).collect();
        let answer = serde_json::json!({
            "object": "bulk_dry_run",
            "action": action.wire(),
            "filter": filter_body(&filter),
            "matched": matched.count,
            "credits_needed": price.saturating_mul(i64::try_from(matched.count).unwrap_or(i64::MAX)),
            "executions": executions,
        });
        return Ok(Answer::json(StatusCode::OK, &answer)?.into_response());
    }
    let answer = |job: &BulkJob| {
        Answer::json(StatusCode::ACCEPTED, &JobBody::from(job))?.located(&format!("executions/bulk/{}", job.id))
    };
    let announce = |job: &BulkJob| idempotency::announce(|| answer(job));
    let job = Box::pin(state.runs.bulk_start(&tenant, action, &filter, state.clock.as_ref(), &announce)).await?;
    Ok(answer(&job)?.into_response())
}

/// `GET /executions/bulk`
pub async fn list(State(state): State<AppState>, tenant: TenantId, mut query: Query) -> Result<Response, ApiError> {
    let page = PageRequest::read(&mut query, DEFAULT_PAGE_SIZE);
    let after = shared::pagination::starting_after(&mut query);
    query.finish()?;
    let after = after.map(|raw| parse_id(&raw)).transpose()?;
    let now = state.clock.now();
    let (jobs, total) =
        Box::pin(state.runs.bulk_jobs(&tenant, after.as_ref(), (page.skip(), page.page_size as usize), now)).await?;
    let items: Vec<JobBody> = jobs.iter().map(JobBody::from).collect();
    Ok(Answer::json(StatusCode::OK, &page.respond(items, total))?.into_response())
}

fn parse_id(raw: &str) -> Result<BulkJobId, ApiError> {
    BulkJobId::parse(raw).ok_or_else(|| ApiError::not_found("bulk job", raw))
}

/// `GET /executions/bulk/{bulk_id}`
pub async fn get(State(state): State<AppState>, tenant: TenantId, PathId(raw): PathId) -> Result<Response, ApiError> {
    let job = state.runs.bulk_job(&tenant, &parse_id(&raw)?, state.clock.now()).await?;
    Ok(Answer::json(StatusCode::OK, &JobBody::from(&job))?.into_response())
}

/// `POST /executions/bulk/{bulk_id}/cancel`
pub async fn cancel(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
) -> Result<Response, ApiError> {
    let id = parse_id(&raw)?;
    let answer = |job: &BulkJob| Answer::json(StatusCode::OK, &JobBody::from(job));
    let announce = |job: &BulkJob| idempotency::announce(|| answer(job));
    let job = state.runs.bulk_cancel(&tenant, &id, state.clock.as_ref(), &announce).await?;
    Ok(answer(&job)?.into_response())
}
