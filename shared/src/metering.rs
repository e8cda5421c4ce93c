//! What each request costs in DynamoDB, and its metrics.
//!
//! Every DynamoDB call of [`crate::dynamo::client`] asks for its consumed capacity
//! (`ReturnConsumedCapacity: TOTAL`, which costs nothing) and adds what DynamoDB reports
//! to the serving request's total, kept task-local by [`crate::http`]. The access log
//! line carries that total, and under Lambda (or `cargo lambda watch`) each request also
//! prints one CloudWatch Embedded Metric Format line: `Requests`, `Errors` (4xx),
//! `Faults` (5xx), `Latency` and `DynamoDBCapacity`, per function and route.

use std::cell::Cell;
use std::future::Future;
use std::sync::OnceLock;
use std::time::Instant;

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    AfterDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextMut,
};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::ConfigBag;
use serde_json::{Value, json};

tokio::task_local! {
    static USAGE: Cell<Usage>;
    static ACCESSES: std::cell::RefCell<Vec<Access>>;
    static TIMELINE: std::cell::RefCell<Vec<(Instant, Instant)>>;
    static WRITES: std::cell::RefCell<Vec<WriteCall>>;
}

/// The DynamoDB round trips of a piece of work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundTrips {
    /// On its critical path: the longest chain of calls each sent after the one before
    /// it was answered (calls side by side count once).
    pub critical: usize,
    /// In all.
    pub total: usize,
}

/// Runs `work` (in this task) and counts its DynamoDB round trips, from when each call
/// was sent to when its answer was read. For benchmarks: a warm request's critical path
/// is the measure of what stands between a client and its answer.
pub async fn traced<T>(work: impl Future<Output = T>) -> (T, RoundTrips) {
    TIMELINE
        .scope(std::cell::RefCell::new(Vec::new()), async {
            let output = work.await;
            let calls = TIMELINE.with(|t| t.borrow().clone());
            (output, RoundTrips { critical: critical_path(&calls), total: calls.len() })
        })
        .await
}

/// The longest chain of `calls` (sent, answered) in which each was sent after the one
/// before it was answered.
fn critical_path<T: Ord + Copy>(calls: &[(T, T)]) -> usize {
    let mut calls = calls.to_vec();
    calls.sort_unstable();
    let mut longest: Vec<usize> = Vec::with_capacity(calls.len());
    for (i, (sent, _)) in calls.iter().enumerate() {
        let before = (0..i).filter(|j| calls[*j].1 <= *sent).map(|j| longest[j]).max().unwrap_or(0);
        longest.push(before + 1);
    }
    longest.into_iter().max().unwrap_or(0)
}

/// When a call's attempt was sent (kept in the SDK's per-call state).
#[derive(Debug, Clone, Copy)]
struct Sent(Instant);

impl aws_smithy_types::config_bag::Storable for Sent {
    type Storer = aws_smithy_types::config_bag::StoreReplace<Self>;
}

/// One DynamoDB permission a call needs: an IAM action on a table (or its indexes).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Access {
    /// `dynamodb:<Action>`, as IAM names it (a transaction needs each item's action).
    pub action: String,
    /// The table's full name.
    pub table: String,
    /// Whether the call reads an index of the table.
    pub index: bool,
}

/// Runs `work` (in this task) and lists every permission its DynamoDB calls needed. For
/// tests that check the functions' IAM policies against what the code really calls.
pub async fn recorded<T>(work: impl Future<Output = T>) -> (T, Vec<Access>) {
    ACCESSES
        .scope(std::cell::RefCell::new(Vec::new()), async {
            let output = work.await;
            (output, ACCESSES.with(|a| a.borrow().clone()))
        })
        .await
}

/// One item a write call writes (or, for a `ConditionCheck`, reads in a transaction).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// `Put`, `Update`, `Delete` or `ConditionCheck`.
    pub kind: String,
    /// The table's full name.
    pub table: String,
    /// The item's key as sent, attribute by attribute (name, value as text).
    pub key: Vec<(String, String)>,
    /// Every attribute a `Put` sends (name, value as text); none for the other kinds.
    pub attributes: Vec<(String, String)>,
    /// The size of what the call sends of the item (a `Put`'s whole item; for the
    /// other kinds its key and values), as DynamoDB counts item sizes.
    pub bytes: usize,
}

