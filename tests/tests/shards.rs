//! Counters and rate-limit standings spread over shards (`shared::counters`,
//! `shared::rate_limit`), and `cairn-admin migrate counter-shards`, which moves counters
//! kept in the earlier layouts (one item per tenant and name; every counter of a shard
//! in one partition) into this one (a partition per counter item and shard). The
//! earlier counters are made from what the API counted, written as the earlier code
//! wrote them: the tenant's shards added up under the bare tenant id, or each shard's
//! items under `{tenant}#NN`, and in both a status's count in an item of its own.

use std::collections::BTreeMap;

use api_tests::{Api, Env, Transport};
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};
use shared::dynamo::{Item, Table, s};

/// In process: the environment, the API and a tenant.
async fn in_process() -> (Env, Api, api_tests::Tenant) {
    let env = api_tests::env().await;
    let api = Api::new(Transport::in_process(&env));
    let t = env.tenant().await;
    (env, api, t)
}

/// A new workflow of the tenant whose key is `key`, named `name`: its id.
async fn workflow(api: &Api, key: &str, name: &str) -> String {
    let body = json!({"name": name, "workflow_type": "custom"});
    api.post(key, "/workflows", &body).await.expect(201).body["id"].as_str().expect("id").to_owned()
}

/// Every total and statistic a client reads, as one value.
async fn totals(api: &Api, key: &str, wf: &str) -> Value {
    let mut found = serde_json::Map::new();
    for path in [
        "/workflows".to_owned(),
        "/workflows?status=published".to_owned(),
        "/executions".to_owned(),
        "/executions?status=running".to_owned(),
        format!("/executions?workflow_id={wf}&status=completed"),
        "/executions?created_after=2000-01-01T00:00:00Z".to_owned(),
        "/failures".to_owned(),
        "/failures?status=open".to_owned(),
        "/billing/transactions".to_owned(),
        "/billing/transactions?type=usage".to_owned(),
    ] {
        found.insert(path.clone(), api.get(key, &path).await.expect(200).body["total"].clone());
    }
    let stats = api.get(key, "/executions/stats").await.expect(200).body.clone();
    found.insert("stats".into(), json!([stats["total"], stats["failures"]]));
    let usage = api.get(key, "/billing/usage").await.expect(200).body.clone();
    found.insert("usage".into(), json!({"credits": usage["credits"], "charges": usage["charges"]}));
    let rates = api.get(key, "/failures/stats").await.expect(200).body.clone();
    found.insert("failure stats".into(), rates);
    Value::Object(found)
}

/// The two layouts counters were kept in before this one.
#[derive(Debug, Clone, Copy)]
enum Earlier {
    /// One item per tenant and name, under the bare tenant id.
    Bare,
    /// Every counter of a shard in one partition, `{tenant}#NN`.
    ShardPartitions,
}

/// Where the earlier code counted what this one counts in attribute `attribute` of
/// `item`: a status's count in an item of its own (`executions|status=running`).
fn earlier_name(item: &str, attribute: &str) -> (String, String) {
    let value = || "value".to_owned();
    let statuses = item == "executions"
        || item == "failures"
        || item.strip_prefix("executions|workflow=").is_some_and(|w| !w.contains('|'));
    if statuses && attribute != "value" {
        return (format!("{item}|status={attribute}"), value());
    }
    (item.to_owned(), attribute.to_owned())
}

/// Rewrites `tenant`'s counters in an earlier layout, as the earlier code wrote them,
/// and deletes them from this one; returns how many items the earlier layout holds.
async fn rewrite_as(env: &Env, tenant: &str, layout: Earlier) -> usize {
    let table = env.tables.name(Table::Counters);
    let mut earlier: BTreeMap<(String, String), BTreeMap<String, i64>> = BTreeMap::new();
    let mut start = None;
    loop {
        let out = env
            .client
            .scan()
            .table_name(table)
            .filter_expression("begins_with(tenant_id, :own)")
            .consistent_read(true)
            .expression_attribute_values(":own", s(format!("{tenant}#")))
            .set_exclusive_start_key(start)
            .send()
            .await
            .expect("scan");
        for item in out.items.unwrap_or_default() {
            let (partition, name) = (item["tenant_id"].as_s().expect("tenant_id"), item["name"].as_s().expect("name"));
            let shard = &partition[tenant.len() + 1..tenant.len() + 3];
            let old_partition = match layout {
                Earlier::Bare => tenant.to_owned(),
                Earlier::ShardPartitions => format!("{tenant}#{shard}"),
            };
            for (attribute, value) in &item {
                if let Ok(number) = value.as_n() {
                    let (name, attribute) = earlier_name(name, attribute);
                    let values = earlier.entry((old_partition.clone(), name)).or_default();
                    *values.entry(attribute).or_default() += number.parse::<i64>().expect("number");
                }
            }
            let key = [("tenant_id", partition), ("name", name)].map(|(k, v)| (k.to_owned(), s(v))).into();
            env.client.delete_item().table_name(table).set_key(Some(key)).send().await.expect("delete");
        }
        match out.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => break,
        }
    }
    for ((partition, name), values) in &earlier {
        let mut item: Item =
            [("tenant_id".to_owned(), s(partition)), ("name".to_owned(), s(name))].into_iter().collect();
        for (attribute, value) in values {
            item.insert(attribute.clone(), AttributeValue::N(value.to_string()));
        }
        env.client.put_item().table_name(table).set_item(Some(item)).send().await.expect("put");
    }
    earlier.len()
}

