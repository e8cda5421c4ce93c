//! Checkpoints in DynamoDB, shared by the checkpoints function (which writes and reads
//! them) and the executions function (replay and rollback).
//!
//! Table `checkpoints` (`tenant_id`, `entry`). Where a checkpoint is ([`Layout`], as its
//! execution says):
//! - **Joined**, every execution started since (unless `CHECKPOINT_ENTRIES=two`): one
//!   entry a checkpoint, with its state inline when small, in a partition of the
//!   execution's (`ten_…#c` and the execution's [`ExecutionId::mark`]), keyed
//!   `0000000042#cp_…`. The checkpoint's id carries the mark and the sequence
//!   ([`CheckpointId::in_execution`]), so a read by id finds the entry with no other, and
//!   listing an execution's checkpoints in sequence order is one consistent query of its
//!   partition (the state left out; filtered on the execution, as another of the tenant's
//!   may share the mark). A write puts one entry and the execution's head: 4 write units.
//! - **Apart**, executions started before that: two entries, both never changed: the
//!   *by-id* entry (`entry` = `cp_…`, with the state) in one of the tenant's [`SHARDS`]
//!   partitions (`ten_…#07`, by the id's last digit), and the *by-execution* entry
//!   (`exec_…#0000000042`, no state) in the execution's own (`ten_…#exec_…`).
//! - **Tenant**, executions from before that (or started with `PARTITIONS=tenant`): the
//!   same two entries, both in the tenant's partition (`ten_…`).
//!
//! Beside them, a keyed checkpoint's two pointers, from its key within the execution
//! (`exec_…#key#…`, unique, where its execution's entries are) and within the workflow
//! (`wf_…#ckey#…#cp_…`, one per checkpoint, found with one query per partition), and its
//! writes document ([`super::writes`]), both where the by-id entry is (a joined
//! checkpoint's: the tenant's shard of its id). A read by id looks where the id names,
//! then apart, then in the tenant's partition.
//!
//! A joined entry holds a state of up to [`super::model::JOINED_INLINE_MAX`]; a larger one
//! is an item beside it (`state#0000000042#cp_…`, outside every range of sequences),
//! read with it by id in one call, so that what lists, counts and rollbacks read of each
//! checkpoint stays small.
//!
//! A state is compressed; when it is still larger than [`super::model::INLINE_STATE_MAX`]
//! it is split into parts of [`super::model::PART_SIZE`] in table `blobs` (`cp_…#0000`, …) written in the same
//! transaction as the entries, so a reader never sees a half-written state and a failed
//! write leaves nothing behind.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem};
use serde::{Deserialize, Serialize};
use shared::TenantId;
use shared::dynamo::{
    Item, Part, StoreError, Table, Tables, Transaction, built, classify, get_item, n, query_window, query_window_of, s,
};
use shared::ids::{CheckpointId, ExecutionId, WorkflowId};

pub use super::layout::{Layout, SHARDS};
use super::layout::{
    by_execution_entry, joined_entry, key_entry, state_entry, workflow_key_entry, workflow_key_prefix,
};
use super::model::{
    Checkpoint, LAST_SEQUENCE, ListWindow, MAX_EXAMINED, PackedState, Page, STATE_MAX_BYTES, StoredCheckpoint,
};
use super::writes::{writes_entry, writes_part_key};
use crate::blobs::BlobStore;
use crate::runs::executions::model::{Discarded, Execution};

/// The stored form of both entries of a checkpoint.
#[derive(Debug, Serialize, Deserialize)]
struct CheckpointRecord {
    tenant_id: String,
    entry: String,
    id: String,
    execution_id: String,
    workflow_id: String,
    sequence: u64,
    name: Option<String>,
    /// The client's key (`key` is a DynamoDB reserved word).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    client_key: Option<String>,
    parent_checkpoint_id: Option<String>,
    attempt: u32,
    metadata: BTreeMap<String, String>,
    state_size_bytes: u64,
    created_at: String,
    /// Number of parts in `blobs`; 0 when the state is inline.
    state_parts: u32,
    /// The compressed state, in the by-id entry when small.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    state: Option<serde_bytes::ByteBuf>,
}

/// A checkpoint's by-id entry as read: the checkpoint, its state not opened yet.
#[derive(Debug)]
pub struct Entry {
    record: CheckpointRecord,
    checkpoint: Checkpoint,
}

impl Entry {
    /// Decodes a read entry item.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] for an item that is not a checkpoint's entry.
    pub fn from_item(item: Item) -> Result<Self, StoreError> {
        let record: CheckpointRecord = serde_dynamo::from_item(item)?;
        let checkpoint = record.checkpoint()?;
        Ok(Self { record, checkpoint })
    }

