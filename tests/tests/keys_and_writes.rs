//! The API's general features for clients that name their own runs (the LangGraph
//! checkpointer is the first): executions and checkpoints found and created
//! idempotently by a client-chosen key, newest-first and metadata-filtered checkpoint
//! lists, writes attached to a checkpoint, and deleting an execution with everything it
//! holds.

use api_tests::{Api, Env, both_paths};
use http::Method;
use serde_json::{Value, json};

both_paths!(
    a_keyed_start_is_idempotent_within_its_workflow_and_charged_once,
    concurrent_keyed_starts_make_one_execution,
    a_keyed_checkpoint_is_recorded_once_and_found_by_key,
    a_checkpoint_key_is_found_across_the_executions_of_its_workflow,
    checkpoint_lists_go_newest_first_and_filter_on_metadata,
    writes_are_stored_per_task_and_index_and_replaced_not_duplicated,
    writes_are_refused_when_invalid_too_large_or_not_running,
    a_checkpoint_brings_the_writes_of_an_earlier_one_in_one_request,
    pending_writes_that_cannot_be_stored_change_nothing,
    a_rollback_discards_the_writes_and_keys_of_what_it_discards,
    deleting_an_execution_takes_everything_and_frees_its_key,
    deleting_a_checkpoint_takes_its_state_key_and_writes,
);

fn id(v: &Value) -> String {
    v["id"].as_str().unwrap_or_else(|| panic!("an id in {v}")).to_owned()
}

async fn workflow(api: &Api, key: &str) -> String {
    id(&api.post(key, "/workflows", &json!({"name": "wf", "workflow_type": "langgraph"})).await.expect(201).body)
}

async fn balance(api: &Api, key: &str) -> i64 {
    api.get(key, "/billing/balance").await.expect(200).body["credits_balance"].as_i64().expect("balance")
}

async fn a_keyed_start_is_idempotent_within_its_workflow_and_charged_once(api: Api, env: Env) {
    let t = env.tenant_with_credits(100).await;
    let wf = workflow(&api, &t.key).await;
    let first =
        api.post(&t.key, "/executions", &json!({"workflow_id": wf, "key": "thread-1", "input": {"n": 1}})).await;
    first.expect(201);
    assert_eq!(first.body["key"], "thread-1");
    let e = id(&first.body);
    let after_first = balance(&api, &t.key).await;
    api.post(&t.key, &format!("/executions/{e}/pause"), &json!({})).await.expect(200);
    // Again, with another input: the same execution as it is now, nothing charged.
    let again =
        api.post(&t.key, "/executions", &json!({"workflow_id": wf, "key": "thread-1", "input": {"n": 2}})).await;
    again.expect(200);
    assert_eq!(id(&again.body), e);
    assert_eq!(again.body["status"], "paused");
    assert_eq!(again.body["input"], json!({"n": 1}));
    assert_eq!(again.header("location"), Some(format!("/api/v1/executions/{e}").as_str()));
    assert_eq!(balance(&api, &t.key).await, after_first);
    // Found by key in its workflow, and only there.
    let found = api.get(&t.key, &format!("/executions?workflow_id={wf}&key=thread-1")).await;
    assert_eq!(found.expect(200).body["total"], 1);
    assert_eq!(found.body["items"][0]["id"], e.as_str());
    let none = api.get(&t.key, &format!("/executions?workflow_id={wf}&key=thread-2")).await;
    assert_eq!(none.expect(200).body["items"], json!([]));
    assert_eq!(none.body["total"], 0);
    let filtered = api.get(&t.key, &format!("/executions?workflow_id={wf}&key=thread-1&status=running")).await;
    assert_eq!(filtered.expect(200).body["total"], 0, "the key's execution is paused");
    // The same key in another workflow is another execution.
    let other = workflow(&api, &t.key).await;
    let elsewhere = api.post(&t.key, "/executions", &json!({"workflow_id": other, "key": "thread-1"})).await;
    assert_ne!(id(&elsewhere.expect(201).body), e);
    // The longest key (256 characters of 4 bytes: more than DynamoDB's sort key with its
    // workflow's id) is one execution, found by key.
    let longest = json!({"workflow_id": wf, "key": "\u{1F600}".repeat(shared::body::KEY_MAX_CHARS)});
    let long = id(&api.post(&t.key, "/executions", &longest).await.expect(201).body);
    assert_eq!(id(&api.post(&t.key, "/executions", &longest).await.expect(200).body), long);
    let encoded = "%F0%9F%98%80".repeat(shared::body::KEY_MAX_CHARS);
    let found = api.get(&t.key, &format!("/executions?workflow_id={wf}&key={encoded}")).await;
    assert_eq!(found.expect(200).body["items"][0]["id"], long.as_str());
    // Bad keys change nothing.
    for bad in [json!(""), json!("a\u{7}b"), json!("k".repeat(257)), json!(7)] {
        let reply = api.post(&t.key, "/executions", &json!({"workflow_id": wf, "key": bad})).await;
        reply.expect_problem(422, "validation_failed");
        assert_eq!(reply.error_fields(), ["key"]);
    }
    let unkeyed = api.get(&t.key, "/executions?key=thread-1").await;
    unkeyed.expect_problem(422, "validation_failed");
    assert_eq!(unkeyed.error_fields(), ["key"]);
    assert_eq!(api.get(&t.key, "/executions").await.body["total"], 3);
}

async fn concurrent_keyed_starts_make_one_execution(api: Api, env: Env) {
    let t = env.tenant_with_credits(100).await;
    let wf = workflow(&api, &t.key).await;
    let before = balance(&api, &t.key).await;
    let body = json!({"workflow_id": wf, "key": "same"});
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (api, key, body) = (api.clone(), t.key.clone(), body.clone());
            tokio::spawn(async move { api.post(&key, "/executions", &body).await })
        })
        .collect();
    let mut replies = Vec::new();
    for task in tasks {
        replies.push(task.await.expect("joined"));
    }
    let created = replies.iter().filter(|r| r.status == 201).count();
    assert_eq!(created, 1, "{:?}", replies.iter().map(|r| r.status).collect::<Vec<_>>());
    assert!(replies.iter().all(|r| r.status == 201 || r.status == 200));
    let ids: std::collections::BTreeSet<String> = replies.iter().map(|r| id(&r.body)).collect();
    assert_eq!(ids.len(), 1, "one execution: {ids:?}");
    assert_eq!(api.get(&t.key, "/executions").await.body["total"], 1);
    assert_eq!(balance(&api, &t.key).await, before - 1, "charged once");
}

