//! Rollback planning: what rolling an execution back to one of its checkpoints discards,
//! and how.
//!
//! Everything above the target goes, including what earlier rollbacks left hidden and
//! not yet deleted (ranges above the target; a range below it stays). What fits one
//! transaction is deleted in the rollback's own; otherwise the rollback commits its
//! decision alone, a hidden range, and the checkpoints are deleted after it
//! (`Runs::finish_discard`, then the janitor): either way a client sees the rollback
//! whole or not at all.
//!
//! The request reads at most [`PURGE_CHECKPOINTS`] of them ([`Runs::above`]), so its
//! memory and time stay bounded; beyond that, the visible ones are counted without being
//! read. Lowest first: the ones just above the target go first, and with them the keys a
//! client that runs its steps again reuses first. [`plan_rollback`] decides from what
//! was read, without DynamoDB; `Runs::transition` carries the plan out.

use shared::TenantId;
use shared::dynamo::MAX_TRANSACTION_ITEMS;

use super::Runs;
use super::checkpoints::model::{LAST_SEQUENCE, ListWindow, StoredCheckpoint};
use super::deletion::PURGE_CHECKPOINTS;
use super::executions::model::{Discarded, Execution};
use crate::Error;

/// The most deletions a rollback makes in its own transaction (and a purge's batch).
pub(crate) const ROLLBACK_BATCH: usize = 80;

/// Operations a rollback's transaction holds besides its execution's change and its
/// deletions: its event, the idempotency record a request with a key adds, and the
/// tenant's hidden item (counted even when the change already writes it).
const ROLLBACK_OWN: usize = 3;

/// The deletions a rollback may make in its own transaction when its execution's change
/// (item, head, tag pointers, counters) is `change` operations: what DynamoDB's
/// [`MAX_TRANSACTION_ITEMS`] leave, and at most [`ROLLBACK_BATCH`].
pub(crate) fn rollback_budget(change: usize) -> usize {
    MAX_TRANSACTION_ITEMS.saturating_sub(change + ROLLBACK_OWN).min(ROLLBACK_BATCH)
}

/// What a rollback found above its target, lowest first.
#[derive(Debug, Clone)]
pub(crate) enum Above {
    /// Every checkpoint above the target (fewer than [`PURGE_CHECKPOINTS`]).
    All(Vec<StoredCheckpoint>),
    /// The first [`PURGE_CHECKPOINTS`] above the target (there may be more), and how many
    /// above the target a client sees, counted without reading them.
    Partly {
        /// The checkpoints read.
        read: Vec<StoredCheckpoint>,
        /// The visible ones above the target, all of them.
        visible: u64,
    },
}

impl Above {
    /// The checkpoints read.
    pub(crate) fn into_read(self) -> Vec<StoredCheckpoint> {
        match self {
            Self::All(read) | Self::Partly { read, .. } => read,
        }
    }
}

/// What a rollback does to the checkpoints above its target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RollbackPlan {
    /// How many a client no longer sees (the answer's `discarded_checkpoints`).
    pub(crate) discarded: u64,
    /// The execution's checkpoint count after it.
    pub(crate) checkpoint_count: u64,
    /// The execution's discarded ranges after it.
    pub(crate) ranges: Vec<Discarded>,
    /// How the discarded checkpoints go.
    pub(crate) disposal: Disposal,
}

/// How a rollback's discarded checkpoints go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Disposal {
    /// Deleted in the rollback's own transaction: all were read, and their deletions fit
    /// in what the transaction has left ([`rollback_budget`]).
    InTransaction,
    /// Hidden by `range`, recorded in the rollback's transaction, and deleted after it:
    /// those read by the request, which then drops the range when they were `all`; the
    /// rest by the janitor.
    Hidden {
        /// The range recorded on the execution (and in the tenant's hidden item).
        range: Discarded,
        /// Whether the request read every checkpoint of the range.
        all: bool,
    },
}

