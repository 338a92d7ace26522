//! A fleet of simulated stateful members in groups of a running host,
//! shared by `assignd loadgen` and `assignd demo`. It owns the churn
//! grammar (`scale:A->B@T`, `kill:N@T`, `leave:N@T`), the members
//! (`assignd_client::simulated` workers, many per process on one Tokio
//! runtime), the ownership ledger that turns the members' own view of what
//! they hold into figures (tasks moved, task-seconds without an active
//! owner or with a restoring one, double ownership), and the probe that
//! asks the host's admin API whether a group is settled. It knows nothing
//! of how the figures are printed.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use assignd_client::simulated::{
    Changelogs, Listener, MemoryStore, Rates, SimulatedWorker, WorkerView,
};
use assignd_client::{ClientError, Connections, MemberConfig, Status, Task};
use tokio::sync::watch;

use crate::api::wire::{GroupState, GroupView};

/// The most members a churn event may bring a group to.
pub const CHURN_MEMBERS_MAX: u32 = 10_000;
/// The one topic every simulated group has.
pub const TOPIC: &str = "orders";
/// How often a settling group is probed.
const PROBE_INTERVAL: Duration = Duration::from_millis(100);
/// How often simulated state advances.
pub const SIM_TICK: Duration = Duration::from_millis(50);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

// ---------------------------------------------------------------------
// Churn

/// What a churn event does to every group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChurnKind {
    /// Members are added (they join cold) or the newest drain (their
    /// tasks move as the new owners warm up, then they leave).
    Scale { from: u32, to: u32 },
    /// The newest N members vanish without leaving (as kill -9); the host
    /// notices at the session timeout.
    Kill(u32),
    /// The newest N members stop and leave at once (their tasks are free
    /// at once, to cold owners).
    Leave(u32),
}

/// One churn event, `at` after measuring starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChurnEvent {
    /// The event as written.
    pub spec: String,
    pub at: Duration,
    pub kind: ChurnKind,
}

impl ChurnEvent {
    /// The member count per group after this event, given the count before.
    pub fn members_after(&self, before: u32) -> u32 {
        match self.kind {
            ChurnKind::Scale { to, .. } => to,
            ChurnKind::Kill(n) | ChurnKind::Leave(n) => before - n,
        }
    }
}

/// The grammar, for error messages and `--help`.
pub const CHURN_GRAMMAR: &str = "EVENT[,EVENT]... where EVENT is scale:FROM->TO@TIME, kill:N@TIME or leave:N@TIME, and TIME is seconds or milliseconds after measuring starts (10s, 2.5s, 500ms), increasing";

/// Parses a churn spec: comma-separated events in increasing time order.
pub fn parse_churn(spec: &str) -> Result<Vec<ChurnEvent>, String> {
    let mut events: Vec<ChurnEvent> = Vec::new();
    for part in spec.split(',') {
        let part = part.trim();
        let event =
            parse_event(part).map_err(|e| format!("{part:?}: {e} (expected {CHURN_GRAMMAR})"))?;
        if let Some(last) = events.last()
            && event.at <= last.at
        {
            return Err(format!(
                "{part:?}: comes at or before {:?}; events must be in increasing time order",
                last.spec
            ));
        }
        events.push(event);
    }
    Ok(events)
}