    /// The entry with its state from `beside`, the item beside it read with it
    /// ([`CheckpointStore::state_key`]), where it keeps its state there.
    ///
    /// # Errors
    /// [`StoreError::Corrupt`] when that item is missing or not a state.
    pub fn with_beside(mut self, beside: Option<Item>) -> Result<Self, StoreError> {
        let record = &self.record;
        if record.state.is_some() || !record.layout().state_beside(record.state_parts, record.state_size_bytes) {
            return Ok(self);
        }
        let corrupt = || StoreError::Corrupt(format!("checkpoint {}: its state beside it is missing", record.id));
        let beside: StateRecord = serde_dynamo::from_item(beside.ok_or_else(corrupt)?)?;
        self.record.state = Some(beside.state);
        Ok(self)
    }

    /// The checkpoint, without its state.
    #[must_use]
    pub fn checkpoint(&self) -> &Checkpoint {
        &self.checkpoint
    }

    /// Where the checkpoint's items are.
    #[must_use]
    pub fn layout(&self) -> Layout {
        self.record.layout()
    }

    /// The checkpoint, without its state.
    #[must_use]
    pub fn into_checkpoint(self) -> Checkpoint {
        self.checkpoint
    }
}

/// A checkpoint's state kept beside its joined entry.
#[derive(Debug, Serialize, Deserialize)]
struct StateRecord {
    tenant_id: String,
    entry: String,
    state: serde_bytes::ByteBuf,
}

/// The tenant of a partition key of this table (`ten_…`, `ten_…#07`, `ten_…#exec_…`).
fn tenant_of(partition: &str) -> &str {
    partition.split_once('#').map_or(partition, |(tenant, _)| tenant)
}

/// The checkpoint whose by-execution entry `item` is, with the partition it is in: what
/// the checkpoints table's stream reports when a checkpoint is created (that entry has
/// no state, so its record stays small). `None` for every other item of the table.
///
/// # Errors
/// [`StoreError::Corrupt`] for an item with a by-execution entry's key that is not one.
pub fn created_entry(item: Item) -> Result<Option<(String, Checkpoint)>, StoreError> {
    let Some(entry) = item.get("entry").and_then(|e| e.as_s().ok()) else { return Ok(None) };
    let digits = |sequence: &str| sequence.len() == 10 && sequence.bytes().all(|b| b.is_ascii_digit());
    let (is_by_execution, is_joined) = entry.split_once('#').map_or((false, false), |(first, second)| {
        (ExecutionId::parse(first).is_some() && digits(second), digits(first) && CheckpointId::parse(second).is_some())
    });
    if !is_by_execution && !is_joined {
        return Ok(None);
    }
    let record: CheckpointRecord = serde_dynamo::from_item(item)?;
    let checkpoint = record.checkpoint()?;
    let expected = if is_joined {
        joined_entry(checkpoint.sequence, &checkpoint.id)
    } else {
        by_execution_entry(&checkpoint.execution_id, checkpoint.sequence)
    };
    if record.entry != expected {
        return Err(StoreError::Corrupt(format!("checkpoint {}: entry {}", record.id, record.entry)));
    }
    Ok(Some((tenant_of(&record.tenant_id).to_owned(), checkpoint)))
}

fn part_key(checkpoint: &CheckpointId, index: usize) -> String {
    format!("{checkpoint}#{index:04}")
}

/// `window` up to the execution's last sequence where its partition may hold another
/// execution's entries (one whose id ends in the same 10 hex digits) beyond it, so that
/// no query reads those.
fn within(execution: &Execution, window: &ListWindow) -> ListWindow {
    let mut window = window.clone();
    if Layout::of(execution) == Layout::Joined {
        window.through_sequence = window.through_sequence.min(execution.last_sequence);
    }
    window
}

/// What [`CheckpointStore::own_entry`] found.
enum Own {
    /// The execution's checkpoint.
    Found(Checkpoint),
    /// None: the window holds none that way.
    None,
    /// None among the entries it may examine.
    NotWithin,
}

/// The pointer from a key to its checkpoint.
#[derive(Debug, Serialize, Deserialize)]
struct KeyRecord {
    tenant_id: String,
    entry: String,
    checkpoint_id: String,
}

impl CheckpointRecord {
    fn new(partition: String, entry: String, c: &Checkpoint, state_parts: usize, state: Option<Vec<u8>>) -> Self {
        Self {
            tenant_id: partition,
            entry,
            id: c.id.to_string(),
            execution_id: c.execution_id.to_string(),
            workflow_id: c.workflow_id.to_string(),
            sequence: c.sequence,
            name: c.name.clone(),
            client_key: c.key.clone(),
            parent_checkpoint_id: c.parent_checkpoint_id.as_ref().map(ToString::to_string),
            attempt: c.attempt,
            metadata: c.metadata.clone(),
            state_size_bytes: c.state_size_bytes,
            created_at: shared::time::format(c.created_at),
            state_parts: u32::try_from(state_parts).unwrap_or(u32::MAX),
            state: state.map(serde_bytes::ByteBuf::from),
        }
    }

