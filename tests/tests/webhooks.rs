//! Webhooks end to end on the local stack: the API writes each change's events in its
//! own transaction, `cairn-relay` (started by `make test`) hands DynamoDB Local's stream
//! to the dispatcher, and a receiver in this test gets them. (The signatures are judged
//! by the `standardwebhooks` library in the Python suite, `tests/test_webhooks.py`.)

use std::sync::{Arc, Mutex};
use std::time::Duration;

use api_tests::{Api, Env, both_paths};
use serde_json::{Value, json};

both_paths!(
    each_change_is_delivered_once_signed_with_its_event_id,
    a_charge_below_the_threshold_reports_credits_low_once,
    every_event_type_comes_from_the_action_that_causes_it,
    a_failed_attempt_is_retried_with_the_same_webhook_id_and_410_disables,
    endpoints_are_validated_capped_and_their_secrets_rotate,
    checkpoint_created_reaches_only_the_endpoints_that_name_it,
);

/// One message a receiver got.
#[derive(Debug, Clone)]
struct Received {
    id: String,
    signature: String,
    body: Value,
}

#[derive(Clone, Default)]
struct Receiver {
    got: Arc<Mutex<Vec<Received>>>,
    /// Statuses to answer, in order; 204 once they are used up.
    answers: Arc<Mutex<Vec<u16>>>,
}

/// Reads one HTTP/1.1 request from `stream`; answers it and closes.
async fn serve_one(r: Receiver, mut stream: tokio::net::TcpStream) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut raw = Vec::new();
    let mut chunk = [0u8; 4096];
    let (head, mut body) = loop {
        let Ok(n) = stream.read(&mut chunk).await else { return };
        if n == 0 {
            return;
        }
        raw.extend_from_slice(&chunk[..n]);
        if let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break (String::from_utf8_lossy(&raw[..end]).into_owned(), raw[end + 4..].to_vec());
        }
    };
    let header = |name: &str| {
        head.lines()
            .find_map(|line| line.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim()))
            .unwrap_or_default()
            .to_owned()
    };
    let length: usize = header("content-length").parse().unwrap_or(0);
    while body.len() < length {
        let Ok(n) = stream.read(&mut chunk).await else { return };
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    r.got.lock().expect("lock").push(Received {
        id: header("webhook-id"),
        signature: header("webhook-signature"),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    });
    let status = {
        let mut answers = r.answers.lock().expect("lock");
        if answers.is_empty() { 204 } else { answers.remove(0) }
    };
    let answer = format!("HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    let _ = stream.write_all(answer.as_bytes()).await;
}

/// A receiver on a free loopback port answering `answers` first; its URL.
async fn receiver(answers: Vec<u16>) -> (Receiver, String) {
    let r = Receiver { answers: Arc::new(Mutex::new(answers)), ..Receiver::default() };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let serving = r.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve_one(serving.clone(), stream));
        }
    });
    (r, url)
}

