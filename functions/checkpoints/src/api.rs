//! The checkpoint endpoints: each parses its request, calls one `domain::runs`
//! operation, and answers.

use axum::Json;
use axum::extract::State;
use axum::response::Response;
use domain::runs::checkpoints::model::{Checkpoint, PackedState, STATE_MAX_BYTES};
use domain::runs::checkpoints::writes::Write;
use domain::runs::requests::CheckpointOrder;
use domain::runs::{ListCheckpoints, NewCheckpoint, PendingWrites, Recorded};
use http::StatusCode;
use serde::Serialize;
use shared::body::{Fields, RawJsonBody, client_key, split_raw, string_map, text};
use shared::idempotency::{self, Answer};
use shared::ids::PathId;
use shared::ids::{CheckpointId, ExecutionId};
use shared::pagination::{OffsetBody, OffsetRequest};
use shared::query::Query;
use shared::{ApiError, TenantId};

use crate::AppState;
use domain::views::CheckpointBody;

/// Most metadata keys.
const METADATA_MAX_KEYS: usize = 50;
/// Longest name.
const NAME_MAX: usize = 200;

/// `POST /checkpoints`
pub async fn create(
    State(state): State<AppState>,
    tenant: TenantId,
    RawJsonBody(bytes): RawJsonBody,
) -> Result<Response, ApiError> {
    // The state stays the text it was sent as: up to 6 MiB of `[0,0,…]` would be
    // hundreds of MB as a tree of values.
    let (body, raw_state) = split_raw(&bytes, "state")?;
    // Pending writes are read again from the bytes below, only when sent.
    let has_pending = body.get("pending_writes").is_some_and(|v| !v.is_null());
    let mut f = Fields::new(body)?;
    let execution =
        f.required("execution_id", |v| v.as_str().map(str::to_owned).ok_or_else(|| "must be a string".to_owned()));
    f.known("state");
    // Read from the bytes below (its values stay the JSON text they were sent as).
    let _ = f.nullable("pending_writes", |_| Ok(()));
    match raw_state {
        None => f.reject("state", "is required"),
        Some(raw) if !raw.get().starts_with('{') => f.reject("state", "must be a JSON object"),
        Some(_) => {}
    }
    let name = f.nullable("name", text(1, NAME_MAX));
    let key = f.nullable("key", client_key);
    let metadata = f.optional("metadata", string_map(METADATA_MAX_KEYS));
    let pending = if has_pending { read_pending(&bytes) } else { Ok(None) };
    let pending = match pending {
        Ok(pending) => pending,
        Err(errors) => {
            for e in errors {
                f.reject(e.field, e.message);
            }
            None
        }
    };
    f.finish()?;
    let (Some(execution), Some(raw_state)) = (execution, raw_state) else {
        return Err(ApiError::internal("validated fields missing"));
    };
    let packed = pack(raw_state)?;
    let execution_id =
        ExecutionId::parse(&execution).ok_or_else(|| ApiError::not_found("execution", execution.as_str()))?;
    let pending_writes = match pending {
        Some((raw, writes)) => Some(PendingWrites {
            checkpoint_id: CheckpointId::parse(&raw).ok_or_else(|| ApiError::not_found("checkpoint", raw.as_str()))?,
            writes,
        }),
        None => None,
    };
    let now = state.clock.now();
    let new = NewCheckpoint {
        id: CheckpointId::generate_at(now),
        name: name.into_update().flatten(),
        key: key.into_update().flatten(),
        metadata: metadata.unwrap_or_default(),
        pending_writes,
    };
    // The answer is known before the write commits: with an Idempotency-Key it is
    // stored in the write's own transaction (no round trip after it).
    let answer = |status: StatusCode, checkpoint: &Checkpoint| {
        Answer::json(status, &CheckpointBody::from(checkpoint.clone()))?
            .located(&format!("checkpoints/{}", checkpoint.id))
    };
    let announce = |checkpoint: &Checkpoint| idempotency::announce(|| answer(StatusCode::CREATED, checkpoint));
    let (status, checkpoint) =
        match state.runs.record_checkpoint(&tenant, &execution_id, &new, &packed, now, &announce).await? {
            Recorded::New(c) => (StatusCode::CREATED, c),
            Recorded::Existing(c) => (StatusCode::OK, c),
        };
    Ok(answer(status, &checkpoint)?.into_response())
}

