//! Runs: executions, their checkpoints and their failures, one consistency boundary.
//!
//! [`Runs`] holds the operations, one per request a function serves. A write reads what
//! it needs, asks the model, stages every effect (the execution, its failure records, its
//! charge, its counters, its checkpoint changes) into one `Transaction` conditioned on
//! what it read, commits, and on a lost race does it all again through `retry_races`.
//! A read makes the DynamoDB calls its answer needs and no more, at once where one does
//! not depend on another (a tenant's round trips per request are tested).
//!
//! This file is the surface: [`Runs`] and what its operations take and answer. Each
//! aggregate is a directory with its model (pure rules), its store (DynamoDB) and, in
//! its `mod.rs`, its operations:
//! - [`executions`]: [`Runs::start`], [`Runs::load`], [`Runs::list_executions`],
//!   [`Runs::transition`] (complete, fail, pause, cancel, replay, rollback);
//! - [`checkpoints`]: [`Runs::record_checkpoint`], [`Runs::checkpoint`],
//!   [`Runs::list_checkpoints`], [`Runs::delete_checkpoint`], [`Runs::put_writes`],
//!   [`Runs::checkpoint_writes`];
//! - [`failures`]: [`Runs::failure`], [`Runs::list_failures`], [`Runs::failure_stats`],
//!   [`Runs::settle_failure`].
//!
//! Beside them: `rollback` plans what a rollback discards (`rollback::plan_rollback`,
//! a pure function), [`deletion`] deletes what deletions and rollbacks leave, hidden from
//! clients meanwhile ([`Runs::delete`], [`Runs::finish_deletions`], the janitor's work),
//! [`expiry`] deletes what the tenant's retention says has expired ([`Runs::expire`]),
//! and `storage` holds what the stores share.

pub mod bulk;
pub mod checkpoints;
pub mod deletion;
pub mod executions;
pub mod expiry;
pub mod export;
pub mod failures;
pub mod preview;
pub mod requests;
mod rollback;
mod storage;

use std::collections::BTreeMap;

use aws_sdk_dynamodb::Client;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use shared::dynamo::Tables;
use shared::ids::{CheckpointId, ExecutionId, FailureId, WorkflowId};

use self::checkpoints::model::Checkpoint;
use self::checkpoints::store::CheckpointStore;
use self::deletion::HiddenStore;
use self::executions::model::{Action, Execution, ExecutionError, ExecutionStatus};
use self::executions::store::ExecutionStore;
use self::failures::model::FailureStatus;
use self::failures::store::FailureStore;
use crate::Error;
use crate::credits::Ledger;
use crate::retention::{Retention, RetentionStore, Standing};
use crate::workflows::store::WorkflowStore;
use shared::TenantId;

pub use self::storage::MAX_COUNTED;
pub use crate::BeforeCommit;

/// The run operations over their stores.
#[derive(Debug, Clone)]
pub struct Runs {
    /// Executions and their key pointers.
    executions: ExecutionStore,
    /// Checkpoints, their states and writes.
    checkpoints: CheckpointStore,
    /// Failures.
    failures: FailureStore,
    /// Purge markers and the tenant's hidden item.
    hidden: HiddenStore,
    /// Workflows (a start needs an active one).
    workflows: WorkflowStore,
    /// The credit ledger (starts and replays are charged).
    ledger: Ledger,
    /// Credits per start and per replay.
    execution_cost: i64,
    /// Bulk jobs and their markers.
    jobs: self::bulk::store::JobStore,
    /// The tenants' retention settings (an ending reads them).
    retention: RetentionStore,
    /// Exports and their parts.
    exports: self::export::store::ExportStore,
    /// How executions started now are stored and reported.
    settings: StartSettings,
}

/// How executions started now are stored and reported: the deploy's settings
/// ([`shared::config`]), which an operator turns back before rolling the code back
/// (docs/operations.md, upgrading).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartSettings {
    /// Whether they keep their checkpoint progress in a head item (`EXECUTION_HEADS`).
    pub heads: bool,
    /// Whether their `execution.started` is read from the executions table's stream
    /// rather than written to the outbox (`STARTED_EVENTS`).
    pub started_on_stream: bool,
    /// Whether each of their checkpoints is one entry, found by its id
    /// (`CHECKPOINT_ENTRIES`).
    pub one_checkpoint_entry: bool,
}

impl StartSettings {
    /// The deploy's, from the environment.
    #[must_use]
    pub fn from_config() -> Self {
        Self {
            heads: shared::config::execution_heads(),
            started_on_stream: shared::config::started_on_stream(),
            one_checkpoint_entry: shared::config::one_checkpoint_entry(),
        }
    }
}