/// One DynamoDB write call and what it wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteCall {
    /// `TransactWriteItems`, `PutItem`, `UpdateItem`, `DeleteItem` or `BatchWriteItem`.
    pub operation: String,
    /// Its items.
    pub items: Vec<Written>,
    /// The capacity units DynamoDB reported for it, indexes included.
    pub capacity: f64,
}

/// Runs `work` (in this task) and lists every DynamoDB write call it made, with the
/// items each wrote and the capacity each consumed. For the capacity benchmark: which
/// items and partitions each operation writes.
pub async fn writes_of<T>(work: impl Future<Output = T>) -> (T, Vec<WriteCall>) {
    WRITES
        .scope(std::cell::RefCell::new(Vec::new()), async {
            let output = work.await;
            (output, WRITES.with(|w| w.borrow().clone()))
        })
        .await
}

/// The write call of `operation` with `body`, without its capacity (`None`: not a write).
fn write_call(operation: &str, body: &[u8]) -> Option<WriteCall> {
    const WRITES: &[&str] = &["TransactWriteItems", "PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem"];
    if !WRITES.contains(&operation) {
        return None;
    }
    let body = serde_json::from_slice::<Value>(body).ok()?;
    let text = |value: &Value| match value.as_object().and_then(|v| v.iter().next()) {
        Some((_, Value::String(s))) => s.clone(),
        Some((_, other)) => other.to_string(),
        None => String::new(),
    };
    let pairs = |map: &Value| -> Vec<(String, String)> {
        map.as_object().into_iter().flatten().map(|(name, value)| (name.clone(), text(value))).collect()
    };
    let size = |values: &[&Value]| -> usize {
        values
            .iter()
            .filter_map(|v| v.as_object())
            .flatten()
            .map(|(name, value)| name.len() + attribute_size(value))
            .sum()
    };
    let one = |kind: &str, op: &Value| -> Written {
        let put = kind == "Put";
        let key = if put { Vec::new() } else { pairs(&op["Key"]) };
        Written {
            kind: kind.to_owned(),
            table: op["TableName"].as_str().unwrap_or_default().to_owned(),
            key,
            attributes: if put { pairs(&op["Item"]) } else { Vec::new() },
            bytes: if put { size(&[&op["Item"]]) } else { size(&[&op["Key"], &op["ExpressionAttributeValues"]]) },
        }
    };
    let items = match operation {
        "TransactWriteItems" => body["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| item.as_object()?.iter().next().map(|(kind, op)| one(kind, op)))
            .collect(),
        "BatchWriteItem" => body["RequestItems"]
            .as_object()
            .into_iter()
            .flatten()
            .flat_map(|(table, requests)| {
                requests.as_array().into_iter().flatten().filter_map(move |request| {
                    let (kind, op) = request.as_object()?.iter().next()?;
                    let mut op = op.clone();
                    op["TableName"] = Value::String(table.clone());
                    Some(one(if kind == "PutRequest" { "Put" } else { "Delete" }, &op))
                })
            })
            .collect(),
        other => vec![one(other.trim_end_matches("Item"), &body)],
    };
    Some(WriteCall { operation: operation.to_owned(), items, capacity: 0.0 })
}

/// The size DynamoDB counts for one attribute value in its JSON form (strings and
/// binaries by their bytes, numbers about their digits, maps and lists with their
/// members and 3 bytes each of overhead).
fn attribute_size(value: &Value) -> usize {
    let Some((kind, inner)) = value.as_object().and_then(|v| v.iter().next()) else { return 0 };
    match (kind.as_str(), inner) {
        ("S" | "N", Value::String(s)) => s.len(),
        // Base64 in JSON: the bytes it stands for.
        ("B", Value::String(s)) => s.len() / 4 * 3,
        ("M", Value::Object(map)) => 3 + map.iter().map(|(name, v)| 1 + name.len() + attribute_size(v)).sum::<usize>(),
        ("L", Value::Array(list)) => 3 + list.iter().map(|v| 1 + attribute_size(v)).sum::<usize>(),
        ("SS" | "NS", Value::Array(list)) => list.iter().filter_map(Value::as_str).map(str::len).sum(),
        _ => 1,
    }
}

/// Which entry of the work's [`WriteCall`]s a call is (kept in the SDK's per-call state).
#[derive(Debug, Clone, Copy)]
struct WriteIndex(usize);

impl aws_smithy_types::config_bag::Storable for WriteIndex {
    type Storer = aws_smithy_types::config_bag::StoreReplace<Self>;
}

/// The permissions one call of `operation` with `body` needs.
fn accesses(operation: &str, body: &[u8]) -> Vec<Access> {
    let Ok(body) = serde_json::from_slice::<Value>(body) else { return Vec::new() };
    let access = |action: &str, table: &Value, index: bool| {
        table.as_str().map(|t| Access { action: format!("dynamodb:{action}"), table: t.to_owned(), index })
    };
    match operation {
        "TransactWriteItems" | "TransactGetItems" => body["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| {
                let (kind, op) = item.as_object()?.iter().next()?;
                let action = match kind.as_str() {
                    "Put" => "PutItem",
                    "Update" => "UpdateItem",
                    "Delete" => "DeleteItem",
                    "ConditionCheck" => "ConditionCheckItem",
                    _ => "GetItem",
                };
                access(action, &op["TableName"], false)
            })
            .collect(),
        "BatchGetItem" | "BatchWriteItem" => body["RequestItems"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(table, _)| access(operation, &Value::String(table.clone()), false))
            .collect(),
        _ => access(operation, &body["TableName"], body.get("IndexName").is_some()).into_iter().collect(),
    }
}

