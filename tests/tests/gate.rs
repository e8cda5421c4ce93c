//! The write gate of the shared edge ([`shared::gate`]), against DynamoDB Local: a warm
//! instance starts a request's work before its key is read again, so what must never go
//! wrong is tested at the exact moment it could: a key revoked after the instance
//! remembered it, while the request is already running, before its transaction; and a
//! tenant over its rate limit, whose write must not happen.

use std::sync::Arc;

use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use axum::Router;
use axum::extract::State;
use axum::routing::post;
use http::{Method, Request, StatusCode};
use shared::auth::AuthState;
use shared::dynamo::{Table, s};
use shared::http::api;
use tower::ServiceExt;

/// What the test route does: optionally revoke the caller's key first (as if another
/// request revoked it at that moment), then commit `operations` puts in one transaction.
#[derive(Clone)]
struct Route {
    env: api_tests::Env,
    revoke_first: Option<String>,
    operations: usize,
    marker: String,
}

fn marker_put(env: &api_tests::Env, tenant: &str, marker: &str, index: usize) -> TransactWriteItem {
    let put = Put::builder()
        .table_name(env.tables.name(Table::Idempotency))
        .item("tenant_id", s(tenant))
        .item("idempotency_key", s(format!("{marker}-{index}")))
        .build()
        .expect("put");
    TransactWriteItem::builder().put(put).build()
}

async fn write(State(route): State<Arc<Route>>, tenant: shared::TenantId) -> Result<StatusCode, shared::ApiError> {
    if let Some(key_id) = route.revoke_first.clone() {
        // Another request's doing: on a task of its own, outside this request's gate.
        let env = route.env.clone();
        let revoke = async move {
            let now = shared::time::format(chrono::Utc::now());
            infra::admin::revoke_key(&env.client, &env.tables, &key_id, &now).await.expect("revoked");
        };
        tokio::spawn(revoke).await.expect("revoked");
    }
    let items = (0..route.operations).map(|i| marker_put(&route.env, tenant.as_str(), &route.marker, i)).collect();
    shared::dynamo::transact(&route.env.client, items).await?;
    Ok(StatusCode::CREATED)
}

fn app(env: &api_tests::Env, auth: &AuthState, route: Route) -> Router {
    let routes =
        Router::new().route("/api/v1/write", post(write)).with_state(Arc::new(Route { env: env.clone(), ..route }));
    api(routes, auth.clone())
}

async fn call(app: &Router, key: &str) -> http::Response<axum::body::Body> {
    call_with(app, key, None).await
}

async fn call_with(app: &Router, key: &str, idempotency_key: Option<&str>) -> http::Response<axum::body::Body> {
    let mut request = Request::builder().method(Method::POST).uri("/api/v1/write").header("x-api-key", key);
    if let Some(idempotency_key) = idempotency_key {
        request = request.header("idempotency-key", idempotency_key);
    }
    let response =
        app.clone().oneshot(request.body(axum::body::Body::empty()).expect("request")).await.expect("infallible");
    api_tests::finished(response).await
}

async fn written(env: &api_tests::Env, tenant: &str, marker: &str) -> usize {
    let out = env
        .client
        .query()
        .table_name(env.tables.name(Table::Idempotency))
        .key_condition_expression("tenant_id = :t AND begins_with(idempotency_key, :m)")
        .expression_attribute_values(":t", s(tenant))
        .expression_attribute_values(":m", s(marker))
        .consistent_read(true)
        .send()
        .await
        .expect("query");
    out.items().len()
}

fn auth(env: &api_tests::Env, rate_limit: u32) -> AuthState {
    AuthState {
        client: env.client.clone(),
        tables: env.tables.clone(),
        rate_limit,
        origin_secret: None,
        known: shared::auth::KnownKeys::default(),
    }
}

