//! The MCP server (`/api/v1/mcp`) as an agent's client meets it, in process and through
//! `cargo lambda watch`: the handshake, the tools a key's scopes cover, each tool's
//! answer the same as its route's, another tenant's ids unknown, bad arguments refused
//! as tool errors that change nothing, and problem+json for what is not an MCP message.

use api_tests::{Api, Env, both_paths};
use http::Method;
use serde_json::{Value, json};

both_paths!(
    an_agent_initializes_and_reads_what_the_routes_answer,
    a_restricted_key_sees_and_runs_only_the_tools_of_its_scopes,
    another_tenants_ids_are_unknown_to_every_tool,
    bad_arguments_are_tool_errors_naming_them_and_change_nothing,
    what_is_not_one_mcp_message_is_a_problem,
    the_write_tools_change_what_their_routes_change,
    the_triage_prompt_and_an_executions_timeline,
    the_diff_tool_lists_what_changed_between_two_checkpoints,
    a_large_state_is_left_out_and_its_size_said,
);

fn id(reply: &api_tests::Reply) -> String {
    reply.body["id"].as_str().unwrap_or_else(|| panic!("an id in {} {}", reply.status, reply.body)).to_owned()
}

/// A workflow, an execution with one checkpoint, and a failed execution's failure.
struct Owned {
    workflow: String,
    execution: String,
    checkpoint: String,
    failed: String,
    failure: String,
}

async fn own(api: &Api, key: &str) -> Owned {
    let workflow =
        id(api.post(key, "/workflows", &json!({"name": "triage", "workflow_type": "langgraph"})).await.expect(201));
    let start = json!({"workflow_id": workflow, "input": {"ticket": 7}, "tags": {"team": "search"}});
    let execution = id(api.post(key, "/executions", &start).await.expect(201));
    let cp = json!({"execution_id": execution, "name": "plan", "state": {"step": 1, "notes": ["a", "b"]}});
    let checkpoint = id(api.post(key, "/checkpoints", &cp).await.expect(201));
    let failed = id(api.post(key, "/executions", &start).await.expect(201));
    let fail = json!({"error_type": "TOOL_ERROR", "message": "the search API timed out"});
    api.post(key, &format!("/executions/{failed}/fail"), &fail).await.expect(200);
    let failures = api.get(key, "/failures?status=open").await;
    let failure = failures.expect(200).body["items"][0]["id"].as_str().expect("a failure").to_owned();
    Owned { workflow, execution, checkpoint, failed, failure }
}

fn names(tools: &Value) -> Vec<String> {
    tools.as_array().expect("tools").iter().map(|t| t["name"].as_str().expect("name").to_owned()).collect()
}

/// The structured answer of a tool that succeeded.
async fn answer(api: &Api, key: &str, tool: &str, arguments: &Value) -> Value {
    let result = api.tool(key, tool, arguments).await;
    assert_eq!(result["isError"], false, "{tool}: {result}");
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().expect("text")).expect("json text");
    assert_eq!(text, result["structuredContent"], "{tool}: the text block is the structured answer");
    result["structuredContent"].clone()
}

/// The problem document of a tool that refused.
async fn refusal(api: &Api, key: &str, tool: &str, arguments: &Value) -> Value {
    let result = api.tool(key, tool, arguments).await;
    assert_eq!(result["isError"], true, "{tool} {arguments}: {result}");
    result["structuredContent"].clone()
}

