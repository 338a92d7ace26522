//! The HTTP server `assignd serve` runs the [`app`](super::app) on: an
//! accept loop over hyper's HTTP/1 connections in which every connection
//! is bounded. It owns the connection cap (past it a connection is
//! answered 503 `too_many_connections` and closed at once, and the refusals
//! are logged, at most once per [`REFUSED_LOG_INTERVAL_MS`]), the
//! header-read timeout (hyper's; its clock also runs while a kept-alive
//! connection waits for its next request, so it is the idle timeout too),
//! the body-read deadline (a request's whole body must arrive within it,
//! else 408 `request_timeout`), and the shutdown: stop accepting, let the
//! requests in flight finish for at most the drain, then close what is
//! left. It knows nothing of routes or of the runtime.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::Request;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tower::ServiceExt;

/// The bounds of every connection; `assignd serve` sets each by a flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// Connections served at once; more are answered 503 and closed.
    pub connections_max: usize,
    /// How long a request's head (request line and headers) may take to
    /// arrive, counted from when the connection starts waiting for it: a
    /// kept-alive connection idle this long is closed too.
    pub header_read_timeout_ms: u64,
    /// How long a request's body may take to arrive, counted from its
    /// head.
    pub body_read_timeout_ms: u64,
    /// How long shutdown lets the requests in flight finish before it
    /// closes the connections left.
    pub shutdown_drain_ms: u64,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            connections_max: 4_096,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
            shutdown_drain_ms: 10_000,
        }
    }
}

/// At most one log line per this long about refused connections or
/// failed accepts (a flood must not flood the log).
pub const REFUSED_LOG_INTERVAL_MS: u64 = 10_000;

/// How long the loop waits after a failed accept (out of descriptors,
/// most likely) before it tries again.
const ACCEPT_BACKOFF_MS: u64 = 50;

/// What a connection past the cap reads before it is closed.
const TOO_MANY_CONNECTIONS: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
content-type: application/json\r\n\
retry-after: 1\r\n\
connection: close\r\n\
content-length: 90\r\n\
\r\n\
{\"error\":{\"code\":\"too_many_connections\",\"message\":\"the server is at its connection cap\"}}\n";

/// A request body that did not arrive within the body-read timeout.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive within {0} ms")]
pub struct BodyTimeout(pub u64);

/// Serves `app` on `listener` until `shutdown` resolves, then drains (see
/// the module doc). Returns once every connection is closed.
pub async fn serve(
    listener: TcpListener,
    app: axum::Router,
    config: ServerConfig,
    shutdown: impl Future<Output = ()>,
) {
    let permits = Arc::new(Semaphore::new(config.connections_max));
    let (stop, stopping) = watch::channel(false);
    let mut connections = JoinSet::new();
    let mut refused = RateLimitedLog::default();
    let mut accept_failed = RateLimitedLog::default();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {
                metrics::gauge!("assignd_http_connections").set(connections.len() as f64);
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => match permits.clone().try_acquire_owned() {
                    Ok(permit) => {
                        connections.spawn(connection(stream, app.clone(), config, stopping.clone(), permit));
                        metrics::gauge!("assignd_http_connections").set(connections.len() as f64);
                    }
                    Err(_) => {
                        refuse(&stream);
                        metrics::counter!("assignd_http_connections_refused_total").increment(1);
                        refused.event(|count| tracing::warn!(
                            refused = count,
                            connections_max = config.connections_max,
                            "at the connection cap: refused connections (503 too_many_connections)"
                        ));
                    }
                },
                Err(error) => {
                    metrics::counter!("assignd_http_accept_failures_total").increment(1);
                    accept_failed.event(|count| tracing::error!(
                        %error,
                        failures = count,
                        "cannot accept connections"
                    ));
                    tokio::time::sleep(Duration::from_millis(ACCEPT_BACKOFF_MS)).await;
                }
            }
        }
    }
    drop(listener);
    let _ = stop.send(true);
    let open = connections.len();
    tracing::info!(
        open,
        drain_ms = config.shutdown_drain_ms,
        "stopped accepting; draining connections"
    );
    let drain = async { while connections.join_next().await.is_some() {} };
    if tokio::time::timeout(Duration::from_millis(config.shutdown_drain_ms), drain)
        .await
        .is_err()
    {
        tracing::warn!(
            left = connections.len(),
            "closing the connections still open after the drain"
        );
        connections.shutdown().await;
    }
}

