//! `assignd loadgen watchers`: what the routing table's watchers cost a
//! host and how fast a change reaches them (docs/benchmarks.md,
//! "Routing"). It creates one group with a reader token, starts its
//! members (the client library, each with an endpoint) and a tagger,
//! then measures, in one run: the host's CPU over an idle window without
//! watchers and another with them (from /proc, given `--host-pid`), its
//! RSS after each, and for each of `--changes` changes (a tagger's
//! heartbeat with new metadata, at an instant it records) the time until
//! every watcher held the new table. It owns the run's steps and its
//! report; `watcher_fleet` runs the watchers, `tagger` makes the changes.

use std::time::{Duration, Instant};

use assignd_client::{Event, Member, MemberConfig, MemberHandle, NoLags};
use serde_json::json;

use super::host_process::HostProcess;
use super::probe::{self, Admin};
use super::settings::WatchersSettings;
use super::tagger::Tagger;
use super::watcher_fleet::{Target, WatcherFleet, router_wait_ms};
use super::{LoadTestError, new_runtime, out_line};

/// The topic of the watched group.
const TOPIC: &str = "orders";
/// How long the group may take to settle before measuring starts.
const SETTLE_S: u64 = 60;
/// How long the watchers may take to hold their first table.
const READY_S: u64 = 60;
/// How long a change may take to reach every watcher before the run
/// counts those not told and goes on.
const TOLD_S: u64 = 30;
/// How often the run looks at the watchers while a change spreads.
const TOLD_POLL: Duration = Duration::from_millis(2);
/// Descriptors the run keeps beside one per watcher.
const DESCRIPTORS_SPARE: u64 = 256;

/// Checks the settings, then runs on a fresh Tokio runtime.
pub fn watchers(settings: WatchersSettings) -> Result<(), LoadTestError> {
    if !(settings.idle_s.is_finite() && settings.idle_s > 0.0 && settings.idle_s <= 3_600.0) {
        return Err(LoadTestError::Usage(
            "--idle-s must be above 0 and at most 3600 seconds".into(),
        ));
    }
    raise_descriptor_limit(u64::from(settings.watchers) + DESCRIPTORS_SPARE)?;
    new_runtime()?.block_on(run(settings))
}

/// What an idle window saw.
struct Idle {
    /// The host's CPU, % of one core.
    cpu_percent: Option<f64>,
    rss_kib: Option<u64>,
    /// Answers the watchers took per second.
    answers_per_s: f64,
}

/// What one change's spread saw.
struct Told {
    epoch_before: u64,
    epoch_after: u64,
    told: usize,
    /// From the change's heartbeat sent to its answer.
    change_answered_ms: f64,
    /// From the heartbeat sent to each watcher's answer with the new
    /// table, sorted, in ms.
    latencies_ms: Vec<f64>,
    /// The host's CPU from the heartbeat sent to the last watcher told.
    host_cpu_ms: Option<f64>,
}

async fn run(settings: WatchersSettings) -> Result<(), LoadTestError> {
    let failed = LoadTestError::Failed;
    let admin = Admin::new(&settings.host, settings.token.clone()).map_err(failed)?;
    let reader_token = reader_token()?;
    admin
        .create_group(&settings.group, &group_config(&settings, &reader_token))
        .await
        .map_err(failed)?;
    let members = start_members(&admin.host, &settings)?;
    let tagger = Tagger::join(&admin.host, &settings.group)
        .await
        .map_err(failed)?;
    settle(&admin, &settings).await?;
    let host = settings.host_pid.map(HostProcess);
    out_line(&format!("idle {:.0} s without watchers", settings.idle_s));
    let without = idle_window(host, settings.idle_s, None).await;
    let target = Target {
        host: admin.host.clone(),
        path: format!("/v1/groups/{}/routes", settings.group),
        reader_token,
        wait_ms: settings.wait_ms,
    };
    let fleet = WatcherFleet::start(target, settings.watchers).map_err(failed)?;
    wait_ready(&fleet, &settings).await?;
    out_line(&format!(
        "idle {:.0} s with {} watchers",
        settings.idle_s, settings.watchers
    ));
    let with = idle_window(host, settings.idle_s, Some(&fleet)).await;
    let mut changes = Vec::new();
    for n in 1..=settings.changes {
        let told = time_change(&fleet, &tagger, n, host).await?;
        out_line(&change_line(n, &told, settings.watchers));
        changes.push(told);
        tokio::time::sleep(Duration::from_millis(settings.change_gap_ms)).await;
    }
    let counts = (
        fleet
            .counts
            .errors
            .load(std::sync::atomic::Ordering::Relaxed),
        fleet
            .counts
            .refused
            .load(std::sync::atomic::Ordering::Relaxed),
    );
    fleet.stop();
    tagger.leave().await;
    for member in members {
        let _ = member.leave().await;
    }
    report(&settings, &without, &with, &changes, counts)
}

