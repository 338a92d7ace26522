//! Whether a record read back from the log fits the state it is replayed
//! onto. It owns the checks, nothing else: replay still goes through the
//! one `apply` path.
//!
//! `apply` (and `Holdings`) assert what they rely on — a record names a
//! configured group, a task has one holder — because the live core only
//! emits records that hold to it: a failure there is a bug. A log on disk
//! is input from the world: its frames can be valid (the CRC matches)
//! while its records do not fit together (a segment of another data dir, a
//! hand-edited file, a bug of another version). Recovery and `assignd log
//! check` ask [`Coordinator::check_replay`] before each `apply`, so such a
//! log is refused with the file and offset of the first record that does
//! not fit, instead of panicking or starting on state the core would
//! trip over later. In debug builds the core checks each record it emits
//! too, so a check that refused a record the core writes would fail the
//! protocol tests and the simulator.

use std::collections::{BTreeMap, BTreeSet};

use super::core::Coordinator;
use super::group::{Group, Record, Slot, Task};
use super::reconcile::MemberAssignment;

impl Coordinator {
    /// `Ok` if `record` can be applied to the current state: everything
    /// `apply` relies on holds. The error says what does not fit.
    pub fn check_replay(&self, record: &Record) -> Result<(), String> {
        let name = record.group();
        let group = match (record, self.group(name)) {
            (Record::GroupSnapshot { state, .. }, _) => return check_snapshot(name, state),
            (Record::GroupConfigured { .. }, None) => return Ok(()),
            (_, None) => {
                return Err(format!(
                    "a record of group {name:?}, which was never configured"
                ));
            }
            (_, Some(group)) => group,
        };
        check_record(group, record)
    }
}

fn check_record(group: &Group, record: &Record) -> Result<(), String> {
    let member = |slot: &str| {
        if group.members.contains_key(slot) {
            Ok(())
        } else {
            Err(format!(
                "slot {slot:?} is not a member of group {:?}",
                group.name
            ))
        }
    };
    match record {
        Record::GroupConfigured { .. }
        | Record::MemberJoined { .. }
        | Record::AssignorBound { .. }
        | Record::ShadowBound { .. } => Ok(()),
        Record::GroupSnapshot { .. } => unreachable!("checked by the caller"),
        Record::MemberAway { slot, .. }
        | Record::MemberDraining { slot, .. }
        | Record::MemberRemoved { slot, .. }
        | Record::HandoverStarted { slot, .. }
        | Record::MemberEndpointChanged { slot, .. } => member(slot),
        Record::HandoverEnded { slot, .. } if group.handovers.contains(slot) => Ok(()),
        Record::HandoverEnded { slot, .. } => Err(format!(
            "a handover of slot {slot:?} ends that never started in group {:?}",
            group.name
        )),
        Record::GroupEpochBumped { epoch, .. } => {
            if *epoch > group.group_epoch {
                Ok(())
            } else {
                Err(format!(
                    "group epoch {epoch} of group {:?} is not past its epoch {}",
                    group.name, group.group_epoch
                ))
            }
        }
        Record::TargetInstalled { epoch, target, .. } => {
            if *epoch > group.group_epoch || *epoch < group.target_epoch {
                return Err(format!(
                    "target epoch {epoch} of group {:?} is not between its target epoch {} and its group epoch {}",
                    group.name, group.target_epoch, group.group_epoch
                ));
            }
            check_target(&group.name, target)
        }
        Record::MemberReconciled {
            slot, assignment, ..
        } => {
            member(slot)?;
            if assignment.epoch > group.target_epoch {
                return Err(format!(
                    "slot {slot:?} reconciled at epoch {} past the target epoch {} of group {:?}",
                    assignment.epoch, group.target_epoch, group.name
                ));
            }
            check_assignment(slot, assignment)?;
            match assignment
                .active
                .iter()
                .chain(&assignment.revoking)
                .find_map(|task| {
                    group
                        .holdings
                        .holder(task)
                        .filter(|holder| *holder != slot)
                        .map(|holder| (task, holder))
                }) {
                Some((task, holder)) => Err(format!(
                    "{} granted to slot {slot:?} while slot {holder:?} holds it",
                    describe(task)
                )),
                None => Ok(()),
            }
        }
        Record::NameMapDropped { .. } => {
            // Each named slot is re-keyed by its member id, which must not
            // land on another slot.
            let mut keys = BTreeSet::new();
            for (slot, key) in group.slots_without_names() {
                if group.members.contains_key(&key) || !keys.insert(key.clone()) {
                    return Err(format!(
                        "dropping the name map moves slot {slot:?} onto slot {key:?}, which is taken"
                    ));
                }
            }
            Ok(())
        }
    }
}

