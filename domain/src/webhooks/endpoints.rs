//! Webhook endpoints: where a tenant's events go.
//!
//! Table `webhook-endpoints` (`tenant_id`, `endpoint_id`): one item per endpoint with
//! its sealed secret (and the previous one for 24 hours after a rotation). The tenant's
//! item counts its endpoints (`webhook_endpoints`), changed in the transaction that
//! creates or deletes one, so that [`ENDPOINTS_MAX`] holds even under concurrent
//! creations.

use aws_sdk_dynamodb::types::{Delete, Put, TransactWriteItem, Update};
use chrono::{DateTime, Duration, Utc};
use serde::{Deserialize, Serialize};
use shared::TenantId;
use shared::dynamo::{
    Attempt, Part, StoreError, Table, Tables, Transaction, TransactionError, built, classify, n, retry_races, s,
};
use shared::ids::{EndpointId, WorkflowId};

use super::events::EventType;
use super::secrets::{Secret, SecretBox, SecretError};
use crate::Error;

/// The most endpoints a tenant may have (Stripe allows 16 per account too).
pub const ENDPOINTS_MAX: u64 = 16;
/// The longest description.
pub const DESCRIPTION_MAX: usize = 500;
/// How long a rotated-out secret keeps signing beside the new one.
pub const ROTATION_OVERLAP_HOURS: i64 = 24;
/// How long an endpoint may fail every attempt before it is disabled.
pub const FAILING_DAYS_MAX: i64 = 5;

/// An endpoint as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Endpoint {
    /// Its owner.
    pub tenant_id: String,
    /// Its id.
    pub endpoint_id: EndpointId,
    /// Where events are posted.
    pub url: String,
    /// The tenant's note.
    #[serde(default)]
    pub description: Option<String>,
    /// The event types it receives; empty: every subscribable type.
    #[serde(default)]
    pub event_types: Vec<EventType>,
    /// Only events of this workflow, if set.
    #[serde(default)]
    pub workflow_id: Option<WorkflowId>,
    /// Whether events are delivered to it.
    pub enabled: bool,
    /// Why Cairn disabled it (410 Gone, or failing for days); none when the tenant did.
    #[serde(default)]
    pub disabled_reason: Option<String>,
    /// Since when every attempt to it has failed.
    #[serde(default)]
    pub failing_since: Option<String>,
    /// The current secret, sealed.
    pub secret: String,
    /// The secret before the last rotation, sealed, and until when it still signs.
    #[serde(default)]
    pub previous_secret: Option<String>,
    /// Until when [`Endpoint::previous_secret`] signs.
    #[serde(default)]
    pub previous_secret_expires_at: Option<String>,
    /// When it was created.
    pub created_at: String,
    /// When it last changed.
    pub updated_at: String,
    /// +1 on every write.
    pub version: u64,
}

impl Endpoint {
    /// The sealing owner of its secrets.
    fn owner(tenant: &str, id: &EndpointId) -> String {
        format!("{tenant}/{id}")
    }

    /// Whether it receives `event`, by its own filters (a test event: only its own).
    #[must_use]
    pub fn receives(&self, event: &super::events::Event) -> bool {
        if let Some(target) = &event.endpoint_id {
            return *target == self.endpoint_id;
        }
        self.enabled
            && (self.event_types.contains(&event.kind) || (self.event_types.is_empty() && !event.kind.opt_in()))
            && self.workflow_id.as_ref().is_none_or(|w| event.workflow_id.as_deref() == Some(w.as_str()))
    }

