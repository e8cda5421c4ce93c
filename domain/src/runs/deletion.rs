//! Deletion: what execution deletions and rollbacks leave to delete, hidden from clients
//! meanwhile, and the rounds that delete it.
//!
//! `DELETE /executions/{id}` ([`Runs::delete`]) deletes the execution at once and leaves
//! a purge marker (`purge#exec_…`, beside the executions) while its checkpoints are
//! deleted, [`PURGE_CHECKPOINTS`] a request. A rollback whose checkpoints do not fit its
//! own transaction records them as a discarded range on the execution
//! (`crate::runs::rollback`) and deletes them after it. Either way the tenant's `hidden`
//! item mirrors what is hidden (`HIDDEN`), changed in the same transactions, so that a
//! checkpoint read by id alone is hidden too. GSI `by_purge` (`purge_shard`,
//! `purge_since`; keys only) holds the purge markers and the executions with discarded
//! ranges, of every tenant, oldest first: the janitor's list of unfinished deletions,
//! which [`Runs::finish_deletions`] finishes once they are [`ABANDONED_AFTER`] old.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, Delete, Put, TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::TenantId;
use shared::counters::CounterChange;
use shared::dynamo::{
    Attempt, Item, Part, StoreError, Table, Tables, Transaction, TransactionError, built, classify, retry_races, s,
};
use shared::ids::ExecutionId;
use shared::time::Clock;

use super::checkpoints::model::StoredCheckpoint;
use super::executions::model::Discarded;
use super::rollback::ROLLBACK_BATCH;
use super::storage;
use super::{Deleted, Janitored, Runs};
use crate::Error;

/// Operations one transaction of a deletion's purge holds at most.
pub const PURGE_BATCH: usize = ROLLBACK_BATCH;

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

/// A [`Discarded`] range as stored.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(super) struct DiscardedRecord {
    after: u64,
    through: u64,
}

impl From<&Discarded> for DiscardedRecord {
    fn from(d: &Discarded) -> Self {
        Self { after: d.after, through: d.through }
    }
}

impl From<DiscardedRecord> for Discarded {
    fn from(d: DiscardedRecord) -> Self {
        Self { after: d.after, through: d.through }
    }
}

/// The marker of an unfinished deletion of an execution (sorts outside `exec_` ranges).
fn purge_marker(id: &ExecutionId) -> String {
    format!("purge#{id}")
}

/// The index of purge markers (a sparse GSI: no other item has its key attributes).
const BY_PURGE: &str = "by_purge";

/// Partitions of [`BY_PURGE`]: every deletion writes its marker to the index and removes
/// it, so the markers of all tenants are spread over this many partition keys (by the
/// last hex digit of the execution's id, which is random) rather than one.
const PURGE_SHARDS: &[u8; 16] = b"0123456789abcdef";

/// The [`BY_PURGE`] partition of the items of execution `id`.
pub(super) fn purge_shard(id: &ExecutionId) -> String {
    shard_key(id.as_str().chars().last().unwrap_or('0'))
}

/// The [`BY_PURGE`] partition key of shard `digit` (one of [`PURGE_SHARDS`]).
fn shard_key(digit: char) -> String {
    format!("purge#{digit}")
}

/// Checkpoints being deleted and not all gone yet: of an execution a client deleted
/// (`DELETE /executions/{id}` answered 202), or that a rollback discarded and deleted
/// only in part (the execution's `discarded` ranges).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UnfinishedDeletion {
    /// Whose execution it is (or was).
    pub tenant: TenantId,
    /// The execution.
    pub execution: ExecutionId,
    /// Whether the execution itself is deleted (its purge marker), not rolled back.
    pub deleted: bool,
}

