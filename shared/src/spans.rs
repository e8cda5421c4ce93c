//! Counters per span of time (minute, hour, day) behind the `total` of a time-filtered
//! list, so that counting any window costs a bounded number of small reads, whatever
//! the tenant's data.
//!
//! An item made in millisecond `ms` (the time its id carries) is counted in the
//! minute, the hour and the day that hold `ms`, each one counter item per list family
//! (`executions`, `executions|workflow=wf_…`) with one attribute per filter value
//! (`all`, `running`, …), changed in the same transaction as the write, like every
//! counter. A window is then read as:
//!
//! - its whole days, hours and minutes: at most two runs of minutes and two of hours at
//!   its ends and one run of days, each one query of small counter items per shard of
//!   the tenant's counters ([`crate::counters`]), side by side;
//! - its partial minutes at each end (at most two minutes' worth of items; the rate
//!   limit bounds how many a tenant can make in a minute): counted from the items.

use std::future::Future;

use aws_sdk_dynamodb::Client;

use crate::TenantId;
use crate::dynamo::{StoreError, Table, Tables, classify, s};

/// A span of time counters are kept for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// 60,000 ms.
    Minute,
    /// 3,600,000 ms.
    Hour,
    /// 86,400,000 ms (UTC days).
    Day,
}

impl Level {
    /// Finest first.
    const ALL: [Self; 3] = [Self::Minute, Self::Hour, Self::Day];

    /// Its length in milliseconds.
    #[must_use]
    pub const fn millis(self) -> u64 {
        match self {
            Self::Minute => 60_000,
            Self::Hour => 3_600_000,
            Self::Day => 86_400_000,
        }
    }

    const fn letter(self) -> char {
        match self {
            Self::Minute => 'm',
            Self::Hour => 'h',
            Self::Day => 'd',
        }
    }
}

/// The attribute counting every item of a family, whatever its status.
pub const ALL: &str = "all";

/// The family of span counters of a tenant's executions: by the UTC
/// minute, hour and day they were made in, by status. Their hour and day items also
/// hold, as attributes of their own, what a start writes beside its execution: credits
/// used and charges made (the usage charts) and, in the day's item, attempts (starts and
/// replays, for the failure rate). A start then adds to items it changes anyway, in the
/// same update: no item of its own for each.
pub const EXECUTION_SPANS: &str = "executions";

/// Attribute of [`EXECUTION_SPANS`]' day items counting attempts (starts and replays).
pub const ATTEMPTS: &str = "attempts";

/// The counter of the attempts (starts and replays) made on `day` (UTC): an attribute of
/// the day's [`EXECUTION_SPANS`] item.
#[must_use]
pub fn attempts(day: chrono::NaiveDate) -> String {
    let midnight = day.and_hms_opt(0, 0, 0).map_or(0, |t| t.and_utc().timestamp_millis());
    let ms = u64::try_from(midnight).unwrap_or(0);
    names_at(&[Level::Day], EXECUTION_SPANS, ms, &[ATTEMPTS]).into_iter().next().unwrap_or_default()
}

/// The counter item of `family` for span `index` of `level`. Indexes are zero-padded so
/// that items sort by time.
fn item(family: &str, level: Level, index: u64) -> String {
    format!("{}{family}|{}|{index:012}", crate::counters::SPAN_PREFIX, level.letter())
}

/// The counter names (`item@attribute`, see [`crate::counters`]) an item of `family`
/// made in millisecond `ms` is counted under, one per level and attribute.
#[must_use]
pub fn names(family: &str, ms: u64, attributes: &[&str]) -> Vec<String> {
    names_at(&Level::ALL, family, ms, attributes)
}

/// [`names`] at some levels only (a family read by hour and day only, for example).
#[must_use]
pub fn names_at(levels: &[Level], family: &str, ms: u64, attributes: &[&str]) -> Vec<String> {
    levels
        .iter()
        .flat_map(|level| {
            let item = item(family, *level, ms / level.millis());
            attributes.iter().map(move |a| format!("{item}@{a}"))
        })
        .collect()
}

