//! A group's durable state and the records that change it. Every change the
//! core makes is a [`Record`]; [`Group::apply`] is the only code that
//! mutates a group, for live changes and for replay alike. Transient data
//! (when each member was last heard from, an assignor call in flight) lives
//! beside it in [`Liveness`] and is rebuilt, not replayed.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::reconcile::{Holdings, MemberAssignment};

/// Milliseconds on the caller's clock; the core never reads a clock.
pub type Millis = u64;

/// A task: one partition of one topic. Keyed by name, so that adding
/// partitions or topics renumbers nothing. In JSON it is `[topic, partition]`,
/// as in DESIGN.md's offline contract.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(from = "(String, u32)", into = "(String, u32)")]
pub struct TaskRef {
    pub topic: String,
    pub partition: u32,
}

impl TaskRef {
    pub fn new(topic: &str, partition: u32) -> Self {
        TaskRef {
            topic: topic.to_owned(),
            partition,
        }
    }
}

impl From<(String, u32)> for TaskRef {
    fn from((topic, partition): (String, u32)) -> Self {
        TaskRef { topic, partition }
    }
}

impl From<TaskRef> for (String, u32) {
    fn from(task: TaskRef) -> Self {
        (task.topic, task.partition)
    }
}

/// One topic of a group's task set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicConfig {
    pub name: String,
    pub partitions: u32,
}

/// Who places learners (warm-up copies) in a group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LearnerMode {
    /// The host makes every assignor safe: an active task that the target
    /// moves to a member not caught up on it stays on its owner, and the new
    /// owner gets a learner first (the assignor's own learners are kept too).
    #[default]
    Host,
    /// The assignor's learners are used as they are, with no host check.
    Assignor,
    /// No learners: tasks move as soon as their owner releases them.
    Off,
}

/// A group's configuration, set by an admin. Every field but `topics` has a
/// default, so the smallest config is `{"topics": [...]}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupConfig {
    pub topics: Vec<TopicConfig>,
    /// A built-in assignor name or a module reference.
    #[serde(default = "defaults::assignor")]
    pub assignor: String,
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// How long a silent dynamic member stays in the group.
    #[serde(default = "defaults::session_timeout_ms")]
    pub session_timeout_ms: u64,
    /// How long a silent (or temporarily left) static member keeps its slot.
    #[serde(default = "defaults::registration_timeout_ms")]
    pub registration_timeout_ms: u64,
    /// How long arrivals are batched into one new target, and the longest a
    /// member may take to release a task before it is fenced.
    #[serde(default = "defaults::expansion_timeout_ms")]
    pub expansion_timeout_ms: u64,
    /// How often members should heartbeat.
    #[serde(default = "defaults::heartbeat_interval_ms")]
    pub heartbeat_interval_ms: u64,
    /// Who places learners.
    #[serde(default)]
    pub learners: LearnerMode,
    /// A member whose reported lag on a task is at or under this counts as
    /// caught up on it.
    #[serde(default = "defaults::acceptable_recovery_lag")]
    pub acceptable_recovery_lag: u64,
    /// The most learners the host keeps in the group at once.
    #[serde(default = "defaults::max_learners")]
    pub max_learners: u32,
    /// While learners exist, the assignor is re-asked this often as a safety
    /// net (a learner catching up re-asks at once).
    #[serde(default = "defaults::probing_interval_ms")]
    pub probing_interval_ms: u64,
    /// How long a draining member keeps tasks whose learners elsewhere have
    /// not caught up; then they move anyway and the member is fenced.
    #[serde(default = "defaults::scale_down_timeout_ms")]
    pub scale_down_timeout_ms: u64,
    /// Limits on this group's assignor calls, each under the host's
    /// ceiling.
    #[serde(default)]
    pub assignor_limits: CallLimits,
    /// The assignor that answers when the bound one fails (a trap, a
    /// limit, an invalid answer): the failure still shows on the group,
    /// and the group still gets a target.
    #[serde(default)]
    pub fallback_assignor: Option<String>,
    /// The sha256 (lowercase hex) of the token members must send as a
    /// bearer token, if the group has one. The API sets it from a
    /// plaintext `member_token` and never shows it.
    #[serde(default)]
    pub member_token_sha256: Option<String>,
}

