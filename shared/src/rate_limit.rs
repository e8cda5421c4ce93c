//! The per-tenant request rate limit: a fixed window per minute, shared by every
//! function through one DynamoDB counter item per tenant and minute (expired by TTL).
//!
//! `RATE_LIMIT_PER_MINUTE` (default 1200; 0 turns it off). Every authenticated response
//! carries `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset` (seconds
//! until the window resets); beyond the limit the answer is 429 `rate_limited` with
//! `Retry-After`. Requests refused with 401 are not counted.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::ReturnValue;
use http::{HeaderMap, HeaderValue};

use crate::TenantId;
use crate::dynamo::{StoreError, Table, Tables, classify, n, s};

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
}

impl Standing {
    /// Adds the `X-RateLimit-*` headers.
    pub fn write_headers(&self, headers: &mut HeaderMap) {
        headers.insert("x-ratelimit-limit", HeaderValue::from(self.limit));
        headers.insert("x-ratelimit-remaining", HeaderValue::from(self.remaining));
        headers.insert("x-ratelimit-reset", HeaderValue::from(self.reset));
    }
}

/// Counts this request in the tenant's current window (`now` in Unix seconds).
///
/// # Errors
/// The update's [`StoreError`].
pub async fn count(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    limit: u32,
    now: i64,
) -> Result<Standing, StoreError> {
    let window = now.div_euclid(60);
    let reset = u64::try_from((window + 1) * 60 - now).unwrap_or(60);
    let out = client
        .update_item()
        .table_name(tables.name(Table::RateLimits))
        .key("tenant_id", s(tenant.as_str()))
        .key("window", n(window))
        .update_expression("ADD requests :one SET expires_at = if_not_exists(expires_at, :expires)")
        .expression_attribute_values(":one", n(1))
        .expression_attribute_values(":expires", n((window + 2) * 60))
        .return_values(ReturnValue::UpdatedNew)
        .send()
        .await
        .map_err(classify)?;
    let used = out
        .attributes
        .as_ref()
        .and_then(|a| a.get("requests"))
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(1);
    Ok(Standing {
        limit,
        remaining: u32::try_from(u64::from(limit).saturating_sub(used)).unwrap_or(0),
        reset,
        exceeded: used > u64::from(limit),
    })
}
