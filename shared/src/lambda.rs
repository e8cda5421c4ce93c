//! The Lambda entry: API Gateway (HTTP API, payload 2.0) events in, responses out, with
//! every response encoded so that it fits Lambda's 6 MB response payload.
//!
//! Lambda returns a response to API Gateway as one JSON document in which the body is a
//! string: either the body's text, JSON-escaped (a `"` becomes `\"`, a control
//! character `\u0001`), or the body's bytes in base64 with `isBase64Encoded`. Escaping
//! can double a JSON body's size (a body of quotes and backslashes); base64 adds a third
//! to any body. `lambda_http` picks the form by content type alone, so a 4 MiB
//! checkpoint state of escape-heavy JSON became an 8 MiB payload, which Lambda refuses.
//! This adapter picks, per response, whichever form is smaller, so no body of `n`
//! bytes costs more than `4 * ceil(n / 3)` bytes of payload ([`encoded_body_len`]).
//! API Gateway decodes either form before the client sees it: clients get the same
//! bytes.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use http::HeaderValue;
use lambda_http::aws_lambda_events::apigw::ApiGatewayV2httpResponse;
use lambda_http::lambda_runtime::LambdaInvocation;
use lambda_http::request::LambdaRequest;
use lambda_http::{Context, LambdaEvent, RequestExt};
use tower::ServiceExt;

/// Lambda's limit on a synchronous invocation's response payload, in bytes.
pub const MAX_RESPONSE_PAYLOAD: usize = 6_291_556;

/// Lambda's limit on a synchronous invocation's request payload (the event), in bytes.
pub const MAX_REQUEST_PAYLOAD: usize = 6_291_556;

/// Serves `app` as a Lambda function behind API Gateway. Each answer is posted to the
/// Runtime API (which hands it to API Gateway at once), then the work the request left
/// for after its answer ([`AfterAnswer`]) runs, and only then does the runtime ask for
/// the next event: Lambda freezes an instance once it has asked, so that work is
/// neither frozen half-done nor lost, and the next request on the instance sees it done.
///
/// # Errors
/// Only when the function cannot serve at all (the runtime API fails).
pub async fn run(app: Router) -> Result<(), lambda_http::Error> {
    let left = Arc::new(Mutex::new(None::<AfterAnswer>));
    let slot = left.clone();
    let handler = lambda_http::service_fn(move |event: LambdaEvent<LambdaRequest>| {
        let (app, slot) = (app.clone(), slot.clone());
        async move {
            let (response, after) = answer(app, event).await;
            if let Ok(mut slot) = slot.lock() {
                *slot = after;
            }
            Ok::<_, lambda_http::Error>(response)
        }
    });
    // Inside the tracing layer, so that what the work logs is in the invocation's span.
    lambda_http::lambda_runtime::Runtime::new(handler)
        .layer(ThenAfterAnswer { left })
        .layer(lambda_http::lambda_runtime::layers::TracingLayer::new())
        .run()
        .await
}

/// Work a request leaves for after its answer (its rate-limit count), carried in the
/// response's extensions. Whoever delivers the answer runs it once the answer is out and
/// before the same instance serves its next request: [`run`] on Lambda, the test
/// harness in process ([`left_by`]). It runs once, by whoever takes it first.
#[derive(Clone)]
pub struct AfterAnswer(Arc<Mutex<Option<Work>>>);

/// The work of an [`AfterAnswer`].
type Work = Pin<Box<dyn Future<Output = ()> + Send>>;

impl AfterAnswer {
    /// `work`, to run after the answer.
    pub fn new(work: impl Future<Output = ()> + Send + 'static) -> Self {
        Self(Arc::new(Mutex::new(Some(Box::pin(work)))))
    }

    /// Runs the work, unless it was taken already. A panic in it is caught and logged:
    /// it runs outside the edge's panic safety, and must not end the process.
    pub async fn run(self) {
        let work = self.0.lock().ok().and_then(|mut work| work.take());
        if let Some(work) = work
            && CatchUnwind(work).await.is_err()
        {
            tracing::error!("the work after an answer panicked");
        }
    }

    /// Runs the work as [`AfterAnswer::run`] does, giving up after `budget` (logged).
    pub async fn run_within(self, budget: Duration) {
        if tokio::time::timeout(budget, self.run()).await.is_err() {
            tracing::warn!(budget_ms = budget.as_millis(), "the work after an answer did not finish in time");
        }
    }
}

/// A future whose panics are caught: `Err` when polling it panicked.
struct CatchUnwind(Work);

