//! Tenant isolation over every route, generated from `template.yaml` so that a new route
//! cannot escape: another tenant's ids (in the path, the query or the body) are answered
//! 404 `not_found` exactly like unknown ids, and nothing of the owner's changes. Every
//! route must be classified below (ids in its path, ids in its query or body, or no ids);
//! an unclassified route fails the test.

use api_tests::{Api, Env, both_paths};
use http::Method;
use serde_json::{Value, json};

both_paths!(another_tenants_ids_are_404_on_every_route_and_change_nothing);

/// The owner's resources.
struct Owned {
    key: String,
    workflow: String,
    running: String,
    checkpoint: String,
    failed: String,
    failure: String,
    group: String,
    endpoint: String,
    bulk: String,
    export: String,
}

const FAIL: &str = r#"{"error_type":"AGENT_ERROR","message":"it broke"}"#;

/// Routes that take no ids at all besides every billing route (the tenant's own
/// account); their lists are checked for leaks below.
const NO_IDS: &[(&str, &str)] = &[
    ("GET", "/api/v1/workflows"),
    ("POST", "/api/v1/workflows"),
    ("GET", "/api/v1/failures/stats"),
    ("GET", "/api/v1/failures/groups"),
    ("GET", "/api/v1/executions/stats"),
    ("GET", "/api/v1/executions/bulk"),
    ("GET", "/api/v1/keys"),
    ("POST", "/api/v1/keys"),
    ("GET", "/api/v1/webhook-endpoints"),
    ("GET", "/api/v1/settings/retention"),
    ("PUT", "/api/v1/settings/retention"),
    ("POST", "/api/v1/account/deletion"),
];

fn id_of(reply: &api_tests::Reply) -> String {
    reply.body["id"].as_str().expect("id").to_owned()
}

async fn own(api: &Api, key: &str) -> Owned {
    let workflow =
        id_of(api.post(key, "/workflows", &json!({"name": "w", "workflow_type": "custom"})).await.expect(201));
    let start = json!({"workflow_id": workflow});
    let running = id_of(api.post(key, "/executions", &start).await.expect(201));
    let cp = json!({"execution_id": running, "name": "one", "state": {"secret": 1}});
    let checkpoint = id_of(api.post(key, "/checkpoints", &cp).await.expect(201));
    let failed = id_of(api.post(key, "/executions", &start).await.expect(201));
    let fail: Value = serde_json::from_str(FAIL).expect("json");
    api.post(key, &format!("/executions/{failed}/fail"), &fail).await.expect(200);
    let listed = api.get(key, "/failures").await;
    let failure = listed.body["items"][0]["id"].as_str().expect("failure").to_owned();
    let group = listed.body["items"][0]["group_id"].as_str().expect("group").to_owned();
    let second = api.post(key, "/keys", &json!({"name": "second"})).await;
    let key_id = second.expect(201).body["id"].as_str().expect("key id").to_owned();
    // An endpoint no event of this test goes to (no delivery changes it meanwhile).
    let hook = json!({"url": "http://127.0.0.1:9/hook", "event_types": ["failure.ignored"], "workflow_id": workflow});
    let endpoint = id_of(api.post(key, "/webhook-endpoints", &hook).await.expect(201));
    // A bulk job, ended (cancelled, or completed first: it matches nothing), so that no
    // round changes it meanwhile.
    let job = json!({"action": "cancel", "filter": {"workflow_id": workflow, "status": "paused"}});
    let bulk = id_of(api.post(key, "/executions/bulk", &job).await.expect(202));
    api.post(key, &format!("/executions/bulk/{bulk}/cancel"), &json!({})).await.expect(200);
    let export = id_of(api.post(key, "/exports", &json!({"workflow_id": workflow})).await.expect(202));
    Owned { key: key_id, workflow, running, checkpoint, failed, failure, group, endpoint, bulk, export }
}

/// Everything the owner can see.
async fn snapshot(api: &Api, key: &str, o: &Owned) -> Vec<Value> {
    let mut seen = Vec::new();
    for path in [
        format!("/workflows/{}", o.workflow),
        format!("/executions/{}", o.running),
        format!("/executions/{}", o.failed),
        format!("/checkpoints/{}?include_state=true", o.checkpoint),
        format!("/checkpoints?execution_id={}", o.running),
        format!("/failures/{}", o.failure),
        format!("/failures/groups/{}", o.group),
        format!("/executions/bulk/{}", o.bulk),
        "/executions/bulk".to_owned(),
        "/executions".to_owned(),
        "/failures/stats".to_owned(),
        "/billing/balance".to_owned(),
        "/billing/transactions".to_owned(),
        "/keys".to_owned(),
        format!("/webhook-endpoints/{}", o.endpoint),
        "/webhook-endpoints".to_owned(),
    ] {
        let reply = api.get(key, &path).await;
        seen.push(json!({"path": path, "status": reply.status, "body": reply.body}));
    }
    seen
}

