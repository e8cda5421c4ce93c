//! What a request's first write must pass, checked inside the write itself so that a
//! warm request has nothing in front of its own DynamoDB calls ([`crate::http`]).
//!
//! The edge runs each authenticated request inside a [`Gate`]. Its first write
//! transaction ([`crate::dynamo::transact`], which every store commits through, calls it
//! as its [`crate::dynamo::WriteGate`]):
//!
//! - waits for the request's look at its tenant's rate-limit standing (started by the
//!   edge beside the handler, so it overlaps the handler's own reads), unless the
//!   instance's last count in this window left the tenant room; over the limit, nothing
//!   is written and the request is answered 429 (the request is counted after its
//!   answer, [`Gate::count`]);
//! - when the key was taken from the instance's memory rather than read for this
//!   request (and has not expired since), carries a `ConditionCheck` that one of the
//!   key's [`crate::auth::REVOCATION_MARKERS`], chosen at random, does not exist: a
//!   revocation writes them all in its own transaction, so a key revoked at any moment
//!   before the commit writes nothing and the request is answered 401, and no item is
//!   checked by every write of a busy key. A transaction with no room for it (100
//!   operations, or within a key's size of 4 MB) reads the key first instead.
//!
//! An effect outside DynamoDB (a Stripe call that creates something) cannot carry a
//! condition: [`crate::dynamo::before_effect`] passes the limit and reads the key first.
//!
//! Once a write has committed through the gate, the request's key is proven live and
//! later writes of the same request go as they are. Writes outside a gate (the admin
//! command line) are not touched.

use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::types::{ConditionCheck, TransactWriteItem};
use tokio::sync::OnceCell;

use crate::TenantId;
use crate::auth::{AuthState, REVOCATION_MARKERS};
use crate::dynamo::{StoreError, Table, s};
use crate::rate_limit::{Slot, Standing};

pub use crate::dynamo::Refusal;

/// Where a request's writes stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing was written through the gate.
    Open,
    /// A write committed through the gate: the key was live and the tenant within its
    /// limit when it did.
    Written,
    /// A write was refused, and nothing was written through the gate.
    Refused(Refusal),
}

#[derive(Debug)]
struct State {
    /// Whether the key is already known live for this request (read for it, or proven
    /// by a committed write).
    key_checked: bool,
    outcome: Outcome,
    /// Whether the look at the standing was taken on: by the request's first read, to
    /// carry it ([`Gate::carry`]), or by the edge, to read it alone.
    look_taken: bool,
}

/// The longest a count after the answer may take (it may make up to four updates, each
/// with the DynamoDB client's own timeouts): it is part of the invocation, and the
/// instance serves no other request meanwhile. (On Lambda it also ends with the
/// invocation's deadline, [`crate::lambda::run`].)
pub const COUNT_BUDGET: std::time::Duration = std::time::Duration::from_secs(3);

/// One request's gate.
#[derive(Debug)]
pub struct Gate {
    auth: AuthState,
    tenant: TenantId,
    key_hash: String,
    /// From when the key authenticates nothing (as its item says: it never changes).
    expires_at: Option<chrono::DateTime<chrono::Utc>>,
    standing: OnceCell<Option<Standing>>,
    state: Mutex<State>,
    /// The two shards of the tenant's standing the request looks at and is counted in
    /// the roomier of (one twice with one shard).
    slots: [Slot; 2],
}

impl Gate {
    /// The gate of a request of `tenant` with the key whose hash is `key_hash`, which
    /// expires at `expires_at`; `key_checked` when the key's item was read for this
    /// request already.
    #[must_use]
    pub fn new(
        auth: AuthState,
        tenant: TenantId,
        (key_hash, expires_at): (String, Option<chrono::DateTime<chrono::Utc>>),
        key_checked: bool,
    ) -> Arc<Self> {
        let limit = auth.known.limit(&tenant).unwrap_or(auth.rate_limit).max(auth.rate_limit);
        let slots = Slot::two_at_random(crate::rate_limit::shards_for(limit));
        Arc::new(Self {
            auth,
            tenant,
            key_hash,
            expires_at,
            standing: OnceCell::new(),
            state: Mutex::new(State { key_checked, outcome: Outcome::Open, look_taken: false }),
            slots,
        })
    }

