//! The workflows function fed real API Gateway HTTP API (payload 2.0) events, as Lambda
//! delivers them in production, parsed by `lambda_http` itself.

use std::sync::Arc;

use serde_json::{Value, json};
use shared::time::SystemClock;
use tower::ServiceExt;

const EVENT: &str = include_str!("../data/apigw-v2-request.json");

fn event(method: &str, route: &str, path: &str, query: &str, key: &str, body: &Value) -> lambda_http::Request {
    let text = event_text(method, route, path, query, key, body);
    lambda_http::request::from_str(&text).expect("a valid API Gateway v2 event")
}

/// The API Gateway v2 event's JSON, as Lambda's Runtime API hands it to a function.
fn event_text(method: &str, route: &str, path: &str, query: &str, key: &str, body: &Value) -> String {
    let body = if body.is_null() { String::new() } else { body.to_string() };
    let escaped = serde_json::to_string(&body).expect("json string");
    EVENT
        .replace("{{METHOD}}", method)
        .replace("{{ROUTE}}", route)
        .replace("{{PATH}}", path)
        .replace("{{QUERY}}", query)
        .replace("{{API_KEY}}", key)
        .replace("\"{{BODY}}\"", &escaped)
}

async fn call(app: &axum::Router, request: lambda_http::Request) -> (u16, http::HeaderMap, Value) {
    let response = app.clone().oneshot(request).await.expect("infallible");
    let response = api_tests::finished(response).await;
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

/// The next call the function makes to the Runtime API stub.
async fn next(
    calls: &mut tokio::sync::mpsc::UnboundedReceiver<api_tests::runtime_api::Call>,
) -> api_tests::runtime_api::Call {
    let call = tokio::time::timeout(std::time::Duration::from_secs(60), calls.recv()).await;
    call.expect("the function calls the Runtime API within 60 s").expect("the stub runs")
}

/// The variable that tells [`serve_as_a_lambda_function`] it runs for the test below.
const SERVE_FOR: &str = "CAIRN_SERVE_AS_LAMBDA";

/// Sends every `UpdateItem` (the rate-limit count) 300 ms late, so that a count not
/// awaited before the function asks for its next event would still be unwritten then.
const LATE_UPDATES: api_tests::BeforeSending = api_tests::BeforeSending {
    operation: "UpdateItem",
    act: |_| {
        // Blocks one of the runtime's two workers; the other goes on.
        std::thread::sleep(std::time::Duration::from_millis(300));
        Ok(())
    },
};

/// Serves a router with the shared edge (rate limit on) through `shared::lambda::run`,
/// as a function's `main` does, its counts sent late ([`LATE_UPDATES`]). Run by the test
/// below in a process of its own, because the runtime reads its configuration from the
/// environment; by itself it does nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "run in a process of its own by the test below"]
async fn serve_as_a_lambda_function() {
    if std::env::var(SERVE_FOR).is_err() {
        return;
    }
    let env = api_tests::env().await;
    let auth = shared::auth::AuthState {
        client: aws_sdk_dynamodb::Client::from_conf(env.client.config().to_builder().interceptor(LATE_UPDATES).build()),
        tables: env.tables.clone(),
        rate_limit: 1000,
        origin_secret: None,
        known: shared::auth::KnownKeys::default(),
    };
    let routes = axum::Router::new().route("/api/v1/ping", axum::routing::get(|| async { "pong" }));
    shared::lambda::run(shared::http::api(routes, auth)).await.expect("served");
}

/// Through Lambda's Runtime API (our stub), a function posts its answer before it counts
/// the request (the client does not wait for the count), and has counted it before it
/// asks for its next event (Lambda may freeze it from then on, so a count still in
/// flight would land late or never): the count, sent 300 ms late, is written when the
/// function asks.
#[tokio::test]
async fn a_function_answers_then_counts_the_request_before_it_asks_for_the_next() {
    use api_tests::runtime_api::{Call, Seen};
    let env = api_tests::env().await;
    let t = env.tenant().await;
    let tenant = shared::auth::trusted::tenant(&shared::ids::TenantKey::parse(&t.id).expect("tenant id"));
    let used = || async {
        let now = chrono::Utc::now().timestamp();
        let standing =
            shared::rate_limit::look(&env.client, &env.tables, &tenant, 1000, now, &[shared::rate_limit::Slot::FIRST])
                .await
                .expect("standing");
        999 - standing.remaining
    };
    api_tests::one_rate_limit_window().await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let address = listener.local_addr().expect("address");
    let (calls_tx, mut calls) = tokio::sync::mpsc::unbounded_channel();
    let event = event_text("GET", "/api/v1/ping", "/api/v1/ping", "", &t.key, &Value::Null);
    let server = tokio::spawn(api_tests::runtime_api::serve(listener, event, calls_tx));
    let mut child = tokio::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--ignored", "--exact", "serve_as_a_lambda_function"])
        .env(SERVE_FOR, "1")
        .env("AWS_LAMBDA_RUNTIME_API", address.to_string())
        .env("AWS_LAMBDA_FUNCTION_NAME", "lifecycle")
        .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
        .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        .kill_on_drop(true)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("the function starts");
    let first = next(&mut calls).await;
    assert!(matches!(first.seen, Seen::Next { first: true, .. }), "{first:?}");
    first.go();
    let answered = next(&mut calls).await;
    let Call { seen: Seen::Response { ref body, .. }, .. } = answered else { panic!("{answered:?}") };
    assert_eq!(body["statusCode"], 200, "{body}");
    assert_eq!(body["headers"]["x-ratelimit-remaining"], "999", "{body}");
    assert_eq!(used().await, 0, "not counted while its answer is being posted");
    answered.go();
    let asked = next(&mut calls).await;
    assert!(matches!(asked.seen, Seen::Next { first: false, .. }), "{asked:?}");
    assert_eq!(used().await, 1, "counted before it asks for its next event");
    child.kill().await.expect("stopped");
    server.abort();
}
