//! The one error type of the API and the one place it becomes a response: RFC 9457
//! problem details (`application/problem+json`) with a stable `code` and the request id.
//!
//! 5xx bodies never carry internals; the full cause chain goes to the log instead.

use std::fmt::Write as _;

use crate::dynamo::{StoreError, TransactionError};
use axum::response::{IntoResponse, Response};
use http::{HeaderValue, StatusCode, header};
use serde::Serialize;

/// Media type of every error body.
pub const PROBLEM_JSON: &str = "application/problem+json";

/// One problem with one field of a request (body field or query parameter).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// The field's name as the client sent it (`amount_cents`, `metadata.team`).
    pub field: String,
    /// What is wrong, in words a developer can act on.
    pub message: String,
}

impl FieldError {
    /// A problem with `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self { field: field.into(), message: message.into() }
    }
}

/// Every way a request can end other than success.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400: the body is not JSON, the content type is wrong, a webhook signature is bad.
    #[error("malformed request: {0}")]
    MalformedRequest(String),
    /// 401: the API key is missing, unknown or revoked.
    #[error("unauthorized")]
    Unauthorized,
    /// 403: the key's scopes do not include the one the request needs.
    #[error("this API key lacks the scope {0}, which this request needs")]
    InsufficientScope(String),
    /// A browser page of another origin (the MCP server's defence against DNS
    /// rebinding): 403.
    #[error("requests from the browser origin {0} are not accepted")]
    OriginNotAllowed(String),
    /// 402: a charge would take the credit balance below zero.
    #[error("insufficient credits: {0}")]
    InsufficientCredits(String),
    /// 404: an unknown id, or one of another tenant (answered exactly alike).
    #[error("{kind} {id} not found")]
    NotFound {
        /// What was looked for (`workflow`, `execution`).
        kind: &'static str,
        /// The id as the client gave it.
        id: String,
    },
    /// 404: the tenant has no such thing yet (no subscription, no billing customer).
    #[error("{0}")]
    Absent(String),
    /// 404 for a path no route serves.
    #[error("no route for {0}")]
    NoRoute(String),
    /// 405: the path exists, the method does not.
    #[error("method not allowed")]
    MethodNotAllowed,
    /// 409: the transition is not allowed from the current state.
    #[error("invalid state: {0}")]
    InvalidState(String),
    /// 409: the same `Idempotency-Key` is still being processed.
    #[error("a request with this Idempotency-Key is still in progress")]
    IdempotencyInProgress,
    /// 412: `If-Match` does not match the current version.
    #[error("version mismatch: current version is {current}")]
    VersionMismatch {
        /// The resource's current version.
        current: u64,
    },
    /// 413: body or state over its limit.
    #[error("payload too large: {0}")]
    PayloadTooLarge(String),
    /// 422: field-level validation failures, all of them at once.
    #[error("validation failed")]
    Validation(Vec<FieldError>),
    /// 422: the same `Idempotency-Key` was used for a different request.
    #[error("Idempotency-Key reused for a different request")]
    IdempotencyKeyReused,
    /// 429: the tenant is over its request rate.
    #[error("rate limited")]
    RateLimited {
        /// Seconds until the window resets.
        retry_after: u64,
    },
    /// 502: the payment processor failed or refused; the text is safe to show.
    #[error("payment processor error: {0}")]
    PaymentProcessor(String),
    /// 503: a dependency (DynamoDB) is throttling, timing out or unreachable.
    #[error("service unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// 500: a bug. The source is logged, never shown.
    #[error("internal error")]
    Internal(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl ApiError {
    /// A 404 for `kind` with the id the client gave.
    pub fn not_found(kind: &'static str, id: impl Into<String>) -> Self {
        Self::NotFound { kind, id: id.into() }
    }

    /// A 422 about a single field.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Validation(vec![FieldError::new(field, message)])
    }

    /// A 500 from anything that describes a bug.
    pub fn internal(cause: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Internal(cause.into())
    }

    /// The HTTP status this error is answered with.
    #[must_use]
    pub fn status(&self) -> StatusCode {
        match self {
            Self::MalformedRequest(_) => StatusCode::BAD_REQUEST,
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::InsufficientCredits(_) => StatusCode::PAYMENT_REQUIRED,
            Self::InsufficientScope(_) | Self::OriginNotAllowed(_) => StatusCode::FORBIDDEN,
            Self::NotFound { .. } | Self::Absent(_) | Self::NoRoute(_) => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::InvalidState(_) | Self::IdempotencyInProgress => StatusCode::CONFLICT,
            Self::VersionMismatch { .. } => StatusCode::PRECONDITION_FAILED,
            Self::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Validation(_) | Self::IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            Self::RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Self::PaymentProcessor(_) => StatusCode::BAD_GATEWAY,
            Self::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The stable, machine-readable code of the contract.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::MalformedRequest(_) => "malformed_request",
            Self::Unauthorized => "unauthorized",
            Self::InsufficientCredits(_) => "insufficient_credits",
            Self::InsufficientScope(_) => "insufficient_scope",
            Self::OriginNotAllowed(_) => "origin_not_allowed",
            Self::NotFound { .. } | Self::Absent(_) | Self::NoRoute(_) => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::InvalidState(_) => "invalid_state",
            Self::IdempotencyInProgress => "idempotency_in_progress",
            Self::VersionMismatch { .. } => "version_mismatch",
            Self::PayloadTooLarge(_) => "payload_too_large",
            Self::Validation(_) => "validation_failed",
            Self::IdempotencyKeyReused => "idempotency_key_reused",
            Self::RateLimited { .. } => "rate_limited",
            Self::PaymentProcessor(_) => "payment_processor_error",
            Self::Unavailable(_) => "unavailable",
            Self::Internal(_) => "internal",
        }
    }

    /// The human-readable explanation; for 5xx a fixed text, never the cause.
    fn detail(&self) -> String {
        match self {
            Self::Unauthorized => {
                "a valid API key is required in the X-API-Key header or as Authorization: Bearer".to_owned()
            }
            Self::Validation(errors) => {
                let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
                format!("the request has invalid fields: {}", fields.join(", "))
            }
            Self::Unavailable(_) => {
                "a dependency of the service is unavailable; retry after the Retry-After delay".to_owned()
            }
            Self::Internal(_) => "the server failed to handle the request; it has been logged".to_owned(),
            other => other.to_string(),
        }
    }
}

