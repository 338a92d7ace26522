//! The simulated member processes of each group: a new one started with
//! drawn traits (rack, capacity, release speed, catch-up speed, request
//! timeout, faults), a static member's next incarnation, and what the
//! running ones believe they own.

use std::collections::{BTreeMap, BTreeSet};

use super::World;
use super::scenario::Membership;
use crate::protocol::group::Task;
use crate::sim::Fault;
use crate::sim::Violation;
use crate::sim::check::Belief;
use crate::sim::member::{SimMember, Store};

/// Probability that a process's joins send the member id its machine chose
/// (KIP-848) rather than leaving it to the host.
const CHOSEN_ID_P: f64 = 0.75;

/// In cluster mode, how long a process waits for an answer before it
/// gives a heartbeat up: drawn per process, `lo..=hi` ms. Often longer
/// than a group's expansion timeout and interval (at most 1,600 ms), so
/// that the flight bound of the unreached lease matters.
const REQUEST_TIMEOUT_MS: (u64, u64) = (200, 3_000);

impl World {
    pub(super) fn draw_name(&mut self, lane: usize) -> Option<String> {
        let named = match self.lanes[lane].scenario.membership {
            Membership::Static => true,
            Membership::Dynamic => false,
            Membership::Mixed => self.rng.chance(0.5),
        };
        named.then(|| {
            self.names_issued += 1;
            format!("w{}", self.names_issued)
        })
    }

    pub(super) fn draw_topics(&mut self, lane: usize) -> BTreeSet<String> {
        let all = self.configured_topics(lane);
        if all.len() == 1 || self.rng.chance(0.7) {
            return all;
        }
        let mut some: BTreeSet<String> = all
            .iter()
            .filter(|_| self.rng.chance(0.5))
            .cloned()
            .collect();
        if some.is_empty() {
            let all: Vec<String> = all.into_iter().collect();
            some.insert(self.rng.pick(&all).clone());
        }
        some
    }

    pub(super) fn release_delay(&mut self, lane: usize, slow: bool) -> (u64, u64) {
        let expansion = self.group(lane).config.expansion_timeout_ms;
        if slow {
            (expansion / 2, expansion * 2)
        } else {
            (0, expansion / 4)
        }
    }

    /// A new process of group `lane` (not joined yet; it joins on its
    /// first beat).
    pub(super) fn spawn(
        &mut self,
        lane: usize,
        name: Option<String>,
        topics: BTreeSet<String>,
        store: BTreeMap<Task, Store>,
    ) -> usize {
        let pid = self.processes.len();
        let rack = self.lanes[lane]
            .scenario
            .racks
            .then(|| format!("r{}", self.rng.below(3)));
        let capacity = if self.rng.chance(0.2) {
            self.rng.range(2, 3) as u32
        } else {
            1
        };
        let load_capacity = self.draw_load_capacity(lane, capacity);
        let mut member = SimMember::new(pid, name, topics, self.now)
            .with_placement(rack, capacity)
            .with_load_capacity(load_capacity);
        member.lane = lane;
        let slow = self.rng.chance(self.lanes[lane].scenario.slow_p);
        member.release_delay_ms = self.release_delay(lane, slow);
        member.catch_up_per_ms = *self.rng.pick(&self.lanes[lane].scenario.catch_up_per_ms);
        member.interval_ms = self.group(lane).config.heartbeat_interval_ms;
        member.keep_revoked = self.fault == Some(Fault::KeepRevoked) && pid % 3 == 1;
        member.extends_when_unsure = self.fault == Some(Fault::ExtendWhenUnsure);
        member.ignores_flight_bound = self.fault == Some(Fault::IgnoresFlightBound);
        if self.cluster.is_some() {
            let (lo, hi) = REQUEST_TIMEOUT_MS;
            member.request_timeout_ms = self.rng.range(lo, hi);
        }
        member.store = store;
        member.host_issues_id = !self.rng.chance(CHOSEN_ID_P);
        self.note(|w| format!("spawn {} in {}", member.label(), w.lanes[lane].name));
        self.processes.push(member);
        pid
    }

    /// Static names with no running process: crashed or left, and may come
    /// back.
    pub(super) fn dormant_names(&self, lane: usize) -> Vec<String> {
        let running: BTreeSet<&String> = self
            .processes
            .iter()
            .filter(|p| p.lane == lane && p.is_running())
            .filter_map(|p| p.name.as_ref())
            .collect();
        let names: BTreeSet<&String> = self
            .processes
            .iter()
            .filter(|p| p.lane == lane)
            .filter_map(|p| p.name.as_ref())
            .filter(|n| !running.contains(n))
            .collect();
        names.into_iter().cloned().collect()
    }

    /// A new incarnation of static `name`, from its last process (same
    /// subscription mostly, local state kept mostly), joining now.
    pub(super) fn reincarnate(&mut self, lane: usize, name: String) -> Result<(), Violation> {
        let last = self
            .processes
            .iter()
            .rev()
            .find(|p| p.name.as_ref() == Some(&name))
            .expect("a dormant name had a process");
        let (topics, store) = (last.topics.clone(), last.store.clone());
        let topics = if self.rng.chance(0.85) {
            topics
        } else {
            self.draw_topics(lane)
        };
        let store = if self.rng.chance(0.7) {
            store
        } else {
            BTreeMap::new()
        };
        self.stats.restarts += 1;
        let pid = self.spawn(lane, Some(name), topics, store);
        self.beat(pid)
    }

    /// What each running process of a lane's group believes it owns.
    pub(super) fn beliefs(&self, lane: usize) -> Vec<Belief<'_>> {
        self.processes
            .iter()
            .filter(|p| p.lane == lane && p.is_running())
            .map(SimMember::belief)
            .collect()
    }
}
