//! The router's side of the wire: the loop that keeps a blocking query on
//! `GET /v1/groups/{group}/routes` open (docs/routing.md, "Watching"), the
//! one-off fetch a misroute asks for, and what every answer does to the
//! table held. It owns the URLs, redirects, backoff and failover; what a
//! table says is `table`'s.
//!
//! Each answer's table is judged against the one held: a newer epoch
//! replaces it and is told to every change receiver; the same epoch only
//! moves its ownership bound on (the host read it later); a lower one
//! replaces it only when the host answered it to a query whose
//! `after_epoch` was above it (the held table came from a host that does
//! not serve the group any more, and this one is the truth).
//!
//! A blocking query waits at most half the held table's `valid_ms` (when
//! that is under the configured wait): in a quiet group the next answer,
//! with a renewed bound, comes well before the held one runs out, and the
//! table stays fresh.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use assignd_wire::{ErrorBody, RoutesBody};
use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, HeaderValue};
use tokio::sync::watch;

use super::RouterConfig;
use super::table::RouteTable;
use crate::ClientError;

/// The first pause after a failed query; it doubles up to
/// [`RETRY_BACKOFF_MAX`] and is back to this after an answer.
pub const RETRY_BACKOFF_MIN: Duration = Duration::from_millis(100);
pub const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(2);
/// The pause after the host refused the query (a wrong token, no such
/// group): the refusal is reported, and asked again this slowly.
pub const REFUSED_RETRY: Duration = Duration::from_secs(5);
/// The longest wait for a connection to a node: a dead node's address
/// that drops packets is given up on this soon, and the next URL tried.
const CONNECT_TIMEOUT_MAX: Duration = Duration::from_secs(5);
/// The longest `Retry-After` taken from the host, in seconds.
const RETRY_AFTER_S_MAX: u64 = 60;
/// The most redirects one query follows.
const REDIRECTS_MAX: u32 = 5;
/// The longest error body kept in a message.
const ERROR_BODY_BYTES_MAX: usize = 512;
/// The header in which the host says how long a query waited before it
/// read the table.
const WAITED_HEADER: &str = "assignd-routes-waited-ms";
/// The longest wait taken from that header: the host never holds a query
/// longer than its longest wait.
const WAITED_MS_MAX: u64 = super::WAIT_MS_MAX;

/// What the router and its loop share.
pub(crate) struct Shared {
    /// The table held; receivers are told each new epoch.
    pub tables: watch::Sender<Option<Arc<RouteTable>>>,
    /// The host's refusal of the last query, until an answer.
    pub refusal: watch::Sender<Option<ClientError>>,
    /// The last failure of any kind, for a `ready` that times out.
    pub last_error: Mutex<Option<ClientError>>,
    pub misroutes: AtomicU64,
    /// A misroute's fetch is under way.
    pub refreshing: AtomicBool,
    /// Which of the configured URLs queries go to now.
    pub url_index: AtomicUsize,
}

impl Shared {
    pub fn new() -> Self {
        Shared {
            tables: watch::channel(None).0,
            refusal: watch::channel(None).0,
            last_error: Mutex::new(None),
            misroutes: AtomicU64::new(0),
            refreshing: AtomicBool::new(false),
            url_index: AtomicUsize::new(0),
        }
    }

    pub fn table(&self) -> Option<Arc<RouteTable>> {
        self.tables.borrow().clone()
    }

    fn held_epoch(&self) -> Option<u64> {
        self.tables.borrow().as_ref().map(|table| table.epoch())
    }

    /// Takes `body`, answered to a query sent at `sent` with `after_epoch`
    /// that waited `waited` at the host (see the module doc).
    pub fn accept(
        &self,
        body: RoutesBody,
        sent: Instant,
        waited: Duration,
        after_epoch: Option<u64>,
    ) {
        // An answer: whatever the host refused before, it serves now.
        self.refusal
            .send_if_modified(|refusal| refusal.take().is_some());
        let held = self.held_epoch();
        if held == Some(body.epoch) {
            // The same table, confirmed later: its bound moves on, and
            // nobody is told (nothing changed).
            self.tables.send_if_modified(|table| {
                if let Some(current) = table.as_mut().filter(|t| t.epoch() == body.epoch) {
                    *current = Arc::new(current.confirmed(sent, waited));
                }
                false
            });
            return;
        }
        let older = held.is_some_and(|held| body.epoch < held);
        let host_says_older_is_right = after_epoch.is_some_and(|after| body.epoch < after);
        if older && !host_says_older_is_right {
            return;
        }
        // Indexed before the channel's lock is taken: readers never wait
        // for an index to be built.
        let table = Arc::new(RouteTable::new(body, sent, waited));
        self.tables.send_if_modified(|current| {
            let now_held = current.as_ref().map(|t| t.epoch());
            // Another answer may have come meanwhile: a newer one stays.
            let take = now_held == held || now_held.is_none_or(|e| table.epoch() > e);
            if take {
                *current = Some(Arc::clone(&table));
            }
            take
        });
    }

