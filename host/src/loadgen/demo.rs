//! `assignd demo`: the protocol at work within a minute, in one process. It
//! starts the coordinator in process (on 127.0.0.1:7070, or a free port if
//! that one is taken; in memory, nothing written), prints its URL and a
//! fresh admin token, creates the group `demo` (24 tasks, learner-aware,
//! learners warmed by the host, short timers), starts simulated stateful
//! workers (`assignd_client::simulated`, through the fleet, as `assignd
//! loadgen` does), scales them on a schedule (3 → 6 → 4, one killed, → 5),
//! and prints every second the group's epoch and state, each worker's
//! active tasks, learners with their lags and restores, tasks moving or
//! without an owner, and double ownership (always 0); after each event,
//! how long the group took to settle and what it cost. It ends after
//! `--duration` seconds or at ctrl-c, with a summary.
//!
//! It owns the demo's group config, its introduction and the steps of
//! its schedule; `demo_host` starts the host (the same runtime and router
//! `assignd serve` runs), `demo_screen` writes what the demo shows as it
//! runs.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use assignd_client::Connections;
use assignd_client::simulated::Rates;
use serde_json::json;

use super::churn::{self, ChurnEvent};
use super::demo_host::{new_token, start_host};
use super::demo_screen::{describe, say, show};
use super::fleet::{self, Fleet, MemberSpec};
use super::ledger::Window;
use super::probe::{self, Admin, Settled};
use super::settings::DemoSettings;
use super::{LoadTestError, new_runtime};

/// The demo group's name.
const GROUP: &str = "demo";
/// Workers at the start.
const WORKERS_START: u32 = 3;
/// How long the group may take to settle at the start (the first call
/// compiles the assignor if the cache is cold).
const SETTLE_FIRST_S: u64 = 120;
/// How long past the end the last event may take to settle.
const LAST_SETTLE_GRACE: Duration = Duration::from_secs(15);
/// The demo group's heartbeat interval.
const HEARTBEAT_INTERVAL_MS: u64 = 250;
/// How fast the simulated workers replay and process their changelogs.
const RATES: Rates = Rates {
    replay_per_s: 1_500,
    process_per_s: 10,
};
/// Records in each changelog at the start.
const CHANGELOG_LEN: u64 = 3_000;

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

/// Checks the schedule, then runs the demo on a fresh Tokio runtime.
pub fn demo(settings: DemoSettings) -> Result<(), LoadTestError> {
    let spec = settings
        .churn
        .clone()
        .unwrap_or_else(|| default_churn(settings.duration_s));
    let churn = churn::parse_churn(&spec)
        .and_then(|churn| churn::check_churn(&churn, WORKERS_START).map(|()| churn))
        .map_err(|e| LoadTestError::Usage(format!("--churn {e}")))?;
    if let Some(last) = churn.last()
        && last.at >= Duration::from_secs(settings.duration_s)
    {
        return Err(LoadTestError::Usage(format!(
            "--churn {:?} comes at or after the end of --duration {}",
            last.spec, settings.duration_s
        )));
    }
    let runtime = new_runtime()?;
    let result = runtime.block_on(run(settings, churn));
    runtime.shutdown_timeout(Duration::from_secs(2));
    result
}

/// One event of the schedule as it ran.
pub(super) struct Ran {
    pub event: ChurnEvent,
    window: usize,
    pub members_after: u32,
    probe: Option<tokio::task::JoinHandle<Settled>>,
    pub settled: Option<Settled>,
    pub figures: Window,
}

/// The running demo: the host's admin API, the group's size, its clocks
/// and ctrl-c, which ends it early.
struct Demo {
    admin: Admin,
    tasks: u64,
    begun: Instant,
    ticker: tokio::time::Interval,
    ctrl_c: Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>>,
    interrupted: bool,
}