/// The id of the tenant's item that lists, per execution, the checkpoints hidden from
/// clients while they are being deleted (sorts outside `exec_` ranges): the ranges a
/// rollback discarded and, for a deleted execution, all of them. It mirrors the
/// executions' `discarded` ranges and purge markers, changed in the same transactions,
/// so that `GET /checkpoints/{id}` reads it beside the checkpoint's entry in one round
/// trip (the checkpoint id does not name its execution). Empty (its keys alone) unless a
/// deletion or a large rollback is unfinished; an entry stays as long as its execution's
/// deletion or cleanup does, about 70 bytes each. A deletion a client stops sending
/// after a 202 is finished by the janitor ([`crate::runs::Runs::finish_deletions`]);
/// a rollback's cleanup interrupted by a failure waits for the execution's next rollback.
const HIDDEN: &str = "hidden";

/// `ranges` as an attribute (a list of `{after, through}`).
fn stored_ranges(ranges: &[Discarded]) -> Result<AttributeValue, StoreError> {
    let records: Vec<DiscardedRecord> = ranges.iter().map(DiscardedRecord::from).collect();
    Ok(serde_dynamo::to_attribute_value(records)?)
}

/// Every checkpoint of an execution that is being deleted.
pub(super) const ALL: Discarded = Discarded { after: 0, through: u64::MAX };

/// The checkpoints of execution `id` hidden by the tenant's hidden item as read
/// (`None`: not read, nothing hidden).
///
/// # Errors
/// [`StoreError::Corrupt`] for an entry that is not a list of ranges.
pub(super) fn hidden_in(item: Option<&Item>, id: &ExecutionId) -> Result<Vec<Discarded>, StoreError> {
    let Some(value) = item.and_then(|item| item.get(id.as_str())) else { return Ok(Vec::new()) };
    let ranges: Vec<DiscardedRecord> = serde_dynamo::from_attribute_value(value.clone())?;
    Ok(ranges.into_iter().map(Discarded::from).collect())
}

/// Purge markers, the janitor's index and the tenant's hidden item, of every tenant;
/// each call but the janitor's list and the migration is scoped to the tenant given.
#[derive(Debug, Clone)]
pub(crate) struct HiddenStore {
    client: Client,
    tables: Tables,
}

impl HiddenStore {
    /// A store over `client` and the named tables.
    pub(crate) fn new(client: Client, tables: Tables) -> Self {
        Self { client, tables }
    }

    fn table(&self) -> &str {
        self.tables.name(Table::Executions)
    }

    /// Adds to `tx` that the tenant's hidden item hides `ranges` of the checkpoints of
    /// execution `id` (none: drops its entry).
    ///
    /// # Errors
    /// [`StoreError`] if the operation cannot be built.
    pub(super) fn stage_hidden(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        id: &ExecutionId,
        ranges: &[Discarded],
    ) -> Result<(), StoreError> {
        let update = Update::builder()
            .table_name(self.table())
            .key("tenant_id", s(tenant.as_str()))
            .key("id", s(HIDDEN))
            .expression_attribute_names("#e", id.as_str());
        let update = if ranges.is_empty() {
            update.update_expression("REMOVE #e")
        } else {
            update.update_expression("SET #e = :ranges").expression_attribute_values(":ranges", stored_ranges(ranges)?)
        };
        tx.push(Part::Discard, TransactWriteItem::builder().update(built(update.build())?).build());
        Ok(())
    }

    /// The table and key of the tenant's hidden item, to read it beside a checkpoint's
    /// entry.
    pub(super) fn hidden_key(&self, tenant: &TenantId) -> (&str, Item) {
        let key = HashMap::from([("tenant_id".to_owned(), s(tenant.as_str())), ("id".to_owned(), s(HIDDEN))]);
        (self.table(), key)
    }

    /// Adds to `tx` the marker of the purge of execution `id`'s checkpoints (in the
    /// janitor's index as of `now`) and that the tenant's hidden item hides all of them:
    /// its deletion has begun.
    ///
    /// # Errors
    /// [`StoreError`] if an operation cannot be built.
    pub(super) fn stage_purge(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        id: &ExecutionId,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let marker = HashMap::from([
            ("tenant_id".to_owned(), s(tenant.as_str())),
            ("id".to_owned(), s(purge_marker(id))),
            ("purge_shard".to_owned(), s(purge_shard(id))),
            ("purge_since".to_owned(), s(shared::time::format(now))),
        ]);
        let put = Put::builder().table_name(self.table()).set_item(Some(marker));
        tx.push(Part::Execution, TransactWriteItem::builder().put(built(put.build())?).build());
        self.stage_hidden(tx, tenant, id, &[ALL])
    }