/// `cairn-admin migrate counter-shards` for tenant `t` moves the `rewritten` items of an
/// earlier layout, after which every total reads as `before`; a second run moves none
/// and counts nothing twice.
async fn folds_once(env: &Env, api: &Api, (t, wf): (&api_tests::Tenant, &str), rewritten: usize, before: &Value) {
    let folded = shared::counter_layouts::fold_legacy(&env.client, &env.tables, Some(&t.id)).await.expect("fold");
    assert_eq!(folded, rewritten as u64);
    assert_eq!(&totals(api, &t.key, wf).await, before, "every total as before");
    let again = shared::counter_layouts::fold_legacy(&env.client, &env.tables, Some(&t.id)).await.expect("fold");
    assert_eq!(again, 0, "a second run folds nothing");
    assert_eq!(&totals(api, &t.key, wf).await, before, "and counts nothing twice");
}

/// A new tenant with a published workflow and `n` executions of it started in process.
async fn started(n: usize) -> (Env, Api, api_tests::Tenant, String, Vec<String>) {
    let env = api_tests::env().await;
    let api = Api::new(Transport::in_process(&env));
    let t = env.tenant().await;
    let body = json!({"name": "w", "workflow_type": "custom", "status": "published"});
    let wf = api.post(&t.key, "/workflows", &body).await.expect(201).body["id"].as_str().expect("id").to_owned();
    let mut ids = Vec::new();
    for _ in 0..n {
        let started = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await;
        ids.push(started.expect(201).body["id"].as_str().expect("id").to_owned());
    }
    (env, api, t, wf, ids)
}

#[tokio::test]
async fn counters_of_the_bare_layout_are_moved_into_the_shards_once_and_count_on() {
    counters_of_an_earlier_layout_are_moved_once_and_count_on(Earlier::Bare).await;
}

#[tokio::test]
async fn counters_of_shard_partitions_are_moved_into_their_own_once_and_count_on() {
    counters_of_an_earlier_layout_are_moved_once_and_count_on(Earlier::ShardPartitions).await;
}

async fn counters_of_an_earlier_layout_are_moved_once_and_count_on(layout: Earlier) {
    let (env, api, t, wf, ids) = started(4).await;
    api.post(&t.key, &format!("/executions/{}/complete", ids[0]), &json!({})).await.expect(200);
    let fail = json!({"error_type": "AGENT_ERROR", "message": "m"});
    api.post(&t.key, &format!("/executions/{}/fail", ids[1]), &fail).await.expect(200);
    let before = totals(&api, &t.key, &wf).await;
    assert_eq!(before["/executions?status=running"], 2, "{before}");

    let rewritten = rewrite_as(&env, &t.id, layout).await;
    assert!(rewritten > 10, "{rewritten} counter items");
    let gap = totals(&api, &t.key, &wf).await;
    assert_eq!(gap["/executions"], 0, "this layout does not read the earlier items: {gap}");

    folds_once(&env, &api, (&t, &wf), rewritten, &before).await;

    // Counting goes on in any shard; running executions moved into one shard end in others.
    let path = format!("/workflows/{wf}");
    api.delete(&t.key, &path).await.expect_problem(409, "invalid_state");
    for id in &ids[2..] {
        api.post(&t.key, &format!("/executions/{id}/cancel"), &json!({})).await.expect(200);
    }
    let after = totals(&api, &t.key, &wf).await;
    assert_eq!(after["/executions?status=running"], 0, "{after}");
    assert_eq!(after["/executions"], 4);
    api.delete(&t.key, &path).await.expect(204);
    assert_eq!(api.get(&t.key, "/workflows").await.body["total"], 0);
}

/// The counter items of `tenant` whose name starts with `prefix` (a scan, read straight
/// from DynamoDB).
async fn counter_items(env: &Env, tenant: &str, prefix: &str) -> Vec<Item> {
    let (mut found, mut start) = (Vec::new(), None);
    loop {
        let out = env
            .client
            .scan()
            .table_name(env.tables.name(Table::Counters))
            .filter_expression("begins_with(tenant_id, :own) AND begins_with(#name, :prefix)")
            .expression_attribute_names("#name", "name")
            .expression_attribute_values(":own", s(format!("{tenant}#")))
            .expression_attribute_values(":prefix", s(prefix))
            .consistent_read(true)
            .set_exclusive_start_key(start)
            .send()
            .await
            .expect("scan");
        found.extend(out.items.unwrap_or_default());
        match out.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => break,
        }
    }
    found
}

/// Moves `tenant`'s usage counts and attempts back where the code before this layout
/// kept them: attributes `credits` and `charges` of the executions' hour and day span
/// items into `span|usage|h|…` and `span|usage|d|…`, and `attempts` of a day's item into
/// `daily|{date}`, each in the same shard; returns how many items the earlier names
/// hold.
async fn rewrite_usage_as_before(env: &Env, tenant: &str) -> usize {
    let table = env.tables.name(Table::Counters);
    let mut earlier = std::collections::BTreeSet::new();
    for item in counter_items(env, tenant, "span|executions|").await {
        let (partition, name) = (item["tenant_id"].as_s().expect("tenant_id"), item["name"].as_s().expect("name"));
        let shard = &partition[tenant.len() + 1..tenant.len() + 3];
        let (level, index) = name["span|executions|".len()..].split_once('|').expect("level");
        let mut moved = Vec::new();
        for attribute in ["credits", "charges", "attempts"] {
            let Some(value) = item.get(attribute) else { continue };
            let (old, old_attribute) = if attribute == "attempts" {
                let ms = index.parse::<i64>().expect("day") * 86_400_000;
                let day = chrono::DateTime::from_timestamp_millis(ms).expect("day").date_naive();
                (format!("daily|{day}"), attribute)
            } else {
                (format!("span|usage|{level}|{index}"), attribute)
            };
            let old_partition = match old.rsplit_once('|') {
                Some((run, _)) if old.starts_with("span|") => format!("{tenant}#{shard}#{run}"),
                _ => format!("{tenant}#{shard}#{old}"),
            };
            env.client
                .update_item()
                .table_name(table)
                .key("tenant_id", s(&old_partition))
                .key("name", s(&old))
                .update_expression("ADD #a :v")
                .expression_attribute_names("#a", old_attribute)
                .expression_attribute_values(":v", value.clone())
                .send()
                .await
                .expect("earlier item");
            earlier.insert((old_partition, old));
            moved.push(attribute);
        }
        if moved.is_empty() {
            continue;
        }
        let names: Vec<String> = moved.iter().map(|a| format!("#{a}")).collect();
        let mut update = env
            .client
            .update_item()
            .table_name(table)
            .key("tenant_id", s(partition))
            .key("name", s(name))
            .update_expression(format!("REMOVE {}", names.join(", ")));
        for attribute in moved {
            update = update.expression_attribute_names(format!("#{attribute}"), attribute);
        }
        update.send().await.expect("removed");
    }
    earlier.len()
}

