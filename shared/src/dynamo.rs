//! DynamoDB: the client (built once per cold start), table names, the mapping of SDK
//! errors to storage facts, and the helpers every store uses.
//!
//! Every table is keyed by tenant: its partition key is `tenant_id`, built only from a
//! [`TenantId`](crate::TenantId) (the tenants and API-keys tables, which authentication
//! itself reads, are the exceptions).

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::BehaviorVersion;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_sdk_dynamodb::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::transact_get_items::TransactGetItemsError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, KeysAndAttributes, TransactWriteItem};
use aws_smithy_runtime_api::client::connector_metadata::ConnectorMetadata;
use aws_smithy_runtime_api::client::http::{HttpClient, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector};
use aws_smithy_runtime_api::client::runtime_components::{RuntimeComponents, RuntimeComponentsBuilder};

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
    /// Executions (`tenant_id`, `id`).
    Executions,
    /// Checkpoints, twice: by id (small states inline) and by execution and sequence
    /// (`tenant_id`, `entry`).
    Checkpoints,
    /// Large values stored in parts: checkpoint states, execution input and output
    /// too large to sit inline (`tenant_id`, `part`).
    Blobs,
    /// Failures recorded when executions fail (`tenant_id`, `id`).
    Failures,
    /// Credit balances (`tenant_id`).
    Accounts,
    /// Every balance change (`tenant_id`, `seq`).
    Ledger,
    /// Stripe events already applied (`tenant_id`, `event_id`), kept 30 days.
    StripeEvents,
    /// Requests per tenant and minute (`tenant_id`, `window`), expired by TTL.
    RateLimits,
    /// Claimed `Idempotency-Key`s and their answers (`tenant_id`, `idempotency_key`),
    /// kept 24 hours.
    Idempotency,
}

impl Table {
    /// Every table.
    pub const ALL: [Self; 13] = [
        Self::Tenants,
        Self::ApiKeys,
        Self::Workflows,
        Self::Counters,
        Self::Executions,
        Self::Checkpoints,
        Self::Blobs,
        Self::Failures,
        Self::Accounts,
        Self::Ledger,
        Self::StripeEvents,
        Self::RateLimits,
        Self::Idempotency,
    ];