/// A new key of tenant `t` (its id and secret), written with four times, so that the
/// instance of `auth` has proven it live at the tenant's keys epoch.
async fn warm_key(env: &api_tests::Env, auth: &AuthState, t: &api_tests::Tenant) -> (String, String) {
    let now = shared::time::format(chrono::Utc::now());
    let (key_id, key) = infra::admin::create_key(&env.client, &env.tables, &t.id, &now).await.expect("key");
    let route = |marker: &str| Route { env: env.clone(), revoke_first: None, operations: 3, marker: marker.to_owned() };
    for i in 0..4 {
        let warm = format!("gate-warm-{i}-{}", uuid::Uuid::now_v7());
        assert_eq!(call(&app(env, auth, route(&warm)), &key).await.status(), 201);
    }
    (key_id.as_str().to_owned(), key)
}

/// A key revoked while a request runs, after the request's look at the tenant's
/// standing found the keys epoch at which the instance proved the key live: the request
/// was authenticated before the revocation, and its write commits as it is (its
/// transaction carries nothing of the key's). Every request after it is refused: 401,
/// nothing written; the tenant's other key goes on.
#[tokio::test]
async fn a_key_revoked_after_the_look_lets_that_request_write_and_refuses_every_next_one() {
    let env = api_tests::env().await;
    let auth = auth(&env, 1_000_000);
    let t = env.tenant().await;
    let (key_id, key) = warm_key(&env, &auth, &t).await;
    let route = |marker: &str| Route { env: env.clone(), revoke_first: None, operations: 3, marker: marker.to_owned() };
    let hash = shared::auth::hash_key(&key);
    let proven = auth.known.live_at(&hash).expect("proven live at the epoch");

    // The request's look, then the revocation, then its transaction.
    let tenant = shared::auth::trusted::tenant(&shared::ids::TenantKey::parse(&t.id).expect("id"));
    let gate = shared::gate::Gate::new(auth.clone(), tenant, (hash.clone(), None), false);
    let looked = gate.standing().await.expect("looked");
    assert_eq!(looked.keys_epoch, Some(proven), "the look found the key's epoch");
    let now = shared::time::format(chrono::Utc::now());
    infra::admin::revoke_key(&env.client, &env.tables, &key_id, &now).await.expect("revoked");
    let during = format!("gate-during-{}", uuid::Uuid::now_v7());
    let items = (0..3).map(|i| marker_put(&env, &t.id, &during, i)).collect();
    shared::gate::scope(gate.clone(), shared::dynamo::transact(&env.client, items)).await.expect("committed");
    assert_eq!(gate.outcome(), shared::gate::Outcome::Written);
    assert_eq!(written(&env, &t.id, &during).await, 3, "the request authenticated before the revocation wrote");

    for attempt in 0..2 {
        let after = format!("gate-after-{attempt}-{}", uuid::Uuid::now_v7());
        assert_eq!(call(&app(&env, &auth, route(&after)), &key).await.status(), 401);
        assert_eq!(written(&env, &t.id, &after).await, 0);
    }
    assert!(auth.known.get(&hash).is_none(), "the instance forgot the key");
    let other = format!("gate-other-{}", uuid::Uuid::now_v7());
    assert_eq!(call(&app(&env, &auth, route(&other)), &t.key).await.status(), 201);
    assert_eq!(written(&env, &t.id, &other).await, 3);
}

