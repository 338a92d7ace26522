//! The simulator's cluster layer: simulated nodes that serve a schedule's
//! shards over the modelled lease store ([`super::store`]), as
//! host/src/cluster runs real nodes on etcd, with their faults (crash,
//! pause, partition from the store, graceful leave) and the checks that
//! only a cluster can breach (fencing, nothing durable lost, one answering
//! node per shard).
//!
//! It owns the nodes (each with its lease, registration, directory and the
//! cores of the shards it serves) and the store, whose keys are the
//! cluster's ([`crate::cluster::keys`]: `owners/NNNN` put under the
//! owner's lease is the claim every write of the shard is guarded by;
//! `shards/NNNN/log/I` holds one persisted batch of framed records;
//! `nodes/NAME` is a node's registration). Each node runs the real node's decisions,
//! [`NodeMachine`] (host/src/cluster/node_machine.rs, which node.rs runs
//! over etcd): this layer performs its outputs over the lease store
//! (`cluster_node.rs`) and feeds their outcomes back, so the simulator
//! checks the node's own renewals, step-downs and placement rounds. Its
//! faults reach the machine as inputs: a crash or a leave starts a fresh
//! machine, a pause moves its timers, a partition or a lost answer is the
//! outcome of a request. Each core a node loads gets the unreached grace
//! before its restart (two node lease TTLs, as
//! `serve` sets it): its answers carry the longer `unreached_lease_ms`,
//! and the leases a takeover assumes include the grace. Whether a request
//! reaches the store (partitions) and whether its answer gets back (the
//! ambiguous case real etcd has) is drawn here, from the cluster's own
//! generator. It does not touch members, assignor calls or the invariants
//! of groups: the world ([`super::world`]) routes those through
//! [`Cluster::serving`], and tells each member whether its heartbeat
//! provably reached no core.

use std::collections::BTreeMap;

use super::rng::Rng;
use super::store::{Compare, KeyValue, LeaseId, LeaseStore, Op};
use crate::cluster::keys;
use crate::cluster::node_machine::{NodeMachine, Timing};
use crate::cluster::store::decode_batch;
use crate::log::frame;
use crate::protocol::core::Coordinator;
use crate::protocol::group::{Millis, Record};
use crate::protocol::shard::ShardId;

/// The lease TTLs a schedule draws from (ms): short, so that takeovers
/// happen within a schedule's virtual seconds.
const LEASE_TTLS_MS: [u64; 3] = [600, 900, 1_500];

/// The unreached grace of every core, in node lease TTLs: a takeover ends
/// within two (the dead node's lease runs out, a survivor's next round
/// claims the shard), as `serve`'s default assumes.
const UNREACHED_GRACE_TTLS: u64 = 2;

/// Probability, per store request, that its answer is lost after it was
/// applied (outside boot and the quiet phase), by scenario.
const ANSWER_LOST_PS: [f64; 3] = [0.0, 0.01, 0.03];

/// How to run a schedule's cluster.
#[derive(Clone, Debug, Default)]
pub struct ClusterOptions {
    /// Nodes in the cluster (`None`: drawn, 2 to 4).
    pub nodes: Option<usize>,
    /// A deliberately broken node behaviour, to show the checks catch it.
    pub fault: Option<NodeFault>,
}

/// A deliberately broken node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeFault {
    /// Nodes keep serving their shards after their lease may have ended by
    /// their own clock (a paused node answers from what it believed; a
    /// node cut off from the store does not step down); writes stay
    /// guarded.
    ServePastLease,
    /// As [`NodeFault::ServePastLease`], and writes are not guarded by the
    /// claim: a node ignores fencing altogether.
    UnguardedWrites,
}

