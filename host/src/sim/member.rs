//! A simulated member process: the client's own member machine
//! ([`assignd_client::machine::Machine`]) in a thin shell, so that the
//! simulator proves the client rather than a copy of it. Every decision is
//! the machine's: the member id (`c-p{pid}-{n}`) and epoch, when the next
//! request is due and what it carries (owned, lags, drain; join, leave),
//! the lease and when it ran out, the rejoin after `fenced`,
//! `unknown_member` or `stale_epoch`, the stop after `replaced`, the leave
//! that ends a drain. The shell converts between the core's types and the
//! wire's (with the API's own conversions), passes the virtual time in,
//! and keeps what is the simulated application's business: local state for
//! tasks (lag 0 while active, catching up while learner or standby, going
//! stale otherwise), reported as lags; the loads of its active tasks (the
//! world's draws) and its utilisation, set on the machine before each
//! request; the random delay before it has
//! stopped a revoked task and acks it; how late its timer fires; what the
//! machine does not do (subscription changes, a join restricted to the
//! group's topics, a host-issued id); and the injected faults.
//!
//! The world sends what [`SimMember::request`] builds and hands back the
//! answer ([`SimMember::on_response`]), the refusal
//! ([`SimMember::on_refused`]) or what became of an unanswered request
//! ([`SimMember::on_unanswered`]: its [`Reach`] is the transport's
//! failure), at once or, for a lost answer in a cluster, after the request
//! timeout ([`SimMember::send_unanswered`]), the request in flight until
//! then and the member on the lease the machine bounds.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use assignd_client::loads::UTILISATION_MAX;
use assignd_client::machine::{
    Failure, INTERVAL_BEFORE_JOIN_MS, Machine, MachineConfig, MachineEvent,
};
use assignd_client::wire::{self, HeartbeatRequest, LagRow, Task};

use super::check::{Belief, tasks_str};
use super::rng::Rng;
use crate::api::protocol_status;
use crate::api::wire::{heartbeat_request, heartbeat_response};
use crate::protocol::core::{Heartbeat, HeartbeatResponse, JOIN_EPOCH, LEAVE_EPOCH, ProtocolError};
use crate::protocol::group::Millis;

/// How fast local state of a task nobody asks the member to keep goes stale
/// (lag units per ms).
const STALE_LAG_PER_MS: u64 = 5;

/// What became of a heartbeat that got no answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Provably handled by no core: refused a connection, answered 503
    /// `shard_unavailable`, redirected without end, or never sent (the
    /// member's own network down).
    Unreached,
    /// A core may have handled it: its answer was lost, the node did not
    /// answer in time, or its write did not land.
    MaybeReached,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Heartbeating (or about to join).
    Running,
    /// Leaving (asked to, or drained), then exits.
    Leaving,
    /// Exited: left, or the machine stopped.
    Gone,
    /// Went silent (kill -9, lost machine).
    Crashed,
}

/// One task's local state: the lag at `at_ms`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Store {
    pub lag: u64,
    pub at_ms: Millis,
}

/// The assignment as the application was told it (the machine's, in the
/// core's task type).
#[derive(Debug, Default)]
struct Held {
    active: BTreeSet<Task>,
    revoking: BTreeSet<Task>,
    learner: BTreeSet<Task>,
    standby: BTreeSet<Task>,
}

/// Revoked tasks the application is stopping: it acks them at `at`.
#[derive(Debug)]
struct Release {
    at: Millis,
    tasks: Vec<Task>,
}

/// The draws an answer's events need.
struct Draws<'a> {
    rng: &'a mut Rng,
    initial_lag_max: u64,
}

