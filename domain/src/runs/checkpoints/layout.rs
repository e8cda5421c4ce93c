//! Where a checkpoint's items are ([`Layout`], as its execution says) and what each is
//! keyed by: its entries, the item beside a joined entry that holds a larger state, and
//! the pointers from its key.

use shared::TenantId;
use shared::ids::{CheckpointId, ExecutionId, WorkflowId};

use super::model::JOINED_INLINE_MAX;
use crate::runs::executions::model::Execution;
use crate::runs::storage::{keyed_entry, shard_of, shard_partition};

pub(super) fn by_execution_entry(execution: &ExecutionId, sequence: u64) -> String {
    format!("{execution}#{sequence:010}")
}

/// The entry of a checkpoint kept with its execution ([`Layout::Joined`]): its sequence,
/// then its id (two executions of a tenant may share a mark: their checkpoints of one
/// sequence differ by id unless made in the same millisecond, which the entry's
/// condition refuses).
pub(super) fn joined_entry(sequence: u64, id: &CheckpointId) -> String {
    format!("{sequence:010}#{id}")
}

/// The item beside a joined entry that holds its state when larger than
/// [`JOINED_INLINE_MAX`] (`s` sorts after every sequence: outside every range of them).
pub(super) fn state_entry(sequence: u64, id: &CheckpointId) -> String {
    format!("state#{sequence:010}#{id}")
}

/// The partition of the checkpoints kept with an execution whose mark is `mark`
/// ([`ExecutionId::mark`]).
pub(super) fn joined_partition(tenant: &str, mark: &str) -> String {
    format!("{tenant}#c{mark}")
}

/// How many partitions a tenant's by-id entries, workflow pointers and writes documents
/// are spread over (of executions whose checkpoints are apart).
pub const SHARDS: u8 = crate::runs::storage::SHARDS;

/// Where a checkpoint's items are kept, as its execution says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Every item in the tenant's partition: executions started before checkpoints had
    /// partitions of their own, or while that is switched off.
    Tenant,
    /// The execution's items in its partition, each checkpoint's in one of [`SHARDS`].
    Apart,
    /// Each checkpoint one entry (its state with it) in its execution's partition
    /// (`ten_…#c…`, by the execution's mark), keyed by its sequence and id, which names
    /// that partition and sequence ([`CheckpointId::in_execution`]): a read by id finds
    /// it with no other entry. Key pointers beside it; a workflow pointer and writes
    /// document as [`Self::Apart`] keeps them.
    Joined,
}

impl Layout {
    /// Where the checkpoints of `execution` are.
    #[must_use]
    pub fn of(execution: &Execution) -> Self {
        match (execution.checkpoints_joined, execution.checkpoints_apart) {
            (true, _) => Self::Joined,
            (false, true) => Self::Apart,
            (false, false) => Self::Tenant,
        }
    }

    /// The partition of `execution`'s by-execution entries and key pointers.
    pub(super) fn execution_partition(self, tenant: &TenantId, execution: &ExecutionId) -> String {
        match self {
            Self::Tenant => tenant.as_str().to_owned(),
            Self::Apart => format!("{}#{execution}", tenant.as_str()),
            Self::Joined => joined_partition(tenant.as_str(), execution.mark()),
        }
    }

    /// The partition of checkpoint `id`'s workflow pointer and writes, and of its by-id
    /// entry unless [`Self::Joined`].
    pub(super) fn checkpoint_partition(self, tenant: &TenantId, id: &CheckpointId) -> String {
        match self {
            Self::Tenant => tenant.as_str().to_owned(),
            Self::Apart | Self::Joined => shard_partition(tenant, shard_of(id.as_str())),
        }
    }

    /// The key (partition, entry) of checkpoint `id`'s entry that holds it.
    pub(super) fn entry_of(self, tenant: &TenantId, id: &CheckpointId) -> (String, String) {
        match self {
            Self::Joined => {
                let (mark, sequence) = id.place();
                (joined_partition(tenant.as_str(), mark), joined_entry(sequence, id))
            }
            Self::Tenant | Self::Apart => (self.checkpoint_partition(tenant, id), id.to_string()),
        }
    }

    /// Whether a checkpoint with `state_parts` parts and a state of `state_size_bytes`
    /// keeps its state in an item beside its entry (joined, not in parts, larger than
    /// [`JOINED_INLINE_MAX`]). An entry that holds its state all the same (one written
    /// before this rule) is read as it is.
    #[must_use]
    pub fn state_beside(self, state_parts: u32, state_size_bytes: u64) -> bool {
        self == Self::Joined && state_parts == 0 && state_size_bytes > JOINED_INLINE_MAX
    }

    /// The key (partition, entry) of the item beside checkpoint `id`'s entry that may
    /// hold its state (joined only).
    pub(super) fn state_of(self, tenant: &TenantId, id: &CheckpointId) -> Option<(String, String)> {
        (self == Self::Joined).then(|| {
            let (mark, sequence) = id.place();
            (joined_partition(tenant.as_str(), mark), state_entry(sequence, id))
        })
    }

