//! The credit ledger: a tenant's balance and every change to it, written together.
//!
//! Table `accounts`, the tenant's own item (`tenant_id`): `credits`, the ledger's balance,
//! and `seq`, the number of ledger entries so far (the same item holds the tenant's
//! Stripe customer and subscription, see [`crate::subscriptions`]). Table `ledger`
//! (`tenant_id`, `seq`): one entry per balance change with `credits_before` and
//! `credits_after`; GSI `by_type` (`tenant_type`, `seq`). Entries and the account's new
//! balance are written in one transaction conditioned on the account item's `version`
//! that was read, so entries chain exactly (each `credits_before` is the previous `credits_after`), the
//! balance never disagrees with the ledger and never goes below 0.
//!
//! **Charges** (execution starts and replays) do not write that item: each spends from one
//! of the tenant's [`ALLOWANCES`] allowances, chosen at random ([`allowances`]), in the
//! start's own transaction, and the charges spent since the last entry become one usage
//! entry at the next write of the account item (a top-up, a refill of an allowance, a
//! read of the ledger): usage is charged in batches, the balance is exact at once.

use std::collections::HashMap;

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

pub mod allowances;

pub use allowances::{ALLOWANCES, Allowance, Charge, allowance_of, any_allowance, seen_low};

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

/// A tenant's account as read: the ledger's balance and position, and its allowances.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Account {
    /// The ledger's balance: credits after its newest entry.
    pub credits: i64,
    /// Entries written so far.
    pub seq: u64,
    /// Changes of the balance, the entries or the allowances' credits so far.
    pub version: u64,
    /// Below this balance a charge reports `credits.low` (the account's
    /// `low_balance_threshold`, else [`LOW_BALANCE_CREDITS`]).
    pub low_balance_threshold: Option<i64>,
    /// Credits handed to the allowances: held there, or spent and not yet in the ledger.
    pub allocated: i64,
    /// Of each allowance, the credits spent and the charges made that the ledger has.
    pub settled: [(i64, i64); ALLOWANCES as usize],
    /// The allowances.
    pub allowances: [Allowance; ALLOWANCES as usize],
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

    /// The balance: the ledger's, less what charges spent since its newest entry. Exact
    /// whatever the order its items were read in: an allowance's `spent` only grows, and
    /// the account item moves `credits` and the allowance's `settled` mark together.
    #[must_use]
    pub fn balance(&self) -> i64 {
        self.credits - self.allowances.iter().zip(&self.settled).map(|(a, (spent, _))| a.spent - spent).sum::<i64>()
    }

    /// Credits not handed to an allowance.
    #[must_use]
    pub fn free(&self) -> i64 {
        self.credits - self.allocated
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

    /// The tenant's account item and allowances, in one batch read (all 0 for a tenant
    /// that never had credits).
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn account(&self, tenant: &TenantId) -> Result<Account, StoreError> {
        let table = self.tables.name(Table::Accounts);
        let mut keys = vec![HashMap::from([("tenant_id".to_owned(), s(tenant.as_str()))])];
        keys.extend((0..ALLOWANCES).map(|k| allowances::key(tenant.as_str(), k)));
        let found = shared::dynamo::batch_get(&self.client, table, keys).await?;
        let mut account = Account::default();
        for item in &found {
            let Some(id) = item.get("tenant_id").and_then(|v| v.as_s().ok()) else { continue };
            if id == tenant.as_str() {
                account.credits = number(item, "credits");
                account.seq = u64::try_from(number(item, "seq")).unwrap_or(0);
                account.version = u64::try_from(number(item, "version")).unwrap_or(0);
                account.allocated = number(item, "allocated");
                account.low_balance_threshold =
                    item.contains_key("low_balance_threshold").then(|| number(item, "low_balance_threshold"));
                for (k, settled) in account.settled.iter_mut().enumerate() {
                    *settled = (entry_of(item, "settled", k), entry_of(item, "settled_charges", k));
                }
            } else if let Some(k) = allowances::index_of(tenant.as_str(), id) {
                account.allowances[usize::from(k)] = Allowance {
                    held: number(item, "held"),
                    spent: number(item, "spent"),
                    charges: number(item, "charges"),
                    last: item.get("last_charge").and_then(|v| v.as_s().ok()).cloned(),
                };
            }
        }
        Ok(account)
    }

    /// The tenant's balance ([`Account::balance`]).
    ///
    /// # Errors
    /// The read's [`StoreError`].
    pub async fn balance(&self, tenant: &TenantId) -> Result<i64, StoreError> {
        Ok(self.account(tenant).await?.balance())
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
    /// still being as read ([`Part::Account`]), after a usage entry of the charges the
    /// ledger does not have yet, if any. Returns the entry as it will be stored. A refund
    /// or dispute that takes the credits no allowance holds below 0 takes back what the
    /// allowances hold too ([`Part::Allowance`]: each still holding what was read).
    ///
    /// # Errors
    /// [`Error::InsufficientCredits`] when the credits no allowance holds would go below 0
    /// (nothing is staged); a [`StoreError`] if an operation cannot be built.
    pub fn stage(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        account: &Account,
        entry: NewEntry,
        now: DateTime<Utc>,
    ) -> Result<Entry, Error> {
        let stored = self.stage_head(tx, tenant, account, Some(entry), 0, now)?;
        stored.ok_or_else(|| Error::Store(StoreError::Other("an entry staged nothing".into())))
    }

    /// Stages the account item's new state: the charges the ledger does not have yet as
    /// one usage entry, then `entry` if any, `allocate` more credits handed to the
    /// allowances (negative: taken back), all conditioned on the `version` read. Returns
    /// `entry` as it will be stored.
    fn stage_head(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        account: &Account,
        entry: Option<NewEntry>,
        allocate: i64,
        now: DateTime<Utc>,
    ) -> Result<Option<Entry>, Error> {
        let unsettled: Vec<(i64, i64)> = account.unsettled().collect();
        let (pending, charges) = unsettled.iter().fold((0, 0), |(c, m), (credits, made)| (c + credits, m + made));
        let mut entries = Vec::new();
        if charges > 0 {
            entries.push(allowances::usage_entry(account, pending, charges));
        }
        let written = entry.is_some();
        let mut allocate = allocate;
        if let Some(entry) = entry {
            let free = account.free() + allocate;
            if entry.amount < 0 && free + entry.amount < 0 {
                if !entry.kind.may_overdraw() {
                    return Err(Error::InsufficientCredits(format!(
                        "this needs {} credits and the balance is {}",
                        -entry.amount,
                        account.balance()
                    )));
                }
                // A refund or a dispute takes back more than no allowance holds: what the
                // allowances hold is taken back too, so that no charge spends credits the
                // balance no longer has (below 0, charges are refused as at 0).
                allocate -= self.stage_take_back(tx, tenant, account, None)?;
            }
            entries.push(entry);
        }
        let mut credits = account.credits;
        let mut seq = account.seq;
        let mut stored = None;
        let threshold = account.threshold();
        let mut events = Vec::new();
        let mut writes = Transaction::new();
        for entry in entries {
            seq += 1;
            let (before, after) = (credits, credits + entry.amount);
            credits = after;
            let kind = entry.kind;
            let (record, this) = entry_record(tenant, seq, entry, before, now);
            let put = Put::builder()
                .table_name(self.tables.name(Table::Ledger))
                .set_item(Some(serde_dynamo::to_item(record).map_err(StoreError::from)?))
                .condition_expression("attribute_not_exists(seq)");
            writes.push(Part::Ledger, TransactWriteItem::builder().put(built(put.build())?).build());
            let counts = CounterChange::between(&[], &[counter_name(None), counter_name(Some(kind))]);
            writes.extend(Part::Ledger, counts.transact_items(&self.tables, tenant)?);
            if this.amount > 0 {
                events.push(Event::credits(EventType::CreditsAdded, &this, threshold, now));
            }
            if before >= threshold && after < threshold {
                events.push(Event::credits(EventType::CreditsLow, &this, threshold, now));
            }
            stored = Some(this);
        }
        let settled: Vec<(i64, i64)> =
            account.settled.iter().zip(&unsettled).map(|(s, u)| (s.0 + u.0, s.1 + u.1)).collect();
        let marks = |pick: fn(&(i64, i64)) -> i64| {
            aws_sdk_dynamodb::types::AttributeValue::M(
                settled.iter().enumerate().map(|(k, mark)| (format!("{k:02}"), n(pick(mark)))).collect(),
            )
        };
        // An update, not a put: the account item also holds the Stripe customer and the
        // subscription, which a balance change must leave alone.
        let update = Update::builder()
            .table_name(self.tables.name(Table::Accounts))
            .key("tenant_id", s(tenant.as_str()))
            .update_expression(
                "SET credits = :credits, seq = :seq, version = :next, allocated = :allocated, \
                 settled = :settled, settled_charges = :settled_charges",
            )
            .condition_expression(allowances::version_condition(account.version))
            .expression_attribute_values(":credits", n(credits))
            .expression_attribute_values(":seq", n(seq))
            .expression_attribute_values(":allocated", n(account.allocated - pending + allocate))
            .expression_attribute_values(":settled", marks(|m| m.0))
            .expression_attribute_values(":settled_charges", marks(|m| m.1))
            .expression_attribute_values(":version", n(account.version))
            .expression_attribute_values(":next", n(account.version + 1));
        // The account item before the entries: a lost race is reported as one.
        tx.push(Part::Account, TransactWriteItem::builder().update(built(update.build())?).build());
        tx.append(writes);
        crate::webhooks::events::stage(tx, &self.tables, tenant, &events)?;
        Ok(if written { stored } else { None })
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
            let stored = self.stage(&mut tx, tenant, &account, entry.clone(), clock.now())?;
            match tx.commit(&self.client).await {
                Ok(()) => Ok(Attempt::Done(stored)),
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Account, Part::Allowance])?),
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
            self.stage(&mut tx, tenant, &account, entry.clone(), now)?;
            match tx.commit(&self.client).await {
                Ok(()) => Ok(Attempt::Done(true)),
                Err(TransactionError::Condition(part)) if markers.iter().any(|(_, p)| *p == part) => {
                    Ok(Attempt::Done(false))
                }
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Account, Part::Allowance])?),
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
            self.stage(&mut tx, tenant, &account, entry, now)?;
            match tx.commit(&self.client).await {
                Ok(()) => Ok(Attempt::Done(true)),
                Err(TransactionError::Condition(Part::Event)) => Ok(Attempt::Done(false)),
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Account, Part::Allowance, Part::Invoice])?),
            }
        })
        .await
    }
}

