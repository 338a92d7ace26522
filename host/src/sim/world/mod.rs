//! One schedule: a sharded host (one coordinator per shard, each with its
//! own record log), a few groups drawn at random over more than one shard,
//! simulated member processes of each group, routers that read the groups'
//! routing tables, and a queue of assignor calls, all on a virtual clock
//! driven by one seeded generator (the routers by one of their own). Every
//! input of a group goes to its shard's core, a tick reaches every shard,
//! and nothing outside a shard refers to a group's state. A chaos phase of
//! random events is followed by a quiet phase; every input to a core is a
//! step, and the invariants are checked after each one, in every group (a
//! router's read changes no group: invariant 9 is checked at each key it
//! routes instead).
//!
//! In cluster mode the world routes each heartbeat to a node and tells
//! its member what became of it: an answer; a refusal, a redirect without
//! end or a 503 (provably unreached), at once, as they come back in
//! reality; or, when a core handled it (or may have: a paused node, a
//! write not acknowledged) and its answer is lost, nothing until the
//! member's request timeout (drawn per process), the heartbeat in flight
//! meanwhile, the member on the lease [`SimMember::lease_end_ms`] bounds.
//! On one host a lost answer is still learnt at once.
//!
//! This file owns the [`World`] and its step loop (boot, the phases, the
//! next scheduled thing, ticks, the report). The rest, by concern:
//! `scenario` draws the groups and their configs, `processes` starts
//! the member processes, `heartbeat` sends their heartbeats and takes
//! the outcomes in, `routing` reaches the nodes in cluster mode,
//! `routers` reads the groups' routing tables and routes keys by them,
//! `assignor_calls` answers the cores' assignor calls, `admin` sends
//! configs and drains, `records` keeps what lands in each shard's log,
//! `checks` holds the invariant checks after each step, `loads` the
//! groups' loads and the load invariants, `chaos` the random events, `settle` the quiet phase, and `trace` the trace.
//!
//! Every draw from the generator happens in a fixed order: moving one
//! changes every schedule from there on, and a seed no longer names the
//! run it named.

mod admin;
mod assignor_calls;
mod chaos;
mod checks;
mod heartbeat;
mod loads;
mod processes;
mod records;
mod rollouts;
mod routers;
mod routing;
mod scenario;
mod settle;
mod shadows;
mod trace;

use std::collections::{BTreeMap, BTreeSet};

use super::cluster::{Cluster, ClusterOptions};
use super::member::SimMember;
use super::rng::Rng;
use super::{Fault, Options, Report, Stats, Violation};
use crate::protocol::core::{Coordinator, HostLoad, Output};
use crate::protocol::group::{Group, GroupConfig, Millis, Record};
use crate::protocol::shard::shard_of;
use assignor_calls::PendingCall;
pub use assignor_calls::{ASSIGNORS, assign_natively};
use loads::{LOADS_SEED_SALT, LoadLane, LoadWatch, draw_load_lane};
use routers::{SimRouter, draw_routers};
use routing::CutOff;
use scenario::{Scenario, draw, draw_group_names};
use trace::describe_lane;

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
    /// Its loads, if it takes loads.
    loads: Option<LoadLane>,
    /// What the load invariants keep of it.
    watch: LoadWatch,
}

/// What the routers' own generator is seeded with, besides the seed.
const ROUTERS_SEED_SALT: u64 = 0x726f_7574_6572_7321;

/// The seed of shard `shard`'s core (the member ids it issues).
fn shard_seed(seed: u64, shard: usize) -> u64 {
    seed ^ ((shard as u64) << 48)
}

