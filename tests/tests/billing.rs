//! The credit ledger as a client sees it, in process and through `cargo lambda watch`.

use api_tests::{Api, Env, both_paths};
use serde_json::{Value, json};

both_paths!(
    a_new_tenant_has_a_zero_balance_and_an_empty_ledger,
    starts_and_replays_cost_one_credit_each_and_the_ledger_chains,
    without_credits_a_start_or_replay_is_402_and_writes_nothing,
    forty_concurrent_starts_on_fifteen_credits_give_fifteen_runs,
    every_credit_is_spent_once_wherever_the_allowances_hold_it,
    transactions_refuse_invalid_queries,
    a_tenants_usage_never_touches_another_tenants_balance,
);

async fn workflow(api: &Api, key: &str) -> String {
    let reply = api.post(key, "/workflows", &json!({"name": "wf", "workflow_type": "autogen"})).await;
    reply.expect(201).body["id"].as_str().expect("id").to_owned()
}

async fn ledger(api: &Api, key: &str) -> Vec<Value> {
    let mut all = Vec::new();
    for page in 1.. {
        let reply = api.get(key, &format!("/billing/transactions?page={page}&page_size=100")).await;
        let items = reply.expect(200).body["items"].as_array().cloned().unwrap_or_default();
        if items.is_empty() {
            return all;
        }
        all.extend(items);
    }
    all
}

/// Newest first, every entry's `credits_before` is the next (older) entry's
/// `credits_after`, and amounts add up.
fn assert_chained(entries: &[Value]) {
    for pair in entries.windows(2) {
        assert_eq!(pair[0]["credits_before"], pair[1]["credits_after"], "{} after {}", pair[0], pair[1]);
    }
    for e in entries {
        let (before, after, amount) = (e["credits_before"].as_i64(), e["credits_after"].as_i64(), e["amount"].as_i64());
        assert_eq!(before.zip(amount).map(|(b, a)| b + a), after, "{e}");
        assert_eq!(e["currency"], "usd");
    }
}

async fn balance(api: &Api, key: &str) -> i64 {
    let reply = api.get(key, "/billing/balance").await;
    let credits = reply.expect(200).body["credits_balance"].as_i64().expect("credits");
    assert_eq!(reply.body["balance_usd"].as_f64(), Some(credits as f64 / 100.0));
    credits
}

async fn a_new_tenant_has_a_zero_balance_and_an_empty_ledger(api: Api, env: Env) {
    let t = env.tenant_with_credits(0).await;
    let reply = api.get(&t.key, "/billing/balance").await;
    assert_eq!(reply.expect(200).body, json!({"credits_balance": 0, "balance_usd": 0.0}));
    let list = api.get(&t.key, "/billing/transactions").await;
    assert_eq!(list.expect(200).body, json!({"items": [], "total": 0, "page": 1, "page_size": 50}));
}

async fn starts_and_replays_cost_one_credit_each_and_the_ledger_chains(api: Api, env: Env) {
    let t = env.tenant_with_credits(10).await;
    assert_eq!(balance(&api, &t.key).await, 10);
    let wf = workflow(&api, &t.key).await;
    let e = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await;
    let e = e.expect(201).body["id"].as_str().expect("id").to_owned();
    assert_eq!(balance(&api, &t.key).await, 9);
    api.post(&t.key, &format!("/executions/{e}/fail"), &json!({"error_type": "TIMEOUT", "message": "m"}))
        .await
        .expect(200);
    assert_eq!(balance(&api, &t.key).await, 9, "failing costs nothing");
    api.post(&t.key, &format!("/executions/{e}/replay"), &json!({})).await.expect(200);
    assert_eq!(balance(&api, &t.key).await, 8);
    let entries = ledger(&api, &t.key).await;
    assert_eq!(entries.len(), 3, "{entries:#?}");
    assert_chained(&entries);
    let kinds: Vec<&str> = entries.iter().map(|e| e["type"].as_str().unwrap_or_default()).collect();
    assert_eq!(kinds, ["usage", "usage", "topup"], "newest first");
    assert_eq!(entries[0]["amount"], -1);
    assert_eq!(entries[0]["payment_status"], Value::Null);
    assert!(entries[0]["description"].as_str().is_some_and(|d| d.contains(&e) && d.contains("replayed")));
    assert_eq!(entries[2]["amount"], 10);
    assert_eq!(entries[2]["payment_status"], "completed");
    assert_eq!(entries[2]["description"], "Manual grant");
    assert!(entries.iter().all(|e| e["id"].as_str().is_some_and(|id| id.starts_with("txn_"))));
    assert_eq!(entries[0].as_object().map(serde_json::Map::len), Some(9), "the seed's fields: {}", entries[0]);
    let usage = api.get(&t.key, "/billing/transactions?type=usage").await;
    assert_eq!(usage.expect(200).body["total"], 2);
    assert!(usage.body["items"].as_array().expect("items").iter().all(|e| e["type"] == "usage"));
    let paged = api.get(&t.key, "/billing/transactions?page=2&page_size=2").await;
    assert_eq!((paged.body["total"].clone(), paged.body["items"][0]["type"].clone()), (json!(3), json!("topup")));
}

