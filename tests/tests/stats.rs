//! `GET /executions/stats` and `GET /billing/usage`: a tenant's history across days,
//! written at past times through the API's own operations (`cairn-admin history`), is
//! answered bucket by bucket, by hour and by day, and a status change moves an execution
//! within its bucket.

use api_tests::{Api, Env, both_paths};
use chrono::{DateTime, Duration, DurationRound, Utc};
use domain::runs::executions::model::ExecutionStatus;
use serde_json::{Value, json};

both_paths!(
    a_history_across_days_is_answered_bucket_by_bucket,
    a_status_change_moves_an_execution_within_its_bucket,
    bad_windows_are_refused_naming_the_parameter,
    another_tenants_history_is_not_counted,
);

fn at(t: DateTime<Utc>) -> String {
    shared::time::format(t)
}

async fn history(env: &Env, tenant: &str, when: DateTime<Utc>, status: ExecutionStatus, count: u32) {
    let made = infra::admin::History { at: when, status, count };
    infra::admin::history(&env.client, &env.tables, tenant, None, made).await.expect("history");
}

fn statuses(bucket: &Value) -> Vec<u64> {
    ["running", "completed", "failed", "cancelled", "paused"]
        .iter()
        .map(|s| bucket["by_status"][s].as_u64().unwrap_or_else(|| panic!("{s} in {bucket}")))
        .collect()
}

async fn a_history_across_days_is_answered_bucket_by_bucket(api: Api, env: Env) {
    let t = env.tenant().await;
    let today = Utc::now().duration_trunc(Duration::days(1)).expect("day");
    let (d3, d2, d1) = (today - Duration::days(3), today - Duration::days(2), today - Duration::days(1));
    history(&env, &t.id, d3 + Duration::hours(10), ExecutionStatus::Completed, 2).await;
    history(&env, &t.id, d3 + Duration::hours(10) + Duration::minutes(59), ExecutionStatus::Failed, 1).await;
    history(&env, &t.id, d3 + Duration::hours(11), ExecutionStatus::Paused, 1).await;
    history(&env, &t.id, d1 + Duration::hours(23), ExecutionStatus::Cancelled, 3).await;
    history(&env, &t.id, d1 + Duration::hours(23) + Duration::minutes(30), ExecutionStatus::Running, 1).await;

    let path = format!("/executions/stats?created_after={}&created_before={}", at(d3), at(today));
    let stats = api.get(&t.key, &path).await;
    stats.expect(200);
    let buckets = stats.body["buckets"].as_array().expect("buckets");
    let starts: Vec<&str> = buckets.iter().map(|b| b["start"].as_str().expect("start")).collect();
    assert_eq!(starts, [at(d3), at(d2), at(d1)], "one bucket a day, the empty one included");
    assert_eq!(buckets[0]["end"], at(d2));
    assert_eq!(statuses(&buckets[0]), [0, 2, 1, 0, 1]);
    assert_eq!((buckets[0]["total"].clone(), buckets[0]["failures"].clone()), (json!(4), json!(1)));
    assert_eq!((statuses(&buckets[1]), buckets[1]["total"].clone()), (vec![0; 5], json!(0)));
    assert_eq!((statuses(&buckets[2]), buckets[2]["failures"].clone()), (vec![1, 0, 0, 3, 0], json!(0)));
    assert_eq!(
        (stats.body["bucket"].clone(), stats.body["total"].clone(), stats.body["failures"].clone()),
        (json!("day"), json!(8), json!(1))
    );
    assert_eq!(
        (stats.body["created_after"].clone(), stats.body["created_before"].clone()),
        (json!(at(d3)), json!(at(today)))
    );

    // By hour, within the third day back: 10:00 holds three, 11:00 one.
    let (from, to) = (d3 + Duration::hours(9) + Duration::minutes(30), d3 + Duration::hours(12));
    let hourly = api
        .get(&t.key, &format!("/executions/stats?bucket=hour&created_after={}&created_before={}", at(from), at(to)))
        .await;
    hourly.expect(200);
    let hours: Vec<(String, u64, u64)> = hourly.body["buckets"]
        .as_array()
        .expect("buckets")
        .iter()
        .map(|b| {
            (
                b["start"].as_str().expect("start").to_owned(),
                b["total"].as_u64().expect("n"),
                b["failures"].as_u64().expect("n"),
            )
        })
        .collect();
    let hour = |h: i64| at(d3 + Duration::hours(h));
    assert_eq!(hours, [(hour(9), 0, 0), (hour(10), 3, 1), (hour(11), 1, 0)], "the window widened to whole hours");

    // Credits: each start took the configured cost, on its day.
    let cost = u64::try_from(shared::config::execution_cost_credits()).expect("cost");
    let usage = api.get(&t.key, &format!("/billing/usage?created_after={}&created_before={}", at(d3), at(today))).await;
    usage.expect(200);
    let credits: Vec<(u64, u64)> = usage.body["buckets"]
        .as_array()
        .expect("buckets")
        .iter()
        .map(|b| (b["credits"].as_u64().expect("credits"), b["charges"].as_u64().expect("charges")))
        .collect();
    assert_eq!(credits, [(4 * cost, 4), (0, 0), (4 * cost, 4)]);
    assert_eq!((usage.body["credits"].clone(), usage.body["charges"].clone()), (json!(8 * cost), json!(8)));
}

