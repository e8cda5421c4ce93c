//! Lambda's 6 MB payload limits, proved by computation on the worst cases valid data can
//! make: every list at its largest page and every `GET` by id, filled with the most
//! expensive content each field accepts (escape-heavy strings, 4-byte characters, full
//! metadata), is encoded exactly as the function hands it to Lambda
//! (`shared::lambda::invoke` on an API Gateway v2 event) and measured; and the largest
//! requests fit Lambda's event once API Gateway has encoded them (gzip for large states).
//! DynamoDB Local enforces none of these limits, so only arithmetic can show them. In
//! process only: the local gateway relays large answers unreliably.

use std::io::Write;
use std::sync::Arc;

use api_tests::{Api, Env, Transport};
use lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpResponse;
use serde_json::{Value, json};
use shared::lambda::{MAX_REQUEST_PAYLOAD, MAX_RESPONSE_PAYLOAD};
use shared::time::SystemClock;

const EVENT: &str = include_str!("../data/apigw-v2-request.json");

/// A string of `chars` characters whose JSON form is as large as the API lets text be:
/// `"` costs 2 bytes in JSON and 4 in Lambda's text payload; `😀` is 4 bytes of UTF-8.
fn heavy(chars: usize) -> String {
    ['"', '😀', '\\', '😀'].iter().cycle().take(chars).collect()
}

/// As [`heavy`], without quotes: as costly as text gets, and its fingerprint is as long
/// as a fingerprint may be (no quoted value, number or id to shorten).
fn heavy_unquoted(chars: usize) -> String {
    ['\\', '😀'].iter().cycle().take(chars).collect()
}

/// Metadata as large as it may be: 16 KiB of compact JSON, escape-heavy.
fn heavy_metadata() -> Value {
    let mut metadata = serde_json::Map::new();
    for i in 0..50 {
        let key = format!("{i:02}{}", "\"".repeat(38));
        metadata.insert(key, Value::String(String::new()));
    }
    let mut i = 0;
    while serde_json::to_vec(&metadata).expect("json").len() < shared::body::METADATA_MAX_BYTES - 8 {
        let key = metadata.keys().nth(i % 50).expect("key").clone();
        if let Some(Value::String(v)) = metadata.get_mut(&key)
            && v.chars().count() < 500
        {
            v.push('"');
        }
        i += 1;
    }
    let size = serde_json::to_vec(&metadata).expect("json").len();
    assert!(size <= shared::body::METADATA_MAX_BYTES && size > shared::body::METADATA_MAX_BYTES - 64, "{size}");
    Value::Object(metadata)
}

/// The Lambda payload of `GET path` answered by `app`, as the runtime sends it.
async fn payload(app: &axum::Router, key: &str, path: &str) -> (usize, ApiGatewayV2httpResponse) {
    answered(app, key, "GET", path, None, 200).await
}

/// The Lambda response payload of `method path` with `body`, which must answer `status`.
async fn answered(
    app: &axum::Router,
    key: &str,
    method: &str,
    path: &str,
    body: Option<&Value>,
    status: i64,
) -> (usize, ApiGatewayV2httpResponse) {
    let (raw_path, query) = path.split_once('?').unwrap_or((path, ""));
    let body = body.map_or_else(|| "null".to_owned(), |b| serde_json::to_string(&b.to_string()).expect("text"));
    let text = EVENT
        .replace("{{METHOD}}", method)
        .replace("{{ROUTE}}", raw_path)
        .replace("{{PATH}}", &format!("/api/v1{raw_path}"))
        .replace("{{QUERY}}", query)
        .replace("{{API_KEY}}", key)
        .replace("\"{{BODY}}\"", &body);
    let request: lambda_http::request::LambdaRequest = serde_json::from_str(&text).expect("event");
    let event = lambda_http::LambdaEvent::new(request, lambda_http::Context::default());
    let response = shared::lambda::invoke(app.clone(), event).await;
    assert_eq!(response.status_code, status, "{method} {path}: {:?}", response.body);
    (serde_json::to_vec(&response).expect("payload").len(), response)
}

#[track_caller]
fn fits(what: &str, size: usize) {
    println!("{what}: {size} bytes of Lambda response payload (limit {MAX_RESPONSE_PAYLOAD})");
    assert!(size <= MAX_RESPONSE_PAYLOAD, "{what}: {size} bytes > {MAX_RESPONSE_PAYLOAD}");
}

fn body_of(response: &ApiGatewayV2httpResponse) -> Value {
    let bytes = match response.body.as_ref().expect("body") {
        lambda_http::Body::Text(text) => text.as_bytes().to_vec(),
        lambda_http::Body::Binary(bytes) => bytes.clone(),
        lambda_http::Body::Empty => Vec::new(),
        _ => panic!("unknown body"),
    };
    serde_json::from_slice(&bytes).expect("json body")
}

/// A new tenant with 1000 credits, an in-process API and a workflow of that tenant.
async fn running_workflow() -> (Env, api_tests::Tenant, Api, Value) {
    let env = api_tests::env().await;
    let t = env.tenant().await;
    let api = Api::new(Transport::in_process(&env));
    let wf = api.post(&t.key, "/workflows", &json!({"name": "w", "workflow_type": "custom"})).await;
    let wf = wf.expect(201).body["id"].clone();
    (env, t, api, wf)
}

struct Apps {
    workflows: axum::Router,
    executions: axum::Router,
    checkpoints: axum::Router,
    failures: axum::Router,
    billing: axum::Router,
    mcp: axum::Router,
}

fn apps(env: &Env) -> Apps {
    let (c, t, clock) = (&env.client, &env.tables, Arc::new(SystemClock));
    Apps {
        workflows: workflows::app(c.clone(), t.clone(), clock.clone()),
        executions: executions::app(c.clone(), t.clone(), clock.clone()),
        checkpoints: checkpoints::app(c.clone(), t.clone(), clock.clone()),
        failures: failures::app(c.clone(), t.clone(), clock.clone()),
        billing: billing::app(c.clone(), t.clone(), clock.clone()),
        mcp: mcp::app(c.clone(), t.clone(), clock),
    }
}

