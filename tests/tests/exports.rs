//! Exports (`/exports`): every record of a tenant, exactly as its own `GET` shows it,
//! in gzip JSON Lines parts that each fit Lambda's response, and nothing of another
//! tenant's; one workflow's alone; bad requests and keys refused, changing nothing; the
//! export and its parts deleted by TTL after 7 days while the records stay.
//!
//! Rounds are driven by calling the jobs function's handler as the stream's event source
//! mapping would, on tables of the test's own (which no relay reads); over HTTP,
//! `cairn-relay` drives them from DynamoDB Local's stream.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;

use api_tests::{Api, Env, Transport};
use serde_json::{Value, json};
use shared::dynamo::Table;

async fn own_env() -> Env {
    api_tests::own_env("export").await
}

fn id(reply: &api_tests::Reply) -> String {
    reply.body["id"].as_str().expect("id").to_owned()
}

/// The items of `partition` in `table` (every page).
async fn partition_items(env: &Env, table: Table, partition: &str) -> Vec<shared::dynamo::Item> {
    let mut items = Vec::new();
    let mut start = None;
    loop {
        let page = env
            .client
            .query()
            .table_name(env.tables.name(table))
            .key_condition_expression("tenant_id = :t")
            .expression_attribute_values(":t", shared::dynamo::s(partition))
            .set_exclusive_start_key(start)
            .send()
            .await
            .expect("query");
        items.extend(page.items.unwrap_or_default());
        start = page.last_evaluated_key;
        if start.is_none() {
            return items;
        }
    }
}

/// The stream record of export `id`'s item at `round`, as the mapping hands it over.
fn record(tenant: &str, id: &str, round: u64) -> Value {
    json!({"eventName": "MODIFY", "dynamodb": {"SequenceNumber": format!("{round:020}"), "NewImage": {
        "tenant_id": {"S": format!("{tenant}#exports")}, "id": {"S": id}, "round": {"N": round.to_string()},
        "status": {"S": "running"}}}})
}

/// A deadline for one round (the handler starts no round within `jobs::MARGIN` of it).
fn one_round() -> u64 {
    let deadline = std::time::SystemTime::now() + jobs::MARGIN + std::time::Duration::from_millis(100);
    u64::try_from(deadline.duration_since(std::time::UNIX_EPOCH).expect("now").as_millis()).expect("ms")
}

/// Hands export `id`'s record to the jobs function, one round at a time, until it ends
/// (at most 20 rounds); answers the export and how many rounds ran.
async fn drive(api: &Api, env: &Env, t: &api_tests::Tenant, id: &str) -> (Value, u64) {
    drive_from(api, env, t, id, 0).await
}

/// [`drive`] from round `first` on.
async fn drive_from(api: &Api, env: &Env, t: &api_tests::Tenant, id: &str, first: u64) -> (Value, u64) {
    let handler = jobs::Jobs::new(env.client.clone(), env.tables.clone());
    for rounds in first..20 {
        let now = api.get(&t.key, &format!("/exports/{id}")).await.expect(200).body.clone();
        if now["status"] != "running" {
            return (now, rounds);
        }
        let round = rounds;
        let answer = Box::pin(handler.handle(json!({"Records": [record(&t.id, id, round)]}), one_round())).await;
        assert_eq!(answer["batchItemFailures"], json!([]));
        // The same record again (the mapping retried it): passed over, nothing twice.
        let again = Box::pin(handler.handle(json!({"Records": [record(&t.id, id, round)]}), one_round())).await;
        assert_eq!(again["batchItemFailures"], json!([]));
    }
    panic!("export {id} did not end in 20 rounds");
}