/// How a window of milliseconds `lo..=hi` is counted.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Runs of whole spans (level, first index, last index), read from counters.
    pub spans: Vec<(Level, u64, u64)>,
    /// Millisecond ranges (inclusive) counted from the items: the window's partial
    /// minutes, at most one at each end.
    pub edges: Vec<(u64, u64)>,
}

const fn ceil_to(x: u64, unit: u64) -> u64 {
    x.div_ceil(unit) * unit
}

const fn floor_to(x: u64, unit: u64) -> u64 {
    x / unit * unit
}

/// Splits the window `lo..=hi` into whole spans and partial-minute edges that exactly
/// cover it, each millisecond once.
#[must_use]
pub fn plan(lo: u64, hi: u64) -> Plan {
    let mut plan = Plan::default();
    let (a, b) = (lo, hi.saturating_add(1));
    let minute = Level::Minute.millis();
    let (whole_from, whole_to) = (ceil_to(a, minute), floor_to(b, minute));
    if whole_from >= whole_to {
        plan.edges.push((lo, hi));
        return plan;
    }
    if a < whole_from {
        plan.edges.push((a, whole_from - 1));
    }
    if whole_to < b {
        plan.edges.push((whole_to, b - 1));
    }
    split(&mut plan, whole_from, whole_to, 0);
    plan
}

/// Covers `a..b` (whole spans of `Level::ALL[level]`) with the coarsest spans that fit.
fn split(plan: &mut Plan, a: u64, b: u64, level: usize) {
    let this = Level::ALL[level];
    let unit = this.millis();
    let run = |plan: &mut Plan, from: u64, to: u64| plan.spans.push((this, from / unit, to / unit - 1));
    let Some(next) = Level::ALL.get(level + 1) else { return run(plan, a, b) };
    let (inner_from, inner_to) = (ceil_to(a, next.millis()), floor_to(b, next.millis()));
    if inner_from >= inner_to {
        return run(plan, a, b);
    }
    if a < inner_from {
        run(plan, a, inner_from);
    }
    if inner_to < b {
        run(plan, inner_to, b);
    }
    split(plan, inner_from, inner_to, level + 1);
}

/// Every counter item of `family` in the run of spans, in every shard of the tenant's
/// counters ([`crate::counters::SHARDS`]): one query per shard (of the run's partition in
/// the shard, [`crate::counters::partition`]), side by side, each over consecutive keys,
/// so it costs the same whatever the counts hold. `projection`: the attributes to read
/// besides the name (all when empty).
async fn query_run(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    family: &str,
    (level, from, to): (Level, u64, u64),
    projection: &[&str],
) -> Result<Vec<crate::dynamo::Item>, StoreError> {
    let table = tables.name(Table::Counters);
    let (from, to) = (item(family, level, from), item(family, level, to));
    let shards = (0..crate::counters::SHARDS).map(|shard| {
        let partition = crate::counters::partition(tenant.as_str(), shard, &from);
        let (from, to) = (&from, &to);
        async move {
            let mut found = Vec::new();
            let mut start = None;
            loop {
                let mut query = client
                    .query()
                    .table_name(table)
                    .key_condition_expression("tenant_id = :t AND #name BETWEEN :from AND :to")
                    .expression_attribute_names("#name", "name")
                    .expression_attribute_values(":t", s(&partition))
                    .expression_attribute_values(":from", s(from))
                    .expression_attribute_values(":to", s(to))
                    .set_exclusive_start_key(start);
                if !projection.is_empty() {
                    let mut names = vec!["#name".to_owned()];
                    for (i, attribute) in projection.iter().enumerate() {
                        query = query.expression_attribute_names(format!("#p{i}"), *attribute);
                        names.push(format!("#p{i}"));
                    }
                    query = query.projection_expression(names.join(", "));
                }
                let out = query.send().await.map_err(classify)?;
                found.extend(out.items.unwrap_or_default());
                match out.last_evaluated_key {
                    Some(key) if !key.is_empty() => start = Some(key),
                    _ => return Ok::<_, StoreError>(found),
                }
            }
        }
    });
    Ok(futures_util::future::try_join_all(shards).await?.into_iter().flatten().collect())
}

