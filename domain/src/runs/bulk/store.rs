//! Bulk jobs in DynamoDB.
//!
//! Table `jobs` (`tenant_id`, `id`): a job's item in the tenant's partition (`bulk_…`,
//! UUIDv7, so descending order is newest first), rewritten whole by each round on the
//! condition that its round number and status are as read; in the job's own partition
//! (`{tenant}#{bulk_…}`), one marker per execution the job reached (id the execution's),
//! written with the action itself (or with the reason it was skipped) on the condition
//! that there is none yet, and beside it the round's entry for the execution
//! (`r{round}#{id}`), which the round's tally counts. The table's stream carries each job item to the jobs
//! function, whose round writes the item again: the rounds drive themselves.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use shared::TenantId;
use shared::body::WireEnum;
use shared::dynamo::{Item, Part, StoreError, Table, Tables, Transaction, TransactionError, built, get_item, n, s};
use shared::ids::{BulkJobId, ExecutionId, FailureGroupId, WorkflowId};

use super::model::{BulkAction, BulkFilter, BulkJob, JobStatus, Outcome, Tally};
use crate::runs::executions::model::ExecutionStatus;

/// How long an ended job stays readable.
pub const KEPT_DAYS: i64 = 90;
/// How long a job's markers stay (a job runs for minutes).
const MARKERS_KEPT_DAYS: i64 = 30;

/// The jobs of every tenant; each call is scoped to the tenant given.
#[derive(Debug, Clone)]
pub struct JobStore {
    client: Client,
    tables: Tables,
}

/// A job's filter as stored.
#[derive(Debug, Default, Serialize, Deserialize)]
struct FilterRecord {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    workflow_id: Option<String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    tags: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    failure_group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    created_after: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    created_before: Option<String>,
}

/// A job's item.
#[derive(Debug, Serialize, Deserialize)]
struct JobRecord {
    tenant_id: String,
    id: String,
    action: BulkAction,
    status: JobStatus,
    filter: FilterRecord,
    matched: u64,
    tally: Tally,
    credits_needed: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    round: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cursor: Option<String>,
    created_at: String,
    updated_at: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ended_at: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    expires_at: Option<i64>,
}

fn corrupt(what: &str) -> StoreError {
    StoreError::Corrupt(format!("a bulk job's {what}"))
}

fn time(raw: Option<&String>) -> Result<Option<DateTime<Utc>>, StoreError> {
    raw.map(|t| shared::time::parse(t).map_err(|_| corrupt("time"))).transpose()
}

impl JobRecord {
    fn new(tenant: &TenantId, job: &BulkJob) -> Self {
        let f = &job.filter;
        Self {
            tenant_id: tenant.as_str().to_owned(),
            id: job.id.to_string(),
            action: job.action,
            status: job.status,
            filter: FilterRecord {
                status: f.status.map(|s| s.wire().to_owned()),
                workflow_id: f.workflow_id.as_ref().map(ToString::to_string),
                tags: f.tags.iter().cloned().collect(),
                failure_group: f.failure_group.as_ref().map(ToString::to_string),
                error_type: f.error_type.clone(),
                created_after: f.created_after.map(shared::time::format),
                created_before: f.created_before.map(shared::time::format),
            },
            matched: job.matched,
            tally: job.tally.clone(),
            credits_needed: job.credits_needed,
            error: job.error.clone(),
            round: job.round,
            cursor: job.cursor.clone(),
            created_at: shared::time::format(job.created_at),
            updated_at: shared::time::format(job.updated_at),
            ended_at: job.ended_at.map(shared::time::format),
            expires_at: job.ended_at.map(|at| (at + Duration::days(KEPT_DAYS)).timestamp()),
        }
    }

