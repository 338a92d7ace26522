//! An example worker with simulated stateful tasks.
//!
//! Each task (topic, partition) has a changelog, shared by every worker
//! through `--state-dir/changelog/<topic>-<partition>` (its end offset).
//! An active task "processes": it appends to its changelog (slowly) and
//! keeps its local checkpoint at the end. A learner or standby replays the
//! changelog from its local checkpoint at `--replay-rate` records/s and
//! reports `end - checkpoint` as its lag. Checkpoints live in
//! `--state-dir/<name>/`, so a static worker restarted with the same
//! `--name` starts warm.
//!
//! ```text
//! cargo run -p assignd-client --example worker -- \
//!     --url http://127.0.0.1:7070 --group billing --name worker-a --topics orders
//! ```
//!
//! It prints one JSON line per event (clients/README.md, "The example
//! worker": the same contract as the workers of the other clients). The
//! first SIGTERM or Ctrl-C drains it (its tasks move to warm owners, then
//! it leaves and exits 0); a second one leaves at once.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use assignd_client::simulated::{Rates, Role, StateStore, TaskStates};
use assignd_client::{Assignment, Event, Member, MemberConfig, StopReason, Task};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "An assignd member simulating stateful tasks")]
struct Args {
    /// The host's base URL.
    #[arg(long, default_value = "http://127.0.0.1:7070")]
    url: String,
    #[arg(long)]
    group: String,
    /// A static member name; without it the worker is dynamic.
    #[arg(long)]
    name: Option<String>,
    /// Comma-separated topics to subscribe to.
    #[arg(long, value_delimiter = ',', required = true)]
    topics: Vec<String>,
    /// Records per second a learner, standby or restoring task replays.
    #[arg(long, default_value_t = 1000)]
    replay_rate: u64,
    /// The length a changelog starts at when no worker wrote it yet.
    #[arg(long, default_value_t = 10_000)]
    changelog_len: u64,
    /// Records per second an active task appends to its changelog.
    #[arg(long, default_value_t = 5)]
    process_rate: u64,
    /// Where changelogs and checkpoints are kept.
    #[arg(long, default_value = "worker-state")]
    state_dir: PathBuf,
    /// Drain (leave gracefully once the tasks moved) after this many seconds.
    #[arg(long)]
    drain_after: Option<u64>,
    /// The group's member token, if its config has one.
    #[arg(
        long,
        env = "ASSIGND_MEMBER_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
    /// Where this worker serves, published in the group's routing table.
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// A pair published with the endpoint; repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    metadata: Vec<(String, String)>,
    /// Report this load for every active task (a synthetic load, in the
    /// group's load unit), once the host asks for loads.
    #[arg(long, value_name = "LOAD", value_parser = load)]
    load_per_task: Option<f64>,
}

/// A load the host accepts: a number from 0 to 1e15.
fn load(text: &str) -> Result<f64, String> {
    text.parse::<f64>()
        .ok()
        .filter(|&load| assignd_client::loads::valid_load(load))
        .ok_or_else(|| format!("{text:?} is not a number from 0 to 1e15"))
}

/// `KEY=VALUE`, split at the first `=`.
fn key_value(pair: &str) -> Result<(String, String), String> {
    let (key, value) = pair
        .split_once('=')
        .ok_or_else(|| format!("{pair:?} is not KEY=VALUE"))?;
    Ok((key.to_owned(), value.to_owned()))
}

/// How often the simulation advances.
const TICK: Duration = Duration::from_millis(100);

/// Changelogs and checkpoints in files: changelogs shared by every worker
/// under `state_dir/changelog`, checkpoints under `state_dir/<name>`.
struct DirStore {
    changelogs: PathBuf,
    checkpoints: PathBuf,
    changelog_len: u64,
}

