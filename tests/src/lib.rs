//! The harness of Cairn's black-box tests.
//!
//! A behaviour test is written once against [`Api`] and runs twice: in process (the
//! function's router, no socket) and over HTTP through `cargo lambda watch` and its
//! router, the real Lambda event path. Both talk to DynamoDB Local. Every test makes its
//! own tenants, so tests never see each other's data.
//!
//! The environment comes from `make test` (`infra/scripts/test.sh`): `TABLE_PREFIX`,
//! `AWS_ENDPOINT_URL_DYNAMODB` and `CAIRN_API_URL`.

use std::sync::Arc;

use aws_sdk_dynamodb::Client;
use http::{HeaderMap, HeaderValue, Method, Request, header};
use serde_json::Value;
use shared::dynamo::Tables;
use shared::time::SystemClock;
use tower::ServiceExt;

pub mod bench;
pub mod conflict;
pub mod down;
pub mod runtime_api;
pub mod stripe;

/// Fails a test run that was started without the local stack.
fn required_env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: these tests need DynamoDB Local and the local API; run them with `make test`")
    })
}

/// DynamoDB Local and the table names of this run.
#[derive(Debug, Clone)]
pub struct Env {
    /// A client for DynamoDB Local.
    pub client: Client,
    /// The tables of this run.
    pub tables: Tables,
}

/// The test run's environment. Each test makes its own: an SDK client's connections
/// belong to the runtime that opened them, and every test has its own runtime.
pub async fn env() -> Env {
    static LOGS: std::sync::Once = std::sync::Once::new();
    LOGS.call_once(shared::http::init_logging);
    let prefix = required_env("TABLE_PREFIX");
    required_env("AWS_ENDPOINT_URL_DYNAMODB");
    Env { client: shared::dynamo::client().await, tables: Tables::new(&prefix) }
}

/// Tables of a test binary's own, named `<name><process id>-` (made once for all its
/// tests: tables cost DynamoDB Local), which no relay reads: for tests that hand stream
/// records to a function's handler themselves.
pub async fn own_env(name: &str) -> Env {
    static MADE: tokio::sync::Mutex<std::collections::BTreeSet<String>> =
        tokio::sync::Mutex::const_new(std::collections::BTreeSet::new());
    let shared_env = env().await;
    let prefix = format!("{name}{}-", std::process::id());
    let mut made = MADE.lock().await;
    if !made.contains(&prefix) {
        infra::tables::create_missing(&shared_env.client, &prefix).await.expect("tables");
        made.insert(prefix.clone());
    }
    Env { client: shared_env.client, tables: Tables::new(&prefix) }
}

/// Every item of `env`'s table `table` (a scan, read consistently: for tests on small
/// tables of their own).
pub async fn scan_all(env: &Env, table: shared::dynamo::Table) -> Vec<shared::dynamo::Item> {
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let page = env
            .client
            .scan()
            .table_name(env.tables.name(table))
            .set_exclusive_start_key(start)
            .consistent_read(true)
            .send()
            .await
            .expect("scan");
        items.extend(page.items.unwrap_or_default());
        start = page.last_evaluated_key;
        if start.is_none() {
            return items;
        }
    }
}

/// A tenant made for one test, with a live API key.
#[derive(Debug, Clone)]
pub struct Tenant {
    /// The tenant's id.
    pub id: String,
    /// Its API key.
    pub key: String,
}

fn now() -> String {
    shared::time::format(chrono::Utc::now())
}

impl Env {
    /// A new tenant with one live key and 1000 credits.
    pub async fn tenant(&self) -> Tenant {
        self.tenant_with_credits(1000).await
    }

    /// A new tenant with one live key and `credits` (granted as a manual top-up).
    pub async fn tenant_with_credits(&self, credits: i64) -> Tenant {
        let id = infra::admin::create_tenant(&self.client, &self.tables, "test tenant", &now()).await.expect("tenant");
        let (_, key) = infra::admin::create_key(&self.client, &self.tables, id.as_str(), &now()).await.expect("key");
        if credits > 0 {
            infra::admin::grant_credits(&self.client, &self.tables, id.as_str(), credits).await.expect("credits");
        }
        Tenant { id: id.to_string(), key }
    }

