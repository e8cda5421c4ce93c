//! Every function's IAM policy in `template.yaml` covers the DynamoDB calls its code
//! really makes. A scenario drives every route of every function in process (and the
//! Stripe webhook with signed events); the SDK interceptor notes each call's IAM action
//! and table (`shared::metering::recorded`), and each must be granted by the policy of
//! the function that made it. The list comes from the code's calls, not from a hand list
//! that can drift. The janitor, which has no route, is checked the same way where its
//! run is tested (`keys_and_writes.rs`); the webhook dispatcher, which has none either,
//! below: a stream batch and a sweep, both with attempts.

use std::collections::BTreeSet;

use api_tests::stripe::{local, signed};
use api_tests::{Api, Transport};
use http::Method;
use serde_json::{Value, json};

fn id(reply: &api_tests::Reply) -> String {
    reply.body["id"].as_str().unwrap_or_else(|| panic!("an id in {} {}", reply.status, reply.body)).to_owned()
}

fn event(kind: &str, object: &Value) -> Value {
    let suffix = shared::ids::TransactionId::generate().to_string().replace("txn_", "");
    json!({"id": format!("evt_{suffix}"), "object": "event", "type": kind, "created": api_tests::stripe::now(),
           "data": {"object": object}})
}

/// Every route, including the paths that write the most: rollback deletions, replay
/// charges, failures, large states in parts, idempotent replays and releases, the ledger
/// through top-ups and subscription invoices.
async fn drive_every_route(api: &Api, key: &str, tenant: &str) {
    let wf = id(api.post(key, "/workflows", &json!({"name": "w", "workflow_type": "custom"})).await.expect(201));
    api.get(key, "/workflows?status=draft").await.expect(200);
    api.get(key, &format!("/workflows/{wf}")).await.expect(200);
    api.put(key, &format!("/workflows/{wf}"), &json!({"status": "published"})).await.expect(200);
    let start = json!({"workflow_id": wf, "input": {"q": 1}});
    let idempotent = |path: &'static str, body: Value| {
        let api = api.clone();
        let key = key.to_owned();
        async move { api.request(Method::POST, path).key(&key).header("idempotency-key", "k1").json(&body).send().await }
    };
    let e1 = id(idempotent("/executions", start.clone()).await.expect(201));
    idempotent("/executions", start.clone()).await.expect(201);
    idempotent("/executions", json!({"workflow_id": "wf_x"})).await.expect_problem(422, "idempotency_key_reused");
    let failing = api.request(Method::POST, "/workflows").key(key).header("idempotency-key", "k2");
    failing.json(&json!({})).send().await.expect_problem(422, "validation_failed");
    api.get(key, &format!("/executions?workflow_id={wf}&created_after=2020-01-01T00:00:00Z")).await.expect(200);
    api.get(key, "/executions?status=running").await.expect(200);
    api.get(key, "/executions/stats?bucket=hour").await.expect(200);
    api.get(key, &format!("/executions/{e1}")).await.expect(200);
    let bulk = json!({"action": "cancel", "filter": {"workflow_id": wf, "status": "paused"}, "dry_run": true});
    api.post(key, "/executions/bulk", &bulk).await.expect(200);
    let bulk = json!({"action": "cancel", "filter": {"workflow_id": wf, "status": "paused"}});
    let job = id(api.post(key, "/executions/bulk", &bulk).await.expect(202));
    api.get(key, &format!("/executions/bulk/{job}")).await.expect(200);
    api.get(key, "/executions/bulk").await.expect(200);
    api.post(key, &format!("/executions/bulk/{job}/cancel"), &json!({})).await.expect(200);
    let export = id(api.post(key, "/exports", &json!({"workflow_id": wf})).await.expect(202));
    api.get(key, &format!("/exports/{export}")).await.expect(200);
    // Part 1 is there once the relay (when one runs) has run the export's first round.
    let part = api.get(key, &format!("/exports/{export}/parts/1")).await;
    assert!(part.status == 200 || part.status == 404, "{}", part.status);

    let cp = |n: u32, state: Value| json!({"execution_id": e1, "name": format!("c{n}"), "state": state});
    let c1 = id(api.post(key, "/checkpoints", &cp(1, json!({"n": 1}))).await.expect(201));
    let noise: String =
        (0..600_000u32).map(|i| char::from(b'a' + (i.wrapping_mul(2_654_435_761) >> 27) as u8 % 26)).collect();
    let c2 = id(api.post(key, "/checkpoints", &cp(2, json!({"noise": noise}))).await.expect(201));
    api.get(key, &format!("/checkpoints?execution_id={e1}")).await.expect(200);
    api.get(key, &format!("/checkpoints/{c2}?include_state=true")).await.expect(200);
    // Writes: a document in parts, then a smaller one (its extra parts deleted); the
    // rollback below discards them with their checkpoint.
    let writes = |value: Value| json!({"task_id": "t", "writes": [{"index": 0, "channel": "c", "value": value}]});
    let written = api.post(key, &format!("/checkpoints/{c2}/writes"), &writes(json!(noise))).await;
    written.expect(200);
    api.post(key, &format!("/checkpoints/{c2}/writes"), &writes(json!(1))).await.expect(200);
    api.get(key, &format!("/checkpoints/{c2}/writes")).await.expect(200);
    api.get(key, &format!("/checkpoints?execution_id={e1}&order=desc&metadata[a]=b")).await.expect(200);
    api.post(key, &format!("/executions/{e1}/pause"), &json!({})).await.expect(200);
    api.post(key, &format!("/executions/{e1}/rollback"), &json!({"checkpoint_id": c1})).await.expect(200);
    api.post(key, &format!("/executions/{e1}/replay"), &json!({})).await.expect(200);
    let fail = json!({"error_type": "AGENT_ERROR", "message": "m"});
    api.post(key, &format!("/executions/{e1}/fail"), &fail).await.expect(200);
    let failed = api.get(key, "/failures?status=open").await;
    let group = failed.body["items"][0]["group_id"].clone();
    let by_group =
        json!({"action": "replay", "filter": {"failure_group": group, "error_type": "AGENT_ERROR"}, "dry_run": true});
    api.post(key, "/executions/bulk", &by_group).await.expect(200);
    api.post(key, &format!("/executions/{e1}/replay"), &json!({"checkpoint_id": c1})).await.expect(200);
    api.post(key, &format!("/executions/{e1}/complete"), &json!({"output": {"ok": true}})).await.expect(200);
    // Keys: an idempotent start and checkpoint, lookups, and a deletion with everything.
    let keyed_start = json!({"workflow_id": wf, "key": "thread-1"});
    let e4 = id(api.post(key, "/executions", &keyed_start).await.expect(201));
    api.post(key, "/executions", &keyed_start).await.expect(200);
    api.get(key, &format!("/executions?workflow_id={wf}&key=thread-1")).await.expect(200);
    let keyed_cp = json!({"execution_id": e4, "key": "cp-1", "state": {"noise": noise}});
    let c4 = id(api.post(key, "/checkpoints", &keyed_cp).await.expect(201));
    api.post(key, "/checkpoints", &keyed_cp).await.expect(200);
    api.get(key, &format!("/checkpoints?execution_id={e4}&key=cp-1")).await.expect(200);
    api.get(key, &format!("/checkpoints?workflow_id={wf}&key=cp-1")).await.expect(200);
    api.post(key, &format!("/checkpoints/{c4}/writes"), &writes(json!(noise))).await.expect(200);
    api.post(key, "/checkpoints", &json!({"execution_id": e4, "key": "cp-2", "state": {}})).await.expect(201);
    api.delete(key, &format!("/checkpoints/{c4}")).await.expect(204);
    let c6 = id(api.post(key, "/checkpoints", &keyed_cp).await.expect(201));
    api.post(key, &format!("/checkpoints/{c6}/writes"), &writes(json!(noise))).await.expect(200);
    api.delete(key, &format!("/executions/{e4}")).await.expect(204);
    let e2 = id(api.post(key, "/executions", &start).await.expect(201));
    api.post(key, &format!("/executions/{e2}/cancel"), &json!({"reason": "r"})).await.expect(200);
    for _ in 0..2 {
        let e = id(api.post(key, "/executions", &start).await.expect(201));
        api.post(key, &format!("/executions/{e}/fail"), &fail).await.expect(200);
    }

    let failures = api.get(key, "/failures?status=open").await;
    let open: Vec<String> = failures.body["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|f| f["id"].as_str().expect("id").to_owned())
        .collect();
    api.get(key, "/failures/stats").await.expect(200);
    api.get(key, "/failures?created_after=2020-01-01T00:00:00Z").await.expect(200);
    api.get(key, &format!("/failures/{}", open[0])).await.expect(200);
    api.post(key, &format!("/failures/{}/resolve", open[0]), &json!({})).await.expect(200);
    api.post(key, &format!("/failures/{}/ignore", open[1]), &json!({})).await.expect(200);
    api.delete(key, &format!("/workflows/{wf}")).await.expect(204);

    // Keys: the tenant's own.
    let made = api.post(key, "/keys", &json!({"name": "ci"})).await;
    let made_id = id(made.expect(201));
    api.get(key, "/keys").await.expect(200);
    api.delete(key, &format!("/keys/{made_id}")).await.expect(204);
    let keyed = api.request(Method::POST, "/keys").key(key).header("idempotency-key", "keys-1");
    keyed.json(&json!({"name": "again"})).send().await.expect(201);

    // Webhook endpoints: each route, the workflow filter, a test event.
    let made =
        api.post(key, "/webhook-endpoints", &json!({"url": "http://127.0.0.1:9/hook", "description": "d"})).await;
    let we = id(made.expect(201));
    api.get(key, "/webhook-endpoints").await.expect(200);
    api.get(key, &format!("/webhook-endpoints/{we}")).await.expect(200);
    api.patch(key, &format!("/webhook-endpoints/{we}"), &json!({"event_types": ["execution.failed"]}))
        .await
        .expect(200);
    api.post(key, &format!("/webhook-endpoints/{we}/rotate-secret"), &json!({})).await.expect(200);
    let sent = api.post(key, &format!("/webhook-endpoints/{we}/test"), &json!({})).await;
    let delivery = sent.expect(202).body["delivery_id"].as_str().expect("delivery").to_owned();
    api.get(key, &format!("/webhook-endpoints/{we}/deliveries")).await.expect(200);
    let retried = api.post(key, &format!("/webhook-endpoints/{we}/deliveries/{delivery}/retry"), &json!({})).await;
    assert!(retried.status == 202 || retried.status == 404, "{}", retried.status);
    api.delete(key, &format!("/webhook-endpoints/{we}")).await.expect(204);

    api.get(key, "/billing/balance").await.expect(200);
    api.get(key, "/billing/usage?bucket=day").await.expect(200);
    api.get(key, "/billing/transactions?type=usage").await.expect(200);
    api.post(key, "/billing/topup", &json!({"amount_cents": 500})).await.expect(200);
    api.get(key, "/billing/subscriptions/status").await.expect_problem(404, "not_found");
    api.request(Method::POST, "/billing/subscriptions/cancel").key(key).send().await.expect_problem(404, "not_found");
    let checkout = api
        .post(
            key,
            "/billing/subscriptions/create-checkout",
            &json!({"plan_id": "developer", "return_url": "https://e.com/"}),
        )
        .await;
    let url = checkout.expect(200).body["checkout_url"].as_str().expect("url").to_owned();
    api.post(key, "/billing/subscriptions/portal", &json!({"return_url": "https://e.com/"})).await.expect(200);
    let path = url.strip_prefix(&api_tests::stripe::base()).expect("local checkout");
    let (_, session) = local(Method::POST, &format!("{path}/complete"), "").await;
    let subscription = session["subscription"].as_str().expect("subscription").to_owned();

    // The webhook, in process, with each kind of event it applies.
    let topup = json!({"id": "pi_iam", "object": "payment_intent", "amount": 700, "amount_received": 700,
                       "metadata": {"tenant_id": tenant, "credits": "700", "cairn_kind": "topup"}});
    let session = json!({"id": "cs_iam", "object": "checkout.session", "customer": session["customer"],
                         "subscription": subscription, "metadata": {"tenant_id": tenant}});
    let sub = json!({"id": subscription, "object": "subscription"});
    let price = domain::subscriptions::Plans::from_env().price(domain::subscriptions::Plan::Pro).map(str::to_owned);
    let invoice = json!({"id": "in_iam", "object": "invoice", "subscription": subscription,
                         "billing_reason": "subscription_cycle", "amount_paid": 2000,
                         "lines": {"data": [{"type": "subscription", "quantity": 1, "price": {"id": price}}]}});
    for (kind, object) in [
        ("payment_intent.succeeded", &topup),
        ("checkout.session.completed", &session),
        ("customer.subscription.updated", &sub),
        ("invoice.paid", &invoice),
    ] {
        assert_eq!(signed(api, &event(kind, object)).await.expect(200).body["applied"], true, "{kind}");
    }
    api.get(key, "/billing/subscriptions/status").await.expect(200);
    api.request(Method::POST, "/billing/subscriptions/cancel").key(key).send().await.expect(200);

    // Every function claims, stores, replays and releases Idempotency-Keys.
    let keyed = |path: String, body: Value, k: &'static str| {
        let (api, key) = (api.clone(), key.to_owned());
        async move { api.request(Method::POST, &path).key(&key).header("idempotency-key", k).json(&body).send().await }
    };
    let wf2 = id(keyed("/workflows".into(), json!({"name": "v", "workflow_type": "custom"}), "s1").await.expect(201));
    let e3 = id(api.post(key, "/executions", &json!({"workflow_id": wf2})).await.expect(201));
    let c = json!({"execution_id": e3, "state": {}});
    keyed("/checkpoints".into(), c.clone(), "s2").await.expect(201);
    keyed("/checkpoints".into(), c, "s2").await.expect(201);
    keyed(format!("/executions/{e3}/fail"), fail.clone(), "s3").await.expect(200);
    let open = api.get(key, "/failures?status=open").await.body["items"][0]["id"].as_str().expect("open").to_owned();
    keyed(format!("/failures/{open}/resolve"), json!({}), "s4").await.expect(200);
    keyed("/billing/topup".into(), json!({"amount_cents": 100}), "s5").await.expect(200);
    for path in ["/executions", "/checkpoints", "/failures/fail_x/resolve", "/billing/topup"] {
        let failed = keyed(path.into(), json!({}), "f1").await;
        assert!(failed.status >= 400, "{path}: {}", failed.status);
    }
}

