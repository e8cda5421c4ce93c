//! `GET /executions/{id}/replay-preview`: what a replay would run again (steps by
//! checkpoint name, tool calls from `cairn.tools`), from a checkpoint, the start or the
//! current checkpoint, changing nothing; whether the replay would be accepted now.

use api_tests::{Api, Env, both_paths};
use serde_json::{Value, json};

both_paths!(
    a_preview_counts_the_steps_and_tool_calls_a_replay_runs_again_and_changes_nothing,
    a_preview_refuses_what_a_replay_would_refuse_alike,
);

async fn failed_run(api: &Api, key: &str) -> (String, Vec<String>) {
    let wf = api.post(key, "/workflows", &json!({"name": "previewed", "workflow_type": "custom"})).await;
    let wf = wf.expect(201).body["id"].as_str().expect("id").to_owned();
    let e = api.post(key, "/executions", &json!({"workflow_id": wf})).await;
    let e = e.expect(201).body["id"].as_str().expect("id").to_owned();
    let mut checkpoints = Vec::new();
    for (name, tools) in [
        ("plan", None),
        ("agent", None),
        ("tools", Some("web_search, fetch")),
        ("agent", None),
        ("tools", Some("web_search")),
    ] {
        let metadata = tools.map_or_else(|| json!({}), |t| json!({"cairn.tools": t}));
        let body = json!({"execution_id": e, "name": name, "state": {"n": 1}, "metadata": metadata});
        checkpoints
            .push(api.post(key, "/checkpoints", &body).await.expect(201).body["id"].as_str().expect("id").to_owned());
    }
    let fail = json!({"error_type": "TOOL_ERROR", "message": "fetch timed out"});
    api.post(key, &format!("/executions/{e}/fail"), &fail).await.expect(200);
    (e, checkpoints)
}

fn named(v: &Value) -> Vec<(String, u64)> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|c| (c["name"].as_str().expect("name").to_owned(), c["count"].as_u64().expect("count")))
        .collect()
}

fn pairs(v: &[(&str, u64)]) -> Vec<(String, u64)> {
    v.iter().map(|(n, c)| ((*n).to_owned(), *c)).collect()
}

async fn a_preview_counts_the_steps_and_tool_calls_a_replay_runs_again_and_changes_nothing(api: Api, env: Env) {
    let t = env.tenant().await;
    let (e, cps) = failed_run(&api, &t.key).await;
    let before = api.get(&t.key, &format!("/executions/{e}")).await.body.clone();
    let balance = api.get(&t.key, "/billing/balance").await.body["credits_balance"].clone();

    let from_plan = api.get(&t.key, &format!("/executions/{e}/replay-preview?checkpoint_id={}", cps[0])).await;
    let p = &from_plan.expect(200).body;
    assert_eq!(
        (p["object"].as_str(), p["execution_id"].as_str(), p["status"].as_str()),
        (Some("replay_preview"), Some(e.as_str()), Some("failed"))
    );
    assert_eq!(
        (p["replayable"].as_bool(), p["refused"].clone(), p["credits"].as_i64()),
        (Some(true), Value::Null, Some(1))
    );
    assert_eq!(
        (p["from_checkpoint"]["id"].as_str(), p["from_checkpoint"]["name"].as_str()),
        (Some(cps[0].as_str()), Some("plan"))
    );
    assert_eq!((p["checkpoints_after"].as_u64(), p["more"].as_bool()), (Some(4), Some(false)));
    assert_eq!(named(&p["steps"]), pairs(&[("agent", 2), ("tools", 2)]));
    assert_eq!(named(&p["tool_calls"]), pairs(&[("web_search", 2), ("fetch", 1)]));
    let listed: Vec<&str> =
        p["checkpoints"].as_array().expect("list").iter().map(|c| c["id"].as_str().expect("id")).collect();
    assert_eq!(listed, cps[1..].iter().map(String::as_str).collect::<Vec<_>>());

    let from_start = api.get(&t.key, &format!("/executions/{e}/replay-preview?from_start=true")).await;
    let s = &from_start.expect(200).body;
    assert_eq!((s["from_checkpoint"].clone(), s["checkpoints_after"].as_u64()), (Value::Null, Some(5)));
    assert_eq!(named(&s["steps"]), pairs(&[("plan", 1), ("agent", 2), ("tools", 2)]));
    // From its current checkpoint (the last): nothing recorded runs again.
    let current = api.get(&t.key, &format!("/executions/{e}/replay-preview")).await;
    assert_eq!(
        (current.expect(200).body["checkpoints_after"].as_u64(), current.body["from_checkpoint"]["id"].as_str()),
        (Some(0), Some(cps[4].as_str()))
    );
    assert_eq!(current.body["steps"], json!([]));

    let after = api.get(&t.key, &format!("/executions/{e}")).await.body.clone();
    assert_eq!(after, before, "a preview changes nothing");
    assert_eq!(api.get(&t.key, "/billing/balance").await.body["credits_balance"], balance, "nor charges");
}

async fn a_preview_refuses_what_a_replay_would_refuse_alike(api: Api, env: Env) {
    let t = env.tenant().await;
    let (e, cps) = failed_run(&api, &t.key).await;
    let (other, other_cps) = failed_run(&api, &t.key).await;
    api.post(&t.key, &format!("/executions/{other}/replay"), &json!({})).await.expect(200);
    // Running: a replay would be refused, and the preview says why.
    let running = api.get(&t.key, &format!("/executions/{other}/replay-preview?checkpoint_id={}", other_cps[0])).await;
    assert_eq!(running.expect(200).body["replayable"], false);
    assert!(running.body["refused"].as_str().is_some_and(|r| r.contains("running")), "{}", running.body);
    // Another execution's checkpoint, a malformed one, an unknown execution: 404.
    for path in [
        format!("/executions/{e}/replay-preview?checkpoint_id={}", other_cps[0]),
        format!("/executions/{e}/replay-preview?checkpoint_id=cp_nope"),
        format!("/executions/{}/replay-preview", shared::ids::ExecutionId::generate()),
        "/executions/exec_nope/replay-preview".to_owned(),
    ] {
        api.get(&t.key, &path).await.expect_problem(404, "not_found");
    }
    let both =
        api.get(&t.key, &format!("/executions/{e}/replay-preview?checkpoint_id={}&from_start=true", cps[0])).await;
    both.expect_problem(422, "validation_failed");
    assert_eq!(both.error_fields(), ["from_start"]);
}
