//! Workflows: what tenants register and start executions of. The operations of
//! `/workflows` (create, load, list, update, delete) are this module's functions, over a
//! [`WorkflowStore`].

pub mod model;
pub mod store;

use chrono::{DateTime, Utc};
use shared::TenantId;
use shared::dynamo::{Attempt, StoreError, retry_races};
use shared::ids::WorkflowId;
use shared::pagination::PageRequest;

use self::model::{NewWorkflow, Workflow, WorkflowChange};
use self::store::{DeleteError, ListFilter, WorkflowStore};
use crate::{BeforeCommit, Error};

/// Which versions a change may apply to (`If-Match`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Precondition {
    /// None asked: the last writer wins, but never on a stale read.
    None,
    /// Any current version (`*`).
    Any,
    /// One of these versions; empty when none was given in a readable form.
    Versions(Vec<u64>),
}

impl Precondition {
    /// Refuses `current` unless its version is one asked for.
    ///
    /// # Errors
    /// [`Error::VersionMismatch`] naming the current version.
    pub fn check(&self, current: &Workflow) -> Result<(), Error> {
        match self {
            Self::Versions(versions) if !versions.contains(&current.version) => {
                Err(Error::VersionMismatch { current: current.version })
            }
            _ => Ok(()),
        }
    }
}

/// The tenant's workflow `id`.
///
/// # Errors
/// [`Error::NotFound`], or the read's storage error.
pub async fn load(store: &WorkflowStore, tenant: &TenantId, id: &WorkflowId) -> Result<Workflow, Error> {
    store.get(tenant, id).await?.ok_or_else(|| Error::not_found("workflow", id.as_str()))
}

/// Registers a new workflow as `new` asks, at `now`, and counts it. `before_commit` sees
/// it just before its write is sent (the caller may render its answer then, to be stored
/// in the same transaction).
///
/// # Errors
/// Storage errors.
pub async fn create(
    store: &WorkflowStore,
    tenant: &TenantId,
    new: NewWorkflow,
    now: DateTime<Utc>,
    before_commit: BeforeCommit<'_, Workflow>,
) -> Result<Workflow, Error> {
    let workflow = Workflow::create(new, now);
    before_commit(&workflow);
    store.create(tenant, &workflow).await?;
    Ok(workflow)
}

/// One page of the tenant's workflows, newest first, and the total matching `filter`
/// (summaries: their `definition` is not read). A cursor must be one of the tenant's
/// workflows: it is checked while the page is read.
///
/// # Errors
/// [`Error::NotFound`] for a cursor the tenant does not have, storage errors.
pub async fn list(
    store: &WorkflowStore,
    tenant: &TenantId,
    filter: ListFilter,
    page: PageRequest,
    after: Option<&WorkflowId>,
) -> Result<(Vec<Workflow>, u64), Error> {
    let check = async {
        match after {
            Some(id) => load(store, tenant, id).await.map(|_| ()),
            None => Ok(()),
        }
    };
    let ((), listed) = tokio::try_join!(check, async { Ok(store.list(tenant, filter, page, after).await?) })?;
    Ok(listed)
}

/// Applies `change` to workflow `id` if `precondition` holds, conditioned on the version
/// read (read again after a lost race). Returns the workflow as it is now (unchanged
/// when the change changes nothing).
///
/// # Errors
/// [`Error::NotFound`], [`Error::VersionMismatch`], the rules' [`Error::InvalidState`],
/// storage errors.
pub async fn update(
    store: &WorkflowStore,
    tenant: &TenantId,
    id: &WorkflowId,
    precondition: &Precondition,
    change: &WorkflowChange,
    now: DateTime<Utc>,
) -> Result<Workflow, Error> {
    retry_races(|| async move {
        let current = load(store, tenant, id).await?;
        precondition.check(&current)?;
        let Some(next) = current.apply(change.clone(), now)? else { return Ok(Attempt::Done(current)) };
        match store.replace(tenant, &current, &next).await {
            Ok(()) => Ok(Attempt::Done(next)),
            Err(StoreError::ConditionFailed { .. }) => Ok(Attempt::Raced),
            Err(other) => Err(other.into()),
        }
    })
    .await
}

/// Deletes workflow `id` if `precondition` holds and it has no running or paused
/// execution.
///
/// # Errors
/// [`Error::NotFound`], [`Error::VersionMismatch`], [`Error::InvalidState`] while it has
/// running or paused executions, storage errors.
pub async fn delete(
    store: &WorkflowStore,
    tenant: &TenantId,
    id: &WorkflowId,
    precondition: &Precondition,
) -> Result<(), Error> {
    retry_races(|| async move {
        let current = load(store, tenant, id).await?;
        precondition.check(&current)?;
        match store.delete(tenant, &current).await {
            Ok(()) => Ok(Attempt::Done(())),
            Err(DeleteError::Changed) => Ok(Attempt::Raced),
            Err(DeleteError::Active) => Err(Error::InvalidState(format!(
                "workflow {id} has running or paused executions; complete, fail or cancel them first"
            ))),
            Err(DeleteError::Store(e)) => Err(e.into()),
        }
    })
    .await
}
