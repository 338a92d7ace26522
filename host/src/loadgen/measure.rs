//! `assignd loadgen`: many simulated stateful members against a running
//! host, to measure what a fleet sees. Members are the client library's
//! simulated workers (`assignd_client::simulated`, through the fleet), many
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
//! the group config it creates (and the shadow, `--shadow`, it binds on
//! each) and the steps of a run; `report` prints
//! and writes the figures, the fleet does the rest.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use assignd_client::Connections;
use assignd_client::simulated::Rates;
use serde_json::json;

use super::churn::{self, ChurnEvent};
use super::fleet::{self, Fleet, MemberSpec};
use super::host_process::HostProcess;
use super::load_figures::{self, GroupLoad, Sampled};
use super::load_report::{HostMeasured, LoadMeasured};
use super::probe::{self, Admin, Settled};
use super::report::{EventFigures, Measured, Report};
use super::settings::LoadgenSettings;
use super::task_load::{RunLoads, TaskLoad, TaskLoads};
use super::{LoadTestError, new_runtime};

/// How long every group may take to settle before measuring starts.
const SETTLE_FIRST_S: u64 = 120;

/// Checks the settings, then runs the load test on a fresh Tokio runtime.
pub fn loadgen(settings: LoadgenSettings) -> Result<(), LoadTestError> {
    let churn = checked_churn(&settings)?;
    let loads = checked_loads(&settings)?;
    new_runtime()?.block_on(run(settings, churn, loads))
}

/// The tasks' loads of a run and the band they are judged by.
struct LoadRun {
    spec: String,
    loads: Arc<RunLoads>,
    band: f64,
}

/// The created groups' params: `--param`s, and `--load-band` as the
/// `load_band` param.
fn params(settings: &LoadgenSettings) -> BTreeMap<String, String> {
    let mut params: BTreeMap<String, String> = settings.params.iter().cloned().collect();
    if let Some(band) = &settings.load.load_band {
        params.insert(assignd_guest_sdk::load::BAND_PARAM.to_owned(), band.clone());
    }
    params
}

/// The load distribution and the band, checked.
fn checked_loads(settings: &LoadgenSettings) -> Result<Option<LoadRun>, LoadTestError> {
    let load = &settings.load;
    let Some(spec) = &load.task_load else {
        if load.load_unit.is_some() {
            return Err(LoadTestError::Usage(
                "--load-unit needs --task-load (the loads the members report)".into(),
            ));
        }
        return Ok(None);
    };
    let kind =
        TaskLoad::parse(spec).map_err(|e| LoadTestError::Usage(format!("--task-load {e}")))?;
    let band = assignd_guest_sdk::load::band(&params(settings))
        .map_err(|e| LoadTestError::Usage(format!("--load-band: {e}")))?;
    let loads = TaskLoads::new(kind, settings.tasks, settings.members, load.load_seed);
    Ok(Some(LoadRun {
        spec: spec.clone(),
        loads: Arc::new(RunLoads::new(loads)),
        band,
    }))
}

/// The churn events, checked against the member count and the duration.
fn checked_churn(settings: &LoadgenSettings) -> Result<Vec<ChurnEvent>, LoadTestError> {
    let churn = match &settings.churn {
        Some(spec) => churn::parse_churn(spec)
            .and_then(|churn| churn::check_churn(&churn, settings.members).map(|()| churn))
            .map_err(|e| LoadTestError::Usage(format!("--churn {e}")))?,
        None => Vec::new(),
    };
    let duration_s = settings.duration_s;
    if !(duration_s.is_finite() && duration_s > 0.0 && duration_s <= 86_400.0) {
        return Err(LoadTestError::Usage(
            "--duration must be above 0 and at most 86400 seconds".into(),
        ));
    }
    if let Some(last) = churn.last()
        && last.at.as_secs_f64() >= duration_s
    {
        return Err(LoadTestError::Usage(format!(
            "--churn {:?} comes at or after the end of --duration {duration_s}",
            last.spec
        )));
    }
    Ok(churn)
}

