//! The dashboard function: the page and its assets (every ES module the page imports),
//! `/` and `/dashboard/` sending browsers there, and the security headers on every
//! answer. In process and through `cargo lambda watch` (the page's behaviour in a real
//! browser is tests/browser).

use std::collections::BTreeSet;

use axum::body::Body;
use http::{Method, Request, StatusCode, header};
use tower::ServiceExt;

struct Answer {
    status: StatusCode,
    headers: http::HeaderMap,
    body: String,
}

async fn in_process(method: Method, path: String) -> Answer {
    in_process_if_none_match(method, path, None).await
}

async fn in_process_if_none_match(method: Method, path: String, tag: Option<String>) -> Answer {
    let app = dashboard::app(&dashboard::Config::from_env());
    let mut request = Request::builder().method(method).uri(path);
    if let Some(tag) = tag {
        request = request.header(header::IF_NONE_MATCH, tag);
    }
    let request = request.body(Body::empty()).expect("request");
    let response = app.oneshot(request).await.expect("answer");
    let (parts, body) = response.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.expect("body");
    Answer { status: parts.status, headers: parts.headers, body: String::from_utf8_lossy(&body).into_owned() }
}

async fn over_http(method: Method, path: String) -> Answer {
    over_http_if_none_match(method, path, None).await
}

async fn over_http_if_none_match(method: Method, path: String, tag: Option<String>) -> Answer {
    let url = std::env::var("CAIRN_API_URL").expect("CAIRN_API_URL is set by make test");
    let origin = url.strip_suffix("/api/v1").unwrap_or(&url).to_owned();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(60))
        .build()
        .expect("client");
    // Sent again on `cargo lambda watch`'s own 500, which it answers now and then when
    // it loses a function's answer (API Gateway does not), as the harness does.
    let mut pauses = api_tests::EMULATOR_RESENDS.iter();
    loop {
        let mut request = client.request(method.clone(), format!("{origin}{path}"));
        if let Some(tag) = &tag {
            request = request.header(header::IF_NONE_MATCH, tag);
        }
        let response = request.send().await.expect("the local API answers");
        let (status, headers) = (response.status(), response.headers().clone());
        let body = response.text().await.expect("body");
        let lost = status == StatusCode::INTERNAL_SERVER_ERROR && body.starts_with(api_tests::EMULATOR_500);
        if let Some(pause) = pauses.next().filter(|_| lost) {
            tokio::time::sleep(*pause).await;
            continue;
        }
        return Answer { status, headers, body };
    }
}

async fn serves_the_page_its_assets_and_the_redirect<F, Fut>(send: F)
where
    F: Fn(Method, String) -> Fut,
    Fut: std::future::Future<Output = Answer>,
{
    let get = |method: Method, path: &str| send(method, path.to_owned());
    let expected = dashboard::Config::from_env();
    let page = get(Method::GET, "/dashboard").await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.headers[header::CONTENT_TYPE].to_str().expect("type").starts_with("text/html"));
    assert!(page.body.contains("/dashboard/app.js") && page.body.contains("/dashboard/app.css"), "{}", page.body);
    assert!(!page.body.contains("<script>") && !page.body.contains(" style="), "no inline script or style");
    for answer in [&page, &get(Method::GET, "/dashboard/app.js").await, &get(Method::GET, "/dashboard/nope").await] {
        let csp = answer.headers.get(header::CONTENT_SECURITY_POLICY);
        let csp = csp.unwrap_or_else(|| panic!("no CSP on {} {}", answer.status, answer.body)).to_str().expect("csp");
        // The stack's settings are the test's: `make test` configures card payments.
        assert_eq!(csp, expected.content_security_policy());
        assert!(csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"));
        assert_eq!(answer.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
        // Once a browser has seen the dashboard over HTTPS, it never asks over HTTP.
        assert_eq!(answer.headers[header::STRICT_TRANSPORT_SECURITY], "max-age=63072000; includeSubDomains");
    }
    let script = get(Method::GET, "/dashboard/app.js").await;
    assert_eq!(script.status, StatusCode::OK);
    assert!(script.headers[header::CONTENT_TYPE].to_str().expect("type").starts_with("text/javascript"));
    let style = get(Method::GET, "/dashboard/app.css").await;
    assert!(style.headers[header::CONTENT_TYPE].to_str().expect("type").starts_with("text/css"));
    let config = get(Method::GET, "/dashboard/config.json").await;
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&config.body).expect("json"),
        serde_json::json!({
            "stripe_publishable_key": expected.stripe_publishable_key,
            "stripe_js_url": expected.stripe_js_url,
        })
    );
    let root = get(Method::GET, "/").await;
    assert!(root.status.is_redirection(), "{}", root.status);
    assert_eq!(root.headers[header::LOCATION], "/dashboard");
    assert_eq!(get(Method::GET, "/dashboard/secrets.txt").await.status, StatusCode::NOT_FOUND);
    assert_eq!(get(Method::POST, "/dashboard").await.status, StatusCode::METHOD_NOT_ALLOWED);
}

