//! Retention (`/settings/retention`) and expiry: settings default to the plan and are
//! checked against it; an ending fixes an execution's lifetimes, a replay takes them
//! away; once its time has passed an execution goes with everything it owns (its
//! checkpoints, states, keys, tags, payloads and counts) and nothing else does; with
//! `keep_latest` only the checkpoint an ended execution stands at stays.
//!
//! Expiry runs as on AWS: the ending puts TTL markers in the `jobs` table; DynamoDB's TTL
//! (played here by `infra::ttl`, which `cairn-relay` runs, DynamoDB Local having none)
//! deletes them once due; the jobs function is handed the REMOVE records. In process,
//! on tables of the tests' own (which no relay reads), the records are handed over by
//! hand, with the API's clock set back so that what ended is long past its time; over
//! HTTP, `cairn-relay` plays the mapping.

use std::sync::Arc;

use api_tests::{Api, Env, Transport, both_paths};
use chrono::TimeDelta;
use serde_json::{Value, json};
use shared::dynamo::{Item, Table};
use shared::time::ManualClock;

both_paths!(
    settings_default_to_the_plan_and_a_put_replaces_them,
    settings_that_cannot_apply_are_422_naming_the_field_and_change_nothing,
    an_ending_fixes_the_lifetimes_and_a_replay_takes_them_away,
    a_workflows_own_retention_is_used_instead_of_the_tenants,
);

async fn workflow(api: &Api, key: &str) -> String {
    let wf = api.post(key, "/workflows", &json!({"name": "kept", "workflow_type": "custom"})).await;
    wf.expect(201).body["id"].as_str().expect("id").to_owned()
}

async fn start(api: &Api, key: &str, wf: &str, extra: Value) -> String {
    let mut body = json!({"workflow_id": wf, "input": {"question": "x".repeat(300)}});
    body.as_object_mut().expect("object").extend(extra.as_object().cloned().unwrap_or_default());
    api.post(key, "/executions", &body).await.expect(201).body["id"].as_str().expect("id").to_owned()
}

/// Records `n` checkpoints (each with a key) on execution `e`; answers their ids.
async fn checkpoints(api: &Api, key: &str, e: &str, n: u32) -> Vec<String> {
    let mut ids = Vec::new();
    for step in 1..=n {
        let body =
            json!({"execution_id": e, "state": {"step": step, "pad": "s".repeat(500)}, "key": format!("k{step}")});
        ids.push(api.post(key, "/checkpoints", &body).await.expect(201).body["id"].as_str().expect("id").to_owned());
    }
    ids
}

async fn act(api: &Api, key: &str, e: &str, action: &str, body: Value) -> Value {
    api.post(key, &format!("/executions/{e}/{action}"), &body).await.expect(200).body.clone()
}

fn at(value: &Value) -> chrono::DateTime<chrono::Utc> {
    shared::time::parse(value.as_str().expect("a timestamp")).expect("RFC 3339")
}

async fn settings_default_to_the_plan_and_a_put_replaces_them(api: Api, env: Env) {
    let t = env.tenant().await;
    let defaults = json!({"object": "retention", "executions_days": null, "checkpoints": "all",
        "checkpoints_days": null, "plan": null, "max_executions_days": 30, "effective_executions_days": 30,
        "updated_at": null});
    assert_eq!(api.get(&t.key, "/settings/retention").await.expect(200).body, defaults);

    let set =
        api.put(&t.key, "/settings/retention", &json!({"executions_days": 7, "checkpoints": "keep_latest"})).await;
    let body = set.expect(200).body.clone();
    assert_eq!((body["executions_days"].clone(), body["checkpoints"].clone()), (json!(7), json!("keep_latest")));
    assert_eq!(body["effective_executions_days"], 7);
    assert!(body["updated_at"].is_string(), "{body}");
    assert_eq!(api.get(&t.key, "/settings/retention").await.body, body, "GET answers what PUT stored");

    let days = json!({"checkpoints": "days", "checkpoints_days": 3});
    let put = api.put(&t.key, "/settings/retention", &days).await;
    assert_eq!((put.body["executions_days"].clone(), put.body["checkpoints_days"].clone()), (json!(null), json!(3)));
    // A PUT replaces: what it leaves out takes its default.
    let back = api.put(&t.key, "/settings/retention", &json!({})).await.expect(200).body.clone();
    assert_eq!((back["checkpoints"].clone(), back["effective_executions_days"].clone()), (json!("all"), json!(30)));

    // Another tenant's settings are its own.
    let other = env.tenant().await;
    assert_eq!(api.get(&other.key, "/settings/retention").await.body, defaults);
}