impl Future for CatchUnwind {
    type Output = Result<(), ()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<Self::Output> {
        let work = &mut self.0;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work.as_mut().poll(cx))) {
            Ok(polled) => polled.map(Ok),
            Err(_) => std::task::Poll::Ready(Err(())),
        }
    }
}

impl std::fmt::Debug for AfterAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AfterAnswer")
    }
}

/// What `response`'s request left for after its answer, for callers that serve a router
/// in process (tests, benchmarks) to run as [`run`] does once the answer is posted.
#[must_use]
pub fn left_by<B>(response: &http::Response<B>) -> Option<AfterAnswer> {
    response.extensions().get::<AfterAnswer>().cloned()
}

/// The Runtime API layer of [`run`]: the invocation (the handler, then the post of its
/// answer), then the work it left.
struct ThenAfterAnswer {
    left: Arc<Mutex<Option<AfterAnswer>>>,
}

impl<S> tower::Layer<S> for ThenAfterAnswer {
    type Service = ThenAfterAnswerService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        ThenAfterAnswerService { inner, left: self.left.clone() }
    }
}

struct ThenAfterAnswerService<S> {
    inner: S,
    left: Arc<Mutex<Option<AfterAnswer>>>,
}

impl<S> tower::Service<LambdaInvocation> for ThenAfterAnswerService<S>
where
    S: tower::Service<LambdaInvocation, Response = (), Error = lambda_http::Error>,
    S::Future: Send + 'static,
{
    type Response = ();
    type Error = lambda_http::Error;
    type Future = Pin<Box<dyn Future<Output = Result<(), lambda_http::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, invocation: LambdaInvocation) -> Self::Future {
        // A deadline (nearly) past when the invocation arrives is not one Lambda gave
        // (`cargo lambda watch` sends such): the work keeps to its own budget then.
        let deadline = Some(invocation.context.deadline).filter(|deadline| !time_left(*deadline).is_zero());
        let answered = self.inner.call(invocation);
        let left = self.left.clone();
        Box::pin(async move {
            let result = answered.await;
            let after = left.lock().ok().and_then(|mut left| left.take());
            // Only once the answer was posted (a failed post answered no one), and only
            // within the invocation's deadline, past which Lambda would end the
            // instance: a count cut short is logged, not retried.
            match (&result, after, deadline) {
                (Ok(()), Some(after), Some(deadline)) => after.run_within(time_left(deadline)).await,
                (Ok(()), Some(after), None) => after.run().await,
                _ => {}
            }
            result
        })
    }
}

/// What is left of an invocation whose deadline is `deadline` (Unix milliseconds), less
/// a margin for the runtime's own call that follows.
fn time_left(deadline: u64) -> Duration {
    const MARGIN: Duration = Duration::from_millis(250);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    Duration::from_millis(deadline).saturating_sub(now).saturating_sub(MARGIN)
}

/// Answers one event as Lambda would hand it to `app`: the request `lambda_http` makes
/// of the event (with the invocation's context), and the response in the smaller
/// encoding; then runs what the request left for after its answer, as [`run`] does.
pub async fn invoke(app: Router, event: LambdaEvent<LambdaRequest>) -> ApiGatewayV2httpResponse {
    let (response, after) = answer(app, event).await;
    if let Some(after) = after {
        after.run().await;
    }
    response
}

/// [`invoke`]'s answer, and the work its request left for after it.
async fn answer(app: Router, event: LambdaEvent<LambdaRequest>) -> (ApiGatewayV2httpResponse, Option<AfterAnswer>) {
    let LambdaEvent { payload, context } = event;
    let request: lambda_http::Request = payload.into();
    let request = with_trace_header(request, &context).with_lambda_context(context);
    let response = match app.oneshot(request.map(Body::new)).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    let (mut parts, body) = response.into_parts();
    let after = parts.extensions.remove::<AfterAnswer>();
    let bytes = match axum::body::to_bytes(body, usize::MAX).await {
        Ok(bytes) => bytes.to_vec(),
        Err(error) => {
            tracing::error!(error = %error, "the response body could not be read");
            return (failed(), after);
        }
    };
    (encode(parts, bytes), after)
}

/// The `X-Amzn-Trace-Id` header from the invocation's context, as `lambda_http` sets it.
fn with_trace_header(mut request: lambda_http::Request, context: &Context) -> lambda_http::Request {
    if let Some(value) = context.xray_trace_id.as_deref().and_then(|id| HeaderValue::from_str(id).ok()) {
        request.headers_mut().insert("x-amzn-trace-id", value);
    }
    request
}

