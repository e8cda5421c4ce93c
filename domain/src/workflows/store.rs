//! Workflows in DynamoDB.
//!
//! Table `workflows`: partition key `tenant_id`, sort key `id` (UUIDv7, so descending
//! order is newest first). Three sparse-free GSIs serve the filters without filter
//! expressions: `by_status` (`tenant_status`), `by_type` (`tenant_type`) and
//! `by_status_type` (`tenant_status_type`), each sorted by `id`. Totals come from
//! counters written in the same transaction as every create, change and delete. A fourth,
//! `by_name` (`tenant_name`, `ten_…#<name>`), finds a name's workflows; items written
//! before it existed get `tenant_name` from `cairn-admin migrate workflow-names`
//! ([`WorkflowStore::index_names`]).
//!
//! A workflow archived or deleted is closed: its executions counter item
//! (`executions|workflow=wf_…`) is [`counters::CLOSED`] in every shard, set in the
//! transaction that closes it and removed by the one that restores it. A start adds to
//! that item in one shard anyway, on the condition that it is not closed
//! ([`CounterChange::unless_closed`]), so no item is checked by every start of a busy
//! workflow and the check costs no operation of its own; the start has read the workflow
//! before (refusing one archived or gone), and the condition refuses one closed since.
//! The [`MARKERS`] closed markers an earlier version checked instead (`tenant_id` =
//! `ten_…#07`, `id` = `wf_…#closed`) are still written and deleted alike, for instances
//! of that version during a deploy.

use std::collections::BTreeMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem};
use serde::{Deserialize, Serialize};
use shared::TenantId;
use shared::body::WireEnum;
use shared::counters::{self, CounterChange};
use shared::dynamo::{
    Item, Part, StoreError, Table, Tables, Transaction, TransactionError, built, classify, get_item, n, newest_first,
    query_window_from, resume_after, s, transact,
};
use shared::ids::WorkflowId;
use shared::pagination::PageRequest;

use crate::retention::{Retention, RetentionRecord};

use crate::workflows::model::{Workflow, WorkflowStatus, WorkflowType, counter_name};

/// The stored form of a workflow.
#[derive(Debug, Serialize, Deserialize)]
struct WorkflowRecord {
    tenant_id: String,
    id: String,
    name: String,
    description: Option<String>,
    workflow_type: String,
    status: String,
    /// The definition as JSON text: exact, and far from the item size limit. Left out
    /// of list queries ([`SUMMARY_ATTRIBUTES`]).
    #[serde(default)]
    definition: Option<String>,
    metadata: BTreeMap<String, String>,
    version: u64,
    created_at: String,
    updated_at: String,
    tenant_status: String,
    tenant_type: String,
    tenant_status_type: String,
    /// `None` in items written before the `by_name` index (until migrated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tenant_name: Option<String>,
    /// Its own retention, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retention: Option<RetentionRecord>,
}

/// The attributes a list reads: every one but `definition`, so list items are summaries.
const SUMMARY_ATTRIBUTES: &[&str] = &[
    "tenant_id",
    "id",
    "name",
    "description",
    "workflow_type",
    "status",
    "metadata",
    "retention",
    "version",
    "created_at",
    "updated_at",
    "tenant_status",
    "tenant_type",
    "tenant_status_type",
];

impl WorkflowRecord {
    fn new(tenant: &TenantId, w: &Workflow) -> Result<Self, StoreError> {
        let t = tenant.as_str();
        let definition =
            w.definition.as_ref().map(serde_json::to_string).transpose().map_err(|e| StoreError::Other(Box::new(e)))?;
        Ok(Self {
            tenant_id: t.to_owned(),
            id: w.id.to_string(),
            name: w.name.clone(),
            description: w.description.clone(),
            workflow_type: w.workflow_type.wire().to_owned(),
            status: w.status.wire().to_owned(),
            definition,
            metadata: w.metadata.clone(),
            version: w.version,
            created_at: shared::time::format(w.created_at),
            updated_at: shared::time::format(w.updated_at),
            tenant_status: format!("{t}#{}", w.status.wire()),
            tenant_type: format!("{t}#{}", w.workflow_type.wire()),
            tenant_status_type: format!("{t}#{}#{}", w.status.wire(), w.workflow_type.wire()),
            tenant_name: Some(name_key(t, &w.name)),
            retention: w.retention.as_ref().map(RetentionRecord::of),
        })
    }

