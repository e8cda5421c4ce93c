//! The tools: each is one read of the API's, over `domain`, answering exactly what its
//! route answers (the same views, pages and problems). Arguments are read as the
//! route's query parameters are, by [`Query`], so they are checked by the same rules
//! and refused with the same 422; a name the tool does not take is refused too.

use serde_json::{Map, Value, json};
use shared::body::WireEnum;
use shared::ids::{CheckpointId, ExecutionId, FailureGroupId, FailureId, WorkflowId};
use shared::pagination::{OffsetRequest, PageRequest};
use shared::query::Query;
use shared::scopes::{Access, Needed, Scopes};
use shared::{ApiError, TenantId};

use crate::AppState;
use domain::runs::checkpoints::model::Checkpoint;
use domain::runs::executions::model::Action;
use domain::runs::executions::model::ExecutionStatus;
use domain::runs::failures::model::FailureStatus;
use domain::runs::failures::model::Settlement;
use domain::runs::requests::CheckpointOrder;
use domain::runs::{Change, ListCheckpoints, ListExecutions, ListFailures, ListGroups, ReplayFrom};
use domain::views::{
    CheckpointBody, ExecutionBody, ExecutionSummary, FailureDetail, FailureItem, GroupBody, WorkflowBody,
    WorkflowSummary,
};
use domain::workflows::model::{WorkflowStatus, WorkflowType};
use domain::workflows::store::ListFilter;

/// The largest checkpoint state a tool answers with, in bytes of JSON: a model's
/// context is the bound, not Lambda's 6 MB. A larger one is left out and said so.
pub const STATE_SHOWN_MAX_BYTES: u64 = 64 * 1024;

/// The largest structured answer a tool gives, in bytes of JSON. A page longer than
/// this shows the items that fit and says where the rest starts; a record longer than
/// this leaves out its largest fields (an execution's input and output) and names them.
/// With the answer's text copy (at most twice as long, escaped) and Lambda's own
/// escaping, a tool's answer stays far below Lambda's 6 MB (`tests/tests/
/// response_limits.rs`), and within what a model can read.
pub const ANSWER_MAX_BYTES: usize = 256 * 1024;

/// Room kept for the note that says what was left out.
const NOTE_BYTES: usize = 1024;

/// `value` within [`ANSWER_MAX_BYTES`]: as it is when it fits; else a page with the
/// items that fit and `truncated` (how many are shown, and the `starting_after` that
/// goes on from the last); else a record without its largest fields, named with their
/// sizes in `omitted_fields`.
#[must_use]
pub fn bounded(mut value: Value, route: &str) -> Value {
    let size = |v: &Value| serde_json::to_vec(v).map_or(usize::MAX, |bytes| bytes.len());
    if size(&value) <= ANSWER_MAX_BYTES {
        return value;
    }
    let budget = ANSWER_MAX_BYTES - NOTE_BYTES;
    let list = ["items", "checkpoints"].into_iter().find(|name| value.get(name).is_some_and(Value::is_array));
    if let Some(Value::Array(items)) = list.and_then(|name| value.get_mut(name)) {
        let all = std::mem::take(items);
        let mut used = size(&value);
        let mut kept = Vec::new();
        for item in all {
            let item_size = size(&item) + 1;
            if used + item_size > budget {
                break;
            }
            used += item_size;
            kept.push(item);
        }
        let next = kept.last().and_then(|last| last.get("id")).cloned();
        let shown = kept.len();
        value[list.unwrap_or("items")] = Value::Array(kept);
        value["truncated"] = json!({
            "items_shown": shown,
            "starting_after": next,
            "reason": format!(
                "the page is larger than the {ANSWER_MAX_BYTES} bytes a tool answers with; ask again with \
        starting_after (or a smaller page) for the rest"
            ),
        });
        return value;
    }
    let mut omitted = Map::new();
    while size(&value) > budget {
        let Some(object) = value.as_object_mut() else { break };
        let largest = object.iter().map(|(name, field)| (size(field), name.clone())).max();
        let Some((field_size, name)) = largest else { break };
        object.remove(&name);
        omitted.insert(name, field_size.into());
    }
    value["omitted_fields"] = json!({
        "bytes": omitted,
        "reason": format!("larger than the {ANSWER_MAX_BYTES} bytes a tool answers with; read them with GET {route}"),
    });
    value
}

