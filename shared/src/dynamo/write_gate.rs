//! The write gate of the request being served: what its write transactions, its effects
//! outside DynamoDB and its first read pass through.

use aws_sdk_dynamodb::types::TransactWriteItem;

use super::error::StoreError;
use super::item::Item;

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
    /// read of its own in the same call ([`get_item`](super::get_item),
    /// [`batch_get`](super::batch_get)): the read that answers the items found, or `None`
    /// to read them alone. The read itself answers `None` when it did not read them (its
    /// call failed): the caller reads them alone, with its own call. A gate carries a
    /// read once per request.
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

/// The gate of bookkeeping writes: lets every transaction through as it is.
#[derive(Debug)]
struct Open;

impl WriteGate for Open {
    fn admit<'a>(
        &'a self,
        _items: &'a [TransactWriteItem],
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<TransactWriteItem>, StoreError>> + Send + 'a>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn settle(&self, _committed: bool, _failed: Option<usize>) -> Option<StoreError> {
        None
    }

    fn hold(&self) -> std::pin::Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send + '_>> {
        Box::pin(async { Ok(()) })
    }
}

/// Runs `work` with its transactions outside the gate in force: for bookkeeping a write
/// needs before it can be made (moving credits between a tenant's allowances, putting
/// charges already made into the ledger), which is no action of the request's key and
/// must not carry a job's once-only marker.
pub async fn ungated<F: Future>(work: F) -> F::Output {
    BOOKKEEPING.scope((), gated(std::sync::Arc::new(Open), work)).await
}

tokio::task_local! {
    static BOOKKEEPING: ();
}

/// Whether the calls being made are bookkeeping ([`ungated`]): for tests that tell a
/// request's own write from what it needed first.
#[must_use]
pub fn in_bookkeeping() -> bool {
    BOOKKEEPING.try_with(|()| ()).is_ok()
}
