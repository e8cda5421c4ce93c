//! The MCP Lambda function.

use std::sync::Arc;

use shared::config::Config;
use shared::time::SystemClock;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::init_logging();
    let config = Config::from_env()?;
    let client = shared::dynamo::client().await;
    shared::http::run(mcp::app(client, config.tables, Arc::new(SystemClock))).await
}
