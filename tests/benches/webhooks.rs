//! Webhooks: the time from the API's answer to the receiver's getting the event (p50,
//! p99), and what reporting it adds to a start (no outbox item: the executions table's
//! stream carries the start's own item), against DynamoDB Local. The relay
//! (`cairn-relay`'s code, polling every 50 ms here) stands in for Lambda's event source
//! mapping, so the latency is the local stack's, not AWS's (where the mapping polls each
//! shard about four times a second and batches for up to 1 s: `MaximumBatchingWindowInSeconds`).
//!
//! Run with `make bench` (it starts DynamoDB Local, creates the tables and sets
//! `WEBHOOK_SECRETS_KEY` and `WEBHOOK_ALLOW_LOOPBACK`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use api_tests::bench::{Bench, after_answer, answer, call, setup};
use http::Method;
use serde_json::{Value, json};
use shared::metering::metered;
use shared::time::SystemClock;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const RUNS: usize = 100;

type Arrivals = Arc<Mutex<HashMap<String, Instant>>>;

/// A receiver that notes when each execution's `execution.started` arrives.
async fn receiver(arrivals: Arrivals) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let arrivals = arrivals.clone();
            tokio::spawn(async move {
                let mut raw = Vec::new();
                let mut chunk = [0u8; 8192];
                loop {
                    let Ok(n) = stream.read(&mut chunk).await else { return };
                    if n == 0 {
                        return;
                    }
                    raw.extend_from_slice(&chunk[..n]);
                    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
                    let head = String::from_utf8_lossy(&raw[..end]).to_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if raw.len() >= end + 4 + length {
                        let at = Instant::now();
                        let body: Value =
                            serde_json::from_slice(&raw[end + 4..end + 4 + length]).unwrap_or(Value::Null);
                        if let Some(id) = body["data"]["id"].as_str() {
                            arrivals.lock().expect("lock").insert(id.to_owned(), at);
                        }
                        let _ = stream
                            .write_all(b"HTTP/1.1 204 No Content\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                            .await;
                        return;
                    }
                }
            });
        }
    });
    url
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
    let index = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index]
}

#[tokio::main]
async fn main() {
    let Bench { client, tables, tenant, key } = setup("webhooks bench", 100_000).await;
    let clock = Arc::new(SystemClock);
    let workflows = workflows::app(client.clone(), tables.clone(), clock.clone());
    let executions = executions::app(client.clone(), tables.clone(), clock.clone());
    let hooks = webhooks::app(client.clone(), tables.clone(), clock);
    let arrivals: Arrivals = Arc::default();
    let url = receiver(arrivals.clone()).await;
    let hook = json!({"url": url, "event_types": ["execution.started"]});
    call(&hooks, &key, Method::POST, "/api/v1/webhook-endpoints", Some(&hook)).await;
    let wf = call(
        &workflows,
        &key,
        Method::POST,
        "/api/v1/workflows",
        Some(&json!({"name": "b", "workflow_type": "custom"})),
    )
    .await;
    let start = json!({"workflow_id": wf["id"]});

    let state = std::env::temp_dir().join(format!("cairn-bench-relay-{}.json", std::process::id()));
    let settings = relay::Settings {
        state_file: state.clone(),
        poll: Duration::from_millis(50),
        sweep: Duration::from_secs(2),
        once: false,
        ttl: false,
    };
    let (relay_client, relay_tables) = (client.clone(), tables.clone());
    tokio::spawn(async move { relay::run(&relay_client, &relay_tables, &settings).await });

    let outbox_before = api_tests::outbox(&client, &tables, tenant.as_str()).await.len();
    let mut latencies = Vec::new();
    let mut capacity = 0.0;
    for _ in 0..RUNS {
        let ((created, answered), usage) = metered(async {
            let (created, after) =
                answer(&executions, &key, (Method::POST, "/api/v1/executions"), Some(&start), &[]).await;
            let answered = Instant::now();
            after_answer(after).await;
            (created, answered)
        })
        .await;
        capacity = usage.capacity;
        let id = created["id"].as_str().expect("id").to_owned();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(at) = arrivals.lock().expect("lock").get(&id) {
                latencies.push(at.saturating_duration_since(answered));
                break;
            }
            assert!(Instant::now() < deadline, "{id} not delivered in 30 s");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    latencies.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;

    // What the starts added to the outbox (each start's event is its own item instead).
    let outbox_items = api_tests::outbox(&client, &tables, tenant.as_str()).await.len() - outbox_before;
    let _ = std::fs::remove_file(state);

    println!("webhooks against DynamoDB Local ({RUNS} execution starts, one endpoint, the relay polling every 50 ms)");
    println!(
        "{:<44} {:>10}",
        "from the API's answer to delivery, p50 ms",
        format!("{:.1}", ms(percentile(&latencies, 0.5)))
    );
    println!(
        "{:<44} {:>10}",
        "from the API's answer to delivery, p99 ms",
        format!("{:.1}", ms(percentile(&latencies, 0.99)))
    );
    println!("{:<44} {:>10}", format!("outbox items the {RUNS} starts wrote"), outbox_items);
    println!("{:<44} {:>10}", "capacity of the whole start, as reported", format!("{capacity:.1}"));
}
