//! The dispatcher Lambda function (DynamoDB stream and schedule; no route).

use lambda_runtime::{LambdaEvent, service_fn};
use serde_json::Value;
use shared::config::Config;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    shared::http::init_logging();
    let config = Config::from_env()?;
    let client = shared::dynamo::client().await;
    let dispatcher = dispatcher::Dispatcher::new(client, config.tables);
    let dispatcher = &dispatcher;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<Value>| async move {
        Ok::<Value, lambda_runtime::Error>(dispatcher.handle(event.payload).await?)
    }))
    .await
}
