//! `assignd loadgen`: many simulated stateful members against a running
//! host, to measure what a fleet sees. Members are the client library's
//! simulated workers (`assignd_client::simulated`, through `fleet`), many
//! per process on one Tokio runtime: they heartbeat at the group's
//! interval, release revoked tasks at once, restore state before
//! processing, and warm learners at `--replay-rate`, reporting their lags.
//! After every group settled, it measures for `--duration` seconds while
//! `--churn` scales, kills or stops members on a schedule, and reports
//! heartbeats per second, their latency (p50, p99, p99.9), errors, double
//! ownership (must be 0), lease lapses (a task taken over from a stalled
//! owner whose lease had run out, so that it had stopped: not a double
//! ownership), and per churn event: the time until every group
//! was stable and settled again, tasks moved, and task-seconds without an
//! active owner and with a restoring one; the report adds the timeline of
//! those two counts over every group (what `assignd plot` draws). It owns
//! the command's flags, the group config it creates and the report; the
//! fleet does the rest.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use assignd_client::Connections;
use assignd_client::simulated::Rates;
use clap::Args;
use serde_json::json;

use super::fleet::{self, Admin, ChurnEvent, ChurnKind, Fleet, MemberSpec, Settled, Window};
use super::{EXIT_BAD_INPUT, Failure};

/// The exit code of a bad command line (clap's).
const EXIT_USAGE: u8 = 2;
/// How long every group may take to settle before measuring starts.
const SETTLE_FIRST_S: u64 = 120;

#[derive(Debug, Args)]
pub struct LoadgenArgs {
    /// The host's base URL; a cluster's nodes comma-separated (the
    /// groups are created through the first, and members start from each
    /// in turn, then follow their coordinator's redirects).
    #[arg(long, default_value = "http://127.0.0.1:7070")]
    host: String,
    /// Groups to create (named `{prefix}-0` …).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    groups: u32,
    /// Members per group at the start.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    members: u32,
    /// Tasks (partitions of one topic) per group.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    tasks: u32,
    /// How long to measure, in seconds, after every group settled.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Churn during the measurement, the same for every group:
    /// EVENT[,EVENT]..., EVENT = scale:FROM->TO@TIME (members join cold /
    /// the newest drain), kill:N@TIME (the newest N vanish without
    /// leaving), leave:N@TIME (they stop and leave); TIME = 10s, 2.5s,
    /// 500ms after measuring starts. E.g. scale:10->20@10s,scale:20->15@40s.
    #[arg(long, value_name = "SPEC")]
    churn: Option<String>,
    /// Heartbeat interval of the created groups, in ms; 0 makes every
    /// member beat as often as the client library allows (every 10 ms, or
    /// back to back when the host answers slower), for peak throughput.
    #[arg(long, default_value_t = 3_000)]
    interval_ms: u64,
    /// The groups' session timeout in ms (how long a killed member keeps
    /// its tasks); default: 10 heartbeat intervals, at least 10 s.
    #[arg(long)]
    session_timeout_ms: Option<u64>,
    /// The groups' expansion timeout in ms.
    #[arg(long, default_value_t = 500)]
    expansion_timeout_ms: u64,
    /// The group config's assignor.
    #[arg(long, default_value = "sticky")]
    assignor: String,
    /// An assignor param of the created groups, KEY=VALUE; repeat for
    /// more (e.g. `--param num_standby=3` for learner-aware).
    #[arg(long = "param", value_name = "KEY=VALUE", value_parser = parse_param)]
    params: Vec<(String, String)>,
    /// Who places learners: host, assignor or off.
    #[arg(long, default_value = "host", value_parser = ["host", "assignor", "off"])]
    learners: String,
    /// A learner at or under this lag (records) is caught up.
    #[arg(long, default_value_t = 1_000)]
    acceptable_recovery_lag: u64,
    /// The most learners in a group at once (default: the task count).
    #[arg(long)]
    max_learners: Option<u32>,
    /// Records per second a member replays (learners, restoring owners).
    #[arg(long, default_value_t = 20_000)]
    replay_rate: u64,
    /// Records per second an active task appends to its changelog.
    #[arg(long, default_value_t = 20)]
    process_rate: u64,
    /// Records in each changelog at the start: a cold member needs
    /// changelog-len / replay-rate seconds to catch up.
    #[arg(long, default_value_t = 40_000)]
    changelog_len: u64,
    /// Group name prefix.
    #[arg(long, default_value = "loadgen")]
    prefix: String,
    /// Write the figures as JSON here.
    #[arg(long, value_name = "FILE.json")]
    report: Option<PathBuf>,
    /// The host's admin token, to create and read the groups (sent as
    /// `Authorization: Bearer TOKEN`); the heartbeats need none.
    #[arg(
        long,
        env = "ASSIGND_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
}

