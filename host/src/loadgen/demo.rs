//! `assignd demo`: the protocol at work within a minute, in one process. It
//! starts the coordinator in process (on 127.0.0.1:7070, or a free port if
//! that one is taken; in memory, nothing written), prints its URL and a
//! fresh admin token, creates the group `demo` (24 tasks, learner-aware,
//! learners warmed by the host, short timers), starts simulated stateful
//! workers (`assignd_client::simulated`, through `fleet`, as `assignd
//! loadgen` does), scales them on a schedule (3 → 6 → 4, one killed, → 5),
//! and prints every second the group's epoch and state, each worker's
//! active tasks, learners with their lags and restores, tasks moving or
//! without an owner, and double ownership (always 0); after each event,
//! how long the group took to settle and what it cost. It ends after
//! `--duration` seconds or at ctrl-c, with a summary.
//!
//! It owns the demo's settings, schedule and output; the host is the same
//! runtime and router `assignd serve` runs.

use std::collections::BTreeSet;
use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use assignd_client::simulated::Rates;
use assignd_client::{Connections, Task};
use clap::Args;
use serde_json::json;

use super::fleet::{self, Admin, ChurnEvent, ChurnKind, Fleet, MemberSpec, Settled, Window};
use super::{EXIT_BAD_INPUT, Failure, default_cache_dir};
use crate::api::AdminToken;
use crate::api::wire::GroupView;
use crate::plugins::{EngineConfig, Limits, PluginEngine};
use crate::protocol::shard::SHARD_COUNT_DEFAULT;
use crate::runtime::{Clock, CountingSink, Runtime, RuntimeConfig, TICK_INTERVAL_MS};

/// The exit code of a bad command line (clap's).
const EXIT_USAGE: u8 = 2;
/// The demo group's name.
const GROUP: &str = "demo";
/// Workers at the start.
const WORKERS_START: u32 = 3;
/// How long the group may take to settle at the start (the first call
/// compiles the assignor if the cache is cold).
const SETTLE_FIRST_S: u64 = 120;
/// How long past the end the last event may take to settle.
const LAST_SETTLE_GRACE: Duration = Duration::from_secs(15);

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Address to listen on; if it is taken, a free port on the same host.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7070")]
    listen: String,
    /// How long the schedule runs, in seconds, once the group first
    /// settled and its workers restored their state (ctrl-c ends the demo
    /// earlier).
    #[arg(long, default_value_t = 90, value_parser = clap::value_parser!(u64).range(5..=86_400))]
    duration: u64,
    /// Tasks in the demo group.
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    tasks: u32,
    /// The group's assignor.
    #[arg(long, default_value = "learner-aware")]
    assignor: String,
    /// Who places learners: host, assignor or off.
    #[arg(long, default_value = "host", value_parser = ["host", "assignor", "off"])]
    learners: String,
    /// The schedule, in `assignd loadgen --churn`'s grammar, starting from
    /// 3 workers, times from when the group is first stable (default:
    /// scale:3->6, scale:6->4, kill:1, scale:3->5, scale:5->3 at 8, 28, 48,
    /// 66 and 84 % of --duration).
    #[arg(long, value_name = "SPEC")]
    churn: Option<String>,
    /// Cache compiled assignors here (default: $XDG_CACHE_HOME/assignd or
    /// ~/.cache/assignd).
    #[arg(long, env = "ASSIGND_CACHE_DIR", value_name = "DIR")]
    cache_dir: Option<std::path::PathBuf>,
}

fn failure(message: String) -> Failure {
    Failure {
        message,
        exit_code: EXIT_BAD_INPUT,
    }
}

fn usage(message: String) -> Failure {
    Failure {
        message,
        exit_code: EXIT_USAGE,
    }
}

/// The default schedule, fitted to `duration_s`.
fn default_churn(duration_s: u64) -> String {
    let at = |fraction: f64| format!("{}s", (duration_s as f64 * fraction * 10.0).round() / 10.0);
    format!(
        "scale:3->6@{},scale:6->4@{},kill:1@{},scale:3->5@{},scale:5->3@{}",
        at(0.08),
        at(0.28),
        at(0.48),
        at(0.66),
        at(0.84)
    )
}

