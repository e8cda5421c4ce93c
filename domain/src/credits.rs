//! The credit ledger: a tenant's balance and every change to it, written together.
//!
//! Table `accounts` (`tenant_id`): `credits` and `seq`, the number of ledger entries so
//! far (the same item holds the tenant's Stripe customer and subscription, see
//! [`crate::subscriptions`]). Table `ledger` (`tenant_id`, `seq`): one entry per balance change with
//! `credits_before` and `credits_after`; GSI `by_type` (`tenant_type`, `seq`). An entry
//! and the account's new balance are written in one transaction conditioned on the `seq`
//! that was read, so entries chain exactly (each `credits_before` is the previous
//! `credits_after`), the balance never disagrees with the ledger and never goes below 0.
//! Any other write (an execution start) can join that transaction.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use shared::TenantId;
use shared::body::WireEnum;
use shared::counters::{self, CounterChange};
use shared::dynamo::{
    Attempt, Part, StoreError, Table, Tables, Transaction, TransactionError, built, get_item, n, newest_first,
    query_window_from, resume_after, retry_races, s,
};
use shared::ids::TransactionId;
use shared::series::Window;
use shared::spans::Level;

use crate::Error;
use crate::webhooks::{Event, EventType};

/// The kind of a ledger entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryType {
    /// Credits bought (a Stripe top-up or an operator's grant).
    Topup,
    /// Credits spent (execution starts and replays); negative amounts.
    Usage,
    /// Credits granted by a subscription's paid invoice.
    Subscription,
    /// Credits taken back because Stripe refunded the payment that bought them.
    Refund,
    /// Credits taken back while a payment is disputed (and lost), or given back when the
    /// dispute is won.
    Dispute,
}

impl EntryType {
    /// Whether an entry of this kind may take the balance below 0: money Stripe took
    /// back is taken back whatever was spent since.
    #[must_use]
    pub fn may_overdraw(self) -> bool {
        matches!(self, Self::Refund | Self::Dispute)
    }
}

impl WireEnum for EntryType {
    const ALL: &'static [Self] = &[Self::Topup, Self::Usage, Self::Subscription, Self::Refund, Self::Dispute];

    fn wire(self) -> &'static str {
        match self {
            Self::Topup => "topup",
            Self::Usage => "usage",
            Self::Subscription => "subscription",
            Self::Refund => "refund",
            Self::Dispute => "dispute",
        }
    }
}

/// A tenant's balance as read, with the position the next entry takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Account {
    /// Current credits.
    pub credits: i64,
    /// Entries written so far.
    pub seq: u64,
    /// Below this balance a charge reports `credits.low` (the account's
    /// `low_balance_threshold`, else [`LOW_BALANCE_CREDITS`]).
    pub low_balance_threshold: Option<i64>,
}

/// The low-balance threshold of an account that sets none: a charge that takes the
/// balance from at least this to below it reports `credits.low`.
pub const LOW_BALANCE_CREDITS: i64 = 100;

impl Account {
    /// The balance below which a charge reports `credits.low`.
    #[must_use]
    pub fn threshold(&self) -> i64 {
        self.low_balance_threshold.unwrap_or(LOW_BALANCE_CREDITS)
    }
}

/// A change to write.
#[derive(Debug, Clone)]
pub struct NewEntry {
    /// Its kind.
    pub kind: EntryType,
    /// Credits added (negative for usage).
    pub amount: i64,
    /// Free text.
    pub description: String,
    /// `completed` for money received; `None` for usage.
    pub payment_status: Option<String>,
}

/// A ledger entry (a Transaction of the API).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Its id (`txn_…`).
    pub id: String,
    /// `topup`, `usage` or `subscription`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Credits added; negative for usage. 1 credit = US$0.01.
    pub amount: i64,
    /// Always `usd`.
    pub currency: String,
    /// Balance before.
    pub credits_before: i64,
    /// Balance after.
    pub credits_after: i64,
    /// Free text.
    pub description: String,
    /// `completed` for a top-up; `null` for usage.
    pub payment_status: Option<String>,
    /// When it happened.
    pub created_at: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct EntryRecord {
    tenant_id: String,
    seq: u64,
    tenant_type: String,
    #[serde(flatten)]
    entry: Entry,
}

