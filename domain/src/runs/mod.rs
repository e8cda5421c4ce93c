//! Runs: executions, their checkpoints and their failures, one consistency boundary.
//!
//! [`Runs`] holds the operations (start, transition, record a checkpoint, settle a
//! failure). Each reads what it needs, asks the model, stages every effect (the
//! execution, its failure records, its charge, its counters, its checkpoint changes)
//! into one [`Transaction`] conditioned on what it read, commits, and on a lost race
//! does it all again through [`retry_races`].

pub mod checkpoint;
pub mod failure;
pub mod model;
pub mod store;

use std::collections::BTreeMap;

use aws_sdk_dynamodb::Client;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use shared::TenantId;
use shared::counters::CounterChange;
use shared::dynamo::{Attempt, MAX_TRANSACTION_BYTES, Part, Tables, Transaction, TransactionError, retry_races};
use shared::ids::{CheckpointId, ExecutionId, FailureId, WorkflowId};
use shared::time::Clock;

use self::checkpoint::{Checkpoint, CheckpointStore, Entry, LAST_SEQUENCE, ListWindow, PackedState, StoredCheckpoint};
use self::failure::{CommandStatus, Failure, FailureStatus, Settlement};
use self::model::{Action, Discarded, Execution, ExecutionError, ExecutionStatus};
use self::store::{ExecutionStore, UnfinishedDeletion};
use crate::Error;
use crate::credits::{EntryType, Ledger, NewEntry};
use crate::workflows::model::WorkflowStatus;
use crate::workflows::store::WorkflowStore;

/// Operations one transaction may hold besides a rollback's deletions.
const ROLLBACK_BATCH: usize = 80;
/// Operations one transaction of a deletion's purge holds at most.
pub const PURGE_BATCH: usize = ROLLBACK_BATCH;

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
}

pub use crate::BeforeCommit;

/// What a start did.
#[derive(Debug)]
pub enum Started {
    /// It started this new execution.
    New(Execution),
    /// An execution of the workflow already had the key: this one, unchanged.
    Existing(Execution),
}

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
}

/// What recording a checkpoint did.
#[derive(Debug)]
pub enum Recorded {
    /// It recorded this new checkpoint.
    New(Checkpoint),
    /// A checkpoint of the execution already had the key: this one, unchanged.
    Existing(Checkpoint),
}

/// What a deletion request did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Deleted {
    /// Everything is gone.
    Done,
    /// The execution is gone; some of its checkpoints are still to be deleted.
    More,
}

/// Checkpoints one deletion request deletes at most (its cost stays bounded: about
/// [`PURGE_BATCH`]-operation transactions of a few checkpoints each).
pub const PURGE_CHECKPOINTS: usize = 200;

/// How long a deletion's purge marker stands before the janitor finishes the deletion
/// itself: a client that sends DELETE again after each 202 deletes 200 checkpoints a
/// request and is done by then (120,000 checkpoints in ten minutes at one request a
/// second), so the janitor and the client seldom work on the same items. When they do,
/// a transaction that conflicts is answered 503 (retryable) and nothing is lost: every
/// round deletes what is left.
pub const ABANDONED_AFTER: chrono::TimeDelta = chrono::TimeDelta::minutes(10);

/// Unfinished deletions the janitor lists per run (the next run takes the rest).
pub const JANITOR_LIST: usize = 1000;

/// What one run of [`Runs::finish_deletions`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Janitored {
    /// Deletions it finished.
    pub finished: usize,
    /// Deletion rounds it ran (each at most [`PURGE_CHECKPOINTS`] checkpoints).
    pub rounds: usize,
    /// Deletions that failed (logged; the next run tries them again).
    pub failed: usize,
    /// Whether it stopped for time with deletions left.
    pub stopped: bool,
}

/// The run operations over their stores.
#[derive(Debug, Clone)]
pub struct Runs {
    /// Executions and failures.
    pub executions: ExecutionStore,
    /// Checkpoints and their states.
    pub checkpoints: CheckpointStore,
    /// Workflows (a start needs an active one).
    pub workflows: WorkflowStore,
    /// The credit ledger (starts and replays are charged).
    pub ledger: Ledger,
    /// Credits per start and per replay.
    pub execution_cost: i64,
}

impl Runs {
    /// Over one client and the named tables; starts and replays cost `execution_cost`.
    #[must_use]
    pub fn new(client: Client, tables: Tables, execution_cost: i64) -> Self {
        Self {
            executions: ExecutionStore::new(client.clone(), tables.clone()),
            checkpoints: CheckpointStore::new(client.clone(), tables.clone()),
            workflows: WorkflowStore::new(client.clone(), tables.clone()),
            ledger: Ledger::new(client, tables),
            execution_cost,
        }
    }

