//! Checkpoints: their model, their storage (with their writes documents), and the
//! operations of `/checkpoints` (record, read, list, delete, and a checkpoint's writes).
//! Replay and rollback name checkpoints too (`Runs::checkpoint_of`).

pub mod layout;
pub mod model;
pub mod store;
pub mod writes;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::value::RawValue;
use shared::TenantId;
use shared::counters::CounterChange;
use shared::dynamo::{Attempt, MAX_TRANSACTION_BYTES, Part, StoreError, Transaction, TransactionError, retry_races};
use shared::ids::{CheckpointId, ExecutionId, WorkflowId};
use shared::time::Clock;

use self::model::{Checkpoint, LAST_SEQUENCE, ListWindow, PackedState, STATE_MAX_BYTES, StoredCheckpoint};
use self::store::{Entry, Layout};
use self::writes::{Write, Writes};
use super::deletion::hidden_in;
use super::executions::model::{Execution, ExecutionStatus};
use super::storage::MAX_COUNTED;
use super::{BeforeCommit, CheckpointListing, ListCheckpoints, NewCheckpoint, Recorded, Runs};
use crate::Error;

/// The most checkpoints a lookup of a key within a workflow reads: the executions of a
/// workflow sharing one checkpoint key, as framework integrations make them, are one or
/// a few; past this many, a lookup shows (and counts) the first by id.
pub const WORKFLOW_KEY_MAX: usize = 100;