/// Who calls, and with what.
#[derive(Debug, Clone, Copy)]
pub struct Caller<'a> {
    /// The function's stores.
    pub state: &'a AppState,
    /// The key's tenant.
    pub tenant: &'a TenantId,
    /// The key's scopes.
    pub scopes: &'a Scopes,
}

/// What a tool does, for its annotations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Reads only.
    Read,
    /// Changes something: `destructive` when what it ends or deletes cannot be had back,
    /// `idempotent` when calling it again with the same arguments changes nothing more.
    Write {
        /// Whether it ends or deletes something for good.
        destructive: bool,
        /// Whether a repeat changes nothing more.
        idempotent: bool,
    },
}

/// One tool.
#[derive(Debug)]
pub struct Tool {
    /// Its name.
    pub name: &'static str,
    /// A short title.
    pub title: &'static str,
    /// What it does, for the model.
    pub description: &'static str,
    /// The scope its route needs.
    pub needs: Needed,
    /// Reads or changes.
    pub effect: Effect,
    /// Its arguments: (name, JSON Schema), all optional but those in `required`.
    pub arguments: fn() -> Vec<(&'static str, Value)>,
    /// The arguments it cannot do without.
    pub required: &'static [&'static str],
}

const fn read(area: &'static str) -> Needed {
    Needed { area, access: Access::Read }
}

const fn write(area: &'static str) -> Needed {
    Needed { area, access: Access::Write }
}

/// The longest reason a cancel takes, as `POST /executions/{id}/cancel`.
const REASON_MAX: usize = 1000;

