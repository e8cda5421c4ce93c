//! The execution domain: statuses, the transitions of the contract, and what each
//! transition changes. Free of HTTP and storage.

use std::collections::BTreeMap;

use crate::Error;
use chrono::{DateTime, Utc};
use serde_json::Value;
use shared::body::WireEnum;
use shared::ids::{CheckpointId, ExecutionId, FailureId, WorkflowId};

/// The most attempts (the start and its replays) one execution may have, as Step
/// Functions bounds redrives. Each attempt can record one failure, and completing an
/// execution resolves its open failures in the completion's own transaction: with at
/// most 50 of them, that transaction stays far below DynamoDB's 100 items, and the
/// execution's list of failure ids stays small.
pub const MAX_ATTEMPTS: u32 = 50;

/// Where an execution is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExecutionStatus {
    /// Running: the client library reports checkpoints.
    Running,
    /// Finished successfully.
    Completed,
    /// Stopped by an error; may be replayed.
    Failed,
    /// Cancelled by a client.
    Cancelled,
    /// Paused; may be replayed or cancelled.
    Paused,
}

impl WireEnum for ExecutionStatus {
    const ALL: &'static [Self] = &[Self::Running, Self::Completed, Self::Failed, Self::Cancelled, Self::Paused];

    fn wire(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Paused => "paused",
        }
    }
}

impl ExecutionStatus {
    /// Whether an execution in this status has ended (`ended_at` is set).
    #[must_use]
    pub fn is_ended(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// The error an execution failed with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionError {
    /// `AGENT_ERROR`, `TOOL_ERROR`, …
    pub error_type: String,
    /// What happened.
    pub message: String,
}

/// A run of a workflow, as reported by the client library.
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    /// Its id.
    pub id: ExecutionId,
    /// The workflow it runs.
    pub workflow_id: WorkflowId,
    /// Its status.
    pub status: ExecutionStatus,
    /// What it was started with.
    pub input: Option<Value>,
    /// What it produced, once completed.
    pub output: Option<Value>,
    /// Why it failed, while failed.
    pub error: Option<ExecutionError>,
    /// Why it was cancelled, if a reason was given.
    pub cancel_reason: Option<String>,
    /// The client's name for it, unique within its workflow (see `Runs::start`).
    pub key: Option<String>,
    /// String labels.
    pub metadata: BTreeMap<String, String>,
    /// Tags it was started with (see `shared::tags`), kept for its life; lists filter by
    /// them.
    pub tags: BTreeMap<String, String>,
    /// 1, then +1 per replay.
    pub attempt: u32,
    /// The checkpoint it stands at.
    pub current_checkpoint_id: Option<CheckpointId>,
    /// Checkpoints it has now.
    pub checkpoint_count: u64,
    /// The highest checkpoint sequence ever given (never reused).
    pub last_sequence: u64,
    /// Failures recorded for it, oldest first.
    pub failure_ids: Vec<FailureId>,
    /// Checkpoints a rollback discarded whose items are not all deleted yet: hidden from
    /// every reader, deleted after the rollback committed (see `crate::runs::rollback`).
    pub discarded: Vec<Discarded>,
    /// Internal optimistic-concurrency version; +1 on every write.
    pub version: u64,
    /// When it started.
    pub created_at: DateTime<Utc>,
    /// When it last changed.
    pub updated_at: DateTime<Utc>,
    /// When it ended (completed, failed, cancelled).
    pub ended_at: Option<DateTime<Utc>>,
    /// When it expires, once ended: the tenant's retention when it ended
    /// (`crate::retention`); `None` while running or paused.
    pub expires_at: Option<DateTime<Utc>>,
    /// When all its checkpoints but the one it stands at go, if before it expires.
    pub checkpoints_expire_at: Option<DateTime<Utc>>,
    /// Whether its checkpoints are kept apart from the tenant's partition (see
    /// `checkpoints::store::Layout`): every execution started since that layout, unless
    /// it is switched off; false for executions from before.
    pub checkpoints_apart: bool,
    /// Whether each of its checkpoints is one entry in a partition of its own, found by
    /// the checkpoint's id, which names it (`checkpoints::store::Layout::Joined`): every
    /// execution started since, unless it is switched off; false for executions from
    /// before.
    pub checkpoints_joined: bool,
    /// Whether it is kept in one of the tenant's shards of table `executions` (by its
    /// id's last digit) rather than in the tenant's one partition: every execution
    /// started since executions are spread, unless that is switched off; false for
    /// executions from before.
    pub spread: bool,
    /// Whether its checkpoint progress (`current_checkpoint_id`, `checkpoint_count`,
    /// `last_sequence`, `updated_at`) is kept in a small head item of its own once it has
    /// one, which a checkpoint writes alone rather than this item and its three list
    /// index entries (see `store::ExecutionStore::stage_progress`): executions started
    /// since heads, unless they are switched off.
    pub headed: bool,
    /// The version of its head item, once it has one (see `headed`): every write of a
    /// headed execution writes its head too, conditioned on this.
    pub head_version: Option<u64>,
}

