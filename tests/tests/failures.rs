//! The failures area as a client sees it, in process and through `cargo lambda watch`.

use std::sync::Arc;

use api_tests::{Api, Env, Transport, both_paths};
use chrono::TimeDelta;
use serde_json::{Value, json};
use shared::time::ManualClock;

both_paths!(
    a_failed_execution_is_listed_with_details_and_a_pending_retry,
    resolve_is_idempotent_and_cancels_pending_commands,
    ignore_is_allowed_only_from_open,
    list_filters_pages_and_totals,
    stats_after_each_transition_equal_a_recount_from_the_list,
    a_new_tenant_has_all_zero_stats_and_an_empty_list,
    another_tenants_failure_is_404_on_every_route_and_unchanged,
    list_refuses_invalid_queries,
    replay_completes_the_pending_retry_command,
);

async fn failed_execution(api: &Api, key: &str, message: &str) -> (String, Value) {
    let wf = api.post(key, "/workflows", &json!({"name": "wf", "workflow_type": "crewai"})).await;
    let wf = wf.expect(201).body["id"].as_str().expect("id").to_owned();
    let e = api.post(key, "/executions", &json!({"workflow_id": wf})).await;
    let e = e.expect(201).body["id"].as_str().expect("id").to_owned();
    let body = json!({
        "error_type": "AGENT_ERROR",
        "message": message,
        "details": {"agent_name": "writer", "task_id": "t-7", "traceback": "Traceback (most recent call last): ...", "model": "gpt"}
    });
    api.post(key, &format!("/executions/{e}/fail"), &body).await.expect(200);
    let list = api.get(key, "/failures?limit=200").await;
    let failure = list.body["items"]
        .as_array()
        .expect("items")
        .iter()
        .find(|f| f["execution_id"] == e.as_str())
        .cloned()
        .expect("the failure is listed");
    (e, failure)
}

fn id(v: &Value) -> String {
    v["id"].as_str().expect("id").to_owned()
}

async fn a_failed_execution_is_listed_with_details_and_a_pending_retry(api: Api, env: Env) {
    let t = env.tenant().await;
    let (e, item) = failed_execution(&api, &t.key, "the writer crashed").await;
    let f = id(&item);
    assert!(f.starts_with("fail_"));
    assert_eq!(item["execution_id"], e.as_str());
    assert!(item["workflow_id"].as_str().is_some_and(|w| w.starts_with("wf_")));
    assert_eq!(
        (item["error_type"].clone(), item["message"].clone()),
        (json!("AGENT_ERROR"), json!("the writer crashed"))
    );
    assert_eq!((item["status"].clone(), item["resolved_at"].clone()), (json!("open"), Value::Null));
    assert_eq!(item["resolved_by"], Value::Null);
    assert_eq!(item.as_object().map(serde_json::Map::len), Some(11), "exactly the list item's fields: {item}");
    assert!(item["group_id"].as_str().is_some_and(|g| g.starts_with("fgrp_")));
    assert_eq!(item["fingerprint"], "the writer crashed");
    let detail = api.get(&t.key, &format!("/failures/{f}")).await;
    detail.expect(200);
    let d = &detail.body;
    for field in [
        "id",
        "execution_id",
        "workflow_id",
        "error_type",
        "message",
        "status",
        "created_at",
        "resolved_at",
        "resolved_by",
        "group_id",
        "fingerprint",
    ] {
        assert_eq!(d[field], item[field], "{field}");
    }
    assert_eq!(d["details"]["agent_name"], "writer");
    assert_eq!(d["details"]["task_id"], "t-7");
    assert_eq!(d["details"]["model"], "gpt", "other keys are kept");
    let commands = d["recovery_commands"].as_array().expect("commands");
    assert_eq!(commands.len(), 1);
    assert!(commands[0]["id"].as_str().is_some_and(|c| c.starts_with("cmd_")));
    assert_eq!((commands[0]["type"].clone(), commands[0]["status"].clone()), (json!("retry"), json!("pending")));
}