    /// The tenant's execution `id`.
    ///
    /// # Errors
    /// [`Error::NotFound`], or the read's storage error.
    pub async fn load(&self, tenant: &TenantId, id: &ExecutionId) -> Result<Execution, Error> {
        self.executions.get(tenant, id).await?.ok_or_else(|| Error::not_found("execution", id.as_str()))
    }

    /// Starts an execution of `workflow_id` and charges it, in one transaction that also
    /// checks the workflow is still not archived. With a `key`, the start is idempotent
    /// by key within the workflow: when an execution of the workflow already has it,
    /// that execution is the answer ([`Started::Existing`]), nothing is charged and the
    /// rest of the request is not looked at (Temporal's "use existing" policy).
    ///
    /// `before_commit` sees the new execution just before its transaction is sent (the
    /// caller may render its answer then, to be stored in the same transaction).
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown workflow, [`Error::InvalidState`] for an
    /// archived one, [`Error::InsufficientCredits`], storage errors.
    pub async fn start(
        &self,
        tenant: &TenantId,
        new: &NewExecution,
        clock: &dyn Clock,
        before_commit: BeforeCommit<'_, Execution>,
    ) -> Result<Started, Error> {
        let NewExecution { workflow_id, key, input, metadata } = new;
        let key = key.as_deref();
        let workflow = self
            .workflows
            .get(tenant, workflow_id)
            .await?
            .ok_or_else(|| Error::not_found("workflow", workflow_id.as_str()))?;
        if let Some(key) = key
            && let Some(existing) = self.executions.by_key(tenant, workflow_id, key).await?
        {
            return Ok(Started::Existing(existing));
        }
        if workflow.status == WorkflowStatus::Archived {
            return Err(archived(workflow_id));
        }
        retry_races(|| async move {
            let now = clock.now();
            let execution =
                Execution::start(workflow_id.clone(), key.map(str::to_owned), input.clone(), metadata.clone(), now);
            let account = self.ledger.account(tenant).await?;
            let mut tx = Transaction::new();
            self.ledger.stage(&mut tx, tenant, account, self.charge(&execution, "started"), now)?;
            self.executions.stage_create(&mut tx, tenant, &execution)?;
            tx.push(Part::Workflow, self.workflows.check_active(tenant, workflow_id)?);
            before_commit(&execution);
            match tx.commit(self.executions.client()).await {
                Ok(()) => Ok(Attempt::Done(Started::New(execution))),
                Err(TransactionError::Condition(Part::Workflow)) => {
                    Err(match self.workflows.get(tenant, workflow_id).await? {
                        Some(_) => archived(workflow_id),
                        None => Error::not_found("workflow", workflow_id.as_str()),
                    })
                }
                Err(TransactionError::Condition(Part::Key)) => {
                    // Another start with this key committed first: its execution is the answer.
                    let existing = match key {
                        Some(key) => self.executions.by_key(tenant, workflow_id, key).await?,
                        None => None,
                    };
                    Ok(existing.map_or(Attempt::Raced, |e| Attempt::Done(Started::Existing(e))))
                }
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Account])?),
            }
        })
        .await
    }

    /// The usage entry of a start or replay.
    fn charge(&self, execution: &Execution, what: &str) -> NewEntry {
        NewEntry {
            kind: EntryType::Usage,
            amount: -self.execution_cost,
            description: format!("execution {} {what} (attempt {})", execution.id, execution.attempt),
            payment_status: None,
        }
    }

    /// Applies `change` to execution `id`: read, check against the rules, build one
    /// transaction with every effect, commit conditioned on the version read.
    ///
    /// # Errors
    /// [`Error::NotFound`] (the execution, or a checkpoint named that is not one of
    /// its own), [`Error::InvalidState`], [`Error::InsufficientCredits`] for a replay,
    /// storage errors.
    ///
    /// `before_commit` sees the outcome just before its transaction is sent.
    pub async fn transition(
        &self,
        tenant: &TenantId,
        id: &ExecutionId,
        change: &Change,
        clock: &dyn Clock,
        before_commit: BeforeCommit<'_, Changed>,
    ) -> Result<Changed, Error> {
        retry_races(|| async move {
            let current = self.load(tenant, id).await?;
            let now = clock.now();
            let (action, target) = match change {
                Change::Plain(action) => (action.clone(), None),
                Change::Fail { error, .. } => (Action::Fail { error: error.clone() }, None),
                Change::Replay(from) => {
                    let from = match from {
                        ReplayFrom::Current => current.current_checkpoint_id.clone(),
                        ReplayFrom::Start => None,
                        ReplayFrom::Checkpoint(cp) => {
                            Some(self.checkpoint_of(tenant, &current, cp).await?.checkpoint.id)
                        }
                    };
                    (Action::Replay { from }, None)
                }
                Change::Rollback(to) => {
                    let target = self.checkpoint_of(tenant, &current, to).await?;
                    (Action::Rollback { to: to.clone() }, Some(target))
                }
            };
            current.check(&action)?;
            let mut next = current.after(&action, now);
            let mut tx = Transaction::new();
            let mut extra = CounterChange::default();
            let mut discarded = None;
            let mut cleanup = None;
            match (change, &action) {
                (Change::Fail { error, details }, _) => {
                    let failure = Failure::record(
                        id.clone(),
                        current.workflow_id.clone(),
                        error.error_type.clone(),
                        error.message.clone(),
                        details.clone(),
                        now,
                    );
                    next.failure_ids.push(failure.id.clone());
                    self.executions.stage_failure(&mut tx, tenant, &failure)?;
                }
                (_, Action::Complete { .. }) => {
                    for failure in self.open_failures(tenant, &current).await? {
                        let resolved = failure.resolved(now);
                        extra.merge(&self.executions.stage_failure_replace(&mut tx, tenant, &failure, &resolved)?);
                    }
                }
                (_, Action::Replay { .. }) => {
                    for failure in self.open_failures(tenant, &current).await? {
                        let next_failure = failure.with_pending_commands(CommandStatus::Completed);
                        if next_failure.recovery_commands != failure.recovery_commands {
                            extra.merge(&self.executions.stage_failure_replace(
                                &mut tx,
                                tenant,
                                &failure,
                                &next_failure,
                            )?);
                        }
                    }
                    extra.add(&shared::counters::daily("attempts", now.date_naive()), 1);
                    let account = self.ledger.account(tenant).await?;
                    self.ledger.stage(&mut tx, tenant, account, self.charge(&next, "replayed"), now)?;
                }
                _ => {}
            }
            if let Some(target) = target {
                // Everything above the target goes, including what earlier rollbacks left
                // hidden and not yet deleted (ranges above the target; a range below it
                // stays). What fits one transaction is deleted in the rollback's own;
                // otherwise the rollback commits its decision alone, a hidden range, and
                // the checkpoints are deleted after it (see `finish_discard`): either way
                // a client sees the rollback whole or not at all.
                // The request reads at most PURGE_CHECKPOINTS of them, so its memory and
                // time stay bounded; beyond that, the visible ones are counted without
                // being read. Lowest first: the ones just above the target go first, and
                // with them the keys a client that runs its steps again reuses first.
                let after = target.checkpoint.sequence;
                let range = Discarded { after, through: LAST_SEQUENCE };
                let later = self.checkpoints.in_range(tenant, id, range, PURGE_CHECKPOINTS, true).await?;
                let all = later.len() < PURGE_CHECKPOINTS;
                let visible = if all {
                    later.iter().filter(|c| !current.is_discarded(c.checkpoint.sequence)).count() as u64
                } else {
                    let window = ListWindow {
                        from_sequence: after + 1,
                        through_sequence: LAST_SEQUENCE,
                        ..ListWindow::default()
                    };
                    self.checkpoints.count(tenant, id, &current.discarded, &window, u64::MAX).await?
                };
                next.checkpoint_count = current.checkpoint_count.saturating_sub(visible);
                next.discarded.retain(|range| range.through <= after);
                let size: usize = later.iter().map(StoredCheckpoint::deletion_size).sum();
                if all && size <= ROLLBACK_BATCH {
                    for stored in &later {
                        self.checkpoints.stage_delete(&mut tx, tenant, stored)?;
                    }
                } else {
                    let range = Discarded { after, through: current.last_sequence };
                    next.discarded.push(range);
                    cleanup = Some((range, later, all));
                }
                discarded = Some(visible);
            }
            let mut whole = Transaction::new();
            self.executions.stage_replace(&mut whole, tenant, &current, &next, &extra)?;
            whole.append(tx);
            let changed = Changed { execution: next, discarded_checkpoints: discarded };
            before_commit(&changed);
            match whole.commit(self.executions.client()).await {
                Ok(()) => {
                    if let Some((range, checkpoints, all)) = cleanup {
                        self.finish_discard(tenant, id, range, &checkpoints, all).await;
                    }
                    Ok(Attempt::Done(changed))
                }
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Execution, Part::Failure, Part::Account])?),
            }
        })
        .await
    }

    /// A checkpoint of `execution` that a rollback has not discarded, or 404.
    ///
    /// # Errors
    /// [`Error::NotFound`], or the read's storage error.
    pub async fn checkpoint_of(
        &self,
        tenant: &TenantId,
        execution: &Execution,
        id: &CheckpointId,
    ) -> Result<StoredCheckpoint, Error> {
        match self.checkpoints.get(tenant, id).await? {
            Some(stored)
                if stored.checkpoint.execution_id == execution.id
                    && !execution.is_discarded(stored.checkpoint.sequence) =>
            {
                Ok(stored)
            }
            _ => Err(Error::not_found("checkpoint", id.as_str())),
        }
    }

    /// Checkpoint `id` of the tenant unless it is hidden (discarded by a rollback whose
    /// deletions are not finished, or of an execution being deleted): its entry and the
    /// tenant's hidden item read as one snapshot in one round trip, so that neither a
    /// concurrent rollback nor its cleanup can show a hidden checkpoint. The execution
    /// is not read.
    ///
    /// # Errors
    /// [`Error::NotFound`] (unknown or hidden), the read's storage error
    /// ([`shared::dynamo::StoreError::Conflict`] when it kept meeting writes).
    pub async fn visible_checkpoint(&self, tenant: &TenantId, id: &CheckpointId) -> Result<Entry, Error> {
        let entry_key = self.checkpoints.entry_key(tenant, id);
        let hidden_key = self.executions.hidden_key(tenant);
        let found = retry_races(|| async {
            let keys = vec![entry_key.clone(), hidden_key.clone()];
            match shared::dynamo::get_together(self.executions.client(), keys).await {
                Ok(found) => Ok(Attempt::Done(found)),
                Err(shared::dynamo::StoreError::Conflict) => Ok(Attempt::Raced),
                Err(other) => Err(Error::from(other)),
            }
        })
        .await?;
        let [entry, hidden]: [Option<shared::dynamo::Item>; 2] =
            found.try_into().map_err(|_| Error::from(shared::dynamo::StoreError::Corrupt("two reads".into())))?;
        let not_found = || Error::not_found("checkpoint", id.as_str());
        let entry = Entry::from_item(entry.ok_or_else(not_found)?)?;
        let checkpoint = entry.checkpoint();
        let hidden = ExecutionStore::hidden_in(hidden.as_ref(), &checkpoint.execution_id)?;
        if hidden.iter().any(|range| range.contains(checkpoint.sequence)) {
            return Err(not_found());
        }
        Ok(entry)
    }

    /// The checkpoint of `entry` (read by [`Self::visible_checkpoint`]) with its state.
    /// A state in parts is read after the entry; parts gone meanwhile (a rollback's
    /// cleanup or a deletion between the two reads) make it 404, as it is by then.
    ///
    /// # Errors
    /// [`Error::NotFound`], storage errors; a state that does not open while its
    /// checkpoint is still there is [`shared::dynamo::StoreError::Corrupt`].
    pub async fn with_state(
        &self,
        tenant: &TenantId,
        id: &CheckpointId,
        entry: Entry,
    ) -> Result<(Checkpoint, Box<serde_json::value::RawValue>), Error> {
        match self.checkpoints.with_state(tenant, entry).await {
            Ok(found) => Ok(found),
            Err(error @ shared::dynamo::StoreError::Corrupt(_)) => match self.visible_checkpoint(tenant, id).await {
                Err(gone @ Error::NotFound { .. }) => Err(gone),
                _ => Err(error.into()),
            },
            Err(other) => Err(other.into()),
        }
    }

    /// Deletes `checkpoints` with their states, keys and writes, in transactions of at
    /// most [`ROLLBACK_BATCH`] operations.
    async fn delete_checkpoints(&self, tenant: &TenantId, checkpoints: &[StoredCheckpoint]) -> Result<(), Error> {
        let mut batch = Transaction::new();
        let mut size = 0;
        for stored in checkpoints {
            if size + stored.deletion_size() > ROLLBACK_BATCH && size > 0 {
                std::mem::take(&mut batch).commit(self.executions.client()).await?;
                size = 0;
            }
            self.checkpoints.stage_delete(&mut batch, tenant, stored)?;
            size += stored.deletion_size();
        }
        if size > 0 {
            batch.commit(self.executions.client()).await?;
        }
        Ok(())
    }

    /// Deletes the checkpoints a committed rollback discarded and read (hidden meanwhile;
    /// at most [`PURGE_CHECKPOINTS`], so the request's cost stays bounded), and drops
    /// their range from the execution when they were `all` of them. What a larger
    /// rollback leaves, hidden, the janitor deletes ([`Self::finish_discards`]), as it
    /// does after a failure here (logged: the rollback itself has happened). Deleting
    /// what is gone already is harmless.
    async fn finish_discard(
        &self,
        tenant: &TenantId,
        id: &ExecutionId,
        range: Discarded,
        checkpoints: &[StoredCheckpoint],
        all: bool,
    ) {
        if let Err(error) = self.delete_checkpoints(tenant, checkpoints).await {
            tracing::warn!(execution = %id, error = %error, "discarded checkpoints left hidden");
            return;
        }
        if !all {
            return;
        }
        if let Err(error) = self.drop_range(tenant, id, range).await {
            tracing::warn!(execution = %id, error = %error, "a deleted rollback range left in place");
        }
    }

    /// Drops `range` from the discarded ranges of execution `id`: its checkpoints are
    /// deleted.
    async fn drop_range(&self, tenant: &TenantId, id: &ExecutionId, range: Discarded) -> Result<(), Error> {
        retry_races(|| async move {
            let Some(current) = self.executions.get(tenant, id).await? else { return Ok(Attempt::Done(())) };
            if !current.discarded.contains(&range) {
                return Ok(Attempt::Done(()));
            }
            let mut next = current.clone();
            next.discarded.retain(|r| *r != range);
            next.version += 1;
            let mut tx = Transaction::new();
            self.executions.stage_replace(&mut tx, tenant, &current, &next, &CounterChange::default())?;
            match tx.commit(self.executions.client()).await {
                Ok(()) => Ok(Attempt::Done(())),
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Execution])?),
            }
        })
        .await
    }

    /// One round of the cleanup that rollbacks of execution `id` left (its discarded
    /// ranges): deletes at most [`PURGE_CHECKPOINTS`] checkpoints of its first range and
    /// drops the range once none is left. [`Deleted::More`] while ranges remain;
    /// [`Deleted::Done`] when none does (or the execution is gone). For the janitor.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn finish_discards(&self, tenant: &TenantId, id: &ExecutionId) -> Result<Deleted, Error> {
        let Some(current) = self.executions.get(tenant, id).await? else { return Ok(Deleted::Done) };
        let Some(&range) = current.discarded.first() else { return Ok(Deleted::Done) };
        let left = self.checkpoints.in_range(tenant, id, range, PURGE_CHECKPOINTS, true).await?;
        self.delete_checkpoints(tenant, &left).await?;
        if left.len() == PURGE_CHECKPOINTS {
            return Ok(Deleted::More);
        }
        self.drop_range(tenant, id, range).await?;
        Ok(if current.discarded.len() == 1 { Deleted::Done } else { Deleted::More })
    }

    async fn open_failures(&self, tenant: &TenantId, execution: &Execution) -> Result<Vec<Failure>, Error> {
        let failures = self.executions.failures(tenant, &execution.failure_ids).await?;
        Ok(failures.into_iter().filter(|f| f.status == FailureStatus::Open).collect())
    }

    /// Records checkpoint `new` with `state` at `now` on execution `execution_id` while it runs:
    /// its sequence is the execution's `last_sequence + 1`, its parent the execution's
    /// current checkpoint, committed with the execution's new counts only if the
    /// execution is unchanged (so sequences are dense and never reused). With a key
    /// already used in the execution, the checkpoint that has it is the answer
    /// ([`Recorded::Existing`]) and nothing changes.
    ///
    /// `before_commit` sees the new checkpoint just before its transaction is sent (the
    /// caller may render its answer then, to be stored in the same transaction).
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::InvalidState`] unless the execution is running,
    /// [`Error::TooLarge`] when the compressed state cannot fit one transaction,
    /// storage errors.
    pub async fn record_checkpoint(
        &self,
        tenant: &TenantId,
        execution_id: &ExecutionId,
        new: &NewCheckpoint,
        state: &PackedState,
        now: DateTime<Utc>,
        before_commit: BeforeCommit<'_, Checkpoint>,
    ) -> Result<Recorded, Error> {
        retry_races(|| async move {
            let current = self.load(tenant, execution_id).await?;
            if let Some(existing) = self.keyed_checkpoint(tenant, &current, new.key.as_deref()).await? {
                return Ok(Attempt::Done(Recorded::Existing(existing)));
            }
            if current.status != ExecutionStatus::Running {
                return Err(Error::InvalidState(format!(
                    "execution {} is {}; checkpoints are accepted only while it is running",
                    current.id,
                    shared::body::WireEnum::wire(current.status)
                )));
            }
            let checkpoint = Checkpoint {
                id: new.id.clone(),
                execution_id: current.id.clone(),
                workflow_id: current.workflow_id.clone(),
                sequence: current.last_sequence + 1,
                name: new.name.clone(),
                key: new.key.clone(),
                parent_checkpoint_id: current.current_checkpoint_id.clone(),
                attempt: current.attempt,
                metadata: new.metadata.clone(),
                state_size_bytes: state.size as u64,
                created_at: now,
            };
            let next = current.with_checkpoint(&checkpoint.id, checkpoint.sequence, now);
            let mut tx = Transaction::new();
            self.executions.stage_replace(&mut tx, tenant, &current, &next, &CounterChange::default())?;
            self.checkpoints.stage_create(&mut tx, tenant, &checkpoint, state)?;
            if let Err(TransactionError::TooLarge { bytes, .. }) = tx.check_limits() {
                return Err(Error::TooLarge(format!(
                    "the state is {} bytes of JSON and compresses to only {} bytes: a checkpoint is written in \
                     one atomic DynamoDB transaction of at most {MAX_TRANSACTION_BYTES} bytes (this one would be \
                     {bytes}); keep large incompressible data (media, embeddings) elsewhere and a reference to it \
                     in the state",
                    state.size,
                    state.compressed_len()
                )));
            }
            before_commit(&checkpoint);
            match tx.commit(self.executions.client()).await {
                Ok(()) => Ok(Attempt::Done(Recorded::New(checkpoint))),
                // Another request recorded this key first: the next attempt finds it.
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Execution, Part::Key])?),
            }
        })
        .await
    }

    /// The checkpoint of `execution` that has `key`, if any. A key held by a checkpoint
    /// a rollback discarded (hidden, its deletion not finished) is not free yet: 409.
    async fn keyed_checkpoint(
        &self,
        tenant: &TenantId,
        execution: &Execution,
        key: Option<&str>,
    ) -> Result<Option<Checkpoint>, Error> {
        let Some(key) = key else { return Ok(None) };
        match self.checkpoints.by_key(tenant, &execution.id, key).await? {
            None => Ok(None),
            Some(stored) if execution.is_discarded(stored.checkpoint.sequence) => Err(Error::InvalidState(format!(
                "key {key:?} belongs to a checkpoint a rollback discarded, still being deleted; try again shortly"
            ))),
            Some(stored) => Ok(Some(stored.checkpoint)),
        }
    }

    /// Stores `writes` on checkpoint `id` of a running execution: each replaces the write
    /// with its `(task_id, index)` or is added, in one transaction conditioned on the
    /// document read and on the execution still running. Answers the writes now stored.
    ///
    /// # Errors
    /// [`Error::NotFound`] (the checkpoint, or one a rollback discarded),
    /// [`Error::InvalidState`] unless the execution is running, [`Error::TooLarge`] when
    /// the document would exceed 4 MiB or one transaction, storage errors.
    pub async fn put_writes(
        &self,
        tenant: &TenantId,
        id: &CheckpointId,
        writes: &[checkpoint::Write],
    ) -> Result<u64, Error> {
        retry_races(|| async move {
            let stored =
                self.checkpoints.get(tenant, id).await?.ok_or_else(|| Error::not_found("checkpoint", id.as_str()))?;
            let execution = self
                .load(tenant, &stored.checkpoint.execution_id)
                .await
                .map_err(|_| Error::not_found("checkpoint", id.as_str()))?;
            let stored = self.checkpoint_of(tenant, &execution, id).await?;
            if execution.status != ExecutionStatus::Running {
                return Err(Error::InvalidState(format!(
                    "execution {} is {}; writes are accepted only while it is running",
                    execution.id,
                    shared::body::WireEnum::wire(execution.status)
                )));
            }
            let old = self.checkpoints.writes(tenant, &stored.checkpoint.id).await?;
            let mut new = old.clone();
            new.merge(writes.to_vec());
            let packed = PackedState::from_json(&new.to_json());
            if packed.size > checkpoint::STATE_MAX_BYTES {
                return Err(Error::TooLarge(format!(
                    "the writes of checkpoint {id} would be {} bytes of JSON; the limit is {} bytes (4 MiB)",
                    packed.size,
                    checkpoint::STATE_MAX_BYTES
                )));
            }
            let mut tx = Transaction::new();
            tx.push(Part::Execution, self.executions.check_running(tenant, &execution.id)?);
            self.checkpoints.stage_writes(&mut tx, tenant, id, &old, &new, &packed)?;
            if let Err(TransactionError::TooLarge { bytes, .. }) = tx.check_limits() {
                return Err(Error::TooLarge(format!(
                    "the writes of checkpoint {id} compress to {} bytes: they are written in one atomic DynamoDB \
                     transaction of at most {MAX_TRANSACTION_BYTES} bytes (this one would be {bytes})",
                    packed.compressed_len()
                )));
            }
            match tx.commit(self.executions.client()).await {
                Ok(()) => Ok(Attempt::Done(new.items.len() as u64)),
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Execution, Part::Checkpoint])?),
            }
        })
        .await
    }

    /// Deletes checkpoint `id` with its state, key and writes, in one transaction with
    /// its execution's count, conditioned on the execution being unchanged. When it is
    /// the execution's current checkpoint, the current becomes the one before it (the
    /// highest sequence below it still there), or none. Later checkpoints keep their
    /// `parent_checkpoint_id`, now naming a deleted checkpoint (a gap in the history, as
    /// after any deletion); sequences are never reused.
    ///
    /// # Errors
    /// [`Error::NotFound`] (unknown, discarded, or of a deleted execution), storage
    /// errors.
    pub async fn delete_checkpoint(
        &self,
        tenant: &TenantId,
        id: &CheckpointId,
        clock: &dyn Clock,
    ) -> Result<(), Error> {
        retry_races(|| async move {
            let not_found = || Error::not_found("checkpoint", id.as_str());
            let stored = self.checkpoints.get(tenant, id).await?.ok_or_else(not_found)?;
            let execution =
                self.executions.get(tenant, &stored.checkpoint.execution_id).await?.ok_or_else(not_found)?;
            let stored = self.checkpoint_of(tenant, &execution, id).await?;
            let mut next = execution.clone();
            if execution.current_checkpoint_id.as_ref() == Some(id) {
                let before = checkpoint::ListWindow {
                    from_sequence: 1,
                    through_sequence: stored.checkpoint.sequence.saturating_sub(1),
                    descending: true,
                    metadata: BTreeMap::new(),
                };
                let previous =
                    self.checkpoints.list(tenant, &execution.id, &execution.discarded, &before, 0, 1).await?;
                next.current_checkpoint_id = previous.items.into_iter().next().map(|c| c.id);
            }
            let stored = self.checkpoints.with_writes(tenant, vec![stored]).await?.remove(0);
            next.checkpoint_count = next.checkpoint_count.saturating_sub(1);
            next.version += 1;
            next.updated_at = clock.now();
            let mut tx = Transaction::new();
            self.executions.stage_replace(&mut tx, tenant, &execution, &next, &CounterChange::default())?;
            self.checkpoints.stage_delete(&mut tx, tenant, &stored)?;
            match tx.commit(self.executions.client()).await {
                Ok(()) => Ok(Attempt::Done(())),
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Execution])?),
            }
        })
        .await
    }

    /// Deletes execution `id` with its checkpoints, their states and writes. The
    /// execution goes first, in one transaction with its key, its payloads and its
    /// counts, leaving a purge marker; then at most [`PURGE_CHECKPOINTS`] checkpoints
    /// are deleted. [`Deleted::More`] asks the client to send the request again; once
    /// nothing is left the marker goes and the answer is [`Deleted::Done`]. Failures
    /// recorded on the execution stay.
    ///
    /// # Errors
    /// [`Error::NotFound`] when neither the execution nor an unfinished deletion of it
    /// exists, storage errors.
    pub async fn delete(&self, tenant: &TenantId, id: &ExecutionId, clock: &dyn Clock) -> Result<Deleted, Error> {
        let removed: bool = retry_races(|| async move {
            let Some(current) = self.executions.get(tenant, id).await? else {
                return Ok::<_, Error>(Attempt::Done(false));
            };
            let mut tx = Transaction::new();
            self.executions.stage_delete(&mut tx, tenant, &current, clock.now())?;
            match tx.commit(self.executions.client()).await {
                Ok(()) => Ok(Attempt::Done(true)),
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Execution])?),
            }
        })
        .await?;
        if !removed && !self.executions.purging(tenant, id).await? {
            return Err(Error::not_found("execution", id.as_str()));
        }
        let left = self.checkpoints.later_than(tenant, id, 0, PURGE_CHECKPOINTS).await?;
        self.delete_checkpoints(tenant, &left).await?;
        if left.len() == PURGE_CHECKPOINTS {
            return Ok(Deleted::More);
        }
        // The tenant's hidden item is shared: a rollback or deletion beside this one is a
        // conflict to retry, not a failed deletion.
        retry_races(|| async {
            match self.executions.purged(tenant, id).await {
                Ok(()) => Ok::<_, Error>(Attempt::Done(())),
                Err(e) => Ok(Attempt::raced_on(e, &[])?),
            }
        })
        .await?;
        Ok(Deleted::Done)
    }

    /// Finishes unfinished deletions: every execution deletion whose purge marker is
    /// older than [`ABANDONED_AFTER`] at `clock`'s now (a client still sending DELETE
    /// finishes well within that), and the cleanup of every execution whose rollbacks
    /// left discarded checkpoints and that was created before then, oldest first,
    /// each with rounds of [`PURGE_CHECKPOINTS`] ([`Self::delete`],
    /// [`Self::finish_discards`]) until it is done, while `go_on()` says there is time for
    /// another round. What the scheduled janitor function runs; each acts in its own
    /// tenant's partition only.
    ///
    /// # Errors
    /// The list's storage error; a deletion that fails is counted in
    /// [`Janitored::failed`] and the others go on.
    pub async fn finish_deletions(&self, clock: &dyn Clock, go_on: impl Fn() -> bool) -> Result<Janitored, Error> {
        let before = clock.now() - ABANDONED_AFTER;
        let mut done = Janitored::default();
        for deletion in self.executions.unfinished_deletions(before, JANITOR_LIST).await? {
            let UnfinishedDeletion { tenant, execution, deleted } = &deletion;
            loop {
                if !go_on() {
                    done.stopped = true;
                    return Ok(done);
                }
                done.rounds += 1;
                let round = if *deleted {
                    self.delete(tenant, execution, clock).await
                } else {
                    self.finish_discards(tenant, execution).await
                };
                match round {
                    Ok(Deleted::More) => {}
                    Ok(Deleted::Done) => {
                        done.finished += 1;
                        break;
                    }
                    // Finished since the (eventually consistent) index listed it.
                    Err(Error::NotFound { .. }) => break,
                    Err(e) => {
                        tracing::warn!(tenant = tenant.as_str(), execution = execution.as_str(), error = %e, "janitor: deletion failed");
                        done.failed += 1;
                        break;
                    }
                }
            }
        }
        Ok(done)
    }

    /// The tenant's failure `id`.
    ///
    /// # Errors
    /// [`Error::NotFound`], or the read's storage error.
    pub async fn failure(&self, tenant: &TenantId, id: &FailureId) -> Result<Failure, Error> {
        self.executions
            .failures(tenant, std::slice::from_ref(id))
            .await?
            .pop()
            .ok_or_else(|| Error::not_found("failure", id.as_str()))
    }

    /// Settles failure `id` as a person decided, with its counter moves, in one
    /// transaction conditioned on the version read. Settling it as it is already
    /// settled changes nothing and answers it as it is.
    ///
    /// `before_commit` sees the settled failure just before its transaction is sent.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::InvalidState`] (see [`Failure::settle`]), storage
    /// errors.
    pub async fn settle_failure(
        &self,
        tenant: &TenantId,
        id: &FailureId,
        settlement: Settlement,
        clock: &dyn Clock,
        before_commit: BeforeCommit<'_, Failure>,
    ) -> Result<Failure, Error> {
        retry_races(|| async move {
            let current = self.failure(tenant, id).await?;
            let Some(next) = current.settle(settlement, clock.now())? else { return Ok(Attempt::Done(current)) };
            let mut tx = Transaction::new();
            let counts = self.executions.stage_failure_replace(&mut tx, tenant, &current, &next)?;
            tx.extend(Part::Counters, counts.transact_items(self.executions.tables(), tenant)?);
            before_commit(&next);
            match tx.commit(self.executions.client()).await {
                Ok(()) => Ok(Attempt::Done(next)),
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Failure])?),
            }
        })
        .await
    }
}

fn archived(id: &WorkflowId) -> Error {
    Error::InvalidState(format!("workflow {id} is archived; restore it to draft before starting executions"))
}
