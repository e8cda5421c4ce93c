//! Counters behind every list's `total` and every statistic: small items changed in
//! the same DynamoDB transaction as the write they count, so a total never costs a scan
//! and never disagrees with the data.
//!
//! A counter name describes a filter combination of a list, for example
//! `workflows`, `workflows|status=draft`, `workflows|status=draft|type=crewai`.
//!
//! **Shards.** No counter is one item: each is spread over [`SHARDS`] items. A write
//! adds its whole change to one shard, chosen at random, so no item takes more than
//! 1/[`SHARDS`] of a tenant's counting, and a read adds the shards up (one batch read of
//! strongly consistent items, or one query per shard for a run of span counters,
//! [`crate::spans`]). A shard alone means nothing (it may be negative: an execution
//! counted running in one shard and completed in another); only the sum is a count. A
//! condition on a count ([`zero_now`]) reads every shard and conditions the write on each
//! still holding what was read.
//!
//! **Partitions.** Each shard of each counter item is in a partition of its own
//! ([`partition`]: `tenant_id` = `ten_…#07#workflows|status=draft`), a run of span
//! counters sharing one (`ten_…#07#span|executions|m`, queried by time), so a start's
//! dozen counter items are a dozen partitions, each taking 1/[`SHARDS`] of the starts:
//! no partition takes the sum of a write's counting.
//!
//! **Runs.** The counter items of one run share a partition per shard, so that one query
//! a shard reads them all: a span run (`span|executions|m|…`, [`crate::spans`]), and the
//! failure groups' (`groups|fg_…`, one item per group, every group of a tenant read at
//! once).
//!
//! **Wide items.** Counters read together share an item, one attribute each: the counts
//! of executions by status are attributes of `executions` (`executions@running`), and
//! those of a workflow's of `executions|workflow=wf_…`; failures', of `failures`; a day's
//! failures, of `daily|2026-12-05`; a day's attempts and an hour's or day's usage, of
//! the executions' span item of that day or hour (`crate::spans::EXECUTION_SPANS`). A
//! write then changes one item per
//! scope, whatever moved between statuses. DynamoDB refuses a transaction that names
//! one item twice, so the changes of one transaction that may touch the same item go in
//! one [`CounterChange`] (and [`zero_now`] takes every count of an item at once).
//!
//! Items of earlier layouts (`tenant_id` the bare tenant id: one item per counter; or
//! `ten_…#07`: every counter of a shard in one partition; both with a status's count in
//! an item of its own) are moved into this one by [`fold_legacy`](crate::counter_layouts::fold_legacy)
//! (`cairn-admin migrate counter-shards`, [`crate::counter_layouts`]), the bare ones into
//! shard 0.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, TransactWriteItem, Update};

use crate::TenantId;
use crate::dynamo::{Item, StoreError, Table, Tables, built, n, s};

/// How many items (and partitions) each of a tenant's counters is spread over.
pub const SHARDS: u8 = 16;

/// The partition key (`tenant_id`) of counter item `item` in `tenant`'s shard `shard`:
/// the item's name after the shard, a span counter's without its index ([`run_of`]).
#[must_use]
pub fn partition(tenant: &str, shard: u8, item: &str) -> String {
    format!("{tenant}#{shard:02}#{}", run_of(item).unwrap_or(item))
}

/// What every span counter item's name starts with ([`crate::spans`]:
/// `span|{family}|{level}|{index}`).
pub const SPAN_PREFIX: &str = "span|";

/// What the name of every failure group's counter item starts with (`groups|fg_…`).
pub const GROUPS_PREFIX: &str = "groups|";

/// The run of the failure groups' counter items ([`run_of`]).
pub const GROUPS_RUN: &str = "groups";

/// The run a counter item belongs to (its name without its last part: a span counter's
/// `span|executions|m`, a failure group's `groups`), whose items share a partition so
/// that a run of them is one query a shard; `None` for any other counter item.
#[must_use]
pub fn run_of(item: &str) -> Option<&str> {
    if !item.starts_with(SPAN_PREFIX) && !item.starts_with(GROUPS_PREFIX) {
        return None;
    }
    item.rsplit_once('|').map(|(run, _)| run)
}

