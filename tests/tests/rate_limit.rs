//! The per-tenant rate limit of the shared edge, against DynamoDB Local: a router with
//! the edge and a limit of 3 requests a minute (the functions use
//! `RATE_LIMIT_PER_MINUTE`, 1200 by default).

use api_tests::{Api, Env, both_paths};
use axum::Router;
use axum::routing::get;
use http::{Method, Request};
use shared::auth::AuthState;
use shared::http::api;
use shared::rate_limit::Slot;
use tower::ServiceExt;

async fn call(app: &Router, key: Option<&str>) -> http::Response<axum::body::Body> {
    let mut request = Request::builder().method(Method::GET).uri("/api/v1/ping");
    if let Some(key) = key {
        request = request.header("x-api-key", key);
    }
    let response =
        app.clone().oneshot(request.body(axum::body::Body::empty()).expect("request")).await.expect("infallible");
    api_tests::finished(response).await
}

/// The edge's state at a limit of `per_minute` requests a minute.
fn limited(env: &Env, per_minute: u32) -> AuthState {
    AuthState {
        client: env.client.clone(),
        tables: env.tables.clone(),
        rate_limit: per_minute,
        origin_secret: None,
        known: shared::auth::KnownKeys::default(),
    }
}

fn header(response: &http::Response<axum::body::Body>, name: &str) -> Option<u64> {
    response.headers().get(name).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok())
}

#[tokio::test]
async fn a_tenant_over_its_limit_gets_429_with_retry_after_and_others_do_not() {
    let env = api_tests::env().await;
    let auth = limited(&env, 3);
    // A route that does work of its own: a read of the tenants table.
    let (client, tenants) = (env.client.clone(), env.tables.name(shared::dynamo::Table::Tenants).to_owned());
    let work = move || {
        let (client, tenants) = (client.clone(), tenants.clone());
        async move {
            let read =
                shared::dynamo::get_item(&client, &tenants, &[("tenant_id", "ten_0193a6f21c2b7d3e8f000123456789ab")]);
            read.await.map(|_| "worked").map_err(shared::ApiError::from)
        }
    };
    let app = api(Router::new().route("/api/v1/ping", get(|| async { "pong" })).route("/api/v1/work", get(work)), auth);
    let (a, b) = (env.tenant().await, env.tenant().await);
    for _ in 0..3 {
        assert_eq!(call(&app, None).await.status(), 401, "refused requests are not counted");
    }
    api_tests::one_rate_limit_window().await;
    let mut remaining = Vec::new();
    for _ in 0..3 {
        let response = call(&app, Some(&a.key)).await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "x-ratelimit-limit"), Some(3));
        assert!(header(&response, "x-ratelimit-reset").is_some_and(|r| (1..=60).contains(&r)));
        remaining.push(header(&response, "x-ratelimit-remaining").expect("remaining"));
    }
    assert_eq!(remaining, [2, 1, 0]);
    let (limited, accesses) = shared::metering::recorded(call(&app, Some(&a.key))).await;
    assert_eq!(limited.status(), 429);
    let rate_limits = env.tables.name(shared::dynamo::Table::RateLimits);
    assert!(
        !accesses.iter().any(|access| access.table == rate_limits),
        "a request beyond a used-up window is not counted in DynamoDB: {accesses:?}"
    );
    // Nor does it do its work: refused before the route's own reads.
    let mut working = Request::builder().method(Method::GET).uri("/api/v1/work").header("x-api-key", &a.key);
    working = working.header("accept", "application/json");
    let refused = app.clone().oneshot(working.body(axum::body::Body::empty()).expect("request"));
    let (refused, accesses) = shared::metering::recorded(async { refused.await.expect("infallible") }).await;
    assert_eq!(refused.status(), 429);
    let tenants = env.tables.name(shared::dynamo::Table::Tenants);
    assert!(!accesses.iter().any(|access| access.table == tenants), "the route's read ran: {accesses:?}");
    let retry_after =
        limited.headers().get("retry-after").and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    assert!(retry_after.is_some_and(|r| (1..=60).contains(&r)), "{retry_after:?}");
    assert_eq!(header(&limited, "x-ratelimit-remaining"), Some(0));
    let body = axum::body::to_bytes(limited.into_body(), usize::MAX).await.expect("body");
    let problem: serde_json::Value = serde_json::from_slice(&body).expect("json");
    assert_eq!(problem["code"], "rate_limited");
    let other = call(&app, Some(&b.key)).await;
    assert_eq!(other.status(), 200, "another tenant has its own window");
    assert_eq!(header(&other, "x-ratelimit-remaining"), Some(2));
}

