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
    refunds_and_disputes_take_back_the_credits_they_bought_once_even_below_zero,
);

/// Calls localstripe as a client (Stripe.js) would.
async fn stripe(path: &str, form: &str) -> (u16, Value) {
    api_tests::stripe::local(http::Method::POST, path, form).await
}

async fn start_topup(api: &Api, key: &str, cents: i64) -> String {
    start_topup_keyed(api, key, cents, "topup-1").await
}

async fn start_topup_keyed(api: &Api, key: &str, cents: i64, idempotency_key: &str) -> String {
    let reply = api
        .request(http::Method::POST, "/billing/topup")
        .key(key)
        .header("idempotency-key", idempotency_key)
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

/// A top-up of `cents` paid with the test card, once credited; its PaymentIntent and
/// charge.
async fn paid_topup(api: &Api, key: &str, cents: i64, name: &str) -> (String, String) {
    let before = balance(api, key).await;
    let intent = start_topup_keyed(api, key, cents, name).await;
    stripe(&format!("/v1/payment_intents/{intent}"), "payment_method=pm_card_visa").await;
    let (status, paid) = stripe(&format!("/v1/payment_intents/{intent}/confirm"), "").await;
    assert_eq!(status, 200, "{paid}");
    let charge = paid["latest_charge"].as_str().or_else(|| paid["latest_charge"]["id"].as_str());
    let charge = charge.expect("the payment's charge").to_owned();
    settles(api, key, before + cents).await;
    (intent, charge)
}

/// Waits until the balance is `expected` (Stripe's events arrive by webhook).
async fn settles(api: &Api, key: &str, expected: i64) {
    api_tests::stripe::eventually(&format!("a balance of {expected}"), || async {
        (balance(api, key).await == expected).then_some(())
    })
    .await;
}

/// What the tenant's credit allowances hold, together (read from storage).
async fn held(env: &Env, tenant: &str) -> i64 {
    let mut total = 0;
    for k in 0..domain::credits::ALLOWANCES {
        let read = env
            .client
            .get_item()
            .table_name(env.tables.name(shared::dynamo::Table::Accounts))
            .set_key(Some(domain::credits::allowances::key(tenant, k)))
            .consistent_read(true)
            .send()
            .await
            .expect("an allowance read");
        total += read.item.and_then(|item| item.get("held")?.as_n().ok()?.parse::<i64>().ok()).unwrap_or(0);
    }
    total
}

async fn refunds_and_disputes_take_back_the_credits_they_bought_once_even_below_zero(api: Api, env: Env) {
    let t = env.tenant_with_credits(0).await;
    let (intent, charge) = paid_topup(&api, &t.key, 2000, "first").await;
    let wf = api.post(&t.key, "/workflows", &json!({"name": "w", "workflow_type": "custom"})).await;
    let start = json!({"workflow_id": wf.expect(201).body["id"]});
    api.post(&t.key, "/executions", &start).await.expect(201);
    assert_eq!(balance(&api, &t.key).await, 1999);
    assert!(held(&env, &t.id).await > 0, "the start's allowance was handed a share of the credits");

    // A partial refund, then the rest: each takes back what it refunded, even below 0.
    let (status, _) = stripe("/v1/refunds", &format!("payment_intent={intent}&amount=500")).await;
    assert_eq!(status, 200);
    settles(&api, &t.key, 1499).await;
    stripe("/v1/refunds", &format!("charge={charge}&amount=1500")).await;
    settles(&api, &t.key, -1).await;
    // Whichever allowance the next start picks holds nothing: what they held is taken back.
    assert_eq!(held(&env, &t.id).await, 0, "no credits left to spend below 0");
    // Below 0, starts are refused as at 0.
    api.post(&t.key, "/executions", &start).await.expect_problem(402, "insufficient_credits");
    // Another event saying the same (the charge wholly refunded) changes nothing.
    let object = json!({"id": charge, "object": "charge", "amount": 2000, "amount_refunded": 2000,
                        "payment_intent": intent, "refunded": true});
    let again = json!({"id": format!("evt_again_{charge}"), "object": "event", "type": "charge.refunded",
                       "created": api_tests::stripe::now(), "data": {"object": object}});
    assert_eq!(api_tests::stripe::signed(&api, &again).await.expect(200).body["applied"], false);
    assert_eq!(balance(&api, &t.key).await, -1);

    // A dispute takes the credits back when it opens; lost, nothing more; won, they return.
    for (cents, outcome, after) in [(1000, "lost", -1), (500, "won", 499)] {
        let (_, charge) = paid_topup(&api, &t.key, cents, outcome).await;
        let path = format!("/_config/cairn_test/charges/{charge}/dispute");
        let (_, opened) = api_tests::stripe::local(http::Method::POST, &path, "").await;
        settles(&api, &t.key, -1).await;
        let path = format!("/_config/cairn_test/disputes/{}/close", opened["id"].as_str().expect("dispute"));
        api_tests::stripe::local(http::Method::POST, &path, &format!("status={outcome}")).await;
        settles(&api, &t.key, after).await;
    }

    let of = |kind: &'static str| {
        let (api, key) = (api.clone(), t.key.clone());
        async move { api.get(&key, &format!("/billing/transactions?type={kind}")).await.body["total"].clone() }
    };
    assert_eq!((of("refund").await, of("dispute").await), (json!(2), json!(3)), "one entry per change");
    // The ledger chains through the negative balance.
    let items = api.get(&t.key, "/billing/transactions?page_size=100").await.body["items"].clone();
    let items = items.as_array().expect("items");
    for pair in items.windows(2) {
        assert_eq!(pair[0]["credits_before"], pair[1]["credits_after"], "{pair:?}");
    }
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
