//! Simulated stateful tasks, for examples, load generators and demos: a
//! member whose tasks keep local state that lags behind a changelog.
//!
//! Every task has a changelog (its end offset) and, on each member that
//! keeps its state, a checkpoint. An active task first *restores* (replays
//! its changelog from the checkpoint at `replay_rate` records/s), then
//! *processes*: it appends to its changelog at `process_rate` records/s and
//! keeps its checkpoint at the end. A learner or standby replays at
//! `replay_rate` and reports `end - checkpoint` as its lag, so the host's
//! learner safety sees it warm up. Where changelogs and checkpoints live is
//! a [`StateStore`]: [`MemoryStore`] keeps them in memory (many members of
//! one process sharing a group's [`Changelogs`]); the `worker` example
//! keeps them in files.
//!
//! [`SimulatedWorker`] runs a [`Member`] with such tasks on the current
//! Tokio runtime and tells a [`Listener`] when it starts and stops holding
//! a task active, so a caller can keep a ledger of who holds what. It owns
//! the simulation only; the protocol is the member loop's.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::member::{Event, HeartbeatObserver, Member, MemberHandle, Status};
use crate::{Assignment, ClientError, MemberConfig, Task};

/// Where a simulated member's changelog ends and checkpoints live.
pub trait StateStore: Send + 'static {
    /// The end offset of `task`'s changelog.
    fn end(&self, task: &Task) -> u64;
    fn set_end(&mut self, task: &Task, end: u64);
    /// This member's checkpoint of `task` (0 if it has none).
    fn checkpoint(&self, task: &Task) -> u64;
    fn set_checkpoint(&mut self, task: &Task, offset: u64);
    /// Every task this member keeps a checkpoint of, if the store can
    /// tell: their lags are reported too, so the host can give a task
    /// whose owner is gone to a member that is still warm on it.
    fn kept(&self) -> Vec<Task> {
        Vec::new()
    }
}

/// The changelogs of one group, shared by the members of a process: end
/// offsets, each starting at `initial_len`.
#[derive(Clone, Debug)]
pub struct Changelogs {
    initial_len: u64,
    ends: Arc<Mutex<HashMap<Task, u64>>>,
}

impl Changelogs {
    pub fn new(initial_len: u64) -> Self {
        Changelogs {
            initial_len,
            ends: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn ends(&self) -> MutexGuard<'_, HashMap<Task, u64>> {
        self.ends.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn end(&self, task: &Task) -> u64 {
        self.ends().get(task).copied().unwrap_or(self.initial_len)
    }

    pub fn set_end(&self, task: &Task, end: u64) {
        self.ends().insert(task.clone(), end);
    }
}

/// Changelogs shared in memory, checkpoints of one member in memory: a
/// member that starts anew starts cold.
#[derive(Debug)]
pub struct MemoryStore {
    changelogs: Changelogs,
    checkpoints: HashMap<Task, u64>,
}

impl MemoryStore {
    pub fn new(changelogs: Changelogs) -> Self {
        MemoryStore {
            changelogs,
            checkpoints: HashMap::new(),
        }
    }
}

impl StateStore for MemoryStore {
    fn end(&self, task: &Task) -> u64 {
        self.changelogs.end(task)
    }
    fn set_end(&mut self, task: &Task, end: u64) {
        self.changelogs.set_end(task, end);
    }
    fn checkpoint(&self, task: &Task) -> u64 {
        self.checkpoints.get(task).copied().unwrap_or(0)
    }
    fn set_checkpoint(&mut self, task: &Task, offset: u64) {
        self.checkpoints.insert(task.clone(), offset);
    }
    fn kept(&self) -> Vec<Task> {
        self.checkpoints.keys().cloned().collect()
    }
}

/// What a task's local state is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Restoring, then processing.
    Active,
    /// A learner or standby: replaying.
    Warming,
}

/// The speeds of the simulation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    /// Records per second a learner, standby or restoring task replays.
    pub replay_per_s: u64,
    /// Records per second an active task appends to its changelog.
    pub process_per_s: u64,
}

/// The tasks of one member and their state.
#[derive(Debug)]
pub struct TaskStates<S> {
    store: S,
    rates: Rates,
    roles: BTreeMap<Task, Role>,
    /// Fractions of records carried between ticks.
    credit: BTreeMap<Task, f64>,
}

