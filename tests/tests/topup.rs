//! Top-ups end to end through localstripe, the Stripe stand-in `make test` starts: the
//! API creates a PaymentIntent there, the test pays it as a client would, and
//! localstripe sends the signed `payment_intent.succeeded` webhook to the local API.

use std::time::Duration;

use api_tests::stripe::balance;
use api_tests::{Api, Env, both_paths};
use serde_json::{Value, json};

both_paths!(
    a_paid_topup_is_credited_once_through_the_signed_webhook,
    a_declined_card_credits_nothing,
    topup_amounts_are_validated_and_nothing_reaches_stripe,
);

/// Calls localstripe as a client (Stripe.js) would.
async fn stripe(path: &str, form: &str) -> (u16, Value) {
    api_tests::stripe::local(http::Method::POST, path, form).await
}

async fn start_topup(api: &Api, key: &str, cents: i64) -> String {
    let reply = api
        .request(http::Method::POST, "/billing/topup")
        .key(key)
        .header("idempotency-key", "topup-1")
        .json(&json!({"amount_cents": cents}))
        .send()
        .await;
    reply.expect(200);
    assert_eq!((reply.body["amount_cents"].clone(), reply.body["credits"].clone()), (json!(cents), json!(cents)));
    let intent = reply.body["payment_intent_id"].as_str().expect("id").to_owned();
    assert!(intent.starts_with("pi_"));
    assert!(reply.body["client_secret"].as_str().is_some_and(|s| s.starts_with(&intent)));
    intent
}

async fn a_paid_topup_is_credited_once_through_the_signed_webhook(api: Api, env: Env) {
    let t = env.tenant_with_credits(0).await;
    let intent = start_topup(&api, &t.key, 2000).await;
    assert_eq!(balance(&api, &t.key).await, 0, "credits arrive only through the webhook");
    let (status, _) = stripe(&format!("/v1/payment_intents/{intent}"), "payment_method=pm_card_visa").await;
    assert_eq!(status, 200);
    let (status, paid) = stripe(&format!("/v1/payment_intents/{intent}/confirm"), "").await;
    assert_eq!((status, paid["status"].clone()), (200, json!("succeeded")), "{paid}");
    let mut credited = 0;
    for _ in 0..100 {
        credited = balance(&api, &t.key).await;
        if credited != 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(credited, 2000);
    let entries = api.get(&t.key, "/billing/transactions?type=topup").await;
    assert_eq!(entries.body["total"], 1);
    let entry = &entries.body["items"][0];
    assert_eq!((entry["payment_status"].clone(), entry["amount"].clone()), (json!("completed"), json!(2000)));
    assert!(entry["description"].as_str().is_some_and(|d| d.contains(&intent)));
}

async fn a_declined_card_credits_nothing(api: Api, env: Env) {
    let t = env.tenant_with_credits(0).await;
    let intent = start_topup(&api, &t.key, 500).await;
    stripe(&format!("/v1/payment_intents/{intent}"), "payment_method=pm_card_chargeCustomerFail").await;
    let (status, _) = stripe(&format!("/v1/payment_intents/{intent}/confirm"), "").await;
    assert_ne!(status, 200, "the charge is declined");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(balance(&api, &t.key).await, 0);
    assert_eq!(api.get(&t.key, "/billing/transactions").await.body["total"], 0);
}

async fn topup_amounts_are_validated_and_nothing_reaches_stripe(api: Api, env: Env) {
    let t = env.tenant_with_credits(0).await;
    for body in [
        json!({}),
        json!({"amount_cents": 99}),
        json!({"amount_cents": 1_000_001}),
        json!({"amount_cents": "500"}),
        json!({"amount_cents": 100.5}),
        json!({"amount_cents": 500, "currency": "eur"}),
    ] {
        let reply = api.post(&t.key, "/billing/topup", &body).await;
        reply.expect_problem(422, "validation_failed");
    }
    let long_key = "k".repeat(256);
    let reply = api
        .request(http::Method::POST, "/billing/topup")
        .key(&t.key)
        .header("idempotency-key", &long_key)
        .json(&json!({"amount_cents": 500}))
        .send()
        .await;
    reply.expect_problem(422, "validation_failed");
    assert_eq!(reply.error_fields(), ["Idempotency-Key"]);
}
