//! The coordinator core: admin commands, member heartbeats and ticks in,
//! with the time passed in; responses, records and assignor calls out. Each
//! handler checks its input before anything changes, then emits records,
//! and every record goes through [`Group::apply`] — the same path replay
//! takes. No clock, randomness, disk, network or wasm: member ids come from
//! a seed and a per-group counter, so a simulation is reproducible.

use std::collections::{BTreeMap, BTreeSet};

use assignd_guest_sdk::{Assignment, GroupInput, Member as InputMember, NO_MEMBER, Topic};

use super::group::{Group, GroupConfig, Liveness, Member, Millis, Record, RemovalReason, TaskRef};
use super::reconcile::MemberState;

/// Bounds on what a request may carry, checked before anything changes.
pub const GROUP_NAME_LEN_MAX: usize = 255;
pub const MEMBER_NAME_LEN_MAX: usize = 255;
pub const TOPICS_PER_GROUP_MAX: usize = 10_000;
pub const PARTITIONS_PER_TOPIC_MAX: u32 = 100_000;
pub const TASKS_PER_GROUP_MAX: u64 = 1_000_000;
pub const MEMBERS_PER_GROUP_MAX: usize = 10_000;
pub const TIMEOUT_MS_MAX: u64 = 24 * 3600 * 1000;
pub const PARAMS_MAX: usize = 64;

/// A refused input; nothing changed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProtocolError {
    #[error("group {0:?} does not exist")]
    UnknownGroup(String),
    #[error("member {0:?} is not in group {1:?}")]
    UnknownMember(String, String),
    #[error(
        "member {member_id:?} was fenced: another incarnation took its place, or it was removed; rejoin with member epoch 0"
    )]
    Fenced { member_id: String },
    #[error("member epoch {sent} is stale; the member is at epoch {current}")]
    StaleEpoch { sent: i64, current: u64 },
    #[error("member reports owning {task:?}, which the group never gave it")]
    NotOwned { task: TaskRef },
    #[error("invalid request: {0}")]
    Invalid(String),
    #[error("group {0:?} is full ({MEMBERS_PER_GROUP_MAX} members)")]
    GroupFull(String),
}

impl ProtocolError {
    /// A short stable code for the API's error body.
    pub fn code(&self) -> &'static str {
        match self {
            ProtocolError::UnknownGroup(_) => "unknown_group",
            ProtocolError::UnknownMember(..) => "unknown_member",
            ProtocolError::Fenced { .. } => "fenced",
            ProtocolError::StaleEpoch { .. } => "stale_epoch",
            ProtocolError::NotOwned { .. } => "not_owned",
            ProtocolError::Invalid(_) => "invalid_request",
            ProtocolError::GroupFull(_) => "group_full",
        }
    }
}

/// The member epoch a heartbeat sends to join (with an empty member id).
pub const JOIN_EPOCH: i64 = 0;
/// The member epoch a heartbeat sends to leave (a static member's leave is
/// temporary: its slot waits for its registration timeout).
pub const LEAVE_EPOCH: i64 = -1;

/// One member request: joins, heartbeats, reports owned tasks, leaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    pub group: String,
    /// Empty on join (and only then).
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
}

/// A target computation the runtime must run (off any request path) and
/// answer with [`Coordinator::assignment_computed`].
#[derive(Clone, Debug, PartialEq)]
pub struct AssignorCall {
    pub group: String,
    pub epoch: u64,
    pub assignor: String,
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

fn invalid<T>(message: String) -> Result<T, ProtocolError> {
    Err(ProtocolError::Invalid(message))
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
    if config.assignor.is_empty() || config.assignor.len() > MEMBER_NAME_LEN_MAX {
        return invalid("assignor must name a built-in or uploaded assignor".into());
    }
    if config.params.len() > PARAMS_MAX {
        return invalid(format!("more than {PARAMS_MAX} params"));
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
            _ => {}
        }
        let group = self
            .groups
            .get_mut(record.group())
            .expect("a record of a group that was never configured");
        group.apply(record);
    }

    fn emit(&mut self, out: &mut Output, record: Record) {
        self.apply(&record);
        out.records.push(record);
    }

