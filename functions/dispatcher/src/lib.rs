//! The dispatcher: delivers webhook events. Two kinds of invocation:
//!
//! - **A batch of a stream**, the `events` table's (the outbox) or the `checkpoints`
//!   table's (`checkpoint.created`), from Lambda's event source mapping (locally
//!   `cairn-relay` reads DynamoDB Local's streams and sends the same event). The events
//!   each new item reports ([`domain::webhooks::stream`]) are fanned out to the tenant's
//!   endpoints that receive them: a delivery item each (created once, however often the
//!   record comes), then a first attempt. A record whose fan-out failed (storage) is
//!   reported in `batchItemFailures`, so that Lambda hands it over again (bisecting the
//!   batch); an item that cannot be read is logged and passed over.
//! - **The schedule** (every minute; locally every 2 seconds): the deliveries whose next
//!   attempt is due, from the `by_due` index, each claimed and attempted.
//!
//! An attempt is a POST of the event's body signed as Standard Webhooks specifies,
//! to an address checked after resolution ([`domain::webhooks::address`]); a 2xx within
//! [`ATTEMPT_TIMEOUT`] delivers it; no redirect is followed; 410 disables the endpoint.

mod send;

use std::collections::HashMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use domain::webhooks::address::Policy;
use domain::webhooks::deliveries::{CLAIM_SECONDS, owner};
use domain::webhooks::stream::{self, Reported};
use domain::webhooks::{AttemptRecord, Deliveries, Delivery, DeliveryStatus, Endpoint, Endpoints, SecretBox};
use serde_json::{Value, json};
use shared::dynamo::Tables;
use tokio::sync::Semaphore;

pub use send::ATTEMPT_TIMEOUT;

/// Deliveries attempted at once by one invocation.
const CONCURRENCY: usize = 32;
/// Due deliveries one sweep takes.
const SWEEP_BATCH: u32 = 200;

/// What the dispatcher needs, built once per cold start.
#[derive(Debug, Clone)]
pub struct Dispatcher {
    endpoints: Endpoints,
    deliveries: Deliveries,
    secrets: Option<SecretBox>,
    sender: send::Sender,
    limit: Arc<Semaphore>,
}

impl Dispatcher {
    /// Over `client` and the named tables; secrets and the address policy from the
    /// environment.
    #[must_use]
    pub fn new(client: aws_sdk_dynamodb::Client, tables: Tables) -> Self {
        let secrets = SecretBox::from_env().ok();
        if secrets.is_none() {
            tracing::error!("WEBHOOK_SECRETS_KEY is not configured: no webhook can be signed");
        }
        Self {
            endpoints: Endpoints::new(client.clone(), tables.clone()),
            deliveries: Deliveries::new(client, tables),
            secrets,
            sender: send::Sender::new(Policy::from_env()),
            limit: Arc::new(Semaphore::new(CONCURRENCY)),
        }
    }

    /// Handles one invocation: a stream batch (`Records`) or the schedule (anything
    /// else).
    ///
    /// # Errors
    /// A sweep's storage error (a stream batch reports its failed records instead).
    pub async fn handle(&self, event: Value) -> Result<Value, domain::Error> {
        match event.get("Records").and_then(Value::as_array) {
            Some(records) => Ok(self.stream(records).await),
            None => self.sweep_at(Utc::now()).await,
        }
    }

    /// Fans out each new outbox item; answers the records that failed.
    async fn stream(&self, records: &[Value]) -> Value {
        let mut failures = Vec::new();
        let mut endpoints: HashMap<String, Vec<Endpoint>> = HashMap::new();
        let mut attempts = Vec::new();
        for record in records {
            let sequence = record["dynamodb"]["SequenceNumber"].as_str().unwrap_or_default().to_owned();
            match self.fan_out(record, &mut endpoints).await {
                Ok(created) => attempts.extend(created),
                Err(error) => {
                    tracing::error!(error = %error, sequence, "dispatcher: a stream record was not fanned out");
                    failures.push(json!({"itemIdentifier": sequence}));
                    // Records after a failed one are handed over again with it.
                    break;
                }
            }
        }
        self.attempt_all(attempts, Utc::now()).await;
        json!({"batchItemFailures": failures})
    }

    /// The deliveries a stream record makes (new ones only).
    async fn fan_out(
        &self,
        record: &Value,
        endpoints: &mut HashMap<String, Vec<Endpoint>>,
    ) -> Result<Vec<Delivery>, domain::Error> {
        let (tenant_id, events) = match stream::reported(record) {
            Ok(Reported::Events(tenant_id, events)) => (tenant_id, events),
            Ok(Reported::Nothing) => return Ok(Vec::new()),
            // An item this code cannot read is never readable on a retry: logged and
            // passed, so that it cannot hold up the records after it in its shard.
            // (Deploy the dispatcher before a function that writes a new event type.)
            Err(error) => {
                let sequence = record["dynamodb"]["SequenceNumber"].as_str().unwrap_or_default();
                tracing::error!(error = %error, sequence, "dispatcher: a stream record it cannot read; passed over");
                return Ok(Vec::new());
            }
        };
        let tenant = tenant_id.as_str();
        if !endpoints.contains_key(tenant) {
            let list = self.endpoints.list(&tenant_id).await?;
            endpoints.insert(tenant.to_owned(), list);
        }
        let now = Utc::now();
        let mut created = Vec::new();
        for event in &events {
            for endpoint in endpoints.get(tenant).into_iter().flatten().filter(|e| e.receives(event)) {
                let mut delivery = Delivery::new(tenant, &endpoint.endpoint_id, event, now);
                // Claimed by this invocation: the sweep takes it only if this one dies.
                delivery.next_attempt_at = Some(shared::time::format(now + chrono::Duration::seconds(CLAIM_SECONDS)));
                if self.deliveries.create(&delivery).await? {
                    created.push(delivery);
                }
            }
        }
        Ok(created)
    }

