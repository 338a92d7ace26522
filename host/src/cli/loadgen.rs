//! `assignd loadgen`: many simulated members against a running host, to
//! measure what a fleet sees. Each member is a tokio task that joins a
//! group, heartbeats at the group's interval (or `--interval-ms`, or back
//! to back with `--interval-ms 0` for peak throughput), reports what it
//! holds, releases revoked tasks by its next heartbeat, and reports learner
//! lags that fall as it "replays". It reports heartbeats per second, their
//! latency (p50, p99, p99.9), errors, and how many times two members were
//! told they own the same task at once (must be 0).
//!
//! Members speak the wire format of `assignd_client::wire` directly rather
//! than through `Member`: the load generator needs each request's latency
//! and a back-to-back mode the library rightly does not offer.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use assignd_client::wire::{HeartbeatRequest, HeartbeatResponse, Task};
use clap::Args;
use serde_json::json;

use super::{EXIT_BAD_INPUT, Failure};

#[derive(Debug, Args)]
pub struct LoadgenArgs {
    /// The host's base URL.
    #[arg(long, default_value = "http://127.0.0.1:7070")]
    host: String,
    /// Groups to create (named `{prefix}-0` …).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    groups: u32,
    /// Members per group.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    members: u32,
    /// Tasks (partitions of one topic) per group.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    tasks: u32,
    /// How long to measure, after every member joined.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Heartbeat interval of the created groups, in ms; 0 makes every
    /// member heartbeat back to back (peak throughput).
    #[arg(long, default_value_t = 3_000)]
    interval_ms: u64,
    /// The group config's assignor.
    #[arg(long, default_value = "sticky")]
    assignor: String,
    /// Group name prefix.
    #[arg(long, default_value = "loadgen")]
    prefix: String,
    /// Write the figures as JSON here.
    #[arg(long, value_name = "FILE.json")]
    report: Option<PathBuf>,
    /// The host's admin token, to create the groups (sent as
    /// `Authorization: Bearer TOKEN`); the heartbeats need none.
    #[arg(
        long,
        env = "ASSIGND_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
}

fn failure(message: String) -> Failure {
    Failure {
        message,
        exit_code: EXIT_BAD_INPUT,
    }
}

/// Figures shared by every member task.
struct Shared {
    client: reqwest::Client,
    host: String,
    /// Latencies of heartbeats completed while measuring, in µs.
    latencies: Mutex<hdrhistogram::Histogram<u64>>,
    measuring: AtomicBool,
    stop: AtomicBool,
    heartbeats: AtomicU64,
    errors: AtomicU64,
    /// Who was last told each task is theirs: (group, task) → member.
    owners: Mutex<HashMap<(u32, Task), u64>>,
    double_ownership: AtomicU64,
    joined: AtomicU64,
}

pub fn loadgen(args: LoadgenArgs) -> Result<(), Failure> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| failure(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(run(args))
}