/// The sum of `attribute` over the counter items of `family` in the run of spans.
async fn sum_run(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    (family, attribute): (&str, &str),
    run: (Level, u64, u64),
) -> Result<u64, StoreError> {
    let mut total = 0_i64;
    for found in query_run(client, tables, tenant, family, run, &[attribute]).await? {
        let number = found.get(attribute).and_then(|v| v.as_n().ok()).map_or("0", String::as_str);
        total += number.parse::<i64>().map_err(|_| StoreError::Corrupt(format!("span counter {number}")))?;
    }
    Ok(u64::try_from(total).unwrap_or(0))
}

/// The counter items of `family` for the spans `first..=last` of `level`, by index, each
/// with its attributes summed over the shards (spans nothing was counted in have no
/// item): one query per shard, side by side, so it costs the same whatever the counts
/// hold.
///
/// # Errors
/// The queries' [`StoreError`]; [`StoreError::Corrupt`] for a counter that is not a
/// number.
pub async fn series(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    family: &str,
    run: (Level, u64, u64),
) -> Result<std::collections::BTreeMap<u64, std::collections::BTreeMap<String, i64>>, StoreError> {
    let mut found: std::collections::BTreeMap<u64, std::collections::BTreeMap<String, i64>> =
        std::collections::BTreeMap::new();
    let prefix = item(family, run.0, 0);
    let prefix = &prefix[..prefix.len() - 12];
    for counter in query_run(client, tables, tenant, family, run, &[]).await? {
        let name = counter.get("name").and_then(|v| v.as_s().ok()).map_or("", String::as_str);
        let Some(index) = name.strip_prefix(prefix).and_then(|i| i.parse::<u64>().ok()) else { continue };
        let values = found.entry(index).or_default();
        for (attribute, value) in &counter {
            let Ok(number) = value.as_n() else { continue };
            let number = number.parse::<i64>().map_err(|_| StoreError::Corrupt(format!("counter {name}")))?;
            *values.entry(attribute.clone()).or_default() += number;
        }
    }
    Ok(found)
}

