//! Freezing (`frozen: true`, Dicer's `isFrozen`): the target a frozen group
//! installs keeps every task on the member the installed target gives it,
//! while that member is still in the group (a static member away for now
//! included), subscribes to the task's topic and does not drain; its
//! learners and standbys stay as they are. Only the tasks without such an
//! owner (its member left, expired, was fenced or drains; a new partition
//! or topic) take the assignor's answer, and a member that joins meanwhile
//! gets nothing else. The load trigger leaves a frozen group alone
//! (load_trigger.rs); unfreezing asks for a new target (config.rs).
//! Applied to an answer before the host's learner safety (learners.rs),
//! which then warms up the free tasks' moves as for any answer and leaves
//! the held tasks where the freeze put them: a task held to a cold owner
//! is not handed to a warm member, nor swapped away from its owner.

use std::collections::{BTreeMap, BTreeSet};

use crate::protocol::group::{Group, LearnerMode, Slot, SlotTarget, Task};

/// `answer` (a target of every member) made frozen when `group` is: the
/// installed target's placements of owned tasks, the answer's of the rest.
/// The answer's learners of free tasks are kept as far as `max_learners`
/// allows beside those the target keeps. Returns the tasks held where
/// the installed target has them (none when the group is not frozen).
pub(super) fn hold_frozen(
    group: &Group,
    answer: &mut BTreeMap<Slot, SlotTarget>,
) -> BTreeSet<Task> {
    if !group.config.frozen {
        return BTreeSet::new();
    }
    let partitions: BTreeMap<&str, u32> = group
        .config
        .topics
        .iter()
        .map(|t| (t.name.as_str(), t.partitions))
        .collect();
    let exists = |task: &Task| {
        partitions
            .get(task.topic.as_str())
            .is_some_and(|&n| task.partition < n)
    };
    let mut kept: BTreeMap<&Slot, SlotTarget> = BTreeMap::new();
    let mut owned: BTreeSet<&Task> = BTreeSet::new();
    for (slot, member) in group.members.iter().filter(|(_, m)| !m.draining) {
        let keeps = |task: &&Task| exists(task) && member.topics.contains(&task.topic);
        let before = group.target_of(slot);
        owned.extend(before.active.iter().filter(keeps));
        kept.insert(
            slot,
            SlotTarget {
                active: before.active.iter().filter(keeps).cloned().collect(),
                learner: before.learner.iter().filter(keeps).cloned().collect(),
                standby: before.standby.iter().filter(keeps).cloned().collect(),
            },
        );
    }
    let mut learners: usize = kept.values().map(|t| t.learner.len()).sum();
    let learners_max = match group.config.learners {
        LearnerMode::Host => group.config.max_learners as usize,
        LearnerMode::Assignor | LearnerMode::Off => usize::MAX,
    };
    let free = |task: &&Task| !owned.contains(*task);
    for (slot, slot_answer) in answer.iter_mut() {
        let mut frozen = kept.remove(slot).unwrap_or_default();
        frozen
            .active
            .extend(slot_answer.active.iter().filter(free).cloned());
        frozen
            .standby
            .extend(slot_answer.standby.iter().filter(free).cloned());
        for task in slot_answer.learner.iter().filter(free) {
            if learners >= learners_max {
                break;
            }
            learners += usize::from(frozen.learner.insert(task.clone()));
        }
        *slot_answer = frozen;
    }
    owned.into_iter().cloned().collect()
}