impl<S: StateStore> TaskStates<S> {
    pub fn new(store: S, rates: Rates) -> Self {
        TaskStates {
            store,
            rates,
            roles: BTreeMap::new(),
            credit: BTreeMap::new(),
        }
    }

    pub fn store(&self) -> &S {
        &self.store
    }

    /// Records behind the changelog's end.
    pub fn lag(&self, task: &Task) -> u64 {
        self.store
            .end(task)
            .saturating_sub(self.store.checkpoint(task))
    }

    pub fn role(&self, task: &Task) -> Option<Role> {
        self.roles.get(task).copied()
    }

    /// Tasks with this role.
    pub fn with_role(&self, role: Role) -> impl Iterator<Item = &Task> {
        self.roles
            .iter()
            .filter(move |(_, r)| **r == role)
            .map(|(t, _)| t)
    }

    /// Whether any task is warming or restoring (their progress is what
    /// the host and the ledger watch).
    pub fn busy(&self) -> bool {
        self.roles.iter().any(|(task, role)| match role {
            Role::Warming => true,
            Role::Active => self.lag(task) > 0,
        })
    }

    /// Whether `task` is active here and still restoring.
    pub fn restoring(&self, task: &Task) -> bool {
        self.role(task) == Some(Role::Active) && self.lag(task) > 0
    }

    /// Gives `tasks` a role, or none (the state stays, as on disk).
    pub fn set(&mut self, tasks: &[Task], role: Option<Role>) {
        for task in tasks {
            match role {
                Some(role) => {
                    self.roles.insert(task.clone(), role);
                }
                None => {
                    self.roles.remove(task);
                    self.credit.remove(task);
                }
            }
        }
    }

    /// The lag rows to report for `assignment`: its learners and
    /// standbys, and every other task whose state the store keeps but
    /// that is not active here (as Kafka Streams reports the offsets of
    /// every local state directory).
    pub fn lags(&self, assignment: &Assignment) -> Vec<(Task, u64)> {
        let mut tasks: BTreeSet<Task> = assignment
            .learner
            .iter()
            .chain(&assignment.standby)
            .cloned()
            .collect();
        tasks.extend(
            self.store
                .kept()
                .into_iter()
                .filter(|t| !assignment.active.contains(t) && !assignment.revoking.contains(t)),
        );
        tasks
            .into_iter()
            .map(|task| {
                let lag = self.lag(&task);
                (task, lag)
            })
            .collect()
    }

    /// Advances every task by `elapsed`: an active task first restores what
    /// it lacks, then processes (appends to its changelog) if
    /// `may_process` allows it (the member's lease, see
    /// [`Status::may_process`]); a warming one replays. Returns the active
    /// tasks that finished restoring.
    pub fn tick(&mut self, elapsed: Duration, may_process: impl Fn(&Task) -> bool) -> Vec<Task> {
        let mut restored = Vec::new();
        let tasks: Vec<(Task, Role)> = self.roles.iter().map(|(t, r)| (t.clone(), *r)).collect();
        for (task, role) in tasks {
            let end = self.store.end(&task);
            let checkpoint = self.store.checkpoint(&task);
            if checkpoint < end {
                let budget = self.rates.replay_per_s as f64 * elapsed.as_secs_f64();
                let n = self.take_credit(&task, budget);
                let reached = (checkpoint + n).min(end);
                self.store.set_checkpoint(&task, reached);
                if role == Role::Active && reached == end {
                    restored.push(task);
                }
            } else if role == Role::Active && may_process(&task) {
                let budget = self.rates.process_per_s as f64 * elapsed.as_secs_f64();
                let n = self.take_credit(&task, budget);
                if n > 0 {
                    self.store.set_end(&task, end + n);
                    self.store.set_checkpoint(&task, end + n);
                }
            }
        }
        restored
    }

    fn take_credit(&mut self, task: &Task, budget: f64) -> u64 {
        let credit = self.credit.entry(task.clone()).or_default();
        *credit += budget;
        let whole = credit.floor();
        *credit -= whole;
        whole as u64
    }
}

