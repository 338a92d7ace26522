//! A simulated member process: it behaves as the real client does. It
//! heartbeats every interval with `owned` = its active tasks plus the
//! revoked ones it has not released yet, releases revoked tasks after its
//! own delay (and heartbeats as soon as it has), keeps local state for
//! tasks (lag 0 while active, catching up while learner or standby, going
//! stale otherwise) and reports it as `lags`, drains when asked and leaves
//! once drained, rejoins after `unknown_member`, `fenced` or
//! `stale_epoch`, and stops after `replaced` (another process took its
//! name). It honours its lease as the client library does: once the lease
//! of its last answer has passed since it sent the heartbeat that got that
//! answer, it stops processing every task it holds and heartbeats at once.
//! That lease is the answer's `lease_ms`, or its longer
//! `unreached_lease_ms` while every heartbeat sent since provably reached
//! no coordinator (at least one was refused before any core handled it:
//! the node down, no node serving the shard, redirected in circles, or it
//! never left: its own network down), none may have reached one (its
//! answer lost, a node that did not answer) and it has no revoked task to
//! release. While a heartbeat is in flight on the unreached lease (in
//! cluster schedules: one a core handled, or may have, whose answer is
//! lost, until its request times out), it counts on that lease only until
//! the heartbeat's send time plus the last answer's
//! `unreached_flight_ms`, as the client does: that heartbeat may have
//! been told a revocation the host fences an expansion timeout and an
//! interval after handling it. It sends nothing else while one is in
//! flight. It never calls the coordinator itself: the world sends what
//! [`SimMember::request`] builds and hands back the answer
//! ([`SimMember::on_response`]) or what became of the request
//! ([`SimMember::on_unanswered`]), at once or, for a lost answer in a
//! cluster, after the request timeout ([`SimMember::send_unanswered`]).

use std::collections::{BTreeMap, BTreeSet};

use super::check::{Belief, tasks_str};
use super::rng::Rng;
use crate::protocol::core::{Heartbeat, HeartbeatResponse, JOIN_EPOCH, LEAVE_EPOCH};
use crate::protocol::group::{Millis, TaskRef};

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
    /// Sends a leave next, then exits.
    Leaving,
    /// Exited after a leave.
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

#[derive(Clone, Debug)]
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
    /// Empty until a join is answered (and again after a rejoin is needed).
    pub member_id: String,
    /// The id its joins send: one it chose (KIP-848), the same for every
    /// retry of the join, or empty for a host-issued one. A join whose
    /// answer is lost is sent again with it, and is the same member.
    pub join_id: String,
    pub epoch: i64,
    pub topics: BTreeSet<String>,
    /// A subscription change to send until the host acknowledges it.
    pub pending_topics: Option<BTreeSet<String>>,
    pub rack: Option<String>,
    pub capacity: u32,
    pub active: BTreeSet<TaskRef>,
    /// Revoked tasks not yet released, with when they will be.
    pub revoking: BTreeMap<TaskRef, Millis>,
    pub learner: BTreeSet<TaskRef>,
    pub standby: BTreeSet<TaskRef>,
    pub store: BTreeMap<TaskRef, Store>,
    pub status: Status,
    pub next_beat_ms: Millis,
    pub interval_ms: u64,
    /// How long it takes to release a revoked task: `lo..=hi` ms.
    pub release_delay_ms: (u64, u64),
    /// How fast learners and standbys catch up (lag units per ms).
    pub catch_up_per_ms: u64,
    /// Ask to drain on the next heartbeat.
    pub want_drain: bool,
    pub draining: bool,
    /// Injected bug: keeps processing tasks it reports released.
    pub keep_revoked: bool,
    /// Tasks kept under `keep_revoked`.
    pub zombie: BTreeSet<TaskRef>,
    /// When the request in flight (the last one built) was sent: its
    /// answer's lease counts from here, not from its arrival.
    pub sent_at_ms: Millis,
    /// When the lease of the last answer that arrived ends (`sent_at_ms` of
    /// its request plus its `lease_ms`); `None` before any answer. A lost
    /// answer extends nothing.
    pub lease_until_ms: Option<Millis>,
    /// When the unreached lease of the last answer that arrived ends
    /// (`sent_at_ms` of its request plus its `unreached_lease_ms`).
    pub unreached_until_ms: Option<Millis>,
    /// The last answer's `unreached_flight_ms`: while a heartbeat is in
    /// flight, the unreached lease counts only until `sent_at_ms` plus
    /// this. `None` before any answer.
    pub unreached_flight_ms: Option<u64>,
    /// When the heartbeat in flight (sent at `sent_at_ms`) times out, if
    /// one is: its answer is lost, and the member learns only then that
    /// it may have reached a coordinator. `None` while none is (every
    /// other outcome comes back at once).
    pub in_flight_until_ms: Option<Millis>,
    /// How long it waits for an answer before it gives a heartbeat up
    /// (cluster schedules draw it per process).
    pub request_timeout_ms: u64,
    /// Injected bug: counts on the whole unreached lease while a
    /// heartbeat is in flight too.
    pub ignores_flight_bound: bool,
    /// Since the last answer, a heartbeat provably reached no coordinator.
    pub unreached: bool,
    /// Since the last answer, a heartbeat may have reached the coordinator:
    /// only `lease_until_ms` counts until the next answer.
    pub maybe_reached: bool,
    /// Injected bug: counts on the unreached lease after a heartbeat that
    /// may have reached the coordinator too.
    pub extends_when_unsure: bool,
    /// It kept processing past `lease_until_ms` on the unreached lease
    /// since the last answer (once noted, for the statistics).
    pub extended: bool,
}

