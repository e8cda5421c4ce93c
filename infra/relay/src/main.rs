//! `cairn-relay`: plays Lambda's event source mapping and schedule for the dispatcher
//! on the local stack (`make dev`, `make test`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use shared::config::Config;

/// Reads DynamoDB Local's streams that feed the dispatcher (the events and checkpoints
/// tables') and hands them to the dispatcher's own handler; sweeps due retries every `--sweep-ms`. Tables and endpoint from the
/// environment (`TABLE_PREFIX`, `AWS_ENDPOINT_URL_DYNAMODB`), as cairn-admin's.
#[derive(Debug, Parser)]
#[command(name = "cairn-relay")]
struct Cli {
    /// Where the position in the streams is kept between runs.
    #[arg(long, value_name = "FILE")]
    state_file: PathBuf,
    /// Milliseconds between polls of an idle stream.
    #[arg(long, default_value_t = 250)]
    poll_ms: u64,
    /// Milliseconds between sweeps of due retries.
    #[arg(long, default_value_t = 2000)]
    sweep_ms: u64,
    /// Stop once the streams have nothing new.
    #[arg(long)]
    once: bool,
    /// Also play DynamoDB's TTL once a minute on the tables whose removals a mapping
    /// wants (`make dev`; the tests drive TTL themselves, `infra::ttl`).
    #[arg(long)]
    ttl: bool,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    // The dispatcher's own log lines, as its function writes them.
    shared::http::init_logging();
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(error) => {
            eprintln!("cairn-relay: {error}");
            return ExitCode::FAILURE;
        }
    };
    let client = shared::dynamo::client_with_default_chain().await;
    let settings = relay::Settings {
        state_file: cli.state_file,
        poll: std::time::Duration::from_millis(cli.poll_ms),
        sweep: std::time::Duration::from_millis(cli.sweep_ms),
        once: cli.once,
        ttl: cli.ttl,
    };
    match relay::run(&client, &config.tables, &settings).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("cairn-relay: {error:#}");
            ExitCode::FAILURE
        }
    }
}