    /// The secrets that sign a message sent at `now`: the current one, and the previous
    /// one while it overlaps.
    ///
    /// # Errors
    /// [`SecretError`] when a secret does not open.
    pub fn signing_secrets(&self, key: &SecretBox, now: DateTime<Utc>) -> Result<Vec<Secret>, SecretError> {
        let owner = Self::owner(&self.tenant_id, &self.endpoint_id);
        let mut secrets = vec![key.open(&self.secret, &owner)?];
        let overlapping = self
            .previous_secret_expires_at
            .as_deref()
            .and_then(|t| shared::time::parse(t).ok())
            .is_some_and(|until| now < until);
        if let (Some(previous), true) = (&self.previous_secret, overlapping) {
            secrets.push(key.open(previous, &owner)?);
        }
        Ok(secrets)
    }
}

/// What a tenant sets on an endpoint.
#[derive(Debug, Clone, Default)]
pub struct EndpointChange {
    /// A new URL (already checked).
    pub url: Option<String>,
    /// A new description (`Some(None)` clears it).
    pub description: Option<Option<String>>,
    /// New event types (empty: all).
    pub event_types: Option<Vec<EventType>>,
    /// A new workflow filter (`Some(None)` clears it).
    pub workflow_id: Option<Option<WorkflowId>>,
    /// Enabled or not; enabling clears why Cairn disabled it.
    pub enabled: Option<bool>,
}

/// The endpoints of every tenant, each call scoped to one.
#[derive(Debug, Clone)]
pub struct Endpoints {
    client: aws_sdk_dynamodb::Client,
    tables: Tables,
}

impl Endpoints {
    /// A store over `client` and the named tables.
    #[must_use]
    pub fn new(client: aws_sdk_dynamodb::Client, tables: Tables) -> Self {
        Self { client, tables }
    }