fn parse_event(part: &str) -> Result<ChurnEvent, String> {
    let (what, at) = part.rsplit_once('@').ok_or_else(|| "no @TIME".to_owned())?;
    let at = parse_time(at.trim())?;
    let (verb, arg) = what
        .split_once(':')
        .ok_or_else(|| "no KIND: (scale:, kill: or leave:)".to_owned())?;
    let count = |text: &str| -> Result<u32, String> {
        let n: u32 = text
            .trim()
            .parse()
            .map_err(|_| format!("{text:?} is not a member count"))?;
        if n > CHURN_MEMBERS_MAX {
            return Err(format!("{n} members is over {CHURN_MEMBERS_MAX}"));
        }
        Ok(n)
    };
    let kind = match verb.trim() {
        "scale" => {
            let (from, to) = arg
                .split_once("->")
                .ok_or_else(|| "scale needs FROM->TO".to_owned())?;
            let (from, to) = (count(from)?, count(to)?);
            if from == to {
                return Err("scale needs FROM and TO to differ".to_owned());
            }
            if to == 0 {
                return Err("scale needs TO of at least 1".to_owned());
            }
            ChurnKind::Scale { from, to }
        }
        "kill" | "leave" => {
            let n = count(arg)?;
            if n == 0 {
                return Err(format!("{} needs N of at least 1", verb.trim()));
            }
            if verb.trim() == "kill" {
                ChurnKind::Kill(n)
            } else {
                ChurnKind::Leave(n)
            }
        }
        other => return Err(format!("unknown kind {other:?}")),
    };
    Ok(ChurnEvent {
        spec: part.to_owned(),
        at,
        kind,
    })
}

fn parse_time(text: &str) -> Result<Duration, String> {
    let (number, scale) = if let Some(ms) = text.strip_suffix("ms") {
        (ms, 1e-3)
    } else if let Some(s) = text.strip_suffix('s') {
        (s, 1.0)
    } else {
        return Err(format!("time {text:?} needs a unit (s or ms)"));
    };
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("time {text:?} is not a number"))?;
    if !value.is_finite() || value < 0.0 || value * scale > 86_400.0 {
        return Err(format!("time {text:?} must be between 0 and 1 day"));
    }
    Ok(Duration::from_secs_f64(value * scale))
}

/// Checks that the events fit `members` per group at the start: a scale
/// starts from the count in force, kills and leaves keep one member.
pub fn check_churn(events: &[ChurnEvent], members: u32) -> Result<(), String> {
    let mut count = members;
    for event in events {
        match event.kind {
            ChurnKind::Scale { from, .. } if from != count => {
                return Err(format!(
                    "{:?}: the groups have {count} members then, not {from}",
                    event.spec
                ));
            }
            ChurnKind::Kill(n) | ChurnKind::Leave(n) if n >= count => {
                return Err(format!(
                    "{:?}: the groups have {count} members then; at least one must stay",
                    event.spec
                ));
            }
            _ => {}
        }
        count = event.members_after(count);
    }
    Ok(())
}

// ---------------------------------------------------------------------
// Ledger

/// Figures of one group over one window (between two churn events).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Window {
    /// Times a task became active on a member other than its last owner.
    pub moved: u64,
    /// Task-seconds a task that had had an owner had none.
    pub ownerless_task_s: f64,
    /// Task-seconds a task's active owner was restoring its state.
    pub restoring_task_s: f64,
    /// Times a task became active on a second member (must be 0).
    pub double_ownership: u64,
    /// Times a task became active on a member while its previous owner
    /// still listed it, but that owner's lease had run out: stalled, it
    /// had stopped processing without learning that the host removed it.
    pub lease_lapses: u64,
    /// The most tasks without an owner at once.
    pub ownerless_max: u64,
}

/// Who holds what in one group, as the members themselves know it.
struct GroupLedger {
    owners: HashMap<Task, Vec<u64>>,
    /// Each member's status: what it may process now (its lease).
    statuses: HashMap<u64, watch::Receiver<Status>>,
    last_owner: HashMap<Task, u64>,
    restoring: HashSet<(Task, u64)>,
    /// Tasks that have had an owner and have none now.
    ownerless: u64,
    doubled: u64,
    since: Instant,
    windows: Vec<Window>,
}

