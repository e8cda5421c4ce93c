//! Bulk jobs (`/executions/bulk`): a dry run counts and shows without changing anything;
//! a job replays or cancels every execution its filter matched, each once, charged once
//! and reported once, ending with `bulk.completed`; a group whose replays complete
//! resolves by itself (`resolved_by: "replay"`); a round run again after its Lambda
//! died does nothing twice; a cancelled job starts no round; bad requests are 422 naming
//! the field, a job the balance cannot pay for is 402 saying what it needs.
//!
//! The jobs' rounds are driven here by calling the jobs function's handler as the
//! stream's event source mapping would, on tables of the test's own (which no relay
//! reads); over HTTP, `cairn-relay` drives them from DynamoDB Local's stream.

use std::collections::BTreeMap;

use api_tests::{Api, Env, Transport, both_paths};
use serde_json::{Value, json};

both_paths!(
    a_dry_run_counts_and_shows_what_a_filter_matches_and_changes_nothing,
    bad_bulk_requests_are_422_naming_the_field_and_change_nothing,
    a_replay_job_the_balance_cannot_pay_for_is_402_saying_what_it_needs,
    an_idempotency_key_starts_one_job,
);

async fn workflow(api: &Api, key: &str, name: &str) -> String {
    let wf = api.post(key, "/workflows", &json!({"name": name, "workflow_type": "custom"})).await;
    wf.expect(201).body["id"].as_str().expect("id").to_owned()
}

/// Starts an execution of `wf` with `tags`; fails it with `error_type` unless `None`.
async fn execution(api: &Api, key: &str, wf: &str, tags: Value, error_type: Option<&str>) -> String {
    let e = api.post(key, "/executions", &json!({"workflow_id": wf, "tags": tags})).await;
    let e = e.expect(201).body["id"].as_str().expect("id").to_owned();
    if let Some(error_type) = error_type {
        let body = json!({"error_type": error_type, "message": format!("{error_type}: upstream 503 on request {e}")});
        api.post(key, &format!("/executions/{e}/fail"), &body).await.expect(200);
    }
    e
}

async fn balance(api: &Api, key: &str) -> i64 {
    api.get(key, "/billing/balance").await.expect(200).body["credits_balance"].as_i64().expect("balance")
}

fn bulk(action: &str, filter: Value, dry_run: bool) -> Value {
    let mut body = json!({"action": action, "dry_run": dry_run});
    body["filter"] = filter;
    body
}

async fn a_dry_run_counts_and_shows_what_a_filter_matches_and_changes_nothing(api: Api, env: Env) {
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key, "dry").await;
    let a1 = execution(&api, &t.key, &wf, json!({"team": "search"}), Some("RATE_LIMIT")).await;
    let a2 = execution(&api, &t.key, &wf, json!({}), Some("RATE_LIMIT")).await;
    let b1 = execution(&api, &t.key, &wf, json!({"team": "search"}), Some("TIMEOUT")).await;
    execution(&api, &t.key, &wf, json!({"team": "search"}), None).await;
    let before = balance(&api, &t.key).await;

    let dry = |filter: Value| {
        let api = api.clone();
        let key = t.key.clone();
        async move { api.post(&key, "/executions/bulk", &bulk("replay", filter, true)).await }
    };
    let reply = dry(json!({"status": "failed"})).await;
    reply.expect(200);
    assert_eq!((reply.body["object"].as_str(), reply.body["matched"].as_u64()), (Some("bulk_dry_run"), Some(3)));
    assert_eq!(reply.body["credits_needed"], 3, "a replay's price (1 credit) each");
    let shown: Vec<&str> = reply.body["executions"]
        .as_array()
        .expect("executions")
        .iter()
        .map(|e| e["id"].as_str().expect("id"))
        .collect();
    assert_eq!(shown, [b1.as_str(), a2.as_str(), a1.as_str()], "newest first");
    assert_eq!(reply.body["filter"], json!({"status": "failed"}));

    let by_type = dry(json!({"status": "failed", "error_type": "RATE_LIMIT"})).await;
    assert_eq!(by_type.expect(200).body["matched"], 2);
    let tagged = dry(json!({"status": "failed", "tag": "team:search"})).await;
    assert_eq!(tagged.expect(200).body["matched"], 2);
    let both = dry(json!({"tag": ["team:search"], "error_type": "TIMEOUT"})).await;
    assert_eq!(both.expect(200).body["executions"][0]["id"], b1.as_str());
    assert_eq!(both.body["matched"], 1);

    // A failure group: the executions with an open failure in it.
    let failures = api.get(&t.key, "/failures?limit=200&status=open").await;
    let group = failures.expect(200).body["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|f| f["execution_id"] == a1.as_str())
        .expect("a1's failure")["group_id"]
        .as_str()
        .expect("group")
        .to_owned();
    let grouped = dry(json!({"failure_group": group})).await;
    assert_eq!(grouped.expect(200).body["matched"], 2, "{}", grouped.body);
    let cancel = api.post(&t.key, "/executions/bulk", &bulk("cancel", json!({"status": "running"}), true)).await;
    assert_eq!((cancel.body["matched"].as_u64(), cancel.body["credits_needed"].as_i64()), (Some(1), Some(0)));

    assert_eq!(balance(&api, &t.key).await, before, "nothing charged");
    let jobs = api.get(&t.key, "/executions/bulk").await;
    assert_eq!(jobs.expect(200).body["total"], 0, "no job started");
    let still = api.get(&t.key, &format!("/executions/{a1}")).await;
    assert_eq!(still.expect(200).body["status"], "failed");
}

