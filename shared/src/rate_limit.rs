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
}

impl Standing {
    /// The standing of a request in window `window` (of `now`) that an earlier count
    /// already used up: over the limit, with no DynamoDB call. Requests beyond the limit
    /// are not counted, so a flood of them does not write the tenant's item.
    #[must_use]
    pub fn used_up(limit: u32, now: i64) -> Self {
        let window = now.div_euclid(60);
        Self { limit, remaining: 0, reset: reset(window, now), exceeded: true, window, keys_epoch: None }
    }

    /// The standing of a request in `window` (of `now`) that is the `used`-th of it, at
    /// keys epoch `keys_epoch`.
    fn with(limit: u32, window: i64, now: i64, used: u64, keys_epoch: u64) -> Self {
        Self {
            limit,
            remaining: u32::try_from(u64::from(limit).saturating_sub(used)).unwrap_or(0),
            reset: reset(window, now),
            exceeded: used > u64::from(limit),
            window,
            keys_epoch: Some(keys_epoch),
        }
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
/// consistent read of its standing item: the requests counted in the current window
/// (or in a later one a clock ahead of ours started), and the keys epoch. The request
/// is not counted by this ([`count`] does, after the answer): `remaining` is what the
/// window will have left once it is, unless requests in flight elsewhere are counted
/// first.
///
/// # Errors
/// The read's [`StoreError`].
pub async fn look(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    limit: u32,
    now: i64,
) -> Result<Standing, StoreError> {
    let item = client
        .get_item()
        .table_name(tables.name(Table::RateLimits))
        .set_key(Some(standing_key(tenant)))
        .consistent_read(true)
        .send()
        .await
        .map_err(classify)?
        .item
        .unwrap_or_default();
    Ok(standing_of(&item, limit, now))
}

/// The key of `tenant`'s standing item (read by [`look`], or with a request's own first
/// read in one call, [`crate::gate`]).
#[must_use]
pub fn standing_key(tenant: &TenantId) -> std::collections::HashMap<String, AttributeValue> {
    std::collections::HashMap::from([("tenant_id".to_owned(), s(tenant.as_str())), ("window".to_owned(), n(STANDING))])
}

/// What the standing item `item` (empty when there is none) says of one more request
/// at `now`, as [`look`] answers.
#[must_use]
pub fn standing_of(item: &std::collections::HashMap<String, AttributeValue>, limit: u32, now: i64) -> Standing {
    let current = now.div_euclid(60);
    let (window, used) = match number::<i64>(item, "counted_window") {
        Some(stored) if stored >= current => (stored, number::<u64>(item, "requests").unwrap_or(0)),
        _ => (current, 0),
    };
    Standing::with(limit_of(item, limit), window, now, used.saturating_add(1), number(item, "keys_epoch").unwrap_or(0))
}

/// The limit of the tenant whose standing is `item`: its plan's (`per_minute`) when
/// higher than `default`. A plan never lowers the limit.
#[must_use]
pub fn limit_of(item: &std::collections::HashMap<String, AttributeValue>, default: u32) -> u32 {
    number::<u32>(item, "per_minute").map_or(default, |plan| plan.max(default))
}

/// The operation that, in the transaction storing `tenant`'s subscription, sets its
/// plan's limit on its standing (`Some`), or removes it when no subscription is live.
///
/// # Errors
/// [`StoreError::Other`] if the operation cannot be built (a bug).
pub fn plan_limit(tables: &Tables, tenant: &str, per_minute: Option<u32>) -> Result<TransactWriteItem, StoreError> {
    let update = Update::builder()
        .table_name(tables.name(Table::RateLimits))
        .key("tenant_id", s(tenant))
        .key("window", n(STANDING));
    let update = match per_minute {
        Some(limit) => {
            update.update_expression("SET per_minute = :limit").expression_attribute_values(":limit", n(limit))
        }
        None => update.update_expression("REMOVE per_minute"),
    };
    Ok(TransactWriteItem::builder().update(built(update.build())?).build())
}

/// Counts this request in the tenant's current window (`now` in Unix seconds). A clock
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
    limit: u32,
    now: i64,
    last_counted: Option<i64>,
) -> Result<Standing, StoreError> {
    let mut window = now.div_euclid(60);
    let mut next = match last_counted {
        Some(last) if last < window => Next::Both,
        _ => Next::Add,
    };
    let token = uuid::Uuid::now_v7().to_string();
    let update = |window, step| update(client, tables, tenant, window, step, &token);
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
                let used = number::<u64>(&item, "requests").unwrap_or(1);
                let epoch = number(&item, "keys_epoch").unwrap_or(0);
                return Ok(Standing::with(limit_of(&item, limit), window, now, used, epoch));
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

/// One conditional update of the tenant's standing item for `window`.
async fn update(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    window: i64,
    step: Step,
    token: &str,
) -> Result<Counted, StoreError> {
    let (update, condition) = match step {
        Step::Add => (
            "ADD requests :one",
            "counted_window = :window AND (attribute_not_exists(started_by) OR started_by <> :token)",
        ),
        Step::Start => (
            "SET counted_window = :window, requests = :one, started_by = :token",
            "attribute_not_exists(counted_window) OR counted_window < :window",
        ),
    };
    let sent = client
        .update_item()
        .table_name(tables.name(Table::RateLimits))
        .key("tenant_id", s(tenant.as_str()))
        .key("window", n(STANDING))
        .update_expression(update)
        .condition_expression(condition)
        .expression_attribute_values(":one", n(1))
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
/// tenant's keys epoch on, so that every warm instance's next count of the tenant tells
/// it to read its key again.
///
/// # Errors
/// [`StoreError::Other`] if the operation cannot be built (a bug).
pub fn keys_changed(tables: &Tables, tenant: &str) -> Result<TransactWriteItem, StoreError> {
    let update = Update::builder()
        .table_name(tables.name(Table::RateLimits))
        .key("tenant_id", s(tenant))
        .key("window", n(STANDING))
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
        let look = |window, requests| standing_of(&item(window, requests, Some(4)), 5, now);
        let fresh = standing_of(&item(None, 0, None), 5, now);
        assert_eq!((fresh.remaining, fresh.exceeded, fresh.window, fresh.keys_epoch), (4, false, minute, Some(0)));
        assert_eq!((look(Some(minute - 1), 5).remaining, look(Some(minute - 1), 5).exceeded), (4, false));
        let two = look(Some(minute), 2);
        assert_eq!((two.remaining, two.exceeded, two.reset, two.keys_epoch), (2, false, 45, Some(4)));
        assert_eq!((look(Some(minute), 4).remaining, look(Some(minute), 4).exceeded), (0, false), "the last one");
        assert_eq!((look(Some(minute), 5).remaining, look(Some(minute), 5).exceeded), (0, true), "one too many");
        let ahead = look(Some(minute + 1), 3);
        assert_eq!((ahead.window, ahead.remaining, ahead.reset), (minute + 1, 1, 60), "a clock ahead's window");
    }
}
