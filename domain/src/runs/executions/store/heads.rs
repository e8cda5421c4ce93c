//! The heads of headed executions (see the parent module's docs): their items, how a
//! checkpoint writes one alone, and how a read makes sure an execution and its head are
//! of one version.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{ConditionCheck, TransactWriteItem};
use serde::{Deserialize, Serialize};
use shared::TenantId;
use shared::counters::CounterChange;
use shared::dynamo::{Item, Part, StoreError, Transaction, built, n, s};
use shared::ids::CheckpointId;

use super::super::model::Execution;
use super::{ExecutionStore, SUMMARY_ATTRIBUTES, key_of, partition};
use crate::runs::storage::put_item;

/// The head of a headed execution: its checkpoint progress, which a checkpoint writes
/// alone (see the module's docs).
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct HeadRecord {
    tenant_id: String,
    id: String,
    current_checkpoint_id: Option<String>,
    checkpoint_count: u64,
    last_sequence: u64,
    updated_at: String,
    version: u64,
    /// The version of the execution's item when this head was written: a read that
    /// finds the item at another version read one of the two before a change and the
    /// other after it (a batch read is not isolated from a transaction), or the item was
    /// written without its head (by an earlier version).
    item_version: u64,
}

/// The id of execution `id`'s head.
pub(super) fn head_id(id: &str) -> String {
    format!("{HEAD_PREFIX}{id}")
}

/// The key of the head of execution `id`, of the tenant whose partitions include
/// `partition` (its own, or one of its shards): in the execution's own partition
/// (`ten_…#exec_…`), which nothing else of the table's is in, so no partition a tenant's
/// other executions share takes a checkpoint's head.
pub(super) fn head_key(partition: &str, id: &str) -> Item {
    let owner = partition.split('#').next().unwrap_or(partition);
    key_of(format!("{owner}#{id}"), head_id(id))
}

pub(super) const HEAD_PREFIX: &str = "head#";

/// How many times in a row a read finds an execution and its head of two versions before
/// it gives up (each read again at once: the change between is one transaction).
const TORN_READS: usize = 5;

impl HeadRecord {
    /// The head of `new`, written over the one `old` was read with, beside the item at
    /// version `item_version`.
    fn new(tenant: &TenantId, (old, new): (&Execution, &Execution), item_version: u64) -> Self {
        Self {
            tenant_id: format!("{}#{}", tenant.as_str(), new.id),
            id: head_id(new.id.as_str()),
            current_checkpoint_id: new.current_checkpoint_id.as_ref().map(ToString::to_string),
            checkpoint_count: new.checkpoint_count,
            last_sequence: new.last_sequence,
            updated_at: shared::time::format(new.updated_at),
            version: old.head_version.map_or(1, |v| v + 1),
            item_version,
        }
    }

    /// The id of the execution this is the head of.
    pub(super) fn execution(&self) -> &str {
        self.id.trim_start_matches(HEAD_PREFIX)
    }

    /// `e` (its item as read) with this head: its progress when the head was written
    /// beside that version of the item; when the item is newer (written later, its
    /// progress with it), the item's own. Either way the head's version, which the next
    /// write is conditioned on.
    pub(super) fn apply(self, e: &mut Execution) -> Result<(), StoreError> {
        e.head_version = Some(self.version);
        if self.item_version != e.version {
            return Ok(());
        }
        let corrupt = |what: &str| StoreError::Corrupt(format!("head of execution {}: {what}", e.id));
        e.current_checkpoint_id = self
            .current_checkpoint_id
            .as_deref()
            .map(|c| CheckpointId::parse(c).ok_or_else(|| corrupt("current_checkpoint_id")))
            .transpose()?;
        e.checkpoint_count = self.checkpoint_count;
        e.last_sequence = self.last_sequence;
        e.updated_at = shared::time::parse(&self.updated_at).map_err(|_| corrupt("updated_at"))?;
        Ok(())
    }
}