async fn bad_bulk_requests_are_422_naming_the_field_and_change_nothing(api: Api, env: Env) {
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key, "bad").await;
    execution(&api, &t.key, &wf, json!({}), Some("X")).await;
    let cases = [
        (json!({"filter": {"status": "failed"}}), "action"),
        (json!({"action": "delete", "filter": {"status": "failed"}}), "action"),
        (json!({"action": "replay"}), "filter"),
        (json!({"action": "replay", "filter": "failed"}), "filter"),
        (json!({"action": "replay", "filter": {}}), "filter"),
        (json!({"action": "replay", "filter": {"status": "broken"}}), "filter.status"),
        (json!({"action": "replay", "filter": {"tag": "no-colon"}}), "filter.tag"),
        (json!({"action": "replay", "filter": {"tag": ["a:1", "a:2"]}}), "filter.tag"),
        (json!({"action": "replay", "filter": {"created_after": "yesterday"}}), "filter.created_after"),
        (json!({"action": "replay", "filter": {"error_type": ""}}), "filter.error_type"),
        (json!({"action": "replay", "filter": {"status": "failed", "colour": "red"}}), "filter.colour"),
        (json!({"action": "replay", "filter": {"status": "failed"}, "dry_run": "yes"}), "dry_run"),
        (json!({"action": "replay", "filter": {"status": "failed"}, "extra": 1}), "extra"),
    ];
    for (body, field) in cases {
        let reply = api.post(&t.key, "/executions/bulk", &body).await;
        reply.expect_problem(422, "validation_failed");
        assert!(reply.error_fields().contains(&field.to_owned()), "{body}: {:?}", reply.error_fields());
    }
    for (filter, kind) in [
        (json!({"workflow_id": "wf_nope"}), "workflow"),
        (json!({"workflow_id": shared::ids::WorkflowId::generate().to_string()}), "workflow"),
        (json!({"failure_group": "fgrp_nope"}), "failure group"),
        (json!({"failure_group": shared::ids::FailureGroupId::generate().to_string()}), "failure group"),
    ] {
        let reply = api.post(&t.key, "/executions/bulk", &bulk("replay", filter.clone(), false)).await;
        reply.expect_problem(404, "not_found");
        assert!(reply.body["detail"].as_str().is_some_and(|d| d.contains(kind)), "{filter}: {}", reply.body);
    }
    for path in ["/executions/bulk/bulk_nope", &format!("/executions/bulk/{}", shared::ids::BulkJobId::generate())] {
        api.get(&t.key, path).await.expect_problem(404, "not_found");
        api.post(&t.key, &format!("{path}/cancel"), &json!({})).await.expect_problem(404, "not_found");
    }
    let jobs = api.get(&t.key, "/executions/bulk").await;
    assert_eq!(jobs.expect(200).body["total"], 0, "no job started");
}

