//! Executions in DynamoDB.
//!
//! Table `executions` (`tenant_id`, `id`): ids are UUIDv7, so `id` ranges are time
//! ranges and descending order is newest first. GSIs `by_status` (`tenant_status`),
//! `by_workflow` (`tenant_workflow`) and `by_workflow_status` (`tenant_workflow_status`),
//! each sorted by `id`, serve the filters without filter expressions. Input and output
//! are compressed and inline when small, else in `blobs` (`exec_…#input`, `#output`).
//! Beside the executions, outside their id ranges: key pointers (`key#…`), and the purge
//! markers and the tenant's `hidden` item of [`crate::runs::deletion`].
//!
//! Where they are: an execution started since executions are spread
//! ([`Execution::spread`]) is in one of the tenant's [`storage::SHARDS`] partitions
//! (`tenant_id` = `ten_…#07`, by its id's last digit), and its index keys carry the same
//! prefix (`ten_…#07#running`), so that no partition of the table or of an index takes
//! more than a sixteenth of a busy tenant's starts and checkpoints; its key's pointer is
//! in the shard of the key's hash. An execution from before is in the tenant's partition
//! (`ten_…`, `ten_…#running`), as it always was. A read by id looks in both places; a
//! list merges the 17 partitions' queries newest first ([`storage::merged_window`]).
//!
//! Every change is a whole-item put conditioned on the version that was read; totals come
//! from counters changed in the same transaction.
//!
//! **Heads.** A headed execution ([`Execution::headed`]: started since heads) keeps its
//! checkpoint progress in a small item of its own once it has one, its *head*
//! (`id` = `head#exec_…` in the execution's own partition `ten_…#exec_…`, none of the
//! index attributes): a checkpoint
//! puts the head alone ([`ExecutionStore::stage_progress`]), so it rewrites neither the
//! execution's item nor its three list index entries, which project every attribute.
//! Every other change puts the item and the head, each conditioned on the version read,
//! so every change of a headed execution is ordered by its head. Its first checkpoint
//! makes the head, with a check that the item is as read. A read takes the head's
//! progress over the item's when the head was written beside that version of the item
//! (`item_version`), and reads both again when the head is of a later one (a batch read
//! is not isolated from a transaction: [`heads`]).

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{ConditionCheck, Delete, TransactWriteItem};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use shared::TenantId;
use shared::body::WireEnum;
use shared::counters::{self, CounterChange};
use shared::dynamo::{Item, Part, StoreError, Table, Tables, Transaction, built, get_item, n, newest_first_in, s};
use shared::ids::{CheckpointId, ExecutionId, FailureId, WorkflowId, created_millis, id_range};

use super::model::{
    Discarded, Execution, ExecutionError, ExecutionStatus, counter_name, span_family, tag_counter_name,
};
use super::tags;
use crate::blobs::BlobStore;
use crate::runs::ListExecutions;
use crate::runs::deletion::{DiscardedRecord, HiddenStore, purge_shard};
use crate::runs::storage::{self, Source, merged_window, put_item, start_after, timed_total};

mod heads;

use self::heads::{HEAD_PREFIX, HeadRecord, head_key};

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