    /// A key of `tenant` that has been revoked.
    pub async fn revoked_key(&self, tenant: &Tenant) -> String {
        let (key_id, key) =
            infra::admin::create_key(&self.client, &self.tables, &tenant.id, &now()).await.expect("key");
        infra::admin::revoke_key(&self.client, &self.tables, key_id.as_str(), &now()).await.expect("revoke");
        key
    }
}

/// Waits for the next UTC minute when less than 20 s are left of this one: the rate limit
/// counts in whole UTC minutes, so a test of it that makes its few requests from here
/// counts them all in one window and can expect their exact count.
pub async fn one_rate_limit_window() {
    const NEEDED: std::time::Duration = std::time::Duration::from_secs(20);
    let into = u64::try_from(chrono::Utc::now().timestamp_millis().rem_euclid(60_000)).unwrap_or(0);
    let left = std::time::Duration::from_millis(60_000 - into);
    if left < NEEDED {
        tokio::time::sleep(left + std::time::Duration::from_millis(20)).await;
    }
}

/// The partition (`tenant_id`) of checkpoint `id`'s by-id entry, workflow pointer and
/// writes, as the storage layout documents it for an execution that keeps its checkpoints
/// apart: the tenant's shard of the id's last hex digit.
pub fn checkpoint_partition(tenant: &str, id: &str) -> String {
    let digit = id.chars().last().and_then(|c| c.to_digit(16)).expect("a checkpoint id ends in a hex digit");
    format!("{tenant}#{digit:02}")
}

/// The partition of execution `id`'s item (table `executions`) in the spread layout: one
/// of the tenant's 16 shards, by the id's last hex digit, as for a checkpoint.
pub fn execution_partition(tenant: &str, id: &str) -> String {
    checkpoint_partition(tenant, id)
}

/// Moves execution `id` of `tenant` (started by this version, spread) to the layout of
/// an earlier version: its item and its key's pointer in the tenant's own partition, its
/// index keys without a shard, and (`apart: false`) without `checkpoints_apart`, as that
/// version wrote them (and without the mark of a start reported by the stream, so that
/// the item put again is no second report of the start, nor `headed`: its checkpoints
/// put the item, as that version's did).
pub async fn to_earlier_layout(env: &Env, tenant: &str, id: &str, apart: bool) {
    use shared::dynamo::{Table, s};
    let table = env.tables.name(Table::Executions);
    let spread = execution_partition(tenant, id);
    let mut item = take_item(env, &spread, id).await.expect("the execution");
    for name in ["tenant_id", "tenant_status", "tenant_workflow", "tenant_workflow_status"] {
        let value = item[name].as_s().expect("text").replacen(&spread, tenant, 1);
        item.insert(name.to_owned(), s(value));
    }
    if !apart {
        item.remove("checkpoints_apart");
    }
    item.remove("checkpoints_joined");
    item.remove("started_by_stream");
    item.remove("headed");
    if let Some(key) = item.get("client_key") {
        let pointer = format!("key#{}#{}", item["workflow_id"].as_s().expect("text"), key.as_s().expect("text"));
        let mut moved = None;
        for shard in 0..16 {
            moved = moved.or(take_item(env, &format!("{tenant}#{shard:02}"), &pointer).await);
        }
        let mut moved = moved.expect("the key's pointer in one of the shards");
        moved.insert("tenant_id".to_owned(), s(tenant));
        env.client.put_item().table_name(table).set_item(Some(moved)).send().await.expect("put");
    }
    env.client.put_item().table_name(table).set_item(Some(item)).send().await.expect("put");
}

/// Deletes item `id` of partition `partition` of table `executions`, returning it.
async fn take_item(env: &Env, partition: &str, id: &str) -> Option<shared::dynamo::Item> {
    use shared::dynamo::{Table, s};
    let table = env.tables.name(Table::Executions);
    let delete = env.client.delete_item().table_name(table).key("tenant_id", s(partition)).key("id", s(id));
    let old = delete.return_values(aws_sdk_dynamodb::types::ReturnValue::AllOld).send().await.expect("delete");
    old.attributes
}

/// The partition of execution `execution`'s by-execution checkpoint entries and key
/// pointers (an execution that keeps its checkpoints apart).
pub fn run_partition(tenant: &str, execution: &str) -> String {
    format!("{tenant}#{execution}")
}

