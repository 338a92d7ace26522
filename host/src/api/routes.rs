//! The routing routes (docs/routing.md): the table (`GET
//! /v1/groups/{group}/routes`: at once, as a blocking query, or as an
//! event stream) and one key's lookup. Readable with the group's reader
//! token, the admin token or the read-only token. It owns the host's cap on watchers
//! ([`Watchers`]): a blocking query that waits and an open stream each
//! hold one place, refused `503 too_many_watchers` past the cap; and a
//! stream's slow reader is dropped, not buffered for.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::auth::{AdminToken, Credential, credential, digest_hex};
use super::error::{ApiError, ApiPath};
use super::wire::{ErrorBody, LookupBody, RoutesBody};
use crate::runtime::{RoutesAccess, Runtime, ServedRoutes};

/// The longest a blocking query waits (and its default): under the time a
/// node forwarding it to the group's coordinator waits for the answer.
pub const ROUTES_WAIT_MS_MAX: u64 = 20_000;

/// The default cap on a host's watchers (`serve --routes-watchers-max`):
/// under the connection cap a host takes by default (at most 10,000),
/// since each waiting watcher holds a connection, with room left for the
/// members' heartbeats.
pub const ROUTES_WATCHERS_MAX_DEFAULT: usize = 8_192;
/// How long a stream may leave a table unread before it is closed, by
/// default (`serve --routes-slow-reader-ms`).
pub const ROUTES_SLOW_READER_MS_DEFAULT: u64 = 10_000;
/// How often an idle stream sends a comment line, so that proxies keep it.
const STREAM_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The host's watchers: how many wait now, and the limits on them.
#[derive(Debug)]
pub struct Watchers {
    waiting: AtomicUsize,
    max: usize,
    slow_reader: Duration,
}

impl Default for Watchers {
    fn default() -> Self {
        Watchers::new(
            ROUTES_WATCHERS_MAX_DEFAULT,
            Duration::from_millis(ROUTES_SLOW_READER_MS_DEFAULT),
        )
    }
}

impl Watchers {
    pub fn new(max: usize, slow_reader: Duration) -> Self {
        Watchers {
            waiting: AtomicUsize::new(0),
            max,
            slow_reader,
        }
    }

    /// A place for one watcher, or 503 past the cap.
    fn enter(self: &Arc<Self>) -> Result<Watching, ApiError> {
        let entered = self
            .waiting
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            });
        match entered {
            Ok(_) => {
                metrics::gauge!("assignd_routes_watchers").increment(1.0);
                Ok(Watching(self.clone()))
            }
            Err(_) => Err(ApiError::TooManyWatchers(self.max)),
        }
    }
}

/// One watcher's place, given back when dropped.
struct Watching(Arc<Watchers>);

impl Drop for Watching {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::AcqRel);
        metrics::gauge!("assignd_routes_watchers").decrement(1.0);
    }
}

/// The table's query: a blocking query's epoch and wait.
#[derive(Debug, Default, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct RoutesQuery {
    /// Answer once the table's epoch differs from this one (or after
    /// `wait_ms`).
    after_epoch: Option<u64>,
    /// How long to wait for a change, in ms (default and most 20,000).
    wait_ms: Option<u64>,
}

/// A lookup's query: the topic and the key, as UTF-8 or as hex bytes.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
pub struct LookupQuery {
    topic: String,
    /// The key as UTF-8.
    key: Option<String>,
    /// The key's bytes in hex (for a key that is not UTF-8).
    key_hex: Option<String>,
}

/// What the request presents: the admin token (or the read-only token,
/// which reads what it reads), another token, or none.
fn access(admin: Option<&AdminToken>, headers: &HeaderMap) -> RoutesAccess {
    match credential(headers) {
        Credential::Missing => RoutesAccess::Missing,
        Credential::Bearer(token) => {
            let reads_all = |admin: &AdminToken| {
                admin
                    .check_request(&axum::http::Method::GET, Credential::Bearer(token))
                    .is_ok()
            };
            if admin.is_some_and(reads_all) {
                RoutesAccess::Admin
            } else {
                RoutesAccess::Token(digest_hex(token))
            }
        }
    }
}

fn query<T>(
    parsed: Result<Query<T>, axum::extract::rejection::QueryRejection>,
) -> Result<T, ApiError> {
    parsed
        .map(|Query(query)| query)
        .map_err(|e| ApiError::InvalidQuery(e.body_text()))
}

