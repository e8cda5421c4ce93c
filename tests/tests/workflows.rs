//! The workflows area as a client sees it. Every test runs twice: in process and
//! through `cargo lambda watch` (see `api_tests::both_paths`).

use api_tests::{Api, Env, Reply, both_paths};
use http::Method;
use serde_json::{Value, json};

both_paths!(
    answers_are_gzipped_for_clients_that_accept_it,
    methods_a_path_does_not_serve_are_405_with_allow,
    create_returns_201_with_location_etag_and_contract_defaults,
    create_accepts_every_field_and_published_status,
    create_refuses_invalid_bodies_with_every_field_named,
    create_refuses_non_json_and_oversized_bodies,
    get_returns_the_workflow_with_its_etag,
    unknown_malformed_and_foreign_ids_are_404_on_every_id_route,
    list_is_newest_first_with_disjoint_pages_and_right_totals,
    list_items_are_summaries_without_definition,
    list_filters_by_status_and_type_with_matching_totals,
    list_refuses_invalid_query_parameters,
    list_by_name_finds_exactly_that_name_with_other_filters_and_cursors,
    update_replaces_given_fields_and_bumps_version,
    update_with_stale_if_match_is_412_and_changes_nothing,
    update_follows_the_status_transitions_of_the_contract,
    archived_workflow_accepts_only_a_restore_to_draft,
    update_refuses_invalid_bodies,
    delete_returns_204_empty_and_the_workflow_is_gone,
    every_route_refuses_missing_unknown_revoked_and_basic_credentials,
    totals_match_a_recount_after_a_mix_of_changes,
);

/// Creates a workflow with an Idempotency-Key of its own, so the harness may send it
/// again when the local gateway answers with a 500 of its own (its 60 KiB definitions
/// are where that has been seen).
async fn create(api: &Api, key: &str, body: Value) -> Value {
    let idempotency_key = shared::ids::TransactionId::generate().to_string();
    let call = api.request(Method::POST, "/workflows").key(key).header("idempotency-key", &idempotency_key);
    let reply = call.json(&body).send().await;
    reply.expect(201);
    reply.body
}

fn id_of(workflow: &Value) -> String {
    workflow["id"].as_str().expect("id").to_owned()
}

fn is_timestamp(value: &Value) -> bool {
    value.as_str().is_some_and(|s| {
        s.len() == 24 && s.ends_with('Z') && chrono::DateTime::parse_from_rfc3339(s).is_ok() && s.as_bytes()[19] == b'.'
    })
}

async fn create_returns_201_with_location_etag_and_contract_defaults(api: Api, env: Env) {
    let t = env.tenant().await;
    let reply = api.post(&t.key, "/workflows", &json!({"name": "Support triage", "workflow_type": "crewai"})).await;
    reply.expect(201);
    let w = &reply.body;
    let id = id_of(w);
    assert!(id.starts_with("wf_") && id.len() == 35, "{id}");
    assert_eq!(reply.header("location"), Some(format!("/api/v1/workflows/{id}").as_str()));
    assert_eq!(reply.header("etag"), Some("\"1\""));
    assert!(reply.header("x-request-id").is_some_and(|v| !v.is_empty()));
    assert_eq!(w["name"], "Support triage");
    assert_eq!(w["workflow_type"], "crewai");
    assert_eq!(w["status"], "draft");
    assert_eq!(w["version"], 1);
    assert_eq!(w["description"], Value::Null);
    assert_eq!(w["definition"], Value::Null);
    assert_eq!(w["metadata"], json!({}));
    assert_eq!(w["retention"], Value::Null, "the tenant's retention applies");
    assert!(is_timestamp(&w["created_at"]), "{}", w["created_at"]);
    assert_eq!(w["created_at"], w["updated_at"]);
    let keys: Vec<&String> = w.as_object().expect("object").keys().collect();
    assert_eq!(keys.len(), 11, "exactly the contract's fields and the workflow's own retention: {keys:?}");
}

