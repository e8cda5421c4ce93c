//! `Idempotency-Key` on every POST: the first successful answer is stored for 24 hours and
//! given again (`Idempotent-Replayed: true`) without running again; a different request
//! with the same key is 422, a concurrent duplicate 409, and a failed request releases
//! its key.

use std::sync::Arc;

use api_tests::down::DownAfterCommit;
use api_tests::{Api, Env, Reply, both_paths};
use http::Method;
use serde_json::{Value, json};
use tower::ServiceExt;

both_paths!(
    the_same_request_with_the_same_key_runs_once_and_replays_the_answer,
    the_same_key_for_a_different_request_is_422_and_keys_belong_to_their_tenant,
    a_failed_request_releases_its_key,
    concurrent_duplicates_run_once,
    concurrent_checkpoint_writes_with_one_key_record_one_checkpoint,
    every_kind_of_post_replays,
    malformed_keys_are_422_and_change_nothing,
);

/// In process only: the local gateway relays answers of several hundred KiB unreliably.
#[tokio::test]
async fn answers_of_every_size_are_replayed_whole() {
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    // 2 x 256 KiB of text that compresses badly (6 bits a character): about 390 KB
    // compressed, kept in parts.
    let wf = api.post(&t.key, "/workflows", &workflow_body("big")).await.expect(201).body["id"].clone();
    let start = json!({"workflow_id": wf, "input": {"text": api_tests::noise(0x2545_F491_4F6C_DD1D, 256 * 1024 - 20)}});
    let first = post(&api, &t.key, "/executions", "start-big", &start).await;
    first.expect(201);
    let id = first.body["id"].as_str().expect("id").to_owned();
    let complete = json!({"output": {"text": api_tests::noise(0x9E37_79B9_7F4A_7C15, 256 * 1024 - 20)}});
    let done = post(&api, &t.key, &format!("/executions/{id}/complete"), "complete-big", &complete).await;
    done.expect(200);
    assert!(done.raw.len() > 512 * 1024, "{} bytes", done.raw.len());
    for (path, key, body, answer) in [
        ("/executions".to_owned(), "start-big", &start, &first),
        (format!("/executions/{id}/complete"), "complete-big", &complete, &done),
    ] {
        let again = post(&api, &t.key, &path, key, body).await;
        assert!(replayed(&again), "{path}: {} {}", again.status, again.body);
        assert_eq!((again.status, &again.raw), (answer.status, &answer.raw), "{path}: the same answer, byte for byte");
    }
    assert_eq!(total(&api, &t.key, "/executions").await, 1, "started once, charged once");
}

