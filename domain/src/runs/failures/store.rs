//! Failures in DynamoDB.
//!
//! Table `failures` (`tenant_id`, `id`): ids are UUIDv7, so `id` ranges are time ranges
//! and descending order is newest first; GSI `by_status` (`tenant_status`, `id`) serves
//! the status filter, GSI `by_group` (`tenant_group_status`: `{tenant}#{group}#{status}`,
//! `id`) a group's failures (a failure recorded before groups has no entry there until
//! `cairn-admin migrate failure-groups` gives it one). Every change is a whole-item put conditioned on the version that
//! was read; totals come from counters changed in the same transaction, a group's too
//! (`groups|fg_…`: its counts by status, those a replay resolved and its latest failure,
//! sharded like every counter). A group's own item (`{tenant}#groups`: what it is, when
//! first seen) is written once, by its first failure.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use shared::TenantId;
use shared::body::WireEnum;
use shared::counters::{self, CounterChange};
use shared::dynamo::{Part, StoreError, Table, Tables, Transaction, batch_get, newest_first_in, query_window_from, s};
use shared::ids::{CommandId, ExecutionId, FailureGroupId, FailureId, WorkflowId, created_millis, id_range, millis_of};

use super::model::{
    CommandStatus, Failure, FailureGroup, FailureStatus, GROUP_HOURS, GROUP_LAST_SEEN, GROUP_REPLAYED, RecoveryCommand,
    ResolvedBy, SPAN_FAMILY, counter_name, group_counter, grouped, hours_since, per_hour,
};
use crate::runs::ListFailures;
use crate::runs::storage::{self, MAX_COUNTED, Source, merged_window, put_item, start_after, timed_total};

/// The failures of every tenant; each call is scoped to the tenant given.
#[derive(Debug, Clone)]
pub struct FailureStore {
    client: Client,
    tables: Tables,
    /// Groups (`{tenant}#{group}`) this instance found recorded.
    known_groups: std::sync::Arc<std::sync::Mutex<std::collections::HashSet<String>>>,
}

/// The most groups an instance remembers as recorded (then it forgets them all).
const KNOWN_GROUPS_MAX: usize = 10_000;

impl FailureStore {
    /// A store over `client` and the named tables.
    #[must_use]
    pub fn new(client: Client, tables: Tables) -> Self {
        Self { client, tables, known_groups: std::sync::Arc::default() }
    }

    fn table(&self) -> &str {
        self.tables.name(Table::Failures)
    }

    /// The table names, to stage counter moves with.
    pub(crate) fn tables(&self) -> &Tables {
        &self.tables
    }

    /// Adds a new failure, its counts (its group's too, stamped with its creation) and
    /// the day's failure to `tx`; and, when its group has no item yet (`recorded` false),
    /// the group's item, on condition that none exists (two first failures of a group:
    /// one commits, the other is a race, [`Part::Failure`], to plan again).
    ///
    /// # Errors
    /// [`StoreError`] if an operation cannot be built.
    pub fn stage_create(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        f: &Failure,
        recorded: bool,
    ) -> Result<(), StoreError> {
        let item = serde_dynamo::to_item(FailureRecord::new(tenant, f))?;
        tx.push(Part::Failure, put_item(self.table(), item, "attribute_not_exists(id)", None)?);
        if !recorded {
            tx.push(Part::Failure, TransactWriteItem::builder().update(self.group_made(tenant.as_str(), f)?).build());
        }
        let mut change = CounterChange::between(&[], &f.counters());
        change.add(&counters::daily("failures", f.created_at.date_naive()), 1);
        let seen = format!("{}@{GROUP_LAST_SEEN}", group_counter(&f.group_id));
        change.stamp(&seen, f.created_at.timestamp_millis());
        tx.extend(Part::Counters, change.transact_items(&self.tables, tenant)?);
        Ok(())
    }

