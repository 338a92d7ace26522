//! [`NodeMachine`]: a cluster node's decisions, sans-IO. It decides when
//! the node renews its lease and runs a placement round, when it steps
//! down and joins again, until when it may serve, and what a round does
//! with a view of the cluster ([`placement::plan`]): which claims it
//! releases, which shards it hands over and which it loads.
//!
//! It never touches etcd, the clock, the runtime or randomness: every
//! input carries `now` (ms, by the node's own monotonic clock), and the
//! shell drains [`Output`]s with [`NodeMachine::poll_output`], performs
//! each and feeds its outcome back. Two shells run it: `node.rs` over
//! etcd and the runtime, and the simulator's `sim/cluster.rs` over its
//! lease store, so the simulator checks the node's own decisions.
//!
//! One step is in flight at a time (a join, a renewal, a round): a shell
//! calls [`NodeMachine::handle_timeout`] after each output it performed,
//! until no output is left, then waits until [`NodeMachine::poll_timeout`].

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::placement;
use crate::protocol::group::Millis;
use crate::protocol::shard::ShardId;

/// The longest time between two placement rounds (ms), so that a shard
/// released by a leaving node is taken soon whatever the TTL.
pub const PLACEMENT_INTERVAL_MS_MAX: u64 = 500;

/// How often a leaving node reads whether its shards have successors.
pub const HANDOVER_POLL_INTERVAL_MS: u64 = 50;

/// A node's intervals, all derived from its lease TTL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// The node's lease: a node that stops renewing it loses its shards
    /// this long after its last renewal.
    pub lease_ttl_ms: u64,
}

impl Timing {
    /// How often the lease is renewed: a third of the TTL, so that two
    /// renewals can fail before the lease ends.
    pub fn renew_interval_ms(&self) -> u64 {
        self.lease_ttl_ms / 3
    }

    /// How often placement runs: as often as renewals, at most
    /// [`PLACEMENT_INTERVAL_MS_MAX`] apart.
    pub fn placement_interval_ms(&self) -> u64 {
        self.renew_interval_ms().min(PLACEMENT_INTERVAL_MS_MAX)
    }

    /// How long a leaving node keeps answering (redirecting) while its
    /// shards find successors: a few placement rounds and loads, and
    /// never past a lease TTL (a successor that needs longer is not
    /// coming soon).
    pub fn handover_wait_ms(&self) -> u64 {
        (self.placement_interval_ms() * 10).min(self.lease_ttl_ms)
    }
}

/// What the shell does for the machine, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Take a new lease of the TTL; answer with
    /// [`NodeMachine::handle_lease_granted`].
    GrantLease,
    /// Register the node (`nodes/NAME`) under the lease just granted;
    /// answer with [`NodeMachine::handle_registered`]. Registered, the node
    /// goes on under that lease; else it keeps the one it had (a node
    /// that stepped down renews it, finds it gone and steps down again).
    Register,
    /// Renew the lease; answer with [`NodeMachine::handle_renewed`].
    RenewLease,
    /// Serve no request from this time on (the machine's clock), until
    /// told a later one: the lease's end, counted from before the grant or
    /// the renewal was sent, so never later than the store ends it.
    ServeUntil(Millis),
    /// Stop serving every shard (their claims are void with the lease:
    /// none is released) and revoke the lease if the store answers; a
    /// [`Output::GrantLease`] follows.
    StepDown(StepDownReason),
    /// Drop (unload) every shard whose last write did not land or went
    /// unanswered: its core may be ahead of the store, and loading it
    /// again replays exactly what landed.
    DropFailedShards,
    /// Read the live nodes and the shards' owners at one revision; answer
    /// with [`NodeMachine::handle_view`].
    ReadView,
    /// Release this node's own claim of a shard it does not serve (the
    /// claim's answer was lost, or the load after it failed): nobody else
    /// may take the shard while it stands, and no unload would release it.
    ReleaseStaleClaim(ShardId),
    /// Unload the shard, which releases its claim: the plan gives it to
    /// `to`.
    HandOver { shard: ShardId, to: Option<String> },
    /// Claim the shard and replay its log: the plan gives it to this node
    /// and it is free (or this node's own claim).
    Load(ShardId),
}

/// Why a node steps down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepDownReason {
    /// The store answered that it no longer knows the lease.
    LeaseGone,
    /// Renewing failed until past the lease's end by the node's clock.
    LeaseEndedUnrenewed,
}

/// How a renewal went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// The lease lives on for `ttl_ms` from when the renewal was sent.
    Renewed { ttl_ms: u64 },
    /// The store answered that the lease is gone.
    LeaseGone,
    /// No answer (or an error): the lease may still live.
    Failed,
}

