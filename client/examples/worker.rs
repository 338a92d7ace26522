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
//! It prints one line per event. Ctrl-C or SIGTERM leaves the group (a
//! static worker's leave is temporary: its tasks wait for it).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use assignd_client::simulated::{Rates, Role, StateStore, TaskStates};
use assignd_client::{Assignment, Event, Member, MemberConfig, Task};
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

fn list(tasks: &[Task]) -> String {
    tasks
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
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
    if let Some(token) = &args.token {
        config = config.with_member_token(token);
    }
    let lag_sim = sim.clone();
    let lags = move |assignment: &Assignment| lag_sim.lock().unwrap().lags(assignment);
    let (member, mut events) = Member::start(config, lags)?;
    println!("started as {local}");

    let mut ticker = tokio::time::interval(TICK);
    let mut last = tokio::time::Instant::now();
    // Far enough never to come when no drain was asked for.
    let drain_at = tokio::time::Instant::now()
        + Duration::from_secs(args.drain_after.unwrap_or(365 * 24 * 3600));
    let drain = tokio::time::sleep_until(drain_at);
    tokio::pin!(drain);
    let mut drain_asked = false;
    let shutdown = shutdown_signal();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else {
                    println!("stopped");
                    return Ok(());
                };
                let mut sim = sim.lock().unwrap();
                match event {
                    Event::Joined { member_id } => println!("joined as {member_id}"),
                    Event::Assigned(tasks) => {
                        sim.set(&tasks, Some(Role::Active));
                        println!("assigned {}", list(&tasks));
                    }
                    Event::Promoted(tasks) => {
                        sim.set(&tasks, Some(Role::Active));
                        println!("promoted {}", list(&tasks));
                    }
                    Event::Revoked { tasks, ack } => {
                        // Processing is synchronous here: once the task
                        // is out of the table it is stopped.
                        sim.set(&tasks, None);
                        ack.ack();
                        println!("revoked {}", list(&tasks));
                    }
                    Event::Lost(tasks) => {
                        sim.set(&tasks, None);
                        println!("lost {}", list(&tasks));
                    }
                    Event::LearnerStarted(tasks) => {
                        sim.set(&tasks, Some(Role::Warming));
                        let lags: Vec<String> =
                            tasks.iter().map(|t| format!("{t}:{}", sim.lag(t))).collect();
                        println!("learner started {}", lags.join(","));
                    }
                    Event::LearnerStopped(tasks) => {
                        sim.set(&tasks, None);
                        println!("learner stopped {}", list(&tasks));
                    }
                    Event::StandbyStarted(tasks) => {
                        sim.set(&tasks, Some(Role::Warming));
                        println!("standby started {}", list(&tasks));
                    }
                    Event::StandbyStopped(tasks) => {
                        sim.set(&tasks, None);
                        println!("standby stopped {}", list(&tasks));
                    }
                    Event::Draining => println!("draining"),
                    Event::Drained => println!("drained"),
                    Event::Fenced { rejoining } => {
                        println!("fenced{}", if rejoining { ", rejoining" } else { "" });
                    }
                    Event::Replaced { member_name } => {
                        eprintln!("another process took member name {member_name:?}: stopping");
                    }
                    Event::Error(error) => eprintln!("error: {error}"),
                }
            }
            _ = ticker.tick() => {
                let now = tokio::time::Instant::now();
                // Process only what the lease allows: a stalled worker
                // whose tasks went elsewhere must not write after them.
                let status = member.status();
                let at = now.into_std();
                let _ = sim.lock().unwrap().tick(now - last, |task| status.may_process(task, at));
                last = now;
            }
            () = &mut drain, if !drain_asked => {
                drain_asked = true;
                println!("asking to drain");
                member.drain();
            }
            () = &mut shutdown => {
                member.leave().await?;
                println!("left");
                return Ok(());
            }
        }
    }
}

/// Ctrl-C, or SIGTERM on Unix.
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing the SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