/// The family of span counters of credits used (by hour and by day): attribute
/// [`USAGE_CREDITS`] sums the credits charges took, [`USAGE_CHARGES`] counts them. They
/// are attributes of the executions' span items (every charge is of a start or a
/// replay, which changes those items in the same transaction).
pub const USAGE_SPANS: &str = shared::spans::EXECUTION_SPANS;
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

/// A number attribute of `item` (0 when absent).
fn number(item: &shared::dynamo::Item, name: &str) -> i64 {
    item.get(name).and_then(|v| v.as_n().ok()).and_then(|v| v.parse::<i64>().ok()).unwrap_or(0)
}

/// Allowance `k`'s number in map attribute `name` of the account item (0 when absent).
fn entry_of(item: &shared::dynamo::Item, name: &str, k: usize) -> i64 {
    item.get(name)
        .and_then(|v| v.as_m().ok())
        .and_then(|m| m.get(&format!("{k:02}")))
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Entry number `seq` of the tenant's ledger, `entry` applied to a balance of `before`:
/// the record to store and the entry as the API shows it.
fn entry_record(tenant: &TenantId, seq: u64, entry: NewEntry, before: i64, now: DateTime<Utc>) -> (EntryRecord, Entry) {
    let stored = Entry {
        id: TransactionId::generate_at(now).to_string(),
        kind: entry.kind.wire().to_owned(),
        amount: entry.amount,
        currency: "usd".to_owned(),
        credits_before: before,
        credits_after: before + entry.amount,
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
    (record, stored)
}
