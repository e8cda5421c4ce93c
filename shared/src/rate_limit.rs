//! The per-tenant request rate limit: a fixed window per minute, shared by every
//! function through one DynamoDB item per tenant, its *standing* (table `rate-limits`,
//! sort key `window` = [`STANDING`]): the minute it counts (`counted_window`), the
//! requests counted in it (`requests`), the token of the count that started that minute
//! (`started_by`) and the tenant's keys epoch (`keys_epoch`).
//!
//! `RATE_LIMIT_PER_MINUTE` (default 1200; 0 turns it off), or the tenant's plan's limit
//! when higher: the standing's `per_minute`, written with its subscription
//! ([`plan_limit`]), so that it costs no read. Every authenticated response
//! carries `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` (seconds
//! until the window resets); beyond the limit the answer is 429 `rate_limited` with
//! `Retry-After`. Requests refused with 401 or 429 are not counted.
//!
//! A request *looks* at the standing beside its own work ([`look`]: one strongly
//! consistent GetItem), which tells it whether the window has room and what the tenant's
//! keys epoch is, and is *counted* after its answer has been sent ([`count`]: one
//! conditional `UpdateItem`, add one if the item counts this minute; a warm instance's
//! first count of a new minute sends the start of the minute beside it, and exactly one
//! of the two applies). So a tenant may overshoot its limit by the requests answered and
//! not yet counted: at most one per function instance, since an instance finishes its
//! count before it takes its next request ([`crate::lambda`]).
//!
//! Every revocation of a tenant's key adds one to the keys epoch in the revocation's own
//! transaction ([`keys_changed`]), so the look that a warm request makes anyway also
//! tells it whether any key of its tenant was revoked since its instance last saw its
//! key live ([`crate::http`]), with no read of the key.
//!
//! **Shards.** A limit above [`PER_SHARD`] a minute is counted in up to [`SHARDS`]
//! standing items in as many partitions (shard 0 is the item above; shard *k* has
//! `tenant_id` = `ten_…#kk`), so that no item takes more than [`PER_SHARD`] counts a
//! minute: shard *k* of *n* takes its share of the limit ([`Slot::quota`]). A request
//! looks at two shards chosen at random and is counted in the one with more room (the
//! power of two choices keeps the shards within a few counts of each other), so the
//! tenant is refused at about its whole limit. The keys epoch and the plan's limit stay
//! on shard 0 alone, which every look reads too (three items in one BatchGetItem); with
//! a limit of [`PER_SHARD`] or less there is one shard, counted exactly as before.
//!
//! **Leases.** With shards, a count takes a *lease* for its instance ([`lease`]): it adds
//! a few requests at once (at most 1/[`LEASE_PARTS`] of the shard's share, and fewer as
//! the shard fills), one for the request just answered and the rest *tokens* the
//! instance spends on the tenant's next requests of the window with no count at all
//! ([`Leased::tokens`], [`crate::auth::KnownKeys::take_token`]). A tenant at 60,000 a
//! minute writes its standing once every 58 requests of an instance, not on each. Tokens
//! are requests counted before they are served: a window ends with at most a lease's
//! worth unspent per instance, so a tenant may be refused that much short of its limit
//! (never past it by them). A limit with one shard counts each request, exactly.
//!
//! Items of the earlier model (one per tenant and minute, `window` = the minute) are no
//! longer written; their `expires_at` lets DynamoDB's TTL remove them.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ReturnValue, ReturnValuesOnConditionCheckFailure, TransactWriteItem, Update,
};
use http::{HeaderMap, HeaderValue};

use crate::TenantId;
use crate::dynamo::{StoreError, Table, Tables, built, classify, n, s};

/// The default requests per tenant and minute.
pub const DEFAULT_PER_MINUTE: u32 = 1200;

/// Requests per tenant and minute from `RATE_LIMIT_PER_MINUTE` (0: no limit).
#[must_use]
pub fn per_minute_from_env() -> u32 {
    std::env::var("RATE_LIMIT_PER_MINUTE").ok().and_then(|v| v.parse().ok()).unwrap_or(DEFAULT_PER_MINUTE)
}