async fn resolve_is_idempotent_and_cancels_pending_commands(api: Api, env: Env) {
    let t = env.tenant().await;
    let (_, item) = failed_execution(&api, &t.key, "m").await;
    let f = id(&item);
    let resolved = api.post(&t.key, &format!("/failures/{f}/resolve"), &json!({})).await;
    resolved.expect(200);
    assert_eq!(resolved.body["id"], f.as_str());
    assert_eq!(resolved.body["status"], "resolved");
    assert_eq!(resolved.body["message"], "Failure resolved");
    let at = resolved.body["resolved_at"].as_str().expect("resolved_at").to_owned();
    let again = api.request(http::Method::POST, &format!("/failures/{f}/resolve")).key(&t.key).send().await;
    assert_eq!(again.expect(200).body["resolved_at"], at.as_str(), "already resolved: the original resolved_at");
    let detail = api.get(&t.key, &format!("/failures/{f}")).await;
    assert_eq!(detail.body["status"], "resolved");
    assert_eq!(detail.body["resolved_at"], at.as_str());
    assert_eq!(detail.body["resolved_by"], "request");
    assert_eq!(detail.body["recovery_commands"][0]["status"], "cancelled");
    let refused = api.post(&t.key, &format!("/failures/{f}/ignore"), &json!({})).await;
    refused.expect_problem(409, "invalid_state");
    assert!(refused.body["detail"].as_str().is_some_and(|d| d.contains("is resolved")));
}

async fn ignore_is_allowed_only_from_open(api: Api, env: Env) {
    let t = env.tenant().await;
    let (_, item) = failed_execution(&api, &t.key, "m").await;
    let f = id(&item);
    let ignored = api.post(&t.key, &format!("/failures/{f}/ignore"), &json!({})).await;
    ignored.expect(200);
    assert_eq!(ignored.body, json!({"id": f, "status": "ignored", "message": "Failure ignored"}));
    api.post(&t.key, &format!("/failures/{f}/ignore"), &json!({})).await.expect_problem(409, "invalid_state");
    let detail = api.get(&t.key, &format!("/failures/{f}")).await;
    assert_eq!((detail.body["status"].clone(), detail.body["resolved_at"].clone()), (json!("ignored"), Value::Null));
    let resolved = api.post(&t.key, &format!("/failures/{f}/resolve"), &json!({})).await;
    assert_eq!(resolved.expect(200).body["status"], "resolved", "an ignored failure can still be resolved");
}

async fn list_filters_pages_and_totals(api: Api, env: Env) {
    let t = env.tenant().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        ids.push(id(&failed_execution(&api, &t.key, &format!("failure {i}")).await.1));
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    api.post(&t.key, &format!("/failures/{}/ignore", ids[0]), &json!({})).await.expect(200);
    api.post(&t.key, &format!("/failures/{}/resolve", ids[1]), &json!({})).await.expect(200);
    let all = api.get(&t.key, "/failures").await;
    all.expect(200);
    assert_eq!(
        (all.body["total"].clone(), all.body["limit"].clone(), all.body["offset"].clone()),
        (json!(5), json!(50), json!(0))
    );
    let listed: Vec<String> = all.body["items"].as_array().expect("items").iter().map(id).collect();
    let mut newest_first = ids.clone();
    newest_first.reverse();
    assert_eq!(listed, newest_first);
    for (status, expected) in [("open", 3), ("ignored", 1), ("resolved", 1)] {
        let reply = api.get(&t.key, &format!("/failures?status={status}")).await;
        assert_eq!(reply.body["total"], expected, "{status}");
        assert!(reply.body["items"].as_array().expect("items").iter().all(|f| f["status"] == status));
    }
    let mut paged = Vec::new();
    for offset in [0, 2, 4] {
        let reply = api.get(&t.key, &format!("/failures?limit=2&offset={offset}")).await;
        paged.extend(reply.body["items"].as_array().expect("items").iter().map(id));
    }
    assert_eq!(paged, newest_first, "windows are disjoint and complete");
    let detail = api.get(&t.key, &format!("/failures/{}", ids[2])).await;
    let after = detail.body["created_at"].as_str().expect("time").replace(':', "%3A");
    let newer = api.get(&t.key, &format!("/failures?created_after={after}")).await;
    assert_eq!(newer.body["total"], 2);
    let older = api.get(&t.key, &format!("/failures?created_before={after}&status=open")).await;
    assert_eq!(older.body["total"], 0, "the older open ones were ignored and resolved");
    let inverted =
        api.get(&t.key, &format!("/failures?created_after={after}&created_before=2020-01-01T00:00:00Z")).await;
    inverted.expect(200);
    assert_eq!((inverted.body["total"].clone(), inverted.body["items"].clone()), (json!(0), json!([])));
}