impl SimMember {
    pub fn new(pid: usize, name: Option<String>, topics: BTreeSet<String>, now: Millis) -> Self {
        let label = match &name {
            Some(name) => format!("p{pid}({name})"),
            None => format!("p{pid}"),
        };
        SimMember {
            pid,
            lane: 0,
            label,
            name,
            member_id: String::new(),
            join_id: String::new(),
            epoch: 0,
            topics,
            pending_topics: None,
            rack: None,
            capacity: 1,
            active: BTreeSet::new(),
            revoking: BTreeMap::new(),
            learner: BTreeSet::new(),
            standby: BTreeSet::new(),
            store: BTreeMap::new(),
            status: Status::Running,
            next_beat_ms: now,
            interval_ms: 1_000,
            release_delay_ms: (0, 0),
            catch_up_per_ms: 100,
            want_drain: false,
            draining: false,
            keep_revoked: false,
            zombie: BTreeSet::new(),
            sent_at_ms: now,
            lease_until_ms: None,
            unreached_until_ms: None,
            unreached_flight_ms: None,
            in_flight_until_ms: None,
            request_timeout_ms: 0,
            ignores_flight_bound: false,
            unreached: false,
            maybe_reached: false,
            extends_when_unsure: false,
            extended: false,
        }
    }

    pub fn label(&self) -> &str {
        &self.label
    }

    pub fn is_running(&self) -> bool {
        matches!(self.status, Status::Running | Status::Leaving)
    }