/// Usage and attempts counted as the code before kept them (items of their own beside
/// the executions' span items, which a start wrote too) are moved into the executions'
/// span items by `cairn-admin migrate counter-shards`, once; the usage chart, the ledger
/// and the failure rate read the same before and after, and go on counting.
#[tokio::test]
async fn usage_and_attempts_of_the_earlier_names_are_moved_once_and_count_on() {
    let (env, api, t, wf, ids) = started(3).await;
    let fail = json!({"error_type": "AGENT_ERROR", "message": "m"});
    api.post(&t.key, &format!("/executions/{}/fail", ids[0]), &fail).await.expect(200);
    api.post(&t.key, &format!("/executions/{}/replay", ids[0]), &json!({})).await.expect(200);
    api.post(&t.key, &format!("/executions/{}/fail", ids[1]), &fail).await.expect(200);
    let before = totals(&api, &t.key, &wf).await;
    // 2 failures of 4 attempts (3 starts and a replay), 4 charges.
    assert_eq!(before["failure stats"]["failure_rate_last_30_days"], 0.5, "{before}");
    let usage = |totals: &Value| totals["usage"]["credits"].as_u64().expect("credits used");
    assert!(usage(&before) > 0, "{before}");
    assert_eq!(before["usage"]["charges"], 4, "3 starts and a replay: {before}");

    let rewritten = rewrite_usage_as_before(&env, &t.id).await;
    assert!(rewritten >= 3, "{rewritten} items: a day's and an hour's usage, a day's attempts");
    let gap = totals(&api, &t.key, &wf).await;
    assert_eq!(usage(&gap), 0, "this layout does not read the earlier items: {gap}");
    assert_eq!(gap["usage"]["charges"], 0, "{gap}");
    assert_eq!(gap["failure stats"]["failure_rate_last_30_days"], 0.0, "no attempts counted: {gap}");

    folds_once(&env, &api, (&t, &wf), rewritten, &before).await;
    // A day's item, which this version still writes (its failures), only lost its
    // attempts: a failure counted in it meanwhile would have stayed.
    let days = counter_items(&env, &t.id, "daily|").await;
    assert!(!days.is_empty(), "the days' items are kept");
    assert!(days.iter().all(|item| !item.contains_key("attempts")), "{days:?}");

    // Counting goes on where this layout keeps it: a fifth attempt, a fifth charge.
    api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201);
    let after = totals(&api, &t.key, &wf).await;
    assert_eq!(after["failure stats"]["failure_rate_last_30_days"], 0.4, "{after}");
    assert!(usage(&after) > usage(&before), "{after}");
}

/// The checkpoints table's items of `tenant`, by partition: its own, its 16 shards and
/// execution `e`'s two (read straight from DynamoDB).
async fn checkpoint_items(env: &Env, tenant: &str, e: &str) -> BTreeMap<String, Vec<String>> {
    let partitions = std::iter::once(tenant.to_owned())
        .chain((0..16).map(|shard| format!("{tenant}#{shard:02}")))
        .chain([api_tests::run_partition(tenant, e), api_tests::joined_partition(tenant, e)]);
    let mut found = BTreeMap::new();
    for partition in partitions {
        let out = env
            .client
            .query()
            .table_name(env.tables.name(Table::Checkpoints))
            .key_condition_expression("tenant_id = :t")
            .expression_attribute_values(":t", s(&partition))
            .send()
            .await
            .expect("query");
        let entries: Vec<String> =
            out.items.unwrap_or_default().iter().map(|item| item["entry"].as_s().expect("entry").clone()).collect();
        if !entries.is_empty() {
            found.insert(partition, entries);
        }
    }
    found
}

