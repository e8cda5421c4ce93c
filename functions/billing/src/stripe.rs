//! A lean client of Stripe's API: form-encoded bodies with bracketed keys, a pinned
//! `Stripe-Version`, a timeout on every call, retries on network errors, 409, 429 and
//! 5xx with the same `Idempotency-Key`, and lenient responses that read only what is
//! used. Any failure is a 502 `payment_processor_error` whose text is safe to show.
//! The secret key is never logged.

use std::time::Duration;

use serde::Deserialize;
use shared::ApiError;

/// The API version every request asks for.
pub const STRIPE_VERSION: &str = "2024-06-20";
/// Stripe's own API.
pub const DEFAULT_API_BASE: &str = "https://api.stripe.com";
/// Time one call may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Retries after the first try.
const RETRIES: u32 = 2;

/// Where and how to reach Stripe.
#[derive(Clone)]
pub struct Stripe {
    http: reqwest::Client,
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

#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: ErrorDetail,
}

#[derive(Debug, Deserialize)]
struct ErrorDetail {
    #[serde(default)]
    message: Option<String>,
}

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
        let http = reqwest::Client::builder().timeout(TIMEOUT).build().unwrap_or_default();
        Self { http, base: base.trim_end_matches('/').to_owned(), secret_key: secret_key.to_owned() }
    }

    /// Creates a PaymentIntent.
    ///
    /// # Errors
    /// [`ApiError::PaymentProcessor`] when Stripe refuses or cannot be reached.
    pub async fn create_payment_intent(
        &self,
        form: &[(String, String)],
        idempotency_key: &str,
    ) -> Result<PaymentIntent, ApiError> {
        self.post("/v1/payment_intents", form, idempotency_key).await
    }

    async fn post<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        form: &[(String, String)],
        idempotency_key: &str,
    ) -> Result<T, ApiError> {
        let body = form_urlencoded::Serializer::new(String::new()).extend_pairs(form).finish();
        let mut last = String::new();
        for attempt in 0..=RETRIES {
            if attempt > 0 {
                tokio::time::sleep(Duration::from_millis(200 * u64::from(attempt))).await;
            }
            let sent = self
                .http
                .post(format!("{}{path}", self.base))
                .bearer_auth(&self.secret_key)
                .header("Stripe-Version", STRIPE_VERSION)
                .header("Idempotency-Key", idempotency_key)
                .header("Content-Type", "application/x-www-form-urlencoded")
                .body(body.clone())
                .send()
                .await;
            let response = match sent {
                Ok(response) => response,
                Err(error) => {
                    tracing::warn!(path, attempt, error = %error, "Stripe unreachable");
                    last = "the payment processor could not be reached".to_owned();
                    continue;
                }
            };
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            if status.is_success() {
                return serde_json::from_str(&text).map_err(|_| {
                    ApiError::PaymentProcessor("the payment processor sent an unreadable answer".to_owned())
                });
            }
            let message = serde_json::from_str::<ErrorBody>(&text).ok().and_then(|e| e.error.message);
            tracing::warn!(path, attempt, status = status.as_u16(), "Stripe refused a request");
            last = message.unwrap_or_else(|| format!("the payment processor answered {status}"));
            let retryable = status.as_u16() == 409 || status.as_u16() == 429 || status.is_server_error();
            if !retryable {
                break;
            }
        }
        Err(ApiError::PaymentProcessor(last))
    }
}
