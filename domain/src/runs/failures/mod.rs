//! Failures: their model, their storage, and the operations of `/failures` (read, list,
//! statistics, settle). The executions function records them ([`Runs::transition`]).

pub mod fingerprint;
pub mod model;
pub mod store;

use chrono::{DateTime, TimeDelta, Utc};
use shared::TenantId;
use shared::dynamo::{Attempt, Part, Transaction, retry_races};
use shared::ids::{FailureGroupId, FailureId};
use shared::time::Clock;

use self::model::{Failure, FailureGroup, FailureStatus, ResolvedBy, Settlement, counter_name};
use super::{BeforeCommit, FailureStats, ListFailures, ListGroups, RATE_WINDOW_DAYS, Runs};
use crate::Error;
use crate::webhooks::{Event, EventType};

impl Runs {
    /// The tenant's failure `id`.
    ///
    /// # Errors
    /// [`Error::NotFound`], or the read's storage error.
    pub async fn failure(&self, tenant: &TenantId, id: &FailureId) -> Result<Failure, Error> {
        self.failures
            .get_many(tenant, std::slice::from_ref(id))
            .await?
            .pop()
            .ok_or_else(|| Error::not_found("failure", id.as_str()))
    }

    /// One window of the tenant's failures, newest first (optionally of one status,
    /// group and time range), and the total matching. A cursor must be one of the tenant's
    /// failures: it is checked while the window is read.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a cursor the tenant does not have or a group it has no
    /// failure in, storage errors.
    pub async fn list_failures(&self, tenant: &TenantId, list: &ListFailures) -> Result<(Vec<Failure>, u64), Error> {
        let check = async {
            if let Some(group) = &list.group
                && !self.failures.group_exists(tenant, group).await?
            {
                return Err(Error::not_found("failure group", group.as_str()));
            }
            match &list.after {
                Some(id) if !self.failures.exists(tenant, id).await? => Err(Error::not_found("failure", id.as_str())),
                _ => Ok(()),
            }
        };
        let read = async { Ok::<_, Error>(Box::pin(self.failures.list(tenant, list)).await?) };
        let ((), listed) = tokio::try_join!(check, read)?;
        Ok(listed)
    }

    /// The tenant's failure statistics as of `clock`'s today (UTC): four counters and
    /// the [`RATE_WINDOW_DAYS`] daily counts of failures and attempts, one batch read.
    ///
    /// # Errors
    /// The read's storage error.
    pub async fn failure_stats(&self, tenant: &TenantId, clock: &dyn Clock) -> Result<FailureStats, Error> {
        let today = clock.now().date_naive();
        let days: Vec<_> =
            (0..RATE_WINDOW_DAYS).filter_map(|back| today.checked_sub_signed(TimeDelta::days(back))).collect();
        let mut names = vec![
            counter_name(None),
            counter_name(Some(FailureStatus::Open)),
            counter_name(Some(FailureStatus::Resolved)),
            counter_name(Some(FailureStatus::Ignored)),
        ];
        names.extend(days.iter().map(|day| shared::counters::daily("failures", *day)));
        names.extend(days.iter().map(|day| shared::spans::attempts(*day)));
        let values = self.failures.counters(tenant, &names).await?;
        let window = days.len();
        let failures: u64 = values[4..4 + window].iter().sum();
        let attempts: u64 = values[4 + window..].iter().sum();
        let rate = if attempts == 0 { 0.0 } else { (failures as f64 / attempts as f64).min(1.0) };
        Ok(FailureStats {
            total: values[0],
            open: values[1],
            resolved: values[2],
            ignored: values[3],
            rate_last_30_days: rate,
        })
    }

    /// Settles failure `id` as a person decided, with its counter moves, in one
    /// transaction conditioned on the version read. Settling it as it is already
    /// settled changes nothing and answers it as it is.
    ///
    /// `before_commit` sees the settled failure just before its transaction is sent.
    ///
    /// # Errors
    /// [`Error::NotFound`], [`Error::InvalidState`] (see [`Failure::settle`]), storage
    /// errors.
    pub async fn settle_failure(
        &self,
        tenant: &TenantId,
        id: &FailureId,
        settlement: Settlement,
        clock: &dyn Clock,
        before_commit: BeforeCommit<'_, Failure>,
    ) -> Result<Failure, Error> {
        let now = clock.now();
        self.change_failure(tenant, id, &|current| current.settle(settlement, now), now, before_commit).await
    }

    /// Resolves by replay, each in its own transaction (with its counter moves and its
    /// webhook), the failures `ids` of a completed execution that the completion's own
    /// transaction had no room for ([`super::executions`]); one no longer open is left
    /// as it is. The completion has committed: a failure that cannot be resolved now is
    /// logged and stays open (a person resolves it, or its group).
    pub(super) async fn resolve_after_completion(&self, tenant: &TenantId, ids: &[FailureId], now: DateTime<Utc>) {
        let resolve = |current: &Failure| {
            Ok((current.status == FailureStatus::Open).then(|| current.resolved(now, ResolvedBy::Replay)))
        };
        for id in ids {
            if let Err(error) = self.change_failure(tenant, id, &resolve, now, &|_| {}).await {
                tracing::error!(error = %error, failure = %id, "a completed execution's failure left open");
            }
        }
    }

