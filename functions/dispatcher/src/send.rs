//! The HTTP side of an attempt: one POST, its answer's status, its latency.
//!
//! Names are resolved by [`CheckedResolver`], which refuses a name with any address the
//! policy does not allow, and the connection goes to the addresses it checked (no
//! second lookup for a rebinding DNS server to answer differently). An IP literal is
//! checked before connecting. The same hyper and rustls (ring) as the AWS SDK, with
//! Mozilla's roots compiled in (`shared::tls::ROOTS`). Redirects are not followed.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use domain::webhooks::AttemptRecord;
use domain::webhooks::address::{Policy, check_url};
use http::{Method, Request, header};
use http_body_util::Full;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;

/// How long a receiver has to answer (Standard Webhooks: 15 seconds).
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a connection may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// A resolver that refuses names with addresses outside the policy.
#[derive(Debug, Clone, Copy)]
struct CheckedResolver {
    policy: Policy,
}

impl tower::Service<Name> for CheckedResolver {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        let policy = self.policy;
        Box::pin(async move {
            let addresses: Vec<SocketAddr> = tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            if let Some(refused) = addresses.iter().find(|a| !policy.allows(a.ip())) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!("{} resolves to {}, which is not a public address", name.as_str(), refused.ip()),
                ));
            }
            if addresses.is_empty() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("{} has no address", name.as_str()),
                ));
            }
            Ok(addresses.into_iter())
        })
    }
}

type Http = Client<hyper_rustls::HttpsConnector<HttpConnector<CheckedResolver>>, Full<Bytes>>;

/// Sends attempts.
#[derive(Clone)]
pub struct Sender {
    policy: Policy,
    http: Option<Arc<Http>>,
}

impl std::fmt::Debug for Sender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sender").field("policy", &self.policy).finish_non_exhaustive()
    }
}

impl Sender {
    /// A sender that reaches what `policy` allows.
    #[must_use]
    pub fn new(policy: Policy) -> Self {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(shared::tls::ROOTS.iter().cloned());
        let http = match rustls::ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions() {
            Ok(config) => {
                let config = config.with_root_certificates(roots).with_no_client_auth();
                let mut connector = HttpConnector::new_with_resolver(CheckedResolver { policy });
                connector.enforce_http(false);
                connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
                let https = hyper_rustls::HttpsConnectorBuilder::new()
                    .with_tls_config(config)
                    .https_or_http()
                    .enable_http1()
                    .wrap_connector(connector);
                Some(Arc::new(Client::builder(hyper_util::rt::TokioExecutor::new()).build(https)))
            }
            Err(error) => {
                tracing::error!(error = %error, "no TLS configuration: no webhook can be sent");
                None
            }
        };
        Self { policy, http }
    }

    /// POSTs `body` to `url` signed with `signature`; the attempt as recorded.
    pub async fn post(&self, url: &str, id: &str, timestamp: i64, signature: &str, body: String) -> AttemptRecord {
        let at = shared::time::format(chrono::Utc::now());
        let started = Instant::now();
        let result = self.send(url, id, timestamp, signature, body).await;
        let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        match result {
            Ok(status) => AttemptRecord {
                at,
                status_code: Some(status),
                latency_ms,
                error: (!(200..300).contains(&status)).then(|| format!("the endpoint answered {status}")),
            },
            Err(error) => AttemptRecord { at, status_code: None, latency_ms, error: Some(error) },
        }
    }

    async fn send(&self, url: &str, id: &str, timestamp: i64, signature: &str, body: String) -> Result<u16, String> {
        // Checked again on every attempt: the policy may be stricter than when it was saved.
        let parsed = check_url(url, self.policy)?;
        if let Some(ip) = parsed.host_str().and_then(|h| h.trim_matches(['[', ']']).parse::<IpAddr>().ok())
            && !self.policy.allows(ip)
        {
            return Err(format!("{ip} is not a public address"));
        }
        let http = self.http.as_ref().ok_or("no TLS configuration")?;
        let request = Request::builder()
            .method(Method::POST)
            .uri(parsed.as_str())
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::USER_AGENT, "Cairn-Webhooks/1")
            .header("webhook-id", id)
            .header("webhook-timestamp", timestamp.to_string())
            .header("webhook-signature", signature)
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("the request cannot be made: {e}"))?;
        match tokio::time::timeout(ATTEMPT_TIMEOUT, http.request(request)).await {
            Err(_) => Err(format!("no answer within {} seconds", ATTEMPT_TIMEOUT.as_secs())),
            Ok(Err(error)) => Err(describe(&error)),
            Ok(Ok(response)) => Ok(response.status().as_u16()),
        }
    }
}

/// An error and its causes, in one line.
fn describe(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    text
}
