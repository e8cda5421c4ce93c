//! Cairn's domain, one module per aggregate: its model (pure rules, no HTTP), its
//! storage in DynamoDB, and the operations that change it.
//!
//! - [`workflows`]: registered workflows.
//! - [`runs`]: executions with their checkpoints and failures, one consistency boundary
//!   (a transition, its failure records and its checkpoint changes commit together).
//! - [`credits`]: the credit ledger and balance.
//! - [`subscriptions`]: plans and the tenant's subscription as Cairn shows it.
//! - [`blobs`]: large payloads (execution values, checkpoint states), in parts.
//! - [`keys`]: a tenant's API keys.
//! - [`erasure`]: deleting a tenant and everything it owns.
//! - [`retention`]: how long ended executions and their checkpoints are kept.
//! - [`webhooks`]: events, webhook endpoints and deliveries.
//!
//! Dependency rule: functions -> domain -> shared, never sideways; no function crate
//! depends on another, and nothing here talks to Stripe (the billing function does).

pub mod blobs;
pub mod credits;
pub mod erasure;
mod error;
pub mod keys;
pub mod retention;
pub mod runs;
pub mod subscriptions;
pub mod views;
pub mod webhooks;
pub mod workflows;

pub use error::Error;

/// Called with what a write will have made just before its transaction is sent: the
/// caller may render its answer then, so that an `Idempotency-Key`'s record stores it in
/// the same transaction. Called once per attempt (a write retried after a race may call
/// it again with the new outcome).
pub type BeforeCommit<'a, T> = &'a (dyn Fn(&T) + Sync);