/// The ledger of every tenant; each call is scoped to the tenant it is given.
#[derive(Debug, Clone)]
pub struct Ledger {
    client: Client,
    tables: Tables,
}

impl Ledger {
    /// A ledger over `client` and the named tables.
    #[must_use]
    pub fn new(client: Client, tables: Tables) -> Self {
        Self { client, tables }
    }

    /// The client, for callers that commit transactions.
    #[must_use]
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The tenant's balance (0 for a tenant that never had credits).
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn account(&self, tenant: &TenantId) -> Result<Account, StoreError> {
        let item = get_item(&self.client, self.tables.name(Table::Accounts), &[("tenant_id", tenant.as_str())]).await?;
        let number = |item: &shared::dynamo::Item, name: &str| {
            item.get(name).and_then(|v| v.as_n().ok()).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0)
        };
        Ok(item.map_or_else(Account::default, |item| Account {
            credits: number(&item, "credits"),
            seq: u64::try_from(number(&item, "seq")).unwrap_or(0),
            low_balance_threshold: item
                .contains_key("low_balance_threshold")
                .then(|| number(&item, "low_balance_threshold")),
        }))
    }

    /// Sets the balance below which a charge reports `credits.low` for the tenant.
    ///
    /// # Errors
    /// The write's [`StoreError`].
    pub async fn set_low_balance_threshold(&self, tenant: &TenantId, credits: i64) -> Result<(), StoreError> {
        self.client
            .update_item()
            .table_name(self.tables.name(Table::Accounts))
            .key("tenant_id", s(tenant.as_str()))
            .update_expression("SET low_balance_threshold = :t")
            .expression_attribute_values(":t", n(credits))
            .send()
            .await
            .map_err(shared::dynamo::classify)?;
        Ok(())
    }

    /// Adds `entry` and the account's new balance to `tx`, conditioned on the account
    /// still being as read ([`Part::Account`]). Returns the entry as it will be stored.
    ///
    /// # Errors
    /// [`Error::InsufficientCredits`] when the balance would go below 0 (nothing is
    /// staged); a [`StoreError`] if an operation cannot be built.
    pub fn stage(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        account: Account,
        entry: NewEntry,
        now: DateTime<Utc>,
    ) -> Result<Entry, Error> {
        let after = account.credits + entry.amount;
        if after < 0 && entry.amount < 0 && !entry.kind.may_overdraw() {
            return Err(Error::InsufficientCredits(format!(
                "this needs {} credits and the balance is {}; top up with POST /billing/topup",
                -entry.amount, account.credits
            )));
        }
        let seq = account.seq + 1;
        let condition =
            if account.seq == 0 { "attribute_not_exists(seq) OR seq = :expected" } else { "seq = :expected" };
        // An update, not a put: the account item also holds the Stripe customer and the
        // subscription, which a balance change must leave alone.
        let update = Update::builder()
            .table_name(self.tables.name(Table::Accounts))
            .key("tenant_id", s(tenant.as_str()))
            .update_expression("SET credits = :credits, seq = :seq")
            .condition_expression(condition)
            .expression_attribute_values(":credits", n(after))
            .expression_attribute_values(":seq", n(seq))
            .expression_attribute_values(":expected", n(account.seq));
        tx.push(Part::Account, TransactWriteItem::builder().update(built(update.build())?).build());
        let stored = Entry {
            id: TransactionId::generate_at(now).to_string(),
            kind: entry.kind.wire().to_owned(),
            amount: entry.amount,
            currency: "usd".to_owned(),
            credits_before: account.credits,
            credits_after: after,
            description: entry.description,
            payment_status: entry.payment_status,
            created_at: shared::time::format(now),
        };
        let record = EntryRecord {
            tenant_id: tenant.as_str().to_owned(),
            seq,
            tenant_type: format!("{}#{}", tenant.as_str(), entry.kind.wire()),
            entry: stored.clone(),
        };
        let put = Put::builder()
            .table_name(self.tables.name(Table::Ledger))
            .set_item(Some(serde_dynamo::to_item(record).map_err(StoreError::from)?))
            .condition_expression("attribute_not_exists(seq)");
        tx.push(Part::Ledger, TransactWriteItem::builder().put(built(put.build())?).build());
        let mut counts = CounterChange::between(&[], &[counter_name(None), counter_name(Some(entry.kind))]);
        if entry.kind == EntryType::Usage {
            counts.merge(&usage_counts(-entry.amount, now));
        }
        tx.extend(Part::Ledger, counts.transact_items(&self.tables, tenant)?);
        // What webhook endpoints hear of it, in the same transaction.
        let threshold = account.threshold();
        let mut events = Vec::new();
        if entry.amount > 0 {
            events.push(Event::credits(EventType::CreditsAdded, &stored, threshold, now));
        }
        if account.credits >= threshold && after < threshold {
            events.push(Event::credits(EventType::CreditsLow, &stored, threshold, now));
        }
        crate::webhooks::events::stage(tx, &self.tables, tenant, &events)?;
        Ok(stored)
    }

    /// The position (`seq`) of the tenant's transaction `id`, through the `by_id`
    /// index (keys only): a keyset cursor for [`Ledger::list`].
    ///
    /// # Errors
    /// The query's [`StoreError`].
    pub async fn position(&self, tenant: &TenantId, id: &TransactionId) -> Result<Option<u64>, StoreError> {
        let out = self
            .client
            .query()
            .table_name(self.tables.name(Table::Ledger))
            .index_name("by_id")
            .key_condition_expression("tenant_id = :t AND #id = :id")
            .expression_attribute_names("#id", "id")
            .expression_attribute_values(":t", s(tenant.as_str()))
            .expression_attribute_values(":id", s(id.as_str()))
            .limit(1)
            .send()
            .await
            .map_err(shared::dynamo::classify)?;
        Ok(out
            .items()
            .first()
            .and_then(|item| item.get("seq"))
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse().ok()))
    }

    /// A page of the tenant's ledger, newest first (after the entry at `after_seq`, when
    /// given), and the total matching.
    ///
    /// # Errors
    /// The reads' [`StoreError`]s.
    pub async fn list(
        &self,
        tenant: &TenantId,
        kind: Option<EntryType>,
        after_seq: Option<u64>,
        skip: usize,
        take: usize,
    ) -> Result<(Vec<Entry>, u64), StoreError> {
        let t = tenant.as_str();
        let (index, key, value) = match kind {
            None => (None, "tenant_id", t.to_owned()),
            Some(k) => (Some("by_type"), "tenant_type", format!("{t}#{}", k.wire())),
        };
        let start = after_seq.map(|seq| resume_after(t, ("seq", n(seq)), (key, &value)));
        let query = newest_first(&self.client, self.tables.name(Table::Ledger), index, (key, value));
        let total_name = counter_name(kind);
        let (items, total) = tokio::try_join!(
            query_window_from(query, "seq", start, skip, take, &[]),
            counters::read(&self.client, &self.tables, tenant, &total_name),
        )?;
        let entries = items
            .into_iter()
            .map(|item| Ok(serde_dynamo::from_item::<_, EntryRecord>(item)?.entry))
            .collect::<Result<Vec<_>, StoreError>>()?;
        Ok((entries, total))
    }

    /// A page of the tenant's ledger, newest first (optionally of one type), and the
    /// total matching: `GET /billing/transactions`. With `after`, the entries after that
    /// transaction of the tenant's (its position is read first).
    ///
    /// # Errors
    /// [`Error::NotFound`] for a cursor the tenant does not have, storage errors.
    pub async fn transactions(
        &self,
        tenant: &TenantId,
        kind: Option<EntryType>,
        after: Option<&TransactionId>,
        skip: usize,
        take: usize,
    ) -> Result<(Vec<Entry>, u64), Error> {
        let after_seq = match after {
            None => None,
            Some(id) => {
                Some(self.position(tenant, id).await?.ok_or_else(|| Error::not_found("transaction", id.as_str()))?)
            }
        };
        Ok(Box::pin(self.list(tenant, kind, after_seq, skip, take)).await?)
    }

    /// Writes one entry on its own (a grant), retrying while other writes race it.
    ///
    /// # Errors
    /// [`Error::InsufficientCredits`], or storage errors.
    pub async fn record(
        &self,
        tenant: &TenantId,
        entry: NewEntry,
        clock: &dyn shared::time::Clock,
    ) -> Result<Entry, Error> {
        let entry = &entry;
        retry_races(|| async move {
            let account = self.account(tenant).await?;
            let mut tx = Transaction::new();
            let stored = self.stage(&mut tx, tenant, account, entry.clone(), clock.now())?;
            match tx.commit(&self.client).await {
                Ok(()) => Ok(Attempt::Done(stored)),
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Account])?),
            }
        })
        .await
    }
}