/// Every tool of the MCP server, on records of its own (of a workflow of their own: a
/// replayed execution runs on). Apart from [`drive_every_route`], whose future is large.
/// A start the balance cannot pay: the refusal is proven by checks of the allowances.
async fn start_without_credits(api: &Api, env: &api_tests::Env) {
    let broke = env.tenant_with_credits(0).await;
    let wf = api.post(&broke.key, "/workflows", &json!({"name": "w", "workflow_type": "custom"})).await;
    let start = json!({"workflow_id": id(wf.expect(201))});
    api.post(&broke.key, "/executions", &start).await.expect_problem(402, "insufficient_credits");
}

async fn drive_every_mcp_tool(api: &Api, key: &str) {
    let wf = id(api.post(key, "/workflows", &json!({"name": "mcp", "workflow_type": "custom"})).await.expect(201));
    let e = id(api.post(key, "/executions", &json!({"workflow_id": wf, "input": {"q": 2}})).await.expect(201));
    let first = id(api.post(key, "/checkpoints", &json!({"execution_id": e, "state": {"n": 1}})).await.expect(201));
    let second = id(api.post(key, "/checkpoints", &json!({"execution_id": e, "state": {"n": 2}})).await.expect(201));
    let mut failed = Vec::new();
    for _ in 0..3 {
        let f = id(api.post(key, "/executions", &json!({"workflow_id": wf})).await.expect(201));
        let fail = json!({"error_type": "TOOL_ERROR", "message": "m"});
        api.post(key, &format!("/executions/{f}/fail"), &fail).await.expect(200);
        failed.push(f);
    }
    let fresh = api.get(key, "/failures?status=open&limit=3").await;
    let fresh: Vec<&str> =
        fresh.body["items"].as_array().expect("items").iter().filter_map(|f| f["id"].as_str()).collect();
    let group = api.get(key, &format!("/failures/{}", fresh[2])).await.body["group_id"].clone();
    let ids = json!({"workflow_id": wf, "execution_id": e, "checkpoint_id": first, "failure_id": fresh[2], "group_id": group,
                     "from_checkpoint_id": first, "to_checkpoint_id": second});
    let tools = api.mcp(key, "tools/list", &json!({})).await;
    let listed = tools.expect(200).body["result"]["tools"].as_array().expect("tools").clone();
    let reads: Vec<&Value> = listed.iter().filter(|tool| tool["annotations"]["readOnlyHint"] == true).collect();
    for tool in &reads {
        let required = tool["inputSchema"]["required"].as_array().expect("required");
        let mut args: serde_json::Map<String, Value> = required
            .iter()
            .map(|name| (name.as_str().expect("name").to_owned(), ids[name.as_str().expect("name")].clone()))
            .collect();
        if tool["name"] == "get_checkpoint" {
            args.insert("include_state".to_owned(), json!(true));
        }
        let result = api.tool(key, tool["name"].as_str().expect("name"), &Value::Object(args)).await;
        assert_eq!(result["isError"], false, "{}: {result}", tool["name"]);
    }
    let writes = [
        ("replay_execution", json!({"execution_id": failed[0]})),
        ("rollback_execution", json!({"execution_id": e, "checkpoint_id": first})),
        ("cancel_execution", json!({"execution_id": e, "reason": "done"})),
        ("resolve_failure", json!({"failure_id": fresh[0]})),
        ("ignore_failure", json!({"failure_id": fresh[1]})),
    ];
    assert_eq!(writes.len(), listed.len() - reads.len(), "every tool that writes");
    for (tool, arguments) in writes {
        let result = api.tool(key, tool, &arguments).await;
        assert_eq!(result["isError"], false, "{tool}: {result}");
    }
}