async fn an_agent_initializes_and_reads_what_the_routes_answer(api: Api, env: Env) {
    let t = env.tenant_with_credits(50).await;
    let o = own(&api, &t.key).await;
    let init = json!({"protocolVersion": "2025-06-18", "capabilities": {},
                      "clientInfo": {"name": "test-agent", "version": "1.0"}});
    let reply = api.mcp(&t.key, "initialize", &init).await;
    reply.expect(200);
    assert_eq!(reply.body["jsonrpc"], "2.0");
    assert_eq!(reply.body["id"], 1);
    let result = &reply.body["result"];
    assert_eq!(result["protocolVersion"], "2025-06-18", "the revision the client asked for");
    assert_eq!(result["serverInfo"]["name"], "cairn");
    assert!(result["capabilities"]["tools"].is_object(), "{result}");
    assert!(reply.header("mcp-session-id").is_none(), "stateless: no session");
    let newer =
        json!({"protocolVersion": "2099-01-01", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}});
    let reply = api.mcp(&t.key, "initialize", &newer).await;
    assert_eq!(reply.body["result"]["protocolVersion"], mcp::protocol::PROTOCOL_VERSIONS[0], "else the newest");

    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let taken = api.post(&t.key, "/mcp", &note).await;
    assert_eq!(taken.status, 202, "{}", taken.body);
    assert!(taken.raw.is_empty(), "no body for a notification");
    assert_eq!(api.mcp(&t.key, "ping", &json!({})).await.body["result"], json!({}));

    let listed = api.mcp(&t.key, "tools/list", &json!({})).await;
    let tools = &listed.expect(200).body["result"]["tools"];
    let expected: Vec<String> = mcp::tools::TOOLS.iter().map(|tool| tool.name.to_owned()).collect();
    assert_eq!(names(tools), expected, "a full key sees every tool");
    let writes = ["replay_execution", "rollback_execution", "cancel_execution", "resolve_failure", "ignore_failure"];
    for tool in tools.as_array().expect("tools") {
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        assert_eq!(tool["inputSchema"]["additionalProperties"], false, "{tool}");
        let writes = writes.contains(&tool["name"].as_str().expect("name"));
        assert_eq!(tool["annotations"]["readOnlyHint"], !writes, "{tool}");
        let description = tool["description"].as_str().expect("description");
        assert!(description.len() > 20, "{description}");
        // A tool that deletes or ends something for good says so first.
        let destructive = tool["annotations"]["destructiveHint"] == true;
        assert_eq!(description.starts_with("DESTRUCTIVE: "), destructive, "{tool}");
    }
    let destructive: Vec<&str> = tools
        .as_array()
        .expect("tools")
        .iter()
        .filter(|tool| tool["annotations"]["destructiveHint"] == true)
        .filter_map(|tool| tool["name"].as_str())
        .collect();
    assert_eq!(destructive, ["rollback_execution", "cancel_execution"]);

    // Each tool answers exactly what its route answers.
    let group =
        api.get(&t.key, &format!("/failures/{}", o.failure)).await.body["group_id"].as_str().expect("group").to_owned();
    let same = [
        ("get_workflow", json!({"workflow_id": o.workflow}), format!("/workflows/{}", o.workflow)),
        ("get_execution", json!({"execution_id": o.execution}), format!("/executions/{}", o.execution)),
        ("get_failure", json!({"failure_id": o.failure}), format!("/failures/{}", o.failure)),
        (
            "get_checkpoint",
            json!({"checkpoint_id": o.checkpoint, "include_state": true}),
            format!("/checkpoints/{}?include_state=true", o.checkpoint),
        ),
        ("list_workflows", json!({"status": "draft"}), "/workflows?status=draft".to_owned()),
        (
            "list_executions",
            json!({"tag": ["team:search"], "page_size": 1}),
            "/executions?tag=team%3Asearch&page_size=1".to_owned(),
        ),
        (
            "list_checkpoints",
            json!({"execution_id": o.execution}),
            format!("/checkpoints?execution_id={}", o.execution),
        ),
        ("list_failures", json!({"status": "open"}), "/failures?status=open".to_owned()),
        ("failure_stats", json!({}), "/failures/stats".to_owned()),
        ("list_failure_groups", json!({"status": "open"}), "/failures/groups?status=open".to_owned()),
        ("get_failure_group", json!({"group_id": group}), format!("/failures/groups/{group}")),
        ("get_balance", json!({}), "/billing/balance".to_owned()),
    ];
    for (tool, arguments, path) in same {
        let by_route = api.get(&t.key, &path).await;
        by_route.expect(200);
        assert_eq!(answer(&api, &t.key, tool, &arguments).await, by_route.body, "{tool} vs GET {path}");
    }
    let listed = answer(&api, &t.key, "list_executions", &json!({"tag": ["team:search"], "page_size": 1})).await;
    assert_eq!((listed["total"].as_u64(), listed["items"].as_array().map(Vec::len)), (Some(2), Some(1)), "{listed}");
    let state =
        answer(&api, &t.key, "get_checkpoint", &json!({"checkpoint_id": o.checkpoint, "include_state": true})).await;
    assert_eq!(state["state"], json!({"step": 1, "notes": ["a", "b"]}));
    let meta = answer(&api, &t.key, "get_checkpoint", &json!({"checkpoint_id": o.checkpoint})).await;
    assert!(meta.get("state").is_none(), "no state unless asked: {meta}");
    assert_eq!(answer(&api, &t.key, "get_balance", &json!({})).await["credits_balance"], 48, "two starts paid");
}

