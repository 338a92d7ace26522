//! A simulated member process: it behaves as the real client does. It
//! heartbeats every interval with `owned` = its active tasks plus the
//! revoked ones it has not released yet, releases revoked tasks after its
//! own delay (and heartbeats as soon as it has), keeps local state for
//! tasks (lag 0 while active, catching up while learner or standby, going
//! stale otherwise) and reports it as `lags`, drains when asked and leaves
//! once drained, and rejoins after `unknown_member`, `fenced` or
//! `stale_epoch`. It never calls the coordinator itself: the world sends
//! what [`SimMember::request`] builds and hands back the answer.

use std::collections::{BTreeMap, BTreeSet};

use super::check::{Belief, tasks_str};
use super::rng::Rng;
use crate::protocol::core::{Heartbeat, HeartbeatResponse, JOIN_EPOCH, LEAVE_EPOCH};
use crate::protocol::group::{Millis, TaskRef};

/// How fast local state of a task nobody asks the member to keep goes stale
/// (lag units per ms).
const STALE_LAG_PER_MS: u64 = 5;

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
    /// `p3` or `p3(name)`, for traces and messages.
    pub label: String,
    /// A static member's name.
    pub name: Option<String>,
    /// Empty until a join is answered (and again after a rejoin is needed).
    pub member_id: String,
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
}

impl SimMember {
    pub fn new(pid: usize, name: Option<String>, topics: BTreeSet<String>, now: Millis) -> Self {
        let label = match &name {
            Some(name) => format!("p{pid}({name})"),
            None => format!("p{pid}"),
        };
        SimMember {
            pid,
            label,
            name,
            member_id: String::new(),
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
            owns: self
                .active
                .iter()
                .chain(self.revoking.keys())
                .chain(&self.zombie)
                .collect(),
        }
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
    /// owns and its lags. Revoked tasks whose delay has passed are released
    /// first (and so reported gone). `configured` is the group's topics: a
    /// real client subscribes only to topics that exist.
    pub fn request(
        &mut self,
        group: &str,
        configured: &BTreeSet<String>,
        now: Millis,
    ) -> Heartbeat {
        self.age_store(now);
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
            member_id: self.member_id.clone(),
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

    /// Takes in an answer that arrived. Returns a note for the trace when
    /// the host dropped a task without revoking it first.
    pub fn on_response(
        &mut self,
        response: &HeartbeatResponse,
        initial_lag_max: u64,
        now: Millis,
        rng: &mut Rng,
    ) -> Option<String> {
        self.member_id = response.member_id.clone();
        self.epoch = response.member_epoch as i64;
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
        let note = (!dropped.is_empty())
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

    /// The next heartbeat: one interval (a little early, as jitter), or as
    /// soon as a revoked task is released.
    pub fn schedule_beat(&mut self, interval_ms: u64, now: Millis, rng: &mut Rng) {
        self.interval_ms = interval_ms;
        let mut next = now + interval_ms - rng.below(interval_ms / 5 + 1);
        if let Some(&release) = self.revoking.values().min() {
            next = next.min(release.max(now + 1));
        }
        self.next_beat_ms = next.max(now + 1);
    }

    /// The host no longer knows this incarnation (fenced, unknown, stale
    /// epoch): stop processing everything and join again.
    pub fn reset(&mut self, now: Millis) {
        self.member_id.clear();
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
        self.active.clear();
        self.revoking.clear();
        self.learner.clear();
        self.standby.clear();
        self.zombie.clear();
    }
}
