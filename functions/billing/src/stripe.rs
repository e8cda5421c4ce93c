//! A lean client of Stripe's API: form-encoded bodies with bracketed keys, a pinned
//! `Stripe-Version`, a time budget on every call ([`CALL_BUDGET`], retries included),
//! retries on network errors, 409, 429 and 5xx with the same `Idempotency-Key`, and
//! lenient responses that read only what is used. Any failure is a 502
//! `payment_processor_error` with a text of Cairn's; Stripe's own is logged.
//! The secret key is never logged.
//!
//! It speaks HTTP through the same hyper and rustls (ring) as the AWS SDK, so the
//! billing binary carries one HTTP and TLS stack, and trusts Mozilla's roots compiled
//! in (`shared::tls::ROOTS`; DynamoDB's client trusts Amazon Trust Services' alone).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use domain::subscriptions::{Plan, Plans, Status};
use http::{Method, Request, header};
use http_body_util::{BodyExt, Full, Limited};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use serde::Deserialize;
use shared::ApiError;
use shared::body::WireEnum;

/// The API version every request asks for.
pub const STRIPE_VERSION: &str = "2024-06-20";
/// Stripe's own API.
pub const DEFAULT_API_BASE: &str = "https://api.stripe.com";
/// Time one call may take, retries and their pauses included. The billing function
/// has 20 s (`template.yaml`); its longest request makes two Stripe calls (a new
/// customer, then the Checkout Session) besides its DynamoDB calls (5 s at most), so
/// two calls of 6 s leave time to answer 502 rather than be cut off by the timeout.
pub const CALL_BUDGET: Duration = Duration::from_secs(6);
/// Time one attempt may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(3);
/// An attempt is not started with less time than this left in the budget.
const MIN_ATTEMPT: Duration = Duration::from_millis(500);
/// Retries after the first try (while the budget lasts).
const RETRIES: u32 = 2;
/// The largest answer read (Stripe's objects are a few KB).
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// HTTP(S) over the AWS SDK's own stack.
type Http = Client<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>;

/// Where and how to reach Stripe.
#[derive(Clone)]
pub struct Stripe {
    /// Made on the first call: reading the system's root certificates is work a cold
    /// start should not do for a route that may never be called. `None` inside when
    /// they could not be read (logged once).
    http: Arc<OnceLock<Option<Http>>>,
    base: String,
    secret_key: String,
}

impl std::fmt::Debug for Stripe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stripe").field("base", &self.base).field("secret_key", &"<redacted>").finish()
    }
}

/// A PaymentIntent, as far as Cairn reads it.
#[derive(Debug, Clone, Deserialize)]
pub struct PaymentIntent {
    /// `pi_…`
    pub id: String,
    /// What the client completes the payment with.
    #[serde(default)]
    pub client_secret: Option<String>,
}

/// Any object of which Cairn reads only the id (a Customer).
#[derive(Debug, Clone, Deserialize)]
pub struct Object {
    /// Its id.
    pub id: String,
}

/// A hosted page (a Checkout Session or a Billing Portal session).
#[derive(Debug, Clone, Deserialize)]
pub struct HostedSession {
    /// `cs_…` or `bps_…`
    pub id: String,
    /// Where the customer goes (none once a Checkout Session is over).
    #[serde(default)]
    pub url: Option<String>,
    /// A Checkout Session's status: `open`, `complete` or `expired`.
    #[serde(default)]
    pub status: Option<String>,
}

/// A Subscription, as far as Cairn reads it (API version [`STRIPE_VERSION`]).
#[derive(Debug, Clone, Deserialize)]
pub struct Subscription {
    /// `sub_…`
    pub id: String,
    /// Stripe's status (`active`, `trialing`, `past_due`, `canceled`, …).
    pub status: String,
    /// Set by Cairn at checkout (`tenant_id`, `plan_id`).
    #[serde(default)]
    pub metadata: std::collections::HashMap<String, String>,
    /// Whether it ends with the current period.
    #[serde(default)]
    pub cancel_at_period_end: bool,
    /// Unix seconds.
    #[serde(default)]
    pub current_period_start: Option<i64>,
    /// Unix seconds.
    #[serde(default)]
    pub current_period_end: Option<i64>,
    /// Its items (one, in Cairn's use).
    #[serde(default)]
    pub items: Option<Items>,
    /// The legacy single plan.
    #[serde(default)]
    pub plan: Option<Object>,
}