    /// Whether a deletion of execution `id` has checkpoints left to purge.
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub(super) async fn purging(&self, tenant: &TenantId, id: &ExecutionId) -> Result<bool, StoreError> {
        storage::has(&self.client, self.table(), tenant.as_str(), &purge_marker(id)).await
    }

    /// Drops the purge marker of execution `id` and its entry in the tenant's hidden
    /// item, in one transaction: its deletion is complete.
    ///
    /// # Errors
    /// The write's [`TransactionError`].
    pub(super) async fn purged(&self, tenant: &TenantId, id: &ExecutionId) -> Result<(), TransactionError> {
        let mut tx = Transaction::new();
        let delete = Delete::builder()
            .table_name(self.table())
            .key("tenant_id", s(tenant.as_str()))
            .key("id", s(purge_marker(id)));
        tx.push(Part::Execution, TransactWriteItem::builder().delete(built(delete.build())?).build());
        self.stage_hidden(&mut tx, tenant, id, &[])?;
        tx.commit(&self.client).await
    }

    /// The unfinished deletions of every tenant in the janitor's index since before
    /// `before` (a purge marker put, or an execution with discarded ranges created,
    /// then), oldest first, at most `limit`. The index is eventually consistent, so a
    /// deletion finished a moment ago may still be listed (finishing it again finds
    /// nothing to do).
    ///
    /// # Errors
    /// A query's [`StoreError`] (an indexed item that names no execution or tenant is
    /// logged and skipped).
    pub(super) async fn unfinished_deletions(
        &self,
        before: DateTime<Utc>,
        limit: usize,
    ) -> Result<Vec<UnfinishedDeletion>, StoreError> {
        let mut found: Vec<(String, UnfinishedDeletion)> = Vec::new();
        for shard in PURGE_SHARDS {
            let mut start = None;
            let mut taken = 0;
            loop {
                let page = self
                    .client
                    .query()
                    .table_name(self.table())
                    .index_name(BY_PURGE)
                    .key_condition_expression("purge_shard = :shard AND purge_since < :before")
                    .expression_attribute_values(":shard", s(shard_key(char::from(*shard))))
                    .expression_attribute_values(":before", s(shared::time::format(before)))
                    .set_exclusive_start_key(start)
                    .limit(i32::try_from(limit.saturating_sub(taken).clamp(1, 1000)).unwrap_or(1000))
                    .send()
                    .await
                    .map_err(classify)?;
                for item in page.items.unwrap_or_default() {
                    let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
                    let indexed = text("id");
                    let deleted = indexed.starts_with("purge#");
                    let execution = ExecutionId::parse(indexed.strip_prefix("purge#").unwrap_or(&indexed));
                    // An execution in one of its tenant's shards: `ten_…#07`.
                    let partition = text("tenant_id");
                    let tenant = shared::auth::stored::owner(partition.split('#').next().unwrap_or_default());
                    // One item that is not ours must not stop the others' cleanup.
                    let (Some(execution), Some(tenant)) = (execution, tenant) else {
                        tracing::warn!(item = %indexed, "janitor: an item of {BY_PURGE} names no execution or tenant");
                        continue;
                    };
                    found.push((text("purge_since"), UnfinishedDeletion { tenant, execution, deleted }));
                    taken += 1;
                }
                start = page.last_evaluated_key;
                if start.is_none() || taken >= limit {
                    break;
                }
            }
        }
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found.truncate(limit);
        Ok(found.into_iter().map(|(_, deletion)| deletion).collect())
    }

