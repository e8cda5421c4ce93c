//! The dashboard (`/dashboard`): the tenant's web console, a single page of plain HTML,
//! its ES modules (no build step: `app.js` is the entry and imports the others by
//! relative path) and one stylesheet, built into this binary (`include_str!`), so it
//! deploys, scales and is versioned like every other function, and shares the API's
//! origin (no CORS). The page signs in with an API key kept in the browser session and
//! calls the public API like any client; this function reads no data. `/dashboard/`
//! (with the slash) sends the browser to `/dashboard`.
//!
//! The page and its assets are served `no-cache` with a strong `ETag` (a hash of their
//! text, computed when the binary is compiled), so a browser revalidates each on every
//! load and gets `304 Not Modified` while it is unchanged; the page lists every module as
//! a `modulepreload`, so a browser asks for them all at once rather than import by
//! import.
//!
//! Every answer carries a strict Content-Security-Policy: scripts, styles and API calls
//! from this origin only, no inline script or style, no framing; with card payments
//! configured, Stripe.js's origins are added, as Stripe documents.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

/// Every route of this function (all public: the page itself holds no data).
///
/// `/dashboard/` is not one of them: an HTTP API's route cannot end in `/`, and API
/// Gateway sends `/dashboard/` to the `/dashboard` route with the path as requested, so
/// the function sees it and redirects. `cargo lambda watch` matches paths exactly: its
/// router names `/dashboard/` besides these.
pub const ROUTES: &[(&str, &str)] = &[("GET", "/"), ("GET", "/dashboard"), ("GET", "/dashboard/{asset}")];

/// Where the page is served.
pub const PAGE: &str = "/dashboard";

/// The page's address with a trailing slash, redirected to [`PAGE`]. Not in [`ROUTES`]:
/// see there.
pub const PAGE_WITH_SLASH: &str = "/dashboard/";

/// The dashboard's Content-Security-Policy without card payments: scripts, styles and
/// API calls from this origin only, no framing.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; font-src 'self'; frame-src 'none'; base-uri 'none'; \
     form-action 'self'; frame-ancestors 'none'";

/// Where Stripe.js is served from in production.
pub const STRIPE_JS: &str = "https://js.stripe.com/v3/";

const INDEX: &str = include_str!("../assets/index.html");
const INDEX_TAG: u64 = fnv1a(INDEX);

const JAVASCRIPT: &str = "text/javascript; charset=utf-8";

/// An asset of the page: its file name (its address under `/dashboard/`), its content
/// type, its text and the hash of its text (its `ETag`).
#[derive(Debug)]
struct Asset {
    name: &'static str,
    content_type: &'static str,
    text: &'static str,
    tag: u64,
}

/// The asset `$name` of `assets/`, of content type `$type` (JavaScript by default: an
/// ES module).
macro_rules! asset {
    ($name:literal) => {
        asset!($name, JAVASCRIPT)
    };
    ($name:literal, $type:expr) => {{
        const TEXT: &str = include_str!(concat!("../assets/", $name));
        Asset { name: $name, content_type: $type, text: TEXT, tag: fnv1a(TEXT) }
    }};
}

/// The page's assets under `/dashboard/{asset}`: its stylesheet and its ES modules, all
/// at this one level, as `{asset}` is one path segment and the modules import each other
/// as `./name.js`. Each is served `no-cache`, so a browser never runs a module older than
/// the one that imports it.
const ASSETS: &[Asset] = &[
    asset!("app.css", "text/css; charset=utf-8"),
    asset!("app.js"),
    asset!("api.js"),
    asset!("card.js"),
    asset!("chart.js"),
    asset!("constants.js"),
    asset!("diff.js"),
    asset!("dom.js"),
    asset!("format.js"),
    asset!("live.js"),
    asset!("messages.js"),
    asset!("page-billing.js"),
    asset!("page-bulk.js"),
    asset!("page-execution.js"),
    asset!("page-executions.js"),
    asset!("page-failures.js"),
    asset!("page-keys.js"),
    asset!("page-overview.js"),
    asset!("page-webhooks.js"),
    asset!("page-settings.js"),
    asset!("page-signin.js"),
    asset!("page-workflows.js"),
    asset!("router.js"),
    asset!("session.js"),
    asset!("ui.js"),
];

/// What the page needs to know of the deployment: the Stripe publishable key for card
/// payments (`STRIPE_PUBLISHABLE_KEY`), if one is configured, and where Stripe.js comes
/// from (`STRIPE_JS_URL`, default [`STRIPE_JS`]; the local stack points it at
/// localstripe's stand-in).
#[derive(Debug, Clone)]
pub struct Config {
    /// Stripe's publishable key (`pk_…`), public by design.
    pub stripe_publishable_key: Option<String>,
    /// The address of Stripe.js.
    pub stripe_js_url: String,
}

impl Default for Config {
    fn default() -> Self {
        Self { stripe_publishable_key: None, stripe_js_url: STRIPE_JS.to_owned() }
    }
}

