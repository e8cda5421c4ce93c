//! Events: what a change reports to webhook endpoints, and the outbox that carries them.
//!
//! A change that reports events writes one outbox item (table `events`) in its own
//! transaction: no event for a change that did not commit, no change without its events.
//! The table's stream hands each new item to the `dispatcher`, which fans it out to the
//! tenant's endpoints; however many endpoints a tenant has, the request writes one item.
//! The items of a tenant are spread over [`SHARDS`] partitions (`ten_…#07`, by the first
//! event's id), so that no partition takes every change of a busy tenant; nothing reads
//! them but the stream.

use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use shared::TenantId;
use shared::body::WireEnum;
use shared::dynamo::{Part, StoreError, Table, Tables, Transaction, built, n, s};
use shared::ids::{CheckpointId, EndpointId, EventId, ExecutionId};

use crate::runs::checkpoints::model::Checkpoint;
use crate::runs::executions::model::Execution;
use crate::runs::failures::model::Failure;

/// How long an outbox item is kept (its stream record lives 24 hours).
pub const OUTBOX_DAYS: i64 = 7;

/// The kinds of event, as named on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventType {
    /// An execution was started.
    #[serde(rename = "execution.started")]
    ExecutionStarted,
    /// An execution completed.
    #[serde(rename = "execution.completed")]
    ExecutionCompleted,
    /// An execution failed.
    #[serde(rename = "execution.failed")]
    ExecutionFailed,
    /// An execution was paused.
    #[serde(rename = "execution.paused")]
    ExecutionPaused,
    /// An execution was cancelled.
    #[serde(rename = "execution.cancelled")]
    ExecutionCancelled,
    /// An execution was replayed.
    #[serde(rename = "execution.replayed")]
    ExecutionReplayed,
    /// An execution was rolled back to one of its checkpoints.
    #[serde(rename = "execution.rolled_back")]
    ExecutionRolledBack,
    /// A failure was recorded.
    #[serde(rename = "failure.created")]
    FailureCreated,
    /// A failure was resolved (by hand, or by its execution's completion).
    #[serde(rename = "failure.resolved")]
    FailureResolved,
    /// A failure was ignored.
    #[serde(rename = "failure.ignored")]
    FailureIgnored,
    /// Credits were added (a top-up, a paid invoice, a grant).
    #[serde(rename = "credits.added")]
    CreditsAdded,
    /// A charge took the balance below the tenant's low-balance threshold.
    #[serde(rename = "credits.low")]
    CreditsLow,
    /// A checkpoint was recorded. Opt-in: only endpoints that list it receive it.
    #[serde(rename = "checkpoint.created")]
    CheckpointCreated,
    /// A bulk job ended: completed (every matched execution reached) or failed.
    #[serde(rename = "bulk.completed")]
    BulkCompleted,
    /// A test event (`POST /webhook-endpoints/{id}/test`), for its endpoint alone.
    #[serde(rename = "webhook.test")]
    WebhookTest,
}

impl EventType {
    /// Every type an endpoint may subscribe to.
    pub const SUBSCRIBABLE: [Self; 14] = [
        Self::ExecutionStarted,
        Self::ExecutionCompleted,
        Self::ExecutionFailed,
        Self::ExecutionPaused,
        Self::ExecutionCancelled,
        Self::ExecutionReplayed,
        Self::ExecutionRolledBack,
        Self::FailureCreated,
        Self::FailureResolved,
        Self::FailureIgnored,
        Self::CreditsAdded,
        Self::CreditsLow,
        Self::CheckpointCreated,
        Self::BulkCompleted,
    ];

    /// The wire name.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ExecutionStarted => "execution.started",
            Self::ExecutionCompleted => "execution.completed",
            Self::ExecutionFailed => "execution.failed",
            Self::ExecutionPaused => "execution.paused",
            Self::ExecutionCancelled => "execution.cancelled",
            Self::ExecutionReplayed => "execution.replayed",
            Self::ExecutionRolledBack => "execution.rolled_back",
            Self::FailureCreated => "failure.created",
            Self::FailureResolved => "failure.resolved",
            Self::FailureIgnored => "failure.ignored",
            Self::CreditsAdded => "credits.added",
            Self::CreditsLow => "credits.low",
            Self::CheckpointCreated => "checkpoint.created",
            Self::BulkCompleted => "bulk.completed",
            Self::WebhookTest => "webhook.test",
        }
    }

    /// Whether only endpoints that name this type receive it (an endpoint with no
    /// `event_types` receives every other type): a checkpoint per step is many more
    /// events than a receiver of execution changes expects.
    #[must_use]
    pub fn opt_in(self) -> bool {
        self == Self::CheckpointCreated
    }

    /// The subscribable type named `raw`.
    #[must_use]
    pub fn parse(raw: &str) -> Option<Self> {
        Self::SUBSCRIBABLE.into_iter().find(|t| t.as_str() == raw)
    }
}