/// A snapshot replaces its group whole: it must be of that group and
/// consistent in itself.
fn check_snapshot(name: &str, state: &Group) -> Result<(), String> {
    if state.name != name {
        return Err(format!(
            "a snapshot of group {:?} in a record of group {name:?}",
            state.name
        ));
    }
    if state.target_epoch > state.group_epoch {
        return Err(format!(
            "snapshot of group {name:?}: target epoch {} is past the group epoch {}",
            state.target_epoch, state.group_epoch
        ));
    }
    for (slot, assignment) in state.holdings.members() {
        if !state.members.contains_key(slot) {
            return Err(format!(
                "snapshot of group {name:?}: slot {slot:?} holds tasks but is not a member"
            ));
        }
        check_assignment(slot, assignment)?;
    }
    if let Some(slot) = state
        .target
        .keys()
        .find(|s| !state.members.contains_key(*s))
    {
        return Err(format!(
            "snapshot of group {name:?}: the target names slot {slot:?}, which is not a member"
        ));
    }
    if let Some(slot) = state
        .handovers
        .iter()
        .find(|s| !state.members.contains_key(*s))
    {
        return Err(format!(
            "snapshot of group {name:?}: slot {slot:?} waits for a handover but is not a member"
        ));
    }
    check_target(name, &state.target)
}

/// A task is active in at most one slot's target.
fn check_target(
    name: &str,
    target: &BTreeMap<Slot, super::group::SlotTarget>,
) -> Result<(), String> {
    let mut owner: BTreeMap<&Task, &str> = BTreeMap::new();
    for (slot, tasks) in target {
        for task in &tasks.active {
            if let Some(other) = owner.insert(task, slot) {
                return Err(format!(
                    "the target of group {name:?} gives {} to slots {other:?} and {slot:?}",
                    describe(task)
                ));
            }
        }
    }
    Ok(())
}

/// A task is either active or being released, not both.
fn check_assignment(slot: &str, assignment: &MemberAssignment<Task>) -> Result<(), String> {
    match assignment.active.intersection(&assignment.revoking).next() {
        Some(task) => Err(format!(
            "slot {slot:?} both holds and releases {}",
            describe(task)
        )),
        None => Ok(()),
    }
}

