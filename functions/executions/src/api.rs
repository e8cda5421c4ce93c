//! The execution endpoints: request parsing, responses, and the handlers that join them
//! to the domain and the stores.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use domain::credits::{EntryType, NewEntry};
use domain::workflows::model::WorkflowStatus;
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;
use serde_json::{Map, Value};
use shared::body::{Fields, JsonBody, OptionalJsonBody, Patch, WireEnum, json_object, json_value, string_map, text};
use shared::counters::CounterChange;
use shared::dynamo::{StoreError, Transaction, TransactionError, backoff};
use shared::ids::PathId;
use shared::ids::{CheckpointId, ExecutionId, WorkflowId};
use shared::pagination::{PageBody, PageRequest};
use shared::query::Query;
use shared::{ApiError, TenantId};

use crate::AppState;
use domain::runs::checkpoint::StoredCheckpoint;
use domain::runs::failure::{CommandStatus, Failure, FailureStatus};
use domain::runs::model::{Action, Discarded, Execution, ExecutionError, ExecutionStatus};
use domain::runs::store::{ListFilter, VALUE_MAX_BYTES};

/// Default `page_size` of the list.
const DEFAULT_PAGE_SIZE: u32 = 20;
/// Most metadata keys.
const METADATA_MAX_KEYS: usize = 50;
/// Largest failure `details`, as serialized JSON.
const DETAILS_MAX_BYTES: usize = 64 * 1024;
/// Longest failure message.
const MESSAGE_MAX: usize = 4096;
/// Longest cancellation reason.
const REASON_MAX: usize = 1000;
/// Tries of a read-modify-write before giving up under contention.
const WRITE_ATTEMPTS: u32 = 60;
/// Operations one transaction may hold besides a rollback's deletions.
const ROLLBACK_BATCH: usize = 80;

/// The error an execution failed with, on the wire.
#[derive(Debug, Serialize)]
struct ErrorBody {
    error_type: String,
    message: String,
}

/// An execution as a list shows it: a summary, without `input` and `output`.
#[derive(Debug, Serialize)]
pub struct ExecutionSummary {
    id: String,
    workflow_id: String,
    status: &'static str,
    error: Option<ErrorBody>,
    cancel_reason: Option<String>,
    metadata: BTreeMap<String, String>,
    attempt: u32,
    current_checkpoint_id: Option<String>,
    checkpoint_count: u64,
    created_at: String,
    updated_at: String,
    ended_at: Option<String>,
}

/// An execution as its own `GET` and every action show it: the summary's fields plus
/// `input` and `output`.
#[derive(Debug, Serialize)]
pub struct ExecutionBody {
    #[serde(flatten)]
    summary: ExecutionSummary,
    input: Option<Value>,
    output: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    discarded_checkpoints: Option<u64>,
}

impl From<Execution> for ExecutionBody {
    fn from(mut e: Execution) -> Self {
        let (input, output) = (e.input.take(), e.output.take());
        Self { summary: e.into(), input, output, discarded_checkpoints: None }
    }
}

impl From<Execution> for ExecutionSummary {
    fn from(e: Execution) -> Self {
        Self {
            id: e.id.to_string(),
            workflow_id: e.workflow_id.to_string(),
            status: e.status.wire(),
            error: e.error.map(|x| ErrorBody { error_type: x.error_type, message: x.message }),
            cancel_reason: e.cancel_reason,
            metadata: e.metadata,
            attempt: e.attempt,
            current_checkpoint_id: e.current_checkpoint_id.map(|c| c.to_string()),
            checkpoint_count: e.checkpoint_count,
            created_at: shared::time::format(e.created_at),
            updated_at: shared::time::format(e.updated_at),
            ended_at: e.ended_at.map(shared::time::format),
        }
    }
}

fn parse_id(raw: &str) -> Result<ExecutionId, ApiError> {
    ExecutionId::parse(raw).ok_or_else(|| ApiError::not_found("execution", raw))
}