    /// The shards to look at: two, or the one.
    fn slots(&self) -> &[Slot] {
        if self.slots[0] == self.slots[1] { &self.slots[..1] } else { &self.slots }
    }

    /// The request's rate-limit standing: looked at once, with one strongly consistent
    /// read of the tenant's standing (its shard 0 and the two shards the request may be
    /// counted in, [`crate::rate_limit::look`]). The request's
    /// first read, when it is a GetItem or a small batch read sent before the edge asks,
    /// carries that read in its own call ([`Gate::carry`]); else whichever asks first reads it alone (the edge
    /// asks at once, beside the handler). Not read when this instance's last count of the
    /// window left no room. `None`: not limited, or the read failed (logged; the request
    /// goes through). The request is counted after its answer ([`Gate::count`]).
    pub async fn standing(&self) -> Option<Standing> {
        self.take_look();
        *self.standing.get_or_init(|| self.look_alone()).await
    }

    /// Takes the look on; `false` when it was already taken.
    fn take_look(&self) -> bool {
        self.state.lock().is_ok_and(|mut state| !std::mem::replace(&mut state.look_taken, true))
    }

    /// The standing, read alone when a read is needed.
    async fn look_alone(&self) -> Option<Standing> {
        let now = match self.needs_look() {
            Ok(now) => now,
            Err(known) => return known,
        };
        let (auth, slots) = (&self.auth, self.slots());
        let looked =
            crate::rate_limit::look(&auth.client, &auth.tables, &self.tenant, auth.rate_limit, now, slots).await;
        self.noted(looked)
    }

    /// The time of a look when one must read the standing, or the standing known
    /// without a read: none with no limit; used up when this instance's last count of
    /// the window left no room (the window is only ever filled, so every later request
    /// of it is over the limit).
    fn needs_look(&self) -> Result<i64, Option<Standing>> {
        if self.auth.rate_limit == 0 {
            return Err(None);
        }
        let now = chrono::Utc::now().timestamp();
        if self.auth.known.room(&self.tenant, now.div_euclid(60)) == Some(0) {
            return Err(Some(Standing::used_up(self.auth.rate_limit, now)));
        }
        Ok(now)
    }

    /// What a look found, noted for the instance's next requests.
    fn noted(&self, looked: Result<Standing, StoreError>) -> Option<Standing> {
        match looked {
            // A window found full stays full: the instance answers the tenant's further
            // requests in it 429 with no read.
            Ok(standing) if standing.exceeded => {
                self.auth.known.note_count(&self.tenant, standing.window, 0, standing.keys_epoch);
                self.auth.known.note_limit(&self.tenant, standing.limit);
                Some(standing)
            }
            Ok(standing) => {
                self.auth.known.note_epoch(&self.tenant, standing.keys_epoch);
                self.auth.known.note_limit(&self.tenant, standing.limit);
                Some(standing)
            }
            Err(error) => {
                tracing::warn!(error = %error, "rate limit not read");
                None
            }
        }
    }