/// The key of counter item `item` in `tenant`'s shard `shard`.
#[must_use]
pub fn key(tenant: &str, shard: u8, item: &str) -> Item {
    HashMap::from([("tenant_id".to_owned(), s(partition(tenant, shard, item))), ("name".to_owned(), s(item))])
}

/// A shard for one write, at random (shard 0 should randomness fail: still exact).
pub fn any_shard() -> u8 {
    getrandom::u32().map_or(0, |x| u8::try_from(x % u32::from(SHARDS)).unwrap_or(0))
}

/// The counter of a workflow's executions in one status (an attribute of the workflow's
/// executions counter). Shared because the workflows function refuses to delete a
/// workflow while it has running or paused executions.
#[must_use]
pub fn executions_of_workflow(workflow_id: &str, status: &str) -> String {
    format!("{}{ATTRIBUTE_MARK}{status}", executions_of_workflow_item(workflow_id))
}

/// The counter item of a workflow's executions (its statuses' counts as attributes), which
/// a start adds to and which is [`CLOSED`] while the workflow is archived or deleted.
#[must_use]
pub fn executions_of_workflow_item(workflow_id: &str) -> String {
    format!("executions|workflow={workflow_id}")
}

/// The counter of one day's events of a kind (`failures`), for rates over a window of
/// days. One item a day holds every kind as its own attribute, so a window of 30 days is
/// 30 small items. `day` is the UTC date.
#[must_use]
pub fn daily(kind: &str, day: chrono::NaiveDate) -> String {
    format!("daily|{day}{ATTRIBUTE_MARK}{kind}")
}

/// Separates an item's name from the attribute a counter lives in (`value` when absent).
pub(crate) const ATTRIBUTE_MARK: char = '@';

pub(crate) fn item_and_attribute(name: &str) -> (&str, &str) {
    name.split_once(ATTRIBUTE_MARK).unwrap_or((name, VALUE))
}

/// Attribute holding a counter's value.
pub(crate) const VALUE: &str = "value";

/// An item's attributes and the numbers a write gives them.
type Attributes<'a> = Vec<(&'a str, i64)>;

/// The net changes to a tenant's counters made by one write: counts added to, and times
/// (milliseconds) an item's attribute is set to, the latest of one write's kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CounterChange {
    pub(crate) deltas: BTreeMap<String, i64>,
    stamps: BTreeMap<String, i64>,
    /// Items whose update holds only while they are not closed ([`Self::unless_closed`]).
    open_only: std::collections::BTreeSet<String>,
}

/// The attribute of a counter item that closes it to writes made
/// [`CounterChange::unless_closed`] (`true`; a workflow's executions counter item, in every
/// shard, while the workflow is archived or deleted: [`closing`]).
pub const CLOSED: &str = "closed";

impl CounterChange {
    /// The change from an item counted under `before` to one counted under `after`
    /// (either may be empty: creation or deletion). Names in both cancel out.
    #[must_use]
    pub fn between(before: &[String], after: &[String]) -> Self {
        let mut change = Self::default();
        for name in before {
            change.add(name, -1);
        }
        for name in after {
            change.add(name, 1);
        }
        change
    }

    /// Adds `delta` to `name`; a net zero drops the name.
    pub fn add(&mut self, name: &str, delta: i64) {
        let value = self.deltas.entry(name.to_owned()).or_default();
        *value += delta;
        if *value == 0 {
            self.deltas.remove(name);
        }
    }

    /// Sets `name` (`item@attribute`) to the time `millis` in the shard written (a read
    /// takes the latest of the shards: [`Summed::latest`]); of two stamps of one name, the
    /// later is kept.
    pub fn stamp(&mut self, name: &str, millis: i64) {
        let value = self.stamps.entry(name.to_owned()).or_insert(millis);
        *value = (*value).max(millis);
    }

    /// Merges another change into this one.
    pub fn merge(&mut self, other: &Self) {
        for (name, delta) in &other.deltas {
            self.add(name, *delta);
        }
        for (name, millis) in &other.stamps {
            self.stamp(name, *millis);
        }
        self.open_only.extend(other.open_only.iter().cloned());
    }