async fn create_accepts_every_field_and_published_status(api: Api, env: Env) {
    let t = env.tenant().await;
    let body = json!({
        "name": "Research crew",
        "description": "Finds and summarises papers",
        "workflow_type": "semantic_kernel",
        "status": "published",
        "definition": {"nodes": [{"id": "a", "kind": "agent"}], "edges": [], "depth": 2.5},
        "metadata": {"team": "research", "tier": "gold"}
    });
    let w = create(&api, &t.key, body.clone()).await;
    for field in ["name", "description", "workflow_type", "status", "definition", "metadata"] {
        assert_eq!(w[field], body[field], "{field}");
    }
    let fetched = api.get(&t.key, &format!("/workflows/{}", id_of(&w))).await;
    assert_eq!(fetched.expect(200).body, w);
}

async fn create_refuses_invalid_bodies_with_every_field_named(api: Api, env: Env) {
    let t = env.tenant().await;
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (json!({}), vec!["name", "workflow_type"]),
        (json!({"name": "", "workflow_type": "crewai"}), vec!["name"]),
        (json!({"name": "x".repeat(201), "workflow_type": "crewai"}), vec!["name"]),
        (json!({"name": 5, "workflow_type": "airflow"}), vec!["name", "workflow_type"]),
        (json!({"name": "a", "workflow_type": "crewai", "status": "archived"}), vec!["status"]),
        (json!({"name": "a", "workflow_type": "crewai", "description": "d".repeat(2001)}), vec!["description"]),
        (json!({"name": "a", "workflow_type": "crewai", "definition": [1, 2]}), vec!["definition"]),
        (
            json!({"name": "a", "workflow_type": "crewai", "definition": {"blob": "x".repeat(65 * 1024)}}),
            vec!["definition"],
        ),
        (json!({"name": "a", "workflow_type": "crewai", "metadata": {"n": 1}}), vec!["metadata"]),
        (json!({"name": "a", "workflow_type": "crewai", "metadata": null}), vec!["metadata"]),
        (json!({"name": null, "workflow_type": "crewai"}), vec!["name"]),
        (json!({"name": "a", "workflow_type": "crewai", "id": "wf_x", "version": 9}), vec!["id", "version"]),
        (json!({"name": "a", "workflow_type": "crewai", "owner": "me"}), vec!["owner"]),
        (json!(["name"]), vec!["body"]),
    ];
    let many: serde_json::Map<String, Value> = (0..51).map(|i| (format!("k{i}"), json!("v"))).collect();
    let cases = cases
        .into_iter()
        .chain([(json!({"name": "a", "workflow_type": "crewai", "metadata": many}), vec!["metadata"])]);
    for (body, fields) in cases {
        let reply = api.post(&t.key, "/workflows", &body).await;
        reply.expect_problem(422, "validation_failed");
        assert_eq!(reply.error_fields(), fields, "body {body}");
    }
    let list = api.get(&t.key, "/workflows").await;
    assert_eq!(list.expect(200).body["total"], 0, "nothing was created");
}

async fn create_refuses_non_json_and_oversized_bodies(api: Api, env: Env) {
    let t = env.tenant().await;
    let broken =
        api.request(Method::POST, "/workflows").key(&t.key).raw_body("application/json", b"{\"name\": ".to_vec());
    broken.send().await.expect_problem(400, "malformed_request");
    let form = api
        .request(Method::POST, "/workflows")
        .key(&t.key)
        .raw_body("application/x-www-form-urlencoded", b"name=a".to_vec());
    form.send().await.expect_problem(400, "malformed_request");
    let big =
        format!("{{\"name\":\"a\",\"workflow_type\":\"custom\",\"description\":\"{}\"}}", "x".repeat(1024 * 1024));
    let large = api.request(Method::POST, "/workflows").key(&t.key).raw_body("application/json", big.into_bytes());
    large.send().await.expect_problem(413, "payload_too_large");
    let list = api.get(&t.key, "/workflows").await;
    assert_eq!(list.expect(200).body["total"], 0);
}

async fn get_returns_the_workflow_with_its_etag(api: Api, env: Env) {
    let t = env.tenant().await;
    let w = create(&api, &t.key, json!({"name": "a", "workflow_type": "autogen"})).await;
    let reply = api.get(&t.key, &format!("/workflows/{}", id_of(&w))).await;
    reply.expect(200);
    assert_eq!(reply.body, w);
    assert_eq!(reply.header("etag"), Some("\"1\""));
}

