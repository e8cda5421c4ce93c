//! What Cairn's own code costs per request: p50 and p99 of `GET /billing/balance` and
//! `GET /executions/{id}` through the function's handler (its whole router: auth, rate
//! limit, idempotency layer, logging, metrics, JSON) against DynamoDB Local, divided by
//! p50 and p99 of (a) the raw DynamoDB calls the handler makes, one after the other (the
//! key lookup, the rate-limit window, the item) and (b) one raw GetItem of the item alone,
//! the physical limit of a read; run interleaved so the machine's noise hits all three.
//! (a) is the edge as it was first built; on a warm instance the handler now makes one
//! call before its answer, a BatchGetItem of the item and the tenant's rate-limit
//! standing (whose keys epoch proves the key live), and counts the request after the
//! answer (docs/rate-limits.md). (c) is that BatchGetItem made raw, the floor of that
//! design: the handler's distance to (c) is its own code, the distance from (c) to (b)
//! what reading the second item costs DynamoDB Local. Times are up to the answer; the
//! count after it runs before the next request, untimed, as on Lambda. Then the CPU this
//! process spends per request (its whole `/proc/self/stat` time over 1,000 requests),
//! through the handler and for (c) and the count: the difference is what Cairn's own
//! code costs a warm instance per request, whatever DynamoDB's speed.
//!
//! Then `POST /checkpoints` with a 1 KiB state, without and with an `Idempotency-Key`,
//! divided by the raw calls the write itself needs: one GetItem of the execution and one
//! TransactWriteItems of the same operations as the handler's, on copies of the items
//! it wrote (the execution, the checkpoint's entries by id and by execution, the
//! condition on the API key's item and, with a key, the key's record).
//!
//! Run with `make bench`. Goals: (a) <= 1.3 (issue 7), (b) <= 1.2 and the write <= 1.3
//! (issue 16); (c) has none, it shows where the time goes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use api_tests::bench::{Bench, after_answer, answer, call, call_with, setup};
use aws_sdk_dynamodb::Client;
use http::Method;
use serde_json::json;
use shared::TenantId;
use shared::dynamo::{Table, Tables, get_item, n, s};
use shared::time::SystemClock;

/// The DynamoDB calls every authenticated request makes before its handler: the key
/// lookup and the rate-limit window (`shared::rate_limit::count` is that one update).
async fn edge_calls(client: &Client, tables: &Tables, key_hash: &str, tenant: &TenantId) {
    get_item(client, tables.name(Table::ApiKeys), &[("key_hash", key_hash)]).await.expect("key");
    count(client, tables, tenant).await;
}

/// The warm handler's one call before its answer made raw: the item and the tenant's
/// rate-limit standing in one BatchGetItem.
async fn batch(client: &Client, tables: &Tables, tenant: &TenantId, item: Table, keys: &[(&str, &str)]) {
    let key = keys.iter().map(|(name, value)| ((*name).to_owned(), s(*value))).collect();
    let (own, standings) = (tables.name(item), tables.name(Table::RateLimits));
    let both = HashMap::from([
        (own.to_owned(), vec![key]),
        (standings.to_owned(), vec![shared::rate_limit::standing_key(tenant, 0)]),
    ]);
    let found = shared::dynamo::get_batch(client, both).await.expect("read");
    assert!(found.get(own).is_some_and(|items| items.len() == 1), "the item");
    assert!(found.get(standings).is_some_and(|items| items.len() == 1), "the standing");
}

/// The count a warm handler makes after its answer, made raw.
async fn count(client: &Client, tables: &Tables, tenant: &TenantId) {
    let now = chrono::Utc::now().timestamp();
    shared::rate_limit::count(
        client,
        tables,
        tenant,
        (1_000_000, shared::rate_limit::Slot::FIRST),
        now,
        Some(now / 60),
    )
    .await
    .expect("window");
}