/// In process only (the client is the test's): writes whose function loses DynamoDB
/// right after the commit still answer, and their retries with the same key are
/// answered from the record (the answer committed with the write), not 409 until the
/// claim lapses and then run a second time.
#[tokio::test]
async fn an_answer_is_kept_with_its_write_even_when_dynamodb_goes_away_after_the_commit() {
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant_with_credits(10).await;
    let (client, down) = DownAfterCommit::client(&env);
    let clock = Arc::new(shared::time::SystemClock);
    let apps = [
        workflows::app(client.clone(), env.tables.clone(), clock.clone()),
        executions::app(client.clone(), env.tables.clone(), clock.clone()),
        failures::app(client.clone(), env.tables.clone(), clock.clone()),
        keys::app(client, env.tables.clone(), clock),
    ];
    // Sends through the apps whose DynamoDB goes away after a commit, then the same
    // request again through healthy ones.
    let twice = |path: String, key: &'static str, body: Value, expected: u16| {
        let (api, apps, down, api_key) = (api.clone(), apps.clone(), down.clone(), t.key.clone());
        async move {
            down.reset();
            let app = match path.split('/').nth(1) {
                Some("workflows") => &apps[0],
                Some("failures") => &apps[2],
                Some("keys") => &apps[3],
                _ => &apps[1],
            };
            let request = http::Request::builder()
                .method(Method::POST)
                .uri(format!("/api/v1{path}"))
                .header("x-api-key", &api_key)
                .header("content-type", "application/json")
                .header("idempotency-key", key)
                .body(axum::body::Body::from(serde_json::to_vec(&body).expect("json")))
                .expect("request");
            let response = app.clone().oneshot(request).await.expect("infallible");
            let response = api_tests::finished(response).await;
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let first = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body");
            assert_eq!(status, expected, "{path}: {}", String::from_utf8_lossy(&first));
            assert!(down.is_down(), "{path}: committed, then DynamoDB went away");
            let again = post(&api, &api_key, &path, key, &body).await;
            assert!(replayed(&again), "{path}: {} {}", again.status, again.body);
            for name in ["location", "etag", "content-type"] {
                let first = headers.get(name).and_then(|v| v.to_str().ok());
                assert_eq!(again.header(name), first, "{path}: {name}");
            }
            if path == "/keys" {
                // The kept answer leaves the secret out.
                let mut first: Value = serde_json::from_slice(&first).expect("json");
                assert!(first["key"].as_str().is_some_and(|k| k.starts_with("cairn_")), "{first}");
                first["key"] = Value::Null;
                assert_eq!((again.status, &again.body), (status, &first), "{path}: the stored answer");
            } else {
                let stored = (again.status, &again.raw[..]);
                assert_eq!(stored, (status, &first[..]), "{path}: the stored answer, byte for byte");
            }
            again.body
        }
    };
    let wf = twice("/workflows".into(), "wf", workflow_body("w"), 201).await["id"].clone();
    let e = twice("/executions".into(), "start", json!({"workflow_id": wf}), 201).await["id"].clone();
    let e = e.as_str().expect("id");
    let fail = json!({"error_type": "AGENT_ERROR", "message": "slow"});
    twice(format!("/executions/{e}/fail"), "fail", fail, 200).await;
    let failure = api.get(&t.key, "/failures").await.body["items"][0]["id"].as_str().expect("failure").to_owned();
    twice(format!("/failures/{failure}/resolve"), "resolve", json!({}), 200).await;
    // A retry of a key's creation gets the same key (its secret left out), not a second.
    twice("/keys".into(), "key", json!({"name": "second"}), 201).await;

    assert_eq!(total(&api, &t.key, "/workflows").await, 1, "created once");
    assert_eq!(total(&api, &t.key, "/executions").await, 1, "started once");
    assert_eq!(api.get(&t.key, "/billing/balance").await.body["credits_balance"], 9, "charged once");
}

/// A handler that announces an answer, loses its write on its own condition (a race it
/// gives up on), then commits another write and answers differently.
async fn announce_then_lose(
    axum::extract::State(env): axum::extract::State<Env>,
    tenant: shared::TenantId,
) -> Result<axum::response::Response, shared::ApiError> {
    use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
    use shared::dynamo::{StoreError, Table, s};
    use shared::idempotency::{Answer, announce};
    let put = |id: &str, condition: Option<&str>| {
        let put = Put::builder()
            .table_name(env.tables.name(Table::Idempotency))
            .item("tenant_id", s(tenant.as_str()))
            .item("idempotency_key", s(format!("{id}-{}", uuid::Uuid::now_v7())))
            .set_condition_expression(condition.map(str::to_owned))
            .build()
            .expect("put");
        TransactWriteItem::builder().put(put).build()
    };
    announce(|| Answer::json(http::StatusCode::CREATED, &json!({"answer": "announced, never committed"})));
    // A retry of an answered request is refused here (the key's record is taken) and
    // answered from the record.
    match shared::dynamo::transact(&env.client, vec![put("lost", Some("attribute_exists(nothing)"))]).await {
        Err(StoreError::ConditionFailed { .. }) => {}
        other => other?,
    }
    shared::dynamo::transact(&env.client, vec![put("kept", None)]).await?;
    Ok(Answer::json(http::StatusCode::CREATED, &json!({"answer": "committed"}))?.into_response())
}