impl Runs {
    /// Records checkpoint `new` with `state` at `now` on execution `execution_id` while it runs:
    /// its sequence is the execution's `last_sequence + 1`, its parent the execution's
    /// current checkpoint, committed with the execution's new counts only if the
    /// execution is unchanged (so sequences are dense and never reused). Its
    /// `pending_writes` are merged into the writes of their checkpoint (one of the
    /// execution's, visible) in the same transaction. With a key already used in the
    /// execution, the checkpoint that has it is the answer ([`Recorded::Existing`]) and
    /// only the pending writes are stored, as [`Self::put_writes`] stores them.
    ///
    /// `before_commit` sees the new checkpoint just before its transaction is sent (the
    /// caller may render its answer then, to be stored in the same transaction).
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::InvalidState`] unless the execution is running,
    /// [`Error::TooLarge`] when the compressed state (with the pending writes) cannot fit
    /// one transaction or the writes document would pass 4 MiB, storage errors.
    pub async fn record_checkpoint(
        &self,
        tenant: &TenantId,
        execution_id: &ExecutionId,
        new: &NewCheckpoint,
        state: &PackedState,
        now: DateTime<Utc>,
        before_commit: BeforeCommit<'_, Checkpoint>,
    ) -> Result<Recorded, Error> {
        let recorded = retry_races(|| async move {
            let current = self.load(tenant, execution_id).await?;
            let pending = match &new.pending_writes {
                Some(p) => Some((p, self.checkpoint_of(tenant, &current, &p.checkpoint_id).await?)),
                None => None,
            };
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
            let (layout, sequence) = (Layout::of(&current), current.last_sequence + 1);
            let id = if layout == Layout::Joined {
                // Its id names where it is kept (sequences are never given twice).
                CheckpointId::in_execution(&current.id, sequence, now)
            } else {
                new.id.clone()
            };
            let checkpoint = Checkpoint {
                id,
                execution_id: current.id.clone(),
                workflow_id: current.workflow_id.clone(),
                sequence,
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
            self.executions.stage_progress(&mut tx, tenant, &current, &next)?;
            self.checkpoints.stage_create(&mut tx, tenant, (&checkpoint, layout), state)?;
            let mut writes_bytes = 0;
            if let Some((p, stored)) = pending {
                let id = &stored.checkpoint.id;
                let (old, new, packed) = self.merged_writes(tenant, &stored, &p.writes).await?;
                writes_bytes = packed.compressed_len();
                self.checkpoints.stage_writes(&mut tx, tenant, (id, stored.layout), &old, &new, &packed)?;
            }
            if let Err(TransactionError::TooLarge { bytes, .. }) = tx.check_limits() {
                let writes = if writes_bytes > 0 {
                    format!(" with {writes_bytes} bytes of pending writes (send them on their own)")
                } else {
                    String::new()
                };
                return Err(Error::TooLarge(format!(
                    "the state is {} bytes of JSON and compresses to only {} bytes{writes}: a checkpoint is \
                     written in one atomic DynamoDB transaction of at most {MAX_TRANSACTION_BYTES} bytes (this one \
                     would be {bytes}); keep large incompressible data (media, embeddings) elsewhere and a \
                     reference to it in the state",
                    state.size,
                    state.compressed_len()
                )));
            }
            before_commit(&checkpoint);
            match tx.commit(self.client()).await {
                Ok(()) => Ok(Attempt::Done(Recorded::New(checkpoint))),
                // Another request recorded this key first (the next attempt finds it), or
                // the pending writes' document changed.
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Execution, Part::Key, Part::Checkpoint])?),
            }
        })
        .await?;
        if let (Recorded::Existing(_), Some(p)) = (&recorded, &new.pending_writes) {
            self.put_writes(tenant, &p.checkpoint_id, &p.writes).await?;
        }
        Ok(recorded)
    }

    /// Checkpoint `id`'s writes document as read, and with `writes` merged in (packed),
    /// or [`Error::TooLarge`] past 4 MiB of JSON.
    async fn merged_writes(
        &self,
        tenant: &TenantId,
        stored: &StoredCheckpoint,
        writes: &[Write],
    ) -> Result<(Writes, Writes, PackedState), Error> {
        let id = &stored.checkpoint.id;
        let old = self.checkpoints.writes(tenant, id, stored.layout).await?;
        let mut new = old.clone();
        new.merge(writes.to_vec());
        let packed = PackedState::from_json(&new.to_json());
        if packed.size > STATE_MAX_BYTES {
            return Err(Error::TooLarge(format!(
                "the writes of checkpoint {id} would be {} bytes of JSON; the limit is {} bytes (4 MiB)",
                packed.size, STATE_MAX_BYTES
            )));
        }
        Ok((old, new, packed))
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
        match self.checkpoints.by_key(tenant, execution, key).await? {
            None => Ok(None),
            Some(stored) if execution.is_discarded(stored.checkpoint.sequence) => Err(Error::InvalidState(format!(
                "key {key:?} belongs to a checkpoint a rollback discarded, still being deleted; try again shortly"
            ))),
            Some(stored) => Ok(Some(stored.checkpoint)),
        }
    }

    /// Checkpoint `id` of the tenant as a client may see it, with its state when
    /// `include_state`: one round trip when the state is inline (the entry beside the
    /// tenant's hidden ranges, `Self::visible_checkpoint`), one more for a state in
    /// parts.
    ///
    /// # Errors
    /// [`Error::NotFound`] (unknown or hidden), storage errors.
    pub async fn checkpoint(
        &self,
        tenant: &TenantId,
        id: &CheckpointId,
        include_state: bool,
    ) -> Result<(Checkpoint, Option<Box<RawValue>>), Error> {
        let entry = self.visible_checkpoint(tenant, id, include_state).await?;
        if !include_state {
            return Ok((entry.into_checkpoint(), None));
        }
        let (checkpoint, state) = self.with_state(tenant, id, entry).await?;
        Ok((checkpoint, Some(state)))
    }

    /// A window of the checkpoints of execution `execution_id` in sequence order (or its
    /// reverse), no state read, with the whole list's total and where the next window
    /// starts. The execution is read first, then the cursor's checkpoint; a key is looked
    /// up by its pointer (two point reads) and answers at most its one checkpoint, else
    /// the window and a metadata-filtered total (up to [`MAX_COUNTED`]) are read together
    /// (an unfiltered total is the execution's count).
    ///
    /// # Errors
    /// [`Error::NotFound`] for the execution, or a cursor that is not one of its visible
    /// checkpoints; storage errors.
    pub async fn list_checkpoints(
        &self,
        tenant: &TenantId,
        execution_id: &ExecutionId,
        list: &ListCheckpoints,
    ) -> Result<CheckpointListing, Error> {
        let ListCheckpoints { descending, metadata, key, after, after_sequence, skip, take } = list;
        let (skip, take) = (*skip, *take);
        let execution = self.load(tenant, execution_id).await?;
        let mut range = ListWindow {
            from_sequence: 1,
            through_sequence: LAST_SEQUENCE,
            descending: *descending,
            metadata: metadata.clone(),
        };
        // After a checkpoint of this execution (404 for any other id): the ones after it
        // in the list's order.
        let after = match (after, after_sequence) {
            (_, Some(sequence)) => Some(*sequence),
            (Some(raw), None) => {
                let id = CheckpointId::parse(raw).ok_or_else(|| Error::not_found("checkpoint", raw.as_str()))?;
                Some(self.checkpoint_of(tenant, &execution, &id).await?.checkpoint.sequence)
            }
            (None, None) => None,
        };
        if let Some(sequence) = after {
            if range.descending {
                range.through_sequence = sequence.saturating_sub(1);
            } else {
                range.from_sequence = sequence + 1;
            }
        }
        if let Some(key) = key {
            let found = self.checkpoints.by_key(tenant, &execution, key).await?;
            let items: Vec<Checkpoint> = found
                .map(|stored| stored.checkpoint)
                .filter(|c| {
                    !execution.is_discarded(c.sequence)
                        && (range.from_sequence..=range.through_sequence).contains(&c.sequence)
                        && range.metadata.iter().all(|(k, v)| c.metadata.get(k) == Some(v))
                        && skip == 0
                })
                .into_iter()
                .collect();
            let total = items.len() as u64;
            return Ok(CheckpointListing { items, total, next: None });
        }
        let items = self.checkpoints.list(tenant, &execution, &range, skip, take);
        let total = async {
            if range.metadata.is_empty() {
                Ok(execution.checkpoint_count)
            } else {
                // The whole filtered list, as unfiltered totals count the whole list.
                let whole = ListWindow { from_sequence: 1, through_sequence: LAST_SEQUENCE, ..range.clone() };
                self.checkpoints.count(tenant, &execution, &whole, MAX_COUNTED).await
            }
        };
        let (page, total) = tokio::try_join!(items, total)?;
        let full = page.items.len() == take;
        // A full page may have more after it: its last item is where the next one starts.
        let next = page.stopped_at.or_else(|| full.then(|| page.items.last().map(|c| c.id.clone())).flatten());
        Ok(CheckpointListing { items: page.items, total, next })
    }

    /// The checkpoints with key `key` of the executions of workflow `workflow` (one per
    /// execution at most, as a key is unique within an execution), by id: a window of
    /// `skip` and `take` over at most [`WORKFLOW_KEY_MAX`] of them, and their number.
    /// One query of their key pointers, then each checkpoint as `GET /checkpoints/{id}`
    /// reads it, so a hidden one (a rollback's or a deletion's, under way) is not shown.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a workflow the tenant never had, storage errors.
    pub async fn checkpoints_by_workflow_key(
        &self,
        tenant: &TenantId,
        workflow: &str,
        key: &str,
        skip: usize,
        take: usize,
    ) -> Result<CheckpointListing, Error> {
        let not_found = || Error::not_found("workflow", workflow);
        let id = WorkflowId::parse(workflow).ok_or_else(not_found)?;
        let (ids, (exists, seen)) =
            tokio::try_join!(self.checkpoints.ids_by_workflow_key(tenant, &id, key, WORKFLOW_KEY_MAX), async {
                tokio::try_join!(self.workflows.get(tenant, &id), self.executions.workflow_seen(tenant, &id))
            },)?;
        if exists.is_none() && !seen {
            return Err(not_found());
        }
        let mut items = Vec::with_capacity(ids.len());
        for id in &ids {
            match self.visible_checkpoint(tenant, id, false).await {
                Ok(entry) => items.push(entry.into_checkpoint()),
                Err(Error::NotFound { .. }) => {}
                Err(other) => return Err(other),
            }
        }
        let total = items.len() as u64;
        let items = items.into_iter().skip(skip).take(take).collect();
        Ok(CheckpointListing { items, total, next: None })
    }

    /// The writes of checkpoint `id`, unless it is hidden (`Self::visible_checkpoint`,
    /// then the document).
    ///
    /// # Errors
    /// [`Error::NotFound`] (unknown or hidden), storage errors.
    pub async fn checkpoint_writes(&self, tenant: &TenantId, id: &CheckpointId) -> Result<Writes, Error> {
        let entry = self.visible_checkpoint(tenant, id, false).await?;
        Ok(self.checkpoints.writes(tenant, id, entry.layout()).await?)
    }

    /// A checkpoint of `execution` that a rollback has not discarded, or 404.
    ///
    /// # Errors
    /// [`Error::NotFound`], or the read's storage error.
    pub(super) async fn checkpoint_of(
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
    /// ([`StoreError::Conflict`] when it kept meeting writes).
    async fn visible_checkpoint(&self, tenant: &TenantId, id: &CheckpointId, with_state: bool) -> Result<Entry, Error> {
        let not_found = || Error::not_found("checkpoint", id.as_str());
        let hidden_key = self.hidden.hidden_key(tenant);
        // Where its id names first, then where checkpoints are apart, then (a checkpoint
        // from before) the tenant's. A state kept beside its entry is read with it.
        let mut read = None;
        for layout in Layout::ALL {
            let entry_key = self.checkpoints.entry_key(tenant, id, layout);
            let state_key = self.checkpoints.state_key(tenant, id, layout).filter(|_| with_state);
            let found = retry_races(|| async {
                let keys = [entry_key.clone(), hidden_key.clone()].into_iter().chain(state_key.clone()).collect();
                match shared::dynamo::get_together(self.client(), keys).await {
                    Ok(found) => Ok(Attempt::Done(found)),
                    Err(StoreError::Conflict) => Ok(Attempt::Raced),
                    Err(other) => Err(Error::from(other)),
                }
            })
            .await?;
            let mut found = found.into_iter();
            let (entry, hidden, beside) = (found.next().flatten(), found.next().flatten(), found.next().flatten());
            if let Some(entry) = entry {
                read = Some((entry, hidden, beside));
                break;
            }
        }
        let (entry, hidden, beside) = read.ok_or_else(not_found)?;
        let entry = Entry::from_item(entry)?;
        let entry = if with_state { entry.with_beside(beside)? } else { entry };
        let checkpoint = entry.checkpoint();
        let hidden = hidden_in(hidden.as_ref(), &checkpoint.execution_id)?;
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
    /// checkpoint is still there is [`StoreError::Corrupt`].
    async fn with_state(
        &self,
        tenant: &TenantId,
        id: &CheckpointId,
        entry: Entry,
    ) -> Result<(Checkpoint, Box<RawValue>), Error> {
        match self.checkpoints.with_state(tenant, entry).await {
            Ok(found) => Ok(found),
            Err(error @ StoreError::Corrupt(_)) => match self.visible_checkpoint(tenant, id, false).await {
                Err(gone @ Error::NotFound { .. }) => Err(gone),
                _ => Err(error.into()),
            },
            Err(other) => Err(other.into()),
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
    pub async fn put_writes(&self, tenant: &TenantId, id: &CheckpointId, writes: &[Write]) -> Result<u64, Error> {
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
            let (old, new, packed) = self.merged_writes(tenant, &stored, writes).await?;
            let mut tx = Transaction::new();
            tx.push(Part::Execution, self.executions.check_running(tenant, &execution)?);
            self.checkpoints.stage_writes(&mut tx, tenant, (id, stored.layout), &old, &new, &packed)?;
            if let Err(TransactionError::TooLarge { bytes, .. }) = tx.check_limits() {
                return Err(Error::TooLarge(format!(
                    "the writes of checkpoint {id} compress to {} bytes: they are written in one atomic DynamoDB \
                     transaction of at most {MAX_TRANSACTION_BYTES} bytes (this one would be {bytes})",
                    packed.compressed_len()
                )));
            }
            match tx.commit(self.client()).await {
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
                let before = ListWindow {
                    from_sequence: 1,
                    through_sequence: stored.checkpoint.sequence.saturating_sub(1),
                    descending: true,
                    metadata: BTreeMap::new(),
                };
                let previous = self.checkpoints.list(tenant, &execution, &before, 0, 1).await?;
                next.current_checkpoint_id = previous.items.into_iter().next().map(|c| c.id);
            }
            let stored = self.checkpoints.with_writes(tenant, vec![stored]).await?.remove(0);
            next.checkpoint_count = next.checkpoint_count.saturating_sub(1);
            next.version += 1;
            next.updated_at = clock.now();
            let mut tx = Transaction::new();
            self.executions.stage_replace(&mut tx, tenant, &execution, &next, &CounterChange::default())?;
            self.checkpoints.stage_delete(&mut tx, tenant, &stored)?;
            match tx.commit(self.client()).await {
                Ok(()) => Ok(Attempt::Done(())),
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Execution])?),
            }
        })
        .await
    }
}
