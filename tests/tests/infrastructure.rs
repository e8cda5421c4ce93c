//! The infrastructure agrees with itself and with the code: routes in `template.yaml`,
//! the watch router, the OpenAPI document and the functions; tables in the template and
//! in DynamoDB; and the tenant-scoping invariant.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use infra::template::{Route, TableSpec, Template};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

type RouteSet = BTreeSet<(String, String, String)>;

fn as_set(routes: impl IntoIterator<Item = Route>) -> RouteSet {
    routes.into_iter().map(|r| (r.method, r.path, r.function)).collect()
}

fn function_routes() -> RouteSet {
    let areas: [(&str, &[(&str, &str)]); 9] = [
        ("workflows", workflows::ROUTES),
        ("executions", executions::ROUTES),
        ("checkpoints", checkpoints::ROUTES),
        ("failures", failures::ROUTES),
        ("billing", billing::ROUTES),
        ("keys", keys::ROUTES),
        ("webhooks", webhooks::ROUTES),
        ("dashboard", dashboard::ROUTES),
        ("mcp", mcp::ROUTES),
    ];
    areas
        .iter()
        .flat_map(|(function, routes)| {
            routes.iter().map(move |(m, p)| ((*m).to_owned(), (*p).to_owned(), (*function).to_owned()))
        })
        .collect()
}

/// Path -> function of the watch router (each path sends every method to one function).
fn watch_paths() -> BTreeSet<(String, String)> {
    let manifest: toml::Table = toml::from_str(&read("Cargo.toml")).expect("Cargo.toml");
    let router = manifest["workspace"]["metadata"]["lambda"]["watch"]["router"].as_table().expect("watch router");
    router
        .iter()
        .map(|(path, function)| (path.clone(), function.as_str().expect("each path names its function").to_owned()))
        .collect()
}

fn openapi_routes() -> BTreeSet<(String, String)> {
    let doc: serde_norway::Value = serde_norway::from_str(&read("infra/openapi.yaml")).expect("openapi.yaml");
    assert_eq!(doc["openapi"].as_str(), Some("3.1.0"));
    let base = "/api/v1";
    let mut routes = BTreeSet::new();
    for (path, item) in doc["paths"].as_mapping().expect("paths") {
        for method in ["get", "put", "post", "delete", "patch"] {
            if item.get(method).is_some() {
                routes.insert((method.to_uppercase(), format!("{base}{}", path.as_str().expect("path"))));
            }
        }
    }
    routes
}

#[test]
fn template_watch_router_openapi_and_functions_serve_the_same_routes() {
    let parsed = Template::embedded().expect("template");
    let template = as_set(parsed.routes().expect("routes"));
    let any = as_set(parsed.any_method_routes().expect("ANY routes"));
    assert!(!template.is_empty());
    assert_eq!(template, function_routes(), "template.yaml vs the functions' ROUTES");
    let paths: BTreeSet<(String, String)> = template.iter().map(|(_, p, f)| (p.clone(), f.clone())).collect();
    let any_paths: BTreeSet<(String, String)> = any.into_iter().map(|(_, p, f)| (p, f)).collect();
    assert_eq!(any_paths, paths, "every path has one ANY route to its function, and no other function serves it");
    // The watch router matches paths exactly; API Gateway also sends `/dashboard/` to the
    // `/dashboard` route (an HTTP API route cannot end in `/`): only the router names it.
    let mut watch = watch_paths();
    let slash = (dashboard::PAGE_WITH_SLASH.to_owned(), "dashboard".to_owned());
    assert!(watch.remove(&slash), "the watch router sends {} to the dashboard", slash.0);
    assert_eq!(watch, paths, "template.yaml vs [workspace.metadata.lambda.watch.router]");
    // The dashboard's page and assets are not API routes: the OpenAPI document is the API's.
    let api: BTreeSet<(String, String)> =
        template.into_iter().filter(|(_, _, f)| f != "dashboard").map(|(m, p, _)| (m, p)).collect();
    assert_eq!(api, openapi_routes(), "template.yaml vs infra/openapi.yaml");
}

