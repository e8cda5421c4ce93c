//! The local stack's stand-in for Lambda's event source mappings and schedule: reads
//! DynamoDB Local's streams that feed a function in `template.yaml` (the dispatcher's:
//! the `events`, `executions` and `checkpoints` tables'; the jobs function's: the `jobs`
//! table's) and hands each batch to that function's own handler, in the event shape
//! Lambda sends (`Records` with `dynamodb.NewImage` in DynamoDB's JSON) and filtered by
//! the mapping's own patterns ([`filter`]), and runs the dispatcher's sweep of due
//! retries every couple of seconds. With `--ttl` (`make dev`), every minute it plays
//! DynamoDB's TTL on the tables whose TTL deletions a mapping wants (`infra::ttl`; the
//! `jobs` table's expiry markers), so that their REMOVE records come as on AWS.
//!
//! Like an event source mapping, it reads each shard in order, hands records over in
//! batches of the mapping's size, and moves on only past records the handler did not
//! report in `batchItemFailures`; where it stands in each shard is kept in a file, so a
//! relay that is stopped (or killed) picks up where it was and nothing is lost or
//! skipped.

pub mod filter;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use shared::dynamo::{Table, Tables};

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
    /// Whether to play DynamoDB's TTL ([`TTL_EVERY`]).
    pub ttl: bool,
}

/// DynamoDB Local's streams API, spoken in its JSON: the records come back in the very
/// form Lambda's event carries them. (Not through the SDK: DynamoDB Local writes an
/// empty map in a stream record as `{}`, where DynamoDB writes `{"M": {}}`, and the
/// SDK refuses the whole page over it; [`lambda_record`] writes it as DynamoDB does.)
struct Streams {
    http: reqwest::Client,
    endpoint: String,
    authorization: String,
}

impl Streams {
    fn from_env() -> Self {
        let env = |name: &str, default: &str| {
            std::env::var(name).ok().filter(|v| !v.is_empty()).unwrap_or_else(|| default.to_owned())
        };
        // DynamoDB Local reads the access key and region from the header (it checks no
        // signature).
        let authorization = format!(
            "AWS4-HMAC-SHA256 Credential={}/20260101/{}/dynamodb/aws4_request, SignedHeaders=host, Signature=0",
            env("AWS_ACCESS_KEY_ID", "local"),
            env("AWS_REGION", "us-east-1")
        );
        Self {
            http: reqwest::Client::new(),
            endpoint: env("AWS_ENDPOINT_URL_DYNAMODB", "http://127.0.0.1:8000"),
            authorization,
        }
    }

    async fn call(&self, action: &str, body: Value) -> Result<Value> {
        let response = self
            .http
            .post(&self.endpoint)
            .header("x-amz-target", format!("DynamoDBStreams_20120810.{action}"))
            .header("content-type", "application/x-amz-json-1.0")
            .header("authorization", &self.authorization)
            .body(body.to_string())
            .send()
            .await
            .with_context(|| format!("{action}: DynamoDB Local did not answer"))?;
        let status = response.status();
        let answer: Value = response.json().await.with_context(|| format!("{action}: an answer that is not JSON"))?;
        if !status.is_success() {
            bail!("{action}: {status}: {answer}");
        }
        Ok(answer)
    }
}

/// Writes an empty map attribute (`{}` from DynamoDB Local) as DynamoDB does.
fn fix_empty_maps(image: &mut Value) {
    let Some(attributes) = image.as_object_mut() else { return };
    for value in attributes.values_mut() {
        fix_attribute(value);
    }
}

fn fix_attribute(value: &mut Value) {
    match value {
        Value::Object(typed) if typed.is_empty() => *value = json!({"M": {}}),
        Value::Object(typed) => {
            if let Some(map) = typed.get_mut("M") {
                fix_empty_maps(map);
            }
            if let Some(Value::Array(list)) = typed.get_mut("L") {
                list.iter_mut().for_each(fix_attribute);
            }
        }
        _ => {}
    }
}