#[derive(Debug)]
pub struct SimMember {
    /// The simulator's process number (one per incarnation).
    pub pid: usize,
    /// Which of the schedule's groups it is a member of (an index into
    /// them).
    pub lane: usize,
    /// `p3` or `p3(name)`, for traces and messages.
    pub label: String,
    /// A static member's name.
    pub name: Option<String>,
    machine: Machine,
    /// The subscription its joins send.
    pub topics: BTreeSet<String>,
    /// A subscription change to send until the host acknowledges it.
    pub pending_topics: Option<BTreeSet<String>>,
    /// The request in flight carries `pending_topics`.
    pending_sent: bool,
    /// Its joins send an empty member id, for the host to issue one (the
    /// wire allows it, and the host's issued ids are replayed from its log;
    /// the machine always chooses one).
    pub host_issues_id: bool,
    held: Held,
    /// Revoked tasks being stopped, by the ack that releases them.
    releases: BTreeMap<u64, Release>,
    pub store: BTreeMap<Task, Store>,
    pub status: Status,
    /// When the process next runs.
    pub next_beat_ms: Millis,
    /// Stalled until then: it runs no sooner, whatever is due.
    asleep_until_ms: Millis,
    /// How late its timer fires for the wait the machine last set.
    jitter_ms: u64,
    /// The last answer's heartbeat interval (for the world's draws).
    pub interval_ms: u64,
    /// How long it takes to stop a revoked task: `lo..=hi` ms.
    pub release_delay_ms: (u64, u64),
    /// How fast learners and standbys catch up (lag units per ms).
    pub catch_up_per_ms: u64,
    /// It asked to drain and no answer said it is draining yet.
    pub want_drain: bool,
    pub draining: bool,
    /// Injected bug: keeps processing tasks it acked.
    pub keep_revoked: bool,
    /// Tasks kept under `keep_revoked`.
    pub zombie: BTreeSet<Task>,
    /// When the request in flight (the last one built) was sent.
    pub sent_at_ms: Millis,
    /// The request in flight is a leave.
    leave_in_flight: bool,
    /// The plain lease of the last answer that arrived (its request's send
    /// time plus `lease_ms`), for traces and statistics: the lease it
    /// honours is [`Self::lease_end_ms`].
    pub lease_until_ms: Option<Millis>,
    /// When the request in flight times out, if one is: its answer is
    /// lost, and the member learns only then that it may have reached a
    /// coordinator. `None` while none is (every other outcome comes back
    /// at once).
    pub in_flight_until_ms: Option<Millis>,
    /// How long it waits for an answer before it gives a heartbeat up
    /// (cluster schedules draw it per process).
    pub request_timeout_ms: u64,
    /// Injected bug: counts on the whole unreached lease while a
    /// heartbeat is in flight too.
    pub ignores_flight_bound: bool,
    /// Injected bug: takes a heartbeat that may have reached the
    /// coordinator for one that provably did not.
    pub extends_when_unsure: bool,
    /// It kept processing past `lease_until_ms` on the unreached lease
    /// since the last answer (once noted, for the statistics).
    pub extended: bool,
    /// The load capacity it declares, if any.
    load_capacity: Option<f64>,
}

fn machine_config(
    pid: usize,
    name: &Option<String>,
    topics: &BTreeSet<String>,
    rack: Option<String>,
    capacity: u32,
) -> MachineConfig {
    MachineConfig {
        member_name: name.clone(),
        topics: topics.iter().cloned().collect(),
        rack,
        capacity,
        endpoint: None,
        metadata: BTreeMap::new(),
        // Deterministic for a seed (pids are), and unique in a schedule.
        id_prefix: format!("c-p{pid}"),
    }
}

/// An event's tasks, in order and once each.
fn task_set(tasks: impl IntoIterator<Item = Task>) -> BTreeSet<Task> {
    tasks.into_iter().collect()
}