/// What a client does with an execution's checkpoints, all answered alike whichever
/// way they are stored: two keyed checkpoints (one with writes), reads by id, by key
/// (in the execution and in the workflow), a filtered list, a rollback to the first
/// and the execution's deletion. Returns the two checkpoint ids.
async fn use_checkpoints(api: &Api, key: &str, wf: &str, e: &str) -> (String, String) {
    let mut ids = Vec::new();
    for (step, source) in [(1, "a"), (2, "b")] {
        let body = json!({"execution_id": e, "key": format!("{e}-k{step}"), "metadata": {"source": source},
            "state": {"step": step}});
        ids.push(api.post(key, "/checkpoints", &body).await.expect(201).body["id"].as_str().expect("id").to_owned());
    }
    let (first, second) = (ids[0].clone(), ids[1].clone());
    let writes = json!({"task_id": "t", "writes": [{"index": 0, "channel": "c", "value": 1}]});
    api.post(key, &format!("/checkpoints/{second}/writes"), &writes).await.expect(200);
    assert_eq!(api.get(key, &format!("/checkpoints/{second}/writes")).await.expect(200).body["total"], 1);
    let read = api.get(key, &format!("/checkpoints/{first}?include_state=true")).await;
    assert_eq!((read.expect(200).body["sequence"].clone(), read.body["state"].clone()), (json!(1), json!({"step": 1})));
    let by_key = api.get(key, &format!("/checkpoints?execution_id={e}&key={e}-k2")).await;
    assert_eq!(by_key.expect(200).body["items"][0]["id"], second);
    let in_workflow = api.get(key, &format!("/checkpoints?workflow_id={wf}&key={e}-k1")).await;
    assert_eq!(in_workflow.expect(200).body["items"][0]["id"], first);
    let filtered = api.get(key, &format!("/checkpoints?execution_id={e}&metadata[source]=b")).await;
    assert_eq!(
        (filtered.expect(200).body["total"].clone(), filtered.body["items"][0]["id"].clone()),
        (json!(1), json!(second))
    );
    let all = api.get(key, &format!("/checkpoints?execution_id={e}&order=desc")).await;
    assert_eq!(all.expect(200).body["items"].as_array().expect("items").len(), 2);
    let again = json!({"execution_id": e, "key": format!("{e}-k1"), "state": {"other": true}});
    assert_eq!(api.post(key, "/checkpoints", &again).await.expect(200).body["id"], first, "the key's checkpoint");
    (first, second)
}

/// Executions started now keep each checkpoint in one entry (its state with it) in a
/// partition of the execution's (`ten_…#c` and its id's last 10 hex digits), keyed by
/// its sequence and id, which names both, beside its key pointers; its workflow pointer
/// and writes in the tenant's shard of its id. An execution of the earlier layout that
/// kept checkpoints apart (without `checkpoints_joined`, as that version wrote it) keeps
/// two entries: by execution with the key pointers in the execution's own partition, by
/// id with the workflow pointer and writes in the tenant's shard; one of the layout
/// before (without `checkpoints_apart` either) keeps every item in the tenant's
/// partition, checkpoints written now included. All three answer every read and write
/// alike, and their rollback and deletion leave nothing.
#[tokio::test]
async fn checkpoints_are_kept_apart_and_an_earlier_executions_stay_where_they_were() {
    let (env, api, t) = in_process().await;
    let wf = workflow(&api, &t.key, "partitions").await;
    let start = || async {
        let started = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await;
        started.expect(201).body["id"].as_str().expect("id").to_owned()
    };
    let (joined, apart, earlier) = (start().await, start().await, start().await);
    api_tests::to_earlier_layout(&env, &t.id, &apart, true).await;
    api_tests::to_earlier_layout(&env, &t.id, &earlier, false).await;

    let (j1, j2) = use_checkpoints(&api, &t.key, &wf, &joined).await;
    for (c, sequence) in [(&j1, 1), (&j2, 2)] {
        assert!(c.ends_with(&joined[joined.len() - 10..]), "{c} names its execution's partition");
        assert_eq!(api_tests::checkpoint_entry(&t.id, c).1, format!("{sequence:010}#{c}"), "and its sequence");
    }
    let mut expected = BTreeMap::from([(
        api_tests::joined_partition(&t.id, &joined),
        vec![
            format!("0000000001#{j1}"),
            format!("0000000002#{j2}"),
            format!("{joined}#key#{joined}-k1"),
            format!("{joined}#key#{joined}-k2"),
        ],
    )]);
    let shard = api_tests::checkpoint_partition(&t.id, &j1);
    assert_eq!(shard, api_tests::checkpoint_partition(&t.id, &joined), "the execution's shard");
    let pointer = |c: &str, k: &str| format!("{wf}#ckey#{}:{joined}-{k}#{c}", joined.len() + 3);
    let mut pointers = vec![pointer(&j1, "k1"), pointer(&j2, "k2"), format!("{j2}#writes")];
    pointers.sort();
    expected.insert(shard, pointers);
    assert_eq!(checkpoint_items(&env, &t.id, &joined).await, expected, "one entry each, by the id");
    // Another execution of the tenant may share the mark (40 bits): its entries in the
    // partition are not this one's. Here a copy of the first, another execution's third.
    let (partition, entry) = api_tests::checkpoint_entry(&t.id, &j1);
    let table = env.tables.name(Table::Checkpoints);
    let key = [("tenant_id", partition.as_str()), ("entry", entry.as_str())];
    let mut foreign = shared::dynamo::get_item(&env.client, table, &key).await.expect("read").expect("the entry");
    let other = format!("exec_{}", "0".repeat(22)) + &joined[joined.len() - 10..];
    let foreign_entry = format!("0000000003#cp_{}", "1".repeat(32));
    for (name, value) in [("execution_id", &other), ("entry", &foreign_entry), ("sequence", &"3".to_owned())] {
        foreign.insert(name.to_owned(), if name == "sequence" { shared::dynamo::n(3) } else { s(value) });
    }
    env.client.put_item().table_name(table).set_item(Some(foreign)).send().await.expect("put");
    for path in [format!("?execution_id={joined}"), format!("?execution_id={joined}&order=desc&limit=1")] {
        let listed = api.get(&t.key, &format!("/checkpoints{path}")).await;
        assert_eq!(listed.expect(200).body["total"], 2, "{path}");
        assert_ne!(listed.body["items"][0]["sequence"], 3, "{path}");
    }
    let delete = env.client.delete_item().table_name(table).key("tenant_id", s(&partition));
    delete.key("entry", s(&foreign_entry)).send().await.expect("delete");

    let (a1, a2) = use_checkpoints(&api, &t.key, &wf, &apart).await;
    // Of the tenant's shards, what is the execution's (the first one's are there too).
    let mut stored = checkpoint_items(&env, &t.id, &apart).await;
    for entries in stored.values_mut() {
        entries.retain(|entry| [&a1, &a2, &apart].iter().any(|id| entry.contains(id.as_str())));
    }
    stored.retain(|_, entries| !entries.is_empty());
    let run = api_tests::run_partition(&t.id, &apart);
    let mut expected = BTreeMap::from([(
        run.clone(),
        vec![
            format!("{apart}#0000000001"),
            format!("{apart}#0000000002"),
            format!("{apart}#key#{apart}-k1"),
            format!("{apart}#key#{apart}-k2"),
        ],
    )]);
    for (c, k) in [(&a1, "k1"), (&a2, "k2")] {
        let mut entries = vec![c.clone()];
        if c == &a2 {
            entries.push(format!("{c}#writes"));
        }
        let pointer = format!("{wf}#ckey#{}:{apart}-{k}#{c}", apart.len() + 3);
        entries.push(pointer);
        entries.sort();
        expected.entry(api_tests::checkpoint_partition(&t.id, c)).or_default().extend(entries);
    }
    for entries in expected.values_mut() {
        entries.sort();
    }
    assert_eq!(stored, expected, "nothing in the tenant's partition");

    let (e1, e2) = use_checkpoints(&api, &t.key, &wf, &earlier).await;
    let stored = checkpoint_items(&env, &t.id, &earlier).await;
    for (partition, entries) in &stored {
        let its = entries.iter().filter(|entry| [&e1, &e2, &earlier].iter().any(|id| entry.contains(id.as_str())));
        if partition == &t.id {
            assert_eq!(its.count(), 9, "2 by id, 2 by execution, 4 key pointers, 1 writes: {entries:?}");
        } else {
            assert_eq!(its.count(), 0, "the earlier layout: the tenant's partition alone, not {partition}");
        }
    }
    for entry in [e1.clone(), e2.clone(), format!("{earlier}#0000000002"), format!("{e2}#writes")] {
        assert!(stored[&t.id].contains(&entry), "{entry} in {stored:?}");
    }

    // A rollback deletes what it discards, and a deletion the rest, in every layout.
    for (e, first) in [(&joined, &j1), (&apart, &a1), (&earlier, &e1)] {
        let back = api.post(&t.key, &format!("/executions/{e}/rollback"), &json!({"checkpoint_id": first})).await;
        assert_eq!(back.expect(200).body["discarded_checkpoints"], 1);
        assert_eq!(api.get(&t.key, &format!("/checkpoints?execution_id={e}")).await.expect(200).body["total"], 1);
    }
    for gone in [&j2, &a2, &e2] {
        api.get(&t.key, &format!("/checkpoints/{gone}")).await.expect_problem(404, "not_found");
    }
    for e in [&joined, &apart, &earlier] {
        api.delete(&t.key, &format!("/executions/{e}")).await.expect(204);
    }
    for e in [&joined, &apart, &earlier] {
        assert_eq!(checkpoint_items(&env, &t.id, e).await, BTreeMap::new(), "nothing of {e} left");
    }
}