/// Limits one binding puts on its assignor calls. Each lowers the host's
/// ceiling (the limits `assignd serve` was started with), never raises it;
/// an unset limit is the ceiling.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallLimits {
    /// Fuel one call may burn (about one unit per wasm instruction).
    #[serde(default)]
    pub fuel_max: Option<u64>,
    /// Wall-clock time one call may take.
    #[serde(default)]
    pub time_limit_ms: Option<u64>,
    /// Memory the guest may grow to.
    #[serde(default)]
    pub memory_max_mib: Option<u64>,
}

/// What a group's assignor binding sets: the part of [`GroupConfig`] that
/// `PUT .../assignor` and a rollback change, and that a [`Binding`] keeps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BindingSpec {
    pub assignor: String,
    pub params: BTreeMap<String, String>,
    pub limits: CallLimits,
    pub fallback: Option<String>,
}

impl BindingSpec {
    /// A binding to `assignor` with no params, limits or fallback.
    pub fn assignor(assignor: &str) -> Self {
        BindingSpec {
            assignor: assignor.to_owned(),
            params: BTreeMap::new(),
            limits: CallLimits::default(),
            fallback: None,
        }
    }
}

/// The defaults of [`GroupConfig`], close to Kafka's where Kafka has one.
pub mod defaults {
    pub fn assignor() -> String {
        "sticky".into()
    }
    /// KIP-848's group.consumer.session.timeout.ms.
    pub fn session_timeout_ms() -> u64 {
        45_000
    }
    pub fn registration_timeout_ms() -> u64 {
        120_000
    }
    pub fn expansion_timeout_ms() -> u64 {
        3_000
    }
    pub fn heartbeat_interval_ms() -> u64 {
        3_000
    }
    /// Kafka Streams' acceptable.recovery.lag.
    pub fn acceptable_recovery_lag() -> u64 {
        10_000
    }
    /// Kafka Streams' max.warmup.replicas.
    pub fn max_learners() -> u32 {
        2
    }
    pub fn probing_interval_ms() -> u64 {
        60_000
    }
    pub fn scale_down_timeout_ms() -> u64 {
        300_000
    }
}

impl GroupConfig {
    /// A config with the given topics and every default.
    pub fn with_topics(topics: Vec<TopicConfig>) -> Self {
        GroupConfig {
            topics,
            assignor: defaults::assignor(),
            params: BTreeMap::new(),
            session_timeout_ms: defaults::session_timeout_ms(),
            registration_timeout_ms: defaults::registration_timeout_ms(),
            expansion_timeout_ms: defaults::expansion_timeout_ms(),
            heartbeat_interval_ms: defaults::heartbeat_interval_ms(),
            learners: LearnerMode::default(),
            acceptable_recovery_lag: defaults::acceptable_recovery_lag(),
            max_learners: defaults::max_learners(),
            probing_interval_ms: defaults::probing_interval_ms(),
            scale_down_timeout_ms: defaults::scale_down_timeout_ms(),
            assignor_limits: CallLimits::default(),
            fallback_assignor: None,
            member_token_sha256: None,
        }
    }

    /// The binding this config sets.
    pub fn binding_spec(&self) -> BindingSpec {
        BindingSpec {
            assignor: self.assignor.clone(),
            params: self.params.clone(),
            limits: self.assignor_limits,
            fallback: self.fallback_assignor.clone(),
        }
    }

    /// Sets the binding part of this config.
    pub fn set_binding(&mut self, spec: BindingSpec) {
        self.assignor = spec.assignor;
        self.params = spec.params;
        self.assignor_limits = spec.limits;
        self.fallback_assignor = spec.fallback;
    }
}

