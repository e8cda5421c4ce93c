//! The execution endpoints: each parses its request, calls one `domain::runs`
//! operation, and answers.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::Serialize;
use serde_json::Value;
use shared::body::{
    Fields, JsonBody, OptionalJsonBody, Patch, WireEnum, client_key, json_object, json_value, string_map, text,
};
use shared::idempotency::{self, Answer};
use shared::ids::PathId;
use shared::ids::{CheckpointId, ExecutionId, WorkflowId};
use shared::query::Query;
use shared::series::Window;
use shared::{ApiError, TenantId};

use domain::runs::executions::model::{Action, Execution, ExecutionError};
use domain::runs::executions::store::VALUE_MAX_BYTES;
use domain::runs::{Change, Changed, Deleted, ListExecutions, NewExecution, ReplayFrom, Started};
use domain::views::{ExecutionBody, ExecutionSummary};

use crate::AppState;

/// Most metadata keys.
const METADATA_MAX_KEYS: usize = 50;
/// Largest failure `details`, as serialized JSON.
const DETAILS_MAX_BYTES: usize = 64 * 1024;
/// Longest failure message.
const MESSAGE_MAX: usize = 4096;
/// Longest cancellation reason.
const REASON_MAX: usize = 1000;

fn parse_id(raw: &str) -> Result<ExecutionId, ApiError> {
    ExecutionId::parse(raw).ok_or_else(|| ApiError::not_found("execution", raw))
}

async fn load(state: &AppState, tenant: &TenantId, id: &ExecutionId) -> Result<Execution, ApiError> {
    Ok(state.runs.load(tenant, id).await?)
}

/// An id sent in a body: not a string is 422; not of the type's form is 404 like an
/// unknown id.
fn body_id<T>(value: &Value, kind: &'static str, parse: fn(&str) -> Option<T>) -> Result<T, ApiError> {
    let raw = value.as_str().ok_or_else(|| ApiError::field(format!("{kind}_id"), "must be a string"))?;
    parse(raw).ok_or_else(|| ApiError::not_found(kind, raw))
}

/// `POST /executions`
pub async fn create(
    State(state): State<AppState>,
    tenant: TenantId,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let mut f = Fields::new(body)?;
    let workflow = f.required("workflow_id", |v| Ok(v.clone()));
    let key = f.nullable("key", client_key);
    let input = f.nullable("input", json_value(VALUE_MAX_BYTES));
    let metadata = f.optional("metadata", string_map(METADATA_MAX_KEYS));
    let tags = f.optional("tags", shared::tags::read);
    f.finish()?;
    let new = NewExecution {
        workflow_id: body_id(&workflow.unwrap_or_default(), "workflow", WorkflowId::parse)?,
        key: key.into_update().flatten(),
        input: input.into_update().flatten(),
        metadata: metadata.unwrap_or_default(),
        tags: tags.unwrap_or_default(),
    };
    // The answer is known before the write commits: with an Idempotency-Key it is
    // stored in the write's own transaction (no round trip after it).
    let answer = |status: StatusCode, execution: &Execution| {
        Answer::json(status, &ExecutionBody::from(execution.clone()))?.located(&format!("executions/{}", execution.id))
    };
    let announce = |execution: &Execution| idempotency::announce(|| answer(StatusCode::CREATED, execution));
    let (status, execution) = match state.runs.start(&tenant, &new, state.clock.as_ref(), &announce).await? {
        Started::New(e) => (StatusCode::CREATED, e),
        Started::Existing(e) => (StatusCode::OK, e),
    };
    Ok(answer(status, &execution)?.into_response())
}

/// `GET /executions`
pub async fn list(State(state): State<AppState>, tenant: TenantId, query: Query) -> Result<Response, ApiError> {
    let (list, page) = ListExecutions::from_query(query)?;
    let (items, total) = Box::pin(state.runs.list_executions(&tenant, &list)).await?;
    ok(&page.respond(items.into_iter().map(ExecutionSummary::from).collect(), total))
}