impl GroupLedger {
    fn integrate(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.since).as_secs_f64();
        let window = self.windows.last_mut().expect("one window at least");
        window.ownerless_task_s += self.ownerless as f64 * dt;
        window.restoring_task_s += self.restoring.len() as f64 * dt;
        self.since = now;
    }

    /// Tasks without an owner and tasks restoring now.
    fn counts(&self) -> (u64, u64) {
        (self.ownerless, self.restoring.len() as u64)
    }
}

/// The ledgers of every group, and the double ownerships in all.
pub struct Ledger {
    groups: Vec<Mutex<GroupLedger>>,
    double_ownership: AtomicU64,
    lease_lapses: AtomicU64,
    totals: Mutex<Totals>,
}

/// Tasks without an active owner and tasks restoring, over every group,
/// and their history once [`Ledger::record_timeline`] started it.
#[derive(Default)]
struct Totals {
    ownerless: u64,
    restoring: u64,
    timeline: Option<(Instant, Timeline)>,
}

/// The totals over every group at each change (exact, not sampled):
/// `t_s[i]` seconds after recording started, the counts from then on.
/// Changes within the same millisecond keep the last counts.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Timeline {
    pub t_s: Vec<f64>,
    /// Tasks that have had an owner and have none.
    pub ownerless: Vec<u64>,
    /// Tasks whose active owner restores their state.
    pub restoring: Vec<u64>,
}

impl Timeline {
    fn push(&mut self, t_s: f64, ownerless: u64, restoring: u64) {
        if let Some(&last) = self.t_s.last()
            && t_s - last < 1e-3
        {
            *self.ownerless.last_mut().expect("same length") = ownerless;
            *self.restoring.last_mut().expect("same length") = restoring;
            return;
        }
        self.t_s.push(t_s);
        self.ownerless.push(ownerless);
        self.restoring.push(restoring);
    }
}

/// A group's ledger now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Holding {
    pub ownerless: u64,
    pub restoring: u64,
    /// Tasks active on two members now.
    pub doubled: u64,
}

impl Ledger {
    pub fn new(groups: usize) -> Self {
        let now = Instant::now();
        Ledger {
            groups: (0..groups)
                .map(|_| {
                    Mutex::new(GroupLedger {
                        owners: HashMap::new(),
                        statuses: HashMap::new(),
                        last_owner: HashMap::new(),
                        restoring: HashSet::new(),
                        ownerless: 0,
                        doubled: 0,
                        since: now,
                        windows: vec![Window::default()],
                    })
                })
                .collect(),
            double_ownership: AtomicU64::new(0),
            lease_lapses: AtomicU64::new(0),
            totals: Mutex::new(Totals::default()),
        }
    }

    /// Starts recording the totals' timeline (from the counts now).
    pub fn record_timeline(&self) {
        let mut totals = lock(&self.totals);
        let mut timeline = Timeline::default();
        timeline.push(0.0, totals.ownerless, totals.restoring);
        totals.timeline = Some((Instant::now(), timeline));
    }

    /// The timeline so far, closed with the counts now (empty if not
    /// recording).
    pub fn timeline(&self) -> Timeline {
        let totals = lock(&self.totals);
        let Some((start, timeline)) = &totals.timeline else {
            return Timeline::default();
        };
        let mut timeline = timeline.clone();
        let now = start.elapsed().as_secs_f64();
        if timeline.t_s.last().is_some_and(|&t| now - t >= 1e-3) {
            timeline.push(now, totals.ownerless, totals.restoring);
        }
        timeline
    }

    /// Adds a group's change of counts to the totals (called with the
    /// group's lock held, so the totals change in the group's order).
    fn change(&self, before: (u64, u64), after: (u64, u64)) {
        if before == after {
            return;
        }
        let mut totals = lock(&self.totals);
        totals.ownerless = totals.ownerless + after.0 - before.0;
        totals.restoring = totals.restoring + after.1 - before.1;
        let (ownerless, restoring) = (totals.ownerless, totals.restoring);
        if let Some((start, timeline)) = &mut totals.timeline {
            timeline.push(start.elapsed().as_secs_f64(), ownerless, restoring);
        }
    }