/// An answer announced for a write that did not commit is never stored for a later one.
#[tokio::test]
async fn an_answer_announced_for_a_lost_write_is_not_kept_for_the_next() {
    let env = api_tests::env().await;
    let t = env.tenant().await;
    let auth = shared::auth::AuthState {
        client: env.client.clone(),
        tables: env.tables.clone(),
        rate_limit: 0,
        origin_secret: None,
        known: shared::auth::KnownKeys::default(),
    };
    let routes =
        axum::Router::new().route("/api/v1/announce", axum::routing::post(announce_then_lose)).with_state(env.clone());
    let app = shared::http::api(routes, auth);
    let send = || {
        let request = http::Request::builder()
            .method(Method::POST)
            .uri("/api/v1/announce")
            .header("x-api-key", &t.key)
            .header("idempotency-key", "announce-once")
            .body(axum::body::Body::empty())
            .expect("request");
        let app = app.clone();
        async move {
            let response = app.oneshot(request).await.expect("infallible");
            let response = api_tests::finished(response).await;
            let replayed = response.headers().get("idempotent-replayed").is_some();
            let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body");
            (replayed, serde_json::from_slice::<Value>(&body).expect("json"))
        }
    };
    assert_eq!(send().await, (false, json!({"answer": "committed"})));
    assert_eq!(send().await, (true, json!({"answer": "committed"})), "the answer given, not the one announced");
}

async fn post(api: &Api, key: &str, path: &str, idempotency_key: &str, body: &Value) -> Reply {
    api.request(Method::POST, path).key(key).header("idempotency-key", idempotency_key).json(body).send().await
}

fn replayed(reply: &Reply) -> bool {
    reply.header("idempotent-replayed") == Some("true")
}

async fn total(api: &Api, key: &str, path: &str) -> i64 {
    api.get(key, path).await.expect(200).body["total"].as_i64().expect("total")
}

fn workflow_body(name: &str) -> Value {
    json!({"name": name, "workflow_type": "crewai"})
}

async fn the_same_request_with_the_same_key_runs_once_and_replays_the_answer(api: Api, env: Env) {
    let t = env.tenant().await;
    let first = post(&api, &t.key, "/workflows", "create-wf-1", &workflow_body("nightly")).await;
    first.expect(201);
    assert!(!replayed(&first), "a first answer is not a replay");
    for _ in 0..3 {
        let again = post(&api, &t.key, "/workflows", "create-wf-1", &workflow_body("nightly")).await;
        again.expect(201);
        assert!(replayed(&again));
        assert_eq!(again.body, first.body);
        for name in ["location", "etag", "content-type"] {
            assert_eq!(again.header(name), first.header(name), "{name}");
        }
        assert!(again.header("x-request-id").is_some() && again.header("x-request-id") != first.header("x-request-id"));
    }
    assert_eq!(total(&api, &t.key, "/workflows").await, 1, "created once");
    // Only POSTs use the key; a GET with one is an ordinary GET.
    let list = api.request(Method::GET, "/workflows").key(&t.key).header("idempotency-key", "create-wf-1").send().await;
    assert_eq!((list.status, replayed(&list)), (200, false));
}

async fn the_same_key_for_a_different_request_is_422_and_keys_belong_to_their_tenant(api: Api, env: Env) {
    let t = env.tenant().await;
    post(&api, &t.key, "/workflows", "k", &workflow_body("one")).await.expect(201);
    let other_body = post(&api, &t.key, "/workflows", "k", &workflow_body("two")).await;
    other_body.expect_problem(422, "idempotency_key_reused");
    let wf = api.get(&t.key, "/workflows").await.body["items"][0]["id"].clone();
    let other_path = post(&api, &t.key, "/executions", "k", &json!({"workflow_id": wf})).await;
    other_path.expect_problem(422, "idempotency_key_reused");
    let other_query = post(&api, &t.key, "/workflows?x=1", "k", &workflow_body("one")).await;
    other_query.expect_problem(422, "idempotency_key_reused");
    assert_eq!(total(&api, &t.key, "/workflows").await, 1);
    assert_eq!(total(&api, &t.key, "/executions").await, 0);

    let stranger = env.tenant().await;
    let theirs = post(&api, &stranger.key, "/workflows", "k", &workflow_body("one")).await;
    theirs.expect(201);
    assert!(!replayed(&theirs), "another tenant's key of the same name is its own");
    assert_ne!(theirs.body["id"], wf);
}