/// Requests a minute one shard of a tenant's standing takes at most.
pub const PER_SHARD: u32 = 3_750;

/// The most shards a tenant's standing is counted in.
pub const SHARDS: u8 = 16;

/// How many shards a tenant's standing is counted in at `limit` a minute.
#[must_use]
pub fn shards_for(limit: u32) -> u8 {
    u8::try_from(limit.div_ceil(PER_SHARD).clamp(1, u32::from(SHARDS))).unwrap_or(SHARDS)
}

/// A lease is at most this part of a shard's share of the limit.
pub const LEASE_PARTS: u32 = 64;

/// A lease shrinks as its shard fills: at most this part of what the shard has left.
pub const LEASE_OF_LEFT: u32 = 16;

/// The requests a count in `slot` takes at once at `limit` a minute, when its shard has
/// `left` requests left in the window (the look's, [`Standing::shard_left`]): 1 with one
/// shard, or in a slot of another limit's shards; else 1/[`LEASE_PARTS`] of the shard's
/// share, and no more than 1/[`LEASE_OF_LEFT`] of what is left, so that the unspent
/// tokens a window ends with stay small beside the limit; at least 1.
#[must_use]
pub fn lease(limit: u32, slot: Slot, left: u32) -> u32 {
    // One shard, or a slot chosen at another limit (an instance that had not yet seen the
    // tenant's new plan): its share is not the one every other instance counts against.
    if slot.shards <= 1 || slot.shards != shards_for(limit) {
        return 1;
    }
    (slot.quota(limit) / LEASE_PARTS).min(left / LEASE_OF_LEFT).max(1)
}

/// Where a request is counted: shard `shard` of the `shards` the tenant's count is
/// spread over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// The shard, below `shards`.
    pub shard: u8,
    /// How many shards the count is spread over.
    pub shards: u8,
}

impl Slot {
    /// The one shard of a limit of [`PER_SHARD`] or less.
    pub const FIRST: Self = Self { shard: 0, shards: 1 };

    /// This shard's share of `limit`: the limit divided by the shards, the remainder to
    /// the first ones, so that the shares add up to the limit.
    #[must_use]
    pub fn quota(self, limit: u32) -> u32 {
        let shards = u32::from(self.shards.max(1));
        limit / shards + u32::from(u32::from(self.shard) < limit % shards)
    }

    /// Two slots at random of a count spread over `shards` (the same one twice when
    /// there is one).
    #[must_use]
    pub fn two_at_random(shards: u8) -> [Self; 2] {
        let shards = shards.max(1);
        let x = getrandom::u32().unwrap_or(0);
        let pick = |bits: u32| u8::try_from(bits % u32::from(shards)).unwrap_or(0);
        let first = pick(x & 0xffff);
        let mut second = pick(x >> 16);
        if shards > 1 && second == first {
            second = (first + 1) % shards;
        }
        [Self { shard: first, shards }, Self { shard: second, shards }]
    }
}

/// Where a tenant stands in the current window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    /// The limit.
    pub limit: u32,
    /// Requests left in this window.
    pub remaining: u32,
    /// Seconds until the window resets.
    pub reset: u64,
    /// Whether this request is over the limit.
    pub exceeded: bool,
    /// The window (Unix minute) the request is counted in.
    pub window: i64,
    /// The tenant's keys epoch when the standing was read or counted: it moves on with
    /// every revocation of one of the tenant's keys ([`keys_changed`]). `None`: not read
    /// from DynamoDB ([`Standing::used_up`]).
    pub keys_epoch: Option<u64>,
    /// The shard the request is counted in.
    pub slot: Slot,
}

