//! Subscriptions: plans, the tenant's Stripe customer and its subscription as Cairn
//! shows it.
//!
//! Both live on the tenant's `accounts` item, beside the balance: `stripe_customer_id`
//! (set once, conditionally, so concurrent checkouts agree on one customer) and
//! `subscription`, a map of the fields `GET /billing/subscriptions/status` answers with.
//! The map is always written from a Subscription read from Stripe (never from an event's
//! possibly stale copy), so events arriving out of order cannot roll it back; and a live
//! subscription is never replaced by a different one that is not live.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::TenantId;
use shared::body::WireEnum;
use shared::dynamo::{
    Attempt, Part, StoreError, Table, Tables, Transaction, TransactionError, built, get_item, n, retry_races, s,
};

use crate::Error;

/// A plan a tenant can subscribe to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// 1 000 credits a month by default.
    Developer,
    /// 10 000 credits a month by default.
    Pro,
    /// 100 000 credits a month by default.
    Enterprise,
}

impl WireEnum for Plan {
    const ALL: &'static [Self] = &[Self::Developer, Self::Pro, Self::Enterprise];

    fn wire(self) -> &'static str {
        match self {
            Self::Developer => "developer",
            Self::Pro => "pro",
            Self::Enterprise => "enterprise",
        }
    }
}

impl Plan {
    fn env_suffix(self) -> &'static str {
        match self {
            Self::Developer => "DEVELOPER",
            Self::Pro => "PRO",
            Self::Enterprise => "ENTERPRISE",
        }
    }

    /// Requests a minute a tenant on this plan may make (a decision; without a
    /// subscription, `RATE_LIMIT_PER_MINUTE`, 1,200 by default).
    #[must_use]
    pub fn rate_limit(self) -> u32 {
        match self {
            Self::Developer => 3_000,
            Self::Pro => 12_000,
            Self::Enterprise => 60_000,
        }
    }

    fn default_credits(self) -> i64 {
        match self {
            Self::Developer => 1_000,
            Self::Pro => 10_000,
            Self::Enterprise => 100_000,
        }
    }

    /// The plan named `wire`.
    #[must_use]
    pub fn parse(wire: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|p| p.wire() == wire)
    }
}

/// Each plan's Stripe price (`STRIPE_PRICE_<PLAN>`) and monthly credits
/// (`PLAN_CREDITS_<PLAN>`, defaults 1 000, 10 000 and 100 000), read once.
#[derive(Debug, Clone)]
pub struct Plans {
    prices: Vec<(Plan, Option<String>)>,
    credits: Vec<(Plan, i64)>,
}

impl Plans {
    /// The plans as the environment configures them.
    #[must_use]
    pub fn from_env() -> Self {
        let var = |name: String| std::env::var(name).ok().map(|v| v.trim().to_owned()).filter(|v| !v.is_empty());
        Self {
            prices: Plan::ALL.iter().map(|p| (*p, var(format!("STRIPE_PRICE_{}", p.env_suffix())))).collect(),
            credits: Plan::ALL
                .iter()
                .map(|p| {
                    let configured = var(format!("PLAN_CREDITS_{}", p.env_suffix())).and_then(|v| v.parse().ok());
                    (*p, configured.filter(|c: &i64| *c >= 0).unwrap_or_else(|| p.default_credits()))
                })
                .collect(),
        }
    }

    /// The Stripe price of `plan`, if configured.
    #[must_use]
    pub fn price(&self, plan: Plan) -> Option<&str> {
        self.prices.iter().find(|(p, _)| *p == plan).and_then(|(_, price)| price.as_deref())
    }

    /// The credits a paid invoice of `plan` grants.
    #[must_use]
    pub fn credits(&self, plan: Plan) -> i64 {
        self.credits.iter().find(|(p, _)| *p == plan).map_or_else(|| plan.default_credits(), |(_, c)| *c)
    }

    /// The plan a subscription is on: by its price, else by the `plan_id` Cairn put in
    /// its metadata. `None` for a subscription that is not Cairn's.
    #[must_use]
    pub fn plan_of(&self, price: Option<&str>, metadata_plan: Option<&str>) -> Option<Plan> {
        let by_price = price
            .and_then(|price| self.prices.iter().find(|(_, p)| p.as_deref() == Some(price)).map(|(plan, _)| *plan));
        by_price.or_else(|| metadata_plan.and_then(Plan::parse))
    }
}