/// How many of workflow `wf`'s closed markers exist (read straight from DynamoDB).
async fn closed_markers(env: &Env, tenant: &str, wf: &str) -> usize {
    let mut found = 0;
    for marker in 0..domain::workflows::store::MARKERS {
        let partition = format!("{tenant}#{marker:02}");
        let key = [("tenant_id", partition.as_str()), ("id", &format!("{wf}#closed"))];
        let item = shared::dynamo::get_item(&env.client, env.tables.name(Table::Workflows), &key).await;
        found += usize::from(item.expect("read").is_some());
    }
    found
}

/// How many of the 16 shards of workflow `wf`'s executions counter item are closed (read
/// straight from DynamoDB).
async fn closed_shards(env: &Env, tenant: &str, wf: &str) -> usize {
    let item = shared::counters::executions_of_workflow_item(wf);
    let mut found = 0;
    for shard in 0..shared::counters::SHARDS {
        let key = shared::counters::key(tenant, shard, &item);
        let out = env.client.get_item().table_name(env.tables.name(Table::Counters)).set_key(Some(key)).send().await;
        let closed = out.expect("read").item.and_then(|i| i.get(shared::counters::CLOSED).cloned());
        found += usize::from(closed == Some(AttributeValue::Bool(true)));
    }
    found
}

