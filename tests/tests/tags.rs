//! Tags on executions: set at the start, shown, and found again by `tag=key:value`
//! with exact totals, through every change of the execution, in process and through
//! `cargo lambda watch`.

use api_tests::{Api, Env, both_paths};
use serde_json::{Value, json};

both_paths!(
    tags_are_kept_shown_and_found_with_exact_totals,
    tag_lists_combine_with_every_other_filter_and_cursor,
    bad_tags_are_422_and_change_nothing,
    another_tenants_tags_find_nothing,
);

async fn workflow(api: &Api, key: &str) -> String {
    let reply = api.post(key, "/workflows", &json!({"name": "tagged", "workflow_type": "custom"})).await;
    reply.expect(201).body["id"].as_str().expect("id").to_owned()
}

async fn start(api: &Api, key: &str, workflow: &str, tags: &Value) -> String {
    let reply = api.post(key, "/executions", &json!({"workflow_id": workflow, "tags": tags})).await;
    assert_eq!(reply.expect(201).body["tags"], *tags, "the answer shows the tags");
    reply.body["id"].as_str().expect("id").to_owned()
}

/// The ids and total of a list (`query` without its `?`).
async fn list(api: &Api, key: &str, query: &str) -> (Vec<String>, u64) {
    let reply = api.get(key, &format!("/executions?{query}")).await;
    reply.expect(200);
    let ids = reply.body["items"].as_array().expect("items").iter().map(|e| e["id"].as_str().expect("id").to_owned());
    (ids.collect(), reply.body["total"].as_u64().expect("total"))
}

/// `key:value` as a query parameter (`:`, `@` and spaces encoded as a browser would).
fn tag(key: &str, value: &str) -> String {
    let encoded: String = form_urlencoded::byte_serialize(format!("{key}:{value}").as_bytes()).collect();
    format!("tag={encoded}")
}

async fn tags_are_kept_shown_and_found_with_exact_totals(api: Api, env: Env) {
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key).await;
    let mail = "ops@example.com: on call";
    let a = start(&api, &t.key, &wf, &json!({"team": "search", "owner": mail})).await;
    let b = start(&api, &t.key, &wf, &json!({"team": "search"})).await;
    let c = start(&api, &t.key, &wf, &json!({"team": "billing", "owner": mail})).await;
    let untagged = start(&api, &t.key, &wf, &json!({})).await;
    let team = tag("team", "search");
    assert_eq!(list(&api, &t.key, &team).await, (vec![b.clone(), a.clone()], 2), "newest first");
    assert_eq!(list(&api, &t.key, &tag("owner", mail)).await, (vec![c.clone(), a.clone()], 2));
    assert_eq!(list(&api, &t.key, &tag("team", "nobody")).await, (vec![], 0));
    assert_eq!(list(&api, &t.key, "").await.1, 4, "every execution is still in the plain list");
    let got = api.get(&t.key, &format!("/executions/{a}")).await;
    assert_eq!(got.expect(200).body["tags"], json!({"team": "search", "owner": mail}));
    assert_eq!(api.get(&t.key, &format!("/executions/{untagged}")).await.body["tags"], json!({}));

    // Every change moves the execution's tags with it; the totals follow.
    let fail = json!({"error_type": "TOOL_ERROR", "message": "the search API timed out"});
    api.post(&t.key, &format!("/executions/{a}/fail"), &fail).await.expect(200);
    api.post(&t.key, &format!("/executions/{b}/complete"), &json!({})).await.expect(200);
    assert_eq!(list(&api, &t.key, &format!("{team}&status=failed")).await, (vec![a.clone()], 1));
    assert_eq!(list(&api, &t.key, &format!("{team}&status=completed")).await, (vec![b.clone()], 1));
    assert_eq!(list(&api, &t.key, &format!("{team}&status=running")).await, (vec![], 0));
    api.post(&t.key, &format!("/executions/{a}/replay"), &json!({})).await.expect(200);
    assert_eq!(list(&api, &t.key, &format!("{team}&status=running")).await, (vec![a.clone()], 1));
    assert_eq!(list(&api, &t.key, &format!("{team}&status=failed")).await, (vec![], 0));
    let replayed = api.get(&t.key, &format!("/executions/{a}")).await;
    assert_eq!(replayed.body["tags"]["team"], "search", "a replay keeps the tags");

    // A deleted execution leaves its tags' lists and totals.
    api.delete(&t.key, &format!("/executions/{b}")).await.expect(204);
    assert_eq!(list(&api, &t.key, &team).await, (vec![a.clone()], 1));
    assert_eq!(list(&api, &t.key, &format!("{team}&status=completed")).await, (vec![], 0));
}

