//! The billing endpoints.

use axum::Json;
use axum::extract::State;
use http::HeaderMap;
use serde::Serialize;
use shared::body::{Fields, JsonBody, integer};
use shared::pagination::{PageBody, PageRequest};
use shared::query::Query;
use shared::{ApiError, TenantId};

use crate::AppState;
use crate::ledger::{Entry, EntryType};

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
    let account = state.ledger.account(&tenant).await?;
    Ok(Json(Balance { credits_balance: account.credits, balance_usd: account.credits as f64 / 100.0 }))
}

/// `GET /billing/transactions`
pub async fn transactions(
    State(state): State<AppState>,
    tenant: TenantId,
    mut query: Query,
) -> Result<Json<PageBody<Entry>>, ApiError> {
    let kind = query.one_of::<EntryType>("type");
    let page = PageRequest::read(&mut query, DEFAULT_PAGE_SIZE);
    query.finish()?;
    let (entries, total) = Box::pin(state.ledger.list(&tenant, kind, page.skip(), page.page_size as usize)).await?;
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
    let key = match headers.get("idempotency-key") {
        None => uuid::Uuid::now_v7().to_string(),
        Some(value) => value
            .to_str()
            .ok()
            .filter(|k| (1..=255).contains(&k.len()))
            .map(str::to_owned)
            .ok_or_else(|| ApiError::field("Idempotency-Key", "must be 1 to 255 visible ASCII characters"))?,
    };
    let stripe = state.stripe.as_ref().ok_or_else(|| ApiError::Unavailable("payments are not configured".into()))?;
    let (marker, value) = crate::webhook::TOPUP_MARKER;
    let form: Vec<(String, String)> = vec![
        ("amount".to_owned(), amount.to_string()),
        ("currency".to_owned(), "usd".to_owned()),
        ("payment_method_types[]".to_owned(), "card".to_owned()),
        ("metadata[tenant_id]".to_owned(), tenant.as_str().to_owned()),
        ("metadata[credits]".to_owned(), amount.to_string()),
        (format!("metadata[{marker}]"), value.to_owned()),
    ];
    // Scoped by tenant, so two tenants' keys never meet at Stripe.
    let intent = stripe.create_payment_intent(&form, &format!("{}:topup:{key}", tenant.as_str())).await?;
    let client_secret = intent
        .client_secret
        .ok_or_else(|| ApiError::PaymentProcessor("the payment processor sent no client secret".to_owned()))?;
    Ok(Json(Topup { client_secret, payment_intent_id: intent.id, amount_cents: amount, credits: amount }))
}