/// Told when a [`SimulatedWorker`] starts and stops holding tasks active.
/// Calls for one worker come in order, under its lock: a `released` comes
/// before the revocation is acknowledged (so before the task can be
/// granted elsewhere), and none comes after [`SimulatedWorker::kill`] or
/// [`SimulatedWorker::leave`] returned.
pub trait Listener: Send + Sync + 'static {
    /// `task` became active here; `restoring` if its state is behind.
    fn active(&self, task: &Task, restoring: bool);
    /// `task`, active here, finished restoring and processes now.
    fn restored(&self, task: &Task);
    /// These tasks are no longer active here.
    fn released(&self, tasks: &[Task]);
    /// A heartbeat's round trip (see [`HeartbeatObserver`]).
    fn heartbeat(&self, latency: Duration, result: Result<(), &ClientError>) {
        let _ = (latency, result);
    }
    /// Called once, at start, with the member's status: what the worker
    /// may process now ([`Status::may_process`], its lease). The worker
    /// processes a task only while it may; a ledger can tell a stalled
    /// worker whose lease ran out from a second owner with it.
    fn member_status(&self, status: watch::Receiver<Status>) {
        let _ = status;
    }
}

/// How many ticks a worker waits between steps while no task warms up or
/// restores.
const IDLE_TICK_FACTOR: u32 = 10;

/// A listener that ignores everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quiet;

impl Listener for Quiet {
    fn active(&self, _: &Task, _: bool) {}
    fn restored(&self, _: &Task) {}
    fn released(&self, _: &[Task]) {}
}

/// What a simulated worker holds, for display.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerView {
    pub member_id: Option<String>,
    pub active: Vec<Task>,
    /// Active tasks still restoring, with their lag.
    pub restoring: Vec<(Task, u64)>,
    /// Learners with their lag.
    pub learners: Vec<(Task, u64)>,
    pub standbys: Vec<(Task, u64)>,
    pub draining: bool,
    /// The worker stopped (drained and left, left, killed, fenced).
    pub finished: bool,
}

struct Inner<S> {
    states: TaskStates<S>,
    member_id: Option<String>,
    draining: bool,
    /// No more listener calls: killed, leaving or ended.
    stopped: bool,
}

impl<S: StateStore> Inner<S> {
    /// Stops every active task and tells the listener.
    fn stop_all(&mut self, listener: &dyn Listener) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let active: Vec<Task> = self.states.with_role(Role::Active).cloned().collect();
        self.states.set(&active, None);
        if !active.is_empty() {
            listener.released(&active);
        }
    }
}

/// Forwards heartbeats to a listener.
struct Observe(Arc<dyn Listener>);

impl HeartbeatObserver for Observe {
    fn heartbeat(&self, latency: Duration, result: Result<(), &ClientError>) {
        self.0.heartbeat(latency, result);
    }
}

/// A member with simulated stateful tasks, on the current Tokio runtime.
pub struct SimulatedWorker<S: StateStore> {
    member: Option<MemberHandle>,
    inner: Arc<Mutex<Inner<S>>>,
    listener: Arc<dyn Listener>,
    driver: JoinHandle<()>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

impl<S: StateStore> SimulatedWorker<S> {
    /// Joins as `config` says, simulating the tasks' state in `store` at
    /// `rates`, advancing every `tick` while a task warms up or restores
    /// (every ten ticks while its tasks only process).
    pub fn start(
        config: MemberConfig,
        store: S,
        rates: Rates,
        tick: Duration,
        listener: Arc<dyn Listener>,
    ) -> Result<Self, ClientError> {
        let inner = Arc::new(Mutex::new(Inner {
            states: TaskStates::new(store, rates),
            member_id: None,
            draining: false,
            stopped: false,
        }));
        let lag_inner = inner.clone();
        let lags = move |assignment: &Assignment| lock(&lag_inner).states.lags(assignment);
        let (member, events) =
            Member::start_observed(config, lags, Arc::new(Observe(listener.clone())))?;
        listener.member_status(member.watch());
        let driver = tokio::spawn(drive(
            events,
            member.watch(),
            inner.clone(),
            listener.clone(),
            tick,
        ));
        Ok(SimulatedWorker {
            member: Some(member),
            inner,
            listener,
            driver,
        })
    }

