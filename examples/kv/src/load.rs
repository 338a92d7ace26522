//! `assignd-kv load`: a load generator that checks nothing acknowledged is
//! lost. Each of `--keys` keys has its own loop that alternates a `PUT` of
//! the next value (1, 2, 3, …) with a `GET`, all keys together at
//! `--rate` requests per second, for `--seconds` (or until SIGTERM or
//! Ctrl-C). A request the router refuses (503) or that fails is tried
//! again until it succeeds, at most [`OPERATION_WITHIN`].
//!
//! A `GET` that answers an older value than the newest one acknowledged
//! for its key (or none) counts as **lost**. One JSON summary line at the
//! end; the exit status is 1 if anything was lost.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::StatusCode;
use tokio::sync::watch;
use tokio::time::{Instant, MissedTickBehavior};

use crate::http::path_segment;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The router's base URL.
    #[arg(long)]
    router: String,
    #[arg(long, default_value_t = 100)]
    keys: u32,
    /// Requests per second, all keys together.
    #[arg(long, default_value_t = 200.0)]
    rate: f64,
    #[arg(long, default_value_t = 30)]
    seconds: u64,
}

/// How long one operation is tried before it counts as unfinished.
pub const OPERATION_WITHIN: Duration = Duration::from_secs(30);
/// The pause before trying a refused or failed request again.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The most lost reads described in the summary.
const LOST_EXAMPLES_MAX: usize = 10;

#[derive(Default)]
struct Counts {
    puts_ok: AtomicU64,
    gets_ok: AtomicU64,
    /// Answers 503 (no owner in time), each tried again.
    refused: AtomicU64,
    /// Other failures (connection, 5xx, timeouts), each tried again.
    failed: AtomicU64,
    /// Operations given up after [`OPERATION_WITHIN`].
    unfinished: AtomicU64,
    lost: AtomicU64,
}

struct Load {
    http: reqwest::Client,
    router: String,
    counts: Counts,
    lost_examples: std::sync::Mutex<Vec<serde_json::Value>>,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.keys > 0, "--keys must be at least 1");
    anyhow::ensure!(args.rate > 0.0, "--rate must be above 0");
    let load = Arc::new(Load {
        http: reqwest::Client::builder()
            .timeout(REQUEST_TIMEOUT)
            .build()?,
        router: args.router.trim_end_matches('/').to_owned(),
        counts: Counts::default(),
        lost_examples: Default::default(),
    });
    let (stop, stopped) = watch::channel(false);
    let period = Duration::from_secs_f64(f64::from(args.keys) / args.rate);
    let loops: Vec<_> = (0..args.keys)
        .map(|i| {
            let offset = period.mul_f64(f64::from(i) / f64::from(args.keys));
            let load = Arc::clone(&load);
            tokio::spawn(key_loop(
                load,
                format!("key-{i}"),
                period,
                offset,
                stopped.clone(),
            ))
        })
        .collect();
    let mut signals = crate::signals::Signals::install()?;
    tokio::select! {
        () = tokio::time::sleep(Duration::from_secs(args.seconds)) => {}
        () = signals.next() => {}
    }
    let _ = stop.send(true);
    for key_loop in loops {
        key_loop.await?;
    }
    let counts = &load.counts;
    let count = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
    let lost = count(&counts.lost);
    let summary = serde_json::json!({
        "puts_ok": count(&counts.puts_ok),
        "gets_ok": count(&counts.gets_ok),
        "refused": count(&counts.refused),
        "failed": count(&counts.failed),
        "unfinished": count(&counts.unfinished),
        "lost": lost,
        "lost_examples": *load.lost_examples.lock().unwrap_or_else(|e| e.into_inner()),
    });
    println!("{summary}");
    if lost > 0 {
        std::process::exit(1);
    }
    Ok(())
}

/// One key's operations, one at a time every `period`, until `stopped`.
async fn key_loop(
    load: Arc<Load>,
    key: String,
    period: Duration,
    offset: Duration,
    stopped: watch::Receiver<bool>,
) {
    tokio::time::sleep(offset).await;
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let url = format!("{}/kv/{}", load.router, path_segment(&key));
    // The newest value acknowledged, and the next one to write.
    let mut acknowledged: Option<u64> = None;
    let mut next = 1u64;
    let mut put_next = true;
    while !*stopped.borrow() {
        ticker.tick().await;
        if put_next {
            if load.put(&url, next).await {
                acknowledged = Some(next);
            }
            next += 1;
        } else if let Some(read) = load.get(&url).await {
            let older = acknowledged.is_some_and(|acked| read.is_none_or(|value| value < acked));
            if older {
                load.lost(&key, acknowledged, read);
            }
        }
        put_next = !put_next;
    }
}

impl Load {
    /// PUTs `value`; true once acknowledged.
    async fn put(&self, url: &str, value: u64) -> bool {
        let request = || self.http.put(url).body(value.to_string()).send();
        self.until_answered(request, |status| status == StatusCode::OK)
            .await
            .inspect(|_| {
                self.counts.puts_ok.fetch_add(1, Ordering::Relaxed);
            })
            .is_some()
    }

    /// GETs the key: `Some(None)` if it has no value, `None` if no answer
    /// came in time.
    async fn get(&self, url: &str) -> Option<Option<u64>> {
        let request = || self.http.get(url).send();
        let answered = |status| status == StatusCode::OK || status == StatusCode::NOT_FOUND;
        let (status, body) = self.until_answered(request, answered).await?;
        self.counts.gets_ok.fetch_add(1, Ordering::Relaxed);
        // A value this load did not write counts as none.
        Some(
            (status == StatusCode::OK)
                .then(|| body.trim().parse().ok())
                .flatten(),
        )
    }

    /// Sends `request` until its status is `answered`, at most
    /// [`OPERATION_WITHIN`]: the status and body, or `None`.
    async fn until_answered<F, R>(
        &self,
        request: F,
        answered: impl Fn(StatusCode) -> bool,
    ) -> Option<(StatusCode, String)>
    where
        F: Fn() -> R,
        R: Future<Output = reqwest::Result<reqwest::Response>>,
    {
        let deadline = Instant::now() + OPERATION_WITHIN;
        loop {
            match request().await {
                Ok(response) if answered(response.status()) => {
                    let status = response.status();
                    if let Ok(body) = response.text().await {
                        return Some((status, body));
                    }
                    self.counts.failed.fetch_add(1, Ordering::Relaxed);
                }
                Ok(response) if response.status() == StatusCode::SERVICE_UNAVAILABLE => {
                    self.counts.refused.fetch_add(1, Ordering::Relaxed);
                }
                Ok(_) | Err(_) => {
                    self.counts.failed.fetch_add(1, Ordering::Relaxed);
                }
            }
            if Instant::now() + RETRY_PAUSE >= deadline {
                self.counts.unfinished.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    fn lost(&self, key: &str, acknowledged: Option<u64>, read: Option<u64>) {
        self.counts.lost.fetch_add(1, Ordering::Relaxed);
        let mut examples = self.lost_examples.lock().unwrap_or_else(|e| e.into_inner());
        if examples.len() < LOST_EXAMPLES_MAX {
            examples
                .push(serde_json::json!({"key": key, "acknowledged": acknowledged, "read": read}));
        }
    }
}