/// The partition of the checkpoints and key pointers of execution `execution`, which
/// keeps each checkpoint in one entry (every execution started now): the tenant's, `#c`,
/// and the last 10 hex digits of the execution's id.
pub fn joined_partition(tenant: &str, execution: &str) -> String {
    format!("{tenant}#c{}", &execution[execution.len() - 10..])
}

/// The key (`tenant_id`, `entry`) of checkpoint `id`'s one entry (of an execution
/// started now), which its id names: its execution's partition, its sequence and id.
pub fn checkpoint_entry(tenant: &str, id: &str) -> (String, String) {
    let parsed = shared::ids::CheckpointId::parse(id).expect("a checkpoint id");
    let (mark, sequence) = parsed.place();
    (format!("{tenant}#c{mark}"), format!("{sequence:010}#{id}"))
}

/// `tenant`'s outbox items (table `events`), oldest first: from its 16 shards, and its own
/// partition (items from before the shards).
pub async fn outbox(client: &Client, tables: &Tables, tenant: &str) -> Vec<shared::dynamo::Item> {
    let mut items = Vec::new();
    for partition in std::iter::once(tenant.to_owned()).chain((0..16).map(|shard| format!("{tenant}#{shard:02}"))) {
        let out = client
            .query()
            .table_name(tables.name(shared::dynamo::Table::Events))
            .key_condition_expression("tenant_id = :t")
            .expression_attribute_values(":t", shared::dynamo::s(partition))
            .send()
            .await
            .expect("outbox");
        items.extend(out.items.unwrap_or_default());
    }
    let event_id = |item: &shared::dynamo::Item| item.get("event_id").and_then(|v| v.as_s().ok()).cloned();
    items.sort_by_key(event_id);
    items
}

/// Text of `len` characters that compresses badly (6 bits a character).
pub fn noise(seed: u64, len: usize) -> String {
    let mut seed = seed;
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            char::from(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[(seed % 64) as usize])
        })
        .collect()
}

/// A response as a test sees it.
#[derive(Debug, Clone)]
pub struct Reply {
    /// Status code.
    pub status: u16,
    /// Headers.
    pub headers: HeaderMap,
    /// The body as JSON (`Null` when empty or not JSON).
    pub body: Value,
    /// The raw body.
    pub raw: Vec<u8>,
}

impl Reply {
    /// A header's value as text.
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Panics with the body unless the status is `expected`.
    #[track_caller]
    pub fn expect(&self, expected: u16) -> &Self {
        assert_eq!(self.status, expected, "unexpected status; body: {}", String::from_utf8_lossy(&self.raw));
        self
    }

    /// Asserts a problem+json error with `status` and `code`.
    #[track_caller]
    pub fn expect_problem(&self, status: u16, code: &str) -> &Self {
        self.expect(status);
        assert_eq!(self.header("content-type"), Some("application/problem+json"));
        assert_eq!(self.body["code"], code, "body: {}", self.body);
        assert_eq!(self.body["status"], status);
        assert!(self.body["request_id"].as_str().is_some_and(|id| Some(id) == self.header("x-request-id")));
        self
    }

    /// The fields named in a 422's `errors`.
    #[must_use]
    pub fn error_fields(&self) -> Vec<String> {
        self.body["errors"]
            .as_array()
            .map(|errors| errors.iter().filter_map(|e| e["field"].as_str().map(str::to_owned)).collect())
            .unwrap_or_default()
    }
}

/// How requests reach the API.
#[derive(Debug, Clone)]
pub enum Transport {
    /// The functions' routers, called in process; with a [`Recorder`], every DynamoDB
    /// permission each function's calls needed is noted.
    InProcess(Arc<Vec<axum::Router>>, Option<Recorder>),
    /// HTTP to the local API (cargo lambda watch).
    Http {
        /// `http://127.0.0.1:PORT` (without `/api/v1`).
        origin: String,
        /// The client.
        client: reqwest::Client,
    },
}

impl Transport {
    /// Every function's router over `env`.
    pub fn in_process(env: &Env) -> Self {
        Self::in_process_with_clock(env, Arc::new(SystemClock))
    }

