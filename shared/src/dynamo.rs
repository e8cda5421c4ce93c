//! DynamoDB: the client (built once per cold start), table names, the mapping of SDK
//! errors to storage facts, and the helpers every store uses.
//!
//! Every table is keyed by tenant: its partition key is `tenant_id`, built only from a
//! [`TenantId`](crate::TenantId) (the tenants and API-keys tables, which authentication
//! itself reads, are the exceptions).

use std::collections::HashMap;
use std::time::Duration;

use aws_config::BehaviorVersion;
use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};

use crate::error::ApiError;

/// One DynamoDB item.
pub type Item = HashMap<String, AttributeValue>;

/// The tables of Cairn. `template.yaml` defines each of them (a test checks that the
/// two agree); the deployed name is the stack's prefix plus [`Table::suffix`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Table {
    /// Tenants (`tenant_id`).
    Tenants,
    /// API keys by the SHA-256 of the key (`key_hash`).
    ApiKeys,
    /// Workflows (`tenant_id`, `id`).
    Workflows,
    /// Counters behind every list's `total` (`tenant_id`, `name`).
    Counters,
}

impl Table {
    /// Every table.
    pub const ALL: [Self; 4] = [Self::Tenants, Self::ApiKeys, Self::Workflows, Self::Counters];

    /// The part of the table's name after the prefix.
    #[must_use]
    pub fn suffix(self) -> &'static str {
        match self {
            Self::Tenants => "tenants",
            Self::ApiKeys => "api-keys",
            Self::Workflows => "workflows",
            Self::Counters => "counters",
        }
    }
}

/// The full names of the tables, computed once.
#[derive(Debug, Clone)]
pub struct Tables {
    names: Vec<String>,
}

impl Tables {
    /// Names every table `prefix` + suffix.
    #[must_use]
    pub fn new(prefix: &str) -> Self {
        Self { names: Table::ALL.iter().map(|t| format!("{prefix}{}", t.suffix())).collect() }
    }

    /// The full name of `table`.
    #[must_use]
    pub fn name(&self, table: Table) -> &str {
        let index = Table::ALL.iter().position(|t| *t == table).unwrap_or_default();
        &self.names[index]
    }
}

/// Total time one DynamoDB call may take, retries included.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(5);
/// Time one attempt may take.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);
/// Time to connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Builds the DynamoDB client from the SDK's standard configuration chain: region,
/// credentials and `AWS_ENDPOINT_URL_DYNAMODB` (DynamoDB Local) all come from the
/// environment. Timeouts and retries are bounded so a failing dependency gives a
/// 503, never a hang.
pub async fn client() -> Client {
    let config = aws_config::defaults(BehaviorVersion::latest())
        .timeout_config(
            TimeoutConfig::builder()
                .operation_timeout(OPERATION_TIMEOUT)
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .connect_timeout(CONNECT_TIMEOUT)
                .build(),
        )
        .retry_config(RetryConfig::standard().with_max_attempts(3))
        .load()
        .await;
    Client::new(&config)
}

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
    /// DynamoDB throttled, timed out, or could not be reached.
    #[error("dynamodb unavailable")]
    Unavailable(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// Anything else: a bug or a misconfiguration.
    #[error("dynamodb call failed")]
    Other(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// A stored item does not have the shape the code expects.
    #[error("corrupt record: {0}")]
    Corrupt(String),
}

impl From<StoreError> for ApiError {
    fn from(error: StoreError) -> Self {
        match error {
            StoreError::Unavailable(_) => Self::Unavailable(Box::new(error)),
            other => Self::internal(other),
        }
    }
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

/// Runs a write transaction; a failed condition names the operation that failed.
///
/// # Errors
/// [`StoreError::ConditionFailed`] with the index of the first failed condition;
/// [`StoreError::Unavailable`] when a conflict or throttling cancelled it.
pub async fn transact(client: &Client, items: Vec<TransactWriteItem>) -> Result<(), StoreError> {
    let result = client.transact_write_items().set_transact_items(Some(items)).send().await;
    match result {
        Ok(_) => Ok(()),
        Err(SdkError::ServiceError(service))
            if matches!(service.err(), TransactWriteItemsError::TransactionCanceledException(_)) =>
        {
            let TransactWriteItemsError::TransactionCanceledException(canceled) = service.err() else {
                return Err(StoreError::Other("unreachable cancellation shape".into()));
            };
            let reasons = canceled.cancellation_reasons();
            if let Some(index) = reasons.iter().position(|r| r.code() == Some("ConditionalCheckFailed")) {
                return Err(StoreError::ConditionFailed { index: Some(index) });
            }
            Err(StoreError::Unavailable(Box::new(SdkError::service_error(service.into_err(), ()))))
        }
        Err(other) => Err(classify(other)),
    }
}

/// Reads one window of a query: skips `skip` items (reading only `sort_key` of each),
/// then returns up to `take` whole items. The query's own order and key condition
/// decide which items; callers set `scan_index_forward(false)` for newest first.
///
/// # Errors
/// The query's [`StoreError`].
pub async fn query_window(
    query: QueryFluentBuilder,
    sort_key: &str,
    skip: usize,
    take: usize,
) -> Result<Vec<Item>, StoreError> {
    const MAX_PER_CALL: usize = 1000;
    let mut start: Option<Item> = None;
    let mut remaining = skip;
    while remaining > 0 {
        let out = query
            .clone()
            .set_exclusive_start_key(start.take())
            .limit(remaining.min(MAX_PER_CALL) as i32)
            .projection_expression("#window_sk")
            .expression_attribute_names("#window_sk", sort_key)
            .send()
            .await
            .map_err(classify)?;
        remaining = remaining.saturating_sub(out.count() as usize);
        match out.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => return Ok(Vec::new()),
        }
    }
    let mut items = Vec::with_capacity(take);
    while items.len() < take {
        let out = query
            .clone()
            .set_exclusive_start_key(start.take())
            .limit((take - items.len()).min(MAX_PER_CALL) as i32)
            .send()
            .await
            .map_err(classify)?;
        items.extend(out.items.unwrap_or_default());
        match out.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => break,
        }
    }
    Ok(items)
}

/// A string attribute.
#[must_use]
pub fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

/// A number attribute.
#[must_use]
pub fn n(value: impl std::fmt::Display) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_table_has_a_distinct_name() {
        let tables = Tables::new("t-");
        let mut names: Vec<&str> = Table::ALL.iter().map(|t| tables.name(*t)).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Table::ALL.len());
        assert_eq!(tables.name(Table::Counters), "t-counters");
    }
}