    fn into_job(self) -> Result<BulkJob, StoreError> {
        let f = self.filter;
        let filter = BulkFilter {
            status: f
                .status
                .as_deref()
                .map(|s| ExecutionStatus::from_wire(s).ok_or_else(|| corrupt("status")))
                .transpose()?,
            workflow_id: f
                .workflow_id
                .as_deref()
                .map(|w| WorkflowId::parse(w).ok_or_else(|| corrupt("workflow")))
                .transpose()?,
            tags: f.tags.into_iter().collect(),
            failure_group: f
                .failure_group
                .as_deref()
                .map(|g| FailureGroupId::parse(g).ok_or_else(|| corrupt("group")))
                .transpose()?,
            error_type: f.error_type,
            created_after: time(f.created_after.as_ref())?,
            created_before: time(f.created_before.as_ref())?,
        };
        Ok(BulkJob {
            id: BulkJobId::parse(&self.id).ok_or_else(|| corrupt("id"))?,
            action: self.action,
            filter,
            status: self.status,
            matched: self.matched,
            tally: self.tally,
            credits_needed: self.credits_needed,
            error: self.error,
            round: self.round,
            cursor: self.cursor,
            created_at: time(Some(&self.created_at))?.ok_or_else(|| corrupt("time"))?,
            updated_at: time(Some(&self.updated_at))?.ok_or_else(|| corrupt("time"))?,
            ended_at: time(self.ended_at.as_ref())?,
        })
    }
}

/// The put of a job's (or an export's) `item` into `table`: a new one (`read` is `None`)
/// on the condition that it does not exist, else on the condition that its round and
/// status are still `read`'s.
pub(crate) fn job_put(table: &str, item: Item, read: Option<(u64, &str)>) -> Result<TransactWriteItem, StoreError> {
    let mut put = Put::builder().table_name(table).set_item(Some(item));
    put = match read {
        None => put.condition_expression("attribute_not_exists(id)"),
        Some((round, status)) => put
            .condition_expression("#round = :round AND #status = :status")
            .expression_attribute_names("#round", "round")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":round", n(round))
            .expression_attribute_values(":status", s(status)),
    };
    Ok(TransactWriteItem::builder().put(built(put.build())?).build())
}

/// The partition of job `job`'s markers.
fn markers_partition(tenant: &TenantId, job: &BulkJobId) -> String {
    format!("{}#{job}", tenant.as_str())
}

impl JobStore {
    /// A store over `client` and the named tables.
    #[must_use]
    pub fn new(client: Client, tables: Tables) -> Self {
        Self { client, tables }
    }

    fn table(&self) -> &str {
        self.tables.name(Table::Jobs)
    }

    /// Adds `next`, the job as it is to be, to `tx`: a new job (`read` is `None`) on the
    /// condition that it does not exist, else on the condition that its round and status
    /// are still `read`'s.
    ///
    /// # Errors
    /// [`StoreError`] if the operation cannot be built.
    pub fn stage_put(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        read: Option<&BulkJob>,
        next: &BulkJob,
    ) -> Result<(), StoreError> {
        let item = serde_dynamo::to_item(JobRecord::new(tenant, next))?;
        let read = read.map(|read| (read.round, read.status.wire()));
        tx.push(Part::Job, job_put(self.table(), item, read)?);
        Ok(())
    }

    /// The tenant's job `id` (a consistent read).
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn get(&self, tenant: &TenantId, id: &BulkJobId) -> Result<Option<BulkJob>, StoreError> {
        let item = get_item(&self.client, self.table(), &[("tenant_id", tenant.as_str()), ("id", id.as_str())]).await?;
        item.map(|item| serde_dynamo::from_item::<_, JobRecord>(item)?.into_job()).transpose()
    }

    /// A window of the tenant's jobs, newest first (after job `after`), and how many it
    /// has (counted up to `crate::runs::MAX_COUNTED`).
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn list(
        &self,
        tenant: &TenantId,
        after: Option<&BulkJobId>,
        skip: usize,
        take: usize,
    ) -> Result<(Vec<BulkJob>, u64), StoreError> {
        let partition = ("tenant_id", tenant.as_str().to_owned());
        let query = shared::dynamo::newest_first(&self.client, self.table(), None, partition);
        let start = after
            .map(|id| HashMap::from([("tenant_id".to_owned(), s(tenant.as_str())), ("id".to_owned(), s(id.as_str()))]));
        let (items, total) = tokio::try_join!(
            shared::dynamo::query_window_from(query.clone(), "id", start, skip, take, &[]),
            shared::dynamo::count(query.clone(), crate::runs::MAX_COUNTED),
        )?;
        let jobs = items
            .into_iter()
            .map(|item| serde_dynamo::from_item::<_, JobRecord>(item)?.into_job())
            .collect::<Result<Vec<_>, _>>()?;
        Ok((jobs, total))
    }