async fn stats_after_each_transition_equal_a_recount_from_the_list(api: Api, env: Env) {
    let t = env.tenant().await;
    let check = |api: Api, key: String| async move {
        let stats = api.get(&key, "/failures/stats").await;
        stats.expect(200);
        let list = api.get(&key, "/failures?limit=200").await;
        let items = list.body["items"].as_array().expect("items").clone();
        let count = |status: &str| items.iter().filter(|f| f["status"] == status).count();
        assert_eq!(stats.body["total_failures"], items.len());
        assert_eq!(stats.body["open_failures"], count("open"));
        assert_eq!(stats.body["resolved_failures"], count("resolved"));
        assert_eq!(stats.body["ignored_failures"], count("ignored"));
        let rate = stats.body["failure_rate_last_30_days"].as_f64().expect("rate");
        assert!((0.0..=1.0).contains(&rate), "{rate}");
        stats.body
    };
    check(api.clone(), t.key.clone()).await;
    let (e1, f1) = failed_execution(&api, &t.key, "one").await;
    let stats = check(api.clone(), t.key.clone()).await;
    assert_eq!(stats["failure_rate_last_30_days"], 1.0, "one attempt, one failure");
    let (_, f2) = failed_execution(&api, &t.key, "two").await;
    check(api.clone(), t.key.clone()).await;
    api.post(&t.key, &format!("/executions/{e1}/replay"), &json!({})).await.expect(200);
    let stats = check(api.clone(), t.key.clone()).await;
    assert_eq!(stats["failure_rate_last_30_days"], 2.0 / 3.0, "a replay is an attempt");
    api.post(&t.key, &format!("/failures/{}/ignore", id(&f2)), &json!({})).await.expect(200);
    check(api.clone(), t.key.clone()).await;
    api.post(&t.key, &format!("/executions/{e1}/complete"), &json!({})).await.expect(200);
    let stats = check(api.clone(), t.key.clone()).await;
    assert_eq!(stats["resolved_failures"], 1, "completing resolved {}", id(&f1));
    api.post(&t.key, &format!("/failures/{}/resolve", id(&f2)), &json!({})).await.expect(200);
    let stats = check(api.clone(), t.key.clone()).await;
    assert_eq!((stats["open_failures"].clone(), stats["resolved_failures"].clone()), (json!(0), json!(2)));
}

async fn a_new_tenant_has_all_zero_stats_and_an_empty_list(api: Api, env: Env) {
    let t = env.tenant().await;
    let stats = api.get(&t.key, "/failures/stats").await;
    assert_eq!(
        stats.expect(200).body,
        json!({"total_failures": 0, "open_failures": 0, "resolved_failures": 0, "ignored_failures": 0, "failure_rate_last_30_days": 0.0})
    );
    let list = api.get(&t.key, "/failures").await;
    assert_eq!(list.expect(200).body, json!({"items": [], "total": 0, "limit": 50, "offset": 0}));
}

async fn another_tenants_failure_is_404_on_every_route_and_unchanged(api: Api, env: Env) {
    let owner = env.tenant().await;
    let other = env.tenant().await;
    let (_, item) = failed_execution(&api, &owner.key, "private").await;
    let f = id(&item);
    for path in [
        format!("/failures/{f}"),
        "/failures/fail_0193a6f21c2b7d3e8f000123456789ab".to_owned(),
        "/failures/fail_x".to_owned(),
    ] {
        let reply = api.get(&other.key, &path).await;
        reply.expect_problem(404, "not_found");
        assert!(!String::from_utf8_lossy(&reply.raw).contains("private"));
    }
    api.post(&other.key, &format!("/failures/{f}/resolve"), &json!({})).await.expect_problem(404, "not_found");
    api.post(&other.key, &format!("/failures/{f}/ignore"), &json!({})).await.expect_problem(404, "not_found");
    assert_eq!(api.get(&other.key, "/failures").await.body["total"], 0);
    assert_eq!(api.get(&other.key, "/failures/stats").await.body["total_failures"], 0);
    let detail = api.get(&owner.key, &format!("/failures/{f}")).await;
    assert_eq!(detail.body["status"], "open", "nothing changed");
}