    /// Starts a new window in every group; returns its index.
    pub fn open_window(&self) -> usize {
        let now = Instant::now();
        let mut index = 0;
        for group in &self.groups {
            let mut group = lock(group);
            group.integrate(now);
            group.windows.push(Window::default());
            index = group.windows.len() - 1;
        }
        index
    }

    /// The figures of `group` in window `index` so far.
    pub fn window(&self, group: usize, index: usize) -> Window {
        let mut group = lock(&self.groups[group]);
        group.integrate(Instant::now());
        group.windows.get(index).cloned().unwrap_or_default()
    }

    pub fn holding(&self, group: usize) -> Holding {
        let group = lock(&self.groups[group]);
        Holding {
            ownerless: group.ownerless,
            restoring: group.restoring.len() as u64,
            doubled: group.doubled,
        }
    }

    pub fn double_ownership(&self) -> u64 {
        self.double_ownership.load(Ordering::Relaxed)
    }

    pub fn lease_lapses(&self) -> u64 {
        self.lease_lapses.load(Ordering::Relaxed)
    }

    /// Follows `member`'s status, to tell a lapsed lease from a second
    /// owner.
    fn watch(&self, group: usize, member: u64, status: watch::Receiver<Status>) {
        lock(&self.groups[group]).statuses.insert(member, status);
    }

    fn active(&self, group: usize, member: u64, task: &Task, restoring: bool) {
        let mut ledger = lock(&self.groups[group]);
        let now = Instant::now();
        // A grant the member's loop has already taken back: its worker
        // hears of events after the loop publishes its status, and under
        // load it lags behind; meanwhile the lease ran out or the host
        // removed the member (`Lost`). The worker never processes the task
        // (it checks `may_process` before every step): it is no owner, and
        // its late `released` changes nothing.
        if ledger
            .statuses
            .get(&member)
            .is_some_and(|status| !status.borrow().may_process(task, now))
        {
            tracing::debug!(group, member, %task, "a grant taken back before the worker heard of it");
            return;
        }
        ledger.integrate(now);
        let before = ledger.counts();
        // An owner that may no longer process the task has stopped: its
        // loop forgot the task (told it `Lost`) before the ledger heard of
        // the release, or its lease ran out while it was stalled, fenced
        // without knowing it. The latter is a lease lapse: the task was
        // without an owner from the lease's end to now.
        let stopped: Vec<(u64, Option<Instant>)> = ledger
            .owners
            .get(task)
            .into_iter()
            .flatten()
            .filter(|&&owner| owner != member)
            .filter_map(|&owner| {
                let status = ledger.statuses.get(&owner)?.borrow();
                if status.may_process(task, now) {
                    return None;
                }
                Some((owner, status.lease_until.filter(|&until| until <= now)))
            })
            .collect();
        for (owner, lapsed_at) in stopped {
            let owners = ledger.owners.get_mut(task).expect("listed above");
            let was_doubled = owners.len() == 2;
            owners.retain(|&o| o != owner);
            let none_left = owners.is_empty();
            if was_doubled {
                ledger.doubled -= 1;
            }
            if none_left {
                // Released now, taken below: as a release then a grant.
                ledger.ownerless += 1;
            }
            ledger.restoring.remove(&(task.clone(), owner));
            if let Some(until) = lapsed_at {
                let window = ledger.windows.last_mut().expect("one window at least");
                window.lease_lapses += 1;
                window.ownerless_task_s += now.saturating_duration_since(until).as_secs_f64();
                self.lease_lapses.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(group, member = owner, %task, "the owner's lease ran out before it learned it lost the task");
            }
        }
        let owners = ledger.owners.entry(task.clone()).or_default();
        let had_owner = !owners.is_empty();
        owners.push(member);
        let doubled = owners.len() == 2;
        let holders = format!("{owners:?}");
        let previous = ledger.last_owner.insert(task.clone(), member);
        let window = ledger.windows.last_mut().expect("one window at least");
        if had_owner {
            window.double_ownership += 1;
            self.double_ownership.fetch_add(1, Ordering::Relaxed);
            tracing::error!(group, member, %task, holders, "a task is active on two members");
        }
        if previous.is_some_and(|p| p != member) {
            window.moved += 1;
        }
        if doubled {
            ledger.doubled += 1;
        }
        if !had_owner && previous.is_some() {
            ledger.ownerless -= 1;
        }
        if restoring {
            ledger.restoring.insert((task.clone(), member));
        }
        self.change(before, ledger.counts());
    }