/// How a registration went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Registration {
    Registered,
    /// A live registration (of this node's earlier lease, not yet ended)
    /// holds the name.
    NameTaken,
    /// No answer (or an error).
    Failed,
}

/// What a placement round read and what the node serves now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PlacementInput {
    /// The live nodes that may own shards, in name order.
    pub nodes: Vec<String>,
    /// The shards' owners, at the revision the nodes were read at.
    pub owners: BTreeMap<ShardId, String>,
    /// The shards this node serves (after dropping the failed ones).
    pub served: BTreeSet<ShardId>,
}

/// The step whose outcome the machine waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Awaiting {
    /// A grant; `then_round`: a placement round follows a join that
    /// succeeds.
    Grant {
        then_round: bool,
    },
    /// A registration under the lease granted at `granted_ms`.
    Register {
        then_round: bool,
        granted_ms: Millis,
    },
    Renewal {
        sent_ms: Millis,
    },
    View,
}

/// A cluster node's decisions (see the module doc).
#[derive(Debug)]
pub struct NodeMachine {
    name: String,
    shard_count: u32,
    timing: Timing,
    /// When the lease ends unless renewed, by this node's clock; `None`:
    /// the node has not joined yet. A node that stepped down keeps its old
    /// lease's end until it registers under a new one.
    lease_ends_ms: Option<Millis>,
    registered: bool,
    /// Whether a renewal that fails past the lease's end steps down (only
    /// a deliberately broken node in the simulator does not).
    step_down_at_lease_end: bool,
    next_renew_ms: Millis,
    next_round_ms: Millis,
    awaiting: Option<Awaiting>,
    outputs: VecDeque<Output>,
}

impl NodeMachine {
    /// A node that has not joined yet: [`Self::join`] starts it.
    pub fn new(name: String, shard_count: u32, timing: Timing) -> Self {
        NodeMachine {
            name,
            shard_count,
            timing,
            lease_ends_ms: None,
            registered: false,
            step_down_at_lease_end: true,
            next_renew_ms: Millis::MAX,
            next_round_ms: Millis::MAX,
            awaiting: None,
            outputs: VecDeque::new(),
        }
    }

    /// A node that joined with a lease granted at `granted_ms` (counted
    /// from before the grant was sent): its first round is due now, its
    /// first renewal one interval on.
    pub fn joined(
        name: String,
        shard_count: u32,
        timing: Timing,
        granted_ms: Millis,
        now: Millis,
    ) -> Self {
        let mut machine = NodeMachine::new(name, shard_count, timing);
        let ends = granted_ms + timing.lease_ttl_ms;
        machine.lease_ends_ms = Some(ends);
        machine.registered = true;
        machine.next_renew_ms = now + timing.renew_interval_ms();
        machine.next_round_ms = now;
        machine.outputs.push_back(Output::ServeUntil(ends));
        machine
    }

    /// Makes a renewal that fails past the lease's end retry instead of
    /// stepping down: a deliberately broken node, for the simulator to
    /// show that its checks catch one.
    pub fn keep_serving_past_lease_end(&mut self) {
        self.step_down_at_lease_end = false;
    }

