//! Counters behind every list's `total` and every statistic: small items changed in
//! the same DynamoDB transaction as the write they count, so a total never costs a scan
//! and never disagrees with the data.
//!
//! A counter name describes a filter combination of a list, for example
//! `workflows`, `workflows|status=draft`, `workflows|status=draft|type=crewai`.
//!
//! **Shards.** No counter is one item: each is spread over [`SHARDS`] items, one in each
//! of the tenant's counter partitions (`tenant_id` = `ten_…#07`, [`partition`]). A write
//! adds its whole change to one shard, chosen at random, so no item and no partition
//! takes more than 1/[`SHARDS`] of a tenant's counting, and a read adds the shards up
//! (one batch read of strongly consistent items, or one query per shard for a run of
//! span counters, [`crate::spans`]). A shard alone means nothing (it may be negative: an
//! execution counted running in one shard and completed in another); only the sum is a
//! count. A condition on a count ([`zero_now`]) reads every shard and conditions the
//! write on each still holding what was read.
//!
//! Items of the earlier model (`tenant_id` = the bare tenant id) are folded into shard 0
//! by [`fold_legacy`] (`cairn-admin migrate counter-shards`).

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{ConditionCheck, Delete, TransactWriteItem, Update};

use crate::TenantId;
use crate::dynamo::{Item, StoreError, Table, Tables, built, n, s};

/// How many items (and partitions) each of a tenant's counters is spread over.
pub const SHARDS: u8 = 16;

/// The partition key (`tenant_id`) of `tenant`'s counter shard `shard`.
#[must_use]
pub fn partition(tenant: &str, shard: u8) -> String {
    format!("{tenant}#{shard:02}")
}

/// The key of counter item `item` in `tenant`'s shard `shard`.
#[must_use]
pub fn key(tenant: &str, shard: u8, item: &str) -> Item {
    HashMap::from([("tenant_id".to_owned(), s(partition(tenant, shard))), ("name".to_owned(), s(item))])
}

/// A shard for one write, at random (shard 0 should randomness fail: still exact).
pub fn any_shard() -> u8 {
    getrandom::u32().map_or(0, |x| u8::try_from(x % u32::from(SHARDS)).unwrap_or(0))
}

/// The counter of a workflow's executions in one status. Shared because the workflows
/// function refuses to delete a workflow while it has running or paused executions.
#[must_use]
pub fn executions_of_workflow(workflow_id: &str, status: &str) -> String {
    format!("executions|workflow={workflow_id}|status={status}")
}

/// The counter of one day's events of a kind (`attempts`, `failures`), for rates over
/// a window of days. One item a day holds every kind as its own attribute, so a window
/// of 30 days is 30 small items. `day` is the UTC date.
#[must_use]
pub fn daily(kind: &str, day: chrono::NaiveDate) -> String {
    format!("{}{ATTRIBUTE_MARK}{kind}", daily_item(day))
}

/// The item holding one day's counters.
#[must_use]
pub fn daily_item(day: chrono::NaiveDate) -> String {
    format!("daily|{day}")
}

/// Separates an item's name from the attribute a counter lives in (`value` when absent).
const ATTRIBUTE_MARK: char = '@';

fn item_and_attribute(name: &str) -> (&str, &str) {
    name.split_once(ATTRIBUTE_MARK).unwrap_or((name, VALUE))
}

/// Attribute holding a counter's value.
const VALUE: &str = "value";