#[tokio::test]
async fn a_4_mib_escape_heavy_state_fits_the_response_as_base64_and_comes_back_whole() {
    let (env, t, api, wf) = running_workflow().await;
    let metadata = heavy_metadata();
    let e = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201).body["id"].clone();
    // 4 MiB of compact JSON, each character of the string a quote: 8 MiB as Lambda text.
    let state = json!({"s": "\"".repeat((4 * 1024 * 1024 - 8) / 2)});
    assert!(serde_json::to_vec(&state).expect("json").len() <= 4 * 1024 * 1024);
    let body = json!({"execution_id": e, "name": heavy(200), "metadata": metadata, "state": state});
    let cp = api.post(&t.key, "/checkpoints", &body).await;
    let id = cp.expect(201).body["id"].as_str().expect("id").to_owned();

    let apps = apps(&env);
    let (size, response) = payload(&apps.checkpoints, &t.key, &format!("/checkpoints/{id}?include_state=true")).await;
    fits("GET /checkpoints/{id}?include_state=true, 4 MiB of quotes", size);
    assert!(response.is_base64_encoded, "the escape-heavy body goes as base64, the smaller form");
    let returned = body_of(&response);
    assert_eq!(returned["state"], state, "the state comes back whole");
    assert_eq!(returned["metadata"], body["metadata"]);
    // The same body as lambda_http would have sent it (always text for JSON): over the limit.
    let text = serde_json::to_vec(&returned).expect("json");
    let as_text = serde_json::to_string(std::str::from_utf8(&text).expect("utf-8")).expect("escaped").len();
    assert!(as_text > MAX_RESPONSE_PAYLOAD, "text encoding alone would be {as_text} bytes");
}

#[tokio::test]
async fn the_largest_executions_workflows_and_transactions_pages_and_items_fit() {
    let env = api_tests::env().await;
    let t = env.tenant_with_credits(1000).await;
    let api = Api::new(Transport::in_process(&env));
    let metadata = heavy_metadata();
    let definition = json!({"d": "\"".repeat((64 * 1024 - 8) / 2)});
    let mut workflows = Vec::new();
    for _ in 0..100 {
        let body = json!({"name": heavy(200), "description": heavy(2000), "workflow_type": "custom",
                          "metadata": metadata, "definition": definition});
        workflows.push(api.post(&t.key, "/workflows", &body).await.expect(201).body["id"].clone());
    }
    let value = json!({"v": "\"".repeat((256 * 1024 - 8) / 2)});
    let mut last = Value::Null;
    for wf in &workflows {
        let start = json!({"workflow_id": wf, "key": heavy(256), "metadata": metadata, "input": value, "tags": heaviest_tags()});
        let e = api.post(&t.key, "/executions", &start).await.expect(201).body["id"].clone();
        // A read of the ledger enters the start's charge as a usage entry of its own.
        api.get(&t.key, "/billing/transactions?page_size=1").await.expect(200);
        let path = format!("/executions/{}/fail", e.as_str().expect("id"));
        let message = heavy_unquoted(4096);
        let fail =
            json!({"error_type": "AGENT_ERROR", "message": message, "details": {"traceback": "\"".repeat(30_000)}});
        api.post(&t.key, &path, &fail).await.expect(200);
        last = e;
    }
    let last = last.as_str().expect("id");
    api.post(&t.key, &format!("/executions/{last}/replay"), &json!({})).await.expect(200);
    let cancel = json!({"reason": heavy(1000)});
    api.post(&t.key, &format!("/executions/{last}/pause"), &json!({})).await.expect(200);
    api.post(&t.key, &format!("/executions/{last}/cancel"), &cancel).await.expect(200);

    let apps = apps(&env);
    let (size, page) = payload(&apps.workflows, &t.key, "/workflows?page_size=100").await;
    assert_eq!(body_of(&page)["items"].as_array().map(Vec::len), Some(100));
    fits("GET /workflows?page_size=100, every field at its largest", size);
    let (size, _) =
        payload(&apps.workflows, &t.key, &format!("/workflows/{}", workflows[0].as_str().expect("id"))).await;
    fits("GET /workflows/{id} with a 64 KiB definition", size);
    let (size, page) = payload(&apps.executions, &t.key, "/executions?page_size=100").await;
    assert_eq!(body_of(&page)["items"].as_array().map(Vec::len), Some(100));
    fits("GET /executions?page_size=100, failed with 4096-character messages and the heaviest tags", size);
    let (size, _) = payload(&apps.executions, &t.key, &format!("/executions/{last}")).await;
    fits("GET /executions/{id} with a 256 KiB input", size);
    // A dry run shows 20 of them; a page of 100 bulk jobs, each with the heaviest filter.
    let dry = json!({"action": "replay", "filter": {"status": "failed"}, "dry_run": true});
    let (size, answer) = answered(&apps.executions, &t.key, "POST", "/executions/bulk", Some(&dry), 200).await;
    assert_eq!(body_of(&answer)["executions"].as_array().map(Vec::len), Some(20));
    fits("POST /executions/bulk with dry_run: 20 of the largest executions", size);
    let tags: Vec<String> = heaviest_tags()
        .as_object()
        .expect("tags")
        .iter()
        .map(|(k, v)| format!("{k}:{}", v.as_str().expect("value")))
        .collect();
    let job =
        json!({"action": "cancel", "filter": {"status": "paused", "tag": tags, "error_type": heavy_unquoted(255)}});
    for _ in 0..100 {
        api.post(&t.key, "/executions/bulk", &job).await.expect(202);
    }
    let (size, page) = payload(&apps.executions, &t.key, "/executions/bulk?page_size=100").await;
    assert_eq!(body_of(&page)["items"].as_array().map(Vec::len), Some(100));
    fits("GET /executions/bulk?page_size=100, each job's filter with 16 of the longest tags", size);
    let (size, page) = payload(&apps.billing, &t.key, "/billing/transactions?page_size=100").await;
    assert_eq!(body_of(&page)["items"].as_array().map(Vec::len), Some(100));
    fits("GET /billing/transactions?page_size=100", size);
    let (size, page) = payload(&apps.failures, &t.key, "/failures?limit=200").await;
    assert_eq!(body_of(&page)["items"].as_array().map(Vec::len), Some(100));
    fits("GET /failures?limit=200 (100 failures of 4096-character messages, 300-character fingerprints)", size);
    let failure = body_of(&page)["items"][0]["id"].as_str().expect("failure").to_owned();
    let (size, _) = payload(&apps.failures, &t.key, &format!("/failures/{failure}")).await;
    fits("GET /failures/{id} with its details", size);
    let (size, _) = payload(&apps.failures, &t.key, "/failures/stats").await;
    fits("GET /failures/stats", size);
    let (size, _) = payload(&apps.billing, &t.key, "/billing/balance").await;
    fits("GET /billing/balance", size);

    // The MCP server's tools over the same records: each answer twice (structured, and
    // as text), bounded by mcp::tools::ANSWER_MAX_BYTES.
    let wf = workflows[0].as_str().expect("id");
    let calls = [
        ("list_workflows", json!({"page_size": 100}), true),
        ("get_workflow", json!({"workflow_id": wf}), false),
        ("list_executions", json!({"page_size": 100}), true),
        ("get_execution", json!({"execution_id": last}), false),
        ("list_failures", json!({"limit": 100}), true),
        ("get_failure", json!({"failure_id": failure}), false),
    ];
    for (tool, arguments, truncated) in calls {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}});
        let (size, answer) = answered(&apps.mcp, &t.key, "POST", "/mcp", Some(&call), 200).await;
        fits(&format!("MCP {tool} {arguments}"), size);
        let result = &body_of(&answer)["result"];
        assert_eq!(result["isError"], false, "{tool}: {result}");
        let structured = serde_json::to_vec(&result["structuredContent"]).expect("json").len();
        assert!(structured <= mcp::tools::ANSWER_MAX_BYTES, "{tool}: {structured} bytes");
        assert_eq!(result["structuredContent"]["truncated"].is_object(), truncated, "{tool}: a page cut short says so");
    }
}

