//! Bulk jobs: one action (replay, cancel) on every execution a filter matches, by
//! `POST /executions/bulk`, in rounds run by the jobs function.
//!
//! A job counts what its filter matches when it starts (at most
//! [`model::MAX_MATCHED`]) and, for a replay, refuses to start unless the balance holds
//! a replay's price for each. Each round reads the next [`model::ROUND_SIZE`] executions
//! (or open failures of its group) after its cursor, made before the job, and applies
//! the action to each through [`Runs::transition`], exactly as the single action's
//! request would (its charge, its webhooks), with the job's marker for the execution
//! added to the action's own transaction ([`shared::dynamo::Marker`]): a round run twice
//! (its Lambda killed, its record handed over again) finds the marker and does nothing
//! twice. The round then moves the job's cursor and tally in one conditional write of
//! the job's item, whose stream record starts the next round; the last one completes
//! the job and reports `bulk.completed` in the same transaction.

pub mod model;
pub mod store;

use std::collections::HashSet;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use futures_util::{StreamExt, TryStreamExt, stream};

use shared::TenantId;
use shared::dynamo::{Marker, Refusal, StoreError, Transaction, TransactionError, retry_races};
use shared::ids::{BulkJobId, ExecutionId};
use shared::time::Clock;

use self::model::{
    BulkAction, BulkFilter, BulkJob, DELETED, INSUFFICIENT_CREDITS, JobStatus, MAX_MATCHED, NOT_ALLOWED, NOT_STORED,
    Outcome, ROUND_SIZE, Tally,
};
use super::executions::model::{Action, Execution};
use super::failures::model::FailureStatus;
use super::{BeforeCommit, Change, ListExecutions, ListFailures, ReplayFrom, Runs};
use crate::Error;
use crate::webhooks::Event;

/// One execution's action, as a round runs several at once.
type Act<'a> = std::pin::Pin<Box<dyn Future<Output = Result<(), Error>> + Send + 'a>>;

/// Candidates read at once while counting.
const COUNT_PAGE: usize = 1000;
/// Executions acted on at once within a round.
const AT_ONCE: usize = 4;

/// What a filter matches now: how many, and the first of them.
#[derive(Debug)]
pub struct Matched {
    /// How many executions it matches (at most [`MAX_MATCHED`]).
    pub count: u64,
    /// The first `take` of them, newest first (newest failure first for a group).
    pub first: Vec<Execution>,
}

/// One candidate a page reads: the execution's id, and the execution when it exists and
/// matches.
type Candidate = (ExecutionId, Option<Execution>);

