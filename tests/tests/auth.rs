//! Every route of every function, taken from `template.yaml` so that a new route cannot
//! escape: refused without a valid key, in process and through `cargo lambda watch`.
//! The Stripe webhook, authenticated by its signature instead, has its own tests.

use api_tests::{Api, Env, both_paths};
use http::Method;
use serde_json::json;

both_paths!(every_route_refuses_missing_unknown_revoked_and_basic_credentials);

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
