//! The router: who owns a key right now, and at what address, for
//! everyone outside the group (a gateway, a producer, a dashboard). It
//! keeps the group's routing table (docs/routing.md) with one background
//! task that holds a blocking query open on the host, and answers lookups
//! from an index of the newest table without a round trip:
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use assignd_client::{Router, RouterConfig};
//!
//! let router = Router::start(RouterConfig::new("http://127.0.0.1:7070", "orders")
//!     .with_token("the-groups-reader-token"))?;
//! router.ready(Duration::from_secs(5)).await?;
//! let route = router.owner_of("orders", "customer-42")?;
//! match route.owner.as_ref().and_then(|owner| owner.endpoint.as_deref()) {
//!     Some(endpoint) => { /* send the request there; if the member answers
//!                          "not mine": */ router.misrouted(&route); }
//!     None => { /* nobody owns it now: wait for the next table */ }
//! }
//! # Ok(())
//! # }
//! ```
//!
//! The router owns its configuration and public face; `table` reads a
//! table into its index, `watcher` fetches tables and judges each answer.
//! Dropping the router stops its task.

mod table;
mod watcher;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::ClientError;
pub use table::{Route, RouteError, RouteTable};
use watcher::{Fetcher, Shared};
pub use watcher::{REFUSED_RETRY, RETRY_BACKOFF_MAX, RETRY_BACKOFF_MIN};

/// How long the host holds a blocking query open, by default (and at
/// most: the host caps it there).
pub const WAIT_MS_DEFAULT: u64 = 20_000;
/// The longest wait the host honours.
pub const WAIT_MS_MAX: u64 = 20_000;
/// How much longer than the wait a query may take before it counts as
/// lost, by default.
pub const REQUEST_TIMEOUT_PAST_WAIT: Duration = Duration::from_secs(10);

/// Where the router asks, and with which credential.
#[derive(Clone, PartialEq, Eq)]
pub struct RouterConfig {
    /// The host's base URL; for a cluster, several nodes' separated by
    /// commas, tried in turn while none answers.
    pub url: String,
    pub group: String,
    /// The group's reader token or the admin token, sent as
    /// `Authorization: Bearer TOKEN`.
    pub token: Option<String>,
    /// How long the host may hold a blocking query before it answers with
    /// the table unchanged (1 to [`WAIT_MS_MAX`]). While the table held
    /// promises an ownership bound, a query waits at most half its
    /// `valid_ms`, so that the next answer renews the bound before it runs
    /// out (the host's default `valid_ms`, 2000, makes that a query a
    /// second while nothing changes).
    pub wait_ms: u64,
    /// How long one query may take before it counts as lost; `None`:
    /// `wait_ms` plus [`REQUEST_TIMEOUT_PAST_WAIT`].
    pub request_timeout: Option<Duration>,
}

impl std::fmt::Debug for RouterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouterConfig")
            .field("url", &self.url)
            .field("group", &self.group)
            // Never printed.
            .field("token", &self.token.as_ref().map(|_| ".."))
            .field("wait_ms", &self.wait_ms)
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}

impl RouterConfig {
    /// A router of `group`'s table at `url` (one base URL, or several
    /// separated by commas), without a token.
    pub fn new(url: impl Into<String>, group: impl Into<String>) -> Self {
        RouterConfig {
            url: url.into(),
            group: group.into(),
            token: None,
            wait_ms: WAIT_MS_DEFAULT,
            request_timeout: None,
        }
    }

    /// Sends `token` (the group's reader token, or the admin token).
    pub fn with_token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    pub fn with_wait_ms(mut self, wait_ms: u64) -> Self {
        self.wait_ms = wait_ms;
        self
    }

    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = Some(timeout);
        self
    }

    /// The base URLs in [`RouterConfig::url`].
    pub fn urls(&self) -> impl Iterator<Item = &str> {
        crate::config::split_urls(&self.url)
    }

    /// The request timeout in force.
    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
            .unwrap_or(Duration::from_millis(self.wait_ms) + REQUEST_TIMEOUT_PAST_WAIT)
    }

    /// Checks what can be checked without asking the host.
    pub fn check(&self) -> Result<(), ClientError> {
        let fail = |m: &str| Err(ClientError::Config(m.to_owned()));
        if self.group.is_empty() {
            return fail("the group name is empty");
        }
        if !(1..=WAIT_MS_MAX).contains(&self.wait_ms) {
            return fail("wait_ms must be 1 to 20000");
        }
        if self.request_timeout().is_zero() {
            return fail("the request timeout must be above zero");
        }
        if let Some(token) = &self.token
            && (token.is_empty() || !token.bytes().all(|b| b.is_ascii_graphic()))
        {
            return fail("a token must be visible ASCII characters, at least one");
        }
        Ok(())
    }
}

