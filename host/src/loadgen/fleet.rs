//! The fleet: simulated stateful members (`assignd_client::simulated`
//! workers, many per process on one Tokio runtime) in groups of a running
//! host, started, scaled, killed and stopped by churn events, each
//! reporting what it holds to the ledger and its heartbeats to the
//! heartbeat figures. It knows nothing of how the figures are printed.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use assignd_client::simulated::{
    Changelogs, Listener, MemoryStore, Rates, SimulatedWorker, WorkerView,
};
use assignd_client::{ClientError, Connections, MemberConfig, Status, Task};
use tokio::sync::watch;

use super::churn::ChurnKind;
use super::ledger::Ledger;
use super::lock;
use super::task_load::RunLoads;

/// The one topic every simulated group has.
pub const TOPIC: &str = "orders";
/// How often simulated state advances.
pub const SIM_TICK: Duration = Duration::from_millis(50);
/// How often the workers are told the loads of tasks they newly hold.
pub const LOAD_REPORT_EVERY: Duration = Duration::from_millis(50);

/// Heartbeats seen while measuring.
pub struct Beats {
    pub measuring: AtomicBool,
    pub ok: AtomicU64,
    pub errors: AtomicU64,
    /// Latencies of successful heartbeats, in µs.
    pub latencies: Mutex<hdrhistogram::Histogram<u64>>,
}

impl Default for Beats {
    fn default() -> Self {
        Beats {
            measuring: AtomicBool::new(false),
            ok: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            latencies: Mutex::new(
                hdrhistogram::Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds"),
            ),
        }
    }
}

impl Beats {
    pub fn latencies(&self) -> hdrhistogram::Histogram<u64> {
        lock(&self.latencies).clone()
    }
}

/// One worker's listener: its group and number in the ledger, and the
/// tasks it holds active for its load reports.
struct Entry {
    ledger: Arc<Ledger>,
    beats: Arc<Beats>,
    group: usize,
    member: u64,
    holding: Mutex<Holding>,
}

/// The partitions a worker holds active, and those whose load it has not
/// been told yet.
#[derive(Default)]
struct Holding {
    active: BTreeSet<u32>,
    fresh: Vec<u32>,
}

