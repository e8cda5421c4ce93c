//! Bulk jobs: the rules, free of storage. A job applies one action (replay or cancel)
//! to every execution a filter matched when it started, in rounds; each execution it
//! reaches ends in one outcome (done, skipped or failed, with why), recorded with the
//! action itself so that nothing is done twice.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::body::WireEnum;
use shared::ids::{BulkJobId, FailureGroupId, WorkflowId};

use crate::runs::executions::model::{Execution, ExecutionStatus};

/// The most executions a job acts on (and a dry run counts): a filter that matches more
/// is refused, to be narrowed (by time window, say).
pub const MAX_MATCHED: u64 = 10_000;

/// Executions one round acts on: a round stays within a few seconds.
pub const ROUND_SIZE: usize = 25;

/// Why an execution a job reached was skipped: it no longer allows the action.
pub const NOT_ALLOWED: &str = "not_allowed";
/// Why: it was deleted before the job reached it.
pub const DELETED: &str = "deleted";
/// Why an action failed: the balance could not pay for it.
pub const INSUFFICIENT_CREDITS: &str = "insufficient_credits";
/// Why an action failed: the action could not be stored (too large, say).
pub const NOT_STORED: &str = "not_stored";

/// Minutes after which a running job that no round has moved (its rounds failed past
/// every retry, into the dead-letter queue) is shown failed.
pub const STALLED_MINUTES: i64 = 60;

/// What a job does to each execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BulkAction {
    /// `POST /executions/{id}/replay` with no body: from its current checkpoint.
    Replay,
    /// `POST /executions/{id}/cancel` with no body.
    Cancel,
}

impl WireEnum for BulkAction {
    const ALL: &'static [Self] = &[Self::Replay, Self::Cancel];

    fn wire(self) -> &'static str {
        match self {
            Self::Replay => "replay",
            Self::Cancel => "cancel",
        }
    }
}

/// Where a job is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Rounds are running.
    Running,
    /// Every matched execution was reached.
    Completed,
    /// It stopped on an error it cannot get past (said in `error`).
    Failed,
    /// Cancelled by a client: no round starts after.
    Cancelled,
}

impl WireEnum for JobStatus {
    const ALL: &'static [Self] = &[Self::Running, Self::Completed, Self::Failed, Self::Cancelled];

    fn wire(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }
}

/// Which executions a job acts on: all of what is given must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BulkFilter {
    /// Only this status.
    pub status: Option<ExecutionStatus>,
    /// Only this workflow's.
    pub workflow_id: Option<WorkflowId>,
    /// Only those with every one of these tags (keys distinct).
    pub tags: Vec<(String, String)>,
    /// Only those with an open failure in this group.
    pub failure_group: Option<FailureGroupId>,
    /// Only those whose error (the last failure's) has this type.
    pub error_type: Option<String>,
    /// Only those created after this instant.
    pub created_after: Option<DateTime<Utc>>,
    /// Only those created before this instant.
    pub created_before: Option<DateTime<Utc>>,
}

impl BulkFilter {
    /// Whether `e` matches everything but the failure group (which its failures say).
    #[must_use]
    pub fn admits(&self, e: &Execution) -> bool {
        self.status.is_none_or(|s| e.status == s)
            && self.workflow_id.as_ref().is_none_or(|w| e.workflow_id == *w)
            && self.tags.iter().all(|(k, v)| e.tags.get(k) == Some(v))
            && self.error_type.as_ref().is_none_or(|t| e.error.as_ref().is_some_and(|err| err.error_type == *t))
            && self.created_after.is_none_or(|t| e.created_at > t)
            && self.created_before.is_none_or(|t| e.created_at < t)
    }

    /// The filter as a job started at `at` applies it: only executions (or failures)
    /// made before the job.
    #[must_use]
    pub fn before(&self, at: DateTime<Utc>) -> Self {
        let created_before = Some(self.created_before.map_or(at, |t| t.min(at)));
        Self { created_before, ..self.clone() }
    }
}