#[tokio::test]
async fn in_process_the_page_its_assets_and_the_redirect() {
    serves_the_page_its_assets_and_the_redirect(in_process).await;
}

#[tokio::test]
async fn over_http_the_page_its_assets_and_the_redirect() {
    serves_the_page_its_assets_and_the_redirect(over_http).await;
}

/// `/dashboard/` (with the slash) is a permanent redirect to the page, its query kept.
async fn the_slash_redirects_to_the_page<F, Fut>(get: F)
where
    F: Fn(Method, String) -> Fut,
    Fut: std::future::Future<Output = Answer>,
{
    for (path, location) in [("/dashboard/", "/dashboard"), ("/dashboard/?from=mail&x=1", "/dashboard?from=mail&x=1")] {
        let answer = get(Method::GET, path.to_owned()).await;
        assert_eq!(answer.status, StatusCode::PERMANENT_REDIRECT, "{path}: {}", answer.body);
        assert_eq!(answer.headers[header::LOCATION], location, "{path}");
        assert_eq!(answer.headers[header::X_CONTENT_TYPE_OPTIONS], "nosniff", "{path}");
    }
}

#[tokio::test]
async fn in_process_the_slash_redirects_to_the_page() {
    the_slash_redirects_to_the_page(in_process).await;
}

#[tokio::test]
async fn over_http_the_slash_redirects_to_the_page() {
    the_slash_redirects_to_the_page(over_http).await;
}

/// The page and each asset carry a strong `ETag`, the same on every answer: sent back in
/// `If-None-Match` (alone, weak, in a list, or `*`) it gets `304 Not Modified` without a
/// body, still `no-cache`; another tag gets the whole text again.
async fn unchanged_texts_are_not_sent_again<F, Fut>(get: F)
where
    F: Fn(Method, String, Option<String>) -> Fut,
    Fut: std::future::Future<Output = Answer>,
{
    for path in ["/dashboard", "/dashboard/app.js", "/dashboard/page-keys.js", "/dashboard/app.css"] {
        let first = get(Method::GET, path.to_owned(), None).await;
        assert_eq!(first.status, StatusCode::OK, "{path}");
        let etag = first.headers[header::ETAG].to_str().expect("etag").to_owned();
        assert!(etag.starts_with('"') && etag.ends_with('"') && etag.len() > 2, "{path}: a strong tag, {etag}");
        let again = get(Method::GET, path.to_owned(), None).await;
        assert_eq!(again.headers[header::ETAG], etag.as_str(), "{path}: the same tag every time");
        assert_eq!(again.body, first.body);
        for named in [etag.clone(), format!("W/{etag}"), format!("\"0\", {etag}"), "*".to_owned()] {
            let answer = get(Method::GET, path.to_owned(), Some(named.clone())).await;
            assert_eq!(answer.status, StatusCode::NOT_MODIFIED, "{path} with {named}");
            assert!(answer.body.is_empty(), "{path} with {named}: no body");
            assert_eq!(answer.headers[header::ETAG], etag.as_str());
            assert_eq!(answer.headers[header::CACHE_CONTROL], "no-cache");
        }
        let other = get(Method::GET, path.to_owned(), Some("\"0000000000000000\"".to_owned())).await;
        assert_eq!(other.status, StatusCode::OK, "{path}: another tag");
        assert_eq!(other.body, first.body);
    }
    let config = get(Method::GET, "/dashboard/config.json".to_owned(), Some("*".to_owned())).await;
    assert_eq!(config.status, StatusCode::OK, "the deployment's settings are never cached");
}