fn string(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn one_of(values: &[&str], description: &str) -> Value {
    json!({"type": "string", "enum": values, "description": description})
}

/// A string that is one of `T`'s wire names.
fn wire<T: WireEnum>(description: &str) -> Value {
    let values: Vec<&str> = T::ALL.iter().map(|v| v.wire()).collect();
    one_of(&values, description)
}

fn timestamp(description: &str) -> Value {
    json!({"type": "string", "format": "date-time", "description": description})
}

fn page_arguments() -> Vec<(&'static str, Value)> {
    vec![
        ("page", json!({"type": "integer", "minimum": 1, "description": "Page number, from 1."})),
        (
            "page_size",
            json!({"type": "integer", "minimum": 1, "maximum": 100, "description": "Items a page (default 20)."}),
        ),
        ("starting_after", string("An id from the previous page: the items after it.")),
    ]
}

fn window_arguments() -> Vec<(&'static str, Value)> {
    vec![
        (
            "limit",
            json!({"type": "integer", "minimum": 1, "maximum": 100, "description": "Items at most (default 50)."}),
        ),
        ("offset", json!({"type": "integer", "minimum": 0, "description": "Items skipped."})),
        ("starting_after", string("An id from the previous window: the items after it.")),
    ]
}

/// Every tool, in the order they are listed.
pub const TOOLS: &[Tool] = &[
    Tool {
        name: "list_workflows",
        title: "List workflows",
        description: "The tenant's workflows, newest first, a page at a time, with the total matching.",
        needs: read("workflows"),
        effect: Effect::Read,
        arguments: || {
            let mut args = vec![
                ("status", wire::<WorkflowStatus>("Only workflows in this status.")),
                ("workflow_type", wire::<WorkflowType>("Only workflows of this type.")),
                ("name", string("Only workflows with exactly this name.")),
            ];
            args.extend(page_arguments());
            args
        },
        required: &[],
    },
    Tool {
        name: "get_workflow",
        title: "Get a workflow",
        description: "One workflow, with its definition and metadata.",
        needs: read("workflows"),
        effect: Effect::Read,
        arguments: || vec![("workflow_id", string("The workflow's id (wf_...)."))],
        required: &["workflow_id"],
    },
    Tool {
        name: "list_executions",
        title: "List executions",
        description: "Executions (runs of workflows), newest first, a page at a time, with the total \
matching; without their input and output (get_execution has them).",
        needs: read("executions"),
        effect: Effect::Read,
        arguments: || {
            let mut args = vec![
                ("status", wire::<ExecutionStatus>("Only executions in this status.")),
                ("workflow_id", string("Only executions of this workflow.")),
                (
                    "tag",
                    json!({"type": "array", "items": {"type": "string"},
                           "description": "Only executions with every one of these tags, each key:value."}),
                ),
                ("created_after", timestamp("Only executions created after this instant (RFC 3339).")),
                ("created_before", timestamp("Only executions created before this instant (RFC 3339).")),
            ];
            args.extend(page_arguments());
            args
        },
        required: &[],
    },
    Tool {
        name: "get_execution",
        title: "Get an execution",
        description: "One execution: status, input, output, error, tags, checkpoint count, times.",
        needs: read("executions"),
        effect: Effect::Read,
        arguments: || vec![("execution_id", string("The execution's id (exec_...)."))],
        required: &["execution_id"],
    },
    Tool {
        name: "list_checkpoints",
        title: "List checkpoints",
        description: "An execution's checkpoints in sequence order (or newest first), metadata only: \
no state (get_checkpoint with include_state has it).",
        needs: read("checkpoints"),
        effect: Effect::Read,
        arguments: || {
            let mut args = vec![
                ("execution_id", string("The execution's id (exec_...).")),
                ("order", one_of(&["asc", "desc"], "asc (first checkpoint first, the default) or desc.")),
            ];
            args.extend(window_arguments());
            args
        },
        required: &["execution_id"],
    },
    Tool {
        name: "get_checkpoint",
        title: "Get a checkpoint",
        description: "One checkpoint's metadata and, with include_state, its state: a state larger than \
64 KiB of JSON is left out (state_omitted says its size; read it through the API).",
        needs: read("checkpoints"),
        effect: Effect::Read,
        arguments: || {
            vec![
                ("checkpoint_id", string("The checkpoint's id (ckpt_...).")),
                ("include_state", json!({"type": "boolean", "description": "Also the state (default false)."})),
            ]
        },
        required: &["checkpoint_id"],
    },
    Tool {
        name: "diff_checkpoints",
        title: "Compare two checkpoints",
        description: "What changed in the state from one checkpoint to another (of any executions \
of the tenant): each change at its JSON Pointer path, added, removed or changed, with both \
values; the first 200 changes, and how many in all. States of up to 64 KiB of JSON each.",
        needs: read("checkpoints"),
        effect: Effect::Read,
        arguments: || {
            vec![
                ("from_checkpoint_id", string("The earlier checkpoint (ckpt_...).")),
                ("to_checkpoint_id", string("The later checkpoint (ckpt_...).")),
            ]
        },
        required: &["from_checkpoint_id", "to_checkpoint_id"],
    },
    Tool {
        name: "list_failures",
        title: "List failures",
        description: "Failures recorded by failed executions, newest first, with the total matching.",
        needs: read("failures"),
        effect: Effect::Read,
        arguments: || {
            let mut args = vec![
                ("status", wire::<FailureStatus>("Only failures in this status.")),
                ("group_id", string("Only failures of this failure group (grp_...).")),
                ("created_after", timestamp("Only failures recorded after this instant (RFC 3339).")),
                ("created_before", timestamp("Only failures recorded before this instant (RFC 3339).")),
            ];
            args.extend(window_arguments());
            args
        },
        required: &[],
    },
    Tool {
        name: "get_failure",
        title: "Get a failure",
        description: "One failure, with its error's details (traceback, context) and its execution's id.",
        needs: read("failures"),
        effect: Effect::Read,
        arguments: || vec![("failure_id", string("The failure's id (fail_...)."))],
        required: &["failure_id"],
    },
    Tool {
        name: "failure_stats",
        title: "Failure statistics",
        description: "Failures in all, open, resolved and ignored, and the failure rate of the last 30 days.",
        needs: read("failures"),
        effect: Effect::Read,
        arguments: Vec::new,
        required: &[],
    },
    Tool {
        name: "list_failure_groups",
        title: "List failure groups",
        description: "Failures grouped by cause (workflow, error type, agent and the message's \
fingerprint), the most recently seen first, each with its counts by status: where an incident \
starts. list_failures with group_id has a group's failures.",
        needs: read("failures"),
        effect: Effect::Read,
        arguments: || {
            let mut args = vec![
                ("status", wire::<FailureStatus>("Only groups in this status (open: a failure of it is open).")),
                ("workflow_id", string("Only this workflow's groups.")),
                ("created_after", timestamp("Only groups last seen after this instant (RFC 3339).")),
                ("created_before", timestamp("Only groups last seen before this instant (RFC 3339).")),
            ];
            args.extend(window_arguments().into_iter().filter(|(name, _)| *name != "starting_after"));
            args
        },
        required: &[],
    },
    Tool {
        name: "get_failure_group",
        title: "Get a failure group",
        description: "One failure group: its cause, a sample message, its counts by status, when \
it was first and last seen.",
        needs: read("failures"),
        effect: Effect::Read,
        arguments: || vec![("group_id", string("The group's id (fgrp_...)."))],
        required: &["group_id"],
    },
    Tool {
        name: "replay_execution",
        title: "Replay an execution",
        description: "Runs a failed or paused execution again: from checkpoint_id (one of its own), \
else from its current checkpoint, or from the beginning with from_start. Charges 1 credit; its \
checkpoints are kept, its attempt goes up by one (at most 50), and its open failures are resolved \
when it completes. Refused (409) for an execution in another status.",
        needs: write("executions"),
        effect: Effect::Write { destructive: false, idempotent: false },
        arguments: || {
            vec![
                ("execution_id", string("The execution's id (exec_...).")),
                ("checkpoint_id", string("Replay from this checkpoint of the execution (ckpt_...).")),
                ("from_start", json!({"type": "boolean", "description": "Replay from the beginning (default false)."})),
            ]
        },
        required: &["execution_id"],
    },
    Tool {
        name: "rollback_execution",
        title: "Roll an execution back",
        description: "DESTRUCTIVE: deletes for good every checkpoint of the execution recorded after \
checkpoint_id, which becomes its current checkpoint (the answer says how many were discarded). \
Export or read them first if they matter.",
        needs: write("executions"),
        effect: Effect::Write { destructive: true, idempotent: true },
        arguments: || {
            vec![
                ("execution_id", string("The execution's id (exec_...).")),
                ("checkpoint_id", string("The checkpoint to roll back to (ckpt_...), one of the execution's.")),
            ]
        },
        required: &["execution_id", "checkpoint_id"],
    },
    Tool {
        name: "cancel_execution",
        title: "Cancel an execution",
        description: "DESTRUCTIVE: ends a running or paused execution as cancelled, for good (a \
cancelled execution cannot be replayed). Refused (409) for one that has ended.",
        needs: write("executions"),
        effect: Effect::Write { destructive: true, idempotent: false },
        arguments: || {
            vec![
                ("execution_id", string("The execution's id (exec_...).")),
                ("reason", string("Why, kept on the execution (at most 1000 characters).")),
            ]
        },
        required: &["execution_id"],
    },
    Tool {
        name: "resolve_failure",
        title: "Resolve a failure",
        description: "Marks an open failure resolved (the cause is fixed). A resolved failure stays \
resolved; an ignored one cannot be resolved (409).",
        needs: write("failures"),
        effect: Effect::Write { destructive: false, idempotent: true },
        arguments: || vec![("failure_id", string("The failure's id (fail_...)."))],
        required: &["failure_id"],
    },
    Tool {
        name: "ignore_failure",
        title: "Ignore a failure",
        description: "Marks an open failure ignored (not worth fixing). An ignored failure stays \
ignored; a resolved one cannot be ignored (409).",
        needs: write("failures"),
        effect: Effect::Write { destructive: false, idempotent: true },
        arguments: || vec![("failure_id", string("The failure's id (fail_...)."))],
        required: &["failure_id"],
    },
    Tool {
        name: "get_balance",
        title: "Credit balance",
        description: "The tenant's prepaid credit balance, in credits and in US dollars.",
        needs: read("billing"),
        effect: Effect::Read,
        arguments: Vec::new,
        required: &[],
    },
];

/// The tool named `name`.
#[must_use]
pub fn find(name: &str) -> Option<&'static Tool> {
    TOOLS.iter().find(|tool| tool.name == name)
}