/// The group config: one topic, learners off (it settles at once), a
/// reader token, and the run's `routes_valid_ms`.
fn group_config(settings: &WatchersSettings, reader_token: &str) -> serde_json::Value {
    json!({
        "topics": [{"name": TOPIC, "partitions": settings.tasks}],
        "heartbeat_interval_ms": 1_000,
        "session_timeout_ms": 30_000,
        "learners": "off",
        "routes_valid_ms": settings.routes_valid_ms,
        "reader_token": reader_token,
    })
}

fn reader_token() -> Result<String, LoadTestError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| LoadTestError::Failed(format!("no random bytes for the reader token: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The group's members, each publishing an endpoint; each acknowledges a
/// revocation at once.
fn start_members(
    host: &str,
    settings: &WatchersSettings,
) -> Result<Vec<MemberHandle>, LoadTestError> {
    let failed = |e: assignd_client::ClientError| LoadTestError::Failed(format!("a member: {e}"));
    let connections = assignd_client::Connections::new().map_err(failed)?;
    (0..settings.members)
        .map(|m| {
            let config = MemberConfig::new(host, &settings.group, [TOPIC])
                .with_endpoint(format!("http://10.0.{}.{}:8080", m / 250, m % 250 + 1))
                .with_metadata("zone", format!("z{}", m % 3))
                .with_connections(connections.clone());
            let (member, mut events) = Member::start(config, NoLags).map_err(failed)?;
            tokio::spawn(async move {
                while let Some(event) = events.recv().await {
                    if let Event::Revoked { ack, .. } = event {
                        ack.ack();
                    }
                }
            });
            Ok(member)
        })
        .collect()
}

/// Waits until the group is settled with its members and the tagger.
async fn settle(admin: &Admin, settings: &WatchersSettings) -> Result<(), LoadTestError> {
    let started = Instant::now();
    let settled = probe::probe(
        admin.clone(),
        settings.group.clone(),
        settings.members as usize + 1,
        u64::from(settings.tasks),
        started,
        started + Duration::from_secs(SETTLE_S),
    )
    .await;
    match settled.settled_s {
        Some(_) => Ok(()),
        None => Err(LoadTestError::Failed(format!(
            "group {} did not settle within {SETTLE_S} s",
            settings.group
        ))),
    }
}

/// Every watcher holds a table, then one router's wait passes, so that
/// every watcher is in a blocking query.
async fn wait_ready(
    fleet: &WatcherFleet,
    settings: &WatchersSettings,
) -> Result<(), LoadTestError> {
    let deadline = Instant::now() + Duration::from_secs(READY_S);
    while fleet.ready() < settings.watchers as usize {
        if Instant::now() > deadline {
            return Err(LoadTestError::Failed(format!(
                "{} of {} watchers hold a table after {READY_S} s ({} errors)",
                fleet.ready(),
                settings.watchers,
                fleet
                    .counts
                    .errors
                    .load(std::sync::atomic::Ordering::Relaxed)
            )));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let wait = router_wait_ms(settings.wait_ms, settings.routes_valid_ms);
    tokio::time::sleep(Duration::from_millis(wait + 1_000)).await;
    Ok(())
}

/// The host's CPU and RSS over `idle_s` of nothing changing, and the
/// watchers' answers meanwhile.
async fn idle_window(host: Option<HostProcess>, idle_s: f64, fleet: Option<&WatcherFleet>) -> Idle {
    let answers = || {
        fleet.map_or(0, |f| {
            f.counts.answers.load(std::sync::atomic::Ordering::Relaxed)
        })
    };
    let (cpu_before, answers_before, started) =
        (host.and_then(HostProcess::cpu_s), answers(), Instant::now());
    tokio::time::sleep(Duration::from_secs_f64(idle_s)).await;
    let elapsed_s = started.elapsed().as_secs_f64();
    let cpu_after = host.and_then(HostProcess::cpu_s);
    Idle {
        cpu_percent: cpu_before
            .zip(cpu_after)
            .map(|(b, a)| (a - b) / elapsed_s * 100.0),
        rss_kib: host.and_then(HostProcess::rss_kib),
        answers_per_s: (answers() - answers_before) as f64 / elapsed_s,
    }
}

/// One change: the epoch every watcher holds, the tagger's heartbeat,
/// then each watcher's answer with a newer table.
async fn time_change(
    fleet: &WatcherFleet,
    tagger: &Tagger,
    n: u32,
    host: Option<HostProcess>,
) -> Result<Told, LoadTestError> {
    let epoch_before = agreed_epoch(fleet).await;
    let cpu_before = host.and_then(HostProcess::cpu_s);
    let change = tagger.change(n).await.map_err(LoadTestError::Failed)?;
    let sent_ns = change
        .sent
        .saturating_duration_since(fleet.origin)
        .as_nanos() as u64;
    let deadline = Instant::now() + Duration::from_secs(TOLD_S);
    while fleet.past(epoch_before) < fleet.slots.len() && Instant::now() < deadline {
        tokio::time::sleep(TOLD_POLL).await;
    }
    let cpu_after = host.and_then(HostProcess::cpu_s);
    let mut latencies_ms = Vec::with_capacity(fleet.slots.len());
    let mut epoch_after = epoch_before;
    for slot in fleet.slots.iter() {
        let (epoch, arrived_ns) = slot.held();
        if epoch > epoch_before {
            epoch_after = epoch_after.max(epoch);
            latencies_ms.push(arrived_ns.saturating_sub(sent_ns) as f64 / 1e6);
        }
    }
    latencies_ms.sort_by(f64::total_cmp);
    Ok(Told {
        epoch_before,
        epoch_after,
        told: latencies_ms.len(),
        change_answered_ms: (change.answered - change.sent).as_secs_f64() * 1e3,
        latencies_ms,
        host_cpu_ms: cpu_before.zip(cpu_after).map(|(b, a)| (a - b) * 1e3),
    })
}

/// The epoch every watcher holds, once they agree (at most a few seconds
/// after a change); the newest if they never do.
async fn agreed_epoch(fleet: &WatcherFleet) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(TOLD_S);
    loop {
        let newest = fleet.slots.iter().map(|s| s.held().0).max().unwrap_or(0);
        if fleet.past(newest.saturating_sub(1)) == fleet.slots.len() || Instant::now() > deadline {
            return newest;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The value at quantile `q` of sorted `values` (nearest rank).
fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let rank = (q * values.len() as f64).ceil() as usize;
    values[rank.clamp(1, values.len()) - 1]
}

fn change_line(n: u32, told: &Told, watchers: u32) -> String {
    let l = &told.latencies_ms;
    format!(
        "change {n}: epoch {} -> {}, {}/{watchers} told; from the heartbeat sent: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms (its answer {:.1} ms){}",
        told.epoch_before,
        told.epoch_after,
        told.told,
        quantile(l, 0.5),
        quantile(l, 0.99),
        quantile(l, 1.0),
        told.change_answered_ms,
        told.host_cpu_ms
            .map_or(String::new(), |ms| format!("; host CPU {ms:.0} ms"))
    )
}

fn report(
    settings: &WatchersSettings,
    without: &Idle,
    with: &Idle,
    changes: &[Told],
    (errors, refused): (u64, u64),
) -> Result<(), LoadTestError> {
    let per_watcher = without.rss_kib.zip(with.rss_kib).map(|(before, after)| {
        (after as f64 - before as f64) * 1024.0 / f64::from(settings.watchers)
    });
    let medians = |q: f64| {
        median(
            changes
                .iter()
                .map(|t| quantile(&t.latencies_ms, q))
                .collect(),
        )
    };
    let figures = json!({
        "command": "loadgen watchers",
        "watchers": settings.watchers,
        "members": settings.members,
        "tasks": settings.tasks,
        "routes_valid_ms": settings.routes_valid_ms,
        "wait_ms": router_wait_ms(settings.wait_ms, settings.routes_valid_ms),
        "idle_s": settings.idle_s,
        "host_cpu_percent_without": without.cpu_percent,
        "host_cpu_percent_with": with.cpu_percent,
        "host_rss_kib_without": without.rss_kib,
        "host_rss_kib_with": with.rss_kib,
        "host_rss_bytes_per_watcher": per_watcher,
        "answers_per_s_idle": with.answers_per_s,
        "errors": errors,
        "refused": refused,
        "told_p50_ms_median": medians(0.5),
        "told_p99_ms_median": medians(0.99),
        "told_max_ms_median": medians(1.0),
        "changes": changes.iter().map(|t| json!({
            "epoch_before": t.epoch_before,
            "epoch_after": t.epoch_after,
            "told": t.told,
            "change_answered_ms": t.change_answered_ms,
            "p50_ms": quantile(&t.latencies_ms, 0.5),
            "p99_ms": quantile(&t.latencies_ms, 0.99),
            "max_ms": quantile(&t.latencies_ms, 1.0),
            "host_cpu_ms": t.host_cpu_ms,
        })).collect::<Vec<_>>(),
    });
    let percent = |p: Option<f64>| p.map_or("-".to_owned(), |p| format!("{p:.1} %"));
    out_line(&format!(
        "{} watchers (wait {} ms, {:.0} answers/s idle): host CPU {} of one core without, {} with; RSS per watcher {}; {errors} errors ({refused} refused 503)",
        settings.watchers,
        router_wait_ms(settings.wait_ms, settings.routes_valid_ms),
        with.answers_per_s,
        percent(without.cpu_percent),
        percent(with.cpu_percent),
        per_watcher.map_or("-".to_owned(), |b| format!("{:.1} KiB", b / 1024.0)),
    ));
    out_line(&format!(
        "told, medians over {} changes: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        changes.len(),
        medians(0.5),
        medians(0.99),
        medians(1.0)
    ));
    if let Some(path) = &settings.report {
        let text = serde_json::to_string_pretty(&figures).expect("JSON");
        std::fs::write(path, text)
            .map_err(|e| LoadTestError::Failed(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(())
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    quantile(&values, 0.5)
}

/// Raises this process's soft descriptor limit to `needed` (one per
/// watcher's connection), within the hard limit; refuses a run that
/// cannot fit.
fn raise_descriptor_limit(needed: u64) -> Result<(), LoadTestError> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the limit into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 || limit.rlim_cur >= needed
    {
        return Ok(());
    }
    let raised = libc::rlimit {
        rlim_cur: needed.min(limit.rlim_max),
        rlim_max: limit.rlim_max,
    };
    // SAFETY: setrlimit reads the struct it is given.
    let ok = unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0;
    if ok && raised.rlim_cur >= needed {
        return Ok(());
    }
    Err(LoadTestError::Usage(format!(
        "--watchers needs {needed} file descriptors; the hard limit (RLIMIT_NOFILE) is {}",
        limit.rlim_max
    )))
}

#[cfg(test)]
mod tests {
    use super::quantile;

    #[test]
    fn quantiles_are_nearest_ranks() {
        let values: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&values, 0.5), 50.0);
        assert_eq!(quantile(&values, 0.99), 99.0);
        assert_eq!(quantile(&values, 1.0), 100.0);
        assert_eq!(quantile(&values[..1], 0.99), 1.0);
        assert!(quantile(&[], 0.5).is_nan());
    }
}
