//! What a request's first write must pass, checked before the write is sent so that a
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
//!   request (and has not expired since), lets the write go as it is if the look found
//!   the tenant's keys epoch at which this instance proved the key live (every
//!   revocation moves the epoch), and reads the key first otherwise. The transaction
//!   carries nothing of the key's: no item of a key is written or checked by its
//!   writes. A key revoked once the look has read the epoch may still see the request
//!   it was serving commit (the request was authenticated before the revocation); every
//!   request after is refused.
//!
//! An effect outside DynamoDB (a Stripe call that creates something) is made only with
//! the key read live during the request: [`crate::dynamo::before_effect`] passes the
//! limit and reads the key first. Writes outside a gate (the admin command line) are
//! not touched.

use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::types::TransactWriteItem;
use tokio::sync::OnceCell;

use crate::TenantId;
use crate::auth::AuthState;
use crate::dynamo::{StoreError, Table};
use crate::rate_limit::{Slot, Standing};

pub use crate::dynamo::Refusal;

/// Where a request's writes stand.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing was written through the gate.
    Open,
    /// A write committed through the gate: the key was proven live for the request and
    /// the tenant within its limit.
    Written,
    /// A write was refused, and nothing was written through the gate.
    Refused(Refusal),
}

#[derive(Debug)]
struct State {
    /// Whether the key's item was read live for this request.
    key_checked: bool,
    outcome: Outcome,
    /// Whether the look at the standing was taken on: by the request's first read, to
    /// carry it ([`Gate::carry`]), or by the edge, to read it alone.
    look_taken: bool,
    /// The window of the instance's token the request took, if it took one: it was
    /// counted by an earlier count's lease ([`crate::rate_limit::lease`]), so it is
    /// within the limit and its count writes nothing.
    token: Option<i64>,
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
        let window = chrono::Utc::now().timestamp().div_euclid(60);
        let token = if auth.rate_limit > 0 { auth.known.take_token(&tenant, window) } else { None };
        Arc::new(Self {
            auth,
            tenant,
            key_hash,
            expires_at,
            standing: OnceCell::new(),
            state: Mutex::new(State { key_checked, outcome: Outcome::Open, look_taken: false, token }),
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

    /// The window of the token the request took, if it took one (and the look did not
    /// find it of an ended window).
    fn token(&self) -> Option<i64> {
        self.state.lock().ok().and_then(|state| state.token)
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
        if self.token().is_none() && self.auth.known.room(&self.tenant, now.div_euclid(60)) == Some(0) {
            return Err(Some(Standing::used_up(self.auth.rate_limit, now)));
        }
        Ok(now)
    }

    /// What a look found, noted for the instance's next requests. A request with a
    /// token is within the limit whatever the shards say: it was counted already.
    fn noted(&self, looked: Result<Standing, StoreError>) -> Option<Standing> {
        let looked = looked.map(|mut standing| {
            match self.token() {
                // A clock ahead of this instance's started a later window, which the
                // token's does not count in: the request is counted after all, and the
                // instance's tokens of the ended window go.
                Some(window) if standing.window > window => {
                    if let Ok(mut state) = self.state.lock() {
                        state.token = None;
                    }
                    self.auth.known.drop_tokens_before(&self.tenant, standing.window);
                }
                Some(_) if standing.exceeded => {
                    self.auth.known.note_count(&self.tenant, standing.window, 0, standing.keys_epoch);
                    standing.exceeded = false;
                }
                _ => {}
            }
            standing
        });
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
    /// side at a warm instance's first count of a minute), which takes a lease when the
    /// tenant's count is sharded ([`crate::rate_limit::lease`]). What it finds is noted
    /// for the instance's next requests: the lease's tokens, the room left in the window
    /// (none: they are answered 429 without a read) and the keys epoch. `None` with no
    /// limit, and for a request that took a token (counted already).
    #[must_use]
    pub fn count(&self) -> Option<impl Future<Output = ()> + Send + 'static> {
        if self.auth.rate_limit == 0 || self.token().is_some() {
            return None;
        }
        let (auth, tenant) = (self.auth.clone(), self.tenant.clone());
        // The shard, the limit (the plan's) and the room the look found; else the first
        // shard, counting the request alone.
        let looked = self.standing.get().copied().flatten();
        let (slot, limit, lease) = looked.map_or((self.slots[0], self.auth.rate_limit, 1), |s| {
            (s.slot, s.limit, crate::rate_limit::lease(s.limit, s.slot, s.shard_left()))
        });
        Some(async move {
            let now = chrono::Utc::now().timestamp();
            let last = auth.known.last_counted(&tenant);
            let count =
                crate::rate_limit::count_lease(&auth.client, &auth.tables, &tenant, (limit, slot, lease), now, last);
            match tokio::time::timeout(COUNT_BUDGET, count).await {
                Ok(Ok(crate::rate_limit::Leased { standing, tokens })) => {
                    let left = if standing.exceeded { 0 } else { standing.remaining };
                    auth.known.note_count(&tenant, standing.window, left, standing.keys_epoch);
                    auth.known.note_limit(&tenant, standing.limit);
                    auth.known.note_tokens(&tenant, standing.window, tokens);
                }
                Ok(Err(error)) => crate::metering::uncounted(&error.to_string()),
                Err(_) => crate::metering::uncounted("not counted within its budget"),
            }
        })
    }

    /// Gives the request's token back to the instance (the request was refused, and a
    /// refused request is not counted).
    pub fn give_back(&self) {
        if let Some(window) = self.token() {
            self.auth.known.note_tokens(&self.tenant, window, 1);
        }
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

    /// Lets a transaction through, or refuses it: waits for the look at the rate-limit
    /// standing (see [`Gate::must_wait_for_look`]), and proves the key live unless it
    /// was read for this request: by the keys epoch the look found, when it is the one
    /// at which this instance proved the key live, else by reading the key now.
    ///
    /// # Errors
    /// [`StoreError::Refused`]; the key read's [`StoreError`].
    pub async fn admit(&self) -> Result<(), StoreError> {
        self.within_limit().await?;
        if self.key_checked() {
            return Ok(());
        }
        if self.expires_at.is_some_and(|at| chrono::Utc::now() >= at) {
            return Err(self.refuse(Refusal::KeyRevoked));
        }
        let proven = match self.auth.known.live_at(&self.key_hash) {
            Some(at) => self.standing().await.and_then(|standing| standing.keys_epoch) == Some(at),
            None => false,
        };
        if !proven {
            self.read_key().await?;
        }
        Ok(())
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
        if self.auth.rate_limit == 0 || self.token().is_some() {
            return false;
        }
        if self.standing.initialized() {
            return true;
        }
        let window = chrono::Utc::now().timestamp().div_euclid(60);
        self.auth.known.room(&self.tenant, window).is_none_or(|left| left == 0)
    }

    /// Records a transaction's end: once one committed, the request has written.
    pub fn settle(&self, committed: bool) {
        if committed && let Ok(mut state) = self.state.lock() {
            state.outcome = Outcome::Written;
        }
    }
}

impl crate::dynamo::WriteGate for Gate {
    fn admit<'a>(
        &'a self,
        items: &'a [TransactWriteItem],
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<TransactWriteItem>, StoreError>> + Send + 'a>> {
        let _ = items;
        Box::pin(async move {
            Gate::admit(self).await?;
            Ok(Vec::new())
        })
    }

    fn settle(&self, committed: bool, _failed: Option<usize>) -> Option<StoreError> {
        Gate::settle(self, committed);
        None
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
    use crate::dynamo::Tables;

    fn gate(key_checked: bool) -> Arc<Gate> {
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
        Gate::new(auth, tenant, ("ab".repeat(32), None), key_checked)
    }

    #[tokio::test]
    async fn a_refusal_sticks_and_a_commit_is_a_write() {
        let refused = gate(true);
        let _ = refused.refuse(Refusal::KeyRevoked);
        assert_eq!(refused.outcome(), Outcome::Refused(Refusal::KeyRevoked));
        assert!(matches!(refused.admit().await, Err(StoreError::Refused(Refusal::KeyRevoked))));

        let open = gate(true);
        assert_eq!(open.outcome(), Outcome::Open);
        open.settle(false);
        assert_eq!(open.outcome(), Outcome::Open, "a cancelled transaction wrote nothing");
        open.settle(true);
        assert_eq!(open.outcome(), Outcome::Written);
    }
}