async fn run(args: LoadgenArgs) -> Result<(), Failure> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(4096)
        .build()
        .map_err(|e| failure(format!("HTTP client: {e}")))?;
    let host = args.host.trim_end_matches('/').to_owned();
    let interval_ms = args.interval_ms.max(1);
    for g in 0..args.groups {
        let config = json!({
            "topics": [{"name": "orders", "partitions": args.tasks}],
            "assignor": args.assignor,
            "heartbeat_interval_ms": interval_ms,
            "session_timeout_ms": (interval_ms * 10).max(10_000),
            "expansion_timeout_ms": 500,
            "learners": "off",
        });
        let url = format!("{host}/v1/groups/{}-{g}", args.prefix);
        let mut request = client.put(&url).json(&config);
        if let Some(token) = &args.token {
            request = request.bearer_auth(token);
        }
        let answer = request
            .send()
            .await
            .map_err(|e| failure(format!("PUT {url}: {e}")))?;
        if !answer.status().is_success() {
            let status = answer.status();
            let body = answer.text().await.unwrap_or_default();
            return Err(failure(format!("PUT {url}: {status}: {body}")));
        }
    }
    let shared = Arc::new(Shared {
        client,
        host,
        latencies: Mutex::new(
            hdrhistogram::Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
        ),
        measuring: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        heartbeats: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        owners: Mutex::new(HashMap::new()),
        double_ownership: AtomicU64::new(0),
        joined: AtomicU64::new(0),
    });
    let back_to_back = args.interval_ms == 0;
    let mut tasks = Vec::new();
    for g in 0..args.groups {
        for m in 0..args.members {
            let id = u64::from(g) * u64::from(args.members) + u64::from(m);
            tasks.push(tokio::spawn(member(
                shared.clone(),
                format!("{}-{g}", args.prefix),
                g,
                id,
                back_to_back,
            )));
        }
    }
    let total = u64::from(args.groups) * u64::from(args.members);
    let joined_by = Instant::now() + Duration::from_secs(120);
    while shared.joined.load(Ordering::Relaxed) < total {
        if Instant::now() > joined_by {
            return Err(failure(format!(
                "only {} of {total} members joined in 120 s",
                shared.joined.load(Ordering::Relaxed)
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Let the first targets settle before measuring a steady state.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    let started = Instant::now();
    let before = shared.heartbeats.load(Ordering::Relaxed);
    let errors_before = shared.errors.load(Ordering::Relaxed);
    shared.measuring.store(true, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs_f64(args.duration)).await;
    shared.measuring.store(false, Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    let heartbeats = shared.heartbeats.load(Ordering::Relaxed) - before;
    let errors = shared.errors.load(Ordering::Relaxed) - errors_before;
    shared.stop.store(true, Ordering::Relaxed);
    for task in tasks {
        let _ = task.await;
    }
    let latencies = shared.latencies.lock().expect("no panics").clone();
    let ms = |q: f64| latencies.value_at_quantile(q) as f64 / 1e3;
    let report = json!({
        "groups": args.groups,
        "members": total,
        "tasks_per_group": args.tasks,
        "interval_ms": args.interval_ms,
        "duration_s": elapsed,
        "heartbeats": heartbeats,
        "heartbeats_per_s": heartbeats as f64 / elapsed,
        "latency_ms": {"p50": ms(0.5), "p99": ms(0.99), "p999": ms(0.999), "max": latencies.max() as f64 / 1e3},
        "errors": errors,
        "double_ownership": shared.double_ownership.load(Ordering::Relaxed),
    });
    println!(
        "members={total} groups={} heartbeats_per_s={:.0} p50_ms={:.2} p99_ms={:.2} p999_ms={:.2} errors={errors} double_ownership={}",
        args.groups,
        heartbeats as f64 / elapsed,
        ms(0.5),
        ms(0.99),
        ms(0.999),
        shared.double_ownership.load(Ordering::Relaxed)
    );
    if let Some(path) = &args.report {
        let text = serde_json::to_string_pretty(&report).expect("JSON");
        std::fs::write(path, text)
            .map_err(|e| failure(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(())
}

/// One simulated member until `stop`: join, then heartbeat.
async fn member(shared: Arc<Shared>, group: String, group_index: u32, id: u64, back_to_back: bool) {
    let url = format!("{}/v1/groups/{group}/heartbeat", shared.host);
    let mut request = HeartbeatRequest {
        member_id: String::new(),
        member_name: None,
        member_epoch: 0,
        topics: Some(vec!["orders".into()]),
        rack: None,
        capacity: 1,
        owned: Vec::new(),
        lags: Vec::new(),
        drain: false,
    };
    let mut active: BTreeSet<Task> = BTreeSet::new();
    let mut joined = false;
    // Spread the first beats over the interval, as a real fleet would.
    let mut next = Instant::now() + Duration::from_millis(id % 1_000);
    while !shared.stop.load(Ordering::Relaxed) {
        tokio::time::sleep_until(next.into()).await;
        let sent = Instant::now();
        let answer = shared.client.post(&url).json(&request).send().await;
        let response = match answer {
            Ok(answer) if answer.status().is_success() => answer.json::<HeartbeatResponse>().await,
            Ok(answer) => {
                shared.errors.fetch_add(1, Ordering::Relaxed);
                let text = answer.text().await.unwrap_or_default();
                tracing::debug!(%group, id, %text, "heartbeat refused");
                // Start over as a new member.
                release(&shared, group_index, id, &mut active);
                request.member_id.clear();
                request.member_epoch = 0;
                request.topics = Some(vec!["orders".into()]);
                next = Instant::now() + Duration::from_millis(100);
                continue;
            }
            Err(e) => Err(e),
        };
        let latency = sent.elapsed();
        let response = match response {
            Ok(response) => response,
            Err(e) => {
                shared.errors.fetch_add(1, Ordering::Relaxed);
                tracing::debug!(%group, id, error = %e, "heartbeat failed");
                next = Instant::now() + Duration::from_millis(100);
                continue;
            }
        };
        if shared.measuring.load(Ordering::Relaxed) {
            shared.heartbeats.fetch_add(1, Ordering::Relaxed);
            let _ = shared
                .latencies
                .lock()
                .expect("no panics")
                .record(latency.as_micros().max(1) as u64);
        }
        if !joined {
            joined = true;
            shared.joined.fetch_add(1, Ordering::Relaxed);
        }
        // Revoked tasks stop now and are reported released next beat;
        // granted ones start now.
        {
            let mut owners = shared.owners.lock().expect("no panics");
            for task in active.difference(&response.active) {
                if owners.get(&(group_index, task.clone())) == Some(&id) {
                    owners.remove(&(group_index, task.clone()));
                }
            }
            for task in response.active.difference(&active) {
                if let Some(other) = owners.insert((group_index, task.clone()), id)
                    && other != id
                {
                    shared.double_ownership.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
        active = response.active.clone();
        request.member_id = response.member_id;
        request.member_epoch = response.member_epoch;
        request.topics = None;
        request.owned = active.iter().cloned().collect();
        request.lags = response
            .learner
            .iter()
            .map(|t| (t.topic.clone(), t.partition, 0))
            .collect();
        next = if back_to_back {
            Instant::now()
        } else {
            sent + Duration::from_millis(response.heartbeat_interval_ms)
        };
    }
    // Leave, so the host's state ends clean.
    if !request.member_id.is_empty() {
        request.member_epoch = -1;
        let _ = shared.client.post(&url).json(&request).send().await;
    }
    release(&shared, group_index, id, &mut active);
}

fn release(shared: &Shared, group_index: u32, id: u64, active: &mut BTreeSet<Task>) {
    let mut owners = shared.owners.lock().expect("no panics");
    for task in std::mem::take(active) {
        if owners.get(&(group_index, task.clone())) == Some(&id) {
            owners.remove(&(group_index, task));
        }
    }
}
