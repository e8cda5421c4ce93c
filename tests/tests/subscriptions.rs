//! Subscriptions end to end through localstripe: checkout (the test pays it through the
//! local Stripe's test-only checkout page), the signed events that follow, status,
//! portal and cancellation, and the webhook's rules for subscription events.

use std::time::Duration;

use api_tests::stripe::{balance, eventually, local, signed};
use api_tests::{Api, Env, Reply, both_paths};
use http::Method;
use serde_json::{Value, json};

both_paths!(
    checkout_gives_an_active_subscription_and_its_monthly_credits_once,
    cancel_at_period_end_names_the_date_and_cancel_now_ends_it,
    without_a_subscription_status_portal_and_cancel_are_404_and_bad_input_is_422,
    out_of_order_and_foreign_subscription_events_cannot_roll_a_subscription_back,
    an_invoice_credits_once_whatever_events_carry_it,
    a_tenant_has_at_most_one_open_checkout,
    a_subscription_stripe_has_and_cairn_did_not_store_blocks_a_second_checkout,
);

/// A subscription Stripe has and Cairn does not (as when the events after a checkout
/// could not be applied): a second checkout is refused, so nobody pays twice.
async fn a_subscription_stripe_has_and_cairn_did_not_store_blocks_a_second_checkout(api: Api, env: Env) {
    let t = env.tenant_with_credits(0).await;
    let subscribed = subscribe(&api, &t.key, "developer", 1_000).await;
    let id = subscribed["subscription_id"].as_str().expect("id").to_owned();
    // Cairn's record of it gone, as if its sync had failed.
    env.client
        .update_item()
        .table_name(env.tables.name(shared::dynamo::Table::Accounts))
        .key("tenant_id", aws_sdk_dynamodb::types::AttributeValue::S(t.id.clone()))
        .update_expression("REMOVE subscription, subscription_version")
        .send()
        .await
        .expect("removed");
    status(&api, &t.key).await.expect_problem(404, "not_found");
    let refused = checkout(&api, &t.key, "pro").await;
    refused.expect_problem(409, "invalid_state");
    assert!(refused.body["detail"].as_str().expect("detail").contains(&id), "{}", refused.body);
}

const RETURN_URL: &str = "https://app.example.com/billing";

async fn checkout(api: &Api, key: &str, plan: &str) -> Reply {
    api.post(key, "/billing/subscriptions/create-checkout", &json!({"plan_id": plan, "return_url": RETURN_URL})).await
}

/// Pays the hosted checkout at `url` as the customer would (test card 4242).
async fn pay(url: &str) -> Value {
    let path = url.strip_prefix(&api_tests::stripe::base()).expect("a checkout page of the local Stripe");
    let (status, session) = local(Method::POST, &format!("{path}/complete"), "").await;
    assert_eq!(status, 200, "{session}");
    session
}

async fn status(api: &Api, key: &str) -> Reply {
    api.get(key, "/billing/subscriptions/status").await
}

/// Subscribes the tenant to `plan` and waits for the subscription and its credits.
async fn subscribe(api: &Api, key: &str, plan: &str, credits: i64) -> Value {
    let before = balance(api, key).await;
    let reply = checkout(api, key, plan).await;
    reply.expect(200);
    let session = pay(reply.body["checkout_url"].as_str().expect("checkout_url")).await;
    let subscription = session["subscription"].as_str().expect("the session's subscription").to_owned();
    let stored = eventually("the subscription", || async {
        let reply = status(api, key).await;
        (reply.status == 200 && reply.body["subscription_id"] == subscription.as_str()).then(|| reply.body.clone())
    })
    .await;
    eventually("the plan's credits", || async { (balance(api, key).await == before + credits).then_some(()) }).await;
    stored
}

fn invoice_of(entry: &Value) -> String {
    let description = entry["description"].as_str().expect("description");
    let start = description.find("in_").expect("the invoice id in the description");
    description[start..].trim_end_matches(')').to_owned()
}