    pub fn view(&self) -> WorkerView {
        let inner = lock(&self.inner);
        let states = &inner.states;
        let with_lag = |tasks: Vec<&Task>| -> Vec<(Task, u64)> {
            tasks
                .into_iter()
                .map(|t| (t.clone(), states.lag(t)))
                .collect()
        };
        let assignment = self
            .member
            .as_ref()
            .map(MemberHandle::assignment)
            .unwrap_or_default();
        let active: Vec<Task> = states.with_role(Role::Active).cloned().collect();
        WorkerView {
            member_id: inner.member_id.clone(),
            restoring: with_lag(active.iter().filter(|t| states.restoring(t)).collect()),
            active,
            learners: with_lag(assignment.learner.iter().collect()),
            standbys: with_lag(assignment.standby.iter().collect()),
            draining: inner.draining || assignment.draining,
            finished: self.driver.is_finished(),
        }
    }

    /// Sets the current loads of active tasks, as
    /// [`MemberHandle::set_loads`]: the simulation has no load of its own,
    /// a load generator says what each task carries.
    pub fn set_loads(&self, loads: Vec<(Task, f64)>) -> Result<(), ClientError> {
        match &self.member {
            Some(member) => member.set_loads(loads),
            None => Ok(()),
        }
    }

    /// Asks the host to drain this worker; it leaves once its tasks moved.
    pub fn drain(&self) {
        lock(&self.inner).draining = true;
        if let Some(member) = &self.member {
            member.drain();
        }
    }

    /// Stops processing, then leaves the group.
    pub async fn leave(mut self) -> Result<(), ClientError> {
        lock(&self.inner).stop_all(&*self.listener);
        let result = match self.member.take() {
            Some(member) => member.leave().await,
            None => Ok(()),
        };
        self.driver.abort();
        result
    }

    /// Vanishes as `kill -9` would: no leave; the host notices at the
    /// session timeout.
    pub fn kill(mut self) {
        lock(&self.inner).stop_all(&*self.listener);
        self.driver.abort();
        if let Some(member) = self.member.take() {
            member.abort();
        }
    }

    /// Whether the worker stopped (drained and left, or fenced for good).
    pub fn is_finished(&self) -> bool {
        self.driver.is_finished()
    }
}

impl<S: StateStore> Drop for SimulatedWorker<S> {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// Follows the member's events and advances the state every `tick`.
async fn drive<S: StateStore>(
    mut events: mpsc::Receiver<Event>,
    status: watch::Receiver<Status>,
    inner: Arc<Mutex<Inner<S>>>,
    listener: Arc<dyn Listener>,
    tick: Duration,
) {
    let idle_tick = tick * IDLE_TICK_FACTOR;
    let mut last = tokio::time::Instant::now();
    let mut next_tick = last + tick;
    loop {
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { break };
                let mut inner = lock(&inner);
                if inner.stopped {
                    // Leaving or killed: acknowledge nothing more.
                    continue;
                }
                // The time since the last step belongs to the roles before
                // the event: a task assigned now must not be credited
                // with replay from before it was assigned.
                let now = tokio::time::Instant::now();
                advance(&mut inner, &status, &*listener, now - last, now);
                last = now;
                on_event(&mut inner, &*listener, event);
                // Something may have started warming or restoring.
                next_tick = next_tick.min(now + tick);
            }
            () = tokio::time::sleep_until(next_tick) => {
                let now = tokio::time::Instant::now();
                let mut inner = lock(&inner);
                advance(&mut inner, &status, &*listener, now - last, now);
                last = now;
                // Only processing: the changelogs grow as well in bigger
                // steps, and a process of many members stays light.
                next_tick = now + if inner.states.busy() { tick } else { idle_tick };
            }
        }
    }
    lock(&inner).stop_all(&*listener);
}

/// Advances the state by `elapsed`, up to `now`, processing only what the
/// member's lease allows, and reports the tasks that finished restoring.
fn advance<S: StateStore>(
    inner: &mut Inner<S>,
    status: &watch::Receiver<Status>,
    listener: &dyn Listener,
    elapsed: Duration,
    now: tokio::time::Instant,
) {
    // The member loop never holds the status while it locks `inner` (for
    // lags), so taking the status under `inner` cannot deadlock.
    let status = status.borrow();
    let at = now.into_std();
    let restored = inner
        .states
        .tick(elapsed, |task| status.may_process(task, at));
    drop(status);
    if !inner.stopped {
        for task in &restored {
            listener.restored(task);
        }
    }
}

