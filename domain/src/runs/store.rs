//! Executions and their failures in DynamoDB.
//!
//! Table `executions` (`tenant_id`, `id`): ids are UUIDv7, so `id` ranges are time
//! ranges and descending order is newest first. GSIs `by_status` (`tenant_status`),
//! `by_workflow` (`tenant_workflow`) and `by_workflow_status` (`tenant_workflow_status`),
//! each sorted by `id`, serve the filters without filter expressions. Input and output
//! are compressed and inline when small, else in `blobs` (`exec_…#input`, `#output`).
//! Beside the executions, outside their id ranges: key pointers (`key#…`), purge
//! markers (`purge#…`) and the tenant's `hidden` item (see [`ExecutionStore::hidden_key`]).
//! GSI `by_purge` (`purge_shard`, `purge_since`; keys only) holds the purge markers
//! alone, of every tenant, oldest first: the janitor's list of unfinished deletions
//! ([`ExecutionStore::unfinished_deletions`]).
//!
//! Table `failures` (`tenant_id`, `id`), GSI `by_status` (`tenant_status`, `id`).
//!
//! Every change is a whole-item put conditioned on the version that was read; totals come
//! from counters changed in the same transaction.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use shared::TenantId;
use shared::body::WireEnum;
use shared::counters::{self, CounterChange};
use shared::dynamo::{
    Item, Part, StoreError, Table, Tables, Transaction, TransactionError, batch_get, built, classify, get_item, n,
    newest_first_in, query_window_from, resume_after, s,
};
use shared::ids::{CheckpointId, CommandId, ExecutionId, FailureId, WorkflowId, created_millis, id_range};

use crate::blobs::BlobStore;
use crate::runs::failure::{CommandStatus, Failure, FailureStatus, RecoveryCommand};
use crate::runs::model::{Discarded, Execution, ExecutionError, ExecutionStatus, counter_name, span_family};

/// Input or output compressed up to this size sits in the execution item.
pub const INLINE_VALUE_MAX: usize = 96 * 1024;
/// The largest input or output, as serialized JSON.
pub const VALUE_MAX_BYTES: usize = 256 * 1024;

fn pack(value: &Value) -> Vec<u8> {
    shared::blob::compress(&serde_json::to_vec(value).unwrap_or_default())
}

fn unpack(bytes: &[u8], what: &str) -> Result<Value, StoreError> {
    let json = shared::blob::decompress(bytes, VALUE_MAX_BYTES)
        .map_err(|_| StoreError::Corrupt(format!("{what} does not inflate")))?;
    serde_json::from_slice(&json).map_err(|_| StoreError::Corrupt(format!("{what} is not JSON")))
}

/// Where a stored input or output is.
#[derive(Debug, Default, Serialize, Deserialize)]
struct StoredValue {
    /// Compressed JSON when inline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    inline: Option<serde_bytes::ByteBuf>,
    /// True when it is in `blobs`.
    #[serde(default)]
    external: bool,
}