impl Listener for Entry {
    fn active(&self, task: &Task, restoring: bool) {
        self.ledger.active(self.group, self.member, task, restoring);
        let mut holding = lock(&self.holding);
        holding.active.insert(task.partition);
        holding.fresh.push(task.partition);
    }
    fn restored(&self, task: &Task) {
        self.ledger.restored(self.group, self.member, task);
    }
    fn released(&self, tasks: &[Task]) {
        self.ledger.released(self.group, self.member, tasks);
        let mut holding = lock(&self.holding);
        for task in tasks {
            holding.active.remove(&task.partition);
        }
    }
    fn member_status(&self, status: watch::Receiver<Status>) {
        self.ledger.watch(self.group, self.member, status);
    }
    fn heartbeat(&self, latency: Duration, result: Result<(), &ClientError>) {
        if !self.beats.measuring.load(Ordering::Relaxed) {
            return;
        }
        match result {
            Ok(()) => {
                self.beats.ok.fetch_add(1, Ordering::Relaxed);
                let _ = lock(&self.beats.latencies).record(latency.as_micros().max(1) as u64);
            }
            Err(_) => {
                self.beats.errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// How the simulated members behave.
#[derive(Clone, Debug)]
pub struct MemberSpec {
    pub host: String,
    pub rates: Rates,
    pub changelog_len: u64,
    /// Every member's heartbeats go over these: a few connections for the
    /// whole fleet rather than one per member (100,000 members would not
    /// fit under this process's descriptor limit, nor the host's).
    pub connections: Connections,
    /// The tasks' loads the members report (the group has a load unit),
    /// or None: they report none.
    pub loads: Option<Arc<RunLoads>>,
}

/// A worker with its number in the group.
pub struct Worker {
    pub number: u64,
    pub worker: SimulatedWorker<MemoryStore>,
    entry: Arc<Entry>,
}

/// The simulated members of one group.
pub struct GroupFleet {
    pub name: String,
    index: usize,
    changelogs: Changelogs,
    /// Live members, oldest first.
    pub live: Vec<Worker>,
    /// Members asked to drain, until they left.
    pub draining: Vec<Worker>,
    next_number: u64,
}

/// Every group's members, the ledger and the heartbeat figures.
pub struct Fleet {
    pub spec: MemberSpec,
    pub groups: Vec<GroupFleet>,
    pub ledger: Arc<Ledger>,
    pub beats: Arc<Beats>,
    /// When the tasks' loads next change (seconds of the loads' clock),
    /// once loads were first reported.
    loads_until: Option<f64>,
}

impl Fleet {
    pub fn new(spec: MemberSpec, names: Vec<String>) -> Self {
        let ledger = Arc::new(Ledger::new(names.len()));
        let groups = names
            .into_iter()
            .enumerate()
            .map(|(index, name)| GroupFleet {
                name,
                index,
                changelogs: Changelogs::new(spec.changelog_len),
                live: Vec::new(),
                draining: Vec::new(),
                next_number: 1,
            })
            .collect();
        Fleet {
            spec,
            groups,
            ledger,
            beats: Arc::new(Beats::default()),
            loads_until: None,
        }
    }

    /// Starts `n` more members in group `g` (on the current runtime).
    pub fn add(&mut self, g: usize, n: u32) -> Result<(), ClientError> {
        let group = &mut self.groups[g];
        for _ in 0..n {
            let number = group.next_number;
            group.next_number += 1;
            // A cluster's nodes: each member starts from the next one.
            let mut urls: Vec<&str> = self.spec.host.split(',').collect();
            let turn = number as usize % urls.len();
            urls.rotate_left(turn);
            let config = MemberConfig::new(urls.join(","), &group.name, [TOPIC])
                .with_connections(self.spec.connections.clone());
            let entry = Arc::new(Entry {
                ledger: self.ledger.clone(),
                beats: self.beats.clone(),
                group: group.index,
                member: number,
                holding: Mutex::new(Holding::default()),
            });
            let worker = SimulatedWorker::start(
                config,
                MemoryStore::new(group.changelogs.clone()),
                self.spec.rates,
                SIM_TICK,
                entry.clone(),
            )?;
            group.live.push(Worker {
                number,
                worker,
                entry,
            });
        }
        Ok(())
    }

    /// Applies a churn event to group `g`.
    pub async fn apply(&mut self, g: usize, kind: ChurnKind) -> Result<(), ClientError> {
        match kind {
            ChurnKind::Scale { to, .. } => {
                let live = self.groups[g].live.len() as u32;
                if to > live {
                    self.add(g, to - live)?;
                } else {
                    let group = &mut self.groups[g];
                    for worker in group.live.split_off(to as usize) {
                        worker.worker.drain();
                        group.draining.push(worker);
                    }
                }
            }
            ChurnKind::Kill(n) => {
                let group = &mut self.groups[g];
                let keep = group.live.len().saturating_sub(n as usize);
                for worker in group.live.split_off(keep) {
                    tracing::debug!(group = %group.name, member = worker.number, "kill");
                    worker.worker.kill();
                }
            }
            ChurnKind::Leave(n) => {
                let group = &mut self.groups[g];
                let keep = group.live.len().saturating_sub(n as usize);
                for worker in group.live.split_off(keep) {
                    tracing::debug!(group = %group.name, member = worker.number, "leave");
                    let _ = worker.worker.leave().await;
                }
            }
        }
        Ok(())
    }

    /// Forgets drained members that left.
    pub fn reap(&mut self) {
        for group in &mut self.groups {
            group.draining.retain(|w| !w.worker.is_finished());
        }
    }

    /// The views of group `g`'s members (by number), live then draining.
    pub fn views(&self, g: usize) -> Vec<(u64, WorkerView)> {
        let group = &self.groups[g];
        group
            .live
            .iter()
            .chain(&group.draining)
            .map(|w| (w.number, w.worker.view()))
            .collect()
    }

    /// Tells every worker the loads of the tasks it newly holds, and of
    /// all it holds when the loads changed since the last call (the
    /// member sends the host only what moved past its threshold).
    pub fn report_loads(&mut self) {
        let Some(loads) = &self.spec.loads else {
            return;
        };
        let t_s = loads.t_s();
        let changed = self.loads_until.is_some_and(|until| t_s >= until);
        if changed || self.loads_until.is_none() {
            self.loads_until = Some(loads.loads.next_change(t_s).unwrap_or(f64::INFINITY));
        }
        for group in &self.groups {
            for w in group.live.iter().chain(&group.draining) {
                let partitions: Vec<u32> = {
                    let mut holding = lock(&w.entry.holding);
                    let fresh = std::mem::take(&mut holding.fresh);
                    if changed {
                        holding.active.iter().copied().collect()
                    } else {
                        fresh
                    }
                };
                if partitions.is_empty() {
                    continue;
                }
                let rows = partitions
                    .into_iter()
                    .map(|p| (Task::new(TOPIC, p), loads.loads.load(p, t_s)))
                    .collect();
                if let Err(e) = w.worker.set_loads(rows) {
                    tracing::warn!(group = %group.name, member = w.number, "cannot set loads: {e}");
                }
            }
        }
    }

    /// Awaits `work`, reporting loads every [`LOAD_REPORT_EVERY`] meanwhile.
    pub async fn reporting_loads<F: std::future::Future>(&mut self, work: F) -> F::Output {
        if self.spec.loads.is_none() {
            return work.await;
        }
        tokio::pin!(work);
        loop {
            self.report_loads();
            tokio::select! {
                output = &mut work => return output,
                () = tokio::time::sleep(LOAD_REPORT_EVERY) => {}
            }
        }
    }

    /// Every member leaves (concurrently).
    pub async fn leave_all(&mut self) {
        let mut leaves = tokio::task::JoinSet::new();
        for group in &mut self.groups {
            for worker in group.live.drain(..).chain(group.draining.drain(..)) {
                leaves.spawn(async move {
                    let _ = worker.worker.leave().await;
                });
            }
        }
        while leaves.join_next().await.is_some() {}
    }
}
