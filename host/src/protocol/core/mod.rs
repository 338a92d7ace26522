//! The coordinator core: admin commands, member heartbeats and ticks in,
//! with the time passed in; responses, records and assignor calls out. Each
//! handler checks its input before anything changes, then emits records,
//! and every record goes through [`Group::apply`] — the same path replay
//! takes. No clock, randomness, disk, network or wasm: member ids come from
//! a seed and a per-group counter, so a simulation is reproducible.
//!
//! This module holds the types of the core's inputs and outputs, the
//! [`Coordinator`] and the one path by which it changes ([`Coordinator::apply`],
//! through `emit`); the handlers are in child modules, one concern each, all
//! `impl Coordinator`:
//!
//! - `config`: a group's config, its limits, `configure`;
//! - `bindings`: `bind` and `rollback` (hot swaps);
//! - `heartbeat`: a member heartbeat and its answer;
//! - `membership`: join, leave, removal, drain;
//! - `leases`: the lease an answer gives, and after a restart;
//! - `load_reports`: a heartbeat's loads, checked and kept;
//! - `loads`: the load view (loads, shares, imbalance) every reader shares;
//! - `targets`: assignor calls in flight, their answers, installing targets;
//! - `learners`: caught-up signals and the host's learner safety;
//! - `swaps`: the index of tasks a learner safety's swap may move;
//! - `input`: what an assignor sees, and previews;
//! - `timers`: `tick`, over the groups that are due;
//! - `load_trigger`: when a group rebalances for load;
//! - `freeze`: what a frozen group's target keeps;
//! - `deadlines`: the timer table, `poll_timeout`.

use std::collections::{BTreeMap, BTreeSet};

use assignd_guest_sdk::GroupInput;
use assignd_wire::{ErrorCode, LoadItem, LoadReport};

use super::group::{CallLimits, Group, Liveness, Millis, RebalanceReason, Record, Slot, Task};

mod bindings;
mod config;
mod deadlines;
mod freeze;
mod heartbeat;
mod input;
mod learners;
mod leases;
mod load_reports;
mod load_trigger;
mod loads;
mod membership;
mod routes;
mod shadows;
mod swaps;
mod targets;
mod timers;

pub use load_trigger::LOAD_CHECK_MS_MIN;
pub use routes::ROUTES_VALID_MS_MAX;

pub(crate) use loads::load_view;
pub use loads::{LoadView, MemberLoad};

pub use config::check_config;
pub use deadlines::{Deadline, TimerKind, group_deadline, slot_deadline};
pub use shadows::{ShadowCall, ShadowSpec};
pub use targets::TARGET_ROWS_PER_PACE_MS;

/// Bounds on what a request may carry, checked before anything changes.
pub const GROUP_NAME_LEN_MAX: usize = 255;
pub const MEMBER_NAME_LEN_MAX: usize = 255;
/// A member-chosen member id (KIP-848: the client picks it, e.g. a random
/// UUID, and keeps it across retries of its join) is 1 to this many bytes
/// of `[A-Za-z0-9._-]`.
pub const MEMBER_ID_LEN_MAX: usize = 64;
pub const TOPICS_PER_GROUP_MAX: usize = 10_000;
pub const PARTITIONS_PER_TOPIC_MAX: u32 = 100_000;
pub const TASKS_PER_GROUP_MAX: u64 = 1_000_000;
pub const MEMBERS_PER_GROUP_MAX: usize = 10_000;
pub const TIMEOUT_MS_MAX: u64 = 24 * 3600 * 1000;
/// The most params an assignor sees, the group's and the host's
/// ([`HOST_PARAMS`]) together, and the longest key and value: the guest
/// SDK's input limits (`InputLimits::default()`), which a guest checks its
/// input against.
pub const PARAMS_MAX: usize = 64;
pub const PARAM_KEY_LEN_MAX: usize = 255;
pub const PARAM_LEN_MAX: usize = 1024;
/// The params the host gives every assignor call (from the group's config)
/// unless the group's params name them.
pub const HOST_PARAMS: [&str; 2] = ["acceptable_recovery_lag", "max_learners"];
pub const LEARNERS_PER_GROUP_MAX: u32 = 100_000;
/// The heartbeat interval of a member in a handoff: one with tasks to
/// release, with tasks waiting for their old owner's release, or with
/// learners (which take tasks over once caught up). Only while the handoff
/// lasts; the group's interval otherwise.
pub const HANDOFF_HEARTBEAT_INTERVAL_MS: u64 = 100;
/// Under backpressure (see [`HostLoad`]) a member is told to beat at
/// least this many times the host's lateness apart: fewer requests until
/// the host catches up.
pub const BACKPRESSURE_FACTOR: u64 = 2;
/// The longest interval backpressure asks for, as a fraction of the
/// member's session (or registration) timeout: a member may still miss
/// heartbeats before it expires.
pub const BACKPRESSURE_TIMEOUT_DIVISOR: u64 = 4;
/// The largest memory limit a binding may name (a guest is 32-bit).
pub const MEMORY_MAX_MIB_MAX: u64 = 4096;

