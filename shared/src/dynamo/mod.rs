//! DynamoDB: the client (built once per cold start), table names, the mapping of SDK
//! errors to storage facts, and the helpers every store uses.
//!
//! Every table is keyed by tenant: its partition key is `tenant_id`, built only from a
//! [`TenantId`](crate::TenantId) (the tenants and API-keys tables, which authentication
//! itself reads, are the exceptions).
//!
//! One file per concern, each private; every public name is re-exported here, so callers
//! write `shared::dynamo::X`:
//! - `item`: the item type, attribute values and an item's size;
//! - `tables`: the tables and their deployed names;
//! - `client`: the client, its configuration and its HTTPS client;
//! - `error`: storage errors and the classes of the SDK's errors;
//! - `write_gate`: the request's write gate, which every write transaction passes;
//! - `marker`: a job's marker, a write gate that makes its action happen once;
//! - `transaction`: write transactions and DynamoDB's limits on them;
//! - `read`: reads by key (one item, a batch, a snapshot);
//! - `query`: queries of one partition, by window and count;
//! - `retry`: the retry policy of optimistic writes.

mod client;
mod error;
mod item;
mod marker;
mod query;
mod read;
mod retry;
mod tables;
mod transaction;
mod write_gate;

pub use client::{client, client_with_default_chain, config, deployed_timeouts};
pub use error::{Refusal, StoreError, built, classify};
pub use item::{Item, b, item_size, n, s};
pub use marker::Marker;
pub use query::{
    Backfilled, backfill, count, count_keeping, newest_first, newest_first_in, page_of, query_window,
    query_window_from, query_window_of, resume_after,
};
pub use read::{batch_get, batch_get_projected, get_batch, get_item, get_together};
pub use retry::{Attempt, RACE_ATTEMPTS, RACE_BUDGET, retry_races};
pub use tables::{Table, Tables};
pub(crate) use transaction::has_room_for;
pub use transaction::{
    MAX_ITEM_BYTES, MAX_TRANSACTION_BYTES, MAX_TRANSACTION_ITEMS, Part, Transaction, TransactionError, transact,
};
pub use write_gate::{MAX_CARRYING_KEYS, Read, WriteGate, before_effect, current_gate, gated, in_bookkeeping, ungated};