async fn a_replay_job_the_balance_cannot_pay_for_is_402_saying_what_it_needs(api: Api, env: Env) {
    let t = env.tenant_with_credits(4).await;
    let wf = workflow(&api, &t.key, "poor").await;
    for _ in 0..2 {
        execution(&api, &t.key, &wf, json!({}), Some("X")).await;
    }
    // 2 starts paid; 2 left, and 2 replays need 2: enough.
    let dry = api.post(&t.key, "/executions/bulk", &bulk("replay", json!({"status": "failed"}), true)).await;
    assert_eq!(dry.expect(200).body["credits_needed"], 2);
    execution(&api, &t.key, &wf, json!({}), Some("X")).await;
    // 1 left, 3 replays need 3.
    let refused = api.post(&t.key, "/executions/bulk", &bulk("replay", json!({"status": "failed"}), false)).await;
    refused.expect_problem(402, "insufficient_credits");
    let detail = refused.body["detail"].as_str().expect("detail");
    assert!(detail.contains("needs 3 credits") && detail.contains("balance is 1"), "{detail}");
    let jobs = api.get(&t.key, "/executions/bulk").await;
    assert_eq!(jobs.expect(200).body["total"], 0, "no job started");
    // A cancel costs nothing.
    let cancel = api.post(&t.key, "/executions/bulk", &bulk("cancel", json!({"status": "failed"}), false)).await;
    assert_eq!(cancel.expect(202).body["status"], "running");
}

async fn an_idempotency_key_starts_one_job(api: Api, env: Env) {
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key, "once").await;
    execution(&api, &t.key, &wf, json!({}), None).await;
    let body = bulk("cancel", json!({"workflow_id": wf, "status": "running"}), false);
    let send = || {
        api.request(http::Method::POST, "/executions/bulk")
            .key(&t.key)
            .header("idempotency-key", "bulk-1")
            .json(&body)
            .send()
    };
    let first = send().await;
    first.expect(202);
    let again = send().await;
    again.expect(202);
    assert_eq!(first.body["id"], again.body["id"]);
    assert!(first.body["id"].as_str().is_some_and(|id| id.starts_with("bulk_")));
    assert_eq!(first.header("location"), again.header("location"));
    let jobs = api.get(&t.key, "/executions/bulk").await;
    assert_eq!(jobs.expect(200).body["total"], 1);
}

// ---- rounds, driven by hand on tables no relay reads ----

async fn own_env() -> Env {
    api_tests::own_env("bulk").await
}

/// The stream record of job `id`'s item at `round`, as the mapping hands it over.
fn record(tenant: &str, id: &str, round: u64) -> Value {
    json!({"eventName": "MODIFY", "dynamodb": {"SequenceNumber": format!("{round:020}"), "NewImage": {
        "tenant_id": {"S": tenant}, "id": {"S": id}, "round": {"N": round.to_string()}, "status": {"S": "running"}}}})
}

/// A deadline for one round (the handler starts no round within `jobs::MARGIN` of it).
fn one_round() -> u64 {
    let deadline = std::time::SystemTime::now() + jobs::MARGIN + std::time::Duration::from_millis(100);
    u64::try_from(deadline.duration_since(std::time::UNIX_EPOCH).expect("now").as_millis()).expect("ms")
}

/// Reads job items' round numbers (the tables of the test running).
#[derive(Clone)]
struct RoundReader(Env);

impl RoundReader {
    async fn round(&self, tenant: &str, id: &str) -> u64 {
        let item = self
            .0
            .client
            .get_item()
            .table_name(self.0.tables.name(shared::dynamo::Table::Jobs))
            .key("tenant_id", shared::dynamo::s(tenant))
            .key("id", shared::dynamo::s(id))
            .consistent_read(true)
            .send()
            .await
            .expect("job item")
            .item
            .expect("the job's item");
        item["round"].as_n().expect("round").parse().expect("a number")
    }
}

