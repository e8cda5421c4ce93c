//! `POST /billing/webhooks/stripe`: Stripe's events, authenticated by their signature.
//!
//! Each event is applied at most once: the event's id is written with a condition in the
//! same transaction as its effect, so a redelivery (or a concurrent duplicate) changes
//! nothing. Events that change nothing are answered 200 and not recorded.

use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use axum::Json;
use axum::extract::State;
use axum::http::HeaderMap;
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};
use shared::ApiError;
use shared::auth::stripe;
use shared::dynamo::{StoreError, Table, Transaction, TransactionError, backoff, built, n, s};

use crate::AppState;
use crate::ledger::{EntryType, NewEntry, RACE_ATTEMPTS, is_race};

/// Days an applied event's id is kept (Stripe retries deliveries for 3 days).
const EVENT_RETENTION_DAYS: i64 = 30;
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
    for attempt in 0..RACE_ATTEMPTS {
        if attempt > 0 {
            tokio::time::sleep(backoff(attempt)).await;
        }
        let now = state.clock.now();
        let mut tx = Transaction::new();
        let expires = now.timestamp() + EVENT_RETENTION_DAYS * 86_400;
        let put = Put::builder()
            .table_name(state.tables.name(Table::StripeEvents))
            .item("tenant_id", s(tenant.as_str()))
            .item("event_id", s(&event.id))
            .item("type", s(&event.kind))
            .item("expires_at", n(expires))
            .condition_expression("attribute_not_exists(event_id)");
        tx.push("event", TransactWriteItem::builder().put(built(put.build())?).build());
        let account = state.ledger.account(&tenant).await?;
        let entry = NewEntry {
            kind: EntryType::Topup,
            amount: credits,
            description: format!("Top-up via Stripe ({intent_id})"),
            payment_status: Some("completed".to_owned()),
        };
        state.ledger.stage(&mut tx, &tenant, account, entry, now)?;
        match tx.commit(state.ledger.client()).await {
            Ok(()) => return Ok(true),
            Err(TransactionError::Condition("event")) => return Ok(false),
            Err(e) if is_race(&e) => {}
            Err(other) => return Err(other.into()),
        }
    }
    Err(StoreError::Conflict.into())
}