impl SimMember {
    pub fn new(pid: usize, name: Option<String>, topics: BTreeSet<String>, now: Millis) -> Self {
        let label = match &name {
            Some(name) => format!("p{pid}({name})"),
            None => format!("p{pid}"),
        };
        let machine = Machine::new(machine_config(pid, &name, &topics, None, 1), now);
        SimMember {
            pid,
            lane: 0,
            label,
            name,
            machine,
            topics,
            pending_topics: None,
            pending_sent: false,
            host_issues_id: false,
            held: Held::default(),
            releases: BTreeMap::new(),
            store: BTreeMap::new(),
            status: Status::Running,
            next_beat_ms: now,
            asleep_until_ms: 0,
            jitter_ms: 0,
            interval_ms: INTERVAL_BEFORE_JOIN_MS,
            release_delay_ms: (0, 0),
            catch_up_per_ms: 100,
            want_drain: false,
            draining: false,
            keep_revoked: false,
            zombie: BTreeSet::new(),
            sent_at_ms: now,
            leave_in_flight: false,
            lease_until_ms: None,
            in_flight_until_ms: None,
            request_timeout_ms: 0,
            ignores_flight_bound: false,
            extends_when_unsure: false,
            extended: false,
            load_capacity: None,
        }
    }

    /// Its rack and capacity (which every request carries), set before it
    /// first runs.
    pub fn with_placement(mut self, rack: Option<String>, capacity: u32) -> Self {
        let config = machine_config(self.pid, &self.name, &self.topics, rack, capacity);
        self.machine = Machine::new(config, self.sent_at_ms);
        self
    }

    /// The load it says it can carry (sent when the host asks for loads),
    /// set after [`Self::with_placement`].
    pub fn with_load_capacity(mut self, capacity: Option<f64>) -> Self {
        assert!(self.machine.set_load_capacity(capacity), "{capacity:?}");
        self.load_capacity = capacity;
        self
    }

    /// What the application measures now: the load of each of its active
    /// tasks (`loads`), and with a load capacity, its utilisation (the
    /// loads it carries against it). The machine sends what the host asks
    /// for.
    pub fn measure_loads(&mut self, loads: Vec<(Task, f64)>) {
        let mut carried = 0.0;
        for (task, load) in loads {
            carried += load;
            assert!(self.machine.set_load(task, load), "a load the host takes");
        }
        if let Some(capacity) = self.load_capacity {
            let utilisation = (carried / capacity).min(UTILISATION_MAX);
            assert!(self.machine.set_utilisation(Some(utilisation)));
        }
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    /// Its member id: empty until a join is answered (and again when it
    /// must join anew).
    pub fn member_id(&self) -> &str {
        self.machine.member_id().unwrap_or_default()
    }

    pub fn epoch(&self) -> i64 {
        self.machine.member_epoch()
    }

    /// The tasks it processes.
    pub fn active(&self) -> &BTreeSet<Task> {
        &self.held.active
    }

    /// Revoked tasks it has not acked yet (it still processes them).
    pub fn revoking(&self) -> &BTreeSet<Task> {
        &self.held.revoking
    }

    pub fn learner(&self) -> &BTreeSet<Task> {
        &self.held.learner
    }

    pub fn is_running(&self) -> bool {
        matches!(self.status, Status::Running | Status::Leaving)
    }

    /// What it believes it owns now.
    pub fn belief(&self) -> Belief<'_> {
        Belief {
            process: &self.label,
            member_id: self.member_id(),
            lease_until_ms: self.lease_end_ms(),
            owns: self
                .held
                .active
                .iter()
                .chain(&self.held.revoking)
                .chain(&self.zombie)
                .collect(),
        }
    }