/// The tools a key with `scopes` may call, as `tools/list` answers them.
#[must_use]
pub fn listed(scopes: &Scopes) -> Vec<Value> {
    TOOLS.iter().filter(|tool| scopes.allows(tool.needs)).map(definition).collect()
}

/// A tool as `tools/list` shows it: its input schema and its annotations.
#[must_use]
pub fn definition(tool: &Tool) -> Value {
    let properties: Map<String, Value> =
        (tool.arguments)().into_iter().map(|(name, schema)| (name.to_owned(), schema)).collect();
    let (read_only, destructive, idempotent) = match tool.effect {
        Effect::Read => (true, false, true),
        Effect::Write { destructive, idempotent } => (false, destructive, idempotent),
    };
    json!({
        "name": tool.name,
        "title": tool.title,
        "description": tool.description,
        "inputSchema": {
            "type": "object",
            "properties": properties,
            "required": tool.required,
            "additionalProperties": false,
        },
        "annotations": {
            "title": tool.title,
            "readOnlyHint": read_only,
            "destructiveHint": destructive,
            "idempotentHint": idempotent,
            "openWorldHint": false,
        },
    })
}

/// Runs `tool` for `caller` with `arguments`: its answer, or the API's error for it.
///
/// # Errors
/// What the tool's route would answer: 422 for bad arguments, 404 for an id the tenant
/// does not have, 5xx for storage.
pub async fn run(caller: &Caller<'_>, tool: &Tool, arguments: &Map<String, Value>) -> Result<Value, ApiError> {
    let value = match tool.effect {
        Effect::Read => Box::pin(answer(caller, tool, arguments)).await?,
        Effect::Write { .. } => Box::pin(apply(caller, order(tool, as_query(tool, arguments)?)?)).await?,
    };
    // Where the whole record is read, for what a too long answer leaves out.
    let arg = |name: &str| arguments.get(name).and_then(Value::as_str).unwrap_or_default().to_owned();
    let route = match tool.name {
        "get_workflow" => format!("/api/v1/workflows/{}", arg("workflow_id")),
        name if name.ends_with("_execution") => format!("/api/v1/executions/{}", arg("execution_id")),
        name if name.ends_with("_failure") => format!("/api/v1/failures/{}", arg("failure_id")),
        _ => format!("/api/v1/checkpoints/{}", arg("checkpoint_id")),
    };
    Ok(bounded(value, &route))
}