fn pack(state: &serde_json::value::RawValue) -> Result<PackedState, ApiError> {
    let packed = PackedState::from_json(&shared::body::compact(state)?);
    if packed.size > STATE_MAX_BYTES {
        return Err(ApiError::PayloadTooLarge(format!(
            "the state is {} bytes of JSON; the limit is {STATE_MAX_BYTES} bytes (4 MiB)",
            packed.size
        )));
    }
    Ok(packed)
}

/// `GET /checkpoints`
pub async fn list(
    State(state): State<AppState>,
    tenant: TenantId,
    mut query: Query,
) -> Result<Json<CheckpointList>, ApiError> {
    let workflow = query.string("workflow_id");
    let execution =
        if workflow.is_some() { query.string("execution_id") } else { query.required_string("execution_id") };
    let window = OffsetRequest::read(&mut query);
    let after = shared::pagination::starting_after(&mut query);
    let key = query.key("key");
    let order = query.one_of::<CheckpointOrder>("order");
    let metadata = query.deep_object("metadata", METADATA_MAX_KEYS);
    if let Some(workflow) = workflow {
        // A key's checkpoints across the workflow's executions (framework integrations
        // that know a checkpoint by its key alone).
        if execution.is_some() {
            query.reject("execution_id", "give either execution_id or workflow_id".to_owned());
        }
        if key.is_none() {
            query.reject("key", "is required with workflow_id".to_owned());
        }
        for (given, name) in
            [(after.is_some(), "starting_after"), (order.is_some(), "order"), (!metadata.is_empty(), "metadata")]
        {
            if given {
                query.reject(name, "is not taken with workflow_id".to_owned());
            }
        }
        query.finish()?;
        let key = key.unwrap_or_default();
        let find = state.runs.checkpoints_by_workflow_key(
            &tenant,
            &workflow,
            &key,
            window.offset as usize,
            window.limit as usize,
        );
        let listing = Box::pin(find).await?;
        return Ok(Json(CheckpointList {
            page: window.respond(listing.items.into_iter().map(CheckpointBody::from).collect(), listing.total),
            next_starting_after: None,
        }));
    }
    query.finish()?;
    let order = order.unwrap_or(CheckpointOrder::Asc);
    let execution = execution.unwrap_or_default();
    let execution =
        ExecutionId::parse(&execution).ok_or_else(|| ApiError::not_found("execution", execution.as_str()))?;
    let list = ListCheckpoints {
        descending: order == CheckpointOrder::Desc,
        metadata,
        key,
        after,
        after_sequence: None,
        skip: window.offset as usize,
        take: window.limit as usize,
    };
    let listing = Box::pin(state.runs.list_checkpoints(&tenant, &execution, &list)).await?;
    Ok(Json(CheckpointList {
        page: window.respond(listing.items.into_iter().map(CheckpointBody::from).collect(), listing.total),
        next_starting_after: listing.next.map(|id| id.to_string()),
    }))
}

/// The answer of `GET /checkpoints`: a window, and where the next one starts.
#[derive(Debug, Serialize)]
pub struct CheckpointList {
    #[serde(flatten)]
    page: OffsetBody<CheckpointBody>,
    /// Pass as `starting_after` (with the same filters) for what follows; null at the
    /// end. With a metadata filter a request examines at most 1,000 checkpoints, so a
    /// page may hold fewer than `limit` items (even none) and still have this set.
    next_starting_after: Option<String>,
}

/// `GET /checkpoints/{checkpoint_id}`
pub async fn get(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    mut query: Query,
) -> Result<Json<CheckpointBody>, ApiError> {
    let include_state = query.boolean("include_state", false);
    query.finish()?;
    let id = CheckpointId::parse(&raw).ok_or_else(|| ApiError::not_found("checkpoint", raw.as_str()))?;
    let (checkpoint, value) = state.runs.checkpoint(&tenant, &id, include_state).await?;
    let mut body = CheckpointBody::from(checkpoint);
    body.state = value;
    Ok(Json(body))
}

