//! Executions: their model, their storage, and the operations of `/executions` (start,
//! read, list, and every transition: complete, fail, pause, cancel, replay, rollback).
//! Deleting one is in [`super::deletion`].

pub mod model;
pub mod store;
mod tags;

use std::sync::atomic::{AtomicBool, Ordering};

use chrono::{DateTime, Utc};
use shared::TenantId;
use shared::counters::CounterChange;
use shared::dynamo::{Attempt, Part, StoreError, Transaction, TransactionError, retry_races};
use shared::ids::{ExecutionId, FailureGroupId, FailureId, WorkflowId};
use shared::time::Clock;

use shared::body::WireEnum;
use shared::series::Window;

use self::model::{Action, Discarded, Execution, ExecutionStatus, span_family};
use super::checkpoints::model::StoredCheckpoint;
use super::failures::model::{CommandStatus, Failure, SPAN_FAMILY as FAILURE_SPANS};
use super::rollback::{Disposal, plan_rollback, rollback_budget};
use super::{BeforeCommit, Change, Changed, ListExecutions, NewExecution, ReplayFrom, Runs, Started};
use crate::Error;
use crate::credits::Charge;
use crate::webhooks::{Event, EventType};
use crate::workflows::model::WorkflowStatus;

/// One bucket of [`Runs::execution_stats`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActivityBucket {
    /// Its index in the window (see [`Window::start`]).
    pub index: u64,
    /// Executions made in it, whatever their status.
    pub total: u64,
    /// Executions made in it, by their status now, in [`ExecutionStatus::ALL`] order.
    pub by_status: Vec<(ExecutionStatus, u64)>,
    /// Failures recorded in it (an execution's failure, whatever became of it).
    pub failures: u64,
}

impl Runs {
    /// Executions made in each bucket of `window` by their status now, and failures
    /// recorded in each: two queries of the span counters, side by side, whose cost
    /// depends on the window only.
    ///
    /// # Errors
    /// The reads' storage errors.
    pub async fn execution_stats(&self, tenant: &TenantId, window: &Window) -> Result<Vec<ActivityBucket>, Error> {
        let (client, tables, family) = (self.client(), self.failures.tables(), span_family(None));
        let (executions, failures) = tokio::try_join!(
            shared::spans::series(client, tables, tenant, &family, window.spans()),
            shared::spans::series(client, tables, tenant, FAILURE_SPANS, window.spans()),
        )?;
        let count = |values: Option<&std::collections::BTreeMap<String, i64>>, attribute: &str| {
            values.and_then(|v| v.get(attribute)).map_or(0, |n| u64::try_from(*n).unwrap_or(0))
        };
        Ok(window
            .indexes()
            .map(|index| {
                let made = executions.get(&index);
                ActivityBucket {
                    index,
                    total: count(made, shared::spans::ALL),
                    by_status: ExecutionStatus::ALL.iter().map(|s| (*s, count(made, s.wire()))).collect(),
                    failures: count(failures.get(&index), shared::spans::ALL),
                }
            })
            .collect())
    }

    /// The tenant's execution `id`.
    ///
    /// # Errors
    /// [`Error::NotFound`], or the read's storage error.
    pub async fn load(&self, tenant: &TenantId, id: &ExecutionId) -> Result<Execution, Error> {
        self.executions.get(tenant, id).await?.ok_or_else(|| Error::not_found("execution", id.as_str()))
    }