async fn start(api: &Api, key: &str) -> String {
    let wf = workflow(api, key).await;
    id(&api.post(key, "/executions", &json!({"workflow_id": wf})).await.expect(201).body)
}

async fn checkpoint(api: &Api, key: &str, e: &str, body: Value) -> Value {
    let mut body = body;
    body["execution_id"] = json!(e);
    if body.get("state").is_none() {
        body["state"] = json!({});
    }
    let reply = api.post(key, "/checkpoints", &body).await;
    assert!(reply.status == 201 || reply.status == 200, "{} {}", reply.status, reply.body);
    reply.body
}

async fn a_keyed_checkpoint_is_recorded_once_and_found_by_key(api: Api, env: Env) {
    let t = env.tenant().await;
    let e = start(&api, &t.key).await;
    let body = json!({"execution_id": e, "key": "ns|1ef0", "state": {"v": 1}});
    let first = api.post(&t.key, "/checkpoints", &body).await;
    first.expect(201);
    assert_eq!(first.body["key"], "ns|1ef0");
    let again =
        api.post(&t.key, "/checkpoints", &json!({"execution_id": e, "key": "ns|1ef0", "state": {"v": 2}})).await;
    again.expect(200);
    assert_eq!(again.body, first.body, "the checkpoint as it was recorded");
    let execution = api.get(&t.key, &format!("/executions/{e}")).await;
    assert_eq!(execution.body["checkpoint_count"], 1);
    let state = api.get(&t.key, &format!("/checkpoints/{}?include_state=true", id(&first.body))).await;
    assert_eq!(state.body["state"], json!({"v": 1}));
    let found = api.get(&t.key, &format!("/checkpoints?execution_id={e}&key=ns%7C1ef0")).await;
    assert_eq!(found.expect(200).body["items"][0]["id"], first.body["id"]);
    assert_eq!(found.body["total"], 1);
    let none = api.get(&t.key, &format!("/checkpoints?execution_id={e}&key=other")).await;
    assert_eq!((none.body["items"].clone(), none.body["total"].clone()), (json!([]), json!(0)));
    // The longest key (256 characters of 4 bytes: more than DynamoDB's sort key with its
    // execution's id) is recorded, found and recorded once all the same.
    let longest = "\u{1F600}".repeat(shared::body::KEY_MAX_CHARS);
    let long = json!({"execution_id": e, "key": longest, "state": {"v": 3}});
    let recorded = api.post(&t.key, "/checkpoints", &long).await;
    recorded.expect(201);
    api.post(&t.key, "/checkpoints", &long).await.expect(200);
    let encoded = "%F0%9F%98%80".repeat(shared::body::KEY_MAX_CHARS);
    let found = api.get(&t.key, &format!("/checkpoints?execution_id={e}&key={encoded}")).await;
    assert_eq!(found.expect(200).body["items"][0]["id"], recorded.body["id"]);
    // The same key in another execution is another checkpoint.
    let other = start(&api, &t.key).await;
    let elsewhere = checkpoint(&api, &t.key, &other, json!({"key": "ns|1ef0"})).await;
    assert_ne!(elsewhere["id"], first.body["id"]);
    // A keyed checkpoint of a paused execution is still answered; a new one is 409.
    api.post(&t.key, &format!("/executions/{e}/pause"), &json!({})).await.expect(200);
    api.post(&t.key, "/checkpoints", &body).await.expect(200);
    let new = json!({"execution_id": e, "key": "ns|1ef1", "state": {}});
    api.post(&t.key, "/checkpoints", &new).await.expect_problem(409, "invalid_state");
    let bad = api.post(&t.key, "/checkpoints", &json!({"execution_id": e, "key": "", "state": {}})).await;
    bad.expect_problem(422, "validation_failed");
}

async fn a_checkpoint_key_is_found_across_the_executions_of_its_workflow(api: Api, env: Env) {
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key).await;
    let run = || async { id(&api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201).body) };
    let (e1, e2) = (run().await, run().await);
    let c1 = id(&checkpoint(&api, &t.key, &e1, json!({"key": "cp-1"})).await);
    let c2 = id(&checkpoint(&api, &t.key, &e2, json!({"key": "cp-1"})).await);
    let c3 = id(&checkpoint(&api, &t.key, &e1, json!({"key": "cp-1#x"})).await);
    let found = |key: &'static str| {
        let (api, tenant, wf) = (&api, t.key.clone(), wf.clone());
        async move {
            let answer = api.get(&tenant, &format!("/checkpoints?workflow_id={wf}&key={key}")).await;
            let body = answer.expect(200).body.clone();
            let mut pairs: Vec<(String, String)> = body["items"]
                .as_array()
                .expect("items")
                .iter()
                .map(|c| (id(c), c["execution_id"].as_str().expect("execution_id").to_owned()))
                .collect();
            pairs.sort();
            assert_eq!(body["total"], pairs.len(), "{body}");
            assert_eq!(body["next_starting_after"], Value::Null);
            pairs
        }
    };
    let mut both = vec![(c1.clone(), e1.clone()), (c2.clone(), e2.clone())];
    both.sort();
    assert_eq!(found("cp-1").await, both, "the key's checkpoint in each execution");
    assert_eq!(found("cp-1%23x").await, vec![(c3.clone(), e1.clone())], "a key is matched whole, # and all");
    assert_eq!(found("cp").await, vec![]);
    // Only in that workflow, only for its tenant.
    let other_wf = workflow(&api, &t.key).await;
    let elsewhere = api.get(&t.key, &format!("/checkpoints?workflow_id={other_wf}&key=cp-1")).await;
    assert_eq!(elsewhere.expect(200).body["total"], 0);
    let other = env.tenant().await;
    let stranger = api.get(&other.key, &format!("/checkpoints?workflow_id={wf}&key=cp-1")).await;
    stranger.expect_problem(404, "not_found");
    let unknown = api.get(&t.key, "/checkpoints?workflow_id=wf_00000000000000000000000000000000&key=cp-1").await;
    unknown.expect_problem(404, "not_found");
    // The key is required, and the execution's own filters are not taken.
    for query in ["", "&key=cp-1&execution_id=E", "&key=cp-1&order=desc", "&key=cp-1&metadata[a]=b"] {
        let answer = api.get(&t.key, &format!("/checkpoints?workflow_id={wf}{query}")).await;
        answer.expect_problem(422, "validation_failed");
    }
    // A window over them.
    let second = api.get(&t.key, &format!("/checkpoints?workflow_id={wf}&key=cp-1&limit=1&offset=1")).await;
    assert_eq!(second.expect(200).body["items"].as_array().map(Vec::len), Some(1));
    assert_eq!(second.body["total"], 2);
    // Gone with the checkpoint: deleted, discarded by a rollback, or its execution deleted.
    api.delete(&t.key, &format!("/checkpoints/{c2}")).await.expect(204);
    assert_eq!(found("cp-1").await, vec![(c1.clone(), e1.clone())]);
    api.post(&t.key, &format!("/executions/{e1}/rollback"), &json!({"checkpoint_id": c1})).await.expect(200);
    assert_eq!(found("cp-1%23x").await, vec![]);
    api.delete(&t.key, &format!("/executions/{e1}")).await.expect(204);
    assert_eq!(found("cp-1").await, vec![]);
}