    /// The request's read of the items at `keys` in `table` (one by GetItem, or a few by
    /// BatchGetItem), carrying the look at the standing in the same call (one
    /// BatchGetItem, [`crate::dynamo::get_batch`]) when the look is still to be taken
    /// and needs a read: a warm GET by id makes one call in all. `None`: read the items
    /// alone. The read answers `None` when that call failed (the look counts as failed,
    /// logged, and the request goes through, as when a look alone fails; the caller
    /// reads its items with its own call, so they do not fail with it) or when the edge
    /// read the standing first.
    fn carry<'a>(&'a self, table: &'a str, keys: &'a [crate::dynamo::Item]) -> Option<crate::dynamo::Read<'a>> {
        let standings = self.auth.tables.name(Table::RateLimits);
        let fits = (1..=crate::dynamo::MAX_CARRYING_KEYS).contains(&keys.len());
        if table == standings || !fits || self.standing.initialized() {
            return None;
        }
        let now = self.needs_look().ok()?;
        if !self.take_look() {
            return None;
        }
        Some(Box::pin(async move {
            let mut own = None;
            let looked = self.standing.get_or_init(|| async {
                let both = std::collections::HashMap::from([
                    (table.to_owned(), keys.to_vec()),
                    (standings.to_owned(), crate::rate_limit::read_keys(&self.tenant, self.slots())),
                ]);
                let read = crate::dynamo::get_batch(&self.auth.client, both).await;
                self.noted(read.map(|mut found| {
                    own = Some(found.remove(table).unwrap_or_default());
                    let standing = found.remove(standings).unwrap_or_default();
                    crate::rate_limit::standing_among(&standing, self.slots(), self.auth.rate_limit, now)
                }))
            });
            looked.await;
            own
        }))
    }

    /// The work that counts the request in its tenant's window, to run once it has been
    /// answered ([`crate::lambda::AfterAnswer`]): one conditional update (two side by
    /// side at a warm instance's first count of a minute). What it finds is noted for
    /// the instance's next requests: the room left in the window (none: they are
    /// answered 429 without a read) and the keys epoch. `None` with no limit.
    #[must_use]
    pub fn count(&self) -> Option<impl Future<Output = ()> + Send + 'static> {
        if self.auth.rate_limit == 0 {
            return None;
        }
        let (auth, tenant) = (self.auth.clone(), self.tenant.clone());
        // The shard and the limit (the plan's) the look found; else the first shard.
        let looked = self.standing.get().copied().flatten();
        let (slot, limit) = looked.map_or((self.slots[0], self.auth.rate_limit), |s| (s.slot, s.limit));
        Some(async move {
            let now = chrono::Utc::now().timestamp();
            let last = auth.known.last_counted(&tenant);
            let count = crate::rate_limit::count(&auth.client, &auth.tables, &tenant, (limit, slot), now, last);
            match tokio::time::timeout(COUNT_BUDGET, count).await {
                Ok(Ok(standing)) => {
                    let left = if standing.exceeded { 0 } else { standing.remaining };
                    auth.known.note_count(&tenant, standing.window, left, standing.keys_epoch);
                    auth.known.note_limit(&tenant, standing.limit);
                }
                Ok(Err(error)) => crate::metering::uncounted(&error.to_string()),
                Err(_) => crate::metering::uncounted("not counted within its budget"),
            }
        })
    }

    /// Where the request's writes stand.
    #[must_use]
    pub fn outcome(&self) -> Outcome {
        self.state.lock().map_or(Outcome::Open, |state| state.outcome)
    }

    fn refuse(&self, refusal: Refusal) -> StoreError {
        if let Ok(mut state) = self.state.lock() {
            state.outcome = Outcome::Refused(refusal);
        }
        StoreError::Refused(refusal)
    }

    /// Lets a transaction of `items` through, or refuses it: waits for the look at the
    /// rate-limit standing (see [`Gate::must_wait_for_look`]), and gives the key's
    /// condition to add when the key is not yet proven live (reading the key now when
    /// the transaction has no room for it, or writes the key's own item).
    ///
    /// # Errors
    /// [`StoreError::Refused`]; the key read's [`StoreError`].
    pub async fn admit(&self, items: &[TransactWriteItem]) -> Result<Option<TransactWriteItem>, StoreError> {
        self.within_limit().await?;
        if self.key_checked() {
            return Ok(None);
        }
        if self.expires_at.is_some_and(|at| chrono::Utc::now() >= at) {
            return Err(self.refuse(Refusal::KeyRevoked));
        }
        // The markers refuse a key revoked from now on. One revoked before without them
        // (by an earlier version) moved the keys epoch: unless the look finds the epoch
        // at which this key was proven live, the key is read now instead.
        let proven = match self.auth.known.live_at(&self.key_hash) {
            Some(at) => self.standing().await.and_then(|standing| standing.keys_epoch) == Some(at),
            None => false,
        };
        if !proven {
            self.read_key().await?;
            return Ok(None);
        }
        let check = self.key_condition()?;
        // A transaction that writes the key's own item or its markers (revoking the key
        // it is sent with) cannot also check one: DynamoDB takes one operation per item.
        if crate::dynamo::has_room_for(items, &check) && !items.iter().any(|item| self.is_key_item(item)) {
            return Ok(Some(check));
        }
        self.read_key().await?;
        Ok(None)
    }

    /// Lets an effect outside DynamoDB go ahead: within the limit, and the key read
    /// live now unless already proven.
    ///
    /// # Errors
    /// [`StoreError::Refused`]; the key read's [`StoreError`].
    pub async fn hold(&self) -> Result<(), StoreError> {
        self.within_limit().await?;
        if !self.key_checked() {
            self.read_key().await?;
        }
        Ok(())
    }

    /// Refuses what follows once refused, and when the tenant is over its limit.
    async fn within_limit(&self) -> Result<(), StoreError> {
        if let Outcome::Refused(refusal) = self.outcome() {
            return Err(StoreError::Refused(refusal));
        }
        if self.must_wait_for_look()
            && let Some(standing) = self.standing().await
            && standing.exceeded
            && self.outcome() == Outcome::Open
        {
            return Err(self.refuse(Refusal::RateLimited { retry_after: standing.reset }));
        }
        Ok(())
    }

    fn key_checked(&self) -> bool {
        self.state.lock().map_or(true, |state| state.key_checked)
    }

    /// Reads the key's item now (strongly consistent): live and the tenant's, or refused.
    async fn read_key(&self) -> Result<(), StoreError> {
        match crate::auth::grant_of(&self.auth.client, &self.auth.tables, &self.key_hash).await {
            Ok(live) if live.tenant == self.tenant => {
                if let Ok(mut state) = self.state.lock() {
                    state.key_checked = true;
                }
                Ok(())
            }
            Ok(_) | Err(crate::ApiError::Unauthorized) => Err(self.refuse(Refusal::KeyRevoked)),
            Err(_) => Err(StoreError::Unavailable("the API key could not be read".into())),
        }
    }

    /// Whether a write must wait for the request's look at the rate-limit standing:
    /// unless this instance's last count in the current window left the tenant room. (An
    /// instance serves one request at a time and counts it before the next, so a tenant
    /// overshoots its limit by at most one write per instance that had not yet learnt
    /// the window was used up.)
    fn must_wait_for_look(&self) -> bool {
        if self.auth.rate_limit == 0 {
            return false;
        }
        if self.standing.initialized() {
            return true;
        }
        let window = chrono::Utc::now().timestamp().div_euclid(60);
        self.auth.known.room(&self.tenant, window).is_none_or(|left| left == 0)
    }

    /// Records a transaction's end: committed (the key is proven live from now on), or
    /// cancelled because the key's condition (when it carried it) did not hold.
    pub fn settle(&self, committed: bool, key_failed: bool) -> Option<StoreError> {
        if key_failed {
            return Some(self.refuse(Refusal::KeyRevoked));
        }
        if committed && let Ok(mut state) = self.state.lock() {
            state.key_checked = true;
            state.outcome = Outcome::Written;
        }
        None
    }

    /// Whether `operation` is on the request's key's item or one of its revocation
    /// markers.
    fn is_key_item(&self, operation: &TransactWriteItem) -> bool {
        let table = self.auth.tables.name(Table::ApiKeys);
        let on = |name: &str, key: &crate::dynamo::Item| {
            let hash = key.get("key_hash").and_then(|v| v.as_s().ok());
            let rest = hash.and_then(|hash| hash.strip_prefix(self.key_hash.as_str()));
            name == table && rest.is_some_and(|rest| rest.is_empty() || rest.starts_with("#revoked#"))
        };
        operation.put().is_some_and(|o| on(o.table_name(), o.item()))
            || operation.update().is_some_and(|o| on(o.table_name(), o.key()))
            || operation.delete().is_some_and(|o| on(o.table_name(), o.key()))
            || operation.condition_check().is_some_and(|o| on(o.table_name(), o.key()))
    }

    /// The condition that the request's key is not revoked: one of its revocation
    /// markers, at random, does not exist. (Its tenant and expiry never change once
    /// issued: the edge took both from the key's item, and checks the expiry again now,
    /// [`Gate::admit`].)
    fn key_condition(&self) -> Result<TransactWriteItem, StoreError> {
        let marker = getrandom::u32().map_or(0, |x| u8::try_from(x % u32::from(REVOCATION_MARKERS)).unwrap_or(0));
        let check = ConditionCheck::builder()
            .table_name(self.auth.tables.name(Table::ApiKeys))
            .key("key_hash", s(crate::auth::revocation_marker(&self.key_hash, marker)))
            .condition_expression("attribute_not_exists(key_hash)")
            .build();
        Ok(TransactWriteItem::builder().condition_check(crate::dynamo::built(check)?).build())
    }
}