#[tokio::test]
async fn the_largest_checkpoint_and_failure_windows_fit() {
    let env = api_tests::env().await;
    let t = env.tenant_with_credits(1000).await;
    let api = Api::new(Transport::in_process(&env));
    let metadata = heavy_metadata();
    let wf = api.post(&t.key, "/workflows", &json!({"name": "w", "workflow_type": "custom"})).await;
    let wf = wf.expect(201).body["id"].clone();
    let e = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201).body["id"].clone();
    let e = e.as_str().expect("id").to_owned();
    for i in 0..200 {
        let key = format!("{i:03}{}", heavy(253));
        let body = json!({"execution_id": e, "name": heavy(200), "key": key, "metadata": metadata, "state": {}});
        api.post(&t.key, "/checkpoints", &body).await.expect(201);
    }
    // 200 failures of 200 groups: messages that differ in a word, their fingerprints as
    // long as may be, agent names far longer than a group keeps.
    for i in 0..200_u32 {
        let start = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await;
        let id = start.expect(201).body["id"].as_str().expect("id").to_owned();
        let word: String =
            [i / 26, i % 26].iter().map(|d| char::from(b'a' + u8::try_from(*d).expect("letter"))).collect();
        let message = format!("{word} {}", heavy_unquoted(4093));
        let details = json!({"agent_name": heavy(20_000)});
        let fail = json!({"error_type": format!("E{}", "_".repeat(63)), "message": message, "details": details});
        api.post(&t.key, &format!("/executions/{id}/fail"), &fail).await.expect(200);
    }
    let apps = apps(&env);
    let (size, page) = payload(&apps.checkpoints, &t.key, &format!("/checkpoints?execution_id={e}&limit=200")).await;
    assert_eq!(body_of(&page)["items"].as_array().map(Vec::len), Some(200));
    fits("GET /checkpoints?limit=200, full metadata, names and keys", size);
    // The largest writes document: 4 MiB of quotes, the most expensive JSON text.
    let checkpoint = body_of(&page)["items"][199]["id"].as_str().expect("id").to_owned();
    let value = "\"".repeat(1024 * 1024 - 8 * 1024);
    for task in 0..2 {
        let writes: Vec<Value> =
            (0..1).map(|index| json!({"index": index, "channel": heavy(256), "value": value})).collect();
        let body = json!({"task_id": format!("{task}{}", heavy(255)), "task_path": heavy(1024), "writes": writes});
        api.post(&t.key, &format!("/checkpoints/{checkpoint}/writes"), &body).await.expect(200);
    }
    let (size, answer) = payload(&apps.checkpoints, &t.key, &format!("/checkpoints/{checkpoint}/writes")).await;
    assert_eq!(body_of(&answer)["total"], 2);
    fits("GET /checkpoints/{id}/writes, about 4 MiB of quotes", size);
    let (size, page) = payload(&apps.failures, &t.key, "/failures?limit=200").await;
    assert_eq!(body_of(&page)["items"].as_array().map(Vec::len), Some(200));
    fits("GET /failures?limit=200, 4096-character messages", size);
    let (size, page) = payload(&apps.failures, &t.key, "/failures/groups?limit=200").await;
    let groups = body_of(&page)["items"].as_array().cloned().expect("items");
    assert_eq!(groups.len(), 200);
    let agent = groups[0]["agent_name"].as_str().expect("agent").chars().count();
    assert_eq!(
        agent,
        domain::runs::failures::fingerprint::AGENT_NAME_MAX,
        "a group keeps the agent's first characters"
    );
    fits("GET /failures/groups?limit=200, 4096-character samples, the longest fingerprints and agents", size);
}

/// The size of the API Gateway event carrying `body` (as text, or as base64 when
/// `binary`), with headers as large as API Gateway lets them be (10 KB in all).
fn event_size(body: &[u8], binary: bool) -> usize {
    let headers_room = 10 * 1024;
    let encoded = if binary {
        shared::lambda::base64_len(body.len())
    } else {
        // API Gateway may write non-ASCII as \uXXXX escapes: 3 bytes of UTF-8 become 6,
        // a 2-byte character 6, a 4-byte one 12. Count the worst of them per byte.
        let text = std::str::from_utf8(body).expect("utf-8");
        2 + text
            .chars()
            .map(|c| match c {
                '"' | '\\' | '\n' | '\r' | '\t' => 2,
                c if c.is_ascii_control() => 6,
                c if c.is_ascii() => 1,
                c => 6 * c.len_utf16(),
            })
            .sum::<usize>()
    };
    EVENT.len() + headers_room + encoded
}

