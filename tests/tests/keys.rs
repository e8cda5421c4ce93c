//! The keys area: a tenant lists, creates and revokes its own API keys.

use api_tests::{Api, Env, both_paths};
use http::Method;
use serde_json::{Value, json};

both_paths!(
    a_new_key_is_shown_once_listed_without_its_secret_and_works,
    a_revoked_key_authenticates_nothing_and_the_last_live_key_stays,
    bad_names_and_unknown_keys_change_nothing,
    an_idempotent_retry_makes_one_key_and_never_stores_the_secret,
    an_operator_revokes_any_key_the_last_live_one_included,
    a_restricted_key_does_only_what_its_scopes_allow_and_makes_no_wider_key,
    an_expiring_key_is_refused_from_its_expires_at_on,
    keys_are_listed_in_pages_and_capped_at_a_hundred_live,
);

/// Creates a key with `body` using `key`; its secret and id.
async fn make_key(api: &Api, key: &str, body: Value) -> (String, String) {
    let made = api.post(key, "/keys", &body).await;
    made.expect(201);
    (made.body["key"].as_str().expect("secret").to_owned(), made.body["id"].as_str().expect("id").to_owned())
}

async fn a_restricted_key_does_only_what_its_scopes_allow_and_makes_no_wider_key(api: Api, env: Env) {
    let t = env.tenant().await;
    // Every key made before scopes, and the tenant's first, is full.
    assert_eq!(items(api.get(&t.key, "/keys").await.expect(200))[0]["scopes"], json!(["*"]));
    let scopes = json!(["executions:read", "workflows:write", "keys:write"]);
    let (ci, ci_id) = make_key(&api, &t.key, json!({"name": "CI", "scopes": scopes})).await;
    let listed = items(api.get(&t.key, "/keys").await.expect(200));
    let shown = listed.iter().find(|k| k["id"] == ci_id.as_str()).expect("listed");
    assert_eq!(shown["scopes"], json!(["executions:read", "keys:write", "workflows:write"]));

    // In scope: served. Writing an area includes reading it.
    let wf = api.post(&ci, "/workflows", &json!({"name": "w", "workflow_type": "custom"})).await;
    let wf = wf.expect(201).body["id"].as_str().expect("id").to_owned();
    api.get(&ci, "/workflows").await.expect(200);
    api.get(&ci, "/executions").await.expect(200);
    // Out of scope: 403 naming the scope, and nothing changes.
    let refused = api.post(&ci, "/executions", &json!({"workflow_id": wf})).await;
    refused.expect_problem(403, "insufficient_scope");
    assert_eq!(refused.body["required_scope"], "executions:write");
    assert!(refused.body["detail"].as_str().expect("detail").contains("executions:write"));
    assert_eq!(api.get(&t.key, "/executions").await.body["total"], 0, "nothing was started");
    api.get(&ci, "/billing/balance").await.expect_problem(403, "insufficient_scope");
    api.get(&ci, "/failures").await.expect_problem(403, "insufficient_scope");

    // It makes keys within its own scopes only; without `scopes`, exactly its own.
    let wider = api.post(&ci, "/keys", &json!({"name": "wider", "scopes": ["*"]})).await;
    wider.expect_problem(422, "validation_failed");
    assert_eq!(wider.body["errors"][0]["field"], "scopes");
    let also = api.post(&ci, "/keys", &json!({"name": "x", "scopes": ["failures:read"]})).await;
    also.expect_problem(422, "validation_failed");
    let (narrow, _) = make_key(&api, &ci, json!({"name": "reader", "scopes": ["workflows:read"]})).await;
    let same = api.post(&ci, "/keys", &json!({"name": "same"})).await;
    assert_eq!(same.expect(201).body["scopes"], json!(["executions:read", "keys:write", "workflows:write"]));
    assert_eq!(api.get(&t.key, "/keys").await.body["total"], 4, "the refused ones were not made");
    // A key without keys:write neither makes nor revokes keys.
    let refused = api.post(&narrow, "/keys", &json!({"name": "n"})).await;
    assert_eq!(refused.expect_problem(403, "insufficient_scope").body["required_scope"], "keys:write");
    api.delete(&narrow, &format!("/keys/{ci_id}")).await.expect_problem(403, "insufficient_scope");
    api.get(&ci, "/keys").await.expect(200);
    api.get(&narrow, "/keys").await.expect_problem(403, "insufficient_scope");

    for bad in [json!([]), json!(["executions:admin"]), json!("executions:read"), json!(["runs:read"])] {
        let refused = api.post(&t.key, "/keys", &json!({"name": "bad", "scopes": bad})).await;
        refused.expect_problem(422, "validation_failed");
    }
}