    /// Where the checkpoint's items are: as this entry is.
    fn layout(&self) -> Layout {
        match self.tenant_id.split_once('#') {
            None => Layout::Tenant,
            Some((_, rest)) if rest.starts_with('c') => Layout::Joined,
            Some(_) => Layout::Apart,
        }
    }

    fn stored(&self) -> Result<StoredCheckpoint, StoreError> {
        Ok(StoredCheckpoint {
            checkpoint: self.checkpoint()?,
            state_parts: self.state_parts,
            writes_parts: None,
            layout: self.layout(),
        })
    }

    fn checkpoint(&self) -> Result<Checkpoint, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("checkpoint {}: {what}", self.id));
        Ok(Checkpoint {
            id: CheckpointId::parse(&self.id).ok_or_else(|| corrupt("id"))?,
            execution_id: ExecutionId::parse(&self.execution_id).ok_or_else(|| corrupt("execution_id"))?,
            workflow_id: WorkflowId::parse(&self.workflow_id).ok_or_else(|| corrupt("workflow_id"))?,
            sequence: self.sequence,
            name: self.name.clone(),
            key: self.client_key.clone(),
            parent_checkpoint_id: self
                .parent_checkpoint_id
                .as_deref()
                .map(|p| CheckpointId::parse(p).ok_or_else(|| corrupt("parent_checkpoint_id")))
                .transpose()?,
            attempt: self.attempt,
            metadata: self.metadata.clone(),
            state_size_bytes: self.state_size_bytes,
            created_at: shared::time::parse(&self.created_at).map_err(|_| corrupt("created_at"))?,
        })
    }
}

/// What a list reads of an entry: all but the state, which a joined entry holds.
const LISTED: [&str; 14] = [
    "tenant_id",
    "entry",
    "id",
    "execution_id",
    "workflow_id",
    "sequence",
    "name",
    "client_key",
    "parent_checkpoint_id",
    "attempt",
    "metadata",
    "state_size_bytes",
    "created_at",
    "state_parts",
];

/// `query`, returning each entry without its state.
fn without_state(
    query: aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder,
) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
    let names: Vec<String> = (0..LISTED.len()).map(|i| format!("#l{i}")).collect();
    LISTED
        .iter()
        .zip(&names)
        .fold(query, |q, (attribute, name)| q.expression_attribute_names(name, *attribute))
        .projection_expression(names.join(", "))
}

/// Checkpoints of every tenant; each call is scoped to the tenant it is given.
#[derive(Debug, Clone)]
pub struct CheckpointStore {
    pub(super) client: Client,
    tables: Tables,
    pub(super) blobs: BlobStore,
}

impl CheckpointStore {
    /// A store over `client` and the named tables.
    #[must_use]
    pub fn new(client: Client, tables: Tables) -> Self {
        Self { blobs: BlobStore::new(client.clone(), tables.clone()), client, tables }
    }

    pub(super) fn table(&self) -> &str {
        self.tables.name(Table::Checkpoints)
    }

    fn put(&self, record: CheckpointRecord) -> Result<TransactWriteItem, StoreError> {
        let put = Put::builder()
            .table_name(self.table())
            .set_item(Some(serde_dynamo::to_item(record)?))
            .condition_expression("attribute_not_exists(entry)");
        Ok(TransactWriteItem::builder().put(built(put.build())?).build())
    }