#[tokio::test]
async fn large_states_arrive_gzipped_and_the_safe_uncompressed_size_holds() {
    // The promise of docs/api.md (Limits): any body of at most 2,000,000 bytes fits the event however
    // it is escaped (at most 3 event bytes per body byte).
    let safe = 2_000_000;
    for worst in ["😀".repeat(safe / 4), "\"".repeat(safe), "\u{1}".repeat(safe / 6)] {
        assert!(event_size(worst.as_bytes(), false) <= MAX_REQUEST_PAYLOAD, "{}", event_size(worst.as_bytes(), false));
    }
    assert!(3 * safe + EVENT.len() + 10 * 1024 <= MAX_REQUEST_PAYLOAD, "3 bytes per byte is the worst escaping");

    // A 4 MiB escape-heavy state does not fit as text, but does gzipped (base64 in the event).
    let (_env, t, api, wf) = running_workflow().await;
    let e = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201).body["id"].clone();
    let state = json!({"tool_output": serde_json::to_string(&json!({"rows": vec!["\"x\""; 250_000]})).expect("json")});
    let body = serde_json::to_vec(&json!({"execution_id": e, "state": state})).expect("json");
    assert!(body.len() > 3_400_000, "{}", body.len());
    assert!(event_size(&body, false) > MAX_REQUEST_PAYLOAD, "as text it cannot reach the function");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&body).expect("gzip");
    let gzipped = gz.finish().expect("gzip");
    assert!(event_size(&gzipped, true) <= MAX_REQUEST_PAYLOAD, "gzipped it fits: {} bytes", gzipped.len());
    let sent = api
        .request(http::Method::POST, "/checkpoints")
        .key(&t.key)
        .header("content-encoding", "gzip")
        .raw_body("application/json", gzipped)
        .send()
        .await;
    let id = sent.expect(201).body["id"].as_str().expect("id").to_owned();
    let back = api.get(&t.key, &format!("/checkpoints/{id}?include_state=true")).await;
    assert_eq!(back.expect(200).body["state"], state, "the gzipped state is stored as sent");
    // Even incompressible data fits gzipped: gzip adds a few bytes per 64 KiB at most.
    let gzip_bound = 4 * 1024 * 1024 + 5 * (4 * 1024 * 1024 / 65_535 + 1) + 18;
    assert!(event_size(&vec![0; gzip_bound], true) <= MAX_REQUEST_PAYLOAD);
}

#[tokio::test]
async fn bad_gzip_and_other_encodings_are_400_and_bombs_413() {
    let env = api_tests::env().await;
    let t = env.tenant().await;
    let api = Api::new(Transport::in_process(&env));
    let post = |encoding: &'static str, body: Vec<u8>| {
        api.request(http::Method::POST, "/workflows")
            .key(&t.key)
            .header("content-encoding", encoding)
            .raw_body("application/json", body)
            .send()
    };
    post("gzip", b"not gzip".to_vec()).await.expect_problem(400, "malformed_request");
    post("br", b"{}".to_vec()).await.expect_problem(400, "malformed_request");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&vec![b' '; 64 * 1024 * 1024]).expect("gzip");
    let bomb = gz.finish().expect("gzip");
    assert!(bomb.len() < 200 * 1024);
    post("gzip", bomb).await.expect_problem(413, "payload_too_large");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(br#"{"name":"zipped","workflow_type":"custom"}"#).expect("gzip");
    let created = post("gzip", gz.finish().expect("gzip")).await;
    assert_eq!(created.expect(201).body["name"], "zipped");
    let total = api.get(&t.key, "/workflows").await.body["total"].clone();
    assert_eq!(total, 1, "only the valid request created anything");
}

