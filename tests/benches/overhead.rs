//! What Cairn's own code costs per request: p50 and p99 of `GET /billing/balance` and
//! `GET /executions/{id}` through the function's handler (its whole router: auth, rate
//! limit, idempotency layer, logging, metrics, JSON) against DynamoDB Local, divided by
//! p50 and p99 of (a) the raw DynamoDB calls the handler makes, one after the other (the
//! key lookup, the rate-limit window, the item) and (b) one raw GetItem of the item alone,
//! the physical limit of a read; run interleaved so the machine's noise hits all three.
//! (a) is the edge as it was first built; on a warm instance the handler now makes two
//! calls side by side, the count (whose keys epoch proves the key live) and the item
//! (README, "Rate limit"), so its critical path is one round trip.
//!
//! Then `POST /checkpoints` with a 1 KiB state, without and with an `Idempotency-Key`,
//! divided by the raw calls the write itself needs: one GetItem of the execution and one
//! TransactWriteItems (the checkpoint's item and the execution's update).
//!
//! Run with `make bench`. Goals: (a) <= 1.3 (issue 7), (b) <= 1.2 and the write <= 1.3
//! (issue 16).

use std::sync::Arc;
use std::time::{Duration, Instant};

use api_tests::bench::{Bench, call, call_with, setup};
use aws_sdk_dynamodb::Client;
use http::Method;
use serde_json::json;
use shared::TenantId;
use shared::dynamo::{Table, Tables, get_item, n, s};
use shared::time::SystemClock;

