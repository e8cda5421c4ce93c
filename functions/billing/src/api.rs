//! The billing endpoints.

use axum::Json;
use axum::extract::State;
use http::HeaderMap;
use serde::Serialize;
use serde_json::Value;
use shared::body::{Fields, JsonBody, WireEnum, integer, one_of};
use shared::pagination::{PageBody, PageRequest};
use shared::query::Query;
use shared::series::Window;
use shared::{ApiError, TenantId};

use crate::AppState;
use crate::stripe::Stripe;
use domain::credits::{Entry, EntryType};
use domain::subscriptions::{OpenCheckout, Plan, Stored, Subscription};

/// Default `page_size` of the transaction list.
const DEFAULT_PAGE_SIZE: u32 = 50;

/// The credit balance.
#[derive(Debug, Serialize)]
pub struct Balance {
    credits_balance: i64,
    balance_usd: f64,
}

/// `GET /billing/balance`
pub async fn balance(State(state): State<AppState>, tenant: TenantId) -> Result<Json<Balance>, ApiError> {
    let credits = state.ledger.balance(&tenant).await?;
    Ok(Json(Balance { credits_balance: credits, balance_usd: credits as f64 / 100.0 }))
}

/// `GET /billing/usage`: credits used per hour or day, from the span counters.
pub async fn usage(State(state): State<AppState>, tenant: TenantId, query: Query) -> Result<Json<Value>, ApiError> {
    let window = Window::from_query(query, state.clock.now())?;
    let found = state.ledger.usage(&tenant, &window).await?;
    let buckets: Vec<Value> = found
        .iter()
        .map(|b| {
            let mut bucket = window.bucket_fields(b.index);
            bucket.extend([("credits".to_owned(), b.credits.into()), ("charges".to_owned(), b.charges.into())]);
            Value::Object(bucket)
        })
        .collect();
    let mut answer = window.answer();
    answer.insert("credits".to_owned(), found.iter().map(|b| b.credits).sum::<u64>().into());
    answer.insert("charges".to_owned(), found.iter().map(|b| b.charges).sum::<u64>().into());
    answer.insert("buckets".to_owned(), buckets.into());
    Ok(Json(Value::Object(answer)))
}

/// `GET /billing/transactions`
pub async fn transactions(
    State(state): State<AppState>,
    tenant: TenantId,
    mut query: Query,
) -> Result<Json<PageBody<Entry>>, ApiError> {
    let kind = query.one_of::<EntryType>("type");
    let page = PageRequest::read(&mut query, DEFAULT_PAGE_SIZE);
    let after = shared::pagination::starting_after(&mut query);
    query.finish()?;
    let after = after
        .map(|raw| shared::ids::TransactionId::parse(&raw).ok_or_else(|| ApiError::not_found("transaction", raw)))
        .transpose()?;
    // The charges since the newest entry become its usage entry first, so the ledger
    // shows every charge and its newest entry's balance is the balance.
    Box::pin(state.ledger.settle(&tenant, state.clock.as_ref())).await?;
    let (entries, total) =
        Box::pin(state.ledger.transactions(&tenant, kind, after.as_ref(), page.skip(), page.page_size as usize))
            .await?;
    Ok(Json(page.respond(entries, total)))
}

/// Smallest and largest top-up, in cents.
const TOPUP_CENTS: (i64, i64) = (100, 1_000_000);

/// What a client completes a top-up with.
#[derive(Debug, Serialize)]
pub struct Topup {
    client_secret: String,
    payment_intent_id: String,
    amount_cents: i64,
    credits: i64,
}