/// What the target gives one slot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotTarget {
    /// Tasks the slot processes (granted once their old owner released them).
    pub active: BTreeSet<TaskRef>,
    /// Tasks the slot warms up (replays state for) before taking them over.
    pub learner: BTreeSet<TaskRef>,
    /// Hot copies kept for failover.
    pub standby: BTreeSet<TaskRef>,
}

/// Why a member left the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RemovalReason {
    /// It asked to leave.
    Left,
    /// Its session or registration timeout passed.
    Expired,
    /// It held tasks past the expansion timeout after being asked to release
    /// them.
    Fenced,
    /// It was draining and its scale-down timeout passed.
    DrainTimedOut,
}

impl RemovalReason {
    /// The reason as a metric label and log field.
    pub fn label(self) -> &'static str {
        match self {
            RemovalReason::Left => "left",
            RemovalReason::Expired => "expired",
            RemovalReason::Fenced => "fenced",
            RemovalReason::DrainTimedOut => "drain_timed_out",
        }
    }
}

/// A member slot: one worker identity. A dynamic member's slot is its
/// member id; a static member's slot is its name, and survives restarts
/// (each restart is a new incarnation with a new member id).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// The member id the current incarnation must send.
    pub member_id: String,
    /// The static member name, if the member is static.
    pub name: Option<String>,
    pub topics: BTreeSet<String>,
    pub rack: Option<String>,
    pub capacity: u32,
    /// A static member that left temporarily (it keeps its slot until its
    /// registration timeout).
    pub away: bool,
    /// Asked to leave the group gracefully: the assignor no longer sees it,
    /// its tasks move as learners elsewhere catch up, then it may exit.
    #[serde(default)]
    pub draining: bool,
}

/// Every change the core makes to a group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record {
    /// A group was created or its config replaced.
    GroupConfigured { group: String, config: GroupConfig },
    /// A new slot, or a new incarnation of a static slot (which fences the
    /// previous member id).
    MemberJoined {
        group: String,
        slot: String,
        member: Member,
    },
    /// A static member left temporarily, or came back.
    MemberAway {
        group: String,
        slot: String,
        away: bool,
    },
    /// A slot is gone; its tasks are free at once.
    MemberRemoved {
        group: String,
        slot: String,
        reason: RemovalReason,
    },
    /// The group needs a new target.
    GroupEpochBumped { group: String, epoch: u64 },
    /// The target for an epoch, per slot: the assignor's answer after the
    /// host's learner safety.
    TargetInstalled {
        group: String,
        epoch: u64,
        target: BTreeMap<String, SlotTarget>,
    },
    /// A member was asked to drain (by an admin or itself).
    MemberDraining { group: String, slot: String },
    /// A member's reconciled assignment.
    MemberReconciled {
        group: String,
        slot: String,
        assignment: MemberAssignment<TaskRef>,
    },
    /// A join without a name switched the group to dynamic membership:
    /// every static slot becomes a dynamic one keyed by its member id.
    NameMapDropped { group: String },
    /// The group's complete durable state (static name map, epochs, target,
    /// holdings), written each time the group becomes stable. Applying it
    /// replaces the group, so every earlier record of the group is garbage
    /// the log may compact away.
    GroupSnapshot { group: String, state: Box<Group> },
    /// The group was bound to an assignor and params (at creation, by a
    /// config change, by `PUT .../assignor`, or by a rollback): sets
    /// `config.assignor` / `config.params` and appends to the history.
    AssignorBound { group: String, binding: Binding },
}

/// One assignor binding of a group, as kept in its history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// 1 for the group's first binding, one more for each later one.
    pub seq: u64,
    /// The assignor reference as written (built-in name, module id, or
    /// `name@version`).
    pub assignor: String,
    pub params: BTreeMap<String, String>,
    /// Limits on the binding's calls, under the host's ceilings.
    pub limits: CallLimits,
    /// The assignor that answers when this one fails.
    pub fallback: Option<String>,
    /// The group epoch the binding took effect at.
    pub epoch: u64,
    /// The runtime's clock when it was bound (milliseconds since that
    /// host process started: comparable within one run only).
    pub at_ms: Millis,
    /// The `seq` of the binding this one rolled back to, if it is a
    /// rollback.
    pub rollback_to: Option<u64>,
}

