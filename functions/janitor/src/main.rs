//! The janitor Lambda function (scheduled; no route).

use lambda_runtime::{LambdaEvent, service_fn};
use serde_json::Value;
use shared::config::Config;
use shared::time::SystemClock;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    shared::http::init_logging();
    let config = Config::from_env()?;
    let client = shared::dynamo::client().await;
    let erasures = domain::erasure::Erasures::new(client.clone(), config.tables.clone());
    let runs = domain::runs::Runs::new(client, config.tables, shared::config::execution_cost_credits());
    let (runs, erasures) = (&runs, &erasures);
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        let deadline = event.context.deadline;
        let deletions = janitor::sweep(runs, &SystemClock, deadline).await?;
        let tenants = janitor::erase(erasures, &SystemClock, deadline).await?;
        Ok::<Value, lambda_runtime::Error>(serde_json::json!({"deletions": deletions, "tenants": tenants}))
    }))
    .await
}