#[derive(Serialize)]
struct Problem<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    title: &'a str,
    status: u16,
    detail: String,
    code: &'static str,
    request_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    errors: Option<&'a [FieldError]>,
    /// The scope a 403 `insufficient_scope` needed.
    #[serde(skip_serializing_if = "Option::is_none")]
    required_scope: Option<&'a str>,
}

/// Seconds a client should wait after a 503.
const UNAVAILABLE_RETRY_AFTER_SECS: u64 = 1;

impl ApiError {
    /// The problem document this error is answered with (RFC 9457), as JSON: what an
    /// answer's body holds, and what the MCP server's tools give as their error result.
    /// A 5xx's cause is logged here, once.
    #[must_use]
    pub fn problem(&self) -> serde_json::Value {
        let status = self.status();
        let request_id = crate::request_id::current();
        if status.is_server_error() {
            log_cause_chain(self, &request_id);
        }
        let errors = match self {
            Self::Validation(errors) => Some(errors.as_slice()),
            _ => None,
        };
        let problem = Problem {
            kind: "about:blank",
            title: status.canonical_reason().unwrap_or("Error"),
            status: status.as_u16(),
            detail: self.detail(),
            code: self.code(),
            request_id,
            errors,
            required_scope: match self {
                Self::InsufficientScope(scope) => Some(scope.as_str()),
                _ => None,
            },
        };
        serde_json::to_value(&problem).unwrap_or_else(|_| serde_json::json!({}))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = serde_json::to_vec(&self.problem()).unwrap_or_else(|_| b"{}".to_vec());
        let mut response = (status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        match &self {
            Self::Unauthorized => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            Self::RateLimited { retry_after } => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(*retry_after));
            }
            Self::Unavailable(_) => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from(UNAVAILABLE_RETRY_AFTER_SECS));
            }
            _ => {}
        }
        response
    }
}

fn log_cause_chain(error: &ApiError, request_id: &str) {
    let mut chain = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let _ = write!(chain, ": {cause}");
        source = cause.source();
    }
    tracing::error!(request_id, code = error.code(), error = %chain, "request failed");
}

