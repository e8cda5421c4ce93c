//! Failures of one cause share a group (`group_id`, `fingerprint`) and are listed by it,
//! in process and through `cargo lambda watch`; groups are listed, counted and settled
//! together; failures recorded before groups get theirs from `cairn-admin migrate
//! failure-groups`.

use api_tests::{Api, Env, both_paths};
use serde_json::{Value, json};

both_paths!(
    failures_of_one_cause_share_a_group_and_are_listed_by_it,
    a_group_the_tenant_has_no_failure_in_is_404,
    groups_are_listed_counted_and_settled_together,
    group_lists_refuse_invalid_queries,
);

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
        .update_expression("REMOVE fingerprint, group_id, tenant_group_status, group_counted")
        .send()
        .await
        .expect("made old");
    forget_group_counts(&env, &t.id, &group).await;
    env.client
        .delete_item()
        .table_name(env.tables.name(Table::Failures))
        .key("tenant_id", s(format!("{}#groups", t.id)))
        .key("id", s(&group))
        .send()
        .await
        .expect("no group item before groups");
    api.get(&t.key, &format!("/failures?group_id={group}")).await.expect_problem(404, "not_found");
    api.get(&t.key, &format!("/failures/groups/{group}")).await.expect_problem(404, "not_found");
    let got = api.get(&t.key, &format!("/failures/{}", id(&failure))).await;
    assert_eq!(got.expect(200).body["group_id"], group.as_str(), "derived on reading");

    let store = domain::runs::failures::store::FailureStore::new(env.client.clone(), env.tables.clone());
    assert_eq!(store.index_groups(Some(&t.id)).await.expect("migrated"), 1);
    assert_eq!(store.count_in_groups(Some(&t.id)).await.expect("counted"), 1);
    assert_eq!(listed(&api, &t.key, &format!("group_id={group}")).await, (vec![id(&failure)], 1));
    let made = api.get(&t.key, &format!("/failures/groups/{group}")).await;
    let g = &made.expect(200).body;
    assert_eq!(
        (g["first_seen"].clone(), g["last_seen"].clone()),
        (failure["created_at"].clone(), failure["created_at"].clone())
    );
    assert_eq!((g["sample_message"].clone(), g["counts"]["open"].clone()), (json!("quota of 100 exceeded"), json!(1)));
    assert_eq!(store.index_groups(Some(&t.id)).await.expect("again"), 0, "nothing left to do");
    assert_eq!(store.count_in_groups(Some(&t.id)).await.expect("again"), 0, "counted once");
    let again = api.get(&t.key, &format!("/failures/groups/{group}")).await;
    assert_eq!(again.expect(200).body["counts"]["open"], 1);
}

/// Deletes every shard of group `group`'s counter item, as a version before them left
/// the tables.
async fn forget_group_counts(env: &Env, tenant: &str, group: &str) {
    let name = format!("{}{group}", shared::counters::GROUPS_PREFIX);
    for shard in 0..shared::counters::SHARDS {
        let key = shared::counters::key(tenant, shard, &name);
        let delete = env.client.delete_item().table_name(env.tables.name(shared::dynamo::Table::Counters));
        delete.set_key(Some(key)).send().await.expect("deleted");
    }
}