    /// The part of the table's name after the prefix.
    #[must_use]
    pub fn suffix(self) -> &'static str {
        match self {
            Self::Tenants => "tenants",
            Self::ApiKeys => "api-keys",
            Self::Workflows => "workflows",
            Self::Counters => "counters",
            Self::Executions => "executions",
            Self::Checkpoints => "checkpoints",
            Self::Blobs => "blobs",
            Self::Failures => "failures",
            Self::Accounts => "accounts",
            Self::Ledger => "ledger",
            Self::StripeEvents => "stripe-events",
            Self::RateLimits => "rate-limits",
            Self::Idempotency => "idempotency",
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

/// Builds a function's DynamoDB client from [`config`]. Every call's consumed capacity
/// is added to the serving request's total ([`crate::metering`]).
pub async fn client() -> Client {
    Client::from_conf(config().interceptor(crate::metering::CapacityMeter).build())
}

/// A function's DynamoDB client configuration, read from the environment alone, as
/// Lambda gives it: the region (`AWS_REGION`), the instance's credentials
/// (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`) and, for DynamoDB
/// Local, `AWS_ENDPOINT_URL_DYNAMODB` (or `AWS_ENDPOINT_URL`). Timeouts and retries are
/// bounded so a failing dependency gives a 503, never a hang. For tests that add to it.
///
/// It does not use `aws-config`'s default chains (profile files, SSO, web identity, STS,
/// instance metadata): a function never needs them, and linking them cost each
/// bootstrap about 0.4 MB (README, "Deploying"). `cairn-admin`, which runs on an
/// operator's machine, does: [`client_with_default_chain`].
#[must_use]
pub fn config() -> aws_sdk_dynamodb::config::Builder {
    use aws_sdk_dynamodb::config::{Credentials, Region};
    let env = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
    let mut builder = aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .timeout_config(timeouts())
        .retry_config(retries())
        .http_client(https_client(Trust::CompiledIn));
    if let Some(region) = env("AWS_REGION").or_else(|| env("AWS_DEFAULT_REGION")) {
        builder = builder.region(Region::new(region));
    }
    if let (Some(id), Some(secret)) = (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
        builder =
            builder.credentials_provider(Credentials::new(id, secret, env("AWS_SESSION_TOKEN"), None, "environment"));
    }
    if let Some(endpoint) = env("AWS_ENDPOINT_URL_DYNAMODB").or_else(|| env("AWS_ENDPOINT_URL")) {
        builder = builder.endpoint_url(endpoint);
    }
    builder
}

/// A DynamoDB client from the SDK's full default chains (profiles, SSO, web identity,
/// instance metadata, as well as the environment), with the timeouts and retries of
/// [`config`]: for `cairn-admin` on an operator's machine.
pub async fn client_with_default_chain() -> Client {
    let sdk = aws_config::defaults(BehaviorVersion::latest())
        .timeout_config(timeouts())
        .retry_config(retries())
        .http_client(https_client(Trust::System))
        .load()
        .await;
    Client::from_conf(aws_sdk_dynamodb::config::Builder::from(&sdk).interceptor(crate::metering::CapacityMeter).build())
}

fn retries() -> RetryConfig {
    RetryConfig::standard().with_max_attempts(3)
}

fn timeouts() -> TimeoutConfig {
    TimeoutConfig::builder()
        .operation_timeout(OPERATION_TIMEOUT)
        .operation_attempt_timeout(ATTEMPT_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
}

/// The SDK's HTTPS client (hyper and rustls, the SDK's default) with ring as rustls's
/// crypto instead of the default aws-lc-rs: the same TLS, a smaller bootstrap (README,
/// "Deploying"). The billing function's Stripe client uses the same stack.
///
/// A function trusts the roots compiled into it ([`crate::tls`]: Amazon Trust Services'
/// five): no certificate file is read while it starts or on its first request.
/// `cairn-admin` trusts the system's.
fn https_client(trust: Trust) -> SharedHttpClient {
    SharedHttpClient::new(ConnectsWhenUsed { inner: hyper_client(trust) })
}

/// The SDK's hyper client, trusting `trust`.
fn hyper_client(trust: Trust) -> SharedHttpClient {
    use aws_smithy_http_client::tls;
    let trust_store = match trust {
        Trust::CompiledIn => crate::tls::trust_store(),
        Trust::System => tls::TrustStore::default(),
    };
    let builder = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(tls::rustls_provider::CryptoMode::Ring));
    // Building a context only stores the trust store (it is checked when a connector is
    // made, which a test does); were that to fail, the SDK's own default roots.
    match tls::TlsContext::builder().with_trust_store(trust_store).build() {
        Ok(context) => builder.tls_context(context).build_https(),
        Err(_) => builder.build_https(),
    }
}

/// The SDK's HTTP client, minus the connector it makes to throw away at start.
///
/// Building a DynamoDB client asks its HTTP client to validate itself, and the SDK's
/// hyper client then makes a TLS connector only to load the system's roots early, and
/// drops it; the first call makes its own. With the roots compiled in there is nothing
/// to load early (a connector parses them again each time), so this wrapper answers
/// that validation at once: a cold start makes one connector, on its first call.
#[derive(Debug)]
struct ConnectsWhenUsed {
    inner: SharedHttpClient,
}

impl HttpClient for ConnectsWhenUsed {
    fn http_connector(&self, settings: &HttpConnectorSettings, components: &RuntimeComponents) -> SharedHttpConnector {
        self.inner.http_connector(settings, components)
    }

    fn validate_base_client_config(
        &self,
        _: &RuntimeComponentsBuilder,
        _: &aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        Ok(())
    }

    fn connector_metadata(&self) -> Option<ConnectorMetadata> {
        self.inner.connector_metadata()
    }
}

/// Which roots a DynamoDB client trusts.
#[derive(Debug, Clone, Copy)]
enum Trust {
    /// Amazon Trust Services', compiled in: a function's.
    CompiledIn,
    /// The system's certificate files: an operator's command line.
    System,
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
}

/// What a request's write transactions pass through (the edge's gate, `shared::gate`,
/// implements it; this module only calls it, so storage does not depend on the edge).
pub trait WriteGate: Send + Sync + std::fmt::Debug {
    /// Lets a transaction of `items` through, with operations to add after its own
    /// (conditions, records of the request), or refuses it.
    ///
    /// # Errors
    /// [`StoreError::Refused`], or a storage error of the gate's own calls.
    fn admit<'a>(
        &'a self,
        items: &'a [TransactWriteItem],
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<TransactWriteItem>, StoreError>> + Send + 'a>>;

    /// Records a transaction's end: committed, or cancelled because the condition of
    /// the added operation at `failed` (an index into what [`WriteGate::admit`] added)
    /// did not hold; returns the refusal to report for it.
    fn settle(&self, committed: bool, failed: Option<usize>) -> Option<StoreError>;

    /// Lets an effect outside DynamoDB (a call to Stripe that creates something) go
    /// ahead, or refuses it: it cannot carry a condition, so what a transaction's
    /// condition would prove is proven first.
    ///
    /// # Errors
    /// [`StoreError::Refused`], or a storage error of the gate's own reads.
    fn hold(&self) -> std::pin::Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send + '_>>;

    /// Offers the gate the request's read of the items at `keys` in `table`, to carry a
    /// read of its own in the same call ([`get_item`], [`batch_get`]): the read that
    /// answers the items found, or `None` to read them alone. The read itself answers
    /// `None` when it did not read them (its call failed): the caller reads them alone,
    /// with its own call. A gate carries a read once per request.
    fn carry<'a>(&'a self, table: &'a str, keys: &'a [Item]) -> Option<Read<'a>> {
        let _ = (table, keys);
        None
    }
}

/// A strongly consistent read of items of one table by a [`WriteGate`]
/// ([`WriteGate::carry`]): the items found, in no particular order, or `None` when they
/// are still to be read.
pub type Read<'a> = std::pin::Pin<Box<dyn Future<Output = Option<Vec<Item>>> + Send + 'a>>;

/// The most keys a read may have for its gate to carry a read of its own in its call: 25
/// items of at most 400 KB each fit one answer of BatchGetItem (16 MB), so a carried
/// read is one call unless DynamoDB throttles.
pub const MAX_CARRYING_KEYS: usize = 25;

/// Called before an effect outside DynamoDB (a Stripe call that creates or changes
/// something): the request's write gate must let it through, as it must a transaction.
///
/// # Errors
/// [`StoreError::Refused`] when the request's key is revoked or its tenant over its
/// limit; a storage error of the gate's own reads.
pub async fn before_effect() -> Result<(), StoreError> {
    match WRITE_GATE.try_with(std::sync::Arc::clone) {
        Ok(gate) => gate.hold().await,
        Err(_) => Ok(()),
    }
}