    /// One window of the tenant's executions, newest first, and the total matching
    /// (summaries: their `input` and `output` are not read). The cursor is checked first
    /// (one small read), then the workflow (it and the tenant's count of its executions,
    /// read together); a key is looked up by its pointer (two point reads) and answers
    /// at most its one execution, else the window and its total are read together.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a cursor or a workflow the tenant does not have, storage
    /// errors.
    pub async fn list_executions(
        &self,
        tenant: &TenantId,
        list: &ListExecutions,
    ) -> Result<(Vec<Execution>, u64), Error> {
        if let Some(id) = &list.after
            && !self.executions.exists(tenant, id).await?
        {
            return Err(Error::not_found("execution", id.as_str()));
        }
        let workflow = match &list.workflow {
            None => None,
            Some(raw) => {
                let id = WorkflowId::parse(raw).ok_or_else(|| Error::not_found("workflow", raw.as_str()))?;
                let (exists, seen) =
                    tokio::try_join!(self.workflows.get(tenant, &id), self.executions.workflow_seen(tenant, &id))?;
                if exists.is_none() && !seen {
                    return Err(Error::not_found("workflow", raw.as_str()));
                }
                Some(id)
            }
        };
        if let (Some(key), Some(workflow)) = (&list.key, &workflow) {
            let found = self.executions.by_key(tenant, workflow, key).await?;
            let items: Vec<Execution> = found.into_iter().filter(|e| shown(list, e)).collect();
            let total = items.len() as u64;
            return Ok((items, total));
        }
        Ok(Box::pin(self.executions.list(tenant, list, workflow.as_ref())).await?)
    }

    /// Starts an execution of `workflow_id` and charges it, in one transaction that also
    /// checks the workflow is still not archived. With a `key`, the start is idempotent
    /// by key within the workflow: when an execution of the workflow already has it,
    /// that execution is the answer ([`Started::Existing`]), nothing is charged and the
    /// rest of the request is not looked at (Temporal's "use existing" policy).
    ///
    /// `before_commit` sees the new execution just before its transaction is sent (the
    /// caller may render its answer then, to be stored in the same transaction).
    ///
    /// # Errors
    /// [`Error::NotFound`] for an unknown workflow, [`Error::InvalidState`] for an
    /// archived one, [`Error::InsufficientCredits`], storage errors.
    pub async fn start(
        &self,
        tenant: &TenantId,
        new: &NewExecution,
        clock: &dyn Clock,
        before_commit: BeforeCommit<'_, Execution>,
    ) -> Result<Started, Error> {
        let NewExecution { workflow_id, key, input, metadata, tags } = new;
        let key = key.as_deref();
        // A tenant this instance saw below its low-balance threshold has its allowance
        // refilled for every charge: its account is read beside the workflow, and the
        // refill made in the start's own transaction.
        let low = crate::credits::seen_low(tenant);
        let (workflow, account) = if low {
            let (workflow, account) =
                futures_util::future::join(self.workflows.get(tenant, workflow_id), self.ledger.account(tenant)).await;
            (workflow?, Some(account?))
        } else {
            (self.workflows.get(tenant, workflow_id).await?, None)
        };
        let workflow = workflow.ok_or_else(|| Error::not_found("workflow", workflow_id.as_str()))?;
        let account = &std::sync::Mutex::new(account);
        if let Some(key) = key
            && let Some(existing) = self.executions.by_key(tenant, workflow_id, key).await?
        {
            return Ok(Started::Existing(existing));
        }
        if workflow.status == WorkflowStatus::Archived {
            return Err(archived(workflow_id));
        }
        let allowance = crate::credits::any_allowance();
        let settle_after = &AtomicBool::new(false);
        let started = retry_races(|| async move {
            let now = clock.now();
            let mut execution =
                Execution::start(workflow_id.clone(), key.map(str::to_owned), input.clone(), metadata.clone(), now);
            execution.tags.clone_from(tags);
            execution.checkpoints_apart = shared::config::spread();
            execution.checkpoints_joined = shared::config::spread() && self.settings.one_checkpoint_entry;
            execution.spread = shared::config::spread();
            execution.headed = self.settings.heads;
            let mut tx = Transaction::new();
            let description = charged(&execution, "started");
            let read = account.lock().ok().and_then(|mut read| read.take());
            let read = match read {
                Some(read) => Some(read),
                None if low => Some(self.ledger.account(tenant).await?),
                None => None,
            };
            let (charge, mut usage) = match read {
                Some(read) => {
                    let charge = Charge { allowance, credits: self.execution_cost };
                    self.ledger.stage_charge_refilled(&mut tx, tenant, &read, charge, description, now)?
                }
                None => self.ledger.stage_charge(&mut tx, tenant, allowance, self.execution_cost, description, now)?,
            };
            let on_stream = self.settings.started_on_stream;
            // The workflow's counter item, which the start adds to, refuses it once the
            // workflow is closed (archived or deleted since it was read).
            usage.unless_closed(&shared::counters::executions_of_workflow_item(workflow_id.as_str()));
            self.executions.stage_create(&mut tx, tenant, (&execution, on_stream), &usage)?;
            // Reported by the new item's stream record, or by an outbox item.
            if !on_stream {
                let started = Event::execution(EventType::ExecutionStarted, &execution, now);
                crate::webhooks::events::stage(&mut tx, self.failures.tables(), tenant, &[started])?;
            }
            before_commit(&execution);
            match tx.commit(self.client()).await {
                Ok(()) => Ok(Attempt::Done(Started::New(execution))),
                Err(TransactionError::Condition(Part::Counters)) => {
                    match self.workflows.get(tenant, workflow_id).await? {
                        Some(w) if w.status == WorkflowStatus::Archived => Err(archived(workflow_id)),
                        // Open, its counter item closed: restored by an earlier version,
                        // which knew only the markers (or archived and restored since the
                        // read). Opened again as of the version read, then started.
                        Some(w) => match self.workflows.reopen(tenant, &w).await {
                            Ok(()) | Err(StoreError::ConditionFailed { .. } | StoreError::Conflict) => {
                                Ok(Attempt::Raced)
                            }
                            Err(other) => Err(other.into()),
                        },
                        None => Err(Error::not_found("workflow", workflow_id.as_str())),
                    }
                }
                Err(TransactionError::Condition(Part::Key)) => {
                    // Another start with this key committed first: its execution is the answer.
                    let existing = match key {
                        Some(key) => self.executions.by_key(tenant, workflow_id, key).await?,
                        None => None,
                    };
                    Ok(existing.map_or(Attempt::Raced, |e| Attempt::Done(Started::Existing(e))))
                }
                Err(TransactionError::Condition(Part::Allowance)) => {
                    Box::pin(self.refill(tenant, charge, now, settle_after)).await?;
                    Ok(Attempt::Raced)
                }
                // The account item or the ledger moved since the account was read (a
                // start's own refill, [`crate::credits::seen_low`]): read it again.
                Err(TransactionError::Condition(Part::Account | Part::Ledger)) if low => Ok(Attempt::Raced),
                Err(e) => Ok(Attempt::raced_on(e, &[])?),
            }
        })
        .await?;
        self.settle_after(tenant, settle_after, clock).await;
        Ok(started)
    }