    /// What it believes it owns now.
    pub fn belief(&self) -> Belief<'_> {
        Belief {
            process: &self.label,
            member_id: &self.member_id,
            lease_until_ms: self.lease_end_ms(),
            owns: self
                .active
                .iter()
                .chain(self.revoking.keys())
                .chain(&self.zombie)
                .collect(),
        }
    }

    /// Whether it processes anything the host assigned (active, or revoked
    /// and not released yet).
    pub fn holds_tasks(&self) -> bool {
        !self.active.is_empty() || !self.revoking.is_empty()
    }

    /// When the lease it honours ends: the unreached lease of its last
    /// answer while every heartbeat since provably reached no coordinator
    /// (and one did not) and it has no revoked task to release, else the
    /// plain lease; `None` before any answer. While a heartbeat is in
    /// flight on the unreached lease, that lease ends no later than the
    /// heartbeat's send time plus the answer's `unreached_flight_ms` (the
    /// client's `lease_end`): `max(plain, min(unreached, sent + flight))`.
    pub fn lease_end_ms(&self) -> Option<Millis> {
        let plain = self.lease_until_ms;
        if !self.on_unreached_lease() {
            return plain;
        }
        let unreached = match self.flight_bound_ms() {
            Some(bound) => self.unreached_until_ms.min(Some(bound)),
            None => self.unreached_until_ms,
        };
        plain.max(unreached)
    }

    /// Whether it counts on its unreached lease rather than its plain one.
    fn on_unreached_lease(&self) -> bool {
        self.unreached && !self.maybe_reached && self.revoking.is_empty()
    }

    /// While a heartbeat is in flight, how long its unreached lease may
    /// count: its send time plus the last answer's flight bound (the plain
    /// lease from an answer without one); `None` (no bound) otherwise, or
    /// under the injected fault.
    fn flight_bound_ms(&self) -> Option<Millis> {
        if self.in_flight_until_ms.is_none() || self.ignores_flight_bound {
            return None;
        }
        match self.unreached_flight_ms {
            Some(flight_ms) => Some(self.sent_at_ms.saturating_add(flight_ms)),
            None => self.lease_until_ms,
        }
    }

    /// Whether the flight bound of the heartbeat in flight now ends its
    /// lease before its unreached lease would (for the statistics).
    pub fn flight_bound_binds(&self) -> bool {
        self.counts_on_unreached_lease()
            && self.lease_end_ms() < self.lease_until_ms.max(self.unreached_until_ms)
    }

    /// Whether it is on its unreached lease (and holds tasks) now.
    pub fn counts_on_unreached_lease(&self) -> bool {
        self.on_unreached_lease() && self.holds_tasks()
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

    /// Once the lease has passed without a newer answer, the host may have
    /// given its tasks away: it stops processing them all, as lost (not
    /// released). It keeps its member id and epoch: the host may still
    /// know it, and its next heartbeat (owned = []) says what it holds.
    /// Returns whether it dropped anything.
    pub fn expire_lease(&mut self, now: Millis) -> bool {
        if !self.lease_passed(now) || !self.holds_tasks() {
            return false;
        }
        self.active.clear();
        self.revoking.clear();
        true
    }

    /// Brings the local state's lags up to `now`.
    fn age_store(&mut self, now: Millis) {
        for (task, store) in &mut self.store {
            let dt = now.saturating_sub(store.at_ms);
            store.lag = if self.active.contains(task) || self.revoking.contains_key(task) {
                0
            } else if self.learner.contains(task) || self.standby.contains(task) {
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

    /// The next request: a join, a leave, or a heartbeat reporting what it
    /// owns and its lags. If its lease has passed it first stops processing
    /// everything it held; revoked tasks whose delay has passed are released
    /// (either way they are reported gone). `configured` is the group's
    /// topics: a real client subscribes only to topics that exist.
    pub fn request(
        &mut self,
        group: &str,
        configured: &BTreeSet<String>,
        now: Millis,
    ) -> Heartbeat {
        self.age_store(now);
        self.expire_lease(now);
        let released: Vec<TaskRef> = self
            .revoking
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(task, _)| task.clone())
            .collect();
        for task in released {
            self.revoking.remove(&task);
            if self.keep_revoked {
                self.zombie.insert(task);
            }
        }
        self.sent_at_ms = now;
        if self.status == Status::Leaving {
            return Heartbeat {
                member_epoch: LEAVE_EPOCH,
                ..self.base(group)
            };
        }
        if self.member_id.is_empty() {
            let mut topics: BTreeSet<String> =
                self.topics.intersection(configured).cloned().collect();
            if topics.is_empty() {
                topics = configured.clone();
            }
            self.topics = topics.clone();
            return Heartbeat {
                topics: Some(topics.into_iter().collect()),
                rack: self.rack.clone(),
                capacity: Some(self.capacity),
                ..self.base(group)
            };
        }
        let topics = self.pending_topics.as_ref().and_then(|t| {
            let t: BTreeSet<String> = t.intersection(configured).cloned().collect();
            (!t.is_empty()).then(|| t.into_iter().collect())
        });
        if topics.is_none() {
            self.pending_topics = None;
        }
        Heartbeat {
            member_epoch: self.epoch,
            topics,
            owned: Some(
                self.active
                    .iter()
                    .chain(self.revoking.keys())
                    .cloned()
                    .collect(),
            ),
            lags: Some(
                self.store
                    .iter()
                    .map(|(task, store)| (task.clone(), store.lag))
                    .collect(),
            ),
            drain: self.want_drain,
            ..self.base(group)
        }
    }

    fn base(&self, group: &str) -> Heartbeat {
        Heartbeat {
            group: group.to_owned(),
            member_id: if self.member_id.is_empty() {
                self.join_id.clone()
            } else {
                self.member_id.clone()
            },
            member_name: self.name.clone(),
            member_epoch: JOIN_EPOCH,
            topics: None,
            rack: None,
            capacity: None,
            owned: None,
            lags: None,
            drain: false,
        }
    }

    /// Takes in an answer that arrived (to the request built last). Returns
    /// a note for the trace when the host dropped a task without revoking
    /// it first, or when the answer's lease had already passed.
    pub fn on_response(
        &mut self,
        response: &HeartbeatResponse,
        initial_lag_max: u64,
        now: Millis,
        rng: &mut Rng,
    ) -> Option<String> {
        self.member_id = response.member_id.clone();
        self.epoch = response.member_epoch as i64;
        self.lease_until_ms = Some(self.sent_at_ms.saturating_add(response.lease_ms));
        self.unreached_until_ms = Some(
            self.sent_at_ms
                .saturating_add(response.unreached_lease_ms.max(response.lease_ms)),
        );
        self.unreached_flight_ms = Some(response.unreached_flight_ms);
        self.unreached = false;
        self.maybe_reached = false;
        self.extended = false;
        if let Some(topics) = self.pending_topics.take() {
            self.topics = topics;
        }
        for task in &response.revoking {
            if self.active.remove(task) {
                let (lo, hi) = self.release_delay_ms;
                let at = now + rng.range(lo, hi);
                self.revoking.insert(task.clone(), at);
            }
        }
        for task in &response.active {
            self.revoking.remove(task);
        }
        let dropped: Vec<&TaskRef> = self
            .active
            .iter()
            .filter(|t| !response.active.contains(*t) && !response.revoking.contains(*t))
            .collect();
        let mut note = (!dropped.is_empty())
            .then(|| format!("host dropped {} without a revoke", tasks_str(dropped)));
        self.active = response.active.clone();
        self.learner = response.learner.clone();
        self.standby = response.standby.clone();
        for task in &self.active {
            self.store
                .entry(task.clone())
                .or_insert(Store { lag: 0, at_ms: now });
        }
        for task in self.learner.iter().chain(&self.standby) {
            if !self.store.contains_key(task) {
                let lag = rng.range(0, initial_lag_max);
                self.store.insert(task.clone(), Store { lag, at_ms: now });
            }
        }
        // An answer whose lease is over on arrival grants nothing to
        // process. Its tasks are dropped now, and the next heartbeat comes
        // on the usual schedule: beating at once would only fetch another
        // such answer.
        if self.expire_lease(now) {
            note = Some(format!(
                "{}lease over on arrival (until {:?}): stops processing",
                note.map(|n| n + "; ").unwrap_or_default(),
                self.lease_until_ms
            ));
        }
        self.draining = response.draining;
        if response.draining {
            self.want_drain = false;
        }
        if response.drained {
            self.status = Status::Leaving;
            self.next_beat_ms = now;
        } else {
            self.schedule_beat(response.heartbeat_interval_ms, now, rng);
        }
        note
    }

    /// The request built last is in flight and its answer is lost: it
    /// learns so only at `now` plus its request timeout, sending nothing
    /// until then, and meanwhile counts on the lease [`Self::lease_end_ms`]
    /// gives (the unreached lease bounded by the flight bound). The next
    /// event is that timeout, or the end of its lease if it holds tasks
    /// then (it stops processing them, still waiting). Returns the
    /// timeout.
    pub fn send_unanswered(&mut self, now: Millis) -> Millis {
        let until = now.saturating_add(self.request_timeout_ms);
        self.in_flight_until_ms = Some(until);
        self.next_beat_ms = match self.lease_end_ms() {
            Some(end) if end > now && end < until && self.holds_tasks() => end,
            _ => until,
        };
        until
    }

    /// While in flight, at `now` before its timeout (its lease ended):
    /// stops processing if the lease has passed, and waits for the
    /// timeout. Returns whether it dropped anything.
    pub fn in_flight_lease_check(&mut self, now: Millis) -> bool {
        let dropped = self.expire_lease(now);
        if let Some(until) = self.in_flight_until_ms {
            self.next_beat_ms = until;
        }
        dropped
    }

    /// Takes in what became of the request built last when no answer came
    /// back (at once, or at the end of its flight): a heartbeat that may have reached the coordinator voids the
    /// unreached lease until the next answer (and if the plain lease has
    /// passed, it stops processing at once); one that provably did not
    /// lets it count on the unreached lease. Schedules the next heartbeat.
    /// Returns a note for the trace when the lease it honours changed.
    pub fn on_unanswered(&mut self, reach: Reach, now: Millis, rng: &mut Rng) -> Option<String> {
        let before = self.lease_end_ms();
        self.in_flight_until_ms = None;
        match reach {
            Reach::MaybeReached if !self.extends_when_unsure => self.maybe_reached = true,
            _ => self.unreached = true,
        }
        let after = self.lease_end_ms();
        let mut note = (before != after && self.holds_tasks()).then(|| match reach {
            Reach::Unreached => format!("unreached: keeps processing until {after:?}"),
            Reach::MaybeReached if self.extends_when_unsure => {
                format!("may have reached, yet keeps processing until {after:?} (injected)")
            }
            Reach::MaybeReached => format!("may have reached: back to the lease until {after:?}"),
        });
        if self.expire_lease(now) {
            note = Some(format!(
                "{}lease over (until {after:?}): stops processing",
                note.map(|n| n + "; ").unwrap_or_default(),
            ));
        }
        let interval = self.interval_ms;
        self.schedule_beat(interval, now, rng);
        note
    }

    /// The next heartbeat: one interval (a little early, as jitter), or as
    /// soon as a revoked task is released, or at the end of its lease if
    /// it still holds tasks then (it stops processing them and tells the
    /// host at once).
    pub fn schedule_beat(&mut self, interval_ms: u64, now: Millis, rng: &mut Rng) {
        self.interval_ms = interval_ms;
        let mut next = now + interval_ms - rng.below(interval_ms / 5 + 1);
        if let Some(&release) = self.revoking.values().min() {
            next = next.min(release.max(now + 1));
        }
        if let Some(until) = self.lease_end_ms()
            && until > now
            && self.holds_tasks()
        {
            next = next.min(until);
        }
        self.next_beat_ms = next.max(now + 1);
    }

    /// The host no longer knows this incarnation (fenced, unknown, stale
    /// epoch): stop processing everything and join again, with
    /// `join_id` (a new one: the old one may be fenced).
    pub fn reset(&mut self, now: Millis, join_id: String) {
        self.member_id.clear();
        self.join_id = join_id;
        self.epoch = 0;
        self.active.clear();
        self.revoking.clear();
        self.learner.clear();
        self.standby.clear();
        self.draining = false;
        self.next_beat_ms = now + 1;
    }

    /// Stops processing at once (a crash or a leave).
    pub fn stop(&mut self, status: Status) {
        self.status = status;
        self.in_flight_until_ms = None;
        self.active.clear();
        self.revoking.clear();
        self.learner.clear();
        self.standby.clear();
        self.zombie.clear();
    }
}