/// One schedule's state: its groups and their shards, the processes, the
/// pending assignor calls, the virtual clock and the generator.
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
    /// The routers of every group.
    routers: Vec<SimRouter>,
    /// The routers' own generator: they draw nothing from `rng`.
    router_rng: Rng,
    /// The loads' own generator: they draw nothing from `rng` either.
    load_rng: Rng,
    /// The shadows' own generator: their answers' delays, and with
    /// `draw_shadows` the shadows themselves.
    shadow_rng: Rng,
    /// Every group gets a shadow when it starts.
    draw_shadows: bool,
    /// Shadow calls whose answers are due.
    shadow_calls: Vec<shadows::PendingShadow>,
    /// The rollouts' own generator, when the schedule has a rollout.
    rollout_rng: Option<Rng>,
    /// The schedule's rollout, once started.
    rollout: Option<rollouts::SimRollout>,
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
        let mut lanes = names
            .into_iter()
            .map(|name| {
                let (config, scenario) = draw(&mut rng);
                Lane {
                    shard: shard_of(&name, shard_count) as usize,
                    name,
                    scenario,
                    initial: Some(config),
                    loads: None,
                    watch: LoadWatch::default(),
                }
            })
            .collect::<Vec<Lane>>();
        let mut load_rng = Rng::new(seed ^ LOADS_SEED_SALT);
        for lane in &mut lanes {
            let config = lane.initial.as_mut().expect("drawn");
            lane.loads = draw_load_lane(&mut load_rng, options.load_group_p, config, 0);
        }
        let lane_count = lanes.len();
        let mut router_rng = Rng::new(seed ^ ROUTERS_SEED_SALT);
        let names: Vec<String> = lanes.iter().map(|l| l.name.clone()).collect();
        let lost: Vec<f64> = lanes.iter().map(|l| l.scenario.lost_response_p).collect();
        let (routers, valid) = draw_routers(&mut router_rng, &names, &lost, options.routers);
        for (lane, valid_ms) in lanes.iter_mut().zip(valid) {
            if let (Some(config), Some(valid_ms)) = (&mut lane.initial, valid_ms) {
                config.routes_valid_ms = valid_ms;
            }
        }
        // A rollout runs on one host only (its commands go to the shards'
        // cores as an admin's would).
        let cluster_mode = cluster.is_none();
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
            routers,
            router_rng,
            load_rng,
            shadow_rng: shadows::shadow_rng(seed),
            draw_shadows: options.shadows,
            shadow_calls: Vec::new(),
            rollout_rng: rollouts::rollout_rng(seed, options.rollouts && cluster_mode),
            rollout: None,
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
            self.start_group(lane)?;
        }
        self.start_rollout()?;
        if let Some(cluster) = &mut self.cluster {
            cluster.calm = false;
        }
        self.chaos_phase()?;
        self.quiet_phase()?;
        self.check_rollout()?;
        self.check_logs()
    }

    /// Configures group `lane` with the config it drew and starts its
    /// first processes, each to beat within 200 ms.
    fn start_group(&mut self, lane: usize) -> Result<(), Violation> {
        let config = self.lanes[lane].initial.take().expect("run once");
        self.note(|w| describe_lane(&w.lanes[lane]));
        self.configure(lane, config)?;
        self.bind_drawn_shadow(lane)?;
        for _ in 0..self
            .rng
            .range(1, self.lanes[lane].scenario.members_max as u64)
        {
            let name = self.draw_name(lane);
            let topics = self.draw_topics(lane);
            let pid = self.spawn(lane, name, topics, BTreeMap::new());
            self.processes[pid].next_beat_ms = self.rng.range(0, 200);
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
            stats.load_groups += u64::from(lane.loads.is_some());
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

    /// Each shard's log: every record the schedule made durable, in order.
    pub fn shard_logs(&self) -> Vec<&[crate::protocol::group::Record]> {
        self.shards.iter().map(|s| s.log.as_slice()).collect()
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

    /// The next scheduled thing: an assignor answer, a heartbeat, or a tick
    /// (in that order on a tie).
    fn advance(&mut self) -> Result<(), Violation> {
        self.deliver_due_shadows();
        self.drive_rollout()?;
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
        // The routers act until then: nothing they do changes what is next.
        let node_due = self
            .cluster
            .as_ref()
            .and_then(Cluster::next_event)
            .map(|(due, _)| due);
        let next = [call.map(|(due, _)| due), beat.map(|(due, _)| due), node_due]
            .into_iter()
            .flatten()
            .fold(tick, Millis::min);
        self.routers_until(next)?;
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
                    describe_assignors(core);
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
            describe_assignors(&mut self.shards[shard].core);
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
}

/// Tells `core` what it asked of the assignors its load trigger needs to
/// know about (whether each balances load), as the runtime does before its
/// next tick.
fn describe_assignors(core: &mut Coordinator) {
    for reference in core.assignors_to_describe() {
        let load = assignor_calls::balances_load(&reference);
        core.describe_assignor_load(&reference, load);
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