/// A failure written by a version before the groups' counter items, changed by this
/// one, is counted in its group from that change: counted once, in its new status.
#[tokio::test]
async fn a_failure_recorded_before_group_counts_is_counted_when_it_changes() {
    use shared::dynamo::{Table, s};
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key).await;
    let old = fail(&api, &t.key, &wf, "TOOL_ERROR", "quota of 100 exceeded", None).await;
    let group = old["group_id"].as_str().expect("group").to_owned();
    let unmark = env.client.update_item().table_name(env.tables.name(Table::Failures));
    let unmark = unmark.key("tenant_id", s(&t.id)).key("id", s(id(&old))).update_expression("REMOVE group_counted");
    unmark.send().await.expect("made old");
    forget_group_counts(&env, &t.id, &group).await;
    let counts = |body: &Value| body["counts"].clone();
    let before = api.get(&t.key, &format!("/failures/groups/{group}")).await;
    assert_eq!(counts(&before.expect(200).body)["total"], 0, "not counted yet");

    let new = fail(&api, &t.key, &wf, "TOOL_ERROR", "quota of 200 exceeded", None).await;
    assert_eq!(new["group_id"], group.as_str());
    api.post(&t.key, &format!("/failures/{}/resolve", id(&old)), &json!({})).await.expect(200);
    let after = api.get(&t.key, &format!("/failures/groups/{group}")).await;
    assert_eq!(counts(&after.expect(200).body), json!({"total": 2, "open": 1, "resolved": 1, "ignored": 0}));
    let store = domain::runs::failures::store::FailureStore::new(env.client.clone(), env.tables.clone());
    assert_eq!(store.count_in_groups(Some(&t.id)).await.expect("migrated"), 0, "both counted already");
}

/// A group's counts, status and last failure come from its counter item, written in
/// each failure's own transaction: exact at once, whatever the `by_group` index shows
/// (DynamoDB updates it about a second after a write); and a failure of a known group
/// writes nothing that every failure of the group (or of the tenant) writes.
#[tokio::test]
async fn group_counts_are_the_counters_not_the_index_and_the_group_item_is_written_once() {
    use shared::dynamo::{Table, s};
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key).await;
    let first = fail(&api, &t.key, &wf, "LLM_ERROR", "provider returned 503", None).await;
    let group = first["group_id"].as_str().expect("group").to_owned();
    let item = || async {
        let key = [("tenant_id", format!("{}#groups", t.id)), ("id", group.clone())];
        let key: Vec<(&str, &str)> = key.iter().map(|(k, v)| (*k, v.as_str())).collect();
        shared::dynamo::get_item(&env.client, env.tables.name(Table::Failures), &key).await.expect("read")
    };
    let made = item().await.expect("the group's item");
    let second = fail(&api, &t.key, &wf, "LLM_ERROR", "provider returned 503", None).await;
    let third = fail(&api, &t.key, &wf, "LLM_ERROR", "provider returned 503", None).await;
    assert_eq!(item().await, Some(made), "the group's item is as its first failure wrote it");
    // As if the index had not caught up with the third failure yet.
    let hide = env.client.update_item().table_name(env.tables.name(Table::Failures));
    let hide = hide.key("tenant_id", s(&t.id)).key("id", s(id(&third))).update_expression("REMOVE tenant_group_status");
    hide.send().await.expect("hidden from the index");
    api.post(&t.key, &format!("/failures/{}/ignore", id(&second)), &json!({})).await.expect(200);

    let got = api.get(&t.key, &format!("/failures/groups/{group}")).await;
    let g = &got.expect(200).body;
    assert_eq!(g["counts"], json!({"total": 3, "open": 2, "resolved": 0, "ignored": 1}));
    assert_eq!((g["status"].clone(), g["last_seen"].clone()), (json!("open"), third["created_at"].clone()));
    assert_eq!(g["first_seen"], first["created_at"]);
    let listed = api.get(&t.key, "/failures/groups?status=open").await;
    assert_eq!(listed.expect(200).body["items"][0]["counts"]["open"], 2);
    assert_eq!(listed.body["items"][0]["last_seen"], third["created_at"]);
    let all = api.get(&t.key, &format!("/failures?group_id={group}&limit=1")).await;
    assert_eq!(all.expect(200).body["total"], 3, "the list's total: the counts");
}

/// The ids of a list of groups (`query` without its `?`) and its total.
async fn groups(api: &Api, key: &str, query: &str) -> (Vec<String>, u64) {
    let reply = api.get(key, &format!("/failures/groups?{query}")).await;
    reply.expect(200);
    let ids = reply.body["items"].as_array().expect("items").iter().map(|g| g["id"].as_str().expect("id").to_owned());
    (ids.collect(), reply.body["total"].as_u64().expect("total"))
}