/// The messages once `done` holds of them (the relay polls every 250 ms; the first retry
/// is due 5 s after a failure and swept every 2 s); fails after 60 s.
async fn until(r: &Receiver, done: impl Fn(&[Received]) -> bool) -> Vec<Received> {
    for _ in 0..600 {
        let got = r.got.lock().expect("lock").clone();
        if done(&got) {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("not delivered in 60 s: {:?}", r.got.lock().expect("lock"));
}

fn id(reply: &api_tests::Reply) -> String {
    reply.body["id"].as_str().expect("id").to_owned()
}

async fn each_change_is_delivered_once_signed_with_its_event_id(api: Api, env: Env) {
    let t = env.tenant().await;
    let (r, url) = receiver(vec![]).await;
    let types = json!(["execution.started", "execution.failed", "failure.created", "execution.replayed"]);
    let made = api.post(&t.key, "/webhook-endpoints", &json!({"url": url, "event_types": types})).await;
    let secret = made.expect(201).body["secret"].as_str().expect("secret").to_owned();
    assert!(secret.starts_with("whsec_"), "{secret}");
    let wf = id(api.post(&t.key, "/workflows", &json!({"name": "w", "workflow_type": "custom"})).await.expect(201));
    let exec = id(api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201));
    let fail = json!({"error_type": "AGENT_ERROR", "message": "it broke"});
    api.post(&t.key, &format!("/executions/{exec}/fail"), &fail).await.expect(200);
    // Not subscribed: no delivery.
    api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201);
    let exec2 = id(api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201));
    api.post(&t.key, &format!("/executions/{exec2}/complete"), &json!({})).await.expect(200);

    let got = until(&r, |got| got.len() >= 5).await;
    // Give a duplicate time to show up.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let got_all = r.got.lock().expect("lock").clone();
    assert_eq!(got_all.len(), got.len(), "exactly once each: {got_all:?}");
    let mut kinds: Vec<(String, String)> = got
        .iter()
        .map(|m| {
            (m.body["type"].as_str().expect("type").to_owned(), m.body["data"]["id"].as_str().unwrap_or("").to_owned())
        })
        .collect();
    kinds.sort();
    let failure = api.get(&t.key, "/failures").await.body["items"][0]["id"].as_str().expect("failure").to_owned();
    let exec3 = got
        .iter()
        .filter(|m| m.body["type"] == "execution.started")
        .map(|m| m.body["data"]["id"].as_str().expect("id").to_owned())
        .find(|e| *e != exec && *e != exec2)
        .expect("the third start");
    let mut expected = vec![
        ("execution.failed".to_owned(), exec.clone()),
        ("execution.started".to_owned(), exec.clone()),
        ("execution.started".to_owned(), exec2.clone()),
        ("execution.started".to_owned(), exec3),
        ("failure.created".to_owned(), failure),
    ];
    expected.sort();
    assert_eq!(kinds.len(), 5, "{kinds:?}");
    assert_eq!(kinds, expected);
    for m in &got {
        assert_eq!(m.body["id"].as_str(), Some(m.id.as_str()), "webhook-id is the event id");
        assert!(m.id.starts_with("evt_"), "{}", m.id);
        assert!(m.signature.starts_with("v1,") && !m.signature.contains(' '), "one signature: {}", m.signature);
        assert!(m.body["created_at"].is_string() && m.body["data"].is_object(), "{}", m.body);
    }
    let failed = got.iter().find(|m| m.body["type"] == "execution.failed").expect("failed");
    assert_eq!(failed.body["data"]["status"], "failed");
    assert_eq!(failed.body["data"]["error"]["error_type"], "AGENT_ERROR");

    // Every delivery is listed with its attempt.
    let endpoint = api.get(&t.key, "/webhook-endpoints").await.body["items"][0]["id"].as_str().expect("id").to_owned();
    let listed = api.get(&t.key, &format!("/webhook-endpoints/{endpoint}/deliveries?limit=2")).await;
    listed.expect(200);
    assert_eq!(listed.body["items"].as_array().expect("items").len(), 2);
    assert_eq!(listed.body["has_more"], true);
    assert_eq!(listed.body["items"][0]["status"], "succeeded");
    assert_eq!(listed.body["items"][0]["attempts"][0]["status_code"], 204);
    let last = listed.body["items"][1]["id"].as_str().expect("id");
    let rest = api.get(&t.key, &format!("/webhook-endpoints/{endpoint}/deliveries?starting_after={last}")).await;
    assert_eq!(rest.expect(200).body["items"].as_array().expect("items").len(), 3);
}