pub fn demo(args: DemoArgs) -> Result<(), Failure> {
    let spec = args
        .churn
        .clone()
        .unwrap_or_else(|| default_churn(args.duration));
    let churn = fleet::parse_churn(&spec)
        .and_then(|churn| fleet::check_churn(&churn, WORKERS_START).map(|()| churn))
        .map_err(|e| usage(format!("--churn {e}")))?;
    if let Some(last) = churn.last()
        && last.at >= Duration::from_secs(args.duration)
    {
        return Err(usage(format!(
            "--churn {:?} comes at or after the end of --duration {}",
            last.spec, args.duration
        )));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| failure(format!("cannot start the async runtime: {e}")))?;
    let result = runtime.block_on(run(args, churn));
    runtime.shutdown_timeout(Duration::from_secs(2));
    result
}

/// A fresh admin token: 32 random bytes as hex.
fn new_token() -> Result<String, Failure> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| failure(format!("cannot read random bytes: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Binds `listen`, or a free port on its host if it is taken.
async fn bind(listen: &str) -> Result<tokio::net::TcpListener, Failure> {
    match tokio::net::TcpListener::bind(listen).await {
        Ok(listener) => Ok(listener),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            let mut address: SocketAddr = listen
                .parse()
                .map_err(|_| failure(format!("cannot listen on {listen}: {e}")))?;
            address.set_port(0);
            tokio::net::TcpListener::bind(address)
                .await
                .map_err(|e| failure(format!("cannot listen on {address}: {e}")))
        }
        Err(e) => Err(failure(format!("cannot listen on {listen}: {e}"))),
    }
}

/// Starts the coordinator in process; returns its base URL, and a sender
/// that stops it.
async fn start_host(
    args: &DemoArgs,
    token: &str,
) -> Result<(String, tokio::sync::oneshot::Sender<()>), Failure> {
    let engine = PluginEngine::new(EngineConfig {
        cache_dir: args.cache_dir.clone().or_else(default_cache_dir),
        ..EngineConfig::default()
    })
    .map_err(|e| failure(format!("cannot start the wasm engine: {e:#}")))?;
    let seed = {
        use std::hash::{BuildHasher, Hasher};
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    };
    let runtime = Runtime::new(
        RuntimeConfig {
            seed,
            limits: Limits::default(),
            admission: Default::default(),
            shard_count: SHARD_COUNT_DEFAULT,
            unreached_grace_ms: 0,
        },
        Clock::monotonic(),
        Arc::new(CountingSink::default()),
        Arc::new(engine),
    );
    runtime.spawn_ticker(Duration::from_millis(TICK_INTERVAL_MS));
    runtime.preload_builtins();
    let admin = AdminToken::new(token).map_err(failure)?;
    let app = crate::api::app(runtime.clone(), admin);
    let listener = bind(&args.listen).await?;
    let address = listener
        .local_addr()
        .map_err(|e| failure(format!("cannot read the bound address: {e}")))?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "serving failed");
        }
        runtime.stop_timers();
    });
    Ok((format!("http://{address}"), stop))
}

/// One event of the schedule as it ran.
struct Ran {
    event: ChurnEvent,
    window: usize,
    members_after: u32,
    probe: Option<tokio::task::JoinHandle<Settled>>,
    settled: Option<Settled>,
    figures: Window,
}