async fn a_restricted_key_sees_and_runs_only_the_tools_of_its_scopes(api: Api, env: Env) {
    let t = env.tenant().await;
    let o = own(&api, &t.key).await;
    let made =
        api.post(&t.key, "/keys", &json!({"name": "agent", "scopes": ["executions:read", "failures:write"]})).await;
    let agent = made.expect(201).body["key"].as_str().expect("secret").to_owned();
    let listed = api.mcp(&agent, "tools/list", &json!({})).await;
    let names = names(&listed.expect(200).body["result"]["tools"]);
    let expected = ["list_executions", "get_execution", "list_failures", "get_failure", "failure_stats"];
    let groups = ["list_failure_groups", "get_failure_group", "resolve_failure", "ignore_failure"];
    assert_eq!(names, [&expected[..], &groups[..]].concat());
    answer(&api, &agent, "get_execution", &json!({"execution_id": o.execution})).await;
    for (tool, arguments) in [
        ("replay_execution", json!({"execution_id": o.failed})),
        ("cancel_execution", json!({"execution_id": o.execution})),
        ("get_workflow", json!({"workflow_id": o.workflow})),
        ("get_checkpoint", json!({"checkpoint_id": o.checkpoint, "include_state": true})),
        ("get_balance", json!({})),
        ("no_such_tool", json!({})),
    ] {
        let call = json!({"name": tool, "arguments": arguments});
        let reply = api.mcp(&agent, "tools/call", &call).await;
        reply.expect(200);
        assert_eq!(reply.body["error"]["code"], -32602, "{tool}: {}", reply.body);
        assert!(reply.body.get("result").is_none(), "{tool}: not run");
        assert!(!reply.raw.windows(6).any(|w| w == b"\"step\""), "{tool}: nothing of the state leaked");
    }
}