/// A window filled by other instances: an instance that finds it full when it looks
/// answers 429, counts nothing, and answers the tenant's further requests in that window
/// 429 without reading the standing again.
/// A plan's limit on the standing (what a live subscription writes) is the tenant's
/// limit, read with the look it makes anyway; other tenants keep the default.
#[tokio::test]
async fn a_plans_limit_on_the_standing_is_the_tenants_limit() {
    let env = api_tests::env().await;
    let auth = limited(&env, 3);
    let app = api(Router::new().route("/api/v1/ping", get(|| async { "pong" })), auth);
    let (a, b) = (env.tenant().await, env.tenant().await);
    let mut tx = shared::dynamo::Transaction::new();
    let limit = shared::rate_limit::plan_limit(&env.tables, &a.id, Some(3_000)).expect("update");
    tx.push(shared::dynamo::Part::Standing, limit);
    tx.commit(&env.client).await.expect("plan limit");
    api_tests::one_rate_limit_window().await;
    for _ in 0..5 {
        let response = call(&app, Some(&a.key)).await;
        assert_eq!(response.status(), 200);
        assert_eq!(header(&response, "x-ratelimit-limit"), Some(3_000));
    }
    let statuses: Vec<u16> = futures_statuses(&app, &b.key, 4).await;
    assert_eq!(statuses, [200, 200, 200, 429], "the default for a tenant without a plan");
}

async fn futures_statuses(app: &Router, key: &str, n: usize) -> Vec<u16> {
    let mut statuses = Vec::with_capacity(n);
    for _ in 0..n {
        statuses.push(call(app, Some(key)).await.status().as_u16());
    }
    statuses
}

/// Sets `tenant`'s plan limit on its standing, as its subscription does.
async fn plan(env: &Env, tenant: &str, per_minute: u32) {
    let mut tx = shared::dynamo::Transaction::new();
    let limit = shared::rate_limit::plan_limit(&env.tables, tenant, Some(per_minute)).expect("update");
    tx.push(shared::dynamo::Part::Standing, limit);
    tx.commit(&env.client).await.expect("plan limit");
}

/// `tenant`'s requests counted in `window`, summed over its shards, and how many shards
/// count that window.
async fn counted_in(env: &Env, tenant: &shared::TenantId, window: i64) -> (i64, usize) {
    let (mut counted, mut shards) = (0, 0);
    for shard in 0..shared::rate_limit::SHARDS {
        let read = env
            .client
            .get_item()
            .table_name(env.tables.name(shared::dynamo::Table::RateLimits))
            .set_key(Some(shared::rate_limit::standing_key(tenant, shard)))
            .consistent_read(true)
            .send()
            .await
            .expect("read");
        let item = read.item.unwrap_or_default();
        let number = |name: &str| item.get(name).and_then(|v| v.as_n().ok()).and_then(|v| v.parse::<i64>().ok());
        if number("counted_window") == Some(window) {
            counted += number("requests").unwrap_or(0);
            shards += 1;
        }
    }
    (counted, shards)
}

/// A new tenant on a plan of `per_minute` requests a minute, its tenant id, and the
/// minute its test counts in ([`api_tests::one_rate_limit_window`]).
async fn planned(env: &Env, per_minute: u32) -> (api_tests::Tenant, shared::TenantId, i64) {
    let t = env.tenant().await;
    let tenant = shared::auth::trusted::tenant(&shared::ids::TenantKey::parse(&t.id).expect("tenant id"));
    plan(env, &t.id, per_minute).await;
    api_tests::one_rate_limit_window().await;
    (t, tenant, chrono::Utc::now().timestamp().div_euclid(60))
}

