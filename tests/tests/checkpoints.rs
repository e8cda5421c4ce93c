//! The checkpoints area as a client sees it, in process and through `cargo lambda watch`.

use std::collections::HashMap;

use api_tests::{Api, Env, both_paths};
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Map, Value, json};
use shared::dynamo::Table;

both_paths!(
    create_returns_201_with_sequence_parent_and_no_state,
    checkpoints_are_accepted_only_while_the_execution_runs,
    create_refuses_invalid_bodies,
    list_is_by_sequence_with_limit_offset_and_total,
    list_and_get_refuse_invalid_queries_and_unknown_ids,
    a_4_mib_state_is_accepted_and_one_byte_more_is_413,
    a_rollback_larger_than_one_transaction_discards_everything_later,
    concurrent_writes_get_distinct_dense_sequence_numbers,
    rollback_while_checkpoints_are_written_leaves_a_consistent_execution,
    a_rollback_of_a_fully_tagged_execution_fits_its_transaction,
);

async fn running_execution(api: &Api, key: &str) -> String {
    let wf = api.post(key, "/workflows", &json!({"name": "wf", "workflow_type": "custom"})).await;
    let wf = wf.expect(201).body["id"].as_str().expect("id").to_owned();
    let e = api.post(key, "/executions", &json!({"workflow_id": wf})).await;
    e.expect(201).body["id"].as_str().expect("id").to_owned()
}

fn id(v: &Value) -> String {
    v["id"].as_str().expect("id").to_owned()
}

async fn write(api: &Api, key: &str, execution: &str, state: Value) -> api_tests::Reply {
    api.post(key, "/checkpoints", &json!({"execution_id": execution, "state": state})).await
}

async fn create_returns_201_with_sequence_parent_and_no_state(api: Api, env: Env) {
    let t = env.tenant().await;
    let e = running_execution(&api, &t.key).await;
    let body = json!({"execution_id": e, "state": {"messages": ["hi"], "step": 1}, "name": "planner", "metadata": {"node": "n1"}});
    let first = api.post(&t.key, "/checkpoints", &body).await;
    first.expect(201);
    let c = &first.body;
    let cp = id(c);
    assert!(cp.starts_with("cp_") && cp.len() == 35);
    assert_eq!(first.header("location"), Some(format!("/api/v1/checkpoints/{cp}").as_str()));
    assert_eq!(c["execution_id"], e.as_str());
    assert!(c["workflow_id"].as_str().is_some_and(|w| w.starts_with("wf_")));
    assert_eq!(c["sequence"], 1);
    assert_eq!(c["name"], "planner");
    assert_eq!(c["parent_checkpoint_id"], Value::Null);
    assert_eq!(c["attempt"], 1);
    assert_eq!(c["metadata"], json!({"node": "n1"}));
    assert_eq!(c["state_size_bytes"], serde_json::to_vec(&body["state"]).expect("json").len());
    assert!(c.get("state").is_none(), "the state is returned only on request");
    let second = write(&api, &t.key, &e, json!({"step": 2})).await;
    assert_eq!(second.expect(201).body["sequence"], 2);
    assert_eq!(second.body["parent_checkpoint_id"], cp.as_str());
    assert_eq!(second.body["name"], Value::Null);
    let execution = api.get(&t.key, &format!("/executions/{e}")).await;
    assert_eq!(execution.body["current_checkpoint_id"], second.body["id"]);
    assert_eq!(execution.body["checkpoint_count"], 2);
    let fetched = api.get(&t.key, &format!("/checkpoints/{cp}")).await;
    assert_eq!(fetched.expect(200).body, *c);
    let with_state = api.get(&t.key, &format!("/checkpoints/{cp}?include_state=true")).await;
    assert_eq!(with_state.expect(200).body["state"], body["state"]);
    let without = api.get(&t.key, &format!("/checkpoints/{cp}?include_state=false")).await;
    assert!(without.body.get("state").is_none());
}

async fn checkpoints_are_accepted_only_while_the_execution_runs(api: Api, env: Env) {
    let t = env.tenant().await;
    for action in ["pause", "fail", "complete", "cancel"] {
        let e = running_execution(&api, &t.key).await;
        write(&api, &t.key, &e, json!({"ok": true})).await.expect(201);
        let body = if action == "fail" { json!({"error_type": "AGENT_ERROR", "message": "m"}) } else { json!({}) };
        api.post(&t.key, &format!("/executions/{e}/{action}"), &body).await.expect(200);
        let refused = write(&api, &t.key, &e, json!({"late": true})).await;
        refused.expect_problem(409, "invalid_state");
        assert!(refused.body["detail"].as_str().is_some_and(|d| d.contains("only while it is running")));
        let execution = api.get(&t.key, &format!("/executions/{e}")).await;
        assert_eq!(execution.body["checkpoint_count"], 1, "nothing was written after {action}");
    }
}