async fn an_expiring_key_is_refused_from_its_expires_at_on(api: Api, env: Env) {
    let t = env.tenant().await;
    // Far enough ahead for the calls before it on a loaded machine.
    let soon = chrono::Utc::now() + chrono::Duration::seconds(15);
    let at = soon.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let (key, id) = make_key(&api, &t.key, json!({"name": "short-lived", "expires_at": at})).await;
    let listed = items(api.get(&t.key, "/keys").await.expect(200));
    assert_eq!(listed.iter().find(|k| k["id"] == id.as_str()).expect("listed")["expires_at"], at.as_str());
    api.get(&key, "/workflows").await.expect(200);
    let wait = soon - chrono::Utc::now() + chrono::Duration::milliseconds(200);
    tokio::time::sleep(wait.to_std().unwrap_or_default()).await;
    api.get(&key, "/workflows").await.expect_problem(401, "unauthorized");
    api.post(&key, "/workflows", &json!({"name": "late", "workflow_type": "custom"}))
        .await
        .expect_problem(401, "unauthorized");
    assert_eq!(api.get(&t.key, "/workflows").await.body["total"], 0, "the expired key wrote nothing");
    for past in ["2020-01-01T00:00:00Z", "soon", "2027-13-01T00:00:00Z"] {
        let refused = api.post(&t.key, "/keys", &json!({"name": "p", "expires_at": past})).await;
        refused.expect_problem(422, "validation_failed");
    }
}

async fn keys_are_listed_in_pages_and_capped_at_a_hundred_live(api: Api, env: Env) {
    let t = env.tenant().await;
    let cap = usize::try_from(domain::keys::MAX_LIVE_KEYS).expect("cap");
    for i in 1..cap {
        make_key(&api, &t.key, json!({"name": format!("k{i}")})).await;
    }
    let refused = api.post(&t.key, "/keys", &json!({"name": "one too many"})).await;
    refused.expect_problem(409, "invalid_state");
    let first = api.get(&t.key, "/keys?limit=40").await;
    first.expect(200);
    assert_eq!((first.body["total"].as_u64(), first.body["has_more"].as_bool()), (Some(100), Some(true)));
    let mut seen: Vec<String> = items(&first).iter().map(|k| k["id"].as_str().expect("id").to_owned()).collect();
    while let Some(last) = seen.last().cloned() {
        let page = api.get(&t.key, &format!("/keys?limit=40&starting_after={last}")).await;
        page.expect(200);
        let ids: Vec<String> = items(&page).iter().map(|k| k["id"].as_str().expect("id").to_owned()).collect();
        seen.extend(ids);
        if page.body["has_more"] == false {
            break;
        }
    }
    assert_eq!(seen.len(), cap, "every key once");
    let mut sorted = seen.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(seen, sorted, "newest first");
    // A revoked key frees a place.
    api.delete(&t.key, &format!("/keys/{}", seen[0])).await.expect(204);
    make_key(&api, &t.key, json!({"name": "in its place"})).await;
    let other = env.tenant().await;
    api.get(&other.key, &format!("/keys?starting_after={}", seen[1])).await.expect_problem(404, "not_found");
    api.get(&t.key, "/keys?limit=0").await.expect_problem(422, "validation_failed");
}

fn items(reply: &api_tests::Reply) -> Vec<Value> {
    reply.body["items"].as_array().expect("items").clone()
}