async fn checkpoint_lists_go_newest_first_and_filter_on_metadata(api: Api, env: Env) {
    let t = env.tenant().await;
    let e = start(&api, &t.key).await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let source = if i % 2 == 0 { "input" } else { "loop" };
        let c = checkpoint(&api, &t.key, &e, json!({"metadata": {"source": source, "step": i.to_string()}})).await;
        ids.push(id(&c));
    }
    let list = |query: String| {
        let api = api.clone();
        let key = t.key.clone();
        let e = e.clone();
        async move {
            let reply = api.get(&key, &format!("/checkpoints?execution_id={e}{query}")).await;
            reply.expect(200);
            let items: Vec<String> = reply.body["items"].as_array().expect("items").iter().map(id).collect();
            (items, reply.body["total"].as_u64().expect("total"))
        }
    };
    let reversed: Vec<String> = ids.iter().rev().cloned().collect();
    assert_eq!(list("&order=desc".into()).await, (reversed.clone(), 5));
    assert_eq!(list("&order=asc".into()).await, (ids.clone(), 5));
    assert_eq!(list(format!("&order=desc&starting_after={}", ids[3])).await, (reversed[2..].to_vec(), 5));
    assert_eq!(list(format!("&order=desc&starting_after={}&limit=1", ids[3])).await.0, [ids[2].clone()]);
    assert_eq!(list(format!("&starting_after={}", ids[3])).await.0, [ids[4].clone()]);
    // Nothing is older than the first, nor newer than the last.
    assert_eq!(list(format!("&order=desc&starting_after={}", ids[0])).await, (vec![], 5));
    assert_eq!(list(format!("&starting_after={}&metadata[source]=input", ids[4])).await, (vec![], 3));
    let none: Vec<String> = vec![];
    assert_eq!(list(format!("&order=desc&starting_after={}&metadata[source]=input", ids[0])).await.0, none);
    assert_eq!(list("&metadata[source]=input".into()).await, (vec![ids[0].clone(), ids[2].clone(), ids[4].clone()], 3));
    assert_eq!(list("&metadata%5Bsource%5D=loop&order=desc".into()).await, (vec![ids[3].clone(), ids[1].clone()], 2));
    assert_eq!(list("&metadata[source]=input&metadata[step]=2".into()).await, (vec![ids[2].clone()], 1));
    assert_eq!(list("&metadata[source]=update".into()).await, (vec![], 0));
    assert_eq!(list("&metadata[source]=input&limit=1&offset=1".into()).await, (vec![ids[2].clone()], 3));
    let bad = api.get(&t.key, &format!("/checkpoints?execution_id={e}&order=newest")).await;
    bad.expect_problem(422, "validation_failed");
    assert_eq!(bad.error_fields(), ["order"]);
    let bad = api.get(&t.key, &format!("/checkpoints?execution_id={e}&metadata[]=x")).await;
    bad.expect_problem(422, "validation_failed");
}

#[allow(clippy::needless_pass_by_value)] // called with json!(…) literals
fn writes(task: &str, writes: Value) -> Value {
    json!({"task_id": task, "task_path": "~__pregel_pull, agent", "writes": writes})
}

async fn list_writes(api: &Api, key: &str, c: &str) -> Value {
    api.get(key, &format!("/checkpoints/{c}/writes")).await.expect(200).body.clone()
}

async fn writes_are_stored_per_task_and_index_and_replaced_not_duplicated(api: Api, env: Env) {
    let t = env.tenant().await;
    let e = start(&api, &t.key).await;
    let c = id(&checkpoint(&api, &t.key, &e, json!({})).await);
    assert_eq!(list_writes(&api, &t.key, &c).await, json!({"checkpoint_id": c, "items": [], "total": 0}));
    let first = writes(
        "task-a",
        json!([{"index": 0, "channel": "messages", "value": ["hi"]},
                                        {"index": 1, "channel": "count", "value": 1}]),
    );
    let reply = api.post(&t.key, &format!("/checkpoints/{c}/writes"), &first).await;
    assert_eq!(reply.expect(200).body, json!({"checkpoint_id": c, "total": 2}));
    // A retry stores the same thing once.
    api.post(&t.key, &format!("/checkpoints/{c}/writes"), &first).await.expect(200);
    let second = writes("task-b", json!([{"index": -3, "channel": "__interrupt__", "value": {"q": "ok?"}}]));
    api.post(&t.key, &format!("/checkpoints/{c}/writes"), &second).await.expect(200);
    // The same task and index again replaces the value, in place.
    let replaced = writes("task-a", json!([{"index": 1, "channel": "count", "value": 2}]));
    api.post(&t.key, &format!("/checkpoints/{c}/writes"), &replaced).await.expect(200);
    let stored = list_writes(&api, &t.key, &c).await;
    assert_eq!(stored["total"], 3);
    let path = "~__pregel_pull, agent";
    assert_eq!(
        stored["items"],
        json!([
            {"task_id": "task-a", "task_path": path, "index": 0, "channel": "messages", "value": ["hi"]},
            {"task_id": "task-a", "task_path": path, "index": 1, "channel": "count", "value": 2},
            {"task_id": "task-b", "task_path": path, "index": -3, "channel": "__interrupt__", "value": {"q": "ok?"}}
        ])
    );
    // Another checkpoint's writes are its own.
    let c2 = id(&checkpoint(&api, &t.key, &e, json!({})).await);
    assert_eq!(list_writes(&api, &t.key, &c2).await["total"], 0);
}

