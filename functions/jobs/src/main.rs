//! The jobs Lambda function (the jobs table's stream; no route).

use lambda_runtime::{LambdaEvent, service_fn};
use serde_json::Value;
use shared::config::Config;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    shared::http::init_logging();
    let config = Config::from_env()?;
    let client = shared::dynamo::client().await;
    let jobs = jobs::Jobs::new(client, config.tables);
    let jobs = &jobs;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        Ok::<Value, lambda_runtime::Error>(jobs.handle(event.payload, event.context.deadline).await)
    }))
    .await
}
