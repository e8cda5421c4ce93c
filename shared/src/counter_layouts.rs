//! Counters of earlier layouts moved into this one (`cairn-admin migrate
//! counter-shards`): where each was kept ([`crate::counters`] has this layout) and under
//! which name.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{Delete, TransactWriteItem, Update};

use crate::counters::{ATTRIBUTE_MARK, CounterChange, SPAN_PREFIX, VALUE};
use crate::dynamo::{Item, StoreError, Table, Tables, built, n, s};
use crate::spans::EXECUTION_SPANS;

/// A counter of the earlier layouts under its name now (item, attribute):
/// `executions|status=S` and `failures|status=S` became attributes `S` of `executions`
/// and `failures`, `executions|workflow=W|status=S` attribute `S` of
/// `executions|workflow=W`; the usage spans (`span|usage|h|…`, `span|usage|d|…`) became
/// attributes of the executions' span items of the same hour or day, and a day's
/// attempts (attribute `attempts` of `daily|{date}`) an attribute of the executions' day
/// item; any other stays as it was.
fn current_name(item: &str, attribute: &str) -> (String, String) {
    let same = || (item.to_owned(), attribute.to_owned());
    if let Some(span) = item.strip_prefix(SPAN_PREFIX).and_then(|rest| rest.strip_prefix("usage|")) {
        return (format!("{SPAN_PREFIX}{EXECUTION_SPANS}|{span}"), attribute.to_owned());
    }
    if let Some(day) = item.strip_prefix("daily|")
        && attribute == crate::spans::ATTEMPTS
        && let Ok(day) = day.parse::<chrono::NaiveDate>()
    {
        let now = crate::spans::attempts(day);
        let (item, attribute) = crate::counters::item_and_attribute(&now);
        return (item.to_owned(), attribute.to_owned());
    }
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

/// Moves counters of the earlier layouts into this one, of every tenant or of `tenant`
/// alone: items whose partition is of an earlier layout (`tenant_id` the bare tenant
/// id, one item per tenant and name; or `ten_…#07`, a shard's every counter in one
/// partition), and counters of this layout whose name changed ([`current_name`]). Each
/// counter's value is added to the same shard's item (shard 0 for a bare one) and taken
/// from where it was (the item deleted, or the attribute removed when others stay), in
/// one transaction conditioned on the old item still holding what was read, so a second
/// run, or two at once, count nothing twice. Reads the table once (a scan, filtered to
/// the tenant with `tenant`). Returns how many items were moved from.
///
/// # Errors
/// The scans' and writes' [`StoreError`]s.
pub async fn fold_legacy(client: &Client, tables: &Tables, tenant: Option<&str>) -> Result<u64, StoreError> {
    let table = tables.name(Table::Counters);
    let mut folded = 0;
    let mut start = None;
    loop {
        let mut scan = client.scan().table_name(table).consistent_read(true).set_exclusive_start_key(start);
        if let Some(tenant) = tenant {
            scan = scan
                .filter_expression("tenant_id = :t OR begins_with(tenant_id, :own)")
                .expression_attribute_values(":t", s(tenant))
                .expression_attribute_values(":own", s(format!("{tenant}#")));
        }
        let out = scan.send().await.map_err(crate::dynamo::classify)?;
        for item in out.items.unwrap_or_default() {
            if fold_one(client, tables, &item).await? {
                folded += 1;
            }
        }
        match out.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => break,
        }
    }
    Ok(folded)
}

/// Whether every counter of item `name` moved to another item by name (the usage
/// spans), so that this version writes no counter of it.
fn is_moved_whole(name: &str) -> bool {
    name.strip_prefix(SPAN_PREFIX).is_some_and(|rest| rest.starts_with("usage|"))
}

/// The tenant and shard of a counter item, from its partition key: of an earlier layout
/// (`ten_…`: shard 0; `ten_…#07`) or of this one (`ten_…#07#…`).
fn home(partition: &str) -> Option<(&str, u8)> {
    match partition.split_once('#') {
        None => Some((partition, 0)),
        Some((tenant, rest)) => {
            let (shard, tail) = rest.split_at_checked(2)?;
            (tail.is_empty() || tail.starts_with('#')).then_some(())?;
            shard.parse().ok().map(|shard| (tenant, shard))
        }
    }
}