fn failed() -> ApiGatewayV2httpResponse {
    let mut response = ApiGatewayV2httpResponse::default();
    response.status_code = 500;
    response
}

/// The API Gateway response for `parts` and `body`: text when the body is UTF-8 and its
/// JSON-escaped form is no longer than its base64 form, otherwise base64.
#[must_use]
pub fn encode(parts: http::response::Parts, body: Vec<u8>) -> ApiGatewayV2httpResponse {
    let mut headers = parts.headers;
    let cookies =
        headers.get_all(http::header::SET_COOKIE).iter().filter_map(|v| v.to_str().ok().map(str::to_owned)).collect();
    headers.remove(http::header::SET_COOKIE);
    let mut response = ApiGatewayV2httpResponse::default();
    response.status_code = i64::from(parts.status.as_u16());
    response.headers = headers;
    response.cookies = cookies;
    if !body.is_empty() {
        let as_text = match String::from_utf8(body) {
            Ok(text) if escaped_len(&text) <= base64_len(text.len()) => Ok(text),
            Ok(text) => Err(text.into_bytes()),
            Err(not_text) => Err(not_text.into_bytes()),
        };
        match as_text {
            Ok(text) => response.body = Some(lambda_http::Body::Text(text)),
            Err(bytes) => {
                response.is_base64_encoded = true;
                response.body = Some(lambda_http::Body::Binary(bytes));
            }
        }
    }
    response
}

/// The size of `text` as a JSON string, quotes included (what `serde_json` writes).
#[must_use]
pub fn escaped_len(text: &str) -> usize {
    2 + text
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 2,
            0..0x20 => 6,
            _ => 1,
        })
        .sum::<usize>()
}

/// The size of `n` bytes in padded base64 as a JSON string, quotes included.
#[must_use]
pub fn base64_len(n: usize) -> usize {
    2 + n.div_ceil(3) * 4
}

/// The most payload a body of `n` bytes can cost in the chosen encoding.
#[must_use]
pub fn encoded_body_len(n: usize) -> usize {
    base64_len(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The work after an answer runs once, whoever asks; a panic in it is caught (it runs
    /// outside the edge's panic safety); a budget cuts it short.
    #[tokio::test]
    async fn the_work_after_an_answer_runs_once_survives_a_panic_and_keeps_to_its_budget() {
        let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = runs.clone();
        let after = AfterAnswer::new(async move {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        after.clone().run().await;
        after.run().await;
        assert_eq!(runs.load(std::sync::atomic::Ordering::SeqCst), 1);
        AfterAnswer::new(async { panic!("a bug in the count") }).run().await;
        let slow = AfterAnswer::new(std::future::pending::<()>());
        tokio::time::timeout(Duration::from_secs(5), slow.run_within(Duration::from_millis(10)))
            .await
            .expect("cut short at its budget");
        let left = time_left(u64::try_from(chrono::Utc::now().timestamp_millis()).expect("after 1970") + 10_000);
        assert!(left > Duration::from_secs(9) && left <= Duration::from_millis(9_750), "{left:?}");
        assert_eq!(time_left(0), Duration::ZERO, "a deadline passed leaves nothing");
    }

    #[test]
    fn escaped_len_is_what_serde_json_writes() {
        for text in ["", "plain", "quote \" and \\ backslash", "\u{1}\u{1f}\n\t\r\u{8}\u{c}", "ümlaut 😀", "\u{7f}"]
        {
            assert_eq!(escaped_len(text), serde_json::to_string(text).expect("json").len(), "{text:?}");
        }
    }

    #[test]
    fn escape_heavy_bodies_go_as_base64_and_plain_ones_as_text() {
        let parts = || http::Response::new(()).into_parts().0;
        let plain = encode(parts(), br#"{"a":"plain text"}"#.to_vec());
        assert!(!plain.is_base64_encoded);
        let quotes = encode(parts(), br#"{"a":"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\""}"#.to_vec());
        assert!(quotes.is_base64_encoded);
        let binary = encode(parts(), vec![0xff, 0xfe, 0x00]);
        assert!(binary.is_base64_encoded);
        let payload = serde_json::to_string(&quotes).expect("payload");
        let body_len = br#"{"a":"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\"\""}"#.len();
        assert!(payload.contains(&format!("\"body\":\"{}", "eyJhIjoiXCJcIlwiXCJc")), "{payload}");
        assert!(encoded_body_len(body_len) >= base64_len(body_len));
    }
}