async fn settings_that_cannot_apply_are_422_naming_the_field_and_change_nothing(api: Api, env: Env) {
    let t = env.tenant().await;
    let set = api.put(&t.key, "/settings/retention", &json!({"executions_days": 14})).await.expect(200).body.clone();
    for (body, field) in [
        // Beyond what a tenant without a subscription keeps.
        (json!({"executions_days": 31}), "executions_days"),
        (json!({"executions_days": 0}), "executions_days"),
        (json!({"executions_days": "7"}), "executions_days"),
        (json!({"checkpoints": "forever"}), "checkpoints"),
        (json!({"checkpoints": "days"}), "checkpoints_days"),
        (json!({"checkpoints": "keep_latest", "checkpoints_days": 2}), "checkpoints_days"),
        (json!({"checkpoints": "days", "checkpoints_days": 3651}), "checkpoints_days"),
        (json!({"executions": 7}), "executions"),
    ] {
        let refused = api.put(&t.key, "/settings/retention", &body).await;
        refused.expect_problem(422, "validation_failed");
        assert_eq!(refused.error_fields(), vec![field.to_owned()], "{body}");
    }
    assert!(
        api.put(&t.key, "/settings/retention", &json!({"executions_days": 31})).await.body["errors"][0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("30"))
    );
    assert_eq!(api.get(&t.key, "/settings/retention").await.body, set, "nothing changed");

    // The settings are the executions': a read-only key reads them and cannot change them.
    let reader = api.post(&t.key, "/keys", &json!({"name": "reader", "scopes": ["executions:read"]})).await;
    let reader = reader.expect(201).body["key"].as_str().expect("key").to_owned();
    assert_eq!(api.get(&reader, "/settings/retention").await.expect(200).body, set);
    api.put(&reader, "/settings/retention", &json!({})).await.expect_problem(403, "insufficient_scope");
}

async fn an_ending_fixes_the_lifetimes_and_a_replay_takes_them_away(api: Api, env: Env) {
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key).await;
    let days = json!({"executions_days": 7, "checkpoints": "days", "checkpoints_days": 2});
    api.put(&t.key, "/settings/retention", &days).await.expect(200);
    let e = start(&api, &t.key, &wf, json!({})).await;
    let running = api.get(&t.key, &format!("/executions/{e}")).await.body.clone();
    assert_eq!((running["expires_at"].clone(), running["checkpoints_expire_at"].clone()), (json!(null), json!(null)));

    let failed = act(&api, &t.key, &e, "fail", json!({"error_type": "X", "message": "boom"})).await;
    let ended = at(&failed["ended_at"]);
    assert_eq!(at(&failed["expires_at"]), ended + TimeDelta::days(7));
    assert_eq!(at(&failed["checkpoints_expire_at"]), ended + TimeDelta::days(2));

    let replayed = act(&api, &t.key, &e, "replay", json!({})).await;
    assert_eq!((replayed["expires_at"].clone(), replayed["checkpoints_expire_at"].clone()), (json!(null), json!(null)));

    // Settings changed meanwhile apply to the next ending.
    api.put(&t.key, "/settings/retention", &json!({"executions_days": 1})).await.expect(200);
    let done = act(&api, &t.key, &e, "complete", json!({})).await;
    assert_eq!(at(&done["expires_at"]), at(&done["ended_at"]) + TimeDelta::days(1));
    assert_eq!(done["checkpoints_expire_at"], json!(null));
    let listed = api.get(&t.key, &format!("/executions?workflow_id={wf}")).await;
    assert_eq!(listed.body["items"][0]["expires_at"], done["expires_at"], "lists show it too");
}