/// Answers a connection past the cap, if its socket takes the bytes at
/// once, and closes it (on drop).
fn refuse(stream: &TcpStream) {
    let _ = stream.try_write(TOO_MANY_CONNECTIONS);
}

/// One connection, holding its `permit` until it is closed: served until
/// the client closes it, a timeout closes it, or shutdown starts (then it
/// finishes the request in flight and closes).
async fn connection(
    stream: TcpStream,
    app: axum::Router,
    config: ServerConfig,
    mut stopping: watch::Receiver<bool>,
    _permit: OwnedSemaphorePermit,
) {
    let _ = stream.set_nodelay(true);
    let body_read_timeout_ms = config.body_read_timeout_ms;
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let request = request.map(|body| Body::new(DeadlineBody::new(body, body_read_timeout_ms)));
        app.clone().oneshot(request)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(Duration::from_millis(config.header_read_timeout_ms));
    let served = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(served);
    let result = tokio::select! {
        result = served.as_mut() => result,
        _ = async { let _ = stopping.wait_for(|stop| *stop).await; } => {
            served.as_mut().graceful_shutdown();
            served.await
        }
    };
    if let Err(error) = result {
        tracing::debug!(%error, "connection closed");
    }
}

/// A request body whose frames must all arrive before a deadline set when
/// its head arrived; past it, reading fails with [`BodyTimeout`] (which
/// the API answers 408). The timer is armed only once the body keeps the
/// reader waiting: a small body usually arrives with its head, and a
/// timer per request was a measurable part of a heartbeat's cost.
struct DeadlineBody {
    inner: Incoming,
    head_arrived: tokio::time::Instant,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    timeout_ms: u64,
}

impl DeadlineBody {
    fn new(inner: Incoming, timeout_ms: u64) -> Self {
        DeadlineBody {
            inner,
            head_arrived: tokio::time::Instant::now(),
            deadline: None,
            timeout_ms,
        }
    }
}

impl http_body::Body for DeadlineBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        if let Some(deadline) = this.deadline.as_mut()
            && deadline.as_mut().poll(cx).is_ready()
        {
            return Poll::Ready(Some(Err(Box::new(BodyTimeout(this.timeout_ms)))));
        }
        let frame = Pin::new(&mut this.inner)
            .poll_frame(cx)
            .map_err(|e| Box::new(e) as Self::Error);
        if frame.is_pending() && this.deadline.is_none() {
            let at = this.head_arrived + Duration::from_millis(this.timeout_ms);
            let mut deadline = Box::pin(tokio::time::sleep_until(at));
            if deadline.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Some(Err(Box::new(BodyTimeout(this.timeout_ms)))));
            }
            this.deadline = Some(deadline);
        }
        frame
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Counts events and logs at most once per [`REFUSED_LOG_INTERVAL_MS`],
/// with the count since the last line.
#[derive(Default)]
struct RateLimitedLog {
    logged: Option<Instant>,
    unlogged: u64,
}

impl RateLimitedLog {
    fn event(&mut self, log: impl FnOnce(u64)) {
        self.unlogged += 1;
        let due = self
            .logged
            .is_none_or(|at| at.elapsed() >= Duration::from_millis(REFUSED_LOG_INTERVAL_MS));
        if due {
            log(self.unlogged);
            self.unlogged = 0;
            self.logged = Some(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_is_one_whole_response() {
        let text = std::str::from_utf8(TOO_MANY_CONNECTIONS).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(
            head.contains(&format!("content-length: {}", body.len())),
            "{head}"
        );
        let value: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(value["error"]["code"], "too_many_connections");
    }
}