/// CPU time this process has used, user and system, in milliseconds (`/proc/self/stat`,
/// in clock ticks of 10 ms, exact enough over a thousand requests).
fn process_cpu_ms() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // The fields after the command name, which is in parentheses: utime and stime are
    // the 12th and 13th of them.
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).expect("cpu ticks");
    (ticks(11) + ticks(12)) * 10.0
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let index = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[index].as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() {
    let bench = setup("overhead", 1_000_000).await;
    api_tests::bench::fill_allowances(&bench).await;
    let Bench { client, tables, tenant, key } = bench;
    let clock = Arc::new(SystemClock);
    let workflows = workflows::app(client.clone(), tables.clone(), clock.clone());
    let executions = executions::app(client.clone(), tables.clone(), clock.clone());
    let billing = billing::app(client.clone(), tables.clone(), clock);
    let body = json!({"name": "bench", "workflow_type": "custom"});
    let wf = call(&workflows, &key, Method::POST, "/api/v1/workflows", Some(&body)).await;
    let start = json!({"workflow_id": wf["id"], "input": {"question": "what is 6 x 7?"}});
    let execution = call(&executions, &key, Method::POST, "/api/v1/executions", Some(&start)).await;
    let execution_id = execution["id"].as_str().expect("id").to_owned();
    let key_hash = shared::auth::hash_key(&key);
    let t = tenant.as_str().to_owned();
    let tenant_id = shared::auth::trusted::tenant(&tenant);

    // `OVERHEAD_RUNS` shortens a run while working on the bench; `make bench` uses 400.
    let iterations = std::env::var("OVERHEAD_RUNS").ok().and_then(|v| v.parse().ok()).unwrap_or(400);
    println!(
        "handler vs raw DynamoDB calls against DynamoDB Local ({iterations} interleaved runs each, after warm-up)"
    );
    println!(
        "{:<26} {:>9} {:>9} {:>9} {:>9} {:>8} {:>8}",
        "request", "p50 ms", "raw p50", "p99 ms", "raw p99", "p50 x", "p99 x"
    );
    let execution_path = format!("/api/v1/executions/{execution_id}");
    let mut cpu = Vec::new();
    for (label, app, path, item) in [
        ("GET /billing/balance", &billing, "/api/v1/billing/balance".to_owned(), (Table::Accounts, None)),
        ("GET /executions/{id}", &executions, execution_path, (Table::Executions, Some(execution_id.as_str()))),
    ] {
        // An execution's item is in the tenant's shard of its id.
        let partition = item.1.map_or_else(|| t.clone(), |id| api_tests::execution_partition(&t, id));
        let mut keys = vec![("tenant_id", partition.as_str())];
        if let Some(id) = item.1 {
            keys.push(("id", id));
        }
        let raw = || async {
            edge_calls(&client, &tables, &key_hash, &tenant_id).await;
            get_item(&client, tables.name(item.0), &keys).await.expect("item").expect("exists");
        };
        let one = || async {
            get_item(&client, tables.name(item.0), &keys).await.expect("item").expect("exists");
        };
        let one_call = || Box::pin(batch(&client, &tables, &tenant_id, item.0, &keys));
        let mut times: [Vec<Duration>; 4] = Default::default();
        for i in 0..iterations + 40 {
            let started = Instant::now();
            let (_, after) = answer(app, &key, (Method::GET, &path), None, &[]).await;
            let handler = started.elapsed();
            after_answer(after).await;
            let started = Instant::now();
            raw().await;
            let direct = started.elapsed();
            let started = Instant::now();
            one_call().await;
            let floor = started.elapsed();
            let started = Instant::now();
            one().await;
            let single = started.elapsed();
            if i >= 40 {
                for (list, time) in times.iter_mut().zip([handler, direct, floor, single]) {
                    list.push(time);
                }
            }
        }
        for list in &mut times {
            list.sort_unstable();
        }
        let [handler_times, raw_times, floor_times, one_times] = &times;
        let (h50, h99) = (percentile(handler_times, 0.5), percentile(handler_times, 0.99));
        println!("{label:<26} {h50:>9.2} {:>9} {h99:>9.2}", "");
        for (name, baseline) in [
            ("  vs the three in a row", raw_times),
            ("  vs one batch of both", floor_times),
            ("  vs one raw GetItem", one_times),
        ] {
            let (b50, b99) = (percentile(baseline, 0.5), percentile(baseline, 0.99));
            println!("{name:<26} {:>9} {b50:>9.2} {:>9} {b99:>9.2} {:>8.2} {:>8.2}", "", "", h50 / b50, h99 / b99);
        }
        const CPU_RUNS: u32 = 1000;
        let before = process_cpu_ms();
        for _ in 0..CPU_RUNS {
            call(app, &key, Method::GET, &path, None).await;
        }
        let through_handler = process_cpu_ms() - before;
        let before = process_cpu_ms();
        for _ in 0..CPU_RUNS {
            one_call().await;
            count(&client, &tables, &tenant_id).await;
        }
        let raw_calls = process_cpu_ms() - before;
        cpu.push((label, through_handler / f64::from(CPU_RUNS), raw_calls / f64::from(CPU_RUNS)));
    }
    let checkpoints = checkpoints::app(client.clone(), tables.clone(), Arc::new(SystemClock));
    let state = json!({"notes": "x".repeat(1000)});
    let body = json!({"execution_id": execution_id, "name": "step", "state": state});
    let templates = WriteTemplates::made_by(&checkpoints, &key, &body, &client, &tables, &t).await;
    let raw_write = |i: usize, with_key: bool| {
        let (client, tables, templates) = (client.clone(), tables.clone(), &templates);
        async move { templates.write(&client, &tables, i, with_key).await }
    };
    for with_key in [false, true] {
        let (mut handler_times, mut raw_times) = (Vec::new(), Vec::new());
        for i in 0..iterations + 40 {
            let idempotency = format!("bench-{with_key}-{i}");
            let headers: &[(&str, &str)] = if with_key { &[("idempotency-key", &idempotency)] } else { &[] };
            let started = Instant::now();
            let (_, after) =
                answer(&checkpoints, &key, (Method::POST, "/api/v1/checkpoints"), Some(&body), headers).await;
            let handler = started.elapsed();
            after_answer(after).await;
            let started = Instant::now();
            raw_write(i + if with_key { 100_000 } else { 0 }, with_key).await;
            let direct = started.elapsed();
            if i >= 40 {
                handler_times.push(handler);
                raw_times.push(direct);
            }
        }
        handler_times.sort_unstable();
        raw_times.sort_unstable();
        let (h50, r50) = (percentile(&handler_times, 0.5), percentile(&raw_times, 0.5));
        let (h99, r99) = (percentile(&handler_times, 0.99), percentile(&raw_times, 0.99));
        let label = if with_key { "POST /checkpoints + key" } else { "POST /checkpoints" };
        println!("{label:<26} {h50:>9.2} {r50:>9.2} {h99:>9.2} {r99:>9.2} {:>8.2} {:>8.2}", h50 / r50, h99 / r99);
    }
    println!("(the three in a row: the key lookup, the rate-limit window and the item; goal <= 1.3)");
    println!(
        "(one batch of both: the warm handler's one BatchGetItem, of the item and the standing, made raw; no goal)"
    );
    println!("(one raw GetItem: the item alone, the physical limit of a read; goal <= 1.2)");
    println!("(POST /checkpoints: raw is the execution's GetItem and the write's own transaction; goal <= 1.3)");
    println!();
    println!("CPU of this process per request, 1,000 requests each (ms)");
    println!("{:<26} {:>9} {:>9} {:>9}", "request", "handler", "raw calls", "Cairn");
    for (label, handler, raw) in cpu {
        println!("{label:<26} {handler:>9.3} {raw:>9.3} {:>9.3}", handler - raw);
    }
    println!("(raw calls: the batch of both, then the count, made raw; Cairn: the difference, the handler's own code)");
    round_trips(
        &Apps {
            workflows,
            executions,
            checkpoints,
            billing,
            failures: failures::app(client, tables, Arc::new(SystemClock)),
        },
        &key,
        wf["id"].as_str().expect("id"),
        &execution_id,
    )
    .await;
}