    fn restored(&self, group: usize, member: u64, task: &Task) {
        let mut ledger = lock(&self.groups[group]);
        ledger.integrate(Instant::now());
        let before = ledger.counts();
        ledger.restoring.remove(&(task.clone(), member));
        self.change(before, ledger.counts());
    }

    fn released(&self, group: usize, member: u64, tasks: &[Task]) {
        let mut ledger = lock(&self.groups[group]);
        ledger.integrate(Instant::now());
        let before = ledger.counts();
        for task in tasks {
            ledger.restoring.remove(&(task.clone(), member));
            let Some(owners) = ledger.owners.get_mut(task) else {
                continue;
            };
            let before = owners.len();
            owners.retain(|m| *m != member);
            let after = owners.len();
            if before == 2 && after == 1 {
                ledger.doubled -= 1;
            }
            if before > 0 && after == 0 {
                ledger.ownerless += 1;
                let ownerless = ledger.ownerless;
                let window = ledger.windows.last_mut().expect("one window at least");
                window.ownerless_max = window.ownerless_max.max(ownerless);
            }
        }
        self.change(before, ledger.counts());
    }
}

// ---------------------------------------------------------------------
// Heartbeat figures

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

/// One worker's listener: its group and number in the ledger.
struct Entry {
    ledger: Arc<Ledger>,
    beats: Arc<Beats>,
    group: usize,
    member: u64,
}

impl Listener for Entry {
    fn active(&self, task: &Task, restoring: bool) {
        self.ledger.active(self.group, self.member, task, restoring);
    }
    fn restored(&self, task: &Task) {
        self.ledger.restored(self.group, self.member, task);
    }
    fn released(&self, tasks: &[Task]) {
        self.ledger.released(self.group, self.member, tasks);
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

// ---------------------------------------------------------------------
// Fleet

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
}

/// A worker with its number in the group.
pub struct Worker {
    pub number: u64,
    pub worker: SimulatedWorker<MemoryStore>,
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
            let listener = Arc::new(Entry {
                ledger: self.ledger.clone(),
                beats: self.beats.clone(),
                group: group.index,
                member: number,
            });
            let worker = SimulatedWorker::start(
                config,
                MemoryStore::new(group.changelogs.clone()),
                self.spec.rates,
                SIM_TICK,
                listener,
            )?;
            group.live.push(Worker { number, worker });
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

// ---------------------------------------------------------------------
// Probe

/// Reads groups over the admin API.
#[derive(Clone)]
pub struct Admin {
    pub client: reqwest::Client,
    pub host: String,
    pub token: Option<String>,
}

/// Where a group is, as the host shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settling {
    /// The host says stable at the current epoch with the expected members.
    pub stable: bool,
    /// Stable, no learner warming, no member draining, every task active
    /// on exactly one member: nothing is left to move.
    pub settled: bool,
}

impl Admin {
    pub fn new(host: &str, token: Option<String>) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .pool_max_idle_per_host(4096)
            .pool_idle_timeout(assignd_client::CONNECTION_IDLE_MAX)
            .build()
            .map_err(|e| format!("HTTP client: {e}"))?;
        Ok(Admin {
            client,
            host: host.trim_end_matches('/').to_owned(),
            token,
        })
    }

