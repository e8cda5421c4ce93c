//! The per-tenant rate limit of the shared edge, against DynamoDB Local: a router with
//! the edge and a limit of 3 requests a minute (the functions use
//! `RATE_LIMIT_PER_MINUTE`, 1200 by default).

use api_tests::{Api, Env, both_paths};
use axum::Router;
use axum::routing::get;
use http::{Method, Request};
use shared::auth::AuthState;
use shared::http::api;
use tower::ServiceExt;

async fn call(app: &Router, key: Option<&str>) -> http::Response<axum::body::Body> {
    let mut request = Request::builder().method(Method::GET).uri("/api/v1/ping");
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    app.clone().oneshot(request.body(axum::body::Body::empty()).expect("request")).await.expect("infallible")
}

fn header(response: &http::Response<axum::body::Body>, name: &str) -> Option<u64> {
    response.headers().get(name).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn a_tenant_over_its_limit_gets_429_with_retry_after_and_others_do_not() {
    let env = api_tests::env().await;
    let auth = AuthState {
        client: env.client.clone(),
        tables: env.tables.clone(),
        rate_limit: 3,
        origin_secret: None,
        known: shared::auth::KnownKeys::default(),
    };
    let app = api(Router::new().route("/api/v1/ping", get(|| async { "pong" })), auth);
    let (a, b) = (env.tenant().await, env.tenant().await);
    for _ in 0..3 {
        assert_eq!(call(&app, None).await.status(), 401, "refused requests are not counted");
    }
    let mut remaining = Vec::new();
    for _ in 0..3 {
        let response = call(&app, Some(&a.key)).await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "x-ratelimit-limit"), Some(3));
        assert!(header(&response, "x-ratelimit-reset").is_some_and(|r| (1..=60).contains(&r)));
        remaining.push(header(&response, "x-ratelimit-remaining").expect("remaining"));
    }
    // A window boundary between two requests restarts the count; both cases are valid.
    let limited = call(&app, Some(&a.key)).await;
    if remaining == [2, 1, 0] {
        assert_eq!(limited.status(), 429);
        let retry_after =
            limited.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
        assert!(retry_after.is_some_and(|r| (1..=60).contains(&r)), "{retry_after:?}");
        assert_eq!(header(&limited, "x-ratelimit-remaining"), Some(0));
        let body = axum::body::to_bytes(limited.into_body(), usize::MAX).await.expect("body");
        let problem: serde_json::Value = serde_json::from_slice(&body).expect("json");
        assert_eq!(problem["code"], "rate_limited");
    }
    let other = call(&app, Some(&b.key)).await;
    assert_eq!(other.status(), 200, "another tenant has its own window");
    assert_eq!(header(&other, "x-ratelimit-remaining"), Some(2));
}

both_paths!(every_authenticated_response_carries_the_rate_limit_headers);

async fn every_authenticated_response_carries_the_rate_limit_headers(api: Api, env: Env) {
    let t = env.tenant().await;
    // The limit the functions were started with (`make test` raises it for the fuzzer).
    let limit = std::env::var("RATE_LIMIT_PER_MINUTE").unwrap_or_else(|_| "1200".to_owned());
    let first = api.get(&t.key, "/workflows").await;
    first.expect(200);
    assert_eq!(first.header("x-ratelimit-limit"), Some(limit.as_str()));
    let limit: u64 = limit.parse().expect("a number");
    let not_found = api.get(&t.key, "/workflows/wf_0193a6f21c2b7d3e8f000123456789ab").await;
    not_found.expect(404);
    let (a, b) = (first.header("x-ratelimit-remaining"), not_found.header("x-ratelimit-remaining"));
    let (a, b) = (a.and_then(|v| v.parse::<u64>().ok()), b.and_then(|v| v.parse::<u64>().ok()));
    assert!(a.is_some_and(|a| a < limit) && b.is_some_and(|b| b < limit), "this request is counted: {a:?}, {b:?}");
    assert!(not_found.header("x-ratelimit-reset").is_some());
}
