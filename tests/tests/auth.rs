//! Every route of every function, taken from `template.yaml` so that a new route cannot
//! escape: refused without a valid key, in process and through `cargo lambda watch`.
//! The Stripe webhook, authenticated by its signature instead, has its own tests.

use std::sync::Arc;

use api_tests::{Api, Env, both_paths};
use axum::Router;
use axum::routing::get;
use http::{Method, Request};
use serde_json::json;
use shared::auth::{AuthState, KnownKeys};
use shared::dynamo::Table;
use tower::ServiceExt;

both_paths!(
    every_route_serves_a_key_in_scope_and_refuses_one_out_of_scope_changing_nothing,
    every_route_refuses_missing_unknown_revoked_and_basic_credentials,
    a_key_revoked_while_an_instance_is_warm_is_refused_on_its_very_next_read_and_write,
);

/// Every route that takes an API key (the Stripe webhook and the dashboard aside), its
/// path's ids filled in.
fn keyed_routes() -> Vec<(Method, String)> {
    let routes = infra::template::Template::embedded().expect("template").routes().expect("routes");
    assert!(routes.len() >= 24, "{} routes", routes.len());
    routes
        .into_iter()
        .filter(|r| {
            let route = (r.method.as_str(), r.path.as_str());
            !billing::PUBLIC_ROUTES.contains(&route) && !dashboard::ROUTES.contains(&route)
        })
        .map(|r| (Method::from_bytes(r.method.as_bytes()).expect("method"), concrete(&r.path)))
        .collect()
}

/// A route's path with its ids filled in.
fn concrete(path: &str) -> String {
    path.replace("{workflow_id}", "wf_0193a6f21c2b7d3e8f000123456789ab")
        .replace("{execution_id}", "exec_0193a6f21c2b7d3e8f000123456789ab")
        .replace("{checkpoint_id}", "cp_0193a6f21c2b7d3e8f000123456789ab")
        .replace("{failure_id}", "fail_0193a6f21c2b7d3e8f000123456789ab")
        .replace("{group_id}", "fgrp_0193a6f21c2b7d3e8f000123456789ab")
        .replace("{key_id}", "key_0193a6f21c2b7d3e8f000123456789ab")
        .replace("{endpoint_id}", "we_0193a6f21c2b7d3e8f000123456789ab")
        .replace("{delivery_id}", "wd_0193a6f21c2b7d3e8f000123456789ab")
        .replace("/api/v1", "")
}

/// For every route, a key holding exactly the scope it needs is served (whatever the
/// answer, never 401 or 403), and a key holding every other scope (for a read, its
/// area's too: none allows it) is refused 403 `insufficient_scope` naming that scope;
/// the refused calls change nothing the tenant can see.
async fn every_route_serves_a_key_in_scope_and_refuses_one_out_of_scope_changing_nothing(api: Api, env: Env) {
    use shared::scopes::{AREAS, Access};
    let t = env.tenant().await;
    let all: Vec<String> = AREAS.iter().flat_map(|a| [format!("{a}:read"), format!("{a}:write")]).collect();
    let mut keys = std::collections::HashMap::new();
    for area in AREAS {
        for (access, name) in [(Access::Read, "read"), (Access::Write, "write")] {
            let within = vec![format!("{area}:{name}")];
            let without: Vec<&String> = all
                .iter()
                .filter(|s| !s.starts_with(&format!("{area}:")) || (access == Access::Write && s.ends_with(":read")))
                .collect();
            let mut made = Vec::new();
            for scopes in [json!(within), json!(without)] {
                let reply =
                    api.post(&t.key, "/keys", &json!({"name": format!("{area} {name}"), "scopes": scopes})).await;
                made.push(reply.expect(201).body["key"].as_str().expect("secret").to_owned());
            }
            keys.insert(format!("{area}:{name}"), made);
        }
    }
    // An export needs the full key: every area's scopes are not enough.
    let areas = api.post(&t.key, "/keys", &json!({"name": "every area", "scopes": all})).await;
    let areas = areas.expect(201).body["key"].as_str().expect("secret").to_owned();
    keys.insert(shared::scopes::FULL.to_owned(), vec![t.key.clone(), areas]);
    let seen = || async {
        let mut totals = Vec::new();
        for path in ["/workflows", "/executions", "/keys", "/webhook-endpoints", "/failures"] {
            totals.push(api.get(&t.key, path).await.body["total"].clone());
        }
        totals.push(api.get(&t.key, "/billing/balance").await.body["credits_balance"].clone());
        totals
    };
    // The MCP endpoint takes any live key; each of its tools needs its route's scope
    // (tests/tests/mcp.rs).
    let calls: Vec<(Method, String, String)> = keyed_routes()
        .into_iter()
        .filter(|(_, path)| path != "/mcp")
        .map(|(method, path)| {
            let needed = shared::scopes::needed(&method, &path).expect("every API route needs a scope").to_string();
            (method, path, needed)
        })
        .collect();
    assert!(calls.len() >= 30, "{} routes", calls.len());
    for (method, path, needed) in &calls {
        let served = api.request(method.clone(), path).key(&keys[needed][0]).json(&json!({})).send().await;
        assert!(![401, 403].contains(&served.status), "{method} {path} with {needed}: {}", served.status);
    }
    let before = seen().await;
    for (method, path, needed) in &calls {
        let refused = api.request(method.clone(), path).key(&keys[needed][1]).json(&json!({})).send().await;
        refused.expect_problem(403, "insufficient_scope");
        assert_eq!(refused.body["required_scope"], needed.as_str(), "{method} {path}");
    }
    assert_eq!(seen().await, before, "the refused calls changed nothing");
}

