//! Keyset cursors and bounded depth on every list: `starting_after=<id>` returns the
//! items after that one in the list's order, with the list's filters; walking a list by
//! cursor visits every item once, in order; an unknown, malformed or other tenant's id is
//! 404; a page or offset that skips more than 10,000 items is 422 naming the cursor.

use api_tests::{Api, Env, both_paths};
use serde_json::{Value, json};

both_paths!(
    workflows_walk_by_cursor_with_and_without_filters,
    executions_walk_by_cursor_with_filters_and_time_windows,
    failures_checkpoints_and_transactions_walk_by_cursor,
    foreign_unknown_and_malformed_cursors_are_404,
    deep_pages_and_offsets_are_422_naming_the_cursor,
);

fn ids(page: &Value) -> Vec<String> {
    page["items"].as_array().expect("items").iter().map(|i| i["id"].as_str().expect("id").to_owned()).collect()
}

/// Every id of `path` (which has its own `?`), walked by cursor `size` at a time.
async fn walk(api: &Api, key: &str, path: &str, size_param: &str, size: u32) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        let cursor = seen.last().map(|id| format!("&starting_after={id}")).unwrap_or_default();
        let page = api.get(key, &format!("{path}&{size_param}={size}{cursor}")).await;
        let batch = ids(&page.expect(200).body);
        assert!(batch.len() <= size as usize);
        if batch.is_empty() {
            return seen;
        }
        seen.extend(batch);
        assert!(seen.len() < 1000, "the walk ends");
    }
}

async fn workflow(api: &Api, key: &str, status: &str) -> String {
    let body = json!({"name": "w", "workflow_type": "custom", "status": status});
    api.post(key, "/workflows", &body).await.expect(201).body["id"].as_str().expect("id").to_owned()
}

async fn start(api: &Api, key: &str, wf: &str) -> String {
    let reply = api.post(key, "/executions", &json!({"workflow_id": wf})).await;
    reply.expect(201).body["id"].as_str().expect("id").to_owned()
}

async fn workflows_walk_by_cursor_with_and_without_filters(api: Api, env: Env) {
    let t = env.tenant().await;
    let mut made = Vec::new();
    for i in 0..7 {
        made.push(workflow(&api, &t.key, if i % 2 == 0 { "draft" } else { "published" }).await);
    }
    let newest_first: Vec<String> = made.iter().rev().cloned().collect();
    assert_eq!(walk(&api, &t.key, "/workflows?", "page_size", 3).await, newest_first);
    let drafts: Vec<String> = newest_first.iter().step_by(2).cloned().collect();
    assert_eq!(walk(&api, &t.key, "/workflows?status=draft", "page_size", 2).await, drafts);
    let after = api.get(&t.key, &format!("/workflows?starting_after={}&page_size=2", made[5])).await;
    assert_eq!(ids(&after.expect(200).body), vec![made[4].clone(), made[3].clone()]);
    assert_eq!(after.body["total"], 7, "total counts the whole list");
}

async fn executions_walk_by_cursor_with_filters_and_time_windows(api: Api, env: Env) {
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key, "draft").await;
    let mut made = Vec::new();
    for _ in 0..6 {
        made.push(start(&api, &t.key, &wf).await);
    }
    api.post(&t.key, &format!("/executions/{}/pause", made[1]), &json!({})).await.expect(200);
    api.post(&t.key, &format!("/executions/{}/pause", made[4]), &json!({})).await.expect(200);
    let newest_first: Vec<String> = made.iter().rev().cloned().collect();
    assert_eq!(walk(&api, &t.key, "/executions?", "page_size", 4).await, newest_first);
    let by_workflow = walk(&api, &t.key, &format!("/executions?workflow_id={wf}"), "page_size", 1).await;
    assert_eq!(by_workflow, newest_first);
    let paused = walk(&api, &t.key, "/executions?status=paused", "page_size", 1).await;
    assert_eq!(paused, vec![made[4].clone(), made[1].clone()]);
    // With a time window: a cursor newer than the window starts at the window's top; one
    // inside it, after itself.
    let third = api.get(&t.key, &format!("/executions/{}", made[2])).await.body["created_at"].clone();
    let window = format!("/executions?created_before={}", third.as_str().expect("created_at"));
    let top = api.get(&t.key, &format!("{window}&starting_after={}", made[5])).await;
    assert_eq!(ids(&top.expect(200).body), vec![made[1].clone(), made[0].clone()]);
    let inside = api.get(&t.key, &format!("{window}&starting_after={}", made[1])).await;
    assert_eq!(ids(&inside.expect(200).body), vec![made[0].clone()]);
}

