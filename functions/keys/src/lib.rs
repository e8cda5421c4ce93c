//! The keys area (`/api/v1/keys`): a tenant manages its own API keys (list, create,
//! revoke), as the dashboard does. The operator's `cairn-admin` makes a tenant's first
//! key; storage and rules live in `domain::keys`. A tenant asks here for its own
//! deletion too (`/account/deletion`: its keys revoked at once, `domain::erasure`).

pub mod account;
pub mod api;

use std::sync::Arc;

use aws_sdk_dynamodb::Client;
use axum::Router;
use axum::routing::{delete, get, post};
use domain::erasure::Erasures;
use domain::keys::KeyStore;
use shared::auth::AuthState;
use shared::dynamo::Tables;
use shared::http::BASE_PATH;
use shared::time::Clock;

/// Every route of this function.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/api/v1/keys"),
    ("POST", "/api/v1/keys"),
    ("DELETE", "/api/v1/keys/{key_id}"),
    ("POST", "/api/v1/account/deletion"),
];

/// What the handlers share, built once per cold start.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The tenants' keys.
    pub keys: KeyStore,
    /// Tenant deletions.
    pub erasures: Erasures,
    /// Where "now" comes from.
    pub clock: Arc<dyn Clock>,
}

/// The function's router, with the shared edge (auth, errors, logs) around it.
pub fn app(client: Client, tables: Tables, clock: Arc<dyn Clock>) -> Router {
    let auth = AuthState::new(client.clone(), tables.clone());
    let erasures = Erasures::new(client.clone(), tables.clone());
    let state = AppState { keys: KeyStore::new(client, tables), erasures, clock };
    let routes = Router::new()
        .route(&format!("{BASE_PATH}/keys"), get(api::list).post(api::create))
        .route(&format!("{BASE_PATH}/keys/{{key_id}}"), delete(api::revoke))
        .route(&format!("{BASE_PATH}/account/deletion"), post(account::request_deletion))
        .with_state(state);
    shared::http::api(routes, auth)
}