#[test]
fn every_functions_policy_grants_every_dynamodb_call_its_code_makes() {
    // The scenario drives every route and tool in process, in one task: the futures of
    // the deepest routes in a debug build need more than a test thread's 2 MB of stack.
    let scenario = std::thread::Builder::new().stack_size(16 * 1024 * 1024).spawn(|| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(every_call_granted());
    });
    if let Err(panic) = scenario.expect("a thread").join() {
        std::panic::resume_unwind(panic);
    }
}

async fn every_call_granted() {
    let env = api_tests::env().await;
    let (transport, recorder) = Transport::in_process_recording(&env);
    let api = Api::new(transport);
    let t = env.tenant_with_credits(1_000).await;
    Box::pin(drive_every_route(&api, &t.key, &t.id)).await;
    Box::pin(drive_every_mcp_tool(&api, &t.key)).await;
    Box::pin(start_without_credits(&api, &env)).await;
    // Asking for the account's deletion revokes every key of the tenant: another one's.
    let leaving = env.tenant().await;
    let confirm = json!({"confirm": domain::erasure::CONFIRMATION});
    api.post(&leaving.key, "/account/deletion", &confirm).await.expect(202);

    let noted = recorder.lock().expect("recorder").clone();
    let functions: BTreeSet<&str> = noted.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(functions.len(), 8, "the scenario reached every function: {functions:?}");
    let mut missing = Vec::new();
    for function in functions {
        let calls = noted.iter().filter(|(f, _)| f == function).map(|(_, access)| access);
        missing.extend(api_tests::ungranted(function, calls).into_iter().map(|m| format!("{function}: {m}")));
    }
    assert!(missing.is_empty(), "template.yaml's policies lack what the code calls:\n{}", missing.join("\n"));
    let kinds: BTreeSet<&str> = noted.iter().map(|(_, a)| a.action.as_str()).collect();
    assert!(kinds.len() >= 7, "the scenario made every kind of call the code makes: {kinds:?}");
}