/// The items one `POST /checkpoints` writes, as the handler wrote them (copied from the
/// table): the execution, the checkpoint's entry by id and by execution, and the
/// `Idempotency-Key`'s record. [`WriteTemplates::write`] makes the write's own calls
/// raw with copies under new keys: the execution's GetItem, then one transaction of the
/// same operations the handler's has, the condition on the API key's item included.
struct WriteTemplates {
    tenant: String,
    key_hash: String,
    execution: shared::dynamo::Item,
    /// The checkpoint's one entry (kept with its execution).
    entry: shared::dynamo::Item,
    idempotency: shared::dynamo::Item,
}

impl WriteTemplates {
    async fn made_by(
        checkpoints: &axum::Router,
        key: &str,
        body: &serde_json::Value,
        client: &Client,
        tables: &Tables,
        tenant: &str,
    ) -> Self {
        let headers = [("idempotency-key", "bench-template")];
        let made = call_with(checkpoints, key, (Method::POST, "/api/v1/checkpoints"), Some(body), &headers).await;
        let id = made["id"].as_str().expect("id");
        let execution_id = made["execution_id"].as_str().expect("execution id");
        let (partition, entry) = api_tests::checkpoint_entry(tenant, id);
        let read = |table: Table, partition: String, name: &'static str, value: String| async move {
            get_item(client, tables.name(table), &[("tenant_id", partition.as_str()), (name, value.as_str())])
                .await
                .expect("template")
                .expect("the handler's item")
        };
        let mut execution = read(
            Table::Executions,
            api_tests::execution_partition(tenant, execution_id),
            "id",
            execution_id.to_owned(),
        )
        .await;
        // The raw write's own execution, in the tenant's own partition (as an execution
        // from before the shards: one partition, like any one execution's).
        execution.insert("id".to_owned(), s("exec_raw_bench"));
        execution.insert("tenant_id".to_owned(), s(tenant));
        let keys = client
            .query()
            .table_name(tables.name(Table::Idempotency))
            .key_condition_expression("tenant_id = :t")
            .expression_attribute_values(":t", s(tenant))
            .limit(1)
            .send()
            .await
            .expect("idempotency records");
        Self {
            tenant: tenant.to_owned(),
            key_hash: shared::auth::hash_key(key),
            execution,
            entry: read(Table::Checkpoints, partition, "entry", entry).await,
            idempotency: keys.items().first().cloned().expect("the handler's idempotency record"),
        }
    }

    async fn write(&self, client: &Client, tables: &Tables, i: usize, with_key: bool) {
        use aws_sdk_dynamodb::types::{ConditionCheck, Put, TransactWriteItem};
        let execution =
            get_item(client, tables.name(Table::Executions), &[("tenant_id", &self.tenant), ("id", "exec_raw_bench")])
                .await
                .expect("execution");
        let version = execution
            .as_ref()
            .and_then(|item| item.get("version"))
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let mut next = self.execution.clone();
        next.insert("version".to_owned(), n(version.map_or(1, |v| v + 1)));
        let replace = Put::builder().table_name(tables.name(Table::Executions)).set_item(Some(next));
        let replace = match version {
            Some(v) => {
                replace.condition_expression("version = :expected").expression_attribute_values(":expected", n(v))
            }
            None => replace.condition_expression("attribute_not_exists(id)"),
        };
        let copy = |table: Table, template: &shared::dynamo::Item, name: &str, value: String| {
            let mut item = template.clone();
            item.insert(name.to_owned(), s(value));
            let put = Put::builder()
                .table_name(tables.name(table))
                .set_item(Some(item))
                .condition_expression(format!("attribute_not_exists({name})"))
                .build()
                .expect("put");
            TransactWriteItem::builder().put(put).build()
        };
        let key_live = ConditionCheck::builder()
            .table_name(tables.name(Table::ApiKeys))
            .key("key_hash", s(&self.key_hash))
            .condition_expression("tenant_id = :tenant AND attribute_not_exists(revoked_at)")
            .expression_attribute_values(":tenant", s(&self.tenant))
            .build()
            .expect("check");
        let mut operations = vec![
            TransactWriteItem::builder().put(replace.build().expect("put")).build(),
            copy(Table::Checkpoints, &self.entry, "entry", format!("{i:010}#cp_raw{i:026}")),
            TransactWriteItem::builder().condition_check(key_live).build(),
        ];
        if with_key {
            operations.push(copy(Table::Idempotency, &self.idempotency, "idempotency_key", format!("raw-{i}")));
        }
        client.transact_write_items().set_transact_items(Some(operations)).send().await.expect("transaction");
    }
}

