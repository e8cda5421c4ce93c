//! Failures, free of storage: a failure of an execution, its recovery commands, how a
//! person settles it, and the counters it is counted under.

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use shared::body::WireEnum;
use shared::ids::{CommandId, ExecutionId, FailureGroupId, FailureId, WorkflowId};

use crate::Error;

/// What resolved a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResolvedBy {
    /// Its execution completed (after a replay: a failed execution runs again only so).
    Replay,
    /// A request: `POST /failures/{id}/resolve`, or its group's.
    Request,
}

impl WireEnum for ResolvedBy {
    const ALL: &'static [Self] = &[Self::Replay, Self::Request];

    fn wire(self) -> &'static str {
        match self {
            Self::Replay => "replay",
            Self::Request => "request",
        }
    }
}

/// A failure's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureStatus {
    /// Needs attention.
    Open,
    /// Settled.
    Resolved,
    /// Deliberately left alone.
    Ignored,
}

impl WireEnum for FailureStatus {
    const ALL: &'static [Self] = &[Self::Open, Self::Resolved, Self::Ignored];

    fn wire(self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Resolved => "resolved",
            Self::Ignored => "ignored",
        }
    }
}

/// A recovery command's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandStatus {
    /// Not done yet.
    Pending,
    /// Done (a replay ran).
    Completed,
    /// No longer needed (the failure was resolved).
    Cancelled,
}

impl WireEnum for CommandStatus {
    const ALL: &'static [Self] = &[Self::Pending, Self::Completed, Self::Cancelled];

    fn wire(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Completed => "completed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// A suggested way to recover; `retry` is the one type so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecoveryCommand {
    /// Its id.
    pub id: CommandId,
    /// `retry`.
    pub kind: String,
    /// Its status.
    pub status: CommandStatus,
}

/// A failure of an execution.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// Its id.
    pub id: FailureId,
    /// The execution that failed.
    pub execution_id: ExecutionId,
    /// Its workflow.
    pub workflow_id: WorkflowId,
    /// `AGENT_ERROR`, `TOOL_ERROR`, …
    pub error_type: String,
    /// What happened.
    pub message: String,
    /// `agent_name`, `task_id`, `traceback` and any other keys.
    pub details: Map<String, Value>,
    /// The message normalised ([`super::fingerprint::normalize`]).
    pub fingerprint: String,
    /// Its group: failures of the workflow with this error type, agent and fingerprint.
    pub group_id: FailureGroupId,
    /// Its status.
    pub status: FailureStatus,
    /// Recovery commands.
    pub recovery_commands: Vec<RecoveryCommand>,
    /// Internal optimistic-concurrency version.
    pub version: u64,
    /// When it was recorded.
    pub created_at: DateTime<Utc>,
    /// When it was resolved.
    pub resolved_at: Option<DateTime<Utc>>,
    /// What resolved it (`None` while not resolved, and for a failure resolved before
    /// this was recorded).
    pub resolved_by: Option<ResolvedBy>,
    /// Whether the failure is counted in its group's counters ([`group_counter`]): every
    /// failure written by this version is; one recorded before them is from its next
    /// change, or `cairn-admin migrate failure-groups`.
    pub group_counted: bool,
}

impl Failure {
    /// A new open failure with one pending retry command.
    #[must_use]
    pub fn record(
        execution_id: ExecutionId,
        workflow_id: WorkflowId,
        error_type: String,
        message: String,
        details: Map<String, Value>,
        now: DateTime<Utc>,
    ) -> Self {
        let (fingerprint, group_id) = grouped(&workflow_id, &error_type, &message, &details);
        Self {
            id: FailureId::generate_at(now),
            execution_id,
            workflow_id,
            error_type,
            message,
            details,
            fingerprint,
            group_id,
            status: FailureStatus::Open,
            recovery_commands: vec![RecoveryCommand {
                id: CommandId::generate_at(now),
                kind: "retry".to_owned(),
                status: CommandStatus::Pending,
            }],
            version: 1,
            created_at: now,
            resolved_at: None,
            resolved_by: None,
            group_counted: true,
        }
    }

    /// The failure with its pending commands moved to `status`.
    #[must_use]
    pub fn with_pending_commands(&self, status: CommandStatus) -> Self {
        let mut next = self.clone();
        for command in &mut next.recovery_commands {
            if command.status == CommandStatus::Pending {
                command.status = status;
            }
        }
        next.version += 1;
        next
    }

    /// The failure resolved at `now` by `by`, its pending commands cancelled.
    #[must_use]
    pub fn resolved(&self, now: DateTime<Utc>, by: ResolvedBy) -> Self {
        let mut next = self.with_pending_commands(CommandStatus::Cancelled);
        next.status = FailureStatus::Resolved;
        next.resolved_at = Some(now);
        next.resolved_by = Some(by);
        next
    }