    fn failed(&self, error: ClientError) {
        *self.last_error.lock().unwrap_or_else(|e| e.into_inner()) = Some(error);
    }

    pub fn last_error(&self) -> Option<ClientError> {
        self.last_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// How one query ended.
enum Fetched {
    /// The table, and how long the query waited at the host before it was
    /// read.
    Table(RoutesBody, Duration),
    /// The host refused it (4xx): reported, retried slowly.
    Refused(ClientError),
    /// No answer, or a host failure: the next URL, after a pause.
    Failed {
        error: ClientError,
        retry_after: Option<Duration>,
    },
}

/// Sends routes queries.
pub(crate) struct Fetcher {
    client: reqwest::Client,
    /// The routes URL at each configured base URL, in order.
    urls: Vec<reqwest::Url>,
    /// `Bearer TOKEN`, marked sensitive.
    authorization: Option<HeaderValue>,
    /// The configured wait of a blocking query.
    wait_ms_configured: u64,
    request_timeout: Duration,
}

impl Fetcher {
    pub fn new(config: &RouterConfig) -> Result<Self, ClientError> {
        let urls = config
            .urls()
            .map(|base| crate::transport::group_route_url(base, &config.group, "routes"))
            .collect::<Result<Vec<_>, _>>()?;
        if urls.is_empty() {
            return Err(ClientError::Config("no host URL".into()));
        }
        let request_timeout = config.request_timeout();
        let client = reqwest::Client::builder()
            .connect_timeout(request_timeout.min(CONNECT_TIMEOUT_MAX))
            .pool_idle_timeout(crate::config::CONNECTION_IDLE_MAX)
            // Followed here, with the token kept (reqwest drops
            // `Authorization` on a redirect to another host).
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| ClientError::Config(format!("HTTP client: {e}")))?;
        let authorization = match &config.token {
            Some(token) => {
                let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                    .map_err(|_| ClientError::Config("the token is not a valid header".into()))?;
                value.set_sensitive(true);
                Some(value)
            }
            None => None,
        };
        Ok(Fetcher {
            client,
            urls,
            authorization,
            wait_ms_configured: config.wait_ms,
            request_timeout,
        })
    }

    /// How long a blocking query past `held` may wait: the configured
    /// wait, or half the table's `valid_ms` when that is shorter (and the
    /// table promises anything), so that the answer renews the bound before
    /// it runs out.
    pub fn wait_ms(&self, held: Option<&RouteTable>) -> u64 {
        match held.map(|table| table.body().valid_ms) {
            Some(valid_ms) if valid_ms > 0 => self.wait_ms_configured.min((valid_ms / 2).max(1)),
            _ => self.wait_ms_configured,
        }
    }

    /// One query to the `index`th URL: a blocking one past `after` (an
    /// epoch and a wait in ms) when given, else the table as it is.
    /// Redirects are followed.
    async fn fetch(&self, index: usize, after: Option<(u64, u64)>) -> Fetched {
        let mut url = self.urls[index % self.urls.len()].clone();
        if let Some((epoch, wait_ms)) = after {
            url.query_pairs_mut()
                .append_pair("after_epoch", &epoch.to_string())
                .append_pair("wait_ms", &wait_ms.to_string());
        }
        for _ in 0..=REDIRECTS_MAX {
            let mut get = self.client.get(url.clone()).timeout(self.request_timeout);
            if let Some(authorization) = &self.authorization {
                get = get.header(AUTHORIZATION, authorization.clone());
            }
            let answer = match get.send().await {
                Ok(answer) => answer,
                Err(e) => return transport_failure(&e),
            };
            match redirect(&url, &answer) {
                Some(to) => url = to,
                None => return read(answer).await,
            }
        }
        Fetched::Failed {
            error: ClientError::Transport(format!("more than {REDIRECTS_MAX} redirects")),
            retry_after: None,
        }
    }
}

/// The loop: a first query for the table as it is, then blocking queries
/// past each table's epoch, for as long as the router lives.
pub(crate) async fn run(fetcher: Arc<Fetcher>, shared: Arc<Shared>) {
    let mut backoff = RETRY_BACKOFF_MIN;
    loop {
        let (after_epoch, wait_ms) = {
            let held = shared.table();
            (
                held.as_ref().map(|t| t.epoch()),
                fetcher.wait_ms(held.as_deref()),
            )
        };
        let index = shared.url_index.load(Ordering::Relaxed);
        let sent = Instant::now();
        match fetcher
            .fetch(index, after_epoch.map(|e| (e, wait_ms)))
            .await
        {
            Fetched::Table(body, waited) => {
                shared.accept(body, sent, waited, after_epoch);
                backoff = RETRY_BACKOFF_MIN;
            }
            Fetched::Refused(error) => {
                tracing::warn!(%error, "the host refuses the routing table; asking again in {REFUSED_RETRY:?}");
                shared.failed(error.clone());
                shared.refusal.send_replace(Some(error));
                tokio::time::sleep(REFUSED_RETRY).await;
            }
            Fetched::Failed { error, retry_after } => {
                tracing::debug!(%error, url = %fetcher.urls[index], "routes query failed; trying the next URL");
                shared.failed(error);
                let next = (index + 1) % fetcher.urls.len();
                shared.url_index.store(next, Ordering::Relaxed);
                tokio::time::sleep(backoff.max(retry_after.unwrap_or_default())).await;
                backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
            }
        }
    }
}

/// A misroute's fetch: the table as it is now, at once, beside the loop's
/// blocking query.
pub(crate) async fn refresh(fetcher: Arc<Fetcher>, shared: Arc<Shared>) {
    let index = shared.url_index.load(Ordering::Relaxed);
    let sent = Instant::now();
    match fetcher.fetch(index, None).await {
        Fetched::Table(body, waited) => shared.accept(body, sent, waited, None),
        Fetched::Refused(error) | Fetched::Failed { error, .. } => {
            tracing::debug!(%error, "the refresh after a misroute failed");
        }
    }
    shared.refreshing.store(false, Ordering::Release);
}

/// Where a 307/308 answer sends the query, if it is one with a usable
/// `Location`.
fn redirect(url: &reqwest::Url, answer: &reqwest::Response) -> Option<reqwest::Url> {
    let redirected = matches!(
        answer.status(),
        StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT
    );
    if !redirected {
        return None;
    }
    answer
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|location| url.join(location).ok())
        .filter(|to| matches!(to.scheme(), "http" | "https"))
}