impl Standing {
    /// The standing of a request in window `window` (of `now`) that an earlier count
    /// already used up: over the limit, with no DynamoDB call. Requests beyond the limit
    /// are not counted, so a flood of them does not write the tenant's item.
    #[must_use]
    pub fn used_up(limit: u32, now: i64) -> Self {
        let window = now.div_euclid(60);
        let slot = Slot::FIRST;
        Self { limit, remaining: 0, reset: reset(window, now), exceeded: true, window, keys_epoch: None, slot }
    }

    /// The standing of a request in `window` (of `now`) that is the `used`-th of its
    /// shard `slot`, at keys epoch `keys_epoch`. With several shards, `remaining` is what
    /// this shard has left times the shards: an estimate of the tenant's.
    fn with(limit: u32, slot: Slot, window: i64, now: i64, used: u64, keys_epoch: u64) -> Self {
        let quota = u64::from(slot.quota(limit));
        let left = quota.saturating_sub(used) * u64::from(slot.shards.max(1));
        Self {
            limit,
            remaining: u32::try_from(left.min(u64::from(limit))).unwrap_or(0),
            reset: reset(window, now),
            exceeded: used > quota,
            window,
            keys_epoch: Some(keys_epoch),
            slot,
        }
    }

    /// What the shard the request is counted in has left once it is (the tenant's
    /// `remaining` is this times the shards).
    #[must_use]
    pub fn shard_left(&self) -> u32 {
        self.remaining / u32::from(self.slot.shards.max(1))
    }

    /// Adds the `X-RateLimit-*` headers.
    pub fn write_headers(&self, headers: &mut HeaderMap) {
        headers.insert("x-ratelimit-limit", HeaderValue::from(self.limit));
        headers.insert("x-ratelimit-remaining", HeaderValue::from(self.remaining));
        headers.insert("x-ratelimit-reset", HeaderValue::from(self.reset));
    }
}

/// The sort key of a tenant's standing item. No window counted is minute 0 of 1970.
pub const STANDING: i64 = 0;

/// What one conditional update of the standing item found.
enum Counted {
    /// It counted: the item as it is now.
    In(std::collections::HashMap<String, AttributeValue>),
    /// The item counts another window (`None`: no window yet).
    Elsewhere(Option<i64>),
}

fn number<T: std::str::FromStr>(item: &std::collections::HashMap<String, AttributeValue>, name: &str) -> Option<T> {
    item.get(name).and_then(|v| v.as_n().ok()).and_then(|v| v.parse().ok())
}

/// Where `tenant` stands for one more request at `now` (Unix seconds), by one strongly
/// consistent read of the standing shards `slots` (one or two, [`Slot::two_at_random`]):
/// the requests counted in the current window (or in a later one a clock ahead of ours
/// started) in the shard with more room, which the request is then counted in, and the
/// keys epoch. The request is not counted by this ([`count`] does, after the answer):
/// `remaining` is what the window will have left once it is, unless requests in flight
/// elsewhere are counted first.
///
/// # Errors
/// The read's [`StoreError`].
pub async fn look(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    limit: u32,
    now: i64,
    slots: &[Slot],
) -> Result<Standing, StoreError> {
    let table = tables.name(Table::RateLimits);
    // One shard: one GetItem; else one BatchGetItem with shard 0.
    if let [Slot { shard: 0, .. }] = slots {
        let read = client.get_item().table_name(table).set_key(Some(standing_key(tenant, 0)));
        let item = read.consistent_read(true).send().await.map_err(classify)?.item.unwrap_or_default();
        return Ok(standing_among(&[item], slots, limit, now));
    }
    let keys = read_keys(tenant, slots);
    let found = crate::dynamo::get_batch(client, std::collections::HashMap::from([(table.to_owned(), keys)])).await?;
    Ok(standing_among(found.get(table).map_or(&[][..], Vec::as_slice), slots, limit, now))
}

/// The standing items a look at `slots` reads: shard 0 (the keys epoch and the plan's
/// limit) and each slot's, once each.
#[must_use]
pub fn read_keys(tenant: &TenantId, slots: &[Slot]) -> Vec<std::collections::HashMap<String, AttributeValue>> {
    keys_to_read(tenant.as_str(), slots)
}