/// What `tool` answers, before [`bounded`].
async fn answer(caller: &Caller<'_>, tool: &Tool, arguments: &Map<String, Value>) -> Result<Value, ApiError> {
    let mut query = as_query(tool, arguments)?;
    let (state, tenant) = (caller.state, caller.tenant);
    let value = match tool.name {
        "list_workflows" => {
            let filter = ListFilter {
                status: query.one_of("status"),
                workflow_type: query.one_of("workflow_type"),
                name: query.string("name"),
            };
            let page = PageRequest::read(&mut query, 20);
            let after = shared::pagination::starting_after(&mut query);
            query.finish()?;
            let after = after.map(|raw| workflow_id(&raw)).transpose()?;
            let listed = domain::workflows::list(&state.workflows, tenant, filter, page, after.as_ref());
            let (items, total) = Box::pin(listed).await?;
            to_value(&page.respond(items.into_iter().map(WorkflowSummary::from).collect(), total))
        }
        "get_workflow" => {
            let raw = query.required_string("workflow_id");
            query.finish()?;
            let id = workflow_id(&raw.unwrap_or_default())?;
            to_value(&WorkflowBody::from(domain::workflows::load(&state.workflows, tenant, &id).await?))
        }
        "list_executions" => {
            let (list, page) = ListExecutions::from_query(query)?;
            let (items, total) = Box::pin(state.runs.list_executions(tenant, &list)).await?;
            to_value(&page.respond(items.into_iter().map(ExecutionSummary::from).collect(), total))
        }
        "get_execution" => {
            let raw = query.required_string("execution_id");
            query.finish()?;
            let id = execution_id(&raw.unwrap_or_default())?;
            to_value(&ExecutionBody::from(state.runs.load(tenant, &id).await?))
        }
        "list_checkpoints" => {
            let execution = query.required_string("execution_id");
            let descending = query.one_of::<CheckpointOrder>("order") == Some(CheckpointOrder::Desc);
            let window = OffsetRequest::read(&mut query);
            let after = shared::pagination::starting_after(&mut query);
            query.finish()?;
            let execution = execution_id(&execution.unwrap_or_default())?;
            let list = ListCheckpoints {
                descending,
                metadata: std::collections::BTreeMap::new(),
                key: None,
                after,
                after_sequence: None,
                skip: window.offset as usize,
                take: window.limit as usize,
            };
            let listing = Box::pin(state.runs.list_checkpoints(tenant, &execution, &list)).await?;
            let mut value =
                to_value(&window.respond(listing.items.into_iter().map(CheckpointBody::from).collect(), listing.total));
            value["next_starting_after"] = listing.next.map(|id| id.to_string()).into();
            value
        }
        "get_checkpoint" => {
            let raw = query.required_string("checkpoint_id");
            let include_state = query.boolean("include_state", false);
            query.finish()?;
            let raw = raw.unwrap_or_default();
            let id = checkpoint_id(&raw)?;
            let (checkpoint, _) = state.runs.checkpoint(tenant, &id, false).await?;
            let size = checkpoint.state_size_bytes;
            if include_state && size <= STATE_SHOWN_MAX_BYTES {
                let (checkpoint, state) = state.runs.checkpoint(tenant, &id, true).await?;
                let mut body = CheckpointBody::from(checkpoint);
                body.state = state;
                to_value(&body)
            } else {
                let mut value = to_value(&CheckpointBody::from(checkpoint));
                if include_state {
                    value["state_omitted"] = json!({
                        "state_size_bytes": size,
                        "reason": format!(
                            "the state is larger than the {STATE_SHOWN_MAX_BYTES} bytes a tool answers with; \
                    read it with GET /api/v1/checkpoints/{id}?include_state=true"
                        ),
                    });
                }
                value
            }
        }
        "diff_checkpoints" => {
            let from = query.required_string("from_checkpoint_id");
            let to = query.required_string("to_checkpoint_id");
            query.finish()?;
            let from = Box::pin(state_of(caller, "from_checkpoint_id", &from.unwrap_or_default())).await?;
            let to = Box::pin(state_of(caller, "to_checkpoint_id", &to.unwrap_or_default())).await?;
            compared(&from, &to)
        }
        "list_failures" => {
            let (list, window) = ListFailures::from_query(query)?;
            let (items, total) = Box::pin(state.runs.list_failures(tenant, &list)).await?;
            to_value(&window.respond(items.iter().map(FailureItem::from).collect(), total))
        }
        "get_failure" => {
            let raw = query.required_string("failure_id");
            query.finish()?;
            let id = failure_id(&raw.unwrap_or_default())?;
            to_value(&FailureDetail::from(state.runs.failure(tenant, &id).await?))
        }
        "list_failure_groups" => {
            let (list, window) = ListGroups::from_query(query)?;
            let (items, total) = Box::pin(state.runs.failure_groups(tenant, &list, state.clock.as_ref())).await?;
            to_value(&window.respond(items.into_iter().map(GroupBody::from).collect(), total))
        }
        "get_failure_group" => {
            let raw = query.required_string("group_id");
            query.finish()?;
            let raw = raw.unwrap_or_default();
            let id = FailureGroupId::parse(&raw).ok_or_else(|| ApiError::not_found("failure group", raw.as_str()))?;
            to_value(&GroupBody::from(Box::pin(state.runs.failure_group(tenant, &id, state.clock.as_ref())).await?))
        }
        "failure_stats" => {
            query.finish()?;
            let stats = state.runs.failure_stats(tenant, state.clock.as_ref()).await?;
            json!({
                "total_failures": stats.total,
                "open_failures": stats.open,
                "resolved_failures": stats.resolved,
                "ignored_failures": stats.ignored,
                "failure_rate_last_30_days": stats.rate_last_30_days,
            })
        }
        "get_balance" => {
            query.finish()?;
            let credits = state.ledger.balance(tenant).await?;
            json!({"credits_balance": credits, "balance_usd": credits as f64 / 100.0})
        }
        other => return Err(ApiError::internal(format!("tool {other} has no implementation"))),
    };
    Ok(value)
}

