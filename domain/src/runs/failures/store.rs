//! Failures in DynamoDB.
//!
//! Table `failures` (`tenant_id`, `id`): ids are UUIDv7, so `id` ranges are time ranges
//! and descending order is newest first; GSI `by_status` (`tenant_status`, `id`) serves
//! the status filter. Every change is a whole-item put conditioned on the version that
//! was read; totals come from counters changed in the same transaction.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use shared::TenantId;
use shared::body::WireEnum;
use shared::counters::{self, CounterChange};
use shared::dynamo::{Part, StoreError, Table, Tables, Transaction, batch_get, newest_first_in, query_window_from, s};
use shared::ids::{CommandId, ExecutionId, FailureId, WorkflowId, created_millis, id_range};

use super::model::{CommandStatus, Failure, FailureStatus, RecoveryCommand, SPAN_FAMILY, counter_name};
use crate::runs::ListFailures;
use crate::runs::storage::{self, MAX_COUNTED, put_item, start_after, timed_total};

/// The failures of every tenant; each call is scoped to the tenant given.
#[derive(Debug, Clone)]
pub struct FailureStore {
    client: Client,
    tables: Tables,
}

impl FailureStore {
    /// A store over `client` and the named tables.
    #[must_use]
    pub fn new(client: Client, tables: Tables) -> Self {
        Self { client, tables }
    }

    fn table(&self) -> &str {
        self.tables.name(Table::Failures)
    }

    /// The table names, to stage counter moves with.
    pub(crate) fn tables(&self) -> &Tables {
        &self.tables
    }

    /// Adds a new failure, its counts and the day's failure to `tx`.
    ///
    /// # Errors
    /// [`StoreError`] if an operation cannot be built.
    pub fn stage_create(&self, tx: &mut Transaction, tenant: &TenantId, f: &Failure) -> Result<(), StoreError> {
        let item = serde_dynamo::to_item(FailureRecord::new(tenant, f))?;
        tx.push(Part::Failure, put_item(self.table(), item, "attribute_not_exists(id)", None)?);
        let mut change = CounterChange::between(&[], &f.counters());
        change.add(&counters::daily("failures", f.created_at.date_naive()), 1);
        tx.extend(Part::Counters, change.transact_items(&self.tables, tenant)?);
        Ok(())
    }

    /// Adds the change of a failure from `old` to `new` to `tx`, without its counter
    /// moves, which are returned to join the transaction's one counter update.
    ///
    /// # Errors
    /// [`StoreError`] if an operation cannot be built.
    pub fn stage_replace(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        old: &Failure,
        new: &Failure,
    ) -> Result<CounterChange, StoreError> {
        let item = serde_dynamo::to_item(FailureRecord::new(tenant, new))?;
        tx.push(Part::Failure, put_item(self.table(), item, "version = :expected", Some(old.version))?);
        Ok(CounterChange::between(&old.counters(), &new.counters()))
    }

    /// The failures with these ids (missing ones are left out).
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn get_many(&self, tenant: &TenantId, ids: &[FailureId]) -> Result<Vec<Failure>, StoreError> {
        let keys = ids
            .iter()
            .map(|id| HashMap::from([("tenant_id".to_owned(), s(tenant.as_str())), ("id".to_owned(), s(id.as_str()))]))
            .collect();
        let items = batch_get(&self.client, self.table(), keys).await?;
        items.into_iter().map(|item| serde_dynamo::from_item::<_, FailureRecord>(item)?.into_failure()).collect()
    }

    /// Whether the tenant has the failure `id`.
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn exists(&self, tenant: &TenantId, id: &FailureId) -> Result<bool, StoreError> {
        storage::has(&self.client, self.table(), tenant.as_str(), id.as_str()).await
    }