async fn a_new_key_is_shown_once_listed_without_its_secret_and_works(api: Api, env: Env) {
    let t = env.tenant().await;
    let first = items(api.get(&t.key, "/keys").await.expect(200));
    assert_eq!(first.len(), 1, "the key cairn-admin made");
    assert_eq!(first[0]["revoked_at"], Value::Null);
    assert!(t.key.starts_with(first[0]["prefix"].as_str().expect("prefix")));

    let created = api.post(&t.key, "/keys", &json!({"name": "CI deploys"})).await;
    created.expect(201);
    let secret = created.body["key"].as_str().expect("secret").to_owned();
    assert!(secret.starts_with("cairn_") && secret.len() == 49, "{secret}");
    assert_eq!(created.body["name"], "CI deploys");
    assert_eq!(created.body["prefix"], &secret[..10]);
    assert_eq!(created.body["revoked_at"], Value::Null);
    let id = created.body["id"].as_str().expect("id").to_owned();
    assert!(id.starts_with("key_"));

    let listed = api.get(&secret, "/keys").await;
    assert_eq!(listed.expect(200).body["total"], 2);
    let listed = items(&listed);
    assert_eq!(listed[0]["id"], id.as_str(), "newest first");
    assert!(!listed.iter().any(|k| k.to_string().contains(&secret)), "never the secret");
    assert!(listed.iter().all(|k| k.get("key").is_none()));
    // The new key acts for the same tenant.
    let wf = api.post(&secret, "/workflows", &json!({"name": "w", "workflow_type": "custom"})).await;
    let wf = wf.expect(201).body["id"].as_str().expect("id").to_owned();
    api.get(&t.key, &format!("/workflows/{wf}")).await.expect(200);
}

async fn a_revoked_key_authenticates_nothing_and_the_last_live_key_stays(api: Api, env: Env) {
    let t = env.tenant().await;
    let created = api.post(&t.key, "/keys", &json!({"name": "temporary"})).await;
    let secret = created.expect(201).body["key"].as_str().expect("secret").to_owned();
    let id = created.body["id"].as_str().expect("id").to_owned();
    api.get(&secret, "/keys").await.expect(200);
    // A key may revoke itself; from then on it is refused everywhere.
    api.delete(&secret, &format!("/keys/{id}")).await.expect(204);
    api.get(&secret, "/keys").await.expect_problem(401, "unauthorized");
    api.get(&secret, "/billing/balance").await.expect_problem(401, "unauthorized");
    let listed = items(api.get(&t.key, "/keys").await.expect(200));
    let revoked = listed.iter().find(|k| k["id"] == id.as_str()).expect("still listed");
    assert!(revoked["revoked_at"].is_string());
    // Revoking again changes nothing.
    api.delete(&t.key, &format!("/keys/{id}")).await.expect(204);
    // The last live key cannot be revoked: nobody locks themselves out.
    let own = listed.iter().find(|k| k["revoked_at"].is_null()).expect("live")["id"].as_str().expect("id").to_owned();
    let refused = api.delete(&t.key, &format!("/keys/{own}")).await;
    refused.expect_problem(409, "invalid_state");
    api.get(&t.key, "/keys").await.expect(200);
}

async fn bad_names_and_unknown_keys_change_nothing(api: Api, env: Env) {
    let t = env.tenant().await;
    for body in [
        json!({}),
        json!({"name": ""}),
        json!({"name": "x".repeat(101)}),
        json!({"name": 7}),
        json!({"name": "a", "x": 1}),
    ] {
        api.post(&t.key, "/keys", &body).await.expect_problem(422, "validation_failed");
    }
    for id in ["key_0193a6f21c2b7d3e8f000123456789ab", "nope"] {
        api.delete(&t.key, &format!("/keys/{id}")).await.expect_problem(404, "not_found");
    }
    // Another tenant's key is unknown here.
    let other = env.tenant().await;
    let theirs = items(api.get(&other.key, "/keys").await.expect(200))[0]["id"].as_str().expect("id").to_owned();
    api.delete(&t.key, &format!("/keys/{theirs}")).await.expect_problem(404, "not_found");
    assert_eq!(api.get(&t.key, "/keys").await.body["total"], 1);
    api.get(&other.key, "/keys").await.expect(200);
}

async fn an_idempotent_retry_makes_one_key_and_never_stores_the_secret(api: Api, env: Env) {
    let t = env.tenant().await;
    let post = || {
        api.request(Method::POST, "/keys").key(&t.key).header("idempotency-key", "make-one").json(&json!({"name": "k"}))
    };
    let first = post().send().await;
    first.expect(201);
    assert!(first.body["key"].is_string());
    let again = post().send().await;
    again.expect(201);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.body["id"], first.body["id"]);
    assert_eq!(again.body["key"], Value::Null, "the secret was not kept");
    assert_eq!(api.get(&t.key, "/keys").await.body["total"], 2);
}

