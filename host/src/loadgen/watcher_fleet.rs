//! The watchers of `assignd loadgen watchers`: many blocking queries on
//! one group's routing table, each a loop as the client routers run it
//! (docs/routing.md, "Watching"): a first read, then `?after_epoch=E`
//! with the router's wait, asked again at once after every answer. Each
//! watcher keeps the epoch it holds and when that epoch's answer arrived,
//! which the run reads to time a change. It owns the watchers' loops,
//! each on its own connection (`watcher_http`); nothing here changes the
//! table.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::Deserialize;
use tokio::task::JoinHandle;

use super::watcher_http::Connection;

/// The pause between two watchers' first requests, so that ten thousand
/// connections open over two seconds, not in one burst past the host's
/// accept backlog.
const START_SPACING: Duration = Duration::from_micros(200);
/// How long a watcher waits after an error before asking again, when the
/// host says nothing (`Retry-After`).
const RETRY_AFTER_DEFAULT: Duration = Duration::from_secs(1);
/// What a request may take beyond its blocking wait before it counts as
/// failed.
const REQUEST_SLACK: Duration = Duration::from_secs(30);

/// One watcher's view: the epoch it holds (0: none yet) and when the
/// answer that brought it arrived, in ns since the fleet's origin.
#[derive(Default)]
pub(super) struct Slot {
    epoch: AtomicU64,
    arrived_ns: AtomicU64,
}

impl Slot {
    /// The epoch held, and when it arrived (ns since the origin).
    pub fn held(&self) -> (u64, u64) {
        let epoch = self.epoch.load(Ordering::Acquire);
        (epoch, self.arrived_ns.load(Ordering::Relaxed))
    }
}

/// Answers and errors the watchers saw.
#[derive(Default)]
pub(super) struct Counts {
    pub answers: AtomicU64,
    pub errors: AtomicU64,
    /// Answers refused `503` (past `--routes-watchers-max`), of `errors`.
    pub refused: AtomicU64,
}

/// The running watchers.
pub(super) struct WatcherFleet {
    pub slots: Arc<[Slot]>,
    pub counts: Arc<Counts>,
    /// The instant every slot's arrival is counted from.
    pub origin: Instant,
    loops: Vec<JoinHandle<()>>,
}

/// Where and how the watchers ask.
#[derive(Clone)]
pub(super) struct Target {
    /// The host's base URL, `http://host:port`.
    pub host: String,
    /// `/v1/groups/{group}/routes`.
    pub path: String,
    pub reader_token: String,
    /// The router's configured wait, in ms.
    pub wait_ms: u64,
}

/// What a watcher reads of an answer.
#[derive(Deserialize)]
struct TableHead {
    epoch: u64,
    valid_ms: u64,
}

/// A router's wait for its next blocking query: half the held table's
/// promise, so that a fresh answer arrives before it runs out, or the
/// configured wait if shorter or if the table promises nothing.
pub(super) fn router_wait_ms(wait_ms: u64, valid_ms: u64) -> u64 {
    if valid_ms == 0 {
        wait_ms
    } else {
        wait_ms.min(valid_ms / 2).max(1)
    }
}

impl WatcherFleet {
    /// Starts `count` watchers on the current runtime, their first
    /// requests spaced by [`START_SPACING`]. Each one's first blocking
    /// query waits a share of the router's wait by its index, so that
    /// their later queries are spread over the wait as independent
    /// routers' would be, not all due at once.
    pub fn start(target: Target, count: u32) -> Result<Self, String> {
        let slots: Arc<[Slot]> = (0..count).map(|_| Slot::default()).collect();
        let counts = Arc::new(Counts::default());
        let origin = Instant::now();
        let loops = (0..count)
            .map(|i| {
                let watcher = Watcher {
                    connection: Connection::new(&target.host)?,
                    target: target.clone(),
                    slot: slots.clone(),
                    index: i as usize,
                    counts: counts.clone(),
                    origin,
                    spread: f64::from(i + 1) / f64::from(count),
                };
                Ok(tokio::spawn(async move {
                    tokio::time::sleep(START_SPACING * i).await;
                    watcher.run().await;
                }))
            })
            .collect::<Result<_, String>>()?;
        Ok(WatcherFleet {
            slots,
            counts,
            origin,
            loops,
        })
    }