/// The ids of the executions among `items` (as read: executions and heads) whose head
/// was written beside a later version of the item than the one read: the item was read
/// before a change, its head after it.
fn torn(items: &[Item]) -> Vec<(String, String)> {
    let text = |item: &Item, name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
    let number =
        |item: &Item, name: &str| item.get(name).and_then(|v| v.as_n().ok()).and_then(|v| v.parse::<u64>().ok());
    let heads: HashMap<String, u64> = items
        .iter()
        .filter_map(|item| {
            let id = text(item, "id");
            Some((id.strip_prefix(HEAD_PREFIX)?.to_owned(), number(item, "item_version")?))
        })
        .collect();
    items
        .iter()
        .filter(|item| {
            let (id, version) = (text(item, "id"), number(item, "version").unwrap_or(0));
            heads.get(&id).is_some_and(|beside| *beside > version)
        })
        .map(|item| (text(item, "tenant_id"), text(item, "id")))
        .collect()
}

/// What a read of a head takes.
pub(super) const HEAD_ATTRIBUTES: &[&str] = &[
    "tenant_id",
    "id",
    "current_checkpoint_id",
    "checkpoint_count",
    "last_sequence",
    "updated_at",
    "version",
    "item_version",
];

impl ExecutionStore {
    /// Adds to `tx` the head of `new` (a headed execution), written beside its item at
    /// version `item_version`, conditioned on the head `old` was read with (none: that it
    /// does not exist yet).
    pub(super) fn stage_head(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        (old, new): (&Execution, &Execution),
        item_version: u64,
    ) -> Result<(), StoreError> {
        let head = serde_dynamo::to_item(HeadRecord::new(tenant, (old, new), item_version))?;
        let condition = if old.head_version.is_some() { "version = :expected" } else { "attribute_not_exists(id)" };
        tx.push(Part::Execution, put_item(self.table(), head, condition, old.head_version)?);
        Ok(())
    }

    /// Adds to `tx` the change from `old` to `new` of a checkpoint, which moves only the
    /// checkpoint progress: for a headed execution its head alone (its first, with a
    /// check that the item is still the version read), so neither the item nor its list
    /// index entries are written; else the whole item, as [`Self::stage_replace`].
    ///
    /// # Errors
    /// [`StoreError`] if an operation cannot be built.
    pub fn stage_progress(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        old: &Execution,
        new: &Execution,
    ) -> Result<(), StoreError> {
        if !old.headed {
            return self.stage_replace(tx, tenant, old, new, &CounterChange::default());
        }
        if old.head_version.is_none() {
            let check = ConditionCheck::builder()
                .table_name(self.table())
                .key("tenant_id", s(partition(tenant, old)))
                .key("id", s(old.id.as_str()))
                .condition_expression("version = :expected")
                .expression_attribute_values(":expected", n(old.version));
            tx.push(Part::Execution, TransactWriteItem::builder().condition_check(built(check.build())?).build());
        }
        self.stage_head(tx, tenant, (old, new), old.version)
    }

    /// `items` (executions as a list read them, in order) and the heads of the headed
    /// ones: one batch read, none when no item is headed.
    pub(super) async fn with_heads(&self, mut items: Vec<Item>) -> Result<Vec<Item>, StoreError> {
        let text = |item: &Item, name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
        let keys: Vec<Item> = items
            .iter()
            .filter(|item| item.get("headed").and_then(|v| v.as_bool().ok()).copied().unwrap_or(false))
            .map(|item| head_key(&text(item, "tenant_id"), &text(item, "id")))
            .collect();
        if !keys.is_empty() {
            items.extend(shared::dynamo::batch_get_projected(&self.client, self.table(), keys, HEAD_ATTRIBUTES).await?);
        }
        self.untorn(items, SUMMARY_ATTRIBUTES).await
    }