struct Apps {
    workflows: axum::Router,
    executions: axum::Router,
    checkpoints: axum::Router,
    billing: axum::Router,
    failures: axum::Router,
}

/// DynamoDB round trips per route on a warm instance (one that has seen the key), from
/// when each call was sent to when its answer was read (`shared::metering::traced`):
/// the critical path (calls side by side count once) and all calls. Each route runs
/// seven times; the table shows the fewest and the most.
async fn round_trips(apps: &Apps, key: &str, workflow_id: &str, execution_id: &str) {
    let traced = |app: &axum::Router,
                  method: Method,
                  path: String,
                  body: Option<serde_json::Value>,
                  headers: Vec<(&'static str, String)>| {
        let (app, key) = (app.clone(), key.to_owned());
        async move {
            let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            let ((answer, after), before) =
                shared::metering::traced(answer(&app, &key, (method, &path), body.as_ref(), &headers)).await;
            let ((), after) = shared::metering::traced(after_answer(after)).await;
            (answer, before, after)
        }
    };
    let (answer, _, _) = traced(
        &apps.checkpoints,
        Method::POST,
        "/api/v1/checkpoints".to_owned(),
        Some(json!({"execution_id": execution_id, "name": "rt", "state": {"n": 1}})),
        vec![],
    )
    .await;
    let checkpoint_id = answer["id"].as_str().expect("checkpoint id").to_owned();
    let big = json!({"execution_id": execution_id, "name": "big", "state": {"blob": api_tests::noise(7, 4 * 1024 * 1024 - 64)}});
    let (answer, _, _) =
        traced(&apps.checkpoints, Method::POST, "/api/v1/checkpoints".to_owned(), Some(big.clone()), vec![]).await;
    let big_id = answer["id"].as_str().expect("checkpoint id").to_owned();
    let start = json!({"workflow_id": workflow_id, "input": {"q": 1}});
    let (failing, _, _) =
        traced(&apps.executions, Method::POST, "/api/v1/executions".to_owned(), Some(start.clone()), vec![]).await;
    let failing = failing["id"].as_str().expect("id").to_owned();
    let fail = json!({"error_type": "TOOL_ERROR", "message": "bench"});
    traced(&apps.executions, Method::POST, format!("/api/v1/executions/{failing}/fail"), Some(fail), vec![]).await;
    let (failures, _, _) =
        traced(&apps.failures, Method::GET, format!("/api/v1/failures?execution_id={failing}"), None, vec![]).await;
    let failure_id = failures["items"][0]["id"].as_str().expect("failure id").to_owned();

    println!();
    println!("DynamoDB round trips per route on a warm instance (7 runs: fewest-most)");
    println!("{:<44} {:>9} {:>9} {:>9}  goal", "request", "critical", "in all", "after");
    let range = |values: &[usize]| {
        let (low, high) = (values.iter().min().copied().unwrap_or(0), values.iter().max().copied().unwrap_or(0));
        if low == high { low.to_string() } else { format!("{low}-{high}") }
    };
    type Case<'a> = (&'a str, &'a axum::Router, Method, String, Option<serde_json::Value>, bool, &'a str);
    let cases: Vec<Case<'_>> = vec![
        (
            "GET /executions/{id}",
            &apps.executions,
            Method::GET,
            format!("/api/v1/executions/{execution_id}"),
            None,
            false,
            "1",
        ),
        (
            "GET /workflows/{id}",
            &apps.workflows,
            Method::GET,
            format!("/api/v1/workflows/{workflow_id}"),
            None,
            false,
            "1",
        ),
        (
            "GET /checkpoints/{id}",
            &apps.checkpoints,
            Method::GET,
            format!("/api/v1/checkpoints/{checkpoint_id}"),
            None,
            false,
            "1",
        ),
        ("GET /failures/{id}", &apps.failures, Method::GET, format!("/api/v1/failures/{failure_id}"), None, false, "1"),
        ("GET /billing/balance", &apps.billing, Method::GET, "/api/v1/billing/balance".to_owned(), None, false, "1"),
        (
            "GET /checkpoints/{id}?include_state (4 MiB)",
            &apps.checkpoints,
            Method::GET,
            format!("/api/v1/checkpoints/{big_id}?include_state=true"),
            None,
            false,
            "<= 3",
        ),
        (
            "POST /checkpoints (1 KiB)",
            &apps.checkpoints,
            Method::POST,
            "/api/v1/checkpoints".to_owned(),
            Some(json!({"execution_id": execution_id, "name": "rt", "state": {"notes": "x".repeat(1000)}})),
            false,
            "2 (own)",
        ),
        (
            "POST /checkpoints (1 KiB) + Idempotency-Key",
            &apps.checkpoints,
            Method::POST,
            "/api/v1/checkpoints".to_owned(),
            Some(json!({"execution_id": execution_id, "name": "rt", "state": {"notes": "x".repeat(1000)}})),
            true,
            "2 (own)",
        ),
        (
            "POST /checkpoints (4 MiB)",
            &apps.checkpoints,
            Method::POST,
            "/api/v1/checkpoints".to_owned(),
            Some(big),
            false,
            "<= 3",
        ),
        (
            "POST /workflows",
            &apps.workflows,
            Method::POST,
            "/api/v1/workflows".to_owned(),
            Some(json!({"name": "rt", "workflow_type": "custom"})),
            false,
            "own",
        ),
        (
            "POST /executions",
            &apps.executions,
            Method::POST,
            "/api/v1/executions".to_owned(),
            Some(start.clone()),
            false,
            "own",
        ),
        (
            "POST /executions + Idempotency-Key",
            &apps.executions,
            Method::POST,
            "/api/v1/executions".to_owned(),
            Some(start),
            true,
            "own",
        ),
    ];
    for (label, app, method, path, body, with_key, goal) in cases {
        let (mut critical, mut total, mut later) = (Vec::new(), Vec::new(), Vec::new());
        for run in 0..7 {
            let headers =
                if with_key { vec![("idempotency-key", format!("rt-{label}-{run}-{}", uuid_like()))] } else { vec![] };
            let (_, trips, after) = traced(app, method.clone(), path.clone(), body.clone(), headers).await;
            critical.push(trips.critical);
            total.push(trips.total);
            later.push(after.total);
        }
        println!("{label:<44} {:>9} {:>9} {:>9}  {goal}", range(&critical), range(&total), range(&later));
    }
    // A tenant below the low-balance threshold: its allowance is refilled for every start.
    let low = setup("overhead, low balance", 100).await;
    let body = json!({"name": "low", "workflow_type": "custom"});
    let wf = call(&apps.workflows, &low.key, Method::POST, "/api/v1/workflows", Some(&body)).await;
    let start = json!({"workflow_id": wf["id"]});
    call(&apps.executions, &low.key, Method::POST, "/api/v1/executions", Some(&start)).await;
    let (mut critical, mut total, mut later) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..7 {
        let request = api_tests::bench::answer(
            &apps.executions,
            &low.key,
            (Method::POST, "/api/v1/executions"),
            Some(&start),
            &[],
        );
        let ((_, after), trips) = shared::metering::traced(request).await;
        let ((), after) = shared::metering::traced(after_answer(after)).await;
        critical.push(trips.critical);
        total.push(trips.total);
        later.push(after.total);
    }
    let label = "POST /executions, balance below threshold";
    println!("{label:<44} {:>9} {:>9} {:>9}  own", range(&critical), range(&total), range(&later));
    println!(
        "(critical: the longest chain of calls each sent after the previous answer; in all: every call before the"
    );
    println!(" answer, the key's read and the look at the rate-limit standing included; after: the count after it)");
}

fn uuid_like() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}