#[test]
fn every_function_in_the_template_is_an_arm64_cargo_lambda_build_of_a_workspace_binary() {
    let doc: serde_norway::Value = serde_norway::from_str(&read("template.yaml")).expect("template");
    assert_eq!(doc["Globals"]["Function"]["Runtime"].as_str(), Some("provided.al2023"));
    assert_eq!(doc["Globals"]["Function"]["Architectures"][0].as_str(), Some("arm64"));
    for (id, resource) in doc["Resources"].as_mapping().expect("resources") {
        if resource["Type"].as_str() != Some("AWS::Serverless::Function") {
            continue;
        }
        assert_eq!(resource["Metadata"]["BuildMethod"].as_str(), Some("rust-cargolambda"), "{id:?}");
        let binary = resource["Metadata"]["BuildProperties"]["Binary"].as_str().expect("binary");
        assert!(root().join("functions").join(binary).join("Cargo.toml").exists(), "functions/{binary}");
    }
}

/// One list of functions: the template's binaries are every crate under `functions/`,
/// and the scripts that build or compare every function (`make build`,
/// `make independent-builds`) take them from the template (`template_functions` in
/// `infra/scripts/lib.sh`), which lists exactly those, rather than from a list of their own.
#[test]
fn the_build_scripts_build_every_function_of_the_template() {
    let doc: serde_norway::Value = serde_norway::from_str(&read("template.yaml")).expect("template");
    let binaries: BTreeSet<String> = doc["Resources"]
        .as_mapping()
        .expect("resources")
        .values()
        .filter(|r| r["Type"].as_str() == Some("AWS::Serverless::Function"))
        .map(|r| r["Metadata"]["BuildProperties"]["Binary"].as_str().expect("binary").to_owned())
        .collect();
    let crates: BTreeSet<String> = std::fs::read_dir(root().join("functions"))
        .expect("functions/")
        .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(binaries, crates, "template.yaml's functions vs functions/");
    let listed = std::process::Command::new("bash")
        .arg("-c")
        .arg("source infra/scripts/lib.sh && template_functions")
        .current_dir(root())
        .output()
        .expect("bash");
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let listed: Vec<String> = String::from_utf8_lossy(&listed.stdout).lines().map(str::to_owned).collect();
    assert_eq!(listed.iter().cloned().collect::<BTreeSet<_>>(), binaries, "template_functions");
    assert_eq!(listed.len(), binaries.len(), "each once: {listed:?}");
    for script in ["infra/scripts/build.sh", "infra/scripts/independent_builds.sh"] {
        let text = read(script);
        assert!(text.contains("template_functions"), "{script} takes the functions from the template");
        let own_list = text.lines().any(|line| line.contains("workflows executions") || line.contains("dispatcher"));
        assert!(!own_list, "{script} lists functions of its own");
    }
}

/// Every Rust source file of the function and domain crates, with its text.
fn function_and_domain_sources() -> Vec<(PathBuf, String)> {
    let mut sources = Vec::new();
    let mut stack = vec![root().join("functions"), root().join("domain")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("source");
                sources.push((path, text));
            }
        }
    }
    sources
}

#[test]
fn only_authentication_and_the_admin_tool_make_a_tenant_id() {
    let offenders: Vec<String> = function_and_domain_sources()
        .into_iter()
        .filter(|(path, text)| {
            text.contains("trusted::")
                || text.contains("auth::trusted")
                // The owner of a stored record: only where the janitor's list of
                // unfinished deletions is read, from each marker's own partition, and
                // where the dispatcher's outbox items and deliveries are read, and where
                // the jobs function reads a job's, an export's or an expiry marker's stream record,
                // where the executions ended before retention are found, and where the
                // janitor reads the deletions tenants asked for (each record written for the
                // authenticated tenant that asked), and where the failure-groups migration
                // counts each failure in its group (the failure's own partition).
                || (text.contains("stored::owner")
                    && !path.ends_with("domain/src/runs/deletion.rs")
                    && !path.ends_with("domain/src/webhooks/deliveries.rs")
                    && !path.ends_with("domain/src/runs/bulk/mod.rs")
                    && !path.ends_with("domain/src/runs/export/store.rs")
                    && !path.ends_with("domain/src/runs/expiry.rs")
                    && !path.ends_with("domain/src/runs/failures/store.rs")
                    && !path.ends_with("domain/src/erasure.rs"))
        })
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert!(offenders.is_empty(), "function and domain code must not forge a TenantId: {offenders:?}");
}