    /// Makes the update of counter item `item` (which this change writes) hold only while
    /// the item is not [`CLOSED`]: the transaction fails on it otherwise. A start of an
    /// execution so checks that its workflow was not archived or deleted since it was
    /// read, on the workflow's counter item it adds to anyway (one shard of 16, at random).
    pub fn unless_closed(&mut self, item: &str) {
        self.open_only.insert(item.to_owned());
    }

    /// Whether nothing changes.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.deltas.is_empty() && self.stamps.is_empty()
    }

    /// One update per changed counter item (`ADD` its counts, `SET` its stamps), all in
    /// one shard chosen at random, to join the write's transaction.
    ///
    /// # Errors
    /// [`StoreError::Other`] if an update cannot be built (a bug).
    pub fn transact_items(&self, tables: &Tables, tenant: &TenantId) -> Result<Vec<TransactWriteItem>, StoreError> {
        self.transact_items_in(tables, tenant.as_str(), any_shard())
    }

    /// [`CounterChange::transact_items`] in shard `shard` of the tenant whose id is
    /// `tenant`.
    pub(crate) fn transact_items_in(
        &self,
        tables: &Tables,
        tenant: &str,
        shard: u8,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        // Per item: its adds, then its stamps.
        let mut by_item: BTreeMap<&str, (Attributes, Attributes)> = BTreeMap::new();
        for (name, delta) in &self.deltas {
            let (item, attribute) = item_and_attribute(name);
            by_item.entry(item).or_default().0.push((attribute, *delta));
        }
        for (name, millis) in &self.stamps {
            let (item, attribute) = item_and_attribute(name);
            by_item.entry(item).or_default().1.push((attribute, *millis));
        }
        by_item
            .into_iter()
            .map(|(item, (adds, stamps))| {
                let mut update =
                    Update::builder().table_name(tables.name(Table::Counters)).set_key(Some(key(tenant, shard, item)));
                let (mut clauses, mut at) = (Vec::new(), 0);
                for (kind, changes) in [("ADD", adds), ("SET", stamps)] {
                    let mut parts = Vec::new();
                    for (attribute, value) in changes {
                        at += 1;
                        parts.push(if kind == "ADD" { format!("#a{at} :d{at}") } else { format!("#a{at} = :d{at}") });
                        update = update
                            .expression_attribute_names(format!("#a{at}"), attribute)
                            .expression_attribute_values(format!(":d{at}"), n(value));
                    }
                    if !parts.is_empty() {
                        clauses.push(format!("{kind} {}", parts.join(", ")));
                    }
                }
                if self.open_only.contains(item) {
                    update = update
                        .condition_expression("attribute_not_exists(#closed)")
                        .expression_attribute_names("#closed", CLOSED);
                }
                let update =
                    update.update_expression(clauses.join(" ")).build().map_err(|e| StoreError::Other(Box::new(e)))?;
                Ok(TransactWriteItem::builder().update(update).build())
            })
            .collect()
    }
}

/// When counters `names` of `tenant` are all zero now: the conditions that keep them so,
/// to join a transaction (each shard of each item still holds what was read, so a write
/// that counts in any shard meanwhile fails the transaction, to be read again), one
/// condition check per shard of each item (names of one item share it); `None` while any
/// is not zero.
///
/// # Errors
/// The read's [`StoreError`].
pub async fn zero_now(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    names: &[String],
) -> Result<Option<Vec<TransactWriteItem>>, StoreError> {
    let mut by_item: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for name in names {
        let (item, attribute) = item_and_attribute(name);
        by_item.entry(item).or_default().push(attribute);
    }
    let items: Vec<&str> = by_item.keys().copied().collect();
    let shards = read_shards(client, tables, tenant, &items).await?;
    let mut checks = Vec::new();
    for (item, attributes) in &by_item {
        let mut conditions: Vec<Vec<(&str, Option<i64>)>> = vec![Vec::new(); usize::from(SHARDS)];
        for attribute in attributes {
            let mut sum = 0;
            for shard in 0..SHARDS {
                let value = value_in(&shards, shard, item, attribute)?;
                sum += value.unwrap_or(0);
                conditions[usize::from(shard)].push((attribute, value));
            }
            if sum != 0 {
                return Ok(None);
            }
        }
        for (shard, held) in (0..SHARDS).zip(conditions) {
            let mut check = ConditionCheck::builder().table_name(tables.name(Table::Counters)).set_key(Some(key(
                tenant.as_str(),
                shard,
                item,
            )));
            let mut expression = Vec::new();
            for (i, (attribute, value)) in held.into_iter().enumerate() {
                check = check.expression_attribute_names(format!("#a{i}"), attribute);
                match value {
                    None => expression.push(format!("attribute_not_exists(#a{i})")),
                    Some(v) => {
                        expression.push(format!("#a{i} = :r{i}"));
                        check = check.expression_attribute_values(format!(":r{i}"), n(v));
                    }
                }
            }
            let check = check.condition_expression(expression.join(" AND "));
            checks.push(TransactWriteItem::builder().condition_check(built(check.build())?).build());
        }
    }
    Ok(Some(checks))
}