async fn writes_are_refused_when_invalid_too_large_or_not_running(api: Api, env: Env) {
    let t = env.tenant().await;
    let e = start(&api, &t.key).await;
    let c = id(&checkpoint(&api, &t.key, &e, json!({})).await);
    let post = |body: Value| {
        let api = api.clone();
        let (key, c) = (t.key.clone(), c.clone());
        async move { api.post(&key, &format!("/checkpoints/{c}/writes"), &body).await }
    };
    let one = |index: Value, channel: Value| json!([{"index": index, "channel": channel, "value": 1}]);
    for (body, field) in [
        (writes("", one(json!(0), json!("c"))), "task_id"),
        (writes("t", json!([])), "writes"),
        (writes("t", one(json!(-1001), json!("c"))), "writes[0].index"),
        (writes("t", one(json!(0.5), json!("c"))), "writes[0].index"),
        (writes("t", one(json!(0), json!(""))), "writes[0].channel"),
    ] {
        let reply = post(body).await;
        reply.expect_problem(422, "validation_failed");
        assert_eq!(reply.error_fields(), [field]);
    }
    for body in [json!({"task_id": "t"}), json!({"task_id": "t", "writes": [], "extra": 1}), json!([1])] {
        post(body).await.expect_problem(422, "validation_failed");
    }
    // JSON Schema's integers include 2.0.
    post(writes("w", one(json!(2.0), json!("c")))).await.expect(200);
    assert_eq!(list_writes(&api, &t.key, &c).await["items"][0]["index"], 2);
    // Over 4 MiB of JSON in the document: 413, and nothing stored.
    post(writes("t", json!([{"index": 0, "channel": "c", "value": "x".repeat(2_100_000)}]))).await.expect(200);
    let over = post(writes("u", json!([{"index": 0, "channel": "c", "value": "y".repeat(2_100_000)}]))).await;
    over.expect_problem(413, "payload_too_large");
    assert_eq!(list_writes(&api, &t.key, &c).await["total"], 2);
    // Unknown and malformed checkpoints are 404; a paused execution takes no writes.
    let valid = writes("t", one(json!(0), json!("c")));
    let unknown = api.post(&t.key, "/checkpoints/cp_0193a6f21c2b7d3e8f000123456789ab/writes", &valid).await;
    unknown.expect_problem(404, "not_found");
    api.post(&t.key, "/checkpoints/nope/writes", &valid).await.expect_problem(404, "not_found");
    api.get(&t.key, "/checkpoints/nope/writes").await.expect_problem(404, "not_found");
    api.post(&t.key, &format!("/executions/{e}/pause"), &json!({})).await.expect(200);
    post(valid).await.expect_problem(409, "invalid_state");
}

#[allow(clippy::needless_pass_by_value)] // called with json!(…) literals
fn pending(checkpoint: &str, tasks: Value) -> Value {
    json!({"checkpoint_id": checkpoint, "tasks": tasks})
}

async fn count(api: &Api, key: &str, e: &str) -> Value {
    api.get(key, &format!("/executions/{e}")).await.expect(200).body["checkpoint_count"].clone()
}

async fn a_checkpoint_brings_the_writes_of_an_earlier_one_in_one_request(api: Api, env: Env) {
    let t = env.tenant().await;
    let e = start(&api, &t.key).await;
    let c1 = id(&checkpoint(&api, &t.key, &e, json!({"key": "one"})).await);
    let tasks = json!([
        writes("task-a", json!([{"index": 0, "channel": "messages", "value": ["hi"]}])),
        {"task_id": "task-b", "writes": [{"index": 0, "channel": "count", "value": 12345678901234567890_u64}]}
    ]);
    let body = json!({"execution_id": e, "state": {"n": 2}, "key": "two", "pending_writes": pending(&c1, tasks)});
    let c2 = api.post(&t.key, "/checkpoints", &body).await;
    let c2 = id(&c2.expect(201).body);
    let stored = list_writes(&api, &t.key, &c1).await;
    assert_eq!(
        stored["items"],
        json!([
            {"task_id": "task-a", "task_path": "~__pregel_pull, agent", "index": 0, "channel": "messages",
             "value": ["hi"]},
            {"task_id": "task-b", "task_path": "", "index": 0, "channel": "count", "value": 12345678901234567890_u64}
        ])
    );
    assert_eq!(list_writes(&api, &t.key, &c2).await["total"], 0, "the new checkpoint has none of its own");
    assert_eq!(count(&api, &t.key, &e).await, 2);
    // The same key again answers the checkpoint it has (200) and stores its pending
    // writes as POST /checkpoints/{id}/writes does: replaced per task and index.
    let again = json!({"execution_id": e, "state": {"n": 2}, "key": "two", "pending_writes":
        pending(&c1, json!([writes("task-a", json!([{"index": 0, "channel": "messages", "value": ["bye"]}]))]))});
    assert_eq!(id(&api.post(&t.key, "/checkpoints", &again).await.expect(200).body), c2);
    let stored = list_writes(&api, &t.key, &c1).await;
    assert_eq!((stored["total"].clone(), stored["items"][0]["value"].clone()), (json!(2), json!(["bye"])));
    assert_eq!(count(&api, &t.key, &e).await, 2);
    // null is no pending writes.
    let plain = json!({"execution_id": e, "state": {}, "pending_writes": null});
    api.post(&t.key, "/checkpoints", &plain).await.expect(201);
}