/// The group config loadgen creates.
fn group_config(settings: &LoadgenSettings) -> serde_json::Value {
    let session_timeout_ms = settings
        .session_timeout_ms
        .unwrap_or((settings.interval_ms * 10).max(10_000));
    let mut config = json!({
        "topics": [{"name": fleet::TOPIC, "partitions": settings.tasks}],
        "assignor": settings.assignor,
        "params": params(settings),
        "heartbeat_interval_ms": settings.interval_ms.max(1),
        "session_timeout_ms": session_timeout_ms,
        // Its members are dynamic; the host only wants the interval below
        // this one too.
        "registration_timeout_ms": session_timeout_ms.max(120_000),
        "expansion_timeout_ms": settings.expansion_timeout_ms,
        "learners": settings.learners,
        "acceptable_recovery_lag": settings.acceptable_recovery_lag,
        "max_learners": settings.max_learners.unwrap_or(settings.tasks),
    });
    let load = &settings.load;
    let fields = [
        ("load_unit", load.load_unit.as_ref().map(|u| json!(u))),
        ("load_window_ms", load.load_window_ms.map(|v| json!(v))),
        ("load_cooldown_ms", load.load_cooldown_ms.map(|v| json!(v))),
        (
            "load_half_life_ms",
            load.load_half_life_ms.map(|v| json!(v)),
        ),
    ];
    let object = config.as_object_mut().expect("an object");
    for (name, value) in fields {
        if let Some(value) = value {
            object.insert(name.to_owned(), value);
        }
    }
    config
}

/// The shadow binding set on every created group, if `--shadow` is given.
fn shadow_body(settings: &LoadgenSettings) -> Option<serde_json::Value> {
    let assignor = settings.shadow.as_ref()?;
    let params: BTreeMap<&str, &str> = settings
        .shadow_params
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    Some(json!({"assignor": assignor, "params": params}))
}

/// The groups of a run, and the host's admin API that probes them.
struct Groups<'a> {
    admin: &'a Admin,
    names: &'a [String],
    tasks: u64,
}

async fn run(
    settings: LoadgenSettings,
    churn: Vec<ChurnEvent>,
    loads: Option<LoadRun>,
) -> Result<(), LoadTestError> {
    let first = settings.host.split(',').next().unwrap_or_default();
    let admin = Admin::new(first, settings.token.clone()).map_err(LoadTestError::Failed)?;
    let config = group_config(&settings);
    let names: Vec<String> = (0..settings.groups)
        .map(|g| format!("{}-{g}", settings.prefix))
        .collect();
    let shadow = shadow_body(&settings);
    for name in &names {
        admin
            .create_group(name, &config)
            .await
            .map_err(LoadTestError::Failed)?;
        if let Some(shadow) = &shadow {
            admin
                .bind_shadow(name, shadow)
                .await
                .map_err(LoadTestError::Failed)?;
        }
    }
    let mut fleet = start_fleet(&settings, names.clone(), loads.as_ref())?;
    let groups = Groups {
        admin: &admin,
        names: &names,
        tasks: u64::from(settings.tasks),
    };
    settle_first(&groups, &mut fleet, &settings).await?;
    let mut measured = measure(&groups, &mut fleet, &churn, &settings, loads.as_ref()).await?;
    if let (Some(load), Some(run)) = (&mut measured.load, &loads) {
        load.task_load = run.spec.clone();
    }
    fleet.leave_all().await;
    Report {
        settings: &settings,
        churn: &churn,
        host: &admin.host,
        config: &config,
        names: &names,
        measured,
    }
    .finish(&fleet.beats)
}

/// Starts `settings.members` members in every group.
fn start_fleet(
    settings: &LoadgenSettings,
    names: Vec<String>,
    loads: Option<&LoadRun>,
) -> Result<Fleet, LoadTestError> {
    let reported = settings.load.load_unit.is_some();
    let spec = MemberSpec {
        loads: loads.filter(|_| reported).map(|run| run.loads.clone()),
        host: settings.host.clone(),
        rates: Rates {
            replay_per_s: settings.replay_rate,
            process_per_s: settings.process_rate,
        },
        changelog_len: settings.changelog_len,
        connections: Connections::new().map_err(|e| LoadTestError::Failed(e.to_string()))?,
    };
    let groups = names.len();
    let mut fleet = Fleet::new(spec, names);
    for g in 0..groups {
        fleet
            .add(g, settings.members)
            .map_err(|e| LoadTestError::Failed(format!("cannot start a member: {e}")))?;
    }
    Ok(fleet)
}

