//! Deliveries: one event to one endpoint, with every attempt.
//!
//! Table `webhook-deliveries` (`tenant_id`, `delivery`: `we_…#evt_…`), so an event is
//! delivered to an endpoint once however often its stream record is handed over, and an
//! endpoint's deliveries are read newest first. A pending delivery carries `due` and
//! `next_attempt_at`, which put it in the sparse index `by_due`; the `dispatcher`'s
//! sweep reads the index for what is due, claims each delivery by its attempt count
//! and tries again. Kept [`DELIVERY_DAYS`] days (TTL).

use aws_sdk_dynamodb::types::AttributeValue;
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use shared::TenantId;
use shared::dynamo::{StoreError, Table, Tables, classify, n, s};
use shared::ids::{DeliveryId, EndpointId, EventId};

use super::events::Event;
use crate::Error;

/// How long a delivery and its attempts are kept.
pub const DELIVERY_DAYS: i64 = 30;
/// The attempts kept on a delivery (the newest).
pub const ATTEMPTS_KEPT: usize = 20;
/// The characters of an attempt's error kept (an error names at most a host, 253
/// characters, and what went wrong): with [`ATTEMPTS_KEPT`], what bounds a page of
/// deliveries within Lambda's 6 MB.
pub const ERROR_MAX_CHARS: usize = 400;
/// The delay before each retry, after the first attempt: Standard Webhooks' schedule
/// (about 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h), 10 attempts in all.
pub const RETRY_DELAYS_SECONDS: [i64; 9] = [5, 300, 1_800, 7_200, 18_000, 36_000, 50_400, 72_000, 86_400];
/// How long a claimed delivery is left to its sweeper before another may take it.
pub const CLAIM_SECONDS: i64 = 60;

/// Where a delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    /// Not delivered yet; another attempt is scheduled.
    Pending,
    /// A 2xx answer.
    Succeeded,
    /// Every attempt failed, or the endpoint is disabled or gone.
    Failed,
}

/// One attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptRecord {
    /// When it was made.
    pub at: String,
    /// The receiver's HTTP status, if it answered.
    pub status_code: Option<u16>,
    /// From sending to the answer's status.
    pub latency_ms: u64,
    /// Why it failed (no answer, refused address, …), if it did.
    pub error: Option<String>,
}

/// A delivery as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Delivery {
    /// Its owner.
    pub tenant_id: String,
    /// `we_…#evt_…`.
    pub delivery: String,
    /// The endpoint.
    pub endpoint_id: EndpointId,
    /// The event: its id is every attempt's `webhook-id`.
    pub event_id: EventId,
    /// The event's type.
    pub event_type: String,
    /// The body sent, the same on every attempt.
    pub payload: String,
    /// Where it stands.
    pub status: DeliveryStatus,
    /// Attempts made.
    pub attempt_count: u32,
    /// The newest [`ATTEMPTS_KEPT`] attempts, oldest first.
    #[serde(default)]
    pub attempts: Vec<AttemptRecord>,
    /// When the next attempt is due (pending only). Absent, never null, when there is
    /// none: it is a key attribute of the `by_due` index, which takes strings only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<String>,
    /// Present while pending: the partition of the `by_due` index (absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub due: Option<String>,
    /// When it was created.
    pub created_at: String,
    /// TTL (epoch seconds).
    pub expires_at: i64,
}

/// The tenant of an outbox item or a delivery: the partition it was read from, never a
/// name a caller gives (`None`: not a tenant id).
#[must_use]
pub fn owner(tenant_id: &str) -> Option<TenantId> {
    shared::auth::stored::owner(tenant_id)
}

/// The value of `due` on every pending delivery: `by_due` is one partition, read by time.
const DUE: &str = "due";

impl Delivery {
    /// A new pending delivery of `event` to `endpoint`, due at `now`.
    #[must_use]
    pub fn new(tenant: &str, endpoint: &EndpointId, event: &Event, now: DateTime<Utc>) -> Self {
        Self {
            tenant_id: tenant.to_owned(),
            delivery: format!("{endpoint}#{}", event.id),
            endpoint_id: endpoint.clone(),
            event_id: event.id.clone(),
            event_type: event.kind.as_str().to_owned(),
            payload: event.body(),
            status: DeliveryStatus::Pending,
            attempt_count: 0,
            attempts: Vec::new(),
            next_attempt_at: Some(shared::time::format(now)),
            due: Some(DUE.to_owned()),
            created_at: shared::time::format(now),
            expires_at: (now + Duration::days(DELIVERY_DAYS)).timestamp(),
        }
    }

