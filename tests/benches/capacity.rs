//! What one busy tenant's hot-path operations write, and the ceiling that puts on the
//! tenant: for `POST /executions`, `POST /checkpoints` (a 1 KiB state),
//! `GET /executions/{id}` and `POST /executions/{id}/complete`, each made 40 times by one
//! tenant through its function's router (its rate-limit count after the answer
//! included), every DynamoDB write call is recorded by the SDK interceptor
//! (`shared::metering::writes_of`): its items, and the capacity DynamoDB Local reports
//! for it (indexes included).
//!
//! The model (DynamoDB's documented limits): a partition takes at most 1,000 write units
//! a second, an item cannot be split, and time-ordered sort keys defeat splitting a
//! partition for heat. So an operation's ceiling for one tenant is 1,000 divided by the
//! write units it puts on its hottest partition (a table's, or an index's, partition key
//! value), averaged over the 40. An item's write units are 2 per KB in a transaction and
//! 1 alone (sizes as sent: a put's whole item, an update's key and values; DynamoDB
//! charges an update by the larger of its item before and after, the same here, as every
//! item a hot-path operation updates is under 1 KB: counters, allowances, the
//! rate-limit standing), an index
//! entry's those of the item it follows (puts only: no hot-path update writes an
//! indexed item). Goals (issue 44): >= 1,000 starts/s and >= 5,000 checkpoints/s, no item
//! written by more than 1/16 of the operations except per-execution ones, <= 12 write
//! units per start and <= 4 per checkpoint.
//!
//! Run with `make bench`; `CAPACITY_DEBUG=1` also prints every write call of one
//! operation of each kind, item by item.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use api_tests::bench::{call, call_with, setup};
use http::Method;
use serde_json::json;
use shared::metering::{WriteCall, metered, writes_of};
use shared::time::SystemClock;

/// Operations of each kind.
const N: usize = 40;

/// US East on-demand list prices (USD), December 2026.
const WRITE_UNIT: f64 = 0.625 / 1e6;
const READ_UNIT: f64 = 0.125 / 1e6;
const HTTP_API_REQUEST: f64 = 1.0 / 1e6;
const LAMBDA_REQUEST: f64 = 0.2 / 1e6;
/// Per GB-second, arm64.
const LAMBDA_GB_SECOND: f64 = 0.000_013_333_4;
/// The functions' memory (template.yaml), GB.
const LAMBDA_GB: f64 = 0.25;

/// One operation's record.
struct Op {
    calls: Vec<WriteCall>,
    read_units: f64,
    millis: f64,
}

/// What a kind of operation writes, over its [`N`] operations.
struct Summary {
    items: f64,
    checks: f64,
    units: f64,
    local_units: f64,
    read_units: f64,
    millis: f64,
    hottest: (String, f64, f64),
    hottest_item: (String, f64),
}

/// Table key schemas and indexes, from `template.yaml`: full name -> ([hash key, range
/// key], [(index, its hash key)]).
type Schemas = HashMap<String, (Vec<String>, Vec<(String, String)>)>;

fn schemas(prefix: &str) -> Schemas {
    let template = infra::template::Template::embedded().expect("template");
    template
        .tables()
        .expect("tables")
        .into_iter()
        .map(|t| {
            let hash = |key: &[infra::template::KeyPart]| {
                key.iter().find(|k| k.key_type == "HASH").map(|k| k.attribute.clone()).unwrap_or_default()
            };
            let indexes = t.indexes.iter().map(|i| (i.name.clone(), hash(&i.key))).collect();
            let key = t.key.iter().map(|k| k.attribute.clone()).collect();
            (format!("{prefix}{}", t.suffix), (key, indexes))
        })
        .collect()
}

/// Ids in a key made general: `ten_…` as `{tenant}`, `exec_…` as `{exec}`, a shard as
/// `{shard}`, and so on.
fn general(text: &str, tenant: &str) -> String {
    let mut text = text.replace(tenant, "{tenant}");
    for shard in 0..shared::counters::SHARDS {
        text = text.replace(&format!("{{tenant}}#{shard:02}"), "{tenant}#{shard}");
    }
    let mut out = String::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find(|c: char| c.is_ascii_lowercase()) {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let prefix = ["exec_", "cp_", "wf_", "fail_", "txn_", "evt_"].into_iter().find(|p| rest.starts_with(p));
        if let Some(prefix) = prefix {
            let end = rest[prefix.len()..]
                .find(|c: char| !c.is_ascii_alphanumeric())
                .map_or(rest.len(), |e| e + prefix.len());
            out.push_str(&format!("{{{}}}", prefix.trim_end_matches('_')));
            rest = &rest[end..];
        } else {
            let end = rest.find(|c: char| !c.is_ascii_lowercase()).unwrap_or(rest.len());
            out.push_str(&rest[..end]);
            rest = &rest[end..];
        }
    }
    out.push_str(rest);
    out
}