/// Waits for every group to settle and every first owner to restore its
/// state: the first assignment is not measured, the baseline is steady.
async fn settle_first(
    groups: &Groups<'_>,
    fleet: &mut Fleet,
    settings: &LoadgenSettings,
) -> Result<(), LoadTestError> {
    let deadline = Instant::now() + Duration::from_secs(SETTLE_FIRST_S);
    for name in groups.names {
        let started = Instant::now();
        let settled = fleet
            .reporting_loads(probe::probe(
                groups.admin.clone(),
                name.clone(),
                settings.members as usize,
                groups.tasks,
                started,
                deadline,
            ))
            .await;
        if settled.settled_s.is_none() {
            // Name the reason if the host refuses to show the group.
            groups
                .admin
                .group(name)
                .await
                .map_err(LoadTestError::Failed)?;
            return Err(LoadTestError::Failed(format!(
                "group {name} did not settle within {SETTLE_FIRST_S} s of the start"
            )));
        }
    }
    let restore_deadline = Instant::now()
        + Duration::from_secs(SETTLE_FIRST_S)
        + Duration::from_secs_f64(
            settings.changelog_len as f64 / settings.replay_rate.max(1) as f64,
        );
    while (0..groups.names.len()).any(|g| fleet.ledger.holding(g).restoring > 0) {
        if Instant::now() > restore_deadline {
            return Err(LoadTestError::Failed(
                "the first owners did not restore their state in time (is --replay-rate too low?)"
                    .into(),
            ));
        }
        fleet
            .reporting_loads(tokio::time::sleep(Duration::from_millis(50)))
            .await;
    }
    Ok(())
}

/// Measures for the run's duration while the churn plays, then collects
/// each event's figures, the loads' and the host's.
async fn measure(
    groups: &Groups<'_>,
    fleet: &mut Fleet,
    churn: &[ChurnEvent],
    settings: &LoadgenSettings,
    loads: Option<&LoadRun>,
) -> Result<Measured, LoadTestError> {
    let started = Instant::now();
    let end = started + Duration::from_secs_f64(settings.duration_s);
    let host = settings.load.host_pid.map(HostProcess);
    let host_before = host.map(|h| (h.cpu_s(), h.io()));
    let me = HostProcess(std::process::id());
    let sent_before = me.io();
    let members: Arc<Vec<AtomicU32>> = Arc::new(
        (0..groups.names.len())
            .map(|_| AtomicU32::new(settings.members))
            .collect(),
    );
    let sampler = loads.map(|run| {
        run.loads.start(started);
        start_sampler(groups, fleet, run, members.clone(), settings, started)
    });
    let baseline = EventFigures {
        event: None,
        members_after: settings.members,
        window: fleet.ledger.open_window(),
        probe: None,
        settled: Vec::new(),
        windows: Vec::new(),
    };
    fleet.ledger.record_timeline();
    fleet.beats.measuring.store(true, Ordering::Relaxed);
    let mut figures = vec![baseline];
    let played = play_churn(groups, fleet, churn, &members, started, end).await?;
    figures.extend(played);
    fleet
        .reporting_loads(tokio::time::sleep_until(end.into()))
        .await;
    fleet.beats.measuring.store(false, Ordering::Relaxed);
    let elapsed_s = started.elapsed().as_secs_f64();
    let heartbeats =
        fleet.beats.ok.load(Ordering::Relaxed) + fleet.beats.errors.load(Ordering::Relaxed);
    let sent = sent_before
        .zip(me.io())
        .filter(|_| heartbeats > 0)
        .map(|(a, b)| b.written.saturating_sub(a.written) as f64 / heartbeats as f64);
    let host = Some(HostMeasured {
        sent_per_heartbeat: sent,
        ..host
            .zip(host_before)
            .map(|(h, before)| host_figures(h, before, elapsed_s, heartbeats))
            .unwrap_or_default()
    });
    let load = match sampler {
        Some((stop, task, run)) => {
            stop.store(true, Ordering::Relaxed);
            let groups: Vec<GroupLoad> = task.await.unwrap_or_default();
            Some(LoadMeasured {
                task_load: String::new(),
                reported: settings.load.load_unit.is_some(),
                band: run,
                groups,
            })
        }
        None => None,
    };
    for figure in &mut figures {
        figure.windows = (0..groups.names.len())
            .map(|g| fleet.ledger.window(g, figure.window))
            .collect();
    }
    for figure in &mut figures {
        if let Some(probe) = figure.probe.take() {
            figure.settled = probe.await.unwrap_or_default();
        }
    }
    Ok(Measured {
        elapsed_s,
        figures,
        double_ownership: fleet.ledger.double_ownership(),
        lease_lapses: fleet.ledger.lease_lapses(),
        timeline: fleet.ledger.timeline(),
        load,
        host,
    })
}

