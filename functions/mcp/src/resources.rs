//! The resources: an execution's timeline, read by URI
//! (`cairn://executions/{execution_id}/timeline`): the execution as its list shows it and
//! its checkpoints in order (metadata, no state), one JSON document.

use serde_json::{Value, json};
use shared::ApiError;
use shared::ids::ExecutionId;
use shared::scopes::{Access, Needed, Scopes};

use crate::tools::{self, Caller};
use domain::runs::ListCheckpoints;
use domain::views::{CheckpointBody, ExecutionSummary};

/// The timeline's URI template.
pub const TIMELINE: &str = "cairn://executions/{execution_id}/timeline";

/// The checkpoints a timeline shows at most (the rest: `list_checkpoints`).
pub const TIMELINE_CHECKPOINTS: usize = 100;

/// MCP's error code for a resource that is not there.
pub const NOT_FOUND: i64 = -32002;

/// What reading a timeline needs: the execution, and its checkpoints.
const NEEDS: [Needed; 2] =
    [Needed { area: "executions", access: Access::Read }, Needed { area: "checkpoints", access: Access::Read }];

/// Whether a key with `scopes` may read timelines.
fn allowed(scopes: &Scopes) -> bool {
    NEEDS.iter().all(|needed| scopes.allows(*needed))
}

/// `resources/templates/list`: the timeline's, for a key that may read it.
#[must_use]
pub fn templates(scopes: &Scopes) -> Value {
    if !allowed(scopes) {
        return json!([]);
    }
    json!([{
        "uriTemplate": TIMELINE,
        "name": "execution_timeline",
        "title": "An execution's timeline",
        "description": "The execution (status, error, attempt, times) and its checkpoints in order, \
    metadata only (the first 100; list_checkpoints has the rest).",
        "mimeType": "application/json",
    }])
}

/// `resources/read` of `uri`: its contents, or the JSON-RPC error (code, message).
///
/// # Errors
/// [`NOT_FOUND`] for a URI that names no timeline of the tenant's (another tenant's
/// execution included) or that the key may not read; `-32603` when storage failed.
pub async fn read(caller: &Caller<'_>, uri: &str) -> Result<Value, (i64, String)> {
    let unknown = || (NOT_FOUND, format!("no resource {uri}"));
    let raw = uri.strip_prefix("cairn://executions/").and_then(|rest| rest.strip_suffix("/timeline"));
    let id = raw.and_then(ExecutionId::parse).filter(|_| allowed(caller.scopes)).ok_or_else(unknown)?;
    let (state, tenant) = (caller.state, caller.tenant);
    let failed = |error: ApiError| match error {
        ApiError::NotFound { .. } => unknown(),
        other => (-32603, other.problem()["detail"].as_str().unwrap_or("storage failed").to_owned()),
    };
    let execution = Box::pin(state.runs.load(tenant, &id)).await.map_err(|e| failed(e.into()))?;
    let list = ListCheckpoints { take: TIMELINE_CHECKPOINTS, ..ListCheckpoints::default() };
    let listing = Box::pin(state.runs.list_checkpoints(tenant, &id, &list)).await.map_err(|e| failed(e.into()))?;
    Ok(contents(uri, execution, listing))
}

/// The timeline's contents, bounded as a tool's answer is.
fn contents(
    uri: &str,
    execution: domain::runs::executions::model::Execution,
    listing: domain::runs::CheckpointListing,
) -> Value {
    let timeline = json!({
        "execution": ExecutionSummary::from(execution),
        "checkpoints": listing.items.into_iter().map(CheckpointBody::from).collect::<Vec<_>>(),
        "total_checkpoints": listing.total,
        "next_starting_after": listing.next.map(|id| id.to_string()),
    });
    let timeline = tools::bounded(timeline, "/api/v1/checkpoints");
    json!({"contents": [{"uri": uri, "mimeType": "application/json", "text": timeline.to_string()}]})
}
