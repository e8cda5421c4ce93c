//! Checkpoint write and read cost against DynamoDB Local: DynamoDB round trips,
//! consumed capacity and latency per operation, for states of 1 KiB, 256 KiB and 4 MiB,
//! through the real handlers (in process).
//!
//! Run with `make bench` (it starts DynamoDB Local and creates the tables).
//! Goal (the executions issue): a 4 MiB checkpoint in at most 3 round trips each way.

use std::sync::Arc;
use std::time::{Duration, Instant};

use api_tests::bench::{Bench, after_answer, answer, call, setup};
use http::Method;
use serde_json::{Map, Value, json};
use shared::metering::{Usage, metered};
use shared::time::SystemClock;

fn state_of_size(size: usize) -> Value {
    let mut seed = 0x2545_F491_4F6C_DD1D_u64;
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let text: String = (0..size - r#"{"blob":""}"#.len())
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            char::from(alphabet[(seed % 64) as usize])
        })
        .collect();
    let mut map = Map::new();
    map.insert("blob".to_owned(), Value::String(text));
    Value::Object(map)
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort_unstable();
    values[values.len() / 2]
}

#[tokio::main]
async fn main() {
    let Bench { client, tables, key, .. } = setup("bench", 100).await;
    let clock = Arc::new(SystemClock);
    let workflows = workflows::app(client.clone(), tables.clone(), clock.clone());
    let executions = executions::app(client.clone(), tables.clone(), clock.clone());
    let checkpoints = checkpoints::app(client.clone(), tables.clone(), clock);
    let wf = call(
        &workflows,
        &key,
        Method::POST,
        "/api/v1/workflows",
        Some(&json!({"name": "bench", "workflow_type": "custom"})),
    )
    .await;
    let run = json!({"workflow_id": wf["id"]});
    let execution = call(&executions, &key, Method::POST, "/api/v1/executions", Some(&run)).await;
    let iterations = 5;
    println!("checkpoint cost against DynamoDB Local ({iterations} runs each; round trips and capacity per operation)");
    println!("{:<10} {:<6} {:>11} {:>10} {:>12}", "state", "op", "round trips", "capacity", "median ms");
    for (label, size) in [("1 KiB", 1024), ("256 KiB", 256 * 1024), ("4 MiB", 4 * 1024 * 1024)] {
        let state = state_of_size(size);
        let body = json!({"execution_id": execution["id"], "state": state});
        let (mut write_times, mut read_times) = (Vec::new(), Vec::new());
        let (mut write_cost, mut read_cost) = (Usage::default(), Usage::default());
        // Latency up to the answer; calls and capacity with the count after it.
        let timed = |request: (Method, String), body: Option<serde_json::Value>| {
            let (checkpoints, key) = (&checkpoints, &key);
            metered(async move {
                let started = Instant::now();
                let (answer, after) = answer(checkpoints, key, (request.0, &request.1), body.as_ref(), &[]).await;
                let took = started.elapsed();
                after_answer(after).await;
                (answer, took)
            })
        };
        for _ in 0..iterations {
            let ((created, took), cost) =
                timed((Method::POST, "/api/v1/checkpoints".to_owned()), Some(body.clone())).await;
            write_times.push(took);
            write_cost = cost;
            let uri = format!("/api/v1/checkpoints/{}?include_state=true", created["id"].as_str().expect("id"));
            let ((back, took), cost) = timed((Method::GET, uri), None).await;
            read_times.push(took);
            read_cost = cost;
            assert_eq!(back["state"], state);
        }
        // The last run's cost: a warm instance, whose look at the standing proves the key
        // live.
        println!(
            "{label:<10} {:<6} {:>11} {:>10.1} {:>12.1}",
            "write",
            write_cost.calls,
            write_cost.capacity,
            median(write_times).as_secs_f64() * 1e3
        );
        println!(
            "{label:<10} {:<6} {:>11} {:>10.1} {:>12.1}",
            "read",
            read_cost.calls,
            read_cost.capacity,
            median(read_times).as_secs_f64() * 1e3
        );
    }
    println!("(round trips: every call, the look at the rate-limit standing and the count after the answer included;");
    println!(" capacity is what DynamoDB Local reports; latency is up to the answer)");
}