/// A subscription's state as Cairn shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Paid and running.
    Active,
    /// In its trial.
    Trialing,
    /// A payment failed (Stripe `past_due`, `unpaid`, `incomplete`, `paused`).
    PastDue,
    /// Ended (Stripe `canceled`, `incomplete_expired`).
    Cancelled,
    /// Active until the end of the current period, then cancelled.
    CancelAtPeriodEnd,
}

impl WireEnum for Status {
    const ALL: &'static [Self] =
        &[Self::Active, Self::Trialing, Self::PastDue, Self::Cancelled, Self::CancelAtPeriodEnd];

    fn wire(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Trialing => "trialing",
            Self::PastDue => "past_due",
            Self::Cancelled => "cancelled",
            Self::CancelAtPeriodEnd => "cancel_at_period_end",
        }
    }
}

impl Status {
    /// Cairn's status of a subscription in Stripe's `status` (`active`, `canceled`, …).
    #[must_use]
    pub fn of(stripe_status: &str, cancel_at_period_end: bool) -> Self {
        match stripe_status {
            "canceled" | "incomplete_expired" => Self::Cancelled,
            "active" | "trialing" if cancel_at_period_end => Self::CancelAtPeriodEnd,
            "active" => Self::Active,
            "trialing" => Self::Trialing,
            _ => Self::PastDue,
        }
    }
}

/// `GET /billing/subscriptions/status`, also the stored form.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Subscription {
    /// Stripe's id (`sub_…`).
    pub subscription_id: String,
    /// `developer`, `pro` or `enterprise`.
    pub plan_id: String,
    /// See [`Status`].
    pub status: String,
    /// Start of the current billing period.
    pub current_period_start: Option<String>,
    /// End of the current billing period.
    pub current_period_end: Option<String>,
    /// Whether it ends with the current period.
    pub cancel_at_period_end: bool,
}

impl Subscription {
    /// Whether it still runs (anything but cancelled).
    #[must_use]
    pub fn is_live(&self) -> bool {
        self.status != Status::Cancelled.wire()
    }
}

/// What the accounts item says about a tenant's billing with Stripe.
#[derive(Debug, Clone, Default)]
pub struct Billing {
    /// The tenant's Stripe customer, once created.
    pub customer: Option<String>,
    /// The tenant's latest subscription.
    pub subscription: Option<Subscription>,
    /// The tenant's last Checkout Session, while it may still be open.
    pub checkout: Option<OpenCheckout>,
    /// +1 on every stored subscription snapshot (0: none stored yet).
    pub subscription_version: u64,
}

/// What [`Subscriptions::store`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stored {
    /// The snapshot is the tenant's now.
    Written,
    /// The event was applied before; nothing changed.
    Duplicate,
    /// An ended subscription does not replace a different one; nothing changed.
    Skipped,
    /// Another snapshot was stored since the version was read: read Stripe again.
    Stale,
}

/// A Checkout Session the tenant was sent to. At most one is open at a time, so two
/// checkouts started together cannot become two subscriptions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpenCheckout {
    /// `cs_…`
    pub session_id: String,
    /// Its hosted page.
    pub url: String,
    /// The plan it subscribes to.
    pub plan_id: String,
    /// When Stripe expires it (Unix seconds).
    pub expires_at: i64,
}

/// An applied webhook event, recorded in the same transaction as its effect.
#[derive(Debug, Clone, Copy)]
pub struct EventRecord<'a> {
    /// `evt_…`
    pub id: &'a str,
    /// Its type.
    pub kind: &'a str,
}

/// Days an applied event's id is kept (Stripe retries deliveries for 3 days).
const EVENT_RETENTION_DAYS: i64 = 30;

