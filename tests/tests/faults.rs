//! Dependency faults: DynamoDB dies in the middle of a run of writes.
//!
//! This test starts a DynamoDB Local of its own in persistent mode (`-dbPath`), runs
//! concurrent writers (execution starts, each charging a credit, and checkpoints), kills
//! DynamoDB with SIGKILL while they run, restarts it on the same files, and then checks
//! what users rely on: while DynamoDB was gone every answer was 503 `unavailable` with
//! `Retry-After` (never a 500, never a hang), and afterwards nothing is half-written:
//! every execution has its usage transaction, the balance is the ledger's, and every
//! counter equals a recount. In process only (`make test` exports `CAIRN_DYNAMODB_DIR`).

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use api_tests::{Api, Env, Reply, Transport};
use serde_json::{Value, json};
use shared::dynamo::Tables;

/// A DynamoDB Local process on `port`, its data in `data`; killed when dropped.
struct Dynamo {
    child: Child,
}

impl Dynamo {
    fn start(port: u16, data: &Path) -> Self {
        let dir = PathBuf::from(std::env::var("CAIRN_DYNAMODB_DIR").expect("CAIRN_DYNAMODB_DIR is set by make test"));
        let dynamo = Self {
            child: Command::new("java")
                .arg(format!("-Djava.library.path={}", dir.join("DynamoDBLocal_lib").display()))
                .arg("-jar")
                .arg(dir.join("DynamoDBLocal.jar"))
                .args(["-sharedDb", "-disableTelemetry", "-port", &port.to_string(), "-dbPath"])
                .arg(data)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("java starts DynamoDB Local"),
        };
        for _ in 0..600 {
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return dynamo;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("DynamoDB Local did not listen on {port} within 60 s");
    }

    /// SIGKILL: no chance to finish anything.
    fn kill(mut self) {
        self.child.kill().expect("kill");
        self.child.wait().expect("reaped");
    }
}

impl Drop for Dynamo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port()
}