/// An operator may revoke any key, the tenant's last live one included (the API refuses
/// that): `cairn-admin key revoke` revokes it, and a warm instance refuses it on its very
/// next request; revoking it again changes nothing. The tenant's count of live keys went
/// down with it: the key made next is the last live one again, which the API will not
/// revoke.
async fn an_operator_revokes_any_key_the_last_live_one_included(api: Api, env: Env) {
    let t = env.tenant().await;
    let listed = items(api.get(&t.key, "/keys").await.expect(200));
    assert_eq!(listed.len(), 1, "the tenant's one key");
    let only = listed[0]["id"].as_str().expect("id").to_owned();
    for _ in 0..3 {
        api.get(&t.key, "/workflows").await.expect(200);
    }
    let now = || shared::time::format(chrono::Utc::now());
    let revoke = || async { infra::admin::revoke_key(&env.client, &env.tables, &only, &now()).await };
    assert_eq!(revoke().await.expect("revoked"), infra::admin::Revoked::Now);
    api.get(&t.key, "/workflows").await.expect_problem(401, "unauthorized");
    assert!(!infra::admin::key_is_live(&env.client, &env.tables, &t.key).await.expect("read"));
    assert_eq!(revoke().await.expect("again"), infra::admin::Revoked::Already);

    let (id, key) = infra::admin::create_key(&env.client, &env.tables, &t.id, &now()).await.expect("key");
    assert!(infra::admin::key_is_live(&env.client, &env.tables, &key).await.expect("read"));
    let listed = items(api.get(&key, "/keys").await.expect(200));
    assert_eq!(listed.iter().filter(|k| k["revoked_at"].is_null()).count(), 1);
    api.delete(&key, &format!("/keys/{id}")).await.expect_problem(409, "invalid_state");
    api.get(&key, "/keys").await.expect(200);
}

/// A revocation moves the tenant's keys epoch in its own transaction, on the standing
/// item that every request of the tenant counts itself on, so it can meet a conflict.
/// Both ways of revoking retry it: `DELETE /keys/{key_id}` and `cairn-admin key revoke`,
/// each answered with a conflict twice first, revoke the key once (the epoch moves by one
/// for each) and the key is refused. In process: the conflicts are the client's.
#[tokio::test]
async fn a_revocation_that_meets_a_conflict_is_retried() {
    use shared::dynamo::{Table, n, s};
    let env = api_tests::env().await;
    let (client, conflict) = api_tests::conflict::ConflictNext::client(&env);
    let conflicted = Env { client: client.clone(), tables: env.tables.clone() };
    let api = Api::new(api_tests::Transport::in_process(&conflicted));
    let t = env.tenant().await;
    let now = || shared::time::format(chrono::Utc::now());
    let mut keys = Vec::new();
    for _ in 0..2 {
        keys.push(infra::admin::create_key(&env.client, &env.tables, &t.id, &now()).await.expect("key"));
    }
    let epoch = || async {
        let out = env
            .client
            .get_item()
            .table_name(env.tables.name(Table::RateLimits))
            .key("tenant_id", s(&t.id))
            .key("window", n(shared::rate_limit::STANDING))
            .consistent_read(true)
            .send()
            .await
            .expect("read");
        out.item.and_then(|item| item.get("keys_epoch")?.as_n().ok()?.parse::<u64>().ok()).unwrap_or(0)
    };
    api.get(&t.key, "/keys").await.expect(200);
    let before = epoch().await;

    let (by_api, key) = &keys[0];
    conflict.arm(2);
    api.delete(&t.key, &format!("/keys/{by_api}")).await.expect(204);
    assert_eq!(conflict.answered(), 2, "two conflicts met");
    assert_eq!(epoch().await, before + 1, "revoked once");
    api.get(key, "/workflows").await.expect_problem(401, "unauthorized");

    let (by_admin, key) = &keys[1];
    conflict.arm(2);
    let revoked = infra::admin::revoke_key(&client, &env.tables, by_admin.as_str(), &now()).await.expect("revoked");
    assert!(matches!(revoked, infra::admin::Revoked::Now), "{revoked:?}");
    assert_eq!(conflict.answered(), 4, "two more conflicts met");
    assert_eq!(epoch().await, before + 2, "revoked once");
    api.get(key, "/workflows").await.expect_problem(401, "unauthorized");
    let listed = items(api.get(&t.key, "/keys").await.expect(200));
    assert_eq!(listed.iter().filter(|k| k["revoked_at"].is_null()).count(), 1, "the tenant's first key alone is live");
}
