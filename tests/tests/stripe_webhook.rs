//! `POST /billing/webhooks/stripe` as Stripe calls it: signed events, in process and
//! through `cargo lambda watch`. Events are signed here with the run's
//! `STRIPE_WEBHOOK_SECRET`, exactly as Stripe signs them.

use api_tests::stripe::{balance, deliver, now, secret, signed};
use api_tests::{Api, Env, both_paths};
use http::Method;
use serde_json::{Value, json};

both_paths!(
    a_signed_topup_event_credits_its_amount_once,
    the_same_event_ten_times_in_a_row_and_ten_times_at_once_credits_once,
    forged_stale_tampered_and_unsigned_events_are_400_and_write_nothing,
    payment_intents_that_are_not_topups_credit_nothing,
);

fn topup_event(tenant: &str, cents: i64) -> Value {
    let suffix = shared::ids::TransactionId::generate().to_string().replace("txn_", "");
    json!({
        "id": format!("evt_{suffix}"),
        "object": "event",
        "type": "payment_intent.succeeded",
        "created": now(),
        "data": {"object": {
            "id": format!("pi_{suffix}"),
            "object": "payment_intent",
            "amount": cents,
            "amount_received": cents,
            "currency": "usd",
            "status": "succeeded",
            "metadata": {"tenant_id": tenant, "credits": cents.to_string(), "cairn_kind": "topup"}
        }}
    })
}

async fn a_signed_topup_event_credits_its_amount_once(api: Api, env: Env) {
    let t = env.tenant_with_credits(0).await;
    let reply = signed(&api, &topup_event(&t.id, 2500)).await;
    assert_eq!(reply.expect(200).body, json!({"received": true, "applied": true}));
    assert_eq!(balance(&api, &t.key).await, 2500);
    let ledger = api.get(&t.key, "/billing/transactions").await;
    let entry = &ledger.body["items"][0];
    assert_eq!((entry["type"].clone(), entry["amount"].clone()), (json!("topup"), json!(2500)));
    assert_eq!((entry["credits_before"].clone(), entry["credits_after"].clone()), (json!(0), json!(2500)));
    assert_eq!(entry["payment_status"], "completed");
    assert!(entry["description"].as_str().is_some_and(|d| d.starts_with("Top-up via Stripe (pi_")));
}

async fn the_same_event_ten_times_in_a_row_and_ten_times_at_once_credits_once(api: Api, env: Env) {
    let t = env.tenant_with_credits(0).await;
    let event = topup_event(&t.id, 100);
    let mut applied = 0;
    for _ in 0..10 {
        let reply = signed(&api, &event).await;
        applied += usize::from(reply.expect(200).body["applied"] == true);
    }
    assert_eq!(applied, 1);
    let event = topup_event(&t.id, 300);
    let deliveries: Vec<_> = (0..10)
        .map(|_| {
            let (api, event) = (api.clone(), event.clone());
            tokio::spawn(async move { signed(&api, &event).await })
        })
        .collect();
    let mut applied = 0;
    for delivery in deliveries {
        let reply = delivery.await.expect("task");
        applied += usize::from(reply.expect(200).body["applied"] == true);
    }
    assert_eq!(applied, 1);
    assert_eq!(balance(&api, &t.key).await, 400);
    assert_eq!(api.get(&t.key, "/billing/transactions").await.body["total"], 2);
}

async fn forged_stale_tampered_and_unsigned_events_are_400_and_write_nothing(api: Api, env: Env) {
    let t = env.tenant_with_credits(0).await;
    let payload = serde_json::to_vec(&topup_event(&t.id, 5000)).expect("json");
    let tampered = String::from_utf8(payload.clone()).expect("utf-8").replace("5000", "9000").into_bytes();
    let cases = [
        ("forged", payload.clone(), Some(shared::auth::stripe::sign(&payload, "whsec_not_ours", now()))),
        // 100 s past the tolerance (the bounds themselves are unit tests of shared::auth):
        // a clock read a second later would put a "future" of now + 301 back within it.
        ("stale", payload.clone(), Some(shared::auth::stripe::sign(&payload, &secret(), now() - 400))),
        ("future", payload.clone(), Some(shared::auth::stripe::sign(&payload, &secret(), now() + 400))),
        ("tampered", tampered, Some(shared::auth::stripe::sign(&payload, &secret(), now()))),
        ("unsigned", payload.clone(), None),
        ("malformed", payload.clone(), Some("v1=deadbeef".to_owned())),
    ];
    for (name, body, signature) in cases {
        let reply = deliver(&api, &body, signature).await;
        reply.expect_problem(400, "malformed_request");
        assert!(reply.body["detail"].as_str().is_some_and(|d| d.contains("Stripe-Signature")), "{name}");
    }
    assert_eq!(balance(&api, &t.key).await, 0);
    assert_eq!(api.get(&t.key, "/billing/transactions").await.body["total"], 0, "nothing was written");
    let with_key = api.request(Method::POST, "/billing/webhooks/stripe").key(&t.key).json(&json!({})).send().await;
    with_key.expect_problem(400, "malformed_request");
}

async fn payment_intents_that_are_not_topups_credit_nothing(api: Api, env: Env) {
    let t = env.tenant_with_credits(0).await;
    let mut invoice = topup_event(&t.id, 1000);
    invoice["data"]["object"]["metadata"] = json!({"tenant_id": t.id});
    invoice["data"]["object"]["invoice"] = json!("in_123");
    assert_eq!(signed(&api, &invoice).await.expect(200).body["applied"], false);
    let mut other = topup_event(&t.id, 1000);
    other["type"] = json!("customer.created");
    assert_eq!(signed(&api, &other).await.expect(200).body["applied"], false);
    let mut foreign = topup_event("ten_nonsense", 1000);
    foreign["id"] = json!("evt_foreign");
    assert_eq!(signed(&api, &foreign).await.expect(200).body["applied"], false);
    assert_eq!(balance(&api, &t.key).await, 0);
}
