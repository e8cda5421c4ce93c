//! The local stack's stand-in for Lambda's event source mapping and schedule: reads
//! DynamoDB Local's stream of the `events` table and hands each batch to the
//! dispatcher's own handler, in the event shape Lambda sends (`Records` with
//! `dynamodb.NewImage` in DynamoDB's JSON), and runs the dispatcher's sweep of due
//! retries every couple of seconds.
//!
//! Like the event source mapping, it reads each shard in order, hands records over in
//! batches, and moves on only past records the handler did not report in
//! `batchItemFailures`; where it stands in each shard is kept in a file, so a relay
//! that is stopped (or killed) picks up where it was and nothing is lost or skipped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use aws_sdk_dynamodbstreams::types::{AttributeValue, Record, ShardIteratorType};
use base64::Engine;
use serde_json::{Map, Value, json};
use shared::dynamo::{Table, Tables};

/// Records handed to the dispatcher at once (the template's `BatchSize`).
const BATCH: usize = 10;

/// The relay's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Where the position in each shard is kept.
    pub state_file: PathBuf,
    /// How long to wait when the stream has nothing new.
    pub poll: Duration,
    /// How often the sweep of due retries runs.
    pub sweep: Duration,
    /// Stop once the stream has nothing new (a test's one pass).
    pub once: bool,
}

fn streams_client() -> aws_sdk_dynamodbstreams::Client {
    use aws_sdk_dynamodbstreams::config::{BehaviorVersion, Credentials, Region};
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let mut config = aws_sdk_dynamodbstreams::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new(env("AWS_REGION").unwrap_or_else(|| "us-east-1".to_owned())))
        .credentials_provider(Credentials::new(
            env("AWS_ACCESS_KEY_ID").unwrap_or_else(|| "local".to_owned()),
            env("AWS_SECRET_ACCESS_KEY").unwrap_or_else(|| "local".to_owned()),
            None,
            None,
            "environment",
        ))
        .http_client(aws_smithy_http_client::Builder::new().build_http());
    if let Some(endpoint) = env("AWS_ENDPOINT_URL_DYNAMODB") {
        config = config.endpoint_url(endpoint);
    }
    aws_sdk_dynamodbstreams::Client::from_conf(config.build())
}

/// DynamoDB's JSON form of an attribute value, as Lambda's events carry it.
fn attribute_json(value: &AttributeValue) -> Value {
    let b64 = |b: &aws_sdk_dynamodbstreams::primitives::Blob| {
        Value::String(base64::engine::general_purpose::STANDARD.encode(b.as_ref()))
    };
    match value {
        AttributeValue::S(s) => json!({"S": s}),
        AttributeValue::N(n) => json!({"N": n}),
        AttributeValue::B(b) => json!({"B": b64(b)}),
        AttributeValue::Bool(b) => json!({"BOOL": b}),
        AttributeValue::Null(_) => json!({"NULL": true}),
        AttributeValue::Ss(v) => json!({"SS": v}),
        AttributeValue::Ns(v) => json!({"NS": v}),
        AttributeValue::Bs(v) => json!({"BS": v.iter().map(b64).collect::<Vec<_>>()}),
        AttributeValue::L(v) => json!({"L": v.iter().map(attribute_json).collect::<Vec<_>>()}),
        AttributeValue::M(m) => json!({"M": image(m)}),
        _ => Value::Null,
    }
}

fn image(item: &std::collections::HashMap<String, AttributeValue>) -> Value {
    Value::Object(item.iter().map(|(k, v)| (k.clone(), attribute_json(v))).collect::<Map<_, _>>())
}

/// A stream record as Lambda's DynamoDB event holds it.
fn lambda_record(record: &Record, arn: &str) -> Value {
    let data = record.dynamodb();
    json!({
        "eventID": record.event_id(),
        "eventName": record.event_name().map(|n| n.as_str().to_owned()),
        "eventVersion": record.event_version(),
        "eventSource": "aws:dynamodb",
        "awsRegion": record.aws_region(),
        "eventSourceARN": arn,
        "dynamodb": {
            "Keys": data.and_then(|d| d.keys()).map(image),
            "NewImage": data.and_then(|d| d.new_image()).map(image),
            "SequenceNumber": data.and_then(|d| d.sequence_number()),
            "SizeBytes": data.and_then(|d| d.size_bytes()),
            "StreamViewType": data.and_then(|d| d.stream_view_type()).map(|v| v.as_str().to_owned()),
        },
    })
}