impl StoredValue {
    fn of(value: Option<&Value>) -> (Self, Option<Vec<u8>>) {
        match value {
            None => (Self::default(), None),
            Some(v) => {
                let packed = pack(v);
                if packed.len() <= INLINE_VALUE_MAX {
                    (Self { inline: Some(serde_bytes::ByteBuf::from(packed)), external: false }, None)
                } else {
                    (Self { inline: None, external: true }, Some(packed))
                }
            }
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct ExecutionRecord {
    tenant_id: String,
    id: String,
    workflow_id: String,
    status: String,
    /// Left out of list queries ([`SUMMARY_ATTRIBUTES`]).
    #[serde(default)]
    input: StoredValue,
    #[serde(default)]
    output: StoredValue,
    error_type: Option<String>,
    error_message: Option<String>,
    cancel_reason: Option<String>,
    /// The client's key (`key` is a DynamoDB reserved word).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_key: Option<String>,
    metadata: BTreeMap<String, String>,
    attempt: u32,
    current_checkpoint_id: Option<String>,
    checkpoint_count: u64,
    last_sequence: u64,
    failure_ids: Vec<String>,
    /// Rollback ranges whose checkpoints are not all deleted yet (usually absent).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    discarded: Vec<DiscardedRecord>,
    version: u64,
    created_at: String,
    updated_at: String,
    ended_at: Option<String>,
    tenant_status: String,
    tenant_workflow: String,
    tenant_workflow_status: String,
    /// While `discarded` is not empty: the execution is in the janitor's index
    /// ([`BY_PURGE`]), as of its creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    purge_shard: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    purge_since: Option<String>,
}

/// A [`Discarded`] range as stored.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
struct DiscardedRecord {
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

/// The attributes a list reads: every one but `input` and `output`, so list items are
/// summaries and a list reads no blob.
const SUMMARY_ATTRIBUTES: &[&str] = &[
    "tenant_id",
    "id",
    "workflow_id",
    "status",
    "error_type",
    "error_message",
    "cancel_reason",
    "client_key",
    "metadata",
    "attempt",
    "current_checkpoint_id",
    "checkpoint_count",
    "last_sequence",
    "failure_ids",
    "discarded",
    "version",
    "created_at",
    "updated_at",
    "ended_at",
    "tenant_status",
    "tenant_workflow",
    "tenant_workflow_status",
];

impl ExecutionRecord {
    fn new(tenant: &TenantId, e: &Execution) -> (Self, Vec<(String, Vec<u8>)>) {
        let t = tenant.as_str();
        let (input, input_blob) = StoredValue::of(e.input.as_ref());
        let (output, output_blob) = StoredValue::of(e.output.as_ref());
        let blobs = [("input", input_blob), ("output", output_blob)]
            .into_iter()
            .filter_map(|(name, blob)| blob.map(|data| (format!("{}#{name}", e.id), data)))
            .collect();
        let record = Self {
            tenant_id: t.to_owned(),
            id: e.id.to_string(),
            workflow_id: e.workflow_id.to_string(),
            status: e.status.wire().to_owned(),
            input,
            output,
            error_type: e.error.as_ref().map(|x| x.error_type.clone()),
            error_message: e.error.as_ref().map(|x| x.message.clone()),
            cancel_reason: e.cancel_reason.clone(),
            client_key: e.key.clone(),
            metadata: e.metadata.clone(),
            attempt: e.attempt,
            current_checkpoint_id: e.current_checkpoint_id.as_ref().map(ToString::to_string),
            checkpoint_count: e.checkpoint_count,
            last_sequence: e.last_sequence,
            failure_ids: e.failure_ids.iter().map(ToString::to_string).collect(),
            discarded: e.discarded.iter().map(DiscardedRecord::from).collect(),
            version: e.version,
            created_at: shared::time::format(e.created_at),
            updated_at: shared::time::format(e.updated_at),
            ended_at: e.ended_at.map(shared::time::format),
            tenant_status: format!("{t}#{}", e.status.wire()),
            tenant_workflow: format!("{t}#{}", e.workflow_id),
            tenant_workflow_status: format!("{t}#{}#{}", e.workflow_id, e.status.wire()),
            purge_shard: (!e.discarded.is_empty()).then(|| purge_shard(&e.id)),
            // The execution's creation, which no write moves: a cleanup is the janitor's
            // once the execution is ABANDONED_AFTER old, however often it is written.
            purge_since: (!e.discarded.is_empty()).then(|| shared::time::format(e.created_at)),
        };
        (record, blobs)
    }

    /// The blobs this record needs from `blobs`.
    fn external_parts(&self) -> Vec<String> {
        let mut parts = Vec::new();
        if self.input.external {
            parts.push(format!("{}#input", self.id));
        }
        if self.output.external {
            parts.push(format!("{}#output", self.id));
        }
        parts
    }

    fn into_execution(self, blobs: &HashMap<String, Vec<u8>>) -> Result<Execution, StoreError> {
        let id = self.id.clone();
        let corrupt = |what: &str| StoreError::Corrupt(format!("execution {id}: {what}"));
        let value = |stored: &StoredValue, name: &str| -> Result<Option<Value>, StoreError> {
            if let Some(inline) = &stored.inline {
                return unpack(inline, name).map(Some);
            }
            if stored.external {
                let data = blobs.get(&format!("{id}#{name}")).ok_or_else(|| corrupt("missing blob"))?;
                return unpack(data, name).map(Some);
            }
            Ok(None)
        };
        let time = |t: &str| shared::time::parse(t).map_err(|_| corrupt("timestamp"));
        Ok(Execution {
            id: ExecutionId::parse(&self.id).ok_or_else(|| corrupt("id"))?,
            workflow_id: WorkflowId::parse(&self.workflow_id).ok_or_else(|| corrupt("workflow_id"))?,
            status: ExecutionStatus::from_wire(&self.status).ok_or_else(|| corrupt("status"))?,
            input: value(&self.input, "input")?,
            output: value(&self.output, "output")?,
            error: match (self.error_type, self.error_message) {
                (Some(error_type), Some(message)) => Some(ExecutionError { error_type, message }),
                _ => None,
            },
            cancel_reason: self.cancel_reason,
            key: self.client_key,
            metadata: self.metadata,
            attempt: self.attempt,
            current_checkpoint_id: self
                .current_checkpoint_id
                .as_deref()
                .map(|c| CheckpointId::parse(c).ok_or_else(|| corrupt("current_checkpoint_id")))
                .transpose()?,
            checkpoint_count: self.checkpoint_count,
            last_sequence: self.last_sequence,
            failure_ids: self
                .failure_ids
                .iter()
                .map(|f| FailureId::parse(f).ok_or_else(|| corrupt("failure_ids")))
                .collect::<Result<_, _>>()?,
            discarded: self.discarded.iter().copied().map(Discarded::from).collect(),
            version: self.version,
            created_at: time(&self.created_at)?,
            updated_at: time(&self.updated_at)?,
            ended_at: self.ended_at.as_deref().map(time).transpose()?,
        })
    }
}

/// The pointer item from an execution's key to the execution, in table `executions`
/// beside the executions (its `id` sorts after every `exec_` id, outside their ranges,
/// and it has none of the index attributes).
#[derive(Debug, Serialize, Deserialize)]
struct KeyPointer {
    tenant_id: String,
    id: String,
    execution_id: String,
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
fn purge_shard(id: &ExecutionId) -> String {
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
pub struct UnfinishedDeletion {
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
fn stored_ranges(ranges: &[Discarded]) -> Result<aws_sdk_dynamodb::types::AttributeValue, StoreError> {
    let records: Vec<DiscardedRecord> = ranges.iter().map(DiscardedRecord::from).collect();
    Ok(serde_dynamo::to_attribute_value(records)?)
}

/// Every checkpoint of an execution that is being deleted.
const ALL: Discarded = Discarded { after: 0, through: u64::MAX };

fn key_pointer(workflow: &WorkflowId, key: &str) -> String {
    format!("key#{workflow}#{key}")
}

/// Filters of the execution list.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only this status.
    pub status: Option<ExecutionStatus>,
    /// Only this workflow's.
    pub workflow_id: Option<WorkflowId>,
    /// Only those created after this instant.
    pub created_after: Option<DateTime<Utc>>,
    /// Only those created before this instant.
    pub created_before: Option<DateTime<Utc>>,
}

impl ListFilter {
    /// Whether `e` passes every filter.
    #[must_use]
    pub fn admits(&self, e: &Execution) -> bool {
        self.status.is_none_or(|s| e.status == s)
            && self.workflow_id.as_ref().is_none_or(|w| e.workflow_id == *w)
            && self.created_after.is_none_or(|t| e.created_at > t)
            && self.created_before.is_none_or(|t| e.created_at < t)
    }
}

/// Filters of the failure list.
#[derive(Debug, Clone, Copy, Default)]
pub struct FailureFilter {
    /// Only this status.
    pub status: Option<FailureStatus>,
    /// Only those created after this instant.
    pub created_after: Option<DateTime<Utc>>,
    /// Only those created before this instant.
    pub created_before: Option<DateTime<Utc>>,
}

/// Executions and failures of every tenant; each call is scoped to the tenant given.
#[derive(Debug, Clone)]
pub struct ExecutionStore {
    client: Client,
    tables: Tables,
    blobs: BlobStore,
}

impl ExecutionStore {
    /// A store over `client` and the named tables.
    #[must_use]
    pub fn new(client: Client, tables: Tables) -> Self {
        Self { blobs: BlobStore::new(client.clone(), tables.clone()), client, tables }
    }

    /// The client, for callers that commit transactions.
    #[must_use]
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The table names.
    #[must_use]
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    fn put_item(
        &self,
        table: Table,
        item: Item,
        condition: &str,
        expected: Option<u64>,
    ) -> Result<TransactWriteItem, StoreError> {
        let mut put =
            Put::builder().table_name(self.tables.name(table)).set_item(Some(item)).condition_expression(condition);
        if let Some(version) = expected {
            put = put.expression_attribute_values(":expected", n(version));
        }
        Ok(TransactWriteItem::builder().put(built(put.build())?).build())
    }

    fn stage_blobs(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        blobs: Vec<(String, Vec<u8>)>,
    ) -> Result<(), StoreError> {
        for (key, data) in blobs {
            self.blobs.stage_put(tx, Part::Blob, tenant, &key, data)?;
        }
        Ok(())
    }

    /// Adds a new execution, its key's pointer, its counts and the day's attempt to `tx`.
    /// The pointer is conditioned on the key being free ([`Part::Key`] fails otherwise).
    ///
    /// # Errors
    /// [`StoreError`] if an operation cannot be built.
    pub fn stage_create(&self, tx: &mut Transaction, tenant: &TenantId, e: &Execution) -> Result<(), StoreError> {
        let (record, blobs) = ExecutionRecord::new(tenant, e);
        tx.push(
            Part::Execution,
            self.put_item(Table::Executions, serde_dynamo::to_item(record)?, "attribute_not_exists(id)", None)?,
        );
        if let Some(key) = &e.key {
            let pointer = KeyPointer {
                tenant_id: tenant.as_str().to_owned(),
                id: key_pointer(&e.workflow_id, key),
                execution_id: e.id.to_string(),
            };
            tx.push(
                Part::Key,
                self.put_item(Table::Executions, serde_dynamo::to_item(pointer)?, "attribute_not_exists(id)", None)?,
            );
        }
        self.stage_blobs(tx, tenant, blobs)?;
        let mut change = CounterChange::between(&[], &e.counters());
        change.add(&counters::daily("attempts", e.created_at.date_naive()), 1);
        tx.extend(Part::Counters, change.transact_items(&self.tables, tenant)?);
        Ok(())
    }

    /// Adds the change from `old` to `new` (and the moved counts) to `tx`, conditioned on
    /// the stored version still being `old.version`. `extra` counts join the same update.
    ///
    /// # Errors
    /// [`StoreError`] if an operation cannot be built.
    pub fn stage_replace(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        old: &Execution,
        new: &Execution,
        extra: &CounterChange,
    ) -> Result<(), StoreError> {
        let (record, blobs) = ExecutionRecord::new(tenant, new);
        let put =
            self.put_item(Table::Executions, serde_dynamo::to_item(record)?, "version = :expected", Some(old.version))?;
        tx.push(Part::Execution, put);
        let changed: Vec<(String, Vec<u8>)> = blobs
            .into_iter()
            .filter(|(part, _)| {
                (part.ends_with("#input") && old.input != new.input)
                    || (part.ends_with("#output") && old.output != new.output)
            })
            .collect();
        self.stage_blobs(tx, tenant, changed)?;
        if old.discarded != new.discarded {
            self.stage_hidden(tx, tenant, &new.id, &new.discarded)?;
        }
        let mut change = CounterChange::between(&old.counters(), &new.counters());
        change.merge(extra);
        tx.extend(Part::Counters, change.transact_items(&self.tables, tenant)?);
        Ok(())
    }

    /// Sets the checkpoints of execution `id` that the tenant's hidden item hides to
    /// `ranges` (none: drops its entry).
    fn stage_hidden(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        id: &ExecutionId,
        ranges: &[Discarded],
    ) -> Result<(), StoreError> {
        let update = aws_sdk_dynamodb::types::Update::builder()
            .table_name(self.tables.name(Table::Executions))
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
    /// It reads every item of the table (of the tenant's partition): a filter would not
    /// make that cheaper, DynamoDB counts what it reads before filtering.
    ///
    /// # Errors
    /// The scan's or a write's [`StoreError`].
    pub async fn mirror_hidden(&self, tenant: Option<&TenantId>, now: DateTime<Utc>) -> Result<usize, StoreError> {
        let table = self.tables.name(Table::Executions);
        let mut found = 0;
        let mut start = None;
        loop {
            // The same page request of a query (one tenant) or a scan (every tenant).
            macro_rules! page {
                ($request:expr) => {{
                    let page = $request
                        .table_name(table)
                        .projection_expression("tenant_id, id, discarded, purge_since")
                        .set_exclusive_start_key(start)
                        .consistent_read(true)
                        .send()
                        .await
                        .map_err(classify)?;
                    (page.items.unwrap_or_default(), page.last_evaluated_key)
                }};
            }
            let (items, next) = match tenant {
                Some(tenant) => page!(
                    self.client
                        .query()
                        .key_condition_expression("tenant_id = :t")
                        .expression_attribute_values(":t", s(tenant.as_str()))
                ),
                None => page!(self.client.scan()),
            };
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
                self.client
                    .update_item()
                    .table_name(table)
                    .key("tenant_id", s(tenant))
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
    /// takes it [`crate::runs::ABANDONED_AFTER`] later); nothing if the item is gone.
    async fn index(&self, tenant: &str, item: &str, id: &ExecutionId, now: DateTime<Utc>) -> Result<(), StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(self.tables.name(Table::Executions))
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

    /// The table and key of the tenant's hidden item, to read it beside a checkpoint's
    /// entry.
    #[must_use]
    pub fn hidden_key(&self, tenant: &TenantId) -> (&str, Item) {
        let key = HashMap::from([("tenant_id".to_owned(), s(tenant.as_str())), ("id".to_owned(), s(HIDDEN))]);
        (self.tables.name(Table::Executions), key)
    }

    async fn decode(&self, tenant: &TenantId, items: Vec<Item>) -> Result<Vec<Execution>, StoreError> {
        let records =
            items.into_iter().map(serde_dynamo::from_item::<_, ExecutionRecord>).collect::<Result<Vec<_>, _>>()?;
        let parts: Vec<String> = records.iter().flat_map(ExecutionRecord::external_parts).collect();
        let blobs = self.blobs.read(tenant, &parts).await?;
        records.into_iter().map(|r| r.into_execution(&blobs)).collect()
    }

    /// The execution `id` of `tenant`, if it exists.
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn get(&self, tenant: &TenantId, id: &ExecutionId) -> Result<Option<Execution>, StoreError> {
        let item = get_item(
            &self.client,
            self.tables.name(Table::Executions),
            &[("tenant_id", tenant.as_str()), ("id", id.as_str())],
        )
        .await?;
        Ok(self.decode(tenant, item.into_iter().collect()).await?.pop())
    }

    /// One window of the tenant's executions, newest first, and the total matching.
    /// The executions are summaries: their `input` and `output` are not read (`None`).
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn list(
        &self,
        tenant: &TenantId,
        filter: &ListFilter,
        after: Option<&ExecutionId>,
        skip: usize,
        take: usize,
    ) -> Result<(Vec<Execution>, u64), StoreError> {
        let t = tenant.as_str();
        let (index, key, value) = match (&filter.status, &filter.workflow_id) {
            (None, None) => (None, "tenant_id", t.to_owned()),
            (Some(st), None) => (Some("by_status"), "tenant_status", format!("{t}#{}", st.wire())),
            (None, Some(w)) => (Some("by_workflow"), "tenant_workflow", format!("{t}#{w}")),
            (Some(st), Some(w)) => {
                (Some("by_workflow_status"), "tenant_workflow_status", format!("{t}#{w}#{}", st.wire()))
            }
        };
        let Some(window) = created_millis(filter.created_after, filter.created_before) else {
            return Ok((Vec::new(), 0));
        };
        let range = id_range(ExecutionId::PREFIX, window.0, window.1);
        let Some(start) = start_after(tenant, (key, &value), &range, after.map(ExecutionId::as_str)) else {
            return Ok((Vec::new(), 0));
        };
        let query = newest_first_in(&self.client, self.tables.name(Table::Executions), index, (key, value), range);
        let timed = filter.created_after.is_some() || filter.created_before.is_some();
        let total = async {
            if timed {
                let family = span_family(filter.workflow_id.as_ref());
                let attribute = filter.status.map_or(shared::spans::ALL, ExecutionStatus::wire);
                self.timed_total(tenant, &query, ExecutionId::PREFIX, (&family, attribute), window).await
            } else {
                counters::read(
                    &self.client,
                    &self.tables,
                    tenant,
                    &counter_name(filter.status, filter.workflow_id.as_ref()),
                )
                .await
            }
        };
        let window = query_window_from(query.clone(), "id", start, skip, take, SUMMARY_ATTRIBUTES);
        let (items, total) = tokio::try_join!(window, total)?;
        Ok((self.decode(tenant, items).await?, total))
    }

    /// A condition that execution `id` exists and is running, for a transaction that
    /// changes what belongs to it without changing it.
    ///
    /// # Errors
    /// [`StoreError`] if the operation cannot be built.
    pub fn check_running(&self, tenant: &TenantId, id: &ExecutionId) -> Result<TransactWriteItem, StoreError> {
        let check = aws_sdk_dynamodb::types::ConditionCheck::builder()
            .table_name(self.tables.name(Table::Executions))
            .key("tenant_id", s(tenant.as_str()))
            .key("id", s(id.as_str()))
            .condition_expression("#status = :running")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":running", s(ExecutionStatus::Running.wire()))
            .build()
            .map_err(|e| StoreError::Other(Box::new(e)))?;
        Ok(TransactWriteItem::builder().condition_check(check).build())
    }

    /// Adds the deletion of execution `e` (as read: conditioned on its version) to `tx`:
    /// the execution, its key's pointer, its payload blobs and its counts, and puts the
    /// marker of the purge of its checkpoints ([`Self::purging`]).
    ///
    /// # Errors
    /// [`StoreError`] if an operation cannot be built.
    pub fn stage_delete(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        e: &Execution,
        now: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        let table = self.tables.name(Table::Executions);
        let key = |id: String| -> Result<TransactWriteItem, StoreError> {
            let delete = aws_sdk_dynamodb::types::Delete::builder()
                .table_name(table)
                .key("tenant_id", s(tenant.as_str()))
                .key("id", s(id));
            Ok(TransactWriteItem::builder().delete(built(delete.build())?).build())
        };
        let delete = aws_sdk_dynamodb::types::Delete::builder()
            .table_name(table)
            .key("tenant_id", s(tenant.as_str()))
            .key("id", s(e.id.as_str()))
            .condition_expression("version = :expected")
            .expression_attribute_values(":expected", n(e.version));
        tx.push(Part::Execution, TransactWriteItem::builder().delete(built(delete.build())?).build());
        if let Some(k) = &e.key {
            tx.push(Part::Key, key(key_pointer(&e.workflow_id, k))?);
        }
        for name in ["input", "output"] {
            self.blobs.stage_delete(tx, Part::Blob, tenant, &format!("{}#{name}", e.id))?;
        }
        let marker = HashMap::from([
            ("tenant_id".to_owned(), s(tenant.as_str())),
            ("id".to_owned(), s(purge_marker(&e.id))),
            ("purge_shard".to_owned(), s(purge_shard(&e.id))),
            ("purge_since".to_owned(), s(shared::time::format(now))),
        ]);
        let put = Put::builder().table_name(table).set_item(Some(marker));
        tx.push(Part::Execution, TransactWriteItem::builder().put(built(put.build())?).build());
        self.stage_hidden(tx, tenant, &e.id, &[ALL])?;
        let change = CounterChange::between(&e.counters(), &[]);
        tx.extend(Part::Counters, change.transact_items(&self.tables, tenant)?);
        Ok(())
    }

    /// Whether a deletion of execution `id` has checkpoints left to purge.
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn purging(&self, tenant: &TenantId, id: &ExecutionId) -> Result<bool, StoreError> {
        self.has(Table::Executions, tenant, &purge_marker(id)).await
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
    pub async fn unfinished_deletions(
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
                    .table_name(self.tables.name(Table::Executions))
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
                    let tenant = shared::auth::stored::owner(&text("tenant_id"));
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

    /// Drops the purge marker of execution `id` and its entry in the tenant's hidden
    /// item, in one transaction: its deletion is complete.
    ///
    /// # Errors
    /// The write's [`TransactionError`].
    pub async fn purged(&self, tenant: &TenantId, id: &ExecutionId) -> Result<(), TransactionError> {
        let mut tx = Transaction::new();
        let delete = aws_sdk_dynamodb::types::Delete::builder()
            .table_name(self.tables.name(Table::Executions))
            .key("tenant_id", s(tenant.as_str()))
            .key("id", s(purge_marker(id)));
        tx.push(Part::Execution, TransactWriteItem::builder().delete(built(delete.build())?).build());
        self.stage_hidden(&mut tx, tenant, id, &[])?;
        tx.commit(&self.client).await
    }

    /// The checkpoints of execution `id` hidden by the tenant's hidden item as read
    /// (`None`: not read, nothing hidden).
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] for an entry that is not a list of ranges.
    pub fn hidden_in(item: Option<&Item>, id: &ExecutionId) -> Result<Vec<Discarded>, StoreError> {
        let Some(value) = item.and_then(|item| item.get(id.as_str())) else { return Ok(Vec::new()) };
        let ranges: Vec<DiscardedRecord> = serde_dynamo::from_attribute_value(value.clone())?;
        Ok(ranges.into_iter().map(Discarded::from).collect())
    }

    /// The execution of `workflow` whose key is `key`: two consistent point reads (the
    /// key's pointer, then the execution), not one read of an eventually consistent
    /// index, so a client finds what it has just started.
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn by_key(
        &self,
        tenant: &TenantId,
        workflow: &WorkflowId,
        key: &str,
    ) -> Result<Option<Execution>, StoreError> {
        let table = self.tables.name(Table::Executions);
        let pointer = key_pointer(workflow, key);
        let Some(item) = get_item(&self.client, table, &[("tenant_id", tenant.as_str()), ("id", &pointer)]).await?
        else {
            return Ok(None);
        };
        let pointer: KeyPointer = serde_dynamo::from_item(item)?;
        let id = ExecutionId::parse(&pointer.execution_id)
            .ok_or_else(|| StoreError::Corrupt(format!("key pointer {}: execution_id", pointer.id)))?;
        self.get(tenant, &id).await
    }

    /// Whether the tenant has the execution `id` (one small read: its id alone).
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn exists(&self, tenant: &TenantId, id: &ExecutionId) -> Result<bool, StoreError> {
        self.has(Table::Executions, tenant, id.as_str()).await
    }

    /// Whether the tenant has the failure `id`.
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn failure_exists(&self, tenant: &TenantId, id: &FailureId) -> Result<bool, StoreError> {
        self.has(Table::Failures, tenant, id.as_str()).await
    }

    async fn has(&self, table: Table, tenant: &TenantId, id: &str) -> Result<bool, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(self.tables.name(table))
            .key("tenant_id", s(tenant.as_str()))
            .key("id", s(id))
            .projection_expression("id")
            .consistent_read(true)
            .send()
            .await
            .map_err(classify)?;
        Ok(out.item.is_some())
    }

    /// Whether the tenant has ever had executions of `workflow` (its counter exists).
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn workflow_seen(&self, tenant: &TenantId, workflow: &WorkflowId) -> Result<bool, StoreError> {
        let name = counter_name(None, Some(workflow));
        let key = [("tenant_id", tenant.as_str()), ("name", name.as_str())];
        Ok(get_item(&self.client, self.tables.name(Table::Counters), &key).await?.is_some())
    }

    // ---- failures ----

    /// Adds a new failure, its counts and the day's failure to `tx`.
    ///
    /// # Errors
    /// [`StoreError`] if an operation cannot be built.
    pub fn stage_failure(&self, tx: &mut Transaction, tenant: &TenantId, f: &Failure) -> Result<(), StoreError> {
        let item = serde_dynamo::to_item(FailureRecord::new(tenant, f))?;
        tx.push(Part::Failure, self.put_item(Table::Failures, item, "attribute_not_exists(id)", None)?);
        let mut change = CounterChange::between(&[], &f.counters());
        change.add(&counters::daily("failures", f.created_at.date_naive()), 1);
        tx.extend(Part::Counters, change.transact_items(&self.tables, tenant)?);
        Ok(())
    }

    /// Adds the change of a failure from `old` to `new` to `tx`, without its counter
    /// moves, which are returned to join the transaction's one counter update.
    ///
    /// # Errors
    /// [`StoreError`] if an operation cannot be built.
    pub fn stage_failure_replace(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        old: &Failure,
        new: &Failure,
    ) -> Result<CounterChange, StoreError> {
        let item = serde_dynamo::to_item(FailureRecord::new(tenant, new))?;
        tx.push(Part::Failure, self.put_item(Table::Failures, item, "version = :expected", Some(old.version))?);
        Ok(CounterChange::between(&old.counters(), &new.counters()))
    }

    /// The failures with these ids (missing ones are left out).
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn failures(&self, tenant: &TenantId, ids: &[FailureId]) -> Result<Vec<Failure>, StoreError> {
        let keys = ids
            .iter()
            .map(|id| HashMap::from([("tenant_id".to_owned(), s(tenant.as_str())), ("id".to_owned(), s(id.as_str()))]))
            .collect();
        let items = batch_get(&self.client, self.tables.name(Table::Failures), keys).await?;
        items.into_iter().map(|item| serde_dynamo::from_item::<_, FailureRecord>(item)?.into_failure()).collect()
    }

    /// One window of a tenant's failures, newest first (optionally of one status and
    /// time range), and the total matching.
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn list_failures(
        &self,
        tenant: &TenantId,
        filter: &FailureFilter,
        after: Option<&FailureId>,
        skip: usize,
        take: usize,
    ) -> Result<(Vec<Failure>, u64), StoreError> {
        let FailureFilter { status, created_after, created_before } = *filter;
        let t = tenant.as_str();
        let (index, key, value) = match status {
            None => (None, "tenant_id", t.to_owned()),
            Some(st) => (Some("by_status"), "tenant_status", format!("{t}#{}", st.wire())),
        };
        let table = self.tables.name(Table::Failures);
        let Some(window) = created_millis(created_after, created_before) else {
            return Ok((Vec::new(), 0));
        };
        let range = id_range(FailureId::PREFIX, window.0, window.1);
        let Some(start) = start_after(tenant, (key, &value), &range, after.map(FailureId::as_str)) else {
            return Ok((Vec::new(), 0));
        };
        let query = newest_first_in(&self.client, table, index, (key, value), range);
        let timed = created_after.is_some() || created_before.is_some();
        let total = async {
            if timed && status.is_some() {
                shared::dynamo::count(query.clone(), MAX_COUNTED).await
            } else if timed {
                let family = (crate::runs::failure::SPAN_FAMILY, shared::spans::ALL);
                self.timed_total(tenant, &query, FailureId::PREFIX, family, window).await
            } else {
                counters::read(&self.client, &self.tables, tenant, &crate::runs::failure::counter_name(status)).await
            }
        };
        let (items, total) = tokio::try_join!(query_window_from(query.clone(), "id", start, skip, take, &[]), total)?;
        let failures = items
            .into_iter()
            .map(|item| serde_dynamo::from_item::<_, FailureRecord>(item)?.into_failure())
            .collect::<Result<Vec<_>, _>>()?;
        Ok((failures, total))
    }

    /// The `total` of a time-filtered list whose window is milliseconds `window` and
    /// whose items `query` finds (newest first, ids of `prefix` between `:lo` and `:hi`):
    /// whole minutes, hours and days from the span counters of `family`, the partial
    /// minutes at its ends counted from the items (up to [`MAX_COUNTED`] each).
    async fn timed_total(
        &self,
        tenant: &TenantId,
        query: &aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
        prefix: &str,
        family: (&str, &str),
        window: (u64, u64),
    ) -> Result<u64, StoreError> {
        let edge = |from, to| {
            let (lo, hi) = id_range(prefix, from, to);
            let edge =
                query.clone().expression_attribute_values(":lo", s(lo)).expression_attribute_values(":hi", s(hi));
            shared::dynamo::count(edge, MAX_COUNTED)
        };
        shared::spans::total(&self.client, &self.tables, tenant, family, window, edge).await
    }
}

/// The most items a count of items examines: the partial minutes at the ends of a
/// time-filtered window, and a time-filtered failure list with a status filter (beyond
/// it, `total` is this number, documented), so a request's cost stays bounded
/// whatever the tenant's data.
pub const MAX_COUNTED: u64 = 10_000;

/// Where a newest-first list of ids in `range` starts after the id `after`: from the
/// top (no cursor, or one newer than the range), after it (`Some(Some(key))`), or
/// nowhere: `None` when it is older than the range, so nothing follows it.
fn start_after(
    tenant: &TenantId,
    partition: (&str, &str),
    range: &(String, String),
    after: Option<&str>,
) -> Option<Option<Item>> {
    let Some(after) = after else { return Some(None) };
    if after > range.1.as_str() {
        return Some(None);
    }
    if after < range.0.as_str() {
        return None;
    }
    Some(Some(resume_after(tenant.as_str(), ("id", s(after)), partition)))
}

#[derive(Debug, Serialize, Deserialize)]
struct CommandRecord {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    status: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct FailureRecord {
    tenant_id: String,
    id: String,
    execution_id: String,
    workflow_id: String,
    error_type: String,
    message: String,
    /// JSON text of the details object.
    details: String,
    status: String,
    recovery_commands: Vec<CommandRecord>,
    version: u64,
    created_at: String,
    resolved_at: Option<String>,
    tenant_status: String,
}

impl FailureRecord {
    fn new(tenant: &TenantId, f: &Failure) -> Self {
        Self {
            tenant_id: tenant.as_str().to_owned(),
            id: f.id.to_string(),
            execution_id: f.execution_id.to_string(),
            workflow_id: f.workflow_id.to_string(),
            error_type: f.error_type.clone(),
            message: f.message.clone(),
            details: Value::Object(f.details.clone()).to_string(),
            status: f.status.wire().to_owned(),
            recovery_commands: f
                .recovery_commands
                .iter()
                .map(|c| CommandRecord {
                    id: c.id.to_string(),
                    kind: c.kind.clone(),
                    status: c.status.wire().to_owned(),
                })
                .collect(),
            version: f.version,
            created_at: shared::time::format(f.created_at),
            resolved_at: f.resolved_at.map(shared::time::format),
            tenant_status: format!("{}#{}", tenant.as_str(), f.status.wire()),
        }
    }

    fn into_failure(self) -> Result<Failure, StoreError> {
        let id = self.id.clone();
        let corrupt = |what: &str| StoreError::Corrupt(format!("failure {id}: {what}"));
        let time = |t: &str| shared::time::parse(t).map_err(|_| corrupt("timestamp"));
        let details: Map<String, Value> = serde_json::from_str(&self.details).map_err(|_| corrupt("details"))?;
        Ok(Failure {
            id: FailureId::parse(&self.id).ok_or_else(|| corrupt("id"))?,
            execution_id: ExecutionId::parse(&self.execution_id).ok_or_else(|| corrupt("execution_id"))?,
            workflow_id: WorkflowId::parse(&self.workflow_id).ok_or_else(|| corrupt("workflow_id"))?,
            error_type: self.error_type,
            message: self.message,
            details,
            status: FailureStatus::from_wire(&self.status).ok_or_else(|| corrupt("status"))?,
            recovery_commands: self
                .recovery_commands
                .into_iter()
                .map(|c| {
                    Ok(RecoveryCommand {
                        id: CommandId::parse(&c.id).ok_or_else(|| corrupt("command id"))?,
                        kind: c.kind,
                        status: CommandStatus::from_wire(&c.status).ok_or_else(|| corrupt("command status"))?,
                    })
                })
                .collect::<Result<_, StoreError>>()?,
            version: self.version,
            created_at: time(&self.created_at)?,
            resolved_at: self.resolved_at.as_deref().map(time).transpose()?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tenant's hidden item is one item, so DynamoDB's 400 KB bounds it. An entry,
    /// as written, costs at most its execution id and one range per unfinished cleanup
    /// or deletion: computed here, the item holds thousands of abandoned deletions
    /// (the README's "about 70 bytes" each) before a write to it would be refused.
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