impl crate::dynamo::WriteGate for Gate {
    fn admit<'a>(
        &'a self,
        items: &'a [TransactWriteItem],
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<TransactWriteItem>, StoreError>> + Send + 'a>> {
        Box::pin(async move { Ok(Gate::admit(self, items).await?.into_iter().collect()) })
    }

    fn settle(&self, committed: bool, failed: Option<usize>) -> Option<StoreError> {
        Gate::settle(self, committed, failed == Some(0))
    }

    fn hold(&self) -> std::pin::Pin<Box<dyn Future<Output = Result<(), StoreError>> + Send + '_>> {
        Box::pin(Gate::hold(self))
    }

    fn carry<'a>(&'a self, table: &'a str, keys: &'a [crate::dynamo::Item]) -> Option<crate::dynamo::Read<'a>> {
        Gate::carry(self, table, keys)
    }
}

/// Runs `future` (a request's handler) behind `gate`.
pub async fn scope<F: Future>(gate: Arc<Gate>, future: F) -> F::Output {
    crate::dynamo::gated(gate, future).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dynamo::{MAX_TRANSACTION_BYTES, MAX_TRANSACTION_ITEMS, Tables, fits, has_room_for, operation_size};

    fn gate() -> Arc<Gate> {
        let config = aws_sdk_dynamodb::Config::builder()
            .behavior_version(aws_sdk_dynamodb::config::BehaviorVersion::latest())
            .region(aws_sdk_dynamodb::config::Region::new("us-east-1"))
            .build();
        let auth = AuthState {
            client: aws_sdk_dynamodb::Client::from_conf(config),
            tables: Tables::new("t-"),
            rate_limit: 0,
            origin_secret: None,
            known: crate::auth::KnownKeys::default(),
        };
        let tenant = crate::auth::trusted::tenant(
            &crate::ids::TenantKey::parse("ten_0193a6f21c2b7d3e8f000123456789ab").expect("id"),
        );
        Gate::new(auth, tenant, ("ab".repeat(32), None), false)
    }

    /// The key's condition is added only while the transaction stays within 100
    /// operations and 4 MB with it: computed from its real size, not assumed.
    #[test]
    fn the_key_condition_is_added_only_within_the_transaction_limits() {
        let check = gate().key_condition().expect("built");
        // The check's key, as DynamoDB counts a condition check: `key_hash` and a marker
        // of the key (64 hex and `#revoked#NN`).
        let size = operation_size(&check);
        assert_eq!(size, "key_hash".len() + 64 + "#revoked#00".len());
        assert!(fits(MAX_TRANSACTION_ITEMS - 1, MAX_TRANSACTION_BYTES - size, size));
        assert!(!fits(MAX_TRANSACTION_ITEMS, 0, size), "101 operations");
        assert!(!fits(1, MAX_TRANSACTION_BYTES - size + 1, size), "over 4 MB");
        let others = vec![check.clone(); MAX_TRANSACTION_ITEMS];
        assert!(has_room_for(&others[1..], &check), "the 100th operation");
        assert!(!has_room_for(&others, &check), "a 101st operation");
    }

    #[tokio::test]
    async fn a_refusal_sticks_and_a_commit_proves_the_key() {
        let refused = gate();
        assert!(matches!(refused.settle(false, true), Some(StoreError::Refused(Refusal::KeyRevoked))));
        assert_eq!(refused.outcome(), Outcome::Refused(Refusal::KeyRevoked));
        assert!(matches!(refused.admit(&[]).await, Err(StoreError::Refused(Refusal::KeyRevoked))));

        let open = gate();
        let on_key = open.key_condition().expect("built");
        assert!(open.is_key_item(&on_key), "a transaction on the key's own item is told apart");
        assert!(open.settle(true, false).is_none());
        assert_eq!(open.outcome(), Outcome::Written);
        assert!(open.admit(&[]).await.expect("admitted").is_none(), "proven by the commit");
    }
}
