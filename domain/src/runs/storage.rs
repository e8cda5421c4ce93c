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

/// How many partitions of a tenant's its executions and checkpoints are spread over
/// (those written since they are spread): by the last hex digit of the item's id, or of
/// a stable hash of a key.
pub const SHARDS: u8 = 16;

/// DynamoDB's limit on a sort key's length, in bytes.
pub const SORT_KEY_MAX_BYTES: usize = 1024;

/// The sort key `{prefix}#{key}` of an entry named by a key a client chose: the key as
/// it is, or its SHA-256 (`{prefix}-sha256#…`) where that would pass DynamoDB's 1,024
/// bytes (a key of 256 characters of 4-byte UTF-8 is 1,024 bytes alone). Every entry
/// that fits keeps the key as it is, so entries written before this rule are found
/// where they are; no key shown as it is makes a hashed entry's `-sha256#`.
pub(super) fn keyed_entry(prefix: &str, key: &str) -> String {
    let entry = format!("{prefix}#{key}");
    if entry.len() <= SORT_KEY_MAX_BYTES { entry } else { format!("{prefix}-sha256#{}", shared::auth::hash_key(key)) }
}

/// Shard `shard`'s partition of `tenant` (`ten_…#07`).
pub(super) fn shard_partition(tenant: &TenantId, shard: u8) -> String {
    format!("{}#{shard:02}", tenant.as_str())
}

/// The shard of the item whose id is `id` (`exec_…`, `cp_…`: random last hex digit).
pub(super) fn shard_of(id: &str) -> u8 {
    id.bytes().last().and_then(|b| char::from(b).to_digit(16)).and_then(|d| u8::try_from(d).ok()).unwrap_or(0)
}

/// The shard of a key a client chose (64-bit FNV-1a of its bytes): stable across
/// versions and instances, so a lookup by key finds where a write put it.
pub(super) fn shard_of_key(key: &str) -> u8 {
    let hash =
        key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3));
    u8::try_from(hash % u64::from(SHARDS)).unwrap_or(0)
}

/// Every partition of `tenant` that may hold its spread items, shards first, then its
/// own (items written before they were spread).
pub(super) fn tenant_partitions(tenant: &TenantId) -> impl Iterator<Item = String> + '_ {
    (0..SHARDS).map(|shard| shard_partition(tenant, shard)).chain(std::iter::once(tenant.as_str().to_owned()))
}

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

/// Whether partition `partition` (a tenant's, or one of its shards) has item `id` in
/// `table` (one small consistent read: its id alone).
///
/// # Errors
/// The read's [`StoreError`].
pub(super) async fn has(client: &Client, table: &str, partition: &str, id: &str) -> Result<bool, StoreError> {
    let out = client
        .get_item()
        .table_name(table)
        .key("tenant_id", s(partition))
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
/// nowhere: `None` when it is older than the range, so nothing follows it. `table` is
/// the table's partition queried (or, for an index, any of the tenant's).
pub(super) fn start_after(
    table: &str,
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
    Some(Some(resume_after(table, ("id", s(after)), partition)))
}

/// The `total` of a time-filtered list whose window is milliseconds `window` and
/// whose items `queries` find (newest first, ids of `prefix` between `:lo` and `:hi`;
/// one query per partition that holds them): whole minutes, hours and days from the span
/// counters of `family`, the partial minutes at its ends counted from the items (up to
/// [`MAX_COUNTED`] each, a partition).
///
/// # Errors
/// The reads' [`StoreError`]s.
pub(super) async fn timed_total(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    queries: &[QueryFluentBuilder],
    prefix: &str,
    family: (&str, &str),
    window: (u64, u64),
) -> Result<u64, StoreError> {
    let edge = |from, to| {
        let (lo, hi) = id_range(prefix, from, to);
        let counts = queries.iter().map(move |query| {
            let edge = query
                .clone()
                .expression_attribute_values(":lo", s(lo.clone()))
                .expression_attribute_values(":hi", s(hi.clone()));
            shared::dynamo::count(edge, MAX_COUNTED)
        });
        async move { Ok(futures_util::future::try_join_all(counts).await?.into_iter().sum()) }
    };
    shared::spans::total(client, tables, tenant, family, window, edge).await
}

/// One partition's query of a merged list ([`merged_window`]): newest first by `id`.
pub(super) struct Source {
    /// The query, its key condition set.
    pub query: QueryFluentBuilder,
    /// Where it starts (a cursor's position in this partition), or from the top.
    pub start: Option<Item>,
}

/// A source as it is read: its next items, where its next page starts, the position of
/// the last item taken from it.
struct Cursor {
    query: QueryFluentBuilder,
    origin: Option<Item>,
    start: Option<Item>,
    buffer: std::collections::VecDeque<Item>,
    more: bool,
    last: Option<Item>,
}

/// `query` returning only `attributes` of each item.
fn projected(query: QueryFluentBuilder, attributes: &[&str]) -> QueryFluentBuilder {
    attributes.iter().enumerate().fold(query, |q, (i, attribute)| {
        let name = format!("#merged{i}");
        let list = match q.get_projection_expression() {
            Some(list) => format!("{list}, {name}"),
            None => name.clone(),
        };
        q.projection_expression(list).expression_attribute_names(name, *attribute)
    })
}

/// Takes the next `count` items of `cursors` merged newest first (greatest `id` first),
/// each with `attributes`, reading each partition page by page as it is needed: about
/// `count` items in all, and a few more from each partition.
async fn take_merged(
    cursors: &mut [Cursor],
    count: usize,
    attributes: &[&str],
    keys: &[&str],
) -> Result<Vec<Item>, StoreError> {
    let mut taken = Vec::with_capacity(count.min(1000));
    while taken.len() < count {
        let open = cursors.iter().filter(|c| c.more || !c.buffer.is_empty()).count().max(1);
        // Ids are spread evenly over the partitions: each gives about its share.
        let limit = i32::try_from(((count - taken.len()) / open + 2).min(1000)).unwrap_or(1000);
        let fills = cursors.iter_mut().filter(|c| c.buffer.is_empty() && c.more).map(|c| async move {
            let out = projected(c.query.clone(), attributes)
                .set_exclusive_start_key(c.start.take())
                .limit(limit)
                .send()
                .await
                .map_err(classify)?;
            c.buffer.extend(out.items.unwrap_or_default());
            match out.last_evaluated_key {
                Some(key) if !key.is_empty() => c.start = Some(key),
                _ => c.more = false,
            }
            Ok::<_, StoreError>(())
        });
        futures_util::future::try_join_all(fills).await?;
        let id = |item: &Item| item.get("id").and_then(|v| v.as_s().ok()).cloned().unwrap_or_default();
        let newest = cursors
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.buffer.front().map(|item| (i, id(item))))
            .max_by(|a, b| a.1.cmp(&b.1))
            .map(|(i, _)| i);
        let Some(i) = newest else { break };
        let Some(item) = cursors[i].buffer.pop_front() else { break };
        cursors[i].last =
            Some(keys.iter().filter_map(|k| item.get(*k).map(|v| ((*k).to_owned(), v.clone()))).collect());
        taken.push(item);
    }
    Ok(taken)
}