fn parse_param(arg: &str) -> Result<(String, String), String> {
    match arg.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("{arg:?} is not KEY=VALUE")),
    }
}

fn failure(message: String) -> Failure {
    Failure {
        message,
        exit_code: EXIT_BAD_INPUT,
    }
}

pub fn loadgen(args: LoadgenArgs) -> Result<(), Failure> {
    let churn = match &args.churn {
        Some(spec) => fleet::parse_churn(spec)
            .and_then(|churn| fleet::check_churn(&churn, args.members).map(|()| churn))
            .map_err(|e| Failure {
                message: format!("--churn {e}"),
                exit_code: EXIT_USAGE,
            })?,
        None => Vec::new(),
    };
    if !(args.duration.is_finite() && args.duration > 0.0 && args.duration <= 86_400.0) {
        return Err(Failure {
            message: "--duration must be above 0 and at most 86400 seconds".into(),
            exit_code: EXIT_USAGE,
        });
    }
    if let Some(last) = churn.last()
        && last.at.as_secs_f64() >= args.duration
    {
        return Err(Failure {
            message: format!(
                "--churn {:?} comes at or after the end of --duration {}",
                last.spec, args.duration
            ),
            exit_code: EXIT_USAGE,
        });
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| failure(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(run(args, churn))
}

/// The group config loadgen creates.
fn group_config(args: &LoadgenArgs) -> serde_json::Value {
    let session_timeout_ms = args
        .session_timeout_ms
        .unwrap_or((args.interval_ms * 10).max(10_000));
    json!({
        "topics": [{"name": fleet::TOPIC, "partitions": args.tasks}],
        "assignor": args.assignor,
        "params": args.params.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
        "heartbeat_interval_ms": args.interval_ms.max(1),
        "session_timeout_ms": session_timeout_ms,
        // Its members are dynamic; the host only wants the interval below
        // this one too.
        "registration_timeout_ms": session_timeout_ms.max(120_000),
        "expansion_timeout_ms": args.expansion_timeout_ms,
        "learners": args.learners,
        "acceptable_recovery_lag": args.acceptable_recovery_lag,
        "max_learners": args.max_learners.unwrap_or(args.tasks),
    })
}

/// The figures of one churn event over every group.
struct EventFigures {
    event: Option<ChurnEvent>,
    members_after: u32,
    settled: Vec<Settled>,
    windows: Vec<Window>,
}

async fn run(args: LoadgenArgs, churn: Vec<ChurnEvent>) -> Result<(), Failure> {
    let first = args.host.split(',').next().unwrap_or_default();
    let admin = Admin::new(first, args.token.clone()).map_err(failure)?;
    let config = group_config(&args);
    let names: Vec<String> = (0..args.groups)
        .map(|g| format!("{}-{g}", args.prefix))
        .collect();
    for name in &names {
        admin.create_group(name, &config).await.map_err(failure)?;
    }
    let spec = MemberSpec {
        host: args.host.clone(),
        rates: Rates {
            replay_per_s: args.replay_rate,
            process_per_s: args.process_rate,
        },
        changelog_len: args.changelog_len,
        connections: Connections::new().map_err(|e| failure(e.to_string()))?,
    };
    let mut fleet = Fleet::new(spec, names.clone());
    for g in 0..names.len() {
        fleet
            .add(g, args.members)
            .map_err(|e| failure(format!("cannot start a member: {e}")))?;
    }
    let tasks = u64::from(args.tasks);
    // Every group settled first: the first assignment is not measured.
    let deadline = Instant::now() + Duration::from_secs(SETTLE_FIRST_S);
    for name in &names {
        let started = Instant::now();
        let settled = fleet::probe(
            admin.clone(),
            name.clone(),
            args.members as usize,
            tasks,
            started,
            deadline,
        )
        .await;
        if settled.settled_s.is_none() {
            // Name the reason if the host refuses to show the group.
            admin.group(name).await.map_err(failure)?;
            return Err(failure(format!(
                "group {name} did not settle within {SETTLE_FIRST_S} s of the start"
            )));
        }
    }

    // And every first owner restored its state: the baseline is steady.
    let restore_deadline = Instant::now()
        + Duration::from_secs(SETTLE_FIRST_S)
        + Duration::from_secs_f64(args.changelog_len as f64 / args.replay_rate.max(1) as f64);
    while (0..names.len()).any(|g| fleet.ledger.holding(g).restoring > 0) {
        if Instant::now() > restore_deadline {
            return Err(failure(
                "the first owners did not restore their state in time (is --replay-rate too low?)"
                    .into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let started = Instant::now();
    let end = started + Duration::from_secs_f64(args.duration);
    let mut figures = vec![EventFigures {
        event: None,
        members_after: args.members,
        settled: Vec::new(),
        windows: Vec::new(),
    }];
    let mut windows = vec![fleet.ledger.open_window()];
    fleet.ledger.record_timeline();
    fleet
        .beats
        .measuring
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let mut members = args.members;
    let mut probes: Vec<tokio::task::JoinHandle<Vec<Settled>>> = Vec::new();
    for (i, event) in churn.iter().enumerate() {
        let at = started + event.at;
        tokio::time::sleep_until(at.into()).await;
        fleet.reap();
        windows.push(fleet.ledger.open_window());
        members = event.members_after(members);
        for g in 0..names.len() {
            fleet
                .apply(g, event.kind)
                .await
                .map_err(|e| failure(format!("cannot start a member: {e}")))?;
        }
        let until = churn.get(i + 1).map_or(end, |next| started + next.at);
        probes.push(tokio::spawn(probe_all(
            admin.clone(),
            names.clone(),
            members as usize,
            tasks,
            at,
            until,
        )));
        figures.push(EventFigures {
            event: Some(event.clone()),
            members_after: members,
            settled: Vec::new(),
            windows: Vec::new(),
        });
    }
    tokio::time::sleep_until(end.into()).await;
    fleet
        .beats
        .measuring
        .store(false, std::sync::atomic::Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    for (figure, window) in figures.iter_mut().zip(&windows) {
        figure.windows = (0..names.len())
            .map(|g| fleet.ledger.window(g, *window))
            .collect();
    }
    for (figure, probe) in figures.iter_mut().skip(1).zip(probes) {
        figure.settled = probe.await.unwrap_or_default();
    }
    let double_ownership = fleet.ledger.double_ownership();
    let lease_lapses = fleet.ledger.lease_lapses();
    let timeline = fleet.ledger.timeline();
    fleet.leave_all().await;

    let beats = &fleet.beats;
    let heartbeats = beats.ok.load(std::sync::atomic::Ordering::Relaxed);
    let errors = beats.errors.load(std::sync::atomic::Ordering::Relaxed);
    let latencies = beats.latencies();
    let ms = |q: f64| latencies.value_at_quantile(q) as f64 / 1e3;
    let total = u64::from(args.groups) * u64::from(args.members);
    let report = json!({
        "config": {
            "host": admin.host,
            "groups": args.groups,
            "members_per_group": args.members,
            "tasks_per_group": args.tasks,
            "churn": churn.iter().map(|e| e.spec.clone()).collect::<Vec<_>>(),
            "duration_s": args.duration,
            "replay_rate": args.replay_rate,
            "process_rate": args.process_rate,
            "changelog_len": args.changelog_len,
            "group": config,
        },
        "groups": args.groups,
        "members": total,
        "tasks_per_group": args.tasks,
        "interval_ms": args.interval_ms,
        "duration_s": elapsed,
        "heartbeats": heartbeats,
        "heartbeats_per_s": heartbeats as f64 / elapsed,
        "latency_ms": {"p50": ms(0.5), "p99": ms(0.99), "p999": ms(0.999), "max": latencies.max() as f64 / 1e3},
        "errors": errors,
        "double_ownership": double_ownership,
        "lease_lapses": lease_lapses,
        "baseline": window_json(&figures[0].windows),
        "events": figures.iter().skip(1).map(|f| event_json(f, &names)).collect::<Vec<_>>(),
        "timeline": timeline,
    });
    outln!(
        "members={total} groups={} heartbeats_per_s={:.0} p50_ms={:.2} p99_ms={:.2} p999_ms={:.2} errors={errors} double_ownership={double_ownership} lease_lapses={lease_lapses}",
        args.groups,
        heartbeats as f64 / elapsed,
        ms(0.5),
        ms(0.99),
        ms(0.999),
    );
    for figure in figures.iter().skip(1) {
        outln!("{}", event_line(figure));
    }
    if let Some(path) = &args.report {
        let text = serde_json::to_string_pretty(&report).expect("JSON");
        std::fs::write(path, text)
            .map_err(|e| failure(format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(())
}

/// Probes every group after an event; one [`Settled`] per group.
async fn probe_all(
    admin: Admin,
    names: Vec<String>,
    members: usize,
    tasks: u64,
    since: Instant,
    until: Instant,
) -> Vec<Settled> {
    let mut probes = tokio::task::JoinSet::new();
    for (g, name) in names.into_iter().enumerate() {
        let admin = admin.clone();
        probes.spawn(async move {
            (
                g,
                fleet::probe(admin, name, members, tasks, since, until).await,
            )
        });
    }
    let mut settled = Vec::new();
    while let Some(result) = probes.join_next().await {
        if let Ok(result) = result {
            settled.push(result);
        }
    }
    settled.sort_by_key(|(g, _)| *g);
    settled.into_iter().map(|(_, s)| s).collect()
}

/// The sums of a window over every group.
fn sums(windows: &[Window]) -> Window {
    let mut sum = Window::default();
    for w in windows {
        sum.moved += w.moved;
        sum.ownerless_task_s += w.ownerless_task_s;
        sum.restoring_task_s += w.restoring_task_s;
        sum.double_ownership += w.double_ownership;
        sum.lease_lapses += w.lease_lapses;
        sum.ownerless_max = sum.ownerless_max.max(w.ownerless_max);
    }
    sum
}

fn window_json(windows: &[Window]) -> serde_json::Value {
    let sum = sums(windows);
    json!({
        "tasks_moved": sum.moved,
        "ownerless_task_s": sum.ownerless_task_s,
        "ownerless_max": sum.ownerless_max,
        "restoring_task_s": sum.restoring_task_s,
        "double_ownership": sum.double_ownership,
        "lease_lapses": sum.lease_lapses,
    })
}

/// The largest and the mean of some times, if any.
fn spread(times: impl Iterator<Item = Option<f64>>) -> (usize, Option<f64>, Option<f64>) {
    let times: Vec<f64> = times.flatten().collect();
    let max = times.iter().copied().reduce(f64::max);
    let mean = (!times.is_empty()).then(|| times.iter().sum::<f64>() / times.len() as f64);
    (times.len(), max, mean)
}

fn event_json(figure: &EventFigures, names: &[String]) -> serde_json::Value {
    let event = figure.event.as_ref().expect("events have one");
    let (settled, settled_max, settled_mean) = spread(figure.settled.iter().map(|s| s.settled_s));
    let (stable, stable_max, stable_mean) = spread(figure.settled.iter().map(|s| s.stable_s));
    let (kind, from, to) = match event.kind {
        ChurnKind::Scale { from, to } => ("scale", from, to),
        ChurnKind::Kill(n) => ("kill", figure.members_after + n, figure.members_after),
        ChurnKind::Leave(n) => ("leave", figure.members_after + n, figure.members_after),
    };
    let mut value = window_json(&figure.windows);
    let object = value.as_object_mut().expect("an object");
    let extra = json!({
        "spec": event.spec,
        "kind": kind,
        "at_s": event.at.as_secs_f64(),
        "members_before": from,
        "members_after": to,
        "groups": names.len(),
        "groups_stable": stable,
        "groups_settled": settled,
        "all_settled": settled == names.len(),
        "stable_s": {"max": stable_max, "mean": stable_mean},
        "settled_s": {"max": settled_max, "mean": settled_mean},
        "per_group": names.iter().enumerate().map(|(g, name)| {
            let s = figure.settled.get(g).copied().unwrap_or_default();
            let w = figure.windows.get(g).cloned().unwrap_or_default();
            json!({
                "group": name,
                "stable_s": s.stable_s,
                "settled_s": s.settled_s,
                "tasks_moved": w.moved,
                "ownerless_task_s": w.ownerless_task_s,
                "restoring_task_s": w.restoring_task_s,
                "double_ownership": w.double_ownership,
                "lease_lapses": w.lease_lapses,
            })
        }).collect::<Vec<_>>(),
    });
    let serde_json::Value::Object(extra) = extra else {
        unreachable!("an object")
    };
    let mut merged = extra;
    merged.extend(std::mem::take(object));
    serde_json::Value::Object(merged)
}

fn event_line(figure: &EventFigures) -> String {
    let event = figure.event.as_ref().expect("events have one");
    let groups = figure.windows.len();
    let (settled, settled_max, _) = spread(figure.settled.iter().map(|s| s.settled_s));
    let sum = sums(&figure.windows);
    let seconds = |t: Option<f64>| t.map_or_else(|| "-".to_owned(), |t| format!("{t:.2}"));
    format!(
        "event={} settled={settled}/{groups} settled_s_max={} tasks_moved={} ownerless_task_s={:.2} restoring_task_s={:.2} double_ownership={} lease_lapses={}",
        event.spec,
        seconds(settled_max),
        sum.moved,
        sum.ownerless_task_s,
        sum.restoring_task_s,
        sum.double_ownership,
        sum.lease_lapses,
    )
}
