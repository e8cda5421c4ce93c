//! A DynamoDB client that goes away: what a function that dies (or loses DynamoDB)
//! right after one of its writes looks like to the next request.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeDeserializationInterceptorContextRef, BeforeTransmitInterceptorContextRef,
};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

/// DynamoDB becomes unreachable for a client the moment one of its transactions
/// commits: what a function that dies (or loses DynamoDB) right after its write looks
/// like to the next request.
#[derive(Debug, Clone, Default)]
pub struct DownAfterCommit(Arc<AtomicBool>);

/// Marks a call as a transaction (in the call's own state).
#[derive(Debug, Clone, Copy)]
struct IsTransaction;

impl aws_smithy_types::config_bag::Storable for IsTransaction {
    type Storer = aws_smithy_types::config_bag::StoreReplace<Self>;
}

impl Intercept for DownAfterCommit {
    fn name(&self) -> &'static str {
        "DownAfterCommit"
    }

    fn read_before_transmit(
        &self,
        context: &BeforeTransmitInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if self.0.load(Ordering::SeqCst) {
            return Err("DynamoDB is unreachable (test)".into());
        }
        let target = context.request().headers().get("x-amz-target").unwrap_or_default();
        // A request's own write, not the bookkeeping it needed first (an allowance's refill).
        if target.ends_with(".TransactWriteItems") && !shared::dynamo::in_bookkeeping() {
            cfg.interceptor_state().store_put(IsTransaction);
        }
        Ok(())
    }

    fn read_after_transmit(
        &self,
        context: &BeforeDeserializationInterceptorContextRef<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if cfg.load::<IsTransaction>().is_some() && context.response().status().is_success() {
            self.0.store(true, Ordering::SeqCst);
        }
        Ok(())
    }
}

impl DownAfterCommit {
    /// A client of `env`'s DynamoDB that goes away after its first committed
    /// transaction, and the switch that tells and resets it.
    #[must_use]
    pub fn client(env: &crate::Env) -> (aws_sdk_dynamodb::Client, Self) {
        let down = Self::default();
        let config = env.client.config().to_builder().interceptor(down.clone()).build();
        (aws_sdk_dynamodb::Client::from_conf(config), down)
    }

    /// Whether a transaction has committed (and DynamoDB is gone since).
    #[must_use]
    pub fn is_down(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// DynamoDB is back, until the next committed transaction.
    pub fn reset(&self) {
        self.0.store(false, Ordering::SeqCst);
    }
}