    /// The failure after `settlement` at `now`, or `None` when it is settled so already
    /// (resolving a resolved failure keeps its original `resolved_at`).
    ///
    /// # Errors
    /// [`Error::InvalidState`] for ignoring a failure that is not open.
    pub fn settle(&self, settlement: Settlement, now: DateTime<Utc>) -> Result<Option<Self>, Error> {
        match (settlement, self.status) {
            (Settlement::Resolve, FailureStatus::Resolved) => Ok(None),
            (Settlement::Resolve, FailureStatus::Open | FailureStatus::Ignored) => {
                Ok(Some(self.resolved(now, ResolvedBy::Request)))
            }
            (Settlement::Ignore, FailureStatus::Open) => {
                let mut next = self.clone();
                next.status = FailureStatus::Ignored;
                next.version += 1;
                Ok(Some(next))
            }
            (Settlement::Ignore, other) => Err(Error::InvalidState(format!(
                "failure {} is {}; only an open failure can be ignored",
                self.id,
                other.wire()
            ))),
        }
    }

    /// The counters this failure is counted under.
    #[must_use]
    pub fn counters(&self) -> Vec<String> {
        let mut names = vec![counter_name(None), counter_name(Some(self.status))];
        let ms = shared::ids::millis_of(self.id.as_str());
        names.extend(shared::spans::names(SPAN_FAMILY, ms, &[shared::spans::ALL]));
        if self.group_counted {
            let group = group_counter(&self.group_id);
            names.push(format!("{group}@{}", self.status.wire()));
            if self.status == FailureStatus::Resolved && self.resolved_by == Some(ResolvedBy::Replay) {
                names.push(format!("{group}@{GROUP_REPLAYED}"));
            }
        }
        names
    }
}

/// The fingerprint and group of a failure of `workflow` with this error, message and
/// details (`agent_name`, when a string, names its agent: [`super::fingerprint::agent_of`]).
#[must_use]
pub fn grouped(
    workflow: &WorkflowId,
    error_type: &str,
    message: &str,
    details: &Map<String, Value>,
) -> (String, FailureGroupId) {
    let fingerprint = super::fingerprint::normalize(message);
    let agent = super::fingerprint::agent_of(details);
    let group = super::fingerprint::group_of(workflow, error_type, agent.as_deref(), &fingerprint);
    (fingerprint, group)
}

/// A group of failures of one cause: the failures of one workflow with the same error
/// type, agent and fingerprint, with what it counts now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailureGroup {
    /// `fgrp_…`.
    pub id: FailureGroupId,
    /// The workflow its failures are of.
    pub workflow_id: WorkflowId,
    /// Their error type.
    pub error_type: String,
    /// Their agent, when the failures name one.
    pub agent_name: Option<String>,
    /// Their normalised message.
    pub fingerprint: String,
    /// The message of its first failure.
    pub sample_message: String,
    /// When its first failure was recorded.
    pub first_seen: DateTime<Utc>,
    /// When its last failure was recorded.
    pub last_seen: DateTime<Utc>,
    /// Its failures by status: open, resolved, ignored.
    pub counts: [u64; 3],
    /// Of the resolved, those resolved by their execution's completion after a replay.
    pub resolved_by_replay: u64,
    /// Its failures made in each of the last [`GROUP_HOURS`] clock hours (UTC), oldest
    /// first: the last is the current hour so far.
    pub per_hour: [u64; GROUP_HOURS],
}

/// The hours [`FailureGroup::per_hour`] covers.
pub const GROUP_HOURS: usize = 24;

/// An hour, in milliseconds.
const HOUR_MS: i64 = 3_600_000;

/// The first millisecond of the oldest of the [`GROUP_HOURS`] clock hours up to the one
/// of `now`: the failures made since are those [`per_hour`] counts.
#[must_use]
pub fn hours_since(now: DateTime<Utc>) -> u64 {
    let first = (now.timestamp_millis().div_euclid(HOUR_MS) - (GROUP_HOURS as i64 - 1)) * HOUR_MS;
    u64::try_from(first).unwrap_or(0)
}

/// How many of the failures made at `millis` (each a failure's id's millisecond) fall in
/// each of the [`GROUP_HOURS`] clock hours up to the one of `now`, oldest first.
#[must_use]
pub fn per_hour(millis: impl IntoIterator<Item = u64>, now: DateTime<Utc>) -> [u64; GROUP_HOURS] {
    let current = now.timestamp_millis().div_euclid(HOUR_MS);
    let mut hours = [0; GROUP_HOURS];
    for at in millis {
        let back = current - i64::try_from(at).unwrap_or(i64::MAX).div_euclid(HOUR_MS);
        if let Ok(back) = usize::try_from(back)
            && back < GROUP_HOURS
        {
            hours[GROUP_HOURS - 1 - back] += 1;
        }
    }
    hours
}