async fn pending_writes_that_cannot_be_stored_change_nothing(api: Api, env: Env) {
    let t = env.tenant().await;
    let e = start(&api, &t.key).await;
    let c1 = id(&checkpoint(&api, &t.key, &e, json!({})).await);
    let post = |pending_writes: Value| {
        let api = api.clone();
        let (key, e) = (t.key.clone(), e.clone());
        async move {
            let body = json!({"execution_id": e, "state": {}, "key": "next", "pending_writes": pending_writes});
            api.post(&key, "/checkpoints", &body).await
        }
    };
    let one = json!([{"index": 0, "channel": "c", "value": 1}]);
    let too_many: Vec<Value> = (0..501).map(|i| json!({"index": i, "channel": "c", "value": i})).collect();
    for (body, fields) in [
        (pending(&c1, json!([writes("", one.clone())])), vec!["pending_writes.tasks[0].task_id"]),
        (pending(&c1, json!([])), vec!["pending_writes.tasks"]),
        (
            pending(&c1, json!([writes("t", json!([{"index": 0.5, "channel": "", "value": 1}]))])),
            vec!["pending_writes.tasks[0].writes[0].index", "pending_writes.tasks[0].writes[0].channel"],
        ),
        (
            pending(&c1, json!([writes("t", json!(too_many)), writes("u", json!(too_many))])),
            vec!["pending_writes.tasks"],
        ),
        (json!({"checkpoint_id": c1, "writes": one}), vec!["pending_writes"]),
        (json!([1]), vec!["pending_writes"]),
    ] {
        let reply = post(body).await;
        reply.expect_problem(422, "validation_failed");
        assert_eq!(reply.error_fields(), fields);
    }
    // The field twice is refused, not half read.
    let twice = format!(
        r#"{{"execution_id":"{e}","state":{{}},"pending_writes":null,"pending_writes":{}}}"#,
        pending(&c1, json!([writes("t", one.clone())]))
    );
    let sent = api.request(Method::POST, "/checkpoints").key(&t.key).raw_body("application/json", twice.into_bytes());
    let reply = sent.send().await;
    reply.expect_problem(422, "validation_failed");
    assert_eq!(reply.error_fields(), ["pending_writes"]);
    // Unknown checkpoints, another execution's and another tenant's are unknown here.
    let other = start(&api, &t.key).await;
    let theirs = id(&checkpoint(&api, &t.key, &other, json!({})).await);
    let stranger = env.tenant().await;
    let e2 = start(&api, &stranger.key).await;
    let foreign = id(&checkpoint(&api, &stranger.key, &e2, json!({})).await);
    for unknown in ["cp_0193a6f21c2b7d3e8f000123456789ab", "nope", theirs.as_str(), foreign.as_str()] {
        post(pending(unknown, json!([writes("t", one.clone())]))).await.expect_problem(404, "not_found");
    }
    // Writes that would take c1's document past 4 MiB: 413.
    let big =
        |task: &str, fill: &str| writes(task, json!([{"index": 0, "channel": "c", "value": fill.repeat(2_100_000)}]));
    api.post(&t.key, &format!("/checkpoints/{c1}/writes"), &big("t", "x")).await.expect(200);
    post(pending(&c1, json!([big("u", "y")]))).await.expect_problem(413, "payload_too_large");
    // Nothing was recorded: no new checkpoint, no key taken, c1's writes as they were.
    assert_eq!(count(&api, &t.key, &e).await, 1);
    let keyed = api.get(&t.key, &format!("/checkpoints?execution_id={e}&key=next")).await;
    assert_eq!(keyed.expect(200).body["total"], 0);
    assert_eq!(list_writes(&api, &t.key, &c1).await["total"], 1);
    assert_eq!(list_writes(&api, &t.key, &theirs).await["total"], 0);
    assert_eq!(list_writes(&api, &stranger.key, &foreign).await["total"], 0);
}

async fn a_rollback_discards_the_writes_and_keys_of_what_it_discards(api: Api, env: Env) {
    let t = env.tenant().await;
    let e = start(&api, &t.key).await;
    let c1 = id(&checkpoint(&api, &t.key, &e, json!({"key": "one"})).await);
    let c2 = id(&checkpoint(&api, &t.key, &e, json!({"key": "two"})).await);
    let w = writes("t", json!([{"index": 0, "channel": "c", "value": 1}]));
    api.post(&t.key, &format!("/checkpoints/{c2}/writes"), &w).await.expect(200);
    api.post(&t.key, &format!("/executions/{e}/rollback"), &json!({"checkpoint_id": c1})).await.expect(200);
    api.get(&t.key, &format!("/checkpoints/{c2}/writes")).await.expect_problem(404, "not_found");
    let found = api.get(&t.key, &format!("/checkpoints?execution_id={e}&key=two")).await;
    assert_eq!(found.expect(200).body["total"], 0);
    // The key is free again: a new checkpoint may take it.
    api.post(&t.key, &format!("/executions/{e}/replay"), &json!({})).await.expect(200);
    let again = checkpoint(&api, &t.key, &e, json!({"key": "two"})).await;
    assert_ne!(id(&again), c2);
    assert_eq!(again["sequence"], 3);
}

async fn deleting_an_execution_takes_everything_and_frees_its_key(api: Api, env: Env) {
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key).await;
    let keyed = json!({"workflow_id": wf, "key": "doomed", "input": {"n": 1}});
    let e = id(&api.post(&t.key, "/executions", &keyed).await.expect(201).body);
    let kept = id(&api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201).body);
    let c1 = id(&checkpoint(&api, &t.key, &e, json!({"key": "a", "state": {"n": 1}})).await);
    let c2 = id(&checkpoint(&api, &t.key, &e, json!({})).await);
    let w = writes("t", json!([{"index": 0, "channel": "c", "value": 1}]));
    api.post(&t.key, &format!("/checkpoints/{c1}/writes"), &w).await.expect(200);
    let fail = json!({"error_type": "AGENT_ERROR", "message": "broke"});
    api.post(&t.key, &format!("/executions/{e}/fail"), &fail).await.expect(200);
    let failure = api.get(&t.key, "/failures").await.body["items"][0]["id"].as_str().expect("failure").to_owned();

    api.delete(&t.key, &format!("/executions/{e}")).await.expect(204);
    api.get(&t.key, &format!("/executions/{e}")).await.expect_problem(404, "not_found");
    for path in [
        format!("/checkpoints/{c1}"),
        format!("/checkpoints/{c2}?include_state=true"),
        format!("/checkpoints/{c1}/writes"),
        format!("/checkpoints?execution_id={e}"),
    ] {
        api.get(&t.key, &path).await.expect_problem(404, "not_found");
    }
    let all = api.get(&t.key, "/executions").await;
    assert_eq!(all.body["total"], 1);
    assert_eq!(all.body["items"][0]["id"], kept.as_str());
    for query in [format!("workflow_id={wf}"), "status=failed".to_owned(), format!("workflow_id={wf}&status=failed")] {
        let total = api.get(&t.key, &format!("/executions?{query}")).await.body["total"].clone();
        let expected = if query.contains("failed") { 0 } else { 1 };
        assert_eq!(total, expected, "{query}");
    }
    // The failure stays; the key is free; a second DELETE is 404.
    api.get(&t.key, &format!("/failures/{failure}")).await.expect(200);
    let reborn = api.post(&t.key, "/executions", &json!({"workflow_id": wf, "key": "doomed"})).await;
    assert_ne!(id(&reborn.expect(201).body), e);
    api.delete(&t.key, &format!("/executions/{e}")).await.expect_problem(404, "not_found");
    api.delete(&t.key, "/executions/exec_0193a6f21c2b7d3e8f000123456789ab").await.expect_problem(404, "not_found");
    api.delete(&t.key, "/executions/nope").await.expect_problem(404, "not_found");
}