    /// Every function's router over `env`, telling time by `clock`.
    pub fn in_process_with_clock(env: &Env, clock: Arc<dyn shared::time::Clock>) -> Self {
        let (client, tables) = (&env.client, &env.tables);
        Self::InProcess(
            Arc::new(vec![
                workflows::app(client.clone(), tables.clone(), clock.clone()),
                executions::app(client.clone(), tables.clone(), clock.clone()),
                checkpoints::app(client.clone(), tables.clone(), clock.clone()),
                failures::app(client.clone(), tables.clone(), clock.clone()),
                billing::app(client.clone(), tables.clone(), clock.clone()),
                keys::app(client.clone(), tables.clone(), clock.clone()),
                webhooks::app(client.clone(), tables.clone(), clock.clone()),
                mcp::app(client.clone(), tables.clone(), clock),
            ]),
            None,
        )
    }

    /// Like [`Transport::in_process`], noting every DynamoDB permission each function's
    /// calls needed in the returned [`Recorder`].
    pub fn in_process_recording(env: &Env) -> (Self, Recorder) {
        let recorder = Recorder::default();
        let Self::InProcess(routers, _) = Self::in_process(env) else { unreachable!("in process") };
        (Self::InProcess(routers, Some(recorder.clone())), recorder)
    }

    /// The local API of `CAIRN_API_URL`.
    #[must_use]
    pub fn http() -> Self {
        let url = required_env("CAIRN_API_URL");
        let origin = url.strip_suffix("/api/v1").unwrap_or(&url).to_owned();
        // A bound on every request, so that a request the emulator loses fails the test
        // instead of hanging the run.
        let client = reqwest::Client::builder().timeout(std::time::Duration::from_secs(60)).build().expect("client");
        Self::Http { origin, client }
    }

    async fn send(&self, request: Request<Vec<u8>>) -> Reply {
        let (status, headers, raw) = match self {
            Self::InProcess(routers, recorder) => {
                let (area, router) = pick(routers, request.uri().path());
                // Answered, then what the request left for after its answer (its
                // rate-limit count), as a Lambda instance does before its next request.
                let call = async {
                    let response = router.clone().oneshot(request.map(axum::body::Body::from)).await;
                    finished(response.expect("infallible")).await
                };
                let (response, accesses) = shared::metering::recorded(call).await;
                if let Some(recorder) = recorder {
                    let mut noted = recorder.lock().expect("recorder");
                    noted.extend(accesses.into_iter().map(|a| (area.to_owned(), a)));
                }
                let (parts, body) = response.into_parts();
                let raw = axum::body::to_bytes(body, usize::MAX).await.expect("body").to_vec();
                (parts.status.as_u16(), parts.headers, raw)
            }
            Self::Http { origin, client } => {
                let (mut parts, body) = request.into_parts();
                // Every POST through the local gateway carries an Idempotency-Key (a fresh
                // one unless the test chose its own), so that the harness may send it again
                // when the gateway answers with a 500 of its own (below).
                if parts.method == Method::POST && !parts.headers.contains_key("idempotency-key") {
                    let key = format!("harness-{}", shared::ids::TransactionId::generate());
                    parts.headers.insert("idempotency-key", http::HeaderValue::from_str(&key).expect("ascii"));
                }
                let url = format!("{origin}{}", parts.uri);
                let mut attempt = 0;
                loop {
                    let response = client
                        .request(parts.method.clone(), &url)
                        .headers(parts.headers.clone())
                        .body(body.clone())
                        .send()
                        .await
                        .expect("the local API answers");
                    let status = response.status().as_u16();
                    let headers = response.headers().clone();
                    let raw = response.bytes().await.expect("body").to_vec();
                    // cargo lambda watch now and then answers a request with a 500 of its
                    // own (this body; a function's errors are problem+json with a `code`)
                    // without the function having failed. A GET is safe to send again, and
                    // so is a POST with an Idempotency-Key (the API answers a repeat with
                    // the first answer, or runs it if the first never ran).
                    let emulator_failed = status == 500 && raw.starts_with(EMULATOR_500.as_bytes());
                    let safe = parts.method == Method::GET
                        || (parts.method == Method::POST && parts.headers.contains_key("idempotency-key"));
                    if let Some(pause) = EMULATOR_RESENDS.get(attempt).filter(|_| emulator_failed && safe) {
                        attempt += 1;
                        eprintln!("the local gateway answered its own 500 to {} {url}; trying again", parts.method);
                        tokio::time::sleep(*pause).await;
                        continue;
                    }
                    break (status, headers, raw);
                }
            }
        };
        let body = serde_json::from_slice(&raw).unwrap_or(Value::Null);
        Reply { status, headers, body, raw }
    }
}

