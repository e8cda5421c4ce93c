//! A tenant's credit allowances: what lets execution starts and replays be charged
//! without all of them writing the one account item (a busy tenant's starts would
//! commit one after another on it).
//!
//! Each allowance is an item of `accounts` (`tenant_id` = `ten_…#07`, one of
//! [`ALLOWANCES`]) with `held` (credits handed to it and not spent), `spent` and
//! `charges` (everything spent and charged through it, ever). A charge picks one at
//! random and, in its write's own transaction, takes its price from `held` on condition
//! that `held` covers it ([`Ledger::stage_charge`]). When it does not, [`Ledger::refill`]
//! hands the allowance credits from those no allowance holds (a share of them, so that
//! the account item is written once per many charges), first taking back what the others
//! hold when that is not enough; only when the whole balance cannot pay is the charge
//! refused, and that is proven in one transaction. A refund or dispute that takes more
//! than the credits no allowance holds takes back what every allowance holds in its own
//! transaction ([`Ledger::stage_take_back`]), so that below 0 no charge finds credits.
//!
//! The account item keeps, beside the ledger's `credits`, `allocated` (credits handed to
//! allowances: held, or spent and not yet in the ledger) and, per allowance, the `spent`
//! and `charges` the ledger has (`settled`, `settled_charges`). Every write of it puts
//! the charges since into one usage entry first ([`Ledger::settle`] does only that), so
//! the balance is the ledger's `credits` less what was spent since, and the ledger chains
//! exactly. The account item's `version` guards every change of it. Refills and settling
//! are bookkeeping, written outside the request's gate ([`shared::dynamo::ungated`]).

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{ConditionCheck, TransactWriteItem, Update};
use chrono::{DateTime, Utc};
use shared::TenantId;
use shared::counters::CounterChange;
use shared::dynamo::{Attempt, Item, Part, StoreError, Table, Transaction, built, n, retry_races, s, ungated};
use shared::time::Clock;

use super::{Account, EntryType, Ledger, NewEntry, usage_counts};
use crate::Error;

/// How many allowances a tenant's charges are spread over.
pub const ALLOWANCES: u8 = 16;

/// Of the credits no allowance holds, the share a refill hands one allowance.
const REFILL_SHARE: i64 = 2 * ALLOWANCES as i64;

/// One allowance as read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Allowance {
    /// Credits handed to it and not spent.
    pub held: i64,
    /// Credits spent through it, ever.
    pub spent: i64,
    /// Charges made through it, ever.
    pub charges: i64,
    /// The description of its latest charge.
    pub last: Option<String>,
}

/// A charge staged in a write: the allowance it spends from, and its price.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Charge {
    /// The allowance (0 to [`ALLOWANCES`] - 1).
    pub allowance: u8,
    /// Credits.
    pub credits: i64,
}

/// The key of allowance `k` of the tenant whose id is `tenant`.
#[must_use]
pub fn key(tenant: &str, k: u8) -> Item {
    HashMap::from([("tenant_id".to_owned(), s(format!("{tenant}#{k:02}")))])
}

/// Which allowance of the tenant whose id is `tenant` the item whose `tenant_id` is `id`
/// is.
#[must_use]
pub fn index_of(tenant: &str, id: &str) -> Option<u8> {
    let k: u8 = id.strip_prefix(tenant)?.strip_prefix('#')?.parse().ok()?;
    (k < ALLOWANCES).then_some(k)
}

/// An allowance at random.
#[must_use]
pub fn any_allowance() -> u8 {
    shared::counters::any_shard() % ALLOWANCES
}

/// The allowance of a charge named by `seed` (an execution's id and attempt): spread as
/// evenly as the names are.
#[must_use]
pub fn allowance_of(seed: &str) -> u8 {
    let hash = seed.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    u8::try_from(hash % u64::from(ALLOWANCES)).unwrap_or(0)
}

/// The usage entry of `charges` charges that spent `credits`: the charge's own
/// description when there is one, else a count.
pub(super) fn usage_entry(account: &Account, credits: i64, charges: i64) -> NewEntry {
    let single = (charges == 1)
        .then(|| {
            account
                .allowances
                .iter()
                .zip(&account.settled)
                .find(|(a, (_, made))| a.charges > *made)
                .and_then(|(a, _)| a.last.clone())
        })
        .flatten();
    NewEntry {
        kind: EntryType::Usage,
        amount: -credits,
        description: single.unwrap_or_else(|| format!("{charges} execution starts and replays")),
        payment_status: None,
    }
}

impl Account {
    /// Of each allowance, the credits spent and charges made that the ledger does not
    /// have yet (none where the allowance was read before the account item's last
    /// settling).
    pub(super) fn unsettled(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.allowances
            .iter()
            .zip(&self.settled)
            .map(|(a, (spent, made))| ((a.spent - spent).max(0), (a.charges - made).max(0)))
    }
}

