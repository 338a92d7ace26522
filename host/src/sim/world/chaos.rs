//! The chaos phase: random events between the scheduled steps. In a group:
//! processes started, brought back, leaving, crashing, restarting (or a
//! second one started under a running one's name), stalling, slower or
//! faster to release, asking to drain or drained by the admin,
//! resubscribing, or (cluster mode) cut off from the network; config
//! changes. In the whole host: an extra tick, a host stall or restart, or
//! in cluster mode a node fault instead.

use std::collections::BTreeMap;

use super::routing::CutOff;
use super::{World, shard_seed};
use crate::protocol::core::Coordinator;
use crate::sim::Violation;
use crate::sim::member::Status;

/// In cluster mode, probability that a chaos-phase event is a node fault
/// (crash, pause, partition from the store, leave).
const NODE_FAULT_P: f64 = 0.02;

/// The processes of a group that a random event may pick.
struct Candidates {
    running: Vec<usize>,
    /// Running, with a member id.
    joined: Vec<usize>,
    /// Joined, with no heartbeat in flight (cluster mode: such a process
    /// sends nothing else, a leave, until it is answered or times out).
    joined_idle: Vec<usize>,
    /// Running, with a static name.
    statics: Vec<usize>,
    /// Static names with no running process.
    dormant: Vec<String>,
}

impl World {
    /// Random events until the schedule has taken its steps, each in a
    /// random group with its scenario's chance (else the next scheduled
    /// thing), or in cluster mode now and then a node fault. Some events
    /// send nothing; the bound keeps the loop finite.
    pub(super) fn chaos_phase(&mut self) -> Result<(), Violation> {
        let mut events = 0u64;
        while self.step < self.steps_max && events < 4 * self.steps_max {
            events += 1;
            if self.cluster.is_some() && self.rng.chance(NODE_FAULT_P) {
                self.node_chaos()?;
                continue;
            }
            let lane = self.rng.below(self.lanes.len() as u64) as usize;
            if self.rng.chance(self.lanes[lane].scenario.chaos_p) {
                self.chaos(lane)?;
            } else {
                self.advance()?;
            }
        }
        Ok(())
    }

    /// A random event in group `lane` (or, for a tick, a stall or a
    /// restart, in the whole host).
    fn chaos(&mut self, lane: usize) -> Result<(), Violation> {
        let candidates = self.candidates(lane);
        let weights = self.chaos_weights(lane, &candidates);
        let Candidates {
            running,
            joined,
            joined_idle,
            statics,
            dormant,
        } = &candidates;
        match self.rng.weighted(&weights) {
            0 => self.start_process(lane),
            1 => self.bring_back(lane, dormant),
            2 => self.leave(joined_idle),
            3 => self.crash(running),
            4 => self.restart_static(lane, statics),
            5 => self.stall_process(lane, running),
            6 => self.change_release(lane, running),
            7 => {
                let mut config = self.mutate_config(lane);
                self.maybe_toggle_freeze(lane, &mut config);
                self.configure(lane, config)
            }
            8 => self.admin_drain(lane, joined),
            9 => self.ask_drain(joined),
            10 => self.resubscribe(lane, joined),
            11 => self.tick(),
            // In a cluster, the host's restart and stall are the nodes'
            // faults.
            12 | 13 if self.cluster.is_some() => self.node_chaos(),
            14 => self.cut_network(lane, joined),
            13 => self.restart_host(),
            _ => self.stall_host(lane),
        }
    }

    /// Group `lane`'s processes, by what an event may do to them.
    fn candidates(&self, lane: usize) -> Candidates {
        let running: Vec<usize> = self
            .processes
            .iter()
            .filter(|p| p.lane == lane && p.status == Status::Running)
            .map(|p| p.pid)
            .collect();
        let joined: Vec<usize> = running
            .iter()
            .copied()
            .filter(|&pid| !self.processes[pid].member_id().is_empty())
            .collect();
        let joined_idle: Vec<usize> = joined
            .iter()
            .copied()
            .filter(|&pid| self.processes[pid].in_flight_until_ms.is_none())
            .collect();
        let statics: Vec<usize> = running
            .iter()
            .copied()
            .filter(|&pid| self.processes[pid].name.is_some())
            .collect();
        Candidates {
            running,
            joined,
            joined_idle,
            statics,
            dormant: self.dormant_names(lane),
        }
    }

    /// The weight of each event of [`Self::chaos`], in its order: none for
    /// an event without a process to pick.
    fn chaos_weights(&self, lane: usize, candidates: &Candidates) -> [u64; 15] {
        let Candidates {
            running,
            joined,
            joined_idle,
            statics,
            dormant,
        } = candidates;
        let any = |v: &[usize], w: u64| if v.is_empty() { 0 } else { w };
        [
            if running.len() < self.lanes[lane].scenario.members_max {
                10
            } else {
                0
            },
            if dormant.is_empty() { 0 } else { 6 },
            any(joined_idle, 4),
            any(running, 4),
            any(statics, 6),
            any(running, 3),
            any(running, 2),
            3,
            any(joined, 2),
            any(joined, 2),
            any(joined, 2),
            2,
            2,
            1,
            if self.cluster.is_some() {
                any(joined, 2)
            } else {
                0
            },
        ]
    }

    /// A new process of group `lane` starts and joins.
    fn start_process(&mut self, lane: usize) -> Result<(), Violation> {
        let name = self.draw_name(lane);
        let topics = self.draw_topics(lane);
        let pid = self.spawn(lane, name, topics, BTreeMap::new());
        self.beat(pid)
    }

    /// A static name with no running process comes back.
    fn bring_back(&mut self, lane: usize, dormant: &[String]) -> Result<(), Violation> {
        let name = self.rng.pick(dormant).clone();
        self.note(|_| format!("{name} comes back"));
        self.reincarnate(lane, name)
    }