fn file_name(task: &Task) -> String {
    format!("{}-{}", task.topic, task.partition)
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Writes through a temporary file, so a reader never sees half a number.
fn write_u64(path: &Path, value: u64) {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    if std::fs::write(&tmp, value.to_string()).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

impl StateStore for DirStore {
    fn end(&self, task: &Task) -> u64 {
        read_u64(&self.changelogs.join(file_name(task))).unwrap_or(self.changelog_len)
    }
    fn set_end(&mut self, task: &Task, end: u64) {
        write_u64(&self.changelogs.join(file_name(task)), end);
    }
    fn checkpoint(&self, task: &Task) -> u64 {
        read_u64(&self.checkpoints.join(file_name(task))).unwrap_or(0)
    }
    fn set_checkpoint(&mut self, task: &Task, offset: u64) {
        write_u64(&self.checkpoints.join(file_name(task)), offset);
    }
}

/// Prints one event as a JSON line on stdout (clients/README.md, "The
/// example worker"), with the wall-clock time.
fn print(event: &str, fields: serde_json::Value) {
    let ts_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let mut line = serde_json::json!({"ts_ms": ts_ms, "event": event});
    if let (Some(line), Some(fields)) = (line.as_object_mut(), fields.as_object()) {
        line.extend(fields.clone());
    }
    println!("{line}");
}

fn print_tasks(event: &str, tasks: &[Task]) {
    print(event, serde_json::json!({ "tasks": tasks }));
}

/// Applies one event to the simulated tasks and prints it. A revocation
/// is printed before the tasks stop and the ack goes out.
fn on_event(sim: &mut TaskStates<DirStore>, event: Event) {
    match event {
        Event::Joined { member_id } => {
            print("joined", serde_json::json!({ "member_id": member_id }))
        }
        Event::Assigned(tasks) => {
            sim.set(&tasks, Some(Role::Active));
            print_tasks("assigned", &tasks);
        }
        Event::Promoted(tasks) => {
            sim.set(&tasks, Some(Role::Active));
            print_tasks("promoted", &tasks);
        }
        Event::Revoked { tasks, ack } => {
            print_tasks("revoked", &tasks);
            // Processing is synchronous here: once the task is out of the
            // table it is stopped.
            sim.set(&tasks, None);
            ack.ack();
        }
        Event::Lost(tasks) => {
            sim.set(&tasks, None);
            print_tasks("lost", &tasks);
        }
        Event::LearnerStarted(tasks) => {
            sim.set(&tasks, Some(Role::Warming));
            print_tasks("learner_started", &tasks);
        }
        Event::LearnerStopped(tasks) => {
            sim.set(&tasks, None);
            print_tasks("learner_stopped", &tasks);
        }
        Event::StandbyStarted(tasks) => {
            sim.set(&tasks, Some(Role::Warming));
            print_tasks("standby_started", &tasks);
        }
        Event::StandbyStopped(tasks) => {
            sim.set(&tasks, None);
            print_tasks("standby_stopped", &tasks);
        }
        Event::Draining => print("draining", serde_json::json!({})),
        Event::Drained => print("drained", serde_json::json!({})),
        Event::Fenced { rejoining } => {
            print("fenced", serde_json::json!({ "rejoining": rejoining }))
        }
        Event::Replaced { member_name } => {
            print(
                "replaced",
                serde_json::json!({ "member_name": member_name }),
            );
        }
        Event::Error(error) => print("error", serde_json::json!({ "message": error.to_string() })),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let local = match &args.name {
        Some(name) => name.clone(),
        None => format!("dynamic-{}", std::process::id()),
    };
    let changelogs = args.state_dir.join("changelog");
    let checkpoints = args.state_dir.join(&local);
    std::fs::create_dir_all(&changelogs)?;
    std::fs::create_dir_all(&checkpoints)?;
    let store = DirStore {
        changelogs,
        checkpoints,
        changelog_len: args.changelog_len,
    };
    let rates = Rates {
        replay_per_s: args.replay_rate,
        process_per_s: args.process_rate,
    };
    let sim = Arc::new(Mutex::new(TaskStates::new(store, rates)));

    let mut config = MemberConfig::new(&args.url, &args.group, args.topics.clone());
    if let Some(name) = &args.name {
        config = config.with_name(name);
    }
    if let Some(endpoint) = &args.endpoint {
        config = config.with_endpoint(endpoint);
    }
    for (key, value) in &args.metadata {
        config = config.with_metadata(key, value);
    }
    if let Some(token) = &args.token {
        config = config.with_member_token(token);
    }
    let lag_sim = sim.clone();
    let lags = move |assignment: &Assignment| lag_sim.lock().unwrap().lags(assignment);
    let (member, mut events) = Member::start(config, lags)?;
    // Installed before the first event, so a SIGTERM never finds the
    // default action.
    let mut signals = Signals::install()?;

    let mut ticker = tokio::time::interval(TICK);
    let mut last = tokio::time::Instant::now();
    // Far enough never to come when no drain was asked for.
    let drain_at = tokio::time::Instant::now()
        + Duration::from_secs(args.drain_after.unwrap_or(365 * 24 * 3600));
    let drain = tokio::time::sleep_until(drain_at);
    tokio::pin!(drain);
    let mut drain_asked = false;
    let mut member = Some(member);
    loop {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { break };
                on_event(&mut sim.lock().unwrap(), event);
            }
            _ = ticker.tick() => {
                let Some(member) = &member else { continue };
                let now = tokio::time::Instant::now();
                // Process only what the lease allows: a stalled worker
                // whose tasks went elsewhere must not write after them.
                let status = member.status();
                let at = now.into_std();
                let _ = sim.lock().unwrap().tick(now - last, |task| status.may_process(task, at));
                last = now;
                if let Some(load) = args.load_per_task {
                    // Sent only once the host asks, and only what moved.
                    let loads = status.assignment.active.iter().map(|task| (task.clone(), load));
                    let _ = member.set_loads(loads.collect());
                }
            }
            () = &mut drain, if !drain_asked => {
                drain_asked = true;
                if let Some(member) = &member {
                    member.drain();
                }
            }
            () = signals.next() => {
                // The first signal drains (the tasks move to warm owners,
                // then the member leaves); a second one leaves at once.
                let Some(handle) = &member else { continue };
                if !drain_asked {
                    drain_asked = true;
                    handle.drain();
                } else if let Some(handle) = member.take() {
                    sim.lock().unwrap().set(&handle.assignment().active.into_iter().collect::<Vec<_>>(), None);
                    let _ = handle.leave().await;
                    break;
                }
            }
        }
    }
    let reason = member
        .as_ref()
        .and_then(|member| member.status().stopped)
        .unwrap_or(StopReason::Left);
    print("stopped", serde_json::json!({ "reason": reason }));
    if matches!(reason, StopReason::Left | StopReason::Drained) {
        Ok(())
    } else {
        std::process::exit(1)
    }
}

/// SIGTERM and SIGINT, installed at once.
struct Signals {
    #[cfg(unix)]
    term: tokio::signal::unix::Signal,
    #[cfg(unix)]
    int: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> std::io::Result<Self> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Ok(Signals {
                term: signal(SignalKind::terminate())?,
                int: signal(SignalKind::interrupt())?,
            })
        }
        #[cfg(not(unix))]
        Ok(Signals {})
    }

    async fn next(&mut self) {
        #[cfg(unix)]
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}