/// Every line of every part of `export`, downloaded as a client would, in order.
async fn download(api: &Api, key: &str, export: &Value) -> Vec<Value> {
    let mut all = Vec::new();
    for part in export["parts"].as_array().expect("parts") {
        let url = part["url"].as_str().expect("url").strip_prefix("/api/v1").expect("under /api/v1").to_owned();
        let reply = api.get(key, &url).await;
        assert_eq!(reply.status, 200, "{url}");
        assert_eq!(reply.header("content-type"), Some("application/gzip"));
        let gzip = reply.raw.clone();
        assert_eq!(gzip.len() as u64, part["bytes"].as_u64().expect("bytes"), "{url}: its size");
        assert!(gzip.len() <= domain::runs::export::model::PART_BYTES, "{url}: {} bytes", gzip.len());
        let mut text = String::new();
        flate2::read::GzDecoder::new(&gzip[..]).read_to_string(&mut text).expect("gzip of UTF-8");
        let parsed: Vec<Value> =
            text.lines().map(|line| serde_json::from_str(line).expect("each line one JSON document")).collect();
        assert_eq!(parsed.len() as u64, part["lines"].as_u64().expect("lines"), "{url}: its lines");
        all.extend(parsed);
    }
    all
}

/// The ids a list answers (one page: the tests' lists are short).
async fn listed(api: &Api, key: &str, path: &str) -> BTreeSet<String> {
    let page = api.get(key, path).await.expect(200).body.clone();
    page["items"].as_array().expect("items").iter().map(|i| i["id"].as_str().expect("id").to_owned()).collect()
}

/// Each record of `lines` equals its own `GET`; an execution's checkpoints follow it.
async fn each_is_as_get_shows_it(api: &Api, key: &str, lines: &[Value]) -> BTreeMap<&'static str, BTreeSet<String>> {
    let mut seen: BTreeMap<&'static str, BTreeSet<String>> = BTreeMap::new();
    let mut execution = String::new();
    for line in lines {
        let data = &line["data"];
        let id = data["id"].as_str().expect("id").to_owned();
        let (kind, path) = match line["type"].as_str().expect("type") {
            "workflow" => ("workflow", format!("/workflows/{id}")),
            "execution" => {
                execution.clone_from(&id);
                ("execution", format!("/executions/{id}"))
            }
            "checkpoint" => {
                assert_eq!(data["execution_id"], execution.as_str(), "a checkpoint follows its execution");
                ("checkpoint", format!("/checkpoints/{id}?include_state=true"))
            }
            "failure" => ("failure", format!("/failures/{id}")),
            other => panic!("a line of type {other}"),
        };
        assert_eq!(&api.get(key, &path).await.expect(200).body, data, "{path}");
        assert!(seen.entry(kind).or_default().insert(id), "{path} twice");
    }
    seen
}