async fn create_refuses_invalid_bodies(api: Api, env: Env) {
    let t = env.tenant().await;
    let e = running_execution(&api, &t.key).await;
    let cases = [
        (json!({}), vec!["execution_id", "state"]),
        (json!({"execution_id": e}), vec!["state"]),
        (json!({"execution_id": e, "state": [1, 2]}), vec!["state"]),
        (json!({"execution_id": e, "state": "s"}), vec!["state"]),
        (json!({"execution_id": e, "state": {}, "name": ""}), vec!["name"]),
        (json!({"execution_id": e, "state": {}, "sequence": 9}), vec!["sequence"]),
        (json!({"execution_id": 5, "state": {}}), vec!["execution_id"]),
    ];
    for (body, fields) in cases {
        let reply = api.post(&t.key, "/checkpoints", &body).await;
        reply.expect_problem(422, "validation_failed");
        assert_eq!(reply.error_fields(), fields, "{body}");
    }
    for unknown in ["exec_0193a6f21c2b7d3e8f000123456789ab", "exec_nope"] {
        write(&api, &t.key, unknown, json!({})).await.expect_problem(404, "not_found");
    }
    let execution = api.get(&t.key, &format!("/executions/{e}")).await;
    assert_eq!(execution.body["checkpoint_count"], 0);
}

async fn list_is_by_sequence_with_limit_offset_and_total(api: Api, env: Env) {
    let t = env.tenant().await;
    let e = running_execution(&api, &t.key).await;
    let mut ids = Vec::new();
    for step in 0..5 {
        ids.push(id(&write(&api, &t.key, &e, json!({"step": step})).await.expect(201).body));
    }
    let default = api.get(&t.key, &format!("/checkpoints?execution_id={e}")).await;
    default.expect(200);
    assert_eq!(
        (default.body["limit"].clone(), default.body["offset"].clone(), default.body["total"].clone()),
        (json!(50), json!(0), json!(5))
    );
    let all: Vec<String> = default.body["items"].as_array().expect("items").iter().map(id).collect();
    assert_eq!(all, ids, "oldest first, by sequence");
    assert!(default.body["items"].as_array().expect("items").iter().all(|c| c.get("state").is_none()));
    let mut paged = Vec::new();
    for offset in [0, 2, 4] {
        let reply = api.get(&t.key, &format!("/checkpoints?execution_id={e}&limit=2&offset={offset}")).await;
        assert_eq!(reply.body["total"], 5);
        assert_eq!(reply.body["offset"], offset);
        paged.extend(reply.body["items"].as_array().expect("items").iter().map(id));
    }
    assert_eq!(paged, ids, "windows are disjoint and complete");
    let beyond = api.get(&t.key, &format!("/checkpoints?execution_id={e}&offset=10")).await;
    assert_eq!(beyond.body["items"], json!([]));
}

async fn list_and_get_refuse_invalid_queries_and_unknown_ids(api: Api, env: Env) {
    let t = env.tenant().await;
    let e = running_execution(&api, &t.key).await;
    let cp = id(&write(&api, &t.key, &e, json!({})).await.body);
    let cases = [
        ("/checkpoints".to_owned(), "execution_id"),
        (format!("/checkpoints?execution_id={e}&limit=0"), "limit"),
        (format!("/checkpoints?execution_id={e}&limit=201"), "limit"),
        (format!("/checkpoints?execution_id={e}&offset=-1"), "offset"),
        (format!("/checkpoints/{cp}?include_state=yes"), "include_state"),
    ];
    for (path, field) in cases {
        let reply = api.get(&t.key, &path).await;
        reply.expect_problem(422, "validation_failed");
        assert_eq!(reply.error_fields(), [field], "{path}");
    }
    for unknown in ["exec_0193a6f21c2b7d3e8f000123456789ab", "bogus"] {
        api.get(&t.key, &format!("/checkpoints?execution_id={unknown}")).await.expect_problem(404, "not_found");
    }
    for unknown in ["cp_0193a6f21c2b7d3e8f000123456789ab", "cp_x", &e] {
        api.get(&t.key, &format!("/checkpoints/{unknown}?include_state=true")).await.expect_problem(404, "not_found");
    }
}

/// A JSON object of exactly `size` bytes serialized, of hard-to-compress text.
fn state_of_size(size: usize) -> Value {
    let mut seed = 0x2545_F491_4F6C_DD1D_u64;
    let frame = r#"{"blob":""}"#.len();
    let text: String = (0..size - frame)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
            char::from(alphabet[(seed % 64) as usize])
        })
        .collect();
    let mut map = Map::new();
    map.insert("blob".to_owned(), Value::String(text));
    let state = Value::Object(map);
    assert_eq!(serde_json::to_vec(&state).expect("json").len(), size);
    state
}