async fn another_tenants_ids_are_unknown_to_every_tool(api: Api, env: Env) {
    let owner = env.tenant().await;
    let intruder = env.tenant().await;
    let o = own(&api, &owner.key).await;
    own(&api, &intruder.key).await;
    let group = api.get(&owner.key, &format!("/failures/{}", o.failure)).await.body["group_id"]
        .as_str()
        .expect("group")
        .to_owned();
    let calls = [
        ("get_workflow", json!({"workflow_id": o.workflow})),
        ("get_execution", json!({"execution_id": o.execution})),
        ("get_checkpoint", json!({"checkpoint_id": o.checkpoint, "include_state": true})),
        ("get_failure", json!({"failure_id": o.failure})),
        ("list_checkpoints", json!({"execution_id": o.execution})),
        ("list_executions", json!({"workflow_id": o.workflow})),
        ("list_executions", json!({"starting_after": o.execution})),
        ("list_workflows", json!({"starting_after": o.workflow})),
        ("list_failures", json!({"starting_after": o.failure})),
        ("get_failure_group", json!({"group_id": group})),
        ("diff_checkpoints", json!({"from_checkpoint_id": o.checkpoint, "to_checkpoint_id": o.checkpoint})),
    ];
    let before = api.get(&owner.key, &format!("/executions/{}", o.failed)).await.body.clone();
    let writes = [
        ("replay_execution", json!({"execution_id": o.failed})),
        ("replay_execution", json!({"execution_id": o.failed, "checkpoint_id": o.checkpoint})),
        ("rollback_execution", json!({"execution_id": o.execution, "checkpoint_id": o.checkpoint})),
        ("cancel_execution", json!({"execution_id": o.execution})),
        ("resolve_failure", json!({"failure_id": o.failure})),
        ("ignore_failure", json!({"failure_id": o.failure})),
    ];
    for (tool, arguments) in &writes {
        let problem = refusal(&api, &intruder.key, tool, arguments).await;
        assert_eq!(
            (problem["status"].as_u64(), problem["code"].as_str()),
            (Some(404), Some("not_found")),
            "{tool}: {problem}"
        );
    }
    assert_eq!(
        api.get(&owner.key, &format!("/executions/{}", o.failed)).await.body,
        before,
        "nothing of the owner's changed"
    );
    let failure = api.get(&owner.key, &format!("/failures/{}", o.failure)).await;
    assert_eq!(failure.body["status"], "open");
    let unknown = [
        ("get_workflow", json!({"workflow_id": "wf_0193a6f21c2b7d3e8f000123456789ab"})),
        ("get_execution", json!({"execution_id": "exec_0193a6f21c2b7d3e8f000123456789ab"})),
    ];
    for (tool, arguments) in calls.iter().chain(&unknown) {
        let problem = refusal(&api, &intruder.key, tool, arguments).await;
        assert_eq!(
            (problem["status"].as_u64(), problem["code"].as_str()),
            (Some(404), Some("not_found")),
            "{tool}: {problem}"
        );
    }
    // As its route: a workflow filter of another tenant's finds no group (nothing shown).
    let groups = answer(&api, &intruder.key, "list_failure_groups", &json!({"workflow_id": o.workflow})).await;
    assert_eq!((groups["total"].as_u64(), groups["items"].as_array().map(Vec::len)), (Some(0), Some(0)));
    let theirs = answer(&api, &intruder.key, "list_executions", &json!({})).await;
    assert_eq!(theirs["total"], 2, "only the intruder's own: {theirs}");
}

async fn bad_arguments_are_tool_errors_naming_them_and_change_nothing(api: Api, env: Env) {
    let t = env.tenant().await;
    let o = own(&api, &t.key).await;
    let before = api.get(&t.key, "/executions").await.body["total"].clone();
    let cases = [
        ("list_executions", json!({"status": "exploded"}), "status"),
        ("list_executions", json!({"page_size": 0}), "page_size"),
        ("list_executions", json!({"created_after": "yesterday"}), "created_after"),
        ("list_executions", json!({"color": "red"}), "color"),
        ("list_executions", json!({"workflow_id": {"id": o.workflow}}), "workflow_id"),
        ("get_execution", json!({}), "execution_id"),
        ("list_checkpoints", json!({"execution_id": o.execution, "order": "sideways"}), "order"),
        ("get_checkpoint", json!({"checkpoint_id": o.checkpoint, "include_state": "perhaps"}), "include_state"),
    ];
    for (tool, arguments, field) in cases {
        let problem = refusal(&api, &t.key, tool, &arguments).await;
        assert_eq!(problem["status"], 422, "{tool} {arguments}: {problem}");
        assert_eq!(problem["code"], "validation_failed");
        let fields: Vec<&str> =
            problem["errors"].as_array().expect("errors").iter().filter_map(|e| e["field"].as_str()).collect();
        assert_eq!(fields, [field], "{tool} {arguments}");
    }
    let reply = api.mcp(&t.key, "tools/call", &json!({"arguments": {}})).await;
    assert_eq!(reply.body["error"]["code"], -32602, "a call without a name: {}", reply.body);
    let reply = api.mcp(&t.key, "tools/call", &json!({"name": "get_balance", "arguments": [1]})).await;
    assert_eq!(reply.body["error"]["code"], -32602, "arguments that are not an object: {}", reply.body);
    assert_eq!(api.get(&t.key, "/executions").await.body["total"], before, "nothing changed");
}