async fn a_workflows_own_retention_is_used_instead_of_the_tenants(api: Api, env: Env) {
    let t = env.tenant().await;
    api.put(&t.key, "/settings/retention", &json!({"executions_days": 20})).await.expect(200);
    let own = json!({"executions_days": 3, "checkpoints": "keep_latest", "checkpoints_days": null});
    let body = json!({"name": "short-lived", "workflow_type": "custom", "retention": own});
    let created = api.post(&t.key, "/workflows", &body).await;
    assert_eq!(created.expect(201).body["retention"], own);
    let wf = created.body["id"].as_str().expect("id").to_owned();
    assert_eq!(api.get(&t.key, &format!("/workflows/{wf}")).await.body["retention"], own);
    let plain = workflow(&api, &t.key).await;
    assert_eq!(api.get(&t.key, &format!("/workflows/{plain}")).await.body["retention"], json!(null));

    // Beyond the plan, or breaking a rule: 422 naming the field, nothing written.
    for (retention, field) in [
        (json!({"executions_days": 31}), "retention.executions_days"),
        (json!({"checkpoints": "days"}), "retention.checkpoints_days"),
        (json!({"keep": 1}), "retention.keep"),
        (json!([1]), "retention"),
    ] {
        let body = json!({"name": "refused", "workflow_type": "custom", "retention": retention});
        let refused = api.post(&t.key, "/workflows", &body).await;
        refused.expect_problem(422, "validation_failed");
        assert_eq!(refused.error_fields(), vec![field.to_owned()], "{retention}");
        let changed = api.put(&t.key, &format!("/workflows/{wf}"), &json!({"retention": retention})).await;
        assert_eq!(changed.expect_problem(422, "validation_failed").error_fields(), vec![field.to_owned()]);
    }
    assert_eq!(api.get(&t.key, "/workflows?name=refused").await.body["total"], 0);
    assert_eq!(api.get(&t.key, &format!("/workflows/{wf}")).await.body["retention"], own);

    let e = start(&api, &t.key, &wf, json!({})).await;
    let done = act(&api, &t.key, &e, "complete", json!({})).await;
    let ended = at(&done["ended_at"]);
    assert_eq!(at(&done["expires_at"]), ended + TimeDelta::days(3));
    assert_eq!(at(&done["checkpoints_expire_at"]), ended);
    let e = start(&api, &t.key, &plain, json!({})).await;
    let done = act(&api, &t.key, &e, "cancel", json!({})).await;
    assert_eq!(at(&done["expires_at"]), at(&done["ended_at"]) + TimeDelta::days(20), "the tenant's");

    // Taken away: the tenant's applies again.
    let cleared = api.put(&t.key, &format!("/workflows/{wf}"), &json!({"retention": null})).await;
    assert_eq!(cleared.expect(200).body["retention"], json!(null));
    let e = start(&api, &t.key, &wf, json!({})).await;
    let done = act(&api, &t.key, &e, "fail", json!({"error_type": "X", "message": "boom"})).await;
    assert_eq!(at(&done["expires_at"]), at(&done["ended_at"]) + TimeDelta::days(20));
}

// ---- expiry, driven by hand on tables no relay reads ----

async fn own_env() -> Env {
    api_tests::own_env("keep").await
}

/// DynamoDB's TTL at `now` on the `jobs` table (as `cairn-relay` plays it), then the
/// jobs function handed the REMOVE records, as the template's mapping hands them over.
async fn time_passes(env: &Env, now: chrono::DateTime<chrono::Utc>) -> usize {
    let spec = infra::template::Template::embedded()
        .expect("template")
        .tables()
        .expect("tables")
        .into_iter()
        .find(|spec| spec.suffix == "jobs")
        .expect("the jobs table");
    let removed = infra::ttl::expire(&env.client, env.tables.name(Table::Jobs), &spec, now.timestamp())
        .await
        .expect("time to live");
    let records: Vec<Value> = removed.iter().map(|keys| record("REMOVE", "Keys", keys)).collect();
    hand_over(env, records).await;
    removed.len()
}