tokio::task_local! {
    static WRITE_GATE: std::sync::Arc<dyn WriteGate>;
}

/// The write gate of the request being served, if any.
#[must_use]
pub fn current_gate() -> Option<std::sync::Arc<dyn WriteGate>> {
    WRITE_GATE.try_with(std::sync::Arc::clone).ok()
}

/// Runs `work` (a request's handler) with its write transactions passing `gate`.
pub async fn gated<F: Future>(gate: std::sync::Arc<dyn WriteGate>, work: F) -> F::Output {
    WRITE_GATE.scope(gate, work).await
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
/// [`StoreError::Conflict`] for a conflict; [`StoreError::Unavailable`] when throttling
/// cancelled it; [`StoreError::Other`] for a validation error or any other reason.
pub async fn transact(client: &Client, mut items: Vec<TransactWriteItem>) -> Result<(), StoreError> {
    let gate = WRITE_GATE.try_with(std::sync::Arc::clone).ok();
    let own = items.len();
    if let Some(gate) = &gate {
        items.extend(gate.admit(&items).await?);
    }
    let added = items.len() - own;
    let result = client.transact_write_items().set_transact_items(Some(items)).send().await;
    let Err(error) = result else {
        if let Some(gate) = &gate {
            gate.settle(true, None);
        }
        return Ok(());
    };
    let failed = |r: &aws_sdk_dynamodb::types::CancellationReason| r.code() == Some("ConditionalCheckFailed");
    let reasons = match &error {
        SdkError::ServiceError(service) => reasons_of(service.err()),
        _ => &[],
    };
    // The gate hears of every transaction that did not commit (what it added is void),
    // and its own conditions win over the request's (its key's first): a refused key
    // learns nothing else.
    let gate_failed = (0..added).find(|k| reasons.get(own + k).is_some_and(failed));
    if let Some(refused) = gate.as_ref().and_then(|gate| gate.settle(false, gate_failed)) {
        return Err(refused);
    }
    if let Some(index) = reasons.iter().position(failed) {
        return Err(StoreError::ConditionFailed { index: Some(index) });
    }
    if reasons.iter().any(is_conflict) {
        return Err(StoreError::Conflict);
    }
    match error {
        SdkError::ServiceError(service)
            if matches!(service.err(), TransactWriteItemsError::TransactionCanceledException(_)) =>
        {
            // Throttling is worth a retry; a ValidationError (an item over 400 KB, say) or
            // any other reason is a bug: a 500 with its cause logged, never a 503 that
            // would invite the client to send the same doomed request again.
            let throttled = reasons_of(service.err()).iter().any(is_throttling);
            let error = Box::new(SdkError::service_error(service.into_err(), ()));
            if throttled {
                return Err(StoreError::Unavailable(error));
            }
            Err(StoreError::Other(error))
        }
        other => Err(classify(other)),
    }
}

/// A transaction cancelled because another one touched the same item: retry.
fn is_conflict(reason: &aws_sdk_dynamodb::types::CancellationReason) -> bool {
    reason.code() == Some("TransactionConflict")
}

/// A transaction cancelled by throttling: retry later.
fn is_throttling(reason: &aws_sdk_dynamodb::types::CancellationReason) -> bool {
    matches!(reason.code(), Some("ThrottlingError" | "ProvisionedThroughputExceeded"))
}

/// The cancellation reasons of a cancelled transaction (none for any other error).
fn reasons_of(error: &TransactWriteItemsError) -> &[aws_sdk_dynamodb::types::CancellationReason] {
    match error {
        TransactWriteItemsError::TransactionCanceledException(canceled) => canceled.cancellation_reasons(),
        _ => &[],
    }
}

/// What an operation of a [`Transaction`] writes or checks, so that a failed condition
/// is reported as a value the compiler knows, not by position or by a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// A tenant's account item: the balance and its entry count (`seq`).
    Account,
    /// A ledger entry (and its counters).
    Ledger,
    /// A workflow.
    Workflow,
    /// The check that a workflow has no running or paused executions.
    Active,
    /// An execution.
    Execution,
    /// A tenant's own item (its count of live API keys).
    Tenant,
    /// An API key's item.
    ApiKey,
    /// A tenant's rate-limit standing (its keys epoch).
    Standing,
    /// The pointer item of a client-chosen key (of an execution or a checkpoint).
    Key,
    /// An execution's payload part in `blobs`.
    Blob,
    /// A failure record.
    Failure,
    /// A checkpoint's entries or state parts.
    Checkpoint,
    /// A checkpoint deleted by a rollback, or the tenant's item of hidden checkpoints.
    Discard,
    /// List counters.
    Counters,
    /// The tenant's Stripe customer.
    Customer,
    /// The tenant's open Checkout Session.
    Checkout,
    /// The tenant's subscription snapshot.
    Subscription,
    /// An applied Stripe event's once-only marker.
    Event,
    /// A paid invoice's once-only marker.
    Invoice,
}

/// A write transaction assembled by several parts of the code (an area's store, the
/// counters, the credit ledger) and committed once. Each operation carries its [`Part`]
/// so a failed condition is reported by what it guarded, not by position. When several
/// conditions fail, the first operation's part is reported: put the optimistic lock
/// (the item whose version was read) first.
#[derive(Debug, Default)]
pub struct Transaction {
    items: Vec<TransactWriteItem>,
    labels: Vec<Part>,
}

