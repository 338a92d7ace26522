//! What an assignor sees: a group's `GroupInput` built from its members,
//! installed target, reported lags and loads (estimated at the latest time
//! the core has seen), with the slot of each member index and
//! the task of each task index; and the preview, which shows the target the
//! host would install for a candidate's answer, changing nothing.

use std::collections::{BTreeMap, BTreeSet};

use assignd_guest_sdk::{Assignment, GroupInput, Member as InputMember, NO_MEMBER, Topic};

use super::{Coordinator, HOST_PARAMS, PreviewInput, ProtocolError, learners::safe_target};
use crate::protocol::group::{Group, Liveness, Millis, Slot, SlotTarget, Task};

impl Coordinator {
    /// The group's current input for its assignor, as the next call would
    /// see it.
    pub fn assignor_input(&self, group_name: &str) -> Option<GroupInput> {
        let (group, liveness) = self.entry(group_name)?;
        Some(assignor_input(group, liveness, self.latest_ms).0)
    }

    /// What a preview runs its candidate on: the group's current assignor
    /// input, with `params` (if given) in place of the bound ones and the
    /// host's keys added as for a real call. `None` for an unknown group.
    pub fn preview_input(
        &self,
        group_name: &str,
        params: Option<BTreeMap<String, String>>,
    ) -> Option<PreviewInput> {
        self.preview_input_at(group_name, params, self.latest_ms)
    }

    /// [`Coordinator::preview_input`] with the loads estimated at `at_ms`.
    fn preview_input_at(
        &self,
        group_name: &str,
        params: Option<BTreeMap<String, String>>,
        at_ms: Millis,
    ) -> Option<PreviewInput> {
        let (group, liveness) = self.entry(group_name)?;
        let (input, slots, tasks) = match params {
            None => assignor_input(group, liveness, at_ms),
            Some(params) => {
                let mut group = group.clone();
                group.config.params = params;
                assignor_input(&group, liveness, at_ms)
            }
        };
        Some(PreviewInput {
            input,
            slots,
            tasks,
            at_ms,
        })
    }

    /// The target the host would install for `assignment`, an answer to
    /// `prepared` (from [`Coordinator::preview_input`]): the answer after
    /// the host's learner safety (`safe_target`, in learners.rs), with
    /// nothing emitted and nothing changed. Refused if the group changed
    /// since `prepared` was taken (the answer's indices would not mean the
    /// same members).
    pub fn preview_target(
        &self,
        group_name: &str,
        prepared: &PreviewInput,
        assignment: &Assignment,
    ) -> Result<BTreeMap<Slot, SlotTarget>, ProtocolError> {
        let (group, liveness) = self
            .entry(group_name)
            .ok_or_else(|| ProtocolError::UnknownGroup(group_name.to_owned()))?;
        // Loads as they were estimated for the prepared input: only a
        // change of the group (or a new report) is a change.
        let now = self.preview_input_at(
            group_name,
            Some(prepared.input.params.clone()),
            prepared.at_ms,
        );
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
        Ok(safe_target(
            group,
            liveness,
            &prepared.slots,
            &prepared.tasks,
            assignment,
        ))
    }
}

/// The group's GroupInput for its assignor, with the slot of each member
/// index and the task of each task index. Draining members are left out:
/// their tasks look free to the assignor, and the host's learner safety
/// keeps them on the draining member until a new owner is warm. Loads are
/// estimated at `now`, and only for a group with a load unit.
pub(super) fn assignor_input(
    group: &Group,
    liveness: &Liveness,
    now: Millis,
) -> (GroupInput, Vec<Slot>, Vec<Task>) {
    let topic_index: BTreeMap<&str, u32> = group
        .config
        .topics
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i as u32))
        .collect();
    let tasks: Vec<Task> = group.tasks().collect();
    let task_index = TaskIndex::new(group);
    let mut input = input_without_members(group, tasks.len());
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
        let (load_capacity, utilisation) = member_loads(group, liveness, slot, now);
        input.members.push(InputMember {
            id: member.member_id.clone(),
            name: member.name.clone(),
            rack: member.rack.clone(),
            capacity: member.capacity,
            subscription,
            load_capacity,
            utilisation,
        });
        // The previous assignment is the installed target: where the group
        // is going, which is what stickiness should preserve.
        if let Some(target) = group.target.get(slot) {
            add_previous_target(&mut input, &task_index, target, index);
        }
        for (task, &lag) in liveness.lags.get(slot).into_iter().flatten() {
            if let Some(i) = task_index.of(task) {
                input.lags.push(i as u32, index, lag);
            }
        }
        slots.push(slot.clone());
    }
    add_loads(&mut input, group, liveness, now);
    (input, slots, tasks)
}

