//! Executions: their model, their storage, and the operations of `/executions` (start,
//! read, list, and every transition: complete, fail, pause, cancel, replay, rollback).
//! Deleting one is in [`super::deletion`].

pub mod model;
pub mod store;

use shared::TenantId;
use shared::counters::CounterChange;
use shared::dynamo::{Attempt, Part, Transaction, TransactionError, retry_races};
use shared::ids::{ExecutionId, WorkflowId};
use shared::time::Clock;

use shared::body::WireEnum;
use shared::series::Window;

use self::model::{Action, Execution, ExecutionStatus, span_family};
use super::failures::model::{CommandStatus, Failure, SPAN_FAMILY as FAILURE_SPANS};
use super::rollback::{Disposal, plan_rollback};
use super::{BeforeCommit, Change, Changed, ListExecutions, NewExecution, ReplayFrom, Runs, Started};
use crate::Error;
use crate::credits::{EntryType, NewEntry};
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
        let NewExecution { workflow_id, key, input, metadata } = new;
        let key = key.as_deref();
        let workflow = self
            .workflows
            .get(tenant, workflow_id)
            .await?
            .ok_or_else(|| Error::not_found("workflow", workflow_id.as_str()))?;
        if let Some(key) = key
            && let Some(existing) = self.executions.by_key(tenant, workflow_id, key).await?
        {
            return Ok(Started::Existing(existing));
        }
        if workflow.status == WorkflowStatus::Archived {
            return Err(archived(workflow_id));
        }
        retry_races(|| async move {
            let now = clock.now();
            let mut execution =
                Execution::start(workflow_id.clone(), key.map(str::to_owned), input.clone(), metadata.clone(), now);
            execution.checkpoints_apart = shared::config::spread();
            execution.spread = shared::config::spread();
            let account = self.ledger.account(tenant).await?;
            let mut tx = Transaction::new();
            self.ledger.stage(&mut tx, tenant, account, self.charge(&execution, "started"), now)?;
            self.executions.stage_create(&mut tx, tenant, &execution)?;
            tx.push(Part::Workflow, self.workflows.check_active(tenant, workflow_id)?);
            let started = Event::execution(EventType::ExecutionStarted, &execution, now);
            crate::webhooks::events::stage(&mut tx, self.failures.tables(), tenant, &[started])?;
            before_commit(&execution);
            match tx.commit(self.client()).await {
                Ok(()) => Ok(Attempt::Done(Started::New(execution))),
                Err(TransactionError::Condition(Part::Workflow)) => {
                    Err(match self.workflows.get(tenant, workflow_id).await? {
                        Some(_) => archived(workflow_id),
                        None => Error::not_found("workflow", workflow_id.as_str()),
                    })
                }
                Err(TransactionError::Condition(Part::Key)) => {
                    // Another start with this key committed first: its execution is the answer.
                    let existing = match key {
                        Some(key) => self.executions.by_key(tenant, workflow_id, key).await?,
                        None => None,
                    };
                    Ok(existing.map_or(Attempt::Raced, |e| Attempt::Done(Started::Existing(e))))
                }
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Account])?),
            }
        })
        .await
    }

    /// The usage entry of a start or replay.
    fn charge(&self, execution: &Execution, what: &str) -> NewEntry {
        NewEntry {
            kind: EntryType::Usage,
            amount: -self.execution_cost,
            description: format!("execution {} {what} (attempt {})", execution.id, execution.attempt),
            payment_status: None,
        }
    }

    /// Applies `change` to execution `id`: read, check against the rules, build one
    /// transaction with every effect, commit conditioned on the version read.
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
        retry_races(|| async move {
            let current = self.load(tenant, id).await?;
            let now = clock.now();
            let (action, target) = match change {
                Change::Plain(action) => (action.clone(), None),
                Change::Fail { error, .. } => (Action::Fail { error: error.clone() }, None),
                Change::Replay(from) => {
                    let from = match from {
                        ReplayFrom::Current => current.current_checkpoint_id.clone(),
                        ReplayFrom::Start => None,
                        ReplayFrom::Checkpoint(cp) => {
                            Some(self.checkpoint_of(tenant, &current, cp).await?.checkpoint.id)
                        }
                    };
                    (Action::Replay { from }, None)
                }
                Change::Rollback(to) => {
                    let target = self.checkpoint_of(tenant, &current, to).await?;
                    (Action::Rollback { to: to.clone() }, Some(target))
                }
            };
            current.check(&action)?;
            let mut next = current.after(&action, now);
            let mut tx = Transaction::new();
            let mut extra = CounterChange::default();
            let mut discarded = None;
            let mut cleanup = None;
            let mut events = Vec::new();
            match (change, &action) {
                (Change::Fail { error, details }, _) => {
                    let failure = Failure::record(
                        id.clone(),
                        current.workflow_id.clone(),
                        error.error_type.clone(),
                        error.message.clone(),
                        details.clone(),
                        now,
                    );
                    next.failure_ids.push(failure.id.clone());
                    self.failures.stage_create(&mut tx, tenant, &failure)?;
                    events.push(Event::failure(EventType::FailureCreated, &failure, now));
                }
                (_, Action::Complete { .. }) => {
                    for failure in self.open_failures(tenant, &current).await? {
                        let resolved = failure.resolved(now);
                        extra.merge(&self.failures.stage_replace(&mut tx, tenant, &failure, &resolved)?);
                        events.push(Event::failure(EventType::FailureResolved, &resolved, now));
                    }
                }
                (_, Action::Replay { .. }) => {
                    for failure in self.open_failures(tenant, &current).await? {
                        let next_failure = failure.with_pending_commands(CommandStatus::Completed);
                        if next_failure.recovery_commands != failure.recovery_commands {
                            extra.merge(&self.failures.stage_replace(&mut tx, tenant, &failure, &next_failure)?);
                        }
                    }
                    extra.add(&shared::counters::daily("attempts", now.date_naive()), 1);
                    let account = self.ledger.account(tenant).await?;
                    self.ledger.stage(&mut tx, tenant, account, self.charge(&next, "replayed"), now)?;
                }
                _ => {}
            }
            if let Some(target) = target {
                // Everything above the target goes (see `rollback`): what fits one
                // transaction in the rollback's own, else after it, hidden meanwhile.
                let after = target.checkpoint.sequence;
                let above = self.above(tenant, &current, after).await?;
                let plan = plan_rollback(&current, after, &above);
                next.checkpoint_count = plan.checkpoint_count;
                next.discarded = plan.ranges;
                let read = above.into_read();
                match plan.disposal {
                    Disposal::InTransaction => {
                        for stored in &read {
                            self.checkpoints.stage_delete(&mut tx, tenant, stored)?;
                        }
                    }
                    Disposal::Hidden { range, all } => cleanup = Some((range, read, all)),
                }
                discarded = Some(plan.discarded);
            }
            let mut whole = Transaction::new();
            self.executions.stage_replace(&mut whole, tenant, &current, &next, &extra)?;
            whole.append(tx);
            events.insert(0, Event::execution(reported(&action), &next, now));
            crate::webhooks::events::stage(&mut whole, self.failures.tables(), tenant, &events)?;
            let changed = Changed { execution: next, discarded_checkpoints: discarded };
            before_commit(&changed);
            match whole.commit(self.client()).await {
                Ok(()) => {
                    if let Some((range, checkpoints, all)) = cleanup {
                        self.finish_discard(tenant, id, range, &checkpoints, all).await;
                    }
                    Ok(Attempt::Done(changed))
                }
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Execution, Part::Failure, Part::Account])?),
            }
        })
        .await
    }

    async fn open_failures(&self, tenant: &TenantId, execution: &Execution) -> Result<Vec<Failure>, Error> {
        let failures = self.failures.get_many(tenant, &execution.failure_ids).await?;
        Ok(failures.into_iter().filter(|f| f.status == super::failures::model::FailureStatus::Open).collect())
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
        && list.skip == 0
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
