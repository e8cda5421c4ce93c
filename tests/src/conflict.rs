//! A DynamoDB client whose next write transactions meet a conflict: what DynamoDB answers
//! when another transaction holds one of their items (here, every request of a tenant
//! counting itself on the tenant's standing item while a key is revoked).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    BeforeDeserializationInterceptorContextMut, BeforeTransmitInterceptorContextMut,
};
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_runtime_api::http::{Response, StatusCode};
use aws_smithy_types::body::SdkBody;
use aws_smithy_types::config_bag::ConfigBag;

/// Answers a client's next TransactWriteItems calls (as many as armed) with
/// `TransactionCanceledException` for a `TransactionConflict` on the first item. The
/// transaction never reaches DynamoDB: it is sent as a `DescribeLimits`, which changes
/// nothing, and its answer replaced, so it commits nothing, as a conflict does.
#[derive(Debug, Clone, Default)]
pub struct ConflictNext {
    armed: Arc<AtomicUsize>,
    answered: Arc<AtomicUsize>,
}

/// The operations of a transaction turned into a conflict (in the call's own state).
#[derive(Debug, Clone, Copy)]
struct Conflicted(usize);

impl aws_smithy_types::config_bag::Storable for Conflicted {
    type Storer = aws_smithy_types::config_bag::StoreReplace<Self>;
}

impl Intercept for ConflictNext {
    fn name(&self) -> &'static str {
        "ConflictNext"
    }

    fn modify_before_signing(
        &self,
        context: &mut BeforeTransmitInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let request = context.request_mut();
        let target = request.headers().get("x-amz-target").unwrap_or_default();
        if !target.ends_with(".TransactWriteItems")
            || self.armed.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_err()
        {
            return Ok(());
        }
        let body: serde_json::Value = serde_json::from_slice(request.body().bytes().unwrap_or_default())?;
        let operations = body["TransactItems"].as_array().map_or(1, Vec::len);
        request.headers_mut().insert("x-amz-target", "DynamoDB_20120810.DescribeLimits");
        request.headers_mut().insert("content-length", "2");
        *request.body_mut() = SdkBody::from("{}");
        cfg.interceptor_state().store_put(Conflicted(operations));
        Ok(())
    }

    fn modify_before_deserialization(
        &self,
        context: &mut BeforeDeserializationInterceptorContextMut<'_>,
        _: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let Some(Conflicted(operations)) = cfg.load::<Conflicted>().copied() else { return Ok(()) };
        let reasons: Vec<serde_json::Value> = (0..operations)
            .map(|i| {
                if i == 0 {
                    serde_json::json!({"Code": "TransactionConflict", "Message": "Transaction is ongoing for the item"})
                } else {
                    serde_json::json!({"Code": "None"})
                }
            })
            .collect();
        let body = serde_json::json!({
            "__type": "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
            "message": "Transaction cancelled, please refer cancellation reasons for specific reasons",
            "CancellationReasons": reasons,
        });
        let mut response = Response::new(StatusCode::try_from(400)?, SdkBody::from(body.to_string()));
        response.headers_mut().insert("content-type", "application/x-amz-json-1.0");
        *context.response_mut() = response;
        self.answered.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
}

impl ConflictNext {
    /// A client of `env`'s DynamoDB with this interceptor, and the interceptor (unarmed).
    #[must_use]
    pub fn client(env: &crate::Env) -> (aws_sdk_dynamodb::Client, Self) {
        let conflict = Self::default();
        let config = env.client.config().to_builder().interceptor(conflict.clone()).build();
        (aws_sdk_dynamodb::Client::from_conf(config), conflict)
    }

    /// The next `n` write transactions meet a conflict.
    pub fn arm(&self, n: usize) {
        self.armed.store(n, Ordering::SeqCst);
    }

    /// How many transactions it has answered with a conflict.
    #[must_use]
    pub fn answered(&self) -> usize {
        self.answered.load(Ordering::SeqCst)
    }
}