/// A running load sampler: its stop flag, its task, and the band.
type Sampler = (
    Arc<AtomicBool>,
    tokio::task::JoinHandle<Vec<GroupLoad>>,
    f64,
);

/// Starts sampling every group's member loads from `started`.
fn start_sampler(
    groups: &Groups<'_>,
    fleet: &Fleet,
    run: &LoadRun,
    members: Arc<Vec<AtomicU32>>,
    settings: &LoadgenSettings,
    started: Instant,
) -> Sampler {
    let stop = Arc::new(AtomicBool::new(false));
    let sampled = Sampled {
        ledger: fleet.ledger.clone(),
        loads: run.loads.clone(),
        names: groups.names.to_vec(),
        members,
        band: run.band,
        every: Duration::from_millis(settings.load.load_sample_ms),
        admin: Some(groups.admin.clone()),
    };
    let task = tokio::spawn(load_figures::sample(sampled, started, stop.clone()));
    (stop, task, run.band)
}

/// The host's CPU and bytes per heartbeat since `before`.
fn host_figures(
    host: HostProcess,
    before: (Option<f64>, Option<super::host_process::Io>),
    elapsed_s: f64,
    heartbeats: u64,
) -> HostMeasured {
    let (cpu_before, io_before) = before;
    let cpu = cpu_before.zip(host.cpu_s());
    let io = io_before.zip(host.io());
    let per_beat = |bytes: u64| (heartbeats > 0).then(|| bytes as f64 / heartbeats as f64);
    HostMeasured {
        cpu_percent: cpu.map(|(a, b)| (b - a) / elapsed_s * 100.0),
        written_per_heartbeat: io.and_then(|(a, b)| per_beat(b.written.saturating_sub(a.written))),
        sent_per_heartbeat: None,
    }
}

/// Applies each churn event to every group at its time, and starts
/// probing the groups until the next event (or `end`).
async fn play_churn(
    groups: &Groups<'_>,
    fleet: &mut Fleet,
    churn: &[ChurnEvent],
    counts: &[AtomicU32],
    started: Instant,
    end: Instant,
) -> Result<Vec<EventFigures>, LoadTestError> {
    let mut members = counts.first().map_or(0, |c| c.load(Ordering::Relaxed));
    let mut figures = Vec::new();
    for (i, event) in churn.iter().enumerate() {
        let at = started + event.at;
        fleet
            .reporting_loads(tokio::time::sleep_until(at.into()))
            .await;
        fleet.reap();
        let window = fleet.ledger.open_window();
        members = event.members_after(members);
        for count in counts {
            count.store(members, Ordering::Relaxed);
        }
        for g in 0..groups.names.len() {
            fleet
                .apply(g, event.kind)
                .await
                .map_err(|e| LoadTestError::Failed(format!("cannot start a member: {e}")))?;
        }
        let until = churn.get(i + 1).map_or(end, |next| started + next.at);
        let probe = tokio::spawn(probe_all(
            groups.admin.clone(),
            groups.names.to_vec(),
            members as usize,
            groups.tasks,
            at,
            until,
        ));
        figures.push(EventFigures {
            event: Some(event.clone()),
            members_after: members,
            window,
            probe: Some(probe),
            settled: Vec::new(),
            windows: Vec::new(),
        });
    }
    Ok(figures)
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
                probe::probe(admin, name, members, tasks, since, until).await,
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