async fn a_failed_attempt_is_retried_with_the_same_webhook_id_and_410_disables(api: Api, env: Env) {
    let t = env.tenant().await;
    let (r, url) = receiver(vec![500]).await;
    // Test events go to their endpoint whatever its types; no other event goes here.
    let made = api.post(&t.key, "/webhook-endpoints", &json!({"url": url, "event_types": ["failure.ignored"]})).await;
    let endpoint = id(made.expect(201));
    let sent = api.post(&t.key, &format!("/webhook-endpoints/{endpoint}/test"), &json!({})).await;
    let event = sent.expect(202).body["event_id"].as_str().expect("event").to_owned();
    let got = until(&r, |got| got.len() >= 2).await;
    assert_eq!((got[0].id.as_str(), got[1].id.as_str()), (event.as_str(), event.as_str()), "the same webhook-id");
    assert_eq!(got[0].body, got[1].body, "the same body");
    // The second attempt is recorded just after its answer.
    let mut delivery = Value::Null;
    for _ in 0..100 {
        let listed = api.get(&t.key, &format!("/webhook-endpoints/{endpoint}/deliveries")).await;
        delivery = listed.expect(200).body["items"][0].clone();
        if delivery["status"] != "pending" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(delivery["status"], "succeeded", "{delivery}");
    assert_eq!(delivery["attempt_count"], 2);
    assert_eq!(delivery["attempts"][0]["status_code"], 500);

    // 410 Gone: the endpoint is disabled, and says why.
    let (gone, gone_url) = receiver(vec![410]).await;
    let made =
        api.post(&t.key, "/webhook-endpoints", &json!({"url": gone_url, "event_types": ["failure.ignored"]})).await;
    let gone_endpoint = id(made.expect(201));
    api.post(&t.key, &format!("/webhook-endpoints/{gone_endpoint}/test"), &json!({})).await.expect(202);
    until(&gone, |got| !got.is_empty()).await;
    let mut shown = Value::Null;
    for _ in 0..100 {
        shown = api.get(&t.key, &format!("/webhook-endpoints/{gone_endpoint}")).await.body.clone();
        if shown["enabled"] == false {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(shown["enabled"], false, "{shown}");
    assert!(shown["disabled_reason"].as_str().is_some_and(|r| r.contains("410")), "{shown}");
    // A disabled endpoint gets no events; enabling it again clears the reason.
    let enabled = api.patch(&t.key, &format!("/webhook-endpoints/{gone_endpoint}"), &json!({"enabled": true})).await;
    assert_eq!(enabled.expect(200).body["disabled_reason"], Value::Null);
}

async fn endpoints_are_validated_capped_and_their_secrets_rotate(api: Api, env: Env) {
    let t = env.tenant().await;
    // (The local stack allows loopback receivers; every other form is refused here, and
    // each notation of each address class in domain::webhooks::address's unit tests.)
    for url in [
        "http://example.com/hook",
        "https://169.254.169.254/latest",
        "https://[::ffff:10.0.0.1]/",
        "https://167772161/",
        "https://[fd00:ec2::254]/",
        "https://10.0.0.1/",
        "ftp://example.com/",
    ] {
        let reply = api.post(&t.key, "/webhook-endpoints", &json!({"url": url})).await;
        reply.expect_problem(422, "validation_failed");
        assert_eq!(reply.error_fields(), ["url"], "{url}");
    }
    let bad =
        api.post(&t.key, "/webhook-endpoints", &json!({"url": "https://example.com/", "event_types": ["nope"]})).await;
    assert_eq!(bad.error_fields(), ["event_types"]);
    let unknown = json!({"url": "https://example.com/", "workflow_id": "wf_0123456789abcdef0123456789abcdef"});
    api.post(&t.key, "/webhook-endpoints", &unknown).await.expect_problem(404, "not_found");
    assert_eq!(api.get(&t.key, "/webhook-endpoints").await.body["total"], 0, "nothing was made");

    let made = api.post(&t.key, "/webhook-endpoints", &json!({"url": "https://example.com/a"})).await;
    let first = made.expect(201).body.clone();
    let endpoint = first["id"].as_str().expect("id");
    let shown = api.get(&t.key, &format!("/webhook-endpoints/{endpoint}")).await;
    assert!(shown.expect(200).body.get("secret").is_none(), "a secret is shown once");
    let rotated = api.post(&t.key, &format!("/webhook-endpoints/{endpoint}/rotate-secret"), &json!({})).await;
    let rotated = rotated.expect(200).body.clone();
    assert_ne!(rotated["secret"], first["secret"]);
    assert!(rotated["previous_secret_expires_at"].is_string(), "{rotated}");

    for i in 1..16 {
        let url = format!("https://example.com/{i}");
        api.post(&t.key, "/webhook-endpoints", &json!({"url": url})).await.expect(201);
    }
    api.post(&t.key, "/webhook-endpoints", &json!({"url": "https://example.com/17"}))
        .await
        .expect_problem(409, "invalid_state");
    api.delete(&t.key, &format!("/webhook-endpoints/{endpoint}")).await.expect(204);
    api.delete(&t.key, &format!("/webhook-endpoints/{endpoint}")).await.expect_problem(404, "not_found");
    api.post(&t.key, "/webhook-endpoints", &json!({"url": "https://example.com/17"})).await.expect(201);
}

/// The (type, data id) of each message.
fn kinds(got: &[Received]) -> Vec<(String, String)> {
    let mut kinds: Vec<(String, String)> = got
        .iter()
        .map(|m| {
            let kind = m.body["type"].as_str().expect("type").to_owned();
            (kind, m.body["data"]["id"].as_str().unwrap_or("").to_owned())
        })
        .collect();
    kinds.sort();
    kinds
}

async fn every_event_type_comes_from_the_action_that_causes_it(api: Api, env: Env) {
    let t = env.tenant().await;
    let (r, url) = receiver(vec![]).await;
    // Every type but the credits' (the tenant's opening grant reports credits.added,
    // perhaps before this endpoint exists, perhaps after).
    let types = json!([
        "execution.started",
        "execution.completed",
        "execution.failed",
        "execution.paused",
        "execution.cancelled",
        "execution.replayed",
        "execution.rolled_back",
        "failure.created",
        "failure.resolved",
        "failure.ignored"
    ]);
    api.post(&t.key, "/webhook-endpoints", &json!({"url": url, "event_types": types})).await.expect(201);
    let wf = id(api.post(&t.key, "/workflows", &json!({"name": "w", "workflow_type": "custom"})).await.expect(201));
    let start = json!({"workflow_id": wf});
    let fail = json!({"error_type": "AGENT_ERROR", "message": "it broke"});
    let post = |path: String, body: Value| {
        let (api, key) = (api.clone(), t.key.clone());
        async move { api.post(&key, &path, &body).await.expect(200).body.clone() }
    };
    // a: started, a checkpoint, paused, rolled back, replayed, failed, replayed, completed
    let a = id(api.post(&t.key, "/executions", &start).await.expect(201));
    let cp = id(api.post(&t.key, "/checkpoints", &json!({"execution_id": a, "state": {"n": 1}})).await.expect(201));
    api.post(&t.key, "/checkpoints", &json!({"execution_id": a, "state": {"n": 2}})).await.expect(201);
    post(format!("/executions/{a}/pause"), json!({})).await;
    post(format!("/executions/{a}/rollback"), json!({"checkpoint_id": cp})).await;
    post(format!("/executions/{a}/replay"), json!({})).await;
    post(format!("/executions/{a}/fail"), fail.clone()).await;
    post(format!("/executions/{a}/replay"), json!({})).await;
    post(format!("/executions/{a}/complete"), json!({"output": {"ok": true}})).await;
    // b: started, failed, its failure ignored; c: started, cancelled
    let b = id(api.post(&t.key, "/executions", &start).await.expect(201));
    post(format!("/executions/{b}/fail"), fail).await;
    let failures = api.get(&t.key, "/failures").await.body["items"].clone();
    let ids: Vec<String> =
        failures.as_array().expect("items").iter().map(|f| f["id"].as_str().expect("id").to_owned()).collect();
    let (fb, fa) = (ids[0].clone(), ids[1].clone());
    post(format!("/failures/{fb}/ignore"), json!({})).await;
    let c = id(api.post(&t.key, "/executions", &start).await.expect(201));
    post(format!("/executions/{c}/cancel"), json!({"reason": "not needed"})).await;
    // A replayed request (Idempotency-Key) changes nothing and reports nothing.
    for _ in 0..2 {
        let again = api.request(http::Method::POST, "/executions").key(&t.key).header("idempotency-key", "once");
        again.json(&start).send().await.expect(201);
    }

    let mut expected: Vec<(String, String)> = [
        ("execution.started", &a),
        ("execution.paused", &a),
        ("execution.rolled_back", &a),
        ("execution.replayed", &a),
        ("execution.failed", &a),
        ("failure.created", &fa),
        ("execution.replayed", &a),
        ("execution.completed", &a),
        ("failure.resolved", &fa),
        ("execution.started", &b),
        ("execution.failed", &b),
        ("failure.created", &fb),
        ("failure.ignored", &fb),
        ("execution.started", &c),
        ("execution.cancelled", &c),
    ]
    .iter()
    .map(|(kind, id)| ((*kind).to_owned(), (*id).clone()))
    .collect();
    let keyed = 1;
    let got = until(&r, |got| got.len() >= expected.len() + keyed).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let all = r.got.lock().expect("lock").clone();
    assert_eq!(all.len(), got.len(), "nothing twice");
    let mut seen = kinds(&all);
    // The idempotently started execution: one start, whatever its id.
    let keyed_start = seen
        .iter()
        .position(|(kind, id)| kind == "execution.started" && ![&a, &b, &c].contains(&id))
        .expect("the keyed start");
    seen.remove(keyed_start);
    expected.sort();
    assert_eq!(seen, expected);
}

/// `checkpoint.created` comes from the checkpoints table's own stream: once per new
/// checkpoint (a keyed repeat is none), under the checkpoint's own id, and only to
/// endpoints that name it (an endpoint of every type does not get it).
async fn checkpoint_created_reaches_only_the_endpoints_that_name_it(api: Api, env: Env) {
    let t = env.tenant().await;
    let (named, named_url) = receiver(vec![]).await;
    let (every, every_url) = receiver(vec![]).await;
    let types = json!(["checkpoint.created", "execution.completed"]);
    api.post(&t.key, "/webhook-endpoints", &json!({"url": named_url, "event_types": types})).await.expect(201);
    api.post(&t.key, "/webhook-endpoints", &json!({"url": every_url})).await.expect(201);
    let wf = id(api.post(&t.key, "/workflows", &json!({"name": "w", "workflow_type": "custom"})).await.expect(201));
    let exec = id(api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201));
    let mut checkpoints = Vec::new();
    for (n, key) in [(1, None), (2, Some("step-2")), (3, None)] {
        let body = json!({"execution_id": exec, "name": format!("step {n}"), "key": key, "state": {"n": n}});
        checkpoints.push(id(api.post(&t.key, "/checkpoints", &body).await.expect(201)));
    }
    // The same key again: the existing checkpoint, nothing new.
    let again = json!({"execution_id": exec, "key": "step-2", "state": {"n": 2}});
    assert_eq!(id(api.post(&t.key, "/checkpoints", &again).await.expect(200)), checkpoints[1]);
    api.post(&t.key, &format!("/executions/{exec}/complete"), &json!({})).await.expect(200);

    let got = until(&named, |got| got.len() >= 4).await;
    until(&every, |got| got.len() >= 2).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let all = named.got.lock().expect("lock").clone();
    assert_eq!(all.len(), got.len(), "nothing twice: {all:?}");
    let mut expected: Vec<(String, String)> =
        checkpoints.iter().map(|cp| ("checkpoint.created".to_owned(), cp.clone())).collect();
    expected.push(("execution.completed".to_owned(), exec.clone()));
    expected.sort();
    assert_eq!(kinds(&all), expected);
    for m in all.iter().filter(|m| m.body["type"] == "checkpoint.created") {
        let cp = m.body["data"]["id"].as_str().expect("id");
        assert_eq!(m.id, cp.replacen("cp_", "evt_", 1), "the event id is the checkpoint's");
        let n = checkpoints.iter().position(|c| c == cp).expect("one of ours") + 1;
        assert_eq!(m.body["data"]["sequence"], n);
        assert_eq!(m.body["data"]["execution_id"], exec.as_str());
        assert_eq!(m.body["data"]["name"], format!("step {n}"));
        assert!(m.body["data"].get("state").is_none(), "the summary, not the state");
    }
    // (The tenant's opening grant may report credits.added to it too.)
    let every_kinds: Vec<String> = kinds(&every.got.lock().expect("lock"))
        .into_iter()
        .map(|(kind, _)| kind)
        .filter(|kind| !kind.starts_with("credits."))
        .collect();
    assert_eq!(every_kinds, ["execution.completed", "execution.started"], "opt-in only");
}

/// A dispatcher that dies after fanning an event out, before its first attempt: the
/// delivery is claimed for a minute, then the sweep attempts it. Nothing is lost. On
/// tables of its own: its sweeps, at times ahead of the clock, would otherwise take
/// other tests' deliveries.
#[tokio::test]
async fn a_delivery_whose_dispatcher_died_is_attempted_by_the_sweep_after_its_claim() {
    let shared_env = api_tests::env().await;
    let prefix = format!("swept{}-", std::process::id());
    infra::tables::create_missing(&shared_env.client, &prefix).await.expect("tables");
    let env = Env { client: shared_env.client.clone(), tables: shared::dynamo::Tables::new(&prefix) };
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let (r, url) = receiver(vec![]).await;
    let hook = json!({"url": url, "event_types": ["failure.ignored"]});
    let endpoint = id(api.post(&t.key, "/webhook-endpoints", &hook).await.expect(201));
    let endpoint_id = shared::ids::EndpointId::parse(&endpoint).expect("endpoint id");
    // What the dying dispatcher left: the delivery, claimed (due a minute on), never sent.
    let now = chrono::Utc::now();
    let event = domain::webhooks::Event::test(&endpoint_id, now);
    let mut delivery = domain::webhooks::Delivery::new(&t.id, &endpoint_id, &event, now);
    delivery.next_attempt_at = Some(shared::time::format(now + chrono::Duration::seconds(60)));
    let deliveries = domain::webhooks::Deliveries::new(env.client.clone(), env.tables.clone());
    assert!(deliveries.create(&delivery).await.expect("created"));

    let dispatcher = dispatcher::Dispatcher::new(env.client.clone(), env.tables.clone());
    dispatcher.sweep_at(now + chrono::Duration::seconds(30)).await.expect("sweep");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(r.got.lock().expect("lock").is_empty(), "claimed: not attempted again within its minute");
    dispatcher.sweep_at(now + chrono::Duration::seconds(61)).await.expect("sweep");
    let got = until(&r, |got| !got.is_empty()).await;
    assert_eq!(got[0].id, event.id.as_str());
    assert_eq!(got[0].body["type"], "webhook.test");
    // Recorded once: a second sweep sends nothing more.
    dispatcher.sweep_at(now + chrono::Duration::seconds(200)).await.expect("sweep");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(r.got.lock().expect("lock").len(), 1);
}

async fn a_charge_below_the_threshold_reports_credits_low_once(api: Api, env: Env) {
    // 102 credits, the default threshold 100: the third start crosses it (100 -> 99);
    // there is no other.
    let t = env.tenant_with_credits(102).await;
    let (r, url) = receiver(vec![]).await;
    let hook = json!({"url": url, "event_types": ["credits.low"]});
    api.post(&t.key, "/webhook-endpoints", &hook).await.expect(201);
    let wf = id(api.post(&t.key, "/workflows", &json!({"name": "w", "workflow_type": "custom"})).await.expect(201));
    for _ in 0..3 {
        api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201);
    }
    let got = until(&r, |got| !got.is_empty()).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(r.got.lock().expect("lock").len(), 1, "once: {:?}", r.got.lock().expect("lock"));
    let data = &got[0].body["data"];
    assert_eq!(got[0].body["type"], "credits.low");
    assert_eq!((data["credits_before"].as_i64(), data["credits_balance"].as_i64()), (Some(100), Some(99)));
    assert_eq!(data["low_balance_threshold"], 100);
    assert_eq!(data["type"], "usage");
    // Credits added (here an operator's grant; a top-up's or an invoice's alike).
    let (added, added_url) = receiver(vec![]).await;
    let hook = json!({"url": added_url, "event_types": ["credits.added"]});
    api.post(&t.key, "/webhook-endpoints", &hook).await.expect(201);
    let balance = infra::admin::grant_credits(&env.client, &env.tables, &t.id, 50).await.expect("grant");
    // (The tenant's opening grant may come too, should it be dispatched only now.)
    let got = until(&added, |got| got.iter().any(|m| m.body["data"]["amount"] == 50)).await;
    let grant = got.iter().find(|m| m.body["data"]["amount"] == 50).expect("the grant");
    assert_eq!(grant.body["type"], "credits.added");
    assert_eq!(grant.body["data"]["credits_balance"].as_i64(), Some(balance));
}

/// An outbox item the dispatcher cannot read (a newer writer's event type, damage) is
/// logged and passed over: the events after it in the stream are still delivered.
#[tokio::test]
async fn an_unreadable_outbox_item_does_not_hold_up_the_events_after_it() {
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let (r, url) = receiver(vec![]).await;
    let hook = json!({"url": url, "event_types": ["failure.ignored"]});
    let endpoint = id(api.post(&t.key, "/webhook-endpoints", &hook).await.expect(201));
    env.client
        .put_item()
        .table_name(env.tables.name(shared::dynamo::Table::Events))
        .item("tenant_id", shared::dynamo::s(&t.id))
        .item("event_id", shared::dynamo::s("evt_00000000000000000000000000000000"))
        .item("events", shared::dynamo::s(r#"[{"type": "from.the.future"}]"#))
        .send()
        .await
        .expect("put");
    let sent = api.post(&t.key, &format!("/webhook-endpoints/{endpoint}/test"), &json!({})).await;
    let event = sent.expect(202).body["event_id"].as_str().expect("event").to_owned();
    let got = until(&r, |got| !got.is_empty()).await;
    assert_eq!(got[0].id, event);
}

/// What the table holds of an endpoint never signs by itself (the secret is sealed), and
/// an endpoint that fails every attempt for five days is disabled, with the reason shown.
#[tokio::test]
async fn secrets_are_sealed_at_rest_and_five_days_of_failures_disable_an_endpoint() {
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    // Of an event type this test never makes: no delivery of the dispatcher's (of the
    // tenant's credits, say) records an outcome between the test's own.
    let body = json!({"url": "https://example.com/hook", "event_types": ["failure.ignored"]});
    let made = api.post(&t.key, "/webhook-endpoints", &body).await;
    let made = made.expect(201).body.clone();
    let (endpoint, secret) = (made["id"].as_str().expect("id"), made["secret"].as_str().expect("secret"));
    let item = env
        .client
        .get_item()
        .table_name(env.tables.name(shared::dynamo::Table::WebhookEndpoints))
        .key("tenant_id", shared::dynamo::s(&t.id))
        .key("endpoint_id", shared::dynamo::s(endpoint))
        .send()
        .await
        .expect("item")
        .item
        .expect("stored");
    let stored = format!("{item:?}");
    let key_part = secret.trim_start_matches("whsec_");
    assert!(!stored.contains(key_part) && !stored.contains("whsec_"), "the secret is stored sealed: {stored}");

    let store = domain::webhooks::Endpoints::new(env.client.clone(), env.tables.clone());
    let tenant = shared::auth::trusted::tenant(&shared::ids::TenantKey::parse(&t.id).expect("tenant"));
    let id = shared::ids::EndpointId::parse(endpoint).expect("endpoint");
    let start = chrono::Utc::now();
    store.record_outcome(&tenant, &id, false, false, start).await.expect("failed");
    let day4 = start + chrono::Duration::days(4);
    store.record_outcome(&tenant, &id, false, false, day4).await.expect("failed");
    let shown = api.get(&t.key, &format!("/webhook-endpoints/{endpoint}")).await.body.clone();
    assert_eq!((shown["enabled"].clone(), shown["failing_since"].is_string()), (json!(true), true), "{shown}");
    // A success in between starts the count again.
    store.record_outcome(&tenant, &id, true, false, day4).await.expect("succeeded");
    store.record_outcome(&tenant, &id, false, false, day4).await.expect("failed");
    store.record_outcome(&tenant, &id, false, false, start + chrono::Duration::days(6)).await.expect("failed");
    assert_eq!(api.get(&t.key, &format!("/webhook-endpoints/{endpoint}")).await.body["enabled"], true);
    store.record_outcome(&tenant, &id, false, false, day4 + chrono::Duration::days(5)).await.expect("failed");
    let shown = api.get(&t.key, &format!("/webhook-endpoints/{endpoint}")).await.body;
    assert_eq!(shown["enabled"], false, "{shown}");
    assert!(shown["disabled_reason"].as_str().is_some_and(|r| r.contains("5 days")), "{shown}");
}

/// A receiver that does not answer within 15 s, then one that is down (nothing listens),
/// get the same event again, with the same webhook-id, once they answer.
#[tokio::test]
async fn a_timeout_and_a_receiver_that_is_down_are_retried_with_the_same_id() {
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;

    // Slow: the first request is held past the 15 s limit, the retry answered at once.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/hook", listener.local_addr().expect("addr"));
    let r = Receiver::default();
    let serving = r.clone();
    tokio::spawn(async move {
        let mut first = true;
        while let Ok((stream, _)) = listener.accept().await {
            let serving = serving.clone();
            let hold = std::mem::take(&mut first);
            tokio::spawn(async move {
                if hold {
                    tokio::time::sleep(Duration::from_secs(20)).await;
                }
                serve_one(serving, stream).await;
            });
        }
    });
    let hook = json!({"url": url, "event_types": ["failure.ignored"]});
    let endpoint = id(api.post(&t.key, "/webhook-endpoints", &hook).await.expect(201));
    let sent = api.post(&t.key, &format!("/webhook-endpoints/{endpoint}/test"), &json!({})).await;
    let event = sent.expect(202).body["event_id"].as_str().expect("event").to_owned();
    let got = until(&r, |got| !got.is_empty()).await;
    assert_eq!(got[0].id, event);
    let listed = api.get(&t.key, &format!("/webhook-endpoints/{endpoint}/deliveries")).await;
    let attempts = listed.expect(200).body["items"][0]["attempts"].clone();
    assert!(attempts[0]["error"].as_str().is_some_and(|e| e.contains("15 seconds")), "{attempts}");

    // Down: nothing listens on the port at first.
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        probe.local_addr().expect("addr").port()
    };
    let hook = json!({"url": format!("http://127.0.0.1:{port}/hook"), "event_types": ["failure.ignored"]});
    let endpoint = id(api.post(&t.key, "/webhook-endpoints", &hook).await.expect(201));
    let sent = api.post(&t.key, &format!("/webhook-endpoints/{endpoint}/test"), &json!({})).await;
    let event = sent.expect(202).body["event_id"].as_str().expect("event").to_owned();
    let path = format!("/webhook-endpoints/{endpoint}/deliveries");
    for _ in 0..300 {
        if api.get(&t.key, &path).await.body["items"][0]["attempt_count"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let first = api.get(&t.key, &path).await.body["items"][0].clone();
    assert_eq!(first["attempts"][0]["status_code"], Value::Null, "{first}");
    assert_eq!(first["status"], "pending");
    // Up again: the retry (due 5 s after the failure) reaches it.
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await.expect("the port again");
    let back = Receiver::default();
    let serving = back.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve_one(serving.clone(), stream));
        }
    });
    let got = until(&back, |got| !got.is_empty()).await;
    assert_eq!(got[0].id, event);
}

