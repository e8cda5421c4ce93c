//! Capacity per request does not grow with the data: DynamoDB consumed capacity of
//! `GET /failures/stats`, `GET /executions/stats`, `GET /billing/usage`,
//! `GET /billing/balance`, `GET /executions/{id}`, page 1 of
//! every list, every list after a cursor (`starting_after`) and the time-filtered lists,
//! for a tenant with about 100 and with 100,000 items in each list (written in bulk by
//! copying items the API made, with new keys, and setting the span counters of the
//! copies as the API's writes would). Goal: ratio <= 1.1; the deepest page
//! allowed is measured at 100,000 items.
//!
//! Run with `make bench`.

use std::collections::HashMap;
use std::sync::Arc;

use api_tests::bench::{Bench, call, setup};
use aws_sdk_dynamodb::types::{AttributeValue, PutRequest, WriteRequest};
use http::Method;
use serde_json::json;
use shared::dynamo::{Item, Table, s};
use shared::metering::metered;
use shared::time::SystemClock;

/// How the copies of a table's item get their keys.
struct Copies {
    table: Table,
    /// The sort key attribute.
    sort_key: &'static str,
    /// The item to copy.
    template: Item,
    /// The sort key of copy `i`.
    key: fn(&str, u64) -> AttributeValue,
}

async fn query_first(bench: &Bench, table: Table, partition: &str, prefix: Option<&str>) -> Item {
    let mut query = bench
        .client
        .query()
        .table_name(bench.tables.name(table))
        .key_condition_expression("tenant_id = :t")
        .expression_attribute_values(":t", s(partition));
    if let Some(prefix) = prefix {
        query = query
            .key_condition_expression("tenant_id = :t AND begins_with(#e, :p)")
            .expression_attribute_names("#e", "entry")
            .expression_attribute_values(":p", s(prefix));
    }
    let out = query.send().await.expect("query");
    out.items.unwrap_or_default().into_iter().next().expect("an item the API wrote")
}

/// Moves a copy of an execution (its `id` new) into its tenant's shard of that id, as
/// the API would have written it: its partition and its index keys.
fn into_its_shard(item: &mut Item, tenant: &str) {
    let text = |item: &Item, name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned().expect(name);
    let (from, to) = (text(item, "tenant_id"), api_tests::execution_partition(tenant, &text(item, "id")));
    for name in ["tenant_id", "tenant_status", "tenant_workflow", "tenant_workflow_status"] {
        let moved = text(item, name).replacen(&from, &to, 1);
        item.insert(name.to_owned(), s(moved));
    }
}

/// Writes copies `from..to` of each table's template, 25 a request, 8 requests at once.
async fn grow(bench: &Bench, copies: &[Copies], context: &str, from: u64, to: u64) {
    for c in copies {
        let mut batches = Vec::new();
        let mut i = from;
        while i < to {
            let end = (i + 25).min(to);
            let requests: Vec<WriteRequest> = (i..end)
                .map(|n| {
                    let mut item = c.template.clone();
                    item.insert(c.sort_key.to_owned(), (c.key)(context, n));
                    if c.table == Table::Executions {
                        into_its_shard(&mut item, bench.tenant.as_str());
                    }
                    WriteRequest::builder()
                        .put_request(PutRequest::builder().set_item(Some(item)).build().expect("put"))
                        .build()
                })
                .collect();
            batches.push(requests);
            i = end;
        }
        let name = bench.tables.name(c.table).to_owned();
        for chunk in batches.chunks(8) {
            let mut tasks = tokio::task::JoinSet::new();
            for batch in chunk {
                let (client, name, mut batch) = (bench.client.clone(), name.clone(), batch.clone());
                tasks.spawn(async move {
                    while !batch.is_empty() {
                        let out =
                            client.batch_write_item().request_items(&name, batch).send().await.expect("batch write");
                        batch = out.unprocessed_items.and_then(|mut u| u.remove(&name)).unwrap_or_default();
                    }
                });
            }
            while let Some(done) = tasks.join_next().await {
                done.expect("task");
            }
        }
    }
}

/// Sets execution `e`'s last sequence (in its head, where its checkpoint progress is) to
/// `last`, the copies' highest, as their writes would have: its lists read up to it.
async fn sequence_through(bench: &Bench, e: &str, last: u64) {
    let tenant = bench.tenant.as_str();
    let update = bench.client.update_item().table_name(bench.tables.name(Table::Executions));
    let update = update.key("tenant_id", s(format!("{tenant}#{e}"))).key("id", s(format!("head#{e}")));
    let update = update.update_expression("SET last_sequence = :last").condition_expression("attribute_exists(id)");
    update.expression_attribute_values(":last", AttributeValue::N(last.to_string())).send().await.expect("head");
}