#[tokio::test]
async fn a_6_mb_state_of_tiny_values_is_refused_without_building_it() {
    let (_env, t, api, wf) = running_workflow().await;
    let e = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201).body["id"].clone();
    let zeros = vec!["0"; 3 * 1024 * 1024 - 64].join(",");
    let send = |body: String| {
        api.request(http::Method::POST, "/checkpoints")
            .key(&t.key)
            .raw_body("application/json", body.into_bytes())
            .send()
    };
    let body = format!(r#"{{"execution_id":{e},"state":{{"a":[{zeros}]}}}}"#);
    assert!(body.len() <= 6 * 1024 * 1024, "{}", body.len());
    send(body).await.expect_problem(413, "payload_too_large");
    let reply = send(format!(r#"{{"execution_id":{e},"state":[{zeros}]}}"#)).await;
    reply.expect_problem(422, "validation_failed");
    assert_eq!(reply.error_fields(), vec!["state"]);
}

#[tokio::test]
async fn a_transaction_beyond_dynamodbs_limits_is_a_bug_not_a_retryable_503() {
    use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
    use shared::dynamo::{StoreError, Table, Transaction, TransactionError, b, s};
    let env = api_tests::env().await;
    // An item over DynamoDB's 400 KB item limit (DynamoDB Local enforces this one).
    let put = Put::builder()
        .table_name(env.tables.name(Table::Blobs))
        .item("tenant_id", s("ten_validation"))
        .item("part", s("too-large"))
        .item("data", b(vec![7; 500 * 1024]))
        .build()
        .expect("put");
    let item = TransactWriteItem::builder().put(put).build();
    // Sent as it is, DynamoDB cancels it with a ValidationError: a bug, not a 503.
    let error = shared::dynamo::transact(&env.client, vec![item.clone()]).await.expect_err("over 400 KB");
    assert!(matches!(error, StoreError::Other(_)), "{error:?}");
    assert_eq!(shared::ApiError::from(error).status().as_u16(), 500);
    // Through Transaction, it is not even sent.
    let mut tx = Transaction::new();
    tx.push(shared::dynamo::Part::Blob, item);
    let error = tx.commit(&env.client).await.expect_err("over 400 KB");
    assert!(matches!(error, TransactionError::TooLarge { items: 1, .. }), "{error:?}");
    assert_eq!(shared::ApiError::from(error).status().as_u16(), 500);
}

#[tokio::test]
async fn a_state_too_incompressible_for_one_transaction_is_413_and_changes_nothing() {
    let (_env, t, api, wf) = running_workflow().await;
    let e = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201).body["id"].clone();
    let e = e.as_str().expect("id").to_owned();
    // Random text whose bytes spread over as many values as UTF-8 allows (printable ASCII,
    // 2-, 3- and 4-byte characters, 7:3:1:1): it compresses to about 0.96 of itself.
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
    let mut next = move |below: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % below
    };
    let mut text = String::new();
    while text.len() < 4 * 1024 * 1024 - 16 {
        let c = match next(12) {
            0..7 => char::from_u32(0x20 + next(95) as u32).filter(|c| *c != '"' && *c != '\\'),
            7..10 => char::from_u32(0x80 + next(0x780) as u32),
            10 => char::from_u32(0x800 + next(0xD000) as u32),
            _ => char::from_u32(0x10000 + next(0x100000) as u32),
        };
        if let Some(c) = c.filter(|c| text.len() + c.len_utf8() <= 4 * 1024 * 1024 - 8) {
            text.push(c);
        }
    }
    let state = json!({"s": text});
    let json = serde_json::to_vec(&state).expect("json");
    assert!(json.len() <= 4 * 1024 * 1024, "within the state limit: {}", json.len());
    let compressed = shared::blob::compress(&json).len();
    assert!(compressed > shared::dynamo::MAX_TRANSACTION_BYTES, "the case holds: {compressed} bytes compressed");
    let reply = api.post(&t.key, "/checkpoints", &json!({"execution_id": e, "state": state})).await;
    reply.expect_problem(413, "payload_too_large");
    assert!(reply.body["detail"].as_str().is_some_and(|d| d.contains("compresses to only")), "{}", reply.body);
    let execution = api.get(&t.key, &format!("/executions/{e}")).await;
    assert_eq!(execution.expect(200).body["checkpoint_count"], 0, "nothing was written");
}

#[tokio::test]
async fn an_execution_has_at_most_50_attempts_so_completing_it_fits_one_transaction() {
    let (_env, t, api, wf) = running_workflow().await;
    // With the most tags, each at its longest (every change moves their entries and counts).
    let body = json!({"workflow_id": wf, "tags": heaviest_tags()});
    let e = api.post(&t.key, "/executions", &body).await.expect(201).body["id"].clone();
    let e = e.as_str().expect("id").to_owned();
    // Six causes: six failure groups, each with a counter item the completion moves.
    let causes = ["boom", "crash", "denied", "broken pipe", "bad gateway", "out of memory"];
    for attempt in 1..50 {
        let fail = json!({"error_type": "AGENT_ERROR", "message": causes[attempt % causes.len()]});
        api.post(&t.key, &format!("/executions/{e}/fail"), &fail).await.expect(200);
        api.post(&t.key, &format!("/executions/{e}/replay"), &json!({})).await.expect(200);
    }
    // Attempt 50 with 49 open failures: completing resolves those of the four largest
    // groups in its own transaction (their failures, the execution, its tags' entries,
    // its counters and the groups' counter items: under 100 items, which the
    // transaction checks before it is sent), the rest right after it; the retention's
    // markers are written after it commits.
    api.put(&t.key, "/settings/retention", &json!({"checkpoints": "keep_latest"})).await.expect(200);
    let done = api.post(&t.key, &format!("/executions/{e}/complete"), &json!({"output": 1})).await;
    assert_eq!(
        (done.expect(200).body["attempt"].clone(), done.body["status"].clone()),
        (json!(50), json!("completed"))
    );
    let open = api.get(&t.key, "/failures?status=open").await;
    assert_eq!(open.expect(200).body["total"], 0, "every failure was resolved");
    let resolved = api.get(&t.key, "/failures?status=resolved&limit=100").await;
    assert_eq!(resolved.expect(200).body["total"], 49);
    let groups = api.get(&t.key, "/failures/groups").await;
    let groups = groups.expect(200).body["items"].as_array().expect("groups").clone();
    assert_eq!(groups.len(), causes.len());
    for g in &groups {
        assert_eq!((g["status"].as_str(), g["resolved_by"].as_str()), (Some("resolved"), Some("replay")), "{g}");
        assert_eq!(g["counts"]["open"], 0, "{g}");
    }
    let counted: u64 = groups.iter().map(|g| g["counts"]["resolved"].as_u64().expect("count")).sum();
    assert_eq!(counted, 49, "each failure counted once in its group");

    // A 51st attempt is refused, and nothing changes.
    let e = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201).body["id"].clone();
    let e = e.as_str().expect("id").to_owned();
    let fail = json!({"error_type": "AGENT_ERROR", "message": "boom"});
    for _ in 1..50 {
        api.post(&t.key, &format!("/executions/{e}/fail"), &fail).await.expect(200);
        api.post(&t.key, &format!("/executions/{e}/replay"), &json!({})).await.expect(200);
    }
    api.post(&t.key, &format!("/executions/{e}/fail"), &fail).await.expect(200);
    let refused = api.post(&t.key, &format!("/executions/{e}/replay"), &json!({})).await;
    refused.expect_problem(409, "invalid_state");
    assert!(refused.body["detail"].as_str().is_some_and(|d| d.contains("50 attempts")), "{}", refused.body);
    let after = api.get(&t.key, &format!("/executions/{e}")).await;
    assert_eq!((after.body["attempt"].clone(), after.body["status"].clone()), (json!(50), json!("failed")));
}

/// The most tags an execution may have, each key and value at its longest (values of
/// 4-byte characters).
fn heaviest_tags() -> Value {
    use shared::tags::{TAG_KEY_MAX, TAG_VALUE_MAX, TAGS_MAX};
    let tags: serde_json::Map<String, Value> = (0..TAGS_MAX)
        .map(|i| (format!("{i:02}{}", "k".repeat(TAG_KEY_MAX - 2)), json!("\u{1F600}".repeat(TAG_VALUE_MAX))))
        .collect();
    Value::Object(tags)
}