async fn run(args: DemoArgs, churn: Vec<ChurnEvent>) -> Result<(), Failure> {
    let token = new_token()?;
    let (base, stop) = start_host(&args, &token).await?;
    let admin = Admin::new(&base, Some(token.clone())).map_err(failure)?;
    let heartbeat_interval_ms = 250;
    let config = json!({
        "topics": [{"name": fleet::TOPIC, "partitions": args.tasks}],
        "assignor": args.assignor,
        "heartbeat_interval_ms": heartbeat_interval_ms,
        "session_timeout_ms": 3_000,
        "expansion_timeout_ms": 500,
        "learners": args.learners,
        "acceptable_recovery_lag": 100,
        "max_learners": args.tasks,
        "scale_down_timeout_ms": 30_000,
    });
    admin.create_group(GROUP, &config).await.map_err(failure)?;
    let rates = Rates {
        replay_per_s: 1_500,
        process_per_s: 10,
    };
    let changelog_len = 3_000;
    say(&format!(
        "assignd demo: a coordinator at {base} (in memory; it stops with the demo)\n\
         admin token: {token}\n\
         \x20 curl -H 'authorization: Bearer {token}' {base}/v1/groups/{GROUP}\n\
         \x20 curl {base}/metrics\n\
         group {GROUP:?}: {} tasks, assignor {}, learners {}, heartbeat every {heartbeat_interval_ms} ms, session timeout 3 s\n\
         workers: simulated stateful tasks; a changelog of {changelog_len} records replayed at {} records/s \
         (a cold worker warms a task in {:.0} s); a learner at lag <= 100 is caught up\n\
         schedule from {WORKERS_START} workers, from when the group is first stable: {}\n",
        args.tasks,
        args.assignor,
        args.learners,
        rates.replay_per_s,
        changelog_len as f64 / rates.replay_per_s as f64,
        churn
            .iter()
            .map(|e| e.spec.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    ));
    let spec = MemberSpec {
        host: base.clone(),
        rates,
        changelog_len,
        connections: Connections::new().map_err(|e| failure(e.to_string()))?,
    };
    let mut fleet = Fleet::new(spec, vec![GROUP.to_owned()]);
    fleet
        .add(0, WORKERS_START)
        .map_err(|e| failure(format!("cannot start a worker: {e}")))?;
    let begun = Instant::now();
    let tasks = u64::from(args.tasks);

    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut interrupted = false;
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);

    // The first assignment: wait for the group to settle, showing it.
    say(&format!(
        "--- {:>5.1}s {WORKERS_START} workers join (cold: nothing to warm, the tasks have no owner yet) ---",
        0.0
    ));
    let first_deadline = begun + Duration::from_secs(SETTLE_FIRST_S);
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = &mut ctrl_c => { interrupted = true; break; }
        }
        let view = admin.group(GROUP).await.ok();
        show(&fleet, view.as_ref(), begun);
        if view.is_some_and(|v| fleet::settling(&v, WORKERS_START as usize, tasks).settled)
            && fleet.ledger.holding(0).restoring == 0
        {
            say(&format!(
                "--- {:>5.1}s the group is stable: every task active on one worker, its state restored ---",
                begun.elapsed().as_secs_f64()
            ));
            break;
        }
        if Instant::now() > first_deadline {
            return Err(failure(format!(
                "the group did not settle within {SETTLE_FIRST_S} s"
            )));
        }
    }

    let clock = Instant::now();
    let end = clock + Duration::from_secs(args.duration);
    let mut ran: Vec<Ran> = Vec::new();
    let mut next = 0;
    let mut members = WORKERS_START;
    while !interrupted && Instant::now() < end {
        let event_at = churn.get(next).map(|e| clock + e.at);
        let wake = event_at.map_or(end, |at| at.min(end));
        tokio::select! {
            _ = ticker.tick() => {}
            () = tokio::time::sleep_until(wake.into()) => {}
            _ = &mut ctrl_c => { interrupted = true; }
        }
        if interrupted {
            break;
        }
        if event_at.is_some_and(|at| Instant::now() >= at) {
            let event = churn[next].clone();
            next += 1;
            fleet.reap();
            let window = fleet.ledger.open_window();
            members = event.members_after(members);
            say(&format!(
                "--- {:>5.1}s {}: {} ---",
                begun.elapsed().as_secs_f64(),
                event.spec,
                describe(event.kind)
            ));
            fleet
                .apply(0, event.kind)
                .await
                .map_err(|e| failure(format!("cannot start a worker: {e}")))?;
            let started = Instant::now();
            // The last event may settle after the schedule's end.
            let until = churn
                .get(next)
                .map_or(end + LAST_SETTLE_GRACE, |e| clock + e.at);
            let probe = tokio::spawn(fleet::probe(
                admin.clone(),
                GROUP.to_owned(),
                members as usize,
                tasks,
                started,
                until,
            ));
            ran.push(Ran {
                event,
                window,
                members_after: members,
                probe: Some(probe),
                settled: None,
                figures: Window::default(),
            });
            continue;
        }
        // A once-a-second report, and the events that just finished.
        fleet.reap();
        let view = admin.group(GROUP).await.ok();
        show(&fleet, view.as_ref(), begun);
        for event in &mut ran {
            finish(event, &fleet, false).await;
        }
    }
    if ran.last().is_some_and(|event| event.probe.is_some()) && !interrupted {
        say("--- the schedule is over; waiting for the last event to settle ---");
    }
    for event in &mut ran {
        if interrupted && let Some(probe) = &event.probe {
            probe.abort();
        }
        finish(event, &fleet, true).await;
    }
    let double_ownership = fleet.ledger.double_ownership();
    let lease_lapses = fleet.ledger.lease_lapses();
    fleet.leave_all().await;
    let _ = stop.send(());

    say(&format!(
        "=== summary after {:.0} s{} ===",
        begun.elapsed().as_secs_f64(),
        if interrupted { " (interrupted)" } else { "" }
    ));
    for event in &ran {
        say(&summary_line(event));
    }
    say(&format!(
        "double ownership: {double_ownership} (times a task was active on two workers at once; must be 0)"
    ));
    if lease_lapses > 0 {
        say(&format!(
            "lease lapses: {lease_lapses} (tasks taken over from a stalled worker after its lease ran out, so after it had stopped)"
        ));
    }
    Ok(())
}