async fn unknown_malformed_and_foreign_ids_are_404_on_every_id_route(api: Api, env: Env) {
    let owner = env.tenant().await;
    let other = env.tenant().await;
    let w = create(&api, &owner.key, json!({"name": "private", "workflow_type": "custom"})).await;
    let foreign = id_of(&w);
    let unknown = "wf_0193a6f21c2b7d3e8f000123456789ab".to_owned();
    for id in [foreign.clone(), unknown, "wf_nothex".to_owned(), "exec_0193a6f21c2b7d3e8f000123456789ab".to_owned()] {
        let path = format!("/workflows/{id}");
        let get = api.get(&other.key, &path).await;
        get.expect_problem(404, "not_found");
        assert!(!get.raw.is_empty() && !String::from_utf8_lossy(&get.raw).contains("private"));
        api.put(&other.key, &path, &json!({"name": "stolen"})).await.expect_problem(404, "not_found");
        api.delete(&other.key, &path).await.expect_problem(404, "not_found");
    }
    let still = api.get(&owner.key, &format!("/workflows/{foreign}")).await;
    assert_eq!(still.expect(200).body, w, "the owner's workflow is unchanged");
    let others = api.get(&other.key, "/workflows").await;
    assert_eq!(others.expect(200).body["total"], 0);
    assert_eq!(others.body["items"], json!([]));
}

async fn list_is_newest_first_with_disjoint_pages_and_right_totals(api: Api, env: Env) {
    let t = env.tenant().await;
    let mut ids = Vec::new();
    for i in 0..7 {
        ids.push(id_of(&create(&api, &t.key, json!({"name": format!("w{i}"), "workflow_type": "custom"})).await));
    }
    ids.reverse();
    let default = api.get(&t.key, "/workflows").await;
    default.expect(200);
    assert_eq!((default.body["page"].clone(), default.body["page_size"].clone()), (json!(1), json!(20)));
    let mut seen = Vec::new();
    for page in 1..=3 {
        let reply = api.get(&t.key, &format!("/workflows?page={page}&page_size=3")).await;
        reply.expect(200);
        assert_eq!(reply.body["total"], 7);
        assert_eq!(reply.body["page"], page);
        assert_eq!(reply.body["page_size"], 3);
        let items = reply.body["items"].as_array().expect("items");
        assert_eq!(items.len(), if page < 3 { 3 } else { 1 });
        seen.extend(items.iter().map(id_of));
    }
    assert_eq!(seen, ids, "pages are disjoint, complete and newest first");
    let beyond = api.get(&t.key, "/workflows?page=4&page_size=3").await;
    assert_eq!(beyond.expect(200).body["items"], json!([]));
    assert_eq!(beyond.body["total"], 7);
}

async fn list_items_are_summaries_without_definition(api: Api, env: Env) {
    let t = env.tenant().await;
    let definition = json!({"graph": "g".repeat(60 * 1024)});
    let w = create(&api, &t.key, json!({"name": "big", "workflow_type": "langgraph", "definition": definition})).await;
    let mut summary = w.clone();
    assert_eq!(summary.as_object_mut().expect("object").remove("definition"), Some(definition.clone()));
    for path in ["/workflows", "/workflows?name=big"] {
        let list = api.get(&t.key, path).await;
        assert_eq!(
            list.expect(200).body["items"],
            json!([summary]),
            "{path}: the list item is the workflow without its definition"
        );
        assert!(list.raw.len() < 4096, "{path}: the page does not carry the definition: {} bytes", list.raw.len());
    }
    let one = api.get(&t.key, &format!("/workflows/{}", w["id"].as_str().expect("id"))).await;
    assert_eq!(one.expect(200).body["definition"], definition, "the workflow's own GET still returns it");
}