impl Runs {
    /// Over one client and the named tables; starts and replays cost `execution_cost`.
    #[must_use]
    pub fn new(client: Client, tables: Tables, execution_cost: i64) -> Self {
        Self {
            executions: ExecutionStore::new(client.clone(), tables.clone()),
            checkpoints: CheckpointStore::new(client.clone(), tables.clone()),
            failures: FailureStore::new(client.clone(), tables.clone()),
            hidden: HiddenStore::new(client.clone(), tables.clone()),
            workflows: WorkflowStore::new(client.clone(), tables.clone()),
            jobs: self::bulk::store::JobStore::new(client.clone(), tables.clone()),
            retention: RetentionStore::new(client.clone(), tables.clone()),
            exports: self::export::store::ExportStore::new(client.clone(), tables.clone()),
            ledger: Ledger::new(client, tables),
            execution_cost,
            settings: StartSettings::from_config(),
        }
    }

    /// These runs, starting executions with `settings` rather than the deploy's.
    #[must_use]
    pub fn with_settings(mut self, settings: StartSettings) -> Self {
        self.settings = settings;
        self
    }

    /// The tenant's retention settings and plan.
    ///
    /// # Errors
    /// The read's storage error.
    pub async fn retention(&self, tenant: &TenantId) -> Result<Standing, Error> {
        Ok(self.retention.read(tenant).await?)
    }

    /// Sets the tenant's retention settings (checked by the caller against its plan:
    /// [`crate::retention::Retention::problems`]); they apply to executions that end
    /// from now on.
    ///
    /// # Errors
    /// The write's storage error.
    pub async fn set_retention(&self, tenant: &TenantId, retention: &Retention) -> Result<(), Error> {
        Ok(self.retention.write(tenant, retention).await?)
    }

    /// The client, to commit transactions with.
    fn client(&self) -> &Client {
        self.executions.client()
    }
}

// ---- executions ----

/// What a client asks to start.
#[derive(Debug, Clone)]
pub struct NewExecution {
    /// The workflow to run.
    pub workflow_id: WorkflowId,
    /// The client's key for it, unique within the workflow.
    pub key: Option<String>,
    /// Its input.
    pub input: Option<Value>,
    /// String labels.
    pub metadata: BTreeMap<String, String>,
    /// Tags, checked (`shared::tags`).
    pub tags: BTreeMap<String, String>,
}

/// What a start did.
#[derive(Debug)]
pub enum Started {
    /// It started this new execution.
    New(Execution),
    /// An execution of the workflow already had the key: this one, unchanged.
    Existing(Execution),
}

/// Which executions a list shows ([`Runs::list_executions`]). Ids the client sent are
/// checked in this order: the cursor, then the workflow.
#[derive(Debug, Clone, Default)]
pub struct ListExecutions {
    /// Only this status.
    pub status: Option<ExecutionStatus>,
    /// Only this workflow's, as the client named it: 404 unless the tenant has the
    /// workflow or has had executions of it.
    pub workflow: Option<String>,
    /// Only those created after this instant.
    pub created_after: Option<DateTime<Utc>>,
    /// Only those created before this instant.
    pub created_before: Option<DateTime<Utc>>,
    /// With `workflow`: only the execution with this key (at most one).
    pub key: Option<String>,
    /// Only those with every one of these tags (keys distinct).
    pub tags: Vec<(String, String)>,
    /// Only those after this execution of the tenant, newest first (404 for any other).
    pub after: Option<ExecutionId>,
    /// Items skipped.
    pub skip: usize,
    /// Items shown at most.
    pub take: usize,
}

/// A change to an execution as a client asks for it, before it is resolved against
/// the execution's current state.
#[derive(Debug, Clone)]
pub enum Change {
    /// Complete, pause or cancel.
    Plain(Action),
    /// Fail, recording a failure with these details.
    Fail {
        /// The error.
        error: ExecutionError,
        /// Free-form details for the failure record.
        details: Map<String, Value>,
    },
    /// Replay from here.
    Replay(ReplayFrom),
    /// Roll back to this checkpoint of the execution.
    Rollback(CheckpointId),
}

/// Where a replay starts.
#[derive(Debug, Clone)]
pub enum ReplayFrom {
    /// The execution's current checkpoint (the default).
    Current,
    /// The start.
    Start,
    /// This checkpoint of the execution.
    Checkpoint(CheckpointId),
}

/// An execution after a [`Change`].
#[derive(Debug)]
pub struct Changed {
    /// The execution as it is now.
    pub execution: Execution,
    /// For a rollback: how many checkpoints it discarded.
    pub discarded_checkpoints: Option<u64>,
}

/// What a deletion request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleted {
    /// Everything is gone.
    Done,
    /// The execution is gone; some of its checkpoints are still to be deleted.
    More,
}

// ---- checkpoints ----