impl Binding {
    /// What this binding set.
    pub fn spec(&self) -> BindingSpec {
        BindingSpec {
            assignor: self.assignor.clone(),
            params: self.params.clone(),
            limits: self.limits,
            fallback: self.fallback.clone(),
        }
    }
}

/// Bindings kept per group; the oldest are forgotten past this.
pub const BINDINGS_MAX: usize = 32;

impl Record {
    pub fn group(&self) -> &str {
        match self {
            Record::GroupConfigured { group, .. }
            | Record::MemberJoined { group, .. }
            | Record::MemberAway { group, .. }
            | Record::MemberRemoved { group, .. }
            | Record::GroupEpochBumped { group, .. }
            | Record::TargetInstalled { group, .. }
            | Record::MemberReconciled { group, .. }
            | Record::MemberDraining { group, .. }
            | Record::GroupSnapshot { group, .. }
            | Record::AssignorBound { group, .. }
            | Record::NameMapDropped { group } => group,
        }
    }
}

/// A group's durable state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub name: String,
    pub config: GroupConfig,
    /// Bumped whenever the group needs a new target.
    pub group_epoch: u64,
    /// The epoch of the installed target.
    pub target_epoch: u64,
    /// Slots by slot key.
    pub members: BTreeMap<String, Member>,
    /// The installed target per slot.
    pub target: BTreeMap<String, SlotTarget>,
    /// What each slot holds now, and who holds each task.
    #[serde(with = "holdings_by_slot")]
    pub holdings: Holdings<TaskRef>,
    /// Member ids of earlier incarnations (and of removed members) whose
    /// requests must be refused as fenced, oldest first.
    pub fenced_member_ids: std::collections::VecDeque<String>,
    /// Member ids issued so far in this group; the next id derives from it.
    pub member_ids_issued: u64,
    /// Once a group has fallen back to dynamic membership, names are
    /// ignored.
    pub dynamic_only: bool,
    /// The target epoch of the last [`Record::GroupSnapshot`].
    pub snapshot_epoch: u64,
    /// The last [`BINDINGS_MAX`] assignor bindings, oldest first; the last
    /// one is the current binding.
    pub bindings: std::collections::VecDeque<Binding>,
}

/// Holdings go to disk as each slot's assignment; the task → holder index
/// is rebuilt on load.
pub(crate) mod holdings_by_slot {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{Holdings, MemberAssignment, TaskRef};

    pub fn serialize<S: Serializer>(h: &Holdings<TaskRef>, s: S) -> Result<S::Ok, S::Error> {
        let by_slot: BTreeMap<&String, &MemberAssignment<TaskRef>> = h.members().collect();
        by_slot.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Holdings<TaskRef>, D::Error> {
        let by_slot = BTreeMap::<String, MemberAssignment<TaskRef>>::deserialize(d)?;
        let mut holdings: Holdings<TaskRef> = Holdings::default();
        for (slot, assignment) in by_slot {
            // A task held twice (by two slots, or active and released by
            // one) would trip `Holdings::set`: refuse the snapshot instead.
            if let Some(task) = assignment.held().find(|task| {
                holdings.holder(task).is_some()
                    || assignment.revoking.contains(task) && assignment.active.contains(task)
            }) {
                return Err(serde::de::Error::custom(format!(
                    "snapshot holds {task:?} twice"
                )));
            }
            holdings.set(&slot, assignment);
        }
        Ok(holdings)
    }
}

/// Fenced ids kept per group to tell "fenced" from "unknown"; the oldest
/// are forgotten past this, and then answer "unknown member".
pub const FENCED_MEMBER_IDS_MAX: usize = 1024;

impl Group {
    pub fn new(name: &str, config: GroupConfig) -> Self {
        Group {
            name: name.to_owned(),
            config,
            group_epoch: 0,
            target_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            holdings: Holdings::default(),
            fenced_member_ids: std::collections::VecDeque::new(),
            member_ids_issued: 0,
            dynamic_only: false,
            snapshot_epoch: 0,
            bindings: std::collections::VecDeque::new(),
        }
    }

