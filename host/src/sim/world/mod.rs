//! One schedule: a sharded host (one coordinator per shard, each with its
//! own record log), a few groups drawn at random over more than one shard,
//! simulated member processes of each group and a queue of assignor calls,
//! all on a virtual clock driven by one seeded generator. Every input of a
//! group goes to its shard's core, a tick reaches every shard, and nothing
//! outside a shard refers to a group's state. A chaos phase of random
//! events is followed by a quiet phase; every input to a core is a step,
//! and the invariants are checked after each one, in every group.
//!
//! In cluster mode the world routes each heartbeat to a node and tells
//! its member what became of it: an answer; a refusal, a redirect without
//! end or a 503 (provably unreached), at once, as they come back in
//! reality; or, when a core handled it (or may have: a paused node, a
//! write not acknowledged) and its answer is lost, nothing until the
//! member's request timeout (drawn per process), the heartbeat in flight
//! meanwhile, the member on the lease [`SimMember::lease_end_ms`] bounds.
//! On one host a lost answer is still learnt at once.

use std::collections::{BTreeMap, BTreeSet};

use assignd_guest_sdk::{Assignment, GroupInput};

use super::check::{self, Belief, tasks_str};
use super::cluster::{Cluster, ClusterOptions, Loaded, NodeState};
use super::member::{Reach, SimMember, Status};
use super::rng::Rng;
use super::{Fault, Options, Report, Stats, Violation};
use crate::protocol::core::{
    AssignorCall, Coordinator, HeartbeatResponse, HostLoad, LEAVE_EPOCH, Output, ProtocolError,
};
use crate::protocol::group::{
    Group, GroupConfig, LearnerMode, Liveness, Millis, Record, RemovalReason, Slot, TopicConfig,
};
use crate::protocol::shard::shard_of;

/// The groups one schedule runs at most (at least two, on two shards, when
/// the host has more than one).
const GROUPS_MAX: u64 = 3;

/// The built-in assignors, answered natively.
pub const ASSIGNORS: [&str; 4] = ["range", "round-robin", "sticky", "learner-aware"];

/// Topic names a schedule draws from (at most this many at once).
const TOPIC_NAMES: [&str; 4] = ["t0", "t1", "t2", "t3"];

/// Probability that an assignor call fails on purpose (outside the quiet
/// phase): the group keeps its last target and retries.
const ASSIGNOR_FAILURE_P: f64 = 0.02;

/// Probability that a process's joins send the member id its machine chose
/// (KIP-848) rather than leaving it to the host.
const CHOSEN_ID_P: f64 = 0.75;

/// In cluster mode, probability that a chaos-phase event is a node fault
/// (crash, pause, partition from the store, leave).
const NODE_FAULT_P: f64 = 0.02;

/// In cluster mode, how long a process waits for an answer before it
/// gives a heartbeat up: drawn per process, `lo..=hi` ms. Often longer
/// than a group's expansion timeout and interval (at most 1,600 ms), so
/// that the flight bound of the unreached lease matters.
const REQUEST_TIMEOUT_MS: (u64, u64) = (200, 3_000);