    fn into_workflow(self) -> Result<Workflow, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("workflow {}: {what}", self.id));
        Ok(Workflow {
            id: WorkflowId::parse(&self.id).ok_or_else(|| corrupt("id"))?,
            workflow_type: WorkflowType::from_wire(&self.workflow_type).ok_or_else(|| corrupt("workflow_type"))?,
            status: WorkflowStatus::from_wire(&self.status).ok_or_else(|| corrupt("status"))?,
            definition: self
                .definition
                .as_deref()
                .map(serde_json::from_str)
                .transpose()
                .map_err(|_| corrupt("definition"))?,
            created_at: shared::time::parse(&self.created_at).map_err(|_| corrupt("created_at"))?,
            updated_at: shared::time::parse(&self.updated_at).map_err(|_| corrupt("updated_at"))?,
            name: self.name,
            description: self.description,
            metadata: self.metadata,
            version: self.version,
            retention: self.retention.map(RetentionRecord::into_retention).transpose()?,
        })
    }
}

/// Why a delete did not happen.
#[derive(Debug, thiserror::Error)]
pub enum DeleteError {
    /// The workflow changed or was deleted since it was read.
    #[error("the workflow changed")]
    Changed,
    /// It has running or paused executions.
    #[error("the workflow has running or paused executions")]
    Active,
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The workflows of every tenant; each call is scoped to the tenant it is given.
#[derive(Debug, Clone)]
pub struct WorkflowStore {
    client: Client,
    tables: Tables,
}

/// Filters of the workflow list.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Only this status.
    pub status: Option<WorkflowStatus>,
    /// Only this type.
    pub workflow_type: Option<WorkflowType>,
    /// Only workflows of exactly this name.
    pub name: Option<String>,
}

/// The most workflows of one name a list with `name` reads (and counts): a name's
/// workflows are read together, since no counter exists per name.
pub const NAME_MATCHES_MAX: usize = 10_000;

/// The `by_name` index key of workflow name `name` of tenant `t`.
fn name_key(t: &str, name: &str) -> String {
    format!("{t}#{name}")
}

/// How many closed markers an archived or deleted workflow has.
pub const MARKERS: u8 = 16;

impl WorkflowStore {
    /// A store over `client` and the named tables.
    #[must_use]
    pub fn new(client: Client, tables: Tables) -> Self {
        Self { client, tables }
    }

    fn table(&self) -> &str {
        self.tables.name(Table::Workflows)
    }

    fn put(
        &self,
        tenant: &TenantId,
        w: &Workflow,
        condition: &str,
        expected: Option<u64>,
    ) -> Result<TransactWriteItem, StoreError> {
        let item = serde_dynamo::to_item(WorkflowRecord::new(tenant, w)?)?;
        let mut put = Put::builder().table_name(self.table()).set_item(Some(item)).condition_expression(condition);
        if let Some(version) = expected {
            put = put.expression_attribute_values(":expected", n(version));
        }
        Ok(TransactWriteItem::builder().put(put.build().map_err(|e| StoreError::Other(Box::new(e)))?).build())
    }

    async fn write(
        &self,
        tenant: &TenantId,
        mut items: Vec<TransactWriteItem>,
        change: &CounterChange,
    ) -> Result<(), StoreError> {
        items.extend(change.transact_items(&self.tables, tenant)?);
        transact(&self.client, items).await
    }