/// A stream record of the `jobs` table with `image` under `place`.
fn record(event: &str, place: &str, image: &Item) -> Value {
    let text = |name: &str| image[name].as_s().expect("text").clone();
    let mut data = json!({"SequenceNumber": "1"});
    data[place] = json!({"tenant_id": {"S": text("tenant_id")}, "id": {"S": text("id")}});
    json!({"eventName": event, "dynamodb": data})
}

async fn hand_over(env: &Env, records: Vec<Value>) {
    let handler = jobs::Jobs::new(env.client.clone(), env.tables.clone());
    let deadline = std::time::SystemTime::now() + jobs::MARGIN + std::time::Duration::from_secs(60);
    let ms = u64::try_from(deadline.duration_since(std::time::UNIX_EPOCH).expect("now").as_millis()).expect("ms");
    let (answer, accesses) =
        shared::metering::recorded(Box::pin(handler.handle(json!({"Records": records}), ms))).await;
    assert_eq!(answer["batchItemFailures"], json!([]));
    // The jobs function's policy in template.yaml grants every call the expiry made.
    let prefix = env.tables.name(Table::Jobs).replace("jobs", "");
    let missing = api_tests::ungranted_in(&prefix, "jobs", &accesses);
    assert!(missing.is_empty(), "template.yaml's jobs policy lacks what the code calls:\n{}", missing.join("\n"));
}

/// Every item of `tables` (the own tables) that names `needle` in its keys or values.
async fn items_naming(env: &Env, needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for table in Table::ALL {
        for item in api_tests::scan_all(env, table).await {
            if format!("{item:?}").contains(needle) {
                found.push(format!("{}: {:?} {:?}", table.suffix(), item.get("tenant_id"), item.get("id")));
            }
        }
    }
    found
}

async fn total(api: &Api, key: &str, query: &str) -> u64 {
    api.get(key, &format!("/executions{query}")).await.expect(200).body["total"].as_u64().expect("total")
}

