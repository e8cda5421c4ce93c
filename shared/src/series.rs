//! Time series of counts for charts (`GET /executions/stats`, `GET /billing/usage`):
//! the window and bucket a request asks for, read as a run of whole hours or days of
//! the span counters ([`crate::spans`]), so a series costs the same at any tenant size.
//!
//! A series covers every whole bucket (UTC hour or day) the window
//! `created_after..created_before` touches: the first bucket starts at or before
//! `created_after`, the last ends at or after `created_before`. Without them the window
//! is the last 24 hours (`bucket=hour`) or 30 days (`bucket=day`) up to now.

use chrono::{DateTime, TimeDelta, Utc};

use crate::body::WireEnum;
use crate::error::ApiError;
use crate::query::Query;
use crate::spans::Level;

/// The length of a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bucket {
    /// A UTC hour.
    Hour,
    /// A UTC day.
    Day,
}

impl WireEnum for Bucket {
    const ALL: &'static [Self] = &[Self::Hour, Self::Day];

    fn wire(self) -> &'static str {
        match self {
            Self::Hour => "hour",
            Self::Day => "day",
        }
    }
}

impl Bucket {
    /// The span counters it is read from.
    #[must_use]
    pub const fn level(self) -> Level {
        match self {
            Self::Hour => Level::Hour,
            Self::Day => Level::Day,
        }
    }

    /// The most buckets one request may ask for: 31 days of hours, 366 days.
    #[must_use]
    pub const fn max_buckets(self) -> u64 {
        match self {
            Self::Hour => 31 * 24,
            Self::Day => 366,
        }
    }

    /// The window asked for when the request names none.
    const fn default_window(self) -> TimeDelta {
        match self {
            Self::Hour => TimeDelta::hours(24),
            Self::Day => TimeDelta::days(30),
        }
    }
}

/// The buckets a request asks for: `first..=last` of `bucket`'s spans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Their length.
    pub bucket: Bucket,
    /// The index of the first (milliseconds since the epoch / the bucket's length).
    pub first: u64,
    /// The index of the last.
    pub last: u64,
}

fn millis(at: DateTime<Utc>) -> u64 {
    u64::try_from(at.timestamp_millis()).unwrap_or(0)
}

impl Window {
    /// Reads `bucket` (default `day`), `created_after` and `created_before` from the
    /// query; a problem is recorded in it (see [`Query::finish`]).
    pub fn read(query: &mut Query, now: DateTime<Utc>) -> Option<Self> {
        let bucket = query.one_of::<Bucket>("bucket").unwrap_or(Bucket::Day);
        let before = query.timestamp("created_before");
        let after = query.timestamp("created_after");
        let before = before.unwrap_or(now);
        let after = after.unwrap_or_else(|| before - bucket.default_window());
        if after >= before {
            query.reject("created_after", "must be earlier than created_before".to_owned());
            return None;
        }
        if after.timestamp_millis() < 0 {
            query.reject("created_after", "must be 1970-01-01T00:00:00Z or later".to_owned());
            return None;
        }
        let unit = bucket.level().millis();
        let (first, last) = (millis(after) / unit, (millis(before) - 1) / unit);
        if last - first + 1 > bucket.max_buckets() {
            query.reject(
                "created_before",
                format!("the window holds at most {} buckets of a {}", bucket.max_buckets(), bucket.wire()),
            );
            return None;
        }
        Some(Self { bucket, first, last })
    }

    /// [`Window::read`] from a request's whole query, which it finishes.
    ///
    /// # Errors
    /// [`ApiError::Validation`] naming every invalid parameter.
    pub fn from_query(mut query: Query, now: DateTime<Utc>) -> Result<Self, ApiError> {
        let window = Self::read(&mut query, now);
        query.finish()?;
        window.ok_or_else(|| ApiError::internal("a window was refused without a problem"))
    }

    /// The fields every series answer starts with: `bucket`, and where its first bucket
    /// starts (`created_after`) and its last ends (`created_before`).
    #[must_use]
    pub fn answer(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut fields = serde_json::Map::new();
        fields.insert("bucket".to_owned(), self.bucket.wire().into());
        fields.insert("created_after".to_owned(), crate::time::format(self.start(self.first)).into());
        fields.insert("created_before".to_owned(), crate::time::format(self.start(self.last + 1)).into());
        fields
    }