#[tokio::test]
async fn an_export_round_trips_every_record_of_a_tenant_and_nothing_of_another() {
    let env = own_env().await;
    let api = Api::new(Transport::in_process(&env));
    let t = env.tenant().await;
    let other = env.tenant().await;

    let make = json!({"name": "triage", "workflow_type": "langgraph", "definition": {"nodes": ["a", "b"]}});
    let wf = id(api.post(&t.key, "/workflows", &make).await.expect(201));
    let wf2 =
        id(api.post(&t.key, "/workflows", &json!({"name": "second", "workflow_type": "custom"})).await.expect(201));
    let start = |w: &str| json!({"workflow_id": w, "input": {"q": "why"}, "tags": {"team": "a"}});
    let big = id(api.post(&t.key, "/executions", &start(&wf)).await.expect(201));
    // Twelve states of 700 KB that gzip cannot shrink below 4.5 MB together: two parts.
    for n in 0..12 {
        let state = json!({"execution_id": big, "name": format!("step-{n}"), "state": {"noise": api_tests::noise(n + 1, 700_000)}});
        api.post(&t.key, "/checkpoints", &state).await.expect(201);
    }
    let done = id(api.post(&t.key, "/executions", &start(&wf)).await.expect(201));
    api.post(&t.key, "/checkpoints", &json!({"execution_id": done, "key": "k1", "state": {"n": 1}})).await.expect(201);
    api.post(&t.key, &format!("/executions/{done}/complete"), &json!({"output": {"a": 1}})).await.expect(200);
    let failed = id(api.post(&t.key, "/executions", &start(&wf2)).await.expect(201));
    let fail = json!({"error_type": "TIMEOUT", "message": "slow", "details": {"after_s": 30}});
    api.post(&t.key, &format!("/executions/{failed}/fail"), &fail).await.expect(200);
    let gone = id(api.post(&t.key, "/executions", &start(&wf2)).await.expect(201));
    api.post(&t.key, &format!("/executions/{gone}/cancel"), &json!({})).await.expect(200);
    api.delete(&t.key, &format!("/executions/{gone}")).await.expect(204);
    // Another tenant's records, which no export of `t` may show.
    let theirs = id(api.post(&other.key, "/workflows", &make).await.expect(201));
    let their_run = id(api.post(&other.key, "/executions", &start(&theirs)).await.expect(201));
    api.post(&other.key, &format!("/executions/{their_run}/fail"), &fail).await.expect(200);

    let started = api.post(&t.key, "/exports", &json!({})).await;
    let export = id(started.expect(202));
    assert_eq!(started.header("location"), Some(format!("/api/v1/exports/{export}").as_str()));
    assert_eq!(
        (started.body["status"].as_str(), started.body["object"].as_str(), &started.body["parts"]),
        (Some("running"), Some("export"), &json!([]))
    );
    let busy = api.post(&t.key, "/exports", &json!({"workflow_id": wf})).await;
    busy.expect_problem(409, "invalid_state");
    assert!(busy.body["detail"].as_str().expect("detail").contains(&export), "names the one running");
    let (ended, rounds) = drive(&api, &env, &t, &export).await;
    assert_eq!(ended["status"], "completed", "{ended}");
    assert!(ended["ended_at"].is_string());
    let parts = ended["parts"].as_array().expect("parts").len();
    assert!(parts >= 2, "the states fill more than one part: {ended}");
    assert!(rounds as usize >= parts, "a round writes one part at most");

    let lines = download(&api, &t.key, &ended).await;
    let seen = each_is_as_get_shows_it(&api, &t.key, &lines).await;
    assert_eq!(seen["workflow"], listed(&api, &t.key, "/workflows").await, "every workflow");
    assert_eq!(seen["execution"], listed(&api, &t.key, "/executions").await, "every execution");
    assert!(!seen["execution"].contains(&gone), "a deleted execution is not exported");
    let mut checkpoints = listed(&api, &t.key, &format!("/checkpoints?execution_id={big}&limit=100")).await;
    checkpoints.extend(listed(&api, &t.key, &format!("/checkpoints?execution_id={done}")).await);
    assert_eq!(seen["checkpoint"], checkpoints, "every checkpoint, with its state");
    assert_eq!(seen["failure"], listed(&api, &t.key, "/failures").await, "every failure");
    let counts = &ended["counts"];
    assert_eq!(
        [&counts["workflows"], &counts["executions"], &counts["checkpoints"], &counts["failures"]],
        [&json!(2), &json!(3), &json!(13), &json!(1)]
    );
    let text = serde_json::to_string(&lines).expect("JSON");
    for theirs in [&theirs, &their_run, &other.id] {
        assert!(!text.contains(theirs.as_str()), "another tenant's {theirs}");
    }

    // One workflow's records alone.
    let only = id(api.post(&t.key, "/exports", &json!({"workflow_id": wf2})).await.expect(202));
    let (ended, _) = drive(&api, &env, &t, &only).await;
    assert_eq!((ended["status"].as_str(), ended["workflow_id"].as_str()), (Some("completed"), Some(wf2.as_str())));
    let lines = download(&api, &t.key, &ended).await;
    let seen = each_is_as_get_shows_it(&api, &t.key, &lines).await;
    assert_eq!(seen["workflow"], BTreeSet::from([wf2.clone()]));
    assert_eq!(seen["execution"], BTreeSet::from([failed.clone()]));
    assert_eq!(seen["failure"].len(), 1);
    assert!(!seen.contains_key("checkpoint"));

    // Seven days on, DynamoDB's TTL deletes the exports and their parts, and nothing else.
    let after = chrono::Utc::now() + chrono::Duration::days(7) + chrono::Duration::minutes(1);
    let specs = infra::template::Template::embedded().expect("template").tables().expect("tables");
    for (table, suffix) in [(Table::Jobs, "jobs"), (Table::Blobs, "blobs")] {
        let spec = specs.iter().find(|s| s.suffix == suffix).expect("table");
        infra::ttl::expire(&env.client, env.tables.name(table), spec, after.timestamp()).await.expect("TTL");
    }
    api.get(&t.key, &format!("/exports/{export}")).await.expect_problem(404, "not_found");
    let parts = partition_items(&env, Table::Blobs, &t.id).await;
    assert!(parts.iter().all(|item| !item["part"].as_s().expect("part").starts_with("export_")), "no export part left");
    let state =
        api.get(&t.key, &format!("/checkpoints/{}?include_state=true", checkpoints.first().expect("one"))).await;
    assert!(state.expect(200).body["state"].is_object(), "the records stay");
}