/// Why a [`Transaction`] did not commit.
#[derive(Debug, thiserror::Error)]
pub enum TransactionError {
    /// The condition of the operation of this part did not hold.
    #[error("condition failed: {0:?}")]
    Condition(Part),
    /// It is beyond what DynamoDB accepts in one transaction (more than
    /// [`MAX_TRANSACTION_ITEMS`] operations, more than [`MAX_TRANSACTION_BYTES`], or an
    /// item over [`MAX_ITEM_BYTES`]); nothing was sent.
    #[error("transaction too large: {items} operations, {bytes} bytes, largest item {largest_item} bytes")]
    TooLarge {
        /// Its operations.
        items: usize,
        /// Its aggregate size.
        bytes: usize,
        /// Its largest item.
        largest_item: usize,
    },
    /// Any other storage failure (conflicts included).
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// DynamoDB's limit of operations in one transaction.
pub const MAX_TRANSACTION_ITEMS: usize = 100;
/// DynamoDB's limit on the aggregate size of a transaction's items ("4 MB", read as
/// decimal megabytes to be safe).
pub const MAX_TRANSACTION_BYTES: usize = 4_000_000;
/// DynamoDB's limit on one item, attribute names included.
pub const MAX_ITEM_BYTES: usize = 400 * 1024;

/// The size DynamoDB counts for `item`: attribute names and values in UTF-8 bytes,
/// numbers at one byte per two digits plus one, 3 bytes plus one per element for lists
/// and maps, 1 byte for booleans and nulls (the rules of "Item sizes" in the DynamoDB
/// developer guide, rounded up where they say "approximately").
#[must_use]
pub fn item_size(item: &Item) -> usize {
    item.iter().map(|(name, value)| name.len() + value_size(value)).sum()
}

fn value_size(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => n.len().div_ceil(2) + 1,
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Ss(set) => set.iter().map(String::len).sum(),
        AttributeValue::Ns(set) => set.iter().map(|n| n.len().div_ceil(2) + 1).sum(),
        AttributeValue::Bs(set) => set.iter().map(|b| b.as_ref().len()).sum(),
        AttributeValue::L(list) => 3 + list.iter().map(|v| 1 + value_size(v)).sum::<usize>(),
        AttributeValue::M(map) => 3 + map.iter().map(|(k, v)| 1 + k.len() + value_size(v)).sum::<usize>(),
        _ => 1,
    }
}

/// Whether a transaction of `items` stays within DynamoDB's limits with `extra` added:
/// at most [`MAX_TRANSACTION_ITEMS`] operations and [`MAX_TRANSACTION_BYTES`] in all,
/// and `extra` itself within [`MAX_ITEM_BYTES`]. A write gate asks this before it adds
/// its own operation to a request's transaction.
pub(crate) fn has_room_for<'a>(
    items: impl IntoIterator<Item = &'a TransactWriteItem>,
    extra: &TransactWriteItem,
) -> bool {
    let (operations, bytes) = items.into_iter().fold((0, 0), |(n, b), item| (n + 1, b + operation_size(item)));
    fits(operations, bytes, operation_size(extra))
}

/// Whether `operations` operations of `bytes` bytes stay within a transaction's limits
/// with one more operation of `extra` bytes.
pub(crate) fn fits(operations: usize, bytes: usize, extra: usize) -> bool {
    operations < MAX_TRANSACTION_ITEMS && extra <= MAX_ITEM_BYTES && bytes + extra <= MAX_TRANSACTION_BYTES
}

/// The size an operation of a transaction adds to its aggregate: a put's whole item;
/// for an update, delete or condition check, its key and the values it names.
pub(crate) fn operation_size(operation: &TransactWriteItem) -> usize {
    let values = |v: Option<&HashMap<String, AttributeValue>>| v.map_or(0, item_size);
    if let Some(put) = operation.put() {
        return item_size(put.item());
    }
    if let Some(update) = operation.update() {
        return item_size(update.key()) + values(update.expression_attribute_values());
    }
    if let Some(delete) = operation.delete() {
        return item_size(delete.key());
    }
    operation.condition_check().map_or(0, |check| item_size(check.key()))
}

impl Transaction {
    /// An empty transaction.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an operation.
    pub fn push(&mut self, label: Part, item: TransactWriteItem) {
        self.items.push(item);
        self.labels.push(label);
    }

    /// Adds several operations of one part.
    pub fn extend(&mut self, label: Part, items: impl IntoIterator<Item = TransactWriteItem>) {
        for item in items {
            self.push(label, item);
        }
    }

    /// Appends every operation of `other`, after this one's.
    pub fn append(&mut self, other: Self) {
        self.items.extend(other.items);
        self.labels.extend(other.labels);
    }

    /// How many operations it holds.
    #[must_use]
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Whether it holds nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// The aggregate size DynamoDB counts for it (see [`item_size`]).
    #[must_use]
    pub fn size(&self) -> usize {
        self.items.iter().map(operation_size).sum()
    }