/// A refused input; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("group {0:?} does not exist")]
    UnknownGroup(String),
    #[error("member {0:?} is not in group {1:?}")]
    UnknownMember(String, String),
    #[error(
        "member {member_id:?} was fenced: it was removed from the group (it left, expired, or held tasks too long); rejoin with member epoch 0"
    )]
    Fenced { member_id: String },
    /// Kafka's `FENCED_INSTANCE_ID`: rejoining would take the name back
    /// from the process that now has it, which would be fenced in turn.
    #[error(
        "member {member_id:?} was replaced: another incarnation joined with member name {member_name:?} and holds its tasks now; do not rejoin with this name (two processes share it): stop this one"
    )]
    Replaced {
        member_id: String,
        member_name: String,
    },
    #[error("member epoch {sent} is stale; the member is at epoch {current}")]
    StaleEpoch { sent: i64, current: u64 },
    #[error("member reports owning {task:?}, which the group never gave it")]
    NotOwned { task: Task },
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("group {0:?} is full ({MEMBERS_PER_GROUP_MAX} members)")]
    GroupFull(String),
    #[error("group {0:?} has no binding before its current one to roll back to")]
    NoPreviousBinding(String),
}

impl ProtocolError {
    /// The stable code of the API's error body.
    pub fn error_code(&self) -> ErrorCode {
        match self {
            ProtocolError::UnknownGroup(_) => ErrorCode::UnknownGroup,
            ProtocolError::UnknownMember(..) => ErrorCode::UnknownMember,
            ProtocolError::Fenced { .. } => ErrorCode::Fenced,
            ProtocolError::Replaced { .. } => ErrorCode::Replaced,
            ProtocolError::StaleEpoch { .. } => ErrorCode::StaleEpoch,
            ProtocolError::NotOwned { .. } => ErrorCode::NotOwned,
            ProtocolError::Invalid(_) => ErrorCode::InvalidRequest,
            ProtocolError::GroupFull(_) => ErrorCode::GroupFull,
            ProtocolError::NoPreviousBinding(_) => ErrorCode::NoPreviousBinding,
        }
    }

    /// [`Self::error_code`] as the error body spells it.
    pub fn code(&self) -> &'static str {
        self.error_code().as_str()
    }
}

/// The member epochs a heartbeat sends to join and to leave, as the wire
/// crate spells them for the host and the client alike.
pub use assignd_wire::{JOIN_EPOCH, LEAVE_EPOCH};

/// One member request: joins, heartbeats, reports owned tasks, leaves.
#[derive(Clone, Debug, PartialEq)]
pub struct Heartbeat {
    pub group: String,
    /// On join: empty (the host issues an id) or the id the member chose
    /// and keeps across retries of the join, so that a retried join is the
    /// same member. After: the member's id.
    pub member_id: String,
    /// A static member's name (KIP-345 group instance id).
    pub member_name: Option<String>,
    /// [`JOIN_EPOCH`], [`LEAVE_EPOCH`], or the epoch the member is at.
    pub member_epoch: i64,
    /// The subscription; required on join, optional after (unchanged).
    pub topics: Option<Vec<String>>,
    pub rack: Option<String>,
    pub capacity: Option<u32>,
    /// The tasks the member holds now, if it reports them.
    pub owned: Option<Vec<Task>>,
    /// How far behind the member's local state is, per task it has state
    /// for (learners, standbys), if it reports them. Transient: never
    /// logged, rebuilt by the next report.
    pub lags: Option<Vec<(Task, u64)>>,
    /// The member asks to drain (leave gracefully once its tasks moved).
    pub drain: bool,
    /// Where the member serves, for the routing table: on join, or a
    /// change (`Some("")` removes it); `None` leaves it as it is.
    pub endpoint: Option<String>,
    /// The member's metadata pairs, replacing the previous ones; `None`
    /// leaves them as they are.
    pub metadata: Option<BTreeMap<String, String>>,
    /// The loads of tasks it holds active, if it reports any; with its
    /// utilisation and load capacity. Transient, as lags are
    /// (`load_reports`).
    pub loads: Option<Vec<LoadItem>>,
    pub utilisation: Option<f64>,
    pub load_capacity: Option<f64>,
}