impl Ledger {
    /// Stages a charge of `credits` (with `description`, for its usage entry) in `tx`:
    /// taken from allowance `allowance` ([`any_allowance`], [`allowance_of`]: the same
    /// for each try of one charge, so that a refill serves it), on condition that it holds them
    /// ([`Part::Allowance`]: then [`Ledger::refill`] it and try again). Returns the charge
    /// and its counts for the usage charts, which the caller stages with its own counter
    /// changes: they are attributes of the execution span items a start or replay
    /// changes anyway ([`shared::spans::EXECUTION_SPANS`]), and DynamoDB takes one
    /// operation per item in a transaction. Nothing for a price of 0.
    ///
    /// # Errors
    /// A [`StoreError`] if an operation cannot be built.
    pub fn stage_charge(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        allowance: u8,
        credits: i64,
        description: String,
        now: DateTime<Utc>,
    ) -> Result<(Option<Charge>, CounterChange), StoreError> {
        if credits <= 0 {
            return Ok((None, CounterChange::default()));
        }
        let allowance = allowance % ALLOWANCES;
        let update = Update::builder()
            .table_name(self.tables.name(Table::Accounts))
            .set_key(Some(key(tenant.as_str(), allowance)))
            .update_expression("ADD held :taken, spent :credits, charges :one SET last_charge = :last")
            .condition_expression("held >= :credits")
            .expression_attribute_values(":taken", n(-credits))
            .expression_attribute_values(":credits", n(credits))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":last", s(description));
        tx.push(Part::Allowance, TransactWriteItem::builder().update(built(update.build())?).build());
        Ok((Some(Charge { allowance, credits }), usage_counts(credits, now)))
    }

    /// Stages a charge like [`Ledger::stage_charge`], from `account` as read: when its
    /// allowance does not hold the price, refilled in the same transaction, the account
    /// item written with the charges the ledger does not have yet and this one in one
    /// usage entry (`credits.low` with it when it crosses the threshold). One
    /// transaction, where a charge its allowance refuses, a refill and the settling
    /// after take three: for a tenant below its low-balance threshold, whose every
    /// charge is refilled ([`seen_low`]). When the balance cannot pay, a plain charge,
    /// which its allowance refuses and [`Ledger::refill`] then proves short.
    ///
    /// # Errors
    /// A [`StoreError`] if an operation cannot be built.
    pub fn stage_charge_refilled(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        account: &Account,
        Charge { allowance, credits }: Charge,
        description: String,
        now: DateTime<Utc>,
    ) -> Result<(Option<Charge>, CounterChange), Error> {
        let k = allowance % ALLOWANCES;
        let own = account.allowances[usize::from(k)].held;
        note_low(tenant, account.balance() - credits < account.threshold());
        if credits <= 0 || own >= credits {
            return Ok(self.stage_charge(tx, tenant, k, credits, description, now)?);
        }
        let mut staged = Transaction::new();
        let mut available = account.free();
        if available + own < credits {
            available += self.stage_take_back(&mut staged, tenant, account, Some(usize::from(k)))?;
        }
        if available + own < credits {
            return Ok(self.stage_charge(tx, tenant, k, credits, description, now)?);
        }
        let reclaimed = available - account.free();
        let grant = grant(account, available, credits - own);
        // The refill and the charge are one update of the allowance: it holds at least
        // what the charge takes beyond the grant.
        let least = credits - grant;
        let update = Update::builder()
            .table_name(self.tables.name(Table::Accounts))
            .set_key(Some(key(tenant.as_str(), k)))
            .update_expression("ADD held :delta, spent :credits, charges :one SET last_charge = :last")
            .condition_expression(if least <= 0 {
                "attribute_not_exists(held) OR held >= :least"
            } else {
                "held >= :least"
            })
            .expression_attribute_values(":delta", n(grant - credits))
            .expression_attribute_values(":credits", n(credits))
            .expression_attribute_values(":one", n(1))
            .expression_attribute_values(":least", n(least))
            .expression_attribute_values(":last", s(description.clone()));
        tx.push(Part::Allowance, TransactWriteItem::builder().update(built(update.build())?).build());
        tx.append(staged);
        // The account item as the charge leaves it, so that settling enters the charge too.
        let mut charged = account.clone();
        let spent = &mut charged.allowances[usize::from(k)];
        spent.held += grant - credits;
        spent.spent += credits;
        spent.charges += 1;
        spent.last = Some(description);
        self.stage_head(tx, tenant, &charged, None, grant - reclaimed, now)?;
        Ok((Some(Charge { allowance: k, credits }), usage_counts(credits, now)))
    }

    /// Makes `charge`'s allowance hold its price: credits no allowance holds are handed
    /// to it (a share of those above the low-balance threshold, at least the price),
    /// after taking back what the others hold when those are too few. Returns whether the
    /// charge is likely to take the balance below the threshold: then the caller settles
    /// once it is made ([`Ledger::settle`]), so that `credits.low` is reported at once.
    ///
    /// # Errors
    /// [`Error::InsufficientCredits`] when the whole balance cannot pay the charge
    /// (proven by one transaction that every allowance held no more than was read while
    /// the account item stayed as read); storage errors.
    pub async fn refill(&self, tenant: &TenantId, charge: Charge, now: DateTime<Utc>) -> Result<bool, Error> {
        let k = usize::from(charge.allowance);
        ungated(Box::pin(retry_races(|| async move {
            let account = self.account(tenant).await?;
            let own = account.allowances[k].held;
            if own >= charge.credits {
                return Ok(Attempt::Done(false));
            }
            let mut tx = Transaction::new();
            let mut available = account.free();
            if available + own < charge.credits {
                available += self.stage_take_back(&mut tx, tenant, &account, Some(k))?;
            }
            let reclaimed = available - account.free();
            if available + own < charge.credits {
                return match self.prove_short(tenant, &account).await {
                    Ok(()) => Err(Error::InsufficientCredits(format!(
                        "this needs {} credits and the balance is {}; top up with POST /billing/topup",
                        charge.credits,
                        account.balance()
                    ))),
                    Err(e) => Ok(Attempt::raced_on(e, &[Part::Account, Part::Allowance])?),
                };
            }
            let grant = grant(&account, available, charge.credits - own);
            let balance = account.balance();
            note_low(tenant, balance - charge.credits < account.threshold());
            let crossing = balance >= account.threshold() && balance - charge.credits < account.threshold();
            let give = Update::builder()
                .table_name(self.tables.name(Table::Accounts))
                .set_key(Some(key(tenant.as_str(), charge.allowance)))
                .update_expression("ADD held :grant")
                .expression_attribute_values(":grant", n(grant));
            tx.push(Part::Allowance, TransactWriteItem::builder().update(built(give.build())?).build());
            self.stage_head(&mut tx, tenant, &account, None, grant - reclaimed, now)?;
            match tx.commit(&self.client).await {
                Ok(()) => Ok(Attempt::Done(crossing)),
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Account, Part::Allowance])?),
            }
        })))
        .await
    }

    /// Stages taking back everything the allowances hold (but allowance `except`), each
    /// on condition that it still holds what `account` read; returns the credits taken
    /// back (to count as no longer handed out in the same transaction's account item).
    ///
    /// # Errors
    /// A [`StoreError`] if an operation cannot be built.
    pub(super) fn stage_take_back(
        &self,
        tx: &mut Transaction,
        tenant: &TenantId,
        account: &Account,
        except: Option<usize>,
    ) -> Result<i64, StoreError> {
        let mut taken = 0;
        for (j, other) in account.allowances.iter().enumerate().filter(|(j, a)| Some(*j) != except && a.held > 0) {
            let take = Update::builder()
                .table_name(self.tables.name(Table::Accounts))
                .set_key(Some(key(tenant.as_str(), u8::try_from(j).unwrap_or(0))))
                .update_expression("ADD held :taken")
                .condition_expression("held >= :held")
                .expression_attribute_values(":taken", n(-other.held))
                .expression_attribute_values(":held", n(other.held));
            tx.push(Part::Allowance, TransactWriteItem::builder().update(built(take.build())?).build());
            taken += other.held;
        }
        Ok(taken)
    }

    /// Checks, in one transaction, that the account item is still as read and that no
    /// allowance holds more than was read: then the balance was at most what `account`
    /// says at that moment.
    async fn prove_short(&self, tenant: &TenantId, account: &Account) -> Result<(), shared::dynamo::TransactionError> {
        let table = self.tables.name(Table::Accounts);
        let mut tx = Transaction::new();
        let head = ConditionCheck::builder()
            .table_name(table)
            .key("tenant_id", s(tenant.as_str()))
            .condition_expression(version_condition(account.version))
            .expression_attribute_values(":version", n(account.version));
        tx.push(Part::Account, TransactWriteItem::builder().condition_check(built(head.build())?).build());
        for (j, a) in account.allowances.iter().enumerate() {
            let check = ConditionCheck::builder()
                .table_name(table)
                .set_key(Some(key(tenant.as_str(), u8::try_from(j).unwrap_or(0))))
                .condition_expression("attribute_not_exists(held) OR held <= :held")
                .expression_attribute_values(":held", n(a.held));
            tx.push(Part::Allowance, TransactWriteItem::builder().condition_check(built(check.build())?).build());
        }
        tx.commit(&self.client).await
    }

    /// Puts the charges the ledger does not have yet into one usage entry (nothing when
    /// there are none): before the ledger is read, so that it shows every charge.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn settle(&self, tenant: &TenantId, clock: &dyn Clock) -> Result<(), Error> {
        ungated(Box::pin(retry_races(|| async move {
            let account = self.account(tenant).await?;
            if account.unsettled().all(|(_, charges)| charges == 0) {
                return Ok(Attempt::Done(()));
            }
            let mut tx = Transaction::new();
            self.stage_head(&mut tx, tenant, &account, None, 0, clock.now())?;
            match tx.commit(&self.client).await {
                Ok(()) => Ok(Attempt::Done(())),
                Err(e) => Ok(Attempt::raced_on(e, &[Part::Account])?),
            }
        })))
        .await
    }
}