/// The group's routing table: for each task its owner (with its
/// endpoint), learners, standbys, moves and unowned tasks, as ranges.
///
/// With `after_epoch`, a blocking query: answered once the table's epoch
/// differs from it, or after `wait_ms` with the table as it is. With
/// `Accept: text/event-stream`, a stream of tables (`event: routes`, `id:`
/// the epoch), one at once and one after each change; `Last-Event-ID`
/// resumes after a table. Readable with the group's reader token, the
/// admin token or the read-only token.
#[utoipa::path(
    get,
    path = "/v1/groups/{group}/routes",
    tag = "routing",
    security(("reader_token" = []), ("admin_token" = []), ("read_only_token" = [])),
    params(("group" = String, Path, description = "The group's name"), RoutesQuery),
    responses(
        (status = 200, description = "The table (JSON), or a stream of tables (`text/event-stream`)", body = RoutesBody),
        (status = 307, description = "`not_coordinator` (cluster mode, a stream): another node coordinates the group; open the stream at `Location`", body = ErrorBody),
        (status = 400, description = "`invalid_path`, `invalid_query`", body = ErrorBody),
        (status = 401, description = "`unauthorized`: no token", body = ErrorBody),
        (status = 403, description = "`forbidden`: neither the group's reader token nor the admin token (nor the read-only token)", body = ErrorBody),
        (status = 404, description = "`unknown_group`", body = ErrorBody),
        (status = 503, description = "`too_many_watchers` (past `serve --routes-watchers-max`); `shard_unavailable`, `coordinator_unreachable`, `storage_unavailable`: retry after `Retry-After`", body = ErrorBody),
    )
)]
pub async fn get_routes(
    State(runtime): State<Arc<Runtime>>,
    ApiPath(group): ApiPath<String>,
    admin: Option<Extension<Arc<AdminToken>>>,
    watchers: Option<Extension<Arc<Watchers>>>,
    headers: HeaderMap,
    parsed: Result<Query<RoutesQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    tracing::Span::current().record("group", group.as_str());
    let access = access(admin.as_deref().map(|a| &**a), &headers);
    let query = readable(&runtime, &group, &access, query(parsed)).await?;
    let watchers = watchers.map_or_else(|| Arc::new(Watchers::default()), |w| w.0);
    let wait = Duration::from_millis(
        query
            .wait_ms
            .unwrap_or(ROUTES_WAIT_MS_MAX)
            .min(ROUTES_WAIT_MS_MAX),
    );
    if wants_stream(&headers) {
        let after = last_event_id(&headers)?.or(query.after_epoch);
        return stream(runtime, group, access, after, watchers).await;
    }
    let _watching = match query.after_epoch {
        Some(_) => Some(watchers.enter()?),
        None => None,
    };
    let table = runtime
        .routes(&group, &access, query.after_epoch, wait)
        .await?;
    Ok(json_answer(&table))
}

/// The table as JSON, with its epoch and how long the query waited before
/// it was read (`Assignd-Routes-Waited-Ms`: the table's promise runs
/// `valid_ms` from the time the request was sent plus this).
fn json_answer(table: &ServedRoutes) -> Response {
    let mut response = Response::new(Body::from(table.json.clone()));
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert("assignd-routes-epoch", HeaderValue::from(table.epoch));
    headers.insert(
        "assignd-routes-waited-ms",
        HeaderValue::from(table.waited_ms),
    );
    response
}

/// Whether the request asks for the event stream.
pub fn wants_stream(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| accept.contains("text/event-stream"))
}

fn last_event_id(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .map(Some)
        .ok_or_else(|| ApiError::InvalidQuery("Last-Event-ID must be a table epoch".into()))
}

