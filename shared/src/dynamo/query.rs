//! Queries of one partition: newest first, resumed after a keyset cursor, read by
//! window, counted.

use std::collections::HashMap;

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::types::AttributeValue;

use super::error::{StoreError, classify};
use super::item::{Item, s};

/// A query of one whole partition, newest first (descending sort key): `partition` is
/// the key attribute and value of the table's partition or of `index`'s. Reads of the
/// table are strongly consistent (an index cannot be).
#[must_use]
pub fn newest_first(
    client: &Client,
    table: &str,
    index: Option<&str>,
    partition: (&str, String),
) -> QueryFluentBuilder {
    client
        .query()
        .table_name(table)
        .set_index_name(index.map(str::to_owned))
        .key_condition_expression("#pk = :pk")
        .expression_attribute_names("#pk", partition.0)
        .expression_attribute_values(":pk", s(partition.1))
        .scan_index_forward(false)
        .consistent_read(index.is_none())
}

/// A query of one partition for the ids (`<prefix>_<uuidv7>`) in `range`, newest first
/// (the range comes from [`crate::ids::created_between`]: time filters as key ranges).
#[must_use]
pub fn newest_first_in(
    client: &Client,
    table: &str,
    index: Option<&str>,
    partition: (&str, String),
    range: (String, String),
) -> QueryFluentBuilder {
    newest_first(client, table, index, partition)
        .key_condition_expression("#pk = :pk AND #id BETWEEN :lo AND :hi")
        .expression_attribute_names("#id", "id")
        .expression_attribute_values(":lo", s(range.0))
        .expression_attribute_values(":hi", s(range.1))
}

/// Where a query of `partition` resumes after the item of `tenant` whose table sort
/// key (`sort`: name and value) is given: the `ExclusiveStartKey` of a keyset cursor,
/// for the table or an index (whose key adds its partition attribute).
#[must_use]
pub fn resume_after(tenant: &str, sort: (&str, AttributeValue), partition: (&str, &str)) -> Item {
    HashMap::from([
        ("tenant_id".to_owned(), s(tenant)),
        (sort.0.to_owned(), sort.1),
        (partition.0.to_owned(), s(partition.1)),
    ])
}

/// Reads one window of a query: skips `skip` items (reading only `sort_key` of each),
/// then returns up to `take` whole items. The query's own order and key condition
/// decide which items; callers set `scan_index_forward(false)` for newest first.
///
/// # Errors
/// The query's [`StoreError`].
pub async fn query_window(
    query: QueryFluentBuilder,
    sort_key: &str,
    skip: usize,
    take: usize,
) -> Result<Vec<Item>, StoreError> {
    query_window_of(query, sort_key, skip, take, &[]).await
}

/// Like [`query_window`], returning only `attributes` of each item (all of them when
/// empty): list summaries leave large payloads where they are.
///
/// # Errors
/// The query's [`StoreError`].
pub async fn query_window_of(
    query: QueryFluentBuilder,
    sort_key: &str,
    skip: usize,
    take: usize,
    attributes: &[&str],
) -> Result<Vec<Item>, StoreError> {
    query_window_from(query, sort_key, None, skip, take, attributes).await
}

/// Like [`query_window_of`], starting after the position `after` (a keyset cursor: the
/// table's and, for an index, the index's key attributes of an item, which need not
/// exist).
///
/// # Errors
/// The query's [`StoreError`].
pub async fn query_window_from(
    query: QueryFluentBuilder,
    sort_key: &str,
    after: Option<Item>,
    skip: usize,
    take: usize,
    attributes: &[&str],
) -> Result<Vec<Item>, StoreError> {
    const MAX_PER_CALL: usize = 1000;
    let query_items = if attributes.is_empty() {
        query.clone()
    } else {
        let names: Vec<String> = (0..attributes.len()).map(|i| format!("#attr{i}")).collect();
        attributes
            .iter()
            .zip(&names)
            .fold(query.clone().projection_expression(names.join(", ")), |q, (attribute, name)| {
                q.expression_attribute_names(name, *attribute)
            })
    };
    let mut start: Option<Item> = after;
    let mut remaining = skip;
    while remaining > 0 {
        let out = query
            .clone()
            .set_exclusive_start_key(start.take())
            .limit(remaining.min(MAX_PER_CALL) as i32)
            .projection_expression("#window_sk")
            .expression_attribute_names("#window_sk", sort_key)
            .send()
            .await
            .map_err(classify)?;
        remaining = remaining.saturating_sub(out.count() as usize);
        match out.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => return Ok(Vec::new()),
        }
    }
    let mut items = Vec::with_capacity(take.min(MAX_PER_CALL));
    while items.len() < take {
        let out = query_items
            .clone()
            .set_exclusive_start_key(start.take())
            .limit((take - items.len()).min(MAX_PER_CALL) as i32)
            .send()
            .await
            .map_err(classify)?;
        items.extend(out.items.unwrap_or_default());
        match out.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => break,
        }
    }
    Ok(items)
}