#[tokio::test]
async fn bad_export_requests_and_restricted_keys_are_refused_and_start_nothing() {
    let env = own_env().await;
    let api = Api::new(Transport::in_process(&env));
    let t = env.tenant().await;
    for (body, field) in [(json!({"workflow_id": 5}), "workflow_id"), (json!({"since": "x"}), "since")] {
        let refused = api.post(&t.key, "/exports", &body).await;
        refused.expect_problem(422, "validation_failed");
        assert_eq!(refused.body["errors"][0]["field"], field, "{}", refused.body);
    }
    let unknown = format!("wf_{}", "0".repeat(32));
    api.post(&t.key, "/exports", &json!({"workflow_id": unknown})).await.expect_problem(404, "not_found");
    // Every area's scope is still not the full key an export needs.
    let scopes: Vec<String> =
        shared::scopes::AREAS.iter().flat_map(|a| [format!("{a}:read"), format!("{a}:write")]).collect();
    let made = api.post(&t.key, "/keys", &json!({"name": "areas", "scopes": scopes})).await;
    let restricted = made.expect(201).body["key"].as_str().expect("key").to_owned();
    let refused = api.post(&restricted, "/exports", &json!({})).await;
    refused.expect_problem(403, "insufficient_scope");

    let export = id(api.post(&t.key, "/exports", &json!({})).await.expect(202));
    api.get(&restricted, &format!("/exports/{export}")).await.expect_problem(403, "insufficient_scope");
    for part in ["0", "01", "1", "x", "99999999999999999999999"] {
        let missing = api.get(&t.key, &format!("/exports/{export}/parts/{part}")).await;
        missing.expect_problem(404, "not_found");
    }
    api.get(&t.key, "/exports/export_nope").await.expect_problem(404, "not_found");
    let mine = partition_items(&env, Table::Jobs, &format!("{}#exports", t.id)).await;
    assert_eq!(mine.len(), 1, "only the one export that was accepted");
}

#[tokio::test]
async fn an_export_no_round_moved_for_an_hour_is_failed_and_another_may_start() {
    let env = own_env().await;
    let api = Api::new(Transport::in_process(&env));
    let t = env.tenant().await;
    let runs = domain::runs::Runs::new(env.client.clone(), env.tables.clone(), 1);
    let tenant = shared::auth::trusted::tenant(&shared::ids::TenantKey::parse(&t.id).expect("tenant id"));
    // Started 61 minutes ago, and no round ran since (its rounds failed past every retry).
    let then = shared::time::ManualClock::new(chrono::Utc::now() - chrono::Duration::minutes(61));
    let stalled = runs.export_start(&tenant, None, &then, &|_| {}).await.expect("started").id.to_string();
    let seen = api.get(&t.key, &format!("/exports/{stalled}")).await.expect(200).body.clone();
    assert_eq!(seen["status"], "failed", "{seen}");
    assert!(seen["error"].as_str().expect("why").contains("another export may start"));
    let next = api.post(&t.key, "/exports", &json!({})).await;
    assert_ne!(id(next.expect(202)), stalled);
}

