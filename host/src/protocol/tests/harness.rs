//! The harness every protocol test drives: a coordinator with one group,
//! whose assignor calls are answered natively (the `sticky` assignor
//! through the SDK harness, the same validation as the host's sandbox);
//! after every input it checks that no task is held twice, that the timer
//! table matches the state, and that replaying every record so far into a
//! fresh coordinator gives the same group. Also the requests, configs and
//! task sets the tests share.

use std::collections::BTreeSet;

use crate::protocol::core::{
    Coordinator, Heartbeat, HeartbeatResponse, HostLoad, JOIN_EPOCH, Output, ProtocolError,
};
use crate::protocol::group::{
    CallStats, GroupConfig, LearnerMode, Millis, Record, Task, TopicConfig,
};
use crate::sim::{ASSIGNORS, assign_natively};

pub(super) const GROUP: &str = "orders-app";
pub(super) const EXPANSION_MS: u64 = 1_000;
pub(super) const SESSION_MS: u64 = 10_000;
pub(super) const REGISTRATION_MS: u64 = 30_000;

pub(super) fn config(partitions: u32) -> GroupConfig {
    GroupConfig {
        session_timeout_ms: SESSION_MS,
        registration_timeout_ms: REGISTRATION_MS,
        expansion_timeout_ms: EXPANSION_MS,
        heartbeat_interval_ms: 1_000,
        // These tests are about membership; learners have their own.
        learners: LearnerMode::Off,
        ..GroupConfig::with_topics(vec![TopicConfig {
            name: "orders".into(),
            partitions,
        }])
    }
}

/// A coordinator under test, with every record it emitted.
pub(super) struct Harness {
    pub(super) core: Coordinator,
    pub(super) log: Vec<Record>,
    pub(super) now: Millis,
}

impl Harness {
    pub(super) fn new(partitions: u32) -> Self {
        Self::with_config(config(partitions))
    }

    pub(super) fn with_config(config: GroupConfig) -> Self {
        let mut harness = Harness {
            core: Coordinator::new(7),
            log: Vec::new(),
            now: 0,
        };
        let out = harness.core.configure(GROUP, config, 0).unwrap();
        harness.absorb(out);
        harness
    }

    pub(super) fn configure(&mut self, config: GroupConfig) {
        let out = self.core.configure(GROUP, config, self.now).unwrap();
        self.absorb(out);
    }

    /// Keeps the records, answers assignor calls natively (a shadow's
    /// first, then the live one's), and checks the invariants and replay.
    pub(super) fn absorb(&mut self, out: Output) {
        self.log.extend(out.records);
        for call in out.shadow_calls {
            let answer = assign_natively(&call.assignor, &call.input);
            let stats = CallStats::default();
            self.core.shadow_computed(
                &call.group,
                call.epoch,
                &call.assignor,
                answer,
                stats,
                self.now,
            );
        }
        for call in out.assignor_calls {
            assert!(
                ASSIGNORS.contains(&call.assignor.as_str()),
                "no native assignor {:?} in these tests",
                call.assignor
            );
            let answer = assign_natively(&call.assignor, &call.input);
            let more = self
                .core
                .assignment_computed(&call.group, call.epoch, answer, self.now);
            self.absorb(more);
        }
        self.check();
    }

    pub(super) fn check(&mut self) {
        self.core.check_deadlines().unwrap();
        let group = self.core.group(GROUP).unwrap();
        let mut seen = BTreeSet::new();
        for (slot, assignment) in group.holdings.members() {
            for task in assignment.held() {
                assert!(
                    seen.insert(task.clone()),
                    "{task:?} held twice (by {slot} too)"
                );
            }
        }
        let mut replayed = Coordinator::new(7);
        for record in &self.log {
            replayed.apply(record);
        }
        assert_eq!(
            replayed.group(GROUP),
            Some(group),
            "replay differs from live state"
        );
    }

    /// Ticks at `now`, checking that the due groups' tick gives what a
    /// scan of every group gives.
    pub(super) fn at(&mut self, now: Millis) -> &mut Self {
        self.now = now;
        let mut scanned = self.core.clone();
        let reference = scanned.tick_every_group(now, HostLoad::default());
        let out = self.core.tick(now);
        assert_eq!(out, reference, "the due groups' tick and the full scan");
        assert_eq!(self.core.difference_from(&scanned), None);
        self.absorb(out);
        self
    }