fn summarize(ops: &[Op], schemas: &Schemas, prefix: &str, tenant: &str) -> Summary {
    let n = ops.len() as f64;
    // Partition -> (write units in all, operations touching it); item -> operations.
    let mut partitions: BTreeMap<String, (f64, usize)> = BTreeMap::new();
    let mut items: BTreeMap<String, usize> = BTreeMap::new();
    let (mut written, mut checks, mut units, mut local) = (0, 0, 0.0, 0.0);
    for op in ops {
        let mut touched: BTreeMap<String, f64> = BTreeMap::new();
        let mut seen_items = std::collections::BTreeSet::new();
        for call in &op.calls {
            local += call.capacity;
            let per_kb = if call.operation == "TransactWriteItems" { 2.0 } else { 1.0 };
            for item in &call.items {
                let cost = f64::from(u32::try_from(item.bytes.div_ceil(1024).max(1)).unwrap_or(u32::MAX)) * per_kb;
                units += cost;
                let check = item.kind == "ConditionCheck";
                if check {
                    checks += 1;
                } else {
                    written += 1;
                }
                let table = item.table.strip_prefix(prefix).unwrap_or(&item.table);
                let (key_names, indexes) = schemas.get(&item.table).cloned().unwrap_or_default();
                let pairs = if item.kind == "Put" { &item.attributes } else { &item.key };
                let value = |name: &str| pairs.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone());
                let key: Vec<String> = key_names.iter().filter_map(|name| value(name)).collect();
                *touched.entry(format!("{table} {}", key.first().cloned().unwrap_or_default())).or_default() += cost;
                if item.kind == "Put" {
                    for (index, index_hash) in &indexes {
                        if let Some(v) = value(index_hash) {
                            units += cost;
                            *touched.entry(format!("{table}/{index} {v}")).or_default() += cost;
                        }
                    }
                }
                let label = format!("{table} {}", key.join(" "));
                if !check && ["exec_", "cp_", "evt_"].iter().all(|id| !label.contains(id)) {
                    seen_items.insert(label);
                }
            }
        }
        let mut grouped: BTreeMap<String, f64> = BTreeMap::new();
        for (partition, cost) in touched {
            // An execution's own partition (`{tenant}#exec_…`, and of its checkpoints
            // `{tenant}#c` and its id's last 10 hex digits) is one of as many as there are
            // executions: kept apart, not summed with the others'.
            let checkpoints_of_one =
                partition.split_once('#').is_some_and(|(_, own)| own.len() == 11 && own.starts_with('c'));
            let own = partition.contains("#exec_") || checkpoints_of_one;
            let label = if own { partition } else { general(&partition, tenant) };
            *grouped.entry(label).or_default() += cost;
        }
        for (partition, cost) in grouped {
            let entry = partitions.entry(partition).or_default();
            entry.0 += cost;
            entry.1 += 1;
        }
        // By the item itself (two events are two items, whatever their ids look like),
        // but a shard by its family, which takes 1/16 of what the family takes.
        for item in seen_items {
            let family = general(&item, tenant);
            *items.entry(if family.contains("#{shard}") { family } else { item }).or_default() += 1;
        }
    }
    // A sharded partition ({tenant}#NN, chosen at random per write) takes its share of
    // what all its shards take.
    let spread = |label: &str| if label.contains("#{shard}") { f64::from(shared::counters::SHARDS) } else { 1.0 };
    let hottest = partitions
        .iter()
        .map(|(p, (cost, count))| (p.clone(), *count as f64 / n / spread(p), cost / n / spread(p)))
        .max_by(|a, b| a.2.total_cmp(&b.2))
        .unwrap_or_default();
    let hottest_item = items
        .iter()
        .map(|(i, count)| (general(i, tenant), *count as f64 / n / spread(&general(i, tenant))))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap_or_default();
    let mut millis: Vec<f64> = ops.iter().map(|o| o.millis).collect();
    millis.sort_by(f64::total_cmp);
    Summary {
        items: f64::from(written) / n,
        checks: f64::from(checks) / n,
        units: units / n,
        local_units: local / n,
        read_units: ops.iter().map(|o| o.read_units).sum::<f64>() / n,
        millis: millis[millis.len() / 2],
        hottest,
        hottest_item,
    }
}