    /// Mirrors, into the hidden item of `tenant` (of every tenant: `None`), the
    /// `discarded` ranges and purge markers of executions written before that item
    /// existed (an upgrade's one-off step, `cairn-admin migrate hidden-checkpoints`),
    /// and puts purge markers and executions with discarded ranges written before the
    /// janitor's index into it, as of `now`.
    /// Safe while the service runs and to run again: it never replaces an entry, and an
    /// entry it adds late hides only checkpoints already deleted (a range's sequences
    /// are never given again; a deleted execution's id never comes back). Returns the
    /// executions it found with hidden checkpoints.
    ///
    /// It reads every item of the table (of the tenant's partitions): a filter would not
    /// make that cheaper, DynamoDB counts what it reads before filtering.
    ///
    /// # Errors
    /// The scan's or a write's [`StoreError`].
    pub(super) async fn mirror_hidden(
        &self,
        tenant: Option<&TenantId>,
        now: DateTime<Utc>,
    ) -> Result<usize, StoreError> {
        let mut found = 0;
        // The tenant's shards and its own partition, or the whole table.
        let partitions = match tenant {
            Some(tenant) => storage::tenant_partitions(tenant).map(Some).collect(),
            None => vec![None],
        };
        for partition in partitions {
            found += self.mirror_partition(partition.as_deref(), now).await?;
        }
        Ok(found)
    }

    /// [`Self::mirror_hidden`] in partition `partition` (the whole table: `None`).
    async fn mirror_partition(&self, partition: Option<&str>, now: DateTime<Utc>) -> Result<usize, StoreError> {
        let table = self.table();
        let mut found = 0;
        let mut start = None;
        loop {
            let projection = Some("tenant_id, id, discarded, purge_since");
            let (items, next) = shared::dynamo::page_of(&self.client, table, partition, projection, start).await?;
            for item in &items {
                let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
                let (tenant, id) = (text("tenant_id"), text("id"));
                let (execution, ranges) = match id.strip_prefix("purge#") {
                    Some(execution) => (execution.to_owned(), vec![ALL]),
                    None => {
                        let stored: Vec<DiscardedRecord> = match item.get("discarded") {
                            Some(value) => serde_dynamo::from_attribute_value(value.clone())?,
                            None => Vec::new(),
                        };
                        (id, stored.into_iter().map(Discarded::from).collect())
                    }
                };
                if ranges.is_empty() {
                    continue;
                }
                if !item.contains_key("purge_since") {
                    let raw = text("id");
                    let indexed = ExecutionId::parse(raw.strip_prefix("purge#").unwrap_or(&raw))
                        .ok_or_else(|| StoreError::Corrupt(format!("{raw} has discarded ranges")))?;
                    self.index(&tenant, &raw, &indexed, now).await?;
                }
                // The tenant's own item, also for an execution in one of its shards.
                let owner = tenant.split_once('#').map_or(tenant.as_str(), |(owner, _)| owner);
                self.client
                    .update_item()
                    .table_name(table)
                    .key("tenant_id", s(owner))
                    .key("id", s(HIDDEN))
                    .update_expression("SET #e = if_not_exists(#e, :ranges)")
                    .expression_attribute_names("#e", execution)
                    .expression_attribute_values(":ranges", stored_ranges(&ranges)?)
                    .send()
                    .await
                    .map_err(classify)?;
                found += 1;
            }
            start = next;
            if start.is_none() {
                return Ok(found);
            }
        }
    }

    /// Puts item `item` (a purge marker, or an execution with discarded ranges) written
    /// before the janitor's index existed into that index, as of `now` (so the janitor
    /// takes it [`ABANDONED_AFTER`] later); nothing if the item is gone.
    async fn index(&self, tenant: &str, item: &str, id: &ExecutionId, now: DateTime<Utc>) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(self.table())
            .key("tenant_id", s(tenant))
            .key("id", s(item))
            .update_expression("SET purge_shard = :shard, purge_since = if_not_exists(purge_since, :now)")
            .condition_expression("attribute_exists(id)")
            .expression_attribute_values(":shard", s(purge_shard(id)))
            .expression_attribute_values(":now", s(shared::time::format(now)))
            .send()
            .await;
        match result {
            Err(e) if e.as_service_error().is_some_and(|e| e.is_conditional_check_failed_exception()) => Ok(()),
            other => other.map(drop).map_err(classify),
        }
    }
}