async fn checkout_gives_an_active_subscription_and_its_monthly_credits_once(api: Api, env: Env) {
    let t = env.tenant_with_credits(0).await;
    status(&api, &t.key).await.expect_problem(404, "not_found");
    let reply = checkout(&api, &t.key, "pro").await;
    reply.expect(200);
    assert_eq!(reply.body.as_object().map(|o| o.len()), Some(1), "only checkout_url: {}", reply.body);
    assert!(reply.body["checkout_url"].as_str().is_some_and(|u| u.contains("/checkout/cs_test_")));
    status(&api, &t.key).await.expect_problem(404, "not_found");
    assert_eq!(balance(&api, &t.key).await, 0, "nothing is granted before payment");

    let session = pay(reply.body["checkout_url"].as_str().expect("url")).await;
    let id = session["subscription"].as_str().expect("subscription").to_owned();
    let active = eventually("the active subscription", || async {
        let reply = status(&api, &t.key).await;
        (reply.status == 200).then(|| reply.body.clone())
    })
    .await;
    assert_eq!((active["subscription_id"].as_str(), active["plan_id"].as_str()), (Some(id.as_str()), Some("pro")));
    assert_eq!((active["status"].clone(), active["cancel_at_period_end"].clone()), (json!("active"), json!(false)));
    let (start, end) = (active["current_period_start"].as_str(), active["current_period_end"].as_str());
    assert!(start.zip(end).is_some_and(|(s, e)| s < e && e.ends_with('Z')), "{active}");

    let credited = eventually("the plan's credits", || async {
        let b = balance(&api, &t.key).await;
        (b != 0).then_some(b)
    })
    .await;
    assert_eq!(credited, 10_000);
    // Every event of the checkout (including the invoice's own PaymentIntent) is sent
    // within about a second; none may credit again.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(balance(&api, &t.key).await, 10_000);
    let ledger = api.get(&t.key, "/billing/transactions").await;
    assert_eq!(ledger.body["total"], 1, "{}", ledger.body);
    let entry = &ledger.body["items"][0];
    assert_eq!((entry["type"].clone(), entry["amount"].clone()), (json!("subscription"), json!(10_000)));
    assert_eq!((entry["credits_before"].clone(), entry["credits_after"].clone()), (json!(0), json!(10_000)));
    assert_eq!((entry["payment_status"].clone(), entry["currency"].clone()), (json!("completed"), json!("usd")));
    assert_eq!(api.get(&t.key, "/billing/transactions?type=topup").await.body["total"], 0);

    checkout(&api, &t.key, "enterprise").await.expect_problem(409, "invalid_state");
    let portal =
        api.post(&t.key, "/billing/subscriptions/portal", &json!({"return_url": "http://localhost:8080/back"})).await;
    portal.expect(200);
    assert!(portal.body["portal_url"].as_str().is_some_and(|u| u.contains("/portal/bps_")), "{}", portal.body);

    // Another tenant sees none of it and may subscribe on its own.
    let other = env.tenant_with_credits(0).await;
    status(&api, &other.key).await.expect_problem(404, "not_found");
    api.post(&other.key, "/billing/subscriptions/portal", &json!({"return_url": RETURN_URL}))
        .await
        .expect_problem(404, "not_found");
    api.request(Method::POST, "/billing/subscriptions/cancel")
        .key(&other.key)
        .send()
        .await
        .expect_problem(404, "not_found");
    checkout(&api, &other.key, "developer").await.expect(200);
    assert_eq!(status(&api, &t.key).await.body["status"], "active");
}

