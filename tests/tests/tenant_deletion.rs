//! Deleting a tenant (`cairn-admin tenant delete`, `infra::erasure`): after it, no item
//! of the tenant is left in any table, its keys are refused, and another tenant's items
//! are exactly as they were; the report counts what went. A tenant with a live
//! subscription is refused, nothing deleted. A tenant may ask for its own deletion
//! (`POST /account/deletion`): its keys are refused from the answer on, and the janitor
//! deletes the rest in steps across its runs, leaving the report.
//!
//! On tables of the test's own (which no relay reads), so that nothing else writes while
//! the items are compared.

use std::collections::BTreeMap;

use std::sync::atomic::{AtomicU32, Ordering};

use api_tests::{Api, Env, Transport};
use aws_sdk_dynamodb::types::AttributeValue;
use domain::erasure::{CONFIRMATION, Erased, Erasures};
use serde_json::json;
use shared::dynamo::{Item, Table};

/// Every item `tenant` owns, by table: in its partitions (`tenant_id` is its id or starts
/// with it and `#`), or naming it in `tenant_id` (API keys); each as text, sorted.
async fn owned(env: &Env, tenant: &str) -> BTreeMap<&'static str, Vec<String>> {
    let mut found = BTreeMap::new();
    for table in Table::ALL {
        let mut items: Vec<String> = Vec::new();
        for item in api_tests::scan_all(env, table).await {
            let owner = item.get("tenant_id").and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
            if owner == tenant || owner.starts_with(&format!("{tenant}#")) {
                items.push(text(&item));
            }
        }
        if table == Table::ApiKeys {
            items.extend(revocation_markers(env, &items).await);
        }
        items.sort();
        if !items.is_empty() {
            found.insert(table.suffix(), items);
        }
    }
    found
}

/// The revocation markers (`{hash}#revoked#NN`) of the keys among `keys` (as text).
async fn revocation_markers(env: &Env, keys: &[String]) -> Vec<String> {
    let mut markers = Vec::new();
    for item in api_tests::scan_all(env, Table::ApiKeys).await {
        let hash = item["key_hash"].as_s().expect("hash");
        if let Some((key, _)) = hash.split_once("#revoked#")
            && keys.iter().any(|k| k.contains(key))
        {
            markers.push(text(&item));
        }
    }
    markers
}

/// The revocation markers an earlier version's revocation of `key` wrote (it checked
/// one at a write made with the key; nothing does now), left in table `api-keys`.
async fn earlier_markers(env: &Env, key: &str) {
    for marker in 0..shared::auth::REVOCATION_MARKERS {
        let hash = shared::auth::revocation_marker(&shared::auth::hash_key(key), marker);
        let put = env.client.put_item().table_name(env.tables.name(Table::ApiKeys));
        let put =
            put.item("key_hash", shared::dynamo::s(hash)).item("revoked_at", shared::dynamo::s("2026-12-01T00:00:00Z"));
        put.send().await.expect("marker");
    }
}

/// An item as text, its maps' keys sorted (the order of attributes is DynamoDB's own).
fn text(item: &Item) -> String {
    let sorted: BTreeMap<&String, String> = item.iter().map(|(k, v)| (k, value(v))).collect();
    format!("{sorted:?}")
}

fn value(v: &AttributeValue) -> String {
    match v {
        AttributeValue::M(map) => text(map),
        AttributeValue::L(list) => format!("{:?}", list.iter().map(value).collect::<Vec<_>>()),
        other => format!("{other:?}"),
    }
}