fn keys_to_read(tenant: &str, slots: &[Slot]) -> Vec<std::collections::HashMap<String, AttributeValue>> {
    let mut shards = vec![0];
    for slot in slots {
        if !shards.contains(&slot.shard) {
            shards.push(slot.shard);
        }
    }
    shards.into_iter().map(|shard| key_of(tenant, shard)).collect()
}

/// The key of shard `shard` of `tenant`'s standing (read by [`look`], or with a
/// request's own first read in one call, [`crate::gate`]). Shard 0 is the standing of a
/// limit with one shard.
#[must_use]
pub fn standing_key(tenant: &TenantId, shard: u8) -> std::collections::HashMap<String, AttributeValue> {
    key_of(tenant.as_str(), shard)
}

fn key_of(tenant: &str, shard: u8) -> std::collections::HashMap<String, AttributeValue> {
    let partition = if shard == 0 { tenant.to_owned() } else { format!("{tenant}#{shard:02}") };
    std::collections::HashMap::from([("tenant_id".to_owned(), s(partition)), ("window".to_owned(), n(STANDING))])
}

/// The shard of a standing item (from its key).
fn shard_of(item: &std::collections::HashMap<String, AttributeValue>) -> u8 {
    let partition = item.get("tenant_id").and_then(|v| v.as_s().ok()).map_or("", String::as_str);
    partition.rsplit_once('#').and_then(|(_, shard)| shard.parse().ok()).unwrap_or(0)
}

/// What the standing items `items` (those of shard 0 and of `slots` that exist) say of
/// one more request at `now`: the standing in the slot with the most room (the first on
/// a tie), with the keys epoch and the plan's limit of shard 0.
#[must_use]
pub fn standing_among(
    items: &[std::collections::HashMap<String, AttributeValue>],
    slots: &[Slot],
    limit: u32,
    now: i64,
) -> Standing {
    let empty = std::collections::HashMap::new();
    let of = |shard: u8| items.iter().find(|item| shard_of(item) == shard).unwrap_or(&empty);
    let first = of(0);
    let limit = limit_of(first, limit);
    let mut best: Option<Standing> = None;
    for slot in slots {
        let standing = standing_in(of(slot.shard), *slot, limit, now);
        let room = |s: &Standing| (!s.exceeded, s.remaining);
        if best.as_ref().is_none_or(|b| room(&standing) > room(b)) {
            best = Some(standing);
        }
    }
    let mut best = best.unwrap_or_else(|| standing_in(first, Slot::FIRST, limit, now));
    best.keys_epoch = Some(number(first, "keys_epoch").unwrap_or(0));
    best
}

/// What the standing item `item` of `slot` (empty when there is none) says of one more
/// request at `now`, as [`look`] answers.
#[must_use]
pub fn standing_in(
    item: &std::collections::HashMap<String, AttributeValue>,
    slot: Slot,
    limit: u32,
    now: i64,
) -> Standing {
    let current = now.div_euclid(60);
    let (window, used) = match number::<i64>(item, "counted_window") {
        Some(stored) if stored >= current => (stored, number::<u64>(item, "requests").unwrap_or(0)),
        _ => (current, 0),
    };
    let epoch = number(item, "keys_epoch").unwrap_or(0);
    Standing::with(limit_of(item, limit), slot, window, now, used.saturating_add(1), epoch)
}

/// The limit of the tenant whose standing is `item`: its plan's (`per_minute`) when
/// higher than `default`. A plan never lowers the limit.
#[must_use]
pub fn limit_of(item: &std::collections::HashMap<String, AttributeValue>, default: u32) -> u32 {
    number::<u32>(item, "per_minute").map_or(default, |plan| plan.max(default))
}