/// The operations that close (`closed`: set [`CLOSED`]) or open again counter item `item`
/// of `tenant` in every shard, to join a transaction: `checks` ([`zero_now`]'s, of this
/// item or not) become the updates' conditions where they name the same shard (DynamoDB
/// refuses a transaction that names an item twice); the others are returned as they are.
///
/// # Errors
/// [`StoreError::Other`] if an update cannot be built (a bug).
pub fn closing(
    tables: &Tables,
    tenant: &TenantId,
    item: &str,
    closed: bool,
    checks: Vec<TransactWriteItem>,
) -> Result<Vec<TransactWriteItem>, StoreError> {
    let mut kept = Vec::new();
    let mut conditions: HashMap<String, ConditionCheck> = HashMap::new();
    for operation in checks {
        match operation.condition_check() {
            Some(check) if check.key().get("name").and_then(|v| v.as_s().ok()).map(String::as_str) == Some(item) => {
                let partition = check.key().get("tenant_id").and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
                conditions.insert(partition, check.clone());
            }
            _ => kept.push(operation),
        }
    }
    for shard in 0..SHARDS {
        let key = key(tenant.as_str(), shard, item);
        let partition = key.get("tenant_id").and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
        let mut update = Update::builder().table_name(tables.name(Table::Counters)).set_key(Some(key));
        update = if closed {
            update
                .update_expression("SET #closed = :closed")
                .expression_attribute_values(":closed", AttributeValue::Bool(true))
        } else {
            update.update_expression("REMOVE #closed")
        };
        update = update.expression_attribute_names("#closed", CLOSED);
        if let Some(check) = conditions.remove(&partition) {
            update = update.condition_expression(check.condition_expression()).set_expression_attribute_values(match (
                closed,
                check.expression_attribute_values(),
            ) {
                (true, Some(values)) => {
                    let mut values = values.clone();
                    values.insert(":closed".to_owned(), AttributeValue::Bool(true));
                    Some(values)
                }
                (true, None) => Some(HashMap::from([(":closed".to_owned(), AttributeValue::Bool(true))])),
                (false, values) => values.cloned(),
            });
            for (name, attribute) in check.expression_attribute_names().into_iter().flatten() {
                update = update.expression_attribute_names(name, attribute);
            }
        }
        kept.push(TransactWriteItem::builder().update(built(update.build())?).build());
    }
    Ok(kept)
}

/// Every shard of the counter items `items` of `tenant`, by (shard, item): batch reads of
/// strongly consistent items, side by side.
async fn read_shards(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    items: &[&str],
) -> Result<HashMap<(u8, String), Item>, StoreError> {
    let asked: HashMap<(String, &str), u8> = items
        .iter()
        .flat_map(|item| (0..SHARDS).map(move |shard| ((partition(tenant.as_str(), shard, item), *item), shard)))
        .collect();
    let keys: Vec<Item> = asked.iter().map(|((_, item), shard)| key(tenant.as_str(), *shard, item)).collect();
    let table = tables.name(Table::Counters);
    let batches = keys.chunks(100).map(|chunk| crate::dynamo::batch_get(client, table, chunk.to_vec()));
    let mut found = HashMap::new();
    for item in futures_util::future::try_join_all(batches).await?.into_iter().flatten() {
        let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
        let (partition, name) = (text("tenant_id"), text("name"));
        if let Some(shard) = asked.get(&(partition, name.as_str())) {
            found.insert((*shard, name), item);
        }
    }
    Ok(found)
}