fn on_event<S: StateStore>(inner: &mut Inner<S>, listener: &dyn Listener, event: Event) {
    let states = &mut inner.states;
    match event {
        Event::Joined { member_id } => inner.member_id = Some(member_id),
        Event::Assigned(tasks) | Event::Promoted(tasks) => {
            states.set(&tasks, Some(Role::Active));
            for task in &tasks {
                listener.active(task, states.restoring(task));
            }
        }
        Event::Revoked { tasks, ack } => {
            // Processing is synchronous: out of the table, it is stopped.
            states.set(&tasks, None);
            listener.released(&tasks);
            ack.ack();
        }
        Event::Lost(tasks) => {
            let held: Vec<Task> = tasks
                .into_iter()
                .filter(|t| states.role(t) == Some(Role::Active))
                .collect();
            states.set(&held, None);
            if !held.is_empty() {
                listener.released(&held);
            }
        }
        Event::LearnerStarted(tasks) | Event::StandbyStarted(tasks) => {
            states.set(&tasks, Some(Role::Warming));
        }
        Event::LearnerStopped(tasks) | Event::StandbyStopped(tasks) => {
            // A copy that is active here stays active.
            let copies: Vec<Task> = tasks
                .into_iter()
                .filter(|t| states.role(t) == Some(Role::Warming))
                .collect();
            states.set(&copies, None);
        }
        Event::Draining => inner.draining = true,
        Event::Drained | Event::Fenced { .. } | Event::Replaced { .. } | Event::Error(_) => {}
    }
}

/// The tasks of `views` active on more than one worker (a bug if any).
pub fn doubly_active<'a>(views: impl IntoIterator<Item = &'a WorkerView>) -> BTreeSet<Task> {
    let mut seen = BTreeSet::new();
    let mut doubles = BTreeSet::new();
    for view in views {
        for task in &view.active {
            if !seen.insert(task.clone()) {
                doubles.insert(task.clone());
            }
        }
    }
    doubles
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(p: u32) -> Task {
        Task::new("orders", p)
    }

    #[test]
    fn a_learner_replays_at_the_replay_rate_and_an_owner_restores_then_processes() {
        let changelogs = Changelogs::new(1_000);
        let rates = Rates {
            replay_per_s: 400,
            process_per_s: 10,
        };
        let mut owner = TaskStates::new(MemoryStore::new(changelogs.clone()), rates);
        let mut learner = TaskStates::new(MemoryStore::new(changelogs.clone()), rates);
        owner.set(&[task(0)], Some(Role::Active));
        learner.set(&[task(0)], Some(Role::Warming));
        assert!(owner.restoring(&task(0)));
        assert_eq!(learner.lag(&task(0)), 1_000);

        // 2 s: 800 records replayed by both.
        assert_eq!(
            owner.tick(Duration::from_secs(2), |_| true),
            Vec::<Task>::new()
        );
        assert_eq!(
            learner.tick(Duration::from_secs(2), |_| true),
            Vec::<Task>::new()
        );
        assert_eq!(owner.lag(&task(0)), 200);
        assert_eq!(learner.lag(&task(0)), 200);

        // The owner finishes restoring, then processes: the changelog grows.
        assert_eq!(owner.tick(Duration::from_secs(1), |_| true), vec![task(0)]);
        assert!(!owner.restoring(&task(0)));
        owner.tick(Duration::from_secs(1), |_| true);
        assert_eq!(changelogs.end(&task(0)), 1_010);
        assert_eq!(owner.lag(&task(0)), 0);
        // The learner never reports itself restored, and lags the new end.
        assert_eq!(learner.lag(&task(0)), 210);
        assert_eq!(
            learner.tick(Duration::from_secs(1), |_| true),
            Vec::<Task>::new()
        );
        assert_eq!(learner.lag(&task(0)), 0);

        // Fractions carry over ticks.
        for _ in 0..15 {
            owner.tick(Duration::from_millis(10), |_| true);
        }
        assert_eq!(changelogs.end(&task(0)), 1_011);

        // A role taken away keeps the state, as on disk, and its lag is
        // still reported; an active task's is not.
        learner.set(&[task(0)], None);
        assert_eq!(learner.role(&task(0)), None);
        assert_eq!(learner.lag(&task(0)), 1);
        assert_eq!(learner.lags(&Assignment::default()), vec![(task(0), 1)]);
        let owning = Assignment {
            active: [task(0)].into(),
            ..Assignment::default()
        };
        assert_eq!(owner.lags(&owning), vec![]);
    }
}