/// Moves one item's counters that are not where this layout keeps them; `false` when
/// all are (or another run moved them first). What moves is taken from the old item
/// only while it holds what was read (an instance of the earlier version may still add
/// to it during a deploy): else it is read again and moved as it is then.
async fn fold_one(client: &Client, tables: &Tables, item: &Item) -> Result<bool, StoreError> {
    let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned();
    let (Some(partition), Some(name)) = (text("tenant_id"), text("name")) else { return Ok(false) };
    let Some((tenant, shard)) = home(&partition) else { return Ok(false) };
    let table = tables.name(Table::Counters);
    let mut item = item.clone();
    for _ in 0..crate::dynamo::RACE_ATTEMPTS {
        let mut change = CounterChange::default();
        let (mut held, mut moved, mut stays) = (vec!["attribute_exists(tenant_id)".to_owned()], Vec::new(), false);
        let (mut names, mut values) = (std::collections::HashMap::new(), std::collections::HashMap::new());
        for (i, (attribute, value)) in item.iter().enumerate() {
            let Ok(number) = value.as_n() else { continue };
            let delta: i64 = number.parse().map_err(|_| StoreError::Corrupt(format!("counter {name} = {number}")))?;
            let (now_item, now_attribute) = current_name(&name, attribute);
            if crate::counters::partition(tenant, shard, &now_item) == partition && now_item == name {
                stays = true;
                continue;
            }
            // Zero too: the item's existence says the counter was written (`exists`).
            *change.deltas.entry(format!("{now_item}{ATTRIBUTE_MARK}{now_attribute}")).or_default() += delta;
            held.push(format!("#a{i} = :v{i}"));
            moved.push(format!("#a{i}"));
            names.insert(format!("#a{i}"), attribute.clone());
            values.insert(format!(":v{i}"), n(delta));
        }
        if moved.is_empty() {
            return Ok(false);
        }
        // An item this version no longer writes (of an earlier layout, or one whose every
        // counter moved by name) goes; one it still writes (a day's `failures`) only loses
        // what moved, so that a count added to it meanwhile stays.
        let gone = crate::counters::partition(tenant, shard, &name) != partition || is_moved_whole(&name);
        let stays = stays || !gone;
        let mut operations = change.transact_items_in(tables, tenant, shard)?;
        let condition = held.join(" AND ");
        let key = |k: &str, v: &str| (k.to_owned(), s(v));
        let key = [key("tenant_id", &partition), key("name", &name)].into_iter().collect();
        // The old item goes with its counters; one that keeps some loses those moved.
        operations.push(if stays {
            let update = Update::builder()
                .table_name(table)
                .set_key(Some(key))
                .update_expression(format!("REMOVE {}", moved.join(", ")))
                .condition_expression(condition)
                .set_expression_attribute_names(Some(names))
                .set_expression_attribute_values(Some(values));
            TransactWriteItem::builder().update(built(update.build())?).build()
        } else {
            let delete = Delete::builder()
                .table_name(table)
                .set_key(Some(key))
                .condition_expression(condition)
                .set_expression_attribute_names(Some(names))
                .set_expression_attribute_values(Some(values));
            TransactWriteItem::builder().delete(built(delete.build())?).build()
        });
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
    fn a_counter_item_s_tenant_and_shard_are_told_by_its_partition_in_every_layout() {
        let tenant = "ten_0123456789abcdef0123456789abcdef";
        assert_eq!(home(tenant), Some((tenant, 0)));
        assert_eq!(home(&format!("{tenant}#11")), Some((tenant, 11)));
        assert_eq!(home(&partition(tenant, 11, "executions")), Some((tenant, 11)));
        assert_eq!(home(&partition(tenant, 3, "span|executions|m|000000000001")), Some((tenant, 3)));
        assert_eq!(home(&format!("{tenant}#1")), None);
        assert_eq!(home(&format!("{tenant}#ab#executions")), None);
    }

    #[test]
    fn usage_spans_and_a_day_s_attempts_become_attributes_of_the_executions_spans() {
        let pair = |a: &str, b: &str| (a.to_owned(), b.to_owned());
        assert_eq!(
            current_name("span|usage|d|000000020792", "credits"),
            pair("span|executions|d|000000020792", "credits")
        );
        assert_eq!(
            current_name("span|usage|h|000000499027", "charges"),
            pair("span|executions|h|000000499027", "charges")
        );
        // 2026-12-05 is day 20,792 since the epoch.
        let day = chrono::NaiveDate::from_ymd_opt(2026, 12, 5).expect("date");
        assert_eq!(current_name("daily|2026-12-05", "attempts"), pair("span|executions|d|000000020792", "attempts"));
        assert_eq!(crate::spans::attempts(day), "span|executions|d|000000020792@attempts");
        assert_eq!(current_name("daily|2026-12-05", "failures"), pair("daily|2026-12-05", "failures"), "stays");
        assert!(is_moved_whole("span|usage|d|000000020792"), "this version writes no usage item");
        assert!(!is_moved_whole("daily|2026-12-05"), "a day's item still counts failures");
        assert!(!is_moved_whole("span|executions|d|000000020792"));
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