    /// Adds a new checkpoint with its state to `tx`: both entries and any state parts.
    ///
    /// # Errors
    /// [`StoreError`] if an operation cannot be built.
    pub fn stage_create(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        (c, layout): (&Checkpoint, Layout),
        state: &PackedState,
    ) -> Result<(), StoreError> {
        let parts = state.parts();
        let inline = parts.is_empty().then(|| state.compressed().to_vec());
        let (own, run) =
            (layout.checkpoint_partition(tenant, &c.id), layout.execution_partition(tenant, &c.execution_id));
        if layout == Layout::Joined {
            let entry = joined_entry(c.sequence, &c.id);
            let beside = layout.state_beside(u32::try_from(parts.len()).unwrap_or(u32::MAX), c.state_size_bytes);
            let (inline, beside) = if beside { (None, inline) } else { (inline, None) };
            tx.push(Part::Checkpoint, self.put(CheckpointRecord::new(run.clone(), entry, c, parts.len(), inline))?);
            if let Some(state) = beside {
                let record = StateRecord {
                    tenant_id: run.clone(),
                    entry: state_entry(c.sequence, &c.id),
                    state: serde_bytes::ByteBuf::from(state),
                };
                let put = Put::builder().table_name(self.table()).set_item(Some(serde_dynamo::to_item(record)?));
                tx.push(Part::Checkpoint, TransactWriteItem::builder().put(built(put.build())?).build());
            }
        } else {
            let by_id = CheckpointRecord::new(own.clone(), c.id.to_string(), c, parts.len(), inline);
            let by_execution = by_execution_entry(&c.execution_id, c.sequence);
            tx.push(Part::Checkpoint, self.put(by_id)?);
            tx.push(
                Part::Checkpoint,
                self.put(CheckpointRecord::new(run.clone(), by_execution, c, parts.len(), None))?,
            );
        }
        if let Some(key) = &c.key {
            let pointer =
                KeyRecord { tenant_id: run, entry: key_entry(&c.execution_id, key), checkpoint_id: c.id.to_string() };
            let put = Put::builder()
                .table_name(self.table())
                .set_item(Some(serde_dynamo::to_item(pointer)?))
                .condition_expression("attribute_not_exists(entry)");
            tx.push(Part::Key, TransactWriteItem::builder().put(built(put.build())?).build());
            let pointer = KeyRecord {
                tenant_id: own,
                entry: workflow_key_entry(&c.workflow_id, key, &c.id),
                checkpoint_id: c.id.to_string(),
            };
            let put = Put::builder().table_name(self.table()).set_item(Some(serde_dynamo::to_item(pointer)?));
            tx.push(Part::Checkpoint, TransactWriteItem::builder().put(built(put.build())?).build());
        }
        for (index, part) in parts.iter().enumerate() {
            self.blobs.stage_put(tx, Part::Checkpoint, tenant, &part_key(&c.id, index), part.to_vec())?;
        }
        Ok(())
    }

    /// Adds the deletion of a checkpoint, its entries and its state, to `tx`.
    ///
    /// # Errors
    /// [`StoreError`] if an operation cannot be built.
    pub fn stage_delete(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        stored: &StoredCheckpoint,
    ) -> Result<(), StoreError> {
        let c = &stored.checkpoint;
        let own = stored.layout.checkpoint_partition(tenant, &c.id);
        let run = stored.layout.execution_partition(tenant, &c.execution_id);
        let mut entries = if stored.layout == Layout::Joined {
            let mut entries = vec![(&run, joined_entry(c.sequence, &c.id))];
            if stored.layout.state_beside(stored.state_parts, c.state_size_bytes) {
                entries.push((&run, state_entry(c.sequence, &c.id)));
            }
            entries
        } else {
            vec![(&own, c.id.to_string()), (&run, by_execution_entry(&c.execution_id, c.sequence))]
        };
        if let Some(key) = c.key.as_deref() {
            entries.push((&run, key_entry(&c.execution_id, key)));
            entries.push((&own, workflow_key_entry(&c.workflow_id, key, &c.id)));
        }
        if stored.writes_parts.is_some() {
            entries.push((&own, writes_entry(&c.id)));
        }
        for (partition, entry) in entries {
            let delete =
                Delete::builder().table_name(self.table()).key("tenant_id", s(partition)).key("entry", s(entry));
            tx.push(Part::Discard, TransactWriteItem::builder().delete(built(delete.build())?).build());
        }
        for index in 0..stored.state_parts as usize {
            self.blobs.stage_delete(tx, Part::Discard, tenant, &part_key(&c.id, index))?;
        }
        for index in 0..stored.writes_parts.unwrap_or(0) as usize {
            self.blobs.stage_delete(tx, Part::Discard, tenant, &writes_part_key(&c.id, index))?;
        }
        Ok(())
    }

    /// Checkpoint `id`'s entry that holds it: where its id names, else where it is
    /// apart, else in the tenant's partition (one consistent read, up to three for a
    /// checkpoint from before and for none).
    async fn get_record(&self, tenant: &TenantId, id: &CheckpointId) -> Result<Option<CheckpointRecord>, StoreError> {
        for layout in Layout::ALL {
            let (partition, entry) = layout.entry_of(tenant, id);
            let key = [("tenant_id", partition.as_str()), ("entry", entry.as_str())];
            if let Some(item) = get_item(&self.client, self.table(), &key).await? {
                return Ok(Some(serde_dynamo::from_item(item)?));
            }
        }
        Ok(None)
    }