/// The dispatcher killed (SIGKILL) while events are being delivered, then started
/// again: every event reaches the receiver. Its own tables (a prefix of this test's), so
/// that only the relay this test starts and kills delivers them.
#[tokio::test]
async fn killing_the_dispatcher_mid_stream_loses_no_event() {
    let relay = std::env::var("CAIRN_RELAY").expect("CAIRN_RELAY: the cairn-relay binary (make test sets it)");
    let shared_env = api_tests::env().await;
    let prefix = format!("kill{}-", std::process::id());
    infra::tables::create_missing(&shared_env.client, &prefix).await.expect("tables");
    let env = Env { client: shared_env.client.clone(), tables: shared::dynamo::Tables::new(&prefix) };
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let (r, url) = receiver(vec![]).await;
    let hook = json!({"url": url, "event_types": ["failure.ignored"]});
    let endpoint = id(api.post(&t.key, "/webhook-endpoints", &hook).await.expect(201));

    let state = std::env::temp_dir().join(format!("{prefix}relay.json"));
    let start = || {
        std::process::Command::new(&relay)
            .arg("--state-file")
            .arg(&state)
            .env("TABLE_PREFIX", &prefix)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("cairn-relay starts")
    };
    let mut running = start();
    let mut events = Vec::new();
    for i in 0..30 {
        let sent = api.post(&t.key, &format!("/webhook-endpoints/{endpoint}/test"), &json!({})).await;
        events.push(sent.expect(202).body["event_id"].as_str().expect("event").to_owned());
        if i == 10 {
            until(&r, |got| !got.is_empty()).await;
            running.kill().expect("SIGKILL");
            running.wait().expect("reaped");
        }
    }
    running = start();
    // Claimed deliveries of the killed one are swept once their minute is over.
    for _ in 0..1200 {
        let got: std::collections::BTreeSet<String> =
            r.got.lock().expect("lock").iter().map(|m| m.id.clone()).collect();
        if events.iter().all(|e| got.contains(e)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    running.kill().expect("stopped");
    running.wait().expect("reaped");
    let _ = std::fs::remove_file(&state);
    let got: std::collections::BTreeSet<String> = r.got.lock().expect("lock").iter().map(|m| m.id.clone()).collect();
    let lost: Vec<&String> = events.iter().filter(|e| !got.contains(*e)).collect();
    assert!(lost.is_empty(), "lost across the kill: {lost:?}");
}