    pub fn timing(&self) -> Timing {
        self.timing
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the node holds a registration under a live lease.
    pub fn registered(&self) -> bool {
        self.registered
    }

    /// When the node next has something due by itself: a renewal or a
    /// round.
    pub fn poll_timeout(&self) -> Millis {
        self.next_renew_ms.min(self.next_round_ms)
    }

    /// Sets when the next renewal and round are due: the phase of the
    /// node's timers, which a shell that models process scheduling (the
    /// simulator: staggered starts, a pause that ends) draws.
    pub fn set_timers(&mut self, renew_at_ms: Millis, round_at_ms: Millis) {
        self.next_renew_ms = renew_at_ms;
        self.next_round_ms = round_at_ms;
    }

    /// The next thing to do, if any.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// Starts joining: takes a lease, then registers under it.
    pub fn join(&mut self, _now: Millis) {
        self.start_join(false);
    }

    /// Starts what is due at `now`, a renewal before a round, unless a
    /// step is in flight or outputs wait to be performed.
    pub fn handle_timeout(&mut self, now: Millis) {
        if self.awaiting.is_some() || !self.outputs.is_empty() {
            return;
        }
        if self.next_renew_ms <= now {
            self.next_renew_ms = now + self.timing.renew_interval_ms();
            if self.lease_ends_ms.is_none() {
                self.start_join(false);
            } else {
                self.awaiting = Some(Awaiting::Renewal { sent_ms: now });
                self.outputs.push_back(Output::RenewLease);
            }
            return;
        }
        if self.next_round_ms <= now {
            self.next_round_ms = now + self.timing.placement_interval_ms();
            // A node that stepped down and could not join again places
            // on: what it would claim under its old lease is refused.
            if self.lease_ends_ms.is_some() {
                self.start_placement();
            } else {
                self.start_join(true);
            }
        }
    }

    fn start_join(&mut self, then_round: bool) {
        self.awaiting = Some(Awaiting::Grant { then_round });
        self.outputs.push_back(Output::GrantLease);
    }

    fn start_placement(&mut self) {
        self.awaiting = Some(Awaiting::View);
        self.outputs.push_back(Output::DropFailedShards);
        self.outputs.push_back(Output::ReadView);
    }

    /// The outcome of [`Output::GrantLease`], sent at `sent_ms`: `true` if
    /// a lease was granted.
    pub fn handle_lease_granted(&mut self, sent_ms: Millis, granted: bool) {
        let Some(Awaiting::Grant { then_round }) = self.awaiting.take() else {
            panic!("a lease granted that the machine did not ask for");
        };
        if !granted {
            return;
        }
        self.awaiting = Some(Awaiting::Register {
            then_round,
            granted_ms: sent_ms,
        });
        self.outputs.push_back(Output::Register);
    }

    /// The outcome of [`Output::Register`].
    pub fn handle_registered(&mut self, registration: Registration) {
        let Some(Awaiting::Register {
            then_round,
            granted_ms,
        }) = self.awaiting.take()
        else {
            panic!("a registration the machine did not ask for");
        };
        if registration != Registration::Registered {
            return;
        }
        let ends = granted_ms + self.timing.lease_ttl_ms;
        self.lease_ends_ms = Some(ends);
        self.registered = true;
        self.outputs.push_back(Output::ServeUntil(ends));
        if then_round {
            self.start_placement();
        }
    }

    /// The outcome of [`Output::RenewLease`], heard at `now`: renewed, the
    /// lease's end moves to its send time plus the TTL; gone, or failed
    /// past the lease's end, the node steps down and joins again.
    pub fn handle_renewed(&mut self, now: Millis, renewal: Renewal) {
        let Some(Awaiting::Renewal { sent_ms }) = self.awaiting.take() else {
            panic!("a renewal the machine did not ask for");
        };
        let ends = self.lease_ends_ms.expect("renewing a lease it holds");
        let why = match renewal {
            Renewal::Renewed { ttl_ms } if ttl_ms > 0 => {
                let ends = sent_ms + ttl_ms;
                self.lease_ends_ms = Some(ends);
                self.outputs.push_back(Output::ServeUntil(ends));
                return;
            }
            Renewal::Renewed { .. } | Renewal::LeaseGone => StepDownReason::LeaseGone,
            Renewal::Failed if now < ends || !self.step_down_at_lease_end => return,
            Renewal::Failed => StepDownReason::LeaseEndedUnrenewed,
        };
        self.registered = false;
        self.outputs.push_back(Output::StepDown(why));
        self.start_join(false);
    }

    /// The outcome of [`Output::ReadView`] (`None`: the read failed): the
    /// node's part of the [`placement::plan`], as outputs. A claim of its
    /// own that the plan takes from it is released (not served) or handed
    /// over (served); a shard the plan gives it is loaded if free or its
    /// own claim, and not served yet.
    pub fn handle_view(&mut self, view: Option<&PlacementInput>) {
        let Some(Awaiting::View) = self.awaiting.take() else {
            panic!("a view the machine did not ask for");
        };
        let Some(view) = view else {
            return;
        };
        let plan = placement::plan(self.shard_count, &view.nodes, &view.owners);
        let me = &self.name;
        for (&shard, owner) in &view.owners {
            if owner != me || plan.get(&shard) == Some(me) {
                continue;
            }
            self.outputs.push_back(if view.served.contains(&shard) {
                Output::HandOver {
                    shard,
                    to: plan.get(&shard).cloned(),
                }
            } else {
                Output::ReleaseStaleClaim(shard)
            });
        }
        for (&shard, owner) in &plan {
            // Free, or this node's own claim of a shard it does not serve
            // now (see above, and a step-down that kept its lease).
            let claimable = view.owners.get(&shard).is_none_or(|held| held == me);
            if owner == me && claimable && !view.served.contains(&shard) {
                self.outputs.push_back(Output::Load(shard));
            }
        }
    }
}

#[cfg(test)]
#[path = "node_machine_tests.rs"]
mod tests;