/// The events `tenant`'s changes reported, by type: each event's `data.id` (or, for
/// failure events, the failure's execution) in order.
async fn reported(env: &Env, tenant: &str) -> BTreeMap<String, Vec<Value>> {
    let mut by_type: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for item in api_tests::outbox(&env.client, &env.tables, tenant).await {
        let events: Value = serde_json::from_str(item["events"].as_s().expect("events")).expect("JSON");
        for event in events.as_array().expect("a list") {
            by_type.entry(event["type"].as_str().expect("type").to_owned()).or_default().push(event["data"].clone());
        }
    }
    by_type
}

fn ids_of(events: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = events.iter().map(|d| d["id"].as_str().expect("id").to_owned()).collect();
    ids.sort();
    ids
}

#[tokio::test]
async fn an_incident_is_replayed_by_group_each_execution_once_charged_once_reported_once() {
    let env = own_env().await;
    let api = Api::new(Transport::in_process(&env));
    let t = env.tenant_with_credits(1_000).await;
    let wf = workflow(&api, &t.key, "incident").await;
    let mut rate_limited = Vec::new();
    for _ in 0..60 {
        rate_limited.push(execution(&api, &t.key, &wf, json!({"incident": "42"}), Some("RATE_LIMIT")).await);
    }
    let mut timed_out = Vec::new();
    for _ in 0..5 {
        timed_out.push(execution(&api, &t.key, &wf, json!({"incident": "42"}), Some("TIMEOUT")).await);
    }
    let groups = api.get(&t.key, "/failures/groups").await;
    let groups = groups.expect(200).body["items"].as_array().expect("items").clone();
    assert_eq!(groups.len(), 2, "two causes, two groups");
    let group = groups.iter().find(|g| g["error_type"] == "RATE_LIMIT").expect("the rate limit group");
    let group = group["id"].as_str().expect("id").to_owned();
    let before = balance(&api, &t.key).await;

    let body = bulk("replay", json!({"failure_group": group, "status": "failed"}), false);
    let started = api.post(&t.key, "/executions/bulk", &body).await;
    started.expect(202);
    let id = started.body["id"].as_str().expect("id").to_owned();
    assert_eq!(started.header("location"), Some(format!("/api/v1/executions/bulk/{id}").as_str()));
    assert_eq!((started.body["matched"].as_u64(), started.body["done"].as_u64()), (Some(60), Some(0)));
    assert_eq!(started.body["credits_needed"], 60);
    // A failure after the job started is not the job's.
    let late = execution(&api, &t.key, &wf, json!({"incident": "42"}), Some("RATE_LIMIT")).await;

    let handler = jobs::Jobs::new(env.client.clone(), env.tables.clone());
    let reader = RoundReader(env.clone());
    let mut last = Value::Null;
    let mut accesses = Vec::new();
    for _ in 0..10 {
        let now = api.get(&t.key, &format!("/executions/bulk/{id}")).await;
        last = now.expect(200).body.clone();
        if last["status"] != "running" {
            break;
        }
        let round = reader.round(&t.id, &id).await;
        let records = json!({"Records": [record(&t.id, &id, round)]});
        let (answer, calls) = Box::pin(shared::metering::recorded(handler.handle(records, one_round()))).await;
        accesses.extend(calls);
        assert_eq!(answer["batchItemFailures"], json!([]));
        // The same record again (the mapping retries it): a round it has moved past.
        let again = Box::pin(handler.handle(json!({"Records": [record(&t.id, &id, round)]}), one_round())).await;
        assert_eq!(again["batchItemFailures"], json!([]));
    }
    assert_eq!(last["status"], "completed", "{last}");
    assert_eq!(
        (last["matched"].as_u64(), last["done"].as_u64(), last["skipped"].as_u64()),
        (Some(60), Some(60), Some(0))
    );
    assert!(last["ended_at"].is_string());

    for e in &rate_limited {
        let reply = api.get(&t.key, &format!("/executions/{e}")).await;
        assert_eq!((reply.body["status"].as_str(), reply.body["attempt"].as_u64()), (Some("running"), Some(2)), "{e}");
    }
    for e in timed_out.iter().chain([&late]) {
        let reply = api.get(&t.key, &format!("/executions/{e}")).await;
        assert_eq!((reply.body["status"].as_str(), reply.body["attempt"].as_u64()), (Some("failed"), Some(1)), "{e}");
    }
    assert_eq!(balance(&api, &t.key).await, before - 1 - 60, "the late start, and one replay each");
    let events = reported(&env, &t.id).await;
    let mut expected = rate_limited.clone();
    expected.sort();
    assert_eq!(ids_of(&events["execution.replayed"]), expected, "one execution.replayed each");
    // The jobs function's policy in template.yaml grants every call its rounds made.
    let missing =
        api_tests::ungranted_in(&env.tables.name(shared::dynamo::Table::Jobs).replace("jobs", ""), "jobs", &accesses);
    assert!(missing.is_empty(), "template.yaml's jobs policy lacks what the code calls:\n{}", missing.join("\n"));
    let completed = &events["bulk.completed"];
    assert_eq!(completed.len(), 1);
    assert_eq!((completed[0]["id"].as_str(), completed[0]["done"].as_u64()), (Some(id.as_str()), Some(60)));

    // The replays complete (the late failure's too, replayed by hand): each failure
    // resolves with its execution, and the group resolves by itself, and says so; the
    // other cause, settled by a request, says that.
    api.post(&t.key, &format!("/executions/{late}/replay"), &json!({})).await.expect(200);
    for e in rate_limited.iter().chain([&late]) {
        api.post(&t.key, &format!("/executions/{e}/complete"), &json!({})).await.expect(200);
    }
    let fixed = api.get(&t.key, &format!("/failures/groups/{group}")).await;
    assert_eq!(
        (fixed.expect(200).body["status"].as_str(), fixed.body["resolved_by"].as_str()),
        (Some("resolved"), Some("replay"))
    );
    let one = api.get(&t.key, &format!("/failures?group_id={group}&limit=1")).await;
    assert_eq!(one.body["items"][0]["resolved_by"], "replay");
    let other = groups.iter().find(|g| g["error_type"] == "TIMEOUT").expect("the timeout group")["id"].clone();
    let other = other.as_str().expect("id");
    assert_eq!(api.get(&t.key, &format!("/failures/groups/{other}")).await.body["resolved_by"], Value::Null, "open");
    api.post(&t.key, &format!("/failures/groups/{other}/resolve"), &json!({})).await.expect(200);
    let settled = api.get(&t.key, &format!("/failures/groups/{other}")).await;
    assert_eq!(
        (settled.body["status"].as_str(), settled.body["resolved_by"].as_str()),
        (Some("resolved"), Some("request"))
    );
    let resolved =
        reported(&env, &t.id).await["failure.resolved"].iter().filter(|d| d["resolved_by"] == "replay").count();
    assert_eq!(resolved, 61, "failure.resolved says what resolved each");
}

