//! Counters of earlier layouts moved into this one (`cairn-admin migrate
//! counter-shards`): where each was kept ([`crate::counters`] has this layout) and under
//! which name.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{Delete, TransactWriteItem};

use crate::counters::{ATTRIBUTE_MARK, CounterChange, SHARDS, VALUE};
use crate::dynamo::{Item, StoreError, Table, Tables, built, n, s};

/// A counter item of the earlier layouts under its name now, and the attribute its
/// value moves to: `executions|status=S` and `failures|status=S` became attributes `S`
/// of `executions` and `failures`, `executions|workflow=W|status=S` attribute `S` of
/// `executions|workflow=W`; any other stays as it was.
fn current_name(item: &str, attribute: &str) -> (String, String) {
    let same = || (item.to_owned(), attribute.to_owned());
    if attribute != VALUE {
        return same();
    }
    for scope in ["executions", "failures"] {
        let Some(rest) = item.strip_prefix(scope).and_then(|rest| rest.strip_prefix('|')) else { continue };
        if let Some(status) = rest.strip_prefix("status=") {
            return (scope.to_owned(), status.to_owned());
        }
        if scope == "executions"
            && let Some((workflow, status)) = rest.split_once("|status=")
            && workflow.starts_with("workflow=")
            && !workflow.contains('|')
        {
            return (format!("{scope}|{workflow}"), status.to_owned());
        }
    }
    same()
}

/// Moves counter items of the earlier layouts (`tenant_id` the bare tenant id, one item
/// per tenant and name; or `ten_…#07`, a shard's every counter in one partition) into
/// this one ([`partition`]), of every tenant or of `tenant` alone: each item's values are
/// added to the same shard's item (shard 0 for a bare one) and the old item deleted, in
/// one transaction conditioned on the old item still holding what was read, so a second
/// run, or two at once, count nothing twice. Returns how many items were moved.
///
/// # Errors
/// The scans' and writes' [`StoreError`]s.
pub async fn fold_legacy(client: &Client, tables: &Tables, tenant: Option<&str>) -> Result<u64, StoreError> {
    let table = tables.name(Table::Counters);
    // Of one tenant: its bare partition and its 16 shards' of the second layout.
    let partitions: Vec<Option<String>> = match tenant {
        Some(tenant) => std::iter::once(tenant.to_owned())
            .chain((0..SHARDS).map(|shard| format!("{tenant}#{shard:02}")))
            .map(Some)
            .collect(),
        None => vec![None],
    };
    let mut folded = 0;
    for partition in partitions {
        let mut start = None;
        loop {
            let (items, next) = crate::dynamo::page_of(client, table, partition.as_deref(), None, start).await?;
            for item in items {
                if fold_one(client, tables, &item).await? {
                    folded += 1;
                }
            }
            match next {
                Some(key) => start = Some(key),
                None => break,
            }
        }
    }
    Ok(folded)
}

/// The tenant and shard a counter item of an earlier layout is moved to, from its
/// partition key; `None` for an item of this layout.
fn earlier_layout(partition: &str) -> Option<(&str, u8)> {
    match partition.split_once('#') {
        None => Some((partition, 0)),
        Some((tenant, shard)) if shard.len() == 2 => shard.parse().ok().map(|shard| (tenant, shard)),
        Some(_) => None,
    }
}

/// Moves one item of an earlier layout into this one; `false` for an item of this
/// layout, or one another run moved first. The old item is deleted only while it holds
/// what was read (an instance of the earlier version may still add to it during a
/// deploy): else it is read again and moved as it is then.
async fn fold_one(client: &Client, tables: &Tables, item: &Item) -> Result<bool, StoreError> {
    let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
    let (Some(partition), Some(name)) = (text("tenant_id"), text("name")) else { return Ok(false) };
    let Some((tenant, shard)) = earlier_layout(&partition) else { return Ok(false) };
    let table = tables.name(Table::Counters);
    let mut item = item.clone();
    for _ in 0..crate::dynamo::RACE_ATTEMPTS {
        let mut change = CounterChange::default();
        let mut delete = Delete::builder().table_name(table).key("tenant_id", s(&partition)).key("name", s(&name));
        let mut held = vec!["attribute_exists(tenant_id)".to_owned()];
        for (i, (attribute, value)) in item.iter().enumerate() {
            let Ok(number) = value.as_n() else { continue };
            let delta: i64 = number.parse().map_err(|_| StoreError::Corrupt(format!("counter {name} = {number}")))?;
            // Zero too: the item's existence says the counter was written (`exists`).
            let (now_item, now_attribute) = current_name(&name, attribute);
            *change.deltas.entry(format!("{now_item}{ATTRIBUTE_MARK}{now_attribute}")).or_default() += delta;
            held.push(format!("#a{i} = :v{i}"));
            delete = delete
                .expression_attribute_names(format!("#a{i}"), attribute)
                .expression_attribute_values(format!(":v{i}"), n(delta));
        }
        let mut operations = change.transact_items_in(tables, tenant, shard)?;
        let delete = delete.condition_expression(held.join(" AND "));
        operations.push(TransactWriteItem::builder().delete(built(delete.build())?).build());
        match crate::dynamo::transact(client, operations).await {
            Ok(()) => return Ok(true),
            Err(StoreError::ConditionFailed { .. }) => {
                let key = [("tenant_id", partition.as_str()), ("name", name.as_str())];
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
    use crate::counters::{daily, executions_of_workflow, item_and_attribute, partition};

    #[test]
    fn items_of_earlier_layouts_are_told_by_their_partition() {
        let tenant = "ten_0123456789abcdef0123456789abcdef";
        assert_eq!(earlier_layout(tenant), Some((tenant, 0)));
        assert_eq!(earlier_layout(&format!("{tenant}#11")), Some((tenant, 11)));
        assert_eq!(earlier_layout(&partition(tenant, 11, "executions")), None);
        assert_eq!(earlier_layout(&partition(tenant, 11, "span|executions|m|000000000001")), None);
    }

    #[test]
    fn earlier_names_become_an_attribute_of_their_scope_s_item() {
        let moved = |item: &str, attribute: &str| current_name(item, attribute);
        let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        assert_eq!(moved("executions|status=running", VALUE), pair("executions", "running"));
        assert_eq!(moved("failures|status=open", VALUE), pair("failures", "open"));
        let wf = "wf_0123456789abcdef0123456789abcdef";
        let old = format!("executions|workflow={wf}|status=paused");
        assert_eq!(moved(&old, VALUE), pair(&format!("executions|workflow={wf}"), "paused"));
        assert_eq!(
            item_and_attribute(&executions_of_workflow(wf, "paused")),
            (&*format!("executions|workflow={wf}"), "paused")
        );
        let day = chrono::NaiveDate::from_ymd_opt(2026, 11, 21).expect("date");
        let failures = daily("failures", day);
        let (item, attribute) = item_and_attribute(&failures);
        assert_eq!(moved(item, attribute), pair(item, attribute), "a day's item stays");
        // Names that stay: the scopes' totals, tags (whatever their value), workflows', spans.
        for same in
            ["executions", "failures", "executions|tag=k=v|status=running", "workflows|status=draft", &spans_name()]
        {
            assert_eq!(moved(same, VALUE), pair(same, VALUE), "{same}");
        }
        assert_eq!(moved("executions|workflow=x|y|status=running", VALUE).0, "executions|workflow=x|y|status=running");
    }

    fn spans_name() -> String {
        item_and_attribute(&crate::spans::names("executions", 0, &["all"])[0]).0.to_owned()
    }
}