/// A start adds to its workflow's executions counter item in one shard (of 16, at
/// random) on the condition that it is not closed, and checks nothing else of the
/// workflow: a workflow archived after the start read it open, before the start commits,
/// refuses it (409, nothing started or charged). Archiving and deleting close the item in
/// every shard (and write the closed markers an earlier version checked), restoring
/// opens it, and starts go on.
#[tokio::test(flavor = "multi_thread")]
async fn a_workflow_archived_while_a_start_runs_refuses_it_by_its_closed_counters() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (env, api, t) = in_process().await;
    let wf = workflow(&api, &t.key, "markers").await;
    let path = format!("/workflows/{wf}");
    assert_eq!((closed_markers(&env, &t.id, &wf).await, closed_shards(&env, &t.id, &wf).await), (0, 0));

    let tenant = shared::auth::trusted::tenant(&shared::ids::TenantKey::parse(&t.id).expect("tenant id"));
    let runs = domain::runs::Runs::new(env.client.clone(), env.tables.clone(), 1);
    let new = domain::runs::NewExecution {
        workflow_id: shared::ids::WorkflowId::parse(&wf).expect("workflow id"),
        key: None,
        input: None,
        metadata: BTreeMap::new(),
        tags: BTreeMap::new(),
    };
    let archived = AtomicBool::new(false);
    let handle = tokio::runtime::Handle::current();
    let archive_now = |_: &domain::runs::executions::model::Execution| {
        if !archived.swap(true, Ordering::SeqCst) {
            let archive = json!({"status": "archived"});
            let put = api.put(&t.key, &path, &archive);
            assert_eq!(tokio::task::block_in_place(|| handle.block_on(put)).status, 200);
        }
    };
    let balance = api.get(&t.key, "/billing/balance").await.expect(200).body.clone();
    let refused = runs.start(&tenant, &new, &shared::time::SystemClock, &archive_now).await;
    let message = refused.expect_err("archived before the commit").to_string();
    assert!(message.contains("archived"), "{message}");
    assert_eq!(api.get(&t.key, &format!("/executions?workflow_id={wf}")).await.body["total"], 0, "nothing started");
    assert_eq!(api.get(&t.key, "/billing/balance").await.body, balance, "nothing charged");
    assert_eq!((closed_markers(&env, &t.id, &wf).await, closed_shards(&env, &t.id, &wf).await), (16, 16));

    api.put(&t.key, &path, &json!({"status": "draft"})).await.expect(200);
    let restored = (closed_markers(&env, &t.id, &wf).await, closed_shards(&env, &t.id, &wf).await);
    assert_eq!(restored, (0, 0), "restored");
    let started = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await;
    let e = started.expect(201).body["id"].as_str().expect("id").to_owned();
    api.post(&t.key, &format!("/executions/{e}/cancel"), &json!({})).await.expect(200);
    api.delete(&t.key, &path).await.expect(204);
    let deleted = (closed_markers(&env, &t.id, &wf).await, closed_shards(&env, &t.id, &wf).await);
    assert_eq!(deleted, (16, 16), "deleted");
}

/// A workflow restored by an earlier version (which removed only the closed markers)
/// keeps its counter item closed: the first start of it opens the item again, as of the
/// workflow it read open, and starts. A workflow deleted before any execution closes its
/// counter item but is no workflow the tenant had executions of: its list is 404.
#[tokio::test]
async fn a_start_opens_a_counter_item_an_earlier_restore_left_closed() {
    let (env, api, t) = in_process().await;
    let wf = workflow(&api, &t.key, "left closed").await;
    let item = shared::counters::executions_of_workflow_item(&wf);
    for shard in 0..shared::counters::SHARDS {
        let update = env.client.update_item().table_name(env.tables.name(Table::Counters));
        let update = update.set_key(Some(shared::counters::key(&t.id, shard, &item)));
        let update = update.update_expression("SET #c = :t").expression_attribute_names("#c", shared::counters::CLOSED);
        update.expression_attribute_values(":t", AttributeValue::Bool(true)).send().await.expect("close");
    }
    assert_eq!(closed_shards(&env, &t.id, &wf).await, 16);
    api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201);
    assert_eq!(closed_shards(&env, &t.id, &wf).await, 0, "opened again");
    assert_eq!(api.get(&t.key, &format!("/executions?workflow_id={wf}")).await.expect(200).body["total"], 1);

    let wf = workflow(&api, &t.key, "never run").await;
    api.delete(&t.key, &format!("/workflows/{wf}")).await.expect(204);
    assert_eq!(closed_shards(&env, &t.id, &wf).await, 16);
    api.get(&t.key, &format!("/executions?workflow_id={wf}")).await.expect_problem(404, "not_found");
}

/// The partition execution `id` is stored in (its `tenant_id`) and its `tenant_status`,
/// read straight from the table: `None` if neither layout has it.
async fn stored_at(env: &Env, tenant: &str, id: &str) -> Option<(String, String)> {
    for partition in [api_tests::execution_partition(tenant, id), tenant.to_owned()] {
        let key = [("tenant_id", partition.as_str()), ("id", id)];
        let item = shared::dynamo::get_item(&env.client, env.tables.name(Table::Executions), &key).await.expect("read");
        if let Some(item) = item {
            let text = |name: &str| item[name].as_s().expect("text").clone();
            return Some((text("tenant_id"), text("tenant_status")));
        }
    }
    None
}

/// The ids of a list's items, in its order.
fn listed(body: &Value) -> Vec<String> {
    let items = body["items"].as_array().expect("items");
    items.iter().map(|item| item["id"].as_str().expect("id").to_owned()).collect()
}

