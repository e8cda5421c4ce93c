//! What operators see: one JSON access log line per request (with its DynamoDB
//! capacity) and one CloudWatch Embedded Metric Format line with the request's metrics.
//! Over HTTP only: these read the log of the `cargo lambda watch` that `make test`
//! started, which runs the functions as Lambda does.

use api_tests::{Api, Tenant};
use serde_json::Value;

/// The JSON lines of the watch log that `pick` selects, waiting up to 5 s for them.
async fn log_lines(pick: impl Fn(&Value) -> bool) -> (Vec<Value>, String) {
    let path = std::env::var("CAIRN_WATCH_LOG").expect("CAIRN_WATCH_LOG is set by make test");
    let mut found = (Vec::new(), String::new());
    for _ in 0..50 {
        let log = std::fs::read_to_string(&path).expect("watch log");
        let lines: Vec<Value> =
            log.lines().filter_map(|line| serde_json::from_str::<Value>(line).ok()).filter(|line| pick(line)).collect();
        found = (lines, log);
        if !found.0.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    found
}

async fn access_line(request_id: &str) -> Value {
    let (lines, _) =
        log_lines(|line| line["fields"]["message"] == "request" && line["fields"]["request_id"] == request_id).await;
    assert_eq!(lines.len(), 1, "one access line per request");
    lines[0].clone()
}

async fn metrics_line(request_id: &str) -> Value {
    let (lines, _) = log_lines(|line| line["_aws"].is_object() && line["request_id"] == request_id).await;
    assert_eq!(lines.len(), 1, "one metrics line per request");
    lines[0].clone()
}

async fn setup() -> (Api, Tenant) {
    let env = api_tests::env().await;
    (Api::new(api_tests::Transport::http()), env.tenant().await)
}

#[tokio::test]
async fn each_request_writes_one_access_line_with_its_capacity_and_never_the_key() {
    let (api, t) = setup().await;
    let reply = api.get(&t.key, "/workflows?status=draft").await;
    reply.expect(200);
    let request_id = reply.header("x-request-id").expect("request id").to_owned();
    let line = access_line(&request_id).await;
    let fields = &line["fields"];
    assert_eq!(fields["tenant"], t.id.as_str());
    assert_eq!((fields["method"].as_str(), fields["route"].as_str()), (Some("GET"), Some("/api/v1/workflows")));
    assert_eq!(fields["status"], 200);
    assert!(fields["latency_ms"].as_f64().is_some_and(|ms| ms >= 0.0));
    // The key lookup, the rate-limit window, the page and the total all read DynamoDB.
    assert!(fields["dynamodb_capacity"].as_f64().is_some_and(|c| c > 0.0), "{line}");
    assert_eq!(line["level"], "INFO");
    let (_, log) = log_lines(|_| true).await;
    assert!(!log.contains(&t.key), "the API key must never be logged");
}

#[tokio::test]
async fn each_request_publishes_emf_metrics_per_function_and_route() {
    let (api, t) = setup().await;
    let ok = api.get(&t.key, "/failures/stats").await;
    ok.expect(200);
    let missing = api.get(&t.key, "/failures/fail_0193a6f21c2b7d3e8f000123456789ab").await;
    missing.expect_problem(404, "not_found");

    let emf = metrics_line(ok.header("x-request-id").expect("id")).await;
    let definition = &emf["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(definition["Namespace"], "Cairn");
    assert!(emf["_aws"]["Timestamp"].as_i64().is_some_and(|ms| ms > 1_700_000_000_000));
    for metric in definition["Metrics"].as_array().expect("metrics") {
        let name = metric["Name"].as_str().expect("name");
        assert!(emf[name].is_number(), "{name} is declared and present");
    }
    for dimensions in definition["Dimensions"].as_array().expect("dimensions") {
        for dimension in dimensions.as_array().expect("a dimension set") {
            assert!(emf[dimension.as_str().expect("name")].is_string(), "{dimension} is present");
        }
    }
    assert_eq!(
        (emf["Function"].as_str(), emf["Route"].as_str()),
        (Some("failures"), Some("GET /api/v1/failures/stats"))
    );
    assert_eq!((emf["Requests"].as_i64(), emf["Errors"].as_i64(), emf["Faults"].as_i64()), (Some(1), Some(0), Some(0)));
    let access = access_line(ok.header("x-request-id").expect("id")).await;
    assert_eq!(emf["DynamoDBCapacity"], access["fields"]["dynamodb_capacity"], "the same figure in both lines");
    assert!(emf["DynamoDBCapacity"].as_f64().is_some_and(|c| c > 0.0));

    let emf = metrics_line(missing.header("x-request-id").expect("id")).await;
    assert_eq!(emf["Route"], "GET /api/v1/failures/{failure_id}");
    assert_eq!((emf["Errors"].as_i64(), emf["Faults"].as_i64(), emf["status"].as_i64()), (Some(1), Some(0), Some(404)));
}
