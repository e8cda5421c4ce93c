//! Write transactions: [`transact`] through the request's write gate, [`Transaction`]
//! with its parts, and DynamoDB's limits on a transaction.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::error::SdkError;
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{AttributeValue, TransactWriteItem};

use super::error::{StoreError, classify, is_conflict, is_throttling};
use super::item::item_size;
use super::write_gate::current_gate;

/// Runs a write transaction; a failed condition names the operation that failed.
///
/// # Errors
/// [`StoreError::ConditionFailed`] with the index of the first failed condition;
/// [`StoreError::Conflict`] for a conflict; [`StoreError::Unavailable`] when throttling
/// cancelled it; [`StoreError::Other`] for a validation error or any other reason.
pub async fn transact(client: &Client, mut items: Vec<TransactWriteItem>) -> Result<(), StoreError> {
    let gate = current_gate();
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
    /// One of a tenant's credit allowances (`accounts`, `{tenant}#NN`): a charge's
    /// condition that it still holds the credits.
    Allowance,
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
    /// The events a change reports, in its outbox item.
    Outbox,
    /// A webhook endpoint.
    Endpoint,
    /// A webhook delivery.
    Delivery,
    /// A long job's item, or its marker of an item it acted on.
    Job,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dynamo::{b, s};

    /// A gate's operation (a job's marker) is added only while the transaction stays
    /// within 100 operations and 4 MB with it: computed from its real size, not assumed.
    #[test]
    fn a_gates_operation_is_added_only_within_the_transaction_limits() {
        let check = aws_sdk_dynamodb::types::ConditionCheck::builder()
            .table_name("t")
            .key("key_hash", s("ab".repeat(32)))
            .condition_expression("attribute_not_exists(key_hash)")
            .build()
            .expect("check");
        let check = TransactWriteItem::builder().condition_check(check).build();
        // As DynamoDB counts a condition check: its key.
        let size = operation_size(&check);
        assert_eq!(size, "key_hash".len() + 64);
        assert!(fits(MAX_TRANSACTION_ITEMS - 1, MAX_TRANSACTION_BYTES - size, size));
        assert!(!fits(MAX_TRANSACTION_ITEMS, 0, size), "101 operations");
        assert!(!fits(1, MAX_TRANSACTION_BYTES - size + 1, size), "over 4 MB");
        let others = vec![check.clone(); MAX_TRANSACTION_ITEMS];
        assert!(has_room_for(&others[1..], &check), "the 100th operation");
        assert!(!has_room_for(&others, &check), "a 101st operation");
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
}
