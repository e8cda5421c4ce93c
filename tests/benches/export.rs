//! What an export costs, round by round: a tenant's executions (each started, given
//! checkpoints of a growing conversation, completed; one in ten failed instead) exported
//! through the jobs function's handler one round per call, as the jobs table's stream
//! mapping hands them over, on tables of the bench's own. Reports the rounds, the parts
//! and their sizes, each round's time and DynamoDB reads, and what that makes of an
//! export of 100,000 executions. Run with `make bench`.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use api_tests::{Api, Transport};
use serde_json::{Value, json};

/// Executions exported.
const RUNS: usize = 300;
/// Checkpoints of each.
const STEPS: usize = 3;
/// The tenant the figures are scaled to.
const SCALED_TO: f64 = 100_000.0;

/// A deadline that leaves the handler time for exactly one round.
fn one_round() -> u64 {
    let deadline = SystemTime::now() + jobs::MARGIN + Duration::from_millis(100);
    u64::try_from(deadline.duration_since(UNIX_EPOCH).expect("now").as_millis()).expect("ms")
}

/// A message of about 400 bytes of text, different each time.
fn message(n: usize) -> String {
    let words = ["the", "agent", "calls", "a", "tool", "and", "reads", "its", "result", "for", "order", "refund"];
    (0..70).map(|i| words[(n * 7 + i * 13) % words.len()]).collect::<Vec<_>>().join(" ")
}

#[tokio::main]
async fn main() {
    let env = api_tests::own_env("exportbench").await;
    let api = Api::new(Transport::in_process(&env));
    let t = env.tenant_with_credits(10_000).await;
    let wf = api.post(&t.key, "/workflows", &json!({"name": "support", "workflow_type": "langgraph"})).await;
    let wf = wf.expect(201).body["id"].as_str().expect("id").to_owned();
    let made = Instant::now();
    for n in 0..RUNS {
        let started = api.post(&t.key, "/executions", &json!({"workflow_id": wf, "input": {"q": message(n)}})).await;
        let id = started.expect(201).body["id"].as_str().expect("id").to_owned();
        let mut messages: Vec<Value> = Vec::new();
        for step in 0..STEPS {
            messages.push(json!({"role": "assistant", "content": message(n + step)}));
            let body = json!({"execution_id": id, "state": {"messages": messages}});
            api.post(&t.key, "/checkpoints", &body).await.expect(201);
        }
        if n % 10 == 0 {
            let fail = json!({"error_type": "TIMEOUT", "message": "the model did not answer"});
            api.post(&t.key, &format!("/executions/{id}/fail"), &fail).await.expect(200);
        } else {
            api.post(&t.key, &format!("/executions/{id}/complete"), &json!({"output": {"a": message(n)}}))
                .await
                .expect(200);
        }
    }
    eprintln!("{RUNS} executions written in {:.0} s", made.elapsed().as_secs_f64());

    let export = api.post(&t.key, "/exports", &json!({})).await;
    let id = export.expect(202).body["id"].as_str().expect("id").to_owned();
    let handler = jobs::Jobs::new(env.client.clone(), env.tables.clone());
    let mut rounds: Vec<(f64, f64)> = Vec::new();
    let mut last = Value::Null;
    for round in 0..10_000u64 {
        last = api.get(&t.key, &format!("/exports/{id}")).await.expect(200).body.clone();
        if last["status"] != "running" {
            break;
        }
        let record = json!({"eventName": "MODIFY", "dynamodb": {"SequenceNumber": format!("{round:020}"), "NewImage": {
            "tenant_id": {"S": format!("{}#exports", t.id)}, "id": {"S": id}, "round": {"N": round.to_string()},
            "status": {"S": "running"}}}});
        let began = Instant::now();
        let (answer, calls) =
            Box::pin(shared::metering::recorded(handler.handle(json!({"Records": [record]}), one_round()))).await;
        assert_eq!(answer["batchItemFailures"], json!([]));
        rounds.push((began.elapsed().as_secs_f64(), calls.len() as f64));
    }
    assert_eq!(last["status"], "completed", "{last}");

    let parts = last["parts"].as_array().expect("parts");
    let bytes: u64 = parts.iter().map(|p| p["bytes"].as_u64().expect("bytes")).sum();
    let lines: u64 = parts.iter().map(|p| p["lines"].as_u64().expect("lines")).sum();
    let seconds: f64 = rounds.iter().map(|(s, _)| s).sum();
    let calls: f64 = rounds.iter().map(|(_, c)| c).sum();
    let slowest = rounds.iter().map(|(s, _)| *s).fold(0.0, f64::max);
    let scale = SCALED_TO / RUNS as f64;
    println!("## Export\n");
    println!(
        "{RUNS} executions, each with {STEPS} checkpoints of a growing conversation (one in ten failed), \
         exported one round per call of the jobs function's handler, in process, on DynamoDB Local.\n"
    );
    println!("| | measured | scaled to {SCALED_TO:.0} executions |");
    println!("|---|---|---|");
    println!("| lines (records) | {lines} | {:.0} |", lines as f64 * scale);
    println!("| rounds | {} | {:.0} |", rounds.len(), rounds.len() as f64 * scale);
    println!("| parts | {} | {:.0} |", parts.len(), parts.len() as f64 * scale);
    println!("| gzip bytes | {bytes} | {:.0} MB |", bytes as f64 * scale / 1e6);
    println!("| DynamoDB calls | {calls:.0} | {:.0} |", calls * scale);
    println!("| time in rounds | {seconds:.1} s | {:.0} s |", seconds * scale);
    println!(
        "| slowest round | {slowest:.2} s | (a round stops at {} lines) |",
        domain::runs::export::model::ROUND_LINES
    );
    println!("| records per second | {:.0} | |", lines as f64 / seconds);
}
