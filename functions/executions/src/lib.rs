//! The executions area (`/api/v1/executions`): start runs, report their outcome
//! (complete, fail, pause, cancel), replay and roll back, one at a time or in bulk; and
//! the retention settings that say how long ended executions are kept, and exports of a
//! tenant's records (run in rounds by the jobs function).
//!
//! The rules and storage of runs (executions, checkpoints, failures) live in
//! `domain::runs`, which the checkpoints and failures functions share.

pub mod api;
pub mod bulk;
pub mod exports;
pub mod settings;

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
    ("GET", "/api/v1/executions"),
    ("POST", "/api/v1/executions"),
    ("GET", "/api/v1/executions/stats"),
    ("GET", "/api/v1/executions/bulk"),
    ("POST", "/api/v1/executions/bulk"),
    ("GET", "/api/v1/executions/bulk/{bulk_id}"),
    ("POST", "/api/v1/executions/bulk/{bulk_id}/cancel"),
    ("GET", "/api/v1/executions/{execution_id}"),
    ("DELETE", "/api/v1/executions/{execution_id}"),
    ("POST", "/api/v1/executions/{execution_id}/complete"),
    ("POST", "/api/v1/executions/{execution_id}/fail"),
    ("POST", "/api/v1/executions/{execution_id}/pause"),
    ("POST", "/api/v1/executions/{execution_id}/cancel"),
    ("POST", "/api/v1/executions/{execution_id}/replay"),
    ("GET", "/api/v1/executions/{execution_id}/replay-preview"),
    ("POST", "/api/v1/executions/{execution_id}/rollback"),
    ("POST", "/api/v1/exports"),
    ("GET", "/api/v1/exports/{export_id}"),
    ("GET", "/api/v1/exports/{export_id}/parts/{part}"),
    ("GET", "/api/v1/settings/retention"),
    ("PUT", "/api/v1/settings/retention"),
];

/// What the handlers share, built once per cold start.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The run operations (and their stores).
    pub runs: Runs,
    /// Where "now" comes from.
    pub clock: Arc<dyn Clock>,
}

impl AppState {
    /// The state over one client and the named tables.
    pub fn new(client: Client, tables: Tables, clock: Arc<dyn Clock>) -> Self {
        Self { runs: Runs::new(client, tables, shared::config::execution_cost_credits()), clock }
    }
}

/// The function's router, with the shared edge (auth, errors, logs) around it.
pub fn app(client: Client, tables: Tables, clock: Arc<dyn Clock>) -> Router {
    let auth = AuthState::new(client.clone(), tables.clone());
    let state = AppState::new(client, tables, clock);
    let one = format!("{BASE_PATH}/executions/{{execution_id}}");
    let routes = Router::new()
        .route(&format!("{BASE_PATH}/executions"), get(api::list).post(api::create))
        .route(&format!("{BASE_PATH}/executions/stats"), get(api::stats))
        .route(&format!("{BASE_PATH}/executions/bulk"), get(bulk::list).post(bulk::create))
        .route(&format!("{BASE_PATH}/executions/bulk/{{bulk_id}}"), get(bulk::get))
        .route(&format!("{BASE_PATH}/executions/bulk/{{bulk_id}}/cancel"), post(bulk::cancel))
        .route(&one, get(api::get).delete(api::delete))
        .route(&format!("{one}/complete"), post(api::complete))
        .route(&format!("{one}/fail"), post(api::fail))
        .route(&format!("{one}/pause"), post(api::pause))
        .route(&format!("{one}/cancel"), post(api::cancel))
        .route(&format!("{one}/replay"), post(api::replay))
        .route(&format!("{one}/replay-preview"), get(api::replay_preview))
        .route(&format!("{one}/rollback"), post(api::rollback))
        .route(&format!("{BASE_PATH}/settings/retention"), get(settings::get).put(settings::put))
        .route(&format!("{BASE_PATH}/exports"), post(exports::create))
        .route(&format!("{BASE_PATH}/exports/{{export_id}}"), get(exports::get))
        .route(&format!("{BASE_PATH}/exports/{{export_id}}/parts/{{part}}"), get(exports::part))
        .with_state(state);
    shared::http::api(routes, auth)
}