/// The value of `attribute` of counter item `item` in shard `shard` (`None`: not written).
fn value_in(
    found: &HashMap<(u8, String), Item>,
    shard: u8,
    item: &str,
    attribute: &str,
) -> Result<Option<i64>, StoreError> {
    let Some(value) = found.get(&(shard, item.to_owned())).and_then(|i| i.get(attribute)) else { return Ok(None) };
    let number = value.as_n().map_err(|_| StoreError::Corrupt(format!("counter {item} is not a number")))?;
    number.parse().map(Some).map_err(|_| StoreError::Corrupt(format!("counter {item} = {number}")))
}

/// A counter item's number attributes over its shards: each one's sum (a count) and its
/// largest (a stamp, [`CounterChange::stamp`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summed(HashMap<String, (i64, i64)>);

impl Summed {
    fn add(&mut self, item: &Item) -> Result<(), StoreError> {
        for (attribute, value) in item {
            let Ok(number) = value.as_n() else { continue };
            let number: i64 =
                number.parse().map_err(|_| StoreError::Corrupt(format!("counter {attribute} = {number}")))?;
            let (sum, largest) = self.0.entry(attribute.clone()).or_insert((0, number));
            *sum += number;
            *largest = (*largest).max(number);
        }
        Ok(())
    }

    /// The count in `attribute` (0 when never written).
    #[must_use]
    pub fn count(&self, attribute: &str) -> u64 {
        self.0.get(attribute).map_or(0, |(sum, _)| u64::try_from(*sum).unwrap_or(0))
    }

    /// The latest stamp in `attribute`, `None` when never stamped.
    #[must_use]
    pub fn latest(&self, attribute: &str) -> Option<i64> {
        self.0.get(attribute).map(|(_, largest)| *largest)
    }
}

/// The counter items `items` of `tenant`, each summed over its shards (one batch read of
/// strongly consistent items); an item never written is left out.
///
/// # Errors
/// The reads' [`StoreError`]s; [`StoreError::Corrupt`] for a non-numeric value.
pub async fn read_summed(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    items: &[&str],
) -> Result<HashMap<String, Summed>, StoreError> {
    let mut summed: HashMap<String, Summed> = HashMap::new();
    for ((_, name), item) in read_shards(client, tables, tenant, items).await? {
        summed.entry(name).or_default().add(&item)?;
    }
    Ok(summed)
}

/// Every counter item of run `run` of `tenant` ([`run_of`]: `groups`), each summed over its
/// shards: one strongly consistent query a shard, side by side, of at most `most` items
/// each. `None` when a shard holds more (the run has more than `most` items: read those
/// needed by name instead, [`read_summed`]), so that what a read costs is bounded.
///
/// # Errors
/// The reads' [`StoreError`]s; [`StoreError::Corrupt`] for a non-numeric value.
pub async fn read_run(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    run: &str,
    most: usize,
) -> Result<Option<HashMap<String, Summed>>, StoreError> {
    let table = tables.name(Table::Counters);
    let beyond = i32::try_from(most.saturating_add(1)).unwrap_or(i32::MAX);
    let shards = (0..SHARDS).map(|shard| async move {
        let partition = format!("{}#{shard:02}#{run}", tenant.as_str());
        let (mut items, mut start) = (Vec::new(), None);
        loop {
            let page = client
                .query()
                .table_name(table)
                .key_condition_expression("tenant_id = :p")
                .expression_attribute_values(":p", s(&partition))
                .consistent_read(true)
                .limit(beyond)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(crate::dynamo::classify)?;
            items.extend(page.items.unwrap_or_default());
            match page.last_evaluated_key.filter(|key| !key.is_empty()) {
                Some(_) if items.len() > most => return Ok::<_, StoreError>(None),
                Some(key) => start = Some(key),
                None => return Ok((items.len() <= most).then_some(items)),
            }
        }
    });
    let mut summed: HashMap<String, Summed> = HashMap::new();
    for items in futures_util::future::try_join_all(shards).await? {
        let Some(items) = items else { return Ok(None) };
        for item in items {
            let Some(name) = item.get("name").and_then(|v| v.as_s().ok()).cloned() else { continue };
            summed.entry(name).or_default().add(&item)?;
        }
    }
    Ok(Some(summed))
}