async fn a_failed_request_releases_its_key(api: Api, env: Env) {
    let t = env.tenant().await;
    let invalid = json!({"name": "", "workflow_type": "crewai"});
    for _ in 0..2 {
        let reply = post(&api, &t.key, "/workflows", "retry-me", &invalid).await;
        reply.expect_problem(422, "validation_failed");
        assert!(!replayed(&reply), "failures are not stored");
    }
    let fixed = post(&api, &t.key, "/workflows", "retry-me", &workflow_body("fixed")).await;
    fixed.expect(201);
    assert!(!replayed(&fixed));

    let poor = env.tenant_with_credits(0).await;
    let wf = post(&api, &poor.key, "/workflows", "wf", &workflow_body("w")).await.body["id"].clone();
    let start = json!({"workflow_id": wf});
    post(&api, &poor.key, "/executions", "start", &start).await.expect_problem(402, "insufficient_credits");
    post(&api, &poor.key, "/executions", "start", &start).await.expect_problem(402, "insufficient_credits");
    assert_eq!(total(&api, &poor.key, "/executions").await, 0);
}

async fn concurrent_duplicates_run_once(api: Api, env: Env) {
    let t = env.tenant_with_credits(100).await;
    let wf = post(&api, &t.key, "/workflows", "wf", &workflow_body("w")).await.body["id"].clone();
    let body = json!({"workflow_id": wf, "input": {"n": 1}});
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let (api, key, body) = (api.clone(), t.key.clone(), body.clone());
            tokio::spawn(async move { post(&api, &key, "/executions", "start-once", &body).await })
        })
        .collect();
    let mut ran = Vec::new();
    let mut replays = Vec::new();
    for call in calls {
        let reply = call.await.expect("task");
        match reply.status {
            201 if replayed(&reply) => replays.push(reply.body["id"].clone()),
            201 => ran.push(reply.body["id"].clone()),
            _ => {
                reply.expect_problem(409, "idempotency_in_progress");
            }
        }
    }
    assert_eq!(ran.len(), 1, "exactly one request ran");
    assert!(replays.iter().all(|id| *id == ran[0]));
    let after = post(&api, &t.key, "/executions", "start-once", &body).await;
    assert!(replayed(after.expect(201)));
    assert_eq!(after.body["id"], ran[0]);
    assert_eq!(total(&api, &t.key, "/executions").await, 1);
    let balance = api.get(&t.key, "/billing/balance").await.body["credits_balance"].clone();
    assert_eq!(balance, 99, "charged once");
}

/// A checkpoint's answer is stored in its write's own transaction: the duplicates that
/// lose the race write nothing and get that answer (or 409 while the first still runs).
async fn concurrent_checkpoint_writes_with_one_key_record_one_checkpoint(api: Api, env: Env) {
    let t = env.tenant_with_credits(10).await;
    let wf = post(&api, &t.key, "/workflows", "wf", &workflow_body("w")).await.body["id"].clone();
    let e = post(&api, &t.key, "/executions", "e", &json!({"workflow_id": wf})).await.body["id"].clone();
    let body = json!({"execution_id": e, "name": "once", "state": {"step": 1}});
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let (api, key, body) = (api.clone(), t.key.clone(), body.clone());
            tokio::spawn(async move { post(&api, &key, "/checkpoints", "cp-once", &body).await })
        })
        .collect();
    let (mut ran, mut replays) = (Vec::new(), Vec::new());
    for call in calls {
        let reply = call.await.expect("task");
        match reply.status {
            201 if replayed(&reply) => replays.push(reply),
            201 => ran.push(reply),
            _ => {
                reply.expect_problem(409, "idempotency_in_progress");
            }
        }
    }
    assert_eq!(ran.len(), 1, "exactly one request wrote");
    for replay in &replays {
        assert_eq!(replay.raw, ran[0].raw, "the stored answer, byte for byte");
        assert_eq!(replay.header("location"), ran[0].header("location"));
    }
    let path = format!("/checkpoints?execution_id={}", e.as_str().expect("id"));
    assert_eq!(total(&api, &t.key, &path).await, 1, "one checkpoint");
    let execution = api.get(&t.key, &format!("/executions/{}", e.as_str().expect("id"))).await;
    assert_eq!(execution.body["current_checkpoint_id"], ran[0].body["id"]);
}