/// What the cluster layer did, summed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterStats {
    pub node_crashes: u64,
    pub node_pauses: u64,
    pub partitions: u64,
    pub node_leaves: u64,
    /// Shards loaded by another node than the one that served them last.
    pub takeovers: u64,
    pub step_downs: u64,
    /// Heartbeats sent on to the owner a node's directory names.
    pub redirects: u64,
    /// Heartbeats no node answered (down, paused, not serving, or its
    /// write did not land).
    pub unanswered: u64,
    /// Of those, heartbeats that provably reached no core (the node down,
    /// no node serving the shard, redirected in circles, the member's own
    /// network down): the member may count on its unreached lease.
    pub unreached: u64,
    /// Times a member's network went down for a while (its heartbeats
    /// fail before they leave it) while the nodes serve on.
    pub cut_offs: u64,
    /// Times a member kept processing past its plain lease on its
    /// unreached lease (once an answer).
    pub leases_extended: u64,
    /// Times such a member was then answered with tasks it had processed
    /// past its plain lease still its: it kept them without a stop.
    pub leases_extended_kept: u64,
    /// Of those, answers from another load of the shard than the one that
    /// answered it before (a takeover, or a reload).
    pub kept_through_takeovers: u64,
    /// Heartbeats a core handled, or may have, whose answer was lost: the
    /// member waited for its request timeout, sending nothing meanwhile.
    pub in_flight: u64,
    /// Of those, heartbeats sent while the member counted on its
    /// unreached lease with tasks: it counted on it only until the send
    /// time plus `unreached_flight_ms` while waiting.
    pub in_flight_unreached: u64,
    /// Of those, heartbeats whose flight bound ended the lease sooner
    /// than the unreached lease would have.
    pub flight_bound_binding: u64,
    /// Times a member stopped processing while its heartbeat was in
    /// flight because the flight bound had passed (its request timed out
    /// later).
    pub flight_bound_stops: u64,
    /// Store requests applied whose answer was lost.
    pub answers_lost: u64,
    /// Writes of records refused by their guard.
    pub writes_fenced: u64,
    pub leases_expired: u64,
}

impl ClusterStats {
    pub fn add(&mut self, other: &ClusterStats) {
        self.node_crashes += other.node_crashes;
        self.node_pauses += other.node_pauses;
        self.partitions += other.partitions;
        self.node_leaves += other.node_leaves;
        self.takeovers += other.takeovers;
        self.step_downs += other.step_downs;
        self.redirects += other.redirects;
        self.unanswered += other.unanswered;
        self.unreached += other.unreached;
        self.cut_offs += other.cut_offs;
        self.leases_extended += other.leases_extended;
        self.leases_extended_kept += other.leases_extended_kept;
        self.kept_through_takeovers += other.kept_through_takeovers;
        self.in_flight += other.in_flight;
        self.in_flight_unreached += other.in_flight_unreached;
        self.flight_bound_binding += other.flight_bound_binding;
        self.flight_bound_stops += other.flight_bound_stops;
        self.answers_lost += other.answers_lost;
        self.writes_fenced += other.writes_fenced;
        self.leases_expired += other.leases_expired;
    }
}

/// A key a node holds, and the revision it was put at: the fencing token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    pub key: String,
    pub revision: i64,
}