impl Ledger {
    /// Writes `entry` unless one of `markers` (once-only keys, such as a Stripe event id,
    /// each with the [`Part`] it is reported as) was recorded before, recording them in
    /// the same transaction; `kind` says what recorded them. Returns whether this call
    /// credited.
    ///
    /// # Errors
    /// [`Error::InsufficientCredits`] for a negative entry beyond the balance, storage
    /// errors.
    pub async fn record_once(
        &self,
        tenant: &TenantId,
        entry: &NewEntry,
        markers: &[(&str, Part)],
        kind: &str,
        clock: &dyn shared::time::Clock,
    ) -> Result<bool, Error> {
        retry_races(|| async move {
            let now = clock.now();
            let mut tx = Transaction::new();
            for (key, part) in markers {
                crate::subscriptions::record_once(&mut tx, &self.tables, tenant, key, kind, *part, now)?;
            }
            let account = self.account(tenant).await?;
            self.stage(&mut tx, tenant, account, entry.clone(), now)?;
            match tx.commit(&self.client).await {
                Ok(()) => Ok(Attempt::Done(true)),
                Err(TransactionError::Condition(part)) if markers.iter().any(|(_, p)| *p == part) => {
                    Ok(Attempt::Done(false))
                }
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Account])?),
            }
        })
        .await
    }
}

