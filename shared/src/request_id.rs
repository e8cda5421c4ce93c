//! The id of the request being served (`X-Request-Id`): set for the request's task by
//! the edge ([`crate::http`]), read by whatever reports on the request (problem+json
//! bodies, logs).

use std::future::Future;

tokio::task_local! {
    static REQUEST_ID: String;
}

/// The id of the request being served, or `unknown` outside one.
#[must_use]
pub fn current() -> String {
    REQUEST_ID.try_with(Clone::clone).unwrap_or_else(|_| "unknown".to_owned())
}

/// Runs `future` as the request `id`.
pub async fn scope<F: Future>(id: String, future: F) -> F::Output {
    REQUEST_ID.scope(id, future).await
}
