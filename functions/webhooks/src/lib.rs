//! The webhooks area (`/api/v1/webhook-endpoints`): a tenant registers the URLs its
//! events are posted to, rotates their signing secrets, sends a test event, and reads
//! and retries deliveries. Events are written by the changes they report and delivered
//! by the `dispatcher` function; storage and rules live in `domain::webhooks`.

pub mod api;

use std::sync::Arc;

use aws_sdk_dynamodb::Client;
use axum::Router;
use axum::routing::{get, post};
use domain::webhooks::address::Policy;
use domain::webhooks::{Deliveries, Endpoints, SecretBox};
use domain::workflows::store::WorkflowStore;
use shared::auth::AuthState;
use shared::dynamo::Tables;
use shared::http::BASE_PATH;
use shared::time::Clock;

/// Every route of this function.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/api/v1/webhook-endpoints"),
    ("POST", "/api/v1/webhook-endpoints"),
    ("GET", "/api/v1/webhook-endpoints/{endpoint_id}"),
    ("PATCH", "/api/v1/webhook-endpoints/{endpoint_id}"),
    ("DELETE", "/api/v1/webhook-endpoints/{endpoint_id}"),
    ("POST", "/api/v1/webhook-endpoints/{endpoint_id}/rotate-secret"),
    ("POST", "/api/v1/webhook-endpoints/{endpoint_id}/test"),
    ("GET", "/api/v1/webhook-endpoints/{endpoint_id}/deliveries"),
    ("POST", "/api/v1/webhook-endpoints/{endpoint_id}/deliveries/{delivery_id}/retry"),
];

/// What the handlers share, built once per cold start.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The endpoints.
    pub endpoints: Endpoints,
    /// Their deliveries.
    pub deliveries: Deliveries,
    /// Workflows (an endpoint's workflow filter names one of the tenant's).
    pub workflows: WorkflowStore,
    /// The key secrets are sealed with; `None` when not configured (503).
    pub secrets: Option<SecretBox>,
    /// Which URLs are allowed.
    pub policy: Policy,
    /// The events table, for test events.
    pub client: Client,
    /// The tables.
    pub tables: Tables,
    /// Where "now" comes from.
    pub clock: Arc<dyn Clock>,
}

/// The function's router, with the shared edge (auth, errors, logs) around it.
pub fn app(client: Client, tables: Tables, clock: Arc<dyn Clock>) -> Router {
    let auth = AuthState::new(client.clone(), tables.clone());
    let state = AppState {
        endpoints: Endpoints::new(client.clone(), tables.clone()),
        deliveries: Deliveries::new(client.clone(), tables.clone()),
        workflows: WorkflowStore::new(client.clone(), tables.clone()),
        secrets: SecretBox::from_env().ok(),
        policy: Policy::from_env(),
        client,
        tables,
        clock,
    };
    let base = format!("{BASE_PATH}/webhook-endpoints");
    let routes = Router::new()
        .route(&base, get(api::list).post(api::create))
        .route(&format!("{base}/{{endpoint_id}}"), get(api::get).patch(api::update).delete(api::delete))
        .route(&format!("{base}/{{endpoint_id}}/rotate-secret"), post(api::rotate))
        .route(&format!("{base}/{{endpoint_id}}/test"), post(api::test))
        .route(&format!("{base}/{{endpoint_id}}/deliveries"), get(api::deliveries))
        .route(&format!("{base}/{{endpoint_id}}/deliveries/{{delivery_id}}/retry"), post(api::retry))
        .with_state(state);
    shared::http::api(routes, auth)
}