/// The largest JSON value of the form `{"s": noise}` whose compressed form is at most
/// `max` bytes, and that form's size.
fn largest_under(max: usize, seed: u64) -> (Value, usize) {
    let mut len = max * 4 / 3;
    loop {
        let value = json!({"s": api_tests::noise(seed, len)});
        let packed = shared::blob::compress(&serde_json::to_vec(&value).expect("json")).len();
        if packed <= max {
            return (value, packed);
        }
        len -= 256;
    }
}

fn heavy_metadata_map() -> std::collections::BTreeMap<String, String> {
    text_map(&heavy_metadata())
}

/// A JSON object of strings (metadata, tags) as the model holds it.
fn text_map(object: &Value) -> std::collections::BTreeMap<String, String> {
    object.as_object().expect("object").iter().map(|(k, v)| (k.clone(), v.as_str().expect("str").to_owned())).collect()
}

#[tokio::test]
async fn the_largest_checkpoint_and_execution_items_fit_dynamodbs_400_kb() {
    use domain::runs::checkpoints::model::{Checkpoint, INLINE_STATE_MAX, PackedState};
    use domain::runs::checkpoints::store::CheckpointStore;
    use domain::runs::executions::model::{Discarded, Execution, ExecutionError, MAX_ATTEMPTS};
    use domain::runs::executions::store::{ExecutionStore, INLINE_VALUE_MAX};
    use shared::dynamo::{MAX_ITEM_BYTES, Transaction};
    use shared::ids::{CheckpointId, ExecutionId, FailureId, WorkflowId};
    let env = api_tests::env().await;
    let tenant = shared::auth::trusted::tenant(&shared::ids::TenantKey::generate());
    let now = chrono::Utc::now();

    // A checkpoint whose state is inline at the largest inline size, with the largest
    // name and metadata.
    let (state, packed_len) = largest_under(INLINE_STATE_MAX, 1);
    assert!(packed_len > INLINE_STATE_MAX - 1024, "{packed_len}");
    let packed = PackedState::from_json(&serde_json::to_vec(&state).expect("json"));
    let checkpoint = Checkpoint {
        id: CheckpointId::generate(),
        execution_id: ExecutionId::generate(),
        workflow_id: WorkflowId::generate(),
        sequence: u64::MAX / 2,
        name: Some(heavy(200)),
        key: Some(heavy(256)),
        parent_checkpoint_id: Some(CheckpointId::generate()),
        attempt: MAX_ATTEMPTS,
        metadata: heavy_metadata_map(),
        state_size_bytes: packed.size as u64,
        created_at: now,
    };
    let mut tx = Transaction::new();
    CheckpointStore::new(env.client.clone(), env.tables.clone())
        // Kept with its execution: the longest keys.
        .stage_create(&mut tx, &tenant, (&checkpoint, domain::runs::checkpoints::store::Layout::Joined), &packed)
        .expect("staged");
    tx.check_limits().expect("every item under 400 KB");
    println!(
        "checkpoint with the largest inline state: {} bytes in its entry and key pointers (limit {MAX_ITEM_BYTES} each)",
        tx.size()
    );

    // An execution with inline input and output at their largest, the longest error
    // message and cancellation reason, full metadata, a failure id per attempt, and
    // rollback ranges left to the janitor (which put it into its index).
    let (input, _) = largest_under(INLINE_VALUE_MAX, 2);
    let (output, _) = largest_under(INLINE_VALUE_MAX, 3);
    let mut execution =
        Execution::start(WorkflowId::generate(), Some(heavy(256)), Some(input), heavy_metadata_map(), now);
    execution.output = Some(output);
    execution.error = Some(ExecutionError { error_type: "A".repeat(64), message: heavy(4096) });
    execution.cancel_reason = Some(heavy(1000));
    execution.failure_ids = (0..MAX_ATTEMPTS).map(|_| FailureId::generate()).collect();
    execution.current_checkpoint_id = Some(CheckpointId::generate());
    execution.discarded =
        (0..10).map(|i| Discarded { after: i * 1_000_000_000, through: i * 1_000_000_000 + 999_999_999 }).collect();
    let mut tx = Transaction::new();
    let usage = shared::counters::CounterChange::default();
    ExecutionStore::new(env.client, env.tables)
        .stage_create(&mut tx, &tenant, (&execution, true), &usage)
        .expect("staged");
    tx.check_limits().expect("the execution item is under 400 KB");
    println!("execution at its largest inline: {} bytes with its counters", tx.size());
}

/// The largest start a tenant below its low-balance threshold makes: every tag, a key,
/// the largest inline input, and its charge refilled in its own transaction, taking back
/// what the 15 other allowances hold, writing the account item, a usage entry with its
/// counters and `credits.low`. With room for the `Idempotency-Key`'s record and a bulk
/// job's marker, it fits DynamoDB's 100 operations and 4 MB.
#[tokio::test]
async fn the_largest_start_refilled_in_its_own_transaction_fits_one_transaction() {
    use domain::credits::{Account, Charge, Ledger};
    use domain::runs::executions::model::Execution;
    use domain::runs::executions::store::{ExecutionStore, INLINE_VALUE_MAX};
    use shared::dynamo::{MAX_TRANSACTION_ITEMS, Transaction};
    let env = api_tests::env().await;
    let tenant = shared::auth::trusted::tenant(&shared::ids::TenantKey::generate());
    let now = chrono::Utc::now();
    let (input, _) = largest_under(INLINE_VALUE_MAX, 6);
    let workflow = shared::ids::WorkflowId::generate();
    let mut execution = Execution::start(workflow.clone(), Some(heavy(256)), Some(input), heavy_metadata_map(), now);
    let tags = heaviest_tags();
    execution.tags = text_map(&tags);
    // 100 credits, all handed to allowances 1 to 15: the charge of allowance 0 takes them
    // back, and takes the balance below the threshold.
    let mut account = Account { credits: 100, allocated: 100, ..Account::default() };
    for held in account.allowances.iter_mut().skip(1) {
        held.held = 1;
    }
    let mut tx = Transaction::new();
    let ledger = Ledger::new(env.client.clone(), env.tables.clone());
    let charge = Charge { allowance: 0, credits: 1 };
    let (_, mut usage) =
        ledger.stage_charge_refilled(&mut tx, &tenant, &account, charge, heavy(300), now).expect("staged");
    usage.unless_closed(&shared::counters::executions_of_workflow_item(workflow.as_str()));
    ExecutionStore::new(env.client, env.tables)
        .stage_create(&mut tx, &tenant, (&execution, true), &usage)
        .expect("staged");
    tx.check_limits().expect("within DynamoDB's limits");
    assert!(tx.len() + 2 <= MAX_TRANSACTION_ITEMS, "{} operations", tx.len());
    println!("the largest refilled start: {} operations, {} bytes", tx.len(), tx.size());
}