async fn every_route_refuses_missing_unknown_revoked_and_basic_credentials(api: Api, env: Env) {
    let t = env.tenant().await;
    let revoked = env.revoked_key(&t).await;
    let unknown = format!("cairn_{}", "Z".repeat(43));
    for (method, path) in keyed_routes() {
        let credentials: [Option<(&'static str, String)>; 5] = [
            None,
            Some(("x-api-key", unknown.clone())),
            Some(("x-api-key", revoked.clone())),
            Some(("authorization", format!("Bearer {revoked}"))),
            Some(("authorization", format!("Basic {}", t.key))),
        ];
        for credential in credentials {
            let mut call = api.request(method.clone(), &path).json(&json!({}));
            if let Some((name, value)) = &credential {
                call = call.header(name, value);
            }
            let reply = call.send().await;
            reply.expect_problem(401, "unauthorized");
            assert_eq!(reply.header("www-authenticate"), Some("Bearer"), "{method} {path}");
            assert_eq!(reply.header("cache-control"), Some("no-store"), "{method} {path}");
        }
    }
    // An answer with the tenant's data is never kept by a cache either.
    let listed = api.get(&t.key, "/workflows").await;
    listed.expect(200);
    assert_eq!(listed.header("cache-control"), Some("no-store"));
    let unknown = api.get(&t.key, "/workflows/wf_0193a6f21c2b7d3e8f000123456789ab").await;
    unknown.expect_problem(404, "not_found");
    assert_eq!(unknown.header("cache-control"), Some("no-store"));
}

/// A warm instance starts a read's work before the key's item is back (it has seen the
/// key live): a key revoked meanwhile is still refused on its very next request, read or
/// write, and the write changes nothing.
async fn a_key_revoked_while_an_instance_is_warm_is_refused_on_its_very_next_read_and_write(api: Api, env: Env) {
    let t = env.tenant().await;
    let now = || shared::time::format(chrono::Utc::now());
    let (key_id, key) = infra::admin::create_key(&env.client, &env.tables, &t.id, &now()).await.expect("key");
    for _ in 0..3 {
        api.get(&key, "/workflows").await.expect(200);
    }
    infra::admin::revoke_key(&env.client, &env.tables, key_id.as_str(), &now()).await.expect("revoked");
    api.get(&key, "/workflows").await.expect_problem(401, "unauthorized");
    api.get(&key, "/billing/balance").await.expect_problem(401, "unauthorized");
    let write = api.post(&key, "/workflows", &json!({"name": "after revocation", "workflow_type": "custom"})).await;
    write.expect_problem(401, "unauthorized");
    assert_eq!(api.get(&t.key, "/workflows").await.body["total"], 0, "nothing was written");
    // The tenant's other key goes on working.
    api.get(&t.key, "/workflows").await.expect(200);
}

/// On a warm instance, the count the rate limit makes anyway proves the key live: once
/// the instance has read the key after a count, its requests read the key no more.
/// Revoking another key of the tenant through the API moves the tenant's keys epoch on:
/// the next request reads the key again (still live). Revoking the key itself: its very
/// next request reads the key and is refused.
#[tokio::test]
async fn a_warm_key_is_proven_live_by_its_tenants_keys_epoch_until_a_revocation() {
    let env = api_tests::env().await;
    let t = env.tenant().await;
    let now = || shared::time::format(chrono::Utc::now());
    let (key_id, key) = infra::admin::create_key(&env.client, &env.tables, &t.id, &now()).await.expect("key");
    let (other_id, _) = infra::admin::create_key(&env.client, &env.tables, &t.id, &now()).await.expect("key");
    let auth = AuthState {
        client: env.client.clone(),
        tables: env.tables.clone(),
        rate_limit: 1_000_000,
        origin_secret: None,
        known: KnownKeys::default(),
    };
    let app = shared::http::api(Router::new().route("/api/v1/ping", get(|| async { "pong" })), auth);
    let keys_table = env.tables.name(Table::ApiKeys).to_owned();
    // (status, whether the request read the API-keys table)
    let ping = || async {
        let request = Request::get("/api/v1/ping").header("x-api-key", &key).body(axum::body::Body::empty());
        let call = async {
            let response = app.clone().oneshot(request.expect("request")).await.expect("infallible");
            api_tests::finished(response).await
        };
        let (response, accesses) = shared::metering::recorded(call).await;
        (response.status().as_u16(), accesses.iter().any(|a| a.table == keys_table))
    };
    assert_eq!(ping().await, (200, true), "a cold instance reads the key first");
    assert_eq!(ping().await, (200, true), "then once beside the look at the standing");
    for _ in 0..3 {
        assert_eq!(ping().await, (200, false), "then the standing's keys epoch proves it live");
    }

    let keys = keys::app(env.client.clone(), env.tables.clone(), Arc::new(shared::time::SystemClock));
    let revoke = |id: String| {
        let (keys, key) = (keys.clone(), t.key.clone());
        async move {
            let request = Request::delete(format!("/api/v1/keys/{id}")).header("x-api-key", key);
            let response = keys.oneshot(request.body(axum::body::Body::empty()).expect("request")).await;
            let response = response.expect("infallible");
            let response = api_tests::finished(response).await;
            assert_eq!(response.status(), 204);
        }
    };
    revoke(other_id.as_str().to_owned()).await;
    assert_eq!(ping().await, (200, true), "another key revoked: this one is read again, and live");
    assert_eq!(ping().await, (200, false), "and proven live at the new epoch");
    revoke(key_id.as_str().to_owned()).await;
    assert_eq!(ping().await, (401, true), "revoked: its very next request reads it and is refused");
}

/// On a warm instance whose key the keys epoch proves live, a read by id makes one
/// DynamoDB call in all: its GetItem becomes one BatchGetItem that reads the tenant's
/// rate-limit standing too. What that read finds still refuses a revoked key on its very
/// next request, and another key's revocation still sends the instance back to the key's
/// item.
#[tokio::test]
async fn a_warm_read_by_id_is_one_call_that_carries_the_look_and_still_refuses_a_revoked_key() {
    let env = api_tests::env().await;
    let t = env.tenant().await;
    let now = || shared::time::format(chrono::Utc::now());
    let (key_id, key) = infra::admin::create_key(&env.client, &env.tables, &t.id, &now()).await.expect("key");
    let (other_id, _) = infra::admin::create_key(&env.client, &env.tables, &t.id, &now()).await.expect("key");
    let id = an_execution(&env, &key).await;
    let clock = Arc::new(shared::time::SystemClock);
    let app = executions::app(env.client.clone(), env.tables.clone(), clock.clone());
    let (executions, standings, keys_table) = (
        env.tables.name(Table::Executions).to_owned(),
        env.tables.name(Table::RateLimits).to_owned(),
        env.tables.name(Table::ApiKeys).to_owned(),
    );
    let path = format!("/api/v1/executions/{id}");
    let read = || read_by_id(&app, &key, &path);
    let batch = |table: &str| ("dynamodb:BatchGetItem".to_owned(), table.to_owned());
    for _ in 0..3 {
        assert_eq!(read().await.0, 200);
    }
    let (status, calls, accesses) = read().await;
    assert_eq!((status, calls), (200, 1), "one call in all: {accesses:?}");
    assert_eq!(accesses, [batch(&executions), batch(&standings)], "the item and the standing, in one call");

    let keys = keys::app(env.client.clone(), env.tables.clone(), clock);
    let revoke = |id: String| {
        let (keys, key) = (keys.clone(), t.key.clone());
        async move {
            let request = Request::delete(format!("/api/v1/keys/{id}")).header("x-api-key", key);
            let response = keys.oneshot(request.body(axum::body::Body::empty()).expect("request")).await;
            let response = api_tests::finished(response.expect("infallible")).await;
            assert_eq!(response.status(), 204);
        }
    };
    revoke(other_id.as_str().to_owned()).await;
    let (status, _, accesses) = read().await;
    assert_eq!(status, 200, "another key revoked: this one is still live");
    assert!(accesses.iter().any(|(_, table)| *table == keys_table), "and read again: {accesses:?}");
    let (status, calls, _) = read().await;
    assert_eq!((status, calls), (200, 1), "then proven live at the new epoch, in one call again");
    revoke(key_id.as_str().to_owned()).await;
    assert_eq!(read().await.0, 401, "revoked: refused on its very next read");
}

/// An execution of the key's tenant, made through the API.
async fn an_execution(env: &Env, key: &str) -> String {
    let api = Api::new(api_tests::Transport::in_process(env));
    let workflow = api.post(key, "/workflows", &json!({"name": "w", "workflow_type": "custom"})).await;
    let start = json!({"workflow_id": workflow.expect(201).body["id"], "input": {"q": 1}});
    let execution = api.post(key, "/executions", &start).await;
    execution.expect(201).body["id"].as_str().expect("id").to_owned()
}

/// `GET path` through `app`: the status, the DynamoDB calls made up to the answer and
/// their accesses as (action, table), sorted. The count after the answer runs after,
/// unmeasured, as on Lambda.
async fn read_by_id(app: &Router, key: &str, path: &str) -> (u16, u64, Vec<(String, String)>) {
    let request = Request::get(path).header("x-api-key", key);
    let call = async {
        let response = app.clone().oneshot(request.body(axum::body::Body::empty()).expect("request")).await;
        let mut response = response.expect("infallible");
        (response.status().as_u16(), response.extensions_mut().remove::<shared::lambda::AfterAnswer>())
    };
    let (((status, after), accesses), usage) = shared::metering::metered(shared::metering::recorded(call)).await;
    api_tests::bench::after_answer(after).await;
    let mut accesses: Vec<(String, String)> =
        accesses.into_iter().map(|access| (access.action, access.table)).collect();
    accesses.sort();
    (status, usage.calls, accesses)
}

/// Fails every BatchGetItem that reads the rate-limit standings (a look, carried in a
/// request's read or alone) before it is sent, as a refused or unreachable table would.
const NO_LOOKS: api_tests::BeforeSending = api_tests::BeforeSending {
    operation: "BatchGetItem",
    act: |body| {
        let looks = String::from_utf8_lossy(body).contains("-rate-limits\"");
        if looks { Err("a look refused by the test".into()) } else { Ok(()) }
    },
};

/// When the call that carries the look fails, the read does not fail with it: the item
/// is read alone and answered, the look counts as failed (the request goes through, as
/// when a look alone fails), so the key is proven by a read of its item, and a revoked
/// key is still refused on its very next read.
#[tokio::test]
async fn a_read_whose_carried_look_fails_is_answered_from_its_own_read_and_still_refuses_a_revoked_key() {
    let env = api_tests::env().await;
    let t = env.tenant().await;
    let now = || shared::time::format(chrono::Utc::now());
    let (key_id, key) = infra::admin::create_key(&env.client, &env.tables, &t.id, &now()).await.expect("key");
    let id = format!("/api/v1/executions/{}", an_execution(&env, &key).await);
    let client = aws_sdk_dynamodb::Client::from_conf(env.client.config().to_builder().interceptor(NO_LOOKS).build());
    let app = executions::app(client, env.tables.clone(), Arc::new(shared::time::SystemClock));
    let read = |action: &str, table: Table| (format!("dynamodb:{action}"), env.tables.name(table).to_owned());
    for _ in 0..3 {
        assert_eq!(read_by_id(&app, &key, &id).await.0, 200);
    }
    let (status, _, accesses) = read_by_id(&app, &key, &id).await;
    assert_eq!(status, 200, "answered from its own read: {accesses:?}");
    let alone = read("BatchGetItem", Table::Executions);
    assert!(accesses.contains(&alone), "the item (and its head) read alone: {accesses:?}");
    assert!(accesses.contains(&read("GetItem", Table::ApiKeys)), "the key proven by its own read: {accesses:?}");
    infra::admin::revoke_key(&env.client, &env.tables, key_id.as_str(), &now()).await.expect("revoked");
    assert_eq!(read_by_id(&app, &key, &id).await.0, 401, "revoked: refused on its very next read");
}

/// A read by id whose first call is a batch read (a failure, read with its execution's
/// other failures' reader) carries the look in that call too: one call in all.
#[tokio::test]
async fn a_warm_batch_read_by_id_carries_the_look_too() {
    let env = api_tests::env().await;
    let t = env.tenant().await;
    let path = format!("/api/v1/failures/{}", a_failure(&env, &t.key).await);
    let app = failures::app(env.client.clone(), env.tables.clone(), Arc::new(shared::time::SystemClock));
    for _ in 0..3 {
        assert_eq!(read_by_id(&app, &t.key, &path).await.0, 200);
    }
    let (status, calls, accesses) = read_by_id(&app, &t.key, &path).await;
    assert_eq!((status, calls), (200, 1), "one call in all: {accesses:?}");
    let batch = |table: Table| ("dynamodb:BatchGetItem".to_owned(), env.tables.name(table).to_owned());
    assert_eq!(accesses, [batch(Table::Failures), batch(Table::RateLimits)], "the failure and the standing");
}

/// A failure of the key's tenant, made through the API.
async fn a_failure(env: &Env, key: &str) -> String {
    let execution = an_execution(env, key).await;
    let api = Api::new(api_tests::Transport::in_process(env));
    let fail = json!({"error_type": "TOOL_ERROR", "message": "a tool failed"});
    api.post(key, &format!("/executions/{execution}/fail"), &fail).await.expect(200);
    let failures = api.get(key, &format!("/failures?execution_id={execution}")).await;
    failures.expect(200).body["items"][0]["id"].as_str().expect("a failure").to_owned()
}

/// When the call carrying the look fails, a batch read's items are read again with the
/// batch read it asked for, not a GetItem: the failures function may only BatchGetItem
/// failures (`template.yaml`), so a GetItem would be refused on AWS.
#[tokio::test]
async fn a_batch_read_whose_carried_look_fails_reads_its_items_again_as_a_batch() {
    let env = api_tests::env().await;
    let t = env.tenant().await;
    let path = format!("/api/v1/failures/{}", a_failure(&env, &t.key).await);
    let (failures, standings) = (env.tables.name(Table::Failures), env.tables.name(Table::RateLimits).to_owned());
    // Any BatchGetItem that carries the look is answered with what no client can read.
    let garble = api_tests::Rewrite(Arc::new(move |target: &str, body: &serde_json::Value| {
        let carries = body["RequestItems"].get(&standings).is_some();
        (target.ends_with(".BatchGetItem") && carries).then(|| "not an answer".to_owned())
    }));
    let client = aws_sdk_dynamodb::Client::from_conf(env.client.config().to_builder().interceptor(garble).build());
    let app = failures::app(client, env.tables.clone(), Arc::new(shared::time::SystemClock));
    for _ in 0..3 {
        assert_eq!(read_by_id(&app, &t.key, &path).await.0, 200);
    }
    let (status, _, accesses) = read_by_id(&app, &t.key, &path).await;
    assert_eq!(status, 200, "answered from its own batch read: {accesses:?}");
    let by = |action: &str| accesses.iter().any(|(a, table)| a == action && table == failures);
    assert!(by("dynamodb:BatchGetItem") && !by("dynamodb:GetItem"), "read again as a batch: {accesses:?}");
}