async fn groups_are_listed_counted_and_settled_together(api: Api, env: Env) {
    let t = env.tenant().await;
    let (wf1, wf2) = (workflow(&api, &t.key).await, workflow(&api, &t.key).await);
    let first = fail(&api, &t.key, &wf1, "TOOL_ERROR", "search timed out after 30s", Some("researcher")).await;
    fail(&api, &t.key, &wf1, "TOOL_ERROR", "search timed out after 45s", Some("researcher")).await;
    fail(&api, &t.key, &wf1, "TOOL_ERROR", "search timed out after 12s", Some("researcher")).await;
    let reset = fail(&api, &t.key, &wf1, "TOOL_ERROR", "connection reset", None).await;
    let other = fail(&api, &t.key, &wf2, "TOOL_ERROR", "search timed out after 30s", Some("researcher")).await;
    let group = |f: &Value| f["group_id"].as_str().expect("group").to_owned();
    let (a, b, c) = (group(&first), group(&reset), group(&other));
    assert_eq!(groups(&api, &t.key, "").await, (vec![c.clone(), b.clone(), a.clone()], 3), "last seen first");
    assert_eq!(groups(&api, &t.key, &format!("workflow_id={wf1}")).await, (vec![b.clone(), a.clone()], 2));
    assert_eq!(groups(&api, &t.key, "limit=1&offset=1").await, (vec![b.clone()], 3));

    let detail = api.get(&t.key, &format!("/failures/groups/{a}")).await;
    let g = &detail.expect(200).body;
    assert_eq!(
        (g["status"].clone(), g["counts"].clone()),
        (json!("open"), json!({"total": 3, "open": 3, "resolved": 0, "ignored": 0}))
    );
    assert_eq!((g["workflow_id"].as_str(), g["error_type"].as_str()), (Some(wf1.as_str()), Some("TOOL_ERROR")));
    assert_eq!(
        (g["agent_name"].clone(), g["fingerprint"].clone()),
        (json!("researcher"), json!("search timed out after <n>s"))
    );
    assert_eq!(g["sample_message"], "search timed out after 30s", "its first failure's message");
    assert_eq!(g["first_seen"], first["created_at"]);
    let per_hour = g["failures_per_hour"].as_array().expect("per hour");
    let per_hour: Vec<u64> = per_hour.iter().map(|n| n.as_u64().expect("a count")).collect();
    assert_eq!((per_hour.len(), per_hour.iter().sum::<u64>()), (24, 3), "24 hours, the three failures in them");
    // Made just now: in the current hour (or the one before, had the test crossed an hour).
    assert_eq!(per_hour[..22].iter().sum::<u64>(), 0, "{per_hour:?}");

    // Ignore every open failure of the group at once; each is ignored as one would be.
    let ignored = api.post(&t.key, &format!("/failures/groups/{a}/ignore"), &json!({})).await;
    let body = &ignored.expect(200).body;
    assert_eq!(
        (body["settled"].clone(), body["remaining"].clone(), body["status"].clone()),
        (json!(3), json!(false), json!("ignored"))
    );
    assert_eq!(body["counts"], json!({"total": 3, "open": 0, "resolved": 0, "ignored": 3}));
    assert_eq!(listed(&api, &t.key, &format!("group_id={a}&status=ignored")).await.1, 3);
    assert_eq!(groups(&api, &t.key, "status=open").await, (vec![c.clone(), b.clone()], 2));
    assert_eq!(groups(&api, &t.key, "status=ignored").await, (vec![a.clone()], 1));
    // Resolving acts on open failures: none left in this group.
    let none = api.post(&t.key, &format!("/failures/groups/{a}/resolve"), &json!({})).await;
    assert_eq!(none.expect(200).body["settled"], 0);
    for expected in [1, 0] {
        let resolved = api.post(&t.key, &format!("/failures/groups/{b}/resolve"), &json!({})).await;
        assert_eq!(resolved.expect(200).body["settled"], expected, "again: nothing more to do");
        assert_eq!(resolved.body["status"], "resolved");
    }
    let stats = api.get(&t.key, "/failures/stats").await;
    assert_eq!((stats.body["open_failures"].clone(), stats.body["ignored_failures"].clone()), (json!(1), json!(3)));
    for path in [format!("/failures/groups/{a}"), "/failures/groups/fgrp_00000000000000000000000000000000".to_owned()] {
        let intruder = env.tenant().await;
        api.get(&intruder.key, &path).await.expect_problem(404, "not_found");
        api.post(&intruder.key, &format!("{path}/resolve"), &json!({})).await.expect_problem(404, "not_found");
    }
    api.get(&t.key, "/failures/groups/garbage").await.expect_problem(404, "not_found");
}

