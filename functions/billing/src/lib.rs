//! The billing area (`/api/v1/billing`): the credit balance and its ledger.
//!
//! 1 credit = US$0.01. Credits are spent by execution starts and replays (charged by the
//! executions function through [`ledger`], in the same transaction as the execution) and
//! granted by operators (`cairn-admin credits grant`). Stripe top-ups and subscriptions
//! are not built yet.

pub mod api;
pub mod ledger;

use std::sync::Arc;

use aws_sdk_dynamodb::Client;
use axum::Router;
use axum::routing::get;
use shared::dynamo::Tables;
use shared::http::{AuthState, BASE_PATH};
use shared::time::Clock;

use crate::ledger::Ledger;

/// Every route of this function.
pub const ROUTES: &[(&str, &str)] = &[("GET", "/api/v1/billing/balance"), ("GET", "/api/v1/billing/transactions")];

/// What the handlers share, built once per cold start.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The ledger.
    pub ledger: Ledger,
    /// Where "now" comes from.
    pub clock: Arc<dyn Clock>,
}

/// The function's router, with the shared edge (auth, errors, logs) around it.
pub fn app(client: Client, tables: Tables, clock: Arc<dyn Clock>) -> Router {
    let auth = AuthState { client: client.clone(), tables: tables.clone() };
    let state = AppState { ledger: Ledger::new(client, tables), clock };
    let routes = Router::new()
        .route(&format!("{BASE_PATH}/billing/balance"), get(api::balance))
        .route(&format!("{BASE_PATH}/billing/transactions"), get(api::transactions))
        .with_state(state);
    shared::http::api(routes, auth)
}