    /// The key of closed marker `marker` of workflow `id`.
    fn marker_key(tenant: &TenantId, id: &WorkflowId, marker: u8) -> Item {
        std::collections::HashMap::from([
            ("tenant_id".to_owned(), s(format!("{}#{marker:02}", tenant.as_str()))),
            ("id".to_owned(), s(format!("{id}#closed"))),
        ])
    }

    /// Writes (`closed`) or deletes every closed marker of workflow `id`.
    fn markers(&self, tenant: &TenantId, id: &WorkflowId, closed: bool) -> Result<Vec<TransactWriteItem>, StoreError> {
        (0..MARKERS)
            .map(|marker| {
                let key = Self::marker_key(tenant, id, marker);
                let operation = if closed {
                    let put = Put::builder().table_name(self.table()).set_item(Some(key)).build();
                    TransactWriteItem::builder().put(built(put)?).build()
                } else {
                    let delete = Delete::builder().table_name(self.table()).set_key(Some(key)).build();
                    TransactWriteItem::builder().delete(built(delete)?).build()
                };
                Ok(operation)
            })
            .collect()
    }

    /// Stores a new workflow and counts it.
    ///
    /// # Errors
    /// [`StoreError::ConditionFailed`] if the id exists (never, for a fresh id); the
    /// call's other [`StoreError`]s.
    pub async fn create(&self, tenant: &TenantId, w: &Workflow) -> Result<(), StoreError> {
        let put = self.put(tenant, w, "attribute_not_exists(id)", None)?;
        self.write(tenant, vec![put], &CounterChange::between(&[], &w.counters())).await
    }

    /// The workflow `id` of `tenant`, if it exists.
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn get(&self, tenant: &TenantId, id: &WorkflowId) -> Result<Option<Workflow>, StoreError> {
        let item = get_item(&self.client, self.table(), &[("tenant_id", tenant.as_str()), ("id", id.as_str())]).await?;
        item.map(decode).transpose()
    }

    /// The own retention of workflow `id` (`None`: it has none, or it is gone): one read
    /// of that attribute alone.
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn retention(&self, tenant: &TenantId, id: &WorkflowId) -> Result<Option<Retention>, StoreError> {
        let out = self
            .client
            .get_item()
            .table_name(self.table())
            .key("tenant_id", s(tenant.as_str()))
            .key("id", s(id.as_str()))
            .projection_expression("retention")
            .send()
            .await
            .map_err(classify)?;
        let Some(value) = out.item.and_then(|mut item| item.remove("retention")) else { return Ok(None) };
        let record: RetentionRecord = serde_dynamo::from_attribute_value(value)?;
        Ok(Some(record.into_retention()?))
    }

    /// Replaces `old` with `new` if the stored version is still `old.version`, and moves
    /// the counts.
    ///
    /// # Errors
    /// [`StoreError::ConditionFailed`] when the workflow changed or was deleted since it
    /// was read; the call's other [`StoreError`]s.
    pub async fn replace(&self, tenant: &TenantId, old: &Workflow, new: &Workflow) -> Result<(), StoreError> {
        let mut items = vec![self.put(tenant, new, "version = :expected", Some(old.version))?];
        let (was, is) = (old.status == WorkflowStatus::Archived, new.status == WorkflowStatus::Archived);
        if was != is {
            items.extend(self.markers(tenant, &new.id, is)?);
            let executions = counters::executions_of_workflow_item(new.id.as_str());
            items.extend(counters::closing(&self.tables, tenant, &executions, is, Vec::new())?);
        }
        self.write(tenant, items, &CounterChange::between(&old.counters(), &new.counters())).await
    }

