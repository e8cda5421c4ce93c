//! Expiry: ended executions, and their earlier checkpoints, deleted when the tenant's
//! retention says (`crate::retention`).
//!
//! An execution's ending fixes its lifetimes (`expires_at`, `checkpoints_expire_at`) and,
//! once committed, puts one marker per lifetime in the `jobs` table:
//! items `expire` and `trim` in the execution's partition there (`{tenant}#{exec_…}`),
//! each with its time as DynamoDB's TTL attribute `expires_at`. DynamoDB deletes a marker
//! once its time has passed (AWS: usually within days, often minutes), and its stream's
//! REMOVE record hands the jobs function the execution to look at ([`Runs::expire`]).
//! A `trim` due at the end (`keep_latest`) has no TTL: its INSERT is handed over at once.
//! A marker decides nothing: what is due is read from the execution (ended, and its
//! lifetime past), so a marker left by an earlier ending (before a replay) does nothing.
//! A round that runs out of time puts its marker again without TTL, so that the stream
//! hands it back at once; such a marker is deleted when its work is done.
//!
//! Expiring deletes checkpoints first (rounds of [`PURGE_CHECKPOINTS`]), then the
//! execution with its key, payloads, tags and counts in one transaction, exactly as
//! `DELETE /executions/{id}` does, but with no purge marker and nothing hidden: an
//! expiring execution's checkpoints may be read by id until they are deleted, and nothing
//! of a tenant's is shared by all its expiries (the hidden item is not written).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem};
use chrono::{DateTime, TimeDelta, Utc};
use shared::TenantId;
use shared::dynamo::{Attempt, Part, Table, Tables, Transaction, built, n, retry_races, s};
use shared::ids::{ExecutionId, WorkflowId};

use super::checkpoints::model::StoredCheckpoint;
use super::deletion::PURGE_CHECKPOINTS;
use super::executions::model::Execution;
use super::{Deleted, Runs};
use crate::Error;
use crate::retention::{Lifetimes, Standing};

/// Days after `cairn-admin migrate lifetimes` runs before the executions it gives
/// lifetimes to may expire, however long ago they ended: time to export, or to lengthen
/// the retention.
pub const GRACE_DAYS: i64 = 7;

/// What [`Runs::give_lifetimes`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GivenLifetimes {
    /// Ended executions found without lifetimes.
    pub found: u64,
    /// Those it gave lifetimes to (the others had changed meanwhile: replayed, deleted,
    /// or ended again with lifetimes of their own).
    pub given: u64,
}

/// What a marker asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// The execution expires.
    Expire,
    /// All its checkpoints but the one it stands at go.
    Trim,
}

impl Due {
    fn id(self) -> &'static str {
        match self {
            Self::Expire => "expire",
            Self::Trim => "trim",
        }
    }

    fn of(id: &str) -> Option<Self> {
        [Self::Expire, Self::Trim].into_iter().find(|due| due.id() == id)
    }

    /// When it is due on `e` (`None`: never, as it stands).
    fn at(self, e: &Execution) -> Option<DateTime<Utc>> {
        if !e.status.is_ended() {
            return None;
        }
        match self {
            Self::Expire => e.expires_at,
            Self::Trim => e.checkpoints_expire_at,
        }
    }
}

/// A marker as a stream record of the `jobs` table names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marked {
    /// Whose execution.
    pub tenant: TenantId,
    /// The execution.
    pub execution: ExecutionId,
    /// What is due.
    pub due: Due,
    /// Whether the marker was put to act at once (no TTL): it is deleted when done.
    pub now: bool,
}

/// The marker a stream record of the `jobs` table names: a REMOVE of a marker (its time
/// has come), or the INSERT or MODIFY of one with no TTL (due at once); `None` for any
/// other record.
#[must_use]
pub fn marked(record: &serde_json::Value) -> Option<Marked> {
    let data = &record["dynamodb"];
    let (image, now) = match record["eventName"].as_str()? {
        "REMOVE" => (&data["Keys"], false),
        "INSERT" | "MODIFY" if data["NewImage"].get("expires_at").is_none() => (&data["NewImage"], true),
        _ => return None,
    };
    let due = Due::of(image["id"]["S"].as_str()?)?;
    let (owner, execution) = image["tenant_id"]["S"].as_str()?.split_once('#')?;
    Some(Marked { tenant: shared::auth::stored::owner(owner)?, execution: ExecutionId::parse(execution)?, due, now })
}

