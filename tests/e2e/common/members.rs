//! Members of the Rust client library run inside a test process, a few per
//! group, each keeping what it saw: the tasks it holds, every event that
//! stops its work (a loss to its lease, a fencing, a replacement), the
//! errors it reported, and when each of its heartbeats was answered and
//! how long it took.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use assignd_client::{ClientError, Event, HeartbeatObserver, Member, MemberConfig, NoLags};

/// What one member saw.
#[derive(Default)]
struct Seen {
    held: BTreeSet<String>,
    /// Losses (the lease ran out), fencings, replacements.
    trouble: Vec<String>,
    /// Errors the member reported (a refused or failed heartbeat).
    errors: Vec<String>,
    /// Answered heartbeats: when each ended, and how long it took.
    answered: Vec<(Instant, Duration)>,
}

struct Observed(Arc<Mutex<Seen>>);

impl HeartbeatObserver for Observed {
    fn heartbeat(&self, latency: Duration, result: Result<(), &ClientError>) {
        if result.is_ok() {
            let mut seen = self.0.lock().unwrap();
            seen.answered.push((Instant::now(), latency));
        }
    }
}

/// Static members named `workers` in each of `groups`, subscribed to
/// `orders`, acking every revocation at once.
pub struct Members {
    _runtime: tokio::runtime::Runtime,
    _handles: Vec<assignd_client::MemberHandle>,
    seen: Vec<Arc<Mutex<Seen>>>,
}

impl Members {
    pub fn start(bootstrap: &str, groups: &[&str], workers: &[&str]) -> Members {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let mut seen = Vec::new();
        let mut handles = Vec::new();
        for &group in groups {
            for &worker in workers {
                let state = Arc::new(Mutex::new(Seen::default()));
                let config = MemberConfig::new(bootstrap, group, ["orders"]).with_name(worker);
                let observer = Arc::new(Observed(state.clone()));
                let (handle, events) = runtime.block_on(async {
                    Member::start_observed(config, NoLags, observer).expect("a valid config")
                });
                runtime.spawn(record(format!("{group}/{worker}"), events, state.clone()));
                seen.push(state);
                handles.push(handle);
            }
        }
        Members {
            _runtime: runtime,
            _handles: handles,
            seen,
        }
    }

    /// Waits until every member holds `tasks` tasks.
    pub fn wait_settled(&self, tasks: usize, within: Duration) {
        let deadline = Instant::now() + within;
        while !self
            .seen
            .iter()
            .all(|s| s.lock().unwrap().held.len() == tasks)
        {
            assert!(Instant::now() < deadline, "the members never settled");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether every member was answered after `since`.
    pub fn all_answered_after(&self, since: Instant) -> bool {
        self.seen.iter().all(|s| {
            s.lock()
                .unwrap()
                .answered
                .last()
                .is_some_and(|&(at, _)| at > since)
        })
    }

    /// Waits until every member has been answered after `since`.
    pub fn wait_answered_after(&self, since: Instant, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.all_answered_after(since) {
            assert!(Instant::now() < deadline, "a member was not answered again");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The longest heartbeat that ended after `since`.
    pub fn longest_heartbeat_after(&self, since: Instant) -> Duration {
        self.seen
            .iter()
            .flat_map(|s| {
                let seen = s.lock().unwrap();
                seen.answered
                    .iter()
                    .filter(|&&(at, _)| at > since)
                    .map(|&(_, took)| took)
                    .collect::<Vec<_>>()
            })
            .max()
            .unwrap_or_default()
    }

    pub fn holdings(&self) -> Vec<BTreeSet<String>> {
        self.seen
            .iter()
            .map(|s| s.lock().unwrap().held.clone())
            .collect()
    }

    /// Every loss, fencing and replacement any member saw.
    pub fn trouble(&self) -> Vec<String> {
        self.seen
            .iter()
            .flat_map(|s| s.lock().unwrap().trouble.clone())
            .collect()
    }

    /// Every error any member reported.
    pub fn errors(&self) -> Vec<String> {
        self.seen
            .iter()
            .flat_map(|s| s.lock().unwrap().errors.clone())
            .collect()
    }
}

/// Keeps what the member `who` is told in `seen`, acking revocations.
async fn record(
    who: String,
    mut events: tokio::sync::mpsc::Receiver<Event>,
    seen: Arc<Mutex<Seen>>,
) {
    while let Some(event) = events.recv().await {
        let mut seen = seen.lock().unwrap();
        match event {
            Event::Assigned(tasks) | Event::Promoted(tasks) => {
                seen.held.extend(tasks.iter().map(ToString::to_string));
            }
            Event::Revoked { tasks, ack } => {
                for task in &tasks {
                    seen.held.remove(&task.to_string());
                }
                ack.ack();
            }
            Event::Lost(ref tasks) => {
                for task in tasks {
                    seen.held.remove(&task.to_string());
                }
                seen.trouble.push(format!("{who}: {event:?}"));
            }
            Event::Fenced { .. } | Event::Replaced { .. } => {
                seen.trouble.push(format!("{who}: {event:?}"));
            }
            Event::Error(_) => seen.errors.push(format!("{who}: {event:?}")),
            _ => {}
        }
    }
}
