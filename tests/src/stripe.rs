//! Stripe as the tests see it: events signed with the run's `STRIPE_WEBHOOK_SECRET`
//! exactly as Stripe signs them, and localstripe (the local Stripe `make test` starts)
//! called as a customer's browser or Stripe.js would.

use http::Method;
use serde_json::Value;

use crate::{Api, Reply};

/// The webhook signing secret of this run.
#[must_use]
pub fn secret() -> String {
    std::env::var("STRIPE_WEBHOOK_SECRET").expect("STRIPE_WEBHOOK_SECRET is set by make test")
}

/// Unix seconds now.
#[must_use]
pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// Posts `payload` to the webhook, with `signature` as its `Stripe-Signature`.
pub async fn deliver(api: &Api, payload: &[u8], signature: Option<String>) -> Reply {
    let mut call = api
        .request(Method::POST, "/billing/webhooks/stripe")
        .raw_body("application/json; charset=utf-8", payload.to_vec());
    if let Some(signature) = signature {
        call = call.header("stripe-signature", &signature);
    }
    call.send().await
}

/// Delivers `event`, correctly signed.
pub async fn signed(api: &Api, event: &Value) -> Reply {
    let payload = serde_json::to_vec_pretty(event).expect("json");
    deliver(api, &payload, Some(shared::auth::stripe::sign(&payload, &secret(), now()))).await
}

/// The local Stripe's base URL.
#[must_use]
pub fn base() -> String {
    std::env::var("STRIPE_API_BASE").expect("STRIPE_API_BASE is set by make test")
}

/// Calls the local Stripe (`path` under its base URL) with a form body.
pub async fn local(method: Method, path: &str, form: &str) -> (u16, Value) {
    let key = std::env::var("STRIPE_SECRET_KEY").expect("STRIPE_SECRET_KEY is set by make test");
    let response = reqwest::Client::new()
        .request(method, format!("{}{path}", base()))
        .bearer_auth(key)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form.to_owned())
        .send()
        .await
        .expect("localstripe answers");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The tenant's credit balance.
pub async fn balance(api: &Api, key: &str) -> i64 {
    api.get(key, "/billing/balance").await.expect(200).body["credits_balance"].as_i64().expect("credits")
}

/// Polls `read` every 100 ms for up to 10 s until it gives `Some`; webhooks arrive
/// about a second after the change that sends them.
pub async fn eventually<T, F, Fut>(what: &str, mut read: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    for _ in 0..100 {
        if let Some(value) = read().await {
            return value;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{what} did not happen within 10 s");
}
