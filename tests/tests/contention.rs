//! One busy tenant: many writers at once, in process and through `cargo lambda watch`.
//! Nothing is lost and nothing happens twice: every start and checkpoint is answered 201
//! (by a client that sends a 503 again with the same `Idempotency-Key`, as ours does:
//! DynamoDB Local, a hundred times slower than DynamoDB at contended transactions, can
//! run some of sixty-four starts on one balance out of their race budget), and the
//! balance, the ledger, every list total and the statistics (summed over the counters'
//! shards) are exact right after.

use api_tests::{Api, Env, both_paths};
use serde_json::{Value, json};

both_paths!(sixty_four_concurrent_starts_and_checkpoints_of_one_tenant_lose_nothing);

/// Writers at once.
const WRITERS: usize = 64;

/// One run at a time (in process, then through the emulator, or the other way round):
/// 64 writers are the load under test, not 128 on DynamoDB Local's two cores.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn all_created(handles: Vec<tokio::task::JoinHandle<(api_tests::Reply, u32)>>) -> Vec<Value> {
    let (mut bodies, mut retried) = (Vec::new(), 0);
    for handle in handles {
        let (reply, unavailable) = handle.await.expect("task");
        assert_eq!(reply.status, 201, "every write lands, none fails: {}", reply.body);
        bodies.push(reply.body.clone());
        retried += unavailable;
    }
    eprintln!("{} writes, {retried} of them sent again after a 503", bodies.len());
    bodies
}

async fn sixty_four_concurrent_starts_and_checkpoints_of_one_tenant_lose_nothing(api: Api, env: Env) {
    let _alone = ONE_AT_A_TIME.lock().await;
    let t = env.tenant_with_credits(500).await;
    let wf = api.post(&t.key, "/workflows", &json!({"name": "busy", "workflow_type": "langgraph"})).await;
    let wf = wf.expect(201).body["id"].as_str().expect("id").to_owned();
    let starts = (0..WRITERS)
        .map(|i| {
            let (api, key, wf) = (api.clone(), t.key.clone(), wf.clone());
            let once = format!("start-{i}");
            tokio::spawn(
                async move { api.post_retrying(&key, "/executions", &json!({"workflow_id": wf}), &once).await },
            )
        })
        .collect();
    let started = all_created(starts).await;
    let ids: Vec<String> = started.iter().map(|e| e["id"].as_str().expect("id").to_owned()).collect();

    // Checkpoints at once: one for each execution, and a second for the first eight (so
    // writers of one execution race too).
    let targets: Vec<&String> = ids.iter().chain(ids.iter().take(8)).take(WRITERS + 8).collect();
    let writes = targets
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let (api, key) = (api.clone(), t.key.clone());
            let body = json!({"execution_id": id, "name": format!("step {i}"), "state": {"i": i}});
            let once = format!("checkpoint-{i}");
            tokio::spawn(async move { api.post_retrying(&key, "/checkpoints", &body, &once).await })
        })
        .collect();
    all_created(writes).await;

    let balance = api.get(&t.key, "/billing/balance").await.expect(200).body["credits_balance"].clone();
    assert_eq!(balance, json!(500 - WRITERS), "one credit a start");
    let all = api.get(&t.key, "/billing/transactions?page_size=100").await.body["items"].clone();
    let entries = all.as_array().expect("items");
    let charged: i64 = entries.iter().filter(|e| e["type"] == "usage").filter_map(|e| e["amount"].as_i64()).sum();
    assert_eq!(charged, -(WRITERS as i64), "every start charged once, in the usage entries");
    assert_eq!(entries[0]["credits_after"], balance, "the newest entry's balance is the balance");
    for pair in entries.windows(2) {
        assert_eq!(pair[0]["credits_before"], pair[1]["credits_after"], "the ledger chains");
    }
    let usage = api.get(&t.key, "/billing/transactions?type=usage").await;
    let counted = entries.iter().filter(|e| e["type"] == "usage").count();
    assert_eq!(usage.expect(200).body["total"], json!(counted), "the usage total counts its entries");
    let listed = api.get(&t.key, &format!("/executions?workflow_id={wf}&status=running")).await;
    assert_eq!(listed.expect(200).body["total"], json!(WRITERS));
    assert_eq!(api.get(&t.key, "/executions").await.body["total"], json!(WRITERS));
    let window = "created_after=2000-01-01T00:00:00Z";
    assert_eq!(api.get(&t.key, &format!("/executions?{window}")).await.body["total"], json!(WRITERS));
    let stats = api.get(&t.key, "/executions/stats").await.expect(200).body.clone();
    assert_eq!(stats["total"], json!(WRITERS), "{stats}");
    let used = api.get(&t.key, "/billing/usage").await.expect(200).body.clone();
    assert_eq!(used["credits"], json!(WRITERS), "{used}");
    for (i, id) in ids.iter().enumerate() {
        let checkpoints = api.get(&t.key, &format!("/checkpoints?execution_id={id}")).await;
        let expected = if i < 8 { 2 } else { 1 };
        assert_eq!(checkpoints.expect(200).body["total"], json!(expected), "{id}");
    }
}
