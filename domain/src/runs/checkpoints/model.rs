//! Checkpoints as the API knows them, free of storage: a checkpoint, its state packed
//! for storing, what deleting one takes, and which of an execution's checkpoints a list
//! shows.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use shared::ids::{CheckpointId, ExecutionId, WorkflowId};

use crate::blobs::PART_MAX;

/// The largest state, as serialized JSON: 4 MiB.
pub const STATE_MAX_BYTES: usize = 4 * 1024 * 1024;
/// Compressed states up to this size sit in the by-id entry.
pub const INLINE_STATE_MAX: usize = 300 * 1024;

/// The largest state (in bytes of JSON) a checkpoint's one entry holds inline
/// ([`super::store::Layout::Joined`]); a larger one, up to [`INLINE_STATE_MAX`]
/// compressed, is an item of its own beside the entry, so that a list, a count or a
/// rollback's look at the entries reads at most this much of each checkpoint's state.
pub const JOINED_INLINE_MAX: u64 = 4 * 1024;
/// Size of one part of a larger compressed state: the blob store's largest part.
pub const PART_SIZE: usize = PART_MAX;

/// A checkpoint of an execution's state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Its id.
    pub id: CheckpointId,
    /// The execution.
    pub execution_id: ExecutionId,
    /// The execution's workflow.
    pub workflow_id: WorkflowId,
    /// 1, 2, … within the execution; never reused.
    pub sequence: u64,
    /// The node or step.
    pub name: Option<String>,
    /// The client's name for it, unique within its execution.
    pub key: Option<String>,
    /// The checkpoint before it in this attempt (the replay point for the first
    /// checkpoint of a replay).
    pub parent_checkpoint_id: Option<CheckpointId>,
    /// The execution's attempt when it was written.
    pub attempt: u32,
    /// String labels.
    pub metadata: BTreeMap<String, String>,
    /// Size of the state as serialized JSON.
    pub state_size_bytes: u64,
    /// When it was written.
    pub created_at: DateTime<Utc>,
}

/// A state ready to store: serialized and compressed once.
#[derive(Debug, Clone)]
pub struct PackedState {
    compressed: Vec<u8>,
    /// Size of the serialized JSON.
    pub size: usize,
}

impl PackedState {
    /// Serializes and compresses `state`.
    #[must_use]
    pub fn pack(state: &Map<String, Value>) -> Self {
        Self::from_json(&serde_json::to_vec(state).unwrap_or_default())
    }

    /// Compresses a state already serialized as compact JSON.
    #[must_use]
    pub fn from_json(json: &[u8]) -> Self {
        Self { compressed: shared::blob::compress(json), size: json.len() }
    }

    /// Its compressed size.
    #[must_use]
    pub fn compressed_len(&self) -> usize {
        self.compressed.len()
    }

    /// The compressed state.
    pub(crate) fn compressed(&self) -> &[u8] {
        &self.compressed
    }

    /// Its parts in `blobs` when too large to sit in an entry (else none).
    pub(crate) fn parts(&self) -> Vec<&[u8]> {
        if self.compressed.len() <= INLINE_STATE_MAX { Vec::new() } else { self.compressed.chunks(PART_SIZE).collect() }
    }
}

/// What deleting a checkpoint needs to know.
#[derive(Debug, Clone)]
pub struct StoredCheckpoint {
    /// The checkpoint.
    pub checkpoint: Checkpoint,
    /// Parts of its state in `blobs`.
    pub state_parts: u32,
    /// Parts of its writes document in `blobs`, if it has one (see
    /// [`super::store::CheckpointStore::with_writes`]).
    pub writes_parts: Option<u32>,
    /// Where its items are.
    pub layout: super::store::Layout,
}

impl StoredCheckpoint {
    /// Operations this checkpoint's deletion takes (its entries, key pointers, state parts,
    /// writes document and its parts).
    #[must_use]
    pub fn deletion_size(&self) -> usize {
        let entries = if self.layout == super::store::Layout::Joined {
            1 + usize::from(self.layout.state_beside(self.state_parts, self.checkpoint.state_size_bytes))
        } else {
            2
        };
        entries
            + 2 * usize::from(self.checkpoint.key.is_some())
            + self.state_parts as usize
            + self.writes_parts.map_or(0, |parts| 1 + parts as usize)
    }
}

/// Which checkpoints of an execution a list shows, and in which order.
#[derive(Debug, Clone, Default)]
pub struct ListWindow {
    /// The lowest sequence shown.
    pub from_sequence: u64,
    /// The highest sequence shown.
    pub through_sequence: u64,
    /// Highest sequence first.
    pub descending: bool,
    /// Only those whose metadata has each of these values.
    pub metadata: BTreeMap<String, String>,
}

impl ListWindow {
    /// Whether the sequence range holds nothing (after the first checkpoint, newest
    /// first): answered without a query, whose key range would be reversed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.from_sequence.max(1) > self.through_sequence.min(LAST_SEQUENCE)
    }
}

/// The highest sequence an entry can hold.
pub const LAST_SEQUENCE: u64 = 9_999_999_999;

/// Checkpoints one metadata-filtered list request examines at most: the filter is
/// evaluated on what the key range reads, so this bounds the request's cost.
pub const MAX_EXAMINED: usize = 1000;

/// A window of checkpoints.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// What the window shows.
    pub items: Vec<Checkpoint>,
    /// For a filtered list that examined [`MAX_EXAMINED`] checkpoints before filling the
    /// window: the last one examined, where the next request continues.
    pub stopped_at: Option<CheckpointId>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_states_are_inline_and_large_ones_split_into_parts() {
        let mut small = Map::new();
        small.insert("step".to_owned(), Value::from(3));
        assert!(PackedState::pack(&small).parts().is_empty());

        let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
        let noise: String = (0..1_200_000)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                char::from(b'A' + (seed % 26) as u8)
            })
            .collect();
        let mut large = Map::new();
        large.insert("blob".to_owned(), Value::from(noise));
        let packed = PackedState::pack(&large);
        let parts = packed.parts();
        assert!(parts.len() >= 2, "{} bytes compressed", packed.compressed.len());
        assert!(parts.iter().all(|p| p.len() <= PART_SIZE));
        assert_eq!(parts.concat(), packed.compressed);
    }
}