/// The values of several counters of a tenant, in the order asked (0 for missing): each
/// the sum of its shards.
///
/// # Errors
/// The reads' [`StoreError`]s; [`StoreError::Corrupt`] for a non-numeric value.
pub async fn read_many(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    names: &[String],
) -> Result<Vec<u64>, StoreError> {
    let mut items: Vec<&str> = names.iter().map(|name| item_and_attribute(name).0).collect();
    items.sort_unstable();
    items.dedup();
    let found = read_shards(client, tables, tenant, &items).await?;
    names
        .iter()
        .map(|name| {
            let (item, attribute) = item_and_attribute(name);
            let mut sum = 0_i64;
            for shard in 0..SHARDS {
                sum += value_in(&found, shard, item, attribute)?.unwrap_or(0);
            }
            Ok(u64::try_from(sum).unwrap_or(0))
        })
        .collect()
}

/// The current value of one counter (0 when it was never written).
///
/// # Errors
/// The reads' [`StoreError`]s; [`StoreError::Corrupt`] for a non-numeric value.
pub async fn read(client: &Client, tables: &Tables, tenant: &TenantId, name: &str) -> Result<u64, StoreError> {
    Ok(read_many(client, tables, tenant, &[name.to_owned()]).await?.pop().unwrap_or(0))
}