/// Large payloads in parts (execution input, state, writes): after the deletion nothing
/// of the execution is left in any table (read straight from DynamoDB). In process: the
/// requests are large, which the HTTP path adds nothing to.
#[tokio::test]
async fn a_deleted_execution_leaves_no_item_behind() {
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key).await;
    let keyed = json!({"workflow_id": wf, "key": "doomed", "input": {"blob": api_tests::noise(1, 200_000)}});
    let e = id(&api.post(&t.key, "/executions", &keyed).await.expect(201).body);
    let big = json!({"noise": api_tests::noise(2, 600_000)});
    let c1 = id(&checkpoint(&api, &t.key, &e, json!({"key": "a", "state": big})).await);
    checkpoint(&api, &t.key, &e, json!({"key": "b"})).await;
    let w = writes("t", json!([{"index": 0, "channel": "c", "value": api_tests::noise(3, 600_000)}]));
    api.post(&t.key, &format!("/checkpoints/{c1}/writes"), &w).await.expect(200);
    // The tenant's items in `table`, but for its item that hides the checkpoints of
    // executions being deleted, which must hide nothing (its keys alone).
    // Its partition, its shards (checkpoints, counters) and the execution's own (of its
    // head, and of its checkpoints).
    let partitions: Vec<String> = std::iter::once(t.id.clone())
        .chain((0..16).map(|shard| format!("{}#{shard:02}", t.id)))
        .chain([api_tests::run_partition(&t.id, &e), api_tests::joined_partition(&t.id, &e)])
        .collect();
    let items = |table: shared::dynamo::Table| {
        let (client, name, partitions) = (env.client.clone(), env.tables.name(table).to_owned(), partitions.clone());
        async move {
            let mut items = Vec::new();
            for partition in partitions {
                let out = client
                    .query()
                    .table_name(&name)
                    .key_condition_expression("tenant_id = :t")
                    .expression_attribute_values(":t", shared::dynamo::s(&partition))
                    .send()
                    .await
                    .expect("query");
                items.extend(out.items.unwrap_or_default());
            }
            let hidden =
                |item: &shared::dynamo::Item| item.get("id").and_then(|v| v.as_s().ok()) == Some(&"hidden".into());
            assert!(items.iter().filter(|item| hidden(item)).all(|item| item.len() == 2), "hides nothing: {items:?}");
            items.iter().filter(|item| !hidden(item)).count()
        }
    };
    use shared::dynamo::Table;
    assert!(items(Table::Blobs).await >= 3, "input, state and writes in parts");
    assert!(items(Table::Checkpoints).await >= 6);
    api.delete(&t.key, &format!("/executions/{e}")).await.expect(204);
    assert_eq!(items(Table::Blobs).await, 0);
    assert_eq!(items(Table::Checkpoints).await, 0);
    assert_eq!(items(Table::Executions).await, 0, "no execution, key pointer or purge marker");
}

/// More checkpoints than one request purges: 202 until the last request, 204 then.
/// In process only (hundreds of writes; the HTTP path adds nothing to this).
#[tokio::test]
async fn a_large_execution_is_deleted_over_several_requests() {
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let e = start(&api, &t.key).await;
    let total = domain::runs::deletion::PURGE_CHECKPOINTS + 5;
    let mut ids = Vec::new();
    for i in 0..total {
        ids.push(id(&checkpoint(&api, &t.key, &e, json!({"key": format!("k{i}")})).await));
    }
    let partly = api.delete(&t.key, &format!("/executions/{e}")).await;
    partly.expect(202);
    assert_eq!(partly.body, json!({"id": e, "deleted": true, "remaining": true}));
    api.get(&t.key, &format!("/executions/{e}")).await.expect_problem(404, "not_found");
    // Its checkpoints not purged yet (the first: the purge takes the highest first) are
    // stored and gone for clients.
    let oldest = &ids[0];
    let table = env.tables.name(shared::dynamo::Table::Checkpoints);
    let (partition, entry) = api_tests::checkpoint_entry(&t.id, oldest);
    let key = [("tenant_id", partition.as_str()), ("entry", entry.as_str())];
    assert!(shared::dynamo::get_item(&env.client, table, &key).await.expect("read").is_some(), "not purged yet");
    for path in ["", "?include_state=true", "/writes"] {
        api.get(&t.key, &format!("/checkpoints/{oldest}{path}")).await.expect_problem(404, "not_found");
    }
    api.delete(&t.key, &format!("/executions/{e}")).await.expect(204);
    api.delete(&t.key, &format!("/executions/{e}")).await.expect_problem(404, "not_found");
}

