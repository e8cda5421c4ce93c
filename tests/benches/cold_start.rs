//! Cold starts: each function's release binary is spawned under a Lambda Runtime API
//! stub of ours (the protocol Lambda speaks to a `provided.al2023` bootstrap) and given
//! one authenticated `GET` against DynamoDB Local. Measured per start: spawn to the
//! first `GET /runtime/invocation/next` (init), spawn to the first response, and the
//! process's peak RSS (`VmHWM`). Medians of several starts per function.
//!
//! The function reaches DynamoDB Local through a TCP proxy of the bench's that notes
//! when each call was in DynamoDB's hands (from its first request byte to the last byte
//! of its answer), so the first answer splits into DynamoDB Local's time (calls side by
//! side counted once) and the rest, the function's own: what does not depend on how
//! fast DynamoDB answers a fresh connection.
//!
//! Run with `make bench` (it builds the release binaries, starts DynamoDB Local and
//! creates the tables). Goals (issue 7): init <= 8 ms, first response <= 15 ms,
//! RSS <= 32 MB. These are x86_64 builds on the bench machine, not arm64 on Lambda.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use api_tests::bench::{Bench, call, setup};
use api_tests::runtime_api::{self, Call, Seen};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

struct Start {
    init: Duration,
    first_response: Duration,
    /// DynamoDB Local's part of the first response: the union of its calls' times.
    dynamodb: Duration,
    /// Calls sent before the first response.
    calls: usize,
    peak_rss_kib: u64,
}

/// The times at which each call through the proxy was in DynamoDB's hands: from its
/// first request byte to the last byte of its answer so far (`None` before any).
type Calls = Arc<Mutex<Vec<(Instant, Option<Instant>)>>>;

/// Relays connections accepted on `listener` to `upstream`, noting each call: from the
/// first byte the client sends after an answer (or on a new connection) to the last byte
/// of the answer before the client sends again. HTTP/1.1 sends one call at a time on a
/// connection, so these are the calls. Its connections end with it (they are aborted
/// when it is).
async fn relay(listener: TcpListener, upstream: String, calls: Calls) {
    let mut connections = tokio::task::JoinSet::new();
    while let Ok((client, _)) = listener.accept().await {
        let (upstream, calls) = (upstream.clone(), calls.clone());
        connections.spawn(async move {
            let Ok(server) = TcpStream::connect(&upstream).await else { return };
            let _ = (client.set_nodelay(true), server.set_nodelay(true));
            // The call under way on this connection (its index in `calls`), and whether
            // its answer has begun.
            let call: Arc<Mutex<Option<(usize, bool)>>> = Arc::default();
            let (mut client_read, mut client_write) = client.into_split();
            let (mut server_read, mut server_write) = server.into_split();
            let (up_call, up_calls) = (call.clone(), calls.clone());
            let up = async move {
                let mut buffer = vec![0; 64 * 1024];
                while let Ok(n @ 1..) = client_read.read(&mut buffer).await {
                    let now = Instant::now();
                    {
                        let mut call = up_call.lock().expect("call");
                        if call.is_none_or(|(_, answering)| answering) {
                            let mut calls = up_calls.lock().expect("calls");
                            calls.push((now, None));
                            *call = Some((calls.len() - 1, false));
                        }
                    }
                    if server_write.write_all(&buffer[..n]).await.is_err() {
                        break;
                    }
                }
            };
            let down = async move {
                let mut buffer = vec![0; 64 * 1024];
                while let Ok(n @ 1..) = server_read.read(&mut buffer).await {
                    if client_write.write_all(&buffer[..n]).await.is_err() {
                        break;
                    }
                    if let Some((index, answering)) = call.lock().expect("call").as_mut() {
                        *answering = true;
                        calls.lock().expect("calls")[*index].1 = Some(Instant::now());
                    }
                }
            };
            tokio::join!(up, down);
        });
    }
}

/// The time within `from..to` that at least one of `calls` covers (one not answered by
/// `to` covers the rest of it), and how many of them started in it.
fn covered(calls: &[(Instant, Option<Instant>)], from: Instant, to: Instant) -> (Duration, usize) {
    let mut within: Vec<(Instant, Instant)> = calls
        .iter()
        .filter(|(start, _)| (from..to).contains(start))
        .map(|&(start, end)| (start, end.map_or(to, |end| end.min(to))))
        .collect();
    within.sort();
    let (mut total, mut reached) = (Duration::ZERO, from);
    for &(start, end) in &within {
        let start = start.max(reached);
        if end > start {
            total += end - start;
            reached = end;
        }
    }
    (total, within.len())
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
    let dynamodb_local = std::env::var("AWS_ENDPOINT_URL_DYNAMODB").expect("DynamoDB Local: run with `make bench`");
    let upstream = dynamodb_local.trim_start_matches("http://").trim_end_matches('/').to_owned();
    let proxy = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let proxy_url = format!("http://{}", proxy.local_addr().expect("address"));
    let dynamodb_calls = Calls::default();
    let relaying = tokio::spawn(relay(proxy, upstream, dynamodb_calls.clone()));
    let spawned = Instant::now();
    let mut child = Command::new(binary)
        .env("AWS_ENDPOINT_URL_DYNAMODB", proxy_url)
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
    relaying.abort();
    let first_response = answered.expect("answered");
    let (dynamodb, calls) = covered(&dynamodb_calls.lock().expect("calls"), spawned, spawned + first_response);
    Start { init: init.expect("init before the response"), first_response, dynamodb, calls, peak_rss_kib }
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
    println!(
        "{:<12} {:>8} {:>13} {:>12} {:>8} {:>6} {:>7}",
        "function", "init ms", "first answer", "DynamoDB ms", "own ms", "calls", "RSS MB"
    );
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
            "{function:<12} {:>8.1} {:>13.1} {:>12.1} {:>8.1} {:>6} {:>7.1}",
            median(starts.iter().map(|s| ms(s.init)).collect()),
            median(starts.iter().map(|s| ms(s.first_response)).collect()),
            median(starts.iter().map(|s| ms(s.dynamodb)).collect()),
            median(starts.iter().map(|s| ms(s.first_response - s.dynamodb)).collect()),
            median(starts.iter().map(|s| s.calls as f64).collect()),
            median(starts.iter().map(|s| s.peak_rss_kib as f64 / 1024.0).collect()),
        );
    }
    println!(
        "(goals: init <= 8 ms, first answer <= 15 ms (issue 16: 10), RSS <= 32 MB; medians of each column, so \
         own is the median of first answer less DynamoDB, not their difference)"
    );
}