impl Heartbeat {
    /// A join request with every optional field empty.
    pub fn join(group: &str, member_name: Option<&str>, topics: Vec<String>) -> Self {
        Heartbeat {
            group: group.to_owned(),
            member_id: String::new(),
            member_name: member_name.map(str::to_owned),
            member_epoch: JOIN_EPOCH,
            topics: Some(topics),
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
}

/// The answer to a heartbeat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatResponse {
    pub member_id: String,
    pub member_epoch: u64,
    pub heartbeat_interval_ms: u64,
    /// Tasks the member may process.
    pub active: BTreeSet<Task>,
    /// Tasks the member must release, then report without.
    pub revoking: BTreeSet<Task>,
    /// Tasks to warm up (replay state for, report lag on); they become
    /// active once caught up.
    pub learner: BTreeSet<Task>,
    /// Hot copies to keep for failover.
    pub standby: BTreeSet<Task>,
    /// The member is draining.
    pub draining: bool,
    /// The member was draining and holds nothing more: it may leave (epoch
    /// -1) and exit.
    pub drained: bool,
    /// The member's lease: if the host hears nothing more from it, it may
    /// give the member's tasks to others this long after answering.
    pub lease_ms: u64,
    /// The member's lease while none of its later heartbeats reaches the
    /// coordinator (refused a connection, redirected, or refused
    /// `shard_unavailable`, as during a takeover): this long after
    /// answering, the host gives none of its tasks to others. At least
    /// `lease_ms`, and equal to it when the answer has tasks to revoke
    /// (see `Coordinator::unreached_lease_ms`).
    pub unreached_lease_ms: u64,
    /// While a later heartbeat is in flight, the unreached lease counts
    /// only until its send time plus this: after handling any later
    /// heartbeat, the host takes none of the member's tasks sooner than
    /// this (see `Coordinator::unreached_flight_ms`).
    pub unreached_flight_ms: u64,
    /// What the member should report of its loads next.
    pub load_report: LoadReport,
}

/// A group's assignor input for a preview, with the slot of each member
/// index and the task of each task index.
#[derive(Clone, Debug, PartialEq)]
pub struct PreviewInput {
    pub input: GroupInput,
    pub slots: Vec<Slot>,
    pub tasks: Vec<Task>,
    /// The time the input's loads are estimated at.
    pub at_ms: Millis,
}

/// A target computation the runtime must run (off any request path) and
/// answer with [`Coordinator::assignment_computed`].
#[derive(Clone, Debug, PartialEq)]
pub struct AssignorCall {
    pub group: String,
    pub epoch: u64,
    pub assignor: String,
    /// Why the group wants a new target: the first change of the batch
    /// (a retry keeps its call's).
    pub reason: RebalanceReason,
    /// The binding's limits on the call, under the host's ceilings.
    pub limits: CallLimits,
    /// The assignor to ask when `assignor` fails; its answer goes back
    /// through [`Coordinator::fallback_computed`].
    pub fallback: Option<String>,
    pub input: GroupInput,
}

/// What one input produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Output {
    /// Records to persist, in order; already applied.
    pub records: Vec<Record>,
    /// Target computations to start.
    pub assignor_calls: Vec<AssignorCall>,
    /// Shadow assignors' calls to start, each below its live call's
    /// priority.
    pub shadow_calls: Vec<ShadowCall>,
}

/// What the host knows of its own lateness, passed in with the time: how
/// far behind it runs (a tick that fired late, requests that waited to be
/// served). A member is never expired or fenced for time the host itself
/// was late, and while the host is late members are told to beat less
/// often (backpressure) rather than being expired.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostLoad {
    /// How late the host runs now, in ms (0: on time).
    pub late_ms: u64,
}

/// Every group and its transient state.
#[derive(Clone, Debug, Default)]
pub struct Coordinator {
    /// One entry per group, by name.
    groups: BTreeMap<String, GroupEntry>,
    /// Every group's deadlines, derived from the entries.
    deadlines: deadlines::Deadlines,
    /// The latest time an input carried: the handlers and the timer table
    /// rely on time never going back (the runtime reads its monotonic
    /// clock under the shard's lock).
    latest_ms: Millis,
    seed: u64,
    /// How much longer than its plain lease a member keeps its tasks while
    /// its heartbeats reach no coordinator ([`Coordinator::unreached_lease_ms`]):
    /// the time a takeover may take. 0 (no grace) on a single node.
    unreached_grace_ms: u64,
    /// Which assignors balance load, as the runtime said.
    assignor_loads: load_trigger::AssignorLoads,
}