impl FailureGroup {
    /// Open while any failure of it is open; else resolved while any is resolved; else
    /// ignored.
    #[must_use]
    pub fn status(&self) -> FailureStatus {
        match self.counts {
            [open, ..] if open > 0 => FailureStatus::Open,
            [_, resolved, _] if resolved > 0 => FailureStatus::Resolved,
            _ => FailureStatus::Ignored,
        }
    }

    /// For a resolved group: `Replay` when every failure of it that was resolved was
    /// resolved by its execution's completion after a replay (it resolved by itself),
    /// else `Request`.
    #[must_use]
    pub fn resolved_by(&self) -> Option<ResolvedBy> {
        match self.status() {
            FailureStatus::Resolved if self.resolved_by_replay >= self.counts[1] => Some(ResolvedBy::Replay),
            FailureStatus::Resolved => Some(ResolvedBy::Request),
            _ => None,
        }
    }
}

/// How a person settles a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settlement {
    /// Open or ignored -> resolved (its pending recovery commands cancelled).
    Resolve,
    /// Open -> ignored.
    Ignore,
}

/// The family of time-span counters behind the time-filtered `total` of the failure
/// list. It counts failures whatever their status: completing an execution resolves up
/// to 49 failures in one transaction, and their span counters would not fit it, so a
/// time-filtered list with a status filter counts its items (up to
/// [`crate::runs::MAX_COUNTED`]).
pub const SPAN_FAMILY: &str = "failures";

/// The counter item of failure group `group` (`groups|fg_…`, in the tenant's run of group
/// counters, [`shared::counters::run_of`]): its failures in each status (`open`,
/// `resolved`, `ignored`), those a replay resolved ([`GROUP_REPLAYED`]), and when its
/// latest failure was made ([`GROUP_LAST_SEEN`], a stamp in milliseconds).
#[must_use]
pub fn group_counter(group: &FailureGroupId) -> String {
    format!("{}{group}", shared::counters::GROUPS_PREFIX)
}

/// The attribute of a group's counter item that counts its failures resolved by a replay.
pub const GROUP_REPLAYED: &str = "replay";

/// The attribute of a group's counter item stamped with its latest failure's creation.
pub const GROUP_LAST_SEEN: &str = "last_seen";

/// The counter of failures in a status (all when `None`): one item, `failures`, each
/// status in an attribute.
#[must_use]
pub fn counter_name(status: Option<FailureStatus>) -> String {
    match status {
        None => "failures".to_owned(),
        Some(s) => format!("failures@{}", s.wire()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolving_cancels_pending_commands_and_sets_resolved_at() {
        let now = Utc::now();
        let f = Failure::record(
            ExecutionId::generate(),
            WorkflowId::generate(),
            "AGENT_ERROR".into(),
            "m".into(),
            Map::new(),
            now,
        );
        assert_eq!(f.recovery_commands.len(), 1);
        assert_eq!(f.recovery_commands[0].status, CommandStatus::Pending);
        let r = f.resolved(now, ResolvedBy::Request);
        assert_eq!((r.status, r.resolved_at), (FailureStatus::Resolved, Some(now)));
        assert_eq!(r.recovery_commands[0].status, CommandStatus::Cancelled);
        let replayed = f.with_pending_commands(CommandStatus::Completed);
        assert_eq!(replayed.recovery_commands[0].status, CommandStatus::Completed);
        assert_eq!(replayed.status, FailureStatus::Open);
    }

    #[test]
    fn failures_fall_in_the_clock_hour_they_were_made_in() {
        let now = DateTime::parse_from_rfc3339("2026-12-05T12:30:00Z").expect("time").with_timezone(&Utc);
        let at = |t: &str| {
            let t = DateTime::parse_from_rfc3339(t).expect("time").timestamp_millis();
            u64::try_from(t).expect("after 1970")
        };
        let hours = per_hour(
            [
                at("2026-12-05T12:00:00Z"), // this hour, from its first millisecond
                at("2026-12-05T12:29:59Z"),
                at("2026-12-05T11:59:59.999Z"), // the hour before
                at("2026-12-04T13:00:00Z"),     // the oldest hour counted
                at("2026-12-04T12:59:59.999Z"), // before it: not counted
                at("2026-12-05T13:00:00Z"),     // later than now (a clock ahead): not counted
            ],
            now,
        );
        let mut expected = [0; GROUP_HOURS];
        (expected[23], expected[22], expected[0]) = (2, 1, 1);
        assert_eq!(hours, expected);
        assert_eq!(hours_since(now), at("2026-12-04T13:00:00Z"), "the oldest hour's first millisecond");
    }
}