    /// The binding before the current one, which a rollback returns to.
    pub fn previous_binding(&self) -> Option<&Binding> {
        self.bindings
            .len()
            .checked_sub(2)
            .map(|i| &self.bindings[i])
    }

    /// The slot a join takes: `static:{name}` for a named member (unless
    /// the group dropped its name map), else its member id (empty while the
    /// host is still to issue one).
    pub fn join_slot(&self, member_name: Option<&str>, member_id: &str) -> String {
        match member_name.filter(|_| !self.dynamic_only) {
            Some(name) => format!("static:{name}"),
            None => member_id.to_owned(),
        }
    }

    /// The slot a member id belongs to, if it is current.
    pub fn slot_of(&self, member_id: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|(_, m)| m.member_id == member_id)
            .map(|(slot, _)| slot.as_str())
    }

    /// Whether every member holds exactly its target at the target epoch.
    pub fn is_stable(&self) -> bool {
        self.group_epoch == self.target_epoch
            && self.members.keys().all(|slot| {
                self.holdings.member(slot).is_some_and(|a| {
                    a.epoch == self.target_epoch
                        && a.revoking.is_empty()
                        && self
                            .target
                            .get(slot)
                            .map_or(a.active.is_empty(), |t| a.active == t.active)
                })
            })
    }

    /// The target of a slot (empty if the target does not name it).
    pub fn target_of(&self, slot: &str) -> &SlotTarget {
        static NOTHING: SlotTarget = SlotTarget {
            active: BTreeSet::new(),
            learner: BTreeSet::new(),
            standby: BTreeSet::new(),
        };
        self.target.get(slot).unwrap_or(&NOTHING)
    }

    /// Learners in the installed target.
    pub fn learner_count(&self) -> usize {
        self.target.values().map(|t| t.learner.len()).sum()
    }

    /// Every task of the group's topics.
    pub fn tasks(&self) -> impl Iterator<Item = TaskRef> + '_ {
        self.config
            .topics
            .iter()
            .flat_map(|t| (0..t.partitions).map(|p| TaskRef::new(&t.name, p)))
    }

    /// Applies one record: the only way a group changes.
    pub fn apply(&mut self, record: &Record) {
        debug_assert_eq!(record.group(), self.name);
        match record {
            Record::GroupConfigured { config, .. } => self.config = config.clone(),
            Record::MemberJoined { slot, member, .. } => {
                if let Some(previous) = self.members.get(slot) {
                    self.fence(previous.member_id.clone());
                }
                self.members.insert(slot.clone(), member.clone());
                self.member_ids_issued += 1;
            }
            Record::MemberAway { slot, away, .. } => {
                if let Some(member) = self.members.get_mut(slot) {
                    member.away = *away;
                }
            }
            Record::MemberRemoved { slot, .. } => {
                if let Some(member) = self.members.remove(slot) {
                    self.fence(member.member_id);
                }
                self.holdings.remove(slot);
                self.target.remove(slot);
            }
            Record::GroupEpochBumped { epoch, .. } => self.group_epoch = *epoch,
            Record::TargetInstalled { epoch, target, .. } => {
                self.target_epoch = *epoch;
                self.target = target.clone();
            }
            Record::MemberReconciled {
                slot, assignment, ..
            } => self.holdings.set(slot, assignment.clone()),
            Record::GroupSnapshot { state, .. } => {
                assert_eq!(state.name, self.name, "a snapshot of another group");
                *self = (**state).clone();
            }
            Record::AssignorBound { binding, .. } => {
                self.config.set_binding(binding.spec());
                if self.bindings.len() == BINDINGS_MAX {
                    self.bindings.pop_front();
                }
                self.bindings.push_back(binding.clone());
            }
            Record::MemberDraining { slot, .. } => {
                if let Some(member) = self.members.get_mut(slot) {
                    member.draining = true;
                }
            }
            Record::NameMapDropped { .. } => {
                self.dynamic_only = true;
                // Each static slot is re-keyed by member id; its target and
                // holdings move with it.
                for (slot, key) in self.slots_without_names() {
                    let member = self.members.remove(&slot).expect("a member's slot");
                    self.members.insert(key.clone(), member);
                    if let Some(tasks) = self.target.remove(&slot) {
                        self.target.insert(key.clone(), tasks);
                    }
                    if let Some(held) = self.holdings.remove(&slot) {
                        self.holdings.set(&key, held);
                    }
                }
                for member in self.members.values_mut() {
                    member.name = None;
                    member.away = false;
                }
            }
        }
    }

    /// Where each static slot moves when the name map is dropped
    /// ([`Record::NameMapDropped`]): from `static:{name}` to its member's
    /// id. The core moves the slot's transient state the same way.
    pub fn slots_without_names(&self) -> Vec<(String, String)> {
        self.members
            .iter()
            .filter(|(_, member)| member.name.is_some())
            .map(|(slot, member)| (slot.clone(), member.member_id.clone()))
            .collect()
    }

    fn fence(&mut self, member_id: String) {
        if self.fenced_member_ids.len() == FENCED_MEMBER_IDS_MAX {
            self.fenced_member_ids.pop_front();
        }
        self.fenced_member_ids.push_back(member_id);
    }

    /// Whether `member_id` belonged to an earlier incarnation or a removed
    /// member (among the last [`FENCED_MEMBER_IDS_MAX`]).
    pub fn is_fenced(&self, member_id: &str) -> bool {
        self.fenced_member_ids.iter().any(|id| id == member_id)
    }
}

