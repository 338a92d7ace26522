//! `assignd-kv worker`: a member of the group that serves `GET` and `PUT
//! /kv/{key}` for the keys of the partitions it owns. It owns the member's
//! loop (events to the store, lags to the host, signals) and the HTTP
//! handlers; the state's rules are the store's.
//!
//! A partition is served from the moment it is granted (`assigned`, or
//! `promoted` from a learner) and its changelog replayed to the end, until
//! it is revoked (the worker stops serving it, then acknowledges) or lost.
//! Every request also checks the member's lease, so a worker stalled past
//! it answers `421 not_owner` instead of serving a partition that may be
//! elsewhere. Learners and standbys replay their changelogs in the
//! background and report what is left as their lag.
//!
//! It prints one JSON line per event on stdout (`listening` first, with
//! its endpoint), as the client's example worker does. The first SIGTERM
//! or Ctrl-C drains it (its partitions move to warm owners, then it leaves
//! and exits 0); a second one leaves at once.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use assignd_client::{Event, Member, MemberConfig, Status, StopReason, Task, partition_for_key};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use tokio::sync::watch;

use crate::changelog::Record;
use crate::http::{NOT_OWNER, TOPIC, error};
use crate::signals::Signals;
use crate::store::{Refusal, Store};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The host's base URL (a cluster's nodes separated by commas).
    #[arg(long)]
    url: String,
    #[arg(long)]
    group: String,
    /// Where to serve, `host:port` (port 0: any free one); the endpoint
    /// published in the routing table is `http://` and the bound address.
    #[arg(long)]
    listen: String,
    /// A static member name; without it the worker is dynamic.
    #[arg(long)]
    name: Option<String>,
    /// The directory every worker shares: changelogs in `changelog/`.
    #[arg(long)]
    data_dir: PathBuf,
    /// The partition count of topic `kv` in the group's config: keys map
    /// to partitions by it, as the router's table does.
    #[arg(long, default_value_t = 12)]
    partitions: u32,
    /// The group's member token, if its config has one.
    #[arg(long, env = "ASSIGND_MEMBER_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

/// How often learners and standbys replay what their owner appended.
const WARM_UP_EVERY: Duration = Duration::from_millis(100);

#[derive(Clone)]
struct Shared {
    store: Arc<Store>,
    status: watch::Receiver<Status>,
}

impl Shared {
    /// The partition of `key`, and whether the lease lets it be served.
    fn route(&self, key: &str) -> (u32, impl Fn() -> bool + use<>) {
        let partition = partition_for_key(key.as_bytes(), self.store.partitions());
        let task = Task::new(TOPIC, partition);
        let status = self.status.clone();
        let may_process = move || status.borrow().may_process(&task, Instant::now());
        (partition, may_process)
    }
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.partitions > 0, "--partitions must be at least 1");
    let listener = tokio::net::TcpListener::bind(&args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    let endpoint = format!("http://{}", listener.local_addr()?);
    let store = Arc::new(Store::new(&args.data_dir, args.partitions));

    let mut config = MemberConfig::new(&args.url, &args.group, [TOPIC]).with_endpoint(&endpoint);
    if let Some(name) = &args.name {
        config = config.with_name(name);
    }
    if let Some(token) = &args.token {
        config = config.with_member_token(token);
    }
    let lag_store = Arc::clone(&store);
    let lags = move |assignment: &assignd_client::Assignment| {
        let warming = assignment.learner.iter().chain(&assignment.standby);
        warming
            .filter(|task| task.topic == TOPIC && task.partition < lag_store.partitions())
            .filter_map(|task| Some((task.clone(), lag_store.lag(task.partition).ok()?)))
            .collect()
    };
    let (member, events) = Member::start(config, lags)?;
    let shared = Shared {
        store: Arc::clone(&store),
        status: member.watch(),
    };
    let app = axum::Router::new()
        .route("/kv/{key}", axum::routing::get(get_key).put(put_key))
        .with_state(shared.clone());
    let (stop_serving, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
    });
    print("listening", serde_json::json!({ "endpoint": endpoint }));
    let warm_up = tokio::spawn(warm_up_loop(shared.clone()));

    let reason = member_loop(member, events, &store).await?;
    warm_up.abort();
    let _ = stop_serving.send(());
    let _ = server.await;
    print("stopped", serde_json::json!({ "reason": reason }));
    if matches!(reason, StopReason::Left | StopReason::Drained) {
        Ok(())
    } else {
        std::process::exit(1)
    }
}

/// Acts on the member's events until its loop ends; says why it ended.
async fn member_loop(
    member: assignd_client::MemberHandle,
    mut events: tokio::sync::mpsc::Receiver<Event>,
    store: &Arc<Store>,
) -> anyhow::Result<StopReason> {
    let mut signals = Signals::install()?;
    let mut member = Some(member);
    let mut drain_asked = false;
    loop {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { break };
                on_event(store, event).await;
            }
            () = signals.next() => {
                let Some(handle) = &member else { continue };
                if !drain_asked {
                    drain_asked = true;
                    handle.drain();
                } else if let Some(handle) = member.take() {
                    for task in handle.assignment().active {
                        store.stop(task.partition);
                    }
                    let _ = handle.leave().await;
                    return Ok(StopReason::Left);
                }
            }
        }
    }
    Ok(member
        .and_then(|member| member.status().stopped)
        .unwrap_or(StopReason::Left))
}