async fn what_is_not_one_mcp_message_is_a_problem(api: Api, env: Env) {
    let t = env.tenant().await;
    let raw = |content_type: &'static str, body: &'static [u8]| {
        api.request(Method::POST, "/mcp").key(&t.key).raw_body(content_type, body.to_vec()).send()
    };
    raw("application/json", b"{\"jsonrpc\": \"2.0\", ").await.expect_problem(400, "malformed_request");
    raw("application/json", b"[{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\"}]")
        .await
        .expect_problem(400, "malformed_request");
    raw("application/json", b"{\"id\": 1, \"method\": \"ping\"}").await.expect_problem(400, "malformed_request");
    raw("text/plain", b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \"ping\"}")
        .await
        .expect_problem(400, "malformed_request");
    let stream = api.request(Method::GET, "/mcp").key(&t.key).header("accept", "text/event-stream").send().await;
    stream.expect_problem(405, "method_not_allowed");
    let old = api
        .request(Method::POST, "/mcp")
        .key(&t.key)
        .header("mcp-protocol-version", "2024-01-01")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await;
    old.expect_problem(400, "malformed_request");
    assert!(old.body["detail"].as_str().expect("detail").contains("2024-01-01"), "{}", old.body);

    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let from = |origin: &'static str| {
        api.request(Method::POST, "/mcp").key(&t.key).header("origin", origin).json(&ping).send()
    };
    let rebound = from("http://evil.example.com").await;
    rebound.expect_problem(403, "origin_not_allowed");
    from("http://localhost:6274").await.expect(200);

    let unknown = api.mcp(&t.key, "sampling/createMessage", &json!({})).await;
    unknown.expect(200);
    assert_eq!(unknown.body["error"]["code"], -32601, "{}", unknown.body);
    let bad_id = api.post(&t.key, "/mcp", &json!({"jsonrpc": "2.0", "id": {"n": 1}, "method": "ping"})).await;
    assert_eq!(bad_id.body["error"]["code"], -32600, "{}", bad_id.body);
    api.request(Method::POST, "/mcp")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
        .send()
        .await
        .expect_problem(401, "unauthorized");
}

async fn a_large_state_is_left_out_and_its_size_said(api: Api, env: Env) {
    let t = env.tenant().await;
    let o = own(&api, &t.key).await;
    let big = api_tests::noise(7, 100_000);
    let cp = json!({"execution_id": o.execution, "name": "big", "state": {"blob": big}});
    let checkpoint = id(api.post(&t.key, "/checkpoints", &cp).await.expect(201));
    let got =
        answer(&api, &t.key, "get_checkpoint", &json!({"checkpoint_id": checkpoint, "include_state": true})).await;
    assert!(got.get("state").is_none(), "the state is left out");
    let size = got["state_size_bytes"].as_u64().expect("size");
    assert!(size > mcp::tools::STATE_SHOWN_MAX_BYTES, "{size}");
    assert_eq!(got["state_omitted"]["state_size_bytes"], size, "{got}");
    assert!(got["state_omitted"]["reason"].as_str().expect("reason").contains(&checkpoint));
    let by_route = api.get(&t.key, &format!("/checkpoints/{checkpoint}?include_state=true")).await;
    assert_eq!(
        by_route.expect(200).body["state"]["blob"].as_str().map(str::len),
        Some(100_000),
        "the route has it all"
    );
}