/// Transient per-group state, rebuilt rather than replayed: when each slot
/// was last heard from, when the current batch of changes started, which
/// target computation is in flight, since when each member has been asked
/// to release tasks. Every map keyed by slot is moved by
/// [`Liveness::rekey`] and cleared when the slot is removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Liveness {
    pub last_seen_ms: BTreeMap<String, Millis>,
    /// When the oldest change not yet in a target happened.
    pub pending_since_ms: Option<Millis>,
    /// The group epoch of the assignor call in flight.
    pub computing_epoch: Option<u64>,
    /// Since when each slot has had tasks to release.
    pub revoking_since_ms: BTreeMap<String, Millis>,
    /// The lags each slot last reported, per task (replaced by each report).
    pub lags: BTreeMap<String, BTreeMap<TaskRef, u64>>,
    /// Learners already reported caught up, so that each catch-up asks for
    /// one new target, not one per heartbeat.
    pub caught_up_signalled: BTreeSet<(String, TaskRef)>,
    /// Since when each draining slot has been draining (restarted from
    /// recovered state after a host restart).
    pub draining_since_ms: BTreeMap<String, Millis>,
    /// The latest end of a lease each slot was given (the answer's time
    /// plus its `lease_ms`). No timer removes the slot before it, so a
    /// config change that shortens a timeout cannot break a lease already
    /// given. Not kept over a restart: every timer then restarts later.
    pub lease_end_ms: BTreeMap<String, Millis>,
    /// Member ids this host saw replaced by a new incarnation of their
    /// name, with the name (oldest first, at most [`FENCED_MEMBER_IDS_MAX`]),
    /// so that the old incarnation is told `replaced` even when its
    /// heartbeat does not carry its name.
    pub replaced: std::collections::VecDeque<(String, String)>,
    /// Per slot taken over by a new incarnation while the previous one's
    /// lease still ran: the tasks that incarnation held, and when that lease
    /// ends. The new incarnation is granted them only then (invariant 1 for
    /// two live processes with one name).
    pub handover: BTreeMap<String, Handover>,
    /// When the assignor was last asked (for the probing interval).
    pub last_call_ms: Option<Millis>,
    /// The next call skips the expansion wait (a learner caught up, a drain
    /// began, a member departed).
    pub urgent: bool,
    /// The group's assignor failures since this host started (none if its
    /// assignor never failed): transient, not in the log.
    pub failures: Option<AssignorFailures>,
}