/// Sets the span counters of the copies (all made in millisecond 0, the time their ids
/// carry) to `count`, as the API's writes would have: executions under their family and
/// their workflow's, by status; failures under theirs; usage (its credits and charges)
/// as attributes of the executions' hour and day items.
async fn count_copies(bench: &Bench, execution: &Item, count: u64) {
    let text = |item: &Item, name: &str| item.get(name).and_then(|v| v.as_s().ok()).cloned().expect(name);
    let (status, workflow) = (text(execution, "status"), text(execution, "workflow_id"));
    let mut names = Vec::new();
    for family in ["executions".to_owned(), format!("executions|workflow={workflow}")] {
        names.extend(shared::spans::names(&family, 0, &[shared::spans::ALL, &status]));
    }
    names.extend(shared::spans::names("failures", 0, &[shared::spans::ALL]));
    let (hour_and_day, usage) = ([shared::spans::Level::Hour, shared::spans::Level::Day], domain::credits::USAGE_SPANS);
    let counted = [domain::credits::USAGE_CREDITS, domain::credits::USAGE_CHARGES];
    names.extend(shared::spans::names_at(&hour_and_day, usage, 0, &counted));
    let mut items: HashMap<String, Item> = HashMap::new();
    for name in names {
        let (item, attribute) = name.split_once('@').expect("item@attribute");
        let entry =
            items.entry(item.to_owned()).or_insert_with(|| shared::counters::key(bench.tenant.as_str(), 0, item));
        entry.insert(attribute.to_owned(), AttributeValue::N(count.to_string()));
    }
    for item in items.into_values() {
        let put = bench.client.put_item().table_name(bench.tables.name(Table::Counters)).set_item(Some(item));
        put.send().await.expect("counter");
    }
}

