//! The dashboard (`/dashboard`): the tenant's web console, a single page of plain HTML,
//! one ES module and one stylesheet built into this binary (`include_str!`), so it
//! deploys, scales and is versioned like every other function, and shares the API's
//! origin (no CORS). The page signs in with an API key kept in the browser session and
//! calls the public API like any client; this function reads no data.
//!
//! Every answer carries a strict Content-Security-Policy: scripts, styles and API calls
//! from this origin only, no inline script or style, no framing.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

/// Every route of this function (all public: the page itself holds no data).
pub const ROUTES: &[(&str, &str)] = &[("GET", "/"), ("GET", "/dashboard"), ("GET", "/dashboard/{asset}")];

/// The dashboard's Content-Security-Policy.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";

const INDEX: &str = include_str!("../assets/index.html");
const SCRIPT: &str = include_str!("../assets/app.js");
const STYLE: &str = include_str!("../assets/app.css");

/// What the page needs to know of the deployment: the Stripe publishable key for card
/// payments (`STRIPE_PUBLISHABLE_KEY`), if one is configured.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Stripe's publishable key (`pk_…`), public by design.
    pub stripe_publishable_key: Option<String>,
}

impl Config {
    /// From the environment.
    #[must_use]
    pub fn from_env() -> Self {
        let key = std::env::var("STRIPE_PUBLISHABLE_KEY").ok().filter(|k| k.starts_with("pk_"));
        Self { stripe_publishable_key: key }
    }
}

/// The function's router.
pub fn app(config: &Config) -> Router {
    let config_json = serde_json::json!({ "stripe_publishable_key": &config.stripe_publishable_key }).to_string();
    Router::new()
        .route("/", get(|| async { Redirect::to("/dashboard") }))
        .route("/dashboard", get(|| async { page("text/html; charset=utf-8", INDEX, "no-cache") }))
        .route(
            "/dashboard/{asset}",
            get(move |Path(asset): Path<String>| {
                let config_json = config_json.clone();
                async move {
                    match asset.as_str() {
                        "app.js" => page("text/javascript; charset=utf-8", SCRIPT, "no-cache"),
                        "app.css" => page("text/css; charset=utf-8", STYLE, "no-cache"),
                        "config.json" => page("application/json", &config_json, "no-store"),
                        _ => (StatusCode::NOT_FOUND, "not found").into_response(),
                    }
                }
            }),
        )
        .fallback(|| async { (StatusCode::NOT_FOUND, "not found").into_response() })
        .layer(axum::middleware::map_response(secure))
}

fn page(content_type: &'static str, body: &str, cache: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, cache)], body.to_owned()).into_response()
}

/// The security headers of every answer.
async fn secure(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    response
}