    /// A joined process leaves the group.
    fn leave(&mut self, joined_idle: &[usize]) -> Result<(), Violation> {
        let pid = *self.rng.pick(joined_idle);
        let now = self.now;
        self.processes[pid].leave(now);
        self.beat(pid)
    }

    /// A running process crashes.
    fn crash(&mut self, running: &[usize]) -> Result<(), Violation> {
        let pid = *self.rng.pick(running);
        self.note(|w| format!("{} crashes", w.processes[pid].label()));
        self.processes[pid].stop(Status::Crashed);
        Ok(())
    }

    /// A static member restarts before the host noticed: the old
    /// incarnation is still live in the group. Or a second process starts
    /// with the name while the first keeps running (a duplicate deploy, a
    /// pod that did not die): two live processes with one name, until the
    /// first hears it was replaced.
    fn restart_static(&mut self, lane: usize, statics: &[usize]) -> Result<(), Violation> {
        let pid = *self.rng.pick(statics);
        if self.rng.chance(0.3) {
            self.note(|w| format!("a second process starts as {}", w.processes[pid].label()));
            self.stats.duplicates += 1;
        } else {
            self.note(|w| format!("{} restarts", w.processes[pid].label()));
            self.processes[pid].stop(Status::Crashed);
        }
        let name = self.processes[pid].name.clone().expect("static");
        self.reincarnate(lane, name)
    }

    /// A running process stalls for up to three session timeouts.
    fn stall_process(&mut self, lane: usize, running: &[usize]) -> Result<(), Violation> {
        let pid = *self.rng.pick(running);
        let session = self.group(lane).config.session_timeout_ms;
        let interval = self.processes[pid].interval_ms;
        let until = self.now + self.rng.range(interval, 3 * session);
        self.note(|w| format!("{} stalls until {until}", w.processes[pid].label()));
        self.processes[pid].stall(until);
        Ok(())
    }

    /// A running process becomes slow to release revoked tasks, or fast.
    fn change_release(&mut self, lane: usize, running: &[usize]) -> Result<(), Violation> {
        let pid = *self.rng.pick(running);
        let slow = self.processes[pid].release_delay_ms.0 == 0;
        let delay = self.release_delay(lane, slow);
        self.note(|w| format!("{} releases in {delay:?} ms", w.processes[pid].label()));
        self.processes[pid].release_delay_ms = delay;
        Ok(())
    }

    /// A joined process asks to drain.
    fn ask_drain(&mut self, joined: &[usize]) -> Result<(), Violation> {
        let pid = *self.rng.pick(joined);
        self.note(|w| format!("{} asks to drain", w.processes[pid].label()));
        let now = self.now;
        self.processes[pid].ask_drain(now);
        Ok(())
    }

    /// A joined process changes its subscription (sent with its next
    /// heartbeat).
    fn resubscribe(&mut self, lane: usize, joined: &[usize]) -> Result<(), Violation> {
        let pid = *self.rng.pick(joined);
        let topics = self.draw_topics(lane);
        self.note(|w| format!("{} subscribes to {topics:?}", w.processes[pid].label()));
        self.processes[pid].pending_topics = Some(topics);
        Ok(())
    }

    /// Cluster mode: a joined process's network goes down for up to three
    /// times its slot's timeout: the host may remove it meanwhile, once
    /// the lease it honours ended.
    fn cut_network(&mut self, lane: usize, joined: &[usize]) -> Result<(), Violation> {
        let pid = *self.rng.pick(joined);
        let config = &self.group(lane).config;
        let timeout = if self.processes[pid].name.is_some() {
            config.registration_timeout_ms
        } else {
            config.session_timeout_ms
        };
        let interval = self.processes[pid].interval_ms;
        let until_ms = self.now + self.rng.range(interval, 3 * timeout);
        let in_flight = self.rng.chance(0.5);
        let flaps = self.rng.chance(0.5);
        self.note(|w| {
            format!(
                "{}'s network is down until {until_ms}{}{}",
                w.processes[pid].label(),
                if in_flight {
                    " (from its next heartbeat, whose answer is lost)"
                } else {
                    ""
                },
                if flaps {
                    " (the answer to its first heartbeat after is lost)"
                } else {
                    ""
                }
            )
        });
        if let Some(cluster) = &mut self.cluster {
            cluster.stats.cut_offs += 1;
        }
        self.cut_off.insert(
            pid,
            CutOff {
                until_ms,
                in_flight,
                flaps,
            },
        );
        Ok(())
    }

    /// The host restarts: its core is what the log replays to, its
    /// transient state and its assignor calls in flight are gone. Members
    /// keep running on the leases it gave them.
    fn restart_host(&mut self) -> Result<(), Violation> {
        self.note(|_| "the host restarts".to_owned());
        self.stats.host_restarts += 1;
        // Each shard is rebuilt from its own records only.
        for (number, shard) in self.shards.iter_mut().enumerate() {
            let mut core = Coordinator::new(shard_seed(self.seed, number));
            for record in &shard.log {
                core.apply(record);
            }
            core.restarted(self.now);
            shard.core = core;
        }
        self.calls.clear();
        self.check_state()
    }

    /// The host stalls (a GC-like pause, starved of CPU, its requests
    /// queued): nothing is served until the end.
    fn stall_host(&mut self, lane: usize) -> Result<(), Violation> {
        let session = self.group(lane).config.session_timeout_ms;
        let start = self.now;
        let end = start + self.rng.range(1, 2 * session);
        self.note(|_| format!("the host stalls until {end}"));
        self.stats.host_stalls += 1;
        self.stall = Some((start, end));
        Ok(())
    }
}
