//! The janitor: a scheduled function with no route. Every five minutes it finishes the
//! execution deletions that clients left unfinished (`DELETE /executions/{id}` answered
//! 202 and was not sent again for [`domain::runs::deletion::ABANDONED_AFTER`]), so their
//! checkpoints do not stay stored, and hidden, for ever (docs/operations.md,
//! "The janitor"). It then deletes the tenants that asked for their own deletion
//! (`POST /account/deletion`), a page of a table at a time, where each stopped. The work
//! is `domain::runs::Runs::finish_deletions` and `domain::erasure::Erasures::run`; this
//! crate gives them the time the invocation has.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use domain::Error;
use domain::erasure::{Erased, Erasures};
use domain::runs::{Janitored, Runs};
use shared::time::Clock;

/// Time left at which no further deletion round is started: a round (200 checkpoints
/// in transactions of up to 100 operations) takes a few seconds at most.
pub const MARGIN: Duration = Duration::from_secs(30);

/// One run: finishes unfinished deletions until `deadline` (milliseconds since the
/// Unix epoch, as Lambda gives it) is within [`MARGIN`].
///
/// # Errors
/// The list's storage error (a deletion that fails is counted and logged).
pub async fn sweep(runs: &Runs, clock: &dyn Clock, deadline_ms: u64) -> Result<Janitored, Error> {
    let deadline = UNIX_EPOCH + Duration::from_millis(deadline_ms);
    let go_on = || SystemTime::now() + MARGIN < deadline;
    let done = runs.finish_deletions(clock, go_on).await?;
    tracing::info!(
        finished = done.finished,
        rounds = done.rounds,
        failed = done.failed,
        stopped = done.stopped,
        "janitor: unfinished deletions"
    );
    Ok(done)
}

/// One run's tenant deletions: steps until `deadline` is within [`MARGIN`], where the
/// last run stopped.
///
/// # Errors
/// Storage errors (the deletion goes on from its last saved step at the next run).
pub async fn erase(erasures: &Erasures, clock: &dyn Clock, deadline_ms: u64) -> Result<Erased, Error> {
    let deadline = UNIX_EPOCH + Duration::from_millis(deadline_ms);
    let go_on = || SystemTime::now() + MARGIN < deadline;
    let done = erasures.run(clock.now(), &go_on).await?;
    tracing::info!(
        finished = done.finished,
        steps = done.steps,
        failed = done.failed,
        stopped = done.stopped,
        "janitor: tenant deletions"
    );
    Ok(done)
}