/// A member's load capacity and utilisation (estimated at `now`), if the
/// group takes loads and the member reported them.
fn member_loads(
    group: &Group,
    liveness: &Liveness,
    slot: &Slot,
    now: Millis,
) -> (Option<f64>, Option<f64>) {
    let reported = group
        .config
        .load_unit
        .as_ref()
        .and_then(|_| liveness.loads.member(slot));
    let half_life_ms = group.config.load_half_life_ms;
    (
        reported.and_then(|m| m.load_capacity),
        reported
            .and_then(|m| m.utilisation)
            .map(|u| u.at(now, half_life_ms)),
    )
}

/// The group's load unit, and a row for every task whose load is known,
/// estimated at `now`, in task index order. A task without a row has an
/// unknown load.
fn add_loads(input: &mut GroupInput, group: &Group, liveness: &Liveness, now: Millis) {
    let Some(unit) = &group.config.load_unit else {
        return;
    };
    input.load_unit = Some(unit.clone());
    let half_life_ms = group.config.load_half_life_ms;
    let mut first = 0u32;
    for topic in &group.config.topics {
        for (partition, estimate) in liveness.loads.topic_estimates(&topic.name) {
            if partition < topic.partitions {
                input
                    .loads
                    .push(first + partition, estimate.at(now, half_life_ms));
            }
        }
        first += topic.partitions;
    }
}

/// A task's index in the assignor's input: its topic's first index plus
/// its partition. No map of every task (a target of 100,000 tasks and
/// 300,000 standbys would look each one up by name).
struct TaskIndex<'a> {
    /// Each topic's first index and partition count.
    first_index: BTreeMap<&'a str, (usize, u32)>,
}

impl<'a> TaskIndex<'a> {
    fn new(group: &'a Group) -> Self {
        let mut first_index = BTreeMap::new();
        let mut next = 0usize;
        for topic in &group.config.topics {
            first_index.insert(topic.name.as_str(), (next, topic.partitions));
            next += topic.partitions as usize;
        }
        TaskIndex { first_index }
    }

    /// The task's index, if the group has the task.
    fn of(&self, task: &Task) -> Option<usize> {
        let &(first, partitions) = self.first_index.get(task.topic.as_str())?;
        (task.partition < partitions).then_some(first + task.partition as usize)
    }
}

/// The input of `tasks` tasks before any member is added: the group's
/// topics, every task unowned, and the group's params with the host's
/// ([`HOST_PARAMS`]) where the group's do not name them.
fn input_without_members(group: &Group, tasks: usize) -> GroupInput {
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
        active_owner: vec![NO_MEMBER; tasks],
        params: group.config.params.clone(),
        ..GroupInput::default()
    };
    for (key, value) in HOST_PARAMS.into_iter().zip([
        group.config.acceptable_recovery_lag.to_string(),
        group.config.max_learners.to_string(),
    ]) {
        input.params.entry(key.to_owned()).or_insert(value);
    }
    input
}

/// Adds a member's installed target (its active tasks, learners and
/// standbys) to the input as member `index`'s previous assignment.
fn add_previous_target(
    input: &mut GroupInput,
    task_index: &TaskIndex,
    target: &SlotTarget,
    index: u32,
) {
    for task in &target.active {
        if let Some(i) = task_index.of(task) {
            input.active_owner[i] = index;
        }
    }
    for task in &target.learner {
        if let Some(i) = task_index.of(task) {
            input.learners.push(i as u32, index);
        }
    }
    for task in &target.standby {
        if let Some(i) = task_index.of(task) {
            input.standbys.push(i as u32, index);
        }
    }
}