/// The DynamoDB calls every authenticated request makes before its handler: the key
/// lookup and the rate-limit window (`shared::rate_limit::count` is that one update).
async fn edge_calls(client: &Client, tables: &Tables, key_hash: &str, tenant: &TenantId) {
    get_item(client, tables.name(Table::ApiKeys), &[("key_hash", key_hash)]).await.expect("key");
    let now = chrono::Utc::now().timestamp();
    shared::rate_limit::count(client, tables, tenant, 1_000_000, now, Some(now / 60)).await.expect("window");
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() {
    let Bench { client, tables, tenant, key } = setup("overhead", 100).await;
    let clock = Arc::new(SystemClock);
    let workflows = workflows::app(client.clone(), tables.clone(), clock.clone());
    let executions = executions::app(client.clone(), tables.clone(), clock.clone());
    let billing = billing::app(client.clone(), tables.clone(), clock);
    let body = json!({"name": "bench", "workflow_type": "custom"});
    let wf = call(&workflows, &key, Method::POST, "/api/v1/workflows", Some(&body)).await;
    let start = json!({"workflow_id": wf["id"], "input": {"question": "what is 6 x 7?"}});
    let execution = call(&executions, &key, Method::POST, "/api/v1/executions", Some(&start)).await;
    let execution_id = execution["id"].as_str().expect("id").to_owned();
    let key_hash = shared::auth::hash_key(&key);
    let t = tenant.as_str().to_owned();
    let tenant_id = shared::auth::trusted::tenant(&tenant);

    // `OVERHEAD_RUNS` shortens a run while working on the bench; `make bench` uses 400.
    let iterations = std::env::var("OVERHEAD_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(400);
    println!(
        "handler vs raw DynamoDB calls against DynamoDB Local ({iterations} interleaved runs each, after warm-up)"
    );
    println!(
        "{:<26} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "request", "p50 ms", "raw p50", "p99 ms", "raw p99", "p50 x", "p99 x"
    );
    let execution_path = format!("/api/v1/executions/{execution_id}");
    for (label, app, path, item) in [
        ("GET /billing/balance", &billing, "/api/v1/billing/balance".to_owned(), (Table::Accounts, None)),
        ("GET /executions/{id}", &executions, execution_path, (Table::Executions, Some(execution_id.as_str()))),
    ] {
        let raw = || async {
            edge_calls(&client, &tables, &key_hash, &tenant_id).await;
            let mut keys = vec![("tenant_id", t.as_str())];
            if let Some(id) = item.1 {
                keys.push(("id", id));
            }
            get_item(&client, tables.name(item.0), &keys).await.expect("item").expect("exists");
        };
        let one = || async {
            let mut keys = vec![("tenant_id", t.as_str())];
            if let Some(id) = item.1 {
                keys.push(("id", id));
            }
            get_item(&client, tables.name(item.0), &keys).await.expect("item").expect("exists");
        };
        let (mut handler_times, mut raw_times, mut one_times) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..iterations + 40 {
            let started = Instant::now();
            call(app, &key, Method::GET, &path, None).await;
            let handler = started.elapsed();
            let started = Instant::now();
            raw().await;
            let direct = started.elapsed();
            let started = Instant::now();
            one().await;
            let single = started.elapsed();
            if i >= 40 {
                handler_times.push(handler);
                raw_times.push(direct);
                one_times.push(single);
            }
        }
        handler_times.sort_unstable();
        raw_times.sort_unstable();
        one_times.sort_unstable();
        let (h50, r50) = (percentile(&handler_times, 0.5), percentile(&raw_times, 0.5));
        let (h99, r99) = (percentile(&handler_times, 0.99), percentile(&raw_times, 0.99));
        let (o50, o99) = (percentile(&one_times, 0.5), percentile(&one_times, 0.99));
        println!("{label:<26} {h50:>9.2} {r50:>9.2} {h99:>9.2} {r99:>9.2} {:>8.2} {:>8.2}", h50 / r50, h99 / r99);
        println!(
            "{:<26} {:>9} {o50:>9.2} {:>9} {o99:>9.2} {:>8.2} {:>8.2}",
            "  vs one raw GetItem",
            "",
            "",
            h50 / o50,
            h99 / o99
        );
    }
    let checkpoints = checkpoints::app(client.clone(), tables.clone(), Arc::new(SystemClock));
    let state = json!({"notes": "x".repeat(1000)});
    let raw_write = |i: usize| {
        let (client, tables, t, execution_id, state) =
            (client.clone(), tables.clone(), t.clone(), execution_id.clone(), state.to_string());
        async move {
            let keys = [("tenant_id", t.as_str()), ("id", execution_id.as_str())];
            get_item(&client, tables.name(Table::Executions), &keys).await.expect("execution").expect("exists");
            let put = aws_sdk_dynamodb::types::Put::builder()
                .table_name(tables.name(Table::Checkpoints))
                .item("tenant_id", s(&t))
                .item("entry", s(format!("raw#{i:08}")))
                .item("state", s(state))
                .condition_expression("attribute_not_exists(entry)")
                .build()
                .expect("put");
            let update = aws_sdk_dynamodb::types::Update::builder()
                .table_name(tables.name(Table::Executions))
                .key("tenant_id", s(&t))
                .key("id", s("exec_raw_bench"))
                .update_expression("ADD checkpoint_count :one")
                .expression_attribute_values(":one", n(1))
                .build()
                .expect("update");
            client
                .transact_write_items()
                .transact_items(aws_sdk_dynamodb::types::TransactWriteItem::builder().put(put).build())
                .transact_items(aws_sdk_dynamodb::types::TransactWriteItem::builder().update(update).build())
                .send()
                .await
                .expect("transaction");
        }
    };
    let body = json!({"execution_id": execution_id, "name": "step", "state": state});
    for with_key in [false, true] {
        let (mut handler_times, mut raw_times) = (Vec::new(), Vec::new());
        for i in 0..iterations + 40 {
            let idempotency = format!("bench-{with_key}-{i}");
            let headers: &[(&str, &str)] = if with_key { &[("idempotency-key", &idempotency)] } else { &[] };
            let started = Instant::now();
            call_with(&checkpoints, &key, (Method::POST, "/api/v1/checkpoints"), Some(&body), headers).await;
            let handler = started.elapsed();
            let started = Instant::now();
            raw_write(i + if with_key { 100_000 } else { 0 }).await;
            let direct = started.elapsed();
            if i >= 40 {
                handler_times.push(handler);
                raw_times.push(direct);
            }
        }
        handler_times.sort_unstable();
        raw_times.sort_unstable();
        let (h50, r50) = (percentile(&handler_times, 0.5), percentile(&raw_times, 0.5));
        let (h99, r99) = (percentile(&handler_times, 0.99), percentile(&raw_times, 0.99));
        let label = if with_key { "POST /checkpoints + key" } else { "POST /checkpoints" };
        println!("{label:<26} {h50:>9.2} {r50:>9.2} {h99:>9.2} {r99:>9.2} {:>8.2} {:>8.2}", h50 / r50, h99 / r99);
    }
    println!("(raw: the key lookup, the rate-limit window and the item one after the other; goal <= 1.3)");
    println!("(one raw GetItem: the item alone, the physical limit of a read; goal <= 1.2)");
    println!("(POST /checkpoints: raw is the execution's GetItem and a two-item transaction; goal <= 1.3)");
    round_trips(
        &Apps {
            workflows,
            executions,
            checkpoints,
            billing,
            failures: failures::app(client, tables, Arc::new(SystemClock)),
        },
        &key,
        wf["id"].as_str().expect("id"),
        &execution_id,
    )
    .await;
}

struct Apps {
    workflows: axum::Router,
    executions: axum::Router,
    checkpoints: axum::Router,
    billing: axum::Router,
    failures: axum::Router,
}

/// DynamoDB round trips per route on a warm instance (one that has seen the key), from
/// when each call was sent to when its answer was read (`shared::metering::traced`):
/// the critical path (calls side by side count once) and all calls. Each route runs
/// seven times; the table shows the fewest and the most.
async fn round_trips(apps: &Apps, key: &str, workflow_id: &str, execution_id: &str) {
    let traced = |app: &axum::Router,
                  method: Method,
                  path: String,
                  body: Option<serde_json::Value>,
                  headers: Vec<(&'static str, String)>| {
        let (app, key) = (app.clone(), key.to_owned());
        async move {
            let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            shared::metering::traced(call_with(&app, &key, (method, &path), body.as_ref(), &headers)).await
        }
    };
    let (answer, _) = traced(
        &apps.checkpoints,
        Method::POST,
        "/api/v1/checkpoints".to_owned(),
        Some(json!({"execution_id": execution_id, "name": "rt", "state": {"n": 1}})),
        vec![],
    )
    .await;
    let checkpoint_id = answer["id"].as_str().expect("checkpoint id").to_owned();
    let big = json!({"execution_id": execution_id, "name": "big", "state": {"blob": api_tests::noise(7, 4 * 1024 * 1024 - 64)}});
    let (answer, _) =
        traced(&apps.checkpoints, Method::POST, "/api/v1/checkpoints".to_owned(), Some(big.clone()), vec![]).await;
    let big_id = answer["id"].as_str().expect("checkpoint id").to_owned();
    let start = json!({"workflow_id": workflow_id, "input": {"q": 1}});
    let (failing, _) =
        traced(&apps.executions, Method::POST, "/api/v1/executions".to_owned(), Some(start.clone()), vec![]).await;
    let failing = failing["id"].as_str().expect("id").to_owned();
    let fail = json!({"error_type": "TOOL_ERROR", "message": "bench"});
    traced(&apps.executions, Method::POST, format!("/api/v1/executions/{failing}/fail"), Some(fail), vec![]).await;
    let (failures, _) =
        traced(&apps.failures, Method::GET, format!("/api/v1/failures?execution_id={failing}"), None, vec![]).await;
    let failure_id = failures["items"][0]["id"].as_str().expect("failure id").to_owned();

    println!();
    println!("DynamoDB round trips per route on a warm instance (7 runs: fewest-most)");
    println!("{:<44} {:>9} {:>9}  goal", "request", "critical", "in all");
    let range = |values: &[usize]| {
        let (low, high) = (values.iter().min().copied().unwrap_or(0), values.iter().max().copied().unwrap_or(0));
        if low == high { low.to_string() } else { format!("{low}-{high}") }
    };
    type Case<'a> = (&'a str, &'a axum::Router, Method, String, Option<serde_json::Value>, bool, &'a str);
    let cases: Vec<Case<'_>> = vec![
        (
            "GET /executions/{id}",
            &apps.executions,
            Method::GET,
            format!("/api/v1/executions/{execution_id}"),
            None,
            false,
            "1",
        ),
        (
            "GET /workflows/{id}",
            &apps.workflows,
            Method::GET,
            format!("/api/v1/workflows/{workflow_id}"),
            None,
            false,
            "1",
        ),
        (
            "GET /checkpoints/{id}",
            &apps.checkpoints,
            Method::GET,
            format!("/api/v1/checkpoints/{checkpoint_id}"),
            None,
            false,
            "1",
        ),
        ("GET /failures/{id}", &apps.failures, Method::GET, format!("/api/v1/failures/{failure_id}"), None, false, "1"),
        ("GET /billing/balance", &apps.billing, Method::GET, "/api/v1/billing/balance".to_owned(), None, false, "1"),
        (
            "GET /checkpoints/{id}?include_state (4 MiB)",
            &apps.checkpoints,
            Method::GET,
            format!("/api/v1/checkpoints/{big_id}?include_state=true"),
            None,
            false,
            "<= 3",
        ),
        (
            "POST /checkpoints (1 KiB)",
            &apps.checkpoints,
            Method::POST,
            "/api/v1/checkpoints".to_owned(),
            Some(json!({"execution_id": execution_id, "name": "rt", "state": {"notes": "x".repeat(1000)}})),
            false,
            "2 (own)",
        ),
        (
            "POST /checkpoints (1 KiB) + Idempotency-Key",
            &apps.checkpoints,
            Method::POST,
            "/api/v1/checkpoints".to_owned(),
            Some(json!({"execution_id": execution_id, "name": "rt", "state": {"notes": "x".repeat(1000)}})),
            true,
            "2 (own)",
        ),
        (
            "POST /checkpoints (4 MiB)",
            &apps.checkpoints,
            Method::POST,
            "/api/v1/checkpoints".to_owned(),
            Some(big),
            false,
            "<= 3",
        ),
        (
            "POST /workflows",
            &apps.workflows,
            Method::POST,
            "/api/v1/workflows".to_owned(),
            Some(json!({"name": "rt", "workflow_type": "custom"})),
            false,
            "own",
        ),
        (
            "POST /executions",
            &apps.executions,
            Method::POST,
            "/api/v1/executions".to_owned(),
            Some(start.clone()),
            false,
            "own",
        ),
        (
            "POST /executions + Idempotency-Key",
            &apps.executions,
            Method::POST,
            "/api/v1/executions".to_owned(),
            Some(start),
            true,
            "own",
        ),
    ];
    for (label, app, method, path, body, with_key, goal) in cases {
        let (mut critical, mut total) = (Vec::new(), Vec::new());
        for run in 0..7 {
            let headers =
                if with_key { vec![("idempotency-key", format!("rt-{label}-{run}-{}", uuid_like()))] } else { vec![] };
            let (_, trips) = traced(app, method.clone(), path.clone(), body.clone(), headers).await;
            critical.push(trips.critical);
            total.push(trips.total);
        }
        println!("{label:<44} {:>9} {:>9}  {goal}", range(&critical), range(&total));
    }
    println!(
        "(critical: the longest chain of calls each sent after the previous answer; in all: every call, the key's"
    );
    println!(" read and the rate-limit count beside the work included)");
}

fn uuid_like() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}