    fn authorized(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        }
    }

    /// `PUT /v1/groups/{name}` with `config`.
    pub async fn create_group(&self, name: &str, config: &serde_json::Value) -> Result<(), String> {
        let url = format!("{}/v1/groups/{name}", self.host);
        let answer = self
            .authorized(self.client.put(&url).json(config))
            .send()
            .await
            .map_err(|e| format!("PUT {url}: {e}"))?;
        check(answer, "PUT", &url).await.map(drop)
    }

    /// `GET /v1/groups/{name}`.
    pub async fn group(&self, name: &str) -> Result<GroupView, String> {
        let url = format!("{}/v1/groups/{name}", self.host);
        let answer = self
            .authorized(self.client.get(&url))
            .send()
            .await
            .map_err(|e| format!("GET {url}: {e}"))?;
        let answer = check(answer, "GET", &url).await?;
        answer
            .json()
            .await
            .map_err(|e| format!("GET {url}: unreadable answer: {e}"))
    }
}

async fn check(
    answer: reqwest::Response,
    method: &str,
    url: &str,
) -> Result<reqwest::Response, String> {
    let status = answer.status();
    if status.is_success() {
        return Ok(answer);
    }
    let body = answer.text().await.unwrap_or_default();
    let hint = if matches!(status.as_u16(), 401 | 403) {
        " (pass the host's admin token with --token or ASSIGND_TOKEN)"
    } else {
        ""
    };
    Err(format!("{method} {url}: {status}: {body}{hint}"))
}

/// Whether `view` is stable and settled with `members` members and
/// `tasks` tasks.
pub fn settling(view: &GroupView, members: usize, tasks: u64) -> Settling {
    let stable = view.state == GroupState::Stable
        && view.group_epoch == view.target_epoch
        && view.members.len() == members;
    let active: usize = view.members.iter().map(|m| m.active.len()).sum();
    let settled = stable
        && view.learner_count == 0
        && view
            .members
            .iter()
            .all(|m| !m.draining && !m.away && m.revoking.is_empty())
        && active as u64 == tasks;
    Settling { stable, settled }
}

/// When a group became stable and settled after an event.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Settled {
    pub stable_s: Option<f64>,
    pub settled_s: Option<f64>,
}