/// The number of items of `family` with `attribute` made in milliseconds `lo..=hi`:
/// whole spans from the counters, partial minutes by `count_edge(lo, hi)` (which
/// counts the items themselves, bounded as it sees fit). All reads run at once.
///
/// # Errors
/// The reads' [`StoreError`]s.
pub async fn total<F, Fut>(
    client: &Client,
    tables: &Tables,
    tenant: &TenantId,
    (family, attribute): (&str, &str),
    (lo, hi): (u64, u64),
    count_edge: F,
) -> Result<u64, StoreError>
where
    F: Fn(u64, u64) -> Fut,
    Fut: Future<Output = Result<u64, StoreError>>,
{
    let plan = plan(lo, hi);
    // Side by side in this task (not spawned), so the request's metering sees them.
    let runs = plan.spans.into_iter().map(|run| sum_run(client, tables, tenant, (family, attribute), run));
    let edges = async {
        let mut sum = 0;
        for (from, to) in plan.edges {
            sum += count_edge(from, to).await?;
        }
        Ok::<_, StoreError>(sum)
    };
    let counted =
        async { Ok::<_, StoreError>(futures_util::future::try_join_all(runs).await?.into_iter().sum::<u64>()) };
    let (edges, counted) = tokio::try_join!(edges, counted)?;
    Ok(edges + counted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_counter_item_has_a_partition_a_run_of_spans_one() {
        let tenant = "ten_0123456789abcdef0123456789abcdef";
        assert_eq!(
            crate::counters::partition(tenant, 7, "workflows|status=draft"),
            format!("{tenant}#07#workflows|status=draft")
        );
        let minute = |index: u64| names("executions", index * 60_000, &["all"])[0].clone();
        let (a, b) = (minute(5), minute(6));
        let run = |name: &str| crate::counters::partition(tenant, 3, crate::counters::item_and_attribute(name).0);
        assert_eq!(run(&a), run(&b), "{a} and {b} are queried together");
        assert_eq!(run(&a), format!("{tenant}#03#span|executions|m"));
        assert_ne!(
            crate::counters::partition(tenant, 3, "executions"),
            crate::counters::partition(tenant, 4, "executions")
        );
    }

    /// The milliseconds a plan covers, as sorted inclusive ranges.
    fn covered(plan: &Plan) -> Vec<(u64, u64)> {
        let mut ranges: Vec<(u64, u64)> = plan.edges.clone();
        for (level, from, to) in &plan.spans {
            ranges.push((from * level.millis(), (to + 1) * level.millis() - 1));
        }
        ranges.sort_unstable();
        ranges
    }

    fn assert_exact_cover(lo: u64, hi: u64) {
        let plan = plan(lo, hi);
        let ranges = covered(&plan);
        assert_eq!(ranges.first().map(|r| r.0), Some(lo), "{lo}..={hi}: {plan:?}");
        assert_eq!(ranges.last().map(|r| r.1), Some(hi), "{lo}..={hi}: {plan:?}");
        for pair in ranges.windows(2) {
            assert_eq!(pair[0].1 + 1, pair[1].0, "{lo}..={hi}: gap or overlap in {plan:?}");
        }
        assert!(plan.edges.len() <= 2 && plan.spans.len() <= 5, "{plan:?}");
        for (from, to) in &plan.edges {
            assert!(to / 60_000 - from / 60_000 <= 1, "an edge is within two minutes: {plan:?}");
        }
        for (level, from, to) in &plan.spans {
            let most = match level {
                Level::Minute => 2 * 60,
                Level::Hour => 2 * 24,
                Level::Day => u64::MAX,
            };
            assert!(to - from < most, "{plan:?}");
        }
    }

    #[test]
    fn a_plan_covers_every_millisecond_of_the_window_exactly_once() {
        let day = 86_400_000;
        let t = 20_000 * day + 3 * 3_600_000 + 17 * 60_000 + 4_321;
        let cases = [
            (0, (1 << 48) - 1),
            (0, 0),
            (t, t),
            (t, t + 59_999),
            (t, t + 60_000),
            (t, t + 3 * 60_000),
            (t, t + day),
            (t, t + 400 * day + 17),
            (20_000 * day, 20_001 * day - 1),
            (20_000 * day, 20_000 * day + 3_600_000 - 1),
            (20_000 * day + 59_999, 20_000 * day + 60_000),
            (1, 10 * day),
        ];
        for (lo, hi) in cases {
            assert_exact_cover(lo, hi);
        }
        // A pseudo-random sweep of windows, deterministic.
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..5_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let lo = x % (30 * day) + 19_000 * day;
            let len = (x >> 20) % [61_000, 4_000_000, 3 * day, 90 * day][usize::try_from(x % 4).unwrap_or(0)];
            assert_exact_cover(lo, lo + len);
        }
    }

    #[test]
    fn whole_spans_are_read_from_counters_and_only_partial_minutes_from_items() {
        let day = 86_400_000;
        assert_eq!(plan(0, 3 * day - 1), Plan { spans: vec![(Level::Day, 0, 2)], edges: vec![] });
        let partial = plan(day + 30_000, 2 * day + 3_600_000 + 90_000);
        assert_eq!(
            partial.edges,
            vec![(day + 30_000, day + 59_999), (2 * day + 3_600_000 + 60_000, 2 * day + 3_690_000)]
        );
        assert!(partial.spans.contains(&(Level::Hour, 25, 48)), "{partial:?}");
    }

    #[test]
    fn an_item_is_counted_once_per_level_and_attribute() {
        let names = names("executions", 86_400_000 + 61_000, &[ALL, "running"]);
        assert_eq!(
            names,
            [
                "span|executions|m|000000001441@all",
                "span|executions|m|000000001441@running",
                "span|executions|h|000000000024@all",
                "span|executions|h|000000000024@running",
                "span|executions|d|000000000001@all",
                "span|executions|d|000000000001@running",
            ]
        );
    }
}