/// A page of a list.
#[derive(Debug, Clone, Deserialize)]
struct List<T> {
    #[serde(default = "Vec::new")]
    data: Vec<T>,
}

/// A subscription's items.
#[derive(Debug, Clone, Deserialize)]
pub struct Items {
    /// The items.
    #[serde(default)]
    pub data: Vec<Item>,
}

/// A subscription item.
#[derive(Debug, Clone, Deserialize)]
pub struct Item {
    /// Its price.
    #[serde(default)]
    pub price: Option<Object>,
    /// Its plan (the older name of a price).
    #[serde(default)]
    pub plan: Option<Object>,
    /// Unix seconds (where newer API versions put the period).
    #[serde(default)]
    pub current_period_start: Option<i64>,
    /// Unix seconds.
    #[serde(default)]
    pub current_period_end: Option<i64>,
}

impl Subscription {
    /// The price of its first item.
    #[must_use]
    pub fn price_id(&self) -> Option<&str> {
        let item = self.items.as_ref().and_then(|items| items.data.first());
        item.and_then(|i| i.price.as_ref().or(i.plan.as_ref())).or(self.plan.as_ref()).map(|p| p.id.as_str())
    }

    /// The current period (unix seconds), wherever the API version puts it.
    #[must_use]
    pub fn period(&self) -> (Option<i64>, Option<i64>) {
        let item = self.items.as_ref().and_then(|items| items.data.first());
        (
            self.current_period_start.or_else(|| item.and_then(|i| i.current_period_start)),
            self.current_period_end.or_else(|| item.and_then(|i| i.current_period_end)),
        )
    }

    /// The Cairn plan it is on (by price, else by the `plan_id` in its metadata); `None`
    /// for a subscription that is not Cairn's.
    #[must_use]
    pub fn plan(&self, plans: &Plans) -> Option<Plan> {
        plans.plan_of(self.price_id(), self.metadata.get("plan_id").map(String::as_str))
    }

    /// Cairn's view of it on `plan`, as stored and shown.
    #[must_use]
    pub fn snapshot(&self, plan: Plan) -> domain::subscriptions::Subscription {
        let at = |secs: Option<i64>| secs.and_then(|s| DateTime::<Utc>::from_timestamp(s, 0)).map(shared::time::format);
        let (start, end) = self.period();
        domain::subscriptions::Subscription {
            subscription_id: self.id.clone(),
            plan_id: plan.wire().to_owned(),
            status: Status::of(&self.status, self.cancel_at_period_end).wire().to_owned(),
            current_period_start: at(start),
            current_period_end: at(end),
            cancel_at_period_end: self.cancel_at_period_end,
        }
    }
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Debug, Deserialize)]
struct ErrorDetail {
    #[serde(default)]
    message: Option<String>,
}

/// A failed call: Stripe's status (none when unreachable) and a message safe to show.
#[derive(Debug, Clone)]
pub struct StripeError {
    /// Stripe's HTTP status, if it answered.
    pub status: Option<u16>,
    /// What went wrong.
    pub message: String,
}

impl HostedSession {
    /// The page's URL, which a session just created always has.
    ///
    /// # Errors
    /// A [`StripeError`] when Stripe sent none.
    pub fn page(self) -> Result<String, StripeError> {
        self.url.ok_or_else(|| StripeError { status: Some(200), message: "a session without a url".to_owned() })
    }
}

impl StripeError {
    /// Whether Stripe answered that the object does not exist.
    #[must_use]
    pub fn is_not_found(&self) -> bool {
        self.status == Some(404)
    }
}