/// A checkpoint as a client asks for it: everything but what the execution decides.
#[derive(Debug, Clone)]
pub struct NewCheckpoint {
    /// Its id (made by the caller, so that it can be known before the commit).
    pub id: CheckpointId,
    /// The node or step.
    pub name: Option<String>,
    /// The client's name for it, unique within the execution.
    pub key: Option<String>,
    /// String labels.
    pub metadata: BTreeMap<String, String>,
    /// Writes stored on an earlier checkpoint of the execution in the same transaction
    /// (a framework's writes of the step this checkpoint ends).
    pub pending_writes: Option<PendingWrites>,
}

/// Writes for checkpoint `checkpoint_id`, sent with a later checkpoint of its execution.
#[derive(Debug, Clone)]
pub struct PendingWrites {
    /// The checkpoint they go to.
    pub checkpoint_id: CheckpointId,
    /// The writes, as `POST /checkpoints/{id}/writes` takes them.
    pub writes: Vec<self::checkpoints::writes::Write>,
}

/// What recording a checkpoint did.
#[derive(Debug)]
pub enum Recorded {
    /// It recorded this new checkpoint.
    New(Checkpoint),
    /// A checkpoint of the execution already had the key: this one, unchanged.
    Existing(Checkpoint),
}

/// Which checkpoints of an execution a list shows ([`Runs::list_checkpoints`]).
#[derive(Debug, Clone, Default)]
pub struct ListCheckpoints {
    /// Highest sequence first (else lowest first).
    pub descending: bool,
    /// Only those whose metadata has each of these values.
    pub metadata: BTreeMap<String, String>,
    /// Only the checkpoint with this key (at most one).
    pub key: Option<String>,
    /// Only those after this checkpoint in the list's order, as the client named it: 404
    /// unless it is a checkpoint of the execution a client may see.
    pub after: Option<String>,
    /// Only those after this sequence in the list's order, whether or not a checkpoint
    /// has it now (an export's cursor, which a deletion meanwhile must not lose).
    pub after_sequence: Option<u64>,
    /// Items skipped.
    pub skip: usize,
    /// Items shown at most.
    pub take: usize,
}

/// A window of an execution's checkpoints.
#[derive(Debug, Clone)]
pub struct CheckpointListing {
    /// What the window shows.
    pub items: Vec<Checkpoint>,
    /// How many the whole list holds (a metadata-filtered total counts at most
    /// [`MAX_COUNTED`]).
    pub total: u64,
    /// Where the next window starts: the last checkpoint of a full window, or the last one
    /// a metadata-filtered list examined; `None` at the end.
    pub next: Option<CheckpointId>,
}

// ---- failures ----

/// Which failures a list shows ([`Runs::list_failures`]).
#[derive(Debug, Clone, Default)]
pub struct ListFailures {
    /// Only this status.
    pub status: Option<FailureStatus>,
    /// Only this group's (404 unless the tenant has a failure in it).
    pub group: Option<shared::ids::FailureGroupId>,
    /// Only those created after this instant.
    pub created_after: Option<DateTime<Utc>>,
    /// Only those created before this instant.
    pub created_before: Option<DateTime<Utc>>,
    /// Only those after this failure of the tenant, newest first (404 for any other).
    pub after: Option<FailureId>,
    /// Items skipped.
    pub skip: usize,
    /// Items shown at most.
    pub take: usize,
}

/// What a list of failure groups asks for ([`Runs::failure_groups`]).
#[derive(Debug, Clone, Default)]
pub struct ListGroups {
    /// Only groups in this status (open: a failure of it is open).
    pub status: Option<FailureStatus>,
    /// Only this workflow's groups.
    pub workflow: Option<shared::ids::WorkflowId>,
    /// Only groups last seen after this instant.
    pub seen_after: Option<DateTime<Utc>>,
    /// Only groups first seen before this instant.
    pub seen_before: Option<DateTime<Utc>>,
    /// Groups skipped.
    pub skip: usize,
    /// Groups shown at most.
    pub take: usize,
}

/// Days in the window of [`FailureStats::rate_last_30_days`] (today, UTC, and the 29
/// before).
pub const RATE_WINDOW_DAYS: i64 = 30;

/// The tenant's failure statistics ([`Runs::failure_stats`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FailureStats {
    /// Failures recorded.
    pub total: u64,
    /// Of them, open.
    pub open: u64,
    /// Resolved.
    pub resolved: u64,
    /// Ignored.
    pub ignored: u64,
    /// Failures per attempt (start or replay) in the last [`RATE_WINDOW_DAYS`] days, at
    /// most 1.
    pub rate_last_30_days: f64,
}

// ---- deletion ----

/// What one run of [`Runs::finish_deletions`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Janitored {
    /// Deletions it finished.
    pub finished: usize,
    /// Deletion rounds it ran (each at most [`deletion::PURGE_CHECKPOINTS`] checkpoints).
    pub rounds: usize,
    /// Deletions that failed (logged; the next run tries them again).
    pub failed: usize,
    /// Whether it stopped for time with deletions left.
    pub stopped: bool,
}