/// The conditional put that records `key` (an event id, or another once-only marker)
/// for `tenant`: the transaction fails on `part` if it was recorded before.
///
/// # Errors
/// A [`StoreError`] if the put cannot be built.
pub(crate) fn record_once(
    tx: &mut Transaction,
    tables: &Tables,
    tenant: &TenantId,
    key: &str,
    kind: &str,
    part: Part,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let put = Put::builder()
        .table_name(tables.name(Table::StripeEvents))
        .item("tenant_id", s(tenant.as_str()))
        .item("event_id", s(key))
        .item("type", s(kind))
        .item("expires_at", n(now.timestamp() + EVENT_RETENTION_DAYS * 86_400))
        .condition_expression("attribute_not_exists(event_id)");
    tx.push(part, TransactWriteItem::builder().put(built(put.build())?).build());
    Ok(())
}

/// The tenant's subscription records.
#[derive(Debug, Clone)]
pub struct Subscriptions {
    client: Client,
    tables: Tables,
}

impl Subscriptions {
    /// Over `client` and the named tables.
    #[must_use]
    pub fn new(client: Client, tables: Tables) -> Self {
        Self { client, tables }
    }

    /// The tenant's customer and subscription.
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn read(&self, tenant: &TenantId) -> Result<Billing, StoreError> {
        let item = get_item(&self.client, self.tables.name(Table::Accounts), &[("tenant_id", tenant.as_str())]).await?;
        let Some(mut item) = item else { return Ok(Billing::default()) };
        let customer = item.remove("stripe_customer_id").and_then(|v| v.as_s().ok().cloned());
        let subscription = item.remove("subscription").map(serde_dynamo::from_attribute_value).transpose()?;
        let checkout = item.remove("checkout").map(serde_dynamo::from_attribute_value).transpose()?;
        let subscription_version =
            item.get("subscription_version").and_then(|v| v.as_n().ok()).and_then(|v| v.parse().ok()).unwrap_or(0);
        Ok(Billing { customer, subscription, checkout, subscription_version })
    }