impl Config {
    /// From the environment. A `STRIPE_JS_URL` that is not a plain http(s) address is
    /// ignored (it goes into the Content-Security-Policy).
    #[must_use]
    pub fn from_env() -> Self {
        let key = std::env::var("STRIPE_PUBLISHABLE_KEY").ok().filter(|k| k.starts_with("pk_"));
        let js = std::env::var("STRIPE_JS_URL").ok().filter(|url| origin(url).is_some());
        Self { stripe_publishable_key: key, stripe_js_url: js.unwrap_or_else(|| STRIPE_JS.to_owned()) }
    }

    /// The Content-Security-Policy of every answer: [`CONTENT_SECURITY_POLICY`], and
    /// with card payments configured, Stripe.js's own needs (Stripe's documented list:
    /// its script, its frames, its API), or for a stand-in, its one origin.
    #[must_use]
    pub fn content_security_policy(&self) -> String {
        let Some(stripe) = self.stripe_publishable_key.as_ref().and(origin(&self.stripe_js_url)) else {
            return CONTENT_SECURITY_POLICY.to_owned();
        };
        let (script, frame, connect, img) = if stripe == "https://js.stripe.com" {
            (
                stripe,
                "https://js.stripe.com https://hooks.stripe.com",
                "https://api.stripe.com",
                " https://*.stripe.com",
            )
        } else {
            (stripe, stripe, stripe, "")
        };
        format!(
            "default-src 'none'; script-src 'self' {script}; style-src 'self'; img-src 'self' data:{img}; \
             connect-src 'self' {connect}; font-src 'self'; frame-src {frame}; base-uri 'none'; \
             form-action 'self'; frame-ancestors 'none'"
        )
    }
}

/// The origin (`scheme://host[:port]`) of an http(s) address, if it is a plain one: no
/// user info, no characters that would change a Content-Security-Policy.
fn origin(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"))?;
    let host_len = rest.find('/').unwrap_or(rest.len());
    let host = &rest[..host_len];
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':');
    let path_plain = rest[host_len..].chars().all(|c| c.is_ascii_graphic() && !matches!(c, ';' | ',' | '\'' | '"'));
    (!host.is_empty() && host.chars().all(plain) && path_plain).then(|| &url[..url.len() - rest.len() + host_len])
}