/// A function builds its DynamoDB client from the environment alone
/// (`shared::dynamo::client`); the SDK's default chains, about 0.34 MB of every zipped
/// bootstrap, are for `cairn-admin` only (docs/deploying.md, "Build").
#[test]
fn functions_do_not_link_the_sdks_default_credential_chains() {
    let offenders: Vec<String> = function_and_domain_sources()
        .into_iter()
        .filter(|(_, text)| text.contains("client_with_default_chain") || text.contains("aws_config"))
        .map(|(path, _)| path.display().to_string())
        .collect();
    assert!(offenders.is_empty(), "function and domain code must build clients with shared::dynamo: {offenders:?}");
    for entry in std::fs::read_dir(root().join("functions")).expect("functions") {
        let name = entry.expect("entry").file_name().to_string_lossy().into_owned();
        assert!(
            !dependencies(&format!("functions/{name}")).contains("aws-config"),
            "functions/{name} names aws-config"
        );
    }
    assert!(!dependencies("domain").contains("aws-config"), "domain names aws-config");
}

/// The normal dependencies a crate's manifest names.
fn dependencies(crate_dir: &str) -> BTreeSet<String> {
    let manifest: toml::Table = toml::from_str(&read(&format!("{crate_dir}/Cargo.toml"))).expect("manifest");
    manifest.get("dependencies").and_then(toml::Value::as_table).expect("[dependencies]").keys().cloned().collect()
}

#[test]
fn functions_depend_on_the_domain_and_shared_never_on_each_other() {
    let functions: BTreeSet<String> = std::fs::read_dir(root().join("functions"))
        .expect("functions/")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert!(functions.len() >= 5, "{functions:?}");
    for function in &functions {
        let deps = dependencies(&format!("functions/{function}"));
        let sideways: Vec<_> = deps.intersection(&functions).collect();
        assert!(sideways.is_empty(), "functions/{function} depends on the function crates {sideways:?}");
        assert!(deps.contains("shared"), "functions/{function}: {deps:?}");
        // Every function with data reaches it through the domain; the dashboard has none.
        assert_eq!(deps.contains("domain"), function != "dashboard", "functions/{function}: {deps:?}");
        assert!(!deps.contains("reqwest"), "functions/{function}: one HTTP stack, the AWS SDK's");
        assert_eq!(
            deps.contains("hyper-rustls"),
            function == "billing" || function == "dispatcher",
            "only billing (Stripe) and the dispatcher (webhooks) talk HTTP to others"
        );
    }
    for layer in ["domain", "shared", "infra"] {
        let deps = dependencies(layer);
        assert!(deps.is_disjoint(&functions), "{layer} depends on a function crate: {deps:?}");
        assert!(!deps.contains("reqwest") && !deps.contains("hyper-rustls"), "{layer} must not link an HTTP client");
    }
    assert!(!dependencies("shared").contains("domain"), "shared sits below the domain");
}

fn normalized(mut spec: TableSpec) -> TableSpec {
    spec.attributes.sort();
    spec.indexes.sort_by(|a, b| a.name.cmp(&b.name));
    spec
}

#[tokio::test]
async fn the_local_tables_are_exactly_the_templates() {
    let env = api_tests::env().await;
    let prefix = format!("tables-{}-", uuid_like());
    let created = infra::tables::create_missing(&env.client, &prefix).await.expect("create");
    let specs = Template::embedded().expect("template").tables().expect("tables");
    assert_eq!(created.len(), specs.len());
    for spec in specs {
        let name = format!("{prefix}{}", spec.suffix);
        let actual =
            infra::tables::describe(&env.client, &name, &spec.logical_id, &spec.suffix).await.expect("describe");
        assert_eq!(normalized(actual), normalized(spec.clone()), "{name}");
    }
    let again = infra::tables::create_missing(&env.client, &prefix).await.expect("idempotent");
    assert!(again.is_empty(), "a second run creates nothing");
}

fn uuid_like() -> String {
    shared::ids::TenantKey::generate().as_str().trim_start_matches("ten_").to_owned()
}