/// `DELETE /checkpoints/{checkpoint_id}`
pub async fn delete(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
) -> Result<StatusCode, ApiError> {
    let id = CheckpointId::parse(&raw).ok_or_else(|| ApiError::not_found("checkpoint", raw.as_str()))?;
    state.runs.delete_checkpoint(&tenant, &id, state.clock.as_ref()).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The writes of a request, read straight from its bytes (values stay the JSON text they
/// were sent as).
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WritesRequest {
    task_id: String,
    #[serde(default)]
    task_path: String,
    writes: Vec<WriteRequest>,
}

#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteRequest {
    /// A number (JSON Schema's integers include `396.0`); checked to be whole below.
    index: serde_json::Number,
    channel: String,
    value: Box<serde_json::value::RawValue>,
}

/// Most writes in one request.
pub const WRITES_MAX: usize = 1000;
/// Most tasks in a checkpoint's `pending_writes`.
pub const PENDING_TASKS_MAX: usize = 100;
/// The lowest and highest write index.
pub const WRITE_INDEX: std::ops::RangeInclusive<i64> = -1000..=1_000_000;
/// Longest task path.
pub const TASK_PATH_MAX: usize = 1024;

/// A JSON number that is a whole number in `i64` (`396` or `396.0`).
fn whole(n: &serde_json::Number) -> Option<i64> {
    n.as_i64().or_else(|| {
        let f = n.as_f64()?;
        #[allow(clippy::cast_possible_truncation)] // checked: whole and within ±2^53
        (f.fract() == 0.0 && f.abs() <= 9_007_199_254_740_992.0).then_some(f as i64)
    })
}

fn read_writes(bytes: &[u8]) -> Result<Vec<Write>, ApiError> {
    let request: WritesRequest = serde_json::from_slice(bytes).map_err(|e| {
        ApiError::field("body", format!("must be {{task_id, task_path, writes: [{{index, channel, value}}]}}: {e}"))
    })?;
    let mut errors = Vec::new();
    let writes = checked_writes(request, "", &mut errors)?;
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    if writes.len() > WRITES_MAX {
        return Err(ApiError::field("writes", format!("must hold 1 to {WRITES_MAX} writes")));
    }
    Ok(writes)
}

/// The writes a checkpoint brings for an earlier one (`pending_writes`), read from the
/// request's bytes so that their values stay the JSON text they were sent as: the
/// checkpoint they go to and the writes, or the fields' errors.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PendingRequest {
    checkpoint_id: String,
    tasks: Vec<WritesRequest>,
}

fn read_pending(bytes: &[u8]) -> Result<Option<(String, Vec<Write>)>, Vec<shared::error::FieldError>> {
    #[derive(serde::Deserialize)]
    struct Body<'a> {
        #[serde(borrow, default)]
        pending_writes: Option<&'a serde_json::value::RawValue>,
    }
    let field = |message: String| vec![shared::error::FieldError::new("pending_writes", message)];
    // Called only when the body has a `pending_writes`: a body this cannot read (the
    // field twice) is refused, never stored without them.
    let body = serde_json::from_slice::<Body<'_>>(bytes).map_err(|e| field(format!("could not be read: {e}")))?;
    let Some(raw) = body.pending_writes else { return Ok(None) };
    if raw.get() == "null" {
        return Ok(None);
    }
    let request: PendingRequest = serde_json::from_str(raw.get()).map_err(|e| {
        field(format!(
            "must be {{checkpoint_id, tasks: [{{task_id, task_path, writes: [{{index, channel, value}}]}}]}}: {e}"
        ))
    })?;
    let mut errors = Vec::new();
    if request.tasks.is_empty() || request.tasks.len() > PENDING_TASKS_MAX {
        errors.push(shared::error::FieldError::new(
            "pending_writes.tasks",
            format!("must hold 1 to {PENDING_TASKS_MAX} tasks"),
        ));
    }
    let mut writes = Vec::new();
    for (i, task) in request.tasks.into_iter().enumerate() {
        let prefix = format!("pending_writes.tasks[{i}].");
        match checked_writes(task, &prefix, &mut errors) {
            Ok(more) => writes.extend(more),
            Err(_) => return Err(field("could not be read".to_owned())),
        }
    }
    if writes.len() > WRITES_MAX {
        errors.push(shared::error::FieldError::new(
            "pending_writes.tasks",
            format!("must hold at most {WRITES_MAX} writes in all"),
        ));
    }
    if errors.is_empty() { Ok(Some((request.checkpoint_id, writes))) } else { Err(errors) }
}