async fn the_write_tools_change_what_their_routes_change(api: Api, env: Env) {
    let t = env.tenant_with_credits(50).await;
    let o = own(&api, &t.key).await;
    let balance = || async { api.get(&t.key, "/billing/balance").await.body["credits_balance"].clone() };
    assert_eq!(balance().await, 48);

    // Replay: running again, attempt 2, a credit charged; from one place only.
    let both = json!({"execution_id": o.failed, "checkpoint_id": o.checkpoint, "from_start": true});
    let problem = refusal(&api, &t.key, "replay_execution", &both).await;
    assert_eq!(problem["errors"][0]["field"], "from_start", "{problem}");
    let replayed = answer(&api, &t.key, "replay_execution", &json!({"execution_id": o.failed})).await;
    assert_eq!((replayed["status"].as_str(), replayed["attempt"].as_u64()), (Some("running"), Some(2)), "{replayed}");
    assert_eq!(replayed, api.get(&t.key, &format!("/executions/{}", o.failed)).await.body, "as the route shows it");
    assert_eq!(balance().await, 47, "a replay costs a credit");

    // Rollback: the checkpoints after the one named are gone.
    for n in 2..=3 {
        let cp = json!({"execution_id": o.execution, "name": format!("step {n}"), "state": {"step": n}});
        api.post(&t.key, "/checkpoints", &cp).await.expect(201);
    }
    let to = json!({"execution_id": o.execution, "checkpoint_id": o.checkpoint});
    let rolled = answer(&api, &t.key, "rollback_execution", &to).await;
    assert_eq!(rolled["discarded_checkpoints"], 2, "{rolled}");
    assert_eq!(rolled["current_checkpoint_id"], o.checkpoint.as_str());
    let left = api.get(&t.key, &format!("/checkpoints?execution_id={}", o.execution)).await;
    assert_eq!(left.body["total"], 1, "{}", left.body);

    // Cancel ends it, with its reason; a second cancel is refused as the route refuses it.
    let cancel = json!({"execution_id": o.execution, "reason": "the ticket was closed"});
    let cancelled = answer(&api, &t.key, "cancel_execution", &cancel).await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    let again = refusal(&api, &t.key, "cancel_execution", &cancel).await;
    assert_eq!((again["status"].as_u64(), again["code"].as_str()), (Some(409), Some("invalid_state")), "{again}");
    let long = json!({"execution_id": o.failed, "reason": "x".repeat(1001)});
    assert_eq!(refusal(&api, &t.key, "cancel_execution", &long).await["errors"][0]["field"], "reason");

    // A failure resolved stays resolved (a repeat changes nothing); it cannot be ignored then.
    let failure = json!({"failure_id": o.failure});
    let resolved = answer(&api, &t.key, "resolve_failure", &failure).await;
    assert_eq!((resolved["id"].as_str(), resolved["status"].as_str()), (Some(o.failure.as_str()), Some("resolved")));
    assert!(resolved["resolved_at"].is_string(), "{resolved}");
    assert_eq!(answer(&api, &t.key, "resolve_failure", &failure).await["resolved_at"], resolved["resolved_at"]);
    let ignored = refusal(&api, &t.key, "ignore_failure", &failure).await;
    assert_eq!(ignored["status"], 409, "{ignored}");
    assert_eq!(api.get(&t.key, &format!("/failures/{}", o.failure)).await.body["status"], "resolved");
}