/// An attribute in DynamoDB's JSON, as a stream record carries it.
fn dynamodb_json(value: &aws_sdk_dynamodb::types::AttributeValue) -> Value {
    use aws_sdk_dynamodb::types::AttributeValue as A;
    match value {
        A::S(s) => json!({"S": s}),
        A::N(n) => json!({"N": n}),
        A::Bool(b) => json!({"BOOL": b}),
        A::Null(_) => json!({"NULL": true}),
        A::M(m) => {
            json!({"M": m.iter().map(|(k, v)| (k.clone(), dynamodb_json(v))).collect::<serde_json::Map<_, _>>()})
        }
        A::L(l) => json!({"L": l.iter().map(dynamodb_json).collect::<Vec<_>>()}),
        // Base64 in the record: only its length matters here.
        A::B(b) => json!({"B": "A".repeat(shared::lambda::base64_len(b.as_ref().len()))}),
        other => panic!("a reported item holds no {other:?}"),
    }
}

/// The dispatcher's mapping on the checkpoints stream hands over its template's
/// `BatchSize` records at once: with the largest entry valid data makes (a checkpoint
/// kept with its execution is one entry, its state with it up to 4 KiB: the largest
/// such state, the longest escape-heavy name and key, full metadata), in the record
/// Lambda builds around it (the longest region and table name), a whole batch fits
/// Lambda's 6 MB. (A larger state is an item beside the entry, which the mapping's
/// filter leaves out, as it leaves out key pointers.)
#[tokio::test]
async fn a_full_batch_of_the_checkpoints_stream_fits_the_dispatchers_payload() {
    use domain::runs::checkpoints::model::JOINED_INLINE_MAX;
    let (env, t, api, wf) = running_workflow().await;
    let e = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201).body["id"].clone();
    let e = e.as_str().expect("id").to_owned();
    // `{"s":"…"}`: 8 bytes around the text.
    let largest = usize::try_from(JOINED_INLINE_MAX).expect("small") - 8;
    let state = json!({"s": api_tests::noise(4, largest)});
    let body = json!({"execution_id": e, "name": heavy(200), "key": heavy(256), "metadata": heavy_metadata(),
        "state": state});
    let cp = api.post(&t.key, "/checkpoints", &body).await.expect(201).body["id"].clone();
    let (partition, entry) = api_tests::checkpoint_entry(&t.id, cp.as_str().expect("id"));
    let entry = env
        .client
        .get_item()
        .table_name(env.tables.name(shared::dynamo::Table::Checkpoints))
        .key("tenant_id", aws_sdk_dynamodb::types::AttributeValue::S(partition))
        .key("entry", aws_sdk_dynamodb::types::AttributeValue::S(entry))
        .send()
        .await
        .expect("read")
        .item
        .expect("the checkpoint's one entry");
    let inline = entry.get("state").and_then(|s| s.as_b().ok()).map_or(0, |b| b.as_ref().len());
    assert!(inline > largest / 2, "the entry holds the state, at the largest inline: {inline}");
    stream_batch_fits("checkpoints", &entry, "entry");
}

/// The same of the executions stream, whose records are new executions' items
/// (`execution.started`): the largest item a start writes (input inline at its largest,
/// the longest escape-heavy key, full metadata, the heaviest tags).
#[tokio::test]
async fn a_full_batch_of_the_executions_stream_fits_the_dispatchers_payload() {
    let (env, t, api, wf) = running_workflow().await;
    let (input, _) = largest_under(domain::runs::executions::store::INLINE_VALUE_MAX, 5);
    let start = json!({"workflow_id": wf, "key": heavy(256), "metadata": heavy_metadata(), "input": input, "tags": heaviest_tags()});
    let e = api.post(&t.key, "/executions", &start).await.expect(201).body["id"].clone();
    let e = e.as_str().expect("id").to_owned();
    let mut found = None;
    for shard in 0..16 {
        let partition = format!("{}#{shard:02}", t.id);
        let table = env.tables.name(shared::dynamo::Table::Executions);
        let key = [("tenant_id", partition.as_str()), ("id", e.as_str())];
        found = found.or(shared::dynamo::get_item(&env.client, table, &key).await.expect("read"));
    }
    let item = found.expect("the execution's item, in a shard of its tenant's");
    assert!(item["input"].as_m().expect("stored input").contains_key("inline"), "the input is in the item");
    assert_eq!(item.get("started_by_stream"), Some(&aws_sdk_dynamodb::types::AttributeValue::Bool(true)));
    stream_batch_fits("executions", &item, "id");
}

