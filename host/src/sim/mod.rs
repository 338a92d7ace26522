//! The deterministic simulator: a sharded host of protocol cores (one per
//! shard, each with its own record log) under virtual time with a few
//! groups of many simulated members and the routers that read their
//! routing tables, driven by seeded random schedules, with the invariants
//! of docs/design.md checked after every step (1 to 6, 8 in cluster mode,
//! and the load invariants 10 to 13) and at every key a router sends (9: a
//! router that honours its table's `valid_ms` never sends a key to a
//! member that does not process the task while another live member does;
//! docs/routing.md).
//!
//! It owns the schedules ([`world`]), the simulated member processes
//! ([`member`]), the invariant checks ([`check`], [`load_check`]), the
//! tasks' loads ([`loads`]), its generator ([`rng`]), and the cluster
//! layer: simulated nodes ([`cluster`]) over a
//! modelled lease store with etcd's semantics ([`store`]), which serve the
//! shards in place of the one host when a schedule runs with
//! [`ClusterOptions`]. It drives the core only through its public entry points
//! (configure, heartbeat, drain, tick, assignment computed) and answers
//! assignor calls natively with the built-in assignors through the SDK
//! harness; it must not reach into the core's private state, touch the
//! clock, the disk or the network, or use any randomness but its seed.
//!
//! A schedule is a pure function of its seed: `assignd sim --seed S
//! --schedules 1 --trace` prints the steps of the schedule that failed.

pub mod check;
pub mod cluster;
pub mod load_check;
pub mod loads;
pub mod member;
pub mod rng;
pub mod store;
pub mod world;

#[cfg(test)]
mod cluster_tests;
#[cfg(test)]
pub(crate) mod tests;

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::protocol::group::Millis;
pub use cluster::{ClusterOptions, ClusterStats, NodeFault};
pub use world::{ASSIGNORS, World, assign_natively};

/// Steps of random events per schedule before its quiet phase.
pub const DEFAULT_STEPS: u64 = 300;

/// Routers per group a schedule draws from (`lo..=hi`): readers of the
/// routing table from outside the group ([`world`]'s routers).
pub const DEFAULT_ROUTERS: (u64, u64) = (0, 3);

/// The part of a schedule's groups that take loads (a load unit, reports
/// from the members, load rebalances, freezes). None by default: the load
/// schedules run on their own (`sim::tests::loads`, every group taking
/// loads): mixed into the routers' schedules at 0.6, seeds 7077 (invariant
/// 10) and 7090 and 7100 (invariant 2: a frozen group with a draining
/// member that never settles) break, an open defect.
pub const DEFAULT_LOAD_GROUP_P: f64 = 0.0;

/// The simulated host's shards: few, so that a schedule's groups share a
/// shard as often as they are spread over several.
pub const DEFAULT_SHARDS: u32 = 4;

/// A deliberately broken behaviour, to show that the checks catch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Some members keep processing the tasks they report released.
    KeepRevoked,
    /// Members count on the unreached lease (cluster mode) after a
    /// heartbeat that may have reached the coordinator too (its answer
    /// lost, a node that did not answer), not only after ones that
    /// provably did not. Harmful only when that heartbeat started a
    /// revocation the member then never hears of before it is fenced: rare
    /// in random schedules (see `sim::cluster_tests`).
    ExtendWhenUnsure,
    /// Members on the unreached lease (cluster mode) count on all of it
    /// while a heartbeat is in flight too, ignoring its
    /// `unreached_flight_ms` bound: should that heartbeat be told a
    /// revocation and its answer be lost, the host fences the member an
    /// expansion timeout and an interval after handling it, while the
    /// member learns of the loss only when its request times out.
    IgnoresFlightBound,
}