    /// Records `next` as the tenant's open checkout if the one recorded is still
    /// `previous` (none, or the session it replaces). Returns false when another request
    /// recorded a different one meanwhile.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn replace_checkout(
        &self,
        tenant: &TenantId,
        previous: Option<&OpenCheckout>,
        next: &OpenCheckout,
    ) -> Result<bool, Error> {
        let mut update = Update::builder()
            .table_name(self.tables.name(Table::Accounts))
            .key("tenant_id", s(tenant.as_str()))
            .update_expression("SET checkout = :next")
            .expression_attribute_values(":next", serde_dynamo::to_attribute_value(next).map_err(StoreError::from)?);
        update = match previous {
            None => update.condition_expression("attribute_not_exists(checkout)"),
            Some(previous) => update
                .condition_expression("checkout.session_id = :previous")
                .expression_attribute_values(":previous", s(&previous.session_id)),
        };
        let mut tx = Transaction::new();
        tx.push(Part::Checkout, TransactWriteItem::builder().update(built(update.build())?).build());
        match tx.commit(&self.client).await {
            Ok(()) => Ok(true),
            Err(TransactionError::Condition(Part::Checkout) | TransactionError::Store(StoreError::Conflict)) => {
                Ok(false)
            }
            Err(other) => Err(other.into()),
        }
    }

    /// Forgets the open checkout `session_id` (it completed).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn checkout_done(&self, tenant: &TenantId, session_id: &str) -> Result<(), Error> {
        let update = Update::builder()
            .table_name(self.tables.name(Table::Accounts))
            .key("tenant_id", s(tenant.as_str()))
            .update_expression("REMOVE checkout")
            .condition_expression("checkout.session_id = :id")
            .expression_attribute_values(":id", s(session_id));
        let mut tx = Transaction::new();
        tx.push(Part::Checkout, TransactWriteItem::builder().update(built(update.build())?).build());
        match tx.commit(&self.client).await {
            Ok(()) | Err(TransactionError::Condition(Part::Checkout)) => Ok(()),
            Err(other) => Err(other.into()),
        }
    }

    /// Links `customer` to the tenant unless one is linked already; returns the one
    /// that is linked now.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn link_customer(&self, tenant: &TenantId, customer: &str) -> Result<String, Error> {
        let update = Update::builder()
            .table_name(self.tables.name(Table::Accounts))
            .key("tenant_id", s(tenant.as_str()))
            .update_expression("SET stripe_customer_id = :customer")
            .condition_expression("attribute_not_exists(stripe_customer_id) OR stripe_customer_id = :customer")
            .expression_attribute_values(":customer", s(customer));
        let update = &update;
        retry_races(|| async move {
            let mut tx = Transaction::new();
            tx.push(Part::Customer, TransactWriteItem::builder().update(built(update.clone().build())?).build());
            match tx.commit(&self.client).await {
                Ok(()) => Ok(Attempt::Done(customer.to_owned())),
                Err(TransactionError::Condition(Part::Customer)) => {
                    let linked = self.read(tenant).await?.customer;
                    linked
                        .map(Attempt::Done)
                        .ok_or_else(|| StoreError::Corrupt("the linked customer vanished".into()).into())
                }
                Err(e) => Ok(Attempt::raced_on(e, &[])?),
            }
        })
        .await
    }

    /// Stores `subscription` as the tenant's, recording `event` once in the same
    /// transaction, if the stored snapshot's version is still `read_version` (what
    /// [`Billing::subscription_version`] said before the snapshot was read from Stripe):
    /// of two snapshots read at the same time, the one read after the other's store
    /// wins, never an older one. A subscription that is not live never replaces a
    /// different one. The tenant's rate limit follows in the same transaction: its
    /// plan's while the subscription is live, else the default
    /// ([`shared::rate_limit::plan_limit`]).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn store(
        &self,
        tenant: &TenantId,
        subscription: &Subscription,
        event: Option<EventRecord<'_>>,
        now: DateTime<Utc>,
        read_version: u64,
    ) -> Result<Stored, Error> {
        let value = serde_dynamo::to_attribute_value(subscription).map_err(StoreError::from)?;
        let version = if read_version == 0 {
            "attribute_not_exists(subscription_version)"
        } else {
            "subscription_version = :read"
        };
        let condition = if subscription.is_live() {
            version.to_owned()
        } else {
            format!(
                "({version}) AND (attribute_not_exists(subscription) OR subscription.subscription_id = :id \
                 OR subscription.#status = :cancelled)"
            )
        };
        let mut update = Update::builder()
            .table_name(self.tables.name(Table::Accounts))
            .key("tenant_id", s(tenant.as_str()))
            .update_expression("SET subscription = :subscription, subscription_version = :next")
            .condition_expression(condition)
            .expression_attribute_values(":subscription", value)
            .expression_attribute_values(":next", n(read_version + 1));
        if read_version != 0 {
            update = update.expression_attribute_values(":read", n(read_version));
        }
        if !subscription.is_live() {
            update = update
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(":id", s(&subscription.subscription_id))
                .expression_attribute_values(":cancelled", s(Status::Cancelled.wire()));
        }
        let update = &update;
        let limit = Plan::parse(&subscription.plan_id).filter(|_| subscription.is_live()).map(Plan::rate_limit);
        retry_races(|| async move {
            let mut tx = Transaction::new();
            if let Some(event) = event {
                record_once(&mut tx, &self.tables, tenant, event.id, event.kind, Part::Event, now)?;
            }
            tx.push(Part::Subscription, TransactWriteItem::builder().update(built(update.clone().build())?).build());
            tx.push(Part::Standing, shared::rate_limit::plan_limit(&self.tables, tenant.as_str(), limit)?);
            match tx.commit(&self.client).await {
                Ok(()) => Ok(Attempt::Done(Stored::Written)),
                Err(TransactionError::Condition(Part::Event)) => Ok(Attempt::Done(Stored::Duplicate)),
                Err(TransactionError::Condition(Part::Subscription)) => {
                    if self.read(tenant).await?.subscription_version != read_version {
                        return Ok(Attempt::Done(Stored::Stale));
                    }
                    tracing::info!(subscription = subscription.subscription_id, "an ended subscription left alone");
                    Ok(Attempt::Done(Stored::Skipped))
                }
                Err(e) => Ok(Attempt::raced_on(e, &[])?),
            }
        })
        .await
    }
}
