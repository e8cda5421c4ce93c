//! A checkpoint's writes (`POST /checkpoints/{id}/writes`): what a task wrote to its
//! channels, kept as one document per checkpoint beside its entries, compressed and, when
//! large, in parts in `blobs` (`cp_…#writes#0000`, …).

use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use serde::{Deserialize, Serialize};
use shared::TenantId;
use shared::dynamo::{Part, StoreError, Transaction, batch_get, built, get_item, n, s};
use shared::ids::CheckpointId;

use super::model::{PackedState, STATE_MAX_BYTES, StoredCheckpoint};
use super::store::{CheckpointStore, Layout};

/// The entry of a checkpoint's writes document.
pub(super) fn writes_entry(checkpoint: &CheckpointId) -> String {
    format!("{checkpoint}#writes")
}

pub(super) fn writes_part_key(checkpoint: &CheckpointId, index: usize) -> String {
    format!("{checkpoint}#writes#{index:04}")
}

/// The stored form of a checkpoint's writes document.
#[derive(Debug, Serialize, Deserialize)]
struct WritesRecord {
    tenant_id: String,
    entry: String,
    version: u64,
    /// Number of writes.
    count: u64,
    /// Size of the document as serialized JSON.
    size: u64,
    /// Number of parts in `blobs`; 0 when the document is inline.
    parts: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    inline: Option<serde_bytes::ByteBuf>,
}

/// One write of a task to a channel, attached to a checkpoint.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Write {
    /// The task that wrote it.
    pub task_id: String,
    /// Where the task sits in its graph (may be empty).
    #[serde(default)]
    pub task_path: String,
    /// Its place among the task's writes (negative for special channels).
    pub index: i64,
    /// The channel written.
    pub channel: String,
    /// The value, as the JSON text it was sent as.
    pub value: Box<serde_json::value::RawValue>,
}

/// The writes of a checkpoint as stored: in the order first stored, one per
/// `(task_id, index)`.
#[derive(Debug, Clone, Default)]
pub struct Writes {
    /// The writes.
    pub items: Vec<Write>,
    /// The stored document's version (0: none stored yet).
    pub version: u64,
    /// Its parts in `blobs`.
    parts: u32,
}

impl Writes {
    /// Stores `new`: each replaces the write with its `(task_id, index)`, or is added.
    pub fn merge(&mut self, new: Vec<Write>) {
        for write in new {
            match self.items.iter_mut().find(|w| w.task_id == write.task_id && w.index == write.index) {
                Some(old) => *old = write,
                None => self.items.push(write),
            }
        }
    }

    /// The document as compact JSON.
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(&self.items).unwrap_or_default()
    }
}

impl CheckpointStore {
    /// Fills in which of `checkpoints` have a writes document, and its parts (one batch
    /// read), so that their deletion takes everything.
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn with_writes(
        &self,
        tenant: &TenantId,
        mut checkpoints: Vec<StoredCheckpoint>,
    ) -> Result<Vec<StoredCheckpoint>, StoreError> {
        let keys = checkpoints
            .iter()
            .map(|c| {
                std::collections::HashMap::from([
                    ("tenant_id".to_owned(), s(c.layout.checkpoint_partition(tenant, &c.checkpoint.id))),
                    ("entry".to_owned(), s(writes_entry(&c.checkpoint.id))),
                ])
            })
            .collect();
        let found = batch_get(&self.client, self.table(), keys).await?;
        let mut parts = std::collections::HashMap::new();
        for item in found {
            let record: WritesRecord = serde_dynamo::from_item(item)?;
            parts.insert(record.entry, record.parts);
        }
        for c in &mut checkpoints {
            c.writes_parts = parts.get(&writes_entry(&c.checkpoint.id)).copied();
        }
        Ok(checkpoints)
    }

    /// The writes of checkpoint `id`, kept as `layout` says (none stored: empty, version 0).
    ///
    /// # Errors
    /// The reads' [`StoreError`]s; [`StoreError::Corrupt`] if the document does not
    /// reassemble.
    pub async fn writes(&self, tenant: &TenantId, id: &CheckpointId, layout: Layout) -> Result<Writes, StoreError> {
        let entry = writes_entry(id);
        let partition = layout.checkpoint_partition(tenant, id);
        let Some(item) = get_item(&self.client, self.table(), &[("tenant_id", &partition), ("entry", &entry)]).await?
        else {
            return Ok(Writes::default());
        };
        let record: WritesRecord = serde_dynamo::from_item(item)?;
        let compressed = match record.inline {
            Some(inline) => inline.into_vec(),
            None => {
                let keys: Vec<String> = (0..record.parts as usize).map(|i| writes_part_key(id, i)).collect();
                let mut found = self.blobs.read(tenant, &keys).await?;
                let mut all = Vec::new();
                for key in &keys {
                    all.extend(
                        found
                            .remove(key)
                            .ok_or_else(|| StoreError::Corrupt(format!("{entry}: part {key} is missing")))?,
                    );
                }
                all
            }
        };
        let corrupt = |what: &str| StoreError::Corrupt(format!("{entry}: {what}"));
        let json = shared::blob::decompress(&compressed, STATE_MAX_BYTES).map_err(|_| corrupt("does not inflate"))?;
        let items: Vec<Write> = serde_json::from_slice(&json).map_err(|_| corrupt("is not a list of writes"))?;
        Ok(Writes { items, version: record.version, parts: record.parts })
    }

    /// Adds the replacement of checkpoint `id`'s writes document (`old` as read, kept as
    /// `layout` says) by `new` to `tx`, conditioned on it being unchanged since ([`Part::Checkpoint`] fails
    /// otherwise).
    ///
    /// # Errors
    /// [`StoreError`] if an operation cannot be built.
    pub fn stage_writes(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        (id, layout): (&CheckpointId, Layout),
        old: &Writes,
        new: &Writes,
        packed: &PackedState,
    ) -> Result<(), StoreError> {
        let parts = packed.parts();
        let record = WritesRecord {
            tenant_id: layout.checkpoint_partition(tenant, id),
            entry: writes_entry(id),
            version: old.version + 1,
            count: new.items.len() as u64,
            size: packed.size as u64,
            parts: u32::try_from(parts.len()).unwrap_or(u32::MAX),
            inline: parts.is_empty().then(|| serde_bytes::ByteBuf::from(packed.compressed().to_vec())),
        };
        let mut put = Put::builder().table_name(self.table()).set_item(Some(serde_dynamo::to_item(record)?));
        put = if old.version == 0 {
            put.condition_expression("attribute_not_exists(entry)")
        } else {
            put.condition_expression("version = :expected").expression_attribute_values(":expected", n(old.version))
        };
        tx.push(Part::Checkpoint, TransactWriteItem::builder().put(built(put.build())?).build());
        for (index, part) in parts.iter().enumerate() {
            self.blobs.stage_put(tx, Part::Checkpoint, tenant, &writes_part_key(id, index), part.to_vec())?;
        }
        for index in parts.len()..old.parts as usize {
            self.blobs.stage_delete(tx, Part::Checkpoint, tenant, &writes_part_key(id, index))?;
        }
        Ok(())
    }
}
