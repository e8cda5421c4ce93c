//! What the stores of runs share: a conditional put, whether an item exists, and the
//! reading of the newest-first, time-windowed lists of executions and failures (where a
//! cursor starts, a window's total, the cap on items counted).

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::{Put, TransactWriteItem};
use shared::TenantId;
use shared::dynamo::{Item, StoreError, Tables, built, classify, n, resume_after, s};
use shared::ids::id_range;

/// The most items a count of items examines: the partial minutes at the ends of a
/// time-filtered window, a time-filtered failure list with a status filter, and a
/// metadata-filtered checkpoint list's total (beyond it, `total` is this number,
/// documented), so a request's cost stays bounded whatever the tenant's data.
pub const MAX_COUNTED: u64 = 10_000;

/// A put of `item` into `table` for a transaction, conditioned on `condition` (with
/// `:expected` the version `expected`, when given).
///
/// # Errors
/// [`StoreError`] if the operation cannot be built.
pub(super) fn put_item(
    table: &str,
    item: Item,
    condition: &str,
    expected: Option<u64>,
) -> Result<TransactWriteItem, StoreError> {
    let mut put = Put::builder().table_name(table).set_item(Some(item)).condition_expression(condition);
    if let Some(version) = expected {
        put = put.expression_attribute_values(":expected", n(version));
    }
    Ok(TransactWriteItem::builder().put(built(put.build())?).build())
}

/// Whether the tenant has item `id` in `table` (one small consistent read: its id alone).
///
/// # Errors
/// The read's [`StoreError`].
pub(super) async fn has(client: &Client, table: &str, tenant: &TenantId, id: &str) -> Result<bool, StoreError> {
    let out = client
        .get_item()
        .table_name(table)
        .key("tenant_id", s(tenant.as_str()))
        .key("id", s(id))
        .projection_expression("id")
        .consistent_read(true)
        .send()
        .await
        .map_err(classify)?;
    Ok(out.item.is_some())
}

/// Where a newest-first list of ids in `range` starts after the id `after`: from the
/// top (no cursor, or one newer than the range), after it (`Some(Some(key))`), or
/// nowhere: `None` when it is older than the range, so nothing follows it.
pub(super) fn start_after(
    tenant: &TenantId,
    partition: (&str, &str),
    range: &(String, String),
    after: Option<&str>,
) -> Option<Option<Item>> {
    let Some(after) = after else { return Some(None) };
    if after > range.1.as_str() {
        return Some(None);
    }
    if after < range.0.as_str() {
        return None;
    }
    Some(Some(resume_after(tenant.as_str(), ("id", s(after)), partition)))
}

/// The `total` of a time-filtered list whose window is milliseconds `window` and
/// whose items `query` finds (newest first, ids of `prefix` between `:lo` and `:hi`):
/// whole minutes, hours and days from the span counters of `family`, the partial
/// minutes at its ends counted from the items (up to [`MAX_COUNTED`] each).
///
/// # Errors
/// The reads' [`StoreError`]s.
pub(super) async fn timed_total(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    query: &QueryFluentBuilder,
    prefix: &str,
    family: (&str, &str),
    window: (u64, u64),
) -> Result<u64, StoreError> {
    let edge = |from, to| {
        let (lo, hi) = id_range(prefix, from, to);
        let edge = query.clone().expression_attribute_values(":lo", s(lo)).expression_attribute_values(":hi", s(hi));
        shared::dynamo::count(edge, MAX_COUNTED)
    };
    shared::spans::total(client, tables, tenant, family, window, edge).await
}