/// The checkpoints with `after < sequence <= through`, discarded by a rollback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Discarded {
    /// The rollback's target sequence.
    pub after: u64,
    /// The highest sequence at the time of the rollback.
    pub through: u64,
}

impl Discarded {
    /// Whether the checkpoint with `sequence` is in the range.
    #[must_use]
    pub fn contains(self, sequence: u64) -> bool {
        self.after < sequence && sequence <= self.through
    }
}

impl Execution {
    /// Whether its checkpoint with `sequence` was discarded by a rollback (and is hidden
    /// until its items are deleted).
    #[must_use]
    pub fn is_discarded(&self, sequence: u64) -> bool {
        self.discarded.iter().any(|range| range.contains(sequence))
    }
}

/// What a client asks an execution to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// running -> completed.
    Complete {
        /// The result.
        output: Option<Value>,
    },
    /// running -> failed.
    Fail {
        /// The error.
        error: ExecutionError,
    },
    /// running -> paused.
    Pause,
    /// running or paused -> cancelled.
    Cancel {
        /// Why.
        reason: Option<String>,
    },
    /// failed or paused -> running, from a checkpoint (or the start).
    Replay {
        /// The replay point.
        from: Option<CheckpointId>,
    },
    /// running, paused or failed -> paused, at an earlier checkpoint.
    Rollback {
        /// The target.
        to: CheckpointId,
    },
}

impl Action {
    /// The action's name as in its path.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::Complete { .. } => "complete",
            Self::Fail { .. } => "fail",
            Self::Pause => "pause",
            Self::Cancel { .. } => "cancel",
            Self::Replay { .. } => "replay",
            Self::Rollback { .. } => "rollback",
        }
    }

    /// The statuses the action is allowed from.
    #[must_use]
    pub fn allowed_from(&self) -> &'static [ExecutionStatus] {
        use ExecutionStatus::{Failed, Paused, Running};
        match self {
            Self::Complete { .. } | Self::Fail { .. } | Self::Pause => &[Running],
            Self::Cancel { .. } => &[Running, Paused],
            Self::Replay { .. } => &[Failed, Paused],
            Self::Rollback { .. } => &[Running, Paused, Failed],
        }
    }

    /// The status after the action.
    #[must_use]
    pub fn target(&self) -> ExecutionStatus {
        match self {
            Self::Complete { .. } => ExecutionStatus::Completed,
            Self::Fail { .. } => ExecutionStatus::Failed,
            Self::Pause | Self::Rollback { .. } => ExecutionStatus::Paused,
            Self::Cancel { .. } => ExecutionStatus::Cancelled,
            Self::Replay { .. } => ExecutionStatus::Running,
        }
    }
}

