//! Throughput through `cargo lambda watch` (the local API Gateway and Lambda, release
//! builds) against DynamoDB Local: concurrent clients send a mixed load for a fixed time
//! (per round: start an execution, write a checkpoint to it, read it back, read the
//! balance and the first page of executions) and the bench counts answers per second and
//! errors (anything but the expected status; must be 0).
//!
//! Run with `make bench` (it starts the watch on a free port: `CAIRN_API_URL`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use api_tests::bench::{call, setup};
use serde_json::{Value, json};

const CLIENTS: usize = 8;
const SECONDS: u64 = 20;

async fn send(
    http: &reqwest::Client,
    base: &str,
    key: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let mut request = http.request(method, format!("{base}{path}")).header("x-api-key", key);
    if let Some(body) = body {
        request = request.json(body);
    }
    match request.send().await {
        Ok(response) => {
            let status = response.status().as_u16();
            (status, response.json().await.unwrap_or(Value::Null))
        }
        Err(_) => (0, Value::Null),
    }
}

#[tokio::main]
async fn main() {
    let base = std::env::var("CAIRN_API_URL").expect("CAIRN_API_URL: run with `make bench`");
    let bench = setup("throughput", 1_000_000).await;
    let clock = Arc::new(shared::time::SystemClock);
    let workflows = workflows::app(bench.client.clone(), bench.tables.clone(), clock);
    let body = json!({"name": "load", "workflow_type": "custom"});
    let wf = call(&workflows, &bench.key, http::Method::POST, "/api/v1/workflows", Some(&body)).await;
    let wf = wf["id"].as_str().expect("workflow").to_owned();
    let (answers, errors) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let deadline = Instant::now() + Duration::from_secs(SECONDS);
    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let (base, key, wf) = (base.clone(), bench.key.clone(), wf.clone());
            let (answers, errors) = (answers.clone(), errors.clone());
            tokio::spawn(async move {
                let http = reqwest::Client::new();
                let count = |status: u16, expected: u16| {
                    answers.fetch_add(1, Ordering::Relaxed);
                    if status != expected {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                };
                while Instant::now() < deadline {
                    let start = json!({"workflow_id": wf, "input": {"n": 1}});
                    let (status, execution) =
                        send(&http, &base, &key, reqwest::Method::POST, "/executions", Some(&start)).await;
                    count(status, 201);
                    let id = execution["id"].as_str().unwrap_or("exec_missing").to_owned();
                    let checkpoint =
                        json!({"execution_id": id, "name": "step", "state": {"messages": ["hello", "world"]}});
                    let (status, _) =
                        send(&http, &base, &key, reqwest::Method::POST, "/checkpoints", Some(&checkpoint)).await;
                    count(status, 201);
                    let (status, _) =
                        send(&http, &base, &key, reqwest::Method::GET, &format!("/executions/{id}"), None).await;
                    count(status, 200);
                    let (status, _) = send(&http, &base, &key, reqwest::Method::GET, "/billing/balance", None).await;
                    count(status, 200);
                    let (status, _) =
                        send(&http, &base, &key, reqwest::Method::GET, "/executions?page_size=20", None).await;
                    count(status, 200);
                }
            })
        })
        .collect();
    for client in clients {
        client.await.expect("client");
    }
    let elapsed = started.elapsed().as_secs_f64();
    let (answers, errors) = (answers.load(Ordering::Relaxed), errors.load(Ordering::Relaxed));
    println!(
        "throughput through cargo lambda watch (release builds), {CLIENTS} clients for {SECONDS} s, mixed reads and writes"
    );
    println!("{:>10} {:>12} {:>8}", "requests", "requests/s", "errors");
    println!("{answers:>10} {:>12.1} {errors:>8}", answers as f64 / elapsed);
    assert_eq!(errors, 0, "every answer had its expected status");
}
