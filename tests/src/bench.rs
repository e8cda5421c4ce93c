//! What the benchmarks (`tests/benches`, `make bench`) share: a tenant with a key and
//! credits in the run's tables, and calls through a function's router in process.

use aws_sdk_dynamodb::Client;
use http::{Method, Request};
use serde_json::Value;
use shared::dynamo::Tables;
use shared::ids::TenantKey;
use tower::ServiceExt;

/// The run's tables and a tenant of the benchmark's own.
#[derive(Debug)]
pub struct Bench {
    /// DynamoDB Local (every call metered by `shared::metering`).
    pub client: Client,
    /// The run's tables (`TABLE_PREFIX`).
    pub tables: Tables,
    /// The tenant.
    pub tenant: TenantKey,
    /// Its API key.
    pub key: String,
}

/// A tenant named `name` with a live key and `credits`, in the tables of `make bench`.
pub async fn setup(name: &str, credits: i64) -> Bench {
    let prefix = std::env::var("TABLE_PREFIX").expect("TABLE_PREFIX: run with `make bench`");
    let tables = Tables::new(&prefix);
    let client = shared::dynamo::client().await;
    let now = shared::time::format(chrono::Utc::now());
    let tenant = infra::admin::create_tenant(&client, &tables, name, &now).await.expect("tenant");
    let (_, key) = infra::admin::create_key(&client, &tables, tenant.as_str(), &now).await.expect("key");
    infra::admin::grant_credits(&client, &tables, tenant.as_str(), credits).await.expect("credits");
    Bench { client, tables, tenant, key }
}

/// Fills each of the tenant's credit allowances once, as its first charges would: a busy
/// tenant's allowances each hold a share of its balance, refilled once per that many
/// charges (what a refill costs is in docs/benchmarks.md), so its starts are measured
/// as they run, not as its first 16.
pub async fn fill_allowances(bench: &Bench) {
    let ledger = domain::credits::Ledger::new(bench.client.clone(), bench.tables.clone());
    let tenant_id = shared::auth::trusted::tenant(&bench.tenant);
    for allowance in 0..domain::credits::ALLOWANCES {
        let charge = domain::credits::Charge { allowance, credits: 1 };
        ledger.refill(&tenant_id, charge, chrono::Utc::now()).await.expect("refill");
    }
}

/// Calls `app` with the key and an optional JSON body; the answer must be a success.
/// Returns its JSON (`Null` when empty).
pub async fn call(app: &axum::Router, key: &str, method: Method, uri: &str, body: Option<&Value>) -> Value {
    call_with(app, key, (method, uri), body, &[]).await
}

/// [`call`] with extra request headers; returns once the work the request left for
/// after its answer (its rate-limit count) is done too, as a Lambda instance finishes it
/// before its next request.
///
/// # Panics
/// Like [`call`].
pub async fn call_with(
    app: &axum::Router,
    key: &str,
    request: (Method, &str),
    body: Option<&Value>,
    headers: &[(&str, &str)],
) -> Value {
    let (answer, after) = answer(app, key, request, body, headers).await;
    after_answer(after).await;
    answer
}

/// [`call_with`] up to its answer: the answer's JSON, and the work its request left for
/// after it, not yet run (time or trace the answer alone, then run it with
/// [`after_answer`]).
///
/// # Panics
/// Like [`call`].
pub async fn answer(
    app: &axum::Router,
    key: &str,
    (method, uri): (Method, &str),
    body: Option<&Value>,
    headers: &[(&str, &str)],
) -> (Value, Option<shared::lambda::AfterAnswer>) {
    let mut request = Request::builder().method(method).uri(uri).header("x-api-key", key);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let bytes = body.map(|b| serde_json::to_vec(b).expect("json")).unwrap_or_default();
    if body.is_some() {
        request = request.header("content-type", "application/json");
    }
    let response =
        app.clone().oneshot(request.body(axum::body::Body::from(bytes)).expect("request")).await.expect("call");
    let (mut parts, body) = response.into_parts();
    let after = parts.extensions.remove::<shared::lambda::AfterAnswer>();
    let bytes = axum::body::to_bytes(body, usize::MAX).await.expect("body");
    let status = parts.status;
    assert!(status.is_success(), "{status}: {}", String::from_utf8_lossy(&bytes[..bytes.len().min(500)]));
    (serde_json::from_slice(&bytes).unwrap_or(Value::Null), after)
}

/// Runs the work a request left for after its answer ([`answer`]).
pub async fn after_answer(after: Option<shared::lambda::AfterAnswer>) {
    if let Some(after) = after {
        after.run().await;
    }
}