async fn the_triage_prompt_and_an_executions_timeline(api: Api, env: Env) {
    let t = env.tenant().await;
    let o = own(&api, &t.key).await;
    let prompts = api.mcp(&t.key, "prompts/list", &json!({})).await;
    let listed = &prompts.expect(200).body["result"]["prompts"];
    assert_eq!(names(listed), ["triage_open_failures"]);
    assert_eq!(listed[0]["arguments"][0]["name"], "workflow_id");
    let got = api
        .mcp(&t.key, "prompts/get", &json!({"name": "triage_open_failures", "arguments": {"workflow_id": o.workflow}}))
        .await;
    let text = got.body["result"]["messages"][0]["content"]["text"].as_str().expect("text").to_owned();
    assert!(text.contains(&o.workflow) && text.contains("list_failures"), "{text}");
    assert_eq!(got.body["result"]["messages"][0]["role"], "user");
    for bad in [json!({"name": "nope"}), json!({"name": "triage_open_failures", "arguments": {"team": "x"}})] {
        assert_eq!(api.mcp(&t.key, "prompts/get", &bad).await.body["error"]["code"], -32602, "{bad}");
    }

    let templates = api.mcp(&t.key, "resources/templates/list", &json!({})).await;
    let template = &templates.expect(200).body["result"]["resourceTemplates"][0];
    assert_eq!(template["uriTemplate"], mcp::resources::TIMELINE);
    let uri = mcp::resources::TIMELINE.replace("{execution_id}", &o.execution);
    let read = api.mcp(&t.key, "resources/read", &json!({"uri": uri})).await;
    let contents = &read.expect(200).body["result"]["contents"][0];
    assert_eq!(
        (contents["uri"].as_str(), contents["mimeType"].as_str()),
        (Some(uri.as_str()), Some("application/json"))
    );
    let timeline: Value = serde_json::from_str(contents["text"].as_str().expect("text")).expect("json");
    assert_eq!(timeline["execution"]["id"], o.execution.as_str());
    assert_eq!(timeline["checkpoints"][0]["id"], o.checkpoint.as_str(), "{timeline}");
    assert!(timeline["checkpoints"][0].get("state").is_none(), "metadata only");
    assert_eq!(timeline["total_checkpoints"], 1);

    // Another tenant's execution, a URI of nothing, or a key that may not read checkpoints:
    // no such resource.
    let other = env.tenant().await;
    let made = api.post(&t.key, "/keys", &json!({"name": "runs only", "scopes": ["executions:read"]})).await;
    let narrow = made.expect(201).body["key"].as_str().expect("secret").to_owned();
    let nothing = "cairn://executions/exec_0193a6f21c2b7d3e8f000123456789ab/timeline".to_owned();
    for (key, uri) in
        [(&other.key, &uri), (&t.key, &nothing), (&t.key, &"cairn://workflows/x".to_owned()), (&narrow, &uri)]
    {
        let reply = api.mcp(key, "resources/read", &json!({"uri": uri})).await;
        assert_eq!(reply.body["error"]["code"], -32002, "{uri}: {}", reply.body);
        assert!(!reply.raw.windows(o.checkpoint.len()).any(|w| w == o.checkpoint.as_bytes()), "nothing leaked");
    }
    let none = api.mcp(&narrow, "resources/templates/list", &json!({})).await;
    assert_eq!(none.body["result"]["resourceTemplates"], json!([]), "not offered to a key that cannot read it");
}

async fn the_diff_tool_lists_what_changed_between_two_checkpoints(api: Api, env: Env) {
    let t = env.tenant().await;
    let o = own(&api, &t.key).await;
    let next =
        json!({"execution_id": o.execution, "name": "act", "state": {"step": 2, "notes": ["a", "c"], "done": true}});
    let next = id(api.post(&t.key, "/checkpoints", &next).await.expect(201));
    let diff = json!({"from_checkpoint_id": o.checkpoint, "to_checkpoint_id": next});
    let got = answer(&api, &t.key, "diff_checkpoints", &diff).await;
    assert_eq!(got["from"]["id"], o.checkpoint.as_str());
    assert_eq!((got["to"]["id"].as_str(), got["to"]["sequence"].as_u64()), (Some(next.as_str()), Some(2)));
    assert_eq!(got["changes_total"], 3, "{got}");
    assert_eq!(
        got["changes"],
        json!([{"path": "/done", "op": "added", "to": true},
               {"path": "/notes/1", "op": "changed", "from": "b", "to": "c"},
               {"path": "/step", "op": "changed", "from": 1, "to": 2}])
    );
    assert_eq!(got["truncated"], false);

    let big = json!({"execution_id": o.execution, "name": "big", "state": {"blob": api_tests::noise(3, 70_000)}});
    let big = id(api.post(&t.key, "/checkpoints", &big).await.expect(201));
    let too_large = json!({"from_checkpoint_id": next, "to_checkpoint_id": big});
    let problem = refusal(&api, &t.key, "diff_checkpoints", &too_large).await;
    assert_eq!(
        (problem["status"].as_u64(), problem["errors"][0]["field"].as_str()),
        (Some(422), Some("to_checkpoint_id")),
        "{problem}"
    );
}