    /// What job `job` records when round `round` reaches execution `execution` with
    /// `outcome`: the execution's marker, on the condition that it has none yet (the job
    /// acts on an execution once), then the round's entry for it (`r{round}#{id}`, which
    /// the round's tally counts, however often the round ran).
    ///
    /// # Errors
    /// [`StoreError`] if an operation cannot be built.
    pub fn marker(
        &self,
        tenant: &TenantId,
        job: &BulkJobId,
        round: u64,
        execution: &ExecutionId,
        outcome: &Outcome,
        now: DateTime<Utc>,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let (name, reason) = match outcome {
            Outcome::Done => ("done", None),
            Outcome::Skipped(why) => ("skipped", Some(why)),
            Outcome::Failed(why) => ("failed", Some(why)),
        };
        let item = |id: String| {
            let mut item: Item = HashMap::from([
                ("tenant_id".to_owned(), s(markers_partition(tenant, job))),
                ("id".to_owned(), s(id)),
                ("outcome".to_owned(), s(name)),
                ("at".to_owned(), s(shared::time::format(now))),
                ("expires_at".to_owned(), n((now + Duration::days(MARKERS_KEPT_DAYS)).timestamp())),
            ]);
            if let Some(reason) = reason {
                item.insert("reason".to_owned(), s(reason));
            }
            item
        };
        let marker = Put::builder()
            .table_name(self.table())
            .set_item(Some(item(execution.to_string())))
            .condition_expression("attribute_not_exists(id)");
        let entry =
            Put::builder().table_name(self.table()).set_item(Some(item(round_entry(round, execution.as_str()))));
        Ok(vec![
            TransactWriteItem::builder().put(built(marker.build())?).build(),
            TransactWriteItem::builder().put(built(entry.build())?).build(),
        ])
    }

    /// Writes `marker` (from [`Self::marker`]) alone; nothing when the execution has a
    /// marker already.
    ///
    /// # Errors
    /// The write's [`StoreError`].
    pub async fn put_marker(&self, marker: Vec<TransactWriteItem>) -> Result<(), StoreError> {
        let mut tx = Transaction::new();
        tx.extend(Part::Job, marker);
        match tx.commit(&self.client).await {
            Ok(()) | Err(TransactionError::Condition(Part::Job)) => Ok(()),
            Err(TransactionError::Store(e)) => Err(e),
            Err(e) => Err(StoreError::Other(Box::new(e))),
        }
    }

    /// The tally of round `round` of job `job`: its entries (at most a round's
    /// executions), read consistently.
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn round_tally(&self, tenant: &TenantId, job: &BulkJobId, round: u64) -> Result<Tally, StoreError> {
        let out = self
            .client
            .query()
            .table_name(self.table())
            .consistent_read(true)
            .key_condition_expression("tenant_id = :p AND begins_with(id, :round)")
            .expression_attribute_values(":p", s(markers_partition(tenant, job)))
            .expression_attribute_values(":round", s(round_entry(round, "")))
            .send()
            .await
            .map_err(shared::dynamo::classify)?;
        let mut tally = Tally::default();
        for item in out.items() {
            let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
            tally.add(&match text("outcome").as_str() {
                "done" => Outcome::Done,
                "skipped" => Outcome::Skipped(text("reason")),
                "failed" => Outcome::Failed(text("reason")),
                _ => return Err(corrupt("marker")),
            });
        }
        Ok(tally)
    }
}

/// The id of round `round`'s entry for execution `id` (with `id` empty: the prefix of
/// the round's entries).
fn round_entry(round: u64, id: &str) -> String {
    format!("r{round:010}#{id}")
}