async fn load(state: &AppState, tenant: &TenantId, id: &ExecutionId) -> Result<Execution, ApiError> {
    state.executions.get(tenant, id).await?.ok_or_else(|| ApiError::not_found("execution", id.as_str()))
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
    let input = f.nullable("input", json_value(VALUE_MAX_BYTES));
    let metadata = f.optional("metadata", string_map(METADATA_MAX_KEYS));
    f.finish()?;
    let workflow_id = body_id(&workflow.unwrap_or_default(), "workflow", WorkflowId::parse)?;
    let workflow = state
        .workflows
        .get(&tenant, &workflow_id)
        .await?
        .ok_or_else(|| ApiError::not_found("workflow", workflow_id.as_str()))?;
    if workflow.status == WorkflowStatus::Archived {
        return Err(archived(&workflow_id));
    }
    let input = input.into_update().flatten();
    let metadata = metadata.unwrap_or_default();
    let mut started = None;
    for attempt in 0..domain::credits::RACE_ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(backoff(attempt)).await;
        }
        let now = state.clock.now();
        let execution = Execution::start(workflow_id.clone(), input.clone(), metadata.clone(), now);
        let account = state.ledger.account(&tenant).await?;
        let mut tx = Transaction::new();
        state.ledger.stage(&mut tx, &tenant, account, charge(&state, &execution, "started"), now)?;
        state.executions.stage_create(&mut tx, &tenant, &execution)?;
        tx.push("workflow", state.workflows.check_active(&tenant, &workflow_id)?);
        match tx.commit(state.executions.client()).await {
            Ok(()) => {
                started = Some(execution);
                break;
            }
            Err(TransactionError::Condition("workflow")) => {
                return Err(match state.workflows.get(&tenant, &workflow_id).await? {
                    Some(_) => archived(&workflow_id),
                    None => ApiError::not_found("workflow", workflow_id.as_str()),
                });
            }
            Err(e) if domain::credits::is_race(&e) => {}
            Err(other) => return Err(other.into()),
        }
    }
    let execution = started
        .ok_or_else(|| ApiError::Unavailable("the credit balance kept changing during the start; retry".into()))?;
    let location = HeaderValue::from_str(&format!("{}/executions/{}", shared::http::BASE_PATH, execution.id))
        .map_err(ApiError::internal)?;
    let mut response = (StatusCode::CREATED, Json(ExecutionBody::from(execution))).into_response();
    response.headers_mut().insert(header::LOCATION, location);
    Ok(response)
}

/// The usage entry of a start or replay.
fn charge(state: &AppState, execution: &Execution, what: &str) -> NewEntry {
    NewEntry {
        kind: EntryType::Usage,
        amount: -state.execution_cost,
        description: format!("execution {} {what} (attempt {})", execution.id, execution.attempt),
        payment_status: None,
    }
}

fn archived(id: &WorkflowId) -> ApiError {
    ApiError::InvalidState(format!("workflow {id} is archived; restore it to draft before starting executions"))
}

/// `GET /executions`
pub async fn list(
    State(state): State<AppState>,
    tenant: TenantId,
    mut query: Query,
) -> Result<Json<PageBody<ExecutionSummary>>, ApiError> {
    let status = query.one_of::<ExecutionStatus>("status");
    let workflow = query.string("workflow_id");
    let created_after = query.timestamp("created_after");
    let created_before = query.timestamp("created_before");
    let page = PageRequest::read(&mut query, DEFAULT_PAGE_SIZE);
    let after = shared::pagination::starting_after(&mut query);
    query.finish()?;
    let after = after.map(|raw| parse_id(&raw)).transpose()?;
    if let Some(id) = &after
        && !state.executions.exists(&tenant, id).await?
    {
        return Err(ApiError::not_found("execution", id.as_str()));
    }
    let workflow_id = match workflow {
        None => None,
        Some(raw) => {
            let id = WorkflowId::parse(&raw).ok_or_else(|| ApiError::not_found("workflow", raw.as_str()))?;
            let (exists, seen) =
                tokio::try_join!(state.workflows.get(&tenant, &id), state.executions.workflow_seen(&tenant, &id))?;
            if exists.is_none() && !seen {
                return Err(ApiError::not_found("workflow", raw));
            }
            Some(id)
        }
    };
    let filter = ListFilter { status, workflow_id, created_after, created_before };
    let (items, total) =
        Box::pin(state.executions.list(&tenant, &filter, after.as_ref(), page.skip(), page.page_size as usize)).await?;
    Ok(Json(page.respond(items.into_iter().map(ExecutionSummary::from).collect(), total)))
}