async fn list_filters_by_status_and_type_with_matching_totals(api: Api, env: Env) {
    let t = env.tenant().await;
    let specs = [
        ("crewai", "draft"),
        ("crewai", "published"),
        ("langgraph", "published"),
        ("langgraph", "published"),
        ("custom", "draft"),
    ];
    for (kind, status) in specs {
        create(&api, &t.key, json!({"name": "w", "workflow_type": kind, "status": status})).await;
    }
    let archived = create(&api, &t.key, json!({"name": "old", "workflow_type": "crewai"})).await;
    api.put(&t.key, &format!("/workflows/{}", id_of(&archived)), &json!({"status": "archived"})).await.expect(200);
    let cases = [
        ("", 6),
        ("?status=draft", 2),
        ("?status=published", 3),
        ("?status=archived", 1),
        ("?workflow_type=crewai", 3),
        ("?workflow_type=autogen", 0),
        ("?status=published&workflow_type=langgraph", 2),
        ("?status=draft&workflow_type=crewai", 1),
        ("?status=archived&workflow_type=crewai", 1),
    ];
    for (query, expected) in cases {
        let reply = api.get(&t.key, &format!("/workflows{query}")).await;
        reply.expect(200);
        assert_eq!(reply.body["total"], expected, "{query}");
        let items = reply.body["items"].as_array().expect("items");
        assert_eq!(items.len(), expected, "{query}");
        for item in items {
            if let Some(status) = query.split("status=").nth(1).map(|s| s.split('&').next().unwrap_or_default()) {
                assert_eq!(item["status"], status, "{query}");
            }
            if let Some(kind) = query.split("workflow_type=").nth(1) {
                assert_eq!(item["workflow_type"], kind, "{query}");
            }
        }
    }
}

async fn list_refuses_invalid_query_parameters(api: Api, env: Env) {
    let t = env.tenant().await;
    let cases = [
        ("?page=0", "page"),
        ("?page=-1", "page"),
        ("?page=abc", "page"),
        ("?page_size=0", "page_size"),
        ("?page_size=101", "page_size"),
        ("?status=deleted", "status"),
        ("?workflow_type=airflow", "workflow_type"),
        ("?status=draft&status=published", "status"),
        ("?name=", "name"),
    ];
    for (query, field) in cases {
        let reply = api.get(&t.key, &format!("/workflows{query}")).await;
        reply.expect_problem(422, "validation_failed");
        assert_eq!(reply.error_fields(), [field], "{query}");
    }
    let ok = api.get(&t.key, "/workflows?page_size=100&unknown=1").await;
    ok.expect(200);
    let long = "n".repeat(201);
    let reply = api.get(&t.key, &format!("/workflows?name={long}")).await;
    reply.expect_problem(422, "validation_failed");
    assert_eq!(reply.error_fields(), ["name"]);
}

async fn list_by_name_finds_exactly_that_name_with_other_filters_and_cursors(api: Api, env: Env) {
    let (t, other) = (env.tenant().await, env.tenant().await);
    let older = create(&api, &t.key, json!({"name": "triage bot", "workflow_type": "crewai"})).await;
    create(&api, &t.key, json!({"name": "triage", "workflow_type": "crewai"})).await;
    create(&api, &t.key, json!({"name": "Triage bot", "workflow_type": "crewai"})).await;
    let newer =
        create(&api, &t.key, json!({"name": "triage bot", "workflow_type": "langgraph", "status": "published"})).await;
    create(&api, &other.key, json!({"name": "triage bot", "workflow_type": "crewai"})).await;
    let ids =
        |reply: &Reply| -> Vec<String> { reply.body["items"].as_array().expect("items").iter().map(id_of).collect() };
    let named = api.get(&t.key, "/workflows?name=triage%20bot").await;
    named.expect(200);
    assert_eq!(ids(&named), [id_of(&newer), id_of(&older)], "exactly the name, newest first, this tenant's");
    assert_eq!(named.body["total"], 2);
    let cases = [
        ("&status=published", vec![id_of(&newer)]),
        ("&workflow_type=crewai", vec![id_of(&older)]),
        ("&status=archived", vec![]),
        ("&page_size=1", vec![id_of(&newer)]),
        ("&page_size=1&page=2", vec![id_of(&older)]),
        (&*format!("&starting_after={}", id_of(&newer)), vec![id_of(&older)]),
    ];
    for (query, expected) in cases {
        let reply = api.get(&t.key, &format!("/workflows?name=triage%20bot{query}")).await;
        reply.expect(200);
        assert_eq!(ids(&reply), expected, "{query}");
        let total = if query.contains("status") || query.contains("type") { expected.len() } else { 2 };
        assert_eq!(reply.body["total"], total, "{query}");
    }
    // Renamed: found by its new name only.
    let path = format!("/workflows/{}", id_of(&older));
    api.put(&t.key, &path, &json!({"name": "escalation"})).await.expect(200);
    assert_eq!(ids(&api.get(&t.key, "/workflows?name=triage%20bot").await), [id_of(&newer)]);
    assert_eq!(ids(&api.get(&t.key, "/workflows?name=escalation").await), [id_of(&older)]);
    let none = api.get(&t.key, "/workflows?name=nobody").await;
    assert_eq!((none.body["items"].clone(), none.body["total"].clone()), (json!([]), json!(0)));
}