async fn a_4_mib_state_is_accepted_and_one_byte_more_is_413(api: Api, env: Env) {
    let t = env.tenant().await;
    let e = running_execution(&api, &t.key).await;
    let limit = 4 * 1024 * 1024;
    let created = write(&api, &t.key, &e, state_of_size(limit)).await;
    created.expect(201);
    assert_eq!(created.body["state_size_bytes"], limit);
    let over = write(&api, &t.key, &e, state_of_size(limit + 1)).await;
    over.expect_problem(413, "payload_too_large");
    let execution = api.get(&t.key, &format!("/executions/{e}")).await;
    assert_eq!(execution.body["checkpoint_count"], 1, "the refused state left nothing");
}

/// In process only: `cargo lambda watch` acknowledges a function's response to the
/// runtime API before it has relayed the body, and so intermittently loses responses of
/// several hundred KiB (a 500 of its own, or no answer); API Gateway and Lambda do not.
/// Large requests through the emulator are covered by the test above.
#[tokio::test]
async fn a_4_mib_state_round_trips_byte_identical() {
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let e = running_execution(&api, &t.key).await;
    let state = state_of_size(4 * 1024 * 1024);
    let created = write(&api, &t.key, &e, state.clone()).await;
    created.expect(201);
    let back = api.get(&t.key, &format!("/checkpoints/{}?include_state=true", id(&created.body))).await;
    back.expect(200);
    let sent = serde_json::to_vec(&state).expect("json");
    let received = serde_json::to_vec(&back.body["state"]).expect("json");
    assert!(sent == received, "the state comes back byte-identical ({} vs {} bytes)", sent.len(), received.len());
}

async fn concurrent_writes_get_distinct_dense_sequence_numbers(api: Api, env: Env) {
    let t = env.tenant().await;
    let e = running_execution(&api, &t.key).await;
    let writes = (0..20).map(|i| {
        let (api, key, e) = (api.clone(), t.key.clone(), e.clone());
        tokio::spawn(async move { write(&api, &key, &e, json!({"writer": i})).await })
    });
    let mut sequences = Vec::new();
    for handle in writes {
        let reply = handle.await.expect("task");
        reply.expect(201);
        sequences.push(reply.body["sequence"].as_u64().expect("sequence"));
    }
    sequences.sort_unstable();
    assert_eq!(sequences, (1..=20).collect::<Vec<u64>>());
    let execution = api.get(&t.key, &format!("/executions/{e}")).await;
    assert_eq!(execution.body["checkpoint_count"], 20);
    let listed = api.get(&t.key, &format!("/checkpoints?execution_id={e}")).await;
    let listed: Vec<u64> =
        listed.body["items"].as_array().expect("items").iter().map(|c| c["sequence"].as_u64().expect("n")).collect();
    assert_eq!(listed, (1..=20).collect::<Vec<u64>>());
}

async fn rollback_while_checkpoints_are_written_leaves_a_consistent_execution(api: Api, env: Env) {
    let t = env.tenant().await;
    let e = running_execution(&api, &t.key).await;
    let mut target = Value::Null;
    for step in 0..3 {
        target = write(&api, &t.key, &e, json!({"step": step})).await.expect(201).body.clone();
    }
    let writers: Vec<_> = (0..10)
        .map(|i| {
            let (api, key, e) = (api.clone(), t.key.clone(), e.clone());
            tokio::spawn(async move { write(&api, &key, &e, json!({"late": i})).await.status })
        })
        .collect();
    let rollback =
        api.post(&t.key, &format!("/executions/{e}/rollback"), &json!({"checkpoint_id": target["id"]})).await;
    rollback.expect(200);
    for writer in writers {
        let status = writer.await.expect("task");
        assert!(status == 201 || status == 409, "a write either landed before the rollback or was refused: {status}");
    }
    let execution = api.get(&t.key, &format!("/executions/{e}")).await.body.clone();
    assert_eq!(execution["status"], "paused");
    assert_eq!(execution["current_checkpoint_id"], target["id"]);
    let listed = api.get(&t.key, &format!("/checkpoints?execution_id={e}&limit=200")).await;
    let items = listed.body["items"].as_array().expect("items");
    assert_eq!(execution["checkpoint_count"], items.len(), "the count matches what is listed");
    assert_eq!(listed.body["total"], items.len());
    assert!(
        items.iter().all(|c| c["sequence"].as_u64() <= target["sequence"].as_u64()),
        "nothing later than the target survives"
    );
    assert_eq!(items.len(), 3);
}