impl From<StripeError> for ApiError {
    /// Stripe's own text is logged, not shown: it can name objects and settings of
    /// Cairn's Stripe account. Clients learn whether Stripe refused or was unreachable.
    fn from(error: StripeError) -> Self {
        tracing::warn!(status = error.status, message = error.message, "a Stripe call failed");
        Self::PaymentProcessor(match error.status {
            None => "the payment processor could not be reached; try again later".to_owned(),
            Some(status) if status == 429 || status >= 500 => {
                format!("the payment processor is unavailable (HTTP {status}); try again later")
            }
            Some(status) if (200..300).contains(&status) => {
                "the payment processor sent an answer Cairn could not read".to_owned()
            }
            Some(status) => format!("the payment processor refused the request (HTTP {status})"),
        })
    }
}

/// A form body: bracketed keys (`metadata[tenant_id]`) and values.
pub type Form = [(String, String)];

impl Stripe {
    /// A client from `STRIPE_SECRET_KEY` and `STRIPE_API_BASE` (default Stripe's own);
    /// `None` when no secret key is configured.
    #[must_use]
    pub fn from_env() -> Option<Self> {
        let secret_key = std::env::var("STRIPE_SECRET_KEY").ok().filter(|k| !k.is_empty())?;
        let base = std::env::var("STRIPE_API_BASE").unwrap_or_else(|_| DEFAULT_API_BASE.to_owned());
        Some(Self::new(&base, &secret_key))
    }

    /// A client of the API at `base` with `secret_key`.
    #[must_use]
    pub fn new(base: &str, secret_key: &str) -> Self {
        Self { http: Arc::default(), base: base.trim_end_matches('/').to_owned(), secret_key: secret_key.to_owned() }
    }