    /// Refuses what DynamoDB would refuse: callers check this before committing where a
    /// client's data can make it too large (a checkpoint state), to answer 413.
    ///
    /// # Errors
    /// [`TransactionError::TooLarge`].
    pub fn check_limits(&self) -> Result<(), TransactionError> {
        let bytes = self.size();
        let largest_item = self.items.iter().map(operation_size).max().unwrap_or(0);
        if self.items.len() > MAX_TRANSACTION_ITEMS || bytes > MAX_TRANSACTION_BYTES || largest_item > MAX_ITEM_BYTES {
            return Err(TransactionError::TooLarge { items: self.items.len(), bytes, largest_item });
        }
        Ok(())
    }

    /// Commits every operation atomically. A transaction beyond DynamoDB's limits is not
    /// sent: it is a bug (500 with its sizes logged), never a retryable 503.
    ///
    /// # Errors
    /// [`TransactionError::Condition`] naming the failed operation's part;
    /// [`TransactionError::TooLarge`]; storage errors.
    pub async fn commit(self, client: &Client) -> Result<(), TransactionError> {
        if self.items.is_empty() {
            return Ok(());
        }
        self.check_limits()?;
        match transact(client, self.items).await {
            Ok(()) => Ok(()),
            Err(StoreError::ConditionFailed { index: Some(index) }) => match self.labels.get(index) {
                Some(part) => Err(TransactionError::Condition(*part)),
                None => Err(StoreError::ConditionFailed { index: Some(index) }.into()),
            },
            Err(other) => Err(other.into()),
        }
    }
}

/// Reads one item by its key (string attributes), strongly consistent.
///
/// # Errors
/// The read's [`StoreError`].
pub async fn get_item(client: &Client, table: &str, key: &[(&str, &str)]) -> Result<Option<Item>, StoreError> {
    let key: Item = key.iter().map(|(name, value)| ((*name).to_owned(), s(*value))).collect();
    // A request's first read carries its gate's look at the rate-limit standing, in one
    // call ([`crate::gate`]).
    if let Some(gate) = current_gate()
        && let Some(read) = gate.carry(table, std::slice::from_ref(&key))
        && let Some(mut found) = read.await
    {
        return Ok(found.pop());
    }
    get_one(client, table, key).await
}

/// One strongly consistent GetItem.
async fn get_one(client: &Client, table: &str, key: Item) -> Result<Option<Item>, StoreError> {
    let out =
        client.get_item().table_name(table).set_key(Some(key)).consistent_read(true).send().await.map_err(classify)?;
    Ok(out.item)
}

/// The items at `keys` (per table; 100 keys at most in all), strongly consistent, in one
/// BatchGetItem (each read costs what a GetItem of it would): the items found per
/// table, in no particular order. Keys DynamoDB leaves unprocessed are sent again,
/// strongly consistent: at once while each answer reads some of them (an answer holds
/// 16 MB at most), else after 25, 50, 100, 200 and 400 ms (DynamoDB is throttling).
///
/// # Errors
/// The calls' [`StoreError`]s; [`StoreError::Unavailable`] when keys are still
/// unprocessed after that.
pub async fn get_batch(
    client: &Client,
    keys: HashMap<String, Vec<Item>>,
) -> Result<HashMap<String, Vec<Item>>, StoreError> {
    let consistent = |keys: Vec<Item>| {
        KeysAndAttributes::builder()
            .set_keys(Some(keys))
            .consistent_read(true)
            .build()
            .map_err(|e| StoreError::Other(Box::new(e)))
    };
    let mut left: HashMap<String, Vec<Item>> = keys.into_iter().filter(|(_, keys)| !keys.is_empty()).collect();
    let mut found: HashMap<String, Vec<Item>> = HashMap::new();
    let mut idle = 0u32;
    while !left.is_empty() {
        if idle == 6 {
            return Err(StoreError::Unavailable("BatchGetItem left keys unprocessed".into()));
        }
        if idle > 0 {
            tokio::time::sleep(Duration::from_millis(25 << (idle - 1))).await;
        }
        let asked: usize = left.values().map(Vec::len).sum();
        let mut items = HashMap::with_capacity(left.len());
        for (table, keys) in left.drain() {
            items.insert(table, consistent(keys)?);
        }
        let out = client.batch_get_item().set_request_items(Some(items)).send().await.map_err(classify)?;
        for (table, items) in out.responses.unwrap_or_default() {
            found.entry(table).or_default().extend(items);
        }
        left = out
            .unprocessed_keys
            .unwrap_or_default()
            .into_iter()
            .map(|(table, keys)| (table, keys.keys))
            .filter(|(_, keys)| !keys.is_empty())
            .collect();
        let unread: usize = left.values().map(Vec::len).sum();
        idle = if unread < asked { 0 } else { idle + 1 };
    }
    Ok(found)
}