async fn cancel_at_period_end_names_the_date_and_cancel_now_ends_it(api: Api, env: Env) {
    let t = env.tenant_with_credits(0).await;
    let subscribed = subscribe(&api, &t.key, "developer", 1_000).await;
    let id = subscribed["subscription_id"].clone();
    let end = subscribed["current_period_end"].as_str().expect("period end").to_owned();

    let cancel = |query: &'static str| {
        let (api, key) = (api.clone(), t.key.clone());
        async move { api.request(Method::POST, &format!("/billing/subscriptions/cancel{query}")).key(&key).send().await }
    };
    let reply = cancel("").await;
    reply.expect(200);
    assert_eq!(
        (reply.body["subscription_id"].clone(), reply.body["status"].clone()),
        (id.clone(), json!("cancel_at_period_end"))
    );
    let message = reply.body["message"].as_str().expect("message");
    assert!(message.contains(&end[..10]), "the message names the period's end date: {message}");
    let now = status(&api, &t.key).await;
    assert_eq!(
        (now.body["status"].clone(), now.body["cancel_at_period_end"].clone()),
        (json!("cancel_at_period_end"), json!(true))
    );
    cancel("?immediately=false").await.expect(200);
    cancel("?immediately=maybe").await.expect_problem(422, "validation_failed");

    let reply = cancel("?immediately=true").await;
    reply.expect(200);
    assert_eq!((reply.body["subscription_id"].clone(), reply.body["status"].clone()), (id.clone(), json!("cancelled")));
    assert!(reply.body["message"].as_str().is_some_and(|m| m.contains("immediately")));
    assert_eq!(status(&api, &t.key).await.body["status"], "cancelled");
    cancel("").await.expect_problem(409, "invalid_state");
    cancel("?immediately=true").await.expect_problem(409, "invalid_state");

    // The events Stripe sends about the cancellations arrive later and agree.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let after = status(&api, &t.key).await;
    assert_eq!((after.body["subscription_id"].clone(), after.body["status"].clone()), (id, json!("cancelled")));
    assert_eq!(balance(&api, &t.key).await, 1_000, "cancelling refunds and charges nothing");
    checkout(&api, &t.key, "pro").await.expect(200);
}

async fn without_a_subscription_status_portal_and_cancel_are_404_and_bad_input_is_422(api: Api, env: Env) {
    let t = env.tenant_with_credits(0).await;
    let portal = |body: Value| {
        let (api, key) = (api.clone(), t.key.clone());
        async move { api.post(&key, "/billing/subscriptions/portal", &body).await }
    };
    status(&api, &t.key).await.expect_problem(404, "not_found");
    portal(json!({"return_url": RETURN_URL})).await.expect_problem(404, "not_found");
    for query in ["", "?immediately=true", "?immediately=false"] {
        let path = format!("/billing/subscriptions/cancel{query}");
        api.request(Method::POST, &path).key(&t.key).send().await.expect_problem(404, "not_found");
    }
    let bad = [
        (json!({}), vec!["plan_id", "return_url"]),
        (json!({"plan_id": "gold", "return_url": RETURN_URL}), vec!["plan_id"]),
        (json!({"plan_id": "pro", "return_url": "/billing"}), vec!["return_url"]),
        (json!({"plan_id": "pro", "return_url": "ftp://example.com/"}), vec!["return_url"]),
        (json!({"plan_id": "pro", "return_url": "javascript:alert(1)"}), vec!["return_url"]),
        (json!({"plan_id": "pro", "return_url": "https://"}), vec!["return_url"]),
        (json!({"plan_id": "pro", "return_url": 42}), vec!["return_url"]),
        (json!({"plan_id": "pro", "return_url": format!("https://e.com/{}", "a".repeat(2100))}), vec!["return_url"]),
        (json!({"plan_id": "pro", "return_url": RETURN_URL, "coupon": "x"}), vec!["coupon"]),
    ];
    for (body, fields) in bad {
        let reply = api.post(&t.key, "/billing/subscriptions/create-checkout", &body).await;
        reply.expect_problem(422, "validation_failed");
        assert_eq!(reply.error_fields(), fields, "{body}");
    }
    let reply = portal(json!({"return_url": "example.com"})).await;
    reply.expect_problem(422, "validation_failed");
    assert_eq!(reply.error_fields(), ["return_url"]);
    portal(json!({"return_url": RETURN_URL})).await.expect_problem(404, "not_found");

    // A checkout creates the billing customer (so the portal opens) but no subscription.
    checkout(&api, &t.key, "developer").await.expect(200);
    portal(json!({"return_url": RETURN_URL})).await.expect(200);
    status(&api, &t.key).await.expect_problem(404, "not_found");
    assert_eq!(api.get(&t.key, "/billing/transactions").await.body["total"], 0);
}