/// What a piece of work cost in DynamoDB.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    /// Round trips (answers received, retries included).
    pub calls: u64,
    /// Capacity units consumed, as DynamoDB reports them.
    pub capacity: f64,
}

/// The operations that accept `ReturnConsumedCapacity`.
const METERED: &[&str] = &[
    "GetItem",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "Query",
    "Scan",
    "BatchGetItem",
    "BatchWriteItem",
    "TransactGetItems",
    "TransactWriteItems",
];

/// Runs `work` (in this task) with a fresh total; returns its output and what its
/// DynamoDB calls cost. Nested, the inner cost also counts for the outer work.
pub async fn metered<T>(work: impl Future<Output = T>) -> (T, Usage) {
    let (output, usage) = USAGE
        .scope(Cell::new(Usage::default()), async {
            let output = work.await;
            (output, USAGE.with(Cell::get))
        })
        .await;
    add(usage);
    (output, usage)
}

fn add(usage: Usage) {
    // Outside any metered work (admin tools, tests), there is nothing to add to.
    let _ = USAGE.try_with(|total| {
        let so_far = total.get();
        total.set(Usage { calls: so_far.calls + usage.calls, capacity: so_far.capacity + usage.capacity });
    });
}

/// The capacity units in a `ConsumedCapacity` value (one object or a list of them).
#[must_use]
pub fn capacity_units(value: &Value) -> f64 {
    match value {
        Value::Array(list) => list.iter().map(capacity_units).sum(),
        Value::Object(map) => map.get("CapacityUnits").and_then(Value::as_f64).unwrap_or(0.0),
        _ => 0.0,
    }
}

/// The SDK interceptor that asks for and adds up consumed capacity.
#[derive(Debug, Clone, Copy, Default)]
pub struct CapacityMeter;

impl Intercept for CapacityMeter {
    fn name(&self) -> &'static str {
        "CapacityMeter"
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if TIMELINE.try_with(|_| ()).is_ok() {
            cfg.interceptor_state().store_put(Sent(Instant::now()));
        }
        let request = context.request_mut();
        let target = request.headers().get("x-amz-target").unwrap_or_default();
        let operation = target.rsplit('.').next().unwrap_or_default().to_owned();
        // Only under `recorded` (tests): parsing every body has a cost.
        let _ = ACCESSES.try_with(|list| {
            let found = request.body().bytes().map(|body| accesses(&operation, body)).unwrap_or_default();
            list.borrow_mut().extend(found);
        });
        // Only under `writes_of` (benchmarks).
        let _ = WRITES.try_with(|list| {
            if let Some(call) = request.body().bytes().and_then(|body| write_call(&operation, body)) {
                let mut list = list.borrow_mut();
                cfg.interceptor_state().store_put(WriteIndex(list.len()));
                list.push(call);
            }
        });
        if !METERED.contains(&operation.as_str()) {
            return Ok(());
        }
        let Some(body) = request.body().bytes() else { return Ok(()) };
        // `{…}` becomes `{"ReturnConsumedCapacity":"TOTAL",…}` without parsing the body
        // (a checkpoint write carries megabytes).
        let Some(rest) = body.strip_prefix(b"{") else { return Ok(()) };
        let field: &[u8] = if rest.starts_with(b"}") {
            br#"{"ReturnConsumedCapacity":"TOTAL""#
        } else {
            br#"{"ReturnConsumedCapacity":"TOTAL","#
        };
        let mut text = Vec::with_capacity(body.len() + field.len());
        text.extend_from_slice(field);
        text.extend_from_slice(rest);
        request.headers_mut().insert("content-length", text.len().to_string());
        *request.body_mut() = SdkBody::from(text);
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if let Some(Sent(sent)) = cfg.load::<Sent>() {
            let _ = TIMELINE.try_with(|t| t.borrow_mut().push((*sent, Instant::now())));
        }
        let capacity = context.response().body().bytes().map_or(0.0, consumed);
        add(Usage { calls: 1, capacity });
        if let Some(WriteIndex(index)) = cfg.load::<WriteIndex>() {
            let _ = WRITES.try_with(|list| {
                if let Some(call) = list.borrow_mut().get_mut(*index) {
                    call.capacity = capacity;
                }
            });
        }
        Ok(())
    }
}

