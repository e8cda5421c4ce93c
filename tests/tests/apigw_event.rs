//! The workflows function fed real API Gateway HTTP API (payload 2.0) events, as Lambda
//! delivers them in production, parsed by `lambda_http` itself.

use std::sync::Arc;

use serde_json::{Value, json};
use shared::time::SystemClock;
use tower::ServiceExt;

const EVENT: &str = include_str!("../data/apigw-v2-request.json");

fn event(method: &str, route: &str, path: &str, query: &str, key: &str, body: &Value) -> lambda_http::Request {
    let body = if body.is_null() { String::new() } else { body.to_string() };
    let escaped = serde_json::to_string(&body).expect("json string");
    let text = EVENT
        .replace("{{METHOD}}", method)
        .replace("{{ROUTE}}", route)
        .replace("{{PATH}}", path)
        .replace("{{QUERY}}", query)
        .replace("{{API_KEY}}", key)
        .replace("\"{{BODY}}\"", &escaped);
    lambda_http::request::from_str(&text).expect("a valid API Gateway v2 event")
}

async fn call(app: &axum::Router, request: lambda_http::Request) -> (u16, http::HeaderMap, Value) {
    let response = app.clone().oneshot(request).await.expect("infallible");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body");
    (status, headers, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn create_and_list_through_real_api_gateway_v2_events() {
    let env = api_tests::env().await;
    let tenant = env.tenant().await;
    let app = workflows::app(env.client.clone(), env.tables.clone(), Arc::new(SystemClock));

    let body = json!({"name": "From the gateway", "workflow_type": "langgraph", "status": "published"});
    let create = event("POST", "/api/v1/workflows", "/api/v1/workflows", "", &tenant.key, &body);
    let (status, headers, created) = call(&app, create).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["name"], "From the gateway");
    let location = headers.get("location").and_then(|v| v.to_str().ok()).expect("location");
    assert_eq!(location, format!("/api/v1/workflows/{}", created["id"].as_str().expect("id")));

    let list = event(
        "GET",
        "/api/v1/workflows",
        "/api/v1/workflows",
        "status=published&page_size=5",
        &tenant.key,
        &Value::Null,
    );
    let (status, _, page) = call(&app, list).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["total"], 1);
    assert_eq!(page["page_size"], 5);
    let mut summary = created.clone();
    summary.as_object_mut().expect("object").remove("definition");
    assert_eq!(page["items"][0], summary, "a list item is the workflow without its definition");

    let other = env.tenant().await;
    let id = created["id"].as_str().expect("id");
    let path = format!("/api/v1/workflows/{id}");
    let foreign = event("GET", "/api/v1/workflows/{workflow_id}", &path, "", &other.key, &Value::Null);
    let (status, headers, problem) = call(&app, foreign).await;
    assert_eq!(status, 404);
    assert_eq!(problem["code"], "not_found");
    assert_eq!(headers.get("content-type").and_then(|v| v.to_str().ok()), Some("application/problem+json"));
}

#[tokio::test]
async fn the_lambda_request_id_becomes_x_request_id() {
    let env = api_tests::env().await;
    let tenant = env.tenant().await;
    let app = workflows::app(env.client.clone(), env.tables.clone(), Arc::new(SystemClock));
    let mut request = event("GET", "/api/v1/workflows", "/api/v1/workflows", "", &tenant.key, &Value::Null);
    let mut context = lambda_http::Context::default();
    context.request_id = "8476a536-e9f4-11e8-9739-2dfe598c3fcd".to_owned();
    request.extensions_mut().insert(context);
    let (status, headers, _) = call(&app, request).await;
    assert_eq!(status, 200);
    assert_eq!(headers.get("x-request-id").and_then(|v| v.to_str().ok()), Some("8476a536-e9f4-11e8-9739-2dfe598c3fcd"));
}
