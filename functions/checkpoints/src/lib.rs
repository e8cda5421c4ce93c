//! The checkpoints area (`/api/v1/checkpoints`): record an execution's state while it
//! runs, list an execution's checkpoints, and fetch a state for recovery.
//!
//! Storage and rules live in `domain::runs`, which replay and rollback share.

pub mod api;

use std::sync::Arc;

use aws_sdk_dynamodb::Client;
use axum::routing::get;
use axum::{Extension, Router};
use domain::runs::Runs;
use shared::auth::AuthState;
use shared::body::BodyLimit;
use shared::dynamo::Tables;
use shared::http::BASE_PATH;
use shared::time::Clock;

/// Every route of this function.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/api/v1/checkpoints"),
    ("POST", "/api/v1/checkpoints"),
    ("GET", "/api/v1/checkpoints/{checkpoint_id}"),
    ("DELETE", "/api/v1/checkpoints/{checkpoint_id}"),
    ("GET", "/api/v1/checkpoints/{checkpoint_id}/writes"),
    ("POST", "/api/v1/checkpoints/{checkpoint_id}/writes"),
];

/// Largest `POST /checkpoints` body: 6 MiB, Lambda's own request limit (a 4 MiB state
/// plus its JSON framing).
pub const CREATE_BODY_LIMIT: usize = 6 * 1024 * 1024;

/// What the handlers share, built once per cold start.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The run operations (checkpoints are recorded against executions).
    pub runs: Runs,
    /// Where "now" comes from.
    pub clock: Arc<dyn Clock>,
}

/// The function's router, with the shared edge (auth, errors, logs) around it.
pub fn app(client: Client, tables: Tables, clock: Arc<dyn Clock>) -> Router {
    let auth = AuthState::new(client.clone(), tables.clone());
    let state = AppState { runs: Runs::new(client, tables, shared::config::execution_cost_credits()), clock };
    let create = axum::routing::post(api::create).layer(Extension(BodyLimit(CREATE_BODY_LIMIT)));
    let routes = Router::new()
        .route(&format!("{BASE_PATH}/checkpoints"), get(api::list).merge(create))
        .route(&format!("{BASE_PATH}/checkpoints/{{checkpoint_id}}"), get(api::get).delete(api::delete))
        .route(
            &format!("{BASE_PATH}/checkpoints/{{checkpoint_id}}/writes"),
            get(api::list_writes)
                .merge(axum::routing::post(api::put_writes).layer(Extension(BodyLimit(CREATE_BODY_LIMIT)))),
        )
        .with_state(state);
    shared::http::api(routes, auth)
}