async fn a_status_change_moves_an_execution_within_its_bucket(api: Api, env: Env) {
    let t = env.tenant().await;
    let wf = api.post(&t.key, "/workflows", &json!({"name": "w", "workflow_type": "custom"})).await;
    let wf = wf.expect(201).body["id"].as_str().expect("id").to_owned();
    let e = api.post(&t.key, "/executions", &json!({"workflow_id": wf})).await;
    let created = e.expect(201).body["created_at"].as_str().expect("created_at").to_owned();
    let e = e.body["id"].as_str().expect("id").to_owned();
    // The bucket holding the execution (RFC 3339 UTC with milliseconds sorts as time).
    let last = |body: &Value| {
        let buckets = body["buckets"].as_array().expect("buckets");
        let holds = |b: &&Value| b["start"].as_str() <= Some(&created) && Some(created.as_str()) < b["end"].as_str();
        buckets.iter().find(holds).cloned().unwrap_or_else(|| panic!("no bucket holds {created}: {body}"))
    };
    let now = api.get(&t.key, "/executions/stats?bucket=hour").await;
    now.expect(200);
    assert_eq!(now.body["buckets"].as_array().map(Vec::len), Some(25), "the last 24 hours touch 25 hours");
    assert_eq!((statuses(&last(&now.body)), last(&now.body)["total"].clone()), (vec![1, 0, 0, 0, 0], json!(1)));
    let fail = json!({"error_type": "TOOL_ERROR", "message": "m"});
    api.post(&t.key, &format!("/executions/{e}/fail"), &fail).await.expect(200);
    let failed = api.get(&t.key, "/executions/stats?bucket=hour").await;
    assert_eq!(
        (statuses(&last(&failed.body)), last(&failed.body)["failures"].clone()),
        (vec![0, 0, 1, 0, 0], json!(1))
    );
    let daily = api.get(&t.key, "/executions/stats").await;
    let days = daily.body["buckets"].as_array().expect("buckets");
    assert_eq!((daily.body["bucket"].clone(), days.len()), (json!("day"), 31), "the last 30 days touch 31 days");
    assert_eq!((daily.body["total"].clone(), daily.body["failures"].clone()), (json!(1), json!(1)));
}

async fn bad_windows_are_refused_naming_the_parameter(api: Api, env: Env) {
    let t = env.tenant().await;
    for (query, field) in [
        ("bucket=week", "bucket"),
        ("bucket=minute", "bucket"),
        ("created_after=2026-11-20T00:00:00Z&created_before=2026-11-20T00:00:00Z", "created_after"),
        ("created_after=2026-11-21T00:00:00Z&created_before=2026-11-20T00:00:00Z", "created_after"),
        ("created_after=1960-01-01T00:00:00Z&created_before=1960-01-02T00:00:00Z", "created_after"),
        ("created_after=2020-01-01T00:00:00Z&created_before=2026-01-01T00:00:00Z", "created_before"),
        ("bucket=hour&created_after=2026-01-01T00:00:00Z&created_before=2026-03-01T00:00:00Z", "created_before"),
        ("created_before=soon", "created_before"),
    ] {
        for route in ["/executions/stats", "/billing/usage"] {
            let reply = api.get(&t.key, &format!("{route}?{query}")).await;
            reply.expect_problem(422, "validation_failed");
            assert_eq!(reply.error_fields(), [field], "{route}?{query}: {}", reply.body);
        }
    }
}

async fn another_tenants_history_is_not_counted(api: Api, env: Env) {
    let (mine, theirs) = (env.tenant().await, env.tenant().await);
    let yesterday = Utc::now() - Duration::days(1);
    history(&env, &theirs.id, yesterday, ExecutionStatus::Failed, 2).await;
    let stats = api.get(&mine.key, "/executions/stats").await;
    stats.expect(200);
    assert_eq!((stats.body["total"].clone(), stats.body["failures"].clone()), (json!(0), json!(0)));
    let usage = api.get(&mine.key, "/billing/usage").await;
    assert_eq!(usage.body["credits"], 0);
    let theirs = api.get(&theirs.key, "/executions/stats").await;
    assert_eq!((theirs.body["total"].clone(), theirs.body["failures"].clone()), (json!(2), json!(2)));
}
