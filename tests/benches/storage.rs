//! What a tenant's data costs to store, and what retention saves: the bytes DynamoDB
//! bills (every item's size by DynamoDB's rules, plus its 100 bytes of overhead, plus
//! its copy in every index that holds it) for executions like an agent's, measured on
//! tables of the bench's own after writing through the API in process:
//!
//! - `bare`: started and completed, 1 KB of input and of output, no checkpoint;
//! - `checkpointed`: the same with 10 checkpoints whose state is a conversation that
//!   grows by one message of about 400 bytes a step (LangGraph's way: each checkpoint
//!   holds every message so far);
//! - `keep_latest`: the same once its ending has trimmed the checkpoints to the last.
//!
//! Each kind is measured on its own executions; the bytes of a kind are what the tables
//! grew by while they were written. Run with `make bench`.

use std::collections::BTreeMap;

use api_tests::{Api, Env, Transport};
use serde_json::{Value, json};
use shared::dynamo::{Item, Table, item_size};

/// Executions of each kind.
const RUNS: usize = 10;
/// Checkpoints of a checkpointed execution.
const STEPS: usize = 10;
/// DynamoDB Standard's storage price, us-east-1, in USD per GB-month (the first 25 GB
/// of each month are free).
const USD_PER_GB_MONTH: f64 = 0.25;
/// DynamoDB's storage overhead of each item, in bytes.
const ITEM_OVERHEAD: usize = 100;

/// A deterministic English-like sentence of about `bytes` bytes (compressed as real
/// text compresses, not as repeated bytes do).
fn text(seed: &mut u64, bytes: usize) -> String {
    const WORDS: [&str; 48] = [
        "the",
        "agent",
        "calls",
        "a",
        "tool",
        "with",
        "arguments",
        "and",
        "reads",
        "its",
        "result",
        "before",
        "answering",
        "user",
        "question",
        "about",
        "order",
        "refund",
        "policy",
        "shipping",
        "delay",
        "customer",
        "account",
        "invoice",
        "was",
        "paid",
        "on",
        "monday",
        "but",
        "item",
        "arrived",
        "damaged",
        "please",
        "check",
        "status",
        "of",
        "ticket",
        "number",
        "escalate",
        "to",
        "support",
        "team",
        "if",
        "needed",
        "thanks",
        "for",
        "waiting",
        "today",
    ];
    let mut out = String::new();
    while out.len() < bytes {
        *seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        let word = WORDS[usize::try_from(*seed >> 58).unwrap_or(0) % WORDS.len()];
        out.push_str(word);
        out.push(' ');
    }
    out
}

/// Bytes billed for every item of each of the bench's tables, indexes included.
async fn billed(env: &Env, specs: &[infra::template::TableSpec]) -> BTreeMap<&'static str, usize> {
    let mut tables = BTreeMap::new();
    for table in Table::ALL {
        let spec = specs.iter().find(|spec| spec.suffix == table.suffix()).expect("the template's table");
        let total = tables.entry(table.suffix()).or_insert(0);
        for item in api_tests::scan_all(env, table).await {
            *total += item_size(&item) + ITEM_OVERHEAD;
            for index in &spec.indexes {
                if !index.key.iter().all(|part| item.contains_key(&part.attribute)) {
                    continue;
                }
                *total += ITEM_OVERHEAD
                    + match index.projection.as_str() {
                        "ALL" => item_size(&item),
                        _ => {
                            let keys = spec.key.iter().chain(&index.key).map(|part| part.attribute.as_str());
                            let projected: Item = keys
                                .filter_map(|k| item.get_key_value(k))
                                .map(|(k, v)| (k.clone(), v.clone()))
                                .collect();
                            item_size(&projected)
                        }
                    };
            }
        }
    }
    tables
}

/// What each table grew by from `before` to `after`, per execution (tables that did not
/// grow left out).
fn grown(before: &BTreeMap<&'static str, usize>, after: &BTreeMap<&'static str, usize>) -> BTreeMap<&'static str, f64> {
    after
        .iter()
        .map(|(table, bytes)| (*table, (*bytes as f64 - before[table] as f64) / RUNS as f64))
        .filter(|(_, bytes)| *bytes > 0.0)
        .collect()
}

/// Runs `RUNS` executions of workflow `wf`, each with `steps` checkpoints.
async fn run(api: &Api, key: &str, wf: &str, steps: usize, seed: &mut u64) {
    for _ in 0..RUNS {
        let input = json!({"question": text(seed, 1000)});
        let started = api.post(key, "/executions", &json!({"workflow_id": wf, "input": input})).await;
        let id = started.expect(201).body["id"].as_str().expect("id").to_owned();
        let mut messages: Vec<Value> = Vec::new();
        for step in 0..steps {
            let role = if step % 2 == 0 { "user" } else { "assistant" };
            messages.push(json!({"role": role, "content": text(seed, 400)}));
            let body = json!({"execution_id": id, "name": format!("step {step}"), "state": {"messages": messages}});
            api.post(key, "/checkpoints", &body).await.expect(201);
        }
        let output = json!({"answer": text(seed, 1000)});
        api.post(key, &format!("/executions/{id}/complete"), &json!({"output": output})).await.expect(200);
    }
}