/// A request's first GetItem may be sent as one BatchGetItem that also reads its tenant's
/// rate-limit standing (`shared::gate`), whichever GetItem of the code comes first: every
/// function serving keyed routes may BatchGetItem every table it may GetItem, the
/// rate-limit standing's included, whether or not the scenario above reached that read.
#[test]
fn every_table_a_keyed_function_may_get_from_it_may_batch_get_from() {
    let template = infra::template::Template::embedded().expect("template");
    let keyed: BTreeSet<String> = template
        .routes()
        .expect("routes")
        .into_iter()
        .filter(|route| {
            let route = (route.method.as_str(), route.path.as_str());
            !billing::PUBLIC_ROUTES.contains(&route) && !dashboard::ROUTES.contains(&route)
        })
        .map(|route| route.function)
        .collect();
    assert_eq!(keyed.len(), 8, "{keyed:?}");
    for function in &keyed {
        let grants = template.grants(function).expect("grants");
        let may = |action: &str, table: &str| {
            grants.iter().any(|grant| grant.action == action && grant.table == table && !grant.index)
        };
        assert!(may("dynamodb:BatchGetItem", "rate-limits"), "{function}: the standing");
        for grant in grants.iter().filter(|grant| grant.action == "dynamodb:GetItem" && !grant.index) {
            assert!(may("dynamodb:BatchGetItem", &grant.table), "{function}: BatchGetItem on {}", grant.table);
        }
    }
}

