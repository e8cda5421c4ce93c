//! The checkpoint endpoints.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use domain::runs::NewCheckpoint;
use domain::runs::checkpoint::{Checkpoint, PackedState, STATE_MAX_BYTES};
use domain::runs::model::Execution;
use http::StatusCode;
use serde::Serialize;
use shared::body::{Fields, RawJsonBody, split_raw, string_map, text};
use shared::ids::PathId;
use shared::ids::{CheckpointId, ExecutionId};
use shared::pagination::{OffsetBody, OffsetRequest};
use shared::query::Query;
use shared::{ApiError, TenantId};

use crate::AppState;

/// Most metadata keys.
const METADATA_MAX_KEYS: usize = 50;
/// Longest name.
const NAME_MAX: usize = 200;

/// A checkpoint as the API shows it.
#[derive(Debug, Serialize)]
pub struct CheckpointBody {
    id: String,
    execution_id: String,
    workflow_id: String,
    sequence: u64,
    name: Option<String>,
    parent_checkpoint_id: Option<String>,
    attempt: u32,
    metadata: BTreeMap<String, String>,
    state_size_bytes: u64,
    created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<Box<serde_json::value::RawValue>>,
}

impl From<Checkpoint> for CheckpointBody {
    fn from(c: Checkpoint) -> Self {
        Self {
            id: c.id.to_string(),
            execution_id: c.execution_id.to_string(),
            workflow_id: c.workflow_id.to_string(),
            sequence: c.sequence,
            name: c.name,
            parent_checkpoint_id: c.parent_checkpoint_id.map(|p| p.to_string()),
            attempt: c.attempt,
            metadata: c.metadata,
            state_size_bytes: c.state_size_bytes,
            created_at: shared::time::format(c.created_at),
            state: None,
        }
    }
}

async fn load_execution(state: &AppState, tenant: &TenantId, raw: &str) -> Result<Execution, ApiError> {
    let id = ExecutionId::parse(raw).ok_or_else(|| ApiError::not_found("execution", raw))?;
    Ok(state.runs.load(tenant, &id).await?)
}

/// `POST /checkpoints`
pub async fn create(
    State(state): State<AppState>,
    tenant: TenantId,
    RawJsonBody(bytes): RawJsonBody,
) -> Result<Response, ApiError> {
    // The state stays the text it was sent as: up to 6 MiB of `[0,0,…]` would be
    // hundreds of MB as a tree of values.
    let (body, raw_state) = split_raw(&bytes, "state")?;
    let mut f = Fields::new(body)?;
    let execution =
        f.required("execution_id", |v| v.as_str().map(str::to_owned).ok_or_else(|| "must be a string".to_owned()));
    f.known("state");
    match raw_state {
        None => f.reject("state", "is required"),
        Some(raw) if !raw.get().starts_with('{') => f.reject("state", "must be a JSON object"),
        Some(_) => {}
    }
    let name = f.nullable("name", text(1, NAME_MAX));
    let metadata = f.optional("metadata", string_map(METADATA_MAX_KEYS));
    f.finish()?;
    let (Some(execution), Some(raw_state)) = (execution, raw_state) else {
        return Err(ApiError::internal("validated fields missing"));
    };
    let packed = pack(raw_state)?;
    let execution_id =
        ExecutionId::parse(&execution).ok_or_else(|| ApiError::not_found("execution", execution.as_str()))?;
    let now = state.clock.now();
    let new = NewCheckpoint {
        id: CheckpointId::generate_at(now),
        name: name.into_update().flatten(),
        metadata: metadata.unwrap_or_default(),
    };
    let checkpoint = state.runs.record_checkpoint(&tenant, &execution_id, &new, &packed, now).await?;
    let path = format!("checkpoints/{}", checkpoint.id);
    shared::http::located((StatusCode::CREATED, Json(CheckpointBody::from(checkpoint))).into_response(), &path)
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
) -> Result<Json<OffsetBody<CheckpointBody>>, ApiError> {
    let execution = query.required_string("execution_id");
    let window = OffsetRequest::read(&mut query);
    let after = shared::pagination::starting_after(&mut query);
    query.finish()?;
    let execution = load_execution(&state, &tenant, &execution.unwrap_or_default()).await?;
    // After a checkpoint of this execution (404 for any other id): from its sequence on.
    let from_sequence = match after {
        None => 1,
        Some(raw) => {
            let not_found = || ApiError::not_found("checkpoint", raw.as_str());
            let id = CheckpointId::parse(&raw).ok_or_else(not_found)?;
            match state.runs.checkpoints.get(&tenant, &id).await? {
                Some(stored)
                    if stored.checkpoint.execution_id == execution.id
                        && !execution.is_discarded(stored.checkpoint.sequence) =>
                {
                    stored.checkpoint.sequence + 1
                }
                _ => return Err(not_found()),
            }
        }
    };
    let (skip, take) = (window.offset as usize, window.limit as usize);
    let items =
        state.runs.checkpoints.list(&tenant, &execution.id, &execution.discarded, from_sequence, skip, take).await?;
    Ok(Json(window.respond(items.into_iter().map(CheckpointBody::from).collect(), execution.checkpoint_count)))
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
    let not_found = || ApiError::not_found("checkpoint", raw.as_str());
    let (checkpoint, value) = if include_state {
        let (checkpoint, value) = state.runs.checkpoints.get_with_state(&tenant, &id).await?.ok_or_else(not_found)?;
        (checkpoint, Some(value))
    } else {
        (state.runs.checkpoints.get(&tenant, &id).await?.ok_or_else(not_found)?.checkpoint, None)
    };
    // A checkpoint a rollback discarded is gone for clients even while its items are
    // being deleted.
    let hidden = state.runs.executions.discarded(&tenant, &checkpoint.execution_id).await?;
    if hidden.iter().any(|range| range.contains(checkpoint.sequence)) {
        return Err(not_found());
    }
    let mut body = CheckpointBody::from(checkpoint);
    body.state = value;
    Ok(Json(body))
}