/// `GET /executions/stats`: executions made per hour or day, by their status now, and
/// failures recorded per bucket, from the span counters.
pub async fn stats(State(state): State<AppState>, tenant: TenantId, query: Query) -> Result<Response, ApiError> {
    let window = Window::from_query(query, state.clock.now())?;
    let found = state.runs.execution_stats(&tenant, &window).await?;
    let buckets: Vec<Value> = found
        .iter()
        .map(|b| {
            let mut bucket = window.bucket_fields(b.index);
            let by_status: serde_json::Map<String, Value> =
                b.by_status.iter().map(|(s, n)| (s.wire().to_owned(), (*n).into())).collect();
            bucket.extend([
                ("total".to_owned(), b.total.into()),
                ("by_status".to_owned(), by_status.into()),
                ("failures".to_owned(), b.failures.into()),
            ]);
            Value::Object(bucket)
        })
        .collect();
    let mut answer = window.answer();
    answer.insert("total".to_owned(), found.iter().map(|b| b.total).sum::<u64>().into());
    answer.insert("failures".to_owned(), found.iter().map(|b| b.failures).sum::<u64>().into());
    answer.insert("buckets".to_owned(), buckets.into());
    ok(&answer)
}

/// `GET /executions/{execution_id}`
pub async fn get(State(state): State<AppState>, tenant: TenantId, PathId(raw): PathId) -> Result<Response, ApiError> {
    let id = parse_id(&raw)?;
    ok(&ExecutionBody::from(load(&state, &tenant, &id).await?))
}

/// `value` as a 200 JSON answer. Every answer of this function is written through
/// [`Answer`], so the binary carries one JSON writer (docs/deploying.md, "Build").
pub(crate) fn ok<T: Serialize>(value: &T) -> Result<Response, ApiError> {
    Ok(Answer::json(StatusCode::OK, value)?.into_response())
}

/// `DELETE /executions/{execution_id}`: 204 once everything is gone; 202 while the
/// purge of its checkpoints has more to do (send the request again).
pub async fn delete(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
) -> Result<Response, ApiError> {
    let id = parse_id(&raw)?;
    Ok(match state.runs.delete(&tenant, &id, state.clock.as_ref()).await? {
        Deleted::Done => StatusCode::NO_CONTENT.into_response(),
        Deleted::More => {
            let body = serde_json::json!({ "id": id.to_string(), "deleted": true, "remaining": true });
            Answer::json(StatusCode::ACCEPTED, &body)?.into_response()
        }
    })
}

/// `POST /executions/{execution_id}/complete`
pub async fn complete(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Response, ApiError> {
    let id = parse_id(&raw)?;
    let mut f = Fields::new(body)?;
    let output = f.nullable("output", json_value(VALUE_MAX_BYTES));
    f.finish()?;
    act(&state, &tenant, &id, Change::Plain(Action::Complete { output: output.into_update().flatten() })).await
}

/// `POST /executions/{execution_id}/fail`
pub async fn fail(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let id = parse_id(&raw)?;
    let mut f = Fields::new(body)?;
    let error_type = f.required("error_type", error_type);
    let message = f.required("message", text(1, MESSAGE_MAX));
    let details = f.optional("details", json_object(DETAILS_MAX_BYTES));
    f.finish()?;
    let (Some(error_type), Some(message)) = (error_type, message) else {
        return Err(ApiError::internal("validated fields missing"));
    };
    let error = ExecutionError { error_type, message };
    act(&state, &tenant, &id, Change::Fail { error, details: details.unwrap_or_default() }).await
}

fn error_type(value: &Value) -> Result<String, String> {
    let message = "must be 1 to 64 of A-Z, 0-9 and _, starting with a letter (such as AGENT_ERROR)";
    let s = value.as_str().ok_or(message)?;
    let valid = (1..=64).contains(&s.len())
        && s.starts_with(|c: char| c.is_ascii_uppercase())
        && s.bytes().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == b'_');
    if valid { Ok(s.to_owned()) } else { Err(message.to_owned()) }
}