/// The `ConsumedCapacity` of a response body, found without parsing the whole body.
fn consumed(body: &[u8]) -> f64 {
    const KEY: &[u8] = b"\"ConsumedCapacity\":";
    let Some(at) = memchr::memmem::find(body, KEY) else { return 0.0 };
    let mut values = serde_json::Deserializer::from_slice(&body[at + KEY.len()..]).into_iter::<Value>();
    values.next().and_then(Result::ok).map_or(0.0, |v| capacity_units(&v))
}

/// The function's name under Lambda (`AWS_LAMBDA_FUNCTION_NAME`); `None` elsewhere,
/// where no metrics are printed.
fn function_name() -> Option<&'static str> {
    static NAME: OnceLock<Option<String>> = OnceLock::new();
    NAME.get_or_init(|| std::env::var("AWS_LAMBDA_FUNCTION_NAME").ok().filter(|n| !n.is_empty())).as_deref()
}

/// One request's metrics.
#[derive(Debug, Clone, Copy)]
pub struct RequestMetrics<'a> {
    /// The request id.
    pub request_id: &'a str,
    /// `METHOD /route` as routed.
    pub route: &'a str,
    /// The answer's status.
    pub status: u16,
    /// Milliseconds from receipt to answer.
    pub latency_ms: f64,
    /// DynamoDB capacity units consumed.
    pub capacity: f64,
}

/// The Embedded Metric Format document of one request.
#[must_use]
pub fn emf(function: &str, metrics: &RequestMetrics<'_>, timestamp_ms: i64) -> Value {
    json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": "Cairn",
                "Dimensions": [["Function", "Route"], ["Function"]],
                "Metrics": [
                    {"Name": "Requests", "Unit": "Count"},
                    {"Name": "Errors", "Unit": "Count"},
                    {"Name": "Faults", "Unit": "Count"},
                    {"Name": "Latency", "Unit": "Milliseconds"},
                    {"Name": "DynamoDBCapacity", "Unit": "None"}
                ]
            }]
        },
        "Function": function,
        "Route": metrics.route,
        "Requests": 1,
        "Errors": u8::from((400..500).contains(&metrics.status)),
        "Faults": u8::from(metrics.status >= 500),
        "Latency": metrics.latency_ms,
        "DynamoDBCapacity": metrics.capacity,
        "status": metrics.status,
        "request_id": metrics.request_id,
    })
}

/// Reports a request that was answered but not counted against its tenant's rate limit
/// (its count's update failed or ran out of time): a warning, and under Lambda an EMF
/// line of the metric `RateLimitUncounted`, so that an operator sees how many went
/// uncounted (docs/rate-limits.md).
pub fn uncounted(why: &str) {
    tracing::warn!(error = why, "rate limit not counted");
    if let Some(function) = function_name() {
        println!("{}", uncounted_emf(function, chrono::Utc::now().timestamp_millis()));
    }
}

fn uncounted_emf(function: &str, timestamp_ms: i64) -> Value {
    json!({
        "_aws": {
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": "Cairn",
                "Dimensions": [["Function"]],
                "Metrics": [{"Name": "RateLimitUncounted", "Unit": "Count"}]
            }]
        },
        "Function": function,
        "RateLimitUncounted": 1,
    })
}