/// A group: its durable state, which records change, and what the core
/// keeps of it besides (rebuilt after a restart, never logged).
#[derive(Clone, Debug, PartialEq)]
struct GroupEntry {
    group: Group,
    liveness: Liveness,
    /// The assignor call in flight, if one is.
    call: Option<CallInFlight>,
}

impl GroupEntry {
    fn new(group: Group) -> Self {
        GroupEntry {
            group,
            liveness: Liveness::default(),
            call: None,
        }
    }
}

/// An assignor call the runtime is running for a group, and what the
/// indices of its answer mean (the group may change while it runs).
#[derive(Clone, Debug, PartialEq, Eq)]
struct CallInFlight {
    /// The group epoch the call computes a target for: an answer for
    /// another epoch is discarded.
    epoch: u64,
    /// The slot of each member index of the call's input, in input order
    /// (draining members are left out).
    slots: Vec<Slot>,
    /// The task of each task index of the call's input.
    tasks: Vec<Task>,
    /// The assignor asked (a failure of it is the group's news only
    /// while it is still the group's).
    assignor: String,
}

/// Refuses a name that holds a character the name rule
/// ([`crate::protocol::names`]) refuses; `what` names the field.
fn refuse_invisible(what: &str, name: &str) -> Result<(), ProtocolError> {
    crate::protocol::names::check_name(what, name)
        .map_err(|refused| ProtocolError::Invalid(refused.to_string()))
}

fn invalid<T>(message: String) -> Result<T, ProtocolError> {
    Err(ProtocolError::Invalid(message))
}

impl Coordinator {
    /// A coordinator whose member ids derive from `seed`.
    pub fn new(seed: u64) -> Self {
        Coordinator {
            seed,
            ..Coordinator::default()
        }
    }

    /// Sets the unreached grace: how long a takeover of this core's shard
    /// may take (cluster mode), which every answer's `unreached_lease_ms`
    /// adds to its plain lease and a restart adds to the leases it assumes.
    pub fn set_unreached_grace_ms(&mut self, grace_ms: u64) {
        self.unreached_grace_ms = grace_ms;
    }

    pub fn group(&self, name: &str) -> Option<&Group> {
        self.groups.get(name).map(|entry| &entry.group)
    }

    pub fn groups(&self) -> impl Iterator<Item = &Group> {
        self.groups.values().map(|entry| &entry.group)
    }

    /// The group `name`, which the caller knows exists.
    fn group_at(&self, name: &str) -> &Group {
        &self.groups[name].group
    }

    /// The group `name` and its liveness, if it exists.
    fn entry(&self, name: &str) -> Option<(&Group, &Liveness)> {
        self.groups
            .get(name)
            .map(|entry| (&entry.group, &entry.liveness))
    }

    /// The group `name` and its liveness, which the caller knows exists.
    fn entry_mut(&mut self, name: &str) -> (&Group, &mut Liveness) {
        let entry = self
            .groups
            .get_mut(name)
            .expect("a group the caller checked");
        (&entry.group, &mut entry.liveness)
    }

    /// Takes the time an input carries, which is never before the last.
    fn observe_time(&mut self, now: Millis) {
        assert!(
            now >= self.latest_ms,
            "time went back: an input at {now} ms after one at {} ms",
            self.latest_ms
        );
        self.latest_ms = now;
    }