async fn failures_checkpoints_and_transactions_walk_by_cursor(api: Api, env: Env) {
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key, "draft").await;
    let mut failures = Vec::new();
    // A read of the ledger puts the charges so far into a usage entry: one per start here.
    let settle = || api.get(&t.key, "/billing/transactions");
    for _ in 0..3 {
        let e = start(&api, &t.key, &wf).await;
        settle().await.expect(200);
        let fail = json!({"error_type": "AGENT_ERROR", "message": "m"});
        api.post(&t.key, &format!("/executions/{e}/fail"), &fail).await.expect(200);
        let list = api.get(&t.key, "/failures?limit=1").await;
        failures.push(ids(&list.expect(200).body)[0].clone());
    }
    failures.reverse();
    assert_eq!(walk(&api, &t.key, "/failures?", "limit", 2).await, failures);
    assert_eq!(walk(&api, &t.key, "/failures?status=open", "limit", 1).await, failures);

    let e = start(&api, &t.key, &wf).await;
    settle().await.expect(200);
    let mut checkpoints = Vec::new();
    for step in 0..5 {
        let body = json!({"execution_id": e, "state": {"step": step}});
        checkpoints.push(
            api.post(&t.key, "/checkpoints", &body).await.expect(201).body["id"].as_str().expect("id").to_owned(),
        );
    }
    let path = format!("/checkpoints?execution_id={e}");
    assert_eq!(walk(&api, &t.key, &path, "limit", 2).await, checkpoints, "oldest first, by sequence");

    // 1 grant and 4 starts: 5 transactions, newest first.
    let all = api.get(&t.key, "/billing/transactions?page_size=100").await;
    let entries = ids(&all.expect(200).body);
    assert_eq!(entries.len(), 5);
    assert_eq!(walk(&api, &t.key, "/billing/transactions?", "page_size", 2).await, entries);
    let usage = walk(&api, &t.key, "/billing/transactions?type=usage", "page_size", 3).await;
    assert_eq!(usage, entries[..4].to_vec());
}

async fn foreign_unknown_and_malformed_cursors_are_404(api: Api, env: Env) {
    let (t, other) = (env.tenant().await, env.tenant().await);
    let wf = workflow(&api, &other.key, "draft").await;
    let e = start(&api, &other.key, &wf).await;
    let cp = api.post(&other.key, "/checkpoints", &json!({"execution_id": e, "state": {}})).await;
    let cp = cp.expect(201).body["id"].as_str().expect("id").to_owned();
    let fail = json!({"error_type": "AGENT_ERROR", "message": "m"});
    api.post(&other.key, &format!("/executions/{e}/fail"), &fail).await.expect(200);
    let failure = ids(&api.get(&other.key, "/failures").await.body)[0].clone();
    let txn = ids(&api.get(&other.key, "/billing/transactions").await.body)[0].clone();
    let mine = workflow(&api, &t.key, "draft").await;
    let my_execution = start(&api, &t.key, &mine).await;
    for path in [
        format!("/workflows?starting_after={wf}"),
        format!("/executions?starting_after={e}"),
        format!("/failures?starting_after={failure}"),
        format!("/billing/transactions?starting_after={txn}"),
        format!("/checkpoints?execution_id={my_execution}&starting_after={cp}"),
        "/workflows?starting_after=wf_nope".to_owned(),
        "/executions?starting_after=exec_0193a6f21c2b7d3e8f000123456789ab".to_owned(),
        "/billing/transactions?starting_after=42".to_owned(),
    ] {
        api.get(&t.key, &path).await.expect_problem(404, "not_found");
    }
}

async fn deep_pages_and_offsets_are_422_naming_the_cursor(api: Api, env: Env) {
    let t = env.tenant().await;
    for path in ["/workflows?page=102&page_size=100", "/executions?page=10002&page_size=1", "/failures?offset=10001"] {
        let reply = api.get(&t.key, path).await;
        reply.expect_problem(422, "validation_failed");
        let message = reply.body["errors"][0]["message"].as_str().unwrap_or_default();
        assert!(message.contains("starting_after"), "{path}: {}", reply.body);
    }
    api.get(&t.key, "/workflows?page=101&page_size=100").await.expect(200);
    api.get(&t.key, "/failures?offset=10000").await.expect(200);
}
