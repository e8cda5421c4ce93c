//! The HTTP edge every function shares: request ids, one access log line per request,
//! panic safety, authentication, problem+json for unknown routes, and the Lambda
//! entry point.

use std::time::Instant;

use axum::Router;
use axum::extract::{MatchedPath, Request, State};
use axum::middleware::{Next, from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use http::HeaderValue;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::compression::CompressionLayer;

use crate::TenantId;
use crate::auth::AuthState;
use crate::error::ApiError;

pub use crate::BASE_PATH;

/// `response` (a 201) with `Location: /api/v1/<path>`, where the new resource is.
///
/// # Errors
/// 500 if the path cannot be a header value (ids are ASCII, so it always can).
pub fn located(mut response: Response, path: &str) -> Result<Response, ApiError> {
    let location = HeaderValue::from_str(&format!("{BASE_PATH}/{path}")).map_err(ApiError::internal)?;
    response.headers_mut().insert(http::header::LOCATION, location);
    Ok(response)
}

/// The header CloudFront adds to every request it forwards.
pub const ORIGIN_HEADER: &str = "x-origin-verify";

/// Refuses requests that did not come through the edge (when a secret is configured),
/// comparing digests so the comparison takes the same time for every wrong value.
async fn verify_origin(State(secret): State<Option<String>>, request: Request, next: Next) -> Response {
    if let Some(secret) = secret {
        use sha2::{Digest, Sha256};
        let sent = request.headers().get(ORIGIN_HEADER).map(|v| Sha256::digest(v.as_bytes()));
        if sent != Some(Sha256::digest(secret.as_bytes())) {
            return ApiError::NoRoute(request.uri().path().to_owned()).into_response();
        }
    }
    next.run(request).await
}

/// Wraps an area's routes in the shared edge: authentication, then the decoding of a
/// gzip body (never before the key is known good) and `Idempotency-Key` handling on
/// every route; panic safety, gzip for clients that accept it, request ids,
/// `Cache-Control: no-store` and the access log around everything. Unknown paths and
/// methods get problem+json too.
pub fn api(routes: Router, auth: AuthState) -> Router {
    api_with_public(routes, Router::new(), auth)
}

/// Like [`api`], with `public` routes that authenticate themselves (the Stripe
/// webhook, by its signature) and so are served without an API key.
pub fn api_with_public(routes: Router, public: Router, auth: AuthState) -> Router {
    let origin_secret = auth.origin_secret.clone();
    routes
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(from_fn_with_state(auth.clone(), crate::idempotency::layer))
        .layer(from_fn(crate::body::decode_gzip))
        .layer(from_fn_with_state(auth, require_api_key))
        .merge(public.method_not_allowed_fallback(method_not_allowed))
        .layer(from_fn_with_state(origin_secret, verify_origin))
        .layer(CatchPanicLayer::custom(panic_response))
        .layer(CompressionLayer::new())
        .layer(from_fn(request_context))
}

async fn no_route(uri: http::Uri) -> ApiError {
    ApiError::NoRoute(uri.path().to_owned())
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}

fn panic_response(_panic: Box<dyn std::any::Any + Send + 'static>) -> Response {
    ApiError::internal("handler panicked").into_response()
}

async fn require_api_key(State(auth): State<AuthState>, mut request: Request, next: Next) -> Response {
    let Some(hash) = crate::auth::presented_hash(request.headers()) else {
        return ApiError::Unauthorized.into_response();
    };
    // On a warm instance that has seen this key live, the request's own work starts at
    // once, read or write, and the key is proven live beside it: by the keys epoch of the
    // tenant's rate-limit standing, read anyway, when the key was proven live at that
    // epoch (no read of the key), else by a read of the key's item. A write's
    // transaction carries a condition on the key's item as well ([`crate::gate`]). So a
    // revoked key writes nothing and is refused on its very next request. Otherwise the
    // key is read first.
    let known = auth.known.get(&hash).filter(|grant| !grant.expired(chrono::Utc::now()));
    let check_later = known.is_some();
    let grant = match known {
        Some(grant) => grant,
        None => match crate::auth::grant_of(&auth.client, &auth.tables, &hash).await {
            Ok(grant) => {
                auth.known.remember(&hash, &grant, None);
                grant
            }
            Err(error) => {
                auth.known.forget(&hash);
                return error.into_response();
            }
        },
    };
    let tenant = grant.tenant.clone();
    // Refused before any work: outside the key's scopes, or in a window this instance
    // counted full. A key known from this instance's memory is read first, so that a
    // revoked one is told 401.
    if let Some(refusal) = refusal(&auth, &grant, &request) {
        if check_later && let Err(error) = crate::auth::grant_of(&auth.client, &auth.tables, &hash).await {
            auth.known.forget(&hash);
            return error.into_response();
        }
        return refusal;
    }
    request.extensions_mut().insert(tenant.clone());
    request.extensions_mut().insert(grant.scopes.clone());
    let gate = crate::gate::Gate::new(auth.clone(), tenant.clone(), (hash.clone(), grant.expires_at), !check_later);
    // The epoch of a count or look finished before the key's read is sent below: if the
    // read finds the key live, the key is live at that epoch.
    let (live_at, epoch_before) = (auth.known.live_at(&hash), auth.known.epoch(&tenant));
    let verify = async {
        if !check_later {
            return Ok(());
        }
        let since = match live_at {
            Some(live_at) => {
                let looked = gate.standing().await.and_then(|standing| standing.keys_epoch);
                if looked == Some(live_at) {
                    return Ok(());
                }
                // A key of the tenant was revoked since (or the look failed): the
                // key's read, sent after the look, proves it live at the new epoch.
                looked
            }
            None => epoch_before,
        };
        let sent = std::time::SystemTime::now();
        match crate::auth::grant_of(&auth.client, &auth.tables, &hash).await {
            Ok(live) if live.tenant == tenant => {
                auth.known.remember(&hash, &live, since.map(|epoch| (epoch, sent)));
                Ok(())
            }
            Ok(_) => Err(ApiError::Unauthorized),
            Err(error) => Err(error),
        }
    };
    // The look at the rate-limit standing runs beside the work too (a write waits for it
    // before it commits unless the instance's last count left room); the request is
    // counted after its answer, so a tenant may overshoot its limit by the requests
    // answered and not yet counted (docs/rate-limits.md). The work is polled first: its
    // first read, when it is a GetItem or a small batch read sent at once, carries the
    // look in its own call ([`crate::gate::Gate::carry`]); else the look is sent alone
    // beside it.
    let (response, (standing, verified)) = tokio::join!(
        biased;
        crate::gate::scope(gate.clone(), next.run(request)),
        async { tokio::join!(gate.standing(), verify) }
    );
    let mut response = match gate.outcome() {
        // Committed with the key proven live for the request: the write's answer stands.
        crate::gate::Outcome::Written => response,
        crate::gate::Outcome::Refused(crate::gate::Refusal::KeyRevoked) => {
            auth.known.forget(&hash);
            gate.give_back();
            return ApiError::Unauthorized.into_response();
        }
        // A refused key is told so before a used-up limit.
        crate::gate::Outcome::Refused(crate::gate::Refusal::RateLimited { retry_after }) => match verified {
            Err(error) => {
                auth.known.forget(&hash);
                gate.give_back();
                return error.into_response();
            }
            Ok(()) => ApiError::RateLimited { retry_after }.into_response(),
        },
        // (The edge's gate refuses for the key and the limit only.)
        crate::gate::Outcome::Open
        | crate::gate::Outcome::Refused(crate::gate::Refusal::IdempotencyHeld | crate::gate::Refusal::Marked) => {
            match (verified, standing) {
                (Err(error), _) => {
                    auth.known.forget(&hash);
                    gate.give_back();
                    return error.into_response();
                }
                (Ok(()), Some(standing)) if standing.exceeded => {
                    ApiError::RateLimited { retry_after: standing.reset }.into_response()
                }
                (Ok(()), _) => response,
            }
        }
    };
    if let Some(standing) = standing {
        standing.write_headers(response.headers_mut());
    }
    // Served (not refused with 401 or 429): counted once the answer is out. A refused
    // request (here or above, where the key is refused) gives its token back.
    let refused = matches!(response.status(), http::StatusCode::UNAUTHORIZED | http::StatusCode::TOO_MANY_REQUESTS);
    if refused {
        gate.give_back();
    }
    if let Some(count) = gate.count().filter(|_| !refused) {
        let request_id = crate::request_id::current();
        response.extensions_mut().insert(crate::lambda::AfterAnswer::new(crate::request_id::scope(request_id, count)));
    }
    response.extensions_mut().insert(tenant);
    response
}

/// The answer to a request refused before its work: 403 outside the key's scopes; 429
/// in a window this instance counted full (a window is only ever filled).
fn refusal(auth: &AuthState, grant: &crate::auth::Grant, request: &Request) -> Option<Response> {
    if let Some(needed) = crate::scopes::needed(request.method(), request.uri().path())
        && !grant.scopes.allows(needed)
    {
        return Some(ApiError::InsufficientScope(needed.to_string()).into_response());
    }
    let now = chrono::Utc::now().timestamp();
    let window = now.div_euclid(60);
    if auth.rate_limit == 0
        || auth.known.room(&grant.tenant, window) != Some(0)
        || auth.known.has_token(&grant.tenant, window)
    {
        return None;
    }
    let standing = crate::rate_limit::Standing::used_up(auth.rate_limit, now);
    let mut response = ApiError::RateLimited { retry_after: standing.reset }.into_response();
    standing.write_headers(response.headers_mut());
    response.extensions_mut().insert(grant.tenant.clone());
    Some(response)
}

async fn request_context(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let request_id = request
        .extensions()
        .get::<lambda_http::Context>()
        .map(|context| context.request_id.clone())
        .filter(|id| !id.is_empty())
        .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
    let method = request.method().clone();
    let route =
        request.extensions().get::<MatchedPath>().map_or_else(|| "-".to_owned(), |path| path.as_str().to_owned());
    let (mut response, usage) =
        crate::metering::metered(crate::request_id::scope(request_id.clone(), next.run(request))).await;
    let capacity = usage.capacity;
    if let Ok(value) = HeaderValue::from_str(&request_id) {
        response.headers_mut().insert("x-request-id", value);
    }
    // Every answer is one tenant's data (or about its key): no cache, shared or private,
    // may keep it.
    response.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    let tenant = response.extensions().get::<TenantId>().map(|t| t.as_str().to_owned());
    let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
    let status = response.status().as_u16();
    tracing::info!(
        request_id,
        tenant = tenant.as_deref().unwrap_or("-"),
        method = %method,
        route,
        status,
        latency_ms,
        dynamodb_capacity = capacity,
        "request"
    );
    let route = format!("{method} {route}");
    crate::metering::publish(&crate::metering::RequestMetrics {
        request_id: &request_id,
        route: &route,
        status,
        latency_ms,
        capacity,
    });
    response
}

/// Sets up JSON or text logs as Lambda's advanced logging controls say: JSON when
/// `AWS_LAMBDA_LOG_FORMAT` is `JSON`, at the level of `AWS_LAMBDA_LOG_LEVEL` (else
/// `RUST_LOG`, a plain level; else INFO). Lambda adds the time itself. Once per process;
/// later calls change nothing.
pub fn init_logging() {
    use tracing::level_filters::LevelFilter;
    let level = std::env::var("AWS_LAMBDA_LOG_LEVEL")
        .or_else(|_| std::env::var("RUST_LOG"))
        .ok()
        .and_then(|level| level.trim().parse::<LevelFilter>().ok())
        .unwrap_or(LevelFilter::INFO);
    let json = std::env::var("AWS_LAMBDA_LOG_FORMAT").is_ok_and(|format| format.eq_ignore_ascii_case("json"));
    let logs = tracing_subscriber::fmt().with_target(false).without_time().with_max_level(level);
    // Err only when a subscriber is already set (a second call): keep that one.
    let _ = if json { logs.json().try_init() } else { logs.try_init() };
}

/// Serves `app` as a Lambda function behind API Gateway ([`crate::lambda`]).
///
/// # Errors
/// Only when the function cannot serve at all (the runtime API fails).
pub async fn run(app: Router) -> Result<(), lambda_http::Error> {
    crate::lambda::run(app).await
}

#[cfg(test)]
mod tests {
    use aws_sdk_dynamodb::Client;
    use tower::ServiceExt;

    use super::*;
    use crate::dynamo::Tables;

    #[tokio::test]
    async fn with_an_origin_secret_only_requests_through_the_edge_are_served() {
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
            .build();
        let auth = AuthState {
            client: Client::from_conf(config),
            tables: Tables::new("t-"),
            rate_limit: 0,
            origin_secret: Some("s3cret".to_owned()),
            known: crate::auth::KnownKeys::default(),
        };
        let public = Router::new().route("/hook", axum::routing::get(|| async { "served" }));
        let app = api_with_public(Router::new(), public, auth);
        let call = |header: Option<&'static str>| {
            let mut request = http::Request::builder().uri("/hook");
            if let Some(value) = header {
                request = request.header(ORIGIN_HEADER, value);
            }
            app.clone().oneshot(request.body(axum::body::Body::empty()).expect("request"))
        };
        assert_eq!(call(None).await.expect("response").status(), 404);
        assert_eq!(call(Some("wrong")).await.expect("response").status(), 404);
        assert_eq!(call(Some("s3cret")).await.expect("response").status(), 200);
    }
}