/// What a refill hands an allowance that needs `need` more credits, of the `available`
/// ones no allowance holds: credits above the threshold in shares; below it only what
/// the charge needs, so that the charge that crosses it is refilled and settled at once.
fn grant(account: &Account, available: i64, need: i64) -> i64 {
    let above = available - account.threshold();
    if above >= need { (above / REFILL_SHARE).clamp(need, above) } else { need }
}

/// Tenants an instance last saw charged below their low-balance threshold, and when.
static LOW: std::sync::LazyLock<std::sync::Mutex<HashMap<String, std::time::Instant>>> =
    std::sync::LazyLock::new(Default::default);

/// How long an instance takes a tenant it saw below its threshold to still be there.
const LOW_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// The most tenants [`LOW`] keeps (then it starts again).
const LOW_MAX: usize = 10_000;

/// Whether this instance saw the tenant's latest charge take or leave its balance below
/// the low-balance threshold, within [`LOW_FOR`]: then every charge of its refills its
/// allowance, and a start reads the account beside its workflow and makes the charge
/// with [`Ledger::stage_charge_refilled`].
#[must_use]
pub fn seen_low(tenant: &TenantId) -> bool {
    let seen = LOW.lock().ok().and_then(|low| low.get(tenant.as_str()).copied());
    seen.is_some_and(|at| at.elapsed() < LOW_FOR)
}