/// How long the tally of a reversal is kept: longer than Stripe allows a refund (180
/// days) or a dispute (120 days) after a payment.
const TALLY_DAYS: i64 = 400;

/// A reversal of money Stripe took back: what a refund of a charge, or a dispute, has
/// debited so far is kept (its tally), so that each event moves the debit to what it
/// should be now, once, whatever order the events come in.
#[derive(Debug, Clone)]
pub struct Reversal<'a> {
    /// The tally's key (`refund:ch_…`, `dispute:dp_…`).
    pub tally: &'a str,
    /// The credits that should be debited in all, now.
    pub target: i64,
    /// The entry's kind ([`EntryType::Refund`] or [`EntryType::Dispute`]).
    pub kind: EntryType,
    /// The entry's description.
    pub description: String,
    /// The Stripe event id: recorded in the same transaction, so a redelivery is nothing.
    pub event_id: &'a str,
    /// The Stripe event's type.
    pub event_kind: &'a str,
}

impl Ledger {
    /// Debits (or, for a lower `target`, credits back) the difference between what the
    /// reversal's tally says was debited and `target`, with the tally's new value and the
    /// event's marker, in one transaction. Returns whether the balance changed.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn reverse(
        &self,
        tenant: &TenantId,
        reversal: &Reversal<'_>,
        clock: &dyn shared::time::Clock,
    ) -> Result<bool, Error> {
        retry_races(|| async move {
            let key = [("tenant_id", tenant.as_str()), ("event_id", reversal.tally)];
            let tally = get_item(&self.client, self.tables.name(Table::StripeEvents), &key).await?;
            let debited = tally.as_ref().and_then(|item| item.get("debited")?.as_n().ok()?.parse::<i64>().ok());
            let delta = reversal.target - debited.unwrap_or(0);
            if delta == 0 {
                return Ok(Attempt::Done(false));
            }
            let now = clock.now();
            let mut tx = Transaction::new();
            crate::subscriptions::record_once(
                &mut tx,
                &self.tables,
                tenant,
                reversal.event_id,
                reversal.event_kind,
                Part::Event,
                now,
            )?;
            let condition = match debited {
                Some(_) => "debited = :before",
                None => "attribute_not_exists(event_id)",
            };
            let mut update = Update::builder()
                .table_name(self.tables.name(Table::StripeEvents))
                .key("tenant_id", s(tenant.as_str()))
                .key("event_id", s(reversal.tally))
                .update_expression("SET debited = :debited, #type = :type, expires_at = :expires")
                .condition_expression(condition)
                .expression_attribute_names("#type", "type")
                .expression_attribute_values(":debited", n(reversal.target))
                .expression_attribute_values(":type", s("reversal"))
                .expression_attribute_values(":expires", n(now.timestamp() + TALLY_DAYS * 86_400));
            if let Some(before) = debited {
                update = update.expression_attribute_values(":before", n(before));
            }
            tx.push(Part::Invoice, TransactWriteItem::builder().update(built(update.build())?).build());
            let account = self.account(tenant).await?;
            let entry = NewEntry {
                kind: reversal.kind,
                amount: -delta,
                description: reversal.description.clone(),
                payment_status: None,
            };
            self.stage(&mut tx, tenant, account, entry, now)?;
            match tx.commit(&self.client).await {
                Ok(()) => Ok(Attempt::Done(true)),
                Err(TransactionError::Condition(Part::Event)) => Ok(Attempt::Done(false)),
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Account, Part::Invoice])?),
            }
        })
        .await
    }
}