/// The execution whose start wrote `item` (a new item of the executions table, as its
/// stream record carries it), with the partition it is in, when that start reports
/// `execution.started` through the stream (`started_by_stream`); `None` for any other
/// item of the table. Its input is left out (the event does not carry it).
///
/// # Errors
/// [`StoreError::Corrupt`] for a marked item this code cannot read.
pub fn started_entry(item: &Item) -> Result<Option<(String, Execution)>, StoreError> {
    if !item.get("started_by_stream").is_some_and(|v| v.as_bool().is_ok_and(|marked| *marked)) {
        return Ok(None);
    }
    let mut record: ExecutionRecord = serde_dynamo::from_item(item.clone())?;
    record.input = StoredValue::default();
    record.output = StoredValue::default();
    let partition = record.tenant_id.clone();
    Ok(Some((partition, record.into_execution(&HashMap::new())?)))
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
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    tags: BTreeMap<String, String>,
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
    /// Once ended: when it expires (see `crate::retention`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checkpoints_expire_at: Option<String>,
    tenant_status: String,
    tenant_workflow: String,
    tenant_workflow_status: String,
    /// While `discarded` is not empty: the execution is in the janitor's index
    /// (`by_purge`), as of its creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    purge_shard: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    purge_since: Option<String>,
    /// Its checkpoints are apart (absent: an execution from before, all in the tenant's
    /// partition).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    checkpoints_apart: bool,
    /// Each of its checkpoints is one entry in a partition of its own, found by the
    /// checkpoint's id (absent: two entries, as `checkpoints_apart` says where).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    checkpoints_joined: bool,
    /// Written by the start that made the item (and no later write): its
    /// `execution.started` event is the item's stream record ([`started_entry`]), not an
    /// outbox item. Absent on an item an earlier version started, whose event is in the
    /// outbox.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    started_by_stream: bool,
    /// Its checkpoint progress is in its head once it has one (absent: not headed).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    headed: bool,
}

/// The key of item `id` (an execution's or its head's) in `partition`.
fn key_of(partition: String, id: String) -> Item {
    HashMap::from([("tenant_id".to_owned(), s(partition)), ("id".to_owned(), s(id))])
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
    "tags",
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
    "expires_at",
    "checkpoints_expire_at",
    "tenant_status",
    "tenant_workflow",
    "tenant_workflow_status",
    "checkpoints_apart",
    "checkpoints_joined",
    "headed",
    // A head's (read with its execution's summary).
    "item_version",
];

/// What a list by tag reads of a pointer: its position in any index, and where its
/// execution is.
const POINTER_ATTRIBUTES: &[&str] =
    &["tenant_id", "id", "home", "tenant_status", "tenant_workflow", "tenant_workflow_status"];