fn workers(n: u32) -> String {
    if n == 1 {
        "worker".to_owned()
    } else {
        format!("{n} workers")
    }
}

fn describe(kind: ChurnKind) -> String {
    match kind {
        ChurnKind::Scale { from, to } if to > from => format!(
            "{} join cold; tasks move to them once their learners caught up",
            workers(to - from)
        ),
        ChurnKind::Scale { from, to } => format!(
            "the newest {} drain: their tasks move once the new owners are warm, then they leave",
            workers(from - to)
        ),
        ChurnKind::Kill(n) => format!(
            "kill -9 of the newest {}: no leave, so the tasks it held have no owner until the host notices at the session timeout",
            workers(n)
        ),
        ChurnKind::Leave(n) => format!(
            "the newest {} stop and leave: the tasks they held go to others at once",
            workers(n)
        ),
    }
}

/// Collects an event's probe once it finished (or, `last`, waits for it).
async fn finish(event: &mut Ran, fleet: &Fleet, last: bool) {
    let Some(probe) = &event.probe else { return };
    if !last && !probe.is_finished() {
        return;
    }
    let probe = event.probe.take().expect("checked");
    let settled = probe.await.unwrap_or_default();
    event.figures = fleet.ledger.window(0, event.window);
    event.settled = Some(settled);
    if !last {
        say(&format!("--- {} ---", summary_line(event)));
    }
}

fn summary_line(event: &Ran) -> String {
    let figures = &event.figures;
    let outcome = match event.settled.and_then(|s| s.settled_s) {
        Some(s) => format!("stable after {s:.1}s"),
        None => "not stable before the next event or the end".to_owned(),
    };
    format!(
        "{}: {outcome} ({} workers): {} tasks moved, {:.2} task-seconds without an owner, {:.2} restoring, double ownership {}",
        event.event.spec,
        event.members_after,
        figures.moved,
        figures.ownerless_task_s,
        figures.restoring_task_s,
        figures.double_ownership,
    )
}

/// The once-a-second report.
fn show(fleet: &Fleet, view: Option<&GroupView>, begun: Instant) {
    let holding = fleet.ledger.holding(0);
    let mut text = String::new();
    match view {
        Some(view) => {
            let mut moving: BTreeSet<Task> = BTreeSet::new();
            for learner in &view.learners {
                moving.insert(Task::new(
                    learner.task.topic.clone(),
                    learner.task.partition,
                ));
            }
            for member in &view.members {
                for task in &member.target.active {
                    if !member.active.contains(task) {
                        moving.insert(Task::new(task.topic.clone(), task.partition));
                    }
                }
            }
            text.push_str(&format!(
                "[{:>5.1}s] epoch {} members {} {:<11} moving {:<2} without owner {:<2} restoring {:<2} double ownership {}\n",
                begun.elapsed().as_secs_f64(),
                view.group_epoch,
                view.members.len(),
                format!("{:?}", view.state).to_lowercase(),
                moving.len(),
                holding.ownerless,
                holding.restoring,
                holding.doubled,
            ));
        }
        None => text.push_str(&format!(
            "[{:>5.1}s] (the group view is not available)\n",
            begun.elapsed().as_secs_f64()
        )),
    }
    for (number, worker) in fleet.views(0) {
        let mut line = format!("    worker-{number:<2} active {:>2}", worker.active.len());
        if worker.draining {
            line.push_str("  draining");
        }
        if !worker.restoring.is_empty() {
            line.push_str(&format!("  restoring {}", lags(&worker.restoring)));
        }
        if !worker.learners.is_empty() {
            line.push_str(&format!(
                "  learners {} {}",
                worker.learners.len(),
                lags(&worker.learners)
            ));
        }
        text.push_str(&line);
        text.push('\n');
    }
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// `p3:1200 p7:900`, at most six, then `…`.
fn lags(tasks: &[(Task, u64)]) -> String {
    let mut parts: Vec<String> = tasks
        .iter()
        .take(6)
        .map(|(task, lag)| format!("p{}:{lag}", task.partition))
        .collect();
    if tasks.len() > 6 {
        parts.push("…".to_owned());
    }
    format!("(lag {})", parts.join(" "))
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
