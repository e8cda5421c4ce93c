//! Time: one injectable clock, and the wire format of every timestamp
//! (RFC 3339, UTC, milliseconds, `Z`: `2026-11-21T23:02:21.123Z`).

use std::fmt;
use std::sync::{Arc, Mutex};

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};

/// Where handlers get "now" from, so tests can place events in time.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current instant.
    fn now(&self) -> DateTime<Utc>;
}

/// The real clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// A clock that only moves when told to; for tests.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<Mutex<DateTime<Utc>>>);

impl ManualClock {
    /// A clock standing at `start`.
    #[must_use]
    pub fn new(start: DateTime<Utc>) -> Self {
        Self(Arc::new(Mutex::new(start)))
    }

    /// Moves the clock by `delta` (negative moves it back).
    pub fn advance(&self, delta: TimeDelta) {
        let mut now = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *now += delta;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Formats an instant the way every response and record carries it.
#[must_use]
pub fn format(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Millis, true)
}

/// Parses a client-given RFC 3339 timestamp (any offset) into UTC.
///
/// # Errors
/// A message for the client when `raw` is not RFC 3339.
pub fn parse(raw: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(raw)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|_| "must be an RFC 3339 timestamp such as 2026-11-21T23:02:21.123Z".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_has_milliseconds_and_z() {
        let t = parse("2026-11-21T23:02:21.1234+01:00").expect("valid");
        assert_eq!(format(t), "2026-11-21T22:02:21.123Z");
        let whole = parse("2026-01-02T03:04:05Z").expect("valid");
        assert_eq!(format(whole), "2026-01-02T03:04:05.000Z");
    }

    #[test]
    fn parse_rejects_dates_without_time_or_zone() {
        assert!(parse("2026-11-21").is_err());
        assert!(parse("2026-11-21T10:00:00").is_err());
        assert!(parse("yesterday").is_err());
    }

    #[test]
    fn manual_clock_moves_only_when_told() {
        let start = parse("2026-11-21T00:00:00Z").expect("valid");
        let clock = ManualClock::new(start);
        assert_eq!(clock.now(), start);
        clock.advance(TimeDelta::days(-30));
        assert_eq!(format(clock.now()), "2026-10-22T00:00:00.000Z");
    }
}