async fn update_replaces_given_fields_and_bumps_version(api: Api, env: Env) {
    let t = env.tenant().await;
    let w = create(
        &api,
        &t.key,
        json!({"name": "a", "workflow_type": "crewai", "description": "d", "metadata": {"x": "1"}}),
    )
    .await;
    let path = format!("/workflows/{}", id_of(&w));
    let reply = api
        .put(
            &t.key,
            &path,
            &json!({"name": "b", "description": null, "metadata": {"y": "2"}, "definition": {"steps": 3}}),
        )
        .await;
    reply.expect(200);
    let u = &reply.body;
    assert_eq!(u["name"], "b");
    assert_eq!(u["description"], Value::Null);
    assert_eq!(u["metadata"], json!({"y": "2"}), "metadata is replaced whole");
    assert_eq!(u["definition"], json!({"steps": 3}));
    assert_eq!(u["workflow_type"], "crewai", "fields not given keep their values");
    assert_eq!(u["version"], 2);
    assert_eq!(reply.header("etag"), Some("\"2\""));
    assert_eq!(u["created_at"], w["created_at"]);
    assert!(u["updated_at"].as_str() >= w["updated_at"].as_str());
    assert_eq!(api.get(&t.key, &path).await.expect(200).body, *u);

    let same = api.put(&t.key, &path, &json!({"name": "b"})).await;
    assert_eq!(same.expect(200).body["version"], 2, "a change that changes nothing keeps the version");
}

async fn update_with_stale_if_match_is_412_and_changes_nothing(api: Api, env: Env) {
    let t = env.tenant().await;
    let w = create(&api, &t.key, json!({"name": "a", "workflow_type": "crewai"})).await;
    let path = format!("/workflows/{}", id_of(&w));
    let ok = api
        .request(Method::PUT, &path)
        .key(&t.key)
        .header("if-match", "\"1\"")
        .json(&json!({"name": "b"}))
        .send()
        .await;
    assert_eq!(ok.expect(200).body["version"], 2);
    let stale = api
        .request(Method::PUT, &path)
        .key(&t.key)
        .header("if-match", "\"1\"")
        .json(&json!({"name": "c"}))
        .send()
        .await;
    stale.expect_problem(412, "version_mismatch");
    let garbage = api
        .request(Method::PUT, &path)
        .key(&t.key)
        .header("if-match", "yesterday")
        .json(&json!({"name": "c"}))
        .send()
        .await;
    garbage.expect_problem(412, "version_mismatch");
    let stale_delete = api.request(Method::DELETE, &path).key(&t.key).header("if-match", "\"1\"").send().await;
    stale_delete.expect_problem(412, "version_mismatch");
    let now = api.get(&t.key, &path).await;
    assert_eq!((now.body["name"].clone(), now.body["version"].clone()), (json!("b"), json!(2)));
    let any =
        api.request(Method::PUT, &path).key(&t.key).header("if-match", "*").json(&json!({"name": "d"})).send().await;
    assert_eq!(any.expect(200).body["version"], 3);
}