fn load_state(path: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(path).ok().and_then(|text| serde_json::from_str(&text).ok()).unwrap_or_default()
}

fn save_state(path: &Path, state: &BTreeMap<String, String>) -> Result<()> {
    let partial = path.with_extension("partial");
    std::fs::write(&partial, serde_json::to_vec(state)?)?;
    std::fs::rename(&partial, path).context("saving the relay's position")
}

/// Runs the relay until stopped (or, with `once`, until the stream has nothing new and
/// one sweep ran).
///
/// # Errors
/// When the events table or its stream cannot be read.
pub async fn run(client: &aws_sdk_dynamodb::Client, tables: &Tables, settings: &Settings) -> Result<()> {
    let streams = streams_client();
    let dispatcher = dispatcher::Dispatcher::new(client.clone(), tables.clone());
    let table = tables.name(Table::Events);
    let arn = client
        .describe_table()
        .table_name(table)
        .send()
        .await?
        .table
        .and_then(|t| t.latest_stream_arn)
        .ok_or_else(|| anyhow!("table {table} has no stream (cairn-admin tables create makes it with one)"))?;
    // Shard id -> the sequence number of the last record handed over and accepted.
    let mut state = load_state(&settings.state_file);
    let mut last_sweep: Option<Instant> = None;
    loop {
        let handed = relay_once(&streams, &dispatcher, &arn, &mut state, &settings.state_file).await;
        let handed = match handed {
            Ok(n) => n,
            Err(error) => {
                eprintln!("relay: {error:#}");
                0
            }
        };
        if last_sweep.is_none_or(|at| at.elapsed() >= settings.sweep) {
            if let Err(error) = dispatcher.handle(json!({"source": "cairn.relay"})).await {
                eprintln!("relay: sweep: {error}");
            }
            last_sweep = Some(Instant::now());
            if settings.once && handed == 0 {
                return Ok(());
            }
        }
        if handed == 0 {
            tokio::time::sleep(settings.poll).await;
        }
    }
}

/// Hands every new record of every shard over; returns how many.
async fn relay_once(
    streams: &aws_sdk_dynamodbstreams::Client,
    dispatcher: &dispatcher::Dispatcher,
    arn: &str,
    state: &mut BTreeMap<String, String>,
    state_file: &Path,
) -> Result<usize> {
    let description = streams.describe_stream().stream_arn(arn).send().await?;
    let shards = description.stream_description.map(|d| d.shards.unwrap_or_default()).unwrap_or_default();
    let mut handed = 0;
    for shard in shards {
        let Some(shard_id) = shard.shard_id else { continue };
        let request = streams.get_shard_iterator().stream_arn(arn).shard_id(&shard_id);
        let request = match state.get(&shard_id) {
            Some(sequence) => {
                request.shard_iterator_type(ShardIteratorType::AfterSequenceNumber).sequence_number(sequence)
            }
            None => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
        };
        let Some(mut iterator) = request.send().await?.shard_iterator else { continue };
        loop {
            let out = streams.get_records().shard_iterator(&iterator).limit(100).send().await?;
            let records = out.records.unwrap_or_default();
            if records.is_empty() {
                break;
            }
            for batch in records.chunks(BATCH) {
                let event: Vec<Value> = batch.iter().map(|r| lambda_record(r, arn)).collect();
                let answer = dispatcher.handle(json!({"Records": event})).await?;
                let failed = answer["batchItemFailures"][0]["itemIdentifier"].as_str().map(str::to_owned);
                // Past every record before the first failed one, as the mapping moves on.
                let accepted = batch
                    .iter()
                    .filter_map(|r| r.dynamodb().and_then(|d| d.sequence_number()))
                    .take_while(|sequence| Some(*sequence) != failed.as_deref())
                    .last();
                if let Some(sequence) = accepted {
                    state.insert(shard_id.clone(), sequence.to_owned());
                    save_state(state_file, state)?;
                }
                handed += batch.len();
                if failed.is_some() {
                    return Ok(handed);
                }
            }
            match out.next_shard_iterator {
                Some(next) => iterator = next,
                None => break,
            }
        }
    }
    Ok(handed)
}
