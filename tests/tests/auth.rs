//! Every route of every function, taken from `template.yaml` so that a new route cannot
//! escape: refused without a valid key, in process and through `cargo lambda watch`.
//! The Stripe webhook, authenticated by its signature instead, has its own tests.

use api_tests::{Api, Env, both_paths};
use http::Method;
use serde_json::json;

both_paths!(
    every_route_refuses_missing_unknown_revoked_and_basic_credentials,
    a_key_revoked_while_an_instance_is_warm_is_refused_on_its_very_next_read_and_write,
);

async fn every_route_refuses_missing_unknown_revoked_and_basic_credentials(api: Api, env: Env) {
    let t = env.tenant().await;
    let revoked = env.revoked_key(&t).await;
    let unknown = format!("cairn_{}", "Z".repeat(43));
    let routes = infra::template::Template::embedded().expect("template").routes().expect("routes");
    assert!(routes.len() >= 24, "{} routes", routes.len());
    for route in routes {
        if billing::PUBLIC_ROUTES.contains(&(route.method.as_str(), route.path.as_str()))
            || dashboard::ROUTES.contains(&(route.method.as_str(), route.path.as_str()))
        {
            continue;
        }
        let path = route
            .path
            .replace("{workflow_id}", "wf_0193a6f21c2b7d3e8f000123456789ab")
            .replace("{execution_id}", "exec_0193a6f21c2b7d3e8f000123456789ab")
            .replace("{checkpoint_id}", "cp_0193a6f21c2b7d3e8f000123456789ab")
            .replace("{failure_id}", "fail_0193a6f21c2b7d3e8f000123456789ab")
            .replace("{key_id}", "key_0193a6f21c2b7d3e8f000123456789ab")
            .replace("/api/v1", "");
        let method = Method::from_bytes(route.method.as_bytes()).expect("method");
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
        }
    }
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