/// The partitions of topic `kv` among `tasks`.
fn partitions(store: &Store, tasks: &[Task]) -> Vec<u32> {
    tasks
        .iter()
        .filter(|task| task.topic == TOPIC && task.partition < store.partitions())
        .map(|task| task.partition)
        .collect()
}

/// Applies one event to the store, then prints it. A granted partition is
/// printed once it is served; a revoked one once it is no longer, before
/// the acknowledgement goes out.
async fn on_event(store: &Arc<Store>, event: Event) {
    match event {
        Event::Assigned(tasks) => grant(store, "assigned", &tasks).await,
        Event::Promoted(tasks) => grant(store, "promoted", &tasks).await,
        Event::Revoked { tasks, ack } => {
            stop_serving(store, &tasks).await;
            print_tasks("revoked", &tasks);
            ack.ack();
        }
        Event::Lost(tasks) => {
            stop_serving(store, &tasks).await;
            print_tasks("lost", &tasks);
        }
        Event::LearnerStarted(tasks) | Event::StandbyStarted(tasks) => {
            print_tasks("warming", &tasks)
        }
        Event::LearnerStopped(tasks) | Event::StandbyStopped(tasks) => {
            print_tasks("cooled", &tasks)
        }
        Event::Joined { member_id } => {
            print("joined", serde_json::json!({ "member_id": member_id }))
        }
        Event::Draining => print("draining", serde_json::json!({})),
        Event::Drained => print("drained", serde_json::json!({})),
        Event::Fenced { rejoining } => {
            print("fenced", serde_json::json!({ "rejoining": rejoining }))
        }
        Event::Replaced { member_name } => print(
            "replaced",
            serde_json::json!({ "member_name": member_name }),
        ),
        Event::Error(e) => print("error", serde_json::json!({ "message": e.to_string() })),
    }
}

/// Serves `tasks` once their changelogs are replayed to the end, then
/// prints `event`.
async fn grant(store: &Arc<Store>, event: &str, tasks: &[Task]) {
    let served = Arc::clone(store);
    let granted = partitions(store, tasks);
    let result =
        tokio::task::spawn_blocking(move || granted.into_iter().try_for_each(|p| served.serve(p)))
            .await;
    if let Ok(Err(e)) | Err(e) = result.map_err(std::io::Error::other) {
        // Without its changelog a partition cannot be served; the worker
        // stops rather than answer from a partial map.
        print("error", serde_json::json!({ "message": e.to_string() }));
        std::process::exit(1);
    }
    print_tasks(event, tasks);
}

/// Stops serving `tasks`; returns once no write of theirs is in flight.
async fn stop_serving(store: &Arc<Store>, tasks: &[Task]) {
    let store = Arc::clone(store);
    let stopped = partitions(&store, tasks);
    let _ =
        tokio::task::spawn_blocking(move || stopped.into_iter().for_each(|p| store.stop(p))).await;
}

/// Replays, every [`WARM_UP_EVERY`], the changelogs of the partitions
/// this worker is a learner or standby of.
async fn warm_up_loop(shared: Shared) {
    let mut ticker = tokio::time::interval(WARM_UP_EVERY);
    loop {
        ticker.tick().await;
        let assignment = shared.status.borrow().assignment.clone();
        let warming: Vec<Task> = assignment
            .learner
            .into_iter()
            .chain(assignment.standby)
            .collect();
        let warming = partitions(&shared.store, &warming);
        let store = Arc::clone(&shared.store);
        let _ = tokio::task::spawn_blocking(move || {
            for partition in warming {
                // A failed read is retried at the next tick; the lag
                // reported meanwhile says how far behind it is.
                let _ = store.warm_up(partition);
            }
        })
        .await;
    }
}

async fn get_key(State(shared): State<Shared>, Path(key): Path<String>) -> Response {
    let (partition, may_process) = shared.route(&key);
    let store = Arc::clone(&shared.store);
    let read = tokio::task::spawn_blocking(move || store.get(partition, &key, may_process)).await;
    match read.map_err(std::io::Error::other) {
        Ok(Ok(Some(value))) => value.into_response(),
        Ok(Ok(None)) => error(StatusCode::NOT_FOUND, "not_found", "no such key"),
        Ok(Err(refusal)) => refused(partition, refusal),
        Err(e) => refused(partition, Refusal::Io(e)),
    }
}

async fn put_key(State(shared): State<Shared>, Path(key): Path<String>, value: String) -> Response {
    let (partition, may_process) = shared.route(&key);
    let store = Arc::clone(&shared.store);
    let record = Record { key, value };
    let write =
        tokio::task::spawn_blocking(move || store.put(partition, record, may_process)).await;
    match write.map_err(std::io::Error::other) {
        Ok(Ok(())) => StatusCode::OK.into_response(),
        Ok(Err(refusal)) => refused(partition, refusal),
        Err(e) => refused(partition, Refusal::Io(e)),
    }
}

fn refused(partition: u32, refusal: Refusal) -> Response {
    match refusal {
        Refusal::NotOwner => error(
            StatusCode::MISDIRECTED_REQUEST,
            NOT_OWNER,
            format!("partition {partition} of {TOPIC} is not served here now"),
        ),
        Refusal::Io(e) => {
            eprintln!("partition {partition}: {e}");
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "the changelog could not be read or written",
            )
        }
    }
}

/// One event as a JSON line on stdout, with the wall-clock time.
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