/// A whole batch of the dispatcher's mapping on `table`'s stream, each record carrying
/// `item` (its sort key `sort_key`) as Lambda builds the record (the longest region and
/// table name), fits Lambda's 6 MB request payload.
fn stream_batch_fits(table: &str, item: &shared::dynamo::Item, sort_key: &str) {
    let image: serde_json::Map<String, Value> = item.iter().map(|(k, v)| (k.clone(), dynamodb_json(v))).collect();
    let keys: serde_json::Map<String, Value> = image
        .iter()
        .filter(|(k, _)| *k == "tenant_id" || *k == sort_key)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let name = "t".repeat(255);
    let record = json!({
        "eventID": "c81e728d9d4c2f636f067f89cc14862c", "eventName": "INSERT", "eventVersion": "1.1",
        "eventSource": "aws:dynamodb", "awsRegion": "ap-southeast-2",
        "dynamodb": {"ApproximateCreationDateTime": 1_795_756_980.0, "Keys": keys, "NewImage": image,
            "SequenceNumber": "9".repeat(40), "SizeBytes": shared::dynamo::item_size(item),
            "StreamViewType": "NEW_IMAGE"},
        "eventSourceARN": format!("arn:aws:dynamodb:ap-southeast-2:123456789012:table/{name}/stream/2026-11-27T05:00:00.000"),
    });
    let sources =
        infra::template::Template::embedded().expect("template").stream_sources("dispatcher").expect("sources");
    let batch = sources.iter().find(|s| s.table == table).expect("the mapping").batch_size;
    let payload = serde_json::to_vec(&json!({"Records": vec![record; batch]})).expect("json").len();
    println!(
        "{batch} largest {table} records: {payload} bytes of Lambda request payload (limit {MAX_REQUEST_PAYLOAD})"
    );
    assert!(payload <= MAX_REQUEST_PAYLOAD, "{payload} bytes > {MAX_REQUEST_PAYLOAD}");
}

/// The webhooks routes' largest answers: 16 endpoints with the longest URL and an
/// escape-heavy description, and a page of 100 deliveries of the largest event (an
/// execution failed with the longest key and message) that each keep 20 attempts with
/// errors as long as are kept.
#[tokio::test]
async fn the_largest_webhook_endpoints_and_deliveries_pages_fit() {
    use domain::webhooks::deliveries::{ATTEMPTS_KEPT, ERROR_MAX_CHARS};
    use domain::webhooks::{AttemptRecord, Deliveries, Delivery, Event, EventType};

    let (env, t, api, wf) = running_workflow().await;
    let types: Vec<&str> = EventType::SUBSCRIBABLE.iter().map(|t| t.as_str()).collect();
    let mut endpoint = String::new();
    for i in 0..16 {
        // At most 2,048 characters (`%22` is a quote in a URL).
        let url = format!("http://127.0.0.1:9/{i:02}/{}", "%22".repeat(675));
        assert!(url.len() <= 2048, "{}", url.len());
        let body = json!({"url": url, "description": heavy(500), "event_types": types, "workflow_id": wf});
        endpoint =
            api.post(&t.key, "/webhook-endpoints", &body).await.expect(201).body["id"].as_str().expect("id").to_owned();
    }
    let app = webhooks::app(env.client.clone(), env.tables.clone(), Arc::new(SystemClock));
    fits("GET /webhook-endpoints, 16 endpoints", payload(&app, &t.key, "/webhook-endpoints").await.0);

    let start = json!({"workflow_id": wf, "key": heavy(256)});
    let e = api.post(&t.key, "/executions", &start).await.expect(201).body["id"].as_str().expect("id").to_owned();
    let fail = json!({"error_type": format!("A{}", "_".repeat(63)), "message": heavy(4096)});
    api.post(&t.key, &format!("/executions/{e}/fail"), &fail).await.expect(200);
    let tenant = shared::auth::stored::owner(&t.id).expect("tenant");
    let runs = domain::runs::Runs::new(env.client.clone(), env.tables.clone(), 1);
    let execution = runs.load(&tenant, &shared::ids::ExecutionId::parse(&e).expect("id")).await.expect("execution");
    let endpoint_id = shared::ids::EndpointId::parse(&endpoint).expect("endpoint id");
    let deliveries = Deliveries::new(env.client.clone(), env.tables.clone());
    let now = chrono::Utc::now();
    for _ in 0..100 {
        let event = Event::execution(EventType::ExecutionFailed, &execution, now);
        let mut delivery = Delivery::new(&t.id, &endpoint_id, &event, now);
        for n in 0..ATTEMPTS_KEPT {
            let error = Some(heavy(ERROR_MAX_CHARS + 50));
            let attempt =
                AttemptRecord { at: shared::time::format(now), status_code: Some(599), latency_ms: u64::MAX, error };
            // Failed for good with the last, so that no sweep takes it.
            delivery = delivery.after(attempt, n + 1 == ATTEMPTS_KEPT, 0.5, now);
        }
        let item: shared::dynamo::Item = serde_dynamo::to_item(&delivery).expect("item");
        let size = shared::dynamo::item_size(&item);
        assert!(size <= 400 * 1024, "a delivery item of {size} bytes");
        assert!(deliveries.create(&delivery).await.expect("stored"));
    }
    let path = format!("/webhook-endpoints/{endpoint}/deliveries?limit=100");
    let (size, response) = payload(&app, &t.key, &path).await;
    assert_eq!(body_of(&response)["items"].as_array().expect("items").len(), 100);
    fits("GET /webhook-endpoints/{id}/deliveries?limit=100, the largest deliveries", size);
}

/// A replay preview names at most 100 steps and 100 tools, each at its longest, and 20
/// checkpoints: far within Lambda's payload, by construction.
#[tokio::test]
async fn the_largest_replay_preview_fits() {
    let (env, t, api, wf) = running_workflow().await;
    let e = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201).body["id"].clone();
    let e = e.as_str().expect("id").to_owned();
    for i in 0..110 {
        let mut name = format!("{i:03}");
        name.push_str(&heavy(197));
        let mut tool = format!("{i:03}");
        tool.push_str(&heavy_unquoted(497));
        let body = json!({"execution_id": e, "name": name, "state": {}, "metadata": {"cairn.tools": tool}});
        api.post(&t.key, "/checkpoints", &body).await.expect(201);
    }
    let (size, answer) =
        payload(&apps(&env).executions, &t.key, &format!("/executions/{e}/replay-preview?from_start=true")).await;
    let body = body_of(&answer);
    assert_eq!(
        (body["steps"].as_array().map(Vec::len), body["tool_calls"].as_array().map(Vec::len)),
        (Some(100), Some(100))
    );
    assert_eq!(
        (body["checkpoints_after"].as_u64(), body["checkpoints"].as_array().map(Vec::len)),
        (Some(110), Some(20))
    );
    fits("GET /executions/{id}/replay-preview: 100 steps of 200 and 100 tools of 500 characters", size);
}