/// With no look to prove the key by (the rate limit off), a warm instance reads the key
/// before a write: a key revoked while the request runs, before its transaction, writes
/// nothing and gets 401. With room in the transaction and at 100 operations alike, and
/// with an `Idempotency-Key`, whose record would join the transaction.
#[tokio::test]
async fn without_a_look_a_key_revoked_before_the_transaction_writes_nothing() {
    let env = api_tests::env().await;
    let auth = auth(&env, 0);
    for operations in [3, shared::dynamo::MAX_TRANSACTION_ITEMS] {
        let t = env.tenant().await;
        let now = shared::time::format(chrono::Utc::now());
        let (key_id, key) = infra::admin::create_key(&env.client, &env.tables, &t.id, &now).await.expect("key");
        let marker = |name: &str| format!("gate-{name}-{}", uuid::Uuid::now_v7());
        let warm = marker("warm");
        let route = |revoke_first, marker: &str| Route {
            env: env.clone(),
            revoke_first,
            operations,
            marker: marker.to_owned(),
        };

        // The first request fills the instance's memory of the key and writes.
        assert_eq!(call(&app(&env, &auth, route(None, &warm)), &key).await.status(), 201);
        assert_eq!(written(&env, &t.id, &warm).await, operations, "a live key writes");
        assert!(auth.known.get(&shared::auth::hash_key(&key)).is_some(), "the instance remembers the key");

        let raced = marker("raced");
        let raced_app = app(&env, &auth, route(Some(key_id.as_str().to_owned()), &raced));
        let response = call_with(&raced_app, &key, Some(&raced)).await;
        assert_eq!(response.status(), 401, "{operations} operations");
        assert_eq!(written(&env, &t.id, &raced).await, 0, "{operations} operations: nothing written, no key record");
        assert!(auth.known.get(&shared::auth::hash_key(&key)).is_none(), "the instance forgot the key");

        // The tenant's other key goes on writing.
        let other = marker("other");
        assert_eq!(call(&app(&env, &auth, route(None, &other)), &t.key).await.status(), 201);
        assert_eq!(written(&env, &t.id, &other).await, operations);
    }
}

/// Beyond its limit a tenant's write is refused with 429 and `Retry-After`, and does
/// not happen, although the look at the rate-limit standing ran beside the request's
/// work.
#[tokio::test]
async fn a_write_over_the_rate_limit_gets_429_and_writes_nothing() {
    let env = api_tests::env().await;
    let auth = auth(&env, 2);
    let t = env.tenant().await;
    api_tests::one_rate_limit_window().await;
    let mut statuses = Vec::new();
    let mut markers = Vec::new();
    for index in 0..3 {
        let marker = format!("gate-limit-{index}-{}", uuid::Uuid::now_v7());
        let route = Route { env: env.clone(), revoke_first: None, operations: 1, marker: marker.clone() };
        let response = call(&app(&env, &auth, route), &t.key).await;
        let retry_after = response.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let remaining =
            response.headers().get("x-ratelimit-remaining").and_then(|v| v.to_str().ok()).map(str::to_owned);
        statuses.push((response.status().as_u16(), retry_after, remaining));
        markers.push((marker, response.status()));
    }
    assert_eq!(statuses[0].0, 201, "{statuses:?}");
    assert_eq!(statuses[1].0, 201, "{statuses:?}");
    let (status, retry_after, remaining) = &statuses[2];
    assert_eq!(*status, 429, "{statuses:?}");
    assert!(retry_after.as_deref().and_then(|r| r.parse::<u64>().ok()).is_some_and(|r| (1..=60).contains(&r)));
    assert_eq!(remaining.as_deref(), Some("0"));
    for (marker, status) in markers {
        let expected = usize::from(status == StatusCode::CREATED);
        assert_eq!(written(&env, &t.id, &marker).await, expected, "{marker}: {status}");
    }
}

/// A revoked key is told it is refused (401) before it is told the limit is used up
/// (429), although the instance knows the window is full before it knows the key's fate.
#[tokio::test]
async fn a_revoked_key_over_the_limit_gets_401_not_429() {
    let env = api_tests::env().await;
    let auth = auth(&env, 1);
    let t = env.tenant().await;
    let now = shared::time::format(chrono::Utc::now());
    let (key_id, key) = infra::admin::create_key(&env.client, &env.tables, &t.id, &now).await.expect("key");
    let route = |marker: &str| Route { env: env.clone(), revoke_first: None, operations: 1, marker: marker.to_owned() };
    api_tests::one_rate_limit_window().await;
    let first = format!("gate-full-{}", uuid::Uuid::now_v7());
    assert_eq!(call(&app(&env, &auth, route(&first)), &key).await.status(), 201, "the window's one request");
    infra::admin::revoke_key(&env.client, &env.tables, key_id.as_str(), &now).await.expect("revoked");
    let second = format!("gate-full-{}", uuid::Uuid::now_v7());
    let response = call(&app(&env, &auth, route(&second)), &key).await;
    assert_eq!(response.status(), 401);
    assert_eq!(written(&env, &t.id, &second).await, 0);
}

