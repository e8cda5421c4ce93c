//! A stub of Lambda's Runtime API, enough to run a function's runtime loop against it:
//! the first `GET .../invocation/next` gets one event, later ones wait for ever, and
//! every call is reported to the test in order. Used by the cold-start benchmark and
//! by the test of what a function does between its answer and its next request.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};

/// What the stub saw.
#[derive(Debug)]
pub enum Seen {
    /// The function asked for an event (`first`: its first ask, so init is over).
    Next { at: Instant, first: bool },
    /// The function posted its answer to the event.
    Response { at: Instant, body: Value },
}

/// One call the stub saw; the stub answers it once this is dropped or [`Call::go`] is
/// called, so a test can look at the world while the function waits for that answer.
#[derive(Debug)]
pub struct Call {
    /// What it was.
    pub seen: Seen,
    go: Option<oneshot::Sender<()>>,
}

impl Call {
    /// Lets the stub answer.
    pub fn go(mut self) {
        if let Some(go) = self.go.take() {
            let _ = go.send(());
        }
    }
}

/// Reads one HTTP/1.1 request (head and Content-Length body); `None` at end of stream.
async fn read_request(stream: &mut BufReader<TcpStream>) -> Option<(String, Vec<u8>)> {
    let mut head = String::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if stream.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
        if head.is_empty() {
            head = line;
        }
    }
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await.ok()?;
    Some((head, body))
}

/// Serves the Runtime API on `listener`: the first `next` gets `event` (an API Gateway
/// event's JSON), and every call is sent to `calls` before it is answered.
pub async fn serve(listener: TcpListener, event: String, calls: mpsc::UnboundedSender<Call>) {
    let served = Arc::new(Mutex::new(false));
    loop {
        let Ok((socket, _)) = listener.accept().await else { return };
        let (event, calls, served) = (event.clone(), calls.clone(), served.clone());
        tokio::spawn(async move {
            let mut stream = BufReader::new(socket);
            while let Some((head, body)) = read_request(&mut stream).await {
                let at = Instant::now();
                let (go, gone) = oneshot::channel();
                let answer = if head.starts_with("GET /2018-06-01/runtime/invocation/next") {
                    let first = !std::mem::replace(&mut *served.lock().expect("lock"), true);
                    let _ = calls.send(Call { seen: Seen::Next { at, first }, go: Some(go) });
                    let _ = gone.await;
                    if !first {
                        std::future::pending::<()>().await;
                    }
                    let deadline = chrono::Utc::now().timestamp_millis() + 30_000;
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                         lambda-runtime-aws-request-id: 8476a536-e9f4-11e8-9739-2dfe598c3fcd\r\n\
                         lambda-runtime-deadline-ms: {deadline}\r\n\
                         lambda-runtime-invoked-function-arn: arn:aws:lambda:us-east-1:123456789012:function:stub\r\n\
                         lambda-runtime-trace-id: Root=1-5bef4de7-ad49b0e87f6ef6c87fc2e700;Sampled=1\r\n\
                         content-length: {}\r\n\r\n{event}",
                        event.len()
                    )
                } else {
                    if head.contains("/response") {
                        let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                        let _ = calls.send(Call { seen: Seen::Response { at, body }, go: Some(go) });
                        let _ = gone.await;
                    } else {
                        eprintln!("the function reported: {head} {}", String::from_utf8_lossy(&body));
                    }
                    "HTTP/1.1 202 Accepted\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}".to_owned()
                };
                if stream.get_mut().write_all(answer.as_bytes()).await.is_err() {
                    return;
                }
            }
        });
    }
}