    /// Its public id: `wd_` and its event's hex.
    #[must_use]
    pub fn id(&self) -> String {
        format!("{}_{}", DeliveryId::PREFIX, self.event_id.as_str().trim_start_matches("evt_"))
    }

    /// After an attempt at `now` with `outcome`: delivered, retried later, or given up
    /// (`final_failure`: the endpoint is gone or disabled). `jitter` in 0..1 spreads
    /// retries by up to ±10 %.
    #[must_use]
    pub fn after(&self, outcome: AttemptRecord, final_failure: bool, jitter: f64, now: DateTime<Utc>) -> Self {
        let mut next = self.clone();
        let succeeded = outcome.status_code.is_some_and(|c| (200..300).contains(&c));
        next.attempt_count += 1;
        let error = outcome.error.map(|e| match e.char_indices().nth(ERROR_MAX_CHARS) {
            Some((end, _)) => format!("{}…", &e[..end]),
            None => e,
        });
        next.attempts.push(AttemptRecord { error, ..outcome });
        if next.attempts.len() > ATTEMPTS_KEPT {
            next.attempts.remove(0);
        }
        let delay = RETRY_DELAYS_SECONDS.get(self.attempt_count as usize).copied();
        match (succeeded, final_failure, delay) {
            (false, false, Some(seconds)) => {
                #[allow(clippy::cast_possible_truncation, clippy::cast_precision_loss)]
                let spread = (seconds as f64 * 0.2 * (jitter - 0.5)) as i64;
                next.status = DeliveryStatus::Pending;
                next.next_attempt_at = Some(shared::time::format(now + Duration::seconds(seconds + spread)));
                next.due = Some(DUE.to_owned());
            }
            _ => {
                next.status = if succeeded { DeliveryStatus::Succeeded } else { DeliveryStatus::Failed };
                next.next_attempt_at = None;
                next.due = None;
            }
        }
        next
    }
}

/// The deliveries of every tenant.
#[derive(Debug, Clone)]
pub struct Deliveries {
    client: aws_sdk_dynamodb::Client,
    tables: Tables,
}

/// A page of an endpoint's deliveries, newest first.
#[derive(Debug, Clone)]
pub struct DeliveryPage {
    /// The deliveries.
    pub items: Vec<Delivery>,
    /// Whether more follow.
    pub has_more: bool,
}

impl Deliveries {
    /// A store over `client` and the named tables.
    #[must_use]
    pub fn new(client: aws_sdk_dynamodb::Client, tables: Tables) -> Self {
        Self { client, tables }
    }

    fn table(&self) -> &str {
        self.tables.name(Table::WebhookDeliveries)
    }