/// `response` once the work its request left for after its answer (its rate-limit
/// count) is done, as a Lambda instance finishes it before its next request
/// ([`shared::lambda::run`]): for tests that call a router in process.
pub async fn finished<B>(response: http::Response<B>) -> http::Response<B> {
    if let Some(after) = shared::lambda::left_by(&response) {
        after.run().await;
    }
    response
}

/// The start of the body of the 500 that `cargo lambda watch` itself sends.
pub const EMULATOR_500: &str = r#"{"type":"https://httpstatuses.com/500""#;

/// The pauses before each sending again of a request `cargo lambda watch` answered with
/// its own 500. It loses an answer when the function's response to it is over about
/// 16 KiB and the function's write of it is cut in two (docs/testing.md): the more the
/// machine is loaded, the likelier, so a request is sent again after a growing pause
/// rather than at once, when the load that lost it may not have passed.
pub const EMULATOR_RESENDS: [std::time::Duration; 4] = [
    std::time::Duration::from_millis(250),
    std::time::Duration::from_millis(500),
    std::time::Duration::from_secs(1),
    std::time::Duration::from_secs(2),
];

/// The areas served in process, in the order of [`Transport::in_process`].
/// Each router's first path segment after /api/v1 and its function, in router order.
const AREAS: [(&str, &str); 8] = [
    ("workflows", "workflows"),
    ("executions", "executions"),
    ("checkpoints", "checkpoints"),
    ("failures", "failures"),
    ("billing", "billing"),
    ("keys", "keys"),
    ("webhook-endpoints", "webhooks"),
    ("mcp", "mcp"),
];

/// The function that serves `path` (by its first segment after /api/v1) and its router.
fn pick<'a>(routers: &'a [axum::Router], path: &str) -> (&'static str, &'a axum::Router) {
    let area = path.trim_start_matches("/api/v1/").split('/').next().unwrap_or_default();
    // `/settings/retention` and `/exports` are the executions function's, `/account` the
    // keys function's.
    let area = match area {
        "settings" | "exports" => "executions",
        "account" => "keys",
        other => other,
    };
    let index = AREAS.iter().position(|(segment, _)| *segment == area).unwrap_or(0);
    (AREAS[index].1, &routers[index])
}

/// The DynamoDB permissions in-process functions needed: (function, permission).
pub type Recorder = Arc<std::sync::Mutex<std::collections::BTreeSet<(String, shared::metering::Access)>>>;

/// A client of the API for one test.
#[derive(Debug, Clone)]
pub struct Api {
    transport: Transport,
}

impl Api {
    /// An API client over `transport`.
    #[must_use]
    pub fn new(transport: Transport) -> Self {
        Self { transport }
    }

    /// Whether requests go to the routers in process (not through `cargo lambda watch`).
    #[must_use]
    pub fn is_in_process(&self) -> bool {
        matches!(self.transport, Transport::InProcess(..))
    }