/// The net changes to a tenant's counters made by one write.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CounterChange(BTreeMap<String, i64>);

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
        let value = self.0.entry(name.to_owned()).or_default();
        *value += delta;
        if *value == 0 {
            self.0.remove(name);
        }
    }

    /// Merges another change into this one.
    pub fn merge(&mut self, other: &Self) {
        for (name, delta) in &other.0 {
            self.add(name, *delta);
        }
    }

    /// Whether nothing changes.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// One `ADD` update per changed counter item, all in one shard chosen at random, to
    /// join the write's transaction.
    ///
    /// # Errors
    /// [`StoreError::Other`] if an update cannot be built (a bug).
    pub fn transact_items(&self, tables: &Tables, tenant: &TenantId) -> Result<Vec<TransactWriteItem>, StoreError> {
        self.transact_items_in(tables, tenant.as_str(), any_shard())
    }

    /// [`CounterChange::transact_items`] in shard `shard` of the tenant whose id is
    /// `tenant`.
    fn transact_items_in(
        &self,
        tables: &Tables,
        tenant: &str,
        shard: u8,
    ) -> Result<Vec<TransactWriteItem>, StoreError> {
        let mut by_item: BTreeMap<&str, Vec<(&str, i64)>> = BTreeMap::new();
        for (name, delta) in &self.0 {
            let (item, attribute) = item_and_attribute(name);
            by_item.entry(item).or_default().push((attribute, *delta));
        }
        by_item
            .into_iter()
            .map(|(item, changes)| {
                let mut update = Update::builder()
                    .table_name(tables.name(Table::Counters))
                    .key("tenant_id", s(partition(tenant, shard)))
                    .key("name", s(item));
                let mut adds = Vec::new();
                for (i, (attribute, delta)) in changes.into_iter().enumerate() {
                    adds.push(format!("#a{i} :d{i}"));
                    update = update
                        .expression_attribute_names(format!("#a{i}"), attribute)
                        .expression_attribute_values(format!(":d{i}"), n(delta));
                }
                let update = update
                    .update_expression(format!("ADD {}", adds.join(", ")))
                    .build()
                    .map_err(|e| StoreError::Other(Box::new(e)))?;
                Ok(TransactWriteItem::builder().update(update).build())
            })
            .collect()
    }
}

/// When counter `name` of `tenant` is zero now: the conditions that keep it so, to join
/// a transaction (each shard still holds what was read, so a write that counts in any
/// shard meanwhile fails the transaction, to be read again); `None` while it is not zero.
///
/// # Errors
/// The read's [`StoreError`].
pub async fn zero_now(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    name: &str,
) -> Result<Option<Vec<TransactWriteItem>>, StoreError> {
    let (item, attribute) = item_and_attribute(name);
    let shards = read_shards(client, tables, tenant, &[item]).await?;
    let values: Vec<Option<i64>> =
        (0..SHARDS).map(|shard| value_in(&shards, shard, item, attribute)).collect::<Result<_, _>>()?;
    if values.iter().flatten().sum::<i64>() != 0 {
        return Ok(None);
    }
    let checks = values.into_iter().zip(0..SHARDS).map(|(value, shard)| {
        let check = ConditionCheck::builder()
            .table_name(tables.name(Table::Counters))
            .set_key(Some(key(tenant.as_str(), shard, item)))
            .expression_attribute_names("#value", attribute);
        let check = match value {
            None => check.condition_expression("attribute_not_exists(#value)"),
            Some(v) => check.condition_expression("#value = :read").expression_attribute_values(":read", n(v)),
        };
        Ok(TransactWriteItem::builder().condition_check(built(check.build())?).build())
    });
    Ok(Some(checks.collect::<Result<_, StoreError>>()?))
}

