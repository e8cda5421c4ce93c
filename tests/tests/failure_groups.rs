//! Failures of one cause share a group (`group_id`, `fingerprint`) and are listed by it,
//! in process and through `cargo lambda watch`; failures recorded before groups get
//! theirs from `cairn-admin migrate failure-groups`.

use api_tests::{Api, Env, both_paths};
use serde_json::{Value, json};

both_paths!(failures_of_one_cause_share_a_group_and_are_listed_by_it, a_group_the_tenant_has_no_failure_in_is_404,);

async fn workflow(api: &Api, key: &str) -> String {
    let wf = api.post(key, "/workflows", &json!({"name": "grouped", "workflow_type": "custom"})).await;
    wf.expect(201).body["id"].as_str().expect("id").to_owned()
}

/// Starts an execution of `wf` and fails it; returns its failure.
async fn fail(api: &Api, key: &str, wf: &str, error_type: &str, message: &str, agent: Option<&str>) -> Value {
    tokio::time::sleep(std::time::Duration::from_millis(3)).await; // distinct milliseconds
    let e = api.post(key, "/executions", &json!({"workflow_id": wf})).await;
    let e = e.expect(201).body["id"].as_str().expect("id").to_owned();
    let details = agent.map_or_else(|| json!({}), |a| json!({"agent_name": a}));
    let body = json!({"error_type": error_type, "message": message, "details": details});
    api.post(key, &format!("/executions/{e}/fail"), &body).await.expect(200);
    let list = api.get(key, "/failures?limit=200").await;
    let items = list.expect(200).body["items"].as_array().expect("items").clone();
    items.into_iter().find(|f| f["execution_id"] == e.as_str()).expect("the failure is listed")
}

/// The ids and total of a list of failures (`query` without its `?`).
async fn listed(api: &Api, key: &str, query: &str) -> (Vec<String>, u64) {
    let reply = api.get(key, &format!("/failures?{query}")).await;
    reply.expect(200);
    let ids = reply.body["items"].as_array().expect("items").iter().map(|f| f["id"].as_str().expect("id").to_owned());
    (ids.collect(), reply.body["total"].as_u64().expect("total"))
}

fn id(v: &Value) -> String {
    v["id"].as_str().expect("id").to_owned()
}

async fn failures_of_one_cause_share_a_group_and_are_listed_by_it(api: Api, env: Env) {
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key).await;
    let timeout = |s: u32| format!("tool 'web_search' timed out after {s}s (request req-8f2c91ab77d0)");
    let a = fail(&api, &t.key, &wf, "TOOL_ERROR", &timeout(30), Some("researcher")).await;
    let b = fail(&api, &t.key, &wf, "TOOL_ERROR", &timeout(45), Some("researcher")).await;
    let c = fail(&api, &t.key, &wf, "TOOL_ERROR", &timeout(12), Some("researcher")).await;
    let others = [
        fail(&api, &t.key, &wf, "AGENT_ERROR", &timeout(30), Some("researcher")).await,
        fail(&api, &t.key, &wf, "TOOL_ERROR", &timeout(30), Some("writer")).await,
        fail(&api, &t.key, &wf, "TOOL_ERROR", "connection reset by peer", Some("researcher")).await,
    ];
    let group = a["group_id"].as_str().expect("group").to_owned();
    assert!(group.starts_with("fgrp_"));
    assert_eq!((b["group_id"].as_str(), c["group_id"].as_str()), (Some(group.as_str()), Some(group.as_str())));
    assert_eq!(a["fingerprint"], "tool <q> timed out after <n>s (request <id>)");
    for other in &others {
        assert_ne!(other["group_id"], group.as_str(), "{other}");
    }
    let newest_first = vec![id(&c), id(&b), id(&a)];
    assert_eq!(listed(&api, &t.key, &format!("group_id={group}")).await, (newest_first.clone(), 3));

    // Settling moves a failure between the group's statuses.
    api.post(&t.key, &format!("/failures/{}/resolve", id(&b)), &json!({})).await.expect(200);
    api.post(&t.key, &format!("/failures/{}/ignore", id(&c)), &json!({})).await.expect(200);
    assert_eq!(listed(&api, &t.key, &format!("group_id={group}&status=open")).await, (vec![id(&a)], 1));
    assert_eq!(listed(&api, &t.key, &format!("group_id={group}&status=resolved")).await, (vec![id(&b)], 1));
    assert_eq!(listed(&api, &t.key, &format!("group_id={group}&status=ignored")).await, (vec![id(&c)], 1));
    assert_eq!(listed(&api, &t.key, &format!("group_id={group}")).await, (newest_first.clone(), 3));

    // Pages, cursors and a time window, as every failure list has them.
    assert_eq!(
        listed(&api, &t.key, &format!("group_id={group}&limit=2&offset=1")).await,
        (newest_first[1..].to_vec(), 3)
    );
    let after = format!("group_id={group}&starting_after={}", id(&c));
    assert_eq!(listed(&api, &t.key, &after).await, (newest_first[1..].to_vec(), 3), "total: the whole list");
    let since = a["created_at"].as_str().expect("time");
    let window = format!("group_id={group}&created_after={since}");
    assert_eq!(listed(&api, &t.key, &window).await, (newest_first[..2].to_vec(), 2));
}

async fn a_group_the_tenant_has_no_failure_in_is_404(api: Api, env: Env) {
    let (t, other) = (env.tenant().await, env.tenant().await);
    let wf = workflow(&api, &t.key).await;
    let failure = fail(&api, &t.key, &wf, "AGENT_ERROR", "boom", None).await;
    let group = failure["group_id"].as_str().expect("group");
    api.get(&other.key, &format!("/failures?group_id={group}")).await.expect_problem(404, "not_found");
    for unknown in ["fgrp_00000000000000000000000000000000", "garbage", "fail_0193a6f21c2b7d3e8f000123456789ab"] {
        api.get(&t.key, &format!("/failures?group_id={unknown}")).await.expect_problem(404, "not_found");
    }
    assert_eq!(listed(&api, &t.key, &format!("group_id={group}")).await, (vec![id(&failure)], 1));
}

#[tokio::test]
async fn the_migration_groups_failures_recorded_before_groups() {
    use shared::dynamo::{Table, s};
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key).await;
    let failure = fail(&api, &t.key, &wf, "TOOL_ERROR", "quota of 100 exceeded", None).await;
    let group = failure["group_id"].as_str().expect("group").to_owned();
    // The item as the version before groups wrote it.
    env.client
        .update_item()
        .table_name(env.tables.name(Table::Failures))
        .key("tenant_id", s(&t.id))
        .key("id", s(id(&failure)))
        .update_expression("REMOVE fingerprint, group_id, tenant_group_status")
        .send()
        .await
        .expect("made old");
    api.get(&t.key, &format!("/failures?group_id={group}")).await.expect_problem(404, "not_found");
    let got = api.get(&t.key, &format!("/failures/{}", id(&failure))).await;
    assert_eq!(got.expect(200).body["group_id"], group.as_str(), "derived on reading");

    let store = domain::runs::failures::store::FailureStore::new(env.client.clone(), env.tables.clone());
    assert_eq!(store.index_groups(Some(&t.id)).await.expect("migrated"), 1);
    assert_eq!(listed(&api, &t.key, &format!("group_id={group}")).await, (vec![id(&failure)], 1));
    assert_eq!(store.index_groups(Some(&t.id)).await.expect("again"), 0, "nothing left to do");
}