/// Hands the jobs function the trims due at once, as the jobs table's mapping would.
async fn trim(env: &Env) {
    let records: Vec<Value> = api_tests::scan_all(env, Table::Jobs)
        .await
        .into_iter()
        .filter(|item| item.get("id").is_some_and(|id| id.as_s().is_ok_and(|id| id == "trim")))
        .filter(|item| !item.contains_key("expires_at"))
        .map(|item| {
            let text = |name: &str| item[name].as_s().expect("text").clone();
            json!({"eventName": "INSERT", "dynamodb": {"SequenceNumber": "1",
                "NewImage": {"tenant_id": {"S": text("tenant_id")}, "id": {"S": text("id")}}}})
        })
        .collect();
    let handler = jobs::Jobs::new(env.client.clone(), env.tables.clone());
    let deadline = std::time::SystemTime::now() + jobs::MARGIN + std::time::Duration::from_secs(300);
    let ms = u64::try_from(deadline.duration_since(std::time::UNIX_EPOCH).expect("now").as_millis()).expect("ms");
    let answer = Box::pin(handler.handle(json!({"Records": records}), ms)).await;
    assert_eq!(answer["batchItemFailures"], json!([]), "the trims ran");
}

#[tokio::main]
async fn main() {
    let env = api_tests::own_env("storage").await;
    let specs = infra::template::Template::embedded().expect("template").tables().expect("tables");
    let api = Api::new(Transport::in_process(&env));
    let t = env.tenant_with_credits(1_000).await;
    let wf = api.post(&t.key, "/workflows", &json!({"name": "support", "workflow_type": "langgraph"})).await;
    let wf = wf.expect(201).body["id"].as_str().expect("id").to_owned();
    let mut seed = 7;
    // First, unmeasured: the tenant's counters of this hour and day, the workflow's
    // span counters, are made once, not by every execution.
    run(&api, &t.key, &wf, 0, &mut seed).await;

    let before = billed(&env, &specs).await;
    run(&api, &t.key, &wf, 0, &mut seed).await;
    let after_bare = billed(&env, &specs).await;
    run(&api, &t.key, &wf, STEPS, &mut seed).await;
    let after_checkpointed = billed(&env, &specs).await;
    let keep_latest = json!({"checkpoints": "keep_latest"});
    api.put(&t.key, "/settings/retention", &keep_latest).await.expect(200);
    let settled = billed(&env, &specs).await;
    run(&api, &t.key, &wf, STEPS, &mut seed).await;
    trim(&env).await;
    let after_trimmed = billed(&env, &specs).await;

    let kinds = [
        ("bare (1 KB input and output, no checkpoint)", grown(&before, &after_bare)),
        ("checkpointed (10 checkpoints, a growing conversation)", grown(&after_bare, &after_checkpointed)),
        ("checkpointed, `keep_latest` once ended", grown(&settled, &after_trimmed)),
    ];
    let names: std::collections::BTreeSet<&str> = kinds.iter().flat_map(|(_, grown)| grown.keys().copied()).collect();
    println!(
        "| execution | bytes billed | {} | a run a minute, 30 days' retention: stored, USD a month | kept for good, a month |",
        names.iter().copied().collect::<Vec<_>>().join(" | ")
    );
    println!("|---|---|{}---|---|", "---|".repeat(names.len()));
    let mut stored_of = Vec::new();
    for (kind, grown) in &kinds {
        let bytes: f64 = grown.values().sum();
        let each: Vec<String> =
            names.iter().map(|name| format!("{:.0}", grown.get(name).copied().unwrap_or(0.0))).collect();
        let of = |tables: &[&str]| tables.iter().map(|t| grown.get(t).copied().unwrap_or(0.0)).sum::<f64>();
        // What goes with the execution: 30 days of them (43,200); the outbox: 7 days
        // (10,080); the ledger: a month's more each month (counters grow with time,
        // by minute, hour and day, not with executions).
        let stored = of(&["executions", "checkpoints", "blobs", "jobs"]) * 43_200.0 + of(&["events"]) * 10_080.0;
        let kept = of(&["ledger", "failures"]) * 43_200.0;
        stored_of.push(stored);
        println!(
            "| {kind} | {bytes:.0} | {} | {:.2} GB, ${:.2} | {:.0} MB |",
            each.join(" | "),
            stored / 1e9,
            stored / 1e9 * USD_PER_GB_MONTH,
            kept / 1e6
        );
    }
    println!();
    let checkpoints = kinds[1].1.get("checkpoints").copied().unwrap_or(0.0);
    println!("per checkpoint (its items, state and index copies): {:.0} bytes", checkpoints / STEPS as f64);
    println!(
        "keep_latest saves {:.0}% of what checkpointed executions keep stored",
        100.0 * (1.0 - stored_of[2] / stored_of[1])
    );
}