/// An effect outside DynamoDB (a Stripe call) is made only with the key read live: the
/// gate reads the key before it. A key revoked while the request runs causes no effect.
#[tokio::test]
async fn a_key_revoked_before_an_outside_effect_causes_none() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let env = api_tests::env().await;
    let auth = auth(&env, 0);
    let t = env.tenant().await;
    let now = shared::time::format(chrono::Utc::now());
    let (key_id, key) = infra::admin::create_key(&env.client, &env.tables, &t.id, &now).await.expect("key");
    let effects = Arc::new(AtomicBool::new(false));
    let app = |revoke: Option<String>| {
        let (env, effects) = (env.clone(), effects.clone());
        let effect = move || {
            let (env, effects, revoke) = (env.clone(), effects.clone(), revoke.clone());
            async move {
                if let Some(key_id) = revoke {
                    let revoked = async move {
                        let now = shared::time::format(chrono::Utc::now());
                        infra::admin::revoke_key(&env.client, &env.tables, &key_id, &now).await.expect("revoked");
                    };
                    tokio::spawn(revoked).await.expect("revoked");
                }
                shared::dynamo::before_effect().await.map_err(shared::ApiError::from)?;
                effects.store(true, Ordering::SeqCst);
                Ok::<_, shared::ApiError>(StatusCode::CREATED)
            }
        };
        api(Router::new().route("/api/v1/write", post(effect)), auth.clone())
    };
    assert_eq!(call(&app(None), &key).await.status(), 201, "a live key's effect happens");
    assert!(effects.swap(false, Ordering::SeqCst));
    assert_eq!(call(&app(Some(key_id.as_str().to_owned())), &key).await.status(), 401);
    assert!(!effects.load(Ordering::SeqCst), "no effect for a revoked key");
}

/// A key revoked outside the API (its item marked revoked and the tenant's keys epoch
/// moved, nothing else, as an operator's transaction of any version does) writes nothing
/// more on an instance that had proven it live: the look finds the epoch moved, and the
/// key is read before the write. 401, nothing written.
#[tokio::test]
async fn a_key_revoked_behind_the_api_writes_nothing_on_a_warm_instance() {
    let env = api_tests::env().await;
    let auth = auth(&env, 1_000_000);
    let t = env.tenant().await;
    let (_, key) = warm_key(&env, &auth, &t).await;
    let route = |marker: &str| Route { env: env.clone(), revoke_first: None, operations: 3, marker: marker.to_owned() };
    assert!(auth.known.live_at(&shared::auth::hash_key(&key)).is_some(), "proven live at the epoch");
    let now = shared::time::format(chrono::Utc::now());
    let revoke = aws_sdk_dynamodb::types::Update::builder()
        .table_name(env.tables.name(shared::dynamo::Table::ApiKeys))
        .key("key_hash", shared::dynamo::s(shared::auth::hash_key(&key)))
        .update_expression("SET revoked_at = :now")
        .expression_attribute_values(":now", shared::dynamo::s(&now))
        .build()
        .expect("update");
    let behind_the_api = vec![
        aws_sdk_dynamodb::types::TransactWriteItem::builder().update(revoke).build(),
        shared::rate_limit::keys_changed(&env.tables, &t.id).expect("epoch"),
    ];
    env.client.transact_write_items().set_transact_items(Some(behind_the_api)).send().await.expect("revoked");
    let after = format!("gate-after-{}", uuid::Uuid::now_v7());
    assert_eq!(call(&app(&env, &auth, route(&after)), &key).await.status(), 401);
    assert_eq!(written(&env, &t.id, &after).await, 0);
}
