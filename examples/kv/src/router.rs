//! `assignd-kv router`: the HTTP front. `GET` and `PUT /kv/{key}` go to
//! the endpoint of the key's owner by the group's routing table (an
//! [`assignd_client::Router`] with the group's reader token); `GET /stats`
//! counts what happened. It owns the forwarding and its retries; the table
//! and its freshness are the client library's.
//!
//! A request goes out only on a fresh route (the table within its
//! ownership bound) with an owner. Otherwise, and after a worker's `421
//! not_owner` (reported with `Router::misrouted`) or a worker that does
//! not answer, the router waits for a newer table (at most
//! [`TABLE_WAIT_MAX`]; after a misroute at first only
//! [`MISROUTE_WAIT_MIN`]) and tries again, for at most [`ROUTE_WITHIN`] and
//! [`ATTEMPTS_MAX`] workers; then it answers `503 no_owner` with
//! `Retry-After`. `GET /stats` also says how long requests took from
//! their first misroute to their answer.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use assignd_client::{Route, RouteError, Router, RouterConfig};
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use tokio::time::Instant;

use crate::http::{TOPIC, error, path_segment, unavailable};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The host's base URL (a cluster's nodes separated by commas).
    #[arg(long)]
    url: String,
    #[arg(long)]
    group: String,
    /// The group's reader token (or the admin token).
    #[arg(long, env = "ASSIGND_READER_TOKEN", hide_env_values = true)]
    token: String,
    /// Where to serve, `host:port` (port 0: any free one).
    #[arg(long)]
    listen: String,
}

/// The most workers one request is sent to (a misroute or no answer
/// each) before it is refused.
pub const ATTEMPTS_MAX: u32 = 10;
/// How long one request may be retried before it is refused.
pub const ROUTE_WITHIN: Duration = Duration::from_secs(5);
/// The longest wait for a newer table between two tries.
pub const TABLE_WAIT_MAX: Duration = Duration::from_secs(1);
/// The first wait after a misroute, doubling with each misroute of the
/// request up to [`TABLE_WAIT_MAX`]. A worker the table already names may
/// not have heard of its grant yet (its heartbeat's answer, then its
/// replay), and then no newer table comes: it serves within moments.
pub const MISROUTE_WAIT_MIN: Duration = Duration::from_millis(50);
/// How often a wait checks the table's freshness (renewals of the same
/// epoch are not signalled).
const FRESHNESS_POLL: Duration = Duration::from_millis(20);
/// How long a worker may take to answer one forwarded request.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// How long the first table may take.
const READY_WITHIN: Duration = Duration::from_secs(30);

/// What the router did, as `GET /stats` shows it.
#[derive(Default)]
struct Stats {
    /// Requests sent to a worker.
    forwarded: AtomicU64,
    /// Answers `421 not_owner` from a worker.
    misrouted: AtomicU64,
    /// Workers that did not answer (gone, or too slow).
    unreachable: AtomicU64,
    /// Tries after the first.
    retried: AtomicU64,
    /// Requests answered 503: no owner in time.
    refused: AtomicU64,
    /// From a request's first misroute to the first newer table it saw.
    newer_table: Durations,
    /// From a request's first misroute to its answer (the newer table may
    /// leave the partition unowned a while: the move's own time).
    recovered: Durations,
}

/// How many times something took how long.
#[derive(Default)]
struct Durations {
    count: AtomicU64,
    ms_total: AtomicU64,
    ms_max: AtomicU64,
}

impl Durations {
    fn record(&self, since: Instant) {
        let ms = since.elapsed().as_millis() as u64;
        self.count.fetch_add(1, Ordering::Relaxed);
        self.ms_total.fetch_add(ms, Ordering::Relaxed);
        self.ms_max.fetch_max(ms, Ordering::Relaxed);
    }

    fn to_json(&self) -> serde_json::Value {
        let load = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        serde_json::json!({
            "count": load(&self.count),
            "ms_total": load(&self.ms_total),
            "ms_max": load(&self.ms_max),
        })
    }
}