/// Reads the items at `keys` (each a table and a key, strongly consistent) as one
/// serializable snapshot, in one round trip (TransactGetItems: at most 100 keys; each
/// read costs twice a plain one). The answers come in the order of `keys`, `None` where
/// nothing is stored. Use it where an answer depends on two items another request
/// changes in one transaction.
///
/// # Errors
/// [`StoreError::Conflict`] when a write transaction on one of the items was under
/// way (worth a retry, see [`retry_races`]); [`StoreError::Unavailable`] when throttled;
/// the read's other [`StoreError`]s.
pub async fn get_together(client: &Client, keys: Vec<(&str, Item)>) -> Result<Vec<Option<Item>>, StoreError> {
    let count = keys.len();
    let mut reads = Vec::with_capacity(count);
    for (table, key) in keys {
        let get = aws_sdk_dynamodb::types::Get::builder().table_name(table).set_key(Some(key));
        reads.push(aws_sdk_dynamodb::types::TransactGetItem::builder().get(built(get.build())?).build());
    }
    let out = client.transact_get_items().set_transact_items(Some(reads)).send().await.map_err(|error| {
        let reasons = match &error {
            SdkError::ServiceError(service) => match service.err() {
                TransactGetItemsError::TransactionCanceledException(canceled) => canceled.cancellation_reasons(),
                _ => &[],
            },
            _ => &[],
        };
        if reasons.iter().any(is_conflict) {
            return StoreError::Conflict;
        }
        if reasons.iter().any(is_throttling) {
            return StoreError::Unavailable(Box::new(error));
        }
        classify(error)
    })?;
    let found: Vec<Option<Item>> = out.responses.unwrap_or_default().into_iter().map(|r| r.item).collect();
    if found.len() != count {
        return Err(StoreError::Other(format!("TransactGetItems answered {} of {count} reads", found.len()).into()));
    }
    Ok(found)
}

/// Reads items by key, 100 keys a call, resending what DynamoDB leaves unprocessed
/// ([`get_batch`]). Strongly consistent. Missing items are left out; the order is not
/// the keys'. A request's first read carries its gate's look at the rate-limit standing
/// when it is small enough ([`MAX_CARRYING_KEYS`], [`crate::gate`]).
///
/// # Errors
/// The reads' [`StoreError`]s.
pub async fn batch_get(client: &Client, table: &str, keys: Vec<Item>) -> Result<Vec<Item>, StoreError> {
    if keys.len() <= MAX_CARRYING_KEYS
        && let Some(gate) = current_gate()
        && let Some(read) = gate.carry(table, &keys)
        && let Some(found) = read.await
    {
        return Ok(found);
    }
    batch_get_alone(client, table, keys).await
}

/// [`batch_get`] with nothing carried.
async fn batch_get_alone(client: &Client, table: &str, keys: Vec<Item>) -> Result<Vec<Item>, StoreError> {
    let mut found = Vec::with_capacity(keys.len());
    let mut keys = keys;
    while !keys.is_empty() {
        let rest = keys.split_off(keys.len().min(100));
        let mut read = get_batch(client, HashMap::from([(table.to_owned(), keys)])).await?;
        found.extend(read.remove(table).unwrap_or_default());
        keys = rest;
    }
    Ok(found)
}

/// A query of one whole partition, newest first (descending sort key): `partition` is
/// the key attribute and value of the table's partition or of `index`'s. Reads of the
/// table are strongly consistent (an index cannot be).
#[must_use]
pub fn newest_first(
    client: &Client,
    table: &str,
    index: Option<&str>,
    partition: (&str, String),
) -> QueryFluentBuilder {
    client
        .query()
        .table_name(table)
        .set_index_name(index.map(str::to_owned))
        .key_condition_expression("#pk = :pk")
        .expression_attribute_names("#pk", partition.0)
        .expression_attribute_values(":pk", s(partition.1))
        .scan_index_forward(false)
        .consistent_read(index.is_none())
}

/// A query of one partition for the ids (`<prefix>_<uuidv7>`) in `range`, newest first
/// (the range comes from [`crate::ids::created_between`]: time filters as key ranges).
#[must_use]
pub fn newest_first_in(
    client: &Client,
    table: &str,
    index: Option<&str>,
    partition: (&str, String),
    range: (String, String),
) -> QueryFluentBuilder {
    newest_first(client, table, index, partition)
        .key_condition_expression("#pk = :pk AND #id BETWEEN :lo AND :hi")
        .expression_attribute_names("#id", "id")
        .expression_attribute_values(":lo", s(range.0))
        .expression_attribute_values(":hi", s(range.1))
}

/// Where a query of `partition` resumes after the item of `tenant` whose table sort
/// key (`sort`: name and value) is given: the `ExclusiveStartKey` of a keyset cursor,
/// for the table or an index (whose key adds its partition attribute).
#[must_use]
pub fn resume_after(tenant: &str, sort: (&str, AttributeValue), partition: (&str, &str)) -> Item {
    HashMap::from([
        ("tenant_id".to_owned(), s(tenant)),
        (sort.0.to_owned(), sort.1),
        (partition.0.to_owned(), s(partition.1)),
    ])
}

/// How many times an optimistic write is tried before it gives up (see [`retry_races`]).
pub const RACE_ATTEMPTS: u32 = 100;

/// How long an optimistic write keeps retrying lost races by default: inside every
/// function's timeout (10 s), with room for the request's other calls and a 503.
pub const RACE_BUDGET: Duration = Duration::from_secs(8);

/// The race budget in force: `RACE_BUDGET_MS` if set (the local stack's DynamoDB Local
/// commits a contended transaction a hundred times slower than DynamoDB, so its tests
/// give it longer), else [`RACE_BUDGET`].
fn race_budget() -> Duration {
    static BUDGET: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *BUDGET.get_or_init(|| {
        std::env::var("RACE_BUDGET_MS").ok().and_then(|ms| ms.parse().ok()).map_or(RACE_BUDGET, Duration::from_millis)
    })
}

/// What one try of an optimistic write came to.
#[derive(Debug)]
pub enum Attempt<T> {
    /// It committed, or decided without writing: this is the answer.
    Done(T),
    /// It lost a race (an item it read changed before its commit, or DynamoDB reported
    /// a transaction conflict): read again and try again.
    Raced,
}