/// Tasks a replaced incarnation of a static slot may still process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Handover {
    /// The end of the last lease the host gave the replaced incarnation.
    pub until_ms: Millis,
    pub tasks: BTreeSet<TaskRef>,
}

/// A failed assignor call as the runtime reports it to the core: the
/// plugin error's code (`PluginError::code`) and its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssignorFailure {
    pub code: String,
    pub message: String,
}

impl AssignorFailure {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        AssignorFailure {
            code: code.into(),
            message: message.into(),
        }
    }
}

/// A bare message (the simulator's and the tests' native assignors).
impl From<String> for AssignorFailure {
    fn from(message: String) -> Self {
        AssignorFailure::new("assignor_error", message)
    }
}

/// A group's assignor failures: the last one, how many in a row (0 again
/// after a success) and in all, and the last success after a failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssignorFailures {
    /// The module the failed call ran.
    pub module: String,
    pub code: String,
    pub message: String,
    /// When the last failure was recorded (host ms).
    pub at_ms: Millis,
    pub consecutive: u64,
    pub total: u64,
    pub last_success_ms: Option<Millis>,
    /// The binding's fallback when the last failure happened.
    pub fallback: Option<String>,
    /// Whether the installed target is the fallback's answer (the bound
    /// assignor failed on the last call).
    pub served_by_fallback: bool,
    /// Targets the fallback answered in all.
    pub fallback_answers: u64,
    /// The fallback's own failure on the last call, if it failed too.
    pub fallback_error: Option<String>,
}

/// The retry delay after `consecutive` failures in a row: the expansion
/// timeout, doubled for each failure after the first, capped at
/// [`ASSIGNOR_RETRY_MAX_MS`] (never below the expansion timeout).
pub fn assignor_retry_ms(expansion_timeout_ms: u64, consecutive: u64) -> u64 {
    let doublings = consecutive.saturating_sub(1).min(20) as u32;
    expansion_timeout_ms
        .saturating_mul(1 << doublings)
        .min(ASSIGNOR_RETRY_MAX_MS)
        .max(expansion_timeout_ms)
}

/// The longest wait between retries of a failing assignor.
pub const ASSIGNOR_RETRY_MAX_MS: u64 = 60_000;

impl Liveness {
    /// Moves what is kept for slot `from` to slot `to` (a static slot
    /// re-keyed by member id when the name map is dropped), so that its
    /// deadlines, its lease promise, its lags and its caught-up signals
    /// carry on as they were instead of starting over.
    pub fn rekey(&mut self, from: &str, to: &str) {
        fn move_entry<V>(map: &mut BTreeMap<String, V>, from: &str, to: &str) {
            if let Some(value) = map.remove(from) {
                map.insert(to.to_owned(), value);
            }
        }
        move_entry(&mut self.last_seen_ms, from, to);
        move_entry(&mut self.revoking_since_ms, from, to);
        move_entry(&mut self.lags, from, to);
        move_entry(&mut self.draining_since_ms, from, to);
        move_entry(&mut self.lease_end_ms, from, to);
        move_entry(&mut self.handover, from, to);
        self.caught_up_signalled = std::mem::take(&mut self.caught_up_signalled)
            .into_iter()
            .map(|(slot, task)| {
                if slot == from {
                    (to.to_owned(), task)
                } else {
                    (slot, task)
                }
            })
            .collect();
    }

    /// Whether `slot` last reported a lag on `task` at or under `acceptable`.
    pub fn caught_up(&self, slot: &str, task: &TaskRef, acceptable: u64) -> bool {
        self.lags
            .get(slot)
            .and_then(|lags| lags.get(task))
            .is_some_and(|&lag| lag <= acceptable)
    }
}