/// A checkpoint (named by argument `argument`) and its state, parsed, for a diff.
///
/// # Errors
/// 404 for an unknown checkpoint; 422 naming `argument` for a state too large to compare.
async fn state_of(caller: &Caller<'_>, argument: &str, raw: &str) -> Result<(Checkpoint, Value), ApiError> {
    let id = checkpoint_id(raw)?;
    let (state, tenant) = (caller.state, caller.tenant);
    let (checkpoint, _) = Box::pin(state.runs.checkpoint(tenant, &id, false)).await?;
    if checkpoint.state_size_bytes > STATE_SHOWN_MAX_BYTES {
        let size = checkpoint.state_size_bytes;
        let why = format!("its state is {size} bytes; a diff takes states of at most {STATE_SHOWN_MAX_BYTES} bytes");
        return Err(ApiError::field(argument, why));
    }
    let (checkpoint, raw_state) = Box::pin(state.runs.checkpoint(tenant, &id, true)).await?;
    let value = raw_state.map_or(Ok(Value::Null), |raw| serde_json::from_str(raw.get())).map_err(ApiError::internal)?;
    Ok((checkpoint, value))
}

/// The diff's answer: both checkpoints in brief, the changes and their count.
fn compared(from: &(Checkpoint, Value), to: &(Checkpoint, Value)) -> Value {
    let brief = |c: &Checkpoint| {
        json!({"id": c.id.to_string(), "execution_id": c.execution_id.to_string(), "sequence": c.sequence,
               "name": c.name, "created_at": shared::time::format(c.created_at)})
    };
    let (changes, total) = crate::diff::changes(&from.1, &to.1);
    json!({
        "from": brief(&from.0),
        "to": brief(&to.0),
        "changes_total": total,
        "changes": changes,
        "truncated": total > changes.len(),
    })
}

