//! The billing endpoints.

use axum::Json;
use axum::extract::State;
use serde::Serialize;
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