/// Starts executions (and a checkpoint on each started one) until `stop`; returns every
/// answer and the ids of the executions whose start was answered 201.
async fn writer(api: Api, key: String, workflow: Value, stop: Arc<AtomicBool>) -> (Vec<Reply>, Vec<String>) {
    let (mut replies, mut started) = (Vec::new(), Vec::new());
    while !stop.load(Ordering::SeqCst) {
        let start = api.post(&key, "/executions", &json!({"workflow_id": workflow})).await;
        if start.status == 201 {
            let id = start.body["id"].as_str().expect("id").to_owned();
            let body = json!({"execution_id": id, "name": "step", "state": {"n": started.len()}});
            replies.push(api.post(&key, "/checkpoints", &body).await);
            started.push(id);
        } else {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        replies.push(start);
    }
    (replies, started)
}

async fn every_page(api: &Api, key: &str, path: &str) -> (Vec<Value>, i64) {
    let (mut items, mut total) = (Vec::new(), -1);
    for page in 1.. {
        let sep = if path.contains('?') { '&' } else { '?' };
        let reply = api.get(key, &format!("{path}{sep}page={page}&page_size=100")).await;
        reply.expect(200);
        total = reply.body["total"].as_i64().expect("total");
        let batch = reply.body["items"].as_array().expect("items").clone();
        let done = batch.len() < 100;
        items.extend(batch);
        if done {
            break;
        }
    }
    (items, total)
}

#[tokio::test]
async fn killing_dynamodb_mid_writes_gives_503s_and_leaves_nothing_half_written() {
    let data = std::env::temp_dir().join(format!("cairn-fault-{}-{}", std::process::id(), free_port()));
    std::fs::create_dir_all(&data).expect("data dir");
    let port = free_port();
    let dynamo = Dynamo::start(port, &data);
    let config = aws_sdk_dynamodb::config::Builder::from(&shared::dynamo::sdk_config().await)
        .endpoint_url(format!("http://127.0.0.1:{port}"))
        .build();
    let client = aws_sdk_dynamodb::Client::from_conf(config);
    infra::tables::create_missing(&client, "fault-").await.expect("tables");
    let tables = Tables::new("fault-");
    let now = shared::time::format(chrono::Utc::now());
    let tenant = infra::admin::create_tenant(&client, &tables, "faults", &now).await.expect("tenant");
    let (_, key) = infra::admin::create_key(&client, &tables, tenant.as_str(), &now).await.expect("key");
    infra::admin::grant_credits(&client, &tables, tenant.as_str(), 10_000).await.expect("credits");
    let api = Api::new(Transport::in_process(&Env { client, tables }));
    let workflow = api.post(&key, "/workflows", &json!({"name": "w", "workflow_type": "custom"})).await;
    let workflow = workflow.expect(201).body["id"].clone();

    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> =
        (0..4).map(|_| tokio::spawn(writer(api.clone(), key.clone(), workflow.clone(), stop.clone()))).collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    dynamo.kill();
    tokio::time::sleep(Duration::from_millis(3000)).await;
    // While DynamoDB is gone: 503 with Retry-After, reads too.
    let down = api.get(&key, "/billing/balance").await;
    down.expect_problem(503, "unavailable");
    assert!(down.header("retry-after").is_some_and(|s| s.parse::<u64>().is_ok_and(|s| s >= 1)));
    let _dynamo = Dynamo::start(port, &data);
    let mut healthy = false;
    for _ in 0..100 {
        if api.get(&key, "/billing/balance").await.status == 200 {
            healthy = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(healthy, "the service recovers by itself once DynamoDB is back");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::SeqCst);

    let (mut replies, mut started) = (Vec::new(), Vec::new());
    for w in writers {
        let (r, s) = w.await.expect("writer");
        replies.extend(r);
        started.extend(s);
    }
    let count = |status: u16| replies.iter().filter(|r| r.status == status).count();
    let unavailable = count(503);
    assert!(
        count(201) > 0 && unavailable > 0,
        "writes succeeded and failed: {} x 201, {unavailable} x 503",
        count(201)
    );
    for reply in &replies {
        assert!(reply.status == 201 || reply.status == 503, "only 201 or 503: {} {}", reply.status, reply.body);
        if reply.status == 503 {
            reply.expect_problem(503, "unavailable");
            assert!(reply.header("retry-after").is_some(), "503 carries Retry-After");
        }
    }

    // Nothing half-written: executions, usage charges, balance and counters agree.
    let (executions, total) = every_page(&api, &key, "/executions").await;
    assert_eq!(total, executions.len() as i64, "the executions counter equals a recount");
    let ids: std::collections::HashSet<&str> = executions.iter().filter_map(|e| e["id"].as_str()).collect();
    assert!(started.iter().all(|id| ids.contains(id.as_str())), "every 201 start exists");
    let (usage, usage_total) = every_page(&api, &key, "/billing/transactions?type=usage").await;
    assert_eq!(usage_total, usage.len() as i64, "the usage counter equals a recount");
    assert_eq!(usage.len(), executions.len(), "every execution has its usage transaction, and only they do");
    let (ledger, ledger_total) = every_page(&api, &key, "/billing/transactions").await;
    assert_eq!(ledger_total, ledger.len() as i64);
    for pair in ledger.windows(2) {
        assert_eq!(pair[0]["credits_before"], pair[1]["credits_after"], "the ledger chains");
    }
    let balance = api.get(&key, "/billing/balance").await.body["credits_balance"].as_i64().expect("balance");
    assert_eq!(balance, 10_000 - executions.len() as i64);
    assert_eq!(ledger[0]["credits_after"], balance);
    let mut checkpoints = 0;
    for execution in &executions {
        let id = execution["id"].as_str().expect("id");
        let reply = api.get(&key, &format!("/checkpoints?execution_id={id}&limit=100")).await;
        let items = reply.expect(200).body["items"].as_array().expect("items").clone();
        let total = reply.body["total"].as_i64().expect("total");
        assert_eq!(total, items.len() as i64, "the checkpoint counter equals a recount");
        assert_eq!(execution["checkpoint_count"], total, "the execution's count equals its checkpoints");
        checkpoints += items.len();
    }
    println!(
        "{} executions, {checkpoints} checkpoints, {unavailable} answers 503 while DynamoDB was down",
        executions.len()
    );
    drop(_dynamo);
    let _ = std::fs::remove_dir_all(&data);
}