/// One event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Its id: the `webhook-id` of every delivery of it.
    pub id: EventId,
    /// Its kind.
    #[serde(rename = "type")]
    pub kind: EventType,
    /// When the change happened.
    pub created_at: String,
    /// The summary of the resource it is about.
    pub data: Value,
    /// The workflow it concerns, for endpoints that filter by workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<String>,
    /// The one endpoint it is for (test events); otherwise every subscribed one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_id: Option<EndpointId>,
}

impl Event {
    fn new(kind: EventType, at: DateTime<Utc>, data: Value, workflow_id: Option<String>) -> Self {
        Self {
            id: EventId::generate_at(at),
            kind,
            created_at: shared::time::format(at),
            data,
            workflow_id,
            endpoint_id: None,
        }
    }

    /// The event of an execution's change.
    #[must_use]
    pub fn execution(kind: EventType, execution: &Execution, at: DateTime<Utc>) -> Self {
        let data = json!({
            "id": execution.id,
            "workflow_id": execution.workflow_id,
            "status": execution.status.wire(),
            "attempt": execution.attempt,
            "key": execution.key,
            "current_checkpoint_id": execution.current_checkpoint_id,
            "error": execution.error.as_ref().map(|e| json!({"error_type": e.error_type, "message": e.message})),
            "created_at": shared::time::format(execution.created_at),
            "updated_at": shared::time::format(execution.updated_at),
        });
        Self::new(kind, at, data, Some(execution.workflow_id.to_string()))
    }

    /// The event of a failure's change.
    #[must_use]
    pub fn failure(kind: EventType, failure: &Failure, at: DateTime<Utc>) -> Self {
        let data = json!({
            "id": failure.id,
            "execution_id": failure.execution_id,
            "workflow_id": failure.workflow_id,
            "error_type": failure.error_type,
            "status": failure.status.wire(),
            "resolved_by": failure.resolved_by.map(WireEnum::wire),
            "group_id": failure.group_id,
            "created_at": shared::time::format(failure.created_at),
        });
        Self::new(kind, at, data, Some(failure.workflow_id.to_string()))
    }

    /// The event of a balance change: `credits.added` (with the transaction) or
    /// `credits.low` (with the threshold crossed).
    #[must_use]
    pub fn credits(kind: EventType, entry: &crate::credits::Entry, threshold: i64, at: DateTime<Utc>) -> Self {
        let data = json!({
            "transaction_id": entry.id,
            "type": entry.kind,
            "amount": entry.amount,
            "credits_before": entry.credits_before,
            "credits_balance": entry.credits_after,
            "low_balance_threshold": threshold,
        });
        Self::new(kind, at, data, None)
    }

    /// The event of a checkpoint's creation. Its id is the checkpoint's own (`cp_<hex>`
    /// as `evt_<hex>`), so every reading of the checkpoint's stream record makes the
    /// same event.
    #[must_use]
    pub fn checkpoint(checkpoint: &Checkpoint) -> Self {
        let data = json!({
            "id": checkpoint.id,
            "execution_id": checkpoint.execution_id,
            "workflow_id": checkpoint.workflow_id,
            "sequence": checkpoint.sequence,
            "name": checkpoint.name,
            "key": checkpoint.key,
            "parent_checkpoint_id": checkpoint.parent_checkpoint_id,
            "attempt": checkpoint.attempt,
            "state_size_bytes": checkpoint.state_size_bytes,
            "created_at": shared::time::format(checkpoint.created_at),
        });
        let event = Self::new(
            EventType::CheckpointCreated,
            checkpoint.created_at,
            data,
            Some(checkpoint.workflow_id.to_string()),
        );
        event.identified_as(checkpoint.id.as_str(), CheckpointId::PREFIX)
    }

    /// The `execution.started` event of `execution`, reported by the executions table's
    /// stream from the item its start wrote. Its id is the execution's own (`exec_<hex>`
    /// as `evt_<hex>`), so every reading of the record makes the same event.
    #[must_use]
    pub fn execution_started(execution: &Execution) -> Self {
        let event = Self::execution(EventType::ExecutionStarted, execution, execution.created_at);
        event.identified_as(execution.id.as_str(), ExecutionId::PREFIX)
    }