impl<T> Attempt<T> {
    /// [`Attempt::Raced`] when `error` is a lost race on one of `guarded` (the parts
    /// whose condition is the version that was read) or a transaction conflict;
    /// otherwise the error itself.
    ///
    /// # Errors
    /// `error` when it is not a lost race.
    pub fn raced_on(error: TransactionError, guarded: &[Part]) -> Result<Self, TransactionError> {
        match error {
            TransactionError::Condition(part) if guarded.contains(&part) => Ok(Self::Raced),
            TransactionError::Store(StoreError::Conflict) => Ok(Self::Raced),
            other => Err(other),
        }
    }
}

/// The one retry policy of optimistic writes. Runs `attempt` (read, decide, commit
/// conditioned on what was read; written `|| async move { … }` over references, so that
/// the handler's future stays `Send`) until it is [`Attempt::Done`] or fails; after a lost
/// race it pauses (a short, growing, jittered pause, so competing writers spread out)
/// and tries again, at most [`RACE_ATTEMPTS`] times and not after [`RACE_BUDGET`]
/// (`RACE_BUDGET_MS` changes it).
///
/// # Errors
/// `attempt`'s errors; [`StoreError::Conflict`] (a 503 that says to retry) once the
/// tries or the time run out.
pub async fn retry_races<T, E, F, Fut>(attempt: F) -> Result<T, E>
where
    E: From<StoreError>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T>, E>>,
{
    retry_within(RACE_ATTEMPTS, race_budget(), attempt).await
}

/// [`retry_races`] with its bounds given.
async fn retry_within<T, E, F, Fut>(attempts: u32, budget: Duration, mut attempt: F) -> Result<T, E>
where
    E: From<StoreError>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T>, E>>,
{
    let start = tokio::time::Instant::now();
    for tries in 1..=attempts {
        if let Attempt::Done(answer) = attempt().await? {
            return Ok(answer);
        }
        let pause = backoff(tries);
        if start.elapsed() + pause > budget {
            break;
        }
        tokio::time::sleep(pause).await;
    }
    Err(StoreError::Conflict.into())
}

/// The pause after `tries` lost races: exponential backoff with full jitter (a random
/// pause up to 5 ms, 10, 20, ... at most 160 ms), so that writers racing for one item
/// spread out instead of colliding again together.
fn backoff(tries: u32) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let ceiling = 5_u64 << tries.saturating_sub(1).min(5);
    let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
    Duration::from_micros(1_000 + random % (ceiling * 1_000))
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
    query_window_of(query, sort_key, skip, take, &[]).await
}

/// Like [`query_window`], returning only `attributes` of each item (all of them when
/// empty): list summaries leave large payloads where they are.
///
/// # Errors
/// The query's [`StoreError`].
pub async fn query_window_of(
    query: QueryFluentBuilder,
    sort_key: &str,
    skip: usize,
    take: usize,
    attributes: &[&str],
) -> Result<Vec<Item>, StoreError> {
    query_window_from(query, sort_key, None, skip, take, attributes).await
}