async fn update_follows_the_status_transitions_of_the_contract(api: Api, env: Env) {
    let t = env.tenant().await;
    let w = create(&api, &t.key, json!({"name": "a", "workflow_type": "crewai"})).await;
    let path = format!("/workflows/{}", id_of(&w));
    let walk = ["published", "draft", "archived", "draft", "published", "archived", "draft"];
    for (i, status) in walk.iter().enumerate() {
        let reply = api.put(&t.key, &path, &json!({"status": status})).await;
        reply.expect(200);
        assert_eq!(reply.body["status"], *status);
        assert_eq!(reply.body["version"], i + 2);
    }
    let unknown = api.put(&t.key, &path, &json!({"status": "deleted"})).await;
    unknown.expect_problem(422, "validation_failed");
}

async fn archived_workflow_accepts_only_a_restore_to_draft(api: Api, env: Env) {
    let t = env.tenant().await;
    let w = create(&api, &t.key, json!({"name": "a", "workflow_type": "crewai", "status": "published"})).await;
    let path = format!("/workflows/{}", id_of(&w));
    let archived = api.put(&t.key, &path, &json!({"status": "archived"})).await;
    archived.expect(200);
    let refused = [
        json!({"status": "published"}),
        json!({"status": "archived"}),
        json!({"name": "renamed"}),
        json!({"status": "draft", "name": "renamed"}),
    ];
    for body in refused {
        let reply = api.put(&t.key, &path, &body).await;
        reply.expect_problem(409, "invalid_state");
        assert!(reply.body["detail"].as_str().is_some_and(|d| d.contains("archived")), "{}", reply.body);
    }
    assert_eq!(api.get(&t.key, &path).await.body, archived.body, "nothing changed");
    let restored = api.put(&t.key, &path, &json!({"status": "draft"})).await;
    assert_eq!(restored.expect(200).body["status"], "draft");
}

async fn update_refuses_invalid_bodies(api: Api, env: Env) {
    let t = env.tenant().await;
    let w = create(&api, &t.key, json!({"name": "a", "workflow_type": "crewai"})).await;
    let path = format!("/workflows/{}", id_of(&w));
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (json!({}), vec!["body"]),
        (json!({"name": null}), vec!["name"]),
        (json!({"name": ""}), vec!["name"]),
        (json!({"workflow_type": "zapier", "status": 1}), vec!["workflow_type", "status"]),
        (json!({"version": 5}), vec!["version"]),
        (json!({"created_at": "2020-01-01T00:00:00Z", "nmae": "typo"}), vec!["created_at", "nmae"]),
        (json!("just a string"), vec!["body"]),
    ];
    for (body, fields) in cases {
        let reply = api.put(&t.key, &path, &body).await;
        reply.expect_problem(422, "validation_failed");
        assert_eq!(reply.error_fields(), fields, "body {body}");
    }
    let malformed =
        api.request(Method::PUT, &path).key(&t.key).raw_body("application/json", b"{,}".to_vec()).send().await;
    malformed.expect_problem(400, "malformed_request");
    assert_eq!(api.get(&t.key, &path).await.body, w, "nothing changed");
}

async fn delete_returns_204_empty_and_the_workflow_is_gone(api: Api, env: Env) {
    let t = env.tenant().await;
    let keep = create(&api, &t.key, json!({"name": "keep", "workflow_type": "custom"})).await;
    let w = create(&api, &t.key, json!({"name": "a", "workflow_type": "custom", "status": "published"})).await;
    let path = format!("/workflows/{}", id_of(&w));
    let reply = api.delete(&t.key, &path).await;
    reply.expect(204);
    assert!(reply.raw.is_empty(), "204 has an empty body");
    api.get(&t.key, &path).await.expect_problem(404, "not_found");
    api.delete(&t.key, &path).await.expect_problem(404, "not_found");
    let list = api.get(&t.key, "/workflows").await;
    assert_eq!(list.body["total"], 1);
    assert_eq!(list.body["items"][0]["id"], keep["id"]);
    let published = api.get(&t.key, "/workflows?status=published").await;
    assert_eq!(published.body["total"], 0);
}