/// How a store request of a node went.
enum Reply<T> {
    Answered(T),
    /// Applied, and the node hears nothing (its request timed out).
    Lost(T),
    /// Never reached the store.
    Unreached,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeState {
    Up,
    /// Stopped acting (a long GC pause, a frozen VM) until then; it
    /// resumes with everything it believed.
    Paused {
        until_ms: Millis,
    },
    /// Crashed or left; restarts then, with nothing but its name.
    Down {
        restart_at_ms: Millis,
    },
}

/// A shard a node serves: its core, replayed from the store under the
/// claim it holds.
pub struct Served {
    pub core: Coordinator,
    pub claim: Claim,
    /// The log index its next batch goes to.
    next_index: u64,
    /// A write did not land, or its answer was lost: the core may be
    /// ahead of the store. Refuses everything until the next round drops
    /// it (and loads it again from what landed).
    pub failed: bool,
    /// One per load, cluster-wide: assignor calls go back to the load that
    /// asked.
    pub incarnation: u64,
}

pub struct SimNode {
    pub name: String,
    pub state: NodeState,
    lease: Option<LeaseId>,
    /// The end of the lease by this node's clock: counted from before the
    /// grant or the last renewal was sent.
    pub serve_until_ms: Millis,
    /// A lease granted, until it registers under it.
    granted: Option<LeaseId>,
    registration: Option<Claim>,
    pub served: BTreeMap<usize, Served>,
    /// Each shard's owner as its last placement round read.
    directory: BTreeMap<usize, String>,
    /// Its requests do not reach the store before then.
    partitioned_until_ms: Millis,
    /// Its decisions, and when it next acts by itself.
    machine: NodeMachine,
}

impl SimNode {
    fn new(name: String, machine: NodeMachine) -> Self {
        SimNode {
            name,
            machine,
            state: NodeState::Up,
            lease: None,
            serve_until_ms: 0,
            granted: None,
            registration: None,
            served: BTreeMap::new(),
            directory: BTreeMap::new(),
            partitioned_until_ms: 0,
        }
    }

    /// Forgets everything but its name (a crash, or the end of a leave):
    /// it starts again with `machine`, a fresh one.
    fn forget(&mut self, machine: NodeMachine) {
        *self = SimNode {
            state: self.state,
            ..SimNode::new(std::mem::take(&mut self.name), machine)
        };
    }

    /// The owner its directory names for `shard`, if another node.
    pub fn directed_to(&self, shard: usize) -> Option<&str> {
        self.directory
            .get(&shard)
            .map(String::as_str)
            .filter(|owner| *owner != self.name)
    }
}

/// How a write of records went, as the world must know it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Persisted {
    /// The records are in the store (whether or not the node heard so).
    pub landed: bool,
    /// The node heard that they landed: it may answer.
    pub acked: bool,
}

/// A shard a node loaded in a round, for the world's checks.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub node: usize,
    pub shard: usize,
    /// The node that served it last (`None`: nobody yet).
    pub previous: Option<usize>,
}

pub struct Cluster {
    pub store: LeaseStore,
    pub nodes: Vec<SimNode>,
    pub ttl_ms: u64,
    /// Every core's unreached grace (`UNREACHED_GRACE_TTLS` node lease
    /// TTLs, as `serve` sets it): how much longer than its plain lease a
    /// member keeps its tasks while no core handles its heartbeats.
    pub unreached_grace_ms: u64,
    shard_count: u32,
    /// Each shard's core seed, as the world gives it.
    shard_seeds: Vec<u64>,
    rng: Rng,
    answer_lost_p: f64,
    pub fault: Option<NodeFault>,
    /// No faults of the store: boot and the quiet phase.
    pub calm: bool,
    next_incarnation: u64,
    /// Each shard's log as written: index → the revision of its write,
    /// which the store must keep (nothing durable is lost).
    written: Vec<BTreeMap<u64, i64>>,
    /// The node that served each shard last.
    last_owner: Vec<Option<usize>>,
    /// The store's revision at the last check of `written`.
    checked_revision: i64,
    /// The first applied write the fencing monitor saw from a node whose
    /// claim was lost.
    breach: Option<String>,
    notes: Option<Vec<String>>,
    pub stats: ClusterStats,
}