/// The requests that put the owner's ids into `method path` (for a route without ids
/// in its path: in its query or body). `None`: the route takes no ids.
fn requests(method: &str, path: &str, o: &Owned) -> Option<Vec<(String, Value)>> {
    let fail: Value = serde_json::from_str(FAIL).expect("json");
    if path.contains('{') {
        let url = path
            .replace("{workflow_id}", &o.workflow)
            .replace("{checkpoint_id}", &o.checkpoint)
            .replace("{failure_id}", &o.failure)
            .replace("{group_id}", &o.group)
            .replace("{bulk_id}", &o.bulk)
            .replace("{export_id}", &o.export)
            .replace("{part}", "1")
            .replace("{key_id}", &o.key)
            .replace("{endpoint_id}", &o.endpoint)
            .replace("{delivery_id}", &format!("wd_{}", o.endpoint.trim_start_matches("we_")));
        let body = match (method, path.rsplit('/').next().unwrap_or_default()) {
            ("PUT", _) => json!({"name": "renamed"}),
            ("PATCH", _) => json!({"enabled": false}),
            (_, "fail") => fail,
            (_, "rollback") => json!({"checkpoint_id": o.checkpoint}),
            ("POST", "writes") => json!({"task_id": "t", "writes": [{"index": 0, "channel": "c", "value": 1}]}),
            _ => json!({}),
        };
        assert!(
            !url.contains('{') || url.contains("{execution_id}"),
            "{method} {path}: a path parameter this test does not know; classify it"
        );
        return Some(
            [&o.running, &o.failed].iter().map(|e| (url.replace("{execution_id}", e), body.clone())).collect(),
        );
    }
    match (method, path) {
        ("GET", "/api/v1/executions") => Some(vec![(format!("{path}?workflow_id={}", o.workflow), Value::Null)]),
        ("GET", "/api/v1/checkpoints") => Some(vec![(format!("{path}?execution_id={}", o.running), Value::Null)]),
        ("GET", "/api/v1/failures") => Some(vec![(format!("{path}?group_id={}", o.group), Value::Null)]),
        ("POST", "/api/v1/executions") => Some(vec![(path.to_owned(), json!({"workflow_id": o.workflow}))]),
        ("POST", "/api/v1/executions/bulk") => Some(
            [json!({"workflow_id": o.workflow}), json!({"failure_group": o.group})]
                .into_iter()
                .flat_map(|filter| {
                    [true, false].map(|dry_run| {
                        (path.to_owned(), json!({"action": "replay", "filter": filter.clone(), "dry_run": dry_run}))
                    })
                })
                .collect(),
        ),
        ("POST", "/api/v1/webhook-endpoints") => {
            Some(vec![(path.to_owned(), json!({"url": "https://example.com/", "workflow_id": o.workflow}))])
        }
        ("POST", "/api/v1/exports") => Some(vec![(path.to_owned(), json!({"workflow_id": o.workflow}))]),
        ("POST", "/api/v1/checkpoints") => {
            Some(vec![(path.to_owned(), json!({"execution_id": o.running, "state": {"n": 1}}))])
        }
        // Ids travel inside its JSON-RPC messages, and a tool's refusal is its result
        // (HTTP 200, `isError`): tests/tests/mcp.rs calls every tool that takes an id
        // with the other tenant's.
        ("POST", "/api/v1/mcp") => None,
        _ => {
            let known = NO_IDS.contains(&(method, path)) || billing::ROUTES.contains(&(method, path));
            assert!(known, "{method} {path}: a route this test does not know; classify it");
            None
        }
    }
}

async fn another_tenants_ids_are_404_on_every_route_and_change_nothing(api: Api, env: Env) {
    let owner = env.tenant().await;
    let intruder = env.tenant().await;
    let o = own(&api, &owner.key).await;
    let mine = own(&api, &intruder.key).await;
    let before = snapshot(&api, &owner.key, &o).await;
    let routes = infra::template::Template::embedded().expect("template").routes().expect("routes");
    let mut checked = 0;
    for route in &routes {
        if billing::PUBLIC_ROUTES.contains(&(route.method.as_str(), route.path.as_str()))
            || dashboard::ROUTES.contains(&(route.method.as_str(), route.path.as_str()))
        {
            continue;
        }
        let Some(requests) = requests(&route.method, &route.path, &o) else { continue };
        let method = Method::from_bytes(route.method.as_bytes()).expect("method");
        for (url, body) in requests {
            let path = url.replacen("/api/v1", "", 1);
            let mut call = api.request(method.clone(), &path).key(&intruder.key);
            if !body.is_null() {
                call = call.json(&body);
            }
            let reply = call.send().await;
            assert_eq!(reply.status, 404, "{method} {path}: {}", reply.body);
            reply.expect_problem(404, "not_found");
            checked += 1;
        }
    }
    // Ids in bodies of routes whose path is the intruder's own.
    for action in ["replay", "rollback"] {
        let path = format!("/executions/{}/{action}", mine.failed);
        let reply = api.post(&intruder.key, &path, &json!({"checkpoint_id": o.checkpoint})).await;
        reply.expect_problem(404, "not_found");
        checked += 1;
    }
    assert!(checked >= 25, "{checked} requests");
    assert_eq!(snapshot(&api, &owner.key, &o).await, before, "the owner's data is unchanged");

    // The intruder's own lists show none of the owner's ids.
    let lists = [
        "/workflows",
        "/executions",
        "/executions/bulk",
        "/failures",
        "/failures/groups",
        "/billing/transactions",
        "/keys",
    ];
    for path in lists.into_iter().chain(["/webhook-endpoints"]) {
        let text = api.get(&intruder.key, path).await.expect(200).body.to_string();
        let ids =
            [&o.workflow, &o.running, &o.failed, &o.failure, &o.group, &o.checkpoint, &o.key, &o.endpoint, &o.bulk];
        for id in ids.into_iter().chain([&o.export]) {
            assert!(!text.contains(id.as_str()), "{path} leaks {id}");
        }
    }
}