fn transport_failure(error: &reqwest::Error) -> Fetched {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    Fetched::Failed {
        error: ClientError::Transport(text),
        retry_after: None,
    }
}

/// Reads an answer that is not a redirect.
async fn read(answer: reqwest::Response) -> Fetched {
    let status = answer.status();
    let retry_after = answer
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(|s| Duration::from_secs(s.min(RETRY_AFTER_S_MAX)));
    let waited = waited(answer.headers());
    let body = match answer.bytes().await {
        Ok(body) => body,
        Err(e) => return transport_failure(&e),
    };
    if status.is_success() {
        return match serde_json::from_slice::<RoutesBody>(&body) {
            Ok(table) => Fetched::Table(table, waited),
            Err(e) => Fetched::Failed {
                error: ClientError::Decode(format!("routing table: {e}")),
                retry_after: None,
            },
        };
    }
    let (code, message) = match serde_json::from_slice::<ErrorBody>(&body) {
        Ok(error) => (error.error.code, error.error.message),
        Err(_) => {
            let text = String::from_utf8_lossy(&body);
            let mut cut = ERROR_BODY_BYTES_MAX.min(text.len());
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            let reason = status.canonical_reason().unwrap_or("error");
            (
                reason.to_lowercase().replace(' ', "_"),
                text[..cut].to_owned(),
            )
        }
    };
    let status = status.as_u16();
    if (400..500).contains(&status) {
        let error = ClientError::Api {
            status,
            code,
            message,
            retry_after,
        };
        // Too many requests: a pause, not a refusal.
        return if status == 429 {
            Fetched::Failed { error, retry_after }
        } else {
            Fetched::Refused(error)
        };
    }
    Fetched::Failed {
        error: ClientError::Server {
            status,
            message: format!("{code}: {message}"),
            retry_after,
        },
        retry_after,
    }
}

/// How long the query waited at the host before the table was read, as
/// its `Assignd-Routes-Waited-Ms` says (none or unreadable: no wait).
fn waited(headers: &reqwest::header::HeaderMap) -> Duration {
    let waited_ms = headers
        .get(WAITED_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    Duration::from_millis(waited_ms.min(WAITED_MS_MAX))
}