impl Runs {
    /// What `filter` matches now, and its first `take` executions (a dry run).
    ///
    /// # Errors
    /// [`Error::NotFound`] for a workflow or group the tenant does not have,
    /// [`Error::Invalid`] when it matches more than [`MAX_MATCHED`], storage errors.
    pub async fn bulk_matched(&self, tenant: &TenantId, filter: &BulkFilter, take: usize) -> Result<Matched, Error> {
        if let Some(group) = &filter.failure_group
            && !self.failures.group_exists(tenant, group).await?
        {
            return Err(Error::not_found("failure group", group.as_str()));
        }
        // The list checks the workflow; without an error type or group, its total (exact,
        // from counters) is the count.
        let (items, total) = self.list_executions(tenant, &executions_list(filter, None, take)).await?;
        if filter.failure_group.is_none() && filter.error_type.is_none() {
            return within_limit(Matched { count: total, first: items });
        }
        let mut seen = HashSet::new();
        let mut first = Vec::new();
        let mut cursor = None;
        loop {
            let (page, next) = self.candidates(tenant, filter, cursor.as_deref(), COUNT_PAGE).await?;
            for (id, execution) in page {
                if let Some(execution) = execution
                    && seen.insert(id)
                    && first.len() < take
                {
                    first.push(execution);
                }
            }
            if seen.len() as u64 > MAX_MATCHED {
                break;
            }
            match next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        within_limit(Matched { count: seen.len() as u64, first })
    }

    /// Starts a job of `action` on what `filter` matches now: counted, and for a replay
    /// checked against the balance (a replay's price each).
    ///
    /// # Errors
    /// As [`Runs::bulk_matched`]; [`Error::InsufficientCredits`] saying how many credits
    /// it needs; storage errors.
    pub async fn bulk_start(
        &self,
        tenant: &TenantId,
        action: BulkAction,
        filter: &BulkFilter,
        clock: &dyn Clock,
        before_commit: BeforeCommit<'_, BulkJob>,
    ) -> Result<BulkJob, Error> {
        let matched = self.bulk_matched(tenant, filter, 0).await?;
        let job = BulkJob::start(action, filter.clone(), matched.count, self.execution_cost, clock.now());
        if job.credits_needed > 0 {
            let balance = self.ledger.balance(tenant).await?;
            if balance < job.credits_needed {
                return Err(Error::InsufficientCredits(format!(
                    "this job needs {} credits ({} replays at {} each); the balance is {balance}",
                    job.credits_needed, matched.count, self.execution_cost
                )));
            }
        }
        let mut tx = Transaction::new();
        self.jobs.stage_put(&mut tx, tenant, None, &job)?;
        before_commit(&job);
        tx.commit(self.client()).await?;
        Ok(job)
    }

    /// The tenant's job `id`, as a client sees it at `now` (one that stalled, failed:
    /// [`BulkJob::as_seen`]).
    ///
    /// # Errors
    /// [`Error::NotFound`], storage errors.
    pub async fn bulk_job(&self, tenant: &TenantId, id: &BulkJobId, now: DateTime<Utc>) -> Result<BulkJob, Error> {
        Ok(self.stored_job(tenant, id).await?.as_seen(now))
    }

    /// The tenant's job `id` as stored.
    async fn stored_job(&self, tenant: &TenantId, id: &BulkJobId) -> Result<BulkJob, Error> {
        self.jobs.get(tenant, id).await?.ok_or_else(|| Error::not_found("bulk job", id.as_str()))
    }

    /// A window (`skip`, `take`) of the tenant's jobs, newest first (after job `after`:
    /// 404 unless the tenant has it), as a client sees them at `now`, and how many it has.
    ///
    /// # Errors
    /// [`Error::NotFound`] for the cursor, storage errors.
    pub async fn bulk_jobs(
        &self,
        tenant: &TenantId,
        after: Option<&BulkJobId>,
        (skip, take): (usize, usize),
        now: DateTime<Utc>,
    ) -> Result<(Vec<BulkJob>, u64), Error> {
        if let Some(id) = after {
            self.stored_job(tenant, id).await?;
        }
        let (jobs, total) = Box::pin(self.jobs.list(tenant, after, skip, take)).await?;
        Ok((jobs.into_iter().map(|job| job.as_seen(now)).collect(), total))
    }

    /// Cancels job `id`: no round starts after (one running finishes what it reached).
    /// A job that has ended is answered as it is.
    ///
    /// # Errors
    /// [`Error::NotFound`], storage errors.
    pub async fn bulk_cancel(
        &self,
        tenant: &TenantId,
        id: &BulkJobId,
        clock: &dyn Clock,
        before_commit: BeforeCommit<'_, BulkJob>,
    ) -> Result<BulkJob, Error> {
        retry_races(|| async move {
            let job = self.stored_job(tenant, id).await?;
            let next = job.cancelled(clock.now());
            if next == job {
                before_commit(&job);
                return Ok(shared::dynamo::Attempt::Done(job));
            }
            let mut tx = Transaction::new();
            self.jobs.stage_put(&mut tx, tenant, Some(&job), &next)?;
            before_commit(&next);
            match tx.commit(self.client()).await {
                Ok(()) => Ok(shared::dynamo::Attempt::Done(next)),
                Err(e) => Ok(shared::dynamo::Attempt::raced_on(e, &[shared::dynamo::Part::Job])?),
            }
        })
        .await
    }

    /// Runs round `round` of job `id` (the round its item's stream record follows):
    /// nothing when the job has moved past it or ended. Answers the job after it.
    ///
    /// # Errors
    /// Storage errors (the round may be run again: it does nothing twice).
    pub async fn bulk_round(
        &self,
        tenant: &TenantId,
        id: &BulkJobId,
        round: u64,
        clock: &dyn Clock,
    ) -> Result<Option<BulkJob>, Error> {
        let Some(job) = self.jobs.get(tenant, id).await? else { return Ok(None) };
        if job.round != round || job.status != JobStatus::Running {
            return Ok(None);
        }
        let filter = job.filter.before(job.created_at);
        let (page, next) = self.candidates(tenant, &filter, job.cursor.as_deref(), ROUND_SIZE).await?;
        // Boxed in a loop, not mapped by a closure: the future stays Send for any caller.
        let mut acts: Vec<Act<'_>> = Vec::new();
        for (execution_id, execution) in &page {
            if execution.is_some() {
                acts.push(Box::pin(self.act_once(tenant, &job, execution_id, clock)));
            }
        }
        let _: Vec<()> = stream::iter(acts).buffered(AT_ONCE).try_collect().await?;
        // What this round reached, however many runs of it did the work.
        let tally = self.jobs.round_tally(tenant, &job.id, job.round).await?;
        self.commit_round(tenant, job, &tally, next, clock).await
    }

    /// Ends job `id` as failed for `why` (a round that cannot succeed, ever).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn bulk_fail(
        &self,
        tenant: &TenantId,
        id: &BulkJobId,
        why: &str,
        clock: &dyn Clock,
    ) -> Result<(), Error> {
        let Some(job) = self.jobs.get(tenant, id).await? else { return Ok(()) };
        if job.status != JobStatus::Running {
            return Ok(());
        }
        let now = clock.now();
        let next = job.failed(why.to_owned(), now);
        let mut tx = Transaction::new();
        self.jobs.stage_put(&mut tx, tenant, Some(&job), &next)?;
        crate::webhooks::events::stage(&mut tx, self.failures.tables(), tenant, &[Event::bulk(&next, now)])?;
        match tx.commit(self.client()).await {
            Ok(()) | Err(TransactionError::Condition(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Moves `job` past a round that reached `tally` and stopped at `cursor`, on the
    /// condition that no other run of the round did (then this one's work is counted
    /// there: `None`). A job cancelled meanwhile keeps the round's tally.
    async fn commit_round(
        &self,
        tenant: &TenantId,
        job: BulkJob,
        tally: &Tally,
        cursor: Option<String>,
        clock: &dyn Clock,
    ) -> Result<Option<BulkJob>, Error> {
        let round = job.round;
        let mut read = job;
        for _ in 0..shared::dynamo::RACE_ATTEMPTS {
            let now = clock.now();
            let next = read.after_round(tally, cursor.clone(), now);
            let mut tx = Transaction::new();
            self.jobs.stage_put(&mut tx, tenant, Some(&read), &next)?;
            if next.status == JobStatus::Completed {
                crate::webhooks::events::stage(&mut tx, self.failures.tables(), tenant, &[Event::bulk(&next, now)])?;
            }
            match tx.commit(self.client()).await {
                Ok(()) => return Ok(Some(next)),
                Err(TransactionError::Condition(_)) => match self.jobs.get(tenant, &read.id).await? {
                    Some(again) if again.round == round => read = again,
                    _ => return Ok(None),
                },
                Err(e) => return Err(e.into()),
            }
        }
        Err(Error::Store(StoreError::Conflict))
    }

    /// Applies the job's action to execution `id` with the job's marker (nothing when
    /// it has one: a run of this round or an earlier one reached it).
    async fn act_once(
        &self,
        tenant: &TenantId,
        job: &BulkJob,
        id: &ExecutionId,
        clock: &dyn Clock,
    ) -> Result<(), Error> {
        let change = match job.action {
            BulkAction::Replay => Change::Replay(ReplayFrom::Current),
            BulkAction::Cancel => Change::Plain(Action::Cancel { reason: Some(format!("bulk job {}", job.id)) }),
        };
        let now = clock.now();
        let done = self.jobs.marker(tenant, &job.id, job.round, id, &Outcome::Done, now)?;
        let acted = shared::dynamo::gated(
            Arc::new(Marker::new(done)),
            Box::pin(self.transition(tenant, id, &change, clock, &|_| {})),
        )
        .await;
        let outcome = match acted {
            Ok(_) | Err(Error::Store(StoreError::Refused(Refusal::Marked))) => return Ok(()),
            Err(Error::InvalidState(_)) => Outcome::Skipped(NOT_ALLOWED.to_owned()),
            Err(Error::NotFound { .. }) => Outcome::Skipped(DELETED.to_owned()),
            Err(Error::InsufficientCredits(_)) => Outcome::Failed(INSUFFICIENT_CREDITS.to_owned()),
            Err(Error::TooLarge(_)) => Outcome::Failed(NOT_STORED.to_owned()),
            Err(e) => return Err(e),
        };
        Ok(self.jobs.put_marker(self.jobs.marker(tenant, &job.id, job.round, id, &outcome, now)?).await?)
    }

    /// Up to `take` candidates after `cursor`, and the cursor after them (`None` at the
    /// end): the executions the filter's list shows, or the open failures of its group,
    /// each with its execution when that exists and matches the rest of the filter.
    async fn candidates(
        &self,
        tenant: &TenantId,
        filter: &BulkFilter,
        cursor: Option<&str>,
        take: usize,
    ) -> Result<(Vec<Candidate>, Option<String>), Error> {
        let Some(group) = &filter.failure_group else {
            let list = executions_list(filter, cursor, take);
            // The store's list: the cursor's execution may have been deleted since.
            let (items, _) = Box::pin(self.executions.list(tenant, &list, filter.workflow_id.as_ref())).await?;
            let next = (items.len() == take).then(|| items.last().map(|e| e.id.to_string())).flatten();
            let page = items.into_iter().map(|e| (e.id.clone(), filter.admits(&e).then_some(e))).collect();
            return Ok((page, next));
        };
        let list = ListFailures {
            status: Some(FailureStatus::Open),
            group: Some(group.clone()),
            after: cursor.and_then(shared::ids::FailureId::parse),
            take,
            ..ListFailures::default()
        };
        let (failures, _) = Box::pin(self.failures.list(tenant, &list)).await?;
        let next = (failures.len() == take).then(|| failures.last().map(|f| f.id.to_string())).flatten();
        let ids: Vec<ExecutionId> = failures.iter().map(|f| f.execution_id.clone()).collect();
        let found: std::collections::HashMap<ExecutionId, Execution> =
            self.executions.summaries(tenant, &ids).await?.into_iter().map(|e| (e.id.clone(), e)).collect();
        let page = failures
            .into_iter()
            .map(|f| {
                let execution = found.get(&f.execution_id).filter(|e| filter.admits(e)).cloned();
                (f.execution_id, execution)
            })
            .collect();
        Ok((page, next))
    }
}

/// The job a stream record of the `jobs` table names: its tenant (the owner of the item's
/// partition), id and round; `None` for any other item (a marker).
#[must_use]
pub fn named(record: &serde_json::Value) -> Option<(TenantId, BulkJobId, u64)> {
    let image = &record["dynamodb"]["NewImage"];
    let tenant = shared::auth::stored::owner(image["tenant_id"]["S"].as_str()?)?;
    let id = BulkJobId::parse(image["id"]["S"].as_str()?)?;
    let round = image["round"]["N"].as_str()?.parse().ok()?;
    Some((tenant, id, round))
}

/// The list of executions `filter` asks for (its status, workflow, tags and window), after
/// `cursor`.
fn executions_list(filter: &BulkFilter, cursor: Option<&str>, take: usize) -> ListExecutions {
    ListExecutions {
        status: filter.status,
        workflow: filter.workflow_id.as_ref().map(ToString::to_string),
        created_after: filter.created_after,
        created_before: filter.created_before,
        key: None,
        tags: filter.tags.clone(),
        after: cursor.and_then(ExecutionId::parse),
        skip: 0,
        take,
    }
}

fn within_limit(matched: Matched) -> Result<Matched, Error> {
    if matched.count > MAX_MATCHED {
        return Err(Error::Invalid {
            field: "filter",
            message: format!(
                "matches more than the {MAX_MATCHED} executions a bulk job acts on; narrow it (by created_after and created_before, say)"
            ),
        });
    }
    Ok(matched)
}