    /// The put of `f`'s group's item (in the tenant's `#groups` partition), made by its
    /// first failure: what the group is, and when it was first seen. Written once: what
    /// each failure changes is in the group's counter item, sharded
    /// ([`group_counter`]).
    fn group_made(&self, tenant: &str, f: &Failure) -> Result<Update, StoreError> {
        let (what, values) = group_identity(f);
        Update::builder()
            .table_name(self.table())
            .key("tenant_id", s(groups_partition(tenant)))
            .key("id", s(f.group_id.as_str()))
            .update_expression(format!("{what}, last_seen = :at"))
            .condition_expression("attribute_not_exists(id)")
            .set_expression_attribute_values(Some(values))
            .build()
            .map_err(|e| StoreError::Other(Box::new(e)))
    }

    /// Whether group `group` of the tenant has its item (strongly consistent; a group
    /// once seen is remembered by this instance: a group's item is never deleted but
    /// with its tenant).
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn group_recorded(&self, tenant: &TenantId, group: &FailureGroupId) -> Result<bool, StoreError> {
        let known = format!("{}#{group}", tenant.as_str());
        if self.known_groups.lock().is_ok_and(|known_groups| known_groups.contains(&known)) {
            return Ok(true);
        }
        let partition = groups_partition(tenant.as_str());
        let key = [("tenant_id", partition.as_str()), ("id", group.as_str())];
        let found = shared::dynamo::get_item(&self.client, self.table(), &key).await?.is_some();
        if found && let Ok(mut known_groups) = self.known_groups.lock() {
            if known_groups.len() >= KNOWN_GROUPS_MAX {
                known_groups.clear();
            }
            known_groups.insert(known);
        }
        Ok(found)
    }

    /// The tenant's failure groups (at most [`GROUPS_READ_MAX`]) with their counts and
    /// when each was last seen: the group items (one query) and every group's counter
    /// item ([`counters::read_run`]: one query a shard), side by side (a tenant with more
    /// groups: the counter items of those read, by name, in batches); failures per hour
    /// not read ([`Self::hourly`]).
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn groups(&self, tenant: &TenantId) -> Result<Vec<FailureGroup>, StoreError> {
        let query = shared::dynamo::newest_first(
            &self.client,
            self.table(),
            None,
            ("tenant_id", groups_partition(tenant.as_str())),
        );
        let items = query_window_from(query, "id", None, 0, GROUPS_READ_MAX, &[]);
        let run = counters::read_run(&self.client, &self.tables, tenant, counters::GROUPS_RUN, GROUPS_READ_MAX);
        let (items, run) = tokio::try_join!(items, run)?;
        let groups = items
            .into_iter()
            .map(|item| serde_dynamo::from_item::<_, GroupRecord>(item)?.into_group())
            .collect::<Result<Vec<_>, StoreError>>()?;
        let counted = match run {
            Some(counted) => counted,
            // More groups than are read: the counter items of those read, by name.
            None => {
                let names: Vec<String> = groups.iter().map(|g| group_counter(&g.id)).collect();
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                counters::read_summed(&self.client, &self.tables, tenant, &names).await?
            }
        };
        Ok(groups
            .into_iter()
            .map(|g| {
                let summed = counted.get(&group_counter(&g.id));
                with_counts(g, summed)
            })
            .collect())
    }

    /// The tenant's failure group `id` with its counts (its item and its counter item,
    /// side by side); failures per hour not read ([`Self::hourly`]).
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn group(&self, tenant: &TenantId, id: &FailureGroupId) -> Result<Option<FailureGroup>, StoreError> {
        let partition = groups_partition(tenant.as_str());
        let key = [("tenant_id", partition.as_str()), ("id", id.as_str())];
        let counter = group_counter(id);
        let items = [counter.as_str()];
        let (item, counted) = tokio::try_join!(
            shared::dynamo::get_item(&self.client, self.table(), &key),
            counters::read_summed(&self.client, &self.tables, tenant, &items)
        )?;
        match item {
            Some(item) => {
                let group = serde_dynamo::from_item::<_, GroupRecord>(item)?.into_group()?;
                Ok(Some(with_counts(group, counted.get(&counter))))
            }
            None => Ok(None),
        }
    }