fn describe(task: &Task) -> String {
    format!("task {}/{}", task.topic, task.partition)
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use proptest::prelude::*;

    use super::super::core::Coordinator;
    use super::super::group::{
        Group, GroupConfig, Member, Record, RemovalReason, Slot, SlotTarget, Task, TopicConfig,
    };
    use super::super::reconcile::{MemberAssignment, MemberState};

    const GROUPS: [&str; 2] = ["g", "h"];
    const SLOTS: [&str; 3] = ["static:a", "static:b", "m-1"];

    fn config() -> GroupConfig {
        GroupConfig::with_topics(vec![TopicConfig {
            name: "t".into(),
            partitions: 4,
        }])
    }

    fn tasks() -> impl Strategy<Value = BTreeSet<Task>> {
        proptest::collection::btree_set((0u32..4).prop_map(|p| Task::new("t", p)), 0..3)
    }

    fn assignment() -> impl Strategy<Value = MemberAssignment<Task>> {
        (0u64..6, tasks(), tasks(), 0u8..3).prop_map(|(epoch, active, revoking, state)| {
            MemberAssignment {
                state: [
                    MemberState::Stable,
                    MemberState::UnrevokedTasks,
                    MemberState::UnreleasedTasks,
                ][state as usize],
                epoch,
                previous_epoch: epoch.saturating_sub(1),
                active,
                revoking,
            }
        })
    }

    fn target() -> impl Strategy<Value = BTreeMap<Slot, SlotTarget>> {
        proptest::collection::btree_map(
            (0usize..3).prop_map(|s| Slot::from(SLOTS[s])),
            (tasks(), tasks()).prop_map(|(active, learner)| SlotTarget {
                active,
                learner,
                standby: BTreeSet::new(),
            }),
            0..3,
        )
    }

    fn member(slot: usize, id: usize) -> Member {
        Member {
            member_id: ["m-1", "m-2", "m-3"][id].to_owned(),
            name: Slot::from(SLOTS[slot]).name().map(str::to_owned),
            topics: ["t".to_owned()].into(),
            rack: None,
            capacity: 1,
            away: false,
            draining: false,
            endpoint: None,
            metadata: Default::default(),
        }
    }

    /// A snapshot of group `name` (or another), with members, a target and
    /// holdings that may or may not fit together.
    fn snapshot() -> impl Strategy<Value = (usize, Group)> {
        (
            0usize..2,
            0usize..3,
            proptest::collection::btree_set(0usize..3, 0..3),
            target(),
            proptest::option::of((0usize..3, assignment())),
            0u64..6,
            0u64..6,
        )
            .prop_map(
                |(g, named, slots, target, held, group_epoch, target_epoch)| {
                    let mut state = Group::new(GROUPS[(g + named / 2) % 2], config());
                    for s in slots {
                        state.members.insert(Slot::from(SLOTS[s]), member(s, s));
                    }
                    state.target = target.into();
                    state.group_epoch = group_epoch;
                    state.target_epoch = target_epoch;
                    if let Some((s, mut assignment)) = held {
                        // `Holdings::set` itself refuses a task held twice by
                        // one slot; a decoded snapshot never has that (its
                        // decoder refuses it), so neither does this one.
                        assignment
                            .revoking
                            .retain(|t| !assignment.active.contains(t));
                        state.holdings.set(SLOTS[s], assignment);
                    }
                    (g, state)
                },
            )
    }

    fn record() -> impl Strategy<Value = Record> {
        let group = (0usize..2).prop_map(|g| GROUPS[g].to_owned());
        let slot = (0usize..3).prop_map(|s| Slot::from(SLOTS[s]));
        prop_oneof![
            group.clone().prop_map(|group| Record::GroupConfigured {
                group,
                config: config()
            }),
            (group.clone(), 0usize..3, 0usize..3).prop_map(|(group, s, id)| {
                Record::MemberJoined {
                    group,
                    slot: Slot::from(SLOTS[s]),
                    member: member(s, id),
                }
            }),
            (group.clone(), slot.clone(), any::<bool>())
                .prop_map(|(group, slot, away)| Record::MemberAway { group, slot, away }),
            (group.clone(), slot.clone()).prop_map(|(group, slot)| Record::MemberRemoved {
                group,
                slot,
                reason: RemovalReason::Left
            }),
            (group.clone(), 0u64..6)
                .prop_map(|(group, epoch)| Record::GroupEpochBumped { group, epoch }),
            (group.clone(), 0u64..6, target()).prop_map(|(group, epoch, target)| {
                Record::TargetInstalled {
                    group,
                    epoch,
                    target: target.into(),
                }
            }),
            (group.clone(), slot.clone())
                .prop_map(|(group, slot)| Record::MemberDraining { group, slot }),
            (group.clone(), slot, assignment()).prop_map(|(group, slot, assignment)| {
                Record::MemberReconciled {
                    group,
                    slot,
                    assignment,
                }
            }),
            group.prop_map(|group| Record::NameMapDropped { group }),
            snapshot().prop_map(|(g, state)| Record::GroupSnapshot {
                group: GROUPS[g].to_owned(),
                state: Box::new(state),
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]

        /// Replay as recovery runs it — check, then apply what passes —
        /// never panics, whatever valid records come in whatever order; and
        /// the core carries on (a tick) from the state it reached.
        #[test]
        fn records_in_any_order_never_panic_replay(records in proptest::collection::vec(record(), 0..40)) {
            let mut core = Coordinator::new(7);
            for record in &records {
                if core.check_replay(record).is_ok() {
                    core.apply(record);
                }
            }
            let mut owned = Coordinator::new(7);
            for record in records {
                if owned.check_replay(&record).is_ok() {
                    owned.apply_owned(record);
                }
            }
            let _ = core.tick(1_000_000);
        }
    }
}