async fn list_refuses_invalid_queries(api: Api, env: Env) {
    let t = env.tenant().await;
    for (query, field) in [
        ("?status=closed", "status"),
        ("?limit=0", "limit"),
        ("?limit=201", "limit"),
        ("?offset=x", "offset"),
        ("?created_after=soon", "created_after"),
    ] {
        let reply = api.get(&t.key, &format!("/failures{query}")).await;
        reply.expect_problem(422, "validation_failed");
        assert_eq!(reply.error_fields(), [field], "{query}");
    }
}

async fn replay_completes_the_pending_retry_command(api: Api, env: Env) {
    let t = env.tenant().await;
    let (e, item) = failed_execution(&api, &t.key, "m").await;
    api.post(&t.key, &format!("/executions/{e}/replay"), &json!({})).await.expect(200);
    let detail = api.get(&t.key, &format!("/failures/{}", id(&item))).await;
    assert_eq!(detail.body["recovery_commands"][0]["status"], "completed");
    assert_eq!(detail.body["status"], "open", "a replay does not resolve the failure by itself");
}

/// In process only: the clock is moved to place attempts and failures 31, 30 and 29
/// days back. The window is today (UTC) and the 29 days before it.
#[tokio::test]
async fn the_failure_rate_counts_exactly_the_last_30_days() {
    let env = api_tests::env().await;
    let now = shared::time::parse("2026-11-21T12:00:00Z").expect("time");
    let clock = ManualClock::new(now);
    let api = Api::new(Transport::in_process_with_clock(&env, Arc::new(clock.clone())));
    let t = env.tenant().await;
    for days_back in [31, 30, 29] {
        clock.advance(TimeDelta::days(-days_back));
        failed_execution(&api, &t.key, &format!("{days_back} days back")).await;
        clock.advance(TimeDelta::days(days_back));
    }
    let stats = api.get(&t.key, "/failures/stats").await;
    assert_eq!(stats.expect(200).body["total_failures"], 3);
    assert_eq!(stats.body["failure_rate_last_30_days"], 1.0, "29 days back is inside; 30 and 31 are outside");
    let wf = api.post(&t.key, "/workflows", &json!({"name": "w", "workflow_type": "custom"})).await;
    let run = json!({"workflow_id": wf.body["id"]});
    api.post(&t.key, "/executions", &run).await.expect(201);
    api.post(&t.key, "/executions", &run).await.expect(201);
    let stats = api.get(&t.key, "/failures/stats").await;
    assert_eq!(stats.body["failure_rate_last_30_days"], 1.0 / 3.0, "1 failure in 3 attempts within the window");
    clock.advance(TimeDelta::days(1));
    let stats = api.get(&t.key, "/failures/stats").await;
    assert_eq!(stats.body["failure_rate_last_30_days"], 0.0, "a day later, the failure 29 days back is 30 days back");
}

/// One execution as the time-filter test made it: when, of which workflow, in what
/// status, and whether it has a failure (made at the same instant).
struct Made {
    ms: i64,
    workflow: usize,
    status: &'static str,
    failed: bool,
}

/// Which of the made executions a list's filter keeps.
type Keep = fn(&Made) -> bool;