async fn tag_lists_combine_with_every_other_filter_and_cursor(api: Api, env: Env) {
    let t = env.tenant().await;
    let (wf1, wf2) = (workflow(&api, &t.key).await, workflow(&api, &t.key).await);
    let mut all = Vec::new();
    for i in 0..7 {
        let wf = if i % 2 == 0 { &wf1 } else { &wf2 };
        let tags = if i % 3 == 0 { json!({"env": "prod", "tier": "gold"}) } else { json!({"env": "prod"}) };
        all.push(start(&api, &t.key, wf, &tags).await);
        tokio::time::sleep(std::time::Duration::from_millis(3)).await;
    }
    all.reverse(); // newest first
    let prod = tag("env", "prod");
    let gold = tag("tier", "gold");
    // Two tags: both must match (0, 3 and 6 have both).
    let both = vec![all[0].clone(), all[3].clone(), all[6].clone()];
    assert_eq!(list(&api, &t.key, &format!("{prod}&{gold}")).await, (both.clone(), 3));
    assert_eq!(list(&api, &t.key, &format!("{gold}&{prod}")).await, (both, 3), "in any order");
    // A tag and a workflow (wf1 made 0, 2, 4, 6: newest first all[6], all[4], all[2], all[0]).
    let of_wf1: Vec<String> = [0, 2, 4, 6].iter().map(|i| all[*i].clone()).collect();
    assert_eq!(list(&api, &t.key, &format!("{prod}&workflow_id={wf1}")).await, (of_wf1, 4));
    assert_eq!(list(&api, &t.key, &format!("{gold}&workflow_id={wf2}")).await, (vec![all[3].clone()], 1));
    // Pages and cursors walk the tag's executions once each.
    let mut paged = Vec::new();
    for page in 1..=3 {
        let (ids, total) = list(&api, &t.key, &format!("{prod}&page={page}&page_size=3")).await;
        assert_eq!(total, 7);
        paged.extend(ids);
    }
    assert_eq!(paged, all);
    let mut cursor = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let from = after.as_ref().map(|a| format!("&starting_after={a}")).unwrap_or_default();
        let (ids, _) = list(&api, &t.key, &format!("{prod}&page_size=2{from}")).await;
        let Some(last) = ids.last().cloned() else { break };
        cursor.extend(ids);
        after = Some(last);
    }
    assert_eq!(cursor, all);
    // A time window: the executions strictly between the 2nd and the 6th made.
    let created = |id: &str| {
        let api = &api;
        let key = t.key.clone();
        let path = format!("/executions/{id}");
        async move { api.get(&key, &path).await.body["created_at"].as_str().expect("time").to_owned() }
    };
    let (from, to) = (created(&all[5]).await, created(&all[1]).await);
    let window = format!("{prod}&created_after={from}&created_before={to}");
    assert_eq!(list(&api, &t.key, &window).await, (all[2..5].to_vec(), 3));
}

async fn bad_tags_are_422_and_change_nothing(api: Api, env: Env) {
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key).await;
    let many: serde_json::Map<String, Value> = (0..17).map(|i| (format!("k{i}"), json!("v"))).collect();
    for tags in [
        json!("team:search"),
        Value::Object(many),
        json!({"a:b": "x"}),
        json!({"k".repeat(65): "x"}),
        json!({"team": ""}),
        json!({"team": "x".repeat(129)}),
        json!({"team": 7}),
        json!({"team": "tab\there"}),
    ] {
        let reply = api.post(&t.key, "/executions", &json!({"workflow_id": wf, "tags": tags})).await;
        reply.expect_problem(422, "validation_failed");
        assert_eq!(reply.error_fields(), ["tags"], "{tags}");
    }
    assert_eq!(list(&api, &t.key, "").await.1, 0, "nothing was started");
    let balance = api.get(&t.key, "/billing/balance").await;
    assert_eq!(balance.body["credits_balance"], 1000, "nothing was charged");
    for query in ["tag=team", "tag=team:", "tag=:x", "tag=a%23b:x", "tag=team:a&tag=team:b"] {
        let reply = api.get(&t.key, &format!("/executions?{query}")).await;
        reply.expect_problem(422, "validation_failed");
        assert_eq!(reply.error_fields(), ["tag"], "{query}");
    }
    let seventeen: Vec<String> = (0..17).map(|i| tag(&format!("k{i}"), "v")).collect();
    let reply = api.get(&t.key, &format!("/executions?{}", seventeen.join("&"))).await;
    reply.expect_problem(422, "validation_failed");
}

async fn another_tenants_tags_find_nothing(api: Api, env: Env) {
    let (t, other) = (env.tenant().await, env.tenant().await);
    let wf = workflow(&api, &t.key).await;
    let mine = start(&api, &t.key, &wf, &json!({"team": "search"})).await;
    let team = tag("team", "search");
    assert_eq!(list(&api, &other.key, &team).await, (vec![], 0));
    assert_eq!(list(&api, &other.key, &format!("{team}&status=running")).await, (vec![], 0));
    assert_eq!(list(&api, &t.key, &team).await, (vec![mine], 1));
}