/// A round that stops inside an execution's checkpoints goes on after the last one it
/// wrote even when that checkpoint is deleted before the next round: every checkpoint
/// there is then is exported, each once.
#[tokio::test]
async fn an_export_goes_on_after_its_last_checkpoint_even_once_that_is_deleted() {
    let env = own_env().await;
    let api = Api::new(Transport::in_process(&env));
    let t = env.tenant().await;
    let wf = id(api.post(&t.key, "/workflows", &json!({"name": "w", "workflow_type": "custom"})).await.expect(201));
    let run = id(api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201));
    // Ten states of 700 KB that gzip cannot shrink: the first part fills among them.
    for n in 0..10 {
        let state = json!({"execution_id": run, "state": {"noise": api_tests::noise(n + 40, 700_000)}});
        api.post(&t.key, "/checkpoints", &state).await.expect(201);
    }
    let export = id(api.post(&t.key, "/exports", &json!({})).await.expect(202));
    let handler = jobs::Jobs::new(env.client.clone(), env.tables.clone());
    let answer = Box::pin(handler.handle(json!({"Records": [record(&t.id, &export, 0)]}), one_round())).await;
    assert_eq!(answer["batchItemFailures"], json!([]));
    let first = api.get(&t.key, &format!("/exports/{export}")).await.expect(200).body.clone();
    assert_eq!((first["status"].as_str(), first["parts"].as_array().map(Vec::len)), (Some("running"), Some(1)));
    let lines = download(&api, &t.key, &first).await;
    let last = lines.last().expect("lines");
    assert_eq!(last["type"], "checkpoint", "the round stopped among the checkpoints");
    let written: BTreeSet<String> = lines
        .iter()
        .filter(|l| l["type"] == "checkpoint")
        .map(|l| l["data"]["id"].as_str().expect("id").to_owned())
        .collect();
    assert!(written.len() < 10, "{} written", written.len());
    let deleted = last["data"]["id"].as_str().expect("id").to_owned();
    api.delete(&t.key, &format!("/checkpoints/{deleted}")).await.expect(204);

    let (ended, _) = drive_from(&api, &env, &t, &export, 1).await;
    assert_eq!(ended["status"], "completed", "{ended}");
    let lines = download(&api, &t.key, &ended).await;
    let mut exported = Vec::new();
    for line in lines.iter().filter(|l| l["type"] == "checkpoint") {
        exported.push(line["data"]["id"].as_str().expect("id").to_owned());
    }
    let mut there = listed(&api, &t.key, &format!("/checkpoints?execution_id={run}&limit=100")).await;
    assert_eq!(there.len(), 9);
    there.insert(deleted);
    assert_eq!(exported.iter().cloned().collect::<BTreeSet<_>>(), there, "every checkpoint, the rest included");
    assert_eq!(exported.len(), 10, "each once");
}

/// Through the local stack: the template's stream mapping (played by `cairn-relay`)
/// runs the export's rounds until it completes.
#[tokio::test]
async fn over_http_the_stream_runs_an_export_to_its_end() {
    let api = Api::new(Transport::http());
    let env = api_tests::env().await;
    let t = env.tenant().await;
    let wf =
        id(api.post(&t.key, "/workflows", &json!({"name": "streamed", "workflow_type": "custom"})).await.expect(201));
    let run = id(api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201));
    api.post(&t.key, "/checkpoints", &json!({"execution_id": run, "state": {"n": 1}})).await.expect(201);
    let export = id(api.post(&t.key, "/exports", &json!({})).await.expect(202));
    let mut last = Value::Null;
    for _ in 0..600 {
        last = api.get(&t.key, &format!("/exports/{export}")).await.body.clone();
        if last["status"] != "running" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(last["status"], "completed", "{last}");
    let lines = download(&api, &t.key, &last).await;
    let kinds: Vec<&str> = lines.iter().map(|l| l["type"].as_str().expect("type")).collect();
    assert_eq!(kinds, ["workflow", "execution", "checkpoint"]);
}
