//! The one retry policy of optimistic writes: [`retry_races`] and its bounds.

use std::time::Duration;

use super::error::StoreError;
use super::transaction::{Part, TransactionError};

/// How many times an optimistic write is tried before it gives up (see [`retry_races`]).
pub const RACE_ATTEMPTS: u32 = 100;

/// How long an optimistic write keeps retrying lost races by default: inside every
/// function's timeout (10 s), with room for the request's other calls and a 503.
pub const RACE_BUDGET: Duration = Duration::from_secs(8);

/// The race budget in force: `RACE_BUDGET_MS` if set (the local stack's DynamoDB Local
/// commits a contended transaction a hundred times slower than DynamoDB, so its tests
/// give it longer), else [`RACE_BUDGET`].
fn race_budget() -> Duration {
    static BUDGET: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *BUDGET.get_or_init(|| {
        std::env::var("RACE_BUDGET_MS").ok().and_then(|ms| ms.parse().ok()).map_or(RACE_BUDGET, Duration::from_millis)
    })
}

/// What one try of an optimistic write came to.
#[derive(Debug)]
pub enum Attempt<T> {
    /// It committed, or decided without writing: this is the answer.
    Done(T),
    /// It lost a race (an item it read changed before its commit, or DynamoDB reported
    /// a transaction conflict): read again and try again.
    Raced,
}

impl<T> Attempt<T> {
    /// [`Attempt::Raced`] when `error` is a lost race on one of `guarded` (the parts
    /// whose condition is the version that was read) or a transaction conflict;
    /// otherwise the error itself.
    ///
    /// # Errors
    /// `error` when it is not a lost race.
    pub fn raced_on(error: TransactionError, guarded: &[Part]) -> Result<Self, TransactionError> {
        match error {
            TransactionError::Condition(part) if guarded.contains(&part) => Ok(Self::Raced),
            TransactionError::Store(StoreError::Conflict) => Ok(Self::Raced),
            other => Err(other),
        }
    }
}

/// The one retry policy of optimistic writes. Runs `attempt` (read, decide, commit
/// conditioned on what was read; written `|| async move { … }` over references, so that
/// the handler's future stays `Send`) until it is [`Attempt::Done`] or fails; after a lost
/// race it pauses (a short, growing, jittered pause, so competing writers spread out)
/// and tries again, at most [`RACE_ATTEMPTS`] times and not after [`RACE_BUDGET`]
/// (`RACE_BUDGET_MS` changes it).
///
/// # Errors
/// `attempt`'s errors; [`StoreError::Conflict`] (a 503 that says to retry) once the
/// tries or the time run out.
pub async fn retry_races<T, E, F, Fut>(attempt: F) -> Result<T, E>
where
    E: From<StoreError>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T>, E>>,
{
    retry_within(RACE_ATTEMPTS, race_budget(), attempt).await
}

/// [`retry_races`] with its bounds given.
async fn retry_within<T, E, F, Fut>(attempts: u32, budget: Duration, mut attempt: F) -> Result<T, E>
where
    E: From<StoreError>,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Attempt<T>, E>>,
{
    let start = tokio::time::Instant::now();
    for tries in 1..=attempts {
        if let Attempt::Done(answer) = attempt().await? {
            return Ok(answer);
        }
        let pause = backoff(tries);
        if start.elapsed() + pause > budget {
            break;
        }
        tokio::time::sleep(pause).await;
    }
    Err(StoreError::Conflict.into())
}

/// The pause after `tries` lost races: exponential backoff with full jitter (a random
/// pause up to 5 ms, 10, 20, ... at most 160 ms), so that writers racing for one item
/// spread out instead of colliding again together.
fn backoff(tries: u32) -> Duration {
    use std::hash::{BuildHasher, Hasher};
    let ceiling = 5_u64 << tries.saturating_sub(1).min(5);
    let random = std::collections::hash_map::RandomState::new().build_hasher().finish();
    Duration::from_micros(1_000 + random % (ceiling * 1_000))
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;

    #[tokio::test]
    async fn a_write_that_loses_races_is_tried_again_until_it_is_done() {
        let tries = Cell::new(0);
        let tries = &tries;
        let answer: Result<&str, StoreError> = retry_races(|| async move {
            tries.set(tries.get() + 1);
            Ok(if tries.get() < 4 { Attempt::Raced } else { Attempt::Done("committed") })
        })
        .await;
        assert_eq!(answer.expect("done"), "committed");
        assert_eq!(tries.get(), 4);
    }

    #[tokio::test]
    async fn an_error_ends_the_retries_at_once() {
        let tries = Cell::new(0);
        let tries = &tries;
        let answer: Result<(), StoreError> = retry_races(|| async move {
            tries.set(tries.get() + 1);
            Err(StoreError::Corrupt("bad".into()))
        })
        .await;
        assert!(matches!(answer, Err(StoreError::Corrupt(_))));
        assert_eq!(tries.get(), 1);
    }

    #[tokio::test]
    async fn endless_races_end_in_a_conflict_within_the_budget_or_the_tries() {
        let endless = |budget| async move {
            let tries = Cell::new(0_u32);
            let tries = &tries;
            let answer: Result<(), StoreError> = retry_within(5, budget, || async move {
                tries.set(tries.get() + 1);
                Ok(Attempt::Raced)
            })
            .await;
            assert!(matches!(answer, Err(StoreError::Conflict)), "{answer:?}");
            tries.get()
        };
        // Pauses are 1 to 160 ms: 5 tries fit 10 s; no second try fits a budget of 0.
        assert_eq!(endless(Duration::from_secs(10)).await, 5);
        assert_eq!(endless(Duration::ZERO).await, 1);
    }

    #[test]
    fn only_a_lost_race_on_a_guarded_part_or_a_conflict_is_retried() {
        let raced = |e| matches!(Attempt::<()>::raced_on(e, &[Part::Execution]), Ok(Attempt::Raced));
        assert!(raced(TransactionError::Condition(Part::Execution)));
        assert!(raced(TransactionError::Store(StoreError::Conflict)));
        assert!(!raced(TransactionError::Condition(Part::Workflow)));
        assert!(!raced(TransactionError::Store(StoreError::Corrupt("x".into()))));
    }
}