async fn every_kind_of_post_replays(api: Api, env: Env) {
    let t = env.tenant_with_credits(100).await;
    let twice = |path: String, key: &'static str, body: Value| {
        let (api, api_key) = (api.clone(), t.key.clone());
        async move {
            let first = post(&api, &api_key, &path, key, &body).await;
            assert!(first.status < 300, "{path}: {} {}", first.status, first.body);
            let second = post(&api, &api_key, &path, key, &body).await;
            assert!(replayed(&second), "{path}");
            assert_eq!((second.status, &second.body), (first.status, &first.body), "{path}");
            first.body
        }
    };
    let wf = twice("/workflows".into(), "a", workflow_body("w")).await["id"].clone();
    let e = twice("/executions".into(), "b", json!({"workflow_id": wf})).await["id"].as_str().expect("id").to_owned();
    let c1 = twice("/checkpoints".into(), "c", json!({"execution_id": e, "name": "one", "state": {"n": 1}})).await;
    twice("/checkpoints".into(), "d", json!({"execution_id": e, "name": "two", "state": {"n": 2}})).await;
    twice(format!("/executions/{e}/pause"), "e", json!({})).await;
    let rolled = twice(format!("/executions/{e}/rollback"), "f", json!({"checkpoint_id": c1["id"]})).await;
    assert_eq!(rolled["current_checkpoint_id"], c1["id"]);
    let again = twice(format!("/executions/{e}/replay"), "g", json!({})).await;
    assert_eq!(again["attempt"], 2);
    twice(format!("/executions/{e}/fail"), "h", json!({"error_type": "AGENT_ERROR", "message": "slow"})).await;
    let failure = api.get(&t.key, "/failures").await.body["items"][0]["id"].as_str().expect("failure").to_owned();
    twice(format!("/failures/{failure}/resolve"), "i", json!({})).await;
    assert_eq!(api.get(&t.key, "/billing/balance").await.body["credits_balance"], 98, "one start, one replay");
    assert_eq!(
        total(&api, &t.key, &format!("/checkpoints?execution_id={e}")).await,
        1,
        "the rollback's deletion ran once; none re-created"
    );

    // Stripe-backed POSTs: the replay is the stored answer, not a second PaymentIntent.
    let topup = twice("/billing/topup".into(), "j", json!({"amount_cents": 500})).await;
    assert!(topup["payment_intent_id"].as_str().is_some_and(|id| id.starts_with("pi_")));
    let checkout = twice(
        "/billing/subscriptions/create-checkout".into(),
        "k",
        json!({"plan_id": "pro", "return_url": "https://e.com/"}),
    )
    .await;
    assert!(checkout["checkout_url"].as_str().is_some());
}

async fn malformed_keys_are_422_and_change_nothing(api: Api, env: Env) {
    let t = env.tenant().await;
    let long = "k".repeat(256);
    for bad in ["", long.as_str(), "tab\tinside"] {
        let reply = post(&api, &t.key, "/workflows", bad, &workflow_body("w")).await;
        reply.expect_problem(422, "validation_failed");
        assert_eq!(reply.error_fields(), ["Idempotency-Key"], "{bad:?}");
    }
    let non_ascii = api
        .request(Method::POST, "/workflows")
        .key(&t.key)
        .header_bytes("idempotency-key", "clé".as_bytes())
        .json(&workflow_body("w"))
        .send()
        .await;
    non_ascii.expect_problem(422, "validation_failed");
    let longest = "k".repeat(255);
    post(&api, &t.key, "/workflows", &longest, &workflow_body("w")).await.expect(201);
    assert_eq!(total(&api, &t.key, "/workflows").await, 1);
}
