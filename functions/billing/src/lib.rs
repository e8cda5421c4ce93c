//! The billing area (`/api/v1/billing`): the credit balance and its ledger.
//!
//! 1 credit = US$0.01. Credits are spent by execution starts and replays (charged by the
//! executions function through `domain::credits`, in the same transaction as the
//! execution) and granted by operators (`cairn-admin credits grant`) and by Stripe
//! top-ups, whose `payment_intent.succeeded` events arrive at [`webhook`];
//! `POST /billing/topup` creates their PaymentIntents through [`stripe`], the one place
//! that talks to Stripe. Subscriptions (`domain::subscriptions`) are sold through Stripe
//! Checkout; their paid invoices grant the plan's monthly credits.

pub mod api;
pub mod stripe;
pub mod webhook;

use std::sync::Arc;

use aws_sdk_dynamodb::Client;
use axum::Router;
use axum::routing::{get, post};
use domain::credits::Ledger;
use domain::subscriptions::{Plans, Subscriptions};
use shared::auth::AuthState;
use shared::dynamo::Tables;
use shared::http::BASE_PATH;
use shared::time::Clock;

/// Every route of this function.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/api/v1/billing/balance"),
    ("GET", "/api/v1/billing/transactions"),
    ("GET", "/api/v1/billing/usage"),
    ("POST", "/api/v1/billing/topup"),
    ("POST", "/api/v1/billing/subscriptions/create-checkout"),
    ("GET", "/api/v1/billing/subscriptions/status"),
    ("POST", "/api/v1/billing/subscriptions/portal"),
    ("POST", "/api/v1/billing/subscriptions/cancel"),
    ("POST", "/api/v1/billing/webhooks/stripe"),
];

/// The routes served without an API key (authenticated by their own means).
pub const PUBLIC_ROUTES: &[(&str, &str)] = &[("POST", "/api/v1/billing/webhooks/stripe")];

/// What the handlers share, built once per cold start.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The ledger.
    pub ledger: Ledger,
    /// The table names.
    pub tables: Tables,
    /// The Stripe webhook signing secret, if configured.
    pub webhook_secret: Option<String>,
    /// Stripe's API, if configured (`STRIPE_SECRET_KEY`).
    pub stripe: Option<stripe::Stripe>,
    /// The tenants' Stripe customers and subscriptions.
    pub subscriptions: Subscriptions,
    /// The plans' prices and credits.
    pub plans: Plans,
    /// Where "now" comes from.
    pub clock: Arc<dyn Clock>,
}

/// The function's router, with the shared edge (auth, errors, logs) around it.
pub fn app(client: Client, tables: Tables, clock: Arc<dyn Clock>) -> Router {
    let auth = AuthState::new(client.clone(), tables.clone());
    let state = AppState {
        ledger: Ledger::new(client.clone(), tables.clone()),
        subscriptions: Subscriptions::new(client, tables.clone()),
        plans: Plans::from_env(),
        tables,
        webhook_secret: shared::config::stripe_webhook_secret(),
        stripe: stripe::Stripe::from_env(),
        clock,
    };
    let routes = Router::new()
        .route(&format!("{BASE_PATH}/billing/balance"), get(api::balance))
        .route(&format!("{BASE_PATH}/billing/transactions"), get(api::transactions))
        .route(&format!("{BASE_PATH}/billing/usage"), get(api::usage))
        .route(&format!("{BASE_PATH}/billing/topup"), post(api::topup))
        .route(&format!("{BASE_PATH}/billing/subscriptions/create-checkout"), post(api::create_checkout))
        .route(&format!("{BASE_PATH}/billing/subscriptions/status"), get(api::status))
        .route(&format!("{BASE_PATH}/billing/subscriptions/portal"), post(api::portal))
        .route(&format!("{BASE_PATH}/billing/subscriptions/cancel"), post(api::cancel))
        .with_state(state.clone());
    let public =
        Router::new().route(&format!("{BASE_PATH}/billing/webhooks/stripe"), post(webhook::stripe)).with_state(state);
    shared::http::api_with_public(routes, public, auth)
}