#[tokio::test]
async fn a_round_run_again_after_its_lambda_died_does_nothing_twice() {
    let env = own_env().await;
    let api = Api::new(Transport::in_process(&env));
    let t = env.tenant_with_credits(1_000).await;
    let wf = workflow(&api, &t.key, "dies").await;
    let mut failed = Vec::new();
    for _ in 0..30 {
        failed.push(execution(&api, &t.key, &wf, json!({}), Some("X")).await);
    }
    let before = balance(&api, &t.key).await;
    let started = api.post(&t.key, "/executions/bulk", &bulk("replay", json!({"status": "failed"}), false)).await;
    let id = started.expect(202).body["id"].as_str().expect("id").to_owned();
    let reader = RoundReader(env.clone());

    // The first round's Lambda loses DynamoDB after its first replay commits (the others
    // of its batch of 4 may commit too): the round fails, the job does not move.
    let (dying, down) = api_tests::down::DownAfterCommit::client(&env);
    let doomed = jobs::Jobs::new(dying, env.tables.clone());
    let answer = Box::pin(doomed.handle(json!({"Records": [record(&t.id, &id, 0)]}), one_round())).await;
    assert!(down.is_down(), "a replay committed");
    assert_eq!(answer["batchItemFailures"][0]["itemIdentifier"], format!("{:020}", 0), "handed over again");
    assert_eq!(reader.round(&t.id, &id).await, 0, "the job did not move");
    let replayed = reported(&env, &t.id).await["execution.replayed"].len();
    assert!((1..=4).contains(&replayed), "{replayed} replays committed before the Lambda died");

    // The mapping hands the record over again, to a Lambda that lives.
    let handler = jobs::Jobs::new(env.client.clone(), env.tables.clone());
    let last = drive(&api, &t, &id, &handler, &reader).await;
    assert_eq!(last["status"], "completed", "{last}");
    assert_eq!(
        (last["matched"].as_u64(), last["done"].as_u64(), last["skipped"].as_u64()),
        (Some(30), Some(30), Some(0))
    );
    for e in &failed {
        let reply = api.get(&t.key, &format!("/executions/{e}")).await;
        assert_eq!(reply.body["attempt"], 2, "{e}: replayed once");
    }
    assert_eq!(balance(&api, &t.key).await, before - 30, "charged once each");
    let events = reported(&env, &t.id).await;
    let mut expected = failed.clone();
    expected.sort();
    assert_eq!(ids_of(&events["execution.replayed"]), expected, "reported once each");
    assert_eq!(events["bulk.completed"].len(), 1);
}

