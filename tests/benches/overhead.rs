//! What Cairn's own code costs per request: p50 and p99 of `GET /billing/balance` and
//! `GET /executions/{id}` through the function's handler (its whole router: auth, rate
//! limit, idempotency layer, logging, metrics, JSON) against DynamoDB Local, divided by
//! p50 and p99 of the raw DynamoDB calls the handler needs (the key lookup, the
//! rate-limit window, the item), run interleaved so the machine's noise hits both.
//!
//! Run with `make bench`. Goal (issue 7): ratio <= 1.3.

use std::sync::Arc;
use std::time::{Duration, Instant};

use api_tests::bench::{Bench, call, setup};
use aws_sdk_dynamodb::Client;
use http::Method;
use serde_json::json;
use shared::TenantId;
use shared::dynamo::{Table, Tables, get_item};
use shared::time::SystemClock;

/// The DynamoDB calls every authenticated request makes before its handler: the key
/// lookup and the rate-limit window (`shared::rate_limit::count` is that one update).
async fn edge_calls(client: &Client, tables: &Tables, key_hash: &str, tenant: &TenantId) {
    get_item(client, tables.name(Table::ApiKeys), &[("key_hash", key_hash)]).await.expect("key");
    shared::rate_limit::count(client, tables, tenant, 1_000_000, chrono::Utc::now().timestamp()).await.expect("window");
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

    let iterations = 400;
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
        let (mut handler_times, mut raw_times) = (Vec::new(), Vec::new());
        for i in 0..iterations + 40 {
            let started = Instant::now();
            call(app, &key, Method::GET, &path, None).await;
            let handler = started.elapsed();
            let started = Instant::now();
            raw().await;
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
        println!("{label:<26} {h50:>9.2} {r50:>9.2} {h99:>9.2} {r99:>9.2} {:>8.2} {:>8.2}", h50 / r50, h99 / r99);
    }
    println!("(raw: the key lookup, the rate-limit window and the item, as the handler makes them; goal <= 1.3)");
}