/// Sets shard `shard` of `tenant`'s standing to `requests` counted in `window`, as other
/// instances' counts would.
async fn set_standing(env: &Env, tenant: &shared::TenantId, shard: u8, (window, requests): (i64, u32)) {
    let update = env
        .client
        .update_item()
        .table_name(env.tables.name(shared::dynamo::Table::RateLimits))
        .set_key(Some(shared::rate_limit::standing_key(tenant, shard)))
        .update_expression("SET counted_window = :w, requests = :r")
        .expression_attribute_values(":w", aws_sdk_dynamodb::types::AttributeValue::N(window.to_string()))
        .expression_attribute_values(":r", aws_sdk_dynamodb::types::AttributeValue::N(requests.to_string()));
    update.send().await.expect("the standing");
}

/// A plan's limit above 3,750 a minute is counted in shards and in leases: a tenant on
/// 60,000 (set on its standing as its subscription does) served by two instances, 40
/// requests each. An instance's first request is counted alone (its look tells it the
/// plan's limit), its second takes a lease of 58 requests (3,750 / 64), whose tokens
/// serve its next 38 with no write to the standing at all; every answer says the plan's
/// limit.
#[tokio::test]
async fn a_large_limit_is_counted_in_leases_one_write_for_many_requests() {
    let env = api_tests::env().await;
    let instance = || api(Router::new().route("/api/v1/ping", get(|| async { "pong" })), limited(&env, 3));
    let (a, b) = (instance(), instance());
    let (t, tenant, window) = planned(&env, 60_000).await;
    let rate_limits = env.tables.name(shared::dynamo::Table::RateLimits);
    for app in [&a, &b] {
        for request in 0..40 {
            let (response, accesses) = shared::metering::recorded(call(app, Some(&t.key))).await;
            assert_eq!(response.status(), 200);
            assert_eq!(response.headers()["x-ratelimit-limit"], "60000");
            let writes: Vec<_> = accesses
                .iter()
                .filter(|access| access.table == rate_limits && access.action != "dynamodb:GetItem")
                .filter(|access| access.action != "dynamodb:BatchGetItem")
                .collect();
            assert_eq!(writes.is_empty(), request >= 2, "request {request}: {writes:?}");
        }
    }
    let (counted, shards) = counted_in(&env, &tenant, window).await;
    assert_eq!(counted, 2 * (1 + 58), "each instance's first request, then a lease of 58");
    assert!((2..=3).contains(&shards), "shard 0, and one or two shards for the leases: {shards}");
}

/// Tokens are of one minute: when an instance's look finds the next minute started by a
/// clock ahead of its own, the request it took a token for is counted after all (in that
/// minute, with a lease of it), and the tokens of the ended minute go.
#[tokio::test]
async fn tokens_of_a_minute_a_clock_ahead_ended_are_dropped_and_the_request_counted() {
    let env = api_tests::env().await;
    let app = api(Router::new().route("/api/v1/ping", get(|| async { "pong" })), limited(&env, 3));
    let (t, tenant, window) = planned(&env, 60_000).await;
    for _ in 0..2 {
        assert_eq!(call(&app, Some(&t.key)).await.status(), 200, "the first, then the one that takes a lease");
    }
    // Another instance, its clock a minute ahead, starts the next minute in every shard.
    for shard in 0..shared::rate_limit::SHARDS {
        set_standing(&env, &tenant, shard, (window + 1, 1)).await;
    }
    let rate_limits = env.tables.name(shared::dynamo::Table::RateLimits);
    let counts = |accesses: &[shared::metering::Access]| {
        accesses.iter().filter(|a| a.table == rate_limits && a.action == "dynamodb:UpdateItem").count()
    };
    let (response, accesses) = shared::metering::recorded(call(&app, Some(&t.key))).await;
    assert_eq!(response.status(), 200);
    assert!(counts(&accesses) > 0, "counted in the next minute: {accesses:?}");
    let (response, accesses) = shared::metering::recorded(call(&app, Some(&t.key))).await;
    assert_eq!(response.status(), 200);
    assert_eq!(counts(&accesses), 0, "served from the next minute's lease: {accesses:?}");
    let (counted, _) = counted_in(&env, &tenant, window + 1).await;
    assert!(counted > 16, "a lease in the next minute: {counted}");
}