#[tokio::test]
async fn a_cancelled_job_starts_no_round_and_a_cancel_job_skips_what_cannot_be_cancelled() {
    let env = own_env().await;
    let api = Api::new(Transport::in_process(&env));
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key, "stop").await;
    let mut running = Vec::new();
    for _ in 0..30 {
        running.push(execution(&api, &t.key, &wf, json!({"batch": "b"}), None).await);
    }
    let done = execution(&api, &t.key, &wf, json!({"batch": "b"}), None).await;
    api.post(&t.key, &format!("/executions/{done}/complete"), &json!({})).await.expect(200);
    let reader = RoundReader(env.clone());
    let handler = jobs::Jobs::new(env.client.clone(), env.tables.clone());

    // A cancel job over the tag: the completed one cannot be cancelled, and says so.
    let started = api.post(&t.key, "/executions/bulk", &bulk("cancel", json!({"tag": "batch:b"}), false)).await;
    let id = started.expect(202).body["id"].as_str().expect("id").to_owned();
    assert_eq!(started.body["matched"], 31);
    let answer = Box::pin(handler.handle(json!({"Records": [record(&t.id, &id, 0)]}), one_round())).await;
    assert_eq!(answer["batchItemFailures"], json!([]));
    // Newest first: the completed one, then 24 running.
    let after_one = api.get(&t.key, &format!("/executions/bulk/{id}")).await.body.clone();
    let counts =
        |job: &Value| (job["status"].as_str().map(str::to_owned), job["done"].as_u64(), job["skipped"].as_u64());
    assert_eq!(counts(&after_one), (Some("running".to_owned()), Some(24), Some(1)), "{after_one}");

    // Cancelled between rounds: the next record starts nothing.
    let cancelled = api.post(&t.key, &format!("/executions/bulk/{id}/cancel"), &json!({})).await;
    assert_eq!(cancelled.expect(200).body["status"], "cancelled");
    let round = reader.round(&t.id, &id).await;
    Box::pin(handler.handle(json!({"Records": [record(&t.id, &id, round)]}), one_round())).await;
    let after = api.get(&t.key, &format!("/executions/bulk/{id}")).await.body.clone();
    assert_eq!(counts(&after), (Some("cancelled".to_owned()), Some(24), Some(1)), "{after}");
    let again = api.post(&t.key, &format!("/executions/bulk/{id}/cancel"), &json!({})).await;
    assert_eq!(again.expect(200).body["status"], "cancelled", "cancelling an ended job answers it as it is");

    // A second job finishes the rest; the completed execution is skipped, with why.
    let rest = api.post(&t.key, "/executions/bulk", &bulk("cancel", json!({"tag": "batch:b"}), false)).await;
    let rest_id = rest.expect(202).body["id"].as_str().expect("id").to_owned();
    let last = drive(&api, &t, &rest_id, &handler, &reader).await;
    assert_eq!(last["status"], "completed", "{last}");
    assert_eq!((last["done"].as_u64(), last["skipped"].as_u64()), (Some(6), Some(25)), "{last}");
    assert_eq!(last["skipped_by_reason"], json!({"not_allowed": 25}));
    for e in &running {
        assert_eq!(api.get(&t.key, &format!("/executions/{e}")).await.body["status"], "cancelled", "{e}");
    }
    let listed = api.get(&t.key, "/executions/bulk?page_size=1").await;
    assert_eq!(
        (listed.body["total"].as_u64(), listed.body["items"][0]["id"].as_str()),
        (Some(2), Some(rest_id.as_str()))
    );
    let next = api.get(&t.key, &format!("/executions/bulk?page_size=1&starting_after={rest_id}")).await;
    assert_eq!(next.expect(200).body["items"][0]["id"], id.as_str(), "the page after the newest");
    let unknown = format!("/executions/bulk?starting_after={}", shared::ids::BulkJobId::generate());
    api.get(&t.key, &unknown).await.expect_problem(404, "not_found");
}