#[tokio::main]
async fn main() {
    let bench = setup("capacity", 1_000_000).await;
    let clock = Arc::new(SystemClock);
    let (client, tables, key) = (bench.client.clone(), bench.tables.clone(), bench.key.clone());
    let prefix = std::env::var("TABLE_PREFIX").expect("TABLE_PREFIX");
    let schemas = schemas(&prefix);
    let apps: HashMap<&str, axum::Router> = [
        ("workflows", workflows::app(client.clone(), tables.clone(), clock.clone())),
        ("executions", executions::app(client.clone(), tables.clone(), clock.clone())),
        ("checkpoints", checkpoints::app(client, tables, clock)),
    ]
    .into_iter()
    .collect();
    let wf = call(
        &apps["workflows"],
        &key,
        Method::POST,
        "/api/v1/workflows",
        Some(&json!({"name": "w", "workflow_type": "custom"})),
    )
    .await;
    api_tests::bench::fill_allowances(&bench).await;
    // Warm the instances (their first requests with a key read it).
    let start = json!({"workflow_id": wf["id"]});
    let warm = call(&apps["executions"], &key, Method::POST, "/api/v1/executions", Some(&start)).await;
    for _ in 0..3 {
        call(&apps["executions"], &key, Method::GET, "/api/v1/executions", None).await;
        let body = json!({"execution_id": warm["id"], "state": {}});
        call(&apps["checkpoints"], &key, Method::POST, "/api/v1/checkpoints", Some(&body)).await;
    }
    let measure = |area: &'static str, method: Method, path: String, body: Option<serde_json::Value>| {
        let (app, key) = (apps[area].clone(), key.clone());
        async move {
            let started = Instant::now();
            let ((answer, calls), usage) =
                metered(writes_of(call_with(&app, &key, (method, &path), body.as_ref(), &[]))).await;
            let millis = started.elapsed().as_secs_f64() * 1e3;
            let write_units: f64 = calls.iter().map(|c| c.capacity).sum();
            (answer, Op { calls, read_units: usage.capacity - write_units, millis })
        }
    };
    let state = json!({"notes": "x".repeat(1000)});
    let (mut starts, mut checkpoints, mut gets, mut completes, mut ids) = (vec![], vec![], vec![], vec![], vec![]);
    for _ in 0..N {
        let (answer, op) =
            measure("executions", Method::POST, "/api/v1/executions".into(), Some(json!({"workflow_id": wf["id"]})))
                .await;
        ids.push(answer["id"].as_str().expect("id").to_owned());
        starts.push(op);
    }
    // Each execution's first checkpoint (which makes its head), then its second (as every
    // later one of a run is).
    let mut later = Vec::new();
    for measured in [&mut checkpoints, &mut later] {
        for id in &ids {
            let body = json!({"execution_id": id, "name": "step", "state": state});
            measured.push(measure("checkpoints", Method::POST, "/api/v1/checkpoints".into(), Some(body)).await.1);
        }
    }
    for id in &ids {
        gets.push(measure("executions", Method::GET, format!("/api/v1/executions/{id}"), None).await.1);
    }
    for id in &ids {
        let body = json!({"output": {"ok": true}});
        completes
            .push(measure("executions", Method::POST, format!("/api/v1/executions/{id}/complete"), Some(body)).await.1);
    }
    let tenant = bench.tenant.as_str();
    if std::env::var("CAPACITY_DEBUG").is_ok() {
        for (kind, op) in [
            ("start", &starts[5]),
            ("checkpoint", &checkpoints[5]),
            ("later checkpoint", &later[5]),
            ("get", &gets[5]),
            ("complete", &completes[5]),
        ] {
            for c in &op.calls {
                println!("{kind}: {} {} units", c.operation, c.capacity);
                for i in &c.items {
                    println!(
                        "    {} {} {:?} {} bytes",
                        i.kind,
                        i.table,
                        if i.kind == "Put" { &i.attributes[..i.attributes.len().min(3)] } else { &i.key[..] },
                        i.bytes
                    );
                }
            }
        }
    }
    println!("What one tenant's operations write, {N} of each, against DynamoDB Local");
    println!();
    println!(
        "| operation | items written | condition checks | write units | (DynamoDB Local's) | read units | p50 ms | \
         hottest partition | its share of the operations | its write units per operation | ceiling for one tenant, a second | \
         hottest item not of one execution | its share | $ per million |"
    );
    println!("|---|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|---|--:|--:|");
    for (name, ops) in [
        ("`POST /executions`", &starts),
        ("`POST /checkpoints` (1 KiB), an execution's first", &checkpoints),
        ("`POST /checkpoints` (1 KiB), every later one", &later),
        ("`GET /executions/{id}`", &gets),
        ("`POST /executions/{id}/complete`", &completes),
    ] {
        let s = summarize(ops, &schemas, &prefix, tenant);
        let ceiling = 1000.0 / s.hottest.2;
        let dollars = 1e6
            * (s.units * WRITE_UNIT
                + s.read_units * READ_UNIT
                + HTTP_API_REQUEST
                + LAMBDA_REQUEST
                + LAMBDA_GB * s.millis / 1e3 * LAMBDA_GB_SECOND);
        println!(
            "| {name} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | `{}` | {:.3} | {:.2} | {:.0} | `{}` | {:.3} | {:.2} |",
            s.items,
            s.checks,
            s.units,
            s.local_units,
            s.read_units,
            s.millis,
            s.hottest.0,
            s.hottest.1,
            s.hottest.2,
            ceiling,
            s.hottest_item.0,
            s.hottest_item.1,
            dollars
        );
    }
    println!();
    println!(
        "(WU: write units by the model (2 per KB and item or index entry in a transaction, condition checks included, 1 alone); \
         WU local: as DynamoDB Local reports them; ceiling: 1,000 write units a second over the hottest partition's units per operation, \
         a partition with {{shard}} being one of {} chosen at random per write; shared items: those not of one execution; $ per million: DynamoDB on-demand writes and reads, HTTP API and Lambda arm64 at {} MB with the p50 above as duration)",
        shared::counters::SHARDS,
        LAMBDA_GB * 1024.0
    );
}