impl ExecutionRecord {
    fn new(tenant: &TenantId, e: &Execution) -> (Self, Vec<(String, Vec<u8>)>) {
        let t = &partition(tenant, e);
        let (input, input_blob) = StoredValue::of(e.input.as_ref());
        let (output, output_blob) = StoredValue::of(e.output.as_ref());
        let blobs = [("input", input_blob), ("output", output_blob)]
            .into_iter()
            .filter_map(|(name, blob)| blob.map(|data| (format!("{}#{name}", e.id), data)))
            .collect();
        let record = Self {
            tenant_id: t.clone(),
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
            tags: e.tags.clone(),
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
            expires_at: e.expires_at.map(shared::time::format),
            checkpoints_expire_at: e.checkpoints_expire_at.map(shared::time::format),
            tenant_status: format!("{t}#{}", e.status.wire()),
            tenant_workflow: format!("{t}#{}", e.workflow_id),
            tenant_workflow_status: format!("{t}#{}#{}", e.workflow_id, e.status.wire()),
            purge_shard: (!e.discarded.is_empty()).then(|| purge_shard(&e.id)),
            // The execution's creation, which no write moves: a cleanup is the janitor's
            // once the execution is ABANDONED_AFTER old, however often it is written.
            purge_since: (!e.discarded.is_empty()).then(|| shared::time::format(e.created_at)),
            checkpoints_apart: e.checkpoints_apart,
            checkpoints_joined: e.checkpoints_joined,
            started_by_stream: false,
            headed: e.headed,
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
            tags: self.tags,
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
            expires_at: self.expires_at.as_deref().map(time).transpose()?,
            checkpoints_expire_at: self.checkpoints_expire_at.as_deref().map(time).transpose()?,
            checkpoints_apart: self.checkpoints_apart,
            checkpoints_joined: self.checkpoints_joined,
            spread: self.tenant_id.contains('#'),
            headed: self.headed,
            head_version: None,
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

fn key_pointer(workflow: &WorkflowId, key: &str) -> String {
    storage::keyed_entry(&format!("key#{workflow}"), key)
}

/// The partition of execution `e`'s item: one of the tenant's shards, or (from before
/// executions were spread) the tenant's own.
fn partition(tenant: &TenantId, e: &Execution) -> String {
    if e.spread {
        storage::shard_partition(tenant, storage::shard_of(e.id.as_str()))
    } else {
        tenant.as_str().to_owned()
    }
}

/// The partitions that may hold the item `id` (an execution's, `shard` its shard, or
/// a key pointer's), in the order a read looks: where this version writes first.
fn places(tenant: &TenantId, shard: u8) -> [String; 2] {
    let (sharded, own) = (storage::shard_partition(tenant, shard), tenant.as_str().to_owned());
    if shared::config::spread() { [sharded, own] } else { [own, sharded] }
}

/// The partition of the pointer `pointer` of execution `e`'s key.
fn pointer_partition(tenant: &TenantId, e: &Execution, pointer: &str) -> String {
    if e.spread { storage::shard_partition(tenant, storage::shard_of_key(pointer)) } else { tenant.as_str().to_owned() }
}

/// Executions of every tenant; each call is scoped to the tenant given.
#[derive(Debug, Clone)]
pub struct ExecutionStore {
    client: Client,
    tables: Tables,
    blobs: BlobStore,
    hidden: HiddenStore,
}

impl ExecutionStore {
    /// A store over `client` and the named tables.
    #[must_use]
    pub fn new(client: Client, tables: Tables) -> Self {
        Self {
            blobs: BlobStore::new(client.clone(), tables.clone()),
            hidden: HiddenStore::new(client.clone(), tables.clone()),
            client,
            tables,
        }
    }

    fn table(&self) -> &str {
        self.tables.name(Table::Executions)
    }

    /// The client, for callers that commit transactions.
    pub(crate) fn client(&self) -> &Client {
        &self.client
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

    /// Adds a new execution (marked when `on_stream`: its item's stream record is its
    /// `execution.started` event, [`started_entry`]), its key's pointer, its counts and the
    /// day's attempt to `tx`,
    /// with `usage` (its charge's counts, [`crate::credits::Ledger::stage_charge`]) in the
    /// same counter items. The pointer is conditioned on the key being free ([`Part::Key`]
    /// fails otherwise).
    ///
    /// # Errors
    /// [`StoreError`] if an operation cannot be built.
    pub fn stage_create(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        (e, on_stream): (&Execution, bool),
        usage: &CounterChange,
    ) -> Result<(), StoreError> {
        let (mut record, blobs) = ExecutionRecord::new(tenant, e);
        record.started_by_stream = on_stream;
        tx.push(
            Part::Execution,
            put_item(self.table(), serde_dynamo::to_item(record)?, "attribute_not_exists(id)", None)?,
        );
        if let Some(key) = &e.key {
            let id = key_pointer(&e.workflow_id, key);
            let pointer =
                KeyPointer { tenant_id: pointer_partition(tenant, e, &id), id, execution_id: e.id.to_string() };
            tx.push(
                Part::Key,
                put_item(self.table(), serde_dynamo::to_item(pointer)?, "attribute_not_exists(id)", None)?,
            );
        }
        self.stage_blobs(tx, tenant, blobs)?;
        tags::stage_create(tx, self.table(), tenant, e, &partition(tenant, e))?;
        let mut change = CounterChange::between(&[], &e.counters());
        change.add(&shared::spans::attempts(e.created_at.date_naive()), 1);
        change.merge(usage);
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
        let put = put_item(self.table(), serde_dynamo::to_item(record)?, "version = :expected", Some(old.version))?;
        tx.push(Part::Execution, put);
        if new.headed {
            self.stage_head(tx, tenant, (old, new), new.version)?;
        }
        let changed: Vec<(String, Vec<u8>)> = blobs
            .into_iter()
            .filter(|(part, _)| {
                (part.ends_with("#input") && old.input != new.input)
                    || (part.ends_with("#output") && old.output != new.output)
            })
            .collect();
        self.stage_blobs(tx, tenant, changed)?;
        if old.discarded != new.discarded {
            self.hidden.stage_hidden(tx, tenant, &new.id, &new.discarded)?;
        }
        tags::stage_status(tx, self.table(), tenant, old, new)?;
        let mut change = CounterChange::between(&old.counters(), &new.counters());
        change.merge(extra);
        tx.extend(Part::Counters, change.transact_items(&self.tables, tenant)?);
        Ok(())
    }

    /// The executions of `items` (as read: executions, in their order, and any heads),
    /// each with its head's progress when it has a head among them.
    async fn decode(&self, tenant: &TenantId, items: Vec<Item>) -> Result<Vec<Execution>, StoreError> {
        let is_head =
            |item: &Item| item.get("id").and_then(|v| v.as_s().ok()).is_some_and(|id| id.starts_with(HEAD_PREFIX));
        let (heads, items): (Vec<Item>, Vec<Item>) = items.into_iter().partition(is_head);
        let mut heads: HashMap<String, HeadRecord> = heads
            .into_iter()
            .map(|item| {
                let head: HeadRecord = serde_dynamo::from_item(item)?;
                Ok((head.execution().to_owned(), head))
            })
            .collect::<Result<_, StoreError>>()?;
        let records =
            items.into_iter().map(serde_dynamo::from_item::<_, ExecutionRecord>).collect::<Result<Vec<_>, _>>()?;
        let parts: Vec<String> = records.iter().flat_map(ExecutionRecord::external_parts).collect();
        let blobs = self.blobs.read(tenant, &parts).await?;
        records
            .into_iter()
            .map(|r| {
                let head = if r.headed { heads.remove(&r.id) } else { None };
                let mut e = r.into_execution(&blobs)?;
                if let Some(head) = head {
                    head.apply(&mut e)?;
                }
                Ok(e)
            })
            .collect()
    }

    /// The execution `id` of `tenant`, if it exists.
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn get(&self, tenant: &TenantId, id: &ExecutionId) -> Result<Option<Execution>, StoreError> {
        // The item and its head in one read.
        for partition in places(tenant, storage::shard_of(id.as_str())) {
            let keys = vec![key_of(partition.clone(), id.to_string()), head_key(&partition, id.as_str())];
            let items = shared::dynamo::batch_get(&self.client, self.table(), keys).await?;
            if items.iter().any(|item| item.get("id").and_then(|v| v.as_s().ok()) == Some(&id.to_string())) {
                let items = self.untorn(items, &[]).await?;
                return Ok(self.decode(tenant, items).await?.pop());
            }
        }
        Ok(None)
    }

    /// Every ended execution with no `expires_at` (ended before retention existed): of
    /// `tenant`'s partitions (queries), or of every tenant (one scan of the table).
    /// Only their keys are read: the owner's id (the partition's, shard left off) and
    /// the execution's. For `cairn-admin migrate lifetimes`.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn ended_without_lifetimes(
        &self,
        tenant: Option<&TenantId>,
    ) -> Result<Vec<(String, ExecutionId)>, StoreError> {
        // A query keeps the id's prefix in its key condition (a filter may not name a key).
        // A running execution's `ended_at` is there, as null.
        let ended = "attribute_type(ended_at, :text) AND attribute_not_exists(expires_at)";
        let partitions: Vec<Option<String>> = match tenant {
            Some(tenant) => storage::tenant_partitions(tenant).map(Some).collect(),
            None => vec![None],
        };
        let mut found = Vec::new();
        for partition in partitions {
            let mut start = None;
            loop {
                // The settings both reads share, on a query or a scan.
                macro_rules! keys_of_ended {
                    ($request:expr) => {{
                        let out = $request
                            .expression_attribute_values(":execution", s("exec_"))
                            .expression_attribute_values(":text", s("S"))
                            .projection_expression("tenant_id, id")
                            .consistent_read(true)
                            .set_exclusive_start_key(start)
                            .send()
                            .await
                            .map_err(shared::dynamo::classify)?;
                        (out.items, out.last_evaluated_key)
                    }};
                }
                let (items, next) = match &partition {
                    Some(partition) => keys_of_ended!(
                        self.client
                            .query()
                            .table_name(self.table())
                            .key_condition_expression("tenant_id = :t AND begins_with(id, :execution)")
                            .expression_attribute_values(":t", s(partition))
                            .filter_expression(ended)
                    ),
                    None => keys_of_ended!(
                        self.client
                            .scan()
                            .table_name(self.table())
                            .filter_expression(format!("begins_with(id, :execution) AND {ended}"))
                    ),
                };
                for item in items.unwrap_or_default() {
                    let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok());
                    let owner = text("tenant_id").map(|t| t.split('#').next().unwrap_or(t).to_owned());
                    found.extend(owner.zip(text("id").and_then(|id| ExecutionId::parse(id))));
                }
                start = next.filter(|key| !key.is_empty());
                if start.is_none() {
                    break;
                }
            }
        }
        Ok(found)
    }

    /// The summaries of the tenant's executions `ids` that exist (in no particular
    /// order): batch reads of their items in either layout, `input` and `output` not read.
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn summaries(&self, tenant: &TenantId, ids: &[ExecutionId]) -> Result<Vec<Execution>, StoreError> {
        // Each in both places, with its head.
        let keys: Vec<Item> = ids
            .iter()
            .flat_map(|id| {
                let items = places(tenant, storage::shard_of(id.as_str()))
                    .into_iter()
                    .map(|partition| key_of(partition, id.to_string()));
                items.chain([head_key(tenant.as_str(), id.as_str())])
            })
            .collect();
        let items = shared::dynamo::batch_get_projected(&self.client, self.table(), keys, SUMMARY_ATTRIBUTES).await?;
        let items = self.untorn(items, SUMMARY_ATTRIBUTES).await?;
        self.decode(tenant, items).await
    }

    /// The window of the tenant's executions that `list` asks for (of `workflow`, its
    /// workflow checked; its key and cursor not looked at), newest first, and the total
    /// matching. The executions are summaries: their `input` and `output` are not read
    /// (`None`).
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn list(
        &self,
        tenant: &TenantId,
        list: &ListExecutions,
        workflow: Option<&WorkflowId>,
    ) -> Result<(Vec<Execution>, u64), StoreError> {
        let (index, key) = match (&list.status, workflow) {
            (None, None) => (None, "tenant_id"),
            (Some(_), None) => (Some("by_status"), "tenant_status"),
            (None, Some(_)) => (Some("by_workflow"), "tenant_workflow"),
            (Some(_), Some(_)) => (Some("by_workflow_status"), "tenant_workflow_status"),
        };
        let value = |p: String| match (&list.status, workflow) {
            (None, None) => p,
            (Some(st), None) => format!("{p}#{}", st.wire()),
            (None, Some(w)) => format!("{p}#{w}"),
            (Some(st), Some(w)) => format!("{p}#{w}#{}", st.wire()),
        };
        let Some(window) = created_millis(list.created_after, list.created_before) else {
            return Ok((Vec::new(), 0));
        };
        // Tagged: the pointers of the rarest tag given, filtered on the others.
        let (partitions, others, tag_total) = if list.tags.is_empty() {
            (storage::tenant_partitions(tenant).collect::<Vec<_>>(), Vec::new(), None)
        } else {
            let rarest = if list.tags.len() == 1 {
                0
            } else {
                let names: Vec<String> = list.tags.iter().map(|(k, v)| tag_counter_name(k, v, None)).collect();
                let counts = counters::read_many(&self.client, &self.tables, tenant, &names).await?;
                counts.iter().enumerate().min_by_key(|(_, n)| **n).map_or(0, |(i, _)| i)
            };
            let (k, v) = &list.tags[rarest];
            let partitions = (0..storage::SHARDS).map(|shard| tags::partition(tenant, shard, k, v)).collect();
            let mut others = list.tags.clone();
            others.remove(rarest);
            // One tag without a workflow or time filter: its counter is the total.
            let counted = others.is_empty() && workflow.is_none() && list.created_after.is_none();
            let total = (counted && list.created_before.is_none()).then(|| tag_counter_name(k, v, list.status));
            (partitions, others, Some(total))
        };
        let range = id_range(ExecutionId::PREFIX, window.0, window.1);
        let after = list.after.as_ref().map(ExecutionId::as_str);
        let mut sources = Vec::new();
        for partition in partitions {
            let value = value(partition.clone());
            let Some(start) = start_after(&partition, (key, &value), &range, after) else {
                return Ok((Vec::new(), 0));
            };
            let query =
                tags::having(newest_first_in(&self.client, self.table(), index, (key, value), range.clone()), &others);
            sources.push(Source { query, start });
        }
        let queries: Vec<_> = sources.iter().map(|source| source.query.clone()).collect();
        let timed = list.created_after.is_some() || list.created_before.is_some();
        let total = async {
            match &tag_total {
                Some(Some(name)) => counters::read(&self.client, &self.tables, tenant, name).await,
                Some(None) => {
                    let counts = queries.iter().map(|q| shared::dynamo::count(q.clone(), storage::MAX_COUNTED));
                    let sum: u64 = futures_util::future::try_join_all(counts).await?.into_iter().sum();
                    Ok(sum.min(storage::MAX_COUNTED))
                }
                None if timed => {
                    let family = span_family(workflow);
                    let attribute = list.status.map_or(shared::spans::ALL, ExecutionStatus::wire);
                    timed_total(
                        &self.client,
                        &self.tables,
                        tenant,
                        &queries,
                        ExecutionId::PREFIX,
                        (&family, attribute),
                        window,
                    )
                    .await
                }
                None => counters::read(&self.client, &self.tables, tenant, &counter_name(list.status, workflow)).await,
            }
        };
        let keys: &[&str] = if index.is_some() { &["tenant_id", "id", key] } else { &["tenant_id", "id"] };
        let attributes: &[&str] = if tag_total.is_some() { POINTER_ATTRIBUTES } else { SUMMARY_ATTRIBUTES };
        let window = merged_window(sources, keys, list.skip, list.take, attributes);
        let (items, total) = tokio::try_join!(window, total)?;
        let items = if tag_total.is_some() { self.pointed(items).await? } else { self.with_heads(items).await? };
        Ok((self.decode(tenant, items).await?, total))
    }

    /// The summaries of the executions tag pointers `pointers` point to, in their order
    /// (one deleted since the pointer was read is left out).
    async fn pointed(&self, pointers: Vec<Item>) -> Result<Vec<Item>, StoreError> {
        let text = |item: &Item, name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
        // Each with its head.
        let keys: Vec<Item> = pointers
            .iter()
            .flat_map(|p| [key_of(text(p, "home"), text(p, "id")), head_key(&text(p, "home"), &text(p, "id"))])
            .collect();
        let mut found: HashMap<String, Item> =
            shared::dynamo::batch_get_projected(&self.client, self.table(), keys, SUMMARY_ATTRIBUTES)
                .await?
                .into_iter()
                .map(|item| (text(&item, "id"), item))
                .collect();
        let mut items: Vec<Item> = pointers.iter().filter_map(|p| found.remove(&text(p, "id"))).collect();
        items.extend(found.into_values().filter(|item| text(item, "id").starts_with(HEAD_PREFIX)));
        self.untorn(items, SUMMARY_ATTRIBUTES).await
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
        let table = self.table();
        let pointer = key_pointer(workflow, key);
        let mut found = None;
        for partition in places(tenant, storage::shard_of_key(&pointer)) {
            found = get_item(&self.client, table, &[("tenant_id", &partition), ("id", &pointer)]).await?;
            if found.is_some() {
                break;
            }
        }
        let Some(item) = found else { return Ok(None) };
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
        for partition in places(tenant, storage::shard_of(id.as_str())) {
            if storage::has(&self.client, self.table(), &partition, id.as_str()).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Whether the tenant has ever had executions of `workflow` (its counter exists).
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn workflow_seen(&self, tenant: &TenantId, workflow: &WorkflowId) -> Result<bool, StoreError> {
        counters::exists(&self.client, &self.tables, tenant, &counter_name(None, Some(workflow))).await
    }

    /// A condition that execution `e` (as read) still exists and is running, for a
    /// transaction that changes what belongs to it without changing it.
    ///
    /// # Errors
    /// [`StoreError`] if the operation cannot be built.
    pub fn check_running(&self, tenant: &TenantId, e: &Execution) -> Result<TransactWriteItem, StoreError> {
        let check = ConditionCheck::builder()
            .table_name(self.table())
            .key("tenant_id", s(partition(tenant, e)))
            .key("id", s(e.id.as_str()))
            .condition_expression("#status = :running")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":running", s(ExecutionStatus::Running.wire()))
            .build()
            .map_err(|e| StoreError::Other(Box::new(e)))?;
        Ok(TransactWriteItem::builder().condition_check(check).build())
    }

    /// Adds the deletion of execution `e` (as read: conditioned on its version) to `tx`:
    /// the execution, its key's pointer, its payload blobs and its counts, and puts the
    /// marker of the purge of its checkpoints.
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
        self.stage_expire(tx, tenant, e)?;
        self.hidden.stage_purge(tx, tenant, &e.id, now)
    }

    /// Adds to `tx` the deletion of execution `e` as [`Self::stage_delete`] does, but
    /// with no purge marker: its checkpoints are gone already (an expiry deletes them
    /// first, `crate::runs::expiry`).
    ///
    /// # Errors
    /// [`StoreError`] if an operation cannot be built.
    pub fn stage_expire(&self, tx: &mut Transaction, tenant: &TenantId, e: &Execution) -> Result<(), StoreError> {
        let table = self.table();
        let delete = Delete::builder()
            .table_name(table)
            .key("tenant_id", s(partition(tenant, e)))
            .key("id", s(e.id.as_str()))
            .condition_expression("version = :expected")
            .expression_attribute_values(":expected", n(e.version));
        tx.push(Part::Execution, TransactWriteItem::builder().delete(built(delete.build())?).build());
        if e.headed {
            // Its head, as read: none must have been made since (by a first checkpoint).
            let head = Delete::builder().table_name(table).set_key(Some(head_key(tenant.as_str(), e.id.as_str())));
            let head = match e.head_version {
                Some(version) => head
                    .condition_expression("version = :expected")
                    .expression_attribute_values(":expected", n(version)),
                None => head.condition_expression("attribute_not_exists(id)"),
            };
            tx.push(Part::Execution, TransactWriteItem::builder().delete(built(head.build())?).build());
        }
        if let Some(k) = &e.key {
            let id = key_pointer(&e.workflow_id, k);
            let pointer = Delete::builder().table_name(table).key("tenant_id", s(pointer_partition(tenant, e, &id)));
            tx.push(Part::Key, TransactWriteItem::builder().delete(built(pointer.key("id", s(id)).build())?).build());
        }
        for name in ["input", "output"] {
            self.blobs.stage_delete(tx, Part::Blob, tenant, &format!("{}#{name}", e.id))?;
        }
        tags::stage_delete(tx, table, tenant, e)?;
        let change = CounterChange::between(&e.counters(), &[]);
        tx.extend(Part::Counters, change.transact_items(&self.tables, tenant)?);
        Ok(())
    }
}