    /// The HTTP client, made on the first call.
    fn http(&self) -> Option<&Http> {
        self.http
            .get_or_init(|| {
                // The AWS SDK's crypto provider (ring, `shared::dynamo`), so the binary
                // carries one, and Mozilla's roots compiled in (`shared::tls`).
                let provider = Arc::new(rustls::crypto::ring::default_provider());
                let mut roots = rustls::RootCertStore::empty();
                roots.add_parsable_certificates(shared::tls::ROOTS.iter().cloned());
                match rustls::ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions() {
                    Ok(config) => {
                        let config = config.with_root_certificates(roots).with_no_client_auth();
                        let connector = hyper_rustls::HttpsConnectorBuilder::new()
                            .with_tls_config(config)
                            .https_or_http()
                            .enable_http1()
                            .build();
                        Some(Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector))
                    }
                    Err(error) => {
                        tracing::error!(error = %error, "no TLS configuration: Stripe cannot be reached");
                        None
                    }
                }
            })
            .as_ref()
    }

    /// Creates a PaymentIntent.
    ///
    /// # Errors
    /// A [`StripeError`] when Stripe refuses or cannot be reached.
    pub async fn create_payment_intent(
        &self,
        form: &Form,
        idempotency_key: &str,
    ) -> Result<PaymentIntent, StripeError> {
        self.send(Method::POST, "/v1/payment_intents", form, Some(idempotency_key)).await
    }

    /// Creates a Customer.
    ///
    /// # Errors
    /// A [`StripeError`] when Stripe refuses or cannot be reached.
    pub async fn create_customer(&self, form: &Form, idempotency_key: &str) -> Result<Object, StripeError> {
        self.send(Method::POST, "/v1/customers", form, Some(idempotency_key)).await
    }

    /// Creates a Checkout Session.
    ///
    /// # Errors
    /// A [`StripeError`] when Stripe refuses or cannot be reached.
    pub async fn create_checkout_session(
        &self,
        form: &Form,
        idempotency_key: &str,
    ) -> Result<HostedSession, StripeError> {
        self.send(Method::POST, "/v1/checkout/sessions", form, Some(idempotency_key)).await
    }

    /// Reads a Checkout Session.
    ///
    /// # Errors
    /// A [`StripeError`] when Stripe refuses or cannot be reached.
    pub async fn checkout_session(&self, id: &str) -> Result<HostedSession, StripeError> {
        self.send(Method::GET, &format!("/v1/checkout/sessions/{}", path_segment(id)), &[], None).await
    }

    /// Expires an open Checkout Session, so it can no longer be paid. Stripe refuses
    /// (400) when it is not open any more.
    ///
    /// # Errors
    /// A [`StripeError`] when Stripe refuses or cannot be reached.
    pub async fn expire_checkout_session(&self, id: &str) -> Result<HostedSession, StripeError> {
        let path = format!("/v1/checkout/sessions/{}/expire", path_segment(id));
        self.send(Method::POST, &path, &[], Some(&format!("expire:{id}"))).await
    }

    /// Creates a Billing Portal session.
    ///
    /// # Errors
    /// A [`StripeError`] when Stripe refuses or cannot be reached.
    pub async fn create_portal_session(
        &self,
        form: &Form,
        idempotency_key: &str,
    ) -> Result<HostedSession, StripeError> {
        self.send(Method::POST, "/v1/billing_portal/sessions", form, Some(idempotency_key)).await
    }

    /// Reads a Subscription as it is now.
    ///
    /// # Errors
    /// A [`StripeError`] (404 when it does not exist).
    pub async fn subscription(&self, id: &str) -> Result<Subscription, StripeError> {
        self.send(Method::GET, &format!("/v1/subscriptions/{}", path_segment(id)), &[], None).await
    }

    /// An object as Stripe has it now (`payment_intents`, `invoices`, `charges`), as JSON.
    ///
    /// # Errors
    /// A [`StripeError`] (404 when it does not exist).
    pub async fn object(&self, kind: &str, id: &str) -> Result<serde_json::Value, StripeError> {
        self.send(Method::GET, &format!("/v1/{kind}/{}", path_segment(id)), &[], None).await
    }

    /// The customer's subscriptions that still run (any status but `canceled` and
    /// `incomplete_expired`), at most 100.
    ///
    /// # Errors
    /// A [`StripeError`] when Stripe refuses or cannot be reached.
    pub async fn live_subscriptions(&self, customer: &str) -> Result<Vec<Subscription>, StripeError> {
        let query = form_urlencoded::Serializer::new(String::new())
            .append_pair("customer", customer)
            .append_pair("status", "all")
            .append_pair("limit", "100")
            .finish();
        let list: List<Subscription> = self.send(Method::GET, &format!("/v1/subscriptions?{query}"), &[], None).await?;
        Ok(list.data.into_iter().filter(|s| s.status != "canceled" && s.status != "incomplete_expired").collect())
    }

    /// Updates a Subscription (`cancel_at_period_end`).
    ///
    /// # Errors
    /// A [`StripeError`] when Stripe refuses or cannot be reached.
    pub async fn update_subscription(
        &self,
        id: &str,
        form: &Form,
        idempotency_key: &str,
    ) -> Result<Subscription, StripeError> {
        self.send(Method::POST, &format!("/v1/subscriptions/{}", path_segment(id)), form, Some(idempotency_key)).await
    }

    /// Cancels a Subscription now.
    ///
    /// # Errors
    /// A [`StripeError`] when Stripe refuses or cannot be reached.
    pub async fn cancel_subscription(&self, id: &str) -> Result<Subscription, StripeError> {
        self.send(Method::DELETE, &format!("/v1/subscriptions/{}", path_segment(id)), &[], None).await
    }

    async fn send<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        form: &Form,
        idempotency_key: Option<&str>,
    ) -> Result<T, StripeError> {
        if method != Method::GET {
            // A key revoked (or a tenant over its limit) since the instance last saw it
            // creates nothing at Stripe; the edge answers 401 (or 429).
            shared::dynamo::before_effect()
                .await
                .map_err(|error| StripeError { status: None, message: format!("not sent: {error}") })?;
        }
        let body = form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        let deadline = tokio::time::Instant::now() + CALL_BUDGET;
        let mut last = StripeError { status: None, message: "no attempt was made".to_owned() };
        for attempt in 0..=RETRIES {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
            }
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left < MIN_ATTEMPT {
                break;
            }
            let answer =
                tokio::time::timeout(left.min(ATTEMPT_TIMEOUT), self.attempt(&method, path, &body, idempotency_key));
            let (status, text) = match answer.await {
                Ok(Ok(answer)) => answer,
                failed => {
                    let error = match failed {
                        Ok(Err(error)) => error,
                        _ => "timed out".to_owned(),
                    };
                    tracing::warn!(path, attempt, error = %error, "Stripe unreachable");
                    last = StripeError { status: None, message: "the payment processor could not be reached".into() };
                    continue;
                }
            };
            if status.is_success() {
                return serde_json::from_str(&text).map_err(|_| StripeError {
                    status: Some(status.as_u16()),
                    message: "the payment processor sent an unreadable answer".to_owned(),
                });
            }
            let message = serde_json::from_str::<ErrorBody>(&text).ok().and_then(|e| e.error.message);
            tracing::warn!(path, attempt, status = status.as_u16(), "Stripe refused a request");
            last = StripeError {
                status: Some(status.as_u16()),
                message: message.unwrap_or_else(|| format!("the payment processor answered {status}")),
            };
            let retryable = status.as_u16() == 409 || status.as_u16() == 429 || status.is_server_error();
            if !retryable {
                break;
            }
        }
        Err(last)
    }

    /// One request and its whole answer (status and text), or why there is none.
    async fn attempt(
        &self,
        method: &Method,
        path: &str,
        body: &str,
        idempotency_key: Option<&str>,
    ) -> Result<(http::StatusCode, String), String> {
        let http = self.http().ok_or("no root certificates")?;
        let mut request = Request::builder()
            .method(method.clone())
            .uri(format!("{}{path}", self.base))
            .header(header::AUTHORIZATION, format!("Bearer {}", self.secret_key))
            .header("Stripe-Version", STRIPE_VERSION);
        if let Some(key) = idempotency_key {
            request = request.header("Idempotency-Key", key);
        }
        let body = if *method == Method::POST {
            request = request.header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
            Full::new(Bytes::from(body.to_owned()))
        } else {
            Full::default()
        };
        let request = request.body(body).map_err(|e| format!("a request that cannot be built: {e}"))?;
        let response = http.request(request).await.map_err(|e| e.to_string())?;
        let status = response.status();
        let bytes = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| format!("the answer could not be read: {e}"))?
            .to_bytes();
        Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
    }
}

/// An id as one path segment (ids come from Stripe or from Cairn's own records, but are
/// never trusted to be free of `/`).
fn path_segment(id: &str) -> String {
    form_urlencoded::byte_serialize(id.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stripe_that_never_answers_is_a_502_within_the_budget() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
        let counter = accepted.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                held.push(socket);
            }
        });
        let stripe = Stripe::new(&format!("http://127.0.0.1:{port}"), "sk_test_x");
        let error = stripe.create_customer(&[], "key").await.expect_err("no answer");
        assert_eq!(error.status, None);
        let attempts = accepted.load(std::sync::atomic::Ordering::SeqCst);
        assert!((1..=RETRIES + 1).contains(&attempts), "{attempts} attempts");
        let ApiError::PaymentProcessor(message) = ApiError::from(error) else { panic!("a 502") };
        assert!(message.contains("could not be reached"), "{message}");
    }

    #[test]
    fn stripes_own_text_is_not_shown() {
        let error = StripeError { status: Some(400), message: "No such customer: 'cus_secret'".to_owned() };
        let ApiError::PaymentProcessor(message) = ApiError::from(error) else { panic!("a 502") };
        assert!(!message.contains("cus_secret"), "{message}");
        assert!(message.contains("refused"), "{message}");
    }
}