/// A task's writes, checked (errors named after `prefix`, added to `errors`).
fn checked_writes(
    request: WritesRequest,
    prefix: &str,
    errors: &mut Vec<shared::error::FieldError>,
) -> Result<Vec<Write>, ApiError> {
    let error = |field: String, message: String| shared::error::FieldError::new(format!("{prefix}{field}"), message);
    if let Err(message) = shared::body::check_key(&request.task_id) {
        errors.push(error("task_id".to_owned(), message));
    }
    if request.task_path.chars().count() > TASK_PATH_MAX || request.task_path.chars().any(char::is_control) {
        errors.push(error(
            "task_path".to_owned(),
            format!("must be at most {TASK_PATH_MAX} characters without control characters"),
        ));
    }
    if request.writes.is_empty() || request.writes.len() > WRITES_MAX {
        errors.push(error("writes".to_owned(), format!("must hold 1 to {WRITES_MAX} writes")));
    }
    for (i, w) in request.writes.iter().enumerate() {
        if !whole(&w.index).is_some_and(|index| WRITE_INDEX.contains(&index)) {
            errors.push(error(
                format!("writes[{i}].index"),
                format!("must be an integer from {} to {}", WRITE_INDEX.start(), WRITE_INDEX.end()),
            ));
        }
        if let Err(message) = shared::body::check_key(&w.channel) {
            errors.push(error(format!("writes[{i}].channel"), message));
        }
    }
    if !errors.is_empty() {
        return Ok(Vec::new());
    }
    let WritesRequest { task_id, task_path, writes } = request;
    let mut out = Vec::with_capacity(writes.len());
    for w in writes {
        let value = serde_json::value::RawValue::from_string(
            String::from_utf8(shared::body::compact(&w.value)?)
                .map_err(|_| ApiError::internal("compact JSON is UTF-8"))?,
        )
        .map_err(|_| ApiError::internal("compact JSON parses"))?;
        let index = whole(&w.index).ok_or_else(|| ApiError::internal("validated index"))?;
        out.push(Write { task_id: task_id.clone(), task_path: task_path.clone(), index, channel: w.channel, value });
    }
    Ok(out)
}

/// `POST /checkpoints/{checkpoint_id}/writes`
pub async fn put_writes(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    RawJsonBody(bytes): RawJsonBody,
) -> Result<Json<serde_json::Value>, ApiError> {
    let id = CheckpointId::parse(&raw).ok_or_else(|| ApiError::not_found("checkpoint", raw.as_str()))?;
    let writes = read_writes(&bytes)?;
    let total = state.runs.put_writes(&tenant, &id, &writes).await?;
    Ok(Json(serde_json::json!({ "checkpoint_id": id.to_string(), "total": total })))
}

/// The writes of a checkpoint as the API shows them.
#[derive(Debug, Serialize)]
pub struct WritesBody {
    checkpoint_id: String,
    items: Vec<Write>,
    total: u64,
}

/// `GET /checkpoints/{checkpoint_id}/writes`
pub async fn list_writes(
    State(state): State<AppState>,
    tenant: TenantId,
    PathId(raw): PathId,
    query: Query,
) -> Result<Json<WritesBody>, ApiError> {
    query.finish()?;
    let not_found = || ApiError::not_found("checkpoint", raw.as_str());
    let id = CheckpointId::parse(&raw).ok_or_else(not_found)?;
    let writes = state.runs.checkpoint_writes(&tenant, &id).await?;
    let total = writes.items.len() as u64;
    Ok(Json(WritesBody { checkpoint_id: id.to_string(), items: writes.items, total }))
}
