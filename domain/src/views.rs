//! The API's views of the aggregates: each record as `GET` shows it, in one place, so
//! that every function that answers it and an export that writes it agree.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};
use shared::body::WireEnum;

use crate::retention::Retention;
use crate::runs::checkpoints::model::Checkpoint;
use crate::runs::executions::model::Execution;
use crate::runs::failures::model::{Failure, FailureGroup};
use crate::workflows::model::Workflow;

/// A workflow as a list shows it: a summary, without `definition`.
#[derive(Debug, Serialize)]
pub struct WorkflowSummary {
    id: String,
    name: String,
    description: Option<String>,
    workflow_type: &'static str,
    status: &'static str,
    metadata: BTreeMap<String, String>,
    retention: Option<RetentionBody>,
    version: u64,
    created_at: String,
    updated_at: String,
}

/// A workflow as its own `GET` and every write show it: the summary's fields plus
/// `definition`.
#[derive(Debug, Serialize)]
pub struct WorkflowBody {
    #[serde(flatten)]
    summary: WorkflowSummary,
    definition: Option<Map<String, Value>>,
}

/// A workflow's own retention on the wire.
#[derive(Debug, Serialize)]
struct RetentionBody {
    executions_days: Option<u32>,
    checkpoints: &'static str,
    checkpoints_days: Option<u32>,
}

impl From<&Retention> for RetentionBody {
    fn from(r: &Retention) -> Self {
        Self {
            executions_days: r.executions_days,
            checkpoints: r.checkpoints.wire(),
            checkpoints_days: r.checkpoints_days,
        }
    }
}

impl From<Workflow> for WorkflowBody {
    fn from(mut w: Workflow) -> Self {
        let definition = w.definition.take();
        Self { summary: w.into(), definition }
    }
}

impl From<Workflow> for WorkflowSummary {
    fn from(w: Workflow) -> Self {
        Self {
            id: w.id.to_string(),
            name: w.name,
            description: w.description,
            workflow_type: w.workflow_type.wire(),
            status: w.status.wire(),
            metadata: w.metadata,
            retention: w.retention.as_ref().map(RetentionBody::from),
            version: w.version,
            created_at: shared::time::format(w.created_at),
            updated_at: shared::time::format(w.updated_at),
        }
    }
}

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
    key: Option<String>,
    metadata: BTreeMap<String, String>,
    tags: BTreeMap<String, String>,
    attempt: u32,
    current_checkpoint_id: Option<String>,
    checkpoint_count: u64,
    created_at: String,
    updated_at: String,
    ended_at: Option<String>,
    expires_at: Option<String>,
    checkpoints_expire_at: Option<String>,
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
    pub discarded_checkpoints: Option<u64>,
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
            key: e.key,
            metadata: e.metadata,
            tags: e.tags,
            attempt: e.attempt,
            current_checkpoint_id: e.current_checkpoint_id.map(|c| c.to_string()),
            checkpoint_count: e.checkpoint_count,
            created_at: shared::time::format(e.created_at),
            updated_at: shared::time::format(e.updated_at),
            ended_at: e.ended_at.map(shared::time::format),
            expires_at: e.expires_at.map(shared::time::format),
            checkpoints_expire_at: e.checkpoints_expire_at.map(shared::time::format),
        }
    }
}

/// A checkpoint as the API shows it.
#[derive(Debug, Serialize)]
pub struct CheckpointBody {
    id: String,
    execution_id: String,
    workflow_id: String,
    sequence: u64,
    name: Option<String>,
    key: Option<String>,
    parent_checkpoint_id: Option<String>,
    attempt: u32,
    metadata: BTreeMap<String, String>,
    state_size_bytes: u64,
    created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<Box<serde_json::value::RawValue>>,
}

impl From<Checkpoint> for CheckpointBody {
    fn from(c: Checkpoint) -> Self {
        Self {
            id: c.id.to_string(),
            execution_id: c.execution_id.to_string(),
            workflow_id: c.workflow_id.to_string(),
            sequence: c.sequence,
            name: c.name,
            key: c.key,
            parent_checkpoint_id: c.parent_checkpoint_id.map(|p| p.to_string()),
            attempt: c.attempt,
            metadata: c.metadata,
            state_size_bytes: c.state_size_bytes,
            created_at: shared::time::format(c.created_at),
            state: None,
        }
    }
}

/// A failure in a list.
#[derive(Debug, Serialize)]
pub struct FailureItem {
    id: String,
    execution_id: String,
    workflow_id: String,
    error_type: String,
    message: String,
    status: &'static str,
    created_at: String,
    resolved_at: Option<String>,
    resolved_by: Option<&'static str>,
    group_id: String,
    fingerprint: String,
}

impl From<&Failure> for FailureItem {
    fn from(f: &Failure) -> Self {
        Self {
            id: f.id.to_string(),
            execution_id: f.execution_id.to_string(),
            workflow_id: f.workflow_id.to_string(),
            error_type: f.error_type.clone(),
            message: f.message.clone(),
            status: f.status.wire(),
            created_at: shared::time::format(f.created_at),
            resolved_at: f.resolved_at.map(shared::time::format),
            resolved_by: f.resolved_by.map(WireEnum::wire),
            group_id: f.group_id.to_string(),
            fingerprint: f.fingerprint.clone(),
        }
    }
}

/// A recovery command on the wire.
#[derive(Debug, Serialize)]
struct CommandBody {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    status: &'static str,
}

/// A failure in detail.
#[derive(Debug, Serialize)]
pub struct FailureDetail {
    #[serde(flatten)]
    item: FailureItem,
    details: Map<String, Value>,
    recovery_commands: Vec<CommandBody>,
}

impl From<Failure> for FailureDetail {
    fn from(f: Failure) -> Self {
        Self {
            item: FailureItem::from(&f),
            recovery_commands: f
                .recovery_commands
                .iter()
                .map(|c| CommandBody { id: c.id.to_string(), kind: c.kind.clone(), status: c.status.wire() })
                .collect(),
            details: f.details,
        }
    }
}

/// A failure group on the wire (`GET /failures/groups/{id}`, its list, the MCP tools).
#[derive(Debug, Serialize)]
pub struct GroupBody {
    id: String,
    status: &'static str,
    workflow_id: String,
    error_type: String,
    agent_name: Option<String>,
    fingerprint: String,
    sample_message: String,
    counts: GroupCounts,
    resolved_by: Option<&'static str>,
    first_seen: String,
    last_seen: String,
    failures_per_hour: [u64; crate::runs::failures::model::GROUP_HOURS],
}

/// A group's failures by status.
#[derive(Debug, Serialize)]
struct GroupCounts {
    total: u64,
    open: u64,
    resolved: u64,
    ignored: u64,
}

impl From<FailureGroup> for GroupBody {
    fn from(g: FailureGroup) -> Self {
        let [open, resolved, ignored] = g.counts;
        Self {
            id: g.id.to_string(),
            status: g.status().wire(),
            workflow_id: g.workflow_id.to_string(),
            counts: GroupCounts { total: open + resolved + ignored, open, resolved, ignored },
            resolved_by: g.resolved_by().map(WireEnum::wire),
            error_type: g.error_type,
            agent_name: g.agent_name,
            fingerprint: g.fingerprint,
            sample_message: g.sample_message,
            first_seen: shared::time::format(g.first_seen),
            last_seen: shared::time::format(g.last_seen),
            failures_per_hour: g.per_hour,
        }
    }
}