/// The operation that, in the transaction storing `tenant`'s subscription, sets its
/// plan's limit on its standing's shard 0 (`Some`), or removes it when no subscription
/// is live.
///
/// # Errors
/// [`StoreError::Other`] if the operation cannot be built (a bug).
pub fn plan_limit(tables: &Tables, tenant: &str, per_minute: Option<u32>) -> Result<TransactWriteItem, StoreError> {
    let update = Update::builder().table_name(tables.name(Table::RateLimits)).set_key(Some(key_of(tenant, 0)));
    let update = match per_minute {
        Some(limit) => {
            update.update_expression("SET per_minute = :limit").expression_attribute_values(":limit", n(limit))
        }
        None => update.update_expression("REMOVE per_minute"),
    };
    Ok(TransactWriteItem::builder().update(built(update.build())?).build())
}

/// Counts this request in the tenant's current window (`now` in Unix seconds), in the
/// standing shard of `slot` (the one its look chose), against `limit` (the plan's, as
/// its look read it) unless the shard says the tenant's plan allows more. A clock
/// behind the one that started the stored window counts in the stored window.
/// `last_counted`: the window this instance last counted the tenant in, if it knows.
///
/// - The same window, or none known (a cold instance): the count adds to the stored
///   window, and starts this one if the item counts an earlier one (a second call, on the
///   connection the first one opened).
/// - An earlier window (a warm instance's first count of a new minute): the item may count
///   this window (another instance started it) or an earlier one. The add and the start
///   are sent side by side on the instance's open connections, and exactly one applies:
///   the start writes a token that the add's condition excludes, so an add that reaches
///   the item after its own start does not count the request twice. One round trip.
///
/// A cold instance does not send both: each call beside another needs a connection of
/// its own, and a new TLS connection costs more than the second call (docs/benchmarks.md, cold
/// starts).
///
/// # Errors
/// The update's [`StoreError`]; [`StoreError::Conflict`] when the window kept moving
/// under four attempts (a clock far ahead of the others).
pub async fn count(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    (limit, slot): (u32, Slot),
    now: i64,
    last_counted: Option<i64>,
) -> Result<Standing, StoreError> {
    let leased = count_lease(client, tables, tenant, (limit, slot, 1), now, last_counted).await?;
    Ok(leased.standing)
}

/// What a count with a lease found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Leased {
    /// The standing once counted.
    pub standing: Standing,
    /// The requests of the lease left for the instance's next requests in
    /// `standing.window`: counted within the shard's share, not yet served.
    pub tokens: u32,
}

/// The tokens a lease of `lease` requests leaves its instance when it brought its shard's
/// count to `requests` against the shard's `quota`: the lease's requests after the one
/// just answered, those within the share.
#[must_use]
pub fn tokens_of(lease: u32, requests: u64, quota: u32) -> u32 {
    let first = requests.saturating_sub(u64::from(lease)) + 1;
    let last = requests.min(u64::from(quota));
    u32::try_from(last.saturating_sub(first)).unwrap_or(0)
}

/// [`count`], adding `lease` requests at once ([`lease`]): the one answered and tokens for
/// the instance's next ones ([`Leased::tokens`]).
///
/// # Errors
/// As [`count`].
pub async fn count_lease(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    (limit, slot, lease): (u32, Slot, u32),
    now: i64,
    last_counted: Option<i64>,
) -> Result<Leased, StoreError> {
    let lease = lease.max(1);
    let mut window = now.div_euclid(60);
    let mut next = match last_counted {
        Some(last) if last < window => Next::Both,
        _ => Next::Add,
    };
    let token = uuid::Uuid::now_v7().to_string();
    let update = |window, step| update(client, tables, (tenant, slot.shard), (window, lease), step, &token);
    for _ in 0..4 {
        let counted = match next {
            Next::Add => update(window, Step::Add).await?,
            Next::Start => update(window, Step::Start).await?,
            Next::Both => match tokio::join!(update(window, Step::Add), update(window, Step::Start)) {
                (Ok(Counted::In(item)), _) | (_, Ok(Counted::In(item))) => Counted::In(item),
                (Ok(Counted::Elsewhere(added)), Ok(Counted::Elsewhere(started))) => {
                    Counted::Elsewhere(added.max(started))
                }
                (Err(error), _) | (_, Err(error)) => return Err(error),
            },
        };
        match counted {
            Counted::In(item) => {
                let used = number::<u64>(&item, "requests").unwrap_or(u64::from(lease));
                let epoch = number(&item, "keys_epoch").unwrap_or(0);
                let limit = limit_of(&item, limit);
                let mut standing = Standing::with(limit, slot, window, now, used, epoch);
                // Only shard 0 holds the keys epoch.
                if slot.shard != 0 {
                    standing.keys_epoch = None;
                }
                return Ok(Leased { standing, tokens: tokens_of(lease, used, slot.quota(limit)) });
            }
            // Stored: this window or a later one (a clock ahead of ours) counts this request.
            Counted::Elsewhere(Some(stored)) if stored >= window => (window, next) = (stored, Next::Add),
            // None yet, or an earlier one: this request starts the window.
            Counted::Elsewhere(_) => next = Next::Start,
        }
    }
    Err(StoreError::Conflict)
}