impl Runs {
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
            match tx.commit(self.client()).await {
                Ok(()) => Ok(Attempt::Done(true)),
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Execution])?),
            }
        })
        .await?;
        if !removed && !self.hidden.purging(tenant, id).await? {
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
            match self.hidden.purged(tenant, id).await {
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
        for deletion in self.hidden.unfinished_deletions(before, JANITOR_LIST).await? {
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

    /// Mirrors, into the hidden item of `tenant` (of every tenant: `None`), the
    /// `discarded` ranges and purge markers of executions written before that item
    /// existed, and puts those written before the janitor's index into it, as of `now`
    /// (an upgrade's one-off step, `cairn-admin migrate hidden-checkpoints`; see
    /// `HiddenStore::mirror_hidden`). Returns the executions it found with hidden
    /// checkpoints.
    ///
    /// # Errors
    /// The scan's or a write's storage error.
    pub async fn mirror_hidden(&self, tenant: Option<&TenantId>, now: DateTime<Utc>) -> Result<usize, Error> {
        Ok(self.hidden.mirror_hidden(tenant, now).await?)
    }

    /// Deletes `checkpoints` with their states, keys and writes, in transactions of at
    /// most [`ROLLBACK_BATCH`] operations.
    pub(super) async fn delete_checkpoints(
        &self,
        tenant: &TenantId,
        checkpoints: &[StoredCheckpoint],
    ) -> Result<(), Error> {
        let mut batch = Transaction::new();
        let mut size = 0;
        for stored in checkpoints {
            if size + stored.deletion_size() > ROLLBACK_BATCH && size > 0 {
                std::mem::take(&mut batch).commit(self.client()).await?;
                size = 0;
            }
            self.checkpoints.stage_delete(&mut batch, tenant, stored)?;
            size += stored.deletion_size();
        }
        if size > 0 {
            batch.commit(self.client()).await?;
        }
        Ok(())
    }

    /// Deletes the checkpoints a committed rollback discarded and read (hidden meanwhile;
    /// at most [`PURGE_CHECKPOINTS`], so the request's cost stays bounded), and drops
    /// their range from the execution when they were `all` of them. What a larger
    /// rollback leaves, hidden, the janitor deletes ([`Self::finish_discards`]), as it
    /// does after a failure here (logged: the rollback itself has happened). Deleting
    /// what is gone already is harmless.
    pub(super) async fn finish_discard(
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
            match tx.commit(self.client()).await {
                Ok(()) => Ok(Attempt::Done(())),
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Execution])?),
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tenant's hidden item is one item, so DynamoDB's 400 KB bounds it. An entry,
    /// as written, costs at most its execution id and one range per unfinished cleanup
    /// or deletion: computed here, the item holds thousands of abandoned deletions
    /// (docs/operations.md's "about 70 bytes" each) before a write to it would be refused.
    #[test]
    fn the_hidden_item_holds_thousands_of_unfinished_deletions() {
        let id = ExecutionId::generate();
        let entry = |ranges: &[Discarded]| {
            let item = HashMap::from([(id.as_str().to_owned(), stored_ranges(ranges).expect("ranges"))]);
            shared::dynamo::item_size(&item)
        };
        let deleted = entry(&[ALL]);
        assert!(deleted <= 80, "a deleted execution's entry: {deleted} bytes");
        let keys = HashMap::from([
            ("tenant_id".to_owned(), s("ten_0193a6f21c2b7d3e8f000123456789ab")),
            ("id".to_owned(), s(HIDDEN)),
        ]);
        let room = shared::dynamo::MAX_ITEM_BYTES - shared::dynamo::item_size(&keys);
        assert!(room / deleted >= 5000, "{} abandoned deletions fit", room / deleted);
        // A rollback range of small sequences costs less than a deletion's.
        assert!(entry(&[Discarded { after: 5, through: 60 }]) <= deleted);
    }
}
