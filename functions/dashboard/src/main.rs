//! The dashboard Lambda function.

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    shared::http::init_logging();
    shared::http::run(dashboard::app(&dashboard::Config::from_env())).await
}