    /// Applies a record to its group (creating the group on its first
    /// config): the replay entry point, and the only way live handlers
    /// change state.
    pub fn apply(&mut self, record: &Record) {
        // What the record may have changed of the timer table: one slot's
        // deadline (with the group's own), the group's own, or the group's
        // whole (its timeouts, its name map).
        match record {
            Record::MemberJoined { group, slot, .. }
            | Record::MemberAway { group, slot, .. }
            | Record::MemberRemoved { group, slot, .. }
            | Record::MemberDraining { group, slot }
            | Record::MemberReconciled { group, slot, .. }
            | Record::HandoverStarted { group, slot }
            | Record::HandoverEnded { group, slot } => self.deadlines.mark_slot(group, slot),
            // Neither a timer nor a deadline depends on where a member
            // serves, or on the shadow.
            Record::MemberEndpointChanged { .. } | Record::ShadowBound { .. } => {}
            Record::GroupEpochBumped { group, .. } | Record::TargetInstalled { group, .. } => {
                self.deadlines.mark_group_deadline(group)
            }
            Record::GroupConfigured { group, .. }
            | Record::NameMapDropped { group }
            | Record::GroupSnapshot { group, .. }
            | Record::AssignorBound { group, .. } => self.deadlines.mark_group(group),
        }
        match record {
            Record::GroupConfigured { group, config } if !self.groups.contains_key(group) => {
                self.groups.insert(
                    group.clone(),
                    GroupEntry::new(Group::new(group, config.clone())),
                );
            }
            Record::GroupSnapshot { group, state } if !self.groups.contains_key(group) => {
                self.groups
                    .insert(group.clone(), GroupEntry::new((**state).clone()));
                return;
            }
            _ => {}
        }
        let entry = self
            .groups
            .get_mut(record.group())
            .expect("a record of a group that was never configured");
        entry.group.apply(record);
    }

    /// [`Coordinator::apply`] for a record the caller is done with: a
    /// snapshot's state is moved in rather than cloned. Recovery of a
    /// compacted log (one snapshot per group) is mostly this.
    pub fn apply_owned(&mut self, record: Record) {
        match record {
            Record::GroupSnapshot { group, state } => {
                assert_eq!(state.name, group, "a snapshot of another group");
                self.deadlines.mark_group(&group);
                // The group's liveness and call stay: a snapshot replaces
                // only its durable state, as `Group::apply` does.
                match self.groups.get_mut(&group) {
                    Some(entry) => entry.group = *state,
                    None => {
                        self.groups.insert(group, GroupEntry::new(*state));
                    }
                }
            }
            record => self.apply(&record),
        }
    }

    fn emit(&mut self, out: &mut Output, record: Record) {
        // What replay will check, the core must write (protocol/replay.rs).
        #[cfg(debug_assertions)]
        if let Err(e) = self.check_replay(&record) {
            panic!("the core emitted a record replay refuses: {e}: {record:?}");
        }
        self.hold_moves_for_served_tables(&record);
        self.apply(&record);
        out.records.push(record);
    }

    /// Writes the group's complete state as one record each time it becomes
    /// stable (the seed design's durable name map), so that the log can drop
    /// everything before it.
    fn snapshot_if_stable(&mut self, group_name: &str, now: Millis, out: &mut Output) {
        let Some(group) = self.group(group_name) else {
            return;
        };
        if group.target_epoch == 0
            || group.snapshot_epoch == group.target_epoch
            || !group.is_stable()
        {
            return;
        }
        let mut state = group.clone();
        state.snapshot_epoch = group.target_epoch;
        self.liveness_mut(group_name).rebalances.settled(now);
        self.emit(
            out,
            Record::GroupSnapshot {
                group: group_name.to_owned(),
                state: Box::new(state),
            },
        );
    }

    /// The group needs a new target for `reason`: bump its epoch and start
    /// (or join) the current batch of changes.
    fn bump(&mut self, group: &str, reason: RebalanceReason, now: Millis, out: &mut Output) {
        let epoch = self.group_at(group).group_epoch + 1;
        self.emit(
            out,
            Record::GroupEpochBumped {
                group: group.to_owned(),
                epoch,
            },
        );
        let liveness = self.liveness_mut(group);
        liveness.pending_since_ms.get_or_insert(now);
        liveness.rebalances.asked(reason);
        // Any change but a catch-up is served without the pace.
        liveness.catch_up_only = false;
    }

    /// [`Coordinator::bump`], and the target is asked for at once, without
    /// the expansion wait: tasks are without an owner, or waiting.
    fn bump_urgently(
        &mut self,
        group: &str,
        reason: RebalanceReason,
        now: Millis,
        out: &mut Output,
    ) {
        self.bump(group, reason, now, out);
        self.liveness_mut(group).urgent = true;
    }

    /// The transient state of group `group_name`, which the caller knows
    /// exists.
    fn liveness_mut(&mut self, group_name: &str) -> &mut Liveness {
        &mut self
            .groups
            .get_mut(group_name)
            .expect("a group the caller checked")
            .liveness
    }

    /// The lags each member of a group last reported.
    pub fn liveness(&self, group_name: &str) -> Option<&Liveness> {
        self.groups.get(group_name).map(|entry| &entry.liveness)
    }
}