/// The scheduled janitor finishes what requests leave to delete, once it is
/// `ABANDONED_AFTER` old and not before: a deletion whose client stopped after a 202 (the
/// client may still be at it), and the checkpoints beyond the 200 a rollback deletes in
/// its own request (hidden meanwhile). Their checkpoints leave storage, the tenant's
/// hidden item drops their entries, the deleted execution is then 404 to DELETE and the
/// rolled back one keeps its one checkpoint. A run out of time starts nothing. The
/// janitor's calls are all granted by its policy in `template.yaml`.
/// In process, with a clock standing in 2001: the janitor lists every tenant's
/// unfinished deletions, and no other test's is that old.
#[tokio::test]
async fn the_janitor_finishes_what_deletions_and_rollbacks_left() {
    use domain::runs::deletion::{ABANDONED_AFTER, PURGE_CHECKPOINTS};
    use domain::runs::{Janitored, Runs};
    use shared::dynamo::{Table, get_item};
    let env = api_tests::env().await;
    let clock = shared::time::ManualClock::new(shared::time::parse("2001-02-03T04:05:06Z").expect("time"));
    let api = Api::new(api_tests::Transport::in_process_with_clock(&env, std::sync::Arc::new(clock.clone())));
    let t = env.tenant().await;
    let deleted = start(&api, &t.key).await;
    // An input stored in parts, read with the execution when its range is dropped.
    let wf = workflow(&api, &t.key).await;
    let input = json!({"workflow_id": wf, "input": {"noise": api_tests::noise(7, 150_000)}});
    let rolled = id(&api.post(&t.key, "/executions", &input).await.expect(201).body);
    let (mut of_deleted, mut of_rolled) = (Vec::new(), Vec::new());
    for i in 0..PURGE_CHECKPOINTS + 5 {
        of_deleted.push(id(&checkpoint(&api, &t.key, &deleted, json!({"key": format!("k{i}")})).await));
    }
    for i in 0..PURGE_CHECKPOINTS + 6 {
        of_rolled.push(id(&checkpoint(&api, &t.key, &rolled, json!({"key": format!("k{i}")})).await));
    }
    api.delete(&t.key, &format!("/executions/{deleted}")).await.expect(202);
    let rollback = json!({"checkpoint_id": of_rolled[0]});
    let back = api.post(&t.key, &format!("/executions/{rolled}/rollback"), &rollback).await;
    assert_eq!(back.expect(200).body["discarded_checkpoints"], PURGE_CHECKPOINTS + 5);
    // A deletion takes the highest sequences first, a rollback's cleanup the lowest (those
    // just above its target): the deletion's lowest and the rollback's highest are left.
    let left = [(&t.id, &of_deleted[0]), (&t.id, &of_rolled[PURGE_CHECKPOINTS + 5])];
    let stored = || async {
        let mut found = Vec::new();
        for (tenant, checkpoint) in left {
            let (partition, entry) = api_tests::checkpoint_entry(tenant, checkpoint);
            let key = [("tenant_id", partition.as_str()), ("entry", entry.as_str())];
            found.push(get_item(&env.client, env.tables.name(Table::Checkpoints), &key).await.expect("read").is_some());
        }
        found
    };
    let hidden = || async {
        let key = [("tenant_id", t.id.as_str()), ("id", "hidden")];
        let item = get_item(&env.client, env.tables.name(Table::Executions), &key).await.expect("read");
        let item = item.unwrap_or_default();
        (item.contains_key(deleted.as_str()), item.contains_key(rolled.as_str()))
    };
    assert_eq!(stored().await, [true, true], "left by their requests");
    assert_eq!(hidden().await, (true, true));
    let hidden_one = &of_rolled[PURGE_CHECKPOINTS + 5];
    api.get(&t.key, &format!("/checkpoints/{hidden_one}")).await.expect_problem(404, "not_found");
    let (above_partition, above) = api_tests::checkpoint_entry(&t.id, &of_rolled[1]);
    let just_above = [("tenant_id", above_partition.as_str()), ("entry", above.as_str())];
    let gone = get_item(&env.client, env.tables.name(Table::Checkpoints), &just_above).await.expect("read");
    assert!(gone.is_none(), "the rollback deleted the checkpoints just above its target first");
    assert_eq!(api.get(&t.key, &format!("/checkpoints?execution_id={rolled}")).await.body["total"], 1);

    let runs = Runs::new(env.client.clone(), env.tables.clone(), 1);
    let deadline = u64::try_from((chrono::Utc::now() + chrono::TimeDelta::minutes(5)).timestamp_millis()).expect("ms");
    clock.advance(ABANDONED_AFTER - chrono::TimeDelta::seconds(1));
    let early = janitor::sweep(&runs, &clock, deadline).await.expect("sweep");
    assert_eq!(early, Janitored::default(), "not abandoned yet");
    assert_eq!(stored().await, [true, true]);

    clock.advance(chrono::TimeDelta::seconds(2));
    // With no time left (its deadline passed) a run starts no round.
    let late = janitor::sweep(&runs, &clock, 0).await.expect("sweep");
    assert!(late.stopped && late.rounds == 0, "{late:?}");
    assert_eq!(stored().await, [true, true]);
    let (done, calls) = shared::metering::recorded(Box::pin(janitor::sweep(&runs, &clock, deadline))).await;
    let done = done.expect("sweep");
    assert_eq!((done.finished, done.failed, done.stopped), (2, 0, false), "{done:?}");
    assert_eq!(stored().await, [false, false], "their checkpoints are deleted");
    assert_eq!(hidden().await, (false, false), "the hidden item lists neither");
    api.delete(&t.key, &format!("/executions/{deleted}")).await.expect_problem(404, "not_found");
    let execution = api.get(&t.key, &format!("/executions/{rolled}")).await;
    assert_eq!(execution.expect(200).body["checkpoint_count"], 1);
    let partition = api_tests::execution_partition(&t.id, &rolled);
    let key = [("tenant_id", partition.as_str()), ("id", rolled.as_str())];
    let item = get_item(&env.client, env.tables.name(Table::Executions), &key).await.expect("read").expect("item");
    assert!(!item.contains_key("discarded") && !item.contains_key("purge_shard"), "out of the index: {item:?}");
    let again = janitor::sweep(&runs, &clock, deadline).await.expect("sweep");
    assert_eq!(again.finished, 0, "nothing left: {again:?}");

    assert!(!calls.is_empty());
    let missing = api_tests::ungranted("janitor", &calls);
    assert!(missing.is_empty(), "the janitor's policy lacks: {missing:?}");
}

async fn deleting_a_checkpoint_takes_its_state_key_and_writes(api: Api, env: Env) {
    let t = env.tenant().await;
    let e = start(&api, &t.key).await;
    let big = json!({"noise": api_tests::noise(4, 600_000)});
    let c1 = id(&checkpoint(&api, &t.key, &e, json!({"key": "first", "state": big})).await);
    let w = writes("t", json!([{"index": 0, "channel": "c", "value": api_tests::noise(5, 600_000)}]));
    api.post(&t.key, &format!("/checkpoints/{c1}/writes"), &w).await.expect(200);
    let c2 = id(&checkpoint(&api, &t.key, &e, json!({})).await);
    api.delete(&t.key, &format!("/checkpoints/{c1}")).await.expect(204);
    for path in [format!("/checkpoints/{c1}"), format!("/checkpoints/{c1}/writes")] {
        api.get(&t.key, &path).await.expect_problem(404, "not_found");
    }
    api.delete(&t.key, &format!("/checkpoints/{c1}")).await.expect_problem(404, "not_found");
    let execution = api.get(&t.key, &format!("/executions/{e}")).await;
    assert_eq!(execution.body["checkpoint_count"], 1);
    assert_eq!(execution.body["current_checkpoint_id"], c2.as_str());
    let listed = api.get(&t.key, &format!("/checkpoints?execution_id={e}")).await;
    assert_eq!(listed.body["total"], 1);
    assert_eq!(listed.body["items"][0]["id"], c2.as_str());
    assert_eq!(listed.body["items"][0]["parent_checkpoint_id"], c1.as_str(), "the history keeps its gap");
    assert_eq!(api.get(&t.key, &format!("/checkpoints?execution_id={e}&key=first")).await.body["total"], 0);
    api.post(&t.key, &format!("/executions/{e}/pause"), &json!({})).await.expect(200);
    let replay = api.post(&t.key, &format!("/executions/{e}/replay"), &json!({"checkpoint_id": c1})).await;
    replay.expect_problem(404, "not_found");
    // The key is free: a new checkpoint takes it, with a new sequence.
    api.post(&t.key, &format!("/executions/{e}/replay"), &json!({})).await.expect(200);
    let again = checkpoint(&api, &t.key, &e, json!({"key": "first"})).await;
    assert_eq!(again["sequence"], 3);
    let other = env.tenant().await;
    api.delete(&other.key, &format!("/checkpoints/{c2}")).await.expect_problem(404, "not_found");
    // Deleting the current checkpoint moves the execution back to the one before it
    // still there (c1 is gone: c2), then to none.
    // (c2 is now the oldest: deleting it while current leaves no checkpoint before it.)
    let c4 = id(&again);
    api.delete(&t.key, &format!("/checkpoints/{c4}")).await.expect(204);
    let execution = api.get(&t.key, &format!("/executions/{e}")).await;
    assert_eq!(execution.body["current_checkpoint_id"], c2.as_str());
    assert_eq!(execution.body["checkpoint_count"], 1);
    api.delete(&t.key, &format!("/checkpoints/{c2}")).await.expect(204);
    let execution = api.get(&t.key, &format!("/executions/{e}")).await;
    assert_eq!(
        (execution.body["current_checkpoint_id"].clone(), execution.body["checkpoint_count"].clone()),
        (Value::Null, json!(0))
    );
    let next = checkpoint(&api, &t.key, &e, json!({})).await;
    assert_eq!((next["sequence"].clone(), next["parent_checkpoint_id"].clone()), (json!(4), Value::Null));
    // An execution's only checkpoint, the first: deleted, nothing is current.
    let lone = start(&api, &t.key).await;
    let first = id(&checkpoint(&api, &t.key, &lone, json!({})).await);
    api.delete(&t.key, &format!("/checkpoints/{first}")).await.expect(204);
    assert_eq!(api.get(&t.key, &format!("/executions/{lone}")).await.body["current_checkpoint_id"], Value::Null);
}

