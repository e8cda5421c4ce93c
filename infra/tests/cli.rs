//! `cairn-admin` as an operator uses it, against DynamoDB Local (`make test` provides it).

use std::process::{Command, Output};

fn admin(args: &[&str]) -> Output {
    for name in ["TABLE_PREFIX", "AWS_ENDPOINT_URL_DYNAMODB"] {
        assert!(std::env::var(name).is_ok(), "{name} is not set: run these tests with `make test`");
    }
    Command::new(env!("CARGO_BIN_EXE_cairn-admin")).args(args).output().expect("cairn-admin runs")
}

fn stdout(output: &Output) -> String {
    assert!(output.status.success(), "failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout.clone()).expect("utf-8").trim_end().to_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn tenant_and_key_lifecycle() {
    let tenant = stdout(&admin(&["tenant", "create", "--name", "Acme"]));
    assert!(shared::ids::TenantKey::parse(&tenant).is_some(), "prints the tenant id alone: {tenant:?}");

    let key = stdout(&admin(&["key", "create", "--tenant", &tenant]));
    assert!(shared::auth::is_well_formed_key(&key), "prints the key alone: {key:?}");
    let second = stdout(&admin(&["key", "create", "--tenant", &tenant]));
    assert_ne!(key, second);

    let listing = stdout(&admin(&["key", "list", "--tenant", &tenant]));
    assert!(!listing.contains(&key) && !listing.contains(&second), "keys are never shown again");
    assert!(listing.contains(&key[..10]), "the prefix tells keys apart: {listing}");
    let rows: Vec<&str> = listing.lines().skip(1).collect();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|row| row.ends_with("live")));
    let key_id = rows[0].split_whitespace().next().expect("key id").to_owned();

    let revoked = admin(&["key", "revoke", "--key-id", &key_id]);
    assert!(stderr(&revoked).contains("revoked"), "{}", stderr(&revoked));
    let again = admin(&["key", "revoke", "--key-id", &key_id]);
    assert!(again.status.success() && stderr(&again).contains("already revoked"));
    let listing = stdout(&admin(&["key", "list", "--tenant", &tenant]));
    assert_eq!(listing.lines().filter(|l| l.contains("revoked")).count(), 1, "{listing}");
}

#[test]
fn unknown_tenants_and_keys_are_clear_errors() {
    let unknown_tenant = "ten_0193a6f21c2b7d3e8f000123456789ab";
    for args in [
        vec!["key", "create", "--tenant", unknown_tenant],
        vec!["key", "list", "--tenant", unknown_tenant],
        vec!["key", "create", "--tenant", "not-an-id"],
    ] {
        let output = admin(&args);
        assert!(!output.status.success(), "{args:?}");
        assert!(stderr(&output).contains("unknown tenant"), "{args:?}: {}", stderr(&output));
        assert!(output.stdout.is_empty());
    }
    let output = admin(&["key", "revoke", "--key-id", "key_0193a6f21c2b7d3e8f000123456789ab"]);
    assert!(!output.status.success());
    assert!(stderr(&output).contains("unknown key"), "{}", stderr(&output));
}

#[test]
fn demo_prints_the_same_live_key_on_every_run_and_replaces_a_revoked_one() {
    let dir = std::env::temp_dir().join(format!("cairn-demo-{}", std::process::id()));
    let file = dir.join("demo-key");
    let file_arg = file.to_str().expect("utf-8 path");
    let first = stdout(&admin(&["demo", "--key-file", file_arg]));
    let second = stdout(&admin(&["demo", "--key-file", file_arg]));
    assert_eq!(first, second);
    assert!(shared::auth::is_well_formed_key(&first));
    std::fs::write(&file, "cairn_revokedorwrong\n").expect("write");
    let third = stdout(&admin(&["demo", "--key-file", file_arg]));
    assert_ne!(third, first);
    assert!(shared::auth::is_well_formed_key(&third));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn credits_grant_prints_the_new_balance_and_refuses_bad_input() {
    let tenant = stdout(&admin(&["tenant", "create", "--name", "Credits"]));
    assert_eq!(stdout(&admin(&["credits", "grant", "--tenant", &tenant, "--credits", "250"])), "250");
    assert_eq!(stdout(&admin(&["credits", "grant", "--tenant", &tenant, "--credits", "50"])), "300");
    for (args, message) in [
        (
            vec!["credits", "grant", "--tenant", "ten_0193a6f21c2b7d3e8f000123456789ab", "--credits", "5"],
            "unknown tenant",
        ),
        (vec!["credits", "grant", "--tenant", tenant.as_str(), "--credits", "0"], "--credits"),
        (vec!["credits", "grant", "--tenant", tenant.as_str(), "--credits=-5"], "--credits"),
    ] {
        let output = admin(&args);
        assert!(!output.status.success(), "{args:?}");
        assert!(stderr(&output).contains(message), "{args:?}: {}", stderr(&output));
    }
}