/// A change a tool asks for, its arguments checked.
enum Order {
    /// A transition of an execution.
    Transition(ExecutionId, Change),
    /// Resolving or ignoring a failure.
    Settle(FailureId, Settlement),
}

/// The change a tool that writes asks for (a plain function: the async one that applies
/// it keeps a small frame, since a transition's futures are deep).
fn order(tool: &Tool, mut query: Query) -> Result<Order, ApiError> {
    let execution = |query: &mut Query| query.required_string("execution_id");
    match tool.name {
        "replay_execution" => {
            let execution = execution(&mut query);
            let from = ReplayFrom::from_query(query)?;
            Ok(Order::Transition(execution_id(&execution.unwrap_or_default())?, Change::Replay(from)))
        }
        "rollback_execution" => {
            let execution = execution(&mut query);
            let checkpoint = query.required_string("checkpoint_id");
            query.finish()?;
            let to = checkpoint_id(&checkpoint.unwrap_or_default())?;
            Ok(Order::Transition(execution_id(&execution.unwrap_or_default())?, Change::Rollback(to)))
        }
        "cancel_execution" => {
            let execution = execution(&mut query);
            let reason = query.string("reason");
            if reason.as_ref().is_some_and(|r| r.chars().count() > REASON_MAX) {
                query.reject("reason", format!("must be at most {REASON_MAX} characters"));
            }
            query.finish()?;
            let cancel = Change::Plain(Action::Cancel { reason });
            Ok(Order::Transition(execution_id(&execution.unwrap_or_default())?, cancel))
        }
        "resolve_failure" | "ignore_failure" => {
            let raw = query.required_string("failure_id");
            query.finish()?;
            let settlement = if tool.name == "resolve_failure" { Settlement::Resolve } else { Settlement::Ignore };
            Ok(Order::Settle(failure_id(&raw.unwrap_or_default())?, settlement))
        }
        other => Err(ApiError::internal(format!("tool {other} is not a write"))),
    }
}

/// Applies `order` and answers what changed as its route does.
async fn apply(caller: &Caller<'_>, order: Order) -> Result<Value, ApiError> {
    let (state, tenant, clock) = (caller.state, caller.tenant, caller.state.clock.as_ref());
    match order {
        Order::Transition(id, change) => {
            let changed = Box::pin(state.runs.transition(tenant, &id, &change, clock, &|_| {})).await?;
            Ok(changed_execution(changed))
        }
        Order::Settle(id, settlement) => {
            let settled = Box::pin(state.runs.settle_failure(tenant, &id, settlement, clock, &|_| {})).await?;
            Ok(settled_failure(&settled))
        }
    }
}

fn changed_execution(changed: domain::runs::Changed) -> Value {
    let mut body = ExecutionBody::from(changed.execution);
    body.discarded_checkpoints = changed.discarded_checkpoints;
    to_value(&body)
}

fn settled_failure(failure: &domain::runs::failures::model::Failure) -> Value {
    json!({
        "id": failure.id.to_string(),
        "status": failure.status.wire(),
        "resolved_at": failure.resolved_at.map(shared::time::format),
    })
}