/// Counts the items of a query among the first `cap` it examines (all of them when it
/// has no filter expression), at most `cap` (keys only are returned; capacity is still
/// spent on the items' size, which is why untimed totals come from counters instead).
///
/// # Errors
/// The query's [`StoreError`].
pub async fn count(query: QueryFluentBuilder, cap: u64) -> Result<u64, StoreError> {
    let mut total = 0_u64;
    // Items examined: with a filter expression DynamoDB reads items that do not match,
    // and those are what a request pays for, so they are what is bounded.
    let mut examined = 0_u64;
    let mut start = None;
    while examined < cap {
        let out = query
            .clone()
            .select(aws_sdk_dynamodb::types::Select::Count)
            .limit(i32::try_from(cap - examined).unwrap_or(i32::MAX))
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(classify)?;
        total += u64::try_from(out.count).unwrap_or(0);
        examined += u64::try_from(out.scanned_count).unwrap_or(0).max(1);
        match out.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => break,
        }
    }
    Ok(total.min(cap))
}
/// Counts the items `query` finds, up to `cap` examined as [`count`] examines them, and
/// keeps the values of attribute `name` (a sort key, say) of those for which `keep`
/// holds, reading back only that attribute while the last item read was kept and only a
/// count after: for a query in key order, say newest first keeping what is recent, only
/// the kept items' values come back. A limit set on `query` is the size of each page.
///
/// # Errors
/// The calls' [`StoreError`]s.
pub async fn count_keeping(
    query: QueryFluentBuilder,
    name: &str,
    cap: u64,
    keep: impl Fn(&str) -> bool,
) -> Result<(u64, Vec<String>), StoreError> {
    let (mut total, mut examined, mut start) = (0_u64, 0_u64, None);
    let mut kept = Vec::new();
    let mut keeping = true;
    let page_size = query.get_limit().unwrap_or(i32::MAX);
    while examined < cap {
        let size = i32::try_from(cap - examined).unwrap_or(i32::MAX).min(page_size);
        let page = query.clone().limit(size).set_exclusive_start_key(start);
        let page = if keeping {
            page.projection_expression("#value").expression_attribute_names("#value", name)
        } else {
            page.select(aws_sdk_dynamodb::types::Select::Count)
        };
        let out = page.send().await.map_err(classify)?;
        total += u64::try_from(out.count).unwrap_or(0);
        examined += u64::try_from(out.scanned_count).unwrap_or(0).max(1);
        if keeping {
            for item in out.items() {
                match item.get(name).and_then(|v| v.as_s().ok()) {
                    Some(value) if keep(value) => kept.push(value.clone()),
                    _ => {
                        keeping = false;
                        break;
                    }
                }
            }
        }
        match out.last_evaluated_key {
            Some(key) if !key.is_empty() => start = Some(key),
            _ => break,
        }
    }
    Ok((total.min(cap), kept))
}

/// One strongly consistent page of `table` from `start`: of the partition `tenant` (a
/// query), or of the whole table (a scan) when `None`; only the attributes of
/// `projection` when given. For the operator's migrations, which run over one tenant or
/// all. Returns the items and where the next page starts (`None`: the last page).
///
/// # Errors
/// The call's [`StoreError`].
pub async fn page_of(
    client: &Client,
    table: &str,
    tenant: Option<&str>,
    projection: Option<&str>,
    start: Option<Item>,
) -> Result<(Vec<Item>, Option<Item>), StoreError> {
    let (items, next) = match tenant {
        Some(tenant) => {
            let out = client
                .query()
                .table_name(table)
                .key_condition_expression("tenant_id = :t")
                .expression_attribute_values(":t", s(tenant))
                .set_projection_expression(projection.map(str::to_owned))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(classify)?;
            (out.items, out.last_evaluated_key)
        }
        None => {
            let out = client
                .scan()
                .table_name(table)
                .set_projection_expression(projection.map(str::to_owned))
                .consistent_read(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(classify)?;
            (out.items, out.last_evaluated_key)
        }
    };
    Ok((items.unwrap_or_default(), next.filter(|key| !key.is_empty())))
}

/// One conditional update of an operator's backfill ([`backfill`]).
pub type Backfilled = aws_sdk_dynamodb::operation::update_item::builders::UpdateItemFluentBuilder;

/// An operator's backfill of `table` (the partition `tenant`, or the whole table): for
/// each item, `update` gives the conditional updates it needs (none: nothing to do). The
/// first is the item's own: when its condition fails (the item changed since it was
/// read, and its writer wrote what the backfill adds), the rest are not sent; the rest
/// (items that go with it) are sent, each one whose condition fails left as it is.
/// Returns how many items were changed. Safe while the service runs, and again.
///
/// # Errors
/// The calls' [`StoreError`]s, and `update`'s.
pub async fn backfill<F>(client: &Client, table: &str, tenant: Option<&str>, mut update: F) -> Result<u64, StoreError>
where
    F: FnMut(Item) -> Result<Vec<Backfilled>, StoreError>,
{
    let mut changed = 0;
    let mut start = None;
    loop {
        let (items, next) = page_of(client, table, tenant, None, start).await?;
        for item in items {
            let mut updates = update(item)?.into_iter();
            let Some(own) = updates.next() else { continue };
            match own.send().await.map_err(classify) {
                Ok(_) => changed += 1,
                Err(StoreError::ConditionFailed { .. }) => continue,
                Err(e) => return Err(e),
            }
            for other in updates {
                match other.send().await.map_err(classify) {
                    Ok(_) | Err(StoreError::ConditionFailed { .. }) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        match next {
            Some(key) => start = Some(key),
            None => return Ok(changed),
        }
    }
}