/// Runs a built-in assignor through the SDK harness: input checked, called
/// natively, answer validated, as the host's sandbox would. The assignor of
/// the simulator and of the protocol core's tests.
pub fn assign_natively(assignor: &str, input: &GroupInput) -> Result<Assignment, String> {
    use assignd_guest_sdk::harness::run;
    match assignor {
        "range" => run::<assignor_range::Range>(input),
        "round-robin" => run::<assignor_round_robin::RoundRobin>(input),
        "sticky" => run::<assignor_sticky::Sticky>(input),
        "learner-aware" => run::<assignor_learner_aware::LearnerAware>(input),
        other => return Err(format!("no native assignor {other:?}")),
    }
    .map_err(|e| e.to_string())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Membership {
    Static,
    Dynamic,
    Mixed,
}

/// What a schedule draws besides the group config.
#[derive(Clone, Debug)]
struct Scenario {
    membership: Membership,
    members_max: usize,
    lost_response_p: f64,
    /// Probability that a step is a random event rather than the next
    /// heartbeat, answer or tick.
    chaos_p: f64,
    /// Probability that a new process is slow to release revoked tasks.
    slow_p: f64,
    racks: bool,
    /// How fast learners catch up, per process: one of these (lag per ms).
    catch_up_per_ms: [u64; 3],
}

fn draw_partitions(rng: &mut Rng) -> u32 {
    if rng.chance(0.5) {
        rng.range(1, 8) as u32
    } else {
        rng.range(1, 64) as u32
    }
}

fn draw(rng: &mut Rng) -> (GroupConfig, Scenario) {
    let topics = (0..rng.range(1, 3))
        .map(|i| TopicConfig {
            name: TOPIC_NAMES[i as usize].into(),
            partitions: draw_partitions(rng),
        })
        .collect();
    let heartbeat_interval_ms = rng.range(100, 300);
    let session_timeout_ms = heartbeat_interval_ms * rng.range(3, 6);
    let assignor = (*rng.pick(&ASSIGNORS)).to_owned();
    let mut params = BTreeMap::new();
    if assignor == "learner-aware" && rng.chance(0.3) {
        params.insert("num_standby".to_owned(), "1".to_owned());
    }
    let config = GroupConfig {
        topics,
        assignor,
        params,
        session_timeout_ms,
        registration_timeout_ms: rng.range(session_timeout_ms, 4_000),
        expansion_timeout_ms: rng.range(150, 600),
        heartbeat_interval_ms,
        learners: *rng.pick(&[
            LearnerMode::Host,
            LearnerMode::Host,
            LearnerMode::Assignor,
            LearnerMode::Off,
        ]),
        acceptable_recovery_lag: *rng.pick(&[0, 50, 1_000, 10_000]),
        max_learners: rng.range(1, 4) as u32,
        probing_interval_ms: rng.range(1_000, 3_000),
        scale_down_timeout_ms: rng.range(1_500, 5_000),
        ..GroupConfig::with_topics(Vec::new())
    };
    let scenario = Scenario {
        membership: *rng.pick(&[
            Membership::Static,
            Membership::Static,
            Membership::Dynamic,
            Membership::Mixed,
            Membership::Mixed,
        ]),
        members_max: rng.range(2, 10) as usize,
        lost_response_p: *rng.pick(&[0.0, 0.02, 0.05, 0.1]),
        chaos_p: *rng.pick(&[0.05, 0.1, 0.15]),
        slow_p: *rng.pick(&[0.0, 0.1, 0.3]),
        racks: rng.chance(0.3),
        catch_up_per_ms: [2, 20, 200],
    };
    (config, scenario)
}

/// The names of a schedule's groups: two to [`GROUPS_MAX`], the second on
/// another shard than the first when there is more than one (a third may
/// share a shard with either).
fn draw_group_names(rng: &mut Rng, shard_count: u32) -> Vec<String> {
    let count = rng.range(2, GROUPS_MAX) as usize;
    let mut names: Vec<String> = Vec::new();
    while names.len() < count {
        let name = format!("g{}", rng.below(10_000));
        let spans = names.len() != 1
            || shard_count == 1
            || shard_of(&name, shard_count) != shard_of(&names[0], shard_count);
        if spans && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

/// A pending answer to an assignor call of group `lane`.
struct PendingCall {
    due_ms: Millis,
    lane: usize,
    call: AssignorCall,
    /// In cluster mode, the load of the shard whose core asked (the answer
    /// goes back to it, or nowhere); 0 on one host.
    incarnation: u64,
}

/// What became of a member's heartbeat in cluster mode.
enum Routed {
    /// A node that serves the group's shard answered (its records, if
    /// any, are durable and absorbed; its calls queued), from the load
    /// `incarnation` of the shard.
    Answered {
        result: Result<(HeartbeatResponse, Output), ProtocolError>,
        incarnation: u64,
    },
    /// No answer came back (why, for the trace), and whether a core may
    /// have handled the heartbeat.
    Unanswered { why: String, reach: Reach },
}

/// One shard of the simulated host: its core and its own record log.
struct Shard {
    core: Coordinator,
    /// Fed only this shard's records, one by one: the replay that must
    /// match.
    replica: Coordinator,
    log: Vec<Record>,
    /// The log's length at the last replica comparison.
    log_compared: usize,
}

impl Shard {
    fn new(seed: u64) -> Self {
        Shard {
            core: Coordinator::new(seed),
            replica: Coordinator::new(seed),
            log: Vec::new(),
            log_compared: 0,
        }
    }
}

/// One group of the schedule and what it drew.
struct Lane {
    name: String,
    /// `shard_of(name)`: the only core its inputs go to.
    shard: usize,
    scenario: Scenario,
    /// The drawn config, until the schedule configures the group with it.
    initial: Option<GroupConfig>,
}

/// The seed of shard `shard`'s core (the member ids it issues).
fn shard_seed(seed: u64, shard: usize) -> u64 {
    seed ^ ((shard as u64) << 48)
}

pub struct World {
    seed: u64,
    rng: Rng,
    lanes: Vec<Lane>,
    steps_max: u64,
    fault: Option<Fault>,
    shards: Vec<Shard>,
    now: Millis,
    step: u64,
    processes: Vec<SimMember>,
    calls: Vec<PendingCall>,
    next_tick_ms: Millis,
    names_issued: u32,
    /// The host's last stall, `(start, end)`: nothing is served inside it;
    /// what was due is served at its end, and the host then reports itself
    /// late (as the runtime measures it: the stall's length, falling by
    /// half the time since its end).
    stall: Option<(Millis, Millis)>,
    quiet: bool,
    stats: Stats,
    trace: Option<Vec<String>>,
    trace_inputs: bool,
    /// Cluster mode: the nodes that serve the shards and their store.
    /// The shards' `core`s are then unused: each group's state is its
    /// owner's core, or what its shard's log replays to.
    cluster: Option<Cluster>,
    /// Cluster mode: the node each process sends its heartbeats to.
    node_hints: BTreeMap<usize, usize>,
    /// Cluster mode: the highest group epoch each group has had.
    epochs_seen: Vec<u64>,
    /// Cluster mode: the load of its shard that answered each process last
    /// (another one answering it next is a takeover, or a reload).
    answered_by: BTreeMap<usize, u64>,
    /// Cluster mode: processes whose network is down, until when.
    cut_off: BTreeMap<usize, CutOff>,
}

/// Cluster mode: a process's network is down (its interface, an egress
/// rule that rejects): every heartbeat it sends until `until_ms` fails
/// before it leaves, provably unreached, while the nodes serve on.
#[derive(Clone, Copy, Debug)]
struct CutOff {
    until_ms: Millis,
    /// It went down with a heartbeat in flight: that one reaches its node
    /// and its answer is lost.
    in_flight: bool,
    /// It flaps: the first heartbeat once it is back up reaches its node
    /// and its answer is lost (sent on the unreached lease, perhaps told a
    /// revocation the host decided meanwhile).
    flaps: bool,
}

impl World {
    pub fn new(seed: u64, options: &Options) -> Self {
        World::with_cluster(seed, options, None)
    }

    /// A schedule whose shards are served by a cluster of nodes over a
    /// modelled lease store (`cluster`), or by one host (`None`).
    pub fn with_cluster(seed: u64, options: &Options, cluster: Option<&ClusterOptions>) -> Self {
        let mut rng = Rng::new(seed);
        let shard_count = options.shards;
        let names = draw_group_names(&mut rng, shard_count);
        let lanes = names
            .into_iter()
            .map(|name| {
                let (config, scenario) = draw(&mut rng);
                Lane {
                    shard: shard_of(&name, shard_count) as usize,
                    name,
                    scenario,
                    initial: Some(config),
                }
            })
            .collect::<Vec<Lane>>();
        let lane_count = lanes.len();
        let cluster = cluster.map(|cluster| {
            let seeds = (0..shard_count as usize)
                .map(|shard| shard_seed(seed, shard))
                .collect();
            Cluster::new(&mut rng, cluster, seeds, options.trace)
        });
        World {
            seed,
            rng,
            lanes,
            steps_max: options.steps,
            fault: options.fault,
            shards: (0..shard_count as usize)
                .map(|shard| Shard::new(shard_seed(seed, shard)))
                .collect(),
            now: 0,
            step: 0,
            processes: Vec::new(),
            calls: Vec::new(),
            next_tick_ms: 0,
            names_issued: 0,
            stall: None,
            quiet: false,
            stats: Stats::default(),
            trace: options.trace.then(Vec::new),
            trace_inputs: options.trace_inputs,
            cluster,
            node_hints: BTreeMap::new(),
            epochs_seen: vec![0; lane_count],
            answered_by: BTreeMap::new(),
            cut_off: BTreeMap::new(),
        }
    }

    /// Runs the schedule: config, chaos, quiet, final checks.
    pub fn run(&mut self) -> Result<(), Violation> {
        if let Some(cluster) = &mut self.cluster {
            let line = cluster.describe();
            let loaded = cluster.boot(self.now);
            self.note(|_| line);
            self.check_loaded(&loaded)?;
        }
        for lane in 0..self.lanes.len() {
            let config = self.lanes[lane].initial.take().expect("run once");
            self.note(|w| {
                let Lane {
                    name,
                    shard,
                    scenario,
                    ..
                } = &w.lanes[lane];
                format!(
                    "group {name} on shard {shard}: scenario {:?} members<={} lost={} chaos={} slow={} racks={}",
                    scenario.membership,
                    scenario.members_max,
                    scenario.lost_response_p,
                    scenario.chaos_p,
                    scenario.slow_p,
                    scenario.racks
                )
            });
            self.configure(lane, config)?;
            for _ in 0..self
                .rng
                .range(1, self.lanes[lane].scenario.members_max as u64)
            {
                let name = self.draw_name(lane);
                let topics = self.draw_topics(lane);
                let pid = self.spawn(lane, name, topics, BTreeMap::new());
                self.processes[pid].next_beat_ms = self.rng.range(0, 200);
            }
        }
        if let Some(cluster) = &mut self.cluster {
            cluster.calm = false;
        }
        // Chaos. Some events send nothing; the bound keeps the loop finite.
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
        self.quiet_phase()?;
        // Each shard's whole log, replayed into a fresh coordinator.
        for (number, shard) in self.shards.iter().enumerate() {
            if let Some(cluster) = &self.cluster {
                let durable = cluster
                    .durable_records(number)
                    .map_err(|e| self.violation(e))?;
                if durable != shard.log {
                    return Err(self.violation(format!(
                        "invariant 6: shard {number}'s log in the store ({} records) is not the log that landed ({} records)",
                        durable.len(),
                        shard.log.len()
                    )));
                }
            }
            let mut fresh = Coordinator::new(shard_seed(self.seed, number));
            for record in &shard.log {
                fresh.apply(record);
            }
            if !fresh.groups().eq(self.core(number).groups()) {
                return Err(self.violation(format!(
                    "replaying shard {number}'s whole log gives different groups"
                )));
            }
        }
        Ok(())
    }

    pub fn into_report(mut self, result: Result<(), Violation>) -> Report {
        let mut stats = std::mem::take(&mut self.stats);
        stats.schedules = 1;
        stats.steps = self.step;
        stats.shard_records = self.shards.iter().map(|s| s.log.len() as u64).collect();
        stats.shard_groups = self.shards.iter().map(|_| 0).collect();
        for lane in &self.lanes {
            stats.shard_groups[lane.shard] += 1;
        }
        let shards_spanned = stats.shard_groups.iter().filter(|&&g| g > 0).count();
        stats.multi_shard_schedules = u64::from(shards_spanned > 1);
        if let Some(cluster) = &self.cluster {
            stats.cluster = cluster.stats.clone();
        }
        let mut hash = Fnv::default();
        for shard in 0..self.shards.len() {
            for group in self.core(shard).groups() {
                hash.write(format!("{group:?}").as_bytes());
            }
        }
        hash.write(format!("{stats:?}").as_bytes());
        Report {
            seed: self.seed,
            stats,
            violation: result.err(),
            trace: self.trace.unwrap_or_default(),
            fingerprint: hash.0,
        }
    }

    /// The step and time reached, for a panic's report.
    pub fn position(&self) -> (u64, Millis) {
        (self.step, self.now)
    }

    fn violation(&self, description: String) -> Violation {
        Violation {
            seed: self.seed,
            step: self.step,
            now: self.now,
            description,
        }
    }

    /// Adds a line to the trace, if one is kept (`line` sees the world).
    fn note(&mut self, line: impl FnOnce(&Self) -> String) {
        if self.trace.is_some() {
            self.flush_cluster_notes();
            let line = format!("#{} t={} {}", self.step, self.now, line(self));
            if let Some(trace) = &mut self.trace {
                trace.push(line);
            }
        }
    }

    /// Group `lane`, as its shard's core holds it.
    fn group(&self, lane: usize) -> &Group {
        let Lane { name, shard, .. } = &self.lanes[lane];
        self.core(*shard).group(name).expect("configured first")
    }

    /// Shard `shard`'s core: on one host, the host's; in a cluster, the
    /// core of the node whose claim of it holds, or while nobody's does,
    /// what its log replays to.
    fn core(&self, shard: usize) -> &Coordinator {
        let Some(cluster) = &self.cluster else {
            return &self.shards[shard].core;
        };
        match cluster.owner(shard, self.now) {
            Some(node) => &cluster.nodes[node].served[&shard].core,
            None => &self.shards[shard].replica,
        }
    }

    /// The lane of group `name`.
    fn lane_named(&self, name: &str) -> usize {
        self.lanes
            .iter()
            .position(|lane| lane.name == name)
            .expect("a group of the schedule")
    }

    fn configured_topics(&self, lane: usize) -> BTreeSet<String> {
        self.group(lane)
            .config
            .topics
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }

    fn draw_name(&mut self, lane: usize) -> Option<String> {
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

    fn draw_topics(&mut self, lane: usize) -> BTreeSet<String> {
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

    fn release_delay(&mut self, lane: usize, slow: bool) -> (u64, u64) {
        let expansion = self.group(lane).config.expansion_timeout_ms;
        if slow {
            (expansion / 2, expansion * 2)
        } else {
            (0, expansion / 4)
        }
    }

    /// A new process of group `lane` (not joined yet; it joins on its
    /// first beat).
    fn spawn(
        &mut self,
        lane: usize,
        name: Option<String>,
        topics: BTreeSet<String>,
        store: BTreeMap<crate::protocol::group::TaskRef, super::member::Store>,
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
        let mut member = SimMember::new(pid, name, topics, self.now).with_placement(rack, capacity);
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

    /// Inside a host stall nothing is served: what is due waits for its
    /// end, in order.
    fn wait_out_stall(&mut self) {
        if let Some((_, end)) = self.stall {
            self.now = self.now.max(end);
        }
    }

    /// How late the host reports itself: after a stall of D, D falling by
    /// half the time since the stall ended (the runtime's `Lateness`).
    fn host_load(&self) -> HostLoad {
        let late_ms = self.stall.map_or(0, |(start, end)| {
            (end - start).saturating_sub(self.now.saturating_sub(end) / 2)
        });
        HostLoad { late_ms }
    }

    fn configure(&mut self, lane: usize, config: GroupConfig) -> Result<(), Violation> {
        self.step += 1;
        self.note(|w| {
            let topics: Vec<String> = config
                .topics
                .iter()
                .map(|t| format!("{}/{}", t.name, t.partitions))
                .collect();
            format!(
                "configure {} topics=[{}] assignor={} learners={:?} acceptable_lag={} max_learners={} hb={} session={} registration={} expansion={} scale_down={} probing={}",
                w.lanes[lane].name,
                topics.join(" "),
                config.assignor,
                config.learners,
                config.acceptable_recovery_lag,
                config.max_learners,
                config.heartbeat_interval_ms,
                config.session_timeout_ms,
                config.registration_timeout_ms,
                config.expansion_timeout_ms,
                config.scale_down_timeout_ms,
                config.probing_interval_ms
            )
        });
        let Lane { name, shard, .. } = &self.lanes[lane];
        let (name, shard, now) = (name.clone(), *shard, self.now);
        if self.cluster.is_some() {
            // An admin request: forwarded to the node that serves the
            // shard, if one does now.
            let Some(node) = self.serving_owner(shard) else {
                self.note(|_| format!("  no node serves shard {shard}: the config waits"));
                return self.check_state();
            };
            let served = self.cluster_served(node, shard);
            let out = served
                .core
                .configure(&name, config, now)
                .map_err(|e| self.violation(format!("a drawn config was refused: {e}")))?;
            if self.persist_output(node, shard, out)?.is_some() {
                self.stats.configs += 1;
            }
            return self.check_state();
        }
        let out = self.shards[shard]
            .core
            .configure(&name, config, now)
            .map_err(|e| self.violation(format!("a drawn config was refused: {e}")))?;
        self.stats.configs += 1;
        self.absorb(shard, out)?;
        self.check_state()
    }

    /// Cluster mode: the node whose claim of `shard` holds, if it serves
    /// the shard now (up, within its lease).
    fn serving_owner(&self, shard: usize) -> Option<usize> {
        let cluster = self.cluster.as_ref()?;
        cluster
            .owner(shard, self.now)
            .filter(|&node| cluster.serving(node, shard, self.now).is_some())
    }

    /// Cluster mode: the shard `node` serves now (which the caller knows).
    fn cluster_served(&mut self, node: usize, shard: usize) -> &mut super::cluster::Served {
        let now = self.now;
        self.cluster
            .as_mut()
            .and_then(|c| c.serving_mut(node, shard, now))
            .expect("a shard the node serves")
    }

    /// Cluster mode: persists `out`'s records as `node`'s next batch of
    /// `shard`'s log, absorbs them if they landed, and if the node heard
    /// so, queues its calls and returns the output (with its records), so
    /// that the caller may answer. Records before acknowledgement: what a
    /// node acknowledges is never lost.
    fn persist_output(
        &mut self,
        node: usize,
        shard: usize,
        out: Output,
    ) -> Result<Option<Output>, Violation> {
        let now = self.now;
        let cluster = self.cluster.as_mut().expect("cluster mode");
        let incarnation = cluster.nodes[node].served[&shard].incarnation;
        let persisted = if out.records.is_empty() {
            super::cluster::Persisted {
                landed: false,
                acked: true,
            }
        } else {
            cluster.persist(node, shard, &out.records, now)
        };
        if persisted.landed {
            // Checked against the liveness of the core that wrote them:
            // with its answer lost, the shard has no owner to ask.
            self.absorb_records(shard, out.records.clone(), Some(node))?;
        }
        if !persisted.acked {
            return Ok(None);
        }
        self.queue_calls(out.assignor_calls.clone(), incarnation);
        Ok(Some(out))
    }

    /// Keeps the records of shard `shard`'s output in its log (checking
    /// each against the state before it and applying it to the shard's
    /// replica) and queues the assignor calls.
    fn absorb(&mut self, shard: usize, out: Output) -> Result<(), Violation> {
        self.absorb_records(shard, out.records, None)?;
        self.queue_calls(out.assignor_calls, 0);
        Ok(())
    }

    /// The records half of [`Self::absorb`]; in cluster mode, `writer` is
    /// the node whose core made them.
    fn absorb_records(
        &mut self,
        shard: usize,
        records: Vec<Record>,
        writer: Option<usize>,
    ) -> Result<(), Violation> {
        for record in records {
            assert_eq!(
                self.lanes[self.lane_named(record.group())].shard,
                shard,
                "a record of another shard's group"
            );
            if self.cluster.is_some()
                && let Err(e) = self.shards[shard].replica.check_replay(&record)
            {
                // A node wrote from a state that is not the last durable
                // one: what a takeover replays no longer fits together.
                return Err(self.violation(format!(
                    "invariant 8: a record written to shard {shard}'s log does not follow from its last durable state: {e}"
                )));
            }
            self.check_record(shard, &record, writer)?;
            self.shards[shard].replica.apply(&record);
            self.note(|_| format!("  {}", describe(&record)));
            self.shards[shard].log.push(record);
        }
        Ok(())
    }

    /// The calls half of [`Self::absorb`]: each answered after a drawn
    /// delay, to the load `incarnation` of its shard (cluster mode).
    fn queue_calls(&mut self, calls: Vec<AssignorCall>, incarnation: u64) {
        for call in calls {
            let lane = self.lane_named(&call.group);
            let expansion = self.group(lane).config.expansion_timeout_ms;
            let delay = if self.quiet {
                self.rng.range(0, 20)
            } else {
                match self.rng.weighted(&[70, 25, 5]) {
                    0 => self.rng.range(0, 50),
                    1 => self.rng.range(0, 2 * expansion),
                    _ => self.rng.range(2 * expansion, 5 * expansion),
                }
            };
            self.note(|w| {
                let input = if w.trace_inputs {
                    format!(
                        " input: {}",
                        assignd_guest_sdk::json::input_to_json(&call.input)
                    )
                } else {
                    String::new()
                };
                format!(
                    "  assignor call {} epoch {} answered in {delay} ms{input}",
                    call.group, call.epoch
                )
            });
            self.calls.push(PendingCall {
                due_ms: self.now + delay,
                lane,
                call,
                incarnation,
            });
        }
    }

    /// Invariants 4 and 5 at the record that could break them, against the
    /// state before it; and the statistics.
    fn check_record(
        &mut self,
        shard_index: usize,
        record: &Record,
        writer: Option<usize>,
    ) -> Result<(), Violation> {
        let shard = &self.shards[shard_index];
        let Some(before) = shard.replica.group(record.group()) else {
            return Ok(());
        };
        match record {
            Record::TargetInstalled { target, .. } => {
                self.stats.targets += 1;
                for (slot, t) in target.iter() {
                    if let Some(previous) = before.target.get(slot) {
                        self.stats.learners_promoted +=
                            previous.learner.intersection(&t.active).count() as u64;
                    }
                }
                let empty = Liveness::default();
                let core = match (&self.cluster, writer) {
                    (Some(cluster), Some(node)) => &cluster.nodes[node].served[&shard_index].core,
                    _ => self.core(shard_index),
                };
                let liveness = core.liveness(record.group()).unwrap_or(&empty);
                check::check_installed(before, liveness, target, self.now)
                    .map_err(|e| self.violation(e))?;
            }
            Record::MemberReconciled {
                slot, assignment, ..
            } => {
                check::check_reconciled(before, slot, assignment).map_err(|e| self.violation(e))?;
            }
            Record::MemberDraining { .. } => self.stats.drains += 1,
            Record::MemberRemoved { reason, .. } => match reason {
                RemovalReason::Fenced => self.stats.fenced += 1,
                RemovalReason::Expired => self.stats.expired += 1,
                RemovalReason::DrainTimedOut => self.stats.drain_timeouts += 1,
                RemovalReason::Left => {}
            },
            _ => {}
        }
        Ok(())
    }

    /// Invariant 1 at the processes after every step (among the ones the
    /// host knows, and among all whose leases have not passed); invariant 1
    /// in the host and replay after every step that emitted records. (A step
    /// without records must leave the group as it was; a change made
    /// without a record would show at the next comparison, or in the final
    /// replay of the whole log.) Every group of every shard, each against
    /// its own shard's replica.
    fn check_state(&mut self) -> Result<(), Violation> {
        for lane in 0..self.lanes.len() {
            self.check_group(lane)?;
        }
        self.compared();
        self.check_cluster()
    }

    /// [`Self::check_state`] after a step that changed nothing outside
    /// group `touched` but what its records show: the groups of the shards
    /// that appended records, and `touched` (whose processes may have
    /// changed their beliefs). A group whose state and processes did not
    /// change still passes (a lease only ends with time).
    fn check_step(&mut self, touched: Option<usize>) -> Result<(), Violation> {
        for lane in 0..self.lanes.len() {
            let shard = &self.shards[self.lanes[lane].shard];
            if touched == Some(lane) || shard.log.len() != shard.log_compared {
                self.check_group(lane)?;
            }
        }
        self.compared();
        self.check_cluster()
    }

    /// Cluster mode, after every step: the cluster's own checks (fencing,
    /// nothing durable lost), and no group's epoch goes back across
    /// takeovers (invariant 6).
    fn check_cluster(&mut self) -> Result<(), Violation> {
        let Some(cluster) = &mut self.cluster else {
            return Ok(());
        };
        let checked = cluster.check();
        if let Err(e) = checked {
            return Err(self.violation(e));
        }
        for lane in 0..self.lanes.len() {
            let Lane { name, shard, .. } = &self.lanes[lane];
            let Some(epoch) = self.core(*shard).group(name).map(|g| g.group_epoch) else {
                continue;
            };
            if epoch < self.epochs_seen[lane] {
                return Err(self.violation(format!(
                    "invariant 6: group {name}'s epoch went back from {} to {epoch}",
                    self.epochs_seen[lane]
                )));
            }
            self.epochs_seen[lane] = epoch;
        }
        self.flush_cluster_notes();
        Ok(())
    }

    /// Cluster mode: the cluster's trace lines, into the trace.
    fn flush_cluster_notes(&mut self) {
        let Some(cluster) = &mut self.cluster else {
            return;
        };
        let notes = cluster.take_notes();
        if let Some(trace) = &mut self.trace {
            for line in notes {
                trace.push(format!("#{} t={}   {line}", self.step, self.now));
            }
        }
    }

    /// Invariant 8 at each load: the node that takes a shard over recovers
    /// exactly the last durable state (what the records that landed replay
    /// to).
    fn check_loaded(&mut self, loaded: &[Loaded]) -> Result<(), Violation> {
        let cluster = self.cluster.as_ref().expect("cluster mode");
        for Loaded {
            node,
            shard,
            previous,
        } in loaded
        {
            let core = &cluster.nodes[*node].served[shard].core;
            if !core.groups().eq(self.shards[*shard].replica.groups()) {
                let from = previous.map_or("nobody".to_owned(), |p| format!("n{p}"));
                return Err(self.violation(format!(
                    "invariant 8: n{node} took shard {shard} over from {from}, but its groups are not the last durable state"
                )));
            }
        }
        Ok(())
    }

    /// Cluster mode: what node `node` has due now (a renewal, a round, a
    /// resume, a restart).
    fn node_event(&mut self, node: usize) -> Result<(), Violation> {
        self.step += 1;
        let now = self.now;
        let loaded = self
            .cluster
            .as_mut()
            .expect("cluster mode")
            .on_event(node, now);
        self.check_loaded(&loaded)?;
        self.check_state()
    }

    /// Cluster mode: a random fault of a node.
    fn node_chaos(&mut self) -> Result<(), Violation> {
        let now = self.now;
        self.cluster.as_mut().expect("cluster mode").chaos(now);
        self.check_state()
    }

    fn compared(&mut self) {
        for shard in &mut self.shards {
            shard.log_compared = shard.log.len();
        }
    }

    fn check_group(&self, lane: usize) -> Result<(), Violation> {
        let Lane { name, shard, .. } = &self.lanes[lane];
        let core = self.core(*shard);
        let shard = &self.shards[*shard];
        let Some(group) = core.group(name) else {
            // Not configured yet.
            return Ok(());
        };
        let changed = shard.log.len() != shard.log_compared;
        if changed {
            check::check_holdings(group)
                .map_err(|e| self.violation(format!("{e} (group {name})")))?;
        }
        let beliefs = self.beliefs(lane);
        check::check_beliefs(group, &beliefs)
            .map_err(|e| self.violation(format!("{e} (group {name})")))?;
        check::check_leased_beliefs(&beliefs, self.now)
            .map_err(|e| self.violation(format!("{e} (group {name})")))?;
        if changed && shard.replica.group(name) != Some(group) {
            return Err(self.violation(format!(
                "replaying the records gives a different group {name}: {}",
                first_difference(shard.replica.group(name), group)
            )));
        }
        Ok(())
    }

    /// The next scheduled thing: an assignor answer, a heartbeat, or a tick
    /// (in that order on a tie).
    fn advance(&mut self) -> Result<(), Violation> {
        let call = self
            .calls
            .iter()
            .enumerate()
            .min_by_key(|(i, c)| (c.due_ms, *i))
            .map(|(i, c)| (c.due_ms, i));
        let beat = self
            .processes
            .iter()
            .filter(|p| p.is_running())
            .min_by_key(|p| (p.next_beat_ms, p.pid))
            .map(|p| (p.next_beat_ms, p.pid));
        let tick = self.next_tick_ms;
        self.wait_out_stall();
        // A node's own event goes first on a tie: an answer due to a paused
        // node waits for its resume, which must come first.
        if let Some((due, node)) = self.cluster.as_ref().and_then(Cluster::next_event)
            && due <= tick
            && call.is_none_or(|(c, _)| due <= c)
            && beat.is_none_or(|(b, _)| due <= b)
        {
            self.now = self.now.max(due);
            return self.node_event(node);
        }
        match (call, beat) {
            (Some((due, i)), _) if due <= tick && beat.is_none_or(|(b, _)| due <= b) => {
                self.now = self.now.max(due);
                self.deliver(i)
            }
            (_, Some((due, pid))) if due <= tick => {
                self.now = self.now.max(due);
                self.beat(pid)
            }
            _ => {
                self.now = self.now.max(tick);
                self.tick()
            }
        }
    }

    fn tick(&mut self) -> Result<(), Violation> {
        self.wait_out_stall();
        self.step += 1;
        self.note(|_| "tick".into());
        let load = self.host_load();
        if self.cluster.is_some() {
            // Each node ticks the shards it serves.
            let now = self.now;
            for node in 0..self.cluster.as_ref().map_or(0, |c| c.nodes.len()) {
                let shards: Vec<usize> = self.cluster.as_ref().map_or(Vec::new(), |c| {
                    c.nodes[node]
                        .served
                        .keys()
                        .copied()
                        .filter(|&shard| c.serving(node, shard, now).is_some())
                        .collect()
                });
                for shard in shards {
                    let core = &mut self.cluster_served(node, shard).core;
                    let out = tick_checked(core, now, load).map_err(|e| self.violation(e))?;
                    self.persist_output(node, shard, out)?;
                }
            }
        }
        let host_shards = if self.cluster.is_none() {
            self.shards.len()
        } else {
            0
        };
        for shard in 0..host_shards {
            let out = tick_checked(&mut self.shards[shard].core, self.now, load)
                .map_err(|e| self.violation(e))?;
            self.absorb(shard, out)?;
        }
        let interval = (0..self.lanes.len())
            .map(|lane| self.group(lane).config.heartbeat_interval_ms)
            .min()
            .expect("a schedule has groups");
        self.next_tick_ms = self.now + self.rng.range(interval / 3, interval);
        self.check_step(None)
    }

    fn deliver(&mut self, index: usize) -> Result<(), Violation> {
        let PendingCall {
            call,
            lane,
            incarnation,
            ..
        } = self.calls.remove(index);
        let shard = self.lanes[lane].shard;
        // Cluster mode: the answer goes to the load that asked, if its
        // node still has it; a paused node takes it when it resumes.
        let mut node = None;
        if let Some(cluster) = &self.cluster {
            let Some(at) = cluster.node_of(shard, incarnation) else {
                self.note(|_| {
                    format!(
                        "answer {} epoch {}: its core is gone",
                        call.group, call.epoch
                    )
                });
                return Ok(());
            };
            if let NodeState::Paused { until_ms } = cluster.nodes[at].state {
                self.calls.push(PendingCall {
                    due_ms: until_ms,
                    lane,
                    call,
                    incarnation,
                });
                return Ok(());
            }
            if cluster.serving(at, shard, self.now).is_none() {
                self.note(|_| {
                    format!(
                        "answer {} epoch {}: n{at} no longer serves it",
                        call.group, call.epoch
                    )
                });
                return Ok(());
            }
            node = Some(at);
        }
        self.step += 1;
        if call.epoch != self.group(lane).group_epoch {
            self.stats.stale_answers += 1;
        }
        let injected = !self.quiet && self.rng.chance(ASSIGNOR_FAILURE_P);
        let answer = if injected {
            self.stats.assignor_failures += 1;
            Err("simulated guest failure".to_owned())
        } else {
            assign_natively(&call.assignor, &call.input)
        };
        if let (Err(error), false) = (&answer, injected) {
            return Err(self.violation(format!(
                "assignor {} refused the core's input for epoch {}: {error}",
                call.assignor, call.epoch
            )));
        }
        self.note(|w| {
            format!(
                "answer {} epoch {} (group epoch {}){}: {}",
                call.group,
                call.epoch,
                w.group(lane).group_epoch,
                if injected { " FAILED (injected)" } else { "" },
                answer
                    .as_ref()
                    .map(|a| describe_answer(&call.input, a))
                    .unwrap_or_default()
            )
        });
        let now = self.now;
        if let Some(node) = node {
            let core = &mut self.cluster_served(node, shard).core;
            let out = core.assignment_computed(&call.group, call.epoch, answer, now);
            self.persist_output(node, shard, out)?;
            return self.check_step(Some(lane));
        }
        let out = self.shards[shard]
            .core
            .assignment_computed(&call.group, call.epoch, answer, now);
        self.absorb(shard, out)?;
        self.check_step(Some(lane))
    }

    /// One heartbeat (join, heartbeat or leave) of process `pid`.
    fn beat(&mut self, pid: usize) -> Result<(), Violation> {
        self.wait_out_stall();
        let now = self.now;
        let lane = self.processes[pid].lane;
        let shard = self.lanes[lane].shard;
        let configured = self.configured_topics(lane);
        let process = &mut self.processes[pid];
        if !process.is_running() {
            // It left before it had joined.
            return Ok(());
        }
        if process.in_flight_until_ms.is_some() {
            return self.in_flight(pid);
        }
        let lease_over = (process.holds_tasks() && process.lease_passed(now)).then(|| {
            format!(
                "{}: lease ended at {:?}, stops processing active=[{}] revoking=[{}]",
                process.label(),
                process.lease_end_ms(),
                tasks_str(process.active()),
                tasks_str(process.revoking())
            )
        });
        // Cluster mode: it processes past its plain lease, on the
        // unreached lease (noted once an answer).
        let extension = (process.past_plain_lease(now) && !process.extended).then(|| {
            process.extended = true;
            format!(
                "{}: keeps processing active=[{}] past its lease ({:?}) while unreached, until {:?}",
                process.label(),
                tasks_str(process.active()),
                process.lease_until_ms,
                process.lease_end_ms()
            )
        });
        let joining = process.member_id().is_empty();
        let request = process.request(&self.lanes[lane].name, &configured, now);
        let label = process.label().to_owned();
        if let Some(line) = lease_over {
            self.stats.leases_lapsed += 1;
            self.note(|_| line);
        }
        if let Some(line) = extension {
            if let Some(cluster) = &mut self.cluster {
                cluster.stats.leases_extended += 1;
            }
            self.note(|_| line);
        }
        let Some(request) = request else {
            // Woken with nothing to send: it sleeps on.
            return Ok(());
        };
        let leaving = request.member_epoch == LEAVE_EPOCH;
        // Invariant 3 applies to a new incarnation of a static slot that
        // still exists, with the same subscription.
        let static_return = joining
            .then_some(())
            .and(request.member_name.as_ref())
            .and_then(|name| {
                let group = self.group(lane);
                let slot = Slot::named(name);
                let topics: Option<BTreeSet<String>> =
                    request.topics.as_ref().map(|t| t.iter().cloned().collect());
                (!group.dynamic_only
                    && group
                        .members
                        .get(&slot)
                        .is_some_and(|m| Some(&m.topics) == topics.as_ref()))
                .then(|| (slot, group.clone()))
            });
        self.step += 1;
        let load = self.host_load();
        let mut answered_by = None;
        // Cluster mode: a process whose network is down reaches nobody,
        // but a heartbeat in flight when it went down did, and so does the
        // first one after a flapping link is back (their answers lost).
        let mut answer_cut = false;
        let routed = match self.cut_off.get_mut(&pid) {
            Some(cut) if now < cut.until_ms && cut.in_flight => {
                cut.in_flight = false;
                answer_cut = true;
                None
            }
            Some(cut) if now < cut.until_ms => Some(Routed::Unanswered {
                why: "its network is down".into(),
                reach: Reach::Unreached,
            }),
            Some(cut) if cut.flaps => {
                self.cut_off.remove(&pid);
                answer_cut = true;
                None
            }
            _ => None,
        };
        let result = if self.cluster.is_some() {
            let routed = match routed {
                Some(routed) => routed,
                None => self.route_heartbeat(pid, shard, &request)?,
            };
            match routed {
                Routed::Answered {
                    result,
                    incarnation,
                } => {
                    answered_by = Some(incarnation);
                    result
                }
                Routed::Unanswered { why, reach } => {
                    self.note(|_| format!("{label} heartbeat unanswered ({reach:?}): {why}"));
                    if let Some(cluster) = &mut self.cluster {
                        cluster.stats.unanswered += 1;
                        if reach == Reach::Unreached {
                            cluster.stats.unreached += 1;
                        }
                    }
                    if reach == Reach::MaybeReached {
                        // It waits for its request timeout.
                        self.send_unanswered(pid);
                    } else {
                        self.unanswered(pid, reach);
                    }
                    return self.check_step(Some(lane));
                }
            }
        } else {
            self.shards[shard]
                .core
                .heartbeat_loaded(&request, now, load)
        };
        let lost =
            (!self.quiet && !leaving && self.rng.chance(self.lanes[lane].scenario.lost_response_p))
                || (answer_cut && !leaving);
        self.note(|_| {
            let kind = if leaving {
                "leave".to_owned()
            } else if joining {
                format!(
                    "join {:?} topics={:?}",
                    request.member_id,
                    request.topics.clone().unwrap_or_default()
                )
            } else {
                format!(
                    "beat {} e{} owned=[{}]{}{}",
                    request.member_id,
                    request.member_epoch,
                    tasks_str(request.owned.iter().flatten()),
                    if request.drain { " drain" } else { "" },
                    match &request.topics {
                        Some(t) => format!(" topics={t:?}"),
                        None => String::new(),
                    }
                )
            };
            let outcome = match &result {
                Ok((r, _)) => format!(
                    "{} e{} lease={}{} active=[{}] revoking=[{}] learner=[{}] standby=[{}]{}{}{}",
                    r.member_id,
                    r.member_epoch,
                    r.lease_ms,
                    if r.unreached_lease_ms == r.lease_ms {
                        String::new()
                    } else {
                        format!(" unreached={}", r.unreached_lease_ms)
                    },
                    tasks_str(&r.active),
                    tasks_str(&r.revoking),
                    tasks_str(&r.learner),
                    tasks_str(&r.standby),
                    if r.draining { " draining" } else { "" },
                    if r.drained { " drained" } else { "" },
                    if lost { " (response LOST)" } else { "" }
                ),
                Err(e) => format!("error {}: {e}", e.code()),
            };
            format!("{label} {kind} -> {outcome}")
        });
        match result {
            Ok((response, out)) => {
                if let Some((slot, before)) = &static_return {
                    check::check_static_return(
                        before,
                        self.group(lane),
                        slot,
                        &response,
                        &out.records,
                        request.owned.as_deref(),
                        request.lags.as_deref(),
                    )
                    .map_err(|e| self.violation(e))?;
                    self.stats.static_returns += 1;
                }
                if self.cluster.is_none() {
                    self.absorb(shard, out)?;
                }
                let initial_lag_max = 5 * self.group(lane).config.acceptable_recovery_lag + 2_000;
                if lost {
                    self.stats.lost_responses += 1;
                    if joining {
                        self.stats.lost_joins += 1;
                    }
                    if self.cluster.is_some() {
                        // It waits for its request timeout.
                        self.send_unanswered(pid);
                    } else {
                        self.unanswered(pid, Reach::MaybeReached);
                    }
                } else {
                    if let Some(incarnation) = answered_by {
                        self.answered_in_cluster(pid, incarnation, &response);
                    }
                    let process = &mut self.processes[pid];
                    let granted = !response.active.is_empty() || !response.revoking.is_empty();
                    let note = process.on_response(&response, initial_lag_max, now, &mut self.rng);
                    if granted && process.lease_passed(now) {
                        self.stats.leases_lapsed += 1;
                    }
                    if let Some(note) = note {
                        self.note(|_| format!("  {label}: {note}"));
                    }
                }
            }
            Err(error) => match error {
                // The machine rejoins, or stops (`replaced`, or a leave).
                _ if leaving => self.refused(pid, &error),
                ProtocolError::Fenced { .. }
                | ProtocolError::UnknownMember(..)
                | ProtocolError::StaleEpoch { .. }
                | ProtocolError::Replaced { .. } => self.refused(pid, &error),
                other => {
                    return Err(self.violation(format!(
                        "{label}: the host refused a request the client may send: {other} ({request:?})"
                    )));
                }
            },
        }
        self.check_step(Some(lane))
    }

    /// Process `pid`'s request was refused: it takes the refusal in.
    fn refused(&mut self, pid: usize, error: &ProtocolError) {
        let process = &mut self.processes[pid];
        if let Some(note) = process.on_refused(error, self.now, &mut self.rng) {
            let label = process.label().to_owned();
            self.note(|_| format!("  {label}: {note}"));
        }
    }

    /// Process `pid`'s heartbeat got no answer (`reach` says whether a core
    /// may have handled it): it learns so and schedules its next one.
    fn unanswered(&mut self, pid: usize, reach: Reach) {
        let now = self.now;
        let process = &mut self.processes[pid];
        let held = process.holds_tasks();
        let note = process.on_unanswered(reach, now, &mut self.rng);
        if held && !process.holds_tasks() {
            self.stats.leases_lapsed += 1;
        }
        if let Some(note) = note {
            let label = self.processes[pid].label().to_owned();
            self.note(|_| format!("  {label}: {note}"));
        }
    }

    /// Cluster mode: process `pid`'s heartbeat (a core handled it, or may
    /// have) lost its answer: it is in flight until the process's request
    /// timeout, on the lease [`SimMember::lease_end_ms`] bounds.
    fn send_unanswered(&mut self, pid: usize) {
        let now = self.now;
        let process = &mut self.processes[pid];
        let until = process.send_unanswered(now);
        let (on_unreached, binds) = (
            process.counts_on_unreached_lease(),
            process.flight_bound_binds(),
        );
        let line = format!(
            "  {}: in flight until {until}, lease until {:?}{}",
            process.label(),
            process.lease_end_ms(),
            if binds {
                format!(
                    " (the flight bound; unreached lease until {:?})",
                    process.unreached_lease_until()
                )
            } else {
                String::new()
            }
        );
        let stats = &mut self.cluster.as_mut().expect("cluster mode").stats;
        stats.in_flight += 1;
        stats.in_flight_unreached += u64::from(on_unreached);
        stats.flight_bound_binding += u64::from(binds);
        self.note(|_| line);
    }

    /// Cluster mode: process `pid` has a heartbeat in flight. At its
    /// request timeout it learns that the heartbeat may have reached a
    /// coordinator; before, its lease ended (it stops processing) or it
    /// acks a revoked task it has stopped.
    fn in_flight(&mut self, pid: usize) -> Result<(), Violation> {
        let now = self.now;
        let lane = self.processes[pid].lane;
        let process = &mut self.processes[pid];
        let until = process.in_flight_until_ms.expect("in flight");
        if now >= until {
            let label = process.label().to_owned();
            self.note(|_| format!("{label} heartbeat unanswered (MaybeReached): timed out"));
            if let Some(cluster) = &mut self.cluster {
                cluster.stats.unanswered += 1;
            }
            self.unanswered(pid, Reach::MaybeReached);
            return self.check_step(Some(lane));
        }
        let binds = process.flight_bound_binds();
        let line = format!(
            "{}: lease ended at {:?} with a heartbeat in flight until {until}, stops processing active=[{}] revoking=[{}]",
            process.label(),
            process.lease_end_ms(),
            tasks_str(process.active()),
            tasks_str(process.revoking())
        );
        if process.wake_in_flight(now) {
            self.stats.leases_lapsed += 1;
            if binds {
                let cluster = self.cluster.as_mut().expect("cluster mode");
                cluster.stats.flight_bound_stops += 1;
            }
            self.note(|_| line);
        }
        self.check_step(Some(lane))
    }

    /// Cluster mode: an answer from load `incarnation` of its shard reached
    /// process `pid` (before it takes it in). If the process was
    /// processing past its plain lease on the unreached lease and the
    /// answer keeps some of those tasks its, it kept them through; through
    /// a takeover if another load than the last one to answer it did.
    fn answered_in_cluster(&mut self, pid: usize, incarnation: u64, response: &HeartbeatResponse) {
        let now = self.now;
        let previous = self.answered_by.insert(pid, incarnation);
        let process = &self.processes[pid];
        if !process.past_plain_lease(now) {
            return;
        }
        let kept: Vec<_> = process
            .active()
            .iter()
            .filter(|t| response.active.contains(*t))
            .collect();
        if kept.is_empty() {
            return;
        }
        let taken_over = previous.is_some_and(|p| p != incarnation);
        let line = format!(
            "  {}: kept [{}] past its lease ({:?}) while unreached, and still has them{}",
            process.label(),
            tasks_str(kept),
            process.lease_until_ms,
            if taken_over {
                " from another load of the shard"
            } else {
                ""
            }
        );
        let cluster = self.cluster.as_mut().expect("cluster mode");
        cluster.stats.leases_extended_kept += 1;
        if taken_over {
            cluster.stats.kept_through_takeovers += 1;
        }
        self.note(|_| line);
    }

    /// Cluster mode: sends process `pid`'s heartbeat to the node it last
    /// reached; a node that does not serve the group's shard sends it on
    /// to the owner its directory names (the real 307), a node that does
    /// answers after its records are durable. Invariant 8 at every answer:
    /// only the node whose claim of the shard holds answers for it.
    fn route_heartbeat(
        &mut self,
        pid: usize,
        shard: usize,
        request: &crate::protocol::core::Heartbeat,
    ) -> Result<Routed, Violation> {
        let now = self.now;
        let load = self.host_load();
        let count = self.cluster.as_ref().expect("cluster mode").nodes.len();
        let mut node = *self.node_hints.entry(pid).or_insert(pid % count);
        for _hop in 0..3 {
            let cluster = self.cluster.as_mut().expect("cluster mode");
            match cluster.nodes[node].state {
                NodeState::Up => {}
                // Its process is gone: the connection is refused.
                NodeState::Down { .. } => {
                    self.node_hints.insert(pid, (node + 1) % count);
                    return Ok(Routed::Unanswered {
                        why: format!("n{node} is down (connection refused)"),
                        reach: Reach::Unreached,
                    });
                }
                // The request waits in its socket: it may be handled when
                // the node resumes.
                NodeState::Paused { .. } => {
                    self.node_hints.insert(pid, (node + 1) % count);
                    return Ok(Routed::Unanswered {
                        why: format!("n{node} does not answer (paused)"),
                        reach: Reach::MaybeReached,
                    });
                }
            }
            let Some(served) = cluster.serving_mut(node, shard, now) else {
                let directed = cluster.nodes[node]
                    .directed_to(shard)
                    .and_then(|owner| cluster.nodes.iter().position(|n| n.name == owner));
                let Some(owner) = directed else {
                    self.node_hints.insert(pid, (node + 1) % count);
                    return Ok(Routed::Unanswered {
                        why: format!(
                            "n{node} does not serve shard {shard} and knows no other owner (503 shard_unavailable)"
                        ),
                        reach: Reach::Unreached,
                    });
                };
                cluster.stats.redirects += 1;
                self.node_hints.insert(pid, owner);
                node = owner;
                continue;
            };
            let incarnation = served.incarnation;
            let result = served.core.heartbeat_loaded(request, now, load);
            let result = match result {
                Ok((response, out)) => match self.persist_output(node, shard, out)? {
                    Some(out) => Ok((response, out)),
                    None => {
                        // Handled by a core, its records perhaps durable.
                        return Ok(Routed::Unanswered {
                            why: format!("n{node}'s write of shard {shard} was not acknowledged"),
                            reach: Reach::MaybeReached,
                        });
                    }
                },
                Err(error) => Err(error),
            };
            if !self
                .cluster
                .as_ref()
                .expect("cluster mode")
                .claim_holds(node, shard, now)
            {
                return Err(self.violation(format!(
                    "invariant 8: n{node} answers for shard {shard}, whose claim it no longer holds"
                )));
            }
            return Ok(Routed::Answered {
                result,
                incarnation,
            });
        }
        // Every hop was a redirect: no core handled it.
        Ok(Routed::Unanswered {
            why: "redirected too often".into(),
            reach: Reach::Unreached,
        })
    }

    /// Static names with no running process: crashed or left, and may come
    /// back.
    fn dormant_names(&self, lane: usize) -> Vec<String> {
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
    fn reincarnate(&mut self, lane: usize, name: String) -> Result<(), Violation> {
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

    /// A random event in group `lane` (or, for a tick, a stall or a
    /// restart, in the whole host).
    fn chaos(&mut self, lane: usize) -> Result<(), Violation> {
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
        // Cluster mode: a process with a heartbeat in flight sends nothing
        // else (a leave) until it is answered or times out.
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
        let dormant = self.dormant_names(lane);
        let any = |v: &[usize], w: u64| if v.is_empty() { 0 } else { w };
        let weights = [
            if running.len() < self.lanes[lane].scenario.members_max {
                10
            } else {
                0
            },
            if dormant.is_empty() { 0 } else { 6 },
            any(&joined_idle, 4),
            any(&running, 4),
            any(&statics, 6),
            any(&running, 3),
            any(&running, 2),
            3,
            any(&joined, 2),
            any(&joined, 2),
            any(&joined, 2),
            2,
            2,
            1,
            if self.cluster.is_some() {
                any(&joined, 2)
            } else {
                0
            },
        ];
        match self.rng.weighted(&weights) {
            0 => {
                let name = self.draw_name(lane);
                let topics = self.draw_topics(lane);
                let pid = self.spawn(lane, name, topics, BTreeMap::new());
                self.beat(pid)
            }
            1 => {
                let name = self.rng.pick(&dormant).clone();
                self.note(|_| format!("{name} comes back"));
                self.reincarnate(lane, name)
            }
            2 => {
                let pid = *self.rng.pick(&joined_idle);
                let now = self.now;
                self.processes[pid].leave(now);
                self.beat(pid)
            }
            3 => {
                let pid = *self.rng.pick(&running);
                self.note(|w| format!("{} crashes", w.processes[pid].label()));
                self.processes[pid].stop(Status::Crashed);
                Ok(())
            }
            4 => {
                // Restarts before the host noticed: the old incarnation is
                // still live in the group. Or a second process starts
                // with the name while the first keeps running (a duplicate
                // deploy, a pod that did not die): two live processes with
                // one name, until the first hears it was replaced.
                let pid = *self.rng.pick(&statics);
                if self.rng.chance(0.3) {
                    self.note(|w| {
                        format!("a second process starts as {}", w.processes[pid].label())
                    });
                    self.stats.duplicates += 1;
                } else {
                    self.note(|w| format!("{} restarts", w.processes[pid].label()));
                    self.processes[pid].stop(Status::Crashed);
                }
                let name = self.processes[pid].name.clone().expect("static");
                self.reincarnate(lane, name)
            }
            5 => {
                let pid = *self.rng.pick(&running);
                let session = self.group(lane).config.session_timeout_ms;
                let interval = self.processes[pid].interval_ms;
                let until = self.now + self.rng.range(interval, 3 * session);
                self.note(|w| format!("{} stalls until {until}", w.processes[pid].label()));
                self.processes[pid].stall(until);
                Ok(())
            }
            6 => {
                let pid = *self.rng.pick(&running);
                let slow = self.processes[pid].release_delay_ms.0 == 0;
                let delay = self.release_delay(lane, slow);
                self.note(|w| format!("{} releases in {delay:?} ms", w.processes[pid].label()));
                self.processes[pid].release_delay_ms = delay;
                Ok(())
            }
            7 => {
                let config = self.mutate_config(lane);
                self.configure(lane, config)
            }
            8 => {
                let pid = *self.rng.pick(&joined);
                let process = &self.processes[pid];
                let by_name = process.name.is_some()
                    && !self.group(lane).dynamic_only
                    && self.rng.chance(0.5);
                let member = if by_name {
                    process.name.clone().expect("static")
                } else {
                    process.member_id().to_owned()
                };
                self.step += 1;
                let Lane { name, shard, .. } = &self.lanes[lane];
                let (name, shard, now) = (name.clone(), *shard, self.now);
                let node = self.serving_owner(shard);
                if self.cluster.is_some() && node.is_none() {
                    self.note(|_| format!("admin drains {member}: no node serves shard {shard}"));
                    return self.check_state();
                }
                let result = match node {
                    Some(node) => self
                        .cluster_served(node, shard)
                        .core
                        .drain(&name, &member, now),
                    None => self.shards[shard].core.drain(&name, &member, now),
                };
                self.note(|_| format!("admin drains {member}: {:?}", result.as_ref().err()));
                match result {
                    Ok(out) => match node {
                        Some(node) => {
                            self.persist_output(node, shard, out)?;
                        }
                        None => self.absorb(shard, out)?,
                    },
                    // A process may not know yet that it was removed.
                    Err(ProtocolError::UnknownMember(..)) => {}
                    Err(other) => {
                        return Err(self.violation(format!("drain {member}: {other}")));
                    }
                }
                self.check_state()
            }
            9 => {
                let pid = *self.rng.pick(&joined);
                self.note(|w| format!("{} asks to drain", w.processes[pid].label()));
                let now = self.now;
                self.processes[pid].ask_drain(now);
                Ok(())
            }
            10 => {
                let pid = *self.rng.pick(&joined);
                let topics = self.draw_topics(lane);
                self.note(|w| format!("{} subscribes to {topics:?}", w.processes[pid].label()));
                self.processes[pid].pending_topics = Some(topics);
                Ok(())
            }
            11 => self.tick(),
            // In a cluster, the host's restart and stall are the nodes'
            // faults.
            12 | 13 if self.cluster.is_some() => self.node_chaos(),
            14 => {
                // Up to three times its slot's timeout: the host may
                // remove it meanwhile, once the lease it honours ended.
                let pid = *self.rng.pick(&joined);
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
            13 => {
                // The host restarts: its core is what the log replays to,
                // its transient state and its assignor calls in flight are
                // gone. Members keep running on the leases it gave them.
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
            _ => {
                // The host stalls (a GC-like pause, starved of CPU, its
                // requests queued): nothing is served until the end.
                let session = self.group(lane).config.session_timeout_ms;
                let start = self.now;
                let end = start + self.rng.range(1, 2 * session);
                self.note(|_| format!("the host stalls until {end}"));
                self.stats.host_stalls += 1;
                self.stall = Some((start, end));
                Ok(())
            }
        }
    }

    /// A config change: partitions, topics added or removed, another
    /// assignor, other learner settings, other timeouts.
    fn mutate_config(&mut self, lane: usize) -> GroupConfig {
        let mut config = self.group(lane).config.clone();
        match self.rng.weighted(&[4, 2, 2, 1, 1, 3]) {
            0 => {
                let i = self.rng.below(config.topics.len() as u64) as usize;
                config.topics[i].partitions = draw_partitions(&mut self.rng);
            }
            1 if config.topics.len() < TOPIC_NAMES.len() => {
                let name = TOPIC_NAMES
                    .iter()
                    .find(|n| !config.topics.iter().any(|t| t.name == **n))
                    .expect("fewer topics than names");
                config.topics.push(TopicConfig {
                    name: (*name).into(),
                    partitions: draw_partitions(&mut self.rng),
                });
            }
            2 if config.topics.len() > 1 => {
                let i = self.rng.below(config.topics.len() as u64) as usize;
                config.topics.remove(i);
            }
            3 => config.assignor = (*self.rng.pick(&ASSIGNORS)).to_owned(),
            4 => {
                config.acceptable_recovery_lag = *self.rng.pick(&[0, 50, 1_000, 10_000]);
                config.max_learners = self.rng.range(1, 4) as u32;
                if self.rng.chance(0.3) {
                    config.learners = *self.rng.pick(&[
                        LearnerMode::Host,
                        LearnerMode::Assignor,
                        LearnerMode::Off,
                    ]);
                }
            }
            _ => self.mutate_timeouts(&mut config),
        }
        config
    }

    /// Raises or lowers some of the group's timeouts, each to a value the
    /// core accepts: wider than the first draw, so that a change can cut a
    /// lease given under the old values short (a session timeout below the
    /// expansion timeout, a registration timeout below the session timeout),
    /// which the core must not act on before the lease ends.
    fn mutate_timeouts(&mut self, config: &mut GroupConfig) {
        let rng = &mut self.rng;
        let mut changed = false;
        while !changed {
            // Each timeout, in this order, with its range.
            for (timeout, lo, hi) in [
                (&mut config.heartbeat_interval_ms, 50, 400),
                (&mut config.session_timeout_ms, 150, 2_500),
                (&mut config.registration_timeout_ms, 100, 5_000),
                (&mut config.expansion_timeout_ms, 50, 1_200),
                (&mut config.scale_down_timeout_ms, 200, 6_000),
            ] {
                if rng.chance(0.4) {
                    *timeout = rng.range(lo, hi);
                    changed = true;
                }
            }
        }
        // The core refuses a heartbeat interval at or above the session or
        // the registration timeout.
        let floor = config
            .session_timeout_ms
            .min(config.registration_timeout_ms);
        if config.heartbeat_interval_ms >= floor {
            config.heartbeat_interval_ms = floor / 3;
        }
    }

    /// No more churn: every process heartbeats on time and releases at
    /// once, learners catch up fast, answers come at once, nothing is lost.
    /// Runs until every group settles (then checks invariant 2 in each) or
    /// a generous bound passes (a liveness failure).
    fn quiet_phase(&mut self) -> Result<(), Violation> {
        self.quiet = true;
        self.note(|_| "quiet phase".into());
        let now = self.now;
        let mut takeover_ms = 0;
        if let Some(cluster) = &mut self.cluster {
            cluster.calm_down(now);
            takeover_ms = 4 * cluster.ttl_ms;
        }
        self.cut_off.clear();
        for process in self.processes.iter_mut().filter(|p| p.is_running()) {
            process.release_delay_ms = (0, 0);
            process.catch_up_per_ms = u64::MAX / 4;
            process.wake_by(now + process.interval_ms);
        }
        for call in &mut self.calls {
            call.due_ms = call.due_ms.min(now + 20);
        }
        let mut budget_ms = 0;
        for lane in 0..self.lanes.len() {
            let serving = self.processes.iter().any(|p| {
                p.lane == lane && p.status == Status::Running && !p.draining && !p.want_drain
            });
            if !serving {
                let name = self.draw_name(lane);
                let topics = self.configured_topics(lane);
                let pid = self.spawn(lane, name, topics, BTreeMap::new());
                self.processes[pid].release_delay_ms = (0, 0);
                self.processes[pid].catch_up_per_ms = u64::MAX / 4;
            }
            let config = &self.group(lane).config;
            let tasks = config.task_count();
            let lane_budget_ms = 3
                * (config.registration_timeout_ms
                    + config.scale_down_timeout_ms
                    + config.session_timeout_ms
                    + config.probing_interval_ms)
                + (tasks + 10) * (config.expansion_timeout_ms + 4 * config.heartbeat_interval_ms);
            budget_ms = budget_ms.max(lane_budget_ms + takeover_ms);
        }
        let deadline = self.now + budget_ms;
        let lanes = 0..self.lanes.len();
        loop {
            if lanes.clone().all(|lane| self.settled(lane, false)) {
                self.note(|_| "settled".into());
                return self.check_settled();
            }
            if self.now > deadline && lanes.clone().all(|lane| self.settled(lane, true)) {
                // Learners keep coming and going (an assignor whose plan
                // never converges): invariant 2 must hold all the same
                // whenever the group is stable.
                self.note(|_| "stable, but learners keep moving".into());
                self.stats.unsettled += 1;
                return self.check_settled();
            }
            if self.now > deadline + budget_ms {
                let unsettled: Vec<String> = lanes
                    .clone()
                    .filter(|&lane| !self.settled(lane, true))
                    .map(|lane| self.describe(lane))
                    .collect();
                return Err(self.violation(format!(
                    "invariant 2: not stable after {} ms without churn: {}",
                    2 * budget_ms,
                    unsettled.join("; ")
                )));
            }
            self.advance()?;
        }
    }

    /// What each running process of a lane's group believes it owns.
    fn beliefs(&self, lane: usize) -> Vec<Belief<'_>> {
        self.processes
            .iter()
            .filter(|p| p.lane == lane && p.is_running())
            .map(SimMember::belief)
            .collect()
    }

    /// Invariant 2 in every group.
    fn check_settled(&self) -> Result<(), Violation> {
        for lane in 0..self.lanes.len() {
            check::check_settled(self.group(lane), &self.beliefs(lane))
                .map_err(|e| self.violation(format!("{e} (group {})", self.lanes[lane].name)))?;
        }
        Ok(())
    }

    /// Whether nothing is left to happen in group `lane`: a stable group
    /// with no learners (unless `learners_allowed`), no call pending, every
    /// slot served by a running process that is up to date with the host.
    fn settled(&self, lane: usize, learners_allowed: bool) -> bool {
        let group = self.group(lane);
        if (self.cluster.is_some() && self.serving_owner(self.lanes[lane].shard).is_none())
            || group.group_epoch != group.target_epoch
            || self.calls.iter().any(|call| call.lane == lane)
            || !group.is_stable()
            || (!learners_allowed && group.learner_count() > 0)
        {
            return false;
        }
        let mut served = BTreeSet::new();
        for process in self
            .processes
            .iter()
            .filter(|p| p.lane == lane && p.is_running())
        {
            if process.status != Status::Running
                || process.want_drain
                || process.pending_topics.is_some()
                || !process.revoking().is_empty()
            {
                return false;
            }
            let Some(slot) = group.slot_of(process.member_id()) else {
                return false;
            };
            let held = group.holdings.member(slot);
            if held.is_none_or(|h| h.active != *process.active())
                || (!learners_allowed && !process.learner().is_empty())
            {
                return false;
            }
            served.insert(slot);
        }
        group
            .members
            .iter()
            .all(|(slot, m)| !m.draining && !m.away && served.contains(slot))
    }

    /// Group `lane` and its processes, for a liveness failure.
    fn describe(&self, lane: usize) -> String {
        let group = self.group(lane);
        let mut parts = vec![format!(
            "group {} epoch {} target epoch {} calls pending {}",
            group.name,
            group.group_epoch,
            group.target_epoch,
            self.calls.iter().filter(|call| call.lane == lane).count()
        )];
        for (slot, member) in &group.members {
            let held = group.holdings.member(slot).cloned().unwrap_or_default();
            let target = group.target_of(slot);
            parts.push(format!(
                "{slot} ({}{}{}) e{} {:?} active=[{}] revoking=[{}] target=[{}] learner=[{}]",
                member.member_id,
                if member.away { " away" } else { "" },
                if member.draining { " draining" } else { "" },
                held.epoch,
                held.state,
                tasks_str(&held.active),
                tasks_str(&held.revoking),
                tasks_str(&target.active),
                tasks_str(&target.learner)
            ));
        }
        for process in self
            .processes
            .iter()
            .filter(|p| p.lane == lane && p.is_running())
        {
            parts.push(format!(
                "{} {} e{} {:?} active=[{}] revoking=[{}] learner=[{}]",
                process.label(),
                process.member_id(),
                process.epoch(),
                process.status,
                tasks_str(process.active()),
                tasks_str(process.revoking()),
                tasks_str(process.learner())
            ));
        }
        parts.join("; ")
    }
}

/// A tick of `core`, checked: the timer table must agree with a scan of
/// every group (the same output and the same state on a copy of the
/// core), and with itself.
fn tick_checked(core: &mut Coordinator, now: Millis, load: HostLoad) -> Result<Output, String> {
    let mut scanned = core.clone();
    let reference = scanned.tick_every_group(now, load);
    let out = core.tick_loaded(now, load);
    if out != reference {
        return Err(format!(
            "a tick of the due groups gave {out:?}, a scan of every group {reference:?}"
        ));
    }
    if let Some(difference) = core.difference_from(&scanned) {
        return Err(format!(
            "a tick of the due groups and a scan of every group differ: {difference}"
        ));
    }
    core.check_deadlines()
        .map_err(|error| format!("the timer table: {error}"))?;
    Ok(out)
}

/// A record in one line for the trace.
fn describe(record: &Record) -> String {
    match record {
        Record::TargetInstalled { epoch, target, .. } => {
            let slots: Vec<String> = target
                .iter()
                .map(|(slot, t)| {
                    format!(
                        "{slot}: a=[{}] l=[{}] s=[{}]",
                        tasks_str(&t.active),
                        tasks_str(&t.learner),
                        tasks_str(&t.standby)
                    )
                })
                .collect();
            format!("TargetInstalled e{epoch} {}", slots.join("; "))
        }
        Record::MemberReconciled {
            slot, assignment, ..
        } => format!(
            "MemberReconciled {slot} {:?} e{} (prev e{}) active=[{}] revoking=[{}]",
            assignment.state,
            assignment.epoch,
            assignment.previous_epoch,
            tasks_str(&assignment.active),
            tasks_str(&assignment.revoking)
        ),
        Record::GroupConfigured { .. } => "GroupConfigured".into(),
        other => {
            let mut text = format!("{other:?}");
            if text.len() > 200 {
                let mut end = 200;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text.truncate(end);
                text.push('…');
            }
            text
        }
    }
}

/// An assignor's answer in one line: per member, its active tasks,
/// learners and standbys, and the lags it reported.
fn describe_answer(input: &GroupInput, answer: &Assignment) -> String {
    let offsets = input.topic_offsets();
    let task_ref = |task: u32| {
        let topic = offsets.partition_point(|&o| o <= task) - 1;
        crate::protocol::group::TaskRef::new(&input.topics[topic].name, task - offsets[topic])
    };
    let mut rows: Vec<String> = Vec::new();
    for (m, member) in input.members.iter().enumerate() {
        let m = m as u32;
        let active: Vec<_> = (0..answer.active_owner.len() as u32)
            .filter(|&t| answer.active_owner[t as usize] == m)
            .map(task_ref)
            .collect();
        let learner: Vec<_> = answer
            .learners
            .iter()
            .filter(|&(_, x)| x == m)
            .map(|(t, _)| task_ref(t))
            .collect();
        let standby: Vec<_> = answer
            .standbys
            .iter()
            .filter(|&(_, x)| x == m)
            .map(|(t, _)| task_ref(t))
            .collect();
        let lags: Vec<String> = input
            .lags
            .iter()
            .filter(|&(_, x, _)| x == m)
            .map(|(t, _, lag)| {
                let t = task_ref(t);
                format!("{}:{}={lag}", t.topic, t.partition)
            })
            .collect();
        rows.push(format!(
            "{} topics={:?} a=[{}] l=[{}] s=[{}] lags=[{}]",
            member.id,
            input.topics_of(member),
            tasks_str(&active),
            tasks_str(&learner),
            tasks_str(&standby),
            lags.join(" ")
        ));
    }
    rows.join("; ")
}

/// Which field of two groups differs first, for a replay mismatch.
fn first_difference(replayed: Option<&Group>, live: &Group) -> String {
    let Some(replayed) = replayed else {
        return "the replay has no group".into();
    };
    let fields: [(&str, bool); 9] = [
        ("config", replayed.config == live.config),
        ("group_epoch", replayed.group_epoch == live.group_epoch),
        ("target_epoch", replayed.target_epoch == live.target_epoch),
        ("members", replayed.members == live.members),
        ("target", replayed.target == live.target),
        ("holdings", replayed.holdings == live.holdings),
        (
            "fenced_member_ids",
            replayed.fenced_member_ids == live.fenced_member_ids,
        ),
        (
            "member_ids_issued",
            replayed.member_ids_issued == live.member_ids_issued,
        ),
        ("dynamic_only", replayed.dynamic_only == live.dynamic_only),
    ];
    let differ: Vec<&str> = fields
        .iter()
        .filter(|(_, same)| !same)
        .map(|(name, _)| *name)
        .collect();
    if differ.is_empty() {
        "another field".into()
    } else {
        differ.join(", ")
    }
}

/// FNV-1a, for run fingerprints (determinism checks).
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}