    /// Opens workflow `w`'s executions counter item again, if `w` (read open) is still at
    /// its version: a restore by an earlier version, which knew only the closed markers,
    /// left it closed, and it would refuse every start.
    ///
    /// # Errors
    /// [`StoreError::ConditionFailed`] when the workflow changed since it was read; the
    /// call's other [`StoreError`]s.
    pub async fn reopen(&self, tenant: &TenantId, w: &Workflow) -> Result<(), StoreError> {
        let check = aws_sdk_dynamodb::types::ConditionCheck::builder()
            .table_name(self.table())
            .key("tenant_id", s(tenant.as_str()))
            .key("id", s(w.id.as_str()))
            .condition_expression("version = :expected")
            .expression_attribute_values(":expected", n(w.version));
        let mut items = vec![TransactWriteItem::builder().condition_check(built(check.build())?).build()];
        let executions = counters::executions_of_workflow_item(w.id.as_str());
        items.extend(counters::closing(&self.tables, tenant, &executions, false, Vec::new())?);
        transact(&self.client, items).await
    }

    /// Deletes `w` if the stored version is still `w.version` and it has no running or
    /// paused execution, and uncounts it.
    ///
    /// # Errors
    /// [`DeleteError::Changed`] when it changed or was deleted since it was read;
    /// [`DeleteError::Active`] while it has running or paused executions.
    pub async fn delete(&self, tenant: &TenantId, w: &Workflow) -> Result<(), DeleteError> {
        let delete = Delete::builder()
            .table_name(self.table())
            .key("tenant_id", s(tenant.as_str()))
            .key("id", s(w.id.as_str()))
            .condition_expression("version = :expected")
            .expression_attribute_values(":expected", n(w.version))
            .build()
            .map_err(|e| StoreError::Other(Box::new(e)))?;
        let mut tx = Transaction::new();
        tx.push(Part::Workflow, TransactWriteItem::builder().delete(delete).build());
        tx.extend(Part::Workflow, self.markers(tenant, &w.id, true)?);
        let active = ["running", "paused"].map(|status| counters::executions_of_workflow(w.id.as_str(), status));
        match counters::zero_now(&self.client, &self.tables, tenant, &active).await? {
            // Closed in each shard on the condition that it still counts none.
            Some(checks) => {
                let executions = counters::executions_of_workflow_item(w.id.as_str());
                tx.extend(Part::Active, counters::closing(&self.tables, tenant, &executions, true, checks)?);
            }
            None => return Err(DeleteError::Active),
        }
        tx.extend(Part::Counters, CounterChange::between(&w.counters(), &[]).transact_items(&self.tables, tenant)?);
        match tx.commit(&self.client).await {
            Ok(()) => Ok(()),
            // A count read as zero moved since (an execution started): read it again.
            Err(TransactionError::Condition(_)) => Err(DeleteError::Changed),
            Err(TransactionError::Store(e)) => Err(DeleteError::Store(e)),
            Err(too_large @ TransactionError::TooLarge { .. }) => {
                Err(DeleteError::Store(StoreError::Other(Box::new(too_large))))
            }
        }
    }

    /// One page of the tenant's workflows, newest first, and the total matching `filter`.
    /// The workflows are summaries: their `definition` is not read (`None`).
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn list(
        &self,
        tenant: &TenantId,
        filter: ListFilter,
        page: PageRequest,
        after: Option<&WorkflowId>,
    ) -> Result<(Vec<Workflow>, u64), StoreError> {
        if let Some(name) = &filter.name {
            return self.list_named(tenant, name, &filter, page, after).await;
        }
        let t = tenant.as_str();
        let (index, key, value) = match (filter.status, filter.workflow_type) {
            (None, None) => (None, "tenant_id", t.to_owned()),
            (Some(st), None) => (Some("by_status"), "tenant_status", format!("{t}#{}", st.wire())),
            (None, Some(ty)) => (Some("by_type"), "tenant_type", format!("{t}#{}", ty.wire())),
            (Some(st), Some(ty)) => {
                (Some("by_status_type"), "tenant_status_type", format!("{t}#{}#{}", st.wire(), ty.wire()))
            }
        };
        let start = after.map(|id| resume_after(t, ("id", s(id.as_str())), (key, &value)));
        let query = newest_first(&self.client, self.table(), index, (key, value));
        let total_name = counter_name(filter.status, filter.workflow_type);
        let (items, total) = tokio::try_join!(
            query_window_from(query, "id", start, page.skip(), page.page_size as usize, SUMMARY_ATTRIBUTES),
            counters::read(&self.client, &self.tables, tenant, &total_name),
        )?;
        let workflows = items.into_iter().map(decode).collect::<Result<Vec<_>, _>>()?;
        Ok((workflows, total))
    }