/// Executions started now are spread over 16 partitions of their tenant (by the last hex
/// digit of the id), their index keys too; executions an earlier version wrote stay in
/// the tenant's own partition. Reads by id and key, every list (filters, pages and
/// cursors; one order, newest first, across both layouts), changes and deletions answer
/// both alike, and a change leaves an execution where it is.
#[tokio::test]
async fn executions_are_spread_and_earlier_ones_answer_alike() {
    let (env, api, t) = in_process().await;
    let wf = workflow(&api, &t.key, "spread").await;
    let mut ids = Vec::new();
    for i in 0..12 {
        let start = json!({"workflow_id": wf, "key": format!("run-{i}")});
        ids.push(api.post(&t.key, "/executions", &start).await.expect(201).body["id"].as_str().expect("id").to_owned());
    }
    let earlier: Vec<String> = ids.iter().step_by(3).cloned().collect();
    for e in &earlier {
        api_tests::to_earlier_layout(&env, &t.id, e, true).await;
    }
    for e in &ids {
        let partition = if earlier.contains(e) { t.id.clone() } else { api_tests::execution_partition(&t.id, e) };
        assert_eq!(stored_at(&env, &t.id, e).await, Some((partition.clone(), format!("{partition}#running"))));
    }

    let mut newest_first = ids.clone();
    newest_first.sort_unstable_by(|a, b| b.cmp(a));
    let all = api.get(&t.key, "/executions?page_size=100").await;
    assert_eq!((listed(&all.expect(200).body), all.body["total"].clone()), (newest_first.clone(), json!(12)));
    let mut paged = Vec::new();
    for page in 1..=3 {
        let window = api.get(&t.key, &format!("/executions?workflow_id={wf}&page={page}&page_size=5")).await;
        paged.extend(listed(&window.expect(200).body));
    }
    assert_eq!(paged, newest_first, "pages are disjoint and complete");
    let after = &newest_first[3];
    let cursor = api.get(&t.key, &format!("/executions?starting_after={after}&page=2&page_size=3")).await;
    assert_eq!(listed(&cursor.expect(200).body), newest_first[7..10].to_vec(), "a cursor, then a page from it");
    for (i, e) in ids.iter().enumerate() {
        let by_key = api.get(&t.key, &format!("/executions?workflow_id={wf}&key=run-{i}")).await;
        assert_eq!(listed(&by_key.expect(200).body), vec![e.clone()]);
        let again = api.post(&t.key, "/executions", &json!({"workflow_id": wf, "key": format!("run-{i}")})).await;
        assert_eq!(again.expect(200).body["id"], e.as_str(), "the key's execution, not a new one");
        api.get(&t.key, &format!("/executions/{e}")).await.expect(200);
    }

    // Changed and deleted in either layout, each where it is.
    let (old, new) = (&earlier[1], &ids[1]);
    for e in [old, new] {
        api.post(&t.key, &format!("/executions/{e}/complete"), &json!({"output": {"ok": true}})).await.expect(200);
    }
    let stored = stored_at(&env, &t.id, old).await;
    assert_eq!(stored, Some((t.id.clone(), format!("{}#completed", t.id))));
    let partition = api_tests::execution_partition(&t.id, new);
    assert_eq!(stored_at(&env, &t.id, new).await, Some((partition.clone(), format!("{partition}#completed"))));
    let completed = api.get(&t.key, &format!("/executions?workflow_id={wf}&status=completed")).await;
    let mut both = vec![old.clone(), new.clone()];
    both.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!((listed(&completed.expect(200).body), completed.body["total"].clone()), (both, json!(2)));
    let running = api.get(&t.key, "/executions?status=running&page_size=100").await;
    assert_eq!(running.expect(200).body["total"], 10);
    assert!(!listed(&running.body).iter().any(|e| e == old || e == new));

    for e in [&earlier[2], &ids[2]] {
        api.delete(&t.key, &format!("/executions/{e}")).await.expect(204);
        api.get(&t.key, &format!("/executions/{e}")).await.expect_problem(404, "not_found");
        assert_eq!(stored_at(&env, &t.id, e).await, None);
    }
    let left = api.get(&t.key, "/executions?page_size=100").await;
    assert_eq!((listed(&left.expect(200).body).len(), left.body["total"].clone()), (10, json!(10)));
}

/// What checkpoint request `body` wrote in table `executions`: each operation's kind and
/// item id, in order.
async fn checkpoint_writes(api: &Api, key: &str, body: &Value) -> (Value, Vec<(String, String)>) {
    let (answer, calls) = shared::metering::writes_of(api.post(key, "/checkpoints", body)).await;
    let written = calls
        .iter()
        .filter(|call| call.operation == "TransactWriteItems")
        .flat_map(|call| &call.items)
        .filter(|item| item.table.ends_with("-executions"))
        .map(|item| {
            let pairs = if item.kind == "Put" { &item.attributes } else { &item.key };
            let id = pairs.iter().find(|(name, _)| name == "id").map(|(_, id)| id.clone()).unwrap_or_default();
            (item.kind.clone(), id)
        })
        .collect();
    (answer.expect(201).body.clone(), written)
}

/// What a client reads of execution `e`'s checkpoint progress, from its read by id and
/// from every list that shows it (unfiltered, by status, by workflow, by both, by tag).
async fn progress_everywhere(api: &Api, key: &str, (wf, e): (&str, &str), status: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    let one = api.get(key, &format!("/executions/{e}")).await.expect(200).body.clone();
    seen.push(json!([one["checkpoint_count"], one["current_checkpoint_id"], one["updated_at"]]));
    for query in [
        String::new(),
        format!("status={status}"),
        format!("workflow_id={wf}"),
        format!("workflow_id={wf}&status={status}"),
        "tag=team:heads".to_owned(),
    ] {
        let list = api.get(key, &format!("/executions?page_size=100&{query}")).await.expect(200).body.clone();
        let item = list["items"].as_array().expect("items").iter().find(|item| item["id"] == e).cloned();
        let item = item.unwrap_or_else(|| panic!("{e} listed by {query:?}"));
        seen.push(json!([item["checkpoint_count"], item["current_checkpoint_id"], item["updated_at"]]));
    }
    seen
}

/// The outbox items that report execution `id`'s start.
async fn outbox_starts(env: &Env, id: &str) -> usize {
    let mut found = 0;
    let mut next = None;
    loop {
        let page = env
            .client
            .scan()
            .table_name(env.tables.name(Table::Events))
            .filter_expression("contains(events, :started) AND contains(events, :id)")
            .expression_attribute_values(":started", AttributeValue::S("\"execution.started\"".into()))
            .expression_attribute_values(":id", AttributeValue::S(format!("\"{id}\"")))
            .set_exclusive_start_key(next)
            .send()
            .await
            .expect("scan");
        found += page.items().len();
        next = page.last_evaluated_key;
        if next.is_none() {
            return found;
        }
    }
}