fn subscription_event(kind: &str, object: &Value) -> Value {
    let suffix = shared::ids::TransactionId::generate().to_string().replace("txn_", "");
    json!({"id": format!("evt_{suffix}"), "object": "event", "type": kind, "created": api_tests::stripe::now(),
           "data": {"object": object}})
}

async fn out_of_order_and_foreign_subscription_events_cannot_roll_a_subscription_back(api: Api, env: Env) {
    let t = env.tenant_with_credits(0).await;
    let first = subscribe(&api, &t.key, "developer", 1_000).await;
    let first_id = first["subscription_id"].as_str().expect("id").to_owned();
    api.request(Method::POST, "/billing/subscriptions/cancel?immediately=true").key(&t.key).send().await.expect(200);

    // A late `created` event still carrying the active subscription changes nothing:
    // the webhook stores the subscription as Stripe has it now.
    let stale = json!({"id": first_id, "object": "subscription", "status": "active", "cancel_at_period_end": false,
                       "metadata": {"tenant_id": t.id, "plan_id": "developer"}});
    signed(&api, &subscription_event("customer.subscription.created", &stale.clone())).await.expect(200);
    assert_eq!(status(&api, &t.key).await.body["status"], "cancelled");

    // A new subscription is not replaced by events about the ended one.
    let second = subscribe(&api, &t.key, "pro", 10_000).await;
    assert_ne!(second["subscription_id"], first_id.as_str());
    signed(&api, &subscription_event("customer.subscription.deleted", &stale)).await.expect(200);
    let now = status(&api, &t.key).await;
    assert_eq!(
        (now.body["subscription_id"].clone(), now.body["status"].clone()),
        (second["subscription_id"].clone(), json!("active"))
    );

    // Subscriptions Stripe does not know are ignored.
    let unknown = json!({"id": "sub_unknown0000", "object": "subscription", "status": "active",
                         "metadata": {"tenant_id": t.id, "plan_id": "enterprise"}});
    let reply = signed(&api, &subscription_event("customer.subscription.updated", &unknown)).await;
    assert_eq!(reply.expect(200).body["applied"], false);
    assert_eq!(status(&api, &t.key).await.body["plan_id"], "pro");
}

/// An invoice's lines as Stripe sends them: one subscription line of `price`.
fn lines(price: &str, quantity: i64) -> Value {
    json!({"object": "list", "data": [{"type": "subscription", "proration": false, "quantity": quantity,
                                        "price": {"id": price}}]})
}