async fn run(settings: DemoSettings, churn: Vec<ChurnEvent>) -> Result<(), LoadTestError> {
    let token = new_token()?;
    let (base, stop) = start_host(&settings.listen, settings.cache_dir.clone(), &token).await?;
    let admin = Admin::new(&base, Some(token.clone())).map_err(LoadTestError::Failed)?;
    admin
        .create_group(GROUP, &group_config(&settings))
        .await
        .map_err(LoadTestError::Failed)?;
    say(&intro(&base, &token, &settings, &churn));
    let spec = MemberSpec {
        host: base.clone(),
        rates: RATES,
        changelog_len: CHANGELOG_LEN,
        connections: Connections::new().map_err(|e| LoadTestError::Failed(e.to_string()))?,
        loads: None,
    };
    let mut fleet = Fleet::new(spec, vec![GROUP.to_owned()]);
    fleet
        .add(0, WORKERS_START)
        .map_err(|e| LoadTestError::Failed(format!("cannot start a worker: {e}")))?;
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut demo = Demo {
        admin,
        tasks: u64::from(settings.tasks),
        begun: Instant::now(),
        ticker,
        ctrl_c: Box::pin(tokio::signal::ctrl_c()),
        interrupted: false,
    };
    demo.settle_first(&fleet).await?;
    let mut ran = demo
        .play_schedule(&mut fleet, &churn, settings.duration_s)
        .await?;
    demo.finish_all(&mut ran, &fleet).await;
    let double_ownership = fleet.ledger.double_ownership();
    let lease_lapses = fleet.ledger.lease_lapses();
    fleet.leave_all().await;
    let _ = stop.send(());
    demo.summary(&ran, double_ownership, lease_lapses);
    Ok(())
}

