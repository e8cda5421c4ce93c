//! Counters and rate-limit standings spread over shards (`shared::counters`,
//! `shared::rate_limit`), and `cairn-admin migrate counter-shards`, which folds counters
//! kept in the earlier model (one item per tenant and name) into them. The earlier
//! counters are made from what the API counted: the tenant's shards added up, per name
//! and attribute, and written under the bare tenant id as the earlier code wrote them.

use std::collections::BTreeMap;

use api_tests::{Api, Env, Transport};
use aws_sdk_dynamodb::types::AttributeValue;
use serde_json::{Value, json};
use shared::dynamo::{Item, Table, s};

/// Every total and statistic a client reads, as one value.
async fn totals(api: &Api, key: &str, wf: &str) -> Value {
    let mut found = serde_json::Map::new();
    for path in [
        "/workflows".to_owned(),
        "/workflows?status=published".to_owned(),
        "/executions".to_owned(),
        "/executions?status=running".to_owned(),
        format!("/executions?workflow_id={wf}&status=completed"),
        "/executions?created_after=2000-01-01T00:00:00Z".to_owned(),
        "/failures".to_owned(),
        "/failures?status=open".to_owned(),
        "/billing/transactions".to_owned(),
        "/billing/transactions?type=usage".to_owned(),
    ] {
        found.insert(path.clone(), api.get(key, &path).await.expect(200).body["total"].clone());
    }
    let stats = api.get(key, "/executions/stats").await.expect(200).body.clone();
    found.insert("stats".into(), json!([stats["total"], stats["failures"]]));
    found.insert("usage".into(), api.get(key, "/billing/usage").await.expect(200).body["credits"].clone());
    let rates = api.get(key, "/failures/stats").await.expect(200).body.clone();
    found.insert("failure stats".into(), rates);
    Value::Object(found)
}

/// Rewrites `tenant`'s counters in the earlier model: one item per name, the shards'
/// values added up, under the bare tenant id; the shards are deleted.
async fn rewrite_as_legacy(env: &Env, tenant: &str) -> usize {
    let table = env.tables.name(Table::Counters);
    let mut legacy: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for shard in 0..shared::counters::SHARDS {
        let partition = shared::counters::partition(tenant, shard);
        let out = env
            .client
            .query()
            .table_name(table)
            .key_condition_expression("tenant_id = :t")
            .expression_attribute_values(":t", s(&partition))
            .send()
            .await
            .expect("query");
        assert!(out.last_evaluated_key.is_none(), "one page");
        for item in out.items.unwrap_or_default() {
            let name = item["name"].as_s().expect("name").clone();
            for (attribute, value) in &item {
                if let Ok(number) = value.as_n() {
                    *legacy.entry(name.clone()).or_default().entry(attribute.clone()).or_default() +=
                        number.parse::<i64>().expect("number");
                }
            }
            let key = shared::counters::key(tenant, shard, &name);
            env.client.delete_item().table_name(table).set_key(Some(key)).send().await.expect("delete");
        }
    }
    for (name, values) in &legacy {
        let mut item: Item = [("tenant_id".to_owned(), s(tenant)), ("name".to_owned(), s(name))].into_iter().collect();
        for (attribute, value) in values {
            item.insert(attribute.clone(), AttributeValue::N(value.to_string()));
        }
        env.client.put_item().table_name(table).set_item(Some(item)).send().await.expect("put");
    }
    legacy.len()
}

#[tokio::test]
async fn counters_of_the_earlier_model_are_folded_into_the_shards_once_and_count_on() {
    let env = api_tests::env().await;
    let api = Api::new(Transport::in_process(&env));
    let t = env.tenant().await;
    let body = json!({"name": "w", "workflow_type": "custom", "status": "published"});
    let wf = api.post(&t.key, "/workflows", &body).await.expect(201).body["id"].as_str().expect("id").to_owned();
    let mut ids = Vec::new();
    for _ in 0..4 {
        let started = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await;
        ids.push(started.expect(201).body["id"].as_str().expect("id").to_owned());
    }
    api.post(&t.key, &format!("/executions/{}/complete", ids[0]), &json!({})).await.expect(200);
    let fail = json!({"error_type": "AGENT_ERROR", "message": "m"});
    api.post(&t.key, &format!("/executions/{}/fail", ids[1]), &fail).await.expect(200);
    let before = totals(&api, &t.key, &wf).await;
    assert_eq!(before["/executions?status=running"], 2, "{before}");

    let rewritten = rewrite_as_legacy(&env, &t.id).await;
    assert!(rewritten > 10, "{rewritten} counter items");
    let gap = totals(&api, &t.key, &wf).await;
    assert_eq!(gap["/executions"], 0, "the sharded model does not read the earlier items: {gap}");

    let folded = shared::counters::fold_legacy(&env.client, &env.tables, Some(&t.id)).await.expect("fold");
    assert_eq!(folded, rewritten as u64);
    assert_eq!(totals(&api, &t.key, &wf).await, before, "every total as before");
    let again = shared::counters::fold_legacy(&env.client, &env.tables, Some(&t.id)).await.expect("fold");
    assert_eq!(again, 0, "a second run folds nothing");
    assert_eq!(totals(&api, &t.key, &wf).await, before, "and counts nothing twice");

    // Counting goes on in any shard; running executions folded into shard 0 end in others.
    let path = format!("/workflows/{wf}");
    api.delete(&t.key, &path).await.expect_problem(409, "invalid_state");
    for id in &ids[2..] {
        api.post(&t.key, &format!("/executions/{id}/cancel"), &json!({})).await.expect(200);
    }
    let after = totals(&api, &t.key, &wf).await;
    assert_eq!(after["/executions?status=running"], 0, "{after}");
    assert_eq!(after["/executions"], 4);
    api.delete(&t.key, &path).await.expect(204);
    assert_eq!(api.get(&t.key, "/workflows").await.body["total"], 0);
}