/// Every shard of the counter items `items` of `tenant`, by (shard, item): batch reads of
/// strongly consistent items, side by side.
async fn read_shards(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    items: &[&str],
) -> Result<HashMap<(u8, String), Item>, StoreError> {
    let keys: Vec<Item> =
        items.iter().flat_map(|item| (0..SHARDS).map(move |shard| key(tenant.as_str(), shard, item))).collect();
    let table = tables.name(Table::Counters);
    let batches = keys.chunks(100).map(|chunk| crate::dynamo::batch_get(client, table, chunk.to_vec()));
    let mut found = HashMap::new();
    for item in futures_util::future::try_join_all(batches).await?.into_iter().flatten() {
        let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
        let (tenant_part, name) = (text("tenant_id"), text("name"));
        let Some(shard) = tenant_part.rsplit_once('#').and_then(|(_, shard)| shard.parse::<u8>().ok()) else {
            continue;
        };
        found.insert((shard, name), item);
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

/// Whether counter item `item` of `tenant` was ever written (in any shard).
///
/// # Errors
/// The reads' [`StoreError`]s.
pub async fn exists(client: &Client, tables: &Tables, tenant: &TenantId, item: &str) -> Result<bool, StoreError> {
    Ok(!read_shards(client, tables, tenant, &[item]).await?.is_empty())
}

/// Folds counter items of the earlier model (one per tenant and name, `tenant_id` the bare
/// tenant id) into shard 0 of the same tenant (of `tenant` alone, when given): each
/// item's values are added to the shard's and the old item deleted, in one transaction
/// conditioned on the old item still being there, so a second run, or two at once,
/// count nothing twice. Returns how many items were folded.
///
/// # Errors
/// The scans' and writes' [`StoreError`]s.
pub async fn fold_legacy(client: &Client, tables: &Tables, tenant: Option<&str>) -> Result<u64, StoreError> {
    let table = tables.name(Table::Counters);
    let mut folded = 0;
    let mut start = None;
    loop {
        let (items, next) = crate::dynamo::page_of(client, table, tenant, None, start).await?;
        for item in items {
            if fold_one(client, tables, &item).await? {
                folded += 1;
            }
        }
        match next {
            Some(key) => start = Some(key),
            None => return Ok(folded),
        }
    }
}

/// Folds one item of the earlier model into shard 0; `false` for an item of the sharded
/// model, or one another run folded first. The old item is deleted only while it holds
/// what was read (an instance of the earlier version may still add to it during a
/// deploy): else it is read again and folded as it is then.
async fn fold_one(client: &Client, tables: &Tables, item: &Item) -> Result<bool, StoreError> {
    let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
    let (Some(tenant), Some(name)) = (text("tenant_id"), text("name")) else { return Ok(false) };
    if tenant.contains('#') {
        return Ok(false);
    }
    let table = tables.name(Table::Counters);
    let mut item = item.clone();
    for _ in 0..crate::dynamo::RACE_ATTEMPTS {
        let mut change = CounterChange::default();
        let mut delete = Delete::builder().table_name(table).key("tenant_id", s(&tenant)).key("name", s(&name));
        let mut held = vec!["attribute_exists(tenant_id)".to_owned()];
        for (i, (attribute, value)) in item.iter().enumerate() {
            let Ok(number) = value.as_n() else { continue };
            let delta: i64 = number.parse().map_err(|_| StoreError::Corrupt(format!("counter {name} = {number}")))?;
            // Zero too: the item's existence says the counter was written (`exists`).
            change.0.insert(format!("{name}{ATTRIBUTE_MARK}{attribute}"), delta);
            held.push(format!("#a{i} = :v{i}"));
            delete = delete
                .expression_attribute_names(format!("#a{i}"), attribute)
                .expression_attribute_values(format!(":v{i}"), n(delta));
        }
        let mut operations = change.transact_items_in(tables, &tenant, 0)?;
        let delete = delete.condition_expression(held.join(" AND "));
        operations.push(TransactWriteItem::builder().delete(built(delete.build())?).build());
        match crate::dynamo::transact(client, operations).await {
            Ok(()) => return Ok(true),
            Err(StoreError::ConditionFailed { .. }) => {
                let key = [("tenant_id", tenant.as_str()), ("name", name.as_str())];
                match crate::dynamo::get_item(client, table, &key).await? {
                    Some(now) => item = now,
                    None => return Ok(false),
                }
            }
            Err(e) => return Err(e),
        }
    }
    Err(StoreError::Conflict)
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
        assert_eq!(change.0, expected);
    }

    #[test]
    fn daily_counters_of_one_day_share_an_item() {
        let day = chrono::NaiveDate::from_ymd_opt(2026, 11, 21).expect("date");
        assert_eq!(item_and_attribute(&daily("attempts", day)), ("daily|2026-11-21", "attempts"));
        assert_eq!(item_and_attribute("workflows|status=draft"), ("workflows|status=draft", VALUE));
    }

    #[test]
    fn creation_and_deletion_count_every_name() {
        assert_eq!(CounterChange::between(&[], &names(&["a", "b"])).0.len(), 2);
        assert!(CounterChange::between(&names(&["a"]), &names(&["a"])).is_empty());
        let deleted = CounterChange::between(&names(&["a"]), &[]);
        assert_eq!(deleted.0.get("a"), Some(&-1));
    }
}
