//! The MCP server (`/api/v1/mcp`): Cairn's API as tools for coding agents, over the
//! Model Context Protocol's Streamable HTTP transport, stateless.
//!
//! Each POST carries one JSON-RPC message and is answered on its own (`application/json`,
//! no session, no server-sent events), so the function scales to zero like the others.
//! The shared edge authenticates it as every route (the same key, rate limit and
//! tenant); each tool then needs the scope its API route needs, and is neither listed
//! nor run for a key without it. [`protocol`] speaks JSON-RPC, [`tools`] does the work
//! over `domain`.

pub mod diff;
pub mod prompts;
pub mod protocol;
pub mod resources;
pub mod tools;

use std::sync::Arc;

use aws_sdk_dynamodb::Client;
use axum::Router;
use axum::routing::post;
use shared::auth::AuthState;
use shared::dynamo::Tables;
use shared::http::BASE_PATH;
use shared::time::Clock;

use domain::credits::Ledger;
use domain::runs::Runs;
use domain::workflows::store::WorkflowStore;

/// Every route of this function: method and path (as in `template.yaml`, the watch
/// router and the OpenAPI document, which a test keeps in agreement).
pub const ROUTES: &[(&str, &str)] = &[("POST", "/api/v1/mcp")];

/// What the tools share, built once per cold start.
#[derive(Debug, Clone)]
pub struct AppState {
    /// Executions, checkpoints and failures.
    pub runs: Runs,
    /// Workflows.
    pub workflows: WorkflowStore,
    /// The credit balance.
    pub ledger: Ledger,
    /// Where "now" comes from.
    pub clock: Arc<dyn Clock>,
}

/// The function's router, with the shared edge (auth, errors, logs) around it. A `GET`
/// (the stream a stateful server would open) or `DELETE` (a session's end) is answered
/// 405, as the transport asks of a server that offers neither.
pub fn app(client: Client, tables: Tables, clock: Arc<dyn Clock>) -> Router {
    let auth = AuthState::new(client.clone(), tables.clone());
    let state = AppState {
        runs: Runs::new(client.clone(), tables.clone(), shared::config::execution_cost_credits()),
        workflows: WorkflowStore::new(client.clone(), tables.clone()),
        ledger: Ledger::new(client, tables),
        clock,
    };
    let routes = Router::new().route(&format!("{BASE_PATH}/mcp"), post(protocol::serve)).with_state(state);
    shared::http::api(routes, auth)
}