    /// The table and key of checkpoint `id`'s entry where `layout` keeps it, to read it
    /// beside another item.
    #[must_use]
    pub fn entry_key(&self, tenant: &TenantId, id: &CheckpointId, layout: Layout) -> (&str, Item) {
        let (partition, entry) = layout.entry_of(tenant, id);
        let key =
            std::collections::HashMap::from([("tenant_id".to_owned(), s(partition)), ("entry".to_owned(), s(entry))]);
        (self.table(), key)
    }

    /// The table and key of the item beside checkpoint `id`'s entry that may hold its
    /// state where `layout` keeps it ([`Layout::state_beside`]), to read it with the
    /// entry.
    #[must_use]
    pub fn state_key(&self, tenant: &TenantId, id: &CheckpointId, layout: Layout) -> Option<(&str, Item)> {
        let (partition, entry) = layout.state_of(tenant, id)?;
        let key =
            std::collections::HashMap::from([("tenant_id".to_owned(), s(partition)), ("entry".to_owned(), s(entry))]);
        Some((self.table(), key))
    }

    /// The checkpoint `id` of `tenant`, if it exists.
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn get(&self, tenant: &TenantId, id: &CheckpointId) -> Result<Option<StoredCheckpoint>, StoreError> {
        let Some(record) = self.get_record(tenant, id).await? else { return Ok(None) };
        Ok(Some(record.stored()?))
    }

    /// The checkpoint of `execution` whose key is `key`: the key's pointer, then the
    /// checkpoint (two consistent point reads).
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn by_key(
        &self,
        tenant: &TenantId,
        execution: &Execution,
        key: &str,
    ) -> Result<Option<StoredCheckpoint>, StoreError> {
        let entry = key_entry(&execution.id, key);
        let partition = Layout::of(execution).execution_partition(tenant, &execution.id);
        let Some(item) = get_item(&self.client, self.table(), &[("tenant_id", &partition), ("entry", &entry)]).await?
        else {
            return Ok(None);
        };
        let pointer: KeyRecord = serde_dynamo::from_item(item)?;
        let id = CheckpointId::parse(&pointer.checkpoint_id)
            .ok_or_else(|| StoreError::Corrupt(format!("key entry {entry}: checkpoint_id")))?;
        self.get(tenant, &id).await
    }