    /// `items` (executions and heads, as read) with every execution read before a change
    /// and its head after it read again, with its head, until both are of one version
    /// (`attributes` of each, all when empty), in place: a list keeps its order.
    ///
    /// # Errors
    /// The reads' [`StoreError`]s; [`StoreError::Unavailable`] when an execution changed
    /// between its reads [`TORN_READS`] times in a row.
    pub(super) async fn untorn(&self, mut items: Vec<Item>, attributes: &[&str]) -> Result<Vec<Item>, StoreError> {
        let text = |item: &Item, name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
        for _ in 0..TORN_READS {
            let torn = torn(&items);
            if torn.is_empty() {
                return Ok(items);
            }
            let keys = torn.iter().flat_map(|(p, id)| [key_of(p.clone(), id.clone()), head_key(p, id)]);
            let again = shared::dynamo::batch_get_projected(&self.client, self.table(), keys.collect(), attributes);
            let mut again: HashMap<String, Item> =
                again.await?.into_iter().map(|item| (text(&item, "id"), item)).collect();
            let read_again = |id: &str| torn.iter().any(|(_, e)| e == id || head_id(e) == id);
            items = items
                .into_iter()
                .filter_map(|item| {
                    let id = text(&item, "id");
                    if read_again(&id) { again.remove(&id) } else { Some(item) }
                })
                .collect();
            // A head made between the two reads.
            items.extend(again.into_values());
        }
        Err(StoreError::Unavailable(
            format!("an execution changed between its reads {TORN_READS} times in a row").into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use chrono::Utc;
    use shared::ids::WorkflowId;

    use super::*;

    fn item(id: &str, version: u64, head_of: Option<u64>) -> Item {
        let mut item = key_of("ten_x#07".to_owned(), id.to_owned());
        item.insert("version".to_owned(), n(version));
        if let Some(beside) = head_of {
            item.insert("item_version".to_owned(), n(beside));
        }
        item
    }

    /// A pair is torn only when the head was written beside a later item than the one
    /// read (the item read before a change, its head after it).
    #[test]
    fn an_execution_read_before_its_head_changed_is_torn() {
        let e = "exec_0193a6f21c2b7d3e8f000123456789ab";
        let pair = |item_version, beside| vec![item(e, item_version, None), item(&head_id(e), 3, Some(beside))];
        assert_eq!(torn(&pair(5, 6)), vec![("ten_x#07".to_owned(), e.to_owned())]);
        assert!(torn(&pair(5, 5)).is_empty(), "one version");
        assert!(torn(&pair(6, 5)).is_empty(), "the item newer: its own progress holds");
        assert!(torn(&[item(e, 5, None)]).is_empty(), "no head");
    }

    /// A head's progress is taken only beside the item it was written with; its version
    /// always, for the next write's condition.
    #[test]
    fn a_head_applies_to_the_item_it_was_written_beside() {
        let mut e = Execution::start(WorkflowId::generate(), None, None, BTreeMap::new(), Utc::now());
        e.version = 4;
        let checkpoint = CheckpointId::generate();
        let head = |item_version| HeadRecord {
            tenant_id: "ten_x#07".to_owned(),
            id: head_id(e.id.as_str()),
            current_checkpoint_id: Some(checkpoint.to_string()),
            checkpoint_count: 1,
            last_sequence: 1,
            updated_at: shared::time::format(Utc::now()),
            version: 2,
            item_version,
        };
        let mut newer = e.clone();
        head(3).apply(&mut newer).expect("applied");
        assert_eq!(
            (newer.checkpoint_count, newer.current_checkpoint_id.clone(), newer.head_version),
            (0, None, Some(2))
        );
        let mut beside = e.clone();
        head(4).apply(&mut beside).expect("applied");
        assert_eq!(
            (beside.checkpoint_count, beside.current_checkpoint_id, beside.head_version),
            (1, Some(checkpoint), Some(2))
        );
    }
}