/// The function's router.
pub fn app(config: &Config) -> Router {
    let config_json = serde_json::json!({
        "stripe_publishable_key": &config.stripe_publishable_key,
        "stripe_js_url": &config.stripe_js_url,
    })
    .to_string();
    let policy = HeaderValue::from_str(&config.content_security_policy())
        .unwrap_or_else(|_| HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    Router::new()
        .route("/", get(|| async { Redirect::to(PAGE) }))
        .route(
            PAGE,
            get(|headers: HeaderMap| async move { cached(&headers, "text/html; charset=utf-8", INDEX, INDEX_TAG) }),
        )
        .route(PAGE_WITH_SLASH, get(to_the_page))
        .route(
            "/dashboard/{asset}",
            get(move |Path(asset): Path<String>, headers: HeaderMap| {
                let config_json = config_json.clone();
                async move {
                    if asset == "config.json" {
                        return page("application/json", &config_json, "no-store");
                    }
                    match ASSETS.iter().find(|known| known.name == asset) {
                        Some(known) => cached(&headers, known.content_type, known.text, known.tag),
                        None => (StatusCode::NOT_FOUND, "not found").into_response(),
                    }
                }
            }),
        )
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found").into_response() })
        .layer(axum::middleware::map_response(move |response| secure(response, policy.clone())))
}

fn page(content_type: &'static str, body: &str, cache: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, cache)], body.to_owned()).into_response()
}

/// A built-in text served `no-cache` with its strong `ETag`: `304 Not Modified` (no body)
/// when the request's `If-None-Match` names it.
fn cached(request: &HeaderMap, content_type: &'static str, text: &'static str, tag: u64) -> Response {
    let etag = format!("\"{tag:016x}\"");
    let unchanged = request.get_all(header::IF_NONE_MATCH).iter().any(|value| names(value, &etag));
    let mut response =
        if unchanged { StatusCode::NOT_MODIFIED.into_response() } else { page(content_type, text, "no-cache") };
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    if let Ok(etag) = HeaderValue::from_str(&etag) {
        headers.insert(header::ETAG, etag);
    }
    response
}

/// Whether an `If-None-Match` value names `etag`: `*`, or a list of entity tags one of
/// which equals it by the weak comparison GET uses (RFC 9110, 13.1.2: a `W/` prefix
/// does not matter).
fn names(value: &HeaderValue, etag: &str) -> bool {
    let Ok(value) = value.to_str() else { return false };
    value.trim() == "*" || value.split(',').any(|tag| tag.trim().trim_start_matches("W/") == etag)
}

/// 64-bit FNV-1a of `text`: an asset's version, computed when the binary is compiled (a
/// cache validator, not a digest anyone could want to forge).
const fn fnv1a(text: &str) -> u64 {
    let bytes = text.as_bytes();
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        hash ^= bytes[i] as u64;
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    hash
}

/// `/dashboard/` (an address typed or linked with the slash): a permanent redirect to the
/// page, with the query as it came (the browser keeps the `#` route itself).
async fn to_the_page(uri: Uri) -> Response {
    let location = match uri.query().filter(|query| !query.is_empty()) {
        Some(query) => format!("{PAGE}?{query}"),
        None => PAGE.to_owned(),
    };
    let location = HeaderValue::from_str(&location).unwrap_or_else(|_| HeaderValue::from_static(PAGE));
    (StatusCode::PERMANENT_REDIRECT, [(header::LOCATION, location)]).into_response()
}

/// The security headers of every answer.
async fn secure(mut response: Response, policy: HeaderValue) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, policy);
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // Browsers heed it over HTTPS only (the local stack's plain HTTP is unaffected).
    headers.insert(header::STRICT_TRANSPORT_SECURITY, HeaderValue::from_static("max-age=63072000; includeSubDomains"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(key: Option<&str>, js: &str) -> Config {
        Config { stripe_publishable_key: key.map(str::to_owned), stripe_js_url: js.to_owned() }
    }

    #[test]
    fn the_policy_admits_stripe_only_when_card_payments_are_configured() {
        assert_eq!(with(None, STRIPE_JS).content_security_policy(), CONTENT_SECURITY_POLICY);
        let real = with(Some("pk_live_x"), STRIPE_JS).content_security_policy();
        for part in [
            "script-src 'self' https://js.stripe.com;",
            "frame-src https://js.stripe.com https://hooks.stripe.com;",
            "connect-src 'self' https://api.stripe.com;",
            "frame-ancestors 'none'",
        ] {
            assert!(real.contains(part), "{part} in {real}");
        }
        let local =
            with(Some("pk_test_x"), "http://127.0.0.1:8420/_config/cairn_test/js/v3/").content_security_policy();
        assert!(local.contains("script-src 'self' http://127.0.0.1:8420;"), "{local}");
        assert!(local.contains("connect-src 'self' http://127.0.0.1:8420;"), "{local}");
        assert!(!local.contains("stripe.com"), "{local}");
    }

    #[test]
    fn every_file_in_assets_is_served_and_every_script_is_a_module() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("assets");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .expect("assets")
            .map(|entry| entry.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|name| name != "index.html")
            .collect();
        files.sort();
        let mut served: Vec<String> = ASSETS.iter().map(|asset| asset.name.to_owned()).collect();
        served.sort();
        assert_eq!(files, served, "assets/ vs ASSETS");
        for asset in ASSETS {
            assert_eq!(asset.name.ends_with(".js"), asset.content_type == JAVASCRIPT, "{}", asset.name);
        }
    }

    #[test]
    fn the_page_preloads_every_module_but_its_entry() {
        let preloaded: Vec<&str> = INDEX
            .split("<link rel=\"modulepreload\" href=\"/dashboard/")
            .skip(1)
            .map(|rest| rest.split('"').next().unwrap_or_default())
            .collect();
        let mut modules: Vec<&str> = ASSETS
            .iter()
            .filter(|asset| asset.content_type == JAVASCRIPT && asset.name != "app.js")
            .map(|a| a.name)
            .collect();
        modules.sort_unstable();
        let mut sorted = preloaded.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, modules, "the page's modulepreload links vs the modules");
        assert!(INDEX.contains("<script type=\"module\" src=\"/dashboard/app.js\"></script>"));
    }

    #[test]
    fn each_text_has_its_own_tag_and_if_none_match_names_it_by_weak_comparison() {
        let mut tags: Vec<u64> = ASSETS.iter().map(|asset| asset.tag).chain([INDEX_TAG]).collect();
        tags.sort_unstable();
        tags.dedup();
        assert_eq!(tags.len(), ASSETS.len() + 1, "one tag per text");
        assert_ne!(fnv1a("a"), fnv1a("b"));
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
        let etag = "\"00000000000000ff\"";
        for (value, named) in [
            ("\"00000000000000ff\"", true),
            ("W/\"00000000000000ff\"", true),
            ("\"1\", \"00000000000000ff\"", true),
            ("*", true),
            ("\"00000000000000fe\"", false),
            ("00000000000000ff", false),
            ("", false),
        ] {
            assert_eq!(names(&HeaderValue::from_static(value), etag), named, "{value}");
        }
    }

    #[test]
    fn only_plain_http_addresses_have_an_origin() {
        assert_eq!(origin("https://js.stripe.com/v3/"), Some("https://js.stripe.com"));
        assert_eq!(origin("http://localhost:8420"), Some("http://localhost:8420"));
        for bad in [
            "javascript:alert(1)",
            "https://",
            "https://a b/",
            "https://x.test; script-src *",
            "https://user@x.test/",
            "https://x.test/'unsafe-inline'",
            "ftp://x.test/",
        ] {
            assert_eq!(origin(bad), None, "{bad}");
        }
    }
}