impl Cluster {
    /// A cluster drawn from `rng`, for shards of the given core seeds; its
    /// nodes have not joined yet ([`Self::boot`]).
    pub fn new(
        rng: &mut Rng,
        options: &ClusterOptions,
        shard_seeds: Vec<u64>,
        trace: bool,
    ) -> Self {
        let count = options.nodes.unwrap_or_else(|| rng.range(2, 4) as usize);
        let ttl_ms = *rng.pick(&LEASE_TTLS_MS);
        let answer_lost_p = *rng.pick(&ANSWER_LOST_PS);
        let shard_count = shard_seeds.len();
        Cluster {
            store: LeaseStore::new(),
            nodes: (0..count)
                .map(|i| {
                    let name = format!("n{i}");
                    let machine = fresh_machine(&name, shard_count as u32, ttl_ms, options.fault);
                    SimNode::new(name, machine)
                })
                .collect(),
            ttl_ms,
            unreached_grace_ms: UNREACHED_GRACE_TTLS * ttl_ms,
            shard_count: shard_count as u32,
            shard_seeds,
            rng: Rng::new(rng.next_u64()),
            answer_lost_p,
            fault: options.fault,
            calm: true,
            next_incarnation: 1,
            written: vec![BTreeMap::new(); shard_count],
            last_owner: vec![None; shard_count],
            checked_revision: 0,
            breach: None,
            notes: trace.then(Vec::new),
            stats: ClusterStats::default(),
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "cluster of {} nodes, lease ttl {} ms, unreached grace {} ms, store answers lost with p={}",
            self.nodes.len(),
            self.ttl_ms,
            self.unreached_grace_ms,
            self.answer_lost_p
        )
    }

    fn timing(&self) -> Timing {
        Timing {
            lease_ttl_ms: self.ttl_ms,
        }
    }

    /// A fresh machine for `node` (a start after a crash or a leave).
    fn fresh_machine(&self, node: usize) -> NodeMachine {
        fresh_machine(
            &self.nodes[node].name,
            self.shard_count,
            self.ttl_ms,
            self.fault,
        )
    }

    fn note(&mut self, line: impl FnOnce() -> String) {
        if let Some(notes) = &mut self.notes {
            notes.push(line());
        }
    }