fn checkpoint_id(raw: &str) -> Result<CheckpointId, ApiError> {
    CheckpointId::parse(raw).ok_or_else(|| ApiError::not_found("checkpoint", raw))
}

/// `arguments` as the query string of the tool's route: strings as they are, numbers
/// and booleans written out, a list as the parameter repeated. A name the tool does not
/// take, or a value of another kind, is a 422 naming it.
fn as_query(tool: &Tool, arguments: &Map<String, Value>) -> Result<Query, ApiError> {
    let known: Vec<&str> = (tool.arguments)().into_iter().map(|(name, _)| name).collect();
    let mut pairs = form_urlencoded::Serializer::new(String::new());
    let mut errors = Vec::new();
    for (name, value) in arguments {
        if !known.contains(&name.as_str()) {
            errors.push(shared::error::FieldError::new(name, "is not an argument of this tool"));
            continue;
        }
        let values = match value {
            Value::Array(items) => items.iter().collect(),
            Value::Null => Vec::new(),
            one => vec![one],
        };
        for value in values {
            match value {
                Value::String(text) => pairs.append_pair(name, text),
                Value::Number(n) => pairs.append_pair(name, &n.to_string()),
                Value::Bool(b) => pairs.append_pair(name, if *b { "true" } else { "false" }),
                _ => {
                    errors.push(shared::error::FieldError::new(name, "must be a string, a number or a boolean"));
                    continue;
                }
            };
        }
    }
    if !errors.is_empty() {
        return Err(ApiError::Validation(errors));
    }
    Ok(Query::parse(Some(&pairs.finish())))
}

fn to_value<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

fn workflow_id(raw: &str) -> Result<WorkflowId, ApiError> {
    WorkflowId::parse(raw).ok_or_else(|| ApiError::not_found("workflow", raw))
}

fn execution_id(raw: &str) -> Result<ExecutionId, ApiError> {
    ExecutionId::parse(raw).ok_or_else(|| ApiError::not_found("execution", raw))
}

fn failure_id(raw: &str) -> Result<FailureId, ApiError> {
    FailureId::parse(raw).ok_or_else(|| ApiError::not_found("failure", raw))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn size(v: &Value) -> usize {
        serde_json::to_vec(v).expect("json").len()
    }

    #[test]
    fn a_page_too_large_shows_the_items_that_fit_and_where_the_rest_starts() {
        let items: Vec<Value> =
            (0..100).map(|i| json!({"id": format!("exec_{i}"), "blob": "\"".repeat(10_000)})).collect();
        let page = json!({"items": items, "total": 100, "page": 1, "page_size": 100});
        let shown = bounded(page, "-");
        assert!(size(&shown) <= ANSWER_MAX_BYTES, "{}", size(&shown));
        let kept = shown["items"].as_array().expect("items");
        assert!(kept.len() > 5 && kept.len() < 100, "{}", kept.len());
        assert_eq!(shown["truncated"]["items_shown"], kept.len());
        assert_eq!(shown["truncated"]["starting_after"], format!("exec_{}", kept.len() - 1));
        assert_eq!(shown["total"], 100, "the rest of the page is as it was");
    }

    #[test]
    fn a_record_too_large_leaves_out_its_largest_fields_and_names_them() {
        let record = json!({"id": "exec_1", "status": "failed", "input": {"v": "x".repeat(200_000)},
                            "output": {"v": "y".repeat(150_000)}, "metadata": {"a": "b"}});
        let shown = bounded(record, "/api/v1/executions/exec_1");
        assert!(size(&shown) <= ANSWER_MAX_BYTES);
        assert_eq!((shown["id"].as_str(), shown["status"].as_str()), (Some("exec_1"), Some("failed")));
        assert!(shown.get("input").is_none(), "the largest field went first");
        assert_eq!(shown["output"]["v"].as_str().map(str::len), Some(150_000), "the next one fitted");
        assert_eq!(shown["omitted_fields"]["bytes"]["input"], 200_008);
        let reason = shown["omitted_fields"]["reason"].as_str().expect("reason");
        assert!(reason.contains("GET /api/v1/executions/exec_1"), "{reason}");
        let small = json!({"id": "exec_2"});
        assert_eq!(bounded(small.clone(), "-"), small, "what fits is untouched");
    }
}