/// How to run schedules.
#[derive(Clone, Debug)]
pub struct Options {
    /// Steps of random events before the quiet phase.
    pub steps: u64,
    /// Keep a line per step and record (for debugging one seed).
    pub trace: bool,
    /// With `trace`, also each assignor call's input as GroupInput JSON
    /// (the offline contract: `assignd run` replays it).
    pub trace_inputs: bool,
    pub fault: Option<Fault>,
    /// The host's shard count (each group's shard is
    /// [`crate::protocol::shard::shard_of`] its name).
    pub shards: u32,
    /// How many routers each group gets, drawn in `lo..=hi`.
    pub routers: (u64, u64),
    /// The probability that a group takes loads.
    pub load_group_p: f64,
    /// Every group gets a shadow assignor when it starts.
    pub shadows: bool,
    /// On one host, a rollout of a built-in over every group runs through
    /// the chaos.
    pub rollouts: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            steps: DEFAULT_STEPS,
            shards: DEFAULT_SHARDS,
            routers: DEFAULT_ROUTERS,
            load_group_p: DEFAULT_LOAD_GROUP_P,
            shadows: false,
            rollouts: false,
            trace: false,
            trace_inputs: false,
            fault: None,
        }
    }
}

/// What schedules did, summed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub schedules: u64,
    /// Inputs to the core (each one followed by the checks).
    pub steps: u64,
    pub targets: u64,
    /// Learners that became active where they warmed up.
    pub learners_promoted: u64,
    pub drains: u64,
    /// Members removed for not releasing in time.
    pub fenced: u64,
    pub expired: u64,
    pub drain_timeouts: u64,
    /// Static members back within their registration timeout (invariant 3
    /// checked).
    pub static_returns: u64,
    /// Static member restarts.
    pub restarts: u64,
    /// Second processes started with a running static member's name (the
    /// first keeps running until it hears it was replaced).
    pub duplicates: u64,
    /// Assignor answers for an epoch the group had left.
    pub stale_answers: u64,
    pub assignor_failures: u64,
    pub lost_responses: u64,
    /// Joins whose answer was lost (the host had handled them), retried
    /// with the id the member chose.
    pub lost_joins: u64,
    /// Times a process holding tasks found its lease passed (stalled, or
    /// its answers lost) and stopped processing them.
    pub leases_lapsed: u64,
    pub configs: u64,
    /// Host stalls (nothing served for a while, then the host reports
    /// itself late).
    pub host_stalls: u64,
    /// Host restarts (the core replayed from the log, its transient state
    /// lost, members still running).
    pub host_restarts: u64,
    /// Schedules whose group, without churn, became stable but never
    /// stopped moving tasks through learners (a liveness finding about the
    /// assignor, not a breach of the invariants).
    pub unsettled: u64,
    /// Schedules whose groups are on more than one shard.
    pub multi_shard_schedules: u64,
    /// Records appended to each shard's log, by shard.
    pub shard_records: Vec<u64>,
    /// Groups on each shard, by shard.
    pub shard_groups: Vec<u64>,
    /// Routing tables routers read (answers that arrived).
    pub routes_read: u64,
    /// Keys routers sent by a fresh table (invariant 9 checked at each).
    pub keys_routed: u64,
    /// Of those, keys whose task the group's target had given to another
    /// member meanwhile: sent right on the table's promise alone.
    pub keys_routed_across_moves: u64,
    /// Keys of a task the table showed unowned or moving: not sent.
    pub keys_unowned: u64,
    /// Keys a router held back for a newer table (its own had gone stale).
    pub keys_deferred: u64,
    /// Groups that take loads.
    pub load_groups: u64,
    /// Shadow answers handed to a core, and shadow calls dropped.
    pub shadow_answers: u64,
    pub shadow_calls_dropped: u64,
    /// Rollouts that ended completed, and rolled back (checked at their
    /// end), and commands they had performed.
    pub rollouts_completed: u64,
    pub rollouts_rolled_back: u64,
    pub rollout_commands: u64,
    /// Assignor calls for a load rebalance (invariant 13 checked at each).
    pub load_rebalances: u64,
    /// Targets settled on with every load known and the band reachable
    /// (invariant 10 checked on each).
    pub band_checks: u64,
    /// Config changes that froze a group (invariant 12 checked while it
    /// stays frozen).
    pub freezes: u64,
    /// What the cluster layer did (cluster schedules only).
    pub cluster: ClusterStats,
}