/// A job no round has moved for an hour (its rounds failed past every retry) is shown
/// failed, in its own answer and in the list; cancelling it ends it for good.
#[tokio::test]
async fn a_job_no_round_moved_for_an_hour_is_failed_and_a_cancel_ends_it() {
    use domain::runs::bulk::model::{BulkAction, BulkFilter};
    let env = own_env().await;
    let api = Api::new(Transport::in_process(&env));
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key, "stalled").await;
    execution(&api, &t.key, &wf, json!({}), None).await;
    let runs = domain::runs::Runs::new(env.client.clone(), env.tables.clone(), 1);
    let tenant = shared::auth::trusted::tenant(&shared::ids::TenantKey::parse(&t.id).expect("tenant id"));
    let then = shared::time::ManualClock::new(chrono::Utc::now() - chrono::Duration::minutes(61));
    let filter = BulkFilter { workflow_id: shared::ids::WorkflowId::parse(&wf), ..BulkFilter::default() };
    let job = runs.bulk_start(&tenant, BulkAction::Cancel, &filter, &then, &|_| {}).await.expect("started");
    let id = job.id.to_string();
    let seen = api.get(&t.key, &format!("/executions/bulk/{id}")).await.expect(200).body.clone();
    assert_eq!(seen["status"], "failed", "{seen}");
    assert!(seen["error"].as_str().expect("why").contains("no round moved the job for 60 minutes"), "{seen}");
    let listed = api.get(&t.key, "/executions/bulk").await.expect(200).body.clone();
    assert_eq!(listed["items"][0]["status"], "failed", "{listed}");
    let cancelled = api.post(&t.key, &format!("/executions/bulk/{id}/cancel"), &json!({})).await;
    assert_eq!(cancelled.expect(200).body["status"], "cancelled");
    assert_eq!(api.get(&t.key, &format!("/executions/bulk/{id}")).await.body["status"], "cancelled");
}

/// Hands job `id`'s current record to `handler` until the job is no longer running
/// (at most 10 times); answers the job.
async fn drive(api: &Api, t: &api_tests::Tenant, id: &str, handler: &jobs::Jobs, reader: &RoundReader) -> Value {
    for _ in 0..10 {
        let now = api.get(&t.key, &format!("/executions/bulk/{id}")).await.body.clone();
        if now["status"] != "running" {
            return now;
        }
        let round = reader.round(&t.id, id).await;
        let answer = Box::pin(handler.handle(json!({"Records": [record(&t.id, id, round)]}), one_round())).await;
        assert_eq!(answer["batchItemFailures"], json!([]));
    }
    api.get(&t.key, &format!("/executions/bulk/{id}")).await.body
}