/// How one execution a job reached ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The action was applied.
    Done,
    /// Not applied, for this reason (one of the constants above).
    Skipped(String),
    /// The action was refused, for this reason.
    Failed(String),
}

/// What a job has done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Executions the action was applied to.
    pub done: u64,
    /// Executions skipped, by reason.
    pub skipped: BTreeMap<String, u64>,
    /// Executions whose action failed, by reason.
    pub failed: BTreeMap<String, u64>,
}

impl Tally {
    /// Counts one outcome.
    pub fn add(&mut self, outcome: &Outcome) {
        match outcome {
            Outcome::Done => self.done += 1,
            Outcome::Skipped(why) => *self.skipped.entry(why.clone()).or_default() += 1,
            Outcome::Failed(why) => *self.failed.entry(why.clone()).or_default() += 1,
        }
    }

    /// Adds `other`.
    pub fn merge(&mut self, other: &Self) {
        self.done += other.done;
        for (why, n) in &other.skipped {
            *self.skipped.entry(why.clone()).or_default() += n;
        }
        for (why, n) in &other.failed {
            *self.failed.entry(why.clone()).or_default() += n;
        }
    }

    /// Executions reached.
    #[must_use]
    pub fn reached(&self) -> u64 {
        self.done + self.skipped.values().sum::<u64>() + self.failed.values().sum::<u64>()
    }
}

/// A bulk job.
#[derive(Debug, Clone, PartialEq)]
pub struct BulkJob {
    /// `bulk_…`.
    pub id: BulkJobId,
    /// What it does to each execution.
    pub action: BulkAction,
    /// Which executions, as the client gave it.
    pub filter: BulkFilter,
    /// Where it is.
    pub status: JobStatus,
    /// Executions the filter matched when it started.
    pub matched: u64,
    /// What it has done.
    pub tally: Tally,
    /// Credits the balance had to hold for it to start (a replay's price times
    /// `matched`; 0 for cancel): what it charges at most.
    pub credits_needed: i64,
    /// Why it failed, for a failed job.
    pub error: Option<String>,
    /// Rounds committed (each round's record names the round it follows).
    pub round: u64,
    /// Where the next round starts: the last execution or failure reached.
    pub cursor: Option<String>,
    /// When it started.
    pub created_at: DateTime<Utc>,
    /// When it last moved.
    pub updated_at: DateTime<Utc>,
    /// When it ended.
    pub ended_at: Option<DateTime<Utc>>,
}

impl BulkJob {
    /// A job of `action` on what `filter` matched (`matched` of them), started `now`.
    #[must_use]
    pub fn start(action: BulkAction, filter: BulkFilter, matched: u64, cost: i64, now: DateTime<Utc>) -> Self {
        Self {
            id: BulkJobId::generate_at(now),
            action,
            filter,
            status: JobStatus::Running,
            matched,
            tally: Tally::default(),
            credits_needed: match action {
                BulkAction::Replay => cost.saturating_mul(i64::try_from(matched).unwrap_or(i64::MAX)),
                BulkAction::Cancel => 0,
            },
            error: None,
            round: 0,
            cursor: None,
            created_at: now,
            updated_at: now,
            ended_at: None,
        }
    }

    /// The job after a round that reached `tally` and stopped at `cursor` (`None`: the
    /// end of what it matched).
    #[must_use]
    pub fn after_round(&self, tally: &Tally, cursor: Option<String>, now: DateTime<Utc>) -> Self {
        let mut next = self.clone();
        next.tally.merge(tally);
        next.round += 1;
        next.updated_at = now;
        match cursor {
            Some(cursor) => next.cursor = Some(cursor),
            // A job cancelled meanwhile stays cancelled.
            None if next.status != JobStatus::Running => {}
            None => {
                next.status = JobStatus::Completed;
                next.ended_at = Some(now);
            }
        }
        next
    }

    /// The job cancelled `now` (a job that has ended stays as it is).
    #[must_use]
    pub fn cancelled(&self, now: DateTime<Utc>) -> Self {
        let mut next = self.clone();
        if next.status == JobStatus::Running {
            next.status = JobStatus::Cancelled;
            next.updated_at = now;
            next.ended_at = Some(now);
        }
        next
    }