    /// Changes failure `id` to what `next` makes of it as read (`None`: nothing to
    /// change), with its counter moves and its webhook, in one transaction conditioned
    /// on the version read (read again after a race).
    async fn change_failure(
        &self,
        tenant: &TenantId,
        id: &FailureId,
        next: &(dyn Fn(&Failure) -> Result<Option<Failure>, Error> + Sync),
        now: DateTime<Utc>,
        before_commit: BeforeCommit<'_, Failure>,
    ) -> Result<Failure, Error> {
        retry_races(|| async move {
            let current = self.failure(tenant, id).await?;
            let Some(next) = next(&current)? else { return Ok(Attempt::Done(current)) };
            let mut tx = Transaction::new();
            let counts = self.failures.stage_replace(&mut tx, tenant, &current, &next)?;
            tx.extend(Part::Counters, counts.transact_items(self.failures.tables(), tenant)?);
            let kind = match next.status {
                FailureStatus::Ignored => EventType::FailureIgnored,
                _ => EventType::FailureResolved,
            };
            let event = Event::failure(kind, &next, now);
            crate::webhooks::events::stage(&mut tx, self.failures.tables(), tenant, &[event])?;
            before_commit(&next);
            match tx.commit(self.client()).await {
                Ok(()) => Ok(Attempt::Done(next)),
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Failure])?),
            }
        })
        .await
    }
}

/// The most failures one request settles for a group: each is its own transaction (and
/// webhook), so a request stays short; the answer says whether any are left.
pub const GROUP_SETTLE_MAX: usize = 100;

/// What settling a group did.
#[derive(Debug, Clone)]
pub struct GroupSettled {
    /// The group as it is now.
    pub group: FailureGroup,
    /// Failures this request settled.
    pub settled: u64,
    /// Whether open failures are left (send the request again).
    pub remaining: bool,
}

impl Runs {
    /// The tenant's failure groups that `list` asks for, the most recently seen first,
    /// each with its counts (its failures per hour up to the clock's now), and how many
    /// match. Reads the tenant's groups (at most [`store::GROUPS_READ_MAX`]) with their
    /// counter items, then the page's failures per hour.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn failure_groups(
        &self,
        tenant: &TenantId,
        list: &ListGroups,
        clock: &dyn Clock,
    ) -> Result<(Vec<FailureGroup>, u64), Error> {
        let now = clock.now();
        let mut groups = self.failures.groups(tenant).await?;
        groups.retain(|g| {
            list.workflow.as_ref().is_none_or(|w| g.workflow_id == *w)
                && list.seen_after.is_none_or(|t| g.last_seen > t)
                && list.seen_before.is_none_or(|t| g.first_seen < t)
                && list.status.is_none_or(|status| g.status() == status)
        });
        groups.sort_by(|a, b| b.last_seen.cmp(&a.last_seen).then_with(|| b.id.as_str().cmp(a.id.as_str())));
        let total = groups.len() as u64;
        let page: Vec<FailureGroup> = groups.into_iter().skip(list.skip).take(list.take).collect();
        Ok((self.hourly_groups(tenant, page, now).await?, total))
    }

    /// `groups` with their failures per hour up to `now`, 16 groups at a time.
    async fn hourly_groups(
        &self,
        tenant: &TenantId,
        groups: Vec<FailureGroup>,
        now: DateTime<Utc>,
    ) -> Result<Vec<FailureGroup>, Error> {
        let mut counted = Vec::with_capacity(groups.len());
        let mut rest = groups.into_iter().peekable();
        while rest.peek().is_some() {
            let batch = rest.by_ref().take(16).map(|g| self.failures.hourly(tenant, g, now));
            counted.extend(futures_util::future::try_join_all(batch).await?);
        }
        Ok(counted)
    }

    /// The tenant's failure group `id` with its counts.
    ///
    /// # Errors
    /// [`Error::NotFound`], storage errors.
    pub async fn failure_group(
        &self,
        tenant: &TenantId,
        id: &FailureGroupId,
        clock: &dyn Clock,
    ) -> Result<FailureGroup, Error> {
        let group =
            self.failures.group(tenant, id).await?.ok_or_else(|| Error::not_found("failure group", id.as_str()))?;
        Ok(self.failures.hourly(tenant, group, clock.now()).await?)
    }

    /// Settles the open failures of group `id` as a person decided (resolve or ignore),
    /// each as [`Self::settle_failure`] settles one (its own transaction and webhook),
    /// at most [`GROUP_SETTLE_MAX`] per call. A failure settled meanwhile is left as it
    /// is.
    ///
    /// # Errors
    /// [`Error::NotFound`] for a group the tenant does not have, storage errors.
    pub async fn settle_group(
        &self,
        tenant: &TenantId,
        id: &FailureGroupId,
        settlement: Settlement,
        clock: &dyn Clock,
    ) -> Result<GroupSettled, Error> {
        let group =
            self.failures.group(tenant, id).await?.ok_or_else(|| Error::not_found("failure group", id.as_str()))?;
        let open = self.failures.group_failures(tenant, id, FailureStatus::Open, GROUP_SETTLE_MAX + 1).await?;
        let mut settled = 0;
        for failure in open.iter().take(GROUP_SETTLE_MAX) {
            // Whether this request changed it (not: found it settled already).
            let changed = std::sync::atomic::AtomicBool::new(false);
            let mark = |_: &Failure| changed.store(true, std::sync::atomic::Ordering::Relaxed);
            match self.settle_failure(tenant, &failure.id, settlement, clock, &mark).await {
                Ok(_) => settled += u64::from(changed.load(std::sync::atomic::Ordering::Relaxed)),
                // Ignored or resolved since the list was read (ignoring needs it open).
                Err(Error::InvalidState(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let group = self.failures.group(tenant, id).await?.unwrap_or(group);
        let group = self.failures.hourly(tenant, group, clock.now()).await?;
        Ok(GroupSettled { remaining: open.len() > GROUP_SETTLE_MAX, group, settled })
    }
}