    /// This event with the id of the item it reports (`<prefix>_<hex>` as `evt_<hex>`).
    fn identified_as(self, id: &str, prefix: &str) -> Self {
        let hex = id.trim_start_matches(prefix).trim_start_matches('_');
        match EventId::parse(&format!("{}_{hex}", EventId::PREFIX)) {
            Some(id) => Self { id, ..self },
            None => self,
        }
    }

    /// The event of a bulk job's end (`bulk.completed`), with its tally.
    #[must_use]
    pub fn bulk(job: &crate::runs::bulk::model::BulkJob, at: DateTime<Utc>) -> Self {
        use shared::body::WireEnum;
        let data = json!({
            "id": job.id,
            "action": job.action.wire(),
            "status": job.status.wire(),
            "matched": job.matched,
            "done": job.tally.done,
            "skipped": job.tally.skipped.values().sum::<u64>(),
            "failed": job.tally.failed.values().sum::<u64>(),
            "error": job.error,
            "created_at": shared::time::format(job.created_at),
            "ended_at": job.ended_at.map(shared::time::format),
        });
        Self::new(EventType::BulkCompleted, at, data, job.filter.workflow_id.as_ref().map(ToString::to_string))
    }

    /// A test event for endpoint `endpoint` alone.
    #[must_use]
    pub fn test(endpoint: &EndpointId, at: DateTime<Utc>) -> Self {
        let data = json!({"endpoint_id": endpoint, "message": "a test event from Cairn"});
        Self { endpoint_id: Some(endpoint.clone()), ..Self::new(EventType::WebhookTest, at, data, None) }
    }

    /// The body every receiver gets: `type`, `id`, `created_at` and `data`.
    #[must_use]
    pub fn body(&self) -> String {
        json!({"type": self.kind.as_str(), "id": self.id, "created_at": self.created_at, "data": self.data}).to_string()
    }
}

/// How many partitions a tenant's outbox items are spread over.
pub const SHARDS: u8 = 16;

/// The partition of the outbox item whose first event is `first`: the tenant's shard of
/// the id's last hex digit, random in a generated id; the tenant's own while the new
/// layouts are switched off (`PARTITIONS=tenant`, an upgrade's first deploy,
/// while an earlier dispatcher that reads only that may run).
fn partition(tenant: &TenantId, first: &EventId) -> String {
    if !shared::config::spread() {
        return tenant.as_str().to_owned();
    }
    let digit = first.as_str().bytes().last().and_then(|b| char::from(b).to_digit(16)).unwrap_or(0);
    format!("{}#{digit:02}", tenant.as_str())
}

/// Adds the outbox item of `events` (nothing when there are none) to `tx`.
///
/// # Errors
/// A [`StoreError`] when the item cannot be built.
pub fn stage(tx: &mut Transaction, tables: &Tables, tenant: &TenantId, events: &[Event]) -> Result<(), StoreError> {
    let Some(first) = events.first() else { return Ok(()) };
    let expires = Utc::now() + Duration::days(OUTBOX_DAYS);
    let encoded = serde_json::to_string(events).map_err(|e| StoreError::Other(e.into()))?;
    let put = Put::builder()
        .table_name(tables.name(Table::Events))
        .item("tenant_id", s(partition(tenant, &first.id)))
        .item("event_id", s(first.id.as_str()))
        .item("events", s(encoded))
        .item("expires_at", n(expires.timestamp()))
        .condition_expression("attribute_not_exists(event_id)");
    tx.push(Part::Outbox, TransactWriteItem::builder().put(built(put.build())?).build());
    Ok(())
}

/// The events of an outbox item's `events` attribute.
///
/// # Errors
/// [`StoreError::Corrupt`] when it is not what [`stage`] writes.
pub fn decode(encoded: &str) -> Result<Vec<Event>, StoreError> {
    serde_json::from_str(encoded).map_err(|e| StoreError::Corrupt(format!("outbox item: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::ids::{ExecutionId, WorkflowId};

    #[test]
    fn a_failure_event_names_the_failures_group() {
        let now = Utc::now();
        let failure = Failure::record(
            ExecutionId::generate(),
            WorkflowId::generate(),
            "TOOL_ERROR".to_owned(),
            "timed out after 30s".to_owned(),
            serde_json::Map::new(),
            now,
        );
        let event = Event::failure(EventType::FailureCreated, &failure, now);
        let data = serde_json::to_value(&event).expect("json")["data"].clone();
        assert_eq!(data["group_id"], failure.group_id.as_str());
        assert_eq!(data["id"], failure.id.as_str());
    }
}