// ---- storage failures as answers (the one place they are mapped) ----

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(_) | StoreError::Conflict => Self::Unavailable(Box::new(error)),
            StoreError::Refused(crate::dynamo::Refusal::KeyRevoked) => Self::Unauthorized,
            StoreError::Refused(crate::dynamo::Refusal::IdempotencyHeld) => Self::IdempotencyInProgress,
            StoreError::Refused(crate::dynamo::Refusal::RateLimited { retry_after }) => {
                Self::RateLimited { retry_after }
            }
            other => Self::internal(other),
        }
    }
}

impl From<TransactionError> for ApiError {
    fn from(error: TransactionError) -> Self {
        match error {
            TransactionError::Store(store) => store.into(),
            other @ (TransactionError::Condition(_) | TransactionError::TooLarge { .. }) => Self::internal(other),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn body_json(response: Response) -> serde_json::Value {
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX).await.expect("body");
        serde_json::from_slice(&bytes).expect("json body")
    }

    #[tokio::test]
    async fn validation_error_renders_problem_json_with_field_errors() {
        let response = ApiError::Validation(vec![
            FieldError::new("name", "is required"),
            FieldError::new("status", "must be one of draft, published"),
        ])
        .into_response();
        assert_eq!(response.status(), StatusCode::UNPROCESSABLE_ENTITY);
        assert_eq!(response.headers()[header::CONTENT_TYPE], PROBLEM_JSON);
        let body = body_json(response).await;
        assert_eq!(body["type"], "about:blank");
        assert_eq!(body["title"], "Unprocessable Entity");
        assert_eq!(body["status"], 422);
        assert_eq!(body["code"], "validation_failed");
        assert_eq!(body["errors"][1]["field"], "status");
        assert_eq!(body["detail"], "the request has invalid fields: name, status");
    }

    #[tokio::test]
    async fn internal_error_hides_its_cause() {
        let response = ApiError::internal("table cairn-secret-name missing").into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let text = body_json(response).await.to_string();
        assert!(!text.contains("cairn-secret-name"), "{text}");
        assert!(text.contains("\"code\":\"internal\""));
    }

    #[tokio::test]
    async fn unauthorized_and_unavailable_carry_their_headers() {
        let response = ApiError::Unauthorized.into_response();
        assert_eq!(response.headers()[header::WWW_AUTHENTICATE], "Bearer");
        let response = ApiError::Unavailable("throttled".into()).into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
        let response = ApiError::RateLimited { retry_after: 17 }.into_response();
        assert_eq!(response.headers()[header::RETRY_AFTER], "17");
    }

    #[test]
    fn every_contract_code_has_its_status() {
        let cases: Vec<(ApiError, u16, &str)> = vec![
            (ApiError::MalformedRequest("x".into()), 400, "malformed_request"),
            (ApiError::Unauthorized, 401, "unauthorized"),
            (ApiError::InsufficientCredits("x".into()), 402, "insufficient_credits"),
            (ApiError::InsufficientScope("keys:write".into()), 403, "insufficient_scope"),
            (ApiError::OriginNotAllowed("https://evil.example".into()), 403, "origin_not_allowed"),
            (ApiError::not_found("workflow", "wf_1"), 404, "not_found"),
            (ApiError::InvalidState("x".into()), 409, "invalid_state"),
            (ApiError::IdempotencyInProgress, 409, "idempotency_in_progress"),
            (ApiError::VersionMismatch { current: 2 }, 412, "version_mismatch"),
            (ApiError::PayloadTooLarge("x".into()), 413, "payload_too_large"),
            (ApiError::field("a", "b"), 422, "validation_failed"),
            (ApiError::IdempotencyKeyReused, 422, "idempotency_key_reused"),
            (ApiError::RateLimited { retry_after: 1 }, 429, "rate_limited"),
            (ApiError::PaymentProcessor("x".into()), 502, "payment_processor_error"),
            (ApiError::Unavailable("x".into()), 503, "unavailable"),
            (ApiError::internal("x"), 500, "internal"),
        ];
        for (error, status, code) in cases {
            assert_eq!((error.status().as_u16(), error.code()), (status, code));
        }
    }
}