    /// `group` with its failures of each of the last hours up to `now`, from its
    /// entries in `by_group` made in those hours (a failure's id says when it was made:
    /// only those ids are read). The index is updated about a second after a write, so
    /// a failure just made may be missing here for that long (its counts are exact).
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn hourly(
        &self,
        tenant: &TenantId,
        mut group: FailureGroup,
        now: DateTime<Utc>,
    ) -> Result<FailureGroup, StoreError> {
        let latest = shared::ids::created_millis(None, None).map_or(u64::MAX, |(_, hi)| hi);
        let range = id_range(FailureId::PREFIX, hours_since(now), latest);
        let recent = FailureStatus::ALL.iter().map(|status| {
            let key = ("tenant_group_status", group_key(tenant, &group.id, *status));
            let query = newest_first_in(&self.client, self.table(), Some("by_group"), key, range.clone());
            shared::dynamo::count_keeping(query, "id", MAX_COUNTED, |_: &str| true)
        });
        let found = futures_util::future::try_join_all(recent).await?;
        group.per_hour = per_hour(found.iter().flat_map(|(_, ids)| ids).map(|id| millis_of(id)), now);
        Ok(group)
    }

    /// Up to `limit` of group `id`'s failures in `status`, newest first.
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn group_failures(
        &self,
        tenant: &TenantId,
        id: &FailureGroupId,
        status: FailureStatus,
        limit: usize,
    ) -> Result<Vec<Failure>, StoreError> {
        let key = ("tenant_group_status", group_key(tenant, id, status));
        let query = shared::dynamo::newest_first(&self.client, self.table(), Some("by_group"), key);
        let items = query_window_from(query, "id", None, 0, limit, &[]).await?;
        items.into_iter().map(|item| serde_dynamo::from_item::<_, FailureRecord>(item)?.into_failure()).collect()
    }

    /// Adds the change of a failure from `old` to `new` to `tx`, without its counter
    /// moves, which are returned to join the transaction's one counter update. A failure
    /// not yet counted in its group is from now on (its new status counted there).
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
        let new = &Failure { group_counted: true, ..new.clone() };
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
        if let Some(group) = &list.group {
            return self.list_group(tenant, group, list).await;
        }
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

    /// [`Self::list`] of one group's failures: its entries in `by_group` for the status
    /// asked (all three merged newest first when none); the total from the group's
    /// counters, or with a time range counted from those entries (up to [`MAX_COUNTED`]).
    async fn list_group(
        &self,
        tenant: &TenantId,
        group: &FailureGroupId,
        list: &ListFailures,
    ) -> Result<(Vec<Failure>, u64), StoreError> {
        let Some(window) = created_millis(list.created_after, list.created_before) else {
            return Ok((Vec::new(), 0));
        };
        let range = id_range(FailureId::PREFIX, window.0, window.1);
        let statuses = list.status.map_or_else(|| FailureStatus::ALL.to_vec(), |s| vec![s]);
        let key = "tenant_group_status";
        let mut sources = Vec::new();
        for status in statuses {
            let value = group_key(tenant, group, status);
            let after = list.after.as_ref().map(FailureId::as_str);
            let Some(start) = start_after(tenant.as_str(), (key, &value), &range, after) else {
                return Ok((Vec::new(), 0));
            };
            let query = newest_first_in(&self.client, self.table(), Some("by_group"), (key, value), range.clone());
            sources.push(Source { query, start });
        }
        let queries: Vec<_> = sources.iter().map(|source| source.query.clone()).collect();
        let timed = list.created_after.is_some() || list.created_before.is_some();
        let total = async {
            if !timed {
                let counter = group_counter(group);
                let items = [counter.as_str()];
                let counted = counters::read_summed(&self.client, &self.tables, tenant, &items).await?;
                let summed = counted.get(&counter);
                let statuses = list.status.map_or_else(|| FailureStatus::ALL.to_vec(), |s| vec![s]);
                return Ok(statuses.iter().map(|s| summed.map_or(0, |c| c.count(s.wire()))).sum());
            }
            let counts = queries.into_iter().map(|query| shared::dynamo::count(query, MAX_COUNTED));
            let counted: u64 = futures_util::future::try_join_all(counts).await?.into_iter().sum();
            Ok::<_, StoreError>(counted.min(MAX_COUNTED))
        };
        let keys = ["tenant_id", "id", key];
        let window = merged_window(sources, &keys, list.skip, list.take, &[]);
        let (items, total) = tokio::try_join!(window, total)?;
        let failures = items
            .into_iter()
            .map(|item| serde_dynamo::from_item::<_, FailureRecord>(item)?.into_failure())
            .collect::<Result<Vec<_>, _>>()?;
        Ok((failures, total))
    }