/// What the LangGraph checkpointer sends when a node returns a 3 MiB value: its write,
/// gzipped as the client library sends every large body. In process only: `cargo lambda
/// watch` answers every compressed request with a 500 of its own (API Gateway passes
/// such bodies as base64, which the in-process event path covers).
#[tokio::test]
async fn a_3_mib_write_sent_gzipped_is_stored_and_read_back() {
    use std::io::Write as _;
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let e = start(&api, &t.key).await;
    let c = id(&checkpoint(&api, &t.key, &e, json!({})).await);
    let value = "x".repeat(3 * 1024 * 1024);
    let body = writes("t", json!([{"index": 0, "channel": "blob", "value": value}]));
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&serde_json::to_vec(&body).expect("json")).expect("gzip");
    let sent = api
        .request(Method::POST, &format!("/checkpoints/{c}/writes"))
        .key(&t.key)
        .header("content-encoding", "gzip")
        .raw_body("application/json", gz.finish().expect("gzip"))
        .send()
        .await;
    assert_eq!(sent.expect(200).body["total"], 1);
    let stored = list_writes(&api, &t.key, &c).await;
    assert_eq!(stored["items"][0]["value"].as_str().map(str::len), Some(3 * 1024 * 1024));
}

/// Text of `len` printable ASCII characters (no quote or backslash) that deflate cannot
/// shrink below about 80%: a xorshift stream, so every run sends the same bytes.
fn incompressible(len: usize, seed: u64) -> String {
    let mut x = seed;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let c = b'(' + u8::try_from(x % 84).expect("below 84"); // '(' ..= '{', no '"' or '\\'
            if c == b'\\' { '}' } else { char::from(c) }
        })
        .collect()
}

/// A checkpoint and pending writes that fit their own transactions but not one together
/// (about 2.3 MB compressed each, DynamoDB's 4 MB a transaction): 413 naming the writes,
/// nothing recorded, and the two sent apart are stored. In process only (a 5.6 MB body).
#[tokio::test]
async fn a_checkpoint_and_pending_writes_over_one_transaction_are_refused_and_fit_apart() {
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let e = start(&api, &t.key).await;
    let c1 = id(&checkpoint(&api, &t.key, &e, json!({})).await);
    let state = json!({"blob": incompressible(2_800_000, 7)});
    let task = writes("t", json!([{"index": 0, "channel": "blob", "value": incompressible(2_800_000, 11)}]));
    let both = json!({"execution_id": e, "state": state, "key": "k", "pending_writes": pending(&c1, json!([task]))});
    let refused = api.post(&t.key, "/checkpoints", &both).await;
    refused.expect_problem(413, "payload_too_large");
    assert!(refused.body["detail"].as_str().is_some_and(|d| d.contains("pending writes")), "{}", refused.body);
    assert_eq!(count(&api, &t.key, &e).await, 1);
    assert_eq!(list_writes(&api, &t.key, &c1).await["total"], 0);
    api.post(&t.key, &format!("/checkpoints/{c1}/writes"), &task).await.expect(200);
    checkpoint(&api, &t.key, &e, json!({"state": state, "key": "k"})).await;
    assert_eq!(count(&api, &t.key, &e).await, 2);
}

/// A gzip body is inflated only for a key known good: with an unknown key, even a body
/// that is not gzip at all is answered 401, not 400. In process only, as above.
#[tokio::test]
async fn a_gzip_body_is_not_inflated_before_the_key_is_known_good() {
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let unknown = format!("cairn_{}", "Z".repeat(43));
    let send = |key: String| {
        let api = api.clone();
        async move {
            let call = api.request(Method::POST, "/workflows").key(&key).header("content-encoding", "gzip");
            call.raw_body("application/json", b"not gzip at all".to_vec()).send().await
        }
    };
    send(unknown).await.expect_problem(401, "unauthorized");
    send(t.key.clone()).await.expect_problem(400, "malformed_request");
}

/// A metadata filter examines at most 1,000 checkpoints a request: a match beyond them
/// is reached by following `next_starting_after`, through a page that holds nothing.
/// In process only (a thousand writes; the HTTP path adds nothing).
#[tokio::test]
async fn a_filtered_list_examines_a_bounded_number_and_says_where_to_go_on() {
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let e = start(&api, &t.key).await;
    let rare = id(&checkpoint(&api, &t.key, &e, json!({"metadata": {"source": "rare"}})).await);
    let examined = domain::runs::checkpoints::model::MAX_EXAMINED;
    for _ in 0..examined + 4 {
        checkpoint(&api, &t.key, &e, json!({"metadata": {"source": "common"}})).await;
    }
    let first = api.get(&t.key, &format!("/checkpoints?execution_id={e}&order=desc&metadata[source]=rare")).await;
    first.expect(200);
    assert_eq!(first.body["items"], json!([]), "the newest 1,000 hold no match");
    assert_eq!(first.body["total"], 1);
    let cursor = first.body["next_starting_after"].as_str().expect("where to go on").to_owned();
    let second = api
        .get(&t.key, &format!("/checkpoints?execution_id={e}&order=desc&metadata[source]=rare&starting_after={cursor}"))
        .await;
    assert_eq!(second.expect(200).body["items"][0]["id"], rare.as_str());
    assert_eq!(second.body["next_starting_after"], Value::Null, "the end");
    // Unfiltered pages say where the next one starts when they are full.
    let page = api.get(&t.key, &format!("/checkpoints?execution_id={e}&limit=2")).await;
    assert_eq!(page.body["next_starting_after"], page.body["items"][1]["id"]);
}