/// `found` but for the rate-limit counts (which every request writes).
fn without_counts(mut found: BTreeMap<&'static str, Vec<String>>) -> BTreeMap<&'static str, Vec<String>> {
    found.remove("rate-limits");
    found
}

/// Gives `key`'s tenant data in as many tables as the API writes: a workflow, executions
/// with keys, tags, large input and checkpoint states (blobs), pending writes, a failure
/// and its group, retention settings and expiry markers, a bulk job, a webhook endpoint,
/// an idempotency record, counters, events, the ledger and rate-limit counts.
async fn busy(api: &Api, key: &str) {
    let wf = api.post(key, "/workflows", &json!({"name": "erased", "workflow_type": "custom"})).await;
    let wf = wf.expect(201).body["id"].as_str().expect("id").to_owned();
    api.put(key, "/settings/retention", &json!({"checkpoints": "keep_latest"})).await.expect(200);
    // Beyond what an execution keeps inline once compressed: stored apart, in blobs.
    let big = api_tests::noise(7, 200_000);
    let mut ids = Vec::new();
    for n in 0..2 {
        let body =
            json!({"workflow_id": wf, "key": format!("order-{n}"), "tags": {"team": "search"}, "input": {"big": big}});
        let e = api.post(key, "/executions", &body).await.expect(201).body["id"].as_str().expect("id").to_owned();
        let cp = json!({"execution_id": e, "key": "first", "state": {"big": big}, "name": "plan"});
        let cp = api.post(key, "/checkpoints", &cp).await.expect(201).body["id"].as_str().expect("id").to_owned();
        let writes = json!({"task_id": "t", "writes": [{"index": 0, "channel": "c", "value": {"big": big}}]});
        api.post(key, &format!("/checkpoints/{cp}/writes"), &writes).await.expect(200);
        ids.push(e);
    }
    let fail = json!({"error_type": "TIMEOUT", "message": "upstream 503"});
    api.post(key, &format!("/executions/{}/fail", ids[0]), &fail).await.expect(200);
    api.post(key, &format!("/executions/{}/complete", ids[1]), &json!({})).await.expect(200);
    let bulk = json!({"action": "replay", "filter": {"status": "failed"}});
    api.post(key, "/executions/bulk", &bulk).await.expect(202);
    let hook = json!({"url": "https://example.com/hooks", "event_types": ["execution.failed"]});
    api.request(http::Method::POST, "/webhook-endpoints")
        .key(key)
        .header("Idempotency-Key", "erase-hook")
        .json(&hook)
        .send()
        .await
        .expect(201);
}

#[tokio::test]
async fn a_deleted_tenant_leaves_no_item_in_any_table_and_another_is_untouched() {
    let env = api_tests::own_env("erase").await;
    let api = Api::new(Transport::in_process(&env));
    let (gone, kept) = (env.tenant().await, env.tenant().await);
    busy(&api, &gone.key).await;
    busy(&api, &kept.key).await;
    earlier_markers(&env, &gone.key).await;
    let before = owned(&env, &gone.id).await;
    let tables: Vec<&str> = before.keys().copied().collect();
    for table in [
        "tenants",
        "api-keys",
        "workflows",
        "counters",
        "executions",
        "checkpoints",
        "blobs",
        "failures",
        "accounts",
        "ledger",
        "rate-limits",
        "idempotency",
        "webhook-endpoints",
        "events",
        "jobs",
    ] {
        assert!(tables.contains(&table), "the tenant has data in {table}: {tables:?}");
    }
    let theirs = owned(&env, &kept.id).await;

    let report = infra::erasure::delete_tenant(&env.client, &env.tables, &gone.id).await.expect("deleted");

    assert_eq!(owned(&env, &gone.id).await, BTreeMap::new(), "no item of the deleted tenant is left");
    assert_eq!(owned(&env, &kept.id).await, theirs, "the other tenant's items are exactly as they were");
    // The report counts every item that went: those found before, and what revoking the
    // key wrote first (the tenant's keys epoch, which may be an item of the rate-limit
    // standing the requests had not made yet; a revocation writes no marker).
    for (table, count) in &report.deleted {
        let found = before.get(table.as_str()).map_or(0, |items| items.len() as u64);
        let revocation = u64::from(table == "rate-limits");
        assert!((found..=found + revocation).contains(count), "{table}: {count} deleted, {found} found");
    }
    assert_eq!(report.deleted["api-keys"], 1 + 16, "the key and the markers an earlier version left");
    assert_eq!((report.keys_revoked, report.passes), (1, 2), "one pass deletes, the next finds nothing");
    assert!(report.started_at <= report.finished_at);

    // Its key is refused; the other tenant goes on.
    api.get(&gone.key, "/workflows").await.expect_problem(401, "unauthorized");
    assert_eq!(api.get(&kept.key, "/workflows").await.expect(200).body["total"], 1);
    let again = infra::erasure::delete_tenant(&env.client, &env.tables, &gone.id).await;
    assert!(again.is_err_and(|e| e.to_string().contains("unknown tenant")));
}

#[tokio::test]
async fn a_tenant_with_a_live_subscription_is_not_deleted() {
    let env = api_tests::own_env("erase").await;
    let t = env.tenant().await;
    let subscription = json!({"subscription_id": "sub_live", "plan_id": "pro", "status": "active",
        "current_period_start": null, "current_period_end": null, "cancel_at_period_end": false});
    env.client
        .update_item()
        .table_name(env.tables.name(Table::Accounts))
        .key("tenant_id", shared::dynamo::s(&t.id))
        .update_expression("SET subscription = :s")
        .expression_attribute_values(":s", serde_dynamo::to_attribute_value(subscription).expect("attribute"))
        .send()
        .await
        .expect("subscribed");
    let before = without_counts(owned(&env, &t.id).await);
    let refused = infra::erasure::delete_tenant(&env.client, &env.tables, &t.id).await;
    assert!(refused.is_err_and(|e| e.to_string().contains("live subscription")));
    let api = Api::new(Transport::in_process(&env));
    let asked = api.post(&t.key, "/account/deletion", &json!({"confirm": CONFIRMATION})).await;
    asked.expect_problem(409, "invalid_state");
    assert!(asked.body["detail"].as_str().is_some_and(|d| d.contains("cancel it first")), "{}", asked.body);
    assert_eq!(without_counts(owned(&env, &t.id).await), before, "nothing deleted, no key revoked");
    let erased = Erasures::new(env.client.clone(), env.tables.clone()).run(chrono::Utc::now(), &|| true).await;
    assert_eq!(erased.expect("run"), Erased::default(), "nothing asked for");
}

/// A tenant asks for its own deletion with a full key and the typed confirmation: every
/// key of its is refused from the answer on, and the janitor's runs, a few steps each
/// (as runs out of time stop) and each going on where the last stopped, leave no item of
/// it in any table while another tenant's are exactly as they were; the report stays.
/// Without the confirmation, or with a restricted key, nothing changes. The janitor's
/// calls are all granted by its policy in `template.yaml`.
#[tokio::test]
async fn a_tenant_that_asks_is_deleted_by_the_janitor_run_after_run() {
    // Tables of its own: the janitor's runs read every deletion asked for in them.
    let env = api_tests::own_env("asked").await;
    let api = Api::new(Transport::in_process(&env));
    let (gone, kept) = (env.tenant().await, env.tenant().await);
    busy(&api, &gone.key).await;
    busy(&api, &kept.key).await;
    let theirs = owned(&env, &kept.id).await;
    let restricted = api.post(&gone.key, "/keys", &json!({"name": "keys only", "scopes": ["keys:write"]})).await;
    let restricted = restricted.expect(201).body["key"].as_str().expect("secret").to_owned();
    let before = owned(&env, &gone.id).await;
    for confirm in [json!({}), json!({"confirm": "yes"}), json!({"confirm": CONFIRMATION.to_uppercase()})] {
        let refused = api.post(&gone.key, "/account/deletion", &confirm).await;
        refused.expect_problem(422, "validation_failed");
    }
    let refused = api.post(&restricted, "/account/deletion", &json!({"confirm": CONFIRMATION})).await;
    refused.expect_problem(403, "insufficient_scope");
    assert_eq!(without_counts(owned(&env, &gone.id).await), without_counts(before), "the refusals changed nothing");

    let asked = api.post(&gone.key, "/account/deletion", &json!({"confirm": CONFIRMATION})).await;
    let asked = asked.expect(202);
    assert_eq!(
        (asked.body["object"].as_str(), asked.body["status"].as_str()),
        (Some("account_deletion"), Some("requested"))
    );
    assert_eq!(asked.body["keys_revoked"], 2);
    for key in [&gone.key, &restricted] {
        api.get(key, "/workflows").await.expect_problem(401, "unauthorized");
    }

    let erasures = Erasures::new(env.client.clone(), env.tables.clone());
    let idle = erasures.run(chrono::Utc::now(), &|| false).await.expect("run");
    assert_eq!((idle.steps, idle.stopped), (0, true), "a run with no time left takes no step");
    let (mut runs, mut calls) = (0, Vec::new());
    let finished = loop {
        runs += 1;
        let left = AtomicU32::new(4);
        let go_on = || left.fetch_sub(1, Ordering::Relaxed) > 0;
        let (erased, made) = Box::pin(shared::metering::recorded(erasures.run(chrono::Utc::now(), &go_on))).await;
        calls.extend(made);
        let erased = erased.expect("run");
        if erased.finished == 1 {
            break erased;
        }
        assert!(erased.stopped && erased.steps > 0 && runs < 100, "{erased:?}");
    };
    assert!(runs > 5 && !finished.stopped, "{runs} runs: {finished:?}");
    let prefix = env.tables.name(Table::Tenants).strip_suffix("tenants").expect("a prefix");
    let missing = api_tests::ungranted_in(prefix, "janitor", &calls);
    assert!(missing.is_empty(), "the janitor's policy lacks: {missing:?}");

    assert_eq!(owned(&env, &gone.id).await, BTreeMap::new(), "no item of the deleted tenant is left");
    assert_eq!(owned(&env, &kept.id).await, theirs, "the other tenant's items are exactly as they were");
    let report = erasures.report(&gone.id).await.expect("read").expect("the report");
    assert_eq!(report.requested_at.as_deref(), asked.body["requested_at"].as_str());
    assert_eq!((report.keys_revoked, report.passes), (2, 2), "one pass deletes, the next finds nothing");
    assert_eq!(report.deleted["api-keys"], 2, "both keys (a revocation writes no marker)");
    assert!(report.deleted["blobs"] > 0 && report.deleted["executions"] >= 2, "{report:?}");
    assert_eq!(report.total, report.deleted.values().sum::<u64>());
    assert!(report.started_at <= report.finished_at);
    let again = erasures.run(chrono::Utc::now(), &|| true).await.expect("run");
    assert_eq!(again, Erased::default(), "nothing left to run");
    assert_eq!(api.get(&kept.key, "/workflows").await.expect(200).body["total"], 1);
}
