//! `POST /billing/webhooks/stripe`: Stripe's events, authenticated by their signature.
//!
//! Each event is applied at most once: the event's id is written with a condition in the
//! same transaction as its effect, so a redelivery (or a concurrent duplicate) changes
//! nothing. Events that change nothing are answered 200 and not recorded. Subscription
//! events are applied from the Subscription as Stripe has it now (read back from Stripe),
//! so events arriving out of order cannot roll a subscription back.

use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};
use shared::auth::stripe;
use shared::dynamo::Part;
use shared::{ApiError, TenantId};

use crate::AppState;
use domain::credits::{EntryType, NewEntry, Reversal};
use domain::subscriptions::{EventRecord, Stored};

/// Metadata marking a PaymentIntent as a Cairn top-up (subscription invoices also
/// produce PaymentIntents, which must not credit).
pub const TOPUP_MARKER: (&str, &str) = ("cairn_kind", "topup");

#[derive(Debug, Deserialize)]
struct Event {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    data: EventData,
}

#[derive(Debug, Deserialize)]
struct EventData {
    object: Value,
}

impl Event {
    fn record(&self) -> EventRecord<'_> {
        EventRecord { id: &self.id, kind: &self.kind }
    }
}

/// `POST /billing/webhooks/stripe`
pub async fn stripe(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Result<Json<Value>, ApiError> {
    let secret = state
        .webhook_secret
        .as_deref()
        .ok_or_else(|| ApiError::Unavailable("STRIPE_WEBHOOK_SECRET is not configured".into()))?;
    let header = headers.get("stripe-signature").and_then(|v| v.to_str().ok());
    let verified = stripe::verify(header, &body, secret, state.clock.now().timestamp())?;
    let event: Event = serde_json::from_slice(verified.payload())
        .map_err(|_| ApiError::MalformedRequest("the body is not a Stripe event".to_owned()))?;
    let applied = match event.kind.as_str() {
        "payment_intent.succeeded" => topup(&state, &verified, &event).await?,
        "checkout.session.completed" => checkout_completed(&state, &verified, &event).await?,
        "customer.subscription.created" | "customer.subscription.updated" | "customer.subscription.deleted" => {
            let id = event.data.object["id"].as_str().unwrap_or_default();
            sync(&state, &verified, id, &event).await?
        }
        "invoice.paid" => invoice_paid(&state, &verified, &event).await?,
        "charge.refunded" => refunded(&state, &verified, &event).await?,
        "charge.dispute.created" | "charge.dispute.closed" => disputed(&state, &verified, &event).await?,
        _ => false,
    };
    Ok(Json(json!({"received": true, "applied": applied})))
}

/// Credits a succeeded top-up PaymentIntent once. Returns whether this delivery did.
async fn topup(state: &AppState, verified: &stripe::Verified<'_>, event: &Event) -> Result<bool, ApiError> {
    let intent = &event.data.object;
    let metadata = &intent["metadata"];
    if metadata[TOPUP_MARKER.0] != TOPUP_MARKER.1 {
        return Ok(false);
    }
    let Some(tenant) = metadata["tenant_id"].as_str().and_then(|t| verified.tenant(t)) else {
        tracing::warn!(event = event.id, "top-up without a valid tenant_id; ignored");
        return Ok(false);
    };
    let amount = intent["amount_received"].as_i64().filter(|a| *a > 0).or_else(|| intent["amount"].as_i64());
    let Some(credits) = amount.filter(|a| *a > 0) else {
        tracing::warn!(event = event.id, "top-up without an amount; ignored");
        return Ok(false);
    };
    let intent_id = intent["id"].as_str().unwrap_or("unknown");
    let entry = NewEntry {
        kind: EntryType::Topup,
        amount: credits,
        description: format!("Top-up via Stripe ({intent_id})"),
        payment_status: Some("completed".to_owned()),
    };
    Ok(state
        .ledger
        .record_once(&tenant, &entry, &[(&event.id, Part::Event)], &event.kind, state.clock.as_ref())
        .await?)
}

/// The Subscription `id` as Stripe has it now, with the tenant Cairn put in its
/// metadata; `None` when Stripe has no such subscription or it is not Cairn's.
async fn fetch(
    state: &AppState,
    verified: &stripe::Verified<'_>,
    id: &str,
) -> Result<Option<(TenantId, crate::stripe::Subscription)>, ApiError> {
    if id.is_empty() {
        return Ok(None);
    }
    let client = state.stripe.as_ref().ok_or_else(|| ApiError::Unavailable("payments are not configured".into()))?;
    let subscription = match client.subscription(id).await {
        Ok(subscription) => subscription,
        Err(e) if e.is_not_found() => {
            tracing::warn!(subscription = id, "an event names a subscription Stripe does not know; ignored");
            return Ok(None);
        }
        Err(e) => return Err(e.into()),
    };
    let tenant = subscription.metadata.get("tenant_id").and_then(|t| verified.tenant(t));
    if tenant.is_none() {
        tracing::warn!(subscription = id, "a subscription without Cairn's tenant_id; ignored");
    }
    Ok(tenant.map(|t| (t, subscription)))
}

/// Stores the subscription `id` as Stripe has it now, once per event. The stored
/// snapshot's version is read before Stripe is, and the store is conditioned on it: when
/// another delivery stored a snapshot meanwhile, Stripe is read again, so an older
/// snapshot never overwrites a newer one.
async fn sync(state: &AppState, verified: &stripe::Verified<'_>, id: &str, event: &Event) -> Result<bool, ApiError> {
    // The tenant, from the event's own copy of its object when it says (subscription and
    // checkout events do), else from a first read of the subscription.
    let hinted = event.data.object["metadata"]["tenant_id"].as_str().and_then(|t| verified.tenant(t));
    let tenant = match hinted {
        Some(tenant) => tenant,
        None => match fetch(state, verified, id).await? {
            Some((tenant, _)) => tenant,
            None => return Ok(false),
        },
    };
    for _ in 0..SYNC_ATTEMPTS {
        let read_version = state.subscriptions.read(&tenant).await?.subscription_version;
        let Some((owner, subscription)) = fetch(state, verified, id).await? else { return Ok(false) };
        if owner != tenant {
            tracing::warn!(subscription = id, "an event's tenant differs from its subscription's; ignored");
            return Ok(false);
        }
        let Some(plan) = subscription.plan(&state.plans) else {
            tracing::warn!(subscription = id, "a subscription on none of Cairn's plans; ignored");
            return Ok(false);
        };
        let stored = subscription.snapshot(plan);
        let now = state.clock.now();
        match state.subscriptions.store(&tenant, &stored, Some(event.record()), now, read_version).await? {
            Stored::Written => return Ok(true),
            Stored::Duplicate | Stored::Skipped => return Ok(false),
            Stored::Stale => {}
        }
    }
    Err(ApiError::Unavailable("the subscription kept changing; Stripe will deliver the event again".into()))
}

/// Reads of Stripe and stores of one event before it is left to Stripe's redelivery.
const SYNC_ATTEMPTS: u32 = 5;

/// A completed checkout: links the customer to the tenant and stores the subscription.
async fn checkout_completed(
    state: &AppState,
    verified: &stripe::Verified<'_>,
    event: &Event,
) -> Result<bool, ApiError> {
    let session = &event.data.object;
    let tenant = session["metadata"]["tenant_id"]
        .as_str()
        .or_else(|| session["client_reference_id"].as_str())
        .and_then(|t| verified.tenant(t));
    if let (Some(tenant), Some(customer)) = (&tenant, session["customer"].as_str()) {
        state.subscriptions.link_customer(tenant, customer).await?;
    }
    if let (Some(tenant), Some(id)) = (&tenant, session["id"].as_str()) {
        state.subscriptions.checkout_done(tenant, id).await?;
    }
    match session["subscription"].as_str() {
        Some(id) => sync(state, verified, id, event).await,
        None => Ok(false),
    }
}

/// A paid subscription invoice: the monthly credits of the plans its lines bill, once
/// per invoice: what was paid for, whatever plan the subscription is on by the time the
/// event is handled. Proration invoices (`billing_reason` `subscription_update`) and
/// proration lines, invoices of 0 or without `amount_paid`, and lines of no Cairn plan
/// grant nothing.
async fn invoice_paid(state: &AppState, verified: &stripe::Verified<'_>, event: &Event) -> Result<bool, ApiError> {
    let invoice = &event.data.object;
    let subscription_id =
        invoice["subscription"].as_str().or_else(|| invoice["parent"]["subscription_details"]["subscription"].as_str());
    let (Some(invoice_id), Some(subscription_id)) = (invoice["id"].as_str(), subscription_id) else {
        return Ok(false);
    };
    if invoice["billing_reason"] == "subscription_update" {
        return Ok(false);
    }
    // Nothing paid (a trial's invoice, or one settled by a 100 % coupon), or not said:
    // no credits.
    if invoice["amount_paid"].as_i64().is_none_or(|paid| paid <= 0) {
        return Ok(false);
    }
    let billed = billed_plans(&state.plans, invoice);
    let credits: i64 = billed.iter().map(|(plan, quantity)| state.plans.credits(*plan).saturating_mul(*quantity)).sum();
    if credits <= 0 {
        tracing::warn!(invoice = invoice_id, "a paid invoice with no line of a Cairn plan; no credits");
        return Ok(false);
    }
    // The tenant is the subscription's, as Stripe has it (its metadata is Cairn's).
    let Some((tenant, _)) = fetch(state, verified, subscription_id).await? else { return Ok(false) };
    let names: Vec<&str> = billed.iter().map(|(plan, _)| shared::body::WireEnum::wire(*plan)).collect();
    let entry = NewEntry {
        kind: EntryType::Subscription,
        amount: credits,
        description: format!("{} plan: monthly credits (invoice {invoice_id})", names.join(" + ")),
        payment_status: Some("completed".to_owned()),
    };
    let invoice_marker = format!("invoice:{invoice_id}");
    let markers = [(event.id.as_str(), Part::Event), (invoice_marker.as_str(), Part::Invoice)];
    Ok(state.ledger.record_once(&tenant, &entry, &markers, &event.kind, state.clock.as_ref()).await?)
}

/// The Cairn plans an invoice's lines bill, each with its quantity: the lines' prices
/// (`price`, `plan`, or `pricing.price_details.price` as Stripe's API versions name it),
/// proration lines aside.
fn billed_plans(plans: &domain::subscriptions::Plans, invoice: &Value) -> Vec<(domain::subscriptions::Plan, i64)> {
    let lines = invoice["lines"]["data"].as_array().map(Vec::as_slice).unwrap_or_default();
    lines
        .iter()
        .filter(|line| line["proration"] != true)
        .filter_map(|line| {
            let price = line["price"]["id"]
                .as_str()
                .or_else(|| line["plan"]["id"].as_str())
                .or_else(|| line["pricing"]["price_details"]["price"].as_str());
            let plan = plans.plan_of(price, None)?;
            Some((plan, line["quantity"].as_i64().unwrap_or(1).max(1)))
        })
        .collect()
}

/// What a charge paid for, as Cairn credited it: the tenant, the credits it granted and
/// the amount (cents) they were granted for.
struct Paid {
    tenant: TenantId,
    credits: i64,
    amount: i64,
    what: String,
}

impl Paid {
    /// The credits `cents` of the payment stand for (rounded down).
    fn credits_for(&self, cents: i64) -> i64 {
        if self.amount <= 0 {
            return 0;
        }
        let cents = cents.clamp(0, self.amount);
        i64::try_from(i128::from(self.credits) * i128::from(cents) / i128::from(self.amount)).unwrap_or(self.credits)
    }
}

/// What charge `charge` (as Stripe sent or has it) paid for: a Cairn top-up (its
/// PaymentIntent says so), or a subscription invoice of a Cairn plan (its lines say which);
/// `None` for anything else.
async fn paid_by(state: &AppState, verified: &stripe::Verified<'_>, charge: &Value) -> Result<Option<Paid>, ApiError> {
    let client = state.stripe.as_ref().ok_or_else(|| ApiError::Unavailable("payments are not configured".into()))?;
    let found = |e: &crate::stripe::StripeError| e.is_not_found();
    // The charge's invoice, else its PaymentIntent's (as older API versions and the local
    // Stripe put it).
    let mut invoice_id = charge["invoice"].as_str().map(str::to_owned);
    if let Some(intent_id) = charge["payment_intent"].as_str() {
        let intent = match client.object("payment_intents", intent_id).await {
            Ok(intent) => intent,
            Err(e) if found(&e) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if intent["metadata"][TOPUP_MARKER.0] == TOPUP_MARKER.1 {
            let Some(tenant) = intent["metadata"]["tenant_id"].as_str().and_then(|t| verified.tenant(t)) else {
                return Ok(None);
            };
            let amount = intent["amount_received"].as_i64().filter(|a| *a > 0).or_else(|| intent["amount"].as_i64());
            let Some(amount) = amount.filter(|a| *a > 0) else { return Ok(None) };
            return Ok(Some(Paid { tenant, credits: amount, amount, what: format!("top-up {intent_id}") }));
        }
        invoice_id = invoice_id.or_else(|| intent["invoice"].as_str().map(str::to_owned));
    }
    let Some(invoice_id) = invoice_id else { return Ok(None) };
    let invoice = match client.object("invoices", &invoice_id).await {
        Ok(invoice) => invoice,
        Err(e) if found(&e) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let subscription =
        invoice["subscription"].as_str().or_else(|| invoice["parent"]["subscription_details"]["subscription"].as_str());
    let Some(subscription) = subscription else { return Ok(None) };
    let Some((tenant, _)) = fetch(state, verified, subscription).await? else { return Ok(None) };
    let credits: i64 = billed_plans(&state.plans, &invoice)
        .iter()
        .map(|(plan, quantity)| state.plans.credits(*plan).saturating_mul(*quantity))
        .sum();
    let amount = invoice["amount_paid"].as_i64().unwrap_or(0);
    Ok((credits > 0 && amount > 0).then(|| Paid { tenant, credits, amount, what: format!("invoice {invoice_id}") }))
}

/// A refund of a charge (`charge.refunded`, whose `amount_refunded` is the total so far):
/// the credits the refunded part bought are taken back, once, even below 0.
async fn refunded(state: &AppState, verified: &stripe::Verified<'_>, event: &Event) -> Result<bool, ApiError> {
    let charge = &event.data.object;
    let Some(charge_id) = charge["id"].as_str() else { return Ok(false) };
    let Some(paid) = paid_by(state, verified, charge).await? else { return Ok(false) };
    let refunded = charge["amount_refunded"].as_i64().unwrap_or(0);
    let tally = format!("refund:{charge_id}");
    let reversal = Reversal {
        tally: &tally,
        target: paid.credits_for(refunded),
        kind: EntryType::Refund,
        description: format!("Refund of {} ({charge_id})", paid.what),
        event_id: &event.id,
        event_kind: &event.kind,
    };
    Ok(state.ledger.reverse(&paid.tenant, &reversal, state.clock.as_ref()).await?)
}

/// A dispute of a charge: its credits are taken back when it opens (Stripe takes the
/// money then) and stay so if it is lost; given back if it is won.
async fn disputed(state: &AppState, verified: &stripe::Verified<'_>, event: &Event) -> Result<bool, ApiError> {
    let dispute = &event.data.object;
    let (Some(dispute_id), Some(charge_id)) = (dispute["id"].as_str(), dispute["charge"].as_str()) else {
        return Ok(false);
    };
    let client = state.stripe.as_ref().ok_or_else(|| ApiError::Unavailable("payments are not configured".into()))?;
    let charge = match client.object("charges", charge_id).await {
        Ok(charge) => charge,
        Err(e) if e.is_not_found() => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    let Some(paid) = paid_by(state, verified, &charge).await? else { return Ok(false) };
    let status = dispute["status"].as_str().unwrap_or_default();
    let taken = event.kind == "charge.dispute.created" || status == "lost";
    let target = if taken { paid.credits_for(dispute["amount"].as_i64().unwrap_or(0)) } else { 0 };
    let tally = format!("dispute:{dispute_id}");
    let reversal = Reversal {
        tally: &tally,
        target,
        kind: EntryType::Dispute,
        description: format!("Dispute {dispute_id} ({status}) of {} ({charge_id})", paid.what),
        event_id: &event.id,
        event_kind: &event.kind,
    };
    Ok(state.ledger.reverse(&paid.tenant, &reversal, state.clock.as_ref()).await?)
}