/// The dispatcher's policy covers a stream batch's fan-out and attempts and a sweep's
/// claims and retries. On tables of its own, so that no relay takes the events first.
#[tokio::test]
async fn the_dispatchers_policy_grants_every_call_of_a_batch_and_a_sweep() {
    let shared_env = api_tests::env().await;
    let prefix = format!("iam{}-", std::process::id());
    infra::tables::create_missing(&shared_env.client, &prefix).await.expect("tables");
    let env = api_tests::Env { client: shared_env.client.clone(), tables: shared::dynamo::Tables::new(&prefix) };
    let api = Api::new(Transport::in_process(&env));
    let t = env.tenant().await;
    // Nothing listens there: every attempt fails, and is recorded, and retried.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let hook = json!({"url": format!("http://127.0.0.1:{port}/hook")});
    api.post(&t.key, "/webhook-endpoints", &hook).await.expect(201);
    let wf = id(api.post(&t.key, "/workflows", &json!({"name": "w", "workflow_type": "custom"})).await.expect(201));
    let e = id(api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await.expect(201));
    let fail = json!({"error_type": "AGENT_ERROR", "message": "m"});
    api.post(&t.key, &format!("/executions/{e}/fail"), &fail).await.expect(200);
    let outbox = api_tests::outbox(&env.client, &env.tables, &t.id).await;
    let records: Vec<Value> = outbox
        .iter()
        .enumerate()
        .map(|(i, item)| {
            let text = |name: &str| item[name].as_s().expect("text").clone();
            json!({"eventName": "INSERT", "dynamodb": {"SequenceNumber": format!("{i:020}"),
                   "NewImage": {"tenant_id": {"S": text("tenant_id")}, "events": {"S": text("events")}}}})
        })
        .collect();
    assert!(records.len() >= 2, "the grant's and the failure's: {}", records.len());
    let dispatcher = dispatcher::Dispatcher::new(env.client.clone(), env.tables.clone());
    let (answer, mut accesses) =
        Box::pin(shared::metering::recorded(dispatcher.handle(json!({"Records": records})))).await;
    assert_eq!(answer.expect("handled")["batchItemFailures"], json!([]));
    let later = chrono::Utc::now() + chrono::Duration::hours(1);
    let (swept, more) = Box::pin(shared::metering::recorded(dispatcher.sweep_at(later))).await;
    assert!(swept.expect("swept")["attempted"].as_u64() >= Some(2), "the failed attempts were retried");
    accesses.extend(more);
    let actions: BTreeSet<&str> = accesses.iter().map(|a| a.action.as_str()).collect();
    for needed in ["dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:GetItem"] {
        assert!(
            actions.iter().any(|a| a == &needed)
                || (needed == "dynamodb:GetItem" && actions.contains("dynamodb:BatchGetItem")),
            "{needed} was made: {actions:?}"
        );
    }
    let missing = api_tests::ungranted_in(&prefix, "dispatcher", &accesses);
    assert!(missing.is_empty(), "template.yaml's dispatcher policy lacks what the code calls:\n{}", missing.join("\n"));
}