async fn a_rollback_larger_than_one_transaction_discards_everything_later(api: Api, env: Env) {
    let t = env.tenant().await;
    let e = running_execution(&api, &t.key).await;
    let first = write(&api, &t.key, &e, json!({"step": 0})).await.expect(201).body.clone();
    let big = state_of_size(900 * 1024);
    write(&api, &t.key, &e, big).await.expect(201);
    for step in 1..60 {
        write(&api, &t.key, &e, json!({"step": step})).await.expect(201);
    }
    let rolled = api.post(&t.key, &format!("/executions/{e}/rollback"), &json!({"checkpoint_id": first["id"]})).await;
    rolled.expect(200);
    assert_eq!(rolled.body["discarded_checkpoints"], 60);
    assert_eq!(rolled.body["checkpoint_count"], 1);
    let listed = api.get(&t.key, &format!("/checkpoints?execution_id={e}&limit=200")).await;
    assert_eq!(listed.body["total"], 1);
    assert_eq!(listed.body["items"].as_array().map(Vec::len), Some(1));
    let next = api.post(&t.key, &format!("/executions/{e}/replay"), &json!({})).await;
    next.expect(200);
    let after = write(&api, &t.key, &e, json!({"again": true})).await;
    assert_eq!(after.expect(201).body["sequence"], 62, "sequence numbers are never reused");
}

/// A rollback's deletions share its transaction with its status change, which for an
/// execution with 16 tags is 16 tag pointers, its counters, its item and head, its
/// event and its idempotency record: 20 keyed checkpoints above the target (4
/// operations each to delete: 80) and that change would be more than DynamoDB's 100
/// operations, so the rollback deletes them after its decision instead, and the client
/// sees the same answer.
async fn a_rollback_of_a_fully_tagged_execution_fits_its_transaction(api: Api, env: Env) {
    let t = env.tenant().await;
    let wf = api.post(&t.key, "/workflows", &json!({"name": "wf", "workflow_type": "custom"})).await;
    let wf = wf.expect(201).body["id"].as_str().expect("id").to_owned();
    let tags: Map<String, Value> =
        (0..shared::tags::TAGS_MAX).map(|i| (format!("t{i}"), json!(format!("v{i}")))).collect();
    let e = api.post(&t.key, "/executions", &json!({"workflow_id": wf, "tags": tags})).await;
    let e = e.expect(201).body["id"].as_str().expect("id").to_owned();
    let first = write(&api, &t.key, &e, json!({"step": 0})).await.expect(201).body.clone();
    for step in 1..=20 {
        let body = json!({"execution_id": e, "state": {"step": step}, "key": format!("step-{step}")});
        api.post(&t.key, "/checkpoints", &body).await.expect(201);
    }
    let path = format!("/executions/{e}/rollback");
    let rolled = api.request(http::Method::POST, &path).key(&t.key).header("idempotency-key", "roll-1");
    let rolled = rolled.json(&json!({"checkpoint_id": first["id"]})).send().await;
    rolled.expect(200);
    assert_eq!(
        (rolled.body["discarded_checkpoints"].clone(), rolled.body["checkpoint_count"].clone()),
        (json!(20), json!(1))
    );
    let listed = api.get(&t.key, &format!("/checkpoints?execution_id={e}&limit=100")).await;
    assert_eq!(listed.expect(200).body["total"], 1);
    let paused = api.get(&t.key, "/executions?status=paused&tag=t15:v15").await;
    assert_eq!(paused.expect(200).body["total"], 1, "its tag pointers moved with its status");
    let stored = env
        .client
        .query()
        .table_name(env.tables.name(Table::Checkpoints))
        .key_condition_expression("tenant_id = :p")
        .expression_attribute_values(":p", AttributeValue::S(api_tests::joined_partition(&t.id, &e)))
        .consistent_read(true)
        .send()
        .await
        .expect("query");
    assert_eq!(stored.count(), 1, "the discarded checkpoints were deleted, the target kept");
}

