//! Cold starts: each function's release binary is spawned under a Lambda Runtime API
//! stub of ours (the protocol Lambda speaks to a `provided.al2023` bootstrap) and given
//! one authenticated `GET` against DynamoDB Local. Measured per start: spawn to the
//! first `GET /runtime/invocation/next` (init), spawn to the first response, and the
//! process's peak RSS (`VmHWM`). Medians of several starts per function.
//!
//! Run with `make bench` (it builds the release binaries, starts DynamoDB Local and
//! creates the tables). Goals (issue 7): init <= 8 ms, first response <= 15 ms,
//! RSS <= 32 MB. These are x86_64 builds on the bench machine, not arm64 on Lambda.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use api_tests::bench::{Bench, call, setup};
use api_tests::runtime_api::{self, Call, Seen};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

struct Start {
    init: Duration,
    first_response: Duration,
    peak_rss_kib: u64,
}

fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

async fn cold_start(binary: &PathBuf, function: &str, event: String) -> Start {
    let (calls_tx, mut calls) = mpsc::unbounded_channel();
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let server = tokio::spawn(runtime_api::serve(listener, event, calls_tx));
    let spawned = Instant::now();
    let mut child = Command::new(binary)
        .env("AWS_LAMBDA_RUNTIME_API", address.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", function)
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .env("AWS_LAMBDA_LOG_FORMAT", "JSON")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the function starts");
    let mut init = None;
    let mut answered = None;
    while answered.is_none() {
        match tokio::time::timeout(Duration::from_secs(30), calls.recv()).await {
            Ok(Some(Call { seen: Seen::Next { at, first: true }, .. })) => init = Some(at - spawned),
            Ok(Some(Call { seen: Seen::Response { at, body }, .. })) => {
                assert_eq!(body["statusCode"], 200, "{function}: {body}");
                answered = Some(at - spawned);
            }
            Ok(Some(_)) => {}
            _ => panic!("{function} did not answer within 30 s"),
        }
    }
    let peak_rss_kib = peak_rss_kib(child.id());
    let _ = child.kill();
    let _ = child.wait();
    server.abort();
    Start { init: init.expect("init before the response"), first_response: answered.expect("answered"), peak_rss_kib }
}

fn event(template: &str, key: &str, path: &str, route: &str) -> String {
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    template
        .replace("{{METHOD}}", "GET")
        .replace("{{ROUTE}}", route)
        .replace("{{PATH}}", path)
        .replace("{{QUERY}}", query)
        .replace("{{API_KEY}}", key)
        .replace("\"body\": \"{{BODY}}\"", "\"body\": null")
}

/// A workflow and a running execution, made through the functions in process.
async fn first_execution(bench: &Bench) -> String {
    let clock = Arc::new(shared::time::SystemClock);
    let (client, tables, key) = (&bench.client, &bench.tables, &bench.key);
    let workflows = workflows::app(client.clone(), tables.clone(), clock.clone());
    let body = serde_json::json!({"name": "w", "workflow_type": "custom"});
    let wf = call(&workflows, key, http::Method::POST, "/api/v1/workflows", Some(&body)).await;
    let executions = executions::app(client.clone(), tables.clone(), clock);
    let body = serde_json::json!({"workflow_id": wf["id"]});
    let started = call(&executions, key, http::Method::POST, "/api/v1/executions", Some(&body)).await;
    started["id"].as_str().expect("an execution").to_owned()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

#[tokio::main]
async fn main() {
    let release = PathBuf::from(std::env::var("CAIRN_RELEASE_DIR").expect("CAIRN_RELEASE_DIR: run with `make bench`"));
    let bench = setup("cold", 10).await;
    let key = bench.key.clone();
    let execution = first_execution(&bench).await;
    let checkpoints_path = format!("/api/v1/checkpoints?execution_id={execution}");
    let template = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/data/apigw-v2-request.json"))
        .expect("event template");
    let runs = 7;
    println!("cold start under a Lambda Runtime API stub ({runs} starts each, medians; x86_64 release build)");
    println!("{:<12} {:>9} {:>16} {:>9}", "function", "init ms", "first answer ms", "RSS MB");
    for (function, path, route) in [
        ("workflows", "/api/v1/workflows", "/api/v1/workflows"),
        ("executions", "/api/v1/executions", "/api/v1/executions"),
        ("checkpoints", checkpoints_path.as_str(), "/api/v1/checkpoints"),
        ("failures", "/api/v1/failures/stats", "/api/v1/failures/stats"),
        ("billing", "/api/v1/billing/balance", "/api/v1/billing/balance"),
    ] {
        let binary = release.join(function);
        let mut starts = Vec::new();
        for _ in 0..runs {
            starts.push(cold_start(&binary, function, event(&template, &key, path, route)).await);
        }
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "{function:<12} {:>9.1} {:>16.1} {:>9.1}",
            median(starts.iter().map(|s| ms(s.init)).collect()),
            median(starts.iter().map(|s| ms(s.first_response)).collect()),
            median(starts.iter().map(|s| s.peak_rss_kib as f64 / 1024.0).collect()),
        );
    }
    println!(
        "(goals: init <= 8 ms, first answer <= 15 ms, RSS <= 32 MB; the answer includes DynamoDB Local's latency)"
    );
}