    /// The ids of the checkpoints of `workflow`'s executions whose key is `key`, at most
    /// `limit`, by id: one consistent query of their pointers in each partition that
    /// may hold them (the tenant's and its [`SHARDS`]), side by side. Some may be hidden
    /// (a rollback or a deletion under way), which the caller checks.
    ///
    /// # Errors
    /// The query's [`StoreError`]; [`StoreError::Corrupt`] for a pointer without a
    /// checkpoint id.
    pub async fn ids_by_workflow_key(
        &self,
        tenant: &TenantId,
        workflow: &WorkflowId,
        key: &str,
        limit: usize,
    ) -> Result<Vec<CheckpointId>, StoreError> {
        let partitions = crate::runs::storage::tenant_partitions(tenant);
        let queries = partitions.map(|partition| {
            let query = self
                .client
                .query()
                .table_name(self.table())
                .key_condition_expression("tenant_id = :t AND begins_with(entry, :p)")
                .expression_attribute_values(":t", s(partition))
                .expression_attribute_values(":p", s(workflow_key_prefix(workflow, key)))
                .projection_expression("checkpoint_id")
                .consistent_read(true);
            query_window(query, "entry", 0, limit)
        });
        let mut ids = futures_util::future::try_join_all(queries)
            .await?
            .into_iter()
            .flatten()
            .map(|item| {
                item.get("checkpoint_id")
                    .and_then(|v| v.as_s().ok())
                    .and_then(|raw| CheckpointId::parse(raw))
                    .ok_or_else(|| StoreError::Corrupt(format!("a key pointer of workflow {workflow}: checkpoint_id")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        // The entries of one key differ by the id alone, so their order is the ids'.
        ids.sort_unstable_by(|a, b| a.as_str().cmp(b.as_str()));
        ids.truncate(limit);
        Ok(ids)
    }

    /// The checkpoint of `entry` and its state: the entry's own when inline, else its
    /// parts (one batch read).
    ///
    /// # Errors
    /// The read's [`StoreError`]; [`StoreError::Corrupt`] for a state that does not
    /// open.
    pub async fn with_state(
        &self,
        tenant: &TenantId,
        Entry { record, checkpoint }: Entry,
    ) -> Result<(Checkpoint, Box<serde_json::value::RawValue>), StoreError> {
        let compressed = match record.state {
            Some(inline) => inline.into_vec(),
            None => self.read_parts(tenant, &checkpoint.id, record.state_parts).await?,
        };
        let corrupt = |what: &str| StoreError::Corrupt(format!("checkpoint {}: {what}", checkpoint.id));
        let json =
            shared::blob::decompress(&compressed, STATE_MAX_BYTES).map_err(|_| corrupt("state does not inflate"))?;
        // Kept as text: a state of millions of values is returned as the bytes it is.
        let text = String::from_utf8(json).map_err(|_| corrupt("state is not UTF-8"))?;
        let state = serde_json::value::RawValue::from_string(text).map_err(|_| corrupt("state is not JSON"))?;
        Ok((checkpoint, state))
    }

    async fn read_parts(&self, tenant: &TenantId, id: &CheckpointId, count: u32) -> Result<Vec<u8>, StoreError> {
        let keys: Vec<String> = (0..count as usize).map(|i| part_key(id, i)).collect();
        let mut found = self.blobs.read(tenant, &keys).await?;
        let mut state = Vec::new();
        for key in &keys {
            let part = found.remove(key).ok_or_else(|| {
                StoreError::Corrupt(format!("checkpoint {id}: part {key} of {count} state parts is missing"))
            })?;
            state.extend(part);
        }
        Ok(state)
    }

    /// The query of `execution`'s checkpoints from `from_sequence` through
    /// `through_sequence` where `layout` keeps them, with the filter conditions it needs
    /// (of a joined partition, the execution's own entries: another execution of the
    /// tenant may share its mark), to be joined with any other and set as its filter.
    fn execution_range(
        &self,
        (tenant, layout): (&TenantId, Layout),
        execution: &ExecutionId,
        from_sequence: u64,
        through_sequence: u64,
    ) -> (aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder, Vec<String>) {
        let (lo, hi) = layout.sequence_range(execution, from_sequence, through_sequence);
        let query = self
            .client
            .query()
            .table_name(self.table())
            .key_condition_expression("tenant_id = :t AND entry BETWEEN :lo AND :hi")
            .expression_attribute_values(":t", s(layout.execution_partition(tenant, execution)))
            .expression_attribute_values(":lo", s(lo))
            .expression_attribute_values(":hi", s(hi))
            .consistent_read(true);
        if layout == Layout::Joined {
            (query.expression_attribute_values(":run", s(execution.as_str())), vec!["execution_id = :run".to_owned()])
        } else {
            (query, Vec::new())
        }
    }

    /// The query behind a list: the window's range, in its order, without what `hidden`
    /// covers and with its metadata filter.
    fn window_query(
        &self,
        tenant: &TenantId,
        execution: &Execution,
        window: &ListWindow,
    ) -> aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder {
        let hidden = &execution.discarded;
        let (from, through) = (window.from_sequence.max(1), window.through_sequence.min(LAST_SEQUENCE));
        let (range, mut conditions) =
            self.execution_range((tenant, Layout::of(execution)), &execution.id, from, through);
        let mut range = range.scan_index_forward(!window.descending);
        // Checkpoints a rollback discarded but has not deleted yet are left out (the skip
        // and take of the window count only what is shown).
        conditions.extend((0..hidden.len()).map(|i| format!("NOT (#seq BETWEEN :after{i} AND :through{i})")));
        if !hidden.is_empty() {
            range = range.expression_attribute_names("#seq", "sequence");
        }
        for (i, d) in hidden.iter().enumerate() {
            range = range
                .expression_attribute_values(format!(":after{i}"), n(d.after + 1))
                .expression_attribute_values(format!(":through{i}"), n(d.through));
        }
        if !window.metadata.is_empty() {
            range = range.expression_attribute_names("#md", "metadata");
        }
        for (i, (name, value)) in window.metadata.iter().enumerate() {
            conditions.push(format!("#md.#mk{i} = :mv{i}"));
            range = range
                .expression_attribute_names(format!("#mk{i}"), name)
                .expression_attribute_values(format!(":mv{i}"), s(value));
        }
        if conditions.is_empty() { range } else { range.filter_expression(conditions.join(" AND ")) }
    }

    /// A window of an execution's checkpoints in sequence order (or its reverse), no
    /// state read. With a metadata filter at most [`MAX_EXAMINED`] are examined.
    ///
    /// # Errors
    /// The query's [`StoreError`].
    pub async fn list(
        &self,
        tenant: &TenantId,
        execution: &Execution,
        window: &ListWindow,
        skip: usize,
        take: usize,
    ) -> Result<Page, StoreError> {
        let window = &within(execution, window);
        if window.is_empty() {
            return Ok(Page::default());
        }
        let query = self.window_query(tenant, execution, window);
        if window.metadata.is_empty() {
            let items = query_window_of(query, "entry", skip, take, &LISTED).await?;
            let items = items
                .into_iter()
                .map(|item| serde_dynamo::from_item::<_, CheckpointRecord>(item)?.checkpoint())
                .collect::<Result<Vec<_>, _>>()?;
            return Ok(Page { items, stopped_at: None });
        }
        // A metadata filter is evaluated by DynamoDB on what the key range reads: the
        // request examines at most MAX_EXAMINED checkpoints and says where it stopped.
        let query = without_state(query);
        let (mut skip, mut examined, mut start) = (skip, 0_usize, None);
        let mut items = Vec::new();
        loop {
            let out = query
                .clone()
                .set_exclusive_start_key(start.take())
                .limit(i32::try_from(MAX_EXAMINED - examined).unwrap_or(i32::MAX))
                .send()
                .await
                .map_err(classify)?;
            examined += usize::try_from(out.scanned_count).unwrap_or(0).max(1);
            for item in out.items.unwrap_or_default() {
                if items.len() == take {
                    return Ok(Page { items, stopped_at: None });
                }
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                items.push(serde_dynamo::from_item::<_, CheckpointRecord>(item)?.checkpoint()?);
            }
            if items.len() == take {
                return Ok(Page { items, stopped_at: None });
            }
            let Some(last) = out.last_evaluated_key.filter(|key| !key.is_empty()) else {
                return Ok(Page { items, stopped_at: None });
            };
            if examined >= MAX_EXAMINED {
                // The next request continues after a checkpoint it can name: the last
                // examined, unless it is hidden or (in an execution's partition its
                // checkpoints share with another's of the same mark) another's. Then
                // the execution's own shown entry nearest before it; if the window
                // holds none before it, the next one after it, examined here.
                let entry = last.get("entry").and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
                let partition = Layout::of(execution).execution_partition(tenant, &execution.id);
                let stop =
                    get_item(&self.client, self.table(), &[("tenant_id", &partition), ("entry", &entry)]).await?;
                let stop = stop.map(|stop| serde_dynamo::from_item::<_, CheckpointRecord>(stop)?.checkpoint());
                let stop = stop.transpose()?;
                if let Some(stop) = stop
                    .as_ref()
                    .filter(|stop| stop.execution_id == execution.id && !execution.is_discarded(stop.sequence))
                {
                    return Ok(Page { items, stopped_at: Some(stop.id.clone()) });
                }
                if let Own::Found(own) = self.own_entry(tenant, execution, window, &last, true).await? {
                    return Ok(Page { items, stopped_at: Some(own.id) });
                }
                return Ok(match self.own_entry(tenant, execution, window, &last, false).await? {
                    Own::Found(next) => {
                        if window.metadata.iter().all(|(k, v)| next.metadata.get(k) == Some(v)) && skip == 0 {
                            items.push(next.clone());
                        }
                        Page { items, stopped_at: Some(next.id) }
                    }
                    Own::None => Page { items, stopped_at: None },
                    // As many entries again examined, none shown: the stop as it is
                    // (the next page is 404 if it is hidden or another's), or, when a
                    // rollback deleted it meanwhile, a request to try again.
                    Own::NotWithin => Page { items, stopped_at: Some(stop.ok_or(StoreError::Conflict)?.id) },
                });
            }
            start = Some(last);
        }
    }

    /// The execution's shown checkpoint in `window` nearest to entry `from` (exclusive)
    /// in the list's order, `backwards` (before it) or forwards, whatever its metadata,
    /// among at most [`MAX_EXAMINED`] entries. Reads entries a few at a time, states
    /// left out.
    async fn own_entry(
        &self,
        tenant: &TenantId,
        execution: &Execution,
        window: &ListWindow,
        from: &shared::dynamo::Item,
        backwards: bool,
    ) -> Result<Own, StoreError> {
        let unfiltered =
            ListWindow { metadata: BTreeMap::new(), descending: window.descending != backwards, ..window.clone() };
        let query = without_state(self.window_query(tenant, execution, &unfiltered)).limit(16);
        let (mut start, mut examined) = (Some(from.clone()), 0);
        while let Some(key) = start.take() {
            if examined >= MAX_EXAMINED {
                return Ok(Own::NotWithin);
            }
            let out = query.clone().set_exclusive_start_key(Some(key)).send().await.map_err(classify)?;
            examined += usize::try_from(out.scanned_count).unwrap_or(0).max(1);
            if let Some(item) = out.items.unwrap_or_default().into_iter().next() {
                return Ok(Own::Found(serde_dynamo::from_item::<_, CheckpointRecord>(item)?.checkpoint()?));
            }
            start = out.last_evaluated_key.filter(|key| !key.is_empty());
        }
        Ok(Own::None)
    }

    /// How many checkpoints the window holds, at most `cap` (a metadata-filtered total).
    ///
    /// # Errors
    /// The query's [`StoreError`].
    pub async fn count(
        &self,
        tenant: &TenantId,
        execution: &Execution,
        window: &ListWindow,
        cap: u64,
    ) -> Result<u64, StoreError> {
        let window = &within(execution, window);
        if window.is_empty() {
            return Ok(0);
        }
        shared::dynamo::count(self.window_query(tenant, execution, window), cap).await
    }

    /// Checkpoints of the execution with a sequence above `sequence`, highest first, at
    /// most `limit`, with what their deletion needs ([`Self::with_writes`]).
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn later_than(
        &self,
        tenant: &TenantId,
        execution: &ExecutionId,
        sequence: u64,
        limit: usize,
    ) -> Result<Vec<StoredCheckpoint>, StoreError> {
        self.in_range(tenant, execution, Discarded { after: sequence, through: LAST_SEQUENCE }, limit, false).await
    }

    /// Checkpoints of the execution in `range`, lowest first when `lowest_first` (else
    /// highest first), at most `limit`, with what their deletion needs: from both places
    /// its checkpoints may be (a deletion's execution is gone, and says nothing).
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn in_range(
        &self,
        tenant: &TenantId,
        execution: &ExecutionId,
        range: Discarded,
        limit: usize,
        lowest_first: bool,
    ) -> Result<Vec<StoredCheckpoint>, StoreError> {
        let queries = Layout::ALL.map(|layout| {
            let (query, conditions) = self.execution_range((tenant, layout), execution, range.after + 1, range.through);
            let query = without_state(query).scan_index_forward(lowest_first);
            let query = if conditions.is_empty() { query } else { query.filter_expression(conditions.join(" AND ")) };
            query_window(query, "entry", 0, limit)
        });
        let mut stored = futures_util::future::try_join_all(queries)
            .await?
            .into_iter()
            .flatten()
            .map(|item| serde_dynamo::from_item::<_, CheckpointRecord>(item)?.stored())
            .collect::<Result<Vec<_>, StoreError>>()?;
        stored.sort_unstable_by_key(|c| c.checkpoint.sequence);
        if !lowest_first {
            stored.reverse();
        }
        stored.truncate(limit);
        self.with_writes(tenant, stored).await
    }
}

#[cfg(test)]
mod tests {
    use chrono::Utc;

    use super::*;
    use crate::runs::checkpoints::layout::joined_partition;

    /// A checkpoint kept with its execution is where its id alone says: the execution's
    /// partition and the entry its write puts, in sequence order there (before the key
    /// pointers beside it); the stream reports it as created, and no by-id entry of the
    /// other layouts.
    #[test]
    fn a_joined_entry_is_found_by_the_id_alone_and_reported_as_created() {
        let tenant = "ten_0193a6f21c2b7d3e8f000123456789ab";
        let execution = ExecutionId::generate();
        let sequences = [1, 2, 10, 1 << 21, 9_999_999_999];
        let ids = sequences.map(|n| CheckpointId::in_execution(&execution, n, Utc::now()));
        for (id, sequence) in ids.iter().zip(sequences) {
            // What a read by id derives (`Layout::entry_of`) is where the write put it.
            let (mark, carried) = id.place();
            assert_eq!(joined_partition(tenant, mark), joined_partition(tenant, execution.mark()));
            assert_eq!(joined_entry(carried, id), joined_entry(sequence, id));
            let entry = joined_entry(sequence, id);
            let (lo, hi) = Layout::Joined.sequence_range(&execution, sequence, sequence);
            assert!(lo < entry && entry < hi, "{entry} in its sequence's range");
            assert!(entry < key_entry(&execution, "k"), "entries sort before key pointers");
        }
        assert!(joined_entry(1, &ids[0]) < joined_entry(10, &ids[2]));
        let c = Checkpoint {
            id: ids[1].clone(),
            execution_id: execution.clone(),
            workflow_id: WorkflowId::generate(),
            sequence: 2,
            name: None,
            key: None,
            parent_checkpoint_id: None,
            attempt: 1,
            metadata: BTreeMap::new(),
            state_size_bytes: 2,
            created_at: Utc::now(),
        };
        let (partition, entry) = (joined_partition(tenant, execution.mark()), joined_entry(2, &c.id));
        let record = CheckpointRecord::new(partition, entry, &c, 0, Some(b"{}".to_vec()));
        assert_eq!(record.layout(), Layout::Joined);
        let item: Item = serde_dynamo::to_item(&record).expect("item");
        let (owner, created) = created_entry(item).expect("readable").expect("a creation");
        assert_eq!((owner.as_str(), created.id), (tenant, c.id.clone()));
        let by_id = CheckpointRecord::new(tenant.to_owned(), c.id.to_string(), &c, 0, None);
        assert!(created_entry(serde_dynamo::to_item(&by_id).expect("item")).expect("readable").is_none());
    }
}