#[tokio::test]
async fn a_large_group_is_settled_over_requests_each_saying_what_remains() {
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key).await;
    let limit = domain::runs::failures::GROUP_SETTLE_MAX;
    let mut group = String::new();
    for n in 0..=limit {
        let e = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await;
        let e = e.expect(201).body["id"].as_str().expect("id").to_owned();
        let body = json!({"error_type": "LLM_ERROR", "message": format!("provider returned 503 ({n})")});
        api.post(&t.key, &format!("/executions/{e}/fail"), &body).await.expect(200);
        if group.is_empty() {
            group = api.get(&t.key, "/failures").await.body["items"][0]["group_id"].as_str().expect("group").to_owned();
        }
    }
    let first = api.post(&t.key, &format!("/failures/groups/{group}/resolve"), &json!({})).await;
    assert_eq!(
        (first.expect(200).body["settled"].clone(), first.body["remaining"].clone()),
        (json!(limit), json!(true))
    );
    let second = api.post(&t.key, &format!("/failures/groups/{group}/resolve"), &json!({})).await;
    assert_eq!(
        (second.expect(200).body["settled"].clone(), second.body["remaining"].clone()),
        (json!(1), json!(false))
    );
    assert_eq!(second.body["counts"]["resolved"], limit + 1);
}

async fn group_lists_refuse_invalid_queries(api: Api, env: Env) {
    let t = env.tenant().await;
    for (query, field) in [
        ("status=done", "status"),
        ("limit=0", "limit"),
        ("limit=201", "limit"),
        ("offset=-1", "offset"),
        ("created_after=yesterday", "created_after"),
        ("created_before=2026-13-01T00:00:00Z", "created_before"),
    ] {
        let reply = api.get(&t.key, &format!("/failures/groups?{query}")).await;
        reply.expect_problem(422, "validation_failed");
        assert_eq!(reply.error_fields(), [field], "{query}");
    }
    api.get(&t.key, "/failures/groups?workflow_id=garbage").await.expect_problem(404, "not_found");
    api.get(&t.key, "/failures?group_id=garbage&status=done").await.expect_problem(422, "validation_failed");
    let empty = api.get(&t.key, "/failures/groups").await;
    assert_eq!(empty.expect(200).body, json!({"items": [], "total": 0, "limit": 50, "offset": 0}));
}

/// A group's counts take every failure (up to the cap) and its hours only the recent
/// ones: `count_keeping` reads back ids while they are recent, then only counts.
#[tokio::test]
async fn counting_keeps_the_recent_ids_and_counts_the_rest() {
    use shared::dynamo::{Table, count_keeping, newest_first, s};
    let env = api_tests::env().await;
    let partition = format!("count-keeping-{}", uuid::Uuid::now_v7().simple());
    let id = |ms: u64| format!("fail_{ms:012x}{}", "0".repeat(20));
    let now = 1_800_000_000_000_u64;
    let times = [now - 10, now - 1_000, now - 2 * 86_400_000, now - 3 * 86_400_000, now - 4 * 86_400_000];
    for ms in times {
        let put = env.client.put_item().table_name(env.tables.name(Table::Failures));
        put.item("tenant_id", s(&partition)).item("id", s(id(ms))).send().await.expect("put");
    }
    let query = || newest_first(&env.client, env.tables.name(Table::Failures), None, ("tenant_id", partition.clone()));
    let recent = |v: &str| shared::ids::millis_of(v) >= now - 86_400_000;
    let (total, kept) = count_keeping(query().limit(2), "id", 10_000, recent).await.expect("counted");
    assert_eq!((total, kept), (5, vec![id(now - 10), id(now - 1_000)]), "pages of 2: kept, then counted");
    let (total, kept) = count_keeping(query().limit(1), "id", 10_000, recent).await.expect("counted");
    assert_eq!((total, kept.len()), (5, 2), "pages of 1");
    let (capped, kept) = count_keeping(query(), "id", 3, recent).await.expect("counted");
    assert_eq!((capped, kept.len()), (3, 2), "up to the cap");
    let (total, kept) = count_keeping(query(), "id", 10_000, |_: &str| false).await.expect("counted");
    assert_eq!((total, kept.len()), (5, 0), "none recent: a count alone");
}