    /// How many watchers hold a table.
    pub fn ready(&self) -> usize {
        self.slots.iter().filter(|s| s.held().0 != 0).count()
    }

    /// How many watchers hold an epoch past `epoch`.
    pub fn past(&self, epoch: u64) -> usize {
        self.slots.iter().filter(|s| s.held().0 > epoch).count()
    }

    /// Ends every watcher's loop (their connections close).
    pub fn stop(self) {
        for watcher in self.loops {
            watcher.abort();
        }
    }
}

/// One watcher's loop.
struct Watcher {
    connection: Connection,
    target: Target,
    slot: Arc<[Slot]>,
    index: usize,
    counts: Arc<Counts>,
    origin: Instant,
    /// The share of the router's wait its first blocking query waits.
    spread: f64,
}

impl Watcher {
    async fn run(mut self) {
        let mut held: Option<TableHead> = None;
        let mut first_blocking = true;
        loop {
            let path = match &held {
                None => self.target.path.clone(),
                Some(table) => {
                    let mut wait_ms = router_wait_ms(self.target.wait_ms, table.valid_ms);
                    if first_blocking {
                        wait_ms = ((wait_ms as f64 * self.spread) as u64).max(1);
                        first_blocking = false;
                    }
                    format!(
                        "{}?after_epoch={}&wait_ms={wait_ms}",
                        self.target.path, table.epoch
                    )
                }
            };
            match self.ask(&path).await {
                Ok(table) => {
                    let slot = &self.slot[self.index];
                    if held.as_ref().is_none_or(|h| h.epoch != table.epoch) {
                        let arrived = self.origin.elapsed().as_nanos() as u64;
                        slot.arrived_ns.store(arrived, Ordering::Relaxed);
                        slot.epoch.store(table.epoch, Ordering::Release);
                    }
                    held = Some(table);
                }
                Err(pause) => tokio::time::sleep(pause).await,
            }
        }
    }

    /// One request: the answer's epoch and promise, or how long to pause
    /// before the next try.
    async fn ask(&mut self, path: &str) -> Result<TableHead, Duration> {
        let limit = Duration::from_millis(self.target.wait_ms) + REQUEST_SLACK;
        let token = &self.target.reader_token;
        let answer = tokio::time::timeout(limit, self.connection.get(path, token)).await;
        let answer = match answer {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) | Err(_) => return Err(self.failed(false, None)),
        };
        if answer.status != 200 {
            return Err(self.failed(answer.status == 503, answer.retry_after));
        }
        match serde_json::from_slice::<TableHead>(&answer.body) {
            Ok(table) => {
                self.counts.answers.fetch_add(1, Ordering::Relaxed);
                Ok(table)
            }
            Err(_) => Err(self.failed(false, None)),
        }
    }

    /// Counts a failed request; the pause before the next.
    fn failed(&mut self, refused: bool, retry_after: Option<Duration>) -> Duration {
        self.counts.errors.fetch_add(1, Ordering::Relaxed);
        if refused {
            self.counts.refused.fetch_add(1, Ordering::Relaxed);
        }
        retry_after.unwrap_or(RETRY_AFTER_DEFAULT)
    }
}

#[cfg(test)]
mod tests {
    use super::router_wait_ms;

    #[test]
    fn a_router_waits_half_the_promise_or_its_configured_wait() {
        assert_eq!(router_wait_ms(20_000, 2_000), 1_000);
        assert_eq!(router_wait_ms(20_000, 0), 20_000);
        assert_eq!(router_wait_ms(500, 2_000), 500);
        assert_eq!(router_wait_ms(20_000, 1), 1);
    }
}