/// The introduction: where the host is, its token, the group and the
/// schedule.
fn intro(base: &str, token: &str, settings: &DemoSettings, churn: &[ChurnEvent]) -> String {
    let heartbeat_interval_ms = HEARTBEAT_INTERVAL_MS;
    let changelog_len = CHANGELOG_LEN;
    format!(
        "assignd demo: a coordinator at {base} (in memory; it stops with the demo)\n\
         admin token: {token}\n\
         console: {base}/ui (log in with the admin token; the group is at {base}/ui#/groups/{GROUP})\n\
         \x20 curl -H 'authorization: Bearer {token}' {base}/v1/groups/{GROUP}\n\
         \x20 curl {base}/metrics\n\
         group {GROUP:?}: {} tasks, assignor {}, learners {}, heartbeat every {heartbeat_interval_ms} ms, session timeout 3 s\n\
         workers: simulated stateful tasks; a changelog of {changelog_len} records replayed at {} records/s \
         (a cold worker warms a task in {:.0} s); a learner at lag <= 100 is caught up\n\
         schedule from {WORKERS_START} workers, from when the group is first stable: {}\n",
        settings.tasks,
        settings.assignor,
        settings.learners,
        RATES.replay_per_s,
        changelog_len as f64 / RATES.replay_per_s as f64,
        churn
            .iter()
            .map(|e| e.spec.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    )
}

/// The demo group's config: short timers, learners warmed.
fn group_config(settings: &DemoSettings) -> serde_json::Value {
    json!({
        "topics": [{"name": fleet::TOPIC, "partitions": settings.tasks}],
        "assignor": settings.assignor,
        "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS,
        "session_timeout_ms": 3_000,
        "expansion_timeout_ms": 500,
        "learners": settings.learners,
        "acceptable_recovery_lag": 100,
        "max_learners": settings.tasks,
        "scale_down_timeout_ms": 30_000,
    })
}

impl Demo {
    /// The first assignment: waits for the group to settle, showing it
    /// every second.
    async fn settle_first(&mut self, fleet: &Fleet) -> Result<(), LoadTestError> {
        say(&format!(
            "--- {:>5.1}s {WORKERS_START} workers join (cold: nothing to warm, the tasks have no owner yet) ---",
            0.0
        ));
        let first_deadline = self.begun + Duration::from_secs(SETTLE_FIRST_S);
        loop {
            tokio::select! {
                _ = self.ticker.tick() => {}
                _ = &mut self.ctrl_c => { self.interrupted = true; break; }
            }
            let view = self.admin.group(GROUP).await.ok();
            show(fleet, view.as_ref(), self.begun);
            if view.is_some_and(|v| probe::settling(&v, WORKERS_START as usize, self.tasks).settled)
                && fleet.ledger.holding(0).restoring == 0
            {
                say(&format!(
                    "--- {:>5.1}s the group is stable: every task active on one worker, its state restored ---",
                    self.begun.elapsed().as_secs_f64()
                ));
                break;
            }
            if Instant::now() > first_deadline {
                return Err(LoadTestError::Failed(format!(
                    "the group did not settle within {SETTLE_FIRST_S} s"
                )));
            }
        }
        Ok(())
    }

    /// Plays the schedule for `duration_s` (or until ctrl-c), showing the
    /// group every second and each event's figures once it settled.
    async fn play_schedule(
        &mut self,
        fleet: &mut Fleet,
        churn: &[ChurnEvent],
        duration_s: u64,
    ) -> Result<Vec<Ran>, LoadTestError> {
        let clock = Instant::now();
        let end = clock + Duration::from_secs(duration_s);
        let mut ran: Vec<Ran> = Vec::new();
        let mut next = 0;
        let mut members = WORKERS_START;
        while !self.interrupted && Instant::now() < end {
            let event_at = churn.get(next).map(|e| clock + e.at);
            let wake = event_at.map_or(end, |at| at.min(end));
            tokio::select! {
                _ = self.ticker.tick() => {}
                () = tokio::time::sleep_until(wake.into()) => {}
                _ = &mut self.ctrl_c => { self.interrupted = true; }
            }
            if self.interrupted {
                break;
            }
            if event_at.is_some_and(|at| Instant::now() >= at) {
                let event = churn[next].clone();
                next += 1;
                members = event.members_after(members);
                // The last event may settle after the schedule's end.
                let until = churn
                    .get(next)
                    .map_or(end + LAST_SETTLE_GRACE, |e| clock + e.at);
                ran.push(self.start_event(fleet, event, members, until).await?);
                continue;
            }
            // A once-a-second report, and the events that just finished.
            fleet.reap();
            let view = self.admin.group(GROUP).await.ok();
            show(fleet, view.as_ref(), self.begun);
            for event in &mut ran {
                finish(event, fleet, false).await;
            }
        }
        Ok(ran)
    }

    /// Applies `event` and starts probing the group until `until`.
    async fn start_event(
        &self,
        fleet: &mut Fleet,
        event: ChurnEvent,
        members_after: u32,
        until: Instant,
    ) -> Result<Ran, LoadTestError> {
        fleet.reap();
        let window = fleet.ledger.open_window();
        say(&format!(
            "--- {:>5.1}s {}: {} ---",
            self.begun.elapsed().as_secs_f64(),
            event.spec,
            describe(event.kind)
        ));
        fleet
            .apply(0, event.kind)
            .await
            .map_err(|e| LoadTestError::Failed(format!("cannot start a worker: {e}")))?;
        let started = Instant::now();
        let probe = tokio::spawn(probe::probe(
            self.admin.clone(),
            GROUP.to_owned(),
            members_after as usize,
            self.tasks,
            started,
            until,
        ));
        Ok(Ran {
            event,
            window,
            members_after,
            probe: Some(probe),
            settled: None,
            figures: Window::default(),
        })
    }

    /// Collects every event's figures: waits for the last to settle, or
    /// stops the probes if interrupted.
    async fn finish_all(&self, ran: &mut [Ran], fleet: &Fleet) {
        if ran.last().is_some_and(|event| event.probe.is_some()) && !self.interrupted {
            say("--- the schedule is over; waiting for the last event to settle ---");
        }
        for event in ran {
            if self.interrupted
                && let Some(probe) = &event.probe
            {
                probe.abort();
            }
            finish(event, fleet, true).await;
        }
    }

    fn summary(&self, ran: &[Ran], double_ownership: u64, lease_lapses: u64) {
        say(&format!(
            "=== summary after {:.0} s{} ===",
            self.begun.elapsed().as_secs_f64(),
            if self.interrupted {
                " (interrupted)"
            } else {
                ""
            }
        ));
        for event in ran {
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