/// Every window's `total` equals the count of the items made strictly inside it, for
/// windows whose ends fall on, just before and just after minute, hour and day
/// boundaries (whole spans come from the span counters, partial minutes from the items).
async fn assert_time_totals(api: &Api, key: &str, workflows: &[String], made: &[Made]) {
    let at = |ms: i64| shared::time::format(chrono::DateTime::from_timestamp_millis(ms).expect("time"));
    let mut bounds: Vec<i64> = made.iter().flat_map(|m| [m.ms - 1, m.ms, m.ms + 1]).collect();
    bounds.sort_unstable();
    bounds.dedup();
    let mut windows: Vec<(Option<i64>, Option<i64>)> = bounds.iter().map(|b| (Some(*b), None)).collect();
    windows.extend(bounds.iter().map(|b| (None, Some(*b))));
    for (i, lo) in bounds.iter().enumerate() {
        for hi in bounds.iter().skip(i + 1).step_by(9) {
            windows.push((Some(*lo), Some(*hi)));
        }
    }
    let inside =
        |m: &Made, (lo, hi): (Option<i64>, Option<i64>)| lo.is_none_or(|lo| m.ms > lo) && hi.is_none_or(|hi| m.ms < hi);
    for window in windows {
        let mut query = String::new();
        if let Some(lo) = window.0 {
            query.push_str(&format!("&created_after={}", at(lo)));
        }
        if let Some(hi) = window.1 {
            query.push_str(&format!("&created_before={}", at(hi)));
        }
        let cases: [(String, Keep); 4] = [
            (String::new(), |_| true),
            ("&status=failed".into(), |m| m.status == "failed"),
            (format!("&workflow_id={}", workflows[1]), |m| m.workflow == 1),
            (format!("&workflow_id={}&status=completed", workflows[0]), |m| m.workflow == 0 && m.status == "completed"),
        ];
        for (filter, keep) in &cases {
            let expected = made.iter().filter(|m| keep(m) && inside(m, window)).count();
            let list = api.get(key, &format!("/executions?page_size=1{query}{filter}")).await;
            assert_eq!(list.expect(200).body["total"], expected, "executions {query}{filter}");
        }
        let expected = made.iter().filter(|m| m.failed && inside(m, window)).count();
        let list = api.get(key, &format!("/failures?limit=1{query}")).await;
        assert_eq!(list.expect(200).body["total"], expected, "failures {query}");
        let list = api.get(key, &format!("/failures?limit=1&status=open{query}")).await;
        assert_eq!(list.expect(200).body["total"], expected, "open failures {query}");
    }
}

/// In process only: the clock places executions and failures on both sides of minute,
/// hour and day boundaries, then statuses change and an execution is deleted; every
/// time-filtered total stays exact.
#[tokio::test]
async fn time_filtered_totals_are_exact_across_minutes_hours_and_days() {
    let env = api_tests::env().await;
    let day = shared::time::parse("2026-11-20T00:00:00Z").expect("time").timestamp_millis();
    let clock = ManualClock::new(chrono::DateTime::from_timestamp_millis(day).expect("time"));
    let api = Api::new(Transport::in_process_with_clock(&env, Arc::new(clock.clone())));
    let t = env.tenant().await;
    let mut workflows = Vec::new();
    for name in ["a", "b"] {
        let wf = api.post(&t.key, "/workflows", &json!({"name": name, "workflow_type": "custom"})).await;
        workflows.push(wf.expect(201).body["id"].as_str().expect("id").to_owned());
    }
    let (minute, hour, days) = (60_000, 3_600_000, 86_400_000);
    let offsets = [
        -1,
        0,
        30_000,
        minute - 1,
        minute,
        hour - 1,
        hour,
        13 * hour + 37 * minute + 12_345,
        days,
        days + hour + minute + 1,
        9 * days + 5 * hour,
    ];
    let fail = json!({"error_type": "AGENT_ERROR", "message": "m"});
    let mut made = Vec::new();
    let mut ids = Vec::new();
    let mut now = day;
    for (i, offset) in offsets.iter().enumerate() {
        clock.advance(TimeDelta::milliseconds(day + offset - now));
        now = day + offset;
        let workflow = i % 2;
        let e = api.post(&t.key, "/executions", &json!({"workflow_id": workflows[workflow]})).await;
        let e = e.expect(201).body["id"].as_str().expect("id").to_owned();
        let (status, failed) = match i % 3 {
            0 => ("running", false),
            1 => {
                api.post(&t.key, &format!("/executions/{e}/fail"), &fail).await.expect(200);
                ("failed", true)
            }
            _ => {
                api.post(&t.key, &format!("/executions/{e}/complete"), &json!({})).await.expect(200);
                ("completed", false)
            }
        };
        made.push(Made { ms: now, workflow, status, failed });
        ids.push(e);
    }
    assert_time_totals(&api, &t.key, &workflows, &made).await;

    // Statuses move between attributes of the same span counters; a deletion leaves them.
    api.post(&t.key, &format!("/executions/{}/complete", ids[0]), &json!({})).await.expect(200);
    made[0].status = "completed";
    api.delete(&t.key, &format!("/executions/{}", ids[8])).await.expect(204);
    made.remove(8);
    assert_time_totals(&api, &t.key, &workflows, &made).await;
}