/// Plans rolling `current` back to its checkpoint with sequence `target`, given what is
/// `above` it, deleting in its own transaction at most `budget` operations.
pub(crate) fn plan_rollback(current: &Execution, target: u64, above: &Above, budget: usize) -> RollbackPlan {
    let (read, visible, all) = match above {
        Above::All(read) => {
            let visible = read.iter().filter(|c| !current.is_discarded(c.checkpoint.sequence)).count() as u64;
            (read, visible, true)
        }
        Above::Partly { read, visible } => (read, *visible, false),
    };
    let mut ranges: Vec<Discarded> = current.discarded.iter().copied().filter(|r| r.through <= target).collect();
    let size: usize = read.iter().map(StoredCheckpoint::deletion_size).sum();
    let disposal = if all && size <= budget {
        Disposal::InTransaction
    } else {
        let range = Discarded { after: target, through: current.last_sequence };
        ranges.push(range);
        Disposal::Hidden { range, all }
    };
    RollbackPlan {
        discarded: visible,
        checkpoint_count: current.checkpoint_count.saturating_sub(visible),
        ranges,
        disposal,
    }
}

impl Runs {
    /// What is above checkpoint sequence `target` of `current`: at most
    /// [`PURGE_CHECKPOINTS`] read lowest first (with what their deletion needs), and when
    /// that was not all, the visible ones counted.
    ///
    /// # Errors
    /// The reads' storage errors.
    pub(crate) async fn above(&self, tenant: &TenantId, current: &Execution, target: u64) -> Result<Above, Error> {
        let range = Discarded { after: target, through: LAST_SEQUENCE };
        let read = self.checkpoints.in_range(tenant, &current.id, range, PURGE_CHECKPOINTS, true).await?;
        if read.len() < PURGE_CHECKPOINTS {
            return Ok(Above::All(read));
        }
        let window = ListWindow { from_sequence: target + 1, through_sequence: LAST_SEQUENCE, ..ListWindow::default() };
        let visible = self.checkpoints.count(tenant, current, &window, u64::MAX).await?;
        Ok(Above::Partly { read, visible })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use chrono::Utc;
    use shared::ids::{CheckpointId, WorkflowId};

    use super::*;
    use crate::runs::checkpoints::model::Checkpoint;
    use crate::runs::checkpoints::store::Layout;

    /// An execution with checkpoints 1..=`last`, those in `discarded` ranges hidden, each
    /// in two entries (as before checkpoints were joined).
    fn execution(last: u64, discarded: Vec<Discarded>) -> Execution {
        let mut e = Execution::start(WorkflowId::generate(), None, None, BTreeMap::new(), Utc::now());
        e.checkpoints_joined = false;
        let hidden: u64 = discarded.iter().map(|r| r.through - r.after).sum();
        e.last_sequence = last;
        e.checkpoint_count = last - hidden;
        e.discarded = discarded;
        e
    }

    /// Checkpoint `sequence` of `e` as a rollback reads it: `state_parts` parts, a key.
    fn stored(e: &Execution, sequence: u64, state_parts: u32) -> StoredCheckpoint {
        let checkpoint = Checkpoint {
            id: CheckpointId::generate(),
            execution_id: e.id.clone(),
            workflow_id: e.workflow_id.clone(),
            sequence,
            name: None,
            key: Some(format!("k{sequence}")),
            parent_checkpoint_id: None,
            attempt: 1,
            metadata: BTreeMap::new(),
            state_size_bytes: 2,
            created_at: e.created_at,
        };
        StoredCheckpoint { checkpoint, state_parts, writes_parts: None, layout: Layout::of(e) }
    }

    #[test]
    fn a_small_rollback_deletes_in_its_own_transaction() {
        let e = execution(10, Vec::new());
        let above = Above::All((4..=10).map(|s| stored(&e, s, 0)).collect());
        let plan = plan_rollback(&e, 3, &above, ROLLBACK_BATCH);
        assert_eq!(
            plan,
            RollbackPlan { discarded: 7, checkpoint_count: 3, ranges: Vec::new(), disposal: Disposal::InTransaction }
        );
    }

    #[test]
    fn what_does_not_fit_one_transaction_is_hidden_by_a_range_and_deleted_after() {
        // 5 operations each (two entries, two key pointers, a state part): 16 fill a
        // transaction.
        let e = execution(19, Vec::new());
        let above = Above::All((4..=19).map(|s| stored(&e, s, 1)).collect());
        assert_eq!(plan_rollback(&e, 3, &above, ROLLBACK_BATCH).disposal, Disposal::InTransaction);
        let e = execution(30, Vec::new());
        let above = Above::All((4..=30).map(|s| stored(&e, s, 1)).collect());
        let plan = plan_rollback(&e, 3, &above, ROLLBACK_BATCH);
        let range = Discarded { after: 3, through: 30 };
        assert_eq!(plan.disposal, Disposal::Hidden { range, all: true });
        assert_eq!((plan.discarded, plan.checkpoint_count, plan.ranges), (27, 3, vec![range]));
    }

    /// A change that needs more of the transaction leaves less to the deletions: 16
    /// checkpoints of 5 operations fit beside a small change, not beside a fully tagged
    /// execution's (16 tag pointers and its counters, item and head: 24 operations).
    #[test]
    fn the_deletions_fit_beside_the_change_or_go_after_it() {
        assert_eq!((rollback_budget(4), rollback_budget(24), rollback_budget(120)), (80, 73, 0));
        let e = execution(19, Vec::new());
        let above = Above::All((4..=19).map(|s| stored(&e, s, 1)).collect());
        assert_eq!(plan_rollback(&e, 3, &above, rollback_budget(4)).disposal, Disposal::InTransaction);
        let range = Discarded { after: 3, through: 19 };
        let tagged = plan_rollback(&e, 3, &above, rollback_budget(24));
        assert_eq!(tagged.disposal, Disposal::Hidden { range, all: true });
        assert_eq!((tagged.discarded, tagged.checkpoint_count), (16, 3), "the client sees the same rollback");
        // Kept with their execution, each is one entry less: 16 of 4 operations fit.
        let mut joined = e;
        joined.checkpoints_joined = true;
        let above = Above::All((4..=19).map(|s| stored(&joined, s, 1)).collect());
        assert_eq!(plan_rollback(&joined, 3, &above, rollback_budget(24)).disposal, Disposal::InTransaction);
    }

    #[test]
    fn more_than_one_request_reads_is_counted_and_left_partly_to_the_janitor() {
        let e = execution(1000, Vec::new());
        let read = (2..2 + PURGE_CHECKPOINTS as u64).map(|s| stored(&e, s, 0)).collect();
        let plan = plan_rollback(&e, 1, &Above::Partly { read, visible: 999 }, ROLLBACK_BATCH);
        let range = Discarded { after: 1, through: 1000 };
        assert_eq!(plan.disposal, Disposal::Hidden { range, all: false });
        assert_eq!((plan.discarded, plan.checkpoint_count, plan.ranges), (999, 1, vec![range]));
    }

    #[test]
    fn hidden_checkpoints_are_not_counted_again_and_ranges_below_the_target_stay() {
        let below = Discarded { after: 2, through: 5 };
        let above_target = Discarded { after: 7, through: 9 };
        let e = execution(12, vec![below, above_target]);
        assert_eq!(e.checkpoint_count, 7);
        // Read above 5: 6..=12, of which 8 and 9 an earlier rollback hid.
        let above = Above::All((6..=12).map(|s| stored(&e, s, 0)).collect());
        let plan = plan_rollback(&e, 5, &above, ROLLBACK_BATCH);
        assert_eq!(
            plan,
            RollbackPlan { discarded: 5, checkpoint_count: 2, ranges: vec![below], disposal: Disposal::InTransaction }
        );
    }
}