/// Seconds from `now` until `window` (a minute) ends, 1 to 60: a window started by a
/// clock ahead of ours is still said to end within a minute.
fn reset(window: i64, now: i64) -> u64 {
    u64::try_from(((window + 1) * 60 - now).clamp(1, 60)).unwrap_or(60)
}

/// What a count sends next.
#[derive(Clone, Copy)]
enum Next {
    Add,
    Start,
    Both,
}

/// How a count changes the standing item.
#[derive(Clone, Copy)]
enum Step {
    /// Add this request, if the item counts the window and this count did not start it.
    Add,
    /// Start the window with this request, if the item counts none or an earlier one.
    Start,
}

/// One conditional update of the tenant's standing item for `window`, counting `lease`
/// requests.
async fn update(
    client: &Client,
    tables: &Tables,
    (tenant, shard): (&TenantId, u8),
    (window, lease): (i64, u32),
    step: Step,
    token: &str,
) -> Result<Counted, StoreError> {
    let (update, condition) = match step {
        Step::Add => (
            "ADD requests :lease",
            "counted_window = :window AND (attribute_not_exists(started_by) OR started_by <> :token)",
        ),
        Step::Start => (
            "SET counted_window = :window, requests = :lease, started_by = :token",
            "attribute_not_exists(counted_window) OR counted_window < :window",
        ),
    };
    let sent = client
        .update_item()
        .table_name(tables.name(Table::RateLimits))
        .set_key(Some(standing_key(tenant, shard)))
        .update_expression(update)
        .condition_expression(condition)
        .expression_attribute_values(":lease", n(lease))
        .expression_attribute_values(":window", n(window))
        .expression_attribute_values(":token", s(token))
        .return_values(ReturnValue::AllNew)
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .send()
        .await;
    counted(sent.map(|out| out.attributes.unwrap_or_default()))
}

fn counted(
    sent: Result<
        std::collections::HashMap<String, AttributeValue>,
        aws_sdk_dynamodb::error::SdkError<UpdateItemError, aws_sdk_dynamodb::config::http::HttpResponse>,
    >,
) -> Result<Counted, StoreError> {
    match sent {
        Ok(item) => Ok(Counted::In(item)),
        Err(error) => match error.as_service_error() {
            Some(UpdateItemError::ConditionalCheckFailedException(failed)) => {
                Ok(Counted::Elsewhere(failed.item().and_then(|item| number(item, "counted_window"))))
            }
            _ => Err(classify(error)),
        },
    }
}