/// Leases let a tenant neither past its limit nor short of it while its instances go on
/// serving it: a tenant on 7,500 a minute (two shards of 3,750) whose shards are 200
/// short of full is served by three instances in turn, each until it is refused; the
/// leases shrink as the shards fill (a sixteenth of what is left), every token is spent,
/// and the tenant gets exactly the 400 left. (What an instance that stops serving the
/// tenant leaves unspent is bounded by computation in `shared::rate_limit`'s tests.)
#[tokio::test]
async fn leases_refuse_a_tenant_exactly_at_its_limit() {
    let env = api_tests::env().await;
    let instance = || api(Router::new().route("/api/v1/ping", get(|| async { "pong" })), limited(&env, 3));
    let apps = [instance(), instance(), instance()];
    let (t, tenant, window) = planned(&env, 7_500).await;
    for shard in 0..2 {
        set_standing(&env, &tenant, shard, (window, 3_550)).await;
    }
    let (mut served, mut refused) = (0, [false; 3]);
    while refused.contains(&false) {
        for (app, refused) in apps.iter().zip(refused.iter_mut()).filter(|(_, refused)| !**refused) {
            match call(app, Some(&t.key)).await.status().as_u16() {
                200 => served += 1,
                429 => *refused = true,
                other => panic!("{other}"),
            }
        }
        assert!(served <= 400, "past the limit: {served}");
    }
    assert_eq!(served, 400, "the 400 left");
    assert_eq!(counted_in(&env, &tenant, window).await, (7_500, 2), "each shard counted to its 3,750");
}

#[tokio::test]
async fn an_instance_that_finds_the_window_full_refuses_without_reading_again() {
    let env = api_tests::env().await;
    let instance = || {
        let auth = limited(&env, 2);
        api(Router::new().route("/api/v1/ping", get(|| async { "pong" })), auth)
    };
    let (filling, other) = (instance(), instance());
    let t = env.tenant().await;
    api_tests::one_rate_limit_window().await;
    assert_eq!(call(&other, Some(&t.key)).await.status(), 200, "the other instance's first request");
    assert_eq!(call(&filling, Some(&t.key)).await.status(), 200, "the window's second and last");
    let rate_limits = env.tables.name(shared::dynamo::Table::RateLimits);
    let (first, accesses) = shared::metering::recorded(call(&other, Some(&t.key))).await;
    assert_eq!(first.status(), 429, "the window is full");
    assert!(
        accesses.iter().all(|access| access.table != rate_limits || access.action == "dynamodb:GetItem"),
        "looked, not counted: {accesses:?}"
    );
    let (again, accesses) = shared::metering::recorded(call(&other, Some(&t.key))).await;
    assert_eq!(again.status(), 429);
    assert!(!accesses.iter().any(|access| access.table == rate_limits), "no read of the standing: {accesses:?}");
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
    assert!(a.is_some_and(|a| a < limit), "this request will be counted: {a:?}");
    // The first was counted after its answer, before the function served the second
    // (through `cargo lambda watch` too, where `shared::lambda::run` does it). Spread over
    // shards (a limit above `PER_SHARD`), Remaining is an estimate from the shard a
    // request looked at: within the shards' count of the limit less the two requests.
    let limit_u32 = u32::try_from(limit).expect("a limit a minute");
    if shared::rate_limit::shards_for(limit_u32) == 1 {
        assert!(b.is_some_and(|b| Some(b) < a), "the first request was counted: {a:?}, then {b:?}");
    } else {
        let shards = u64::from(shared::rate_limit::shards_for(limit_u32));
        assert!(b.is_some_and(|b| b < limit && b + 3 * shards >= limit), "an estimate near the limit: {b:?}");
    }
    assert!(not_found.header("x-ratelimit-reset").is_some());
}