/// Whether counter item `item` of `tenant` was ever counted in (in any shard: a shard
/// holding only [`CLOSED`] counts nothing).
///
/// # Errors
/// The reads' [`StoreError`]s.
pub async fn exists(client: &Client, tables: &Tables, tenant: &TenantId, item: &str) -> Result<bool, StoreError> {
    let shards = read_shards(client, tables, tenant, &[item]).await?;
    Ok(shards.values().any(|shard| shard.values().any(|value| value.as_n().is_ok())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn shared_names_cancel_and_only_real_changes_remain() {
        let change = CounterChange::between(
            &names(&["wf", "wf|status=draft", "wf|type=custom"]),
            &names(&["wf", "wf|status=published", "wf|type=custom"]),
        );
        let expected: BTreeMap<String, i64> =
            [("wf|status=draft".to_owned(), -1), ("wf|status=published".to_owned(), 1)].into_iter().collect();
        assert_eq!(change.deltas, expected);
    }

    /// A guarded item's update (the guard carried through a merge) holds only while the
    /// item is not closed; the other items' updates are unconditional.
    #[test]
    fn an_update_unless_closed_is_conditioned_on_its_item_alone() {
        let item = executions_of_workflow_item("wf_1");
        let mut usage = CounterChange::default();
        usage.unless_closed(&item);
        let mut change =
            CounterChange::between(&[], &names(&["executions@all", &executions_of_workflow("wf_1", "all")]));
        change.merge(&usage);
        let items = change.transact_items_in(&Tables::new("t-"), "ten_0", 3).expect("built");
        let conditions: Vec<(String, Option<String>)> = items
            .iter()
            .filter_map(|op| op.update())
            .map(|u| (u.key()["name"].as_s().expect("name").clone(), u.condition_expression().map(str::to_owned)))
            .collect();
        let guarded = Some("attribute_not_exists(#closed)".to_owned());
        assert_eq!(conditions, vec![("executions".to_owned(), None), (item.clone(), guarded)]);
        let update = items[1].update().expect("update");
        assert_eq!(update.expression_attribute_names().expect("names")["#closed"], CLOSED);
    }

    /// Closing an item takes every shard; a count's condition on a shard (the item still
    /// counting none) becomes that shard's update's condition, with its names and values
    /// beside `:closed`; other conditions stay as they are. Opening removes the mark.
    #[test]
    fn closing_an_item_updates_every_shard_on_the_conditions_it_had() {
        let tables = Tables::new("t-");
        let tenant = crate::auth::trusted::tenant(&crate::ids::TenantKey::generate());
        let item = executions_of_workflow_item("wf_1");
        let check = |shard: u8, name: &str| {
            let check = ConditionCheck::builder()
                .table_name(tables.name(Table::Counters))
                .set_key(Some(key(tenant.as_str(), shard, name)))
                .condition_expression("#a0 = :r0")
                .expression_attribute_names("#a0", "running")
                .expression_attribute_values(":r0", n(0))
                .build()
                .expect("check");
            TransactWriteItem::builder().condition_check(check).build()
        };
        let closed = closing(&tables, &tenant, &item, true, vec![check(2, &item), check(2, "other")]).expect("built");
        assert_eq!(closed.len(), 17, "the other item's check, then 16 updates");
        assert!(closed[0].condition_check().is_some());
        let updates: Vec<&Update> = closed.iter().filter_map(|op| op.update()).collect();
        assert_eq!(updates.len(), usize::from(SHARDS));
        for (shard, update) in (0..SHARDS).zip(&updates) {
            assert_eq!(update.key()["tenant_id"].as_s().expect("partition"), &partition(tenant.as_str(), shard, &item));
            assert_eq!(update.update_expression(), "SET #closed = :closed");
            let values = update.expression_attribute_values().expect("values");
            assert_eq!(values[":closed"], AttributeValue::Bool(true));
            if shard == 2 {
                assert_eq!(update.condition_expression(), Some("#a0 = :r0"));
                assert_eq!(values[":r0"], n(0));
                assert_eq!(update.expression_attribute_names().expect("names")["#a0"], "running");
            } else {
                assert_eq!(update.condition_expression(), None);
            }
        }
        let opened = closing(&tables, &tenant, &item, false, Vec::new()).expect("built");
        assert!(opened.iter().all(|op| op.update().is_some_and(|u| u.update_expression() == "REMOVE #closed")));
    }

    #[test]
    fn a_stamp_is_set_in_the_update_that_adds_to_its_item_the_latest_kept() {
        let mut change = CounterChange::between(&[], &names(&["groups|fgrp_1@open", "failures@open"]));
        change.stamp("groups|fgrp_1@last_seen", 5);
        let mut later = CounterChange::default();
        later.stamp("groups|fgrp_1@last_seen", 9);
        change.merge(&later);
        change.stamp("groups|fgrp_1@last_seen", 7);
        let tenant = "ten_0123456789abcdef0123456789abcdef";
        let items = change.transact_items_in(&Tables::new("t-"), tenant, 3).expect("built");
        assert_eq!(items.len(), 2, "one update per item");
        let group = items
            .iter()
            .filter_map(|i| i.update())
            .find(|u| u.key()["name"].as_s().ok() == Some(&"groups|fgrp_1".to_owned()));
        let group = group.expect("the group's update");
        assert_eq!(group.key()["tenant_id"].as_s().ok(), Some(&format!("{tenant}#03#groups")), "the groups' run");
        assert_eq!(group.update_expression(), "ADD #a1 :d1 SET #a2 = :d2");
        let names = group.expression_attribute_names().expect("names");
        let values = group.expression_attribute_values().expect("values");
        assert_eq!((names["#a1"].as_str(), values[":d1"].as_n().ok().map(String::as_str)), ("open", Some("1")));
        assert_eq!((names["#a2"].as_str(), values[":d2"].as_n().ok().map(String::as_str)), ("last_seen", Some("9")));
        assert!(!change.is_empty());
    }

    #[test]
    fn creation_and_deletion_count_every_name() {
        assert_eq!(CounterChange::between(&[], &names(&["a", "b"])).deltas.len(), 2);
        assert!(CounterChange::between(&names(&["a"]), &names(&["a"])).is_empty());
        let deleted = CounterChange::between(&names(&["a"]), &[]);
        assert_eq!(deleted.deltas.get("a"), Some(&-1));
    }
}