/// Why [`Router::ready`] failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RouterError {
    /// The host refused the query: 401 (no token), 403 (a token that is
    /// neither the group's reader token nor the admin token), 404 (no such
    /// group). The router keeps asking every [`REFUSED_RETRY`].
    #[error("the host refuses the routing table: {0}")]
    Refused(ClientError),
    /// No table came in time.
    #[error(
        "no routing table within {waited:?} (last error: {})",
        .last_error.as_ref().map_or_else(|| "none".to_owned(), ToString::to_string)
    )]
    Timeout {
        waited: Duration,
        last_error: Option<ClientError>,
    },
}

/// A group's routing table, kept up to date by a background task; see the
/// module doc. Dropping it stops the task.
pub struct Router {
    shared: Arc<Shared>,
    fetcher: Arc<Fetcher>,
    runtime: tokio::runtime::Handle,
    task: JoinHandle<()>,
    /// A misroute's fetch, if one was started.
    refresh: Mutex<Option<JoinHandle<()>>>,
}

impl Router {
    /// Starts the router's task on the current Tokio runtime; it asks for
    /// the table at once. Fails with [`ClientError::Config`] on a config
    /// that cannot work or outside a Tokio runtime.
    pub fn start(config: RouterConfig) -> Result<Router, ClientError> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            ClientError::Config("Router::start must be called within a Tokio runtime".into())
        })?;
        config.check()?;
        let fetcher = Arc::new(Fetcher::new(&config)?);
        let shared = Arc::new(Shared::new());
        let task = runtime.spawn(watcher::run(Arc::clone(&fetcher), Arc::clone(&shared)));
        Ok(Router {
            shared,
            fetcher,
            runtime,
            task,
            refresh: Mutex::new(None),
        })
    }

    /// Waits for the first table, at most `timeout`. Fails at once when the
    /// host refuses the query (a wrong token, no such group), with its
    /// error code and message.
    pub async fn ready(&self, timeout: Duration) -> Result<(), RouterError> {
        let mut tables = self.shared.tables.subscribe();
        let mut refusal = self.shared.refusal.subscribe();
        let first = async {
            loop {
                if tables.borrow_and_update().is_some() {
                    return Ok(());
                }
                if let Some(error) = refusal.borrow_and_update().clone() {
                    return Err(RouterError::Refused(error));
                }
                // Both senders live as long as `self`: neither closes.
                tokio::select! {
                    _ = tables.changed() => {}
                    _ = refusal.changed() => {}
                }
            }
        };
        match tokio::time::timeout(timeout, first).await {
            Ok(result) => result,
            Err(_) => Err(RouterError::Timeout {
                waited: timeout,
                last_error: self.shared.last_error(),
            }),
        }
    }

    /// Where `key` (bytes, or a string's UTF-8 bytes) of `topic` goes, by
    /// the newest table: its partition as Kafka's default partitioner picks
    /// it, and that partition's owner.
    pub fn owner_of(&self, topic: &str, key: impl AsRef<[u8]>) -> Result<Route, RouteError> {
        self.table()
            .ok_or(RouteError::NoTable)?
            .owner_of(topic, key)
    }

    /// The route of one partition of `topic`, by the newest table.
    pub fn owner_of_partition(&self, topic: &str, partition: u32) -> Result<Route, RouteError> {
        self.table()
            .ok_or(RouteError::NoTable)?
            .owner_of_partition(topic, partition)
    }

    /// The newest table, if one came.
    pub fn table(&self) -> Option<Arc<RouteTable>> {
        self.shared.table()
    }

    /// The newest table's epoch.
    pub fn epoch(&self) -> Option<u64> {
        self.table().map(|table| table.epoch())
    }

    /// Whether the newest table is within its ownership bound.
    pub fn is_fresh(&self) -> bool {
        self.table().is_some_and(|table| table.is_fresh())
    }

    /// How long ago the query that got (or last confirmed) the newest
    /// table was sent.
    pub fn age(&self) -> Option<Duration> {
        self.table().map(|table| table.age())
    }

    /// A receiver told of every new table (each change of epoch; not of an
    /// answer that only confirms the table held).
    pub fn changes(&self) -> watch::Receiver<Option<Arc<RouteTable>>> {
        self.shared.tables.subscribe()
    }

    /// A member answered a request sent by `route` with "not mine": counts
    /// it, and when `route` came from the newest table, asks the host for
    /// the table now (beside the blocking query), once at a time.
    pub fn misrouted(&self, route: &Route) {
        self.shared.misroutes.fetch_add(1, Ordering::Relaxed);
        if self.epoch().is_some_and(|held| route.epoch < held) {
            return;
        }
        if self.shared.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let fetch = watcher::refresh(Arc::clone(&self.fetcher), Arc::clone(&self.shared));
        let task = self.runtime.spawn(fetch);
        *self.refresh.lock().unwrap_or_else(|e| e.into_inner()) = Some(task);
    }

    /// How many misroutes were reported.
    pub fn misroutes(&self) -> u64 {
        self.shared.misroutes.load(Ordering::Relaxed)
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        self.task.abort();
        if let Some(refresh) = self
            .refresh
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            refresh.abort();
        }
    }
}

impl std::fmt::Debug for Router {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Router")
            .field("epoch", &self.epoch())
            .field("misroutes", &self.misroutes())
            .finish()
    }
}
