//! The coordinator core: admin commands, member heartbeats and ticks in,
//! with the time passed in; responses, records and assignor calls out. Each
//! handler checks its input before anything changes, then emits records,
//! and every record goes through [`Group::apply`] — the same path replay
//! takes. No clock, randomness, disk, network or wasm: member ids come from
//! a seed and a per-group counter, so a simulation is reproducible.

use std::collections::{BTreeMap, BTreeSet};

use assignd_guest_sdk::{Assignment, GroupInput, Member as InputMember, NO_MEMBER, Topic};

use super::group::{
    AssignorFailure, AssignorFailures, Binding, BindingSpec, CallLimits, FENCED_MEMBER_IDS_MAX,
    Group, GroupConfig, LearnerMode, Liveness, Member, Millis, Record, RemovalReason, SlotTarget,
    TaskRef, assignor_retry_ms,
};
use super::reconcile::{MemberAssignment, MemberState};

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
    NotOwned { task: TaskRef },
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("group {0:?} is full ({MEMBERS_PER_GROUP_MAX} members)")]
    GroupFull(String),
    #[error("group {0:?} has no binding before its current one to roll back to")]
    NoPreviousBinding(String),
}

impl ProtocolError {
    /// A short stable code for the API's error body.
    pub fn code(&self) -> &'static str {
        match self {
            ProtocolError::UnknownGroup(_) => "unknown_group",
            ProtocolError::UnknownMember(..) => "unknown_member",
            ProtocolError::Fenced { .. } => "fenced",
            ProtocolError::Replaced { .. } => "replaced",
            ProtocolError::StaleEpoch { .. } => "stale_epoch",
            ProtocolError::NotOwned { .. } => "not_owned",
            ProtocolError::Invalid(_) => "invalid_request",
            ProtocolError::GroupFull(_) => "group_full",
            ProtocolError::NoPreviousBinding(_) => "no_previous_binding",
        }
    }
}

/// The member epoch a heartbeat sends to join (with an empty member id,
/// for a host-issued one, or with the id the member chose).
pub const JOIN_EPOCH: i64 = 0;
/// The member epoch a heartbeat sends to leave (a static member's leave is
/// temporary: its slot waits for its registration timeout).
pub const LEAVE_EPOCH: i64 = -1;

/// One member request: joins, heartbeats, reports owned tasks, leaves.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    pub owned: Option<Vec<TaskRef>>,
    /// How far behind the member's local state is, per task it has state
    /// for (learners, standbys), if it reports them. Transient: never
    /// logged, rebuilt by the next report.
    pub lags: Option<Vec<(TaskRef, u64)>>,
    /// The member asks to drain (leave gracefully once its tasks moved).
    pub drain: bool,
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
    pub active: BTreeSet<TaskRef>,
    /// Tasks the member must release, then report without.
    pub revoking: BTreeSet<TaskRef>,
    /// Tasks to warm up (replay state for, report lag on); they become
    /// active once caught up.
    pub learner: BTreeSet<TaskRef>,
    /// Hot copies to keep for failover.
    pub standby: BTreeSet<TaskRef>,
    /// The member is draining.
    pub draining: bool,
    /// The member was draining and holds nothing more: it may leave (epoch
    /// -1) and exit.
    pub drained: bool,
    /// The member's lease: if the host hears nothing more from it, it may
    /// give the member's tasks to others this long after answering.
    pub lease_ms: u64,
}

/// A group's assignor input for a preview, with the slot of each member
/// index and the task of each task index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PreviewInput {
    pub input: GroupInput,
    pub slots: Vec<String>,
    pub tasks: Vec<TaskRef>,
}

/// A target computation the runtime must run (off any request path) and
/// answer with [`Coordinator::assignment_computed`].
#[derive(Clone, Debug, PartialEq)]
pub struct AssignorCall {
    pub group: String,
    pub epoch: u64,
    pub assignor: String,
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
    groups: BTreeMap<String, Group>,
    liveness: BTreeMap<String, Liveness>,
    /// The slots (in input order) and tasks of each call in flight.
    calls: BTreeMap<String, (u64, Vec<String>, Vec<TaskRef>)>,
    seed: u64,
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A character a name must not hold: a control character (NUL, CR, …),
/// or a Unicode format character (Cf: the bidirectional embeddings,
/// overrides and isolates, zero-width characters, the BOM, tags), which
/// shows a name as another one.
fn is_invisible(c: char) -> bool {
    c.is_control()
        || matches!(c as u32,
            0x00AD | 0x0600..=0x0605 | 0x061C | 0x06DD | 0x070F | 0x0890..=0x0891 | 0x08E2
            | 0x180E | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x206F
            | 0xFEFF | 0xFFF9..=0xFFFB | 0x110BD | 0x110CD | 0x13430..=0x1343F
            | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A | 0xE0001 | 0xE0020..=0xE007F)
}

/// Refuses a name (of a group, of a member) that holds an
/// [`is_invisible`] character.
fn refuse_invisible(what: &str, name: &str) -> Result<(), ProtocolError> {
    match name.chars().find(|&c| is_invisible(c)) {
        Some(c) => invalid(format!(
            "{what} {name:?} holds {c:?} (U+{:04X}): control, format and \
             bidirectional characters are refused",
            c as u32
        )),
        None => Ok(()),
    }
}

fn invalid<T>(message: String) -> Result<T, ProtocolError> {
    Err(ProtocolError::Invalid(message))
}

/// Refuses a member-chosen id that is empty, too long or has characters
/// outside `[A-Za-z0-9._-]` (host-issued ids, `m-` and hex, pass).
fn check_member_id(member_id: &str) -> Result<(), ProtocolError> {
    if member_id.is_empty()
        || member_id.len() > MEMBER_ID_LEN_MAX
        || !member_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return invalid(format!(
            "member_id must be empty (the host issues one) or 1 to {MEMBER_ID_LEN_MAX} bytes of A-Z, a-z, 0-9, '.', '_', '-'"
        ));
    }
    Ok(())
}

/// Counts one failure of a group's bound assignor in its transient
/// liveness, for the group's view and the retry backoff.
fn record_failure<'a>(
    liveness: &'a mut Liveness,
    group: &str,
    epoch: u64,
    config: &GroupConfig,
    failure: AssignorFailure,
    now: Millis,
) -> &'a mut AssignorFailures {
    let failures = liveness.failures.get_or_insert(AssignorFailures {
        module: String::new(),
        code: String::new(),
        message: String::new(),
        at_ms: now,
        consecutive: 0,
        total: 0,
        last_success_ms: None,
        fallback: None,
        served_by_fallback: false,
        fallback_answers: 0,
        fallback_error: None,
    });
    failures.module = config.assignor.clone();
    failures.code = failure.code;
    failures.message = failure.message;
    failures.at_ms = now;
    failures.consecutive += 1;
    failures.total += 1;
    failures.fallback = config.fallback_assignor.clone();
    tracing::warn!(
        group,
        epoch,
        module = failures.module,
        code = failures.code,
        message = failures.message,
        consecutive = failures.consecutive,
        fallback = failures.fallback,
        "assignor failed"
    );
    failures
}