/// Prints the request's EMF line to stdout, where Lambda sends it to CloudWatch Logs
/// (which turns it into metrics). Nothing outside Lambda.
pub fn publish(metrics: &RequestMetrics<'_>) {
    if let Some(function) = function_name() {
        println!("{}", emf(function, metrics, chrono::Utc::now().timestamp_millis()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumed_capacity_is_read_from_single_and_batch_answers() {
        assert!(
            (consumed(br#"{"Item":{},"ConsumedCapacity":{"TableName":"t","CapacityUnits":0.5}}"#) - 0.5).abs() < 1e-9
        );
        let batch = br#"{"ConsumedCapacity":[{"CapacityUnits":2.0},{"CapacityUnits":1.5}],"Responses":{}}"#;
        assert!((consumed(batch) - 3.5).abs() < 1e-9);
        assert!(consumed(br#"{"Item":{}}"#).abs() < 1e-9);
    }

    #[tokio::test]
    async fn nested_work_counts_for_the_outer_work_too() {
        let ((), outer) = metered(async {
            add(Usage { calls: 1, capacity: 0.5 });
            let ((), inner) = metered(async { add(Usage { calls: 2, capacity: 1.0 }) }).await;
            assert_eq!(inner, Usage { calls: 2, capacity: 1.0 });
        })
        .await;
        assert_eq!(outer, Usage { calls: 3, capacity: 1.5 });
    }

    #[test]
    fn a_transaction_is_read_as_the_items_it_writes_with_their_sizes() {
        let body = br#"{"TransactItems":[
            {"Put":{"TableName":"t-executions","Item":{"tenant_id":{"S":"ten_a"},"id":{"S":"exec_1"},"n":{"N":"12"}}}},
            {"Update":{"TableName":"t-counters","Key":{"tenant_id":{"S":"ten_a#03"},"name":{"S":"executions"}},
              "UpdateExpression":"ADD #a0 :d0","ExpressionAttributeValues":{":d0":{"N":"1"}}}},
            {"ConditionCheck":{"TableName":"t-api-keys","Key":{"key_hash":{"S":"ab"}}}}]}"#;
        let call = write_call("TransactWriteItems", body).expect("a write");
        let kinds: Vec<&str> = call.items.iter().map(|i| i.kind.as_str()).collect();
        assert_eq!(kinds, ["Put", "Update", "ConditionCheck"]);
        let put = &call.items[0];
        assert_eq!(put.bytes, "tenant_id".len() + 5 + "id".len() + 6 + 1 + 2);
        assert!(put.attributes.contains(&("id".to_owned(), "exec_1".to_owned())));
        assert_eq!(call.items[1].key[0], ("tenant_id".to_owned(), "ten_a#03".to_owned()));
        assert_eq!(call.items[2].table, "t-api-keys");
        assert!(write_call("GetItem", br#"{"TableName":"t"}"#).is_none(), "a read is not a write");
        let single = write_call("UpdateItem", br#"{"TableName":"t","Key":{"k":{"S":"v"}}}"#).expect("a write");
        assert_eq!(single.items[0].kind, "Update");
    }

    #[test]
    fn calls_side_by_side_count_once_on_the_critical_path() {
        assert_eq!(critical_path::<u32>(&[]), 0);
        // Three at once, then one after them all: two.
        assert_eq!(critical_path(&[(0, 5), (0, 3), (1, 4), (5, 9)]), 2);
        // One after another: three; a call sent before the last answer does not chain.
        assert_eq!(critical_path(&[(0, 2), (2, 4), (4, 6), (3, 7)]), 3);
        // A long call beside a chain of two: the chain is the path.
        assert_eq!(critical_path(&[(0, 10), (0, 4), (5, 9)]), 2);
    }

    #[test]
    fn an_uncounted_request_is_a_metric_of_its_function() {
        let doc = uncounted_emf("executions", 5);
        assert_eq!(doc["_aws"]["CloudWatchMetrics"][0]["Metrics"][0]["Name"], "RateLimitUncounted");
        assert_eq!((doc["RateLimitUncounted"].clone(), doc["Function"].clone()), (json!(1), json!("executions")));
    }

    #[test]
    fn emf_names_every_metric_it_carries() {
        let m = RequestMetrics { request_id: "r", route: "GET /x", status: 503, latency_ms: 2.5, capacity: 1.0 };
        let doc = emf("f", &m, 1);
        for metric in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"].as_array().into_iter().flatten() {
            let name = metric["Name"].as_str().unwrap_or_default();
            assert!(doc[name].is_number(), "{name}");
        }
        assert_eq!((doc["Errors"].clone(), doc["Faults"].clone()), (json!(0), json!(1)));
    }
}