async fn without_credits_a_start_or_replay_is_402_and_writes_nothing(api: Api, env: Env) {
    let t = env.tenant_with_credits(1).await;
    let wf = workflow(&api, &t.key).await;
    let e = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await;
    let e = e.expect(201).body["id"].as_str().expect("id").to_owned();
    let refused = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await;
    refused.expect_problem(402, "insufficient_credits");
    assert!(refused.body["detail"].as_str().is_some_and(|d| d.contains("balance is 0")));
    api.post(&t.key, &format!("/executions/{e}/fail"), &json!({"error_type": "TIMEOUT", "message": "m"}))
        .await
        .expect(200);
    api.post(&t.key, &format!("/executions/{e}/replay"), &json!({})).await.expect_problem(402, "insufficient_credits");
    let execution = api.get(&t.key, &format!("/executions/{e}")).await;
    assert_eq!((execution.body["status"].clone(), execution.body["attempt"].clone()), (json!("failed"), json!(1)));
    assert_eq!(api.get(&t.key, "/executions").await.body["total"], 1);
    assert_eq!(balance(&api, &t.key).await, 0);
    let entries = ledger(&api, &t.key).await;
    assert_eq!(entries.len(), 2, "no entry for refused charges");
    assert_chained(&entries);
}

async fn forty_concurrent_starts_on_fifteen_credits_give_fifteen_runs(api: Api, env: Env) {
    let t = env.tenant_with_credits(15).await;
    let wf = workflow(&api, &t.key).await;
    // Sent as our client sends them: a 503 again, with the same key (see post_retrying).
    let starts: Vec<_> = (0..40)
        .map(|i| {
            let (api, key, wf) = (api.clone(), t.key.clone(), wf.clone());
            let once = format!("start-{i}");
            tokio::spawn(
                async move { api.post_retrying(&key, "/executions", &json!({"workflow_id": wf}), &once).await },
            )
        })
        .collect();
    let (mut created, mut refused) = (0, 0);
    for start in starts {
        let (reply, _) = start.await.expect("task");
        match reply.status {
            201 => created += 1,
            402 => {
                reply.expect_problem(402, "insufficient_credits");
                refused += 1;
            }
            other => panic!("unexpected {other}: {}", reply.body),
        }
    }
    assert_eq!((created, refused), (15, 25));
    assert_eq!(balance(&api, &t.key).await, 0);
    let entries = ledger(&api, &t.key).await;
    assert_chained(&entries);
    let charged: i64 = entries.iter().filter(|e| e["type"] == "usage").filter_map(|e| e["amount"].as_i64()).sum();
    assert_eq!(charged, -15, "the usage entries hold every start once");
    assert_eq!(entries[0]["credits_after"], 0);
    assert_eq!(api.get(&t.key, "/executions").await.body["total"], 15);
}