/// The operation that, in the transaction revoking a key of `tenant`, moves the
/// tenant's keys epoch on (on its standing's shard 0, which every look reads), so that
/// every warm instance's next look tells it to read its key again.
///
/// # Errors
/// [`StoreError::Other`] if the operation cannot be built (a bug).
pub fn keys_changed(tables: &Tables, tenant: &str) -> Result<TransactWriteItem, StoreError> {
    let update = Update::builder()
        .table_name(tables.name(Table::RateLimits))
        .set_key(Some(key_of(tenant, 0)))
        .update_expression("ADD keys_epoch :one")
        .expression_attribute_values(":one", n(1))
        .build();
    Ok(TransactWriteItem::builder().update(built(update)?).build())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(
        window: Option<i64>,
        requests: u64,
        epoch: Option<u64>,
    ) -> std::collections::HashMap<String, AttributeValue> {
        let mut item = std::collections::HashMap::new();
        if let Some(window) = window {
            item.insert("counted_window".to_owned(), n(window));
            item.insert("requests".to_owned(), n(requests));
        }
        if let Some(epoch) = epoch {
            item.insert("keys_epoch".to_owned(), n(epoch));
        }
        item
    }

    /// A look tells what one more request would leave: the current window's count, none
    /// for an earlier window or no item, the stored window's when a clock ahead of ours
    /// started it; over the limit once the window holds as many as the limit.
    #[test]
    fn a_look_counts_the_current_window_only_and_says_when_one_more_is_over() {
        let minute = 30_000_000;
        let now = minute * 60 + 15;
        let look = |window, requests| standing_in(&item(window, requests, Some(4)), Slot::FIRST, 5, now);
        let fresh = standing_in(&item(None, 0, None), Slot::FIRST, 5, now);
        assert_eq!((fresh.remaining, fresh.exceeded, fresh.window, fresh.keys_epoch), (4, false, minute, Some(0)));
        assert_eq!((look(Some(minute - 1), 5).remaining, look(Some(minute - 1), 5).exceeded), (4, false));
        let two = look(Some(minute), 2);
        assert_eq!((two.remaining, two.exceeded, two.reset, two.keys_epoch), (2, false, 45, Some(4)));
        assert_eq!((look(Some(minute), 4).remaining, look(Some(minute), 4).exceeded), (0, false), "the last one");
        assert_eq!((look(Some(minute), 5).remaining, look(Some(minute), 5).exceeded), (0, true), "one too many");
        let ahead = look(Some(minute + 1), 3);
        assert_eq!((ahead.window, ahead.remaining, ahead.reset), (minute + 1, 1, 60), "a clock ahead's window");
    }

    /// A lease is one request with one shard; with shards, 1/64 of a shard's share while
    /// it has room, shrinking to one as it fills; its tokens are its requests after the
    /// one answered, within the share.
    #[test]
    fn leases_shrink_as_the_shard_fills_and_tokens_stay_within_the_share() {
        assert_eq!(lease(1_200, Slot::FIRST, 1_000), 1, "one shard: each request counted");
        let enterprise = Slot { shard: 3, shards: shards_for(60_000) };
        assert_eq!(enterprise.quota(60_000), 3_750);
        assert_eq!(lease(60_000, enterprise, 3_749), 58, "3,750 / 64");
        assert_eq!(lease(60_000, enterprise, 320), 20, "a sixteenth of what is left");
        assert_eq!((lease(60_000, enterprise, 15), lease(60_000, enterprise, 0)), (1, 1));
        assert_eq!(lease(1_000_000, Slot { shard: 0, shards: 16 }, 62_499), 976);
        let stale = Slot { shard: 1, shards: shards_for(12_000) };
        assert_eq!(lease(60_000, stale, 14_000), 1, "a slot of the plan before: no lease against its share");
        assert_eq!(tokens_of(1, 7, 100), 0, "a lease of one is the request alone");
        assert_eq!(tokens_of(58, 58, 3_750), 57, "the first lease of a window");
        assert_eq!(tokens_of(58, 3_760, 3_750), 47, "past the share: only what is within it");
        assert_eq!(tokens_of(58, 3_900, 3_750), 0, "all of it past the share");
        // A window filled by one instance's leases: every counted request is served (none
        // left unspent past the share), in a few dozen writes instead of 3,750.
        let quota = 3_750;
        let (mut requests, mut served, mut writes) = (0_u64, 0_u64, 0);
        while requests < u64::from(quota) {
            let left = u32::try_from(u64::from(quota) - requests - 1).unwrap_or(0);
            let size = lease(60_000, enterprise, left);
            requests += u64::from(size);
            served += 1 + u64::from(tokens_of(size, requests, quota));
            writes += 1;
            assert_eq!(served, requests.min(u64::from(quota)), "every counted request within the share is served");
        }
        assert_eq!((served, requests), (u64::from(quota), u64::from(quota)));
        assert_eq!(writes, 137, "writes for 3,750 requests (docs/rate-limits.md)");
    }

    /// A limit is spread over shards of at most `PER_SHARD` a minute, whose shares add up
    /// to it exactly; a small limit has one shard, counted as a whole.
    #[test]
    fn shards_share_the_limit_exactly_and_a_small_limit_has_one() {
        assert_eq!((shards_for(0), shards_for(3), shards_for(1_200), shards_for(PER_SHARD)), (1, 1, 1, 1));
        assert_eq!((shards_for(PER_SHARD + 1), shards_for(12_000), shards_for(60_000)), (2, 4, 16));
        assert_eq!(shards_for(1_000_000), SHARDS);
        for limit in [3, 1_200, 12_000, 12_001, 60_000, 1_000_003] {
            let shards = shards_for(limit);
            let total: u32 = (0..shards).map(|shard| Slot { shard, shards }.quota(limit)).sum();
            assert_eq!(total, limit, "{limit}");
            let largest = Slot { shard: 0, shards }.quota(limit);
            assert!(largest <= PER_SHARD.max(limit.div_ceil(u32::from(SHARDS))), "{limit}: {largest}");
        }
        assert_eq!(Slot::FIRST.quota(3), 3);
        for _ in 0..100 {
            let [a, b] = Slot::two_at_random(16);
            assert!(a.shard < 16 && b.shard < 16 && a.shard != b.shard);
            assert_eq!(Slot::two_at_random(1), [Slot::FIRST; 2]);
        }
    }

    /// Of two shards, the one with more room is counted in; the keys epoch and the
    /// plan's limit are shard 0's; a shard with no item has all of its share.
    #[test]
    fn a_look_at_two_shards_takes_the_one_with_more_room() {
        let minute = 30_000_000;
        let now = minute * 60 + 15;
        let shards = 4;
        let (a, b) = (Slot { shard: 1, shards }, Slot { shard: 3, shards });
        let mut first = item(Some(minute), 50, Some(7));
        first.insert("per_minute".to_owned(), n(800));
        let mut fuller = item(Some(minute), 190, None);
        fuller.insert("tenant_id".to_owned(), s("ten_x#01"));
        let mut emptier = item(Some(minute), 10, None);
        emptier.insert("tenant_id".to_owned(), s("ten_x#03"));
        let looked = standing_among(&[first.clone(), fuller.clone(), emptier], &[a, b], 400, now);
        assert_eq!(
            (looked.limit, looked.slot, looked.keys_epoch),
            (800, b, Some(7)),
            "the plan's 800, shard 0's epoch"
        );
        assert_eq!(looked.remaining, (200 - 11) * 4);
        let missing = standing_among(&[first, fuller], &[a, b], 400, now);
        assert_eq!((missing.slot, missing.remaining), (b, 199 * 4), "a shard never counted has its whole share");
        let none = standing_among(&[], &[a, b], 400, now);
        assert_eq!((none.limit, none.keys_epoch), (400, Some(0)), "no standing yet: the default, epoch 0");
        let full = standing_in(&item(Some(minute), 100, None), a, 400, now);
        assert!(full.exceeded, "the 101st of a share of 100");
        assert_eq!(keys_to_read("ten_x", &[a, b]).len(), 3, "shard 0 and the two looked at");
        assert_eq!(keys_to_read("ten_x", &[Slot { shard: 0, shards }, a]).len(), 2, "shard 0 once");
    }
}