/// The event stream: its first table is read before the answer starts, so
/// a refusal (a token, an unknown group) is an error answer, not an
/// event; then one task per stream waits for each change and hands the
/// table over, ending the stream if its reader has not taken the last one
/// within the slow-reader time.
async fn stream(
    runtime: Arc<Runtime>,
    group: String,
    access: RoutesAccess,
    after: Option<u64>,
    watchers: Arc<Watchers>,
) -> Result<Response, ApiError> {
    let watching = watchers.enter()?;
    let first = runtime
        .routes(&group, &access, None, Duration::ZERO)
        .await?;
    let (events, received) = tokio::sync::mpsc::channel::<Result<Event, Infallible>>(1);
    let slow_reader = watchers.slow_reader;
    tokio::spawn(async move {
        let _watching = watching;
        let mut seen = after;
        let mut table = first;
        loop {
            if seen != Some(table.epoch) {
                let json = String::from_utf8_lossy(&table.json).into_owned();
                let event = Event::default()
                    .event("routes")
                    .id(table.epoch.to_string())
                    .data(json);
                if events.send_timeout(Ok(event), slow_reader).await.is_err() {
                    tracing::debug!(
                        group,
                        "a routes stream's reader is gone or too slow: closed"
                    );
                    return;
                }
                seen = Some(table.epoch);
            }
            let wait = Duration::from_millis(ROUTES_WAIT_MS_MAX);
            tokio::select! {
                () = events.closed() => return,
                next = runtime.routes(&group, &access, seen, wait) => match next {
                    Ok(next) => table = next,
                    // The group moved to another node, or the storage is
                    // away: the reader reconnects (with Last-Event-ID).
                    Err(_) => return,
                },
            }
        }
    });
    let body = tokio_stream::wrappers::ReceiverStream::new(received);
    Ok(Sse::new(body)
        .keep_alive(KeepAlive::new().interval(STREAM_KEEP_ALIVE))
        .into_response())
}

/// Where a key goes: its partition of the topic (Kafka's default
/// partitioner: murmur2 of the key's bytes), and that task's owner, the
/// member it moves to, its learners and standbys, with their endpoints.
#[utoipa::path(
    get,
    path = "/v1/groups/{group}/routes/lookup",
    tag = "routing",
    security(("reader_token" = []), ("admin_token" = []), ("read_only_token" = [])),
    params(("group" = String, Path, description = "The group's name"), LookupQuery),
    responses(
        (status = 200, description = "The key's task and its owners", body = LookupBody),
        (status = 400, description = "`invalid_path`, `invalid_query` (no key, or both `key` and `key_hex`, or hex that is not)", body = ErrorBody),
        (status = 401, description = "`unauthorized`: no token", body = ErrorBody),
        (status = 403, description = "`forbidden`: neither the group's reader token nor the admin token (nor the read-only token)", body = ErrorBody),
        (status = 404, description = "`unknown_group`, `unknown_topic`", body = ErrorBody),
        (status = 503, description = "`shard_unavailable`, `coordinator_unreachable`, `storage_unavailable`: retry after `Retry-After`", body = ErrorBody),
    )
)]
pub async fn lookup(
    State(runtime): State<Arc<Runtime>>,
    ApiPath(group): ApiPath<String>,
    admin: Option<Extension<Arc<AdminToken>>>,
    headers: HeaderMap,
    parsed: Result<Query<LookupQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    tracing::Span::current().record("group", group.as_str());
    let access = access(admin.as_deref().map(|a| &**a), &headers);
    let asked = query(parsed).and_then(|query| Ok((key_of(&query)?, query.topic)));
    let (key, topic) = readable(&runtime, &group, &access, asked).await?;
    match runtime.lookup(&group, &access, &topic, &key).await? {
        Some(answer) => Ok((StatusCode::OK, axum::Json(answer)).into_response()),
        None => Err(ApiError::UnknownTopic { group, topic }),
    }
}

/// The key a lookup asks for: `key` as UTF-8, or `key_hex`'s bytes.
fn key_of(query: &LookupQuery) -> Result<Vec<u8>, ApiError> {
    match (&query.key, &query.key_hex) {
        (Some(key), None) => Ok(key.clone().into_bytes()),
        (None, Some(hex)) => decode_hex(hex).ok_or_else(|| {
            ApiError::InvalidQuery("key_hex must be an even number of hex digits".into())
        }),
        _ => Err(ApiError::InvalidQuery(
            "give the key as `key` or as `key_hex`, one of them".into(),
        )),
    }
}

/// A request's `asked` (its parsed query), or its refusal; a malformed one
/// is told so only to a caller that may read the group (one that may not
/// is told that first).
async fn readable<T>(
    runtime: &Arc<Runtime>,
    group: &str,
    access: &RoutesAccess,
    asked: Result<T, ApiError>,
) -> Result<T, ApiError> {
    match asked {
        Ok(asked) => Ok(asked),
        Err(malformed) => {
            runtime.check_routes_access(group, access).await?;
            Err(malformed)
        }
    }
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}