    /// The job as a client sees it at `now`: one still running that no round has moved
    /// for [`STALLED_MINUTES`] is failed, since its last round (cancelling it ends it for
    /// good).
    #[must_use]
    pub fn as_seen(mut self, now: DateTime<Utc>) -> Self {
        if self.status == JobStatus::Running && self.updated_at + chrono::Duration::minutes(STALLED_MINUTES) < now {
            self.status = JobStatus::Failed;
            self.error = Some(format!(
                "no round moved the job for {STALLED_MINUTES} minutes, so it stopped; its tally is what it reached"
            ));
            self.ended_at = Some(self.updated_at);
        }
        self
    }

    /// The job failed `now` for `why`.
    #[must_use]
    pub fn failed(&self, why: String, now: DateTime<Utc>) -> Self {
        let mut next = self.clone();
        next.status = JobStatus::Failed;
        next.error = Some(why);
        next.round += 1;
        next.updated_at = now;
        next.ended_at = Some(now);
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_no_round_moved_for_an_hour_is_seen_failed_and_an_ended_one_as_it_ended() {
        let now = Utc::now();
        let job = BulkJob::start(BulkAction::Cancel, BulkFilter::default(), 3, 1, now);
        assert_eq!(job.clone().as_seen(now + chrono::Duration::minutes(STALLED_MINUTES)), job, "not yet");
        let seen = job.clone().as_seen(now + chrono::Duration::minutes(STALLED_MINUTES + 1));
        assert_eq!((seen.status, seen.ended_at), (JobStatus::Failed, Some(now)));
        assert!(seen.error.as_deref().is_some_and(|e| e.contains("no round moved the job")));
        let cancelled = job.cancelled(now);
        assert_eq!(cancelled.clone().as_seen(now + chrono::Duration::days(1)), cancelled);
    }

    #[test]
    fn a_tally_counts_each_outcome_under_its_reason() {
        let mut tally = Tally::default();
        tally.add(&Outcome::Done);
        tally.add(&Outcome::Skipped(NOT_ALLOWED.into()));
        tally.add(&Outcome::Skipped(NOT_ALLOWED.into()));
        tally.add(&Outcome::Failed(INSUFFICIENT_CREDITS.into()));
        let mut all = Tally::default();
        all.merge(&tally);
        all.merge(&tally);
        assert_eq!(all.done, 2);
        assert_eq!(all.skipped[NOT_ALLOWED], 4);
        assert_eq!(all.failed[INSUFFICIENT_CREDITS], 2);
        assert_eq!(all.reached(), 8);
    }

    #[test]
    fn a_job_ends_when_a_round_reaches_the_end_and_a_cancel_does_not_reopen_it() {
        let now = Utc::now();
        let job = BulkJob::start(BulkAction::Replay, BulkFilter::default(), 3, 2, now);
        assert_eq!(job.credits_needed, 6);
        let moved = job.after_round(&Tally { done: 2, ..Tally::default() }, Some("exec_x".into()), now);
        assert_eq!((moved.status, moved.round, moved.tally.done), (JobStatus::Running, 1, 2));
        let ended = moved.after_round(&Tally { done: 1, ..Tally::default() }, None, now);
        assert_eq!((ended.status, ended.tally.done, ended.ended_at.is_some()), (JobStatus::Completed, 3, true));
        assert_eq!(ended.cancelled(now).status, JobStatus::Completed);
        assert_eq!(moved.cancelled(now).status, JobStatus::Cancelled);
        assert_eq!(BulkJob::start(BulkAction::Cancel, BulkFilter::default(), 3, 2, now).credits_needed, 0);
    }

    #[test]
    fn a_job_takes_only_what_was_made_before_it() {
        let now = Utc::now();
        let earlier = now - chrono::Duration::hours(1);
        assert_eq!(BulkFilter::default().before(now).created_before, Some(now));
        let bounded = BulkFilter { created_before: Some(earlier), ..BulkFilter::default() };
        assert_eq!(bounded.before(now).created_before, Some(earlier));
    }
}
