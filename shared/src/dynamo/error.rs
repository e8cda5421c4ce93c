//! What a storage call can fail with: [`StoreError`], and the SDK's errors sorted into
//! its classes.

use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};

/// What a storage call can fail with, as facts the domain can act on.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A condition expression did not hold; in a transaction, `index` is the
    /// position of the first operation whose condition failed.
    #[error("condition check failed")]
    ConditionFailed {
        /// Which operation of a transaction failed its condition.
        index: Option<usize>,
    },
    /// Another transaction touched the same items at the same time; retry.
    #[error("transaction conflict")]
    Conflict,
    /// DynamoDB throttled, timed out, or could not be reached.
    #[error("dynamodb unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Anything else: a bug or a misconfiguration.
    #[error("dynamodb call failed")]
    Other(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A stored item does not have the shape the code expects.
    #[error("corrupt record: {0}")]
    Corrupt(String),
    /// The request's write gate refused the write: nothing was written.
    #[error("write refused: {0:?}")]
    Refused(Refusal),
}

/// Why a request's write gate refused a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The request's key was revoked (or is gone) before its write.
    KeyRevoked,
    /// The tenant is over its rate limit: try again after this many seconds.
    RateLimited {
        /// Seconds until the window resets.
        retry_after: u64,
    },
    /// The request's `Idempotency-Key` is held by an earlier request (answered, or
    /// still running): the edge answers with its stored answer, 409 or 422.
    IdempotencyHeld,
    /// A job's marker for the item the write acts on exists: an earlier attempt of the
    /// job did this work ([`Marker`](super::Marker)). Never reaches a client.
    Marked,
}

impl From<serde_dynamo::Error> for StoreError {
    fn from(error: serde_dynamo::Error) -> Self {
        Self::Corrupt(error.to_string())
    }
}

/// Error codes that mean "try again later".
const TRANSIENT_CODES: &[&str] = &[
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
    "InternalServerError",
    "ServiceUnavailable",
    "TransactionConflictException",
    "TransactionInProgressException",
];

/// Turns an SDK error into a [`StoreError`].
pub fn classify<E, R>(error: SdkError<E, R>) -> StoreError
where
    E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    R: std::fmt::Debug + Send + Sync + 'static,
{
    match &error {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            StoreError::Unavailable(Box::new(error))
        }
        SdkError::ServiceError(service) => {
            let code = service.err().code().unwrap_or_default();
            if code == "ConditionalCheckFailedException" {
                StoreError::ConditionFailed { index: None }
            } else if TRANSIENT_CODES.contains(&code) {
                StoreError::Unavailable(Box::new(error))
            } else {
                StoreError::Other(Box::new(error))
            }
        }
        _ => StoreError::Other(Box::new(error)),
    }
}

/// A transaction cancelled because another one touched the same item: retry.
pub(super) fn is_conflict(reason: &aws_sdk_dynamodb::types::CancellationReason) -> bool {
    reason.code() == Some("TransactionConflict")
}

/// A transaction cancelled by throttling: retry later.
pub(super) fn is_throttling(reason: &aws_sdk_dynamodb::types::CancellationReason) -> bool {
    matches!(reason.code(), Some("ThrottlingError" | "ProvisionedThroughputExceeded"))
}

/// The result of an SDK builder's `build()`, as a [`StoreError`] (a failed build is a
/// bug: a required field was not set).
///
/// # Errors
/// [`StoreError::Other`] with the builder's error.
pub fn built<T, E: std::error::Error + Send + Sync + 'static>(result: Result<T, E>) -> Result<T, StoreError> {
    result.map_err(|e| StoreError::Other(Box::new(e)))
}