/// `into[i] += from[i]`, `into` grown to fit.
fn add_by_shard(into: &mut Vec<u64>, from: &[u64]) {
    if into.len() < from.len() {
        into.resize(from.len(), 0);
    }
    for (sum, count) in into.iter_mut().zip(from) {
        *sum += count;
    }
}

/// Per-shard counts as `a/b/c`.
pub fn by_shard(counts: &[u64]) -> String {
    let counts: Vec<String> = counts.iter().map(u64::to_string).collect();
    counts.join("/")
}

impl Stats {
    pub fn add(&mut self, other: &Stats) {
        self.schedules += other.schedules;
        self.steps += other.steps;
        self.targets += other.targets;
        self.learners_promoted += other.learners_promoted;
        self.drains += other.drains;
        self.fenced += other.fenced;
        self.expired += other.expired;
        self.drain_timeouts += other.drain_timeouts;
        self.static_returns += other.static_returns;
        self.restarts += other.restarts;
        self.duplicates += other.duplicates;
        self.stale_answers += other.stale_answers;
        self.assignor_failures += other.assignor_failures;
        self.lost_responses += other.lost_responses;
        self.lost_joins += other.lost_joins;
        self.leases_lapsed += other.leases_lapsed;
        self.configs += other.configs;
        self.host_stalls += other.host_stalls;
        self.host_restarts += other.host_restarts;
        self.unsettled += other.unsettled;
        self.multi_shard_schedules += other.multi_shard_schedules;
        self.routes_read += other.routes_read;
        self.keys_routed += other.keys_routed;
        self.keys_routed_across_moves += other.keys_routed_across_moves;
        self.keys_unowned += other.keys_unowned;
        self.keys_deferred += other.keys_deferred;
        self.load_groups += other.load_groups;
        self.load_rebalances += other.load_rebalances;
        self.band_checks += other.band_checks;
        self.freezes += other.freezes;
        self.shadow_answers += other.shadow_answers;
        self.shadow_calls_dropped += other.shadow_calls_dropped;
        self.rollouts_completed += other.rollouts_completed;
        self.rollouts_rolled_back += other.rollouts_rolled_back;
        self.rollout_commands += other.rollout_commands;
        add_by_shard(&mut self.shard_records, &other.shard_records);
        add_by_shard(&mut self.shard_groups, &other.shard_groups);
        self.cluster.add(&other.cluster);
    }
}

/// A breached invariant: where, and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    pub seed: u64,
    pub step: u64,
    pub now: Millis,
    pub description: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "seed {} step {} (t={} ms): {}",
            self.seed, self.step, self.now, self.description
        )
    }
}

/// One schedule's outcome.
#[derive(Clone, Debug)]
pub struct Report {
    pub seed: u64,
    pub stats: Stats,
    pub violation: Option<Violation>,
    /// The steps, if [`Options::trace`].
    pub trace: Vec<String>,
    /// A hash of the final state and counts: equal for equal runs.
    pub fingerprint: u64,
}

/// Runs one schedule. A panic in the core (a failed assertion) is a
/// violation too.
pub fn run_schedule(seed: u64, options: &Options) -> Report {
    run_schedule_on(seed, options, None)
}

/// [`run_schedule`] with the shards served by a cluster of nodes
/// (`cluster`), or by one host (`None`).
pub fn run_schedule_on(seed: u64, options: &Options, cluster: Option<&ClusterOptions>) -> Report {
    let mut world = World::with_cluster(seed, options, cluster);
    let result = catch_unwind(AssertUnwindSafe(|| world.run()));
    let result = match result {
        Ok(result) => result,
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "a panic".into());
            let (step, now) = world.position();
            Err(Violation {
                seed,
                step,
                now,
                description: format!("panicked: {message}"),
            })
        }
    };
    world.into_report(result)
}

