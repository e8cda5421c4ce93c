//! The workflows area: register and manage workflows (`/api/v1/workflows`).
//!
//! [`app`] is the whole function as an `axum::Router`; `main.rs` only builds its
//! dependencies once per cold start and serves it through Lambda.

pub mod api;

use std::sync::Arc;

use aws_sdk_dynamodb::Client;
use axum::Router;
use axum::routing::get;
use shared::auth::AuthState;
use shared::dynamo::Tables;
use shared::http::BASE_PATH;
use shared::time::Clock;

use domain::workflows::store::WorkflowStore;

/// Every route of this function: method and path (as in `template.yaml`, the watch
/// router and the OpenAPI document, which a test keeps in agreement).
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/api/v1/workflows"),
    ("POST", "/api/v1/workflows"),
    ("GET", "/api/v1/workflows/{workflow_id}"),
    ("PUT", "/api/v1/workflows/{workflow_id}"),
    ("DELETE", "/api/v1/workflows/{workflow_id}"),
];

/// What the handlers share, built once per cold start.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The workflows store.
    pub store: WorkflowStore,
    /// The tenants' retention settings and plans (a workflow's own retention is checked
    /// against the plan).
    pub retention: domain::retention::RetentionStore,
    /// Where "now" comes from.
    pub clock: Arc<dyn Clock>,
}

/// The function's router, with the shared edge (auth, errors, logs) around it.
pub fn app(client: Client, tables: Tables, clock: Arc<dyn Clock>) -> Router {
    let auth = AuthState::new(client.clone(), tables.clone());
    let retention = domain::retention::RetentionStore::new(client.clone(), tables.clone());
    let state = AppState { store: WorkflowStore::new(client, tables), retention, clock };
    let routes = Router::new()
        .route(&format!("{BASE_PATH}/workflows"), get(api::list).post(api::create))
        .route(&format!("{BASE_PATH}/workflows/{{workflow_id}}"), get(api::get).put(api::update).delete(api::delete))
        .with_state(state);
    shared::http::api(routes, auth)
}