    /// What it processes now as its machine has it (active, or revoked
    /// and not acked yet, under the lease it honours): where a router's
    /// key lands. Unlike [`Self::belief`], without the tasks an injected
    /// fault keeps behind the machine's back.
    pub fn processing(&self) -> Belief<'_> {
        Belief {
            process: &self.label,
            member_id: self.member_id(),
            lease_until_ms: self.lease_end_ms(),
            owns: self.held.active.iter().chain(&self.held.revoking).collect(),
        }
    }

    /// Whether it processes anything the host assigned (active, or revoked
    /// and not acked yet).
    pub fn holds_tasks(&self) -> bool {
        !self.held.active.is_empty() || !self.held.revoking.is_empty()
    }

    /// When the lease it honours ends: the machine's, or under the injected
    /// `ignores_flight_bound`, the whole unreached lease while on it (the
    /// flight bound ignored).
    pub fn lease_end_ms(&self) -> Option<Millis> {
        let lease = self.machine.lease_until();
        if self.ignores_flight_bound && self.machine.on_unreached_lease() {
            return lease.max(self.machine.unreached_lease_until());
        }
        lease
    }

    /// The end of the last answer's unreached lease (for traces).
    pub fn unreached_lease_until(&self) -> Option<Millis> {
        self.machine.unreached_lease_until()
    }

    /// Whether the flight bound of the heartbeat in flight now ends its
    /// lease before its unreached lease would (for the statistics).
    pub fn flight_bound_binds(&self) -> bool {
        self.counts_on_unreached_lease()
            && self.lease_end_ms() < self.lease_until_ms.max(self.unreached_lease_until())
    }

    /// Whether it is on its unreached lease (and holds tasks) now.
    pub fn counts_on_unreached_lease(&self) -> bool {
        self.machine.on_unreached_lease() && self.holds_tasks()
    }

    /// Whether its lease has passed at `now` (or it never had one).
    pub fn lease_passed(&self, now: Millis) -> bool {
        self.lease_end_ms().is_none_or(|until| now >= until)
    }

    /// Whether it still processes tasks at `now` only thanks to the
    /// unreached lease: its plain lease has passed, the one it honours has
    /// not.
    pub fn past_plain_lease(&self, now: Millis) -> bool {
        self.holds_tasks()
            && self.lease_until_ms.is_some_and(|until| now >= until)
            && !self.lease_passed(now)
    }

    /// Stalled (starved, paused) until `until`: it runs no sooner.
    pub fn stall(&mut self, until: Millis) {
        self.asleep_until_ms = until;
        self.next_beat_ms = until;
    }

    /// Runs no later than `at` (a stall cut short).
    pub fn wake_by(&mut self, at: Millis) {
        self.asleep_until_ms = self.asleep_until_ms.min(at);
        self.next_beat_ms = self.next_beat_ms.min(at);
    }

    /// The application asks to drain.
    pub fn ask_drain(&mut self, now: Millis) {
        self.want_drain = true;
        self.machine.drain(now);
        self.schedule(now);
    }

    /// The application leaves; a member that never joined is gone at once.
    pub fn leave(&mut self, now: Millis) {
        self.status = Status::Leaving;
        self.machine.leave(now);
        self.settle(now);
    }

    /// Stops processing at once (a crash, or the end of the machine).
    pub fn stop(&mut self, status: Status) {
        self.status = status;
        self.in_flight_until_ms = None;
        self.held = Held::default();
        self.releases.clear();
        self.zombie.clear();
    }

    /// Brings the local state's lags up to `now`.
    fn age_store(&mut self, now: Millis) {
        let held = &self.held;
        for (task, store) in &mut self.store {
            let dt = now.saturating_sub(store.at_ms);
            store.lag = if held.active.contains(task) || held.revoking.contains(task) {
                0
            } else if held.learner.contains(task) || held.standby.contains(task) {
                store
                    .lag
                    .saturating_sub(self.catch_up_per_ms.saturating_mul(dt))
            } else {
                store
                    .lag
                    .saturating_add(STALE_LAG_PER_MS.saturating_mul(dt))
            };
            store.at_ms = now;
        }
    }

    /// The request the machine sends at `now`, if one is due: a join, a
    /// heartbeat or a leave. First, as the client's loop does, the machine
    /// acts on a lease that ran out and the application acks the revoked
    /// tasks it has stopped. `configured` is the group's topics: a real
    /// client subscribes only to topics that exist.
    pub fn request(
        &mut self,
        group: &str,
        configured: &BTreeSet<String>,
        now: Millis,
    ) -> Option<Heartbeat> {
        self.age_store(now);
        self.settle(now);
        if !self.machine.request_due(now) {
            return None;
        }
        self.machine.report_lags(
            self.store
                .iter()
                .map(|(task, store)| LagRow(task.topic.clone(), task.partition, store.lag))
                .collect(),
        );
        let body = self.machine.poll_request(now)?;
        self.sent_at_ms = now;
        self.leave_in_flight = body.member_epoch == LEAVE_EPOCH;
        // Sending a leave, it stops processing.
        self.take_events(now, None, "leaves");
        self.sync();
        Some(self.heartbeat(group, configured, body))
    }

    /// The machine's request as the core takes it (the API's conversion),
    /// with what the machine does not do: a join subscribes to the group's
    /// topics only, and sends no id if the host issues it; a heartbeat
    /// carries a pending subscription change.
    fn heartbeat(
        &mut self,
        group: &str,
        configured: &BTreeSet<String>,
        body: HeartbeatRequest,
    ) -> Heartbeat {
        let mut heartbeat = heartbeat_request(group.to_owned(), body);
        let within = |topics: &BTreeSet<String>| -> BTreeSet<String> {
            topics.intersection(configured).cloned().collect()
        };
        self.pending_sent = false;
        if heartbeat.member_epoch == JOIN_EPOCH {
            let wanted = self.pending_topics.take().unwrap_or(self.topics.clone());
            let topics = Some(within(&wanted))
                .filter(|t| !t.is_empty())
                .unwrap_or(configured.clone());
            heartbeat.topics = Some(topics.iter().cloned().collect());
            self.topics = topics;
            if self.host_issues_id {
                heartbeat.member_id.clear();
            }
        } else if heartbeat.member_epoch != LEAVE_EPOCH {
            let topics = self.pending_topics.as_ref().map(within);
            let topics = topics.filter(|t| !t.is_empty());
            self.pending_sent = topics.is_some();
            if !self.pending_sent {
                self.pending_topics = None;
            }
            heartbeat.topics = topics.map(|t| t.into_iter().collect());
        }
        heartbeat
    }

    /// Takes in the answer to the request in flight. Returns a note for the
    /// trace when the host dropped a task without revoking it first, or
    /// when the answer's lease had already passed.
    pub fn on_response(
        &mut self,
        response: &HeartbeatResponse,
        initial_lag_max: u64,
        now: Millis,
        rng: &mut Rng,
    ) -> Option<String> {
        if !self.leave_in_flight {
            self.lease_until_ms = Some(self.sent_at_ms.saturating_add(response.lease_ms));
            self.extended = false;
            self.interval_ms = response.heartbeat_interval_ms;
            if response.draining {
                self.want_drain = false;
            }
            if std::mem::take(&mut self.pending_sent)
                && let Some(topics) = self.pending_topics.take()
            {
                self.topics = topics;
            }
        }
        let body = heartbeat_response(response.clone(), true);
        let answer = wire::HeartbeatResponse::try_from(body).expect("an epoch a request can send");
        self.machine.on_answer(&answer, now);
        let draws = Draws {
            rng: &mut *rng,
            initial_lag_max,
        };
        let mut notes =
            self.take_events(now, Some(draws), "the host dropped them without a revoke");
        self.draw_jitter(now, rng);
        notes.extend(self.settle(now));
        (!notes.is_empty()).then(|| notes.join("; "))
    }

    /// Takes in the host's refusal of the request in flight.
    pub fn on_refused(
        &mut self,
        error: &ProtocolError,
        now: Millis,
        rng: &mut Rng,
    ) -> Option<String> {
        self.fail(
            &Failure::Refused {
                status: protocol_status(error).as_u16(),
                code: error.code().to_owned(),
                retry_after_ms: None,
            },
            now,
        );
        let notes = self.after_failure(now, rng);
        (!notes.is_empty()).then(|| notes.join("; "))
    }

    /// Takes in what became of the request in flight when no answer came
    /// back (at once, or at its timeout): `reach` is the transport's
    /// failure. Returns a note for the trace when the lease it honours
    /// changed.
    pub fn on_unanswered(&mut self, reach: Reach, now: Millis, rng: &mut Rng) -> Option<String> {
        let before = self.lease_end_ms();
        let failure = match reach {
            Reach::Unreached => Failure::Unreached,
            // The injected fault: an outcome that may have reached the
            // coordinator, taken for one that provably did not.
            Reach::MaybeReached if self.extends_when_unsure => Failure::Unreached,
            Reach::MaybeReached => Failure::NoAnswer,
        };
        self.fail(&failure, now);
        let after = self.lease_end_ms();
        let mut notes: Vec<String> = (before != after && self.holds_tasks())
            .then(|| match reach {
                Reach::Unreached => format!("unreached: keeps processing until {after:?}"),
                Reach::MaybeReached if self.extends_when_unsure => {
                    format!("may have reached, yet keeps processing until {after:?} (injected)")
                }
                Reach::MaybeReached => {
                    format!("may have reached: back to the lease until {after:?}")
                }
            })
            .into_iter()
            .collect();
        notes.extend(self.after_failure(now, rng));
        (!notes.is_empty()).then(|| notes.join("; "))
    }

    fn fail(&mut self, failure: &Failure, now: Millis) {
        self.in_flight_until_ms = None;
        self.pending_sent = false;
        self.machine.on_failure(failure, now);
    }

    fn after_failure(&mut self, now: Millis, rng: &mut Rng) -> Vec<String> {
        let mut notes = self.take_events(now, None, "out of the group");
        self.draw_jitter(now, rng);
        notes.extend(self.settle(now));
        notes
    }

    /// The request in flight lost its answer: the member learns so only
    /// at `now` plus its request timeout, and meanwhile counts on the lease
    /// the machine bounds. Returns the timeout.
    pub fn send_unanswered(&mut self, now: Millis) -> Millis {
        let until = now.saturating_add(self.request_timeout_ms);
        self.in_flight_until_ms = Some(until);
        self.schedule(now);
        until
    }

    /// While a request is in flight, at `now` before its timeout (its lease
    /// ended, or a revoked task is stopped): the machine acts on both, and
    /// it waits on. Returns whether it stopped processing on the lease.
    pub fn wake_in_flight(&mut self, now: Millis) -> bool {
        let lapsed = !self.tick(now).is_empty();
        self.settle(now);
        lapsed
    }

    /// The machine acts on a lease that ran out. Under the injected
    /// `ignores_flight_bound` it is told no sooner than the longer lease
    /// the member counts on has passed.
    fn tick(&mut self, now: Millis) -> Vec<String> {
        if self.ignores_flight_bound && !self.lease_passed(now) {
            return Vec::new();
        }
        self.machine.tick(now);
        self.take_events(now, None, "lease over")
    }

    /// After every input: the machine acts on the lease, the application
    /// acks what it has stopped, and the member's view of the machine and
    /// its next run are brought up to date.
    fn settle(&mut self, now: Millis) -> Vec<String> {
        let mut notes = self.tick(now);
        let due: Vec<u64> = self
            .releases
            .iter()
            .filter(|(_, release)| release.at <= now)
            .map(|(ack, _)| *ack)
            .collect();
        for ack in due {
            let release = self.releases.remove(&ack).expect("listed");
            if self.keep_revoked {
                let revoking = self.machine.assignment().revoking;
                let kept = release.tasks.into_iter().filter(|t| revoking.contains(t));
                self.zombie.extend(kept);
            }
            self.machine.ack(ack, now);
        }
        notes.extend(self.take_events(now, None, "lost"));
        if self.machine.stopped().is_some() && self.is_running() {
            self.stop(Status::Gone);
        }
        self.sync();
        self.schedule(now);
        notes
    }

    /// Mirrors the machine's assignment, unless the process stopped.
    fn sync(&mut self) {
        let told = self.machine.assignment();
        self.draining = told.draining;
        if !self.is_running() {
            self.held = Held::default();
        } else {
            self.held = Held {
                active: told.active,
                revoking: told.revoking,
                learner: told.learner,
                standby: told.standby,
            };
        }
        // Tasks lost meanwhile are not released by an ack.
        let revoking = &self.held.revoking;
        self.releases
            .retain(|_, release| release.tasks.iter().any(|t| revoking.contains(t)));
    }

    /// What the application does with the machine's events; notes for
    /// the trace of tasks it stops at once (`lost_why`).
    fn take_events(
        &mut self,
        now: Millis,
        mut draws: Option<Draws<'_>>,
        lost_why: &str,
    ) -> Vec<String> {
        let mut notes = Vec::new();
        while let Some(event) = self.machine.poll_event() {
            match event {
                MachineEvent::Revoked { ack, tasks } => {
                    let (lo, hi) = self.release_delay_ms;
                    let delay = draws.as_mut().map_or(lo, |d| d.rng.range(lo, hi));
                    let tasks = task_set(tasks).into_iter().collect();
                    let at = now.saturating_add(delay);
                    self.releases.insert(ack, Release { at, tasks });
                }
                MachineEvent::Assigned { tasks } | MachineEvent::Promoted { tasks } => {
                    for task in task_set(tasks) {
                        self.store
                            .entry(task)
                            .or_insert(Store { lag: 0, at_ms: now });
                    }
                }
                MachineEvent::LearnerStarted { tasks } | MachineEvent::StandbyStarted { tasks } => {
                    for task in task_set(tasks) {
                        if let Entry::Vacant(store) = self.store.entry(task) {
                            let lag = draws
                                .as_mut()
                                .map_or(0, |d| d.rng.range(0, d.initial_lag_max));
                            store.insert(Store { lag, at_ms: now });
                        }
                    }
                }
                MachineEvent::Lost { tasks } => notes.push(format!(
                    "{lost_why} (lease until {:?}): stops processing [{}]",
                    self.lease_end_ms(),
                    tasks_str(&task_set(tasks))
                )),
                MachineEvent::Fenced { rejoining } => {
                    notes.push(format!("fenced (rejoining: {rejoining})"));
                }
                MachineEvent::Replaced { .. } => notes.push("replaced: stops".into()),
                MachineEvent::Drained => self.status = Status::Leaving,
                MachineEvent::Joined { .. }
                | MachineEvent::LearnerStopped { .. }
                | MachineEvent::StandbyStopped { .. }
                | MachineEvent::Draining
                | MachineEvent::Error { .. } => {}
            }
        }
        notes
    }

    /// How late its timer fires for the wait the machine just set: up to
    /// a fifth of it (a process never runs early).
    fn draw_jitter(&mut self, now: Millis, rng: &mut Rng) {
        let wait = self
            .machine
            .poll_timeout()
            .map_or(0, |t| t.saturating_sub(now));
        self.jitter_ms = rng.below(wait / 5 + 1);
    }

    /// When it next runs: when the machine wants an input (the next
    /// request, a little late, or the end of the lease it honours while it
    /// holds tasks), the timeout of a request in flight, or when it has
    /// stopped a revoked task; never while stalled.
    fn schedule(&mut self, now: Millis) {
        if !self.is_running() {
            return;
        }
        let lease = self.lease_end_ms().filter(|_| self.holds_tasks());
        let next = match self.in_flight_until_ms {
            Some(until) => Some(until),
            None => match self.machine.poll_timeout() {
                Some(due) if due > now && Some(due) != lease => Some(due + self.jitter_ms),
                other => other,
            },
        };
        let release = self.releases.values().map(|r| r.at).min();
        let wake = [next, lease, release].into_iter().flatten().min();
        self.next_beat_ms = wake
            .unwrap_or(Millis::MAX)
            .max(now + 1)
            .max(self.asleep_until_ms);
    }
}