    /// The entries of `execution`'s checkpoints with a sequence from `from` through
    /// `through`, as a key range of its partition.
    pub(super) fn sequence_range(self, execution: &ExecutionId, from: u64, through: u64) -> (String, String) {
        match self {
            Self::Joined => (format!("{from:010}#"), format!("{through:010}#~")),
            Self::Tenant | Self::Apart => (by_execution_entry(execution, from), by_execution_entry(execution, through)),
        }
    }

    /// Every layout, where a read that knows only a checkpoint's or execution's id looks
    /// (the latest first).
    pub const ALL: [Self; 3] = [Self::Joined, Self::Apart, Self::Tenant];
}

/// The entry pointing from a checkpoint's key to the checkpoint (`#k` sorts after every
/// `#0000000042`, outside the by-execution range), its key hashed where it would not
/// fit a sort key ([`keyed_entry`]).
pub(super) fn key_entry(execution: &ExecutionId, key: &str) -> String {
    keyed_entry(&format!("{execution}#key"), key)
}

/// The entry pointing from a checkpoint's key within its workflow to the checkpoint:
/// the key's length first, so that the entries of one key are exactly those beginning
/// with [`workflow_key_prefix`] (a key may hold `#`), then the checkpoint id, as the
/// executions of a workflow may each have a checkpoint with that key.
pub(super) fn workflow_key_entry(workflow: &WorkflowId, key: &str, checkpoint: &CheckpointId) -> String {
    format!("{}{checkpoint}", workflow_key_prefix(workflow, key))
}

/// Keys longer than this many bytes are named by their SHA-256 in a workflow pointer's
/// entry, which so stays within DynamoDB's 1,024-byte sort key whatever the key (256
/// characters of 4-byte UTF-8 are 1,024 bytes alone).
pub(super) const KEY_BYTES_IN_ENTRY: usize = 512;

pub(super) fn workflow_key_prefix(workflow: &WorkflowId, key: &str) -> String {
    if key.len() <= KEY_BYTES_IN_ENTRY {
        format!("{workflow}#ckey#{}:{key}#", key.len())
    } else {
        format!("{workflow}#ckey#sha256:{}#", shared::auth::hash_key(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::storage::SORT_KEY_MAX_BYTES;

    #[test]
    fn by_execution_entries_sort_by_sequence() {
        let e = ExecutionId::generate();
        assert!(by_execution_entry(&e, 9) < by_execution_entry(&e, 10));
        assert!(by_execution_entry(&e, 10) < by_execution_entry(&e, 9_999_999_999));
    }

    /// The item that holds a larger state sorts outside every range of sequences (after
    /// every entry, as key pointers do), and only a joined checkpoint whose state is not
    /// in parts and passes the bound has one.
    #[test]
    fn a_state_beside_its_entry_is_outside_every_range_and_only_past_the_bound() {
        let execution = ExecutionId::generate();
        let id = CheckpointId::in_execution(&execution, 7, chrono::Utc::now());
        let (_, hi) = Layout::Joined.sequence_range(&execution, 1, 9_999_999_999);
        assert!(state_entry(7, &id) > hi && state_entry(7, &id) > key_entry(&execution, "k"));
        assert!(!Layout::Joined.state_beside(0, JOINED_INLINE_MAX));
        assert!(Layout::Joined.state_beside(0, JOINED_INLINE_MAX + 1));
        assert!(!Layout::Joined.state_beside(2, 5 * 1024 * 1024), "in parts");
        assert!(!Layout::Apart.state_beside(0, JOINED_INLINE_MAX + 1));
    }

    #[test]
    fn a_workflow_pointer_entry_fits_a_sort_key_whatever_the_key() {
        let (workflow, checkpoint) = (WorkflowId::generate(), CheckpointId::generate());
        let longest = "\u{1F600}".repeat(shared::body::KEY_MAX_CHARS); // 256 characters of 4 bytes
        assert_eq!(longest.len(), 1024);
        let entry = workflow_key_entry(&workflow, &longest, &checkpoint);
        assert!(entry.len() <= SORT_KEY_MAX_BYTES, "{} bytes", entry.len());
        let at_the_bound = "k".repeat(KEY_BYTES_IN_ENTRY);
        let entry = workflow_key_entry(&workflow, &at_the_bound, &checkpoint);
        assert!(entry.len() <= SORT_KEY_MAX_BYTES, "{} bytes", entry.len());
        assert!(entry.contains(&at_the_bound), "a key up to the bound is shown as it is");
        // A key's entries are exactly those with its prefix: a key holding # or one that
        // looks like another's length or hash does not share it.
        let a = workflow_key_prefix(&workflow, "cp-1");
        for other in ["cp-1#x", "cp", "4:cp-1", "sha256:cp-1"] {
            assert!(!workflow_key_entry(&workflow, other, &checkpoint).starts_with(&a), "{other}");
        }
        assert_ne!(workflow_key_prefix(&workflow, &longest), workflow_key_prefix(&workflow, &"\u{1F601}".repeat(256)));
    }
}