    /// The trace lines since the last call.
    pub fn take_notes(&mut self) -> Vec<String> {
        self.notes.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Every node joins, then runs a placement round, in name order: every
    /// shard is served.
    pub fn boot(&mut self, now: Millis) -> Vec<Loaded> {
        for node in 0..self.nodes.len() {
            self.nodes[node].machine.join(now);
            self.drive(node, now);
        }
        let renew_interval_ms = self.timing().renew_interval_ms();
        let mut loaded = Vec::new();
        for node in 0..self.nodes.len() {
            self.nodes[node]
                .machine
                .set_timers(now + renew_interval_ms, now);
            loaded.extend(self.drive(node, now));
            let stagger = self.rng.below(self.timing().placement_interval_ms());
            self.nodes[node]
                .machine
                .set_timers(now + renew_interval_ms, now + stagger + 1);
        }
        loaded
    }

    /// One request of `node` to the store: not sent while it is cut off;
    /// else applied, and its answer perhaps lost.
    fn request<T>(
        &mut self,
        node: usize,
        now: Millis,
        op: impl FnOnce(&mut LeaseStore) -> T,
    ) -> Reply<T> {
        if now < self.nodes[node].partitioned_until_ms {
            return Reply::Unreached;
        }
        let answer = op(&mut self.store);
        if !self.calm && self.rng.chance(self.answer_lost_p) {
            self.stats.answers_lost += 1;
            return Reply::Lost(answer);
        }
        Reply::Answered(answer)
    }

    /// Writes `records` as the next batch of `shard`'s log, guarded by the
    /// node's claim (unless the fault says otherwise). A write that does
    /// not land, or whose answer is lost, fails the shard.
    pub fn persist(
        &mut self,
        node: usize,
        shard: usize,
        records: &[Record],
        now: Millis,
    ) -> Persisted {
        let served = &self.nodes[node].served[&shard];
        let mut bytes = Vec::new();
        for record in records {
            frame::encode(record, &mut bytes);
        }
        let index = served.next_index;
        let claim = served.claim.clone();
        let compares = match self.fault {
            Some(NodeFault::UnguardedWrites) => Vec::new(),
            _ => vec![Compare::Modified {
                key: claim.key.clone(),
                revision: claim.revision,
            }],
        };
        let ops = [Op::Put {
            key: keys::log_chunk(shard as ShardId, index),
            value: bytes,
            lease: 0,
        }];
        let name = self.nodes[node].name.clone();
        let reply = self.request(node, now, |s| {
            // The fencing monitor: the claim must hold when the write is
            // applied, whatever the write compares.
            s.advance(now);
            let held = s
                .peek(&claim.key)
                .is_some_and(|kv| kv.mod_revision == claim.revision && kv.value == name.as_bytes());
            let applied = s.txn(&compares, &ops, now) == Ok(true);
            (applied, held, s.revision())
        });
        let answered = matches!(reply, Reply::Answered(_));
        let (landed, acked) = match reply {
            Reply::Answered((applied, held, revision)) | Reply::Lost((applied, held, revision)) => {
                if applied {
                    if !held && self.breach.is_none() {
                        self.breach = Some(format!(
                            "fencing: n{node}'s write of shard {shard}'s batch {index} was applied at revision {revision}, but its claim (revision {}) no longer held",
                            claim.revision
                        ));
                    }
                    self.written[shard].insert(index, revision);
                } else {
                    self.stats.writes_fenced += 1;
                }
                (applied, applied && answered)
            }
            Reply::Unreached => (false, false),
        };
        let served = self.nodes[node].served.get_mut(&shard).expect("served");
        if acked {
            served.next_index += 1;
        } else {
            served.failed = true;
            self.note(|| {
                format!(
                    "n{node}: writing shard {shard}'s batch {index} {}: the shard fails",
                    if landed {
                        "landed, its answer lost"
                    } else {
                        "did not land"
                    }
                )
            });
        }
        Persisted { landed, acked }
    }

    /// The core `node` serves `shard` from, if it serves it now: up, the
    /// shard loaded and not failed, and its lease not over by its own
    /// clock (unless a fault ignores that).
    pub fn serving(&self, node: usize, shard: usize, now: Millis) -> Option<&Served> {
        let n = &self.nodes[node];
        let in_lease = now < n.serve_until_ms || self.fault.is_some();
        (n.state == NodeState::Up && in_lease)
            .then(|| n.served.get(&shard))
            .flatten()
            .filter(|s| !s.failed)
    }

    pub fn serving_mut(&mut self, node: usize, shard: usize, now: Millis) -> Option<&mut Served> {
        self.serving(node, shard, now)?;
        self.nodes[node].served.get_mut(&shard)
    }

    /// Whether `node`'s claim of `shard` holds in the store at `now`.
    pub fn claim_holds(&self, node: usize, shard: usize, now: Millis) -> bool {
        self.nodes[node].served.get(&shard).is_some_and(|s| {
            self.store.holds_at(&s.claim.key, s.claim.revision, now)
                && self
                    .store
                    .peek(&s.claim.key)
                    .is_some_and(|kv| kv.value == self.nodes[node].name.as_bytes())
        })
    }

    /// The node whose claim of `shard` holds and whose core of it is not
    /// failed: the one whose core is the shard's state (paused or not).
    pub fn owner(&self, shard: usize, now: Millis) -> Option<usize> {
        (0..self.nodes.len()).find(|&node| {
            self.nodes[node]
                .served
                .get(&shard)
                .is_some_and(|s| !s.failed)
                && self.claim_holds(node, shard, now)
        })
    }

    /// The node that serves loads of `incarnation` of `shard`, if any.
    pub fn node_of(&self, shard: usize, incarnation: u64) -> Option<usize> {
        (0..self.nodes.len()).find(|&node| {
            self.nodes[node]
                .served
                .get(&shard)
                .is_some_and(|s| s.incarnation == incarnation)
        })
    }

    /// The earliest thing a node does by itself: a renewal, a round, the
    /// end of a pause, a restart.
    pub fn next_event(&self) -> Option<(Millis, usize)> {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let due = match n.state {
                    NodeState::Up => n.machine.poll_timeout(),
                    NodeState::Paused { until_ms } => until_ms,
                    NodeState::Down { restart_at_ms } => restart_at_ms,
                };
                (due, i)
            })
            .min()
    }

    /// What `node` has due at `now`; returns the shards it loaded.
    pub fn on_event(&mut self, node: usize, now: Millis) -> Vec<Loaded> {
        let timing = self.timing();
        match self.nodes[node].state {
            NodeState::Paused { .. } => {
                // It resumes where it stopped: what comes first, a renewal,
                // a round, a tick or a request, is up to the schedule.
                let renew = self.rng.range(0, timing.renew_interval_ms());
                let round = self.rng.range(0, timing.placement_interval_ms());
                let n = &mut self.nodes[node];
                n.state = NodeState::Up;
                n.machine.set_timers(now + renew, now + round);
                self.note(|| format!("n{node} resumes"));
                Vec::new()
            }
            NodeState::Down { .. } => {
                self.nodes[node].state = NodeState::Up;
                self.note(|| format!("n{node} starts"));
                self.nodes[node].machine.join(now);
                self.drive(node, now);
                self.nodes[node]
                    .machine
                    .set_timers(now + timing.renew_interval_ms(), now);
                self.drive(node, now)
            }
            NodeState::Up => self.drive(node, now),
        }
    }

    /// Nodes not paused or down, for the faults.
    pub fn up_nodes(&self) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&n| self.nodes[n].state == NodeState::Up)
            .collect()
    }

    /// A random fault of a node (or none, if no node is up).
    pub fn chaos(&mut self, now: Millis) {
        let up = self.up_nodes();
        if up.is_empty() {
            return;
        }
        let node = *self.rng.pick(&up);
        let ttl = self.ttl_ms;
        match self.rng.weighted(&[3, 4, 3, 1]) {
            0 => {
                let restart_at_ms = now + self.rng.range(ttl / 2, 4 * ttl);
                self.crash(node, restart_at_ms);
            }
            1 => {
                // Mostly past the lease: it resumes believing stale things.
                let until_ms = now + self.rng.range(ttl / 3, 3 * ttl);
                self.pause(node, until_ms);
            }
            2 => {
                let until_ms = now + self.rng.range(ttl / 3, 3 * ttl);
                self.partition(node, until_ms);
            }
            _ => {
                let restart_at_ms = now + self.rng.range(ttl / 2, 4 * ttl);
                self.leave(node, now, restart_at_ms);
            }
        }
    }

    /// `node` crashes (loses everything but its name) and starts again at
    /// `restart_at_ms`.
    pub fn crash(&mut self, node: usize, restart_at_ms: Millis) {
        self.stats.node_crashes += 1;
        self.note(|| format!("n{node} crashes (starts again at {restart_at_ms})"));
        let machine = self.fresh_machine(node);
        self.nodes[node].forget(machine);
        self.nodes[node].state = NodeState::Down { restart_at_ms };
    }

    /// `node` stops acting until `until_ms`, then resumes with what it
    /// believed.
    pub fn pause(&mut self, node: usize, until_ms: Millis) {
        self.stats.node_pauses += 1;
        self.note(|| format!("n{node} pauses until {until_ms}"));
        self.nodes[node].state = NodeState::Paused { until_ms };
    }

    /// `node`'s requests do not reach the store until `until_ms`
    /// (members still reach it).
    pub fn partition(&mut self, node: usize, until_ms: Millis) {
        self.stats.partitions += 1;
        self.note(|| format!("n{node} is cut off from the store until {until_ms}"));
        self.nodes[node].partitioned_until_ms = until_ms;
    }

    /// A graceful leave (SIGTERM): deregisters, releases every shard's
    /// claim at once, revokes its lease, exits; starts again at
    /// `restart_at_ms`.
    pub fn leave(&mut self, node: usize, now: Millis, restart_at_ms: Millis) {
        self.stats.node_leaves += 1;
        self.note(|| format!("n{node} leaves (starts again at {restart_at_ms})"));
        if let Some(registration) = self.nodes[node].registration.take() {
            self.release(node, &registration, now);
        }
        let served = std::mem::take(&mut self.nodes[node].served);
        for served in served.values() {
            self.release(node, &served.claim, now);
        }
        if let Some(lease) = self.nodes[node].lease.take() {
            let _ = self.request(node, now, |s| s.revoke(lease, now));
        }
        let machine = self.fresh_machine(node);
        self.nodes[node].forget(machine);
        self.nodes[node].state = NodeState::Down { restart_at_ms };
    }

    /// No more faults: every node reaches the store, paused ones resume
    /// and down ones start, now; no answer is lost.
    pub fn calm_down(&mut self, now: Millis) {
        self.calm = true;
        for node in &mut self.nodes {
            node.partitioned_until_ms = node.partitioned_until_ms.min(now);
            match &mut node.state {
                NodeState::Up => {}
                NodeState::Paused { until_ms } => *until_ms = (*until_ms).min(now),
                NodeState::Down { restart_at_ms } => *restart_at_ms = (*restart_at_ms).min(now),
            }
        }
    }

    /// The checks only a cluster can fail, after every step: no write of a
    /// node whose claim was lost was applied, and every batch of every
    /// shard's log that landed is still in the store as written (nothing
    /// durable, so nothing acknowledged, is lost).
    pub fn check(&mut self) -> Result<(), String> {
        self.stats.leases_expired = self.store.leases_expired;
        if let Some(breach) = &self.breach {
            return Err(format!("invariant 8: {breach}"));
        }
        if self.store.revision() == self.checked_revision {
            return Ok(());
        }
        self.checked_revision = self.store.revision();
        for (shard, written) in self.written.iter().enumerate() {
            for (&index, &revision) in written {
                let key = keys::log_chunk(shard as ShardId, index);
                let kept = self.store.peek(&key).map(|kv| kv.mod_revision);
                if kept != Some(revision) {
                    return Err(format!(
                        "invariant 6: batch {index} of shard {shard}'s log, written at revision {revision}, is {} in the store",
                        match kept {
                            None => "gone".to_owned(),
                            Some(other) => format!("overwritten (revision {other})"),
                        }
                    ));
                }
            }
        }
        Ok(())
    }

    /// `shard`'s log as the store holds it now, decoded.
    pub fn durable_records(&self, shard: usize) -> Result<Vec<Record>, String> {
        decode_log(
            shard,
            &self.store.peek_range(&keys::log_prefix(shard as ShardId)),
        )
        .map(|(records, _)| records)
    }
}