#[tokio::test]
async fn in_process_unchanged_texts_are_not_sent_again() {
    unchanged_texts_are_not_sent_again(in_process_if_none_match).await;
}

#[tokio::test]
async fn over_http_unchanged_texts_are_not_sent_again() {
    unchanged_texts_are_not_sent_again(over_http_if_none_match).await;
}

/// The addresses a module's text imports (`import … from './x.js'`, `import './x.js'`),
/// resolved against `/dashboard/`. Every import must be one of these relative ones.
fn imports_of(module: &str, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for keyword in ["from ", "import "] {
        for (at, _) in text.match_indices(keyword) {
            let rest = &text[at + keyword.len()..];
            let Some(quote) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') else { continue };
            let specifier = rest[1..].split(quote).next().unwrap_or_default();
            let name = specifier.strip_prefix("./");
            let name = name.unwrap_or_else(|| panic!("{module} imports {specifier:?}: not a module beside it"));
            assert!(!name.contains('/'), "{module} imports {specifier:?}: not at /dashboard/'s one level");
            found.push(format!("/dashboard/{name}"));
        }
    }
    found
}

/// Every ES module the page loads, followed import by import from index.html's entry
/// module, is served as JavaScript (a module missing from the function breaks the page).
async fn every_module_the_page_imports_is_served<F, Fut>(get: F)
where
    F: Fn(Method, String) -> Fut,
    Fut: std::future::Future<Output = Answer>,
{
    let page = get(Method::GET, "/dashboard".to_owned()).await;
    let entry = r#"<script type="module" src="/dashboard/app.js"></script>"#;
    assert!(page.body.contains(entry), "index.html loads app.js as a module: {}", page.body);
    assert_eq!(page.body.matches("<script").count(), 1, "one script, the entry module");
    let mut seen = BTreeSet::new();
    let mut next = vec!["/dashboard/app.js".to_owned()];
    while let Some(path) = next.pop() {
        if !seen.insert(path.clone()) {
            continue;
        }
        let module = get(Method::GET, path.clone()).await;
        assert_eq!(module.status, StatusCode::OK, "{path}: {}", module.body);
        let content_type = module.headers[header::CONTENT_TYPE].to_str().expect("type");
        assert!(content_type.starts_with("text/javascript"), "{path}: {content_type}");
        assert_eq!(module.headers[header::CACHE_CONTROL], "no-cache", "{path}");
        next.extend(imports_of(&path, &module.body));
    }
    for module in ["/dashboard/router.js", "/dashboard/api.js", "/dashboard/page-signin.js", "/dashboard/page-keys.js"]
    {
        assert!(seen.contains(module), "{module} among {seen:?}");
    }
}

#[tokio::test]
async fn in_process_every_module_the_page_imports_is_served() {
    every_module_the_page_imports_is_served(in_process).await;
}

#[tokio::test]
async fn over_http_every_module_the_page_imports_is_served() {
    every_module_the_page_imports_is_served(over_http).await;
}

#[test]
fn a_publishable_key_reaches_the_page_and_the_policy_admits_stripe_js() {
    let config = dashboard::Config {
        stripe_publishable_key: Some("pk_test_123".to_owned()),
        stripe_js_url: "http://127.0.0.1:8420/_config/cairn_test/js/v3/".to_owned(),
    };
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    let (policy, body) = runtime.block_on(async {
        let app = dashboard::app(&config);
        let request = Request::builder().uri("/dashboard/config.json").body(Body::empty()).expect("request");
        let response = app.oneshot(request).await.expect("answer");
        let policy = response.headers()[header::CONTENT_SECURITY_POLICY].to_str().expect("csp").to_owned();
        (policy, axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body"))
    });
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&body).expect("json"),
        serde_json::json!({
            "stripe_publishable_key": "pk_test_123",
            "stripe_js_url": "http://127.0.0.1:8420/_config/cairn_test/js/v3/",
        })
    );
    assert!(policy.contains("script-src 'self' http://127.0.0.1:8420;"), "{policy}");
    assert!(policy.contains("connect-src 'self' http://127.0.0.1:8420;"), "{policy}");
    assert!(policy.contains("frame-ancestors 'none'"), "{policy}");
}