    /// Bucket `index`'s `start` and `end` fields.
    #[must_use]
    pub fn bucket_fields(&self, index: u64) -> serde_json::Map<String, serde_json::Value> {
        let mut fields = serde_json::Map::new();
        fields.insert("start".to_owned(), crate::time::format(self.start(index)).into());
        fields.insert("end".to_owned(), crate::time::format(self.start(index + 1)).into());
        fields
    }

    /// The spans to read, as [`crate::spans::series`] takes them.
    #[must_use]
    pub const fn spans(&self) -> (Level, u64, u64) {
        (self.bucket.level(), self.first, self.last)
    }

    /// When bucket `index` starts.
    #[must_use]
    pub fn start(&self, index: u64) -> DateTime<Utc> {
        let ms = i64::try_from(index.saturating_mul(self.bucket.level().millis())).unwrap_or(i64::MAX);
        DateTime::from_timestamp_millis(ms).unwrap_or_default()
    }

    /// Every bucket's index, oldest first.
    pub fn indexes(&self) -> impl Iterator<Item = u64> {
        self.first..=self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(raw: &str) -> DateTime<Utc> {
        crate::time::parse(raw).expect("time")
    }

    fn read(raw: &str, now: &str) -> Result<Window, String> {
        let mut query = Query::parse(Some(raw));
        let window = Window::read(&mut query, at(now));
        query.finish().map_err(|e| format!("{e:?}"))?;
        window.ok_or_else(|| "no window".to_owned())
    }

    #[test]
    fn a_window_covers_the_whole_buckets_it_touches() {
        let w = read("created_after=2026-11-20T10:30:00Z&created_before=2026-11-22T00:00:00Z", "2026-11-27T00:00:00Z")
            .expect("window");
        assert_eq!(
            (w.bucket, w.start(w.first), w.start(w.last)),
            (Bucket::Day, at("2026-11-20T00:00:00Z"), at("2026-11-21T00:00:00Z"))
        );
        let w = read(
            "bucket=hour&created_after=2026-11-20T10:30:00Z&created_before=2026-11-20T12:00:00.001Z",
            "2026-11-27T00:00:00Z",
        )
        .expect("window");
        assert_eq!(
            w.indexes().map(|i| w.start(i)).collect::<Vec<_>>(),
            [at("2026-11-20T10:00:00Z"), at("2026-11-20T11:00:00Z"), at("2026-11-20T12:00:00Z")]
        );
    }

    #[test]
    fn without_a_window_it_is_the_last_30_days_or_24_hours() {
        let w = read("", "2026-11-27T09:15:00Z").expect("window");
        assert_eq!((w.start(w.first), w.start(w.last)), (at("2026-10-28T00:00:00Z"), at("2026-11-27T00:00:00Z")));
        let w = read("bucket=hour", "2026-11-27T09:15:00Z").expect("window");
        assert_eq!((w.start(w.first), w.start(w.last)), (at("2026-11-26T09:00:00Z"), at("2026-11-27T09:00:00Z")));
    }

    #[test]
    fn empty_inverted_too_long_and_unknown_windows_are_refused() {
        let now = "2026-11-27T09:15:00Z";
        for raw in [
            "bucket=week",
            "bucket=minute",
            "created_after=2026-11-20T00:00:00Z&created_before=2026-11-20T00:00:00Z",
            "created_after=2026-11-21T00:00:00Z&created_before=2026-11-20T00:00:00Z",
            "created_after=1960-01-01T00:00:00Z&created_before=1960-01-02T00:00:00Z",
            "created_after=2020-01-01T00:00:00Z&created_before=2026-11-20T00:00:00Z",
            "bucket=hour&created_after=2026-10-01T00:00:00Z",
            "created_after=yesterday",
        ] {
            assert!(read(raw, now).is_err(), "{raw} was accepted");
        }
        assert!(read("created_after=2025-11-27T00:00:00Z&created_before=2026-11-27T00:00:00Z", now).is_ok());
        assert!(
            read("bucket=hour&created_after=2026-10-28T00:00:00Z&created_before=2026-11-28T00:00:00Z", now).is_ok()
        );
    }
}