    /// [`WorkflowStore::list`] with a name: the keys, status and type of the name's
    /// workflows (at most [`NAME_MATCHES_MAX`], newest first) are read from `by_name`,
    /// filtered, counted and paged here, then the page's workflows are read by key (so
    /// what is held at once is small whatever the name's workflows hold).
    async fn list_named(
        &self,
        tenant: &TenantId,
        name: &str,
        filter: &ListFilter,
        page: PageRequest,
        after: Option<&WorkflowId>,
    ) -> Result<(Vec<Workflow>, u64), StoreError> {
        let t = tenant.as_str();
        let query = newest_first(&self.client, self.table(), Some("by_name"), ("tenant_name", name_key(t, name)));
        let entries =
            query_window_from(query, "id", None, 0, NAME_MATCHES_MAX, &["id", "status", "workflow_type"]).await?;
        let text = |item: &Item, name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
        let matching: Vec<String> = entries
            .iter()
            .filter(|item| {
                filter.status.is_none_or(|s| text(item, "status") == s.wire())
                    && filter.workflow_type.is_none_or(|w| text(item, "workflow_type") == w.wire())
            })
            .map(|item| text(item, "id"))
            .collect();
        let total = matching.len() as u64;
        let from = after.map_or(0, |a| matching.iter().take_while(|id| id.as_str() >= a.as_str()).count());
        let window: Vec<String> = matching.into_iter().skip(from + page.skip()).take(page.page_size as usize).collect();
        let keys = window
            .iter()
            .map(|id| std::collections::HashMap::from([("tenant_id".to_owned(), s(t)), ("id".to_owned(), s(id))]))
            .collect();
        let mut found: BTreeMap<String, Workflow> = BTreeMap::new();
        for item in shared::dynamo::batch_get(&self.client, self.table(), keys).await? {
            let mut workflow = decode(item)?;
            workflow.definition = None; // a list's items are summaries
            found.insert(workflow.id.to_string(), workflow);
        }
        // In the window's order; one deleted since the index was read is left out.
        Ok((window.iter().filter_map(|id| found.remove(id)).collect(), total))
    }

    /// Gives every workflow item written before the `by_name` index its `tenant_name`
    /// (one scan of the table, or one tenant's partition), so lists by name find it.
    /// Returns how many it changed. Safe while the service runs, and again: an item is
    /// changed only while it still has the name read and no `tenant_name`.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn index_names(&self, tenant: Option<&str>) -> Result<u64, StoreError> {
        // An item renamed or deleted since it was read was put whole, `tenant_name` included.
        shared::dynamo::backfill(&self.client, self.table(), tenant, |item| {
            let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
            let (Some(owner), Some(id), Some(name)) = (text("tenant_id"), text("id"), text("name")) else {
                return Ok(Vec::new());
            };
            if owner.contains('#') || item.contains_key("tenant_name") {
                return Ok(Vec::new());
            }
            Ok(vec![
                self.client
                    .update_item()
                    .table_name(self.table())
                    .key("tenant_id", s(&owner))
                    .key("id", s(&id))
                    .update_expression("SET tenant_name = :key")
                    .condition_expression("#name = :name AND attribute_not_exists(tenant_name)")
                    .expression_attribute_names("#name", "name")
                    .expression_attribute_values(":key", s(name_key(&owner, &name)))
                    .expression_attribute_values(":name", s(&name)),
            ])
        })
        .await
    }
}

fn decode(item: Item) -> Result<Workflow, StoreError> {
    serde_dynamo::from_item::<_, WorkflowRecord>(item)?.into_workflow()
}