impl Stats {
    fn count(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

struct Front {
    router: Router,
    http: reqwest::Client,
    stats: Stats,
}

/// Why one try was not answered.
enum Miss {
    /// The worker answered `421 not_owner` to a route of this epoch.
    Misrouted(u64),
    /// The worker did not answer.
    Unreachable(u64),
    /// Nobody owns the partition in the table of this epoch.
    NoOwner(u64),
    /// The table is past its ownership bound.
    Stale,
}

/// What a retry waits for.
#[derive(Clone, Copy)]
enum Wait {
    /// A table past this epoch: this one's route failed, or had no owner.
    Newer(u64),
    /// The table renewed within its ownership bound.
    Fresh,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let router = Router::start(RouterConfig::new(&args.url, &args.group).with_token(&args.token))?;
    router.ready(READY_WITHIN).await?;
    let http = reqwest::Client::builder()
        .timeout(FORWARD_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .build()?;
    let front = Arc::new(Front {
        router,
        http,
        stats: Stats::default(),
    });
    let app = axum::Router::new()
        .route("/kv/{key}", axum::routing::get(get_key).put(put_key))
        .route("/stats", axum::routing::get(stats))
        .with_state(front);
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    println!("listening on http://{}", listener.local_addr()?);
    let mut signals = crate::signals::Signals::install()?;
    axum::serve(listener, app)
        .with_graceful_shutdown(async move { signals.next().await })
        .await?;
    Ok(())
}

async fn get_key(State(front): State<Arc<Front>>, Path(key): Path<String>) -> Response {
    forward(&front, reqwest::Method::GET, &key, None).await
}

async fn put_key(
    State(front): State<Arc<Front>>,
    Path(key): Path<String>,
    value: Bytes,
) -> Response {
    forward(&front, reqwest::Method::PUT, &key, Some(value)).await
}

async fn stats(State(front): State<Arc<Front>>) -> Json<serde_json::Value> {
    let stats = &front.stats;
    let count = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    Json(serde_json::json!({
        "forwarded": count(&stats.forwarded),
        "misrouted": count(&stats.misrouted),
        "unreachable": count(&stats.unreachable),
        "retried": count(&stats.retried),
        "refused": count(&stats.refused),
        "newer_table_after_misroute": stats.newer_table.to_json(),
        "answered_after_misroute": stats.recovered.to_json(),
        "epoch": front.router.epoch(),
    }))
}

/// Sends the request to the key's owner, trying again on a newer table
/// until it is answered, [`ATTEMPTS_MAX`] workers did not answer it, or
/// [`ROUTE_WITHIN`] ran out.
async fn forward(
    front: &Front,
    method: reqwest::Method,
    key: &str,
    body: Option<Bytes>,
) -> Response {
    let mut tries = Tries::new(front);
    loop {
        let route = match front.router.owner_of(TOPIC, key) {
            Ok(route) => Some(route),
            Err(RouteError::NoTable) => None,
            Err(e) => return error(StatusCode::NOT_FOUND, "topic_not_found", e.to_string()),
        };
        tries.saw_table();
        let tried = match &route {
            Some(route) => try_route(front, route, method.clone(), key, body.clone()).await,
            None => Err(Miss::Stale),
        };
        let (wait, wait_max) = match tried {
            Ok(answer) => {
                tries.answered();
                return answer;
            }
            Err(miss) => tries.after(miss, route.as_ref()),
        };
        let now = Instant::now();
        if now >= tries.deadline || tries.sent >= ATTEMPTS_MAX {
            break;
        }
        wait_for_table(&front.router, wait, wait_max.min(tries.deadline - now)).await;
        Stats::count(&front.stats.retried);
    }
    Stats::count(&front.stats.refused);
    unavailable(
        "no_owner",
        format!("no worker serves the partition of {key:?} now"),
    )
}

/// One client request's tries so far.
struct Tries<'a> {
    front: &'a Front,
    deadline: Instant,
    /// Workers it was sent to.
    sent: u32,
    misroutes: u32,
    /// When it was first misrouted.
    misrouted_at: Option<Instant>,
    /// The epoch of the table that misrouted it, until a newer one is seen.
    misrouted_by: Option<u64>,
}

impl<'a> Tries<'a> {
    fn new(front: &'a Front) -> Self {
        Tries {
            front,
            deadline: Instant::now() + ROUTE_WITHIN,
            sent: 0,
            misroutes: 0,
            misrouted_at: None,
            misrouted_by: None,
        }
    }

    /// Counts how long a newer table took to come after a misroute.
    fn saw_table(&mut self) {
        if let (Some(at), Some(epoch)) = (self.misrouted_at, self.misrouted_by)
            && self.front.router.epoch().is_some_and(|held| held > epoch)
        {
            self.front.stats.newer_table.record(at);
            self.misrouted_by = None;
        }
    }

    fn answered(&self) {
        if let Some(at) = self.misrouted_at {
            self.front.stats.recovered.record(at);
        }
    }

    /// What to wait for (and at most how long) before the next try.
    fn after(&mut self, miss: Miss, route: Option<&Route>) -> (Wait, Duration) {
        let stats = &self.front.stats;
        match miss {
            Miss::Misrouted(epoch) => {
                Stats::count(&stats.misrouted);
                if self.misrouted_at.is_none() {
                    self.misrouted_at = Some(Instant::now());
                    self.misrouted_by = Some(epoch);
                }
                if let Some(route) = route {
                    self.front.router.misrouted(route);
                    let owner = route.owner.as_ref().map(|owner| owner.member_id.as_str());
                    eprintln!(
                        "misrouted: {TOPIC} {} to {owner:?} by the table of epoch {epoch}",
                        route.partition
                    );
                }
                let wait_max = MISROUTE_WAIT_MIN * 2u32.pow(self.misroutes.min(8));
                self.misroutes += 1;
                self.sent += 1;
                (Wait::Newer(epoch), wait_max.min(TABLE_WAIT_MAX))
            }
            Miss::Unreachable(epoch) => {
                Stats::count(&stats.unreachable);
                self.sent += 1;
                (Wait::Newer(epoch), TABLE_WAIT_MAX)
            }
            Miss::NoOwner(epoch) => (Wait::Newer(epoch), TABLE_WAIT_MAX),
            Miss::Stale => (Wait::Fresh, TABLE_WAIT_MAX),
        }
    }
}

/// One try by `route`.
async fn try_route(
    front: &Front,
    route: &Route,
    method: reqwest::Method,
    key: &str,
    body: Option<Bytes>,
) -> Result<Response, Miss> {
    if !route.fresh {
        return Err(Miss::Stale);
    }
    let endpoint = route.owner.as_ref().and_then(|o| o.endpoint.as_deref());
    let Some(endpoint) = endpoint else {
        return Err(Miss::NoOwner(route.epoch));
    };
    let url = format!(
        "{}/kv/{}",
        endpoint.trim_end_matches('/'),
        path_segment(key)
    );
    let mut request = front.http.request(method, url);
    if let Some(body) = body {
        request = request.body(body);
    }
    Stats::count(&front.stats.forwarded);
    match request.send().await {
        // Gone or stalled: its partitions move once its lease ends, and
        // the table says so.
        Err(_) => Err(Miss::Unreachable(route.epoch)),
        Ok(response) if response.status() == StatusCode::MISDIRECTED_REQUEST => {
            Err(Miss::Misrouted(route.epoch))
        }
        Ok(response) => Ok(relay(response).await),
    }
}

/// The worker's answer as the router's.
async fn relay(response: reqwest::Response) -> Response {
    let status = response.status();
    let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
    match response.bytes().await {
        Ok(body) => {
            let mut answer = (status, body).into_response();
            if let Some(content_type) = content_type {
                answer
                    .headers_mut()
                    .insert(header::CONTENT_TYPE, content_type);
            }
            answer
        }
        Err(e) => error(
            StatusCode::BAD_GATEWAY,
            "bad_gateway",
            format!("the worker's answer broke off: {e}"),
        ),
    }
}

/// Waits until the router holds a table that may route differently, at
/// most `bound`.
async fn wait_for_table(router: &Router, wait: Wait, bound: Duration) {
    let until = Instant::now() + bound;
    let mut changes = router.changes();
    changes.mark_unchanged();
    while Instant::now() < until {
        let epoch = router.epoch();
        let done = match wait {
            Wait::Newer(held) => epoch.is_some_and(|epoch| epoch > held),
            Wait::Fresh => router.is_fresh(),
        };
        if done {
            return;
        }
        tokio::select! {
            _ = changes.changed() => {}
            () = tokio::time::sleep(FRESHNESS_POLL) => {}
        }
    }
}