async fn an_invoice_credits_once_whatever_events_carry_it(api: Api, env: Env) {
    let t = env.tenant_with_credits(0).await;
    let subscribed = subscribe(&api, &t.key, "developer", 1_000).await;
    let ledger = api.get(&t.key, "/billing/transactions?type=subscription").await;
    let invoice = invoice_of(&ledger.body["items"][0]);
    let plans = domain::subscriptions::Plans::from_env();
    let price = |plan| plans.price(plan).expect("make test configures the plans' prices").to_owned();
    let developer = price(domain::subscriptions::Plan::Developer);
    let paid = json!({"id": invoice, "object": "invoice", "status": "paid", "billing_reason": "subscription_create",
                      "subscription": subscribed["subscription_id"], "amount_paid": 1000,
                      "lines": lines(&developer, 1)});
    let event = subscription_event("invoice.paid", &paid.clone());
    for _ in 0..3 {
        assert_eq!(signed(&api, &event).await.expect(200).body["applied"], false, "a redelivery");
    }
    let again = subscription_event("invoice.paid", &paid.clone());
    assert_eq!(signed(&api, &again).await.expect(200).body["applied"], false, "another event, the same invoice");
    let mut proration = paid.clone();
    proration["id"] = json!(format!("{invoice}x"));
    proration["billing_reason"] = json!("subscription_update");
    assert_eq!(signed(&api, &subscription_event("invoice.paid", &proration)).await.body["applied"], false);
    let mut trial = paid.clone();
    trial["id"] = json!(format!("{invoice}t"));
    trial["amount_paid"] = json!(0);
    let reply = signed(&api, &subscription_event("invoice.paid", &trial)).await;
    assert_eq!(reply.expect(200).body["applied"], false, "an invoice of 0 (a trial's) grants nothing");
    let mut one_off = paid.clone();
    one_off["id"] = json!(format!("{invoice}y"));
    one_off["subscription"] = Value::Null;
    assert_eq!(signed(&api, &subscription_event("invoice.paid", &one_off)).await.body["applied"], false);
    assert_eq!(balance(&api, &t.key).await, 1_000);

    // Paid, but not saying so, or for lines of no Cairn plan: nothing.
    let mut unsaid = paid.clone();
    unsaid["id"] = json!(format!("{invoice}u"));
    unsaid.as_object_mut().expect("object").remove("amount_paid");
    assert_eq!(signed(&api, &subscription_event("invoice.paid", &unsaid)).await.body["applied"], false);
    let mut foreign = paid.clone();
    foreign["id"] = json!(format!("{invoice}f"));
    foreign["lines"] = lines("price_not_cairns", 1);
    assert_eq!(signed(&api, &subscription_event("invoice.paid", &foreign)).await.body["applied"], false);
    assert_eq!(balance(&api, &t.key).await, 1_000);

    // A new invoice of the subscription (a renewal) grants the credits of what its lines
    // bill (here two seats of pro), whatever plan the subscription is on by then
    // (developer).
    let pro = price(domain::subscriptions::Plan::Pro);
    let mut renewal = json!({"id": format!("{invoice}r"), "object": "invoice", "status": "paid",
                             "billing_reason": "subscription_cycle", "subscription": subscribed["subscription_id"],
                             "amount_paid": 2000, "lines": lines(&pro, 2)});
    let reply = signed(&api, &subscription_event("invoice.paid", &renewal.clone())).await;
    assert_eq!(reply.expect(200).body["applied"], true);
    assert_eq!(balance(&api, &t.key).await, 21_000);
    renewal["id"] = json!(format!("{invoice}r"));
    assert_eq!(signed(&api, &subscription_event("invoice.paid", &renewal)).await.body["applied"], false);
    let entries = api.get(&t.key, "/billing/transactions").await;
    let chain: Vec<(i64, i64)> = entries.body["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|e| (e["credits_before"].as_i64().unwrap_or(-1), e["credits_after"].as_i64().unwrap_or(-1)))
        .collect();
    assert_eq!(chain, [(1_000, 21_000), (0, 1_000)]);
}

async fn a_tenant_has_at_most_one_open_checkout(api: Api, env: Env) {
    let t = env.tenant_with_credits(0).await;
    // Two checkouts started together, and a retry: one session, so at most one
    // subscription can come of them.
    let (a, b) = tokio::join!(checkout(&api, &t.key, "pro"), checkout(&api, &t.key, "pro"));
    let url = a.expect(200).body["checkout_url"].as_str().expect("url").to_owned();
    if b.status == 200 {
        assert_eq!(b.body["checkout_url"], url.as_str(), "the same session");
    } else {
        b.expect_problem(409, "invalid_state");
    }
    assert_eq!(checkout(&api, &t.key, "pro").await.expect(200).body["checkout_url"], url.as_str());
    // Another plan replaces it: the first session can no longer be paid.
    let other = checkout(&api, &t.key, "developer").await;
    let other_url = other.expect(200).body["checkout_url"].as_str().expect("url").to_owned();
    assert_ne!(other_url, url);
    let path = url.strip_prefix(&api_tests::stripe::base()).expect("local page");
    let (code, _) = local(Method::POST, &format!("{path}/complete"), "").await;
    assert_eq!(code, 409, "the replaced session is expired");
    // Paying the open one subscribes; then checkout is 409 as long as it is live.
    let session = pay(&other_url).await;
    let subscription = session["subscription"].as_str().expect("subscription").to_owned();
    eventually("the subscription", || async {
        let reply = status(&api, &t.key).await;
        (reply.status == 200 && reply.body["subscription_id"] == subscription.as_str()).then_some(())
    })
    .await;
    checkout(&api, &t.key, "pro").await.expect_problem(409, "invalid_state");
}

/// Two deliveries read Stripe at about the same time: the snapshot read before the
/// other's store cannot overwrite it (in process: the store itself).
#[tokio::test]
async fn an_older_snapshot_never_overwrites_a_newer_one() {
    use domain::subscriptions::{Stored, Subscription, Subscriptions};
    let env = api_tests::env().await;
    let t = env.tenant_with_credits(0).await;
    let tenant = shared::auth::trusted::tenant(&shared::ids::TenantKey::parse(&t.id).expect("tenant id"));
    let store = Subscriptions::new(env.client.clone(), env.tables.clone());
    let snapshot = |cancel_at_period_end: bool| Subscription {
        subscription_id: "sub_race".to_owned(),
        plan_id: "pro".to_owned(),
        status: if cancel_at_period_end { "cancel_at_period_end" } else { "active" }.to_owned(),
        current_period_start: None,
        current_period_end: None,
        cancel_at_period_end,
    };
    let now = chrono::Utc::now();
    // Both read version 0 before reading Stripe; the newer snapshot is stored first.
    let read = store.read(&tenant).await.expect("read").subscription_version;
    assert_eq!(store.store(&tenant, &snapshot(true), None, now, read).await.expect("store"), Stored::Written);
    let older = store.store(&tenant, &snapshot(false), None, now, read).await.expect("store");
    assert_eq!(older, Stored::Stale, "the older snapshot is refused, to be read again");
    let billing = store.read(&tenant).await.expect("read");
    assert_eq!(billing.subscription, Some(snapshot(true)));
    assert_eq!(billing.subscription_version, 1);
    // Read again after that store, it is current and goes in.
    assert_eq!(store.store(&tenant, &snapshot(false), None, now, 1).await.expect("store"), Stored::Written);
}

/// A live subscription gives the tenant its plan's rate limit, in the transaction that
/// stores it; a cancelled one takes it back (in process, at a default limit of 3).
#[tokio::test]
async fn a_live_subscription_sets_the_plans_rate_limit_and_its_end_takes_it_back() {
    use domain::subscriptions::{Plan, Stored, Subscription, Subscriptions};
    let env = api_tests::env().await;
    let t = env.tenant_with_credits(0).await;
    let tenant = shared::auth::trusted::tenant(&shared::ids::TenantKey::parse(&t.id).expect("tenant id"));
    let store = Subscriptions::new(env.client.clone(), env.tables.clone());
    let snapshot = |plan: &str, status: &str| Subscription {
        subscription_id: "sub_limits".to_owned(),
        plan_id: plan.to_owned(),
        status: status.to_owned(),
        current_period_start: None,
        current_period_end: None,
        cancel_at_period_end: false,
    };
    let item = || async {
        let read = env
            .client
            .get_item()
            .table_name(env.tables.name(shared::dynamo::Table::RateLimits))
            .set_key(Some(shared::rate_limit::standing_key(&tenant, 0)))
            .consistent_read(true)
            .send();
        read.await.expect("read").item.unwrap_or_default()
    };
    let standing = || async { shared::rate_limit::limit_of(&item().await, 3) };
    let now = chrono::Utc::now();
    assert_eq!(standing().await, 3, "no subscription: the default");
    for (version, plan, status, limit) in [
        (0, "developer", "trialing", 3_000),
        (1, "pro", "active", 12_000),
        (2, "enterprise", "past_due", 60_000),
        (3, "enterprise", "cancelled", 3),
    ] {
        let stored = store.store(&tenant, &snapshot(plan, status), None, now, version).await.expect("store");
        assert_eq!(stored, Stored::Written);
        assert_eq!(standing().await, limit, "{plan} {status}");
    }
    assert_eq!(Plan::Pro.rate_limit(), 12_000);
    // A plan never lowers a higher default.
    let store_pro = store.store(&tenant, &snapshot("developer", "active"), None, now, 4).await.expect("store");
    assert_eq!(store_pro, Stored::Written);
    assert_eq!(shared::rate_limit::limit_of(&item().await, 100_000), 100_000);
}