fn note_low(tenant: &TenantId, low: bool) {
    let Ok(mut seen) = LOW.lock() else { return };
    if !low {
        seen.remove(tenant.as_str());
        return;
    }
    if seen.len() >= LOW_MAX {
        seen.clear();
    }
    seen.insert(tenant.as_str().to_owned(), std::time::Instant::now());
}

/// The condition that the account item's `version` is still `:version`.
pub(super) fn version_condition(version: u64) -> &'static str {
    if version == 0 { "attribute_not_exists(version) OR version = :version" } else { "version = :version" }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_allowance_is_known_by_its_key_and_nothing_else_is() {
        let t = "ten_0193a6f21c2b7d3e8f000123456789ab";
        for k in 0..ALLOWANCES {
            let id = key(t, k)["tenant_id"].as_s().expect("s").clone();
            assert_eq!(index_of(t, &id), Some(k));
        }
        assert_eq!(index_of(t, t), None);
        assert_eq!(index_of(t, &format!("{t}#16")), None);
        assert_eq!(index_of(t, "ten_0193a6f21c2b7d3e8f000123456789ac#01"), None);
    }

    #[test]
    fn the_balance_is_exact_whichever_of_its_items_was_read_first() {
        // 10 charges of 1 in allowance 3; the ledger settled 6 of them.
        let mut before = Account { credits: 100, allocated: 50, ..Account::default() };
        before.allowances[3] = Allowance { held: 40, spent: 10, charges: 10, last: None };
        assert_eq!(before.balance(), 90);
        // The account item read after a settling that saw 12 charges, the allowance
        // before the last 2 of them: still the balance after 10 charges.
        let mut mixed = before;
        mixed.credits = 88;
        mixed.allocated = 38;
        mixed.settled[3] = (12, 12);
        assert_eq!(mixed.balance(), 90);
        assert_eq!(mixed.unsettled().map(|(c, _)| c).sum::<i64>(), 0, "nothing is settled twice");
    }

    #[test]
    fn one_charge_keeps_its_own_description_and_several_are_counted() {
        let mut account = Account::default();
        account.allowances[5] = Allowance { held: 0, spent: 1, charges: 1, last: Some("execution x started".into()) };
        assert_eq!(usage_entry(&account, 1, 1).description, "execution x started");
        assert_eq!(usage_entry(&account, 3, 3).description, "3 execution starts and replays");
        assert_eq!(usage_entry(&account, 3, 3).amount, -3);
    }
}