    /// Creates `delivery` unless it exists (a stream record handed over again).
    /// Returns whether it was created.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn create(&self, delivery: &Delivery) -> Result<bool, Error> {
        let put = self
            .client
            .put_item()
            .table_name(self.table())
            .set_item(Some(serde_dynamo::to_item(delivery).map_err(StoreError::from)?))
            .condition_expression("attribute_not_exists(delivery)")
            .send()
            .await
            .map_err(classify);
        match put {
            Ok(_) => Ok(true),
            Err(StoreError::ConditionFailed { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// The tenant's delivery `id` to endpoint `endpoint`.
    ///
    /// # Errors
    /// [`Error::NotFound`], storage errors.
    pub async fn get(&self, tenant: &TenantId, endpoint: &EndpointId, id: &DeliveryId) -> Result<Delivery, Error> {
        let key = format!("{endpoint}#evt_{}", id.as_str().trim_start_matches("wd_"));
        let item = shared::dynamo::get_item(
            &self.client,
            self.table(),
            &[("tenant_id", tenant.as_str()), ("delivery", key.as_str())],
        )
        .await?
        .ok_or_else(|| Error::not_found("delivery", id.as_str()))?;
        Ok(serde_dynamo::from_item(item).map_err(StoreError::from)?)
    }

    /// The endpoint's deliveries, newest first, `limit` of them after `after` (a
    /// delivery id).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn list(
        &self,
        tenant: &TenantId,
        endpoint: &EndpointId,
        after: Option<&DeliveryId>,
        limit: u32,
    ) -> Result<DeliveryPage, Error> {
        let upper = match after {
            Some(id) => format!("{endpoint}#evt_{}", id.as_str().trim_start_matches("wd_")),
            None => format!("{endpoint}#~"),
        };
        let query = self
            .client
            .query()
            .table_name(self.table())
            .key_condition_expression("tenant_id = :t AND delivery BETWEEN :lo AND :hi")
            .expression_attribute_values(":t", s(tenant.as_str()))
            .expression_attribute_values(":lo", s(format!("{endpoint}#")))
            .expression_attribute_values(":hi", s(upper.clone()))
            .scan_index_forward(false);
        // Across DynamoDB's 1 MB pages: a page of large deliveries is more than one.
        let found = shared::dynamo::query_window(query, "delivery", 0, limit as usize + 2).await?;
        let mut items: Vec<Delivery> = found
            .into_iter()
            .map(serde_dynamo::from_item)
            .collect::<Result<Vec<Delivery>, _>>()
            .map_err(StoreError::from)?;
        items.retain(|d| d.delivery != upper);
        let has_more = items.len() > limit as usize;
        items.truncate(limit as usize);
        Ok(DeliveryPage { items, has_more })
    }

    /// Claims `delivery` for an attempt: moves its due time [`CLAIM_SECONDS`] on, on the
    /// condition that nobody attempted it since it was read. `false`: somebody did.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn claim(&self, delivery: &Delivery, now: DateTime<Utc>) -> Result<bool, Error> {
        let update = self
            .client
            .update_item()
            .table_name(self.table())
            .key("tenant_id", s(&delivery.tenant_id))
            .key("delivery", s(&delivery.delivery))
            .update_expression("SET next_attempt_at = :later")
            .condition_expression("attempt_count = :count AND #status = :pending")
            .expression_attribute_names("#status", "status")
            .expression_attribute_values(":later", s(shared::time::format(now + Duration::seconds(CLAIM_SECONDS))))
            .expression_attribute_values(":count", n(delivery.attempt_count))
            .expression_attribute_values(":pending", s("pending"))
            .send()
            .await
            .map_err(classify);
        match update {
            Ok(_) => Ok(true),
            Err(StoreError::ConditionFailed { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes `next` (after an attempt) over `current`, on the condition that its
    /// attempt count is still the one read.
    ///
    /// # Errors
    /// Storage errors (a lost race is no error: the other writer's record stands).
    pub async fn record(&self, current: &Delivery, next: &Delivery) -> Result<(), Error> {
        let put = self
            .client
            .put_item()
            .table_name(self.table())
            .set_item(Some(serde_dynamo::to_item(next).map_err(StoreError::from)?))
            .condition_expression("attempt_count = :count")
            .expression_attribute_values(":count", n(current.attempt_count))
            .send()
            .await
            .map_err(classify);
        match put {
            Ok(_) | Err(StoreError::ConditionFailed { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Schedules the tenant's delivery `id` again now (a manual retry), whatever its
    /// status; its attempts so far stay.
    ///
    /// # Errors
    /// [`Error::NotFound`], storage errors.
    pub async fn retry(
        &self,
        tenant: &TenantId,
        endpoint: &EndpointId,
        id: &DeliveryId,
        now: DateTime<Utc>,
    ) -> Result<Delivery, Error> {
        let current = self.get(tenant, endpoint, id).await?;
        let mut next = current.clone();
        next.status = DeliveryStatus::Pending;
        next.next_attempt_at = Some(shared::time::format(now));
        next.due = Some(DUE.to_owned());
        self.record(&current, &next).await?;
        Ok(next)
    }

    /// Pending deliveries due at `now`, oldest due first, at most `limit`.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn due(&self, now: DateTime<Utc>, limit: u32) -> Result<Vec<Delivery>, Error> {
        let out = self
            .client
            .query()
            .table_name(self.table())
            .index_name("by_due")
            .key_condition_expression("due = :due AND next_attempt_at <= :now")
            .expression_attribute_values(":due", s(DUE))
            .expression_attribute_values(":now", s(shared::time::format(now)))
            .limit(i32::try_from(limit).unwrap_or(i32::MAX))
            .send()
            .await
            .map_err(classify)?;
        let items: Vec<std::collections::HashMap<String, AttributeValue>> = out.items.unwrap_or_default();
        Ok(items.into_iter().map(serde_dynamo::from_item).collect::<Result<Vec<_>, _>>().map_err(StoreError::from)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhooks::events::EventType;

    fn attempt(code: Option<u16>) -> AttemptRecord {
        AttemptRecord { at: "t".to_owned(), status_code: code, latency_ms: 1, error: None }
    }

    fn delivery() -> Delivery {
        let event = Event::test(&EndpointId::generate(), Utc::now());
        let mut d = Delivery::new("ten_x", &EndpointId::generate(), &event, Utc::now());
        d.event_type = EventType::ExecutionFailed.as_str().to_owned();
        d
    }

    fn whole_second() -> DateTime<Utc> {
        DateTime::from_timestamp(Utc::now().timestamp(), 0).expect("time")
    }

    #[test]
    fn failures_follow_the_schedule_then_give_up_after_ten_attempts() {
        let now = whole_second();
        let mut d = delivery();
        for (i, seconds) in RETRY_DELAYS_SECONDS.iter().enumerate() {
            d = d.after(attempt(Some(500)), false, 0.5, now);
            assert_eq!(d.status, DeliveryStatus::Pending, "after attempt {}", i + 1);
            let due = shared::time::parse(d.next_attempt_at.as_deref().expect("due")).expect("time");
            assert_eq!((due - now).num_seconds(), *seconds);
        }
        d = d.after(attempt(None), false, 0.5, now);
        assert_eq!((d.status, d.attempt_count, d.due.as_deref()), (DeliveryStatus::Failed, 10, None));
    }

    #[test]
    fn a_2xx_delivers_a_final_failure_gives_up_and_jitter_stays_within_ten_percent() {
        let now = whole_second();
        assert_eq!(delivery().after(attempt(Some(204)), false, 0.3, now).status, DeliveryStatus::Succeeded);
        assert_eq!(delivery().after(attempt(Some(410)), true, 0.3, now).status, DeliveryStatus::Failed);
        let second = delivery().after(attempt(Some(500)), false, 0.0, now).after(attempt(Some(500)), false, 1.0, now);
        let due = shared::time::parse(second.next_attempt_at.as_deref().expect("due")).expect("time");
        assert_eq!((due - now).num_seconds(), 330, "5 minutes + 10 %");
    }

    #[test]
    fn a_finished_delivery_leaves_the_due_index_with_no_null_key() {
        let done = delivery().after(attempt(Some(200)), false, 0.5, Utc::now());
        let item: std::collections::HashMap<String, AttributeValue> = serde_dynamo::to_item(&done).expect("item");
        assert!(!item.contains_key("due") && !item.contains_key("next_attempt_at"), "{item:?}");
        let pending: std::collections::HashMap<String, AttributeValue> =
            serde_dynamo::to_item(delivery()).expect("item");
        assert!(pending["due"].is_s() && pending["next_attempt_at"].is_s());
    }

    #[test]
    fn only_the_newest_attempts_and_the_start_of_a_long_error_are_kept() {
        let now = Utc::now();
        let mut d = delivery();
        for i in 0..ATTEMPTS_KEPT + 5 {
            let long = AttemptRecord { error: Some(format!("{i:02}{}", "😀".repeat(1000))), ..attempt(Some(500)) };
            d = d.after(long, false, 0.5, now);
        }
        assert_eq!((d.attempts.len(), d.attempt_count), (ATTEMPTS_KEPT, 25));
        assert!(d.attempts[0].error.as_deref().expect("error").starts_with("05"), "the oldest kept is the 6th");
        let kept = d.attempts[0].error.as_deref().expect("error");
        assert_eq!(kept.chars().count(), ERROR_MAX_CHARS + 1);
        assert!(kept.ends_with('…'));
        let short = delivery().after(AttemptRecord { error: Some("refused".into()), ..attempt(None) }, false, 0.5, now);
        assert_eq!(short.attempts[0].error.as_deref(), Some("refused"));
    }

    #[test]
    fn a_delivery_id_names_its_event() {
        let d = delivery();
        assert_eq!(d.id().trim_start_matches("wd_"), d.event_id.as_str().trim_start_matches("evt_"));
        assert!(DeliveryId::parse(&d.id()).is_some());
        assert!(d.delivery.starts_with(d.endpoint_id.as_str()));
    }
}