/// The "expire exactly what it says and nothing else": an execution that ended
/// 40 days ago (kept 30 by default) goes with everything it owns at DynamoDB's TTL; one
/// that ended as long ago but was replayed since, one still running since then, one
/// that ended today and another tenant's are untouched; totals and tag lists follow.
#[tokio::test]
async fn an_expired_execution_goes_with_everything_it_owns_and_nothing_else() {
    let env = own_env().await;
    let now = chrono::Utc::now();
    let clock = ManualClock::new(now - TimeDelta::days(40));
    let api = Api::new(Transport::in_process_with_clock(&env, Arc::new(clock.clone())));
    let t = env.tenant().await;
    let other = env.tenant().await;
    let wf = workflow(&api, &t.key).await;
    let theirs_wf = workflow(&api, &other.key).await;

    let gone = start(&api, &t.key, &wf, json!({"key": "order-1", "tags": {"team": "search"}})).await;
    let gone_checkpoints = checkpoints(&api, &t.key, &gone, 3).await;
    act(&api, &t.key, &gone, "fail", json!({"error_type": "X", "message": "boom"})).await;
    let failure = api.get(&t.key, &format!("/failures?execution_id={gone}")).await.body["items"][0]["id"].clone();
    let replayed = start(&api, &t.key, &wf, json!({"tags": {"team": "search"}})).await;
    act(&api, &t.key, &replayed, "fail", json!({"error_type": "X", "message": "boom"})).await;
    let running = start(&api, &t.key, &wf, json!({})).await;
    checkpoints(&api, &t.key, &running, 2).await;
    let theirs = start(&api, &other.key, &theirs_wf, json!({})).await;
    act(&api, &other.key, &theirs, "complete", json!({})).await;
    // Today.
    clock.advance(TimeDelta::days(40));
    act(&api, &t.key, &replayed, "replay", json!({})).await;
    let recent = start(&api, &t.key, &wf, json!({})).await;
    act(&api, &t.key, &recent, "complete", json!({})).await;
    assert!(at(&api.get(&t.key, &format!("/executions/{gone}")).await.body["expires_at"]) < now);
    let stats_before = api.get(&t.key, "/failures/stats").await.body.clone();
    assert_eq!(total(&api, &t.key, "").await, 4);
    assert!(!items_naming(&env, &gone).await.is_empty());

    // DynamoDB's TTL passes: the markers due are removed, the stream hands them over.
    let removed = time_passes(&env, now).await;
    assert!(removed >= 3, "the expiry markers of gone, replayed (an earlier ending) and theirs: {removed}");

    api.get(&t.key, &format!("/executions/{gone}")).await.expect_problem(404, "not_found");
    for cp in &gone_checkpoints {
        api.get(&t.key, &format!("/checkpoints/{cp}")).await.expect_problem(404, "not_found");
    }
    let by_key = api.get(&t.key, &format!("/executions?workflow_id={wf}&key=order-1")).await;
    assert_eq!(by_key.expect(200).body["total"], 0);
    // What names it still is history of its own: its failure (failure lists and
    // statistics count what happened), its charges in the ledger (and the description of
    // the last charge an allowance made, for its usage entry), the events it reported.
    let left = items_naming(&env, &gone).await;
    let history = ["failures: ", "ledger: ", "accounts: ", "events: "];
    assert!(left.iter().all(|item| history.iter().any(|h| item.starts_with(h))), "{left:#?}");
    // Exactly the others stay, and every total counts them alone.
    assert_eq!(total(&api, &t.key, "").await, 3);
    assert_eq!(total(&api, &t.key, "?status=failed").await, 0);
    assert_eq!(total(&api, &t.key, "?tag=team:search").await, 1);
    assert_eq!(total(&api, &t.key, &format!("?workflow_id={wf}")).await, 3);
    for e in [&replayed, &running, &recent] {
        api.get(&t.key, &format!("/executions/{e}")).await.expect(200);
    }
    let running_checkpoints = api.get(&t.key, &format!("/checkpoints?execution_id={running}")).await;
    assert_eq!(running_checkpoints.body["total"], 2);
    // Another tenant's execution, past its time too, is its own TTL's to remove: its
    // marker went with this pass and it went with it; this tenant's data never named it.
    api.get(&other.key, &format!("/executions/{theirs}")).await.expect_problem(404, "not_found");
    // The failure statistics count what happened: the failure stays, and the rate with it.
    api.get(&t.key, &format!("/failures/{}", failure.as_str().expect("failure id"))).await.expect(200);
    assert_eq!(api.get(&t.key, "/failures/stats").await.body, stats_before);

    // A second pass finds nothing due.
    assert_eq!(time_passes(&env, now).await, 0);
}

/// With `keep_latest`, an ending hands the trim over at once (no TTL); only the
/// checkpoint the execution stands at stays, and its count says so.
#[tokio::test]
async fn keep_latest_keeps_only_the_checkpoint_an_ended_execution_stands_at() {
    let env = own_env().await;
    let api = Api::new(Transport::in_process(&env));
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key).await;
    api.put(&t.key, "/settings/retention", &json!({"checkpoints": "keep_latest"})).await.expect(200);
    let e = start(&api, &t.key, &wf, json!({})).await;
    let ids = checkpoints(&api, &t.key, &e, 5).await;
    // It stands at the third after a rollback (the later two are gone with it).
    act(&api, &t.key, &e, "rollback", json!({"checkpoint_id": ids[2]})).await;
    act(&api, &t.key, &e, "replay", json!({})).await;
    let done = act(&api, &t.key, &e, "complete", json!({})).await;
    assert_eq!(done["checkpoints_expire_at"], done["ended_at"]);

    let trim = marker(&env, &t.id, &e, "trim").await.expect("the trim marker, due at once");
    assert!(!trim.contains_key("expires_at"), "no TTL: handed over at once");
    hand_over(&env, vec![record("INSERT", "NewImage", &trim)]).await;

    let after = api.get(&t.key, &format!("/executions/{e}")).await.body.clone();
    assert_eq!((after["checkpoint_count"].clone(), after["checkpoints_expire_at"].clone()), (json!(1), json!(null)));
    let listed = api.get(&t.key, &format!("/checkpoints?execution_id={e}")).await;
    let items: Vec<Value> = listed.body["items"].as_array().expect("items").iter().map(|c| c["id"].clone()).collect();
    assert_eq!((listed.body["total"].clone(), items), (json!(1), vec![json!(ids[2])]));
    for gone in &ids[..2] {
        api.get(&t.key, &format!("/checkpoints/{gone}")).await.expect_problem(404, "not_found");
    }
    assert!(marker(&env, &t.id, &e, "trim").await.is_none(), "a marker due at once goes once done");
    // The execution itself stays until it expires.
    assert!(marker(&env, &t.id, &e, "expire").await.is_some_and(|m| m.contains_key("expires_at")));
}