/// A rollback beyond one transaction commits its decision (a hidden range) and deletes
/// afterwards. Here its function loses DynamoDB right after the decision, so nothing is
/// deleted: the discarded checkpoints stay stored, invisible to every reader, and the
/// execution's next rollback deletes them. In process only (the client is the test's).
#[tokio::test]
async fn checkpoints_a_rollback_discarded_stay_hidden_until_deleted() {
    use shared::dynamo::Table;
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let e = running_execution(&api, &t.key).await;
    let mut ids = Vec::new();
    for step in 1..=100 {
        let reply = write(&api, &t.key, &e, json!({"step": step})).await;
        ids.push(reply.expect(201).body["id"].as_str().expect("id").to_owned());
    }
    let stored = |id: String| {
        let (client, table, tenant) =
            (env.client.clone(), env.tables.name(Table::Checkpoints).to_owned(), t.id.clone());
        async move {
            let (partition, entry) = api_tests::checkpoint_entry(&tenant, &id);
            let key = [("tenant_id", partition.as_str()), ("entry", entry.as_str())];
            shared::dynamo::get_item(&client, &table, &key).await.expect("read").is_some()
        }
    };
    let stored_execution = || async {
        let partition = api_tests::execution_partition(&t.id, &e);
        let key = [("tenant_id", partition.as_str()), ("id", e.as_str())];
        let table = env.tables.name(Table::Executions);
        shared::dynamo::get_item(&env.client, table, &key).await.expect("read").expect("execution")
    };

    let (client, down) = api_tests::down::DownAfterCommit::client(&env);
    let dying = Api::new(api_tests::Transport::in_process(&Env { client, tables: env.tables.clone() }));
    let rolled = dying.post(&t.key, &format!("/executions/{e}/rollback"), &json!({"checkpoint_id": ids[4]})).await;
    assert_eq!(
        (rolled.expect(200).body["discarded_checkpoints"].clone(), rolled.body["checkpoint_count"].clone()),
        (json!(95), json!(5))
    );
    assert!(down.is_down(), "the decision committed, then DynamoDB went away");
    assert!(stored(ids[39].clone()).await, "nothing deleted after the decision");
    assert!(stored_execution().await.contains_key("discarded"), "the range is kept");

    let hidden = &ids[39];
    for path in ["", "?include_state=true", "/writes"] {
        api.get(&t.key, &format!("/checkpoints/{hidden}{path}")).await.expect_problem(404, "not_found");
    }
    api.get(&t.key, &format!("/checkpoints/{}", ids[4])).await.expect(200);
    let listed = api.get(&t.key, &format!("/checkpoints?execution_id={e}&limit=200")).await;
    let sequences: Vec<u64> =
        listed.body["items"].as_array().expect("items").iter().filter_map(|c| c["sequence"].as_u64()).collect();
    assert_eq!(sequences, vec![1, 2, 3, 4, 5], "the hidden checkpoint is not listed");
    let cursor = api.get(&t.key, &format!("/checkpoints?execution_id={e}&starting_after={hidden}")).await;
    cursor.expect_problem(404, "not_found");
    let replay = api.post(&t.key, &format!("/executions/{e}/replay"), &json!({"checkpoint_id": hidden})).await;
    replay.expect_problem(404, "not_found");

    // The next rollback finishes the deletion.
    let again = api.post(&t.key, &format!("/executions/{e}/rollback"), &json!({"checkpoint_id": ids[2]})).await;
    assert_eq!(
        (again.expect(200).body["discarded_checkpoints"].clone(), again.body["checkpoint_count"].clone()),
        (json!(2), json!(3))
    );
    assert!(!stored(ids[39].clone()).await, "the leftover is deleted");
    assert!(!stored_execution().await.contains_key("discarded"));
    let key = [("tenant_id", t.id.as_str()), ("id", "hidden")];
    let hidden = shared::dynamo::get_item(&env.client, env.tables.name(Table::Executions), &key).await.expect("read");
    assert!(!hidden.is_some_and(|item| item.contains_key(&e)), "and its mirror in the tenant's hidden item");
}

/// Data written before the tenant's hidden item existed: an interrupted rollback's range
/// and an interrupted deletion, their mirror missing (removed here, as an older version
/// never wrote it), so `GET /checkpoints/{id}` would show what they hide. The upgrade's
/// step (`cairn-admin migrate hidden-checkpoints`) mirrors them; running it again
/// changes nothing. In process only (raw DynamoDB access).
#[tokio::test]
async fn the_upgrade_step_hides_again_what_older_versions_left_hidden() {
    use shared::dynamo::Table;
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let (rolled, deleted) = (running_execution(&api, &t.key).await, running_execution(&api, &t.key).await);
    let mut ids = Vec::new();
    for step in 1..=100 {
        ids.push(id(&write(&api, &t.key, &rolled, json!({"step": step})).await.expect(201).body));
    }
    let of_deleted = id(&write(&api, &t.key, &deleted, json!({"step": 1})).await.expect(201).body);
    let dying = || {
        let (client, down) = api_tests::down::DownAfterCommit::client(&env);
        (Api::new(api_tests::Transport::in_process(&Env { client, tables: env.tables.clone() })), down)
    };
    let (first, down) = dying();
    let rollback = json!({"checkpoint_id": ids[4]});
    first.post(&t.key, &format!("/executions/{rolled}/rollback"), &rollback).await.expect(200);
    assert!(down.is_down(), "the rollback's decision committed alone");
    let (second, down) = dying();
    second.delete(&t.key, &format!("/executions/{deleted}")).await;
    assert!(down.is_down(), "the deletion committed, its purge did not run");
    api.get(&t.key, &format!("/executions/{deleted}")).await.expect_problem(404, "not_found");

    let hidden = [ids[39].clone(), of_deleted];
    for cp in &hidden {
        api.get(&t.key, &format!("/checkpoints/{cp}")).await.expect_problem(404, "not_found");
    }
    // As an older version left them: no mirror.
    let table = env.tables.name(Table::Executions);
    let key = |tenant: &str| {
        [("tenant_id".to_owned(), shared::dynamo::s(tenant)), ("id".to_owned(), shared::dynamo::s("hidden"))].into()
    };
    env.client.delete_item().table_name(table).set_key(Some(key(&t.id))).send().await.expect("delete");
    for cp in &hidden {
        api.get(&t.key, &format!("/checkpoints/{cp}")).await.expect(200);
    }

    // Nor was the marker of the deletion in the janitor's index.
    let marker = [
        ("tenant_id".to_owned(), shared::dynamo::s(&t.id)),
        ("id".to_owned(), shared::dynamo::s(format!("purge#{deleted}"))),
    ];
    let indexed = || async {
        let item = env.client.get_item().table_name(table).set_key(Some(marker.clone().into())).send().await;
        let item = item.expect("read").item.expect("the marker");
        (item.contains_key("purge_shard"), item.contains_key("purge_since"))
    };
    assert_eq!(indexed().await, (true, true), "a marker is put into the janitor's index");
    let unindex = env.client.update_item().table_name(table).set_key(Some(marker.clone().into()));
    unindex.update_expression("REMOVE purge_shard, purge_since").send().await.expect("update");

    let runs = domain::runs::Runs::new(env.client.clone(), env.tables.clone(), 1);
    let tenant = shared::auth::trusted::tenant(&shared::ids::TenantKey::parse(&t.id).expect("tenant id"));
    let now = chrono::Utc::now();
    assert_eq!(runs.mirror_hidden(Some(&tenant), now).await.expect("mirror"), 2, "the range and the deletion");
    assert_eq!(runs.mirror_hidden(Some(&tenant), now).await.expect("again"), 2);
    assert_eq!(indexed().await, (true, true), "the migration put the old marker into the index");
    for cp in &hidden {
        api.get(&t.key, &format!("/checkpoints/{cp}")).await.expect_problem(404, "not_found");
    }
    api.get(&t.key, &format!("/checkpoints/{}", ids[4])).await.expect(200);

    // Both finish as usual, and the mirror follows.
    api.delete(&t.key, &format!("/executions/{deleted}")).await.expect(204);
    api.post(&t.key, &format!("/executions/{rolled}/rollback"), &json!({"checkpoint_id": ids[2]})).await.expect(200);
    let left = env.client.get_item().table_name(table).set_key(Some(key(&t.id))).send().await.expect("read");
    assert_eq!(left.item.map(|item| item.len()), Some(2), "the hidden item hides nothing");
}