/// A node's machine before it joins; a node broken to serve past its
/// lease does not step down when its lease ends unrenewed.
fn fresh_machine(
    name: &str,
    shard_count: u32,
    ttl_ms: u64,
    fault: Option<NodeFault>,
) -> NodeMachine {
    let timing = Timing {
        lease_ttl_ms: ttl_ms,
    };
    let mut machine = NodeMachine::new(name.to_owned(), shard_count, timing);
    if fault.is_some() {
        machine.keep_serving_past_lease_end();
    }
    machine
}

/// The records of a shard's log chunks (in index order, each a whole
/// batch), and the index after the last.
fn decode_log(shard: usize, chunks: &[(String, KeyValue)]) -> Result<(Vec<Record>, u64), String> {
    let mut records = Vec::new();
    let mut next_index = 0;
    for (key, kv) in chunks {
        let index: u64 = keys::last_segment(key)
            .parse()
            .map_err(|_| format!("shard {shard}: {key} is not a log key"))?;
        if index != next_index {
            return Err(format!(
                "shard {shard}: batch {index} follows batch {}",
                next_index.wrapping_sub(1)
            ));
        }
        next_index += 1;
        decode_batch(shard as ShardId, index, &kv.value, &mut records)
            .map_err(|e| e.to_string())?;
    }
    Ok((records, next_index))
}

#[path = "cluster_node.rs"]
mod node;