/// With no low-balance threshold, allowances are handed shares of the whole balance, so
/// its last credits sit in several of them: a start whose allowance is empty takes them
/// back, and only when none is left anywhere is a start refused. The usage entries add up
/// to every charge, once.
async fn every_credit_is_spent_once_wherever_the_allowances_hold_it(api: Api, env: Env) {
    let t = env.tenant_with_credits(96).await;
    infra::admin::set_low_balance_threshold(&env.client, &env.tables, &t.id, 0).await.expect("threshold");
    let wf = workflow(&api, &t.key).await;
    let starts: Vec<_> = (0..4)
        .map(|writer| {
            let (api, key, wf) = (api.clone(), t.key.clone(), wf.clone());
            tokio::spawn(async move {
                let mut created = 0;
                for i in 0..30 {
                    let once = format!("start-{writer}-{i}");
                    let (reply, _) = api.post_retrying(&key, "/executions", &json!({"workflow_id": wf}), &once).await;
                    match reply.status {
                        201 => created += 1,
                        402 => break,
                        other => panic!("unexpected {other}: {}", reply.body),
                    }
                }
                created
            })
        })
        .collect();
    let mut created = 0;
    for start in starts {
        created += start.await.expect("task");
    }
    assert_eq!(created, 96, "every credit bought one start");
    assert_eq!(balance(&api, &t.key).await, 0);
    let refused = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await;
    refused.expect_problem(402, "insufficient_credits");
    let entries = ledger(&api, &t.key).await;
    assert_chained(&entries);
    let usage: Vec<&Value> = entries.iter().filter(|e| e["type"] == "usage").collect();
    assert_eq!(usage.iter().filter_map(|e| e["amount"].as_i64()).sum::<i64>(), -96);
    assert_eq!(entries[0]["credits_after"], 0);
    assert_eq!(api.get(&t.key, "/executions").await.body["total"], 96);
}

async fn transactions_refuse_invalid_queries(api: Api, env: Env) {
    let t = env.tenant().await;
    for (query, field) in [("?type=chargeback", "type"), ("?page=0", "page"), ("?page_size=101", "page_size")] {
        let reply = api.get(&t.key, &format!("/billing/transactions{query}")).await;
        reply.expect_problem(422, "validation_failed");
        assert_eq!(reply.error_fields(), [field], "{query}");
    }
}

async fn a_tenants_usage_never_touches_another_tenants_balance(api: Api, env: Env) {
    let a = env.tenant_with_credits(5).await;
    let b = env.tenant_with_credits(7).await;
    let wf = workflow(&api, &a.key).await;
    api.post(&a.key, "/executions", &json!({"workflow_id": wf})).await.expect(201);
    assert_eq!(balance(&api, &a.key).await, 4);
    assert_eq!(balance(&api, &b.key).await, 7);
    let theirs = ledger(&api, &b.key).await;
    assert_eq!(theirs.len(), 1);
    assert_eq!(theirs[0]["amount"], 7);
    api.post(&b.key, "/executions", &json!({"workflow_id": wf})).await.expect_problem(404, "not_found");
    assert_eq!(balance(&api, &b.key).await, 7, "a refused start charges nothing");
}

/// Below its low-balance threshold every charge of a tenant refills its allowance. Once
/// an instance has seen the tenant there, a start makes its charge, the refill and the
/// usage entry in its own transaction, the one that writes the execution (not a refused
/// transaction, a refill and the transaction again): the balance after each start, the
/// ledger and the refusal of a start the balance cannot pay are as they always were. In
/// process (the instance is the test's).
#[tokio::test]
async fn below_the_threshold_a_start_is_charged_refilled_and_settled_in_its_own_transaction() {
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant_with_credits(4).await;
    let wf = workflow(&api, &t.key).await;
    let start = json!({"workflow_id": wf});
    api.post(&t.key, "/executions", &start).await.expect(201);
    for left in (0..3).rev() {
        let (reply, calls) = shared::metering::writes_of(api.post(&t.key, "/executions", &start)).await;
        reply.expect(201);
        let of_accounts: Vec<_> =
            calls.iter().filter(|call| call.items.iter().any(|item| item.table.ends_with("-accounts"))).collect();
        assert_eq!(of_accounts.len(), 1, "{calls:#?}");
        assert!(of_accounts[0].items.iter().any(|item| item.table.ends_with("-executions")), "{calls:#?}");
        assert_eq!(balance(&api, &t.key).await, left);
    }
    let refused = api.post(&t.key, "/executions", &start).await;
    refused.expect_problem(402, "insufficient_credits");
    assert_eq!(api.get(&t.key, "/executions").await.body["total"], 4);
    let entries = ledger(&api, &t.key).await;
    assert_chained(&entries);
    let spent: i64 = entries.iter().filter(|e| e["type"] == "usage").filter_map(|e| e["amount"].as_i64()).sum();
    assert_eq!((spent, balance(&api, &t.key).await), (-4, 0));
}