/// Sixteen executions fail at once with one new cause: their first failures race to
/// write the group's item (one does, the others plan again and find it), and the group
/// counts each failure once.
#[tokio::test]
async fn concurrent_first_failures_of_a_cause_make_one_group_counting_each() {
    const WRITERS: usize = 16;
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key).await;
    let mut executions = Vec::new();
    for _ in 0..WRITERS {
        let e = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await;
        executions.push(e.expect(201).body["id"].as_str().expect("id").to_owned());
    }
    let body = json!({"error_type": "LLM_ERROR", "message": "provider overloaded"});
    let fails = executions.iter().map(|e| {
        let (api, key, body, path) = (api.clone(), t.key.clone(), body.clone(), format!("/executions/{e}/fail"));
        tokio::spawn(async move { api.post_retrying(&key, &path, &body, &format!("fail-{path}")).await })
    });
    for fail in fails.collect::<Vec<_>>() {
        let (reply, _) = fail.await.expect("task");
        assert_eq!(reply.status, 200, "{}", reply.body);
    }
    let groups = api.get(&t.key, "/failures/groups").await;
    let items = groups.expect(200).body["items"].as_array().expect("items").clone();
    assert_eq!(items.len(), 1, "one cause, one group: {items:?}");
    assert_eq!(items[0]["counts"], json!({"total": WRITERS, "open": WRITERS, "resolved": 0, "ignored": 0}));
    let group = items[0]["id"].as_str().expect("id");
    assert_eq!(listed(&api, &t.key, &format!("group_id={group}&limit=100")).await.0.len(), WRITERS);
}

/// The groups' counter items are read one query a shard while each shard holds at most
/// as many as a list reads (else by name): what a list of groups reads stays bounded
/// however many groups a tenant has.
#[tokio::test]
async fn a_run_of_counter_items_is_read_whole_only_up_to_its_bound() {
    use shared::dynamo::{Table, n};
    let env = api_tests::env().await;
    let t = env.tenant().await;
    let tenant = shared::auth::stored::owner(&t.id).expect("tenant");
    for (shard, name, open) in [(0, "groups|fgrp_a", 2), (0, "groups|fgrp_b", 1), (5, "groups|fgrp_a", 3)] {
        let key = shared::counters::key(&t.id, shard, name);
        let put = env.client.put_item().table_name(env.tables.name(Table::Counters)).set_item(Some(key));
        put.item("open", n(open)).item("last_seen", n(100 * open)).send().await.expect("put");
    }
    let read = |most| shared::counters::read_run(&env.client, &env.tables, &tenant, "groups", most);
    assert_eq!(read(1).await.expect("read"), None, "shard 0 holds two: read by name instead");
    let whole = read(2).await.expect("read").expect("within the bound");
    assert_eq!((whole["groups|fgrp_a"].count("open"), whole["groups|fgrp_b"].count("open")), (5, 1));
    assert_eq!(whole["groups|fgrp_a"].latest("last_seen"), Some(300), "the latest stamp of the shards");
    assert_eq!(whole.len(), 2);
}