    pub(super) fn send(&mut self, request: Heartbeat) -> Result<HeartbeatResponse, ProtocolError> {
        let (response, out) = self.core.heartbeat(&request, self.now)?;
        self.absorb(out);
        Ok(response)
    }

    pub(super) fn join(&mut self, name: Option<&str>) -> HeartbeatResponse {
        self.send(Heartbeat {
            group: GROUP.into(),
            member_id: String::new(),
            member_name: name.map(str::to_owned),
            member_epoch: JOIN_EPOCH,
            topics: Some(vec!["orders".into()]),
            rack: None,
            capacity: None,
            owned: None,
            lags: None,
            drain: false,
            endpoint: None,
            metadata: None,
            loads: None,
            utilisation: None,
            load_capacity: None,
        })
        .unwrap()
    }

    /// A heartbeat that reports holding what the last response granted
    /// (so revoked tasks are reported released).
    pub(super) fn beat(&mut self, last: &HeartbeatResponse) -> HeartbeatResponse {
        self.send(Heartbeat {
            owned: Some(last.active.iter().cloned().collect()),
            lags: None,
            drain: false,
            ..request_from(last)
        })
        .unwrap()
    }

    /// A heartbeat like [`Harness::beat`] that also reports lags.
    pub(super) fn beat_with_lags(
        &mut self,
        last: &HeartbeatResponse,
        lags: Vec<(Task, u64)>,
    ) -> HeartbeatResponse {
        self.send(Heartbeat {
            owned: Some(last.active.iter().cloned().collect()),
            lags: Some(lags),
            drain: false,
            ..request_from(last)
        })
        .unwrap()
    }

    pub(super) fn installed_targets(&self) -> usize {
        self.log
            .iter()
            .filter(|r| matches!(r, Record::TargetInstalled { .. }))
            .count()
    }

    /// Heartbeats every member in turn until nothing changes.
    pub(super) fn settle(&mut self, members: &mut [HeartbeatResponse]) {
        for _ in 0..4 {
            for member in members.iter_mut() {
                *member = self.beat(member);
            }
        }
    }

    /// Whether `member_id` holds a slot of the group.
    pub(super) fn is_member(&self, member_id: &str) -> bool {
        self.core.group(GROUP).unwrap().slot_of(member_id).is_some()
    }

    /// Moves time to `to` in heartbeat-interval steps, ticking and letting
    /// `alive` heartbeat at each step.
    pub(super) fn advance(&mut self, to: Millis, alive: &mut [HeartbeatResponse]) {
        while self.now < to {
            let next = (self.now + 1_000).min(to);
            self.at(next);
            for member in alive.iter_mut() {
                *member = self.beat(member);
            }
        }
    }

    pub(super) fn records_since(&self, mark: usize) -> &[Record] {
        &self.log[mark..]
    }
}

/// The heartbeat a member sends after `last`: its id and epoch, nothing
/// else reported.
pub(super) fn request_from(last: &HeartbeatResponse) -> Heartbeat {
    Heartbeat {
        group: GROUP.into(),
        member_id: last.member_id.clone(),
        member_name: None,
        member_epoch: last.member_epoch as i64,
        topics: None,
        rack: None,
        capacity: None,
        owned: None,
        lags: None,
        drain: false,
        endpoint: None,
        metadata: None,
        loads: None,
        utilisation: None,
        load_capacity: None,
    }
}

pub(super) fn tasks(range: std::ops::Range<u32>) -> BTreeSet<Task> {
    range.map(|p| Task::new("orders", p)).collect()
}

pub(super) fn all_active(members: &[HeartbeatResponse]) -> BTreeSet<Task> {
    members
        .iter()
        .flat_map(|m| m.active.iter().cloned())
        .collect()
}

pub(super) fn learner_config(partitions: u32, max_learners: u32) -> GroupConfig {
    GroupConfig {
        learners: LearnerMode::Host,
        max_learners,
        acceptable_recovery_lag: 100,
        ..config(partitions)
    }
}

/// Every task a member warms up, reported at `lag`.
pub(super) fn lags_of(member: &HeartbeatResponse, lag: u64) -> Vec<(Task, u64)> {
    member.learner.iter().map(|t| (t.clone(), lag)).collect()
}