/// A stream record as Lambda's DynamoDB event holds it.
fn lambda_record(mut record: Value, arn: &str) -> Value {
    for image in ["Keys", "NewImage", "OldImage"] {
        if let Some(image) = record.get_mut("dynamodb").and_then(|d| d.get_mut(image)) {
            fix_empty_maps(image);
        }
    }
    if let Some(fields) = record.as_object_mut() {
        fields.insert("eventSourceARN".to_owned(), json!(arn));
    }
    record
}

fn load_state(path: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(path).ok().and_then(|text| serde_json::from_str(&text).ok()).unwrap_or_default()
}

fn save_state(path: &Path, state: &BTreeMap<String, String>) -> Result<()> {
    let partial = path.with_extension("partial");
    std::fs::write(&partial, serde_json::to_vec(state)?)?;
    std::fs::rename(&partial, path).context("saving the relay's position")
}

/// A function a stream feeds.
#[derive(Debug, Clone, Copy)]
enum Consumer {
    Dispatcher,
    Jobs,
}

impl Consumer {
    const ALL: [(Self, &'static str); 2] = [(Self::Dispatcher, "dispatcher"), (Self::Jobs, "jobs")];
}

/// The functions' own handlers.
struct Handlers {
    dispatcher: dispatcher::Dispatcher,
    jobs: jobs::Jobs,
}

impl Handlers {
    async fn handle(&self, consumer: Consumer, event: Value) -> Result<Value> {
        match consumer {
            Consumer::Dispatcher => Ok(self.dispatcher.handle(event).await?),
            Consumer::Jobs => {
                // Time for about one round an invocation, so that a long job's rounds
                // take turns with the other streams (Lambda runs them side by side).
                let deadline = std::time::SystemTime::now() + jobs::MARGIN + Duration::from_secs(1);
                let ms = deadline.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
                Ok(self.jobs.handle(event, u64::try_from(ms).unwrap_or(u64::MAX)).await)
            }
        }
    }
}

/// A stream that feeds a function, as the template maps it.
struct Source {
    consumer: Consumer,
    arn: String,
    /// The table's name after the prefix, which keys its shards' positions.
    table: String,
    batch: usize,
    filters: Vec<Value>,
}

impl Source {
    /// Whether Lambda would hand `record` over.
    fn wants(&self, record: &Value) -> bool {
        self.filters.is_empty() || self.filters.iter().any(|f| filter::matches(f, Some(record)))
    }
}

/// The functions' streams, from the embedded template.
async fn sources(client: &aws_sdk_dynamodb::Client, tables: &Tables) -> Result<Vec<Source>> {
    let mut sources = Vec::new();
    let template = infra::template::Template::embedded()?;
    let mapped = Consumer::ALL.into_iter().map(|(consumer, binary)| Ok((consumer, template.stream_sources(binary)?)));
    let mapped = mapped.collect::<Result<Vec<_>>>()?;
    for (consumer, source) in mapped.into_iter().flat_map(|(c, sources)| sources.into_iter().map(move |s| (c, s))) {
        source.filters.iter().try_for_each(filter::check)?;
        let table = Table::ALL
            .into_iter()
            .find(|t| t.suffix() == source.table)
            .ok_or_else(|| anyhow!("the template's stream of {} is no table of the code", source.table))?;
        let name = tables.name(table);
        let arn = client
            .describe_table()
            .table_name(name)
            .send()
            .await?
            .table
            .and_then(|t| t.latest_stream_arn)
            .ok_or_else(|| anyhow!("table {name} has no stream (cairn-admin tables create makes it with one)"))?;
        sources.push(Source { consumer, arn, table: source.table, batch: source.batch_size, filters: source.filters });
    }
    Ok(sources)
}

/// How often the relay plays DynamoDB's TTL: a pass reads each table it covers whole
/// (DynamoDB Local has no index on the TTL attribute), so not at every sweep. DynamoDB
/// itself deletes an item within days of its time.
pub const TTL_EVERY: Duration = Duration::from_secs(60);

/// The tables whose TTL deletions a mapping hands over (a filter that wants REMOVE
/// records), with their names and specs: the ones whose TTL the relay plays. Other
/// tables' expired items only wait a little longer locally.
fn expiring(sources: &[Source], tables: &Tables) -> Result<Vec<(String, infra::template::TableSpec)>> {
    let specs = infra::template::Template::embedded()?.tables()?;
    let mut expiring: Vec<(String, infra::template::TableSpec)> = Vec::new();
    for spec in specs.into_iter().filter(|spec| spec.ttl_attribute.is_some()) {
        let removals = sources.iter().any(|source| {
            source.table == spec.suffix && source.filters.iter().any(|f| f.to_string().contains("\"REMOVE\""))
        });
        let table = Table::ALL.into_iter().find(|t| t.suffix() == spec.suffix);
        if let (true, Some(table)) = (removals, table) {
            expiring.push((tables.name(table).to_owned(), spec));
        }
    }
    Ok(expiring)
}

/// Plays DynamoDB's TTL on `expiring` as of now.
async fn expire_due(client: &aws_sdk_dynamodb::Client, expiring: &[(String, infra::template::TableSpec)]) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let now = i64::try_from(now).unwrap_or(i64::MAX);
    for (name, spec) in expiring {
        if let Err(error) = infra::ttl::expire(client, name, spec, now).await {
            eprintln!("relay: time to live of {name}: {error:#}");
        }
    }
}

/// Runs the relay until stopped (or, with `once`, until the streams have nothing new
/// and one sweep ran).
///
/// # Errors
/// When a table or its stream cannot be read.
pub async fn run(client: &aws_sdk_dynamodb::Client, tables: &Tables, settings: &Settings) -> Result<()> {
    let streams = Streams::from_env();
    let handlers = Handlers {
        dispatcher: dispatcher::Dispatcher::new(client.clone(), tables.clone()),
        jobs: jobs::Jobs::new(client.clone(), tables.clone()),
    };
    let sources = sources(client, tables).await?;
    let expiring = expiring(&sources, tables)?;
    // "<table>/<shard id>" -> the sequence number of the last record handed over and accepted.
    let mut state = load_state(&settings.state_file);
    let mut last_sweep: Option<Instant> = None;
    let mut last_ttl: Option<Instant> = None;
    loop {
        let mut handed = 0;
        for source in &sources {
            match relay_once(&streams, &handlers, source, &mut state, &settings.state_file).await {
                Ok(n) => handed += n,
                Err(error) => eprintln!("relay: {}: {error:#}", source.table),
            }
        }
        if last_sweep.is_none_or(|at| at.elapsed() >= settings.sweep) {
            if let Err(error) = handlers.dispatcher.handle(json!({"source": "cairn.relay"})).await {
                eprintln!("relay: sweep: {error}");
            }
            // DynamoDB's TTL, which DynamoDB Local does not play.
            if settings.ttl && last_ttl.is_none_or(|at| at.elapsed() >= TTL_EVERY) {
                expire_due(client, &expiring).await;
                last_ttl = Some(Instant::now());
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

/// Hands every new record of every shard of `source` over; returns how many records
/// were read (the filtered out among them).
async fn relay_once(
    streams: &Streams,
    handlers: &Handlers,
    source: &Source,
    state: &mut BTreeMap<String, String>,
    state_file: &Path,
) -> Result<usize> {
    let arn = source.arn.as_str();
    let description = streams.call("DescribeStream", json!({"StreamArn": arn})).await?;
    let shards = description["StreamDescription"]["Shards"].as_array().cloned().unwrap_or_default();
    let mut handed = 0;
    for shard in shards {
        let Some(shard_id) = shard["ShardId"].as_str() else { continue };
        let position = format!("{}/{shard_id}", source.table);
        let request = match state.get(&position) {
            Some(sequence) => json!({"StreamArn": arn, "ShardId": shard_id,
                "ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": sequence}),
            None => json!({"StreamArn": arn, "ShardId": shard_id, "ShardIteratorType": "TRIM_HORIZON"}),
        };
        let iterator = streams.call("GetShardIterator", request).await?;
        let Some(mut iterator) = iterator["ShardIterator"].as_str().map(str::to_owned) else { continue };
        loop {
            let mut out = streams.call("GetRecords", json!({"ShardIterator": iterator, "Limit": 100})).await?;
            let records: Vec<Value> = match out["Records"].take() {
                Value::Array(records) if !records.is_empty() => records,
                _ => break,
            };
            let sequence_of = |record: &Value| record["dynamodb"]["SequenceNumber"].as_str().map(str::to_owned);
            let last = records.last().and_then(sequence_of);
            let count = records.len();
            let wanted: Vec<(Value, String)> = records
                .into_iter()
                .filter_map(|record| {
                    let sequence = sequence_of(&record)?;
                    Some((lambda_record(record, arn), sequence))
                })
                .filter(|(record, _)| source.wants(record))
                .collect();
            for batch in wanted.chunks(source.batch) {
                let event: Vec<&Value> = batch.iter().map(|(record, _)| record).collect();
                let answer = handlers.handle(source.consumer, json!({"Records": event})).await?;
                let failed = answer["batchItemFailures"][0]["itemIdentifier"].as_str().map(str::to_owned);
                if let Some(failed) = failed {
                    // Past every record before the failed one, as the mapping moves on.
                    let before = batch.iter().map(|(_, sequence)| sequence).take_while(|s| **s != failed).last();
                    if let Some(sequence) = before {
                        state.insert(position.clone(), sequence.clone());
                        save_state(state_file, state)?;
                    }
                    return Ok(handed + batch.len());
                }
                if let Some((_, sequence)) = batch.last() {
                    state.insert(position.clone(), sequence.clone());
                    save_state(state_file, state)?;
                }
            }
            // Past every record read, the filtered out too.
            if let Some(last) = last {
                state.insert(position.clone(), last);
                save_state(state_file, state)?;
            }
            handed += count;
            match out["NextShardIterator"].as_str() {
                Some(next) => iterator = next.to_owned(),
                None => break,
            }
        }
    }
    Ok(handed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TTL pass reads a table whole: it is played only where a mapping wants the
    /// removals (the jobs table's expiry markers), not on the large outbox.
    #[test]
    fn ttl_is_played_on_the_tables_whose_removals_a_mapping_wants() {
        let template = infra::template::Template::embedded().expect("template");
        let sources: Vec<Source> = Consumer::ALL
            .into_iter()
            .flat_map(|(consumer, binary)| {
                template.stream_sources(binary).expect("mappings").into_iter().map(move |s| Source {
                    consumer,
                    arn: String::new(),
                    table: s.table,
                    batch: s.batch_size,
                    filters: s.filters,
                })
            })
            .collect();
        let tables = Tables::new("t-");
        let played: Vec<String> =
            expiring(&sources, &tables).expect("tables").into_iter().map(|(name, _)| name).collect();
        assert_eq!(played, [tables.name(Table::Jobs)]);
    }

    #[test]
    fn an_empty_map_from_dynamodb_local_reads_as_dynamodb_writes_it() {
        let record = json!({"eventName": "INSERT", "dynamodb": {
            "Keys": {"tenant_id": {"S": "t"}},
            "NewImage": {"tenant_id": {"S": "t"}, "metadata": {}, "nested": {"M": {"inner": {}}}, "list": {"L": [{}]}},
        }});
        let fixed = lambda_record(record, "arn:stream");
        let image = &fixed["dynamodb"]["NewImage"];
        assert_eq!(image["metadata"], json!({"M": {}}));
        assert_eq!(image["nested"], json!({"M": {"inner": {"M": {}}}}));
        assert_eq!(image["list"], json!({"L": [{"M": {}}]}));
        assert_eq!(image["tenant_id"], json!({"S": "t"}));
        assert_eq!(fixed["eventSourceARN"], "arn:stream");
    }
}