/// The tenant's standing item, counted with chosen clocks: a minute's count goes up by
/// one; the next minute starts again at one; a clock behind the one that started the
/// stored minute counts in that minute (the tenant cannot gain room by a slow clock);
/// an instance that last counted an earlier minute starts the new one either way; and a key's revocation moves the keys epoch the count returns.
#[tokio::test]
async fn the_standing_counts_a_minute_restarts_the_next_and_carries_the_keys_epoch() {
    let env = api_tests::env().await;
    let t = env.tenant().await;
    let tenant = shared::auth::trusted::tenant(&shared::ids::TenantKey::parse(&t.id).expect("tenant id"));
    let count_after = |now: i64, last: Option<i64>| {
        let (client, tables, tenant) = (env.client.clone(), env.tables.clone(), tenant.clone());
        async move {
            shared::rate_limit::count(&client, &tables, &tenant, (5, Slot::FIRST), now, last).await.expect("counted")
        }
    };
    let count = |now: i64| count_after(now, None);
    // Minute 30,000,000 (2027), 10 s in; then 20 s in.
    let minute = 30_000_000 * 60;
    let first = count(minute + 10).await;
    assert_eq!((first.remaining, first.reset, first.exceeded), (4, 50, false));
    assert_eq!(count(minute + 30).await.remaining, 3);
    // The next minute restarts the count; a clock 2 s behind counts in it too.
    let next = count(minute + 65).await;
    assert_eq!((next.remaining, next.reset), (4, 55));
    let behind = count(minute + 58).await;
    assert_eq!((behind.remaining, behind.reset), (3, 60), "counted in the stored minute");
    for _ in 0..3 {
        count(minute + 70).await;
    }
    let over = count(minute + 71).await;
    assert_eq!((over.remaining, over.exceeded), (0, true));
    // An instance that last counted an earlier minute starts the new one at once; one
    // that did so while another instance already had, counts in it.
    let (w, started) = (minute / 60 + 1, count_after(minute + 125, Some(minute / 60 + 1)).await);
    assert_eq!((started.window, started.remaining), (w + 1, 4));
    assert_eq!(count_after(minute + 126, Some(w)).await.remaining, 3);

    let epoch = over.keys_epoch.expect("counted in DynamoDB");
    let now = || shared::time::format(chrono::Utc::now());
    let (key_id, _) = infra::admin::create_key(&env.client, &env.tables, &t.id, &now()).await.expect("key");
    assert_eq!(count(minute + 72).await.keys_epoch, Some(epoch), "a new key changes nothing");
    infra::admin::revoke_key(&env.client, &env.tables, key_id.as_str(), &now()).await.expect("revoked");
    assert_eq!(count(minute + 73).await.keys_epoch, Some(epoch + 1), "a revocation moves the epoch on");
}

/// Many counts at once at the start of a minute, each request counted exactly once:
/// from cold instances (each adds, then starts the minute when the add found none) and
/// from warm instances that last counted the minute before (each sends the add and the
/// start side by side; an add that reached the item after its own start would count its
/// request twice), whoever starts the minute.
#[tokio::test]
async fn counts_at_once_at_the_start_of_a_minute_count_each_request_once() {
    let env = api_tests::env().await;
    let t = env.tenant().await;
    let tenant = shared::auth::trusted::tenant(&shared::ids::TenantKey::parse(&t.id).expect("tenant id"));
    let minute = 30_000_100 * 60;
    // Six minutes: the first with no count known, the others after one the minute before.
    for round in 0..6 {
        let (now, last) = (minute + 60 * round + 5, (round > 0).then_some(minute / 60 + round - 1));
        let counts = (0..16).map(|_| {
            let (client, tables, tenant) = (env.client.clone(), env.tables.clone(), tenant.clone());
            tokio::spawn(async move {
                shared::rate_limit::count(&client, &tables, &tenant, (100, Slot::FIRST), now, last).await
            })
        });
        let mut remaining = Vec::new();
        for count in counts.collect::<Vec<_>>() {
            remaining.push(count.await.expect("joined").expect("counted").remaining);
        }
        remaining.sort_unstable();
        assert_eq!(remaining, (84..100).collect::<Vec<_>>(), "each counted once (now {now})");
    }
}