    /// Attempts every delivery due at `now` (at most [`SWEEP_BATCH`]): the schedule's
    /// invocation, at the time it runs.
    ///
    /// # Errors
    /// The storage error of the read of what is due, or of a claim.
    pub async fn sweep_at(&self, now: DateTime<Utc>) -> Result<Value, domain::Error> {
        let due = self.deliveries.due(now, SWEEP_BATCH).await?;
        let mut claimed = Vec::new();
        for delivery in due {
            if self.deliveries.claim(&delivery, now).await? {
                claimed.push(delivery);
            }
        }
        let count = claimed.len();
        self.attempt_all(claimed, now).await;
        tracing::info!(attempted = count, "dispatcher: due deliveries");
        Ok(json!({"attempted": count}))
    }

    /// Attempts `deliveries`, [`CONCURRENCY`] at a time, in this task (so a test sees
    /// every DynamoDB call they make).
    async fn attempt_all(&self, deliveries: Vec<Delivery>, now: DateTime<Utc>) {
        let attempts = deliveries.iter().map(|delivery| async move {
            let _permit = self.limit.acquire().await;
            if let Err(error) = self.attempt(delivery, now).await {
                tracing::error!(error = %error, delivery = delivery.delivery, "dispatcher: an attempt was not recorded");
            }
        });
        futures_util::future::join_all(attempts).await;
    }

    /// One attempt of `delivery`, recorded on it and on its endpoint.
    async fn attempt(&self, delivery: &Delivery, now: DateTime<Utc>) -> Result<(), domain::Error> {
        let Some(tenant) = owner(&delivery.tenant_id) else { return Ok(()) };
        let endpoint = match self.endpoints.get(&tenant, &delivery.endpoint_id).await {
            Ok(endpoint) => Some(endpoint),
            Err(domain::Error::NotFound { .. }) => None,
            Err(e) => return Err(e),
        };
        let test = delivery.event_type == domain::webhooks::EventType::WebhookTest.as_str();
        let refused = match &endpoint {
            None => Some("the endpoint was deleted"),
            Some(e) if !e.enabled && !test => Some("the endpoint is disabled"),
            Some(_) if self.secrets.is_none() => Some("WEBHOOK_SECRETS_KEY is not configured"),
            Some(_) => None,
        };
        let (Some(endpoint), None, Some(key)) = (&endpoint, refused, &self.secrets) else {
            let record = failed_attempt(now, refused.unwrap_or("not sent"));
            let next = delivery.after(record, true, 0.5, now);
            return self.deliveries.record(delivery, &next).await;
        };
        let secrets = endpoint
            .signing_secrets(key, now)
            .map_err(|e| domain::Error::Store(shared::dynamo::StoreError::Other(Box::new(e))))?;
        let timestamp = Utc::now().timestamp();
        let signature: Vec<String> = secrets
            .iter()
            .map(|s| s.sign(delivery.event_id.as_str(), timestamp, delivery.payload.as_bytes()))
            .collect();
        let outcome = self
            .sender
            .post(&endpoint.url, delivery.event_id.as_str(), timestamp, &signature.join(" "), delivery.payload.clone())
            .await;
        let gone = outcome.status_code == Some(410);
        let succeeded = outcome.status_code.is_some_and(|c| (200..300).contains(&c));
        let next = delivery.after(outcome, gone, jitter(), Utc::now());
        self.deliveries.record(delivery, &next).await?;
        if next.status != DeliveryStatus::Pending || succeeded || gone {
            self.endpoints.record_outcome(&tenant, &endpoint.endpoint_id, succeeded, gone, Utc::now()).await?;
        } else {
            self.endpoints.record_outcome(&tenant, &endpoint.endpoint_id, false, false, Utc::now()).await?;
        }
        Ok(())
    }
}

fn failed_attempt(now: DateTime<Utc>, why: &str) -> AttemptRecord {
    AttemptRecord { at: shared::time::format(now), status_code: None, latency_ms: 0, error: Some(why.to_owned()) }
}

/// A number in 0..1 that spreads retries.
fn jitter() -> f64 {
    let mut byte = [0u8; 2];
    let _ = getrandom::fill(&mut byte);
    f64::from(u16::from_le_bytes(byte)) / f64::from(u16::MAX)
}