/// A checkpoint of an execution started now writes its head alone (`head#exec_…` in the
/// execution's own partition: the checkpoint progress), not the execution's item, which
/// projects into three list indexes; its first makes the head, checking the item is as
/// read. An execution started with the settings of a rollback (`EXECUTION_HEADS=off`,
/// `STARTED_EVENTS=outbox`: no `headed`, no stream mark, its start in the outbox, as
/// an earlier version started it) has its item put again by every checkpoint. Both read
/// back alike by id and in every list; a completion writes the item and the head, a
/// checkpoint after it is refused, and a deletion leaves nothing of either.
#[tokio::test]
async fn a_checkpoint_writes_the_executions_head_alone_and_every_read_shows_its_progress() {
    let (env, api, t) = in_process().await;
    let wf = workflow(&api, &t.key, "heads").await;
    let start = json!({"workflow_id": wf, "tags": {"team": "heads"}});
    let headed = api.post(&t.key, "/executions", &start).await.expect(201).body["id"].as_str().expect("id").to_owned();
    // Started with the settings an operator turns back before rolling the code back
    // (EXECUTION_HEADS=off, STARTED_EVENTS=outbox): as the earlier version started it.
    let tenant = shared::auth::trusted::tenant(&shared::ids::TenantKey::parse(&t.id).expect("tenant id"));
    let settings = domain::runs::StartSettings { heads: false, started_on_stream: false, one_checkpoint_entry: false };
    let runs = domain::runs::Runs::new(env.client.clone(), env.tables.clone(), 1).with_settings(settings);
    let new = domain::runs::NewExecution {
        workflow_id: shared::ids::WorkflowId::parse(&wf).expect("workflow id"),
        key: None,
        input: None,
        metadata: BTreeMap::new(),
        tags: BTreeMap::from([("team".to_owned(), "heads".to_owned())]),
    };
    let earlier = match runs.start(&tenant, &new, &shared::time::SystemClock, &|_| {}).await.expect("started") {
        domain::runs::Started::New(e) => e.id.to_string(),
        other => panic!("{other:?}"),
    };
    let table = env.tables.name(Table::Executions);
    let marks = |id: String| {
        let (client, partition) = (env.client.clone(), api_tests::execution_partition(&t.id, &id));
        async move {
            let key = [("tenant_id", partition.as_str()), ("id", id.as_str())];
            let item = shared::dynamo::get_item(&client, table, &key).await.expect("read").expect("item");
            (item.contains_key("headed"), item.contains_key("started_by_stream"))
        }
    };
    assert_eq!(marks(headed.clone()).await, (true, true), "headed, reported by the stream");
    assert_eq!(marks(earlier.clone()).await, (false, false), "neither");
    assert_eq!(outbox_starts(&env, &headed).await, 0);
    assert_eq!(outbox_starts(&env, &earlier).await, 1, "its execution.started is in the outbox");

    let head = format!("head#{headed}");
    for e in [&headed, &earlier] {
        let mut last = Value::Null;
        for step in 1..=3 {
            let body = json!({"execution_id": e, "state": {"step": step}});
            let (checkpoint, written) = checkpoint_writes(&api, &t.key, &body).await;
            let expected: Vec<(&str, &str)> = match (e == &headed, step) {
                (true, 1) => vec![("ConditionCheck", headed.as_str()), ("Put", head.as_str())],
                (true, _) => vec![("Put", head.as_str())],
                (false, _) => vec![("Put", earlier.as_str())],
            };
            let written: Vec<(&str, &str)> = written.iter().map(|(k, id)| (k.as_str(), id.as_str())).collect();
            assert_eq!(written, expected, "checkpoint {step} of {e}");
            last = checkpoint;
        }
        let seen = progress_everywhere(&api, &t.key, (&wf, e), "running").await;
        let expected = json!([3, last["id"], last["created_at"]]);
        assert!(seen.iter().all(|s| s == &expected), "{e}: {seen:?}, not {expected}");
    }

    for e in [&headed, &earlier] {
        api.post(&t.key, &format!("/executions/{e}/complete"), &json!({})).await.expect(200);
        let late = json!({"execution_id": e, "state": {"late": true}});
        api.post(&t.key, "/checkpoints", &late).await.expect_problem(409, "invalid_state");
        let seen = progress_everywhere(&api, &t.key, (&wf, e), "completed").await;
        assert!(seen.iter().all(|s| s[0] == 3), "{e}: {seen:?}");
    }
    // The execution in its shard of the tenant's partitions, its head in its own.
    let stored = |(partition, id): (String, String)| {
        let (client, table) = (env.client.clone(), table.to_owned());
        async move {
            shared::dynamo::get_item(&client, &table, &[("tenant_id", &partition), ("id", &id)]).await.expect("read")
        }
    };
    let (item_key, head_key) = (
        (api_tests::execution_partition(&t.id, &headed), headed.clone()),
        (format!("{}#{headed}", t.id), head.clone()),
    );
    let kept = stored(head_key.clone()).await.expect("the head, in the execution's own partition");
    assert_eq!(kept["checkpoint_count"].as_n().map(String::as_str), Ok("3"));
    assert!(!kept.contains_key("tenant_status"), "the head is in no list index");
    for e in [&headed, &earlier] {
        api.delete(&t.key, &format!("/executions/{e}")).await.expect(204);
        api.get(&t.key, &format!("/executions/{e}")).await.expect_problem(404, "not_found");
    }
    assert_eq!((stored(item_key).await, stored(head_key).await), (None, None), "nothing of the execution left");
}