/// Checks a group config against the limits.
pub fn check_config(config: &GroupConfig) -> Result<(), ProtocolError> {
    if config.topics.len() > TOPICS_PER_GROUP_MAX {
        return invalid(format!("more than {TOPICS_PER_GROUP_MAX} topics"));
    }
    let mut names = BTreeSet::new();
    let mut tasks = 0u64;
    for topic in &config.topics {
        if topic.name.is_empty() || topic.name.len() > MEMBER_NAME_LEN_MAX {
            return invalid(format!(
                "topic name {:?} must be 1 to {MEMBER_NAME_LEN_MAX} bytes",
                topic.name
            ));
        }
        if !names.insert(&topic.name) {
            return invalid(format!("topic {:?} appears twice", topic.name));
        }
        if topic.partitions > PARTITIONS_PER_TOPIC_MAX {
            return invalid(format!(
                "topic {:?}: {} partitions, more than the limit of {PARTITIONS_PER_TOPIC_MAX}",
                topic.name, topic.partitions
            ));
        }
        tasks += u64::from(topic.partitions);
    }
    if tasks > TASKS_PER_GROUP_MAX {
        return invalid(format!(
            "{tasks} tasks, more than the limit of {TASKS_PER_GROUP_MAX}"
        ));
    }
    for (name, value) in [
        ("session_timeout_ms", config.session_timeout_ms),
        ("registration_timeout_ms", config.registration_timeout_ms),
        ("expansion_timeout_ms", config.expansion_timeout_ms),
        ("heartbeat_interval_ms", config.heartbeat_interval_ms),
    ] {
        if value == 0 || value > TIMEOUT_MS_MAX {
            return invalid(format!(
                "{name} must be between 1 and {TIMEOUT_MS_MAX}, got {value}"
            ));
        }
    }
    if config.heartbeat_interval_ms >= config.session_timeout_ms {
        return invalid("heartbeat_interval_ms must be below session_timeout_ms".into());
    }
    // A static member heard from once per interval would otherwise expire
    // between any two heartbeats, rejoin, and bump the group for ever.
    if config.heartbeat_interval_ms >= config.registration_timeout_ms {
        return invalid("heartbeat_interval_ms must be below registration_timeout_ms".into());
    }
    if config.assignor.is_empty() || config.assignor.len() > MEMBER_NAME_LEN_MAX {
        return invalid("assignor must name a built-in or uploaded assignor".into());
    }
    // The assignor sees the group's params plus the ones the host adds
    // (`assignor_input`); together they must pass the guest SDK's input
    // check, or no call would ever answer.
    let added = HOST_PARAMS
        .iter()
        .filter(|key| !config.params.contains_key(**key))
        .count();
    if config.params.len() + added > PARAMS_MAX {
        return invalid(format!(
            "more than {} params: an assignor sees at most {PARAMS_MAX}, and the host adds {}",
            PARAMS_MAX - added,
            HOST_PARAMS.join(" and ")
        ));
    }
    if let Some((key, _)) = config
        .params
        .iter()
        .find(|(k, v)| k.is_empty() || k.len() > PARAM_KEY_LEN_MAX || v.len() > PARAM_LEN_MAX)
    {
        return invalid(format!(
            "param {key:?}: keys must be 1 to {PARAM_KEY_LEN_MAX} bytes and values at most {PARAM_LEN_MAX}"
        ));
    }
    for (name, value) in [
        ("probing_interval_ms", config.probing_interval_ms),
        ("scale_down_timeout_ms", config.scale_down_timeout_ms),
    ] {
        if value == 0 || value > TIMEOUT_MS_MAX {
            return invalid(format!(
                "{name} must be between 1 and {TIMEOUT_MS_MAX}, got {value}"
            ));
        }
    }
    if config.max_learners > LEARNERS_PER_GROUP_MAX {
        return invalid(format!(
            "max_learners must be at most {LEARNERS_PER_GROUP_MAX}, got {}",
            config.max_learners
        ));
    }
    if let Some(fallback) = &config.fallback_assignor
        && (fallback.is_empty() || fallback.len() > MEMBER_NAME_LEN_MAX)
    {
        return invalid("fallback_assignor must name a built-in or uploaded assignor".into());
    }
    let limits = &config.assignor_limits;
    for (name, value, max) in [
        ("fuel_max", limits.fuel_max, u64::MAX),
        ("time_limit_ms", limits.time_limit_ms, TIMEOUT_MS_MAX),
        ("memory_max_mib", limits.memory_max_mib, MEMORY_MAX_MIB_MAX),
    ] {
        if let Some(value) = value
            && (value == 0 || value > max)
        {
            return invalid(format!(
                "assignor limit {name} must be between 1 and {max}, got {value}"
            ));
        }
    }
    if let Some(digest) = &config.member_token_sha256
        && (digest.len() != 64
            || !digest
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    {
        return invalid("member_token_sha256 must be 64 lowercase hex digits".into());
    }
    Ok(())
}

impl Coordinator {
    /// A coordinator whose member ids derive from `seed`.
    pub fn new(seed: u64) -> Self {
        Coordinator {
            seed,
            ..Coordinator::default()
        }
    }

    pub fn group(&self, name: &str) -> Option<&Group> {
        self.groups.get(name)
    }

    pub fn groups(&self) -> impl Iterator<Item = &Group> {
        self.groups.values()
    }

    /// Applies a record to its group (creating the group on its first
    /// config): the replay entry point, and the only way live handlers
    /// change state.
    pub fn apply(&mut self, record: &Record) {
        match record {
            Record::GroupConfigured { group, config } if !self.groups.contains_key(group) => {
                self.groups
                    .insert(group.clone(), Group::new(group, config.clone()));
            }
            Record::GroupSnapshot { group, state } if !self.groups.contains_key(group) => {
                self.groups.insert(group.clone(), (**state).clone());
                return;
            }
            _ => {}
        }
        let group = self
            .groups
            .get_mut(record.group())
            .expect("a record of a group that was never configured");
        group.apply(record);
    }

    /// After recovery, before serving: the previous process may have
    /// answered any member just before it stopped, and how long that
    /// answer's lease runs was never logged. So every member that holds
    /// tasks is taken to hold the longest lease an answer could give it,
    /// from `now`: a new incarnation of its name (a takeover right after
    /// the restart) is granted its tasks only once that has passed, as
    /// invariant 1 asks of every other handover. Timers are not moved: a
    /// member's timeout from `now` is never shorter.
    pub fn restarted(&mut self, now: Millis) {
        for (name, group) in &self.groups {
            let liveness = self.liveness.entry(name.clone()).or_default();
            for (slot, member) in &group.members {
                if group
                    .holdings
                    .member(slot)
                    .is_some_and(|held| held.held().next().is_some())
                {
                    let end = now.saturating_add(lease_ms_max(&group.config, member));
                    let promised = liveness.lease_end_ms.entry(slot.clone()).or_insert(end);
                    *promised = (*promised).max(end);
                }
            }
        }
    }

    /// [`Coordinator::apply`] for a record the caller is done with: a
    /// snapshot's state is moved in rather than cloned. Recovery of a
    /// compacted log (one snapshot per group) is mostly this.
    pub fn apply_owned(&mut self, record: Record) {
        match record {
            Record::GroupSnapshot { group, state } => {
                assert_eq!(state.name, group, "a snapshot of another group");
                self.groups.insert(group, *state);
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
        self.apply(&record);
        out.records.push(record);
    }

    /// Writes the group's complete state as one record each time it becomes
    /// stable (the seed design's durable name map), so that the log can drop
    /// everything before it.
    fn snapshot_if_stable(&mut self, group_name: &str, out: &mut Output) {
        let Some(group) = self.groups.get(group_name) else {
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
        self.emit(
            out,
            Record::GroupSnapshot {
                group: group_name.to_owned(),
                state: Box::new(state),
            },
        );
    }

    /// The next host-issued id: derived from the seed, the group and the
    /// ids issued so far; one a member chose itself is skipped.
    fn next_member_id(&self, group: &Group) -> String {
        let mut h = splitmix(self.seed);
        for b in group.name.bytes() {
            h = splitmix(h ^ u64::from(b));
        }
        (0u64..)
            .map(|k| {
                format!(
                    "m-{:016x}",
                    splitmix(h ^ group.member_ids_issued.wrapping_add(k << 32))
                )
            })
            .find(|id| group.slot_of(id).is_none() && !group.is_fenced(id))
            .expect("an unused id among 2^64")
    }

    /// Creates a group or replaces its config. A change to the topics or
    /// the assignor asks for a new target.
    pub fn configure(
        &mut self,
        name: &str,
        config: GroupConfig,
        now: Millis,
    ) -> Result<Output, ProtocolError> {
        if name.is_empty() || name.len() > GROUP_NAME_LEN_MAX {
            return invalid(format!(
                "group name must be 1 to {GROUP_NAME_LEN_MAX} bytes"
            ));
        }
        refuse_invisible("group name", name)?;
        check_config(&config)?;
        let mut out = Output::default();
        let retarget = self.groups.get(name).is_none_or(|g| {
            g.config.topics != config.topics
                || g.config.assignor != config.assignor
                || g.config.params != config.params
                || g.config.learners != config.learners
                || g.config.acceptable_recovery_lag != config.acceptable_recovery_lag
                || g.config.max_learners != config.max_learners
        });
        if self.groups.get(name).is_some_and(|g| g.config == config) {
            return Ok(out);
        }
        let rebind = self
            .groups
            .get(name)
            .is_none_or(|g| g.config.binding_spec() != config.binding_spec());
        let binding = rebind.then(|| config.binding_spec());
        self.emit(
            &mut out,
            Record::GroupConfigured {
                group: name.to_owned(),
                config,
            },
        );
        if let Some(spec) = binding {
            self.emit_binding(name, spec, None, now, &mut out);
        }
        if retarget {
            self.bump(name, now, &mut out);
        }
        Ok(out)
    }

    /// Records a binding of `group` to `assignor` and `params`, taking
    /// effect at the next group epoch (the caller bumps it).
    fn emit_binding(
        &mut self,
        group: &str,
        spec: BindingSpec,
        rollback_to: Option<u64>,
        now: Millis,
        out: &mut Output,
    ) {
        let current = &self.groups[group];
        let binding = Binding {
            seq: current.bindings.back().map_or(1, |b| b.seq + 1),
            assignor: spec.assignor,
            params: spec.params,
            limits: spec.limits,
            fallback: spec.fallback,
            epoch: current.group_epoch + 1,
            at_ms: now,
            rollback_to,
        };
        self.emit(
            out,
            Record::AssignorBound {
                group: group.to_owned(),
                binding,
            },
        );
    }

    /// Binds a group to another assignor or params: a hot swap. The group
    /// epoch is bumped and the new target asked for at once (no expansion
    /// wait); members reach it cooperatively like any other target. The
    /// same binding again changes nothing. The caller has checked that the
    /// assignor exists.
    pub fn bind(
        &mut self,
        name: &str,
        spec: BindingSpec,
        now: Millis,
    ) -> Result<Output, ProtocolError> {
        let group = self
            .groups
            .get(name)
            .ok_or_else(|| ProtocolError::UnknownGroup(name.to_owned()))?;
        let mut config = group.config.clone();
        config.set_binding(spec.clone());
        check_config(&config)?;
        let mut out = Output::default();
        if group.config.binding_spec() == spec {
            return Ok(out);
        }
        self.swap(name, spec, None, now, &mut out);
        Ok(out)
    }

    /// Binds a group back to the binding before its current one (itself a
    /// new binding, so a second rollback returns, like `cd -`).
    pub fn rollback(&mut self, name: &str, now: Millis) -> Result<Output, ProtocolError> {
        let group = self
            .groups
            .get(name)
            .ok_or_else(|| ProtocolError::UnknownGroup(name.to_owned()))?;
        let previous = group
            .previous_binding()
            .ok_or_else(|| ProtocolError::NoPreviousBinding(name.to_owned()))?
            .clone();
        let mut out = Output::default();
        self.swap(name, previous.spec(), Some(previous.seq), now, &mut out);
        Ok(out)
    }

    fn swap(
        &mut self,
        name: &str,
        spec: BindingSpec,
        rollback_to: Option<u64>,
        now: Millis,
        out: &mut Output,
    ) {
        let group = &self.groups[name];
        if group.bindings.is_empty() {
            // A group from a log written before bindings were recorded:
            // record the binding it has, so that it can be rolled back to.
            let current = group.config.binding_spec();
            self.emit_binding(name, current, None, now, out);
        }
        self.emit_binding(name, spec, rollback_to, now, out);
        self.bump(name, now, out);
        self.liveness.get_mut(name).expect("bumped").urgent = true;
        self.maybe_call_assignor(name, now, out);
    }

    /// The group needs a new target: bump its epoch and start (or join) the
    /// current batch of changes.
    fn bump(&mut self, group: &str, now: Millis, out: &mut Output) {
        let epoch = self.groups[group].group_epoch + 1;
        self.emit(
            out,
            Record::GroupEpochBumped {
                group: group.to_owned(),
                epoch,
            },
        );
        let liveness = self.liveness.entry(group.to_owned()).or_default();
        liveness.pending_since_ms.get_or_insert(now);
    }

    /// Handles one member heartbeat, the host on time.
    pub fn heartbeat(
        &mut self,
        request: &Heartbeat,
        now: Millis,
    ) -> Result<(HeartbeatResponse, Output), ProtocolError> {
        self.heartbeat_loaded(request, now, HostLoad::default())
    }

    /// Handles one member heartbeat while the host runs `load.late_ms`
    /// late: the member is told to beat less often (backpressure).
    pub fn heartbeat_loaded(
        &mut self,
        request: &Heartbeat,
        now: Millis,
        load: HostLoad,
    ) -> Result<(HeartbeatResponse, Output), ProtocolError> {
        let group = self
            .groups
            .get(&request.group)
            .ok_or_else(|| ProtocolError::UnknownGroup(request.group.clone()))?;
        if let Some(name) = &request.member_name
            && (name.is_empty() || name.len() > MEMBER_NAME_LEN_MAX)
        {
            return invalid(format!(
                "member name must be 1 to {MEMBER_NAME_LEN_MAX} bytes"
            ));
        }
        if let Some(name) = &request.member_name {
            refuse_invisible("member name", name)?;
        }
        let topics = match &request.topics {
            Some(topics) => {
                if topics.len() > TOPICS_PER_GROUP_MAX {
                    return invalid(format!("more than {TOPICS_PER_GROUP_MAX} topics"));
                }
                // A subscription is a wish, as in Kafka: a topic the group
                // does not have (not added yet, or removed since) is kept
                // and gives nothing until an admin configures it, so that a
                // rolling deploy may subscribe before the topic exists.
                if let Some(bad) = topics
                    .iter()
                    .find(|t| t.is_empty() || t.len() > MEMBER_NAME_LEN_MAX)
                {
                    return invalid(format!(
                        "topic name {bad:?} must be 1 to {MEMBER_NAME_LEN_MAX} bytes"
                    ));
                }
                Some(topics.iter().cloned().collect::<BTreeSet<_>>())
            }
            None => None,
        };
        if request.capacity == Some(0) {
            return invalid("capacity must be at least 1".into());
        }
        if let Some(rack) = &request.rack
            && rack.len() > MEMBER_NAME_LEN_MAX
        {
            return invalid(format!("rack must be at most {MEMBER_NAME_LEN_MAX} bytes"));
        }
        let lags = match &request.lags {
            Some(lags) => {
                let partitions: BTreeMap<&str, u32> = group
                    .config
                    .topics
                    .iter()
                    .map(|t| (t.name.as_str(), t.partitions))
                    .collect();
                let mut by_task = BTreeMap::new();
                for (task, lag) in lags {
                    // Lags on tasks that no longer exist (a topic removed
                    // since) are dropped, not refused: the member may not
                    // have heard yet.
                    if partitions
                        .get(task.topic.as_str())
                        .is_some_and(|&n| task.partition < n)
                    {
                        by_task.insert(task.clone(), *lag);
                    }
                }
                if lags.len() as u64 > TASKS_PER_GROUP_MAX {
                    return invalid(format!("more than {TASKS_PER_GROUP_MAX} lags"));
                }
                Some(by_task)
            }
            None => None,
        };
        if !request.member_id.is_empty() {
            check_member_id(&request.member_id)?;
        }
        let mut out = Output::default();
        // A join is epoch 0 with no member id (the host issues one) or with
        // an id the group does not know (the member chose it). Epoch 0 with
        // a current id is a retried join (its answer was lost) or a member
        // that has not reached any target yet: the same member, answered
        // as a heartbeat, whatever epoch its slot is at.
        if request.member_id.is_empty() && request.member_epoch != JOIN_EPOCH {
            return invalid("a request without a member id must join with member epoch 0".into());
        }
        let joining = request.member_epoch == JOIN_EPOCH
            && (request.member_id.is_empty()
                || (group.slot_of(&request.member_id).is_none()
                    && !group.is_fenced(&request.member_id)));
        let slot = match request.member_epoch {
            JOIN_EPOCH if joining => self.join(request, topics, now, &mut out)?,
            LEAVE_EPOCH => {
                let slot = self.current_slot(request)?;
                self.leave(&request.group, &slot, now, &mut out);
                self.maybe_call_assignor(&request.group, now, &mut out);
                let group = &self.groups[&request.group];
                return Ok((
                    HeartbeatResponse {
                        member_id: request.member_id.clone(),
                        member_epoch: 0,
                        heartbeat_interval_ms: group.config.heartbeat_interval_ms,
                        active: BTreeSet::new(),
                        revoking: BTreeSet::new(),
                        learner: BTreeSet::new(),
                        standby: BTreeSet::new(),
                        draining: false,
                        drained: true,
                        lease_ms: 0,
                    },
                    out,
                ));
            }
            sent if sent < LEAVE_EPOCH => {
                return invalid(format!(
                    "member epoch {sent} is not -1, 0 or a member epoch"
                ));
            }
            sent => {
                let slot = self.current_slot(request)?;
                let group = &self.groups[&request.group];
                let held = group.holdings.member(&slot).cloned().unwrap_or_default();
                // A member may be one epoch behind (its last response was
                // lost), or retry its join (epoch 0); anything else is stale.
                if sent != JOIN_EPOCH
                    && sent as u64 != held.epoch
                    && sent as u64 != held.previous_epoch
                {
                    return Err(ProtocolError::StaleEpoch {
                        sent,
                        current: held.epoch,
                    });
                }
                if let Some(owned) = &request.owned
                    && let Some(task) = owned
                        .iter()
                        .find(|t| !held.active.contains(*t) && !held.revoking.contains(*t))
                {
                    return Err(ProtocolError::NotOwned { task: task.clone() });
                }
                if let Some(topics) = topics
                    && group.members[&slot].topics != topics
                {
                    let mut member = group.members[&slot].clone();
                    member.topics = topics;
                    self.emit(
                        &mut out,
                        Record::MemberJoined {
                            group: request.group.clone(),
                            slot: slot.clone(),
                            member,
                        },
                    );
                    self.bump(&request.group, now, &mut out);
                }
                slot
            }
        };
        let liveness = self.liveness.entry(request.group.clone()).or_default();
        liveness.last_seen_ms.insert(slot.clone(), now);
        if let Some(lags) = lags {
            liveness.lags.insert(slot.clone(), lags);
            self.signal_caught_up_learners(&request.group, &slot, now, &mut out);
        }
        if request.drain && !self.groups[&request.group].members[&slot].draining {
            self.start_drain(&request.group, &slot, now, &mut out);
        }
        let liveness = self.liveness.entry(request.group.clone()).or_default();
        if liveness
            .handover
            .get(&slot)
            .is_some_and(|handover| now >= handover.until_ms)
        {
            liveness.handover.remove(&slot);
        }
        self.reconcile_slot(
            &request.group,
            &slot,
            request.owned.as_deref(),
            now,
            &mut out,
        );
        self.maybe_call_assignor(&request.group, now, &mut out);
        self.snapshot_if_stable(&request.group, &mut out);
        let response = self.response(&request.group, &slot, now, load);
        let lease_end = now.saturating_add(response.lease_ms);
        let liveness = self
            .liveness
            .get_mut(&request.group)
            .expect("the heartbeat was recorded above");
        let promised = liveness.lease_end_ms.entry(slot).or_insert(lease_end);
        *promised = (*promised).max(lease_end);
        Ok((response, out))
    }

    /// What a member is told: its reconciled assignment and its target's
    /// learners and standbys.
    fn response(
        &self,
        group_name: &str,
        slot: &str,
        now: Millis,
        load: HostLoad,
    ) -> HeartbeatResponse {
        let group = &self.groups[group_name];
        let joined = MemberAssignment::new();
        let mut held = std::borrow::Cow::Borrowed(group.holdings.member(slot).unwrap_or(&joined));
        let target = group.target_of(slot);
        let member = &group.members[slot];
        let drained = member.draining
            && held.held().next().is_none()
            && target.active.is_empty()
            && group.target_epoch >= group.group_epoch;
        // Tasks a replaced incarnation may still process are not this
        // incarnation's yet: it warms them up until their lease ends.
        let handover = self
            .liveness
            .get(group_name)
            .and_then(|l| l.handover.get(slot))
            .filter(|h| now < h.until_ms);
        let mut waiting = BTreeSet::new();
        if let Some(handover) = handover {
            waiting = held.active.intersection(&handover.tasks).cloned().collect();
            let held = held.to_mut();
            held.active.retain(|t| !handover.tasks.contains(t));
            held.revoking.retain(|t| !handover.tasks.contains(t));
        }
        // The target's tasks not granted yet. A member that holds exactly
        // its target has none, and is not compared task by task (it may
        // hold a million).
        let holds_target = handover.is_none()
            && held.state == MemberState::Stable
            && held.epoch == group.target_epoch;
        debug_assert!(!holds_target || held.active.len() == target.active.len());
        let ungranted: Vec<&TaskRef> = if holds_target {
            Vec::new()
        } else {
            target.active.difference(&held.active).collect()
        };
        let learner = target
            .learner
            .iter()
            .chain(ungranted.iter().copied())
            .chain(&waiting)
            .cloned()
            .collect();
        // A member in a handoff (tasks to release, tasks waiting for their
        // old owner's release, or learners about to take tasks over) beats
        // faster, so that it learns of its grant a round trip after the
        // release rather than up to a heartbeat interval later.
        let in_handoff = !held.revoking.is_empty()
            || handover.is_some()
            || !target.learner.is_empty()
            || !ungranted.is_empty();
        let mut heartbeat_interval_ms = if in_handoff {
            group
                .config
                .heartbeat_interval_ms
                .min(HANDOFF_HEARTBEAT_INTERVAL_MS)
        } else {
            group.config.heartbeat_interval_ms
        };
        // A new target is on its way: beat again when it should be there,
        // so that every member hears of it (revocations, grants, learners)
        // about when it is installed, not up to an interval later.
        if let Some(due_ms) = self.target_due_in_ms(group_name, now) {
            heartbeat_interval_ms =
                heartbeat_interval_ms.min(due_ms.max(HANDOFF_HEARTBEAT_INTERVAL_MS));
        }
        // Backpressure: a late host asks for fewer heartbeats, never so few
        // that the member could miss its timeout.
        let pressure_ms = load
            .late_ms
            .saturating_mul(BACKPRESSURE_FACTOR)
            .min(member_timeout_ms(&group.config, member) / BACKPRESSURE_TIMEOUT_DIVISOR);
        heartbeat_interval_ms = heartbeat_interval_ms.max(pressure_ms);
        HeartbeatResponse {
            member_id: member.member_id.clone(),
            member_epoch: held.epoch,
            heartbeat_interval_ms,
            active: held.active.clone(),
            revoking: held.revoking.clone(),
            // Warm-up copies need no handover: a learner or standby may start
            // replaying as soon as the target names it. A task the target
            // gives this member but its old owner has not released yet is
            // listed as a learner too, so the member keeps warming it (and
            // reporting its lag) until it is granted.
            learner,
            standby: target.standby.clone(),
            draining: member.draining,
            drained,
            lease_ms: self.lease_ms(group_name, slot, now, heartbeat_interval_ms),
        }
    }

    /// How long until the group's next target should be installed, if one
    /// is on its way: the batch's wait still to run; while the assignor
    /// computes it, as long again as it has taken so far (a call takes
    /// milliseconds, but one that runs to its time limit must not have
    /// every member beat at the handoff interval all along).
    fn target_due_in_ms(&self, group_name: &str, now: Millis) -> Option<u64> {
        let group = &self.groups[group_name];
        if group.group_epoch == group.target_epoch {
            return None;
        }
        let liveness = self.liveness.get(group_name)?;
        if liveness.computing_epoch.is_some() {
            return Some(now.saturating_sub(liveness.last_call_ms.unwrap_or(now)));
        }
        let since = liveness.pending_since_ms?;
        let due = since.saturating_add(batch_wait_ms(&group.config, liveness));
        Some(due.saturating_sub(now))
    }

    /// How long after `now` the slot keeps its tasks if the host hears
    /// nothing more from it: the earliest of its session (or registration)
    /// timeout, the fence for tasks it has not released, the end of its
    /// drain, and what could start right after this answer: a drain an
    /// admin starts, a revocation at its next heartbeat, the name map
    /// dropped. A member that stops processing once this long has passed
    /// since it *sent* the heartbeat stops before the host can give its
    /// tasks to anyone else, however long it was stalled.
    /// `interval_ms` is the heartbeat interval of this answer: the margin
    /// for a revocation at the next heartbeat is at least that long (under
    /// backpressure it is longer than the group's interval).
    fn lease_ms(&self, group_name: &str, slot: &str, now: Millis, interval_ms: u64) -> u64 {
        let group = &self.groups[group_name];
        let config = &group.config;
        let member = &group.members[slot];
        let liveness = self.liveness.get(group_name);
        let session_ms = member_timeout_ms(config, member);
        let last_seen = liveness
            .and_then(|l| l.last_seen_ms.get(slot).copied())
            .unwrap_or(now);
        let mut removal = last_seen.saturating_add(session_ms);
        if let Some(&since) = liveness.and_then(|l| l.revoking_since_ms.get(slot)) {
            // The grace heartbeat interval of `tick` is left out on purpose:
            // it stays a margin for the answer's way back.
            removal = removal.min(since.saturating_add(config.expansion_timeout_ms));
        } else {
            // Nothing to release yet, but the next heartbeat may be told to
            // revoke and its answer be lost: the member, still holding this
            // lease, cannot know, and `tick` fences it an expansion timeout
            // and a heartbeat interval after that heartbeat. It comes after
            // this one: the gap between the two is the margin here.
            removal = removal.min(
                now.saturating_add(config.expansion_timeout_ms)
                    .saturating_add(config.heartbeat_interval_ms.max(interval_ms)),
            );
        }
        let drain_started = if member.draining {
            liveness
                .and_then(|l| l.draining_since_ms.get(slot).copied())
                .unwrap_or(now)
        } else {
            now
        };
        removal = removal.min(drain_started.saturating_add(config.scale_down_timeout_ms));
        let lease_ms = removal.saturating_sub(now);
        debug_assert!(
            lease_ms <= lease_ms_max(config, member),
            "a lease past the longest a restarted host assumes"
        );
        lease_ms
    }

    /// A learner that reports it has caught up asks for a new target at
    /// once (the seed design's second rebalance), instead of waiting for
    /// the probing interval.
    fn signal_caught_up_learners(
        &mut self,
        group_name: &str,
        slot: &str,
        now: Millis,
        out: &mut Output,
    ) {
        let group = &self.groups[group_name];
        let liveness = self.liveness.entry(group_name.to_owned()).or_default();
        let acceptable = group.config.acceptable_recovery_lag;
        let mut caught_up = false;
        for task in &group.target_of(slot).learner {
            if liveness.caught_up(slot, task, acceptable)
                && liveness
                    .caught_up_signalled
                    .insert((slot.to_owned(), task.clone()))
            {
                caught_up = true;
            }
        }
        if caught_up {
            self.bump(group_name, now, out);
            self.liveness.get_mut(group_name).expect("bumped").urgent = true;
        }
    }

    /// Starts draining a member: the assignor stops seeing it, its tasks get
    /// learners elsewhere and move as they catch up, and once it holds
    /// nothing it is told it may exit. After the scale-down timeout the rest
    /// moves anyway and the member is fenced.
    fn start_drain(&mut self, group_name: &str, slot: &str, now: Millis, out: &mut Output) {
        self.emit(
            out,
            Record::MemberDraining {
                group: group_name.to_owned(),
                slot: slot.to_owned(),
            },
        );
        let liveness = self.liveness.entry(group_name.to_owned()).or_default();
        liveness.draining_since_ms.insert(slot.to_owned(), now);
        self.bump(group_name, now, out);
        self.liveness.get_mut(group_name).expect("bumped").urgent = true;
    }

    /// An admin asks a member to drain; `member` is a member id or a static
    /// member name.
    pub fn drain(
        &mut self,
        group_name: &str,
        member: &str,
        now: Millis,
    ) -> Result<Output, ProtocolError> {
        let group = self
            .groups
            .get(group_name)
            .ok_or_else(|| ProtocolError::UnknownGroup(group_name.to_owned()))?;
        let slot = match group.slot_of(member) {
            Some(slot) => slot.to_owned(),
            None => {
                let named = format!("static:{member}");
                if group.members.contains_key(&named) {
                    named
                } else {
                    return Err(ProtocolError::UnknownMember(
                        member.to_owned(),
                        group_name.to_owned(),
                    ));
                }
            }
        };
        let mut out = Output::default();
        if !group.members[&slot].draining {
            self.start_drain(group_name, &slot, now, &mut out);
            self.maybe_call_assignor(group_name, now, &mut out);
        }
        Ok(out)
    }

    /// The group's current input for its assignor, as the next call would
    /// see it.
    pub fn assignor_input(&self, group_name: &str) -> Option<GroupInput> {
        let group = self.groups.get(group_name)?;
        let empty = Liveness::default();
        let liveness = self.liveness.get(group_name).unwrap_or(&empty);
        Some(assignor_input(group, liveness).0)
    }

    /// What a preview runs its candidate on: the group's current assignor
    /// input, with `params` (if given) in place of the bound ones and the
    /// host's keys added as for a real call. `None` for an unknown group.
    pub fn preview_input(
        &self,
        group_name: &str,
        params: Option<BTreeMap<String, String>>,
    ) -> Option<PreviewInput> {
        let group = self.groups.get(group_name)?;
        let empty = Liveness::default();
        let liveness = self.liveness.get(group_name).unwrap_or(&empty);
        let (input, slots, tasks) = match params {
            None => assignor_input(group, liveness),
            Some(params) => {
                let mut group = group.clone();
                group.config.params = params;
                assignor_input(&group, liveness)
            }
        };
        Some(PreviewInput {
            input,
            slots,
            tasks,
        })
    }

    /// The target the host would install for `assignment`, an answer to
    /// `prepared` (from [`Coordinator::preview_input`]): the answer after
    /// the host's learner safety ([`safe_target`]), with nothing emitted
    /// and nothing changed. Refused if the group changed since `prepared`
    /// was taken (the answer's indices would not mean the same members).
    pub fn preview_target(
        &self,
        group_name: &str,
        prepared: &PreviewInput,
        assignment: &Assignment,
    ) -> Result<BTreeMap<String, SlotTarget>, ProtocolError> {
        let group = self
            .groups
            .get(group_name)
            .ok_or_else(|| ProtocolError::UnknownGroup(group_name.to_owned()))?;
        let now = self.preview_input(group_name, Some(prepared.input.params.clone()));
        if now.as_ref() != Some(prepared) {
            return Err(ProtocolError::Invalid(format!(
                "group {group_name:?} changed while the preview ran; try again"
            )));
        }
        let members = prepared.slots.len() as u32;
        let fits = assignment.active_owner.len() == prepared.tasks.len()
            && assignment
                .active_owner
                .iter()
                .all(|&m| m == NO_MEMBER || m < members)
            && assignment
                .learners
                .iter()
                .chain(assignment.standbys.iter())
                .all(|(t, m)| (t as usize) < prepared.tasks.len() && m < members);
        if !fits {
            return Err(ProtocolError::Invalid(
                "the answer does not fit the group's input".to_owned(),
            ));
        }
        let empty = Liveness::default();
        let liveness = self.liveness.get(group_name).unwrap_or(&empty);
        Ok(safe_target(
            group,
            liveness,
            &prepared.slots,
            &prepared.tasks,
            assignment,
        ))
    }

    /// The lags each member of a group last reported.
    pub fn liveness(&self, group_name: &str) -> Option<&Liveness> {
        self.liveness.get(group_name)
    }

    /// The slot of a current member id, or why it has none: another
    /// incarnation took its name (the request names a static slot that has
    /// another member id now, or this host saw the takeover), it was
    /// removed, or it is unknown.
    fn current_slot(&self, request: &Heartbeat) -> Result<String, ProtocolError> {
        let (group_name, member_id) = (&request.group, &request.member_id);
        let group = &self.groups[group_name];
        if let Some(slot) = group.slot_of(member_id) {
            return Ok(slot.to_owned());
        }
        let replaced_by_name = request
            .member_name
            .as_ref()
            .filter(|_| !group.dynamic_only)
            .filter(|name| group.members.contains_key(&format!("static:{name}")))
            .cloned();
        let replaced = replaced_by_name.or_else(|| {
            self.liveness
                .get(group_name)
                .and_then(|l| l.replaced.iter().find(|(id, _)| id == member_id))
                .map(|(_, name)| name.clone())
        });
        if let Some(member_name) = replaced {
            return Err(ProtocolError::Replaced {
                member_id: member_id.clone(),
                member_name,
            });
        }
        if group.is_fenced(member_id) {
            return Err(ProtocolError::Fenced {
                member_id: member_id.clone(),
            });
        }
        Err(ProtocolError::UnknownMember(
            member_id.clone(),
            group_name.clone(),
        ))
    }

    fn join(
        &mut self,
        request: &Heartbeat,
        topics: Option<BTreeSet<String>>,
        now: Millis,
        out: &mut Output,
    ) -> Result<String, ProtocolError> {
        let Some(topics) = topics else {
            return invalid("a join must carry the member's topics".into());
        };
        let group_name = request.group.clone();
        let group = &self.groups[&group_name];
        let name = request.member_name.clone().filter(|_| !group.dynamic_only);
        let member_id = if request.member_id.is_empty() {
            self.next_member_id(group)
        } else {
            request.member_id.clone()
        };
        let member = Member {
            member_id,
            name: name.clone(),
            topics,
            rack: request.rack.clone(),
            capacity: request.capacity.unwrap_or(1),
            away: false,
            draining: false,
        };
        let slot = group.join_slot(name.as_deref(), &member.member_id);
        let mut member = member;
        let needs_target = match group.members.get(&slot) {
            // A restart (or a second process) with the same name: the new
            // incarnation takes the slot and its tasks, the old one is
            // fenced. Nobody else's assignment changes unless the
            // subscription did.
            Some(previous) => {
                // A draining member stays draining across restarts.
                member.draining = previous.draining;
                // The old incarnation may be alive (two processes with one
                // name) and process the slot's tasks until the last lease
                // it was given ends: the new one gets them only then, as a
                // removed member's next owner would.
                let held: BTreeSet<TaskRef> = group
                    .holdings
                    .member(&slot)
                    .map(|h| h.held().cloned().collect())
                    .unwrap_or_default();
                let liveness = self.liveness.entry(group_name.clone()).or_default();
                if liveness.replaced.len() == FENCED_MEMBER_IDS_MAX {
                    liveness.replaced.pop_front();
                }
                let named = name.clone().expect("a static slot");
                liveness
                    .replaced
                    .push_back((previous.member_id.clone(), named));
                if let Some(&until_ms) = liveness.lease_end_ms.get(&slot)
                    && until_ms > now
                    && !held.is_empty()
                {
                    let handover = liveness.handover.entry(slot.clone()).or_default();
                    handover.until_ms = handover.until_ms.max(until_ms);
                    handover.tasks.extend(held);
                }
                previous.topics != member.topics
            }
            None => {
                if group.members.len() >= MEMBERS_PER_GROUP_MAX {
                    return Err(ProtocolError::GroupFull(group_name));
                }
                // The seed design's fallback: a nameless join into a stable
                // group with static members switches it to dynamic
                // membership for good.
                let has_static = group.members.values().any(|m| m.name.is_some());
                if name.is_none() && has_static && !group.dynamic_only && group.is_stable() {
                    let moves = group.slots_without_names();
                    self.emit(
                        out,
                        Record::NameMapDropped {
                            group: group_name.clone(),
                        },
                    );
                    // The slots' timers, lease promises and lags move with
                    // them: a drain keeps its deadline, and no timer of the
                    // new slot acts before a lease given under the old one.
                    let liveness = self.liveness.entry(group_name.clone()).or_default();
                    for (from, to) in &moves {
                        liveness.rekey(from, to);
                    }
                }
                true
            }
        };
        self.emit(
            out,
            Record::MemberJoined {
                group: group_name.clone(),
                slot: slot.clone(),
                member,
            },
        );
        if needs_target {
            self.bump(&group_name, now, out);
        }
        Ok(slot)
    }

    fn leave(&mut self, group_name: &str, slot: &str, now: Millis, out: &mut Output) {
        let group = &self.groups[group_name];
        let member = &group.members[slot];
        if member.name.is_some() && !member.draining {
            self.emit(
                out,
                Record::MemberAway {
                    group: group_name.to_owned(),
                    slot: slot.to_owned(),
                    away: true,
                },
            );
            // It stopped processing before it left: no lease of it runs on,
            // and a new incarnation gets the slot's tasks at once.
            if let Some(liveness) = self.liveness.get_mut(group_name) {
                liveness.lease_end_ms.remove(slot);
            }
        } else {
            self.remove(group_name, slot, RemovalReason::Left, now, out);
        }
    }

    fn remove(
        &mut self,
        group_name: &str,
        slot: &str,
        reason: RemovalReason,
        now: Millis,
        out: &mut Output,
    ) {
        self.emit(
            out,
            Record::MemberRemoved {
                group: group_name.to_owned(),
                slot: slot.to_owned(),
                reason,
            },
        );
        let liveness = self.liveness.entry(group_name.to_owned()).or_default();
        liveness.last_seen_ms.remove(slot);
        liveness.revoking_since_ms.remove(slot);
        liveness.lags.remove(slot);
        liveness.draining_since_ms.remove(slot);
        liveness.lease_end_ms.remove(slot);
        liveness.handover.remove(slot);
        liveness.caught_up_signalled.retain(|(s, _)| s != slot);
        self.bump(group_name, now, out);
        // The expansion timeout batches arrivals; a departure (a leave, an
        // expiry, a fence, a drain that ran out) leaves tasks without an
        // owner, so the next target is asked for at once (as KIP-848's
        // coordinator does), together with whatever the batch holds.
        self.liveness.get_mut(group_name).expect("bumped").urgent = true;
    }

    /// Reconciles one slot against the installed target and records the
    /// result if it changed; `reported`: the tasks the member says it
    /// holds, if it said.
    fn reconcile_slot(
        &mut self,
        group_name: &str,
        slot: &str,
        reported: Option<&[TaskRef]>,
        now: Millis,
        out: &mut Output,
    ) {
        let group = &self.groups[group_name];
        if group.target_epoch == 0 {
            return;
        }
        let joined = MemberAssignment::new();
        let current = group.holdings.member(slot).unwrap_or(&joined);
        if current.state == MemberState::Stable && current.epoch == group.target_epoch {
            // Nothing to move: a steady heartbeat costs no copy of the
            // member's tasks (a member may hold a million).
            if let Some(liveness) = self.liveness.get_mut(group_name) {
                liveness.revoking_since_ms.remove(slot);
            }
            return;
        }
        let owned = reported.map(|reported| {
            let mut owned: BTreeSet<TaskRef> = reported.iter().cloned().collect();
            // The replaced incarnation may still hold these: this one
            // cannot release them for it.
            if let Some(handover) = self
                .liveness
                .get(group_name)
                .and_then(|l| l.handover.get(slot))
            {
                owned.extend(handover.tasks.iter().cloned());
            }
            owned
        });
        let target = &group.target_of(slot).active;
        let holdings = &group.holdings;
        let next = super::reconcile::reconcile(
            current,
            group.target_epoch,
            target,
            owned.as_ref(),
            |task| holdings.holder(task).is_some_and(|h| h != slot),
        );
        let changed = next != *current;
        let liveness = self.liveness.entry(group_name.to_owned()).or_default();
        if next.state == MemberState::UnrevokedTasks {
            liveness
                .revoking_since_ms
                .entry(slot.to_owned())
                .or_insert(now);
        } else {
            liveness.revoking_since_ms.remove(slot);
        }
        if changed {
            self.emit(
                out,
                Record::MemberReconciled {
                    group: group_name.to_owned(),
                    slot: slot.to_owned(),
                    assignment: next,
                },
            );
        }
    }

    /// Starts a target computation when the group needs one, none is in
    /// flight, and the current batch of changes has waited the expansion
    /// timeout (the first target of a group waits too, so that a fleet
    /// starting together lands in one target).
    fn maybe_call_assignor(&mut self, group_name: &str, now: Millis, out: &mut Output) {
        let group = &self.groups[group_name];
        let liveness = self.liveness.entry(group_name.to_owned()).or_default();
        if group.group_epoch == group.target_epoch || liveness.computing_epoch.is_some() {
            return;
        }
        let Some(since) = liveness.pending_since_ms else {
            return;
        };
        if now < since.saturating_add(batch_wait_ms(&group.config, liveness)) {
            return;
        }
        liveness.pending_since_ms = None;
        liveness.urgent = false;
        liveness.last_call_ms = Some(now);
        liveness.computing_epoch = Some(group.group_epoch);
        let (input, slots, tasks) = assignor_input(group, liveness);
        self.calls
            .insert(group_name.to_owned(), (group.group_epoch, slots, tasks));
        out.assignor_calls.push(AssignorCall {
            group: group_name.to_owned(),
            epoch: group.group_epoch,
            assignor: group.config.assignor.clone(),
            limits: group.config.assignor_limits,
            fallback: group.config.fallback_assignor.clone(),
            input,
        });
    }

    /// The runtime's answer to an [`AssignorCall`]. An answer for an epoch
    /// the group has moved past is discarded (and a new call starts when
    /// due); a failed call keeps the last good target.
    pub fn assignment_computed(
        &mut self,
        group_name: &str,
        epoch: u64,
        result: Result<Assignment, impl Into<AssignorFailure>>,
        now: Millis,
    ) -> Output {
        self.answer(group_name, epoch, None, result.map_err(Into::into), now)
    }

    /// The runtime's answer to an [`AssignorCall`] whose assignor failed
    /// with `failure`, after it asked the binding's fallback: the failure
    /// shows on the group as any other, and the fallback's answer, if it
    /// has one, is installed as the bound assignor's would have been.
    pub fn fallback_computed(
        &mut self,
        group_name: &str,
        epoch: u64,
        failure: AssignorFailure,
        fallback: Result<Assignment, impl Into<AssignorFailure>>,
        now: Millis,
    ) -> Output {
        self.answer(
            group_name,
            epoch,
            Some(failure),
            fallback.map_err(Into::into),
            now,
        )
    }

    fn answer(
        &mut self,
        group_name: &str,
        epoch: u64,
        bound_failure: Option<AssignorFailure>,
        result: Result<Assignment, AssignorFailure>,
        now: Millis,
    ) -> Output {
        let mut out = Output::default();
        let Some((call_epoch, slots, tasks)) = self.calls.remove(group_name) else {
            return out;
        };
        let liveness = self.liveness.entry(group_name.to_owned()).or_default();
        liveness.computing_epoch = None;
        let Some(group) = self.groups.get(group_name) else {
            return out;
        };
        if call_epoch != epoch || epoch != group.group_epoch {
            liveness.pending_since_ms.get_or_insert(now);
            self.maybe_call_assignor(group_name, now, &mut out);
            return out;
        }
        let config = &group.config;
        let assignment = match (bound_failure, result) {
            (None, Ok(assignment)) => {
                if let Some(failures) = &mut liveness.failures {
                    failures.consecutive = 0;
                    failures.served_by_fallback = false;
                    failures.last_success_ms = Some(now);
                }
                assignment
            }
            (Some(failure), Ok(assignment)) => {
                let failures = record_failure(liveness, group_name, epoch, config, failure, now);
                failures.served_by_fallback = true;
                failures.fallback_answers += 1;
                failures.fallback_error = None;
                assignment
            }
            (bound_failure, Err(error)) => {
                // Keep the last good target, record the failure for the
                // group's view, and try again with backoff.
                let (failure, fallback_error) = match bound_failure {
                    Some(failure) => (failure, Some(error)),
                    None => (error, None),
                };
                let failures = record_failure(liveness, group_name, epoch, config, failure, now);
                failures.served_by_fallback = false;
                failures.fallback_error =
                    fallback_error.map(|e| format!("{}: {}", e.code, e.message));
                liveness.pending_since_ms = Some(now);
                return out;
            }
        };
        let empty = Liveness::default();
        let liveness = self.liveness.get(group_name).unwrap_or(&empty);
        let target = safe_target(group, liveness, &slots, &tasks, &assignment);
        self.emit(
            &mut out,
            Record::TargetInstalled {
                group: group_name.to_owned(),
                epoch,
                target,
            },
        );
        // A caught-up signal belongs to one warm-up: once the task is no
        // longer a learner of that slot, a later warm-up must signal anew.
        let group = &self.groups[group_name];
        if let Some(liveness) = self.liveness.get_mut(group_name) {
            liveness.caught_up_signalled.retain(|(slot, task)| {
                group
                    .target
                    .get(slot)
                    .is_some_and(|t| t.learner.contains(task))
            });
        }
        // Members learn their new target on their next heartbeat.
        out
    }

    /// Advances timers: expired members, members that did not release in
    /// time, and batches whose expansion timeout has passed; the host on
    /// time.
    pub fn tick(&mut self, now: Millis) -> Output {
        self.tick_loaded(now, HostLoad::default())
    }

    /// [`Coordinator::tick`] while the host runs `load.late_ms` late: a
    /// member's silence is judged at `now - late_ms`, since its heartbeats
    /// of that time may still wait to be served (the tick itself fired
    /// late, requests queued). Leases are still judged at `now`.
    pub fn tick_loaded(&mut self, now: Millis, load: HostLoad) -> Output {
        let judged = now.saturating_sub(load.late_ms);
        let mut out = Output::default();
        let names: Vec<String> = self.groups.keys().cloned().collect();
        for name in names {
            let group = &self.groups[&name];
            let liveness = self.liveness.entry(name.clone()).or_default();
            let mut expired = Vec::new();
            for (slot, member) in &group.members {
                // The member may still process under a lease given before
                // a config change shortened its timeouts: no timer takes
                // its tasks before that lease ends.
                if liveness
                    .lease_end_ms
                    .get(slot)
                    .is_some_and(|&end| now < end)
                {
                    continue;
                }
                if member.draining {
                    let since = *liveness
                        .draining_since_ms
                        .entry(slot.clone())
                        .or_insert(now);
                    if judged >= since.saturating_add(group.config.scale_down_timeout_ms) {
                        expired.push((slot.clone(), RemovalReason::DrainTimedOut));
                        continue;
                    }
                }
                let last = *liveness.last_seen_ms.entry(slot.clone()).or_insert(now);
                let timeout = if member.name.is_some() {
                    group.config.registration_timeout_ms
                } else {
                    group.config.session_timeout_ms
                };
                if judged >= last.saturating_add(timeout) {
                    expired.push((slot.clone(), RemovalReason::Expired));
                } else if liveness.revoking_since_ms.get(slot).is_some_and(|&since| {
                    // The member can only report the release on a later
                    // heartbeat: one interval of grace on top.
                    judged
                        >= since
                            .saturating_add(group.config.expansion_timeout_ms)
                            .saturating_add(group.config.heartbeat_interval_ms)
                }) {
                    expired.push((slot.clone(), RemovalReason::Fenced));
                }
            }
            // A group recovered from the log while it waited for a target
            // has no batch open: start one.
            if group.group_epoch != group.target_epoch
                && liveness.computing_epoch.is_none()
                && liveness.pending_since_ms.is_none()
            {
                liveness.pending_since_ms = Some(now);
            }
            // The probing safety net: while learners exist, re-ask the
            // assignor now and then even if no learner reported catching up.
            let last_call = *liveness.last_call_ms.get_or_insert(now);
            let probe = expired.is_empty()
                && group.learner_count() > 0
                && group.group_epoch == group.target_epoch
                && liveness.computing_epoch.is_none()
                && now >= last_call.saturating_add(group.config.probing_interval_ms);
            for (slot, reason) in expired {
                self.remove(&name, &slot, reason, now, &mut out);
            }
            if probe {
                self.bump(&name, now, &mut out);
                self.liveness.get_mut(&name).expect("bumped").urgent = true;
            }
            self.maybe_call_assignor(&name, now, &mut out);
        }
        out
    }
}

/// How long a silent member keeps its tasks at most, as far as one answer
/// can know: a static member's registration timeout (a nameless join into
/// a stable group may drop the name map right after the answer: the member
/// then expires as a dynamic one, after the session timeout), a dynamic
/// member's session timeout.
fn member_timeout_ms(config: &GroupConfig, member: &Member) -> u64 {
    if member.name.is_some() {
        config
            .registration_timeout_ms
            .min(config.session_timeout_ms)
    } else {
        config.session_timeout_ms
    }
}

/// The longest lease one answer can give `member` under `config` (what
/// [`Coordinator::lease_ms`] computes, at its largest): its timeout, or
/// the margin for a revocation at its next heartbeat, an expansion timeout
/// and the longest interval an answer asks for (backpressure's included),
/// whichever ends first.
fn lease_ms_max(config: &GroupConfig, member: &Member) -> u64 {
    let timeout_ms = member_timeout_ms(config, member);
    let interval_max_ms = config
        .heartbeat_interval_ms
        .max(timeout_ms / BACKPRESSURE_TIMEOUT_DIVISOR);
    timeout_ms.min(config.expansion_timeout_ms.saturating_add(interval_max_ms))
}

/// How long a batch of changes waits before the assignor is asked: the
/// expansion timeout; nothing for an urgent batch (a learner caught up, a
/// drain began, a member departed); backoff while the assignor fails (not while its fallback
/// answers for it: the group is served).
fn batch_wait_ms(config: &GroupConfig, liveness: &Liveness) -> u64 {
    match &liveness.failures {
        _ if liveness.urgent => 0,
        Some(f) if f.consecutive > 0 && !f.served_by_fallback => {
            assignor_retry_ms(config.expansion_timeout_ms, f.consecutive)
        }
        _ => config.expansion_timeout_ms,
    }
}

/// The installed target for an assignor's answer: the answer itself, with
/// the host's learner safety in [`LearnerMode::Host`]: an active task the
/// answer moves away from a live holder, to a member that has not reported
/// catching up on it, stays on its holder. If the holder has another task
/// the new member is caught up on, that one moves instead (same balance,
/// no cold move); otherwise the new member gets a learner for it, at most
/// `max_learners` in the group. Invariant 5 of DESIGN.md, for any assignor.
fn safe_target(
    group: &Group,
    liveness: &Liveness,
    slots: &[String],
    tasks: &[TaskRef],
    assignment: &Assignment,
) -> BTreeMap<String, SlotTarget> {
    let config = &group.config;
    let mut target: BTreeMap<String, SlotTarget> = group
        .members
        .keys()
        .map(|slot| (slot.clone(), SlotTarget::default()))
        .collect();
    let slot_of = |member: u32| -> &String { &slots[member as usize] };
    for (task, &owner) in tasks.iter().zip(&assignment.active_owner) {
        if owner != NO_MEMBER {
            target
                .get_mut(slot_of(owner))
                .expect("the answer was validated against this input")
                .active
                .insert(task.clone());
        }
    }
    let mut learners = 0u32;
    if config.learners != LearnerMode::Off {
        for (task, member) in assignment.learners.iter() {
            if config.learners == LearnerMode::Host && learners >= config.max_learners {
                break;
            }
            let slot = target.get_mut(slot_of(member)).expect("validated");
            slot.learner.insert(tasks[task as usize].clone());
            learners += 1;
        }
    }
    for (task, member) in assignment.standbys.iter() {
        let slot = target.get_mut(slot_of(member)).expect("validated");
        slot.standby.insert(tasks[task as usize].clone());
    }
    if config.learners == LearnerMode::Host {
        let acceptable = config.acceptable_recovery_lag;
        let mut new_owner: BTreeMap<&TaskRef, String> = BTreeMap::new();
        for (slot, t) in &target {
            for task in &t.active {
                new_owner.insert(task, slot.clone());
            }
        }
        // A holder may keep a task it subscribes to and does not drain;
        // otherwise the task must move, and its move warms up first (the
        // others can wait on their holder), or a stream of optional cold
        // moves could take every learner slot for good.
        let may_keep = |task: &TaskRef, slot: &str| {
            let holder = &group.members[slot];
            holder.topics.contains(&task.topic) && !holder.draining
        };
        let mut cold_moves: Vec<(TaskRef, String, String)> = new_owner
            .iter()
            .filter_map(|(task, to)| {
                let from = group.holdings.holder(task)?;
                (from != to && !liveness.caught_up(to, task, acceptable))
                    .then(|| ((*task).clone(), from.to_owned(), to.clone()))
            })
            .collect();
        cold_moves.sort_by_key(|(task, from, _)| may_keep(task, from));
        // A task nobody holds (its owner failed, or it is new) goes to a
        // member already caught up on it (a standby, an old owner) if the
        // answer put it on a cold one: failover without a replay.
        let free_cold: Vec<(TaskRef, String)> = new_owner
            .iter()
            .filter(|(task, to)| {
                group.holdings.holder(task).is_none() && !liveness.caught_up(to, task, acceptable)
            })
            .map(|(task, to)| ((*task).clone(), to.clone()))
            .collect();
        // Who is caught up on what, from the reported lags (a member reports
        // only the tasks whose state it keeps): the searches below look at
        // those, not at every member or every task a holder has.
        let mut caught_up_on: BTreeMap<&TaskRef, Vec<&String>> = BTreeMap::new();
        for (slot, lags) in &liveness.lags {
            if group.members.get(slot).is_none_or(|m| m.draining) {
                continue;
            }
            for (task, _) in lags.iter().filter(|&(_, &lag)| lag <= acceptable) {
                caught_up_on.entry(task).or_default().push(slot);
            }
        }
        for (task, to) in free_cold {
            // Slots in order, the first of the least loaded.
            let warm = caught_up_on
                .get(&task)
                .into_iter()
                .flatten()
                .filter(|slot| ***slot != to && group.members[**slot].topics.contains(&task.topic))
                .min_by_key(|slot| target[**slot].active.len())
                .map(|slot| (*slot).clone());
            if let Some(warm) = warm {
                // The answer's owner warms up, so that balance returns once
                // it caught up.
                let cold = target.get_mut(&to).expect("a member");
                cold.active.remove(&task);
                if learners < config.max_learners && cold.learner.insert(task.clone()) {
                    learners += 1;
                }
                target.get_mut(&warm).expect("a member").active.insert(task);
            }
        }
        let mut unwarmed = Vec::new();
        for (task, from, to) in cold_moves {
            target.get_mut(&to).expect("a member").active.remove(&task);
            target
                .get_mut(&from)
                .expect("a holder is a member")
                .active
                .insert(task.clone());
            let to_topics = &group.members[&to].topics;
            // A holder that may not keep the task (it no longer subscribes
            // to its topic, or it drains) must see it warm up elsewhere: a
            // swap would leave it there with no learner, for good.
            let may_keep = may_keep(&task, &from);
            // The first (in task order) of the holder's tasks that the new
            // owner is caught up on.
            let swap = liveness
                .lags
                .get(&to)
                .into_iter()
                .flatten()
                .filter(|&(_, &lag)| may_keep && lag <= acceptable)
                .map(|(other, _)| other)
                .find(|other| {
                    **other != task
                        && target[&from].active.contains(*other)
                        && to_topics.contains(&other.topic)
                        && group.holdings.holder(other) == Some(from.as_str())
                })
                .cloned();
            match swap {
                Some(other) => {
                    target
                        .get_mut(&from)
                        .expect("a member")
                        .active
                        .remove(&other);
                    target.get_mut(&to).expect("a member").active.insert(other);
                }
                None if learners < config.max_learners => {
                    let placed = target.get_mut(&to).expect("a member").learner.insert(task);
                    learners += u32::from(placed);
                }
                None => unwarmed.push((task, to)),
            }
        }
        // The answer's learners on tasks that end up active where they are
        // are dropped below: they must not keep a cold move from warming.
        let mut placed: u32 = target
            .values()
            .map(|t| t.learner.difference(&t.active).count() as u32)
            .sum();
        for (task, to) in unwarmed {
            if placed >= config.max_learners {
                break;
            }
            let slot = target.get_mut(&to).expect("a member");
            placed += u32::from(slot.learner.insert(task));
        }
    }
    // A copy is pointless where the task is active, and a standby where a
    // learner already warms up.
    for t in target.values_mut() {
        let active = t.active.clone();
        t.learner.retain(|task| !active.contains(task));
        let learner = t.learner.clone();
        t.standby
            .retain(|task| !active.contains(task) && !learner.contains(task));
    }
    target
}

/// The group's GroupInput for its assignor, with the slot of each member
/// index and the task of each task index. Draining members are left out:
/// their tasks look free to the assignor, and the host's learner safety
/// keeps them on the draining member until a new owner is warm.
fn assignor_input(group: &Group, liveness: &Liveness) -> (GroupInput, Vec<String>, Vec<TaskRef>) {
    let topic_index: BTreeMap<&str, u32> = group
        .config
        .topics
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i as u32))
        .collect();
    let tasks: Vec<TaskRef> = group.tasks().collect();
    let task_index: BTreeMap<&TaskRef, usize> =
        tasks.iter().enumerate().map(|(i, t)| (t, i)).collect();
    let mut input = GroupInput {
        topics: group
            .config
            .topics
            .iter()
            .map(|t| Topic {
                name: t.name.clone(),
                partitions: t.partitions,
            })
            .collect(),
        active_owner: vec![NO_MEMBER; tasks.len()],
        params: group.config.params.clone(),
        ..GroupInput::default()
    };
    for (key, value) in HOST_PARAMS.into_iter().zip([
        group.config.acceptable_recovery_lag.to_string(),
        group.config.max_learners.to_string(),
    ]) {
        input.params.entry(key.to_owned()).or_insert(value);
    }
    let mut slots = Vec::with_capacity(group.members.len());
    for (slot, member) in group.members.iter().filter(|(_, m)| !m.draining) {
        let subscribed: Vec<u32> = member
            .topics
            .iter()
            .filter_map(|t| topic_index.get(t.as_str()).copied())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let subscription = input.intern_subscription(subscribed);
        let index = input.members.len() as u32;
        input.members.push(InputMember {
            id: member.member_id.clone(),
            name: member.name.clone(),
            rack: member.rack.clone(),
            capacity: member.capacity,
            subscription,
        });
        // The previous assignment is the installed target: where the group
        // is going, which is what stickiness should preserve.
        if let Some(target) = group.target.get(slot) {
            for task in &target.active {
                if let Some(&i) = task_index.get(task) {
                    input.active_owner[i] = index;
                }
            }
            for task in &target.learner {
                if let Some(&i) = task_index.get(task) {
                    input.learners.push(i as u32, index);
                }
            }
            for task in &target.standby {
                if let Some(&i) = task_index.get(task) {
                    input.standbys.push(i as u32, index);
                }
            }
        }
        for (task, &lag) in liveness.lags.get(slot).into_iter().flatten() {
            if let Some(&i) = task_index.get(task) {
                input.lags.push(i as u32, index, lag);
            }
        }
        slots.push(slot.clone());
    }
    (input, slots, tasks)
}
