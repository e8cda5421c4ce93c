//! The DynamoDB client, built once per cold start: its configuration from the
//! environment, its timeouts and retries, and its HTTPS client.

use std::time::Duration;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::config::BehaviorVersion;
use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::config::timeout::TimeoutConfig;
use aws_smithy_runtime_api::client::connector_metadata::ConnectorMetadata;
use aws_smithy_runtime_api::client::http::{HttpClient, HttpConnectorSettings, SharedHttpClient, SharedHttpConnector};
use aws_smithy_runtime_api::client::runtime_components::{RuntimeComponents, RuntimeComponentsBuilder};

/// Total time one DynamoDB call may take, retries included, unless
/// `DYNAMODB_OPERATION_TIMEOUT_MS` says otherwise.
const OPERATION_TIMEOUT: Duration = Duration::from_secs(5);
/// Time one attempt may take, unless `DYNAMODB_ATTEMPT_TIMEOUT_MS` says otherwise.
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
/// bootstrap about 0.4 MB (docs/deploying.md, "Build"). `cairn-admin`, which runs on an
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

/// The timeouts in force: [`OPERATION_TIMEOUT`] and [`ATTEMPT_TIMEOUT`], or
/// `DYNAMODB_OPERATION_TIMEOUT_MS` and `DYNAMODB_ATTEMPT_TIMEOUT_MS` where set (the
/// test stack's DynamoDB Local queues a burst of one tenant's transactions for seconds,
/// which DynamoDB answers in milliseconds, so its tests give each call longer).
fn timeouts() -> TimeoutConfig {
    let millis = |name: &str, default: Duration| {
        std::env::var(name).ok().and_then(|ms| ms.parse().ok()).map_or(default, Duration::from_millis)
    };
    deployed_timeouts()
        .into_builder()
        .operation_timeout(millis("DYNAMODB_OPERATION_TIMEOUT_MS", OPERATION_TIMEOUT))
        .operation_attempt_timeout(millis("DYNAMODB_ATTEMPT_TIMEOUT_MS", ATTEMPT_TIMEOUT))
        .build()
}

/// The deployed timeouts, whatever the environment says: for tests of what a client
/// sees when DynamoDB does not answer.
#[must_use]
pub fn deployed_timeouts() -> TimeoutConfig {
    TimeoutConfig::builder()
        .operation_timeout(OPERATION_TIMEOUT)
        .operation_attempt_timeout(ATTEMPT_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
}

/// The SDK's HTTPS client (hyper and rustls, the SDK's default) with ring as rustls's
/// crypto instead of the default aws-lc-rs: the same TLS, a smaller bootstrap (docs/deploying.md,
/// "Build"). The billing function's Stripe client uses the same stack.
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

#[cfg(test)]
mod tests {
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
}