/// One window of the items of several partitions, merged newest first by `id` (which
/// every source sorts by): skips `skip` items (reading only `keys`, the attributes of a
/// position: the table's key and, for an index, the index's), then returns up to `take`
/// items with `attributes`. Exact, and about as costly as one partition's window of the
/// same items plus a page of a few items per partition.
///
/// # Errors
/// The queries' [`StoreError`]s.
pub(super) async fn merged_window(
    sources: Vec<Source>,
    keys: &[&str],
    skip: usize,
    take: usize,
    attributes: &[&str],
) -> Result<Vec<Item>, StoreError> {
    let mut cursors: Vec<Cursor> = sources
        .into_iter()
        .map(|source| Cursor {
            query: source.query,
            origin: source.start.clone(),
            start: source.start,
            buffer: std::collections::VecDeque::new(),
            more: true,
            last: None,
        })
        .collect();
    if skip > 0 {
        take_merged(&mut cursors, skip, keys, keys).await?;
        for cursor in &mut cursors {
            // Read again from the last item skipped, with the attributes asked for.
            if !cursor.buffer.is_empty() {
                cursor.buffer.clear();
                cursor.start = cursor.last.clone().or_else(|| cursor.origin.clone());
                cursor.more = true;
            }
        }
    }
    take_merged(&mut cursors, take, attributes, keys).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_named_by_a_key_fits_a_sort_key_whatever_the_key() {
        let prefix = format!("{}#key", shared::ids::ExecutionId::generate());
        let longest = "\u{1F600}".repeat(shared::body::KEY_MAX_CHARS);
        let entry = keyed_entry(&prefix, &longest);
        assert!(entry.len() <= SORT_KEY_MAX_BYTES, "{} bytes", entry.len());
        assert_ne!(entry, keyed_entry(&prefix, &"\u{1F601}".repeat(256)), "two long keys, two entries");
        // Every entry that fits is the key as it is, as entries were written before.
        let fits = "k".repeat(SORT_KEY_MAX_BYTES - prefix.len() - 1);
        assert_eq!(keyed_entry(&prefix, &fits), format!("{prefix}#{fits}"));
        let hashed = keyed_entry(&prefix, &format!("{fits}k"));
        assert!(hashed.starts_with(&format!("{prefix}-sha256#")), "{hashed}");
        // A key that spells a hashed entry's marker is still shown as it is.
        let marker = hashed.strip_prefix(&prefix).expect("prefix").to_owned();
        assert_ne!(keyed_entry(&prefix, &marker), hashed);
    }
}