#[tokio::main]
async fn main() {
    let bench = setup("scale", 1_000_000).await;
    let clock = Arc::new(SystemClock);
    let (client, tables, key) = (bench.client.clone(), bench.tables.clone(), bench.key.clone());
    let apps: HashMap<&str, axum::Router> = [
        ("workflows", workflows::app(client.clone(), tables.clone(), clock.clone())),
        ("executions", executions::app(client.clone(), tables.clone(), clock.clone())),
        ("checkpoints", checkpoints::app(client.clone(), tables.clone(), clock.clone())),
        ("failures", failures::app(client.clone(), tables.clone(), clock.clone())),
        ("billing", billing::app(client, tables, clock)),
    ]
    .into_iter()
    .collect();
    let post = |area: &'static str, path: String, body: serde_json::Value| {
        let (app, key) = (apps[area].clone(), key.clone());
        async move { call(&app, &key, Method::POST, &path, Some(&body)).await }
    };
    let wf = post("workflows", "/api/v1/workflows".into(), json!({"name": "w", "workflow_type": "custom"})).await;
    let start = json!({"workflow_id": wf["id"]});
    let e = post("executions", "/api/v1/executions".into(), start.clone()).await["id"].as_str().expect("id").to_owned();
    let cp = json!({"execution_id": e, "name": "c", "state": {"n": 1}});
    post("checkpoints", "/api/v1/checkpoints".into(), cp).await;
    let failed = post("executions", "/api/v1/executions".into(), start).await["id"].as_str().expect("id").to_owned();
    let fail = json!({"error_type": "AGENT_ERROR", "message": "m"});
    post("executions", format!("/api/v1/executions/{failed}/fail"), fail).await;

    let copies = [
        Copies {
            table: Table::Workflows,
            sort_key: "id",
            template: query_first(&bench, Table::Workflows, bench.tenant.as_str(), None).await,
            key: |c, n| s(format!("wf_{c}{n:031x}")),
        },
        Copies {
            table: Table::Executions,
            sort_key: "id",
            template: query_first(
                &bench,
                Table::Executions,
                &api_tests::execution_partition(bench.tenant.as_str(), &e),
                None,
            )
            .await,
            key: |c, n| s(format!("exec_{c}{n:031x}")),
        },
        Copies {
            table: Table::Checkpoints,
            sort_key: "entry",
            template: query_first(
                &bench,
                Table::Checkpoints,
                &api_tests::joined_partition(bench.tenant.as_str(), &e),
                Some("0000000001#"),
            )
            .await,
            // Entries of the execution's partition: by sequence, then a checkpoint id.
            key: |_, n| s(format!("{:010}#cp_{n:032x}", n + 2)),
        },
        Copies {
            table: Table::Failures,
            sort_key: "id",
            template: query_first(&bench, Table::Failures, bench.tenant.as_str(), None).await,
            key: |c, n| s(format!("fail_{c}{n:031x}")),
        },
        Copies {
            table: Table::Ledger,
            sort_key: "seq",
            template: query_first(&bench, Table::Ledger, bench.tenant.as_str(), None).await,
            key: |_, n| AttributeValue::N((n + 100).to_string()),
        },
    ];
    let path = format!("/api/v1/checkpoints?execution_id={e}");
    let checkpoints = call(&apps["checkpoints"], &key, Method::GET, &path, None).await;
    let first_checkpoint = checkpoints["items"][0]["id"].as_str().expect("checkpoint").to_owned();
    let transactions = call(&apps["billing"], &key, Method::GET, "/api/v1/billing/transactions", None).await;
    let first_transaction = transactions["items"][0]["id"].as_str().expect("transaction").to_owned();
    // Cursors point at the 50th copy (copies are older than the items the API made, so
    // 49 copies follow it with 100 items and with 100,000 alike).
    let workflow_id = copies[1].template.get("workflow_id").and_then(|v| v.as_s().ok()).cloned().expect("workflow");
    let requests: [(&str, String); 20] = [
        ("failures", "/api/v1/failures/stats".into()),
        ("billing", "/api/v1/billing/balance".into()),
        ("executions", format!("/api/v1/executions/{e}")),
        ("workflows", "/api/v1/workflows".into()),
        ("executions", "/api/v1/executions".into()),
        ("checkpoints", format!("/api/v1/checkpoints?execution_id={e}")),
        ("failures", "/api/v1/failures".into()),
        ("billing", "/api/v1/billing/transactions".into()),
        ("workflows", format!("/api/v1/workflows?starting_after=wf_0{:031x}", 50)),
        ("executions", format!("/api/v1/executions?starting_after=exec_0{:031x}", 50)),
        ("failures", format!("/api/v1/failures?starting_after=fail_0{:031x}", 50)),
        ("checkpoints", format!("/api/v1/checkpoints?execution_id={e}&starting_after={first_checkpoint}")),
        ("billing", format!("/api/v1/billing/transactions?starting_after={first_transaction}")),
        ("executions", "/api/v1/executions?created_before=2100-01-01T00:00:00.000Z".into()),
        ("failures", "/api/v1/failures?created_before=2100-01-01T00:00:00.000Z".into()),
        (
            "executions",
            format!("/api/v1/executions?workflow_id={workflow_id}&created_after=1969-12-31T23:59:59.999Z&created_before=2100-01-01T00:00:00.000Z"),
        ),
        ("executions", "/api/v1/executions?created_after=1969-12-31T12:00:00.000Z&created_before=2100-01-01T00:00:00.000Z&status=running".into()),
        ("executions", "/api/v1/executions/stats?created_after=1970-01-01T00:00:00Z&created_before=1970-01-31T00:00:00Z".into()),
        ("executions", "/api/v1/executions/stats?bucket=hour&created_after=1970-01-01T00:00:00Z&created_before=1970-01-02T00:00:00Z".into()),
        ("billing", "/api/v1/billing/usage?created_after=1970-01-01T00:00:00Z&created_before=1970-01-31T00:00:00Z".into()),
    ];
    // Each request is sent twice unmeasured first, so that both measures are of warm
    // instances whose proof of the key is fresh: an instance's first two requests with
    // a key read it (before the work, then beside it), and so does its first after the
    // proof's 5 minutes (docs/rate-limits.md); growing the lists takes minutes.
    let measure = || async {
        let mut capacity = Vec::new();
        for (area, path) in &requests {
            for _ in 0..2 {
                call(&apps[area], &key, Method::GET, path, None).await;
            }
            let (_, usage) = metered(call(&apps[area], &key, Method::GET, path, None)).await;
            capacity.push(usage.capacity);
        }
        capacity
    };
    for c in &copies {
        grow(&bench, std::slice::from_ref(c), "0", 0, 100).await;
    }
    count_copies(&bench, &copies[1].template, 100).await;
    sequence_through(&bench, &e, 101).await;
    // Every shard of the tenant's rate-limit standing written before either measure: a
    // request reads its two shards, and DynamoDB Local charges only for items it finds.
    for _ in 0..300 {
        call(&apps["billing"], &key, Method::GET, "/api/v1/billing/balance", None).await;
    }
    let small = measure().await;
    for c in &copies {
        grow(&bench, std::slice::from_ref(c), "0", 100, 100_000).await;
    }
    count_copies(&bench, &copies[1].template, 100_000).await;
    sequence_through(&bench, &e, 100_001).await;
    let large = measure().await;
    println!(
        "DynamoDB capacity per request against DynamoDB Local, a tenant with ~100 and with 100,000 items per list"
    );
    println!("{:<70} {:>10} {:>12} {:>7}", "request", "@100", "@100,000", "ratio");
    for (i, (_, path)) in requests.iter().enumerate() {
        let shown = path
            .replace(&e, "{id}")
            .replace(&first_checkpoint, "{cp}")
            .replace(&first_transaction, "{txn}")
            .replace(&workflow_id, "{wf}")
            .replace(&format!("0{:031x}", 50), "{50th}");
        println!("{shown:<70} {:>10.1} {:>12.1} {:>7.2}", small[i], large[i], large[i] / small[i]);
    }
    // The deepest page a list allows (10,000 items skipped) at 100,000 items: bounded,
    // not compared (with 100 items the same page skips only 100).
    let (_, deep) =
        metered(call(&apps["executions"], &key, Method::GET, "/api/v1/executions?page=101&page_size=100", None)).await;
    println!("{:<70} {:>23.1}", "/api/v1/executions?page=101&page_size=100 (the deepest) @100,000", deep.capacity);
    println!("(warm instances: capacity includes the rate-limit count every request makes; goal: ratio <= 1.1)");
}