/// The family of span counters of credits used (by hour and by day): attribute
/// [`USAGE_CREDITS`] sums the credits usage entries took, [`USAGE_CHARGES`] counts them.
pub const USAGE_SPANS: &str = "usage";
/// See [`USAGE_SPANS`].
pub const USAGE_CREDITS: &str = "credits";
/// See [`USAGE_SPANS`].
pub const USAGE_CHARGES: &str = "charges";
/// The levels usage is counted at: [`GET /billing/usage`](Ledger::usage) reads hours or days.
const USAGE_LEVELS: [Level; 2] = [Level::Hour, Level::Day];

/// The span counter changes of a usage entry of `credits` made at `now`.
fn usage_counts(credits: i64, now: DateTime<Utc>) -> CounterChange {
    let ms = u64::try_from(now.timestamp_millis()).unwrap_or(0);
    let mut change = CounterChange::default();
    for name in shared::spans::names_at(&USAGE_LEVELS, USAGE_SPANS, ms, &[USAGE_CREDITS]) {
        change.add(&name, credits);
    }
    for name in shared::spans::names_at(&USAGE_LEVELS, USAGE_SPANS, ms, &[USAGE_CHARGES]) {
        change.add(&name, 1);
    }
    change
}

/// One bucket of [`Ledger::usage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageBucket {
    /// Its index in the window (see [`Window::start`]).
    pub index: u64,
    /// Credits usage entries took in it.
    pub credits: u64,
    /// Usage entries made in it.
    pub charges: u64,
}

impl Ledger {
    /// Credits used in each bucket of `window`: one query of the span counters, whose
    /// cost depends on the window only.
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn usage(&self, tenant: &TenantId, window: &Window) -> Result<Vec<UsageBucket>, StoreError> {
        let found = shared::spans::series(&self.client, &self.tables, tenant, USAGE_SPANS, window.spans()).await?;
        let value = |index: u64, attribute: &str| {
            found.get(&index).and_then(|v| v.get(attribute)).map_or(0, |n| u64::try_from(*n).unwrap_or(0))
        };
        Ok(window
            .indexes()
            .map(|index| UsageBucket {
                index,
                credits: value(index, USAGE_CREDITS),
                charges: value(index, USAGE_CHARGES),
            })
            .collect())
    }
}

/// The counter of ledger entries (of one type).
#[must_use]
pub fn counter_name(kind: Option<EntryType>) -> String {
    match kind {
        None => "transactions".to_owned(),
        Some(k) => format!("transactions|type={}", k.wire()),
    }
}