    /// Hands the allowance `charge` (if any) was refused by credits to spend; notes in
    /// `settle_after` when the charge is to be settled once made.
    ///
    /// # Errors
    /// [`Error::InsufficientCredits`], storage errors.
    async fn refill(
        &self,
        tenant: &TenantId,
        charge: Option<Charge>,
        now: DateTime<Utc>,
        settle_after: &AtomicBool,
    ) -> Result<(), Error> {
        let Some(charge) = charge else {
            return Err(Error::Store(StoreError::Other("a refused charge that was not staged".into())));
        };
        if self.ledger.refill(tenant, charge, now).await? {
            settle_after.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Settles the tenant's charges when a charge just made asked for it (it took the
    /// balance below the low-balance threshold: `credits.low` is reported now). The
    /// charge is made whatever happens here: a failure is logged, and the next write of
    /// the account settles.
    async fn settle_after(&self, tenant: &TenantId, settle_after: &AtomicBool, clock: &dyn Clock) {
        if settle_after.load(Ordering::Relaxed)
            && let Err(error) = Box::pin(self.ledger.settle(tenant, clock)).await
        {
            tracing::warn!(%error, "settling after a charge failed; the next write of the account settles");
        }
    }

    /// Applies `change` to execution `id`: read, check against the rules, plan the
    /// action's effects (one step per action below), commit them with the execution in
    /// one transaction conditioned on the version read.
    ///
    /// # Errors
    /// [`Error::NotFound`] (the execution, or a checkpoint named that is not one of
    /// its own), [`Error::InvalidState`], [`Error::InsufficientCredits`] for a replay,
    /// storage errors.
    ///
    /// `before_commit` sees the outcome just before its transaction is sent.
    pub async fn transition(
        &self,
        tenant: &TenantId,
        id: &ExecutionId,
        change: &Change,
        clock: &dyn Clock,
        before_commit: BeforeCommit<'_, Changed>,
    ) -> Result<Changed, Error> {
        // An ending reads the tenant's retention beside the execution.
        let ends = matches!(
            change,
            Change::Fail { .. } | Change::Plain(Action::Complete { .. } | Action::Fail { .. } | Action::Cancel { .. })
        );
        let settle_after = &AtomicBool::new(false);
        let changed = retry_races(|| async move {
            let (current, standing) = tokio::try_join!(self.load(tenant, id), async {
                Ok::<_, Error>(if ends { Some(self.retention.read(tenant).await?) } else { None })
            })?;
            let now = clock.now();
            let mut plan = match change {
                Change::Fail { error, details } => self.plan_failure(tenant, &current, error, details, now).await?,
                Change::Replay(from) => self.plan_replay(tenant, &current, from, now).await?,
                Change::Rollback(to) => self.plan_rollback(tenant, &current, to, now).await?,
                Change::Plain(action) => match action {
                    Action::Complete { .. } => self.plan_completion(tenant, &current, action, now).await?,
                    Action::Replay { .. } => self.charged_replay(tenant, &current, action, now).await?,
                    _ => Plan::new(&current, action, now)?,
                },
            };
            if let Some(standing) = standing
                && !current.status.is_ended()
                && let Some(ended) = plan.next.ended_at
            {
                let lifetimes = self.lifetimes(tenant, &standing, &current.workflow_id, ended).await?;
                plan.next.expires_at = Some(lifetimes.expires_at);
                plan.next.checkpoints_expire_at = lifetimes.checkpoints_expire_at;
            }
            self.commit_plan(tenant, &current, plan, before_commit, settle_after).await
        })
        .await?;
        self.settle_after(tenant, settle_after, clock).await;
        if changed.execution.expires_at.is_some() && ends {
            self.mark_lifetimes(tenant, &changed.execution).await;
        }
        Ok(changed)
    }

    /// Fail: a failure record of its own (its group's item too, when it is the group's
    /// first), reported.
    async fn plan_failure(
        &self,
        tenant: &TenantId,
        current: &Execution,
        error: &super::ExecutionError,
        details: &serde_json::Map<String, serde_json::Value>,
        now: DateTime<Utc>,
    ) -> Result<Plan, Error> {
        let mut plan = Plan::new(current, &Action::Fail { error: error.clone() }, now)?;
        let failure = Failure::record(
            current.id.clone(),
            current.workflow_id.clone(),
            error.error_type.clone(),
            error.message.clone(),
            details.clone(),
            now,
        );
        plan.next.failure_ids.push(failure.id.clone());
        let recorded = self.failures.group_recorded(tenant, &failure.group_id).await?;
        self.failures.stage_create(&mut plan.effects, tenant, &failure, recorded)?;
        plan.events.push(Event::failure(EventType::FailureCreated, &failure, now));
        Ok(plan)
    }

    /// Complete: every open failure of the execution resolved, each reported; those of
    /// at most [`COMPLETION_GROUPS_MAX`] groups in the completion's own transaction (each
    /// group's counter item is one more operation in it), the rest right after it.
    async fn plan_completion(
        &self,
        tenant: &TenantId,
        current: &Execution,
        action: &Action,
        now: DateTime<Utc>,
    ) -> Result<Plan, Error> {
        let mut plan = Plan::new(current, action, now)?;
        let (now_resolved, later) = by_groups(self.open_failures(tenant, current).await?, COMPLETION_GROUPS_MAX);
        for failure in now_resolved {
            let resolved = failure.resolved(now, super::failures::model::ResolvedBy::Replay);
            self.replace_failure(&mut plan, tenant, &failure, &resolved)?;
            plan.events.push(Event::failure(EventType::FailureResolved, &resolved, now));
        }
        plan.resolve_after = later.into_iter().map(|f| f.id).collect();
        Ok(plan)
    }

    /// Replay from where `from` says (a checkpoint named must be the execution's own).
    async fn plan_replay(
        &self,
        tenant: &TenantId,
        current: &Execution,
        from: &ReplayFrom,
        now: DateTime<Utc>,
    ) -> Result<Plan, Error> {
        let from = match from {
            ReplayFrom::Current => current.current_checkpoint_id.clone(),
            ReplayFrom::Start => None,
            ReplayFrom::Checkpoint(cp) => Some(self.checkpoint_of(tenant, current, cp).await?.checkpoint.id),
        };
        self.charged_replay(tenant, current, &Action::Replay { from }, now).await
    }

    /// A replay's effects: the open failures' pending recovery commands completed, an
    /// attempt counted, the replay charged.
    async fn charged_replay(
        &self,
        tenant: &TenantId,
        current: &Execution,
        action: &Action,
        now: DateTime<Utc>,
    ) -> Result<Plan, Error> {
        let mut plan = Plan::new(current, action, now)?;
        for failure in self.open_failures(tenant, current).await? {
            let next_failure = failure.with_pending_commands(CommandStatus::Completed);
            if next_failure.recovery_commands != failure.recovery_commands {
                self.replace_failure(&mut plan, tenant, &failure, &next_failure)?;
            }
        }
        plan.counters.add(&shared::spans::attempts(now.date_naive()), 1);
        let description = charged(&plan.next, "replayed");
        let allowance = crate::credits::allowance_of(&description);
        let (charge, usage) =
            self.ledger.stage_charge(&mut plan.effects, tenant, allowance, self.execution_cost, description, now)?;
        plan.counters.merge(&usage);
        plan.charge = charge;
        Ok(plan)
    }

    /// Adds the replacement of failure `old` by `new` (and its counter changes) to `plan`.
    fn replace_failure(&self, plan: &mut Plan, tenant: &TenantId, old: &Failure, new: &Failure) -> Result<(), Error> {
        plan.counters.merge(&self.failures.stage_replace(&mut plan.effects, tenant, old, new)?);
        Ok(())
    }

    /// Roll back to checkpoint `to`: everything above it goes (see `rollback`), what fits
    /// one transaction in the rollback's own, else after it, hidden meanwhile.
    async fn plan_rollback(
        &self,
        tenant: &TenantId,
        current: &Execution,
        to: &shared::ids::CheckpointId,
        now: DateTime<Utc>,
    ) -> Result<Plan, Error> {
        let target = self.checkpoint_of(tenant, current, to).await?;
        let mut plan = Plan::new(current, &Action::Rollback { to: to.clone() }, now)?;
        let after = target.checkpoint.sequence;
        let above = self.above(tenant, current, after).await?;
        // What the deletions may take of the transaction: what the status change leaves.
        let mut change = Transaction::new();
        self.executions.stage_replace(&mut change, tenant, current, &plan.next, &CounterChange::default())?;
        let rollback = plan_rollback(current, after, &above, rollback_budget(change.len()));
        plan.next.checkpoint_count = rollback.checkpoint_count;
        plan.next.discarded = rollback.ranges;
        let read = above.into_read();
        match rollback.disposal {
            Disposal::InTransaction => {
                for stored in &read {
                    self.checkpoints.stage_delete(&mut plan.effects, tenant, stored)?;
                }
            }
            Disposal::Hidden { range, all } => plan.cleanup = Some((range, read, all)),
        }
        plan.discarded = Some(rollback.discarded);
        Ok(plan)
    }

    /// Commits `plan`: the execution's replacement (with the plan's counters) first, so
    /// a lost race is recognised as one, then its effects and its events, the
    /// execution's own first; after the commit, a hidden rollback's cleanup.
    async fn commit_plan(
        &self,
        tenant: &TenantId,
        current: &Execution,
        plan: Plan,
        before_commit: BeforeCommit<'_, Changed>,
        settle_after: &AtomicBool,
    ) -> Result<Attempt<Changed>, Error> {
        let Plan { action, next, effects, counters, mut events, discarded, cleanup, charge, resolve_after, now } = plan;
        let mut whole = Transaction::new();
        self.executions.stage_replace(&mut whole, tenant, current, &next, &counters)?;
        whole.append(effects);
        events.insert(0, Event::execution(reported(&action), &next, now));
        crate::webhooks::events::stage(&mut whole, self.failures.tables(), tenant, &events)?;
        let changed = Changed { execution: next, discarded_checkpoints: discarded };
        before_commit(&changed);
        match whole.commit(self.client()).await {
            Ok(()) => {
                if let Some((range, checkpoints, all)) = cleanup {
                    self.finish_discard(tenant, &current.id, range, &checkpoints, all).await;
                }
                self.resolve_after_completion(tenant, &resolve_after, now).await;
                Ok(Attempt::Done(changed))
            }
            Err(TransactionError::Condition(Part::Allowance)) => {
                Box::pin(self.refill(tenant, charge, now, settle_after)).await?;
                Ok(Attempt::Raced)
            }
            Err(e) => Ok(Attempt::raced_on(e, &[Part::Execution, Part::Failure])?),
        }
    }

    async fn open_failures(&self, tenant: &TenantId, execution: &Execution) -> Result<Vec<Failure>, Error> {
        let failures = self.failures.get_many(tenant, &execution.failure_ids).await?;
        Ok(failures.into_iter().filter(|f| f.status == super::failures::model::FailureStatus::Open).collect())
    }
}

/// What a transition commits: the execution's next state and every effect beside it.
/// Each action's step ([`Runs::transition`]) fills in its own.
struct Plan {
    /// The action, checked against the execution's rules.
    action: Action,
    /// The execution after it.
    next: Execution,
    /// Its other writes: failure records, the ledger entry, checkpoints deleted.
    effects: Transaction,
    /// Counter changes beside the execution's own.
    counters: CounterChange,
    /// Events beside the execution's own (reported first).
    events: Vec<Event>,
    /// For a rollback: how many checkpoints it discards.
    discarded: Option<u64>,
    /// For a rollback too large for one transaction: the range hidden, the checkpoints
    /// read above the target, and whether they are all of them.
    cleanup: Option<(Discarded, Vec<StoredCheckpoint>, bool)>,
    /// For a replay: its charge.
    charge: Option<Charge>,
    /// For a completion: the open failures its transaction has no room for, resolved
    /// right after it commits.
    resolve_after: Vec<FailureId>,
    /// When.
    now: DateTime<Utc>,
}

impl Plan {
    /// The plan of `action` on `current`, with no effects yet.
    ///
    /// # Errors
    /// [`Error::InvalidState`] when the rules refuse the action.
    fn new(current: &Execution, action: &Action, now: DateTime<Utc>) -> Result<Self, Error> {
        current.check(action)?;
        Ok(Self {
            action: action.clone(),
            next: current.after(action, now),
            effects: Transaction::new(),
            counters: CounterChange::default(),
            events: Vec::new(),
            discarded: None,
            cleanup: None,
            charge: None,
            resolve_after: Vec::new(),
            now,
        })
    }
}

/// Whether `e`, the execution with the key a list asks for, is in the list's window: of
/// its status, workflow and time window, after its cursor, on its first page.
fn shown(list: &ListExecutions, e: &Execution) -> bool {
    list.status.is_none_or(|s| e.status == s)
        && list.workflow.as_ref().is_none_or(|w| e.workflow_id.as_str() == w)
        && list.created_after.is_none_or(|t| e.created_at > t)
        && list.created_before.is_none_or(|t| e.created_at < t)
        && list.after.as_ref().is_none_or(|a| e.id < *a)
        && list.tags.iter().all(|(k, v)| e.tags.get(k) == Some(v))
        && list.skip == 0
}

/// The most failure groups whose failures a completion resolves in its own transaction:
/// with 49 failures (at most 50 attempts) and 16 tags, the execution, its counters and
/// its tags' entries and counters, the failures' counter item, its events and the key's
/// check make 93 operations; each group's counter item is one more, within DynamoDB's
/// 100 with room to spare.
pub const COMPLETION_GROUPS_MAX: usize = 4;

/// `failures` split into those of the `max` groups with the most of them (on a tie, the
/// group whose newest failure is newest) and the rest.
fn by_groups(failures: Vec<Failure>, max: usize) -> (Vec<Failure>, Vec<Failure>) {
    let mut sizes: std::collections::HashMap<FailureGroupId, (usize, FailureId)> = std::collections::HashMap::new();
    for f in &failures {
        let (size, newest) = sizes.entry(f.group_id.clone()).or_insert((0, f.id.clone()));
        *size += 1;
        *newest = newest.clone().max(f.id.clone());
    }
    let mut ranked: Vec<_> = sizes.into_iter().collect();
    ranked.sort_by(|(_, a), (_, b)| b.cmp(a));
    let kept: std::collections::HashSet<FailureGroupId> = ranked.into_iter().take(max).map(|(g, _)| g).collect();
    failures.into_iter().partition(|f| kept.contains(&f.group_id))
}

/// The description of the usage entry of an execution's start or replay.
fn charged(execution: &Execution, what: &str) -> String {
    format!("execution {} {what} (attempt {})", execution.id, execution.attempt)
}

/// The event an execution's change reports.
fn reported(action: &Action) -> EventType {
    match action {
        Action::Complete { .. } => EventType::ExecutionCompleted,
        Action::Fail { .. } => EventType::ExecutionFailed,
        Action::Pause => EventType::ExecutionPaused,
        Action::Cancel { .. } => EventType::ExecutionCancelled,
        Action::Replay { .. } => EventType::ExecutionReplayed,
        Action::Rollback { .. } => EventType::ExecutionRolledBack,
    }
}

fn archived(id: &WorkflowId) -> Error {
    Error::InvalidState(format!("workflow {id} is archived; restore it to draft before starting executions"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_keeps_the_largest_groups_and_leaves_the_rest_for_after() {
        let (e, wf, now) = (ExecutionId::generate(), WorkflowId::generate(), Utc::now());
        let failure = |message: &str, ms: i64| {
            let at = now + chrono::TimeDelta::milliseconds(ms);
            Failure::record(e.clone(), wf.clone(), "AGENT_ERROR".into(), message.into(), serde_json::Map::new(), at)
        };
        let failures = vec![
            failure("boom", 1),
            failure("crash", 2),
            failure("boom", 3),
            failure("denied", 4),
            failure("crash", 5),
            failure("boom", 6),
        ];
        let (now_resolved, later) = by_groups(failures.clone(), 2);
        let messages = |fs: &[Failure]| fs.iter().map(|f| f.message.clone()).collect::<Vec<_>>();
        assert_eq!(messages(&now_resolved), ["boom", "crash", "boom", "crash", "boom"]);
        assert_eq!(messages(&later), ["denied"]);
        // On a tie of size, the group whose newest failure is newest.
        let (kept, rest) = by_groups(failures, 1);
        assert_eq!((kept.len(), rest.len()), (3, 3));
        let (kept, _) = by_groups(vec![failure("denied", 9), failure("crash", 8)], 1);
        assert_eq!(messages(&kept), ["denied"]);
        let (all, none) = by_groups(vec![failure("a", 1)], COMPLETION_GROUPS_MAX);
        assert_eq!((all.len(), none.len()), (1, 0));
    }
}