/// Probes group `name` every 100 ms from `since` until it is settled with
/// `members` members, or `until` (the next event). Errors are retried.
pub async fn probe(
    admin: Admin,
    name: String,
    members: usize,
    tasks: u64,
    since: Instant,
    until: Instant,
) -> Settled {
    let mut result = Settled::default();
    while Instant::now() < until {
        let polled = Instant::now();
        if let Ok(view) = admin.group(&name).await {
            let state = settling(&view, members, tasks);
            let at = polled.saturating_duration_since(since).as_secs_f64();
            if state.stable && result.stable_s.is_none() {
                result.stable_s = Some(at);
            }
            if state.settled {
                result.settled_s = Some(at);
                result.stable_s.get_or_insert(at);
                return result;
            }
        }
        tokio::time::sleep_until((polled + PROBE_INTERVAL).into()).await;
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_churn_spec_parses_into_timed_events_and_is_checked_against_the_counts() {
        let events =
            parse_churn("scale:10->20@10s, kill:2@12.5s,leave:3@13000ms,scale:15->4@20s").unwrap();
        let kinds: Vec<(ChurnKind, Duration)> = events.iter().map(|e| (e.kind, e.at)).collect();
        assert_eq!(
            kinds,
            vec![
                (
                    ChurnKind::Scale { from: 10, to: 20 },
                    Duration::from_secs(10)
                ),
                (ChurnKind::Kill(2), Duration::from_millis(12_500)),
                (ChurnKind::Leave(3), Duration::from_secs(13)),
                (
                    ChurnKind::Scale { from: 15, to: 4 },
                    Duration::from_secs(20)
                ),
            ]
        );
        assert_eq!(events[1].spec, "kill:2@12.5s");
        assert_eq!(check_churn(&events, 10), Ok(()));
        assert!(check_churn(&events, 9).unwrap_err().contains("not 10"));
        for bad in [
            "",
            "scale:1->1@1s",
            "scale:1->0@1s",
            "scale:1-2@1s",
            "kill:0@1s",
            "kill:x@1s",
            "scale:1->2@-1s",
            "scale:1->2@1h",
            "scale:1->20000@1s",
        ] {
            assert!(parse_churn(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_ledger_counts_moves_ownerless_and_restoring_time_and_double_ownership() {
        let ledger = Ledger::new(1);
        let (a, b) = (Task::new(TOPIC, 0), Task::new(TOPIC, 1));
        // The first assignment: no move, nothing ownerless before it.
        ledger.active(0, 1, &a, false);
        ledger.active(0, 1, &b, true);
        assert_eq!(ledger.holding(0).restoring, 1);
        ledger.restored(0, 1, &b);
        let window = ledger.open_window();
        // a moves from member 1 to member 2 through a gap.
        ledger.released(0, 1, std::slice::from_ref(&a));
        assert_eq!(ledger.holding(0).ownerless, 1);
        std::thread::sleep(Duration::from_millis(20));
        ledger.active(0, 2, &a, true);
        // b comes back to its owner: not a move.
        ledger.released(0, 1, std::slice::from_ref(&b));
        ledger.active(0, 1, &b, false);
        let figures = ledger.window(0, window);
        assert_eq!(figures.moved, 1);
        assert_eq!(figures.double_ownership, 0);
        assert_eq!(figures.ownerless_max, 1);
        assert!(figures.ownerless_task_s >= 0.02, "{figures:?}");
        assert_eq!(
            ledger.holding(0),
            Holding {
                ownerless: 0,
                restoring: 1,
                doubled: 0
            }
        );
        // A second owner is counted at once.
        ledger.active(0, 3, &a, false);
        assert_eq!(ledger.double_ownership(), 1);
        assert_eq!(ledger.holding(0).doubled, 1);
        ledger.released(0, 3, std::slice::from_ref(&a));
        assert_eq!(ledger.holding(0).doubled, 0);
    }

    /// A status holding `tasks` with a lease until `until`.
    fn status(tasks: &[&Task], until: Instant) -> watch::Receiver<Status> {
        let mut status = Status {
            lease_until: Some(until),
            ..Status::default()
        };
        status.assignment.active = tasks.iter().map(|&t| t.clone()).collect();
        watch::channel(status).1
    }

    #[test]
    fn a_second_owner_counts_as_a_lease_lapse_only_once_the_first_may_not_process() {
        let ledger = Ledger::new(1);
        let (a, b) = (Task::new(TOPIC, 0), Task::new(TOPIC, 1));
        let now = Instant::now();
        // Member 1 was granted a; its lease then ran out a second ago
        // (stalled, removed by the host without knowing it). Member 3's
        // lease runs.
        ledger.active(0, 1, &a, false);
        ledger.watch(0, 1, status(&[&a], now - Duration::from_secs(1)));
        ledger.watch(0, 3, status(&[&b], now + Duration::from_secs(60)));
        ledger.active(0, 3, &b, false);
        ledger.active(0, 5, &b, false);
        assert_eq!(ledger.double_ownership(), 1, "b on 3 and 5: 3 may process");
        // Member 2 takes a over: 1 had stopped when its lease ran out, a
        // second ago, and a was without an owner since.
        ledger.active(0, 2, &a, false);
        assert_eq!(ledger.double_ownership(), 1);
        assert_eq!(ledger.lease_lapses(), 1);
        let figures = ledger.window(0, 0);
        assert_eq!(
            (figures.lease_lapses, figures.moved),
            (1, 2),
            "b to 5, a to 2"
        );
        assert!(figures.ownerless_task_s >= 1.0, "{figures:?}");
        assert_eq!(ledger.holding(0).ownerless, 0);
        // Member 1 learns it lost a, late: nothing changes.
        ledger.released(0, 1, std::slice::from_ref(&a));
        assert_eq!(ledger.holding(0).ownerless, 0);
        // A member whose lease runs but whose loop forgot the task (told
        // it `Lost`) has stopped too: not a double, not a lapse.
        ledger.watch(0, 2, status(&[], now + Duration::from_secs(60)));
        ledger.active(0, 4, &a, false);
        assert_eq!(ledger.double_ownership(), 1);
        assert_eq!(ledger.lease_lapses(), 1);
    }

    #[test]
    fn a_grant_the_members_loop_took_back_before_its_worker_heard_is_no_second_owner() {
        // The overload report's "25 tasks active on two members": member 2
        // was granted a task, then its lease ran out (or the host removed
        // it) before its lagging worker took the grant in; the task went to
        // member 1, whose lease runs. Member 2 may not process it: its
        // late grant is not a double ownership.
        let ledger = Ledger::new(1);
        let a = Task::new(TOPIC, 0);
        let now = Instant::now();
        ledger.watch(0, 1, status(&[&a], now + Duration::from_secs(60)));
        ledger.watch(0, 2, status(&[], now + Duration::from_secs(60)));
        ledger.active(0, 1, &a, false);
        ledger.active(0, 2, &a, true);
        assert_eq!(ledger.double_ownership(), 0);
        assert_eq!(
            ledger.holding(0),
            Holding {
                ownerless: 0,
                restoring: 0,
                doubled: 0
            }
        );
        // Its worker then hears it lost the task: nothing changes.
        ledger.released(0, 2, std::slice::from_ref(&a));
        assert_eq!(ledger.holding(0).ownerless, 0);
        // A grant its loop still holds is counted, as a second owner.
        ledger.watch(0, 3, status(&[&a], now + Duration::from_secs(60)));
        ledger.active(0, 3, &a, false);
        assert_eq!(ledger.double_ownership(), 1);
    }

    #[test]
    fn the_timeline_records_the_totals_over_every_group_at_each_change() {
        let ledger = Ledger::new(2);
        let (a, b) = (Task::new(TOPIC, 0), Task::new(TOPIC, 1));
        ledger.active(0, 1, &a, false);
        ledger.active(1, 1, &b, true);
        assert_eq!(ledger.timeline(), Timeline::default(), "not recording yet");
        ledger.record_timeline();
        std::thread::sleep(Duration::from_millis(5));
        ledger.restored(1, 1, &b);
        std::thread::sleep(Duration::from_millis(5));
        ledger.released(0, 1, std::slice::from_ref(&a));
        ledger.released(1, 1, std::slice::from_ref(&b));
        std::thread::sleep(Duration::from_millis(5));
        ledger.active(0, 2, &a, true);
        ledger.active(1, 2, &b, false);
        let timeline = ledger.timeline();
        let points: Vec<(u64, u64)> = timeline
            .ownerless
            .iter()
            .copied()
            .zip(timeline.restoring.iter().copied())
            .collect();
        // Starts from the counts in force, then every change (changes
        // within one ms keep the last counts), ends with the counts now.
        assert_eq!(points.first(), Some(&(0, 1)));
        assert!(
            points.contains(&(0, 0)) && points.contains(&(2, 0)),
            "{points:?}"
        );
        assert_eq!(points.last(), Some(&(0, 1)));
        assert_eq!(timeline.t_s[0], 0.0);
        assert_eq!(timeline.t_s.len(), points.len());
        assert!(timeline.t_s.windows(2).all(|w| w[1] - w[0] >= 1e-3));
    }
}