/// Through the local stack: the template's stream mapping (played by `cairn-relay`)
/// runs the job's rounds until it completes.
#[tokio::test]
async fn over_http_the_stream_runs_a_job_to_its_end() {
    let api = Api::new(Transport::http());
    let env = api_tests::env().await;
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key, "streamed").await;
    let mut failed = Vec::new();
    for _ in 0..30 {
        failed.push(execution(&api, &t.key, &wf, json!({}), Some("X")).await);
    }
    let started = api
        .post(&t.key, "/executions/bulk", &bulk("replay", json!({"workflow_id": wf, "status": "failed"}), false))
        .await;
    let id = started.expect(202).body["id"].as_str().expect("id").to_owned();
    let mut last = Value::Null;
    for _ in 0..600 {
        last = api.get(&t.key, &format!("/executions/bulk/{id}")).await.body.clone();
        if last["status"] != "running" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!((last["status"].as_str(), last["done"].as_u64()), (Some("completed"), Some(30)), "{last}");
    for e in &failed {
        assert_eq!(api.get(&t.key, &format!("/executions/{e}")).await.body["attempt"], 2, "{e}");
    }
}

/// The incident of the issue: 200 failed executions of two causes, recovered by one job
/// over the incident's tag: two groups, a dry run, each execution replayed once and
/// charged once, both groups resolved by themselves once the replays complete.
#[tokio::test]
async fn an_incident_of_two_hundred_across_two_causes_is_recovered_by_one_job() {
    let env = own_env().await;
    let api = Api::new(Transport::in_process(&env));
    let t = env.tenant_with_credits(1_000).await;
    let wf = workflow(&api, &t.key, "incident-200").await;
    let mut failed = Vec::new();
    for n in 0..200 {
        let cause = if n % 4 == 0 { "TIMEOUT" } else { "RATE_LIMIT" };
        failed.push(execution(&api, &t.key, &wf, json!({"incident": "7"}), Some(cause)).await);
    }
    execution(&api, &t.key, &wf, json!({"incident": "7"}), None).await; // running: not matched
    let groups = api.get(&t.key, "/failures/groups").await.body["items"].as_array().expect("items").clone();
    let counts: Vec<(String, u64)> = groups
        .iter()
        .map(|g| (g["error_type"].as_str().expect("type").to_owned(), g["counts"]["open"].as_u64().expect("open")))
        .collect();
    assert_eq!(counts.len(), 2, "two causes, two groups: {counts:?}");
    assert!(counts.contains(&("RATE_LIMIT".to_owned(), 150)) && counts.contains(&("TIMEOUT".to_owned(), 50)));

    let filter = json!({"tag": "incident:7", "status": "failed"});
    let dry = api.post(&t.key, "/executions/bulk", &bulk("replay", filter.clone(), true)).await;
    assert_eq!((dry.expect(200).body["matched"].as_u64(), dry.body["credits_needed"].as_i64()), (Some(200), Some(200)));
    let before = balance(&api, &t.key).await;
    let started = api.post(&t.key, "/executions/bulk", &bulk("replay", filter, false)).await;
    let id = started.expect(202).body["id"].as_str().expect("id").to_owned();
    let handler = jobs::Jobs::new(env.client.clone(), env.tables.clone());
    let reader = RoundReader(env.clone());
    let mut last = Value::Null;
    for _ in 0..20 {
        last = drive(&api, &t, &id, &handler, &reader).await;
        if last["status"] != "running" {
            break;
        }
    }
    assert_eq!(
        (last["status"].as_str(), last["done"].as_u64(), last["skipped"].as_u64()),
        (Some("completed"), Some(200), Some(0)),
        "{last}"
    );
    assert_eq!(balance(&api, &t.key).await, before - 200, "charged once each");
    let events = reported(&env, &t.id).await;
    assert_eq!(events["execution.replayed"].len(), 200, "reported once each");
    let mut expected = failed.clone();
    expected.sort();
    assert_eq!(ids_of(&events["execution.replayed"]), expected);

    for e in &failed {
        api.post(&t.key, &format!("/executions/{e}/complete"), &json!({})).await.expect(200);
    }
    for g in &groups {
        let now = api.get(&t.key, &format!("/failures/groups/{}", g["id"].as_str().expect("id"))).await;
        assert_eq!(
            (now.body["status"].as_str(), now.body["resolved_by"].as_str()),
            (Some("resolved"), Some("replay")),
            "{}",
            now.body
        );
    }
}