impl Execution {
    /// A new running execution of `workflow_id`.
    #[must_use]
    pub fn start(
        workflow_id: WorkflowId,
        key: Option<String>,
        input: Option<Value>,
        metadata: BTreeMap<String, String>,
        now: DateTime<Utc>,
    ) -> Self {
        Self {
            id: ExecutionId::generate_at(now),
            workflow_id,
            status: ExecutionStatus::Running,
            input,
            output: None,
            error: None,
            cancel_reason: None,
            key,
            metadata,
            tags: BTreeMap::new(),
            attempt: 1,
            current_checkpoint_id: None,
            checkpoint_count: 0,
            last_sequence: 0,
            failure_ids: Vec::new(),
            discarded: Vec::new(),
            version: 1,
            created_at: now,
            updated_at: now,
            ended_at: None,
            expires_at: None,
            checkpoints_expire_at: None,
            checkpoints_apart: true,
            checkpoints_joined: true,
            spread: true,
            headed: true,
            head_version: None,
        }
    }

    /// Refuses `action` unless the current status allows it.
    ///
    /// # Errors
    /// [`Error::InvalidState`] naming the current status.
    pub fn check(&self, action: &Action) -> Result<(), Error> {
        if matches!(action, Action::Replay { .. })
            && self.attempt >= MAX_ATTEMPTS
            && action.allowed_from().contains(&self.status)
        {
            return Err(Error::InvalidState(format!(
                "execution {} has had {} attempts, the most one execution may have; start a new execution",
                self.id, self.attempt
            )));
        }
        if action.allowed_from().contains(&self.status) {
            return Ok(());
        }
        let allowed: Vec<&str> = action.allowed_from().iter().map(|s| s.wire()).collect();
        Err(Error::InvalidState(format!(
            "execution {} is {}; {} is allowed only when it is {}",
            self.id,
            self.status.wire(),
            action.name(),
            allowed.join(" or ")
        )))
    }

    /// The execution after recording checkpoint `sequence` (id `checkpoint`): it is
    /// the last and the current one, counted once more.
    #[must_use]
    pub fn with_checkpoint(&self, checkpoint: &CheckpointId, sequence: u64, now: DateTime<Utc>) -> Self {
        let mut next = self.clone();
        next.last_sequence = sequence;
        next.checkpoint_count += 1;
        next.current_checkpoint_id = Some(checkpoint.clone());
        next.version += 1;
        next.updated_at = now;
        next
    }

    /// The execution after `action` (already checked), for the fields every action
    /// changes: status, version, times, and the action's own fields. Checkpoint fields
    /// of replay and rollback are set by the caller, which knows the checkpoints.
    #[must_use]
    pub fn after(&self, action: &Action, now: DateTime<Utc>) -> Self {
        let mut next = self.clone();
        next.status = action.target();
        next.version = self.version + 1;
        next.updated_at = now;
        next.ended_at = next.status.is_ended().then_some(now);
        if !next.status.is_ended() {
            // Its lifetimes are the retention's when it ends again.
            next.expires_at = None;
            next.checkpoints_expire_at = None;
        }
        match action {
            Action::Complete { output } => next.output.clone_from(output),
            Action::Fail { error } => next.error = Some(error.clone()),
            Action::Cancel { reason } => next.cancel_reason.clone_from(reason),
            Action::Replay { from } => {
                next.attempt = self.attempt + 1;
                next.error = None;
                next.current_checkpoint_id.clone_from(from);
            }
            Action::Rollback { to } => {
                next.error = None;
                next.current_checkpoint_id = Some(to.clone());
            }
            Action::Pause => {}
        }
        next
    }

    /// The counters this execution is counted under.
    #[must_use]
    pub fn counters(&self) -> Vec<String> {
        let s = Some(self.status);
        let w = Some(&self.workflow_id);
        let mut names =
            vec![counter_name(None, None), counter_name(s, None), counter_name(None, w), counter_name(s, w)];
        let ms = shared::ids::millis_of(self.id.as_str());
        for family in [span_family(None), span_family(w)] {
            names.extend(shared::spans::names(&family, ms, &[shared::spans::ALL, self.status.wire()]));
        }
        for (key, value) in &self.tags {
            names.extend([tag_counter_name(key, value, None), tag_counter_name(key, value, s)]);
        }
        names
    }
}

/// The family of time-span counters behind the time-filtered `total` of an execution
/// list, with or without a workflow filter (the status is the attribute).
#[must_use]
pub fn span_family(workflow: Option<&WorkflowId>) -> String {
    let family = shared::spans::EXECUTION_SPANS;
    workflow.map_or_else(|| family.to_owned(), |w| format!("{family}|workflow={w}"))
}