    /// Starts a request; `path` is relative to `/api/v1`.
    #[must_use]
    pub fn request(&self, method: Method, path: &str) -> Call<'_> {
        Call { api: self, method, path: format!("/api/v1{path}"), headers: HeaderMap::new(), body: Vec::new() }
    }

    /// One MCP request (`method`, `params`) to `/mcp` as a JSON-RPC message.
    pub async fn mcp(&self, key: &str, method: &str, params: &Value) -> Reply {
        let message = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.post(key, "/mcp", &message).await
    }

    /// The result of MCP tool `name` called with `arguments` (its `isError` included).
    pub async fn tool(&self, key: &str, name: &str, arguments: &Value) -> Value {
        let reply = self.mcp(key, "tools/call", &serde_json::json!({"name": name, "arguments": arguments})).await;
        reply.expect(200);
        reply.body["result"].clone()
    }

    /// A GET with `key`.
    pub async fn get(&self, key: &str, path: &str) -> Reply {
        self.request(Method::GET, path).key(key).send().await
    }

    /// A POST of JSON with `key`.
    pub async fn post(&self, key: &str, path: &str, body: &Value) -> Reply {
        self.request(Method::POST, path).key(key).json(body).send().await
    }

    /// A POST of JSON with `key` as a client of a busy tenant sends it: with
    /// `Idempotency-Key: idempotency_key`, and sent again after a 503 (or a 409
    /// `idempotency_in_progress`) once its `Retry-After` has passed, at most [`RETRIES`]
    /// times, as the Python client does. Answers the last reply and how many tries came
    /// before it.
    ///
    /// For bursts of one tenant's writes that contend on one item (its balance): DynamoDB
    /// Local commits them a hundred times slower than DynamoDB, so some run out of their
    /// race budget here; the key makes the retry safe (never a second effect).
    pub async fn post_retrying(&self, key: &str, path: &str, body: &Value, idempotency_key: &str) -> (Reply, u32) {
        let mut unavailable = 0;
        loop {
            let reply = self
                .request(Method::POST, path)
                .key(key)
                .header("idempotency-key", idempotency_key)
                .json(body)
                .send()
                .await;
            let in_progress = reply.status == 409 && reply.body["code"] == "idempotency_in_progress";
            if !(reply.status == 503 || in_progress) || unavailable == RETRIES {
                return (reply, unavailable);
            }
            unavailable += 1;
            let wait = reply.header("retry-after").and_then(|s| s.parse().ok()).unwrap_or(1);
            tokio::time::sleep(std::time::Duration::from_secs(wait)).await;
        }
    }

    /// A PUT of JSON with `key`.
    pub async fn put(&self, key: &str, path: &str, body: &Value) -> Reply {
        self.request(Method::PUT, path).key(key).json(body).send().await
    }

    /// A PATCH of JSON with `key`.
    pub async fn patch(&self, key: &str, path: &str, body: &Value) -> Reply {
        self.request(Method::PATCH, path).key(key).json(body).send().await
    }

    /// A DELETE with `key`.
    pub async fn delete(&self, key: &str, path: &str) -> Reply {
        self.request(Method::DELETE, path).key(key).send().await
    }
}

/// How many times [`Api::post_retrying`] sends a request again after a 503.
pub const RETRIES: u32 = 5;

/// A request being built.
#[derive(Debug)]
pub struct Call<'a> {
    api: &'a Api,
    method: Method,
    path: String,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Call<'_> {
    /// Sends the key as `X-API-Key`.
    #[must_use]
    pub fn key(self, key: &str) -> Self {
        self.header("x-api-key", key)
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.append(name, HeaderValue::from_str(value).expect("header value"));
        self
    }

    /// Adds a header whose value is raw bytes (which need not be text).
    #[must_use]
    pub fn header_bytes(mut self, name: &'static str, value: &[u8]) -> Self {
        self.headers.append(name, HeaderValue::from_bytes(value).expect("header bytes"));
        self
    }

    /// A JSON body.
    #[must_use]
    pub fn json(self, body: &Value) -> Self {
        self.raw_body("application/json", serde_json::to_vec(body).expect("json"))
    }

    /// Any body with its content type.
    #[must_use]
    pub fn raw_body(mut self, content_type: &str, body: Vec<u8>) -> Self {
        self.headers.insert(header::CONTENT_TYPE, HeaderValue::from_str(content_type).expect("content type"));
        self.body = body;
        self
    }

    /// Sends it.
    pub async fn send(self) -> Reply {
        let mut request = Request::builder().method(self.method).uri(&self.path).body(self.body).expect("request");
        *request.headers_mut() = self.headers;
        self.api.transport.send(request).await
    }
}

/// Defines each listed behaviour test twice: `in_process::NAME` and `over_http::NAME`.
/// Each test is an `async fn NAME(api: Api, env: Env)`.
#[macro_export]
macro_rules! both_paths {
    ($($name:ident),* $(,)?) => {
        mod in_process {
            $(
                #[tokio::test]
                async fn $name() {
                    let env = $crate::env().await;
                    super::$name($crate::Api::new($crate::Transport::in_process(&env)), env).await;
                }
            )*
        }
        mod over_http {
            $(
                #[tokio::test]
                async fn $name() {
                    let env = $crate::env().await;
                    super::$name($crate::Api::new($crate::Transport::http()), env).await;
                }
            )*
        }
    };
}

