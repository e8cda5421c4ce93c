//! The domain's one error type, and the one place it becomes an [`ApiError`].

use shared::ApiError;
use shared::dynamo::{StoreError, TransactionError};

/// Why a domain operation did not happen. Nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The tenant has no such thing (or another tenant has it: answered alike).
    #[error("{kind} {id} not found")]
    NotFound {
        /// What was looked for (`workflow`, `execution`, `checkpoint`, `failure`).
        kind: &'static str,
        /// The id as given.
        id: String,
    },
    /// A field of the request asks for what cannot be done (422 naming the field).
    #[error("{field}: {message}")]
    Invalid {
        /// The field, as the client named it.
        field: &'static str,
        /// Why.
        message: String,
    },
    /// The rules do not allow it from the current state; says why and what to do.
    #[error("{0}")]
    InvalidState(String),
    /// A precondition on the version (`If-Match`) does not hold.
    #[error("the current version is {current}")]
    VersionMismatch {
        /// The current version.
        current: u64,
    },
    /// The balance would go below 0; says how much is needed.
    #[error("{0}")]
    InsufficientCredits(String),
    /// The data cannot be stored at any size DynamoDB accepts; says why.
    #[error("{0}")]
    TooLarge(String),
    /// Storage failed (unavailable, or a race retried past its budget).
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A transaction failed in a way its operation did not expect: a bug.
    #[error(transparent)]
    Transaction(#[from] TransactionError),
}

impl Error {
    /// [`Error::NotFound`].
    pub fn not_found(kind: &'static str, id: impl Into<String>) -> Self {
        Self::NotFound { kind, id: id.into() }
    }
}

impl From<Error> for ApiError {
    fn from(error: Error) -> Self {
        match error {
            Error::NotFound { kind, id } => Self::NotFound { kind, id },
            Error::Invalid { field, message } => Self::field(field, message),
            Error::InvalidState(detail) => Self::InvalidState(detail),
            Error::VersionMismatch { current } => Self::VersionMismatch { current },
            Error::InsufficientCredits(detail) => Self::InsufficientCredits(detail),
            Error::TooLarge(detail) => Self::PayloadTooLarge(detail),
            Error::Store(error) => error.into(),
            Error::Transaction(error) => error.into(),
        }
    }
}