    /// The window of the tenant's failures that `list` asks for, newest first, and the
    /// total matching (its cursor is not checked).
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn list(&self, tenant: &TenantId, list: &ListFailures) -> Result<(Vec<Failure>, u64), StoreError> {
        let ListFailures { status, created_after, created_before, .. } = *list;
        let t = tenant.as_str();
        let (index, key, value) = match status {
            None => (None, "tenant_id", t.to_owned()),
            Some(st) => (Some("by_status"), "tenant_status", format!("{t}#{}", st.wire())),
        };
        let table = self.table();
        let Some(window) = created_millis(created_after, created_before) else {
            return Ok((Vec::new(), 0));
        };
        let range = id_range(FailureId::PREFIX, window.0, window.1);
        let Some(start) =
            start_after(tenant.as_str(), (key, &value), &range, list.after.as_ref().map(FailureId::as_str))
        else {
            return Ok((Vec::new(), 0));
        };
        let query = newest_first_in(&self.client, table, index, (key, value), range);
        let timed = created_after.is_some() || created_before.is_some();
        let total = async {
            if timed && status.is_some() {
                shared::dynamo::count(query.clone(), MAX_COUNTED).await
            } else if timed {
                let family = (SPAN_FAMILY, shared::spans::ALL);
                timed_total(
                    &self.client,
                    &self.tables,
                    tenant,
                    std::slice::from_ref(&query),
                    FailureId::PREFIX,
                    family,
                    window,
                )
                .await
            } else {
                counters::read(&self.client, &self.tables, tenant, &counter_name(status)).await
            }
        };
        let (items, total) =
            tokio::try_join!(query_window_from(query.clone(), "id", start, list.skip, list.take, &[]), total)?;
        let failures = items
            .into_iter()
            .map(|item| serde_dynamo::from_item::<_, FailureRecord>(item)?.into_failure())
            .collect::<Result<Vec<_>, _>>()?;
        Ok((failures, total))
    }

    /// The tenant's counters `names`, in the order asked (0 for missing), in one batch
    /// read.
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn counters(&self, tenant: &TenantId, names: &[String]) -> Result<Vec<u64>, StoreError> {
        counters::read_many(&self.client, &self.tables, tenant, names).await
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct CommandRecord {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    status: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct FailureRecord {
    tenant_id: String,
    id: String,
    execution_id: String,
    workflow_id: String,
    error_type: String,
    message: String,
    /// JSON text of the details object.
    details: String,
    status: String,
    recovery_commands: Vec<CommandRecord>,
    version: u64,
    created_at: String,
    resolved_at: Option<String>,
    tenant_status: String,
}

impl FailureRecord {
    fn new(tenant: &TenantId, f: &Failure) -> Self {
        Self {
            tenant_id: tenant.as_str().to_owned(),
            id: f.id.to_string(),
            execution_id: f.execution_id.to_string(),
            workflow_id: f.workflow_id.to_string(),
            error_type: f.error_type.clone(),
            message: f.message.clone(),
            details: Value::Object(f.details.clone()).to_string(),
            status: f.status.wire().to_owned(),
            recovery_commands: f
                .recovery_commands
                .iter()
                .map(|c| CommandRecord {
                    id: c.id.to_string(),
                    kind: c.kind.clone(),
                    status: c.status.wire().to_owned(),
                })
                .collect(),
            version: f.version,
            created_at: shared::time::format(f.created_at),
            resolved_at: f.resolved_at.map(shared::time::format),
            tenant_status: format!("{}#{}", tenant.as_str(), f.status.wire()),
        }
    }

    fn into_failure(self) -> Result<Failure, StoreError> {
        let id = self.id.clone();
        let corrupt = |what: &str| StoreError::Corrupt(format!("failure {id}: {what}"));
        let time = |t: &str| shared::time::parse(t).map_err(|_| corrupt("timestamp"));
        let details: Map<String, Value> = serde_json::from_str(&self.details).map_err(|_| corrupt("details"))?;
        Ok(Failure {
            id: FailureId::parse(&self.id).ok_or_else(|| corrupt("id"))?,
            execution_id: ExecutionId::parse(&self.execution_id).ok_or_else(|| corrupt("execution_id"))?,
            workflow_id: WorkflowId::parse(&self.workflow_id).ok_or_else(|| corrupt("workflow_id"))?,
            error_type: self.error_type,
            message: self.message,
            details,
            status: FailureStatus::from_wire(&self.status).ok_or_else(|| corrupt("status"))?,
            recovery_commands: self
                .recovery_commands
                .into_iter()
                .map(|c| {
                    Ok(RecoveryCommand {
                        id: CommandId::parse(&c.id).ok_or_else(|| corrupt("command id"))?,
                        kind: c.kind,
                        status: CommandStatus::from_wire(&c.status).ok_or_else(|| corrupt("command status"))?,
                    })
                })
                .collect::<Result<_, StoreError>>()?,
            version: self.version,
            created_at: time(&self.created_at)?,
            resolved_at: self.resolved_at.as_deref().map(time).transpose()?,
        })
    }
}