/// `GET /executions/{execution_id}`
pub async fn get(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
) -> Result<Json<ExecutionBody>, ApiError> {
    let id = parse_id(&raw)?;
    Ok(Json(load(&state, &tenant, &id).await?.into()))
}

/// `POST /executions/{execution_id}/complete`
pub async fn complete(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Json<ExecutionBody>, ApiError> {
    let id = parse_id(&raw)?;
    let mut f = Fields::new(body)?;
    let output = f.nullable("output", json_value(VALUE_MAX_BYTES));
    f.finish()?;
    act(&state, &tenant, &id, Request::Plain(Action::Complete { output: output.into_update().flatten() })).await
}

/// `POST /executions/{execution_id}/fail`
pub async fn fail(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    JsonBody(body): JsonBody,
) -> Result<Json<ExecutionBody>, ApiError> {
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
    act(&state, &tenant, &id, Request::Fail { error, details: details.unwrap_or_default() }).await
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
) -> Result<Json<ExecutionBody>, ApiError> {
    let id = parse_id(&raw)?;
    Fields::new(body)?.finish()?;
    act(&state, &tenant, &id, Request::Plain(Action::Pause)).await
}

/// `POST /executions/{execution_id}/cancel`
pub async fn cancel(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Json<ExecutionBody>, ApiError> {
    let id = parse_id(&raw)?;
    let mut f = Fields::new(body)?;
    let reason = f.nullable("reason", text(0, REASON_MAX));
    f.finish()?;
    act(&state, &tenant, &id, Request::Plain(Action::Cancel { reason: reason.into_update().flatten() })).await
}

/// `POST /executions/{execution_id}/replay`
pub async fn replay(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Json<ExecutionBody>, ApiError> {
    let id = parse_id(&raw)?;
    let mut f = Fields::new(body)?;
    let from = f.nullable("checkpoint_id", |v| Ok(v.clone()));
    f.finish()?;
    let from = match from {
        Patch::Absent => ReplayFrom::Current,
        Patch::Null => ReplayFrom::Start,
        Patch::Value(v) => ReplayFrom::Checkpoint(body_id(&v, "checkpoint", CheckpointId::parse)?),
    };
    act(&state, &tenant, &id, Request::Replay(from)).await
}

/// `POST /executions/{execution_id}/rollback`
pub async fn rollback(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    JsonBody(body): JsonBody,
) -> Result<Json<ExecutionBody>, ApiError> {
    let id = parse_id(&raw)?;
    let mut f = Fields::new(body)?;
    let to = f.required("checkpoint_id", |v| Ok(v.clone()));
    f.finish()?;
    let to = body_id(&to.unwrap_or_default(), "checkpoint", CheckpointId::parse)?;
    act(&state, &tenant, &id, Request::Rollback(to)).await
}

/// Where a replay starts.
#[derive(Debug, Clone)]
enum ReplayFrom {
    /// The execution's current checkpoint (the default).
    Current,
    /// The start (`"checkpoint_id": null`).
    Start,
    /// This checkpoint of the execution.
    Checkpoint(CheckpointId),
}

/// An action as the client asked for it, before it is resolved against the execution.
#[derive(Debug, Clone)]
enum Request {
    Plain(Action),
    Fail { error: ExecutionError, details: Map<String, Value> },
    Replay(ReplayFrom),
    Rollback(CheckpointId),
}

/// A checkpoint of `execution`, or 404.
async fn checkpoint_of(
    state: &AppState,
    tenant: &TenantId,
    execution: &Execution,
    id: &CheckpointId,
) -> Result<StoredCheckpoint, ApiError> {
    match state.checkpoints.get(tenant, id).await? {
        Some(stored)
            if stored.checkpoint.execution_id == execution.id
                && !execution.is_discarded(stored.checkpoint.sequence) =>
        {
            Ok(stored)
        }
        _ => Err(ApiError::not_found("checkpoint", id.as_str())),
    }
}

/// Applies `request` to the execution: read, check, build one transaction with every
/// effect, commit conditioned on the version read; on a lost race, again.
async fn act(
    state: &AppState,
    tenant: &TenantId,
    id: &ExecutionId,
    request: Request,
) -> Result<Json<ExecutionBody>, ApiError> {
    for attempt in 0..WRITE_ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(backoff(attempt)).await;
        }
        let current = load(state, tenant, id).await?;
        let now = state.clock.now();
        let (action, target) = match &request {
            Request::Plain(action) => (action.clone(), None),
            Request::Fail { error, .. } => (Action::Fail { error: error.clone() }, None),
            Request::Replay(from) => {
                let from = match from {
                    ReplayFrom::Current => current.current_checkpoint_id.clone(),
                    ReplayFrom::Start => None,
                    ReplayFrom::Checkpoint(cp) => Some(checkpoint_of(state, tenant, &current, cp).await?.checkpoint.id),
                };
                (Action::Replay { from }, None)
            }
            Request::Rollback(to) => {
                let target = checkpoint_of(state, tenant, &current, to).await?;
                (Action::Rollback { to: to.clone() }, Some(target))
            }
        };
        current.check(&action)?;
        let mut next = current.after(&action, now);
        let mut tx = Transaction::new();
        let mut extra = CounterChange::default();
        let mut discarded = None;
        let mut cleanup = None;
        match (&request, &action) {
            (Request::Fail { error, details }, _) => {
                let failure = Failure::record(
                    id.clone(),
                    current.workflow_id.clone(),
                    error.error_type.clone(),
                    error.message.clone(),
                    details.clone(),
                    now,
                );
                next.failure_ids.push(failure.id.clone());
                state.executions.stage_failure(&mut tx, tenant, &failure)?;
            }
            (_, Action::Complete { .. }) => {
                for failure in open_failures(state, tenant, &current).await? {
                    extra.merge(&state.executions.stage_failure_replace(
                        &mut tx,
                        tenant,
                        &failure,
                        &failure.resolved(now),
                    )?);
                }
            }
            (_, Action::Replay { .. }) => {
                for failure in open_failures(state, tenant, &current).await? {
                    let next_failure = failure.with_pending_commands(CommandStatus::Completed);
                    if next_failure.recovery_commands != failure.recovery_commands {
                        extra.merge(&state.executions.stage_failure_replace(
                            &mut tx,
                            tenant,
                            &failure,
                            &next_failure,
                        )?);
                    }
                }
                extra.add(&shared::counters::daily("attempts", now.date_naive()), 1);
                let account = state.ledger.account(tenant).await?;
                state.ledger.stage(&mut tx, tenant, account, charge(state, &next, "replayed"), now)?;
            }
            _ => {}
        }
        if let Some(target) = target {
            // Everything above the target goes, including what earlier rollbacks left
            // hidden and not yet deleted (ranges above the target; a range below it
            // stays). What fits one transaction is deleted in the rollback's own;
            // otherwise the rollback commits its decision alone, a hidden range, and the
            // checkpoints are deleted after it (see `finish_discard`): either way a
            // client sees the rollback whole or not at all.
            let after = target.checkpoint.sequence;
            let later = state.checkpoints.later_than(tenant, id, after).await?;
            let visible = later.iter().filter(|c| !current.is_discarded(c.checkpoint.sequence)).count() as u64;
            next.checkpoint_count = current.checkpoint_count.saturating_sub(visible);
            next.discarded.retain(|range| range.through <= after);
            let size: usize = later.iter().map(StoredCheckpoint::deletion_size).sum();
            if size <= ROLLBACK_BATCH {
                for stored in &later {
                    state.checkpoints.stage_delete(&mut tx, tenant, stored)?;
                }
            } else {
                let range = Discarded { after, through: current.last_sequence };
                next.discarded.push(range);
                cleanup = Some((range, later));
            }
            discarded = Some(visible);
        }
        let mut whole = Transaction::new();
        state.executions.stage_replace(&mut whole, tenant, &current, &next, &extra)?;
        whole.append(tx);
        match whole.commit(state.executions.client()).await {
            Ok(()) => {
                if let Some((range, checkpoints)) = cleanup {
                    finish_discard(state, tenant, id, range, &checkpoints).await;
                }
                let mut body = ExecutionBody::from(next);
                body.discarded_checkpoints = discarded;
                return Ok(Json(body));
            }
            Err(
                TransactionError::Condition("execution" | "failure" | "account")
                | TransactionError::Store(StoreError::Conflict),
            ) => {}
            Err(other) => return Err(other.into()),
        }
    }
    Err(ApiError::Unavailable("the execution kept changing during the write; retry".into()))
}

/// Deletes the checkpoints a committed rollback discarded (hidden meanwhile), a
/// transaction of at most [`ROLLBACK_BATCH`] operations at a time, then drops their
/// range from the execution. Deleting what is gone already is harmless, so an
/// interrupted cleanup is finished by the execution's next rollback; until then the
/// range keeps them hidden. Failures are logged: the rollback itself has happened.
async fn finish_discard(
    state: &AppState,
    tenant: &TenantId,
    id: &ExecutionId,
    range: Discarded,
    checkpoints: &[StoredCheckpoint],
) {
    let mut batch = Transaction::new();
    let mut size = 0;
    for stored in checkpoints {
        if size + stored.deletion_size() > ROLLBACK_BATCH {
            if let Err(error) = std::mem::take(&mut batch).commit(state.executions.client()).await {
                tracing::warn!(execution = %id, error = %error, "discarded checkpoints left hidden");
                return;
            }
            size = 0;
        }
        if let Err(error) = state.checkpoints.stage_delete(&mut batch, tenant, stored) {
            tracing::warn!(execution = %id, error = %error, "discarded checkpoints left hidden");
            return;
        }
        size += stored.deletion_size();
    }
    if let Err(error) = batch.commit(state.executions.client()).await {
        tracing::warn!(execution = %id, error = %error, "discarded checkpoints left hidden");
        return;
    }
    for attempt in 0..WRITE_ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(backoff(attempt)).await;
        }
        let current = match state.executions.get(tenant, id).await {
            Ok(Some(current)) if current.discarded.contains(&range) => current,
            Ok(_) => return,
            Err(error) => {
                tracing::warn!(execution = %id, error = %error, "a deleted rollback range left in place");
                return;
            }
        };
        let mut next = current.clone();
        next.discarded.retain(|r| *r != range);
        next.version += 1;
        let mut tx = Transaction::new();
        if let Err(error) = state.executions.stage_replace(&mut tx, tenant, &current, &next, &CounterChange::default())
        {
            tracing::warn!(execution = %id, error = %error, "a deleted rollback range left in place");
            return;
        }
        match tx.commit(state.executions.client()).await {
            Ok(()) => return,
            Err(TransactionError::Condition("execution") | TransactionError::Store(StoreError::Conflict)) => {}
            Err(error) => {
                tracing::warn!(execution = %id, error = %error, "a deleted rollback range left in place");
                return;
            }
        }
    }
}

async fn open_failures(state: &AppState, tenant: &TenantId, execution: &Execution) -> Result<Vec<Failure>, ApiError> {
    let failures = state.executions.failures(tenant, &execution.failure_ids).await?;
    Ok(failures.into_iter().filter(|f| f.status == FailureStatus::Open).collect())
}