/// Rewrites a client's answers so that a checkpoint vanishes between the read of its
/// entry and the read of its state's parts, as when a rollback's cleanup or a DELETE
/// lands in between: the parts' batch read (of table `blobs`; the rate-limit look is a
/// batch read too) finds nothing, and every transactional read after it finds none of
/// what it reads. The flag: the parts were read.
fn vanish_before_parts() -> (api_tests::Rewrite, std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::sync::atomic::Ordering;
    let vanished = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = vanished.clone();
    let rewrite = api_tests::Rewrite(std::sync::Arc::new(move |target: &str, body: &Value| {
        let of_parts =
            body["RequestItems"].as_object().is_some_and(|tables| tables.keys().any(|t| t.ends_with("-blobs")));
        if target.ends_with(".BatchGetItem") && of_parts {
            flag.store(true, Ordering::SeqCst);
            Some(r#"{"Responses":{},"UnprocessedKeys":{}}"#.to_owned())
        } else if flag.load(Ordering::SeqCst) && target.ends_with(".TransactGetItems") {
            let reads = body["TransactItems"].as_array().map_or(0, Vec::len);
            Some(json!({"Responses": vec![json!({}); reads]}).to_string())
        } else {
            None
        }
    }));
    (rewrite, vanished)
}

/// A checkpoint whose state's parts are gone by the time they are read (its deletion
/// landed between the two reads) is 404, as it is by then, not a corrupt record's 500.
/// In process only (the client is the test's).
#[tokio::test]
async fn a_state_deleted_between_its_entry_and_its_parts_is_404() {
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let e = running_execution(&api, &t.key).await;
    // About 450 KB compressed, more than an item holds: kept in parts, read after the
    // entry.
    let state = json!({"noise": api_tests::noise(7, 600_000)});
    let cp = id(&write(&api, &t.key, &e, state).await.expect(201).body);
    let (vanish, parts_read) = vanish_before_parts();
    let config = env.client.config().to_builder().interceptor(vanish).build();
    let client = aws_sdk_dynamodb::Client::from_conf(config);
    let racing = Api::new(api_tests::Transport::in_process(&Env { client, tables: env.tables.clone() }));
    let reply = racing.get(&t.key, &format!("/checkpoints/{cp}?include_state=true")).await;
    assert!(parts_read.load(std::sync::atomic::Ordering::SeqCst), "its parts were read after its entry");
    reply.expect_problem(404, "not_found");
    api.get(&t.key, &format!("/checkpoints/{cp}?include_state=true")).await.expect(200);
}

/// Answers a client's first BatchGetItem as DynamoDB answers one it throttles: nothing
/// read, every key unprocessed (echoed here as eventually consistent, so the resend must
/// ask for strong consistency itself). Keeps the body of every BatchGetItem sent.
fn throttled_once() -> (api_tests::Rewrite, std::sync::Arc<std::sync::Mutex<Vec<Value>>>) {
    let sent = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = sent.clone();
    let rewrite = api_tests::Rewrite(std::sync::Arc::new(move |target: &str, body: &Value| {
        if !target.ends_with(".BatchGetItem") {
            return None;
        }
        let mut sent = kept.lock().expect("sent");
        sent.push(body.clone());
        if sent.len() > 1 {
            return None;
        }
        let mut unprocessed = body["RequestItems"].clone();
        for keys in unprocessed.as_object_mut().into_iter().flat_map(|tables| tables.values_mut()) {
            keys["ConsistentRead"] = json!(false);
        }
        Some(json!({"Responses": {}, "UnprocessedKeys": unprocessed}).to_string())
    }));
    (rewrite, sent)
}

/// A batch read whose keys DynamoDB leaves unprocessed (as when it throttles) sends
/// them again, strongly consistent whatever DynamoDB echoed, and answers every item:
/// the read that carries a request's rate-limit look (`shared::gate`) and every batch
/// read of parts go through it (`shared::dynamo::get_batch`).
#[tokio::test]
async fn keys_left_unprocessed_are_read_again_strongly_consistent() {
    let env = api_tests::env().await;
    let (keys, standings) = (env.tables.name(Table::ApiKeys), env.tables.name(Table::RateLimits));
    let hash = format!("unprocessed-{}", uuid::Uuid::now_v7());
    let item = |pairs: &[(&str, AttributeValue)]| -> HashMap<String, AttributeValue> {
        pairs.iter().map(|(name, value)| ((*name).to_owned(), value.clone())).collect()
    };
    let key = item(&[("key_hash", AttributeValue::S(hash.clone()))]);
    let standing = item(&[("tenant_id", AttributeValue::S(hash.clone())), ("window", AttributeValue::N("0".into()))]);
    for (table, stored) in [(keys, &key), (standings, &standing)] {
        env.client.put_item().table_name(table).set_item(Some(stored.clone())).send().await.expect("stored");
    }
    let (throttled, sent) = throttled_once();
    let config = env.client.config().to_builder().interceptor(throttled).build();
    let client = aws_sdk_dynamodb::Client::from_conf(config);
    let asked = HashMap::from([(keys.to_owned(), vec![key.clone()]), (standings.to_owned(), vec![standing.clone()])]);
    let found = shared::dynamo::get_batch(&client, asked).await.expect("read");
    assert_eq!(found.get(keys), Some(&vec![key]), "the key's item");
    assert_eq!(found.get(standings), Some(&vec![standing]), "the standing");
    let sent = sent.lock().expect("sent").clone();
    assert_eq!(sent.len(), 2, "sent once, then again: {sent:?}");
    for table in [keys, standings] {
        assert_eq!(sent[1]["RequestItems"][table]["ConsistentRead"], true, "{table} again, strongly consistent");
    }
}

/// In process: the environment, the API, a tenant, its running execution and the id of
/// that execution's first checkpoint.
async fn in_process_with_a_checkpoint() -> (Env, Api, api_tests::Tenant, String, String) {
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let e = running_execution(&api, &t.key).await;
    let first = id(&write(&api, &t.key, &e, json!({"step": 1})).await.expect(201).body);
    (env, api, t, e, first)
}

/// An execution's checkpoints share their partition with those of any other execution of
/// the tenant whose id ends in the same 10 hex digits. A filtered list that stops among
/// the other's entries (examined, never shown) names one of its own to go on from: the
/// nearest before the stop, or, with none before it in the window, the next after it,
/// examined there and then. It named the other's, and the next page was 404. In process
/// only (a thousand entries written directly).
#[tokio::test]
async fn a_filtered_list_stopped_among_another_executions_entries_goes_on_from_its_own() {
    use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
    let (env, api, t, e, first) = in_process_with_a_checkpoint().await;
    let body = json!({"execution_id": e, "state": {"step": 2}, "metadata": {"source": "rare"}});
    let second = id(&api.post(&t.key, "/checkpoints", &body).await.expect(201).body);
    // The other execution's checkpoints, as many as a request examines, all at sequence
    // 2 before the second (their ids are lower), all of them matching the filter.
    let (partition, entry) = api_tests::checkpoint_entry(&t.id, &second);
    let table = env.tables.name(Table::Checkpoints);
    let key = [("tenant_id", partition.as_str()), ("entry", entry.as_str())];
    let model = shared::dynamo::get_item(&env.client, table, &key).await.expect("read").expect("the entry");
    let other = format!("exec_{}{}", "0".repeat(22), &e[e.len() - 10..]);
    let at = |sequence: u64, count: usize| -> Vec<WriteRequest> {
        (0..count)
            .map(|i| {
                let mut item = model.clone();
                let cp = format!("cp_{i:032}");
                item.insert("entry".into(), AttributeValue::S(format!("{sequence:010}#{cp}")));
                item.insert("id".into(), AttributeValue::S(cp));
                item.insert("sequence".into(), AttributeValue::N(sequence.to_string()));
                item.insert("execution_id".into(), AttributeValue::S(other.clone()));
                let put = PutRequest::builder().set_item(Some(item)).build().expect("put");
                WriteRequest::builder().put_request(put).build()
            })
            .collect()
    };
    let client = &env.client;
    let write = |items: Vec<WriteRequest>| async move {
        for batch in items.chunks(25) {
            let out = client.batch_write_item().request_items(table, batch.to_vec()).send().await.expect("write");
            assert!(out.unprocessed_items.unwrap_or_default().is_empty());
        }
    };
    write(at(2, domain::runs::checkpoints::model::MAX_EXAMINED)).await;
    let path = format!("/checkpoints?execution_id={e}&metadata[source]=rare");
    let page = api.get(&t.key, &path).await;
    assert_eq!((page.expect(200).body["items"].clone(), page.body["total"].clone()), (json!([]), json!(1)));
    assert_eq!(page.body["next_starting_after"], first.as_str(), "its own checkpoint before the stop");
    let page = api.get(&t.key, &format!("{path}&starting_after={first}")).await;
    assert_eq!(page.expect(200).body["items"].as_array().expect("items").len(), 1, "{}", page.body);
    assert_eq!((id(&page.body["items"][0]), page.body["next_starting_after"].clone()), (second.clone(), json!(second)));
    let page = api.get(&t.key, &format!("{path}&starting_after={second}")).await;
    assert_eq!(
        (page.expect(200).body["items"].clone(), page.body["next_starting_after"].clone()),
        (json!([]), json!(null))
    );
    // The other's entries beyond this execution's last checkpoint are not read at all:
    // the list ends where its checkpoints do (more of them than a request examines).
    write(at(3, 3 * domain::runs::checkpoints::model::MAX_EXAMINED)).await;
    let page = api.get(&t.key, &format!("{path}&starting_after={second}")).await;
    assert_eq!(
        (page.expect(200).body["items"].clone(), page.body["next_starting_after"].clone()),
        (json!([]), json!(null))
    );
    let page = api.get(&t.key, &format!("/checkpoints?execution_id={e}&order=desc&limit=1")).await;
    assert_eq!((id(&page.expect(200).body["items"][0]), page.body["total"].clone()), (second, json!(2)));
}

/// A state of more than 4 KiB is an item of its own beside its checkpoint's entry: the
/// entry, which every list, count and rollback reads, stays small. A read by id returns
/// the state byte for byte (the two read together), and the checkpoint's deletion by a
/// rollback deletes both. In process (the stored items are looked at).
#[tokio::test]
async fn a_larger_state_is_kept_beside_its_entry_read_with_it_and_deleted_with_it() {
    let (env, api, t, e, first) = in_process_with_a_checkpoint().await;
    let large = json!({"notes": api_tests::noise(9, 100_000)});
    let second = id(&write(&api, &t.key, &e, large.clone()).await.expect(201).body);
    let stored = || async {
        let partition = api_tests::joined_partition(&t.id, &e);
        let out = env
            .client
            .query()
            .table_name(env.tables.name(Table::Checkpoints))
            .key_condition_expression("tenant_id = :p")
            .expression_attribute_values(":p", AttributeValue::S(partition))
            .consistent_read(true)
            .send()
            .await
            .expect("query");
        let state =
            |item: &HashMap<String, AttributeValue>| item.get("state").map(|s| s.as_b().expect("bytes").as_ref().len());
        out.items().iter().map(|item| (item["entry"].as_s().expect("entry").clone(), state(item))).collect::<Vec<_>>()
    };
    let items = stored().await;
    assert_eq!(items.len(), 3, "{items:?}");
    assert!(items[0].0.ends_with(&first) && items[0].1.is_some(), "a small state is in its entry: {items:?}");
    assert!(items[1].0.ends_with(&second) && items[1].1.is_none(), "a larger one is not: {items:?}");
    assert!(items[2].0.starts_with("state#") && items[2].1.is_some_and(|len| len > 50_000), "{items:?}");
    let read = api.get(&t.key, &format!("/checkpoints/{second}?include_state=true")).await;
    assert_eq!(read.expect(200).body["state"], large);
    let listed = api.get(&t.key, &format!("/checkpoints?execution_id={e}")).await;
    assert_eq!(listed.expect(200).body["total"], 2);
    let path = format!("/executions/{e}/rollback");
    api.post(&t.key, &path, &json!({"checkpoint_id": first})).await.expect(200);
    let items = stored().await;
    assert_eq!(items.len(), 1, "the rollback deleted the later checkpoint and its state: {items:?}");
    api.get(&t.key, &format!("/checkpoints/{second}?include_state=true")).await.expect_problem(404, "not_found");
}