/// `POST /billing/topup`: a Stripe PaymentIntent for `amount_cents`; the credits arrive
/// with its `payment_intent.succeeded` webhook, never before.
pub async fn topup(
    State(state): State<AppState>,
    tenant: TenantId,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Json<Topup>, ApiError> {
    let mut f = Fields::new(body)?;
    let amount = f.required("amount_cents", integer(TOPUP_CENTS.0, TOPUP_CENTS.1));
    f.finish()?;
    let amount = amount.ok_or_else(|| ApiError::internal("validated field missing"))?;
    let key = stripe_key(&headers, &tenant, "topup")?;
    let stripe = payments(&state)?;
    let (marker, value) = crate::webhook::TOPUP_MARKER;
    let form: Vec<(String, String)> = vec![
        ("amount".to_owned(), amount.to_string()),
        ("currency".to_owned(), "usd".to_owned()),
        ("payment_method_types[]".to_owned(), "card".to_owned()),
        ("metadata[tenant_id]".to_owned(), tenant.as_str().to_owned()),
        ("metadata[credits]".to_owned(), amount.to_string()),
        (format!("metadata[{marker}]"), value.to_owned()),
    ];
    let intent = stripe.create_payment_intent(&form, &key).await?;
    let client_secret = intent
        .client_secret
        .ok_or_else(|| ApiError::PaymentProcessor("the payment processor sent no client secret".to_owned()))?;
    Ok(Json(Topup { client_secret, payment_intent_id: intent.id, amount_cents: amount, credits: amount }))
}

/// The longest return URL accepted.
const MAX_URL_LEN: usize = 2048;

/// A body field holding an absolute `http` or `https` URL.
fn absolute_url(value: &Value) -> Result<String, String> {
    const MUST: &str = "must be an absolute http or https URL";
    let text = value.as_str().ok_or_else(|| MUST.to_owned())?;
    if text.len() > MAX_URL_LEN {
        return Err(format!("must be at most {MAX_URL_LEN} characters"));
    }
    let parsed = url::Url::parse(text).map_err(|_| MUST.to_owned())?;
    let web = matches!(parsed.scheme(), "http" | "https") && parsed.host_str().is_some_and(|h| !h.is_empty());
    if web { Ok(text.to_owned()) } else { Err(MUST.to_owned()) }
}

/// The request's `Idempotency-Key`, scoped to the tenant and the operation, or a fresh
/// one: what Cairn passes on to Stripe.
fn stripe_key(headers: &HeaderMap, tenant: &TenantId, operation: &str) -> Result<String, ApiError> {
    let key = shared::idempotency::key_of(headers)?.unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    // Scoped by tenant, so two tenants' keys never meet at Stripe.
    Ok(format!("{}:{operation}:{key}", tenant.as_str()))
}

fn payments(state: &AppState) -> Result<&Stripe, ApiError> {
    state.stripe.as_ref().ok_or_else(|| ApiError::Unavailable("payments are not configured".into()))
}

/// A hosted checkout page.
#[derive(Debug, Serialize)]
pub struct Checkout {
    checkout_url: String,
}

/// `POST /billing/subscriptions/create-checkout`: a Stripe Checkout Session in
/// subscription mode for the plan's price; the tenant's Stripe customer is created on
/// first use. 409 while a live subscription exists.
pub async fn create_checkout(
    State(state): State<AppState>,
    tenant: TenantId,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Json<Checkout>, ApiError> {
    let mut f = Fields::new(body)?;
    let plan = f.required("plan_id", one_of(Plan::ALL));
    let return_url = f.required("return_url", absolute_url);
    f.finish()?;
    let (Some(plan), Some(return_url)) = (plan, return_url) else {
        return Err(ApiError::internal("validated field missing"));
    };
    let key = stripe_key(&headers, &tenant, "checkout")?;
    let stripe = payments(&state)?;
    let price = state
        .plans
        .price(plan)
        .ok_or_else(|| ApiError::Unavailable(format!("STRIPE_PRICE_{} is not configured", plan.wire()).into()))?;
    let billing = state.subscriptions.read(&tenant).await?;
    if let Some(live) = billing.subscription.as_ref().filter(|s| s.is_live()) {
        return Err(ApiError::InvalidState(format!(
            "the account already has a live subscription ({}, status {}); cancel it or change plans in the portal",
            live.subscription_id, live.status
        )));
    }
    let customer = match billing.customer {
        // Stripe's own word too: a subscription paid whose event Cairn could not apply
        // yet (its sync failed) is not stored, and a second checkout would be a second
        // paid subscription.
        Some(customer) => {
            let running = stripe.live_subscriptions(&customer).await?;
            if let Some(live) = running.iter().find(|s| s.plan(&state.plans).is_some()) {
                return Err(ApiError::InvalidState(format!(
                    "the account already has a subscription at Stripe ({}, status {}) that Cairn will show once \
                     Stripe's event is applied; cancel it or change plans in the portal",
                    live.id, live.status
                )));
            }
            customer
        }
        None => {
            let form = [("metadata[tenant_id]".to_owned(), tenant.as_str().to_owned())];
            // One customer per tenant, even when two checkouts race.
            let created = stripe.create_customer(&form, &format!("{}:customer", tenant.as_str())).await?;
            state.subscriptions.link_customer(&tenant, &created.id).await?
        }
    };
    // At most one open Checkout Session per tenant: the same plan again gets the open
    // one (a double click, a retry); another plan expires it first. Two sessions paid
    // would be two subscriptions.
    let now = state.clock.now().timestamp();
    let open = billing.checkout.as_ref().filter(|c| c.expires_at > now + 60);
    if let Some(open) = open {
        if open.plan_id == plan.wire() {
            return Ok(Json(Checkout { checkout_url: open.url.clone() }));
        }
        end_checkout(stripe, open).await?;
    }
    let t = tenant.as_str().to_owned();
    let expires_at = now + CHECKOUT_LIFETIME_SECS;
    let form: Vec<(String, String)> = vec![
        ("mode".into(), "subscription".into()),
        ("expires_at".into(), expires_at.to_string()),
        ("customer".into(), customer),
        ("client_reference_id".into(), t.clone()),
        ("line_items[0][price]".into(), price.to_owned()),
        ("line_items[0][quantity]".into(), "1".into()),
        ("success_url".into(), return_url.clone()),
        ("cancel_url".into(), return_url),
        ("metadata[tenant_id]".into(), t.clone()),
        ("metadata[plan_id]".into(), plan.wire().into()),
        ("subscription_data[metadata][tenant_id]".into(), t),
        ("subscription_data[metadata][plan_id]".into(), plan.wire().into()),
    ];
    let session = stripe.create_checkout_session(&form, &key).await?;
    let session_id = session.id.clone();
    let next = OpenCheckout { session_id, url: session.page()?, plan_id: plan.wire().to_owned(), expires_at };
    if state.subscriptions.replace_checkout(&tenant, billing.checkout.as_ref(), &next).await? {
        return Ok(Json(Checkout { checkout_url: next.url }));
    }
    // Another request started a checkout at the same moment and recorded it first: this
    // session is withdrawn, and the client gets that one if it is for the same plan.
    end_checkout(stripe, &next).await?;
    match state.subscriptions.read(&tenant).await?.checkout {
        Some(winner) if winner.plan_id == plan.wire() => Ok(Json(Checkout { checkout_url: winner.url })),
        _ => Err(ApiError::InvalidState(
            "another checkout of this account was started at the same moment; try again".to_owned(),
        )),
    }
}

/// How long a Checkout Session stays payable (Stripe allows 30 minutes to 24 hours).
const CHECKOUT_LIFETIME_SECS: i64 = 60 * 60;

/// Makes `open` unpayable at Stripe. If it was paid meanwhile (no longer open), its
/// subscription is on its way: 409.
async fn end_checkout(stripe: &Stripe, open: &OpenCheckout) -> Result<(), ApiError> {
    match stripe.expire_checkout_session(&open.session_id).await {
        Ok(_) => Ok(()),
        Err(error) if error.status == Some(400) || error.status == Some(404) => {
            let session = stripe.checkout_session(&open.session_id).await;
            match session.ok().and_then(|s| s.status) {
                Some(status) if status == "complete" => Err(ApiError::InvalidState(
                    "a checkout of this account has just been paid; its subscription is being set up".to_owned(),
                )),
                _ => Ok(()),
            }
        }
        Err(error) => Err(error.into()),
    }
}

/// `GET /billing/subscriptions/status`: 404 when the tenant never subscribed.
pub async fn status(State(state): State<AppState>, tenant: TenantId) -> Result<Json<Subscription>, ApiError> {
    let billing = state.subscriptions.read(&tenant).await?;
    billing.subscription.map(Json).ok_or_else(|| ApiError::Absent("this account has no subscription".to_owned()))
}

/// A hosted customer-portal page.
#[derive(Debug, Serialize)]
pub struct Portal {
    portal_url: String,
}

/// `POST /billing/subscriptions/portal`: 404 before the tenant has a Stripe customer.
pub async fn portal(
    State(state): State<AppState>,
    tenant: TenantId,
    headers: HeaderMap,
    JsonBody(body): JsonBody,
) -> Result<Json<Portal>, ApiError> {
    let mut f = Fields::new(body)?;
    let return_url = f.required("return_url", absolute_url);
    f.finish()?;
    let return_url = return_url.ok_or_else(|| ApiError::internal("validated field missing"))?;
    let key = stripe_key(&headers, &tenant, "portal")?;
    let stripe = payments(&state)?;
    let customer = state.subscriptions.read(&tenant).await?.customer.ok_or_else(|| {
        ApiError::Absent("this account has no billing customer yet; start with create-checkout".to_owned())
    })?;
    let form = [("customer".to_owned(), customer), ("return_url".to_owned(), return_url)];
    let session = stripe.create_portal_session(&form, &key).await?;
    Ok(Json(Portal { portal_url: session.page()? }))
}

/// What a cancellation did.
#[derive(Debug, Serialize)]
pub struct Cancelled {
    subscription_id: String,
    status: String,
    message: String,
}

/// `POST /billing/subscriptions/cancel?immediately=false|true`: at the period's end
/// (status `cancel_at_period_end`, the message names the date) or now (`cancelled`).
/// 404 without a subscription, 409 when it is cancelled already.
pub async fn cancel(
    State(state): State<AppState>,
    tenant: TenantId,
    headers: HeaderMap,
    mut query: Query,
) -> Result<Json<Cancelled>, ApiError> {
    let immediately = query.boolean("immediately", false);
    query.finish()?;
    let stripe = payments(&state)?;
    let billing = state.subscriptions.read(&tenant).await?;
    let mut read_version = billing.subscription_version;
    let current =
        billing.subscription.ok_or_else(|| ApiError::Absent("this account has no subscription".to_owned()))?;
    if !current.is_live() {
        return Err(ApiError::InvalidState(format!("subscription {} is already cancelled", current.subscription_id)));
    }
    let id = &current.subscription_id;
    let mut updated = if immediately {
        stripe.cancel_subscription(id).await?
    } else {
        let form = [("cancel_at_period_end".to_owned(), "true".to_owned())];
        // The request's own key (or a fresh one): a fixed key per subscription made Stripe
        // answer a later cancellation (after a renewal undid the first) from its cache.
        let key = stripe_key(&headers, &tenant, &format!("cancel-at-period-end:{id}"))?;
        stripe.update_subscription(id, &form, &key).await?
    };
    // Stored unless a webhook stored a snapshot since the version was read; then Stripe
    // is read again, so the newer state wins either way.
    let mut tries = 0;
    let stored = loop {
        tries += 1;
        if tries > 5 {
            return Err(ApiError::Unavailable("the subscription kept changing; retry".into()));
        }
        let plan = updated
            .plan(&state.plans)
            .or_else(|| Plan::parse(&current.plan_id))
            .ok_or_else(|| ApiError::internal("a stored subscription without a plan"))?;
        let stored = updated.snapshot(plan);
        if state.subscriptions.store(&tenant, &stored, None, state.clock.now(), read_version).await? != Stored::Stale {
            break stored;
        }
        read_version = state.subscriptions.read(&tenant).await?.subscription_version;
        updated = stripe.subscription(id).await?;
    };
    let message = if stored.is_live() {
        let end = stored.current_period_end.as_deref().unwrap_or("the end of the current billing period");
        let date = end.get(..10).unwrap_or(end);
        format!(
            "The subscription stays active until the end of the current billing period on {date} ({end}) \
             and is cancelled then; no further invoices will be charged."
        )
    } else {
        "The subscription was cancelled immediately; no further invoices will be charged.".to_owned()
    };
    Ok(Json(Cancelled { subscription_id: stored.subscription_id, status: stored.status, message }))
}