    fn next_member_id(&self, group: &Group) -> String {
        let mut h = splitmix(self.seed);
        for b in group.name.bytes() {
            h = splitmix(h ^ u64::from(b));
        }
        format!("m-{:016x}", splitmix(h ^ group.member_ids_issued))
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
        check_config(&config)?;
        let mut out = Output::default();
        let retarget = self.groups.get(name).is_none_or(|g| {
            g.config.topics != config.topics
                || g.config.assignor != config.assignor
                || g.config.params != config.params
        });
        if self.groups.get(name).is_some_and(|g| g.config == config) {
            return Ok(out);
        }
        self.emit(
            &mut out,
            Record::GroupConfigured {
                group: name.to_owned(),
                config,
            },
        );
        if retarget {
            self.bump(name, now, &mut out);
        }
        Ok(out)
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

    /// Handles one member heartbeat.
    pub fn heartbeat(
        &mut self,
        request: &Heartbeat,
        now: Millis,
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
        let topics = match &request.topics {
            Some(topics) => {
                let known: BTreeSet<&str> = group
                    .config
                    .topics
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect();
                if topics.len() > TOPICS_PER_GROUP_MAX {
                    return invalid(format!("more than {TOPICS_PER_GROUP_MAX} topics"));
                }
                if let Some(unknown) = topics.iter().find(|t| !known.contains(t.as_str())) {
                    return invalid(format!(
                        "topic {unknown:?} is not configured in group {:?}",
                        request.group
                    ));
                }
                Some(topics.iter().cloned().collect::<BTreeSet<_>>())
            }
            None => None,
        };
        if request.capacity == Some(0) {
            return invalid("capacity must be at least 1".into());
        }
        let mut out = Output::default();
        // A join is epoch 0 without a member id; a member that has not
        // reached any target yet also sends epoch 0, with its id.
        let joining = request.member_id.is_empty();
        if joining && request.member_epoch != JOIN_EPOCH {
            return invalid("a request without a member id must join with member epoch 0".into());
        }
        let slot = match request.member_epoch {
            JOIN_EPOCH if joining => self.join(request, topics, now, &mut out)?,
            LEAVE_EPOCH => {
                let slot = self.current_slot(&request.group, &request.member_id)?;
                self.leave(&request.group, &slot, now, &mut out);
                let group = &self.groups[&request.group];
                return Ok((
                    HeartbeatResponse {
                        member_id: request.member_id.clone(),
                        member_epoch: 0,
                        heartbeat_interval_ms: group.config.heartbeat_interval_ms,
                        active: BTreeSet::new(),
                        revoking: BTreeSet::new(),
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
                let slot = self.current_slot(&request.group, &request.member_id)?;
                let group = &self.groups[&request.group];
                let held = group.holdings.member(&slot).cloned().unwrap_or_default();
                // A member may be one epoch behind (its last response was
                // lost); anything else is stale.
                if sent as u64 != held.epoch && sent as u64 != held.previous_epoch {
                    return Err(ProtocolError::StaleEpoch {
                        sent,
                        current: held.epoch,
                    });
                }
                if let Some(owned) = &request.owned
                    && let Some(task) = owned.iter().find(|t| !held.held().any(|h| h == *t))
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
        let owned: Option<BTreeSet<TaskRef>> =
            request.owned.as_ref().map(|o| o.iter().cloned().collect());
        self.reconcile_slot(&request.group, &slot, owned.as_ref(), now, &mut out);
        self.maybe_call_assignor(&request.group, now, &mut out);
        let group = &self.groups[&request.group];
        let held = group.holdings.member(&slot).cloned().unwrap_or_default();
        Ok((
            HeartbeatResponse {
                member_id: group.members[&slot].member_id.clone(),
                member_epoch: held.epoch,
                heartbeat_interval_ms: group.config.heartbeat_interval_ms,
                active: held.active,
                revoking: held.revoking,
            },
            out,
        ))
    }

    /// The slot of a current member id, or why it has none.
    fn current_slot(&self, group_name: &str, member_id: &str) -> Result<String, ProtocolError> {
        let group = &self.groups[group_name];
        match group.slot_of(member_id) {
            Some(slot) => Ok(slot.to_owned()),
            None if group.is_fenced(member_id) => Err(ProtocolError::Fenced {
                member_id: member_id.to_owned(),
            }),
            None => Err(ProtocolError::UnknownMember(
                member_id.to_owned(),
                group_name.to_owned(),
            )),
        }
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
        let member_id = self.next_member_id(group);
        let member = Member {
            member_id,
            name: name.clone(),
            topics,
            rack: request.rack.clone(),
            capacity: request.capacity.unwrap_or(1),
            away: false,
        };
        let slot = match &name {
            Some(name) => format!("static:{name}"),
            None => member.member_id.clone(),
        };
        let needs_target = match group.members.get(&slot) {
            // A restart (or a second process) with the same name: the new
            // incarnation takes the slot and its tasks, the old one is
            // fenced. Nobody else's assignment changes unless the
            // subscription did.
            Some(previous) => previous.topics != member.topics,
            None => {
                if group.members.len() >= MEMBERS_PER_GROUP_MAX {
                    return Err(ProtocolError::GroupFull(group_name));
                }
                // The seed design's fallback: a nameless join into a stable
                // group with static members switches it to dynamic
                // membership for good.
                let has_static = group.members.values().any(|m| m.name.is_some());
                if name.is_none() && has_static && !group.dynamic_only && group.is_stable() {
                    self.emit(
                        out,
                        Record::NameMapDropped {
                            group: group_name.clone(),
                        },
                    );
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
        if group.members[slot].name.is_some() {
            self.emit(
                out,
                Record::MemberAway {
                    group: group_name.to_owned(),
                    slot: slot.to_owned(),
                    away: true,
                },
            );
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
        self.bump(group_name, now, out);
    }

    /// Reconciles one slot against the installed target and records the
    /// result if it changed.
    fn reconcile_slot(
        &mut self,
        group_name: &str,
        slot: &str,
        owned: Option<&BTreeSet<TaskRef>>,
        now: Millis,
        out: &mut Output,
    ) {
        let group = &self.groups[group_name];
        if group.target_epoch == 0 {
            return;
        }
        let current = group.holdings.member(slot).cloned().unwrap_or_default();
        let target = group.target.get(slot).cloned().unwrap_or_default();
        let holdings = &group.holdings;
        let next =
            super::reconcile::reconcile(&current, group.target_epoch, &target, owned, |task| {
                holdings.holder(task).is_some_and(|h| h != slot)
            });
        let liveness = self.liveness.entry(group_name.to_owned()).or_default();
        if next.state == MemberState::UnrevokedTasks {
            liveness
                .revoking_since_ms
                .entry(slot.to_owned())
                .or_insert(now);
        } else {
            liveness.revoking_since_ms.remove(slot);
        }
        if next != current {
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
        if now < since.saturating_add(group.config.expansion_timeout_ms) {
            return;
        }
        liveness.pending_since_ms = None;
        liveness.computing_epoch = Some(group.group_epoch);
        let (input, slots, tasks) = assignor_input(group);
        self.calls
            .insert(group_name.to_owned(), (group.group_epoch, slots, tasks));
        out.assignor_calls.push(AssignorCall {
            group: group_name.to_owned(),
            epoch: group.group_epoch,
            assignor: group.config.assignor.clone(),
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
        result: Result<Assignment, String>,
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
        let assignment = match result {
            Ok(assignment) => assignment,
            Err(error) => {
                // Keep the last good target and try again after another
                // expansion timeout (the registry issue adds fallbacks and
                // makes the failure visible on the group).
                tracing::warn!(group = group_name, epoch, %error, "assignor failed; keeping the last target");
                let liveness = self.liveness.entry(group_name.to_owned()).or_default();
                liveness.pending_since_ms = Some(now);
                return out;
            }
        };
        let mut target: BTreeMap<String, BTreeSet<TaskRef>> = slots
            .iter()
            .map(|slot| (slot.clone(), BTreeSet::new()))
            .collect();
        for (task, &owner) in tasks.iter().zip(&assignment.active_owner) {
            if owner != NO_MEMBER {
                target
                    .get_mut(&slots[owner as usize])
                    .expect("the answer was validated against this input")
                    .insert(task.clone());
            }
        }
        self.emit(
            &mut out,
            Record::TargetInstalled {
                group: group_name.to_owned(),
                epoch,
                target,
            },
        );
        // Members learn their new target on their next heartbeat.
        out
    }

    /// Advances timers: expired members, members that did not release in
    /// time, and batches whose expansion timeout has passed.
    pub fn tick(&mut self, now: Millis) -> Output {
        let mut out = Output::default();
        let names: Vec<String> = self.groups.keys().cloned().collect();
        for name in names {
            let group = &self.groups[&name];
            let liveness = self.liveness.entry(name.clone()).or_default();
            let mut expired = Vec::new();
            for (slot, member) in &group.members {
                let last = *liveness.last_seen_ms.entry(slot.clone()).or_insert(now);
                let timeout = if member.name.is_some() {
                    group.config.registration_timeout_ms
                } else {
                    group.config.session_timeout_ms
                };
                if now >= last.saturating_add(timeout) {
                    expired.push((slot.clone(), RemovalReason::Expired));
                } else if liveness.revoking_since_ms.get(slot).is_some_and(|&since| {
                    now >= since.saturating_add(group.config.expansion_timeout_ms)
                }) {
                    expired.push((slot.clone(), RemovalReason::Fenced));
                }
            }
            for (slot, reason) in expired {
                self.remove(&name, &slot, reason, now, &mut out);
            }
            self.maybe_call_assignor(&name, now, &mut out);
        }
        out
    }
}

/// The group's GroupInput for its assignor, with the slot of each member
/// index and the task of each task index.
fn assignor_input(group: &Group) -> (GroupInput, Vec<String>, Vec<TaskRef>) {
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
    let mut slots = Vec::with_capacity(group.members.len());
    for (slot, member) in &group.members {
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
        for task in group.target.get(slot).into_iter().flatten() {
            if let Some(&i) = task_index.get(task) {
                input.active_owner[i] = index;
            }
        }
        slots.push(slot.clone());
    }
    (input, slots, tasks)
}