/// The counter behind the `total` of a list of the executions tagged `key:value`
/// (and in `status`): one item per tag, the count by status in its attributes, so that a
/// change of status moves one item per tag. `%` and `@` in the value are escaped (an `@`
/// names the attribute).
#[must_use]
pub fn tag_counter_name(key: &str, value: &str, status: Option<ExecutionStatus>) -> String {
    let value = value.replace('%', "%25").replace('@', "%40");
    match status {
        None => format!("executions|tag={key}={value}"),
        Some(s) => format!("executions|tag={key}={value}@{}", s.wire()),
    }
}

/// The counter behind the `total` of an execution list with these filters: one item per
/// workflow filter (`executions`, `executions|workflow=wf_…`), the count in a status in
/// its attribute of that status, so that a change of status moves one item.
#[must_use]
pub fn counter_name(status: Option<ExecutionStatus>, workflow: Option<&WorkflowId>) -> String {
    match (status, workflow) {
        (None, None) => "executions".to_owned(),
        (Some(s), None) => format!("executions@{}", s.wire()),
        (None, Some(w)) => format!("executions|workflow={w}"),
        (Some(s), Some(w)) => shared::counters::executions_of_workflow(w.as_str(), s.wire()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ExecutionStatus::{Cancelled, Completed, Failed, Paused, Running};

    fn execution(status: ExecutionStatus) -> Execution {
        let mut e = Execution::start(WorkflowId::generate(), None, None, BTreeMap::new(), Utc::now());
        e.status = status;
        e
    }

    #[test]
    fn the_transition_table_of_the_contract() {
        let to = CheckpointId::generate();
        let error = ExecutionError { error_type: "AGENT_ERROR".to_owned(), message: "x".to_owned() };
        let table: Vec<(Action, &[ExecutionStatus], ExecutionStatus)> = vec![
            (Action::Complete { output: None }, &[Running], Completed),
            (Action::Fail { error }, &[Running], Failed),
            (Action::Pause, &[Running], Paused),
            (Action::Cancel { reason: None }, &[Running, Paused], Cancelled),
            (Action::Replay { from: None }, &[Failed, Paused], Running),
            (Action::Rollback { to }, &[Running, Paused, Failed], Paused),
        ];
        for (action, allowed, target) in table {
            for status in ExecutionStatus::ALL {
                let result = execution(*status).check(&action);
                assert_eq!(result.is_ok(), allowed.contains(status), "{} from {status:?}", action.name());
            }
            assert_eq!(action.target(), target);
        }
    }

    #[test]
    fn refusal_names_the_current_status() {
        let Err(Error::InvalidState(detail)) = execution(Completed).check(&Action::Pause) else { panic!("refused") };
        assert!(detail.contains("is completed"), "{detail}");
    }

    #[test]
    fn replay_increments_attempt_and_clears_error_and_end() {
        let mut failed = execution(Failed);
        failed.error = Some(ExecutionError { error_type: "TIMEOUT".to_owned(), message: "slow".to_owned() });
        failed.ended_at = Some(Utc::now());
        let cp = CheckpointId::generate();
        let replayed = failed.after(&Action::Replay { from: Some(cp.clone()) }, Utc::now());
        assert_eq!(replayed.status, Running);
        assert_eq!(replayed.attempt, 2);
        assert_eq!(replayed.error, None);
        assert_eq!(replayed.ended_at, None);
        assert_eq!(replayed.current_checkpoint_id, Some(cp));
        assert_eq!(replayed.version, failed.version + 1);
    }

    #[test]
    fn ending_actions_set_ended_at() {
        let running = execution(Running);
        let now = Utc::now();
        assert_eq!(running.after(&Action::Complete { output: None }, now).ended_at, Some(now));
        assert_eq!(running.after(&Action::Pause, now).ended_at, None);
        assert_eq!(running.after(&Action::Cancel { reason: Some("r".to_owned()) }, now).ended_at, Some(now));
    }
}