/// The DynamoDB permissions among `accesses` that `function`'s policy in `template.yaml`
/// does not grant, each as `<action> on <table>` (` (index)` for an index).
#[must_use]
pub fn ungranted<'a>(function: &str, accesses: impl IntoIterator<Item = &'a shared::metering::Access>) -> Vec<String> {
    ungranted_in(&required_env("TABLE_PREFIX"), function, accesses)
}

/// [`ungranted`] for calls on the tables named with `prefix` (a test's own tables).
#[must_use]
pub fn ungranted_in<'a>(
    prefix: &str,
    function: &str,
    accesses: impl IntoIterator<Item = &'a shared::metering::Access>,
) -> Vec<String> {
    let grants = infra::template::Template::embedded().expect("template").grants(function).expect("grants");
    let mut missing: Vec<String> = accesses
        .into_iter()
        .map(|access| {
            let table = access.table.strip_prefix(prefix).expect("a table of this run").to_owned();
            infra::template::Grant { action: access.action.clone(), table, index: access.index }
        })
        .filter(|needed| !grants.contains(needed))
        .map(|needed| format!("{} on {}{}", needed.action, needed.table, if needed.index { " (index)" } else { "" }))
        .collect();
    missing.sort();
    missing.dedup();
    missing
}

/// An SDK interceptor that runs `act` with the request's body before each call of
/// `operation` (`"UpdateItem"`) is sent, and fails the call when `act` does: a test's
/// way to delay or refuse one kind of DynamoDB call.
#[derive(Debug, Clone, Copy)]
pub struct BeforeSending {
    /// The operation's name, as in the `X-Amz-Target` header after the dot.
    pub operation: &'static str,
    /// What to do before sending it, given its body.
    pub act: fn(&[u8]) -> Result<(), aws_smithy_runtime_api::box_error::BoxError>,
}

impl aws_smithy_runtime_api::client::interceptors::Intercept for BeforeSending {
    fn name(&self) -> &'static str {
        "BeforeSending"
    }

    fn read_before_transmit(
        &self,
        context: &aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef<'_>,
        _: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        _: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        let target = context.request().headers().get("x-amz-target").unwrap_or_default();
        match target.rsplit_once('.') {
            Some((_, operation)) if operation == self.operation => {
                (self.act)(context.request().body().bytes().unwrap_or_default())
            }
            _ => Ok(()),
        }
    }
}

/// Rewrites a client's answers: `answer` sees each call's operation (`X-Amz-Target`)
/// and request body, and gives the body to answer instead of DynamoDB's, or `None`.
#[derive(Clone)]
pub struct Rewrite(pub std::sync::Arc<Answer>);

/// What [`Rewrite`] asks of each call: its operation and request body in, the answer's
/// body out.
pub type Answer = dyn Fn(&str, &serde_json::Value) -> Option<String> + Send + Sync;

impl std::fmt::Debug for Rewrite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Rewrite")
    }
}

/// The operation and request body of a call, kept in the call's own state.
#[derive(Debug, Clone)]
struct Sent(String, serde_json::Value);

impl aws_smithy_types::config_bag::Storable for Sent {
    type Storer = aws_smithy_types::config_bag::StoreReplace<Self>;
}

impl aws_smithy_runtime_api::client::interceptors::Intercept for Rewrite {
    fn name(&self) -> &'static str {
        "Rewrite"
    }

    fn read_before_transmit(
        &self,
        context: &aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef<'_>,
        _: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        cfg: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        let target = context.request().headers().get("x-amz-target").unwrap_or_default().to_owned();
        let body = context.request().body().bytes().and_then(|b| serde_json::from_slice(b).ok());
        cfg.interceptor_state().store_put(Sent(target, body.unwrap_or(serde_json::Value::Null)));
        Ok(())
    }

    fn modify_before_deserialization(
        &self,
        context: &mut aws_smithy_runtime_api::client::interceptors::context::BeforeDeserializationInterceptorContextMut<
            '_,
        >,
        _: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        cfg: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        let Some(Sent(target, body)) = cfg.load::<Sent>() else { return Ok(()) };
        let Some(answer) = (self.0)(target, body) else { return Ok(()) };
        let response = context.response_mut();
        response.headers_mut().remove("content-length");
        *response.body_mut() = aws_smithy_types::body::SdkBody::from(answer);
        Ok(())
    }
}
