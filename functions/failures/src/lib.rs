//! The failures area (`/api/v1/failures`): investigate failed runs and track them to
//! resolution. Failures are recorded by the executions function when an execution
//! fails; their records and rules live in `domain::runs`.

pub mod api;

use std::sync::Arc;

use aws_sdk_dynamodb::Client;
use axum::Router;
use axum::routing::{get, post};
use domain::runs::Runs;
use shared::auth::AuthState;
use shared::dynamo::Tables;
use shared::http::BASE_PATH;
use shared::time::Clock;

/// Every route of this function.
pub const ROUTES: &[(&str, &str)] = &[
    ("GET", "/api/v1/failures"),
    ("GET", "/api/v1/failures/stats"),
    ("GET", "/api/v1/failures/groups"),
    ("GET", "/api/v1/failures/groups/{group_id}"),
    ("POST", "/api/v1/failures/groups/{group_id}/resolve"),
    ("POST", "/api/v1/failures/groups/{group_id}/ignore"),
    ("GET", "/api/v1/failures/{failure_id}"),
    ("POST", "/api/v1/failures/{failure_id}/resolve"),
    ("POST", "/api/v1/failures/{failure_id}/ignore"),
];

/// What the handlers share, built once per cold start.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The run operations (failures belong to executions).
    pub runs: Runs,
    /// Where "now" comes from: the 30-day window of the statistics moves with it.
    pub clock: Arc<dyn Clock>,
}

/// The function's router, with the shared edge (auth, errors, logs) around it.
pub fn app(client: Client, tables: Tables, clock: Arc<dyn Clock>) -> Router {
    let auth = AuthState::new(client.clone(), tables.clone());
    let state = AppState { runs: Runs::new(client, tables, shared::config::execution_cost_credits()), clock };
    let one = format!("{BASE_PATH}/failures/{{failure_id}}");
    let group = format!("{BASE_PATH}/failures/groups/{{group_id}}");
    let routes = Router::new()
        .route(&format!("{BASE_PATH}/failures"), get(api::list))
        .route(&format!("{BASE_PATH}/failures/stats"), get(api::stats))
        .route(&format!("{BASE_PATH}/failures/groups"), get(api::groups))
        .route(&group, get(api::group))
        .route(&format!("{group}/resolve"), post(api::resolve_group))
        .route(&format!("{group}/ignore"), post(api::ignore_group))
        .route(&one, get(api::get))
        .route(&format!("{one}/resolve"), post(api::resolve))
        .route(&format!("{one}/ignore"), post(api::ignore))
        .with_state(state);
    shared::http::api(routes, auth)
}