    /// Every endpoint of the tenant, newest first (at most [`ENDPOINTS_MAX`]).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn list(&self, tenant: &TenantId) -> Result<Vec<Endpoint>, Error> {
        let out = shared::dynamo::newest_first(
            &self.client,
            self.tables.name(Table::WebhookEndpoints),
            None,
            ("tenant_id", tenant.as_str().to_owned()),
        )
        .send()
        .await
        .map_err(classify)?;
        Ok(out
            .items
            .unwrap_or_default()
            .into_iter()
            .map(serde_dynamo::from_item)
            .collect::<Result<_, _>>()
            .map_err(StoreError::from)?)
    }

    /// The tenant's endpoint `id`.
    ///
    /// # Errors
    /// [`Error::NotFound`], storage errors.
    pub async fn get(&self, tenant: &TenantId, id: &EndpointId) -> Result<Endpoint, Error> {
        let item = shared::dynamo::get_item(
            &self.client,
            self.tables.name(Table::WebhookEndpoints),
            &[("tenant_id", tenant.as_str()), ("endpoint_id", id.as_str())],
        )
        .await?
        .ok_or_else(|| Error::not_found("webhook endpoint", id.as_str()))?;
        Ok(serde_dynamo::from_item(item).map_err(StoreError::from)?)
    }

    /// Creates an endpoint with a new secret, counted in the same transaction; returns it
    /// and its secret (shown this once).
    ///
    /// # Errors
    /// [`Error::InvalidState`] past [`ENDPOINTS_MAX`], [`Error::NotFound`] for a
    /// missing tenant, storage and secret errors.
    #[allow(clippy::too_many_arguments)]
    pub async fn create(
        &self,
        tenant: &TenantId,
        key: &SecretBox,
        url: String,
        description: Option<String>,
        event_types: Vec<EventType>,
        workflow_id: Option<WorkflowId>,
        now: DateTime<Utc>,
    ) -> Result<(Endpoint, Secret), Error> {
        let id = EndpointId::generate_at(now);
        let secret = Secret::generate().map_err(secret_error)?;
        let sealed = key.seal(&secret, &Endpoint::owner(tenant.as_str(), &id)).map_err(secret_error)?;
        let at = shared::time::format(now);
        let endpoint = Endpoint {
            tenant_id: tenant.as_str().to_owned(),
            endpoint_id: id,
            url,
            description,
            event_types,
            workflow_id,
            enabled: true,
            disabled_reason: None,
            failing_since: None,
            secret: sealed,
            previous_secret: None,
            previous_secret_expires_at: None,
            created_at: at.clone(),
            updated_at: at,
            version: 1,
        };
        let put = Put::builder()
            .table_name(self.tables.name(Table::WebhookEndpoints))
            .set_item(Some(serde_dynamo::to_item(&endpoint).map_err(StoreError::from)?))
            .condition_expression("attribute_not_exists(endpoint_id)");
        let count = Update::builder()
            .table_name(self.tables.name(Table::Tenants))
            .key("tenant_id", s(tenant.as_str()))
            .update_expression("SET webhook_endpoints = if_not_exists(webhook_endpoints, :zero) + :one")
            .condition_expression(
                "attribute_exists(tenant_id) AND (attribute_not_exists(webhook_endpoints) OR webhook_endpoints < :max)",
            )
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":max", n(ENDPOINTS_MAX));
        let mut tx = Transaction::new();
        tx.push(Part::Tenant, TransactWriteItem::builder().update(built(count.build())?).build());
        tx.push(Part::Endpoint, TransactWriteItem::builder().put(built(put.build())?).build());
        match tx.commit(&self.client).await {
            Ok(()) => Ok((endpoint, secret)),
            Err(TransactionError::Condition(Part::Tenant)) => Err(Error::InvalidState(format!(
                "a tenant has at most {ENDPOINTS_MAX} webhook endpoints; delete one before creating another"
            ))),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes `next` over `current` if nobody changed it since it was read.
    async fn replace(&self, current: &Endpoint, next: &Endpoint) -> Result<Attempt<Endpoint>, Error> {
        let put = self
            .client
            .put_item()
            .table_name(self.tables.name(Table::WebhookEndpoints))
            .set_item(Some(serde_dynamo::to_item(next).map_err(StoreError::from)?))
            .condition_expression("version = :v")
            .expression_attribute_values(":v", n(current.version))
            .send()
            .await
            .map_err(classify);
        match put {
            Ok(_) => Ok(Attempt::Done(next.clone())),
            Err(StoreError::ConditionFailed { .. }) => Ok(Attempt::Raced),
            Err(e) => Err(e.into()),
        }
    }

    /// Applies `change` to the tenant's endpoint `id`.
    ///
    /// # Errors
    /// [`Error::NotFound`], storage errors.
    pub async fn update(
        &self,
        tenant: &TenantId,
        id: &EndpointId,
        change: &EndpointChange,
        now: DateTime<Utc>,
    ) -> Result<Endpoint, Error> {
        retry_races(|| async move {
            let current = self.get(tenant, id).await?;
            let mut next = current.clone();
            if let Some(url) = &change.url {
                next.url.clone_from(url);
            }
            if let Some(description) = &change.description {
                next.description.clone_from(description);
            }
            if let Some(types) = &change.event_types {
                next.event_types.clone_from(types);
            }
            if let Some(workflow) = &change.workflow_id {
                next.workflow_id.clone_from(workflow);
            }
            if let Some(enabled) = change.enabled {
                if enabled && !current.enabled {
                    next.disabled_reason = None;
                    next.failing_since = None;
                }
                next.enabled = enabled;
            }
            next.updated_at = shared::time::format(now);
            next.version += 1;
            self.replace(&current, &next).await
        })
        .await
    }

    /// A new secret for the tenant's endpoint `id`; the current one keeps signing beside
    /// it for [`ROTATION_OVERLAP_HOURS`].
    ///
    /// # Errors
    /// [`Error::NotFound`], storage and secret errors.
    pub async fn rotate(
        &self,
        tenant: &TenantId,
        id: &EndpointId,
        key: &SecretBox,
        now: DateTime<Utc>,
    ) -> Result<(Endpoint, Secret), Error> {
        retry_races(|| async move {
            let current = self.get(tenant, id).await?;
            let secret = Secret::generate().map_err(secret_error)?;
            let mut next = current.clone();
            next.secret = key.seal(&secret, &Endpoint::owner(tenant.as_str(), id)).map_err(secret_error)?;
            next.previous_secret = Some(current.secret.clone());
            next.previous_secret_expires_at = Some(shared::time::format(now + Duration::hours(ROTATION_OVERLAP_HOURS)));
            next.updated_at = shared::time::format(now);
            next.version += 1;
            Ok(match self.replace(&current, &next).await? {
                Attempt::Done(endpoint) => Attempt::Done((endpoint, secret.clone())),
                Attempt::Raced => Attempt::Raced,
            })
        })
        .await
    }

    /// Deletes the tenant's endpoint `id` (its deliveries expire with their TTL).
    ///
    /// # Errors
    /// [`Error::NotFound`], storage errors.
    pub async fn delete(&self, tenant: &TenantId, id: &EndpointId) -> Result<(), Error> {
        let delete = Delete::builder()
            .table_name(self.tables.name(Table::WebhookEndpoints))
            .key("tenant_id", s(tenant.as_str()))
            .key("endpoint_id", s(id.as_str()))
            .condition_expression("attribute_exists(endpoint_id)");
        let count = Update::builder()
            .table_name(self.tables.name(Table::Tenants))
            .key("tenant_id", s(tenant.as_str()))
            .update_expression("SET webhook_endpoints = webhook_endpoints - :one")
            .condition_expression("webhook_endpoints > :zero")
            .expression_attribute_values(":zero", n(0))
            .expression_attribute_values(":one", n(1));
        let mut tx = Transaction::new();
        tx.push(Part::Endpoint, TransactWriteItem::builder().delete(built(delete.build())?).build());
        tx.push(Part::Tenant, TransactWriteItem::builder().update(built(count.build())?).build());
        match tx.commit(&self.client).await {
            Ok(()) => Ok(()),
            Err(TransactionError::Condition(Part::Endpoint)) => Err(Error::not_found("webhook endpoint", id.as_str())),
            Err(e) => Err(e.into()),
        }
    }

    /// Records the outcome of an attempt on the endpoint: a success clears
    /// `failing_since`; a failure sets it, and disables the endpoint after
    /// [`FAILING_DAYS_MAX`] days of failures or at once when `gone` (410).
    ///
    /// # Errors
    /// Storage errors (a vanished endpoint is no error).
    pub async fn record_outcome(
        &self,
        tenant: &TenantId,
        id: &EndpointId,
        succeeded: bool,
        gone: bool,
        now: DateTime<Utc>,
    ) -> Result<(), Error> {
        retry_races(|| async move {
            let current = match self.get(tenant, id).await {
                Ok(endpoint) => endpoint,
                Err(Error::NotFound { .. }) => return Ok(Attempt::Done(())),
                Err(e) => return Err(e),
            };
            let mut next = current.clone();
            if succeeded {
                next.failing_since = None;
            } else {
                let since = current.failing_since.clone().unwrap_or_else(|| shared::time::format(now));
                let days = shared::time::parse(&since).map(|t| now - t).unwrap_or_default();
                next.failing_since = Some(since);
                if gone {
                    next.enabled = false;
                    next.disabled_reason = Some("the endpoint answered 410 Gone".to_owned());
                } else if current.enabled && days >= Duration::days(FAILING_DAYS_MAX) {
                    next.enabled = false;
                    next.disabled_reason = Some(format!("every delivery attempt failed for {FAILING_DAYS_MAX} days"));
                }
            }
            if next == current {
                return Ok(Attempt::Done(()));
            }
            next.updated_at = shared::time::format(now);
            next.version += 1;
            Ok(match self.replace(&current, &next).await? {
                Attempt::Done(_) => Attempt::Done(()),
                Attempt::Raced => Attempt::Raced,
            })
        })
        .await
    }
}

fn secret_error(error: SecretError) -> Error {
    Error::Store(StoreError::Other(Box::new(error)))
}