/// Like [`query_window_of`], starting after the position `after` (a keyset cursor: the
/// table's and, for an index, the index's key attributes of an item, which need not
/// exist).
///
/// # Errors
/// The query's [`StoreError`].
pub async fn query_window_from(
    query: QueryFluentBuilder,
    sort_key: &str,
    after: Option<Item>,
    skip: usize,
    take: usize,
    attributes: &[&str],
) -> Result<Vec<Item>, StoreError> {
    const MAX_PER_CALL: usize = 1000;
    let query_items = if attributes.is_empty() {
        query.clone()
    } else {
        let names: Vec<String> = (0..attributes.len()).map(|i| format!("#attr{i}")).collect();
        attributes
            .iter()
            .zip(&names)
            .fold(query.clone().projection_expression(names.join(", ")), |q, (attribute, name)| {
                q.expression_attribute_names(name, *attribute)
            })
    };
    let mut start: Option<Item> = after;
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
    let mut items = Vec::with_capacity(take.min(MAX_PER_CALL));
    while items.len() < take {
        let out = query_items
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

/// The result of an SDK builder's `build()`, as a [`StoreError`] (a failed build is a
/// bug: a required field was not set).
///
/// # Errors
/// [`StoreError::Other`] with the builder's error.
pub fn built<T, E: std::error::Error + Send + Sync + 'static>(result: Result<T, E>) -> Result<T, StoreError> {
    result.map_err(|e| StoreError::Other(Box::new(e)))
}

/// A binary attribute.
#[must_use]
pub fn b(value: Vec<u8>) -> AttributeValue {
    AttributeValue::B(aws_smithy_types::Blob::new(value))
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

/// Counts the items of a query among the first `cap` it examines (all of them when it
/// has no filter expression), at most `cap` (keys only are returned; capacity is still
/// spent on the items' size, which is why untimed totals come from counters instead).
///
/// # Errors
/// The query's [`StoreError`].
pub async fn count(query: QueryFluentBuilder, cap: u64) -> Result<u64, StoreError> {
    let mut total = 0_u64;
    // Items examined: with a filter expression DynamoDB reads items that do not match,
    // and those are what a request pays for, so they are what is bounded.
    let mut examined = 0_u64;
    let mut start = None;
    while examined < cap {
        let out = query
            .clone()
            .select(aws_sdk_dynamodb::types::Select::Count)
            .limit(i32::try_from(cap - examined).unwrap_or(i32::MAX))
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(classify)?;
        total += u64::try_from(out.count).unwrap_or(0);
        examined += u64::try_from(out.scanned_count).unwrap_or(0).max(1);
        match out.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => break,
        }
    }
    Ok(total.min(cap))
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[test]
    fn a_functions_https_client_makes_its_tls_connector_from_the_compiled_in_roots() {
        use aws_smithy_runtime_api::client::http::HttpClient as _;
        use aws_smithy_runtime_api::client::runtime_components::RuntimeComponentsBuilder;
        // The SDK's own validation makes a connector, turning every root into a trust
        // anchor (as a function's first call does): a root it could not parse would
        // panic (`expect("cert parsable")` in the SDK). That panic is what this test
        // watches for; the validation itself always answers Ok.
        let components = RuntimeComponentsBuilder::new("test");
        let checked = hyper_client(Trust::CompiledIn)
            .validate_base_client_config(&components, &aws_smithy_types::config_bag::ConfigBag::base());
        assert!(checked.is_ok());
    }

    #[tokio::test]
    async fn a_write_that_loses_races_is_tried_again_until_it_is_done() {
        let tries = Cell::new(0);
        let tries = &tries;
        let answer: Result<&str, StoreError> = retry_races(|| async move {
            tries.set(tries.get() + 1);
            Ok(if tries.get() < 4 { Attempt::Raced } else { Attempt::Done("committed") })
        })
        .await;
        assert_eq!(answer.expect("done"), "committed");
        assert_eq!(tries.get(), 4);
    }

    #[tokio::test]
    async fn an_error_ends_the_retries_at_once() {
        let tries = Cell::new(0);
        let tries = &tries;
        let answer: Result<(), StoreError> = retry_races(|| async move {
            tries.set(tries.get() + 1);
            Err(StoreError::Corrupt("bad".into()))
        })
        .await;
        assert!(matches!(answer, Err(StoreError::Corrupt(_))));
        assert_eq!(tries.get(), 1);
    }

    #[tokio::test]
    async fn endless_races_end_in_a_conflict_within_the_budget_or_the_tries() {
        let endless = |budget| async move {
            let tries = Cell::new(0_u32);
            let tries = &tries;
            let answer: Result<(), StoreError> = retry_within(5, budget, || async move {
                tries.set(tries.get() + 1);
                Ok(Attempt::Raced)
            })
            .await;
            assert!(matches!(answer, Err(StoreError::Conflict)), "{answer:?}");
            tries.get()
        };
        // Pauses are 1 to 160 ms: 5 tries fit 10 s; no second try fits a budget of 0.
        assert_eq!(endless(Duration::from_secs(10)).await, 5);
        assert_eq!(endless(Duration::ZERO).await, 1);
    }

    #[test]
    fn only_a_lost_race_on_a_guarded_part_or_a_conflict_is_retried() {
        let raced = |e| matches!(Attempt::<()>::raced_on(e, &[Part::Execution]), Ok(Attempt::Raced));
        assert!(raced(TransactionError::Condition(Part::Execution)));
        assert!(raced(TransactionError::Store(StoreError::Conflict)));
        assert!(!raced(TransactionError::Condition(Part::Workflow)));
        assert!(!raced(TransactionError::Store(StoreError::Corrupt("x".into()))));
    }

    #[test]
    fn item_size_follows_dynamodbs_rules() {
        let item: Item = HashMap::from([
            ("name".to_owned(), s("äb")),
            ("n".to_owned(), n(12345)),
            ("data".to_owned(), b(vec![0; 10])),
            ("list".to_owned(), AttributeValue::L(vec![s("ab"), AttributeValue::Bool(true)])),
        ]);
        // name 4 + "äb" 3; n 1 + (5 digits: 3 + 1); data 4 + 10; list 4 + 3 + (1 + 2) + (1 + 1)
        assert_eq!(item_size(&item), 7 + 5 + 14 + 12);
    }

    #[test]
    fn a_transaction_beyond_dynamodbs_limits_is_refused_before_it_is_sent() {
        let put = |bytes: usize| {
            let item = HashMap::from([("k".to_owned(), s("x")), ("data".to_owned(), b(vec![0; bytes]))]);
            let put = aws_sdk_dynamodb::types::Put::builder().table_name("t").set_item(Some(item)).build();
            TransactWriteItem::builder().put(put.expect("put")).build()
        };
        let mut fits = Transaction::new();
        fits.extend(Part::Blob, (0..10).map(|_| put(390 * 1024)));
        assert!(fits.check_limits().is_ok(), "{}", fits.size());
        let mut big_item = Transaction::new();
        big_item.push(Part::Blob, put(MAX_ITEM_BYTES));
        assert!(matches!(big_item.check_limits(), Err(TransactionError::TooLarge { .. })));
        let mut too_big = Transaction::new();
        too_big.extend(Part::Blob, (0..11).map(|_| put(390 * 1024)));
        assert!(matches!(too_big.check_limits(), Err(TransactionError::TooLarge { .. })));
        let mut too_many = Transaction::new();
        too_many.extend(Part::Blob, (0..=MAX_TRANSACTION_ITEMS).map(|_| put(1)));
        assert!(matches!(too_many.check_limits(), Err(TransactionError::TooLarge { items: 101, .. })));
    }

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