    /// Whether the tenant has failure group `group` (its item: written with its first
    /// failure).
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn group_exists(&self, tenant: &TenantId, group: &FailureGroupId) -> Result<bool, StoreError> {
        let partition = groups_partition(tenant.as_str());
        let key = [("tenant_id", partition.as_str()), ("id", group.as_str())];
        Ok(shared::dynamo::get_item(&self.client, self.table(), &key).await?.is_some())
    }

    /// Gives every failure recorded before groups its fingerprint, group and `by_group`
    /// entry, and its group an item (one scan of the table, or the failures of one
    /// tenant). Returns how many failures it changed. Safe while the service runs, and again: a failure is changed only while
    /// it still has the version read and no group.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn index_groups(&self, tenant: Option<&str>) -> Result<u64, StoreError> {
        // A failure changed since it was read was put whole, with its group.
        shared::dynamo::backfill(&self.client, self.table(), tenant, |item| {
            if item.contains_key("tenant_group_status") || !item.contains_key("tenant_status") {
                return Ok(Vec::new());
            }
            let record: FailureRecord = serde_dynamo::from_item(item)?;
            let (owner, version) = (record.tenant_id.clone(), record.version);
            let failure = record.into_failure()?;
            let own = self
                .client
                .update_item()
                .table_name(self.table())
                .key("tenant_id", s(&owner))
                .key("id", s(failure.id.as_str()))
                .update_expression("SET fingerprint = :f, group_id = :g, tenant_group_status = :k")
                .condition_expression("version = :v AND attribute_not_exists(tenant_group_status)")
                .expression_attribute_values(":f", s(&failure.fingerprint))
                .expression_attribute_values(":g", s(failure.group_id.as_str()))
                .expression_attribute_values(":k", s(group_key_of(&owner, &failure.group_id, failure.status)))
                .expression_attribute_values(":v", shared::dynamo::n(version));
            // Its group's item: what the group is (if new), then its first and last
            // failure moved to this one's creation where it is earlier or later.
            let (identity, values) = group_identity(&failure);
            let seen = shared::time::format(failure.created_at);
            let of_group = |expression: &str| {
                self.client
                    .update_item()
                    .table_name(self.table())
                    .key("tenant_id", s(groups_partition(&owner)))
                    .key("id", s(failure.group_id.as_str()))
                    .update_expression(expression)
                    .expression_attribute_values(":at", s(&seen))
            };
            let what = of_group(&identity).set_expression_attribute_values(Some(values));
            let first = of_group("SET first_seen = :at").condition_expression("first_seen > :at");
            let last = of_group("SET last_seen = :at")
                .condition_expression("attribute_not_exists(last_seen) OR last_seen < :at");
            Ok(vec![own, what, first, last])
        })
        .await
    }

    /// Counts in its group's counter item every failure recorded before those items
    /// (after [`Self::index_groups`] gave it its group): per failure, one transaction
    /// of its mark (`group_counted`, on condition that it still has the version read and
    /// is not counted) and its group's counts, so that a failure is counted once
    /// whether the migration or a change of the failure (which counts it too,
    /// [`Self::stage_replace`]) gets there first. Returns how many it counted. Safe while
    /// the service runs, and again.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn count_in_groups(&self, tenant: Option<&str>) -> Result<u64, StoreError> {
        let (mut counted, mut start) = (0, None);
        loop {
            let (items, next) = shared::dynamo::page_of(&self.client, self.table(), tenant, None, start).await?;
            for item in items {
                let grouped = item.contains_key("tenant_group_status") && item.contains_key("tenant_status");
                if !grouped || item.contains_key("group_counted") {
                    continue;
                }
                let record: FailureRecord = serde_dynamo::from_item(item)?;
                let (owner, version) = (record.tenant_id.clone(), record.version);
                let failure = Failure { group_counted: true, ..record.into_failure()? };
                let mark = Update::builder()
                    .table_name(self.table())
                    .key("tenant_id", s(&owner))
                    .key("id", s(failure.id.as_str()))
                    .update_expression("SET group_counted = :yes")
                    .condition_expression("version = :v AND attribute_not_exists(group_counted)")
                    .expression_attribute_values(":yes", AttributeValue::Bool(true))
                    .expression_attribute_values(":v", shared::dynamo::n(version));
                let mut operations =
                    vec![TransactWriteItem::builder().update(shared::dynamo::built(mark.build())?).build()];
                let group = group_counter(&failure.group_id);
                let names: Vec<String> =
                    failure.counters().into_iter().filter(|name| name.starts_with(group.as_str())).collect();
                let owner = shared::auth::stored::owner(&owner)
                    .ok_or_else(|| StoreError::Corrupt(format!("failure {} of no tenant", failure.id)))?;
                operations.extend(CounterChange::between(&[], &names).transact_items(&self.tables, &owner)?);
                match shared::dynamo::transact(&self.client, operations).await {
                    Ok(()) => counted += 1,
                    Err(StoreError::ConditionFailed { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
            match next {
                Some(key) => start = Some(key),
                None => return Ok(counted),
            }
        }
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
    /// `replay` or `request`; absent while not resolved (and on earlier failures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resolved_by: Option<String>,
    tenant_status: String,
    /// Absent on failures recorded before groups (then derived on reading).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    fingerprint: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    group_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tenant_group_status: Option<String>,
    /// Whether the failure is counted in its group's counter item (absent on failures
    /// recorded before those).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    group_counted: Option<bool>,
}

/// What failure `f`'s group is, set by its first failure (`SET …` each `if_not_exists`,
/// `first_seen` too), and the values it names (`:at` is `f`'s creation).
fn group_identity(f: &Failure) -> (String, HashMap<String, AttributeValue>) {
    let mut set = vec![
        "workflow_id = if_not_exists(workflow_id, :workflow)",
        "error_type = if_not_exists(error_type, :error_type)",
        "fingerprint = if_not_exists(fingerprint, :fingerprint)",
        "sample_message = if_not_exists(sample_message, :message)",
        "first_seen = if_not_exists(first_seen, :at)",
    ];
    let mut values = HashMap::from([
        (":workflow".to_owned(), s(f.workflow_id.as_str())),
        (":error_type".to_owned(), s(&f.error_type)),
        (":fingerprint".to_owned(), s(&f.fingerprint)),
        (":message".to_owned(), s(&f.message)),
        (":at".to_owned(), s(shared::time::format(f.created_at))),
    ]);
    if let Some(agent) = super::fingerprint::agent_of(&f.details) {
        set.push("agent_name = if_not_exists(agent_name, :agent)");
        values.insert(":agent".to_owned(), s(agent));
    }
    (format!("SET {}", set.join(", ")), values)
}

/// `group` with what its counter item says (summed over its shards; `None`: never
/// written): its counts, those a replay resolved, and its latest failure when later than
/// its item's `last_seen` (which a version before the counter items moved with each
/// failure).
fn with_counts(mut group: FailureGroup, summed: Option<&counters::Summed>) -> FailureGroup {
    let Some(summed) = summed else { return group };
    group.counts =
        [FailureStatus::Open, FailureStatus::Resolved, FailureStatus::Ignored].map(|s| summed.count(s.wire()));
    group.resolved_by_replay = summed.count(GROUP_REPLAYED);
    if let Some(seen) = summed.latest(GROUP_LAST_SEEN).and_then(DateTime::from_timestamp_millis) {
        group.last_seen = group.last_seen.max(seen);
    }
    group
}

/// The most failure groups a list of them reads (a tenant's groups are its distinct
/// causes of failure: beyond this, the list covers those it read).
pub const GROUPS_READ_MAX: usize = 1_000;

/// The partition of a tenant's failure group items.
fn groups_partition(tenant: &str) -> String {
    format!("{tenant}#groups")
}

/// A failure group's item.
#[derive(Debug, Serialize, Deserialize)]
struct GroupRecord {
    id: String,
    workflow_id: String,
    error_type: String,
    #[serde(default)]
    agent_name: Option<String>,
    fingerprint: String,
    sample_message: String,
    first_seen: String,
    last_seen: String,
}

impl GroupRecord {
    fn into_group(self) -> Result<FailureGroup, StoreError> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("failure group {}: {what}", self.id));
        let time = |t: &str| shared::time::parse(t).map_err(|_| corrupt("timestamp"));
        Ok(FailureGroup {
            id: FailureGroupId::parse(&self.id).ok_or_else(|| corrupt("id"))?,
            workflow_id: WorkflowId::parse(&self.workflow_id).ok_or_else(|| corrupt("workflow_id"))?,
            first_seen: time(&self.first_seen)?,
            last_seen: time(&self.last_seen)?,
            error_type: self.error_type,
            agent_name: self.agent_name,
            fingerprint: self.fingerprint,
            sample_message: self.sample_message,
            counts: [0; 3],
            resolved_by_replay: 0,
            per_hour: [0; GROUP_HOURS],
        })
    }
}

/// A group's key in `by_group` for one status.
fn group_key(tenant: &TenantId, group: &FailureGroupId, status: FailureStatus) -> String {
    group_key_of(tenant.as_str(), group, status)
}

fn group_key_of(tenant: &str, group: &FailureGroupId, status: FailureStatus) -> String {
    format!("{tenant}#{group}#{}", status.wire())
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
            resolved_by: f.resolved_by.map(|by| by.wire().to_owned()),
            tenant_status: format!("{}#{}", tenant.as_str(), f.status.wire()),
            fingerprint: Some(f.fingerprint.clone()),
            group_id: Some(f.group_id.to_string()),
            tenant_group_status: Some(group_key(tenant, &f.group_id, f.status)),
            group_counted: f.group_counted.then_some(true),
        }
    }

    fn into_failure(self) -> Result<Failure, StoreError> {
        let id = self.id.clone();
        let corrupt = |what: &str| StoreError::Corrupt(format!("failure {id}: {what}"));
        let time = |t: &str| shared::time::parse(t).map_err(|_| corrupt("timestamp"));
        let details: Map<String, Value> = serde_json::from_str(&self.details).map_err(|_| corrupt("details"))?;
        let workflow_id = WorkflowId::parse(&self.workflow_id).ok_or_else(|| corrupt("workflow_id"))?;
        let (fingerprint, group_id) = match (self.fingerprint, self.group_id.as_deref().and_then(FailureGroupId::parse))
        {
            (Some(fingerprint), Some(group)) => (fingerprint, group),
            _ => grouped(&workflow_id, &self.error_type, &self.message, &details),
        };
        Ok(Failure {
            id: FailureId::parse(&self.id).ok_or_else(|| corrupt("id"))?,
            execution_id: ExecutionId::parse(&self.execution_id).ok_or_else(|| corrupt("execution_id"))?,
            workflow_id,
            error_type: self.error_type,
            message: self.message,
            details,
            fingerprint,
            group_id,
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
            resolved_by: self.resolved_by.as_deref().and_then(ResolvedBy::from_wire),
            group_counted: self.group_counted.unwrap_or(false),
        })
    }
}