async fn marker(env: &Env, tenant: &str, e: &str, due: &str) -> Option<Item> {
    env.client
        .get_item()
        .table_name(env.tables.name(Table::Jobs))
        .key("tenant_id", shared::dynamo::s(format!("{tenant}#{e}")))
        .key("id", shared::dynamo::s(due))
        .consistent_read(true)
        .send()
        .await
        .expect("read")
        .item
}

/// Through the local stack: the template's mapping (played by `cairn-relay`) hands the
/// trim over as the execution ends.
#[tokio::test]
async fn over_http_keep_latest_trims_as_the_execution_ends() {
    let api = Api::new(Transport::http());
    let env = api_tests::env().await;
    let t = env.tenant().await;
    let wf = workflow(&api, &t.key).await;
    api.put(&t.key, "/settings/retention", &json!({"checkpoints": "keep_latest"})).await.expect(200);
    let e = start(&api, &t.key, &wf, json!({})).await;
    let ids = checkpoints(&api, &t.key, &e, 4).await;
    act(&api, &t.key, &e, "complete", json!({})).await;
    let mut count = Value::Null;
    for _ in 0..600 {
        count = api.get(&t.key, &format!("/executions/{e}")).await.body["checkpoint_count"].clone();
        if count == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(count, 1);
    let listed = api.get(&t.key, &format!("/checkpoints?execution_id={e}")).await;
    assert_eq!(listed.body["items"][0]["id"], json!(ids[3]));
}

/// Takes `e`'s lifetimes and markers away, as an execution that ended before retention
/// existed has none.
async fn as_before_retention(env: &Env, tenant: &str, e: &str) {
    let items = api_tests::scan_all(env, Table::Executions).await;
    let item = items.iter().find(|item| item["id"].as_s().is_ok_and(|id| id == e)).expect("the execution's item");
    env.client
        .update_item()
        .table_name(env.tables.name(Table::Executions))
        .key("tenant_id", item["tenant_id"].clone())
        .key("id", item["id"].clone())
        .update_expression("REMOVE expires_at, checkpoints_expire_at")
        .send()
        .await
        .expect("lifetimes taken away");
    for due in ["expire", "trim"] {
        let delete = env.client.delete_item().table_name(env.tables.name(Table::Jobs));
        let delete =
            delete.key("tenant_id", shared::dynamo::s(format!("{tenant}#{e}"))).key("id", shared::dynamo::s(due));
        delete.send().await.expect("marker deleted");
    }
}

/// `cairn-admin migrate lifetimes`: executions that ended before retention existed get
/// the lifetimes their tenant's retention gives, counted from their end but never sooner
/// than the grace; running ones, ones with lifetimes and another tenant's (when one
/// tenant is named) are left as they are; a second run finds nothing; the markers it
/// puts expire the execution when the time comes. On tables of its own: the other
/// tests' TTL passes would otherwise take the markers of these executions.
#[tokio::test]
async fn executions_ended_before_retention_get_their_lifetimes_from_the_migration() {
    let env = api_tests::own_env("life").await;
    let now = chrono::Utc::now();
    let clock = ManualClock::new(now - TimeDelta::days(40));
    let api = Api::new(Transport::in_process_with_clock(&env, Arc::new(clock.clone())));
    let (t, other) = (env.tenant().await, env.tenant().await);
    let wf = workflow(&api, &t.key).await;
    let old = start(&api, &t.key, &wf, json!({})).await;
    checkpoints(&api, &t.key, &old, 2).await;
    act(&api, &t.key, &old, "complete", json!({})).await;
    let theirs_wf = workflow(&api, &other.key).await;
    let theirs = start(&api, &other.key, &theirs_wf, json!({})).await;
    act(&api, &other.key, &theirs, "complete", json!({})).await;
    clock.advance(TimeDelta::days(35));
    let lately = start(&api, &t.key, &wf, json!({})).await;
    let lately_ended = act(&api, &t.key, &lately, "fail", json!({"error_type": "X", "message": "boom"})).await;
    let running = start(&api, &t.key, &wf, json!({})).await;
    let given_already = start(&api, &t.key, &wf, json!({})).await;
    let given_expiry = act(&api, &t.key, &given_already, "complete", json!({})).await["expires_at"].clone();
    assert!(given_expiry.is_string());
    for (tenant, e) in [(&t.id, &old), (&t.id, &lately), (&other.id, &theirs)] {
        as_before_retention(&env, tenant, e).await;
    }
    let read = |key: &str, e: &str| {
        let (api, key, e) = (api.clone(), key.to_owned(), e.to_owned());
        async move { api.get(&key, &format!("/executions/{e}")).await.expect(200).body["expires_at"].clone() }
    };
    assert_eq!(read(&t.key, &old).await, Value::Null);

    // The migration ran ten days ago: its grace is over today.
    let ran = now - TimeDelta::days(10);
    let grace = ran + TimeDelta::days(domain::runs::expiry::GRACE_DAYS);
    let runs = domain::runs::Runs::new(env.client.clone(), env.tables.clone(), 1);
    let tenant = shared::auth::trusted::tenant(&shared::ids::TenantKey::parse(&t.id).expect("tenant id"));
    let done = runs.give_lifetimes(Some(&tenant), ran).await.expect("migration");
    assert_eq!((done.found, done.given), (2, 2));
    // Ended 40 days ago, kept 30: due already, so it gets the grace instead.
    assert_eq!(at(&read(&t.key, &old).await).timestamp_millis(), grace.timestamp_millis());
    // Ended 5 days ago: 30 days from its end.
    assert_eq!(at(&read(&t.key, &lately).await), at(&lately_ended["ended_at"]) + TimeDelta::days(30));
    assert_eq!(read(&t.key, &running).await, Value::Null, "running: never");
    assert_eq!(read(&t.key, &given_already).await, given_expiry, "untouched");
    let kept = marker(&env, &t.id, &old, "expire").await.expect("the expiry marker");
    assert_eq!(kept["expires_at"].as_n().expect("TTL").parse::<i64>().expect("seconds"), grace.timestamp());
    assert_eq!(read(&other.key, &theirs).await, Value::Null, "another tenant's is not touched");
    let again = runs.give_lifetimes(Some(&tenant), ran).await.expect("again");
    assert_eq!((again.found, again.given), (0, 0));

    // Every tenant's: the other tenant's now.
    let everyone = runs.give_lifetimes(None, ran).await.expect("every tenant");
    assert_eq!((everyone.found, everyone.given), (1, 1));
    assert_eq!(at(&read(&other.key, &theirs).await).timestamp_millis(), grace.timestamp_millis());

    // DynamoDB's TTL passes today: the markers past the grace go, and their executions.
    assert_eq!(time_passes(&env, now).await, 2);
    api.get(&t.key, &format!("/executions/{old}")).await.expect_problem(404, "not_found");
    api.get(&other.key, &format!("/executions/{theirs}")).await.expect_problem(404, "not_found");
    assert!(read(&t.key, &lately).await.is_string(), "not yet due");
}
