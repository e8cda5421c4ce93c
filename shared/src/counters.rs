//! Counters behind every list's `total`: one small item per (tenant, counter name),
//! changed in the same DynamoDB transaction as the write it counts, so a total never
//! costs a scan and never disagrees with the data.
//!
//! A counter name describes a filter combination of a list, for example
//! `workflows`, `workflows|status=draft`, `workflows|status=draft|type=crewai`.

use std::collections::{BTreeMap, HashMap};

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{TransactWriteItem, Update};

use crate::TenantId;
use crate::dynamo::{StoreError, Table, Tables, get_item, n, s};

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

    /// One `ADD` update per changed counter, to join the write's transaction.
    ///
    /// # Errors
    /// [`StoreError::Other`] if an update cannot be built (a bug).
    pub fn transact_items(&self, tables: &Tables, tenant: &TenantId) -> Result<Vec<TransactWriteItem>, StoreError> {
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
                    .key("tenant_id", s(tenant.as_str()))
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

/// A condition that the counter `name` is zero (or was never written), to join a
/// transaction (for example: no running executions).
///
/// # Errors
/// [`StoreError::Other`] if the check cannot be built (a bug).
pub fn check_zero(tables: &Tables, tenant: &TenantId, name: &str) -> Result<TransactWriteItem, StoreError> {
    let check = aws_sdk_dynamodb::types::ConditionCheck::builder()
        .table_name(tables.name(Table::Counters))
        .key("tenant_id", s(tenant.as_str()))
        .key("name", s(name))
        .condition_expression("attribute_not_exists(#value) OR #value = :zero")
        .expression_attribute_names("#value", VALUE)
        .expression_attribute_values(":zero", n(0))
        .build()
        .map_err(|e| StoreError::Other(Box::new(e)))?;
    Ok(TransactWriteItem::builder().condition_check(check).build())
}

/// The values of several counters of a tenant, in the order asked (0 for missing).
///
/// # Errors
/// The reads' [`StoreError`]s.
pub async fn read_many(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    names: &[String],
) -> Result<Vec<u64>, StoreError> {
    let mut items: Vec<&str> = names.iter().map(|name| item_and_attribute(name).0).collect();
    items.sort_unstable();
    items.dedup();
    let keys = items
        .iter()
        .map(|name| HashMap::from([("tenant_id".to_owned(), s(tenant.as_str())), ("name".to_owned(), s(*name))]))
        .collect();
    let found: HashMap<String, crate::dynamo::Item> =
        crate::dynamo::batch_get(client, tables.name(Table::Counters), keys)
            .await?
            .into_iter()
            .map(|item| (item.get("name").and_then(|v| v.as_s().ok()).cloned().unwrap_or_default(), item))
            .collect();
    let value = |name: &String| {
        let (item, attribute) = item_and_attribute(name);
        found
            .get(item)
            .and_then(|i| i.get(attribute))
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse::<i64>().ok())
            .map_or(0, |v| u64::try_from(v).unwrap_or(0))
    };
    Ok(names.iter().map(value).collect())
}

/// The current value of one counter (0 when it was never written).
///
/// # Errors
/// The read's [`StoreError`]; [`StoreError::Corrupt`] for a non-numeric value.
pub async fn read(client: &Client, tables: &Tables, tenant: &TenantId, name: &str) -> Result<u64, StoreError> {
    let item =
        get_item(client, tables.name(Table::Counters), &[("tenant_id", tenant.as_str()), ("name", name)]).await?;
    let Some(value) = item.as_ref().and_then(|item| item.get(VALUE)) else { return Ok(0) };
    let number = value.as_n().map_err(|_| StoreError::Corrupt(format!("counter {name} is not a number")))?;
    let count: i64 = number.parse().map_err(|_| StoreError::Corrupt(format!("counter {name} = {number}")))?;
    Ok(u64::try_from(count).unwrap_or(0))
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