/// The key of execution `id`'s marker of `due` in the `jobs` table.
fn marker_key(tenant: &TenantId, id: &ExecutionId, due: Due) -> [(&'static str, String); 2] {
    [("tenant_id", format!("{}#{id}", tenant.as_str())), ("id", due.id().to_owned())]
}

/// A put of execution `id`'s marker of `due`, with `at` as its TTL (`None`: due at once).
fn marker_put(tables: &Tables, tenant: &TenantId, id: &ExecutionId, due: Due, at: Option<DateTime<Utc>>) -> Put {
    let mut put = Put::builder().table_name(tables.name(Table::Jobs));
    for (name, value) in marker_key(tenant, id, due) {
        put = put.item(name, s(value));
    }
    if let Some(at) = at {
        put = put.item("expires_at", n(at.timestamp()));
    }
    put.build().expect("table, and the keys, are set")
}

impl Runs {
    /// Puts the markers of `e`'s lifetimes, once its ending has committed. Not in the
    /// ending's own transaction: DynamoDB Local stalls for seconds under concurrent
    /// transactions that also write the `jobs` table (its stream), which the tests'
    /// concurrent starts show. The cost: an ending whose invocation dies between its
    /// commit and this write leaves its execution without markers, kept until deleted
    /// (logged; docs/retention.md).
    pub(super) async fn mark_lifetimes(&self, tenant: &TenantId, e: &Execution) {
        for due in [Due::Expire, Due::Trim] {
            let Some(at) = due.at(e) else { continue };
            // Due at its end: handed over at once rather than at DynamoDB's TTL pace.
            let ttl = (Some(at) != e.ended_at).then_some(at);
            let put = marker_put(self.failures.tables(), tenant, &e.id, due, ttl);
            let sent =
                self.client().put_item().table_name(put.table_name()).set_item(Some(put.item().clone())).send().await;
            if let Err(error) = sent {
                let error = shared::dynamo::classify(error);
                tracing::error!(execution = %e.id, due = due.id(), error = %error, "expiry: a marker was not written; the execution is kept until deleted");
            }
        }
    }
}

impl Runs {
    /// The lifetimes of an execution of workflow `workflow` that ended at `ended`, under
    /// `standing` (the tenant's settings and plan): its workflow's own retention where
    /// the tenant has given any workflow one, else the tenant's.
    ///
    /// # Errors
    /// The workflow read's storage error.
    pub(super) async fn lifetimes(
        &self,
        tenant: &TenantId,
        standing: &Standing,
        workflow: &WorkflowId,
        ended: DateTime<Utc>,
    ) -> Result<Lifetimes, Error> {
        let own = if standing.overrides { self.workflows.retention(tenant, workflow).await? } else { None };
        Ok(own.as_ref().unwrap_or(&standing.retention).lifetimes(standing.plan, ended))
    }

    /// Gives every execution that ended before retention existed (no `expires_at`),
    /// of `tenant` or of every tenant, the lifetimes its settings give now, counted from
    /// its end but never sooner than [`GRACE_DAYS`] after `now`, and puts its markers.
    /// Safe while the service runs, and again: an execution is changed only while it is
    /// ended and has no lifetimes, on the version read.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn give_lifetimes(&self, tenant: Option<&TenantId>, now: DateTime<Utc>) -> Result<GivenLifetimes, Error> {
        let found = self.executions.ended_without_lifetimes(tenant).await?;
        let mut done = GivenLifetimes { found: u64::try_from(found.len()).unwrap_or(u64::MAX), given: 0 };
        let mut standings: HashMap<String, Standing> = HashMap::new();
        for (owner, id) in found {
            let Some(tenant) = shared::auth::stored::owner(&owner) else { continue };
            if !standings.contains_key(&owner) {
                let read = self.retention.read(&tenant).await?;
                standings.insert(owner.clone(), read);
            }
            let standing = &standings[&owner];
            if let Some(given) = self.give_lifetime(&tenant, &id, standing, now).await? {
                self.mark_lifetimes(&tenant, &given).await;
                done.given += 1;
            }
        }
        Ok(done)
    }

    /// [`Self::give_lifetimes`] for one execution: the execution as written, or `None`
    /// when it needed none.
    async fn give_lifetime(
        &self,
        tenant: &TenantId,
        id: &ExecutionId,
        standing: &Standing,
        now: DateTime<Utc>,
    ) -> Result<Option<Execution>, Error> {
        let soonest = now + TimeDelta::days(GRACE_DAYS);
        retry_races(|| async move {
            let Some(current) = self.executions.get(tenant, id).await? else {
                return Ok::<_, Error>(Attempt::Done(None));
            };
            let Some(ended) = current.ended_at.filter(|_| current.status.is_ended() && current.expires_at.is_none())
            else {
                return Ok(Attempt::Done(None));
            };
            let lifetimes = self.lifetimes(tenant, standing, &current.workflow_id, ended).await?;
            let mut next = current.clone();
            next.expires_at = Some(lifetimes.expires_at.max(soonest));
            next.checkpoints_expire_at = lifetimes.checkpoints_expire_at.map(|at| at.max(soonest));
            next.version += 1;
            let mut tx = Transaction::new();
            let none = shared::counters::CounterChange::default();
            self.executions.stage_replace(&mut tx, tenant, &current, &next, &none)?;
            match tx.commit(self.client()).await {
                Ok(()) => Ok(Attempt::Done(Some(next))),
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Execution])?),
            }
        })
        .await
    }

    /// One round of what `marked` asks for, if it is due at `now`: at most
    /// [`PURGE_CHECKPOINTS`] checkpoints deleted ([`Deleted::More`]: more to do), then,
    /// for an expiry, the execution itself; for a trim, its count of checkpoints and
    /// `checkpoints_expire_at` set. [`Deleted::Done`] when nothing (more) is due.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn expire(&self, marked: &Marked, now: DateTime<Utc>) -> Result<Deleted, Error> {
        let Marked { tenant, execution: id, due, .. } = marked;
        let Some(current) = self.executions.get(tenant, id).await? else { return Ok(Deleted::Done) };
        if due.at(&current).is_none_or(|at| at > now) {
            return Ok(Deleted::Done);
        }
        let listed = self.checkpoints.later_than(tenant, id, 0, PURGE_CHECKPOINTS).await?;
        let kept = match due {
            Due::Expire => None,
            Due::Trim => kept(&current, &listed),
        };
        let doomed: Vec<StoredCheckpoint> =
            listed.iter().filter(|c| Some(&c.checkpoint.id) != kept.as_ref()).cloned().collect();
        self.delete_checkpoints(tenant, &doomed).await?;
        if listed.len() == PURGE_CHECKPOINTS {
            return Ok(Deleted::More);
        }
        let left = u64::try_from(listed.len() - doomed.len()).unwrap_or(0);
        retry_races(|| async move {
            let Some(current) = self.executions.get(tenant, id).await? else {
                return Ok::<_, Error>(Attempt::Done(()));
            };
            if due.at(&current).is_none_or(|at| at > now) {
                return Ok(Attempt::Done(()));
            }
            let mut tx = Transaction::new();
            match due {
                Due::Expire => self.executions.stage_expire(&mut tx, tenant, &current)?,
                Due::Trim => {
                    let mut next = current.clone();
                    next.checkpoint_count = left;
                    next.checkpoints_expire_at = None;
                    next.version += 1;
                    let none = shared::counters::CounterChange::default();
                    self.executions.stage_replace(&mut tx, tenant, &current, &next, &none)?;
                }
            }
            match tx.commit(self.client()).await {
                Ok(()) => Ok(Attempt::Done(())),
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Execution])?),
            }
        })
        .await?;
        Ok(Deleted::Done)
    }

    /// Puts `marked`'s marker again, due at once: its work goes on in the next
    /// invocation.
    ///
    /// # Errors
    /// The write's storage error.
    pub async fn mark_again(&self, marked: &Marked) -> Result<(), Error> {
        let put = marker_put(self.failures.tables(), &marked.tenant, &marked.execution, marked.due, None);
        let mut tx = Transaction::new();
        tx.push(Part::Job, TransactWriteItem::builder().put(put).build());
        Ok(tx.commit(self.client()).await?)
    }

    /// Deletes `marked`'s marker (one put to act at once, its work done).
    ///
    /// # Errors
    /// The write's storage error.
    pub async fn unmark(&self, marked: &Marked) -> Result<(), Error> {
        let mut delete = Delete::builder().table_name(self.failures.tables().name(Table::Jobs));
        for (name, value) in marker_key(&marked.tenant, &marked.execution, marked.due) {
            delete = delete.key(name, s(value));
        }
        let mut tx = Transaction::new();
        tx.push(Part::Job, TransactWriteItem::builder().delete(built(delete.build())?).build());
        Ok(tx.commit(self.client()).await?)
    }
}

/// The checkpoint a trim keeps among `listed` (newest first): the one `e` stands at,
/// else its newest.
fn kept(e: &Execution, listed: &[StoredCheckpoint]) -> Option<shared::ids::CheckpointId> {
    e.current_checkpoint_id.clone().or_else(|| listed.first().map(|c| c.checkpoint.id.clone()))
}
