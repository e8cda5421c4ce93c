//! The dashboard (`/dashboard`): the tenant's web console, a single page of plain HTML,
//! its ES modules (no build step: `app.js` is the entry and imports the others by
//! relative path) and one stylesheet, built into this binary (`include_str!`), so it
//! deploys, scales and is versioned like every other function, and shares the API's
//! origin (no CORS). The page signs in with an API key kept in the browser session and
//! calls the public API like any client; this function reads no data. `/dashboard/`
//! (with the slash) sends the browser to `/dashboard`.
//!
//! Every answer carries a strict Content-Security-Policy: scripts, styles and API calls
//! from this origin only, no inline script or style, no framing; with card payments
//! configured, Stripe.js's origins are added, as Stripe documents.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, Uri, header};
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

const JAVASCRIPT: &str = "text/javascript; charset=utf-8";

/// An ES module of the page: its file name (its address under `/dashboard/`), its
/// content type and its text.
macro_rules! module {
    ($name:literal) => {
        ($name, JAVASCRIPT, include_str!(concat!("../assets/", $name)))
    };
}

/// The page's assets under `/dashboard/{asset}` (name, content type, text): its
/// stylesheet and its ES modules, all at this one level, as `{asset}` is one path segment
/// and the modules import each other as `./name.js`. Each is served `no-cache`, so a
/// browser never runs a module older than the one that imports it.
const ASSETS: &[(&str, &str, &str)] = &[
    ("app.css", "text/css; charset=utf-8", include_str!("../assets/app.css")),
    module!("app.js"),
    module!("api.js"),
    module!("card.js"),
    module!("constants.js"),
    module!("dom.js"),
    module!("format.js"),
    module!("messages.js"),
    module!("page-billing.js"),
    module!("page-execution.js"),
    module!("page-executions.js"),
    module!("page-failures.js"),
    module!("page-keys.js"),
    module!("page-signin.js"),
    module!("page-workflows.js"),
    module!("router.js"),
    module!("session.js"),
    module!("ui.js"),
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
        .route(PAGE, get(|| async { page("text/html; charset=utf-8", INDEX, "no-cache") }))
        .route(PAGE_WITH_SLASH, get(to_the_page))
        .route(
            "/dashboard/{asset}",
            get(move |Path(asset): Path<String>| {
                let config_json = config_json.clone();
                async move {
                    if asset == "config.json" {
                        return page("application/json", &config_json, "no-store");
                    }
                    match ASSETS.iter().find(|(name, _, _)| *name == asset) {
                        Some((_, content_type, text)) => page(content_type, text, "no-cache"),
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
        let mut served: Vec<String> = ASSETS.iter().map(|(name, _, _)| (*name).to_owned()).collect();
        served.sort();
        assert_eq!(files, served, "assets/ vs ASSETS");
        for (name, content_type, _) in ASSETS {
            assert_eq!(name.ends_with(".js"), *content_type == JAVASCRIPT, "{name}: {content_type}");
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