/// Runs schedules `first_seed`, `first_seed + 1`, … on `threads` threads;
/// the reports come back in seed order.
pub fn run_many(first_seed: u64, schedules: u64, options: &Options, threads: usize) -> Vec<Report> {
    run_many_on(first_seed, schedules, options, None, threads)
}

/// [`run_many`] with the shards served by a cluster (`Some`) or one host.
pub fn run_many_on(
    first_seed: u64,
    schedules: u64,
    options: &Options,
    cluster: Option<&ClusterOptions>,
    threads: usize,
) -> Vec<Report> {
    let threads = threads.max(1) as u64;
    let mut reports: Vec<Report> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|k| {
                scope.spawn(move || {
                    // The core warns of every injected assignor failure;
                    // the trace says more, in order.
                    let silent = tracing::subscriber::NoSubscriber::default();
                    tracing::subscriber::with_default(silent, || {
                        (k..schedules)
                            .step_by(threads as usize)
                            .map(|i| run_schedule_on(first_seed.wrapping_add(i), options, cluster))
                            .collect::<Vec<_>>()
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("run_schedule catches panics"))
            .collect()
    });
    reports.sort_by_key(|r| r.seed.wrapping_sub(first_seed));
    reports
}

/// The stats of many schedules, summed.
pub fn summed_stats(reports: &[Report]) -> Stats {
    let mut stats = Stats::default();
    for report in reports {
        stats.add(&report.stats);
    }
    stats
}

/// The violations of many schedules, one line each.
pub fn violation_lines(reports: &[Report]) -> Vec<String> {
    reports
        .iter()
        .filter_map(|r| r.violation.as_ref().map(ToString::to_string))
        .collect()
}

/// The one-line summary of many schedules.
pub fn summary_line(reports: &[Report]) -> String {
    let stats = summed_stats(reports);
    let violations = reports.iter().filter(|r| r.violation.is_some()).count();
    format!(
        "schedules={} steps={} violations={violations} targets={} learners_promoted={} drains={} fenced={} expired={} drain_timeouts={} static_returns={} restarts={} duplicates={} stale_answers={} assignor_failures={} lost_responses={} lost_joins={} leases_lapsed={} configs={} host_stalls={} host_restarts={} unsettled={} multi_shard_schedules={} routes_read={} keys_routed={} keys_routed_across_moves={} keys_unowned={} keys_deferred={} load_groups={} load_rebalances={} band_checks={} freezes={} shadow_answers={} shadow_calls_dropped={} rollouts_completed={} rollouts_rolled_back={} rollout_commands={} shard_groups={} shard_records={}",
        stats.schedules,
        stats.steps,
        stats.targets,
        stats.learners_promoted,
        stats.drains,
        stats.fenced,
        stats.expired,
        stats.drain_timeouts,
        stats.static_returns,
        stats.restarts,
        stats.duplicates,
        stats.stale_answers,
        stats.assignor_failures,
        stats.lost_responses,
        stats.lost_joins,
        stats.leases_lapsed,
        stats.configs,
        stats.host_stalls,
        stats.host_restarts,
        stats.unsettled,
        stats.multi_shard_schedules,
        stats.routes_read,
        stats.keys_routed,
        stats.keys_routed_across_moves,
        stats.keys_unowned,
        stats.keys_deferred,
        stats.load_groups,
        stats.load_rebalances,
        stats.band_checks,
        stats.freezes,
        stats.shadow_answers,
        stats.shadow_calls_dropped,
        stats.rollouts_completed,
        stats.rollouts_rolled_back,
        stats.rollout_commands,
        by_shard(&stats.shard_groups),
        by_shard(&stats.shard_records)
    )
}