/// `POST /executions/{execution_id}/pause`
pub async fn pause(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Response, ApiError> {
    let id = parse_id(&raw)?;
    Fields::new(body)?.finish()?;
    act(&state, &tenant, &id, Change::Plain(Action::Pause)).await
}

/// `POST /executions/{execution_id}/cancel`
pub async fn cancel(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Response, ApiError> {
    let id = parse_id(&raw)?;
    let mut f = Fields::new(body)?;
    let reason = f.nullable("reason", text(0, REASON_MAX));
    f.finish()?;
    act(&state, &tenant, &id, Change::Plain(Action::Cancel { reason: reason.into_update().flatten() })).await
}

/// `POST /executions/{execution_id}/replay`
pub async fn replay(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Response, ApiError> {
    let id = parse_id(&raw)?;
    let mut f = Fields::new(body)?;
    let from = f.nullable("checkpoint_id", |v| Ok(v.clone()));
    f.finish()?;
    let from = match from {
        Patch::Absent => ReplayFrom::Current,
        Patch::Null => ReplayFrom::Start,
        Patch::Value(v) => ReplayFrom::Checkpoint(body_id(&v, "checkpoint", CheckpointId::parse)?),
    };
    act(&state, &tenant, &id, Change::Replay(from)).await
}

/// `GET /executions/{execution_id}/replay-preview`: what a replay from `checkpoint_id`
/// (or the start, with `from_start=true`; else the current checkpoint) would run again.
pub async fn replay_preview(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    query: Query,
) -> Result<Response, ApiError> {
    let id = parse_id(&raw)?;
    let from = ReplayFrom::from_query(query)?;
    let preview = Box::pin(state.runs.replay_preview(&tenant, &id, &from)).await?;
    let named = |counted: &[(String, u64)]| -> Vec<Value> {
        counted.iter().map(|(name, count)| serde_json::json!({"name": name, "count": count})).collect()
    };
    let brief = |c: &domain::runs::checkpoints::model::Checkpoint| {
        serde_json::json!({"id": c.id, "sequence": c.sequence, "name": c.name, "attempt": c.attempt,
                           "created_at": shared::time::format(c.created_at)})
    };
    let answer = serde_json::json!({
        "object": "replay_preview",
        "execution_id": preview.execution.id,
        "status": preview.execution.status.wire(),
        "replayable": preview.refused.is_none(),
        "refused": preview.refused,
        "from_checkpoint": preview.from.as_ref().map(brief),
        "credits": preview.cost,
        "checkpoints_after": preview.after,
        "more": preview.more,
        "steps": named(&preview.steps),
        "tool_calls": named(&preview.tools),
        "checkpoints": preview.first.iter().map(brief).collect::<Vec<_>>(),
    });
    ok(&answer)
}

/// `POST /executions/{execution_id}/rollback`
pub async fn rollback(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    JsonBody(body): JsonBody,
) -> Result<Response, ApiError> {
    let id = parse_id(&raw)?;
    let mut f = Fields::new(body)?;
    let to = f.required("checkpoint_id", |v| Ok(v.clone()));
    f.finish()?;
    let to = body_id(&to.unwrap_or_default(), "checkpoint", CheckpointId::parse)?;
    act(&state, &tenant, &id, Change::Rollback(to)).await
}

/// Applies `change` to the execution and answers it as it is now.
async fn act(state: &AppState, tenant: &TenantId, id: &ExecutionId, change: Change) -> Result<Response, ApiError> {
    // As in `create`: the answer is stored in the write's own transaction.
    let answer = |changed: &Changed| {
        let mut body = ExecutionBody::from(changed.execution.clone());
        body.discarded_checkpoints = changed.discarded_checkpoints;
        Answer::json(StatusCode::OK, &body)
    };
    let announce = |changed: &Changed| idempotency::announce(|| answer(changed));
    let changed = state.runs.transition(tenant, id, &change, state.clock.as_ref(), &announce).await?;
    Ok(answer(&changed)?.into_response())
}