async fn every_route_refuses_missing_unknown_revoked_and_basic_credentials(api: Api, env: Env) {
    let t = env.tenant().await;
    let revoked = env.revoked_key(&t).await;
    let w = create(&api, &t.key, json!({"name": "a", "workflow_type": "custom"})).await;
    let unknown_key = format!("cairn_{}", "A".repeat(43));
    for (method, route) in workflows::ROUTES {
        let path = route.replace("{workflow_id}", &id_of(&w)).replace("/api/v1", "");
        let method = Method::from_bytes(method.as_bytes()).expect("method");
        let credentials: [Option<(&'static str, String)>; 5] = [
            None,
            Some(("x-api-key", unknown_key.clone())),
            Some(("x-api-key", revoked.clone())),
            Some(("authorization", format!("Bearer {revoked}"))),
            Some(("authorization", "Basic dXNlcjpwYXNz".to_owned())),
        ];
        for credential in credentials {
            let mut call = api.request(method.clone(), &path).json(&json!({"name": "x", "workflow_type": "custom"}));
            if let Some((name, value)) = &credential {
                call = call.header(name, value);
            }
            let reply = call.send().await;
            reply.expect_problem(401, "unauthorized");
            assert_eq!(reply.header("www-authenticate"), Some("Bearer"), "{method} {path} {credential:?}");
        }
    }
    let bearer =
        api.request(Method::GET, "/workflows").header("authorization", &format!("Bearer {}", t.key)).send().await;
    assert_eq!(bearer.expect(200).body["total"], 1, "nothing was created or deleted by refused requests");
    assert_eq!(api.get(&t.key, &format!("/workflows/{}", id_of(&w))).await.body, w);
}

/// In process only: through the gateway (or the watch router) an unknown path never
/// reaches a function.
#[tokio::test]
async fn unknown_paths_reaching_the_function_are_problem_json() {
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let unknown =
        api.request(Method::GET, "/workflows/wf_0193a6f21c2b7d3e8f000123456789ab/versions").key(&t.key).send().await;
    unknown.expect_problem(404, "not_found");
    let anonymous = api.request(Method::GET, "/nowhere").send().await;
    anonymous.expect_problem(401, "unauthorized");
}

/// Every path sends every method to its function (template.yaml's ANY routes, the watch
/// router), which answers the methods it does not serve with 405 and `Allow`.
async fn methods_a_path_does_not_serve_are_405_with_allow(api: Api, env: Env) {
    let t = env.tenant().await;
    let cases = [
        (Method::PATCH, "/workflows", "GET,HEAD,POST"),
        (Method::DELETE, "/failures/stats", "GET,HEAD"),
        (Method::PUT, "/executions/exec_0193a6f21c2b7d3e8f000123456789ab/complete", "POST"),
        (Method::GET, "/billing/topup", "POST"),
        (Method::TRACE, "/billing/balance", "GET,HEAD"),
    ];
    for (method, path, allow) in cases {
        let reply = api.request(method.clone(), path).key(&t.key).send().await;
        reply.expect_problem(405, "method_not_allowed");
        let mut allowed: Vec<&str> = reply.header("allow").unwrap_or_default().split(',').map(str::trim).collect();
        allowed.sort_unstable();
        assert_eq!(allowed.join(","), allow, "{method} {path}");
    }
    // The webhook, served without a key, too.
    let webhook = api.request(Method::GET, "/billing/webhooks/stripe").send().await;
    webhook.expect_problem(405, "method_not_allowed");
    assert_eq!(webhook.header("allow"), Some("POST"));
}

async fn totals_match_a_recount_after_a_mix_of_changes(api: Api, env: Env) {
    let t = env.tenant().await;
    let mut ids = Vec::new();
    for (i, kind) in ["crewai", "langgraph", "custom", "crewai", "autogen"].iter().enumerate() {
        ids.push(id_of(&create(&api, &t.key, json!({"name": format!("w{i}"), "workflow_type": kind})).await));
    }
    api.put(&t.key, &format!("/workflows/{}", ids[0]), &json!({"status": "published", "workflow_type": "custom"}))
        .await
        .expect(200);
    api.put(&t.key, &format!("/workflows/{}", ids[1]), &json!({"status": "archived"})).await.expect(200);
    api.delete(&t.key, &format!("/workflows/{}", ids[2])).await.expect(204);
    api.put(&t.key, &format!("/workflows/{}", ids[3]), &json!({"workflow_type": "langgraph"})).await.expect(200);
    let all: Vec<Value> = list_all(&api, &t.key).await;
    assert_eq!(all.len(), 4);
    for status in ["draft", "published", "archived"] {
        for kind in ["crewai", "langgraph", "autogen", "semantic_kernel", "custom"] {
            let recount = all.iter().filter(|w| w["status"] == status && w["workflow_type"] == kind).count();
            let reply = api.get(&t.key, &format!("/workflows?status={status}&workflow_type={kind}")).await;
            assert_eq!(reply.body["total"], recount, "{status} {kind}");
        }
        let recount = all.iter().filter(|w| w["status"] == status).count();
        assert_eq!(api.get(&t.key, &format!("/workflows?status={status}")).await.body["total"], recount);
    }
}

async fn list_all(api: &Api, key: &str) -> Vec<Value> {
    let mut all = Vec::new();
    for page in 1.. {
        let reply: Reply = api.get(key, &format!("/workflows?page={page}&page_size=2")).await;
        let items = reply.body["items"].as_array().cloned().unwrap_or_default();
        if items.is_empty() {
            return all;
        }
        all.extend(items);
    }
    all
}

async fn answers_are_gzipped_for_clients_that_accept_it(api: Api, env: Env) {
    use std::io::Read;
    let t = env.tenant().await;
    let big = json!({"name": "w", "workflow_type": "custom", "description": "cairn ".repeat(300)});
    for _ in 0..5 {
        api.post(&t.key, "/workflows", &big).await.expect(201);
    }
    let plain = api.get(&t.key, "/workflows").await;
    plain.expect(200);
    assert_eq!(plain.header("content-encoding"), None, "no Accept-Encoding, no compression");
    let gzipped = api.request(Method::GET, "/workflows").key(&t.key).header("accept-encoding", "gzip").send().await;
    assert_eq!((gzipped.status, gzipped.header("content-encoding")), (200, Some("gzip")));
    assert!(gzipped.raw.len() * 5 < plain.raw.len(), "{} vs {} bytes", gzipped.raw.len(), plain.raw.len());
    let mut text = String::new();
    flate2::read::GzDecoder::new(gzipped.raw.as_slice()).read_to_string(&mut text).expect("gzip");
    let body: Value = serde_json::from_str(&text).expect("json");
    assert_eq!(body, plain.body);
}

/// In process only: `cairn-admin migrate workflow-names` gives a workflow written before
/// the `by_name` index (its item without `tenant_name`) its key, once.
#[tokio::test]
async fn the_name_migration_makes_earlier_workflows_found_by_name() {
    let env = api_tests::env().await;
    let api = Api::new(api_tests::Transport::in_process(&env));
    let t = env.tenant().await;
    let earlier = create(&api, &t.key, json!({"name": "nightly", "workflow_type": "custom"})).await;
    let table = env.tables.name(shared::dynamo::Table::Workflows);
    // As the earlier version wrote it: no `tenant_name`.
    env.client
        .update_item()
        .table_name(table)
        .key("tenant_id", shared::dynamo::s(&t.id))
        .key("id", shared::dynamo::s(id_of(&earlier)))
        .update_expression("REMOVE tenant_name")
        .send()
        .await
        .expect("remove");
    let newer = create(&api, &t.key, json!({"name": "nightly", "workflow_type": "custom"})).await;
    let ids =
        |reply: Reply| -> Vec<String> { reply.body["items"].as_array().expect("items").iter().map(id_of).collect() };
    assert_eq!(ids(api.get(&t.key, "/workflows?name=nightly").await), [id_of(&newer)], "not indexed yet");

    let store = domain::workflows::store::WorkflowStore::new(env.client.clone(), env.tables.clone());
    assert_eq!(store.index_names(Some(&t.id)).await.expect("migrate"), 1, "the earlier one alone");
    let found = api.get(&t.key, "/workflows?name=nightly").await;
    assert_eq!(ids(found), [id_of(&newer), id_of(&earlier)]);
    assert_eq!(store.index_names(Some(&t.id)).await.expect("migrate"), 0, "a second run changes nothing");
    let whole = api.get(&t.key, &format!("/workflows/{}", id_of(&earlier))).await;
    assert_eq!(whole.expect(200).body, earlier, "the workflow itself unchanged");
}
