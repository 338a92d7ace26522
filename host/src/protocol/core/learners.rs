//! Learners: a learner that reports catching up asks for a new target at
//! once, and [`safe_target`] turns any assignor's answer into a target that
//! keeps the host's learner safety (invariant 5 of docs/design.md: no active
//! task moves cold from a live holder).

use std::collections::BTreeMap;

use assignd_guest_sdk::{Assignment, NO_MEMBER};

use super::{Coordinator, Output};
use crate::protocol::group::{Group, LearnerMode, Liveness, Millis, Slot, SlotTarget, TaskRef};

impl Coordinator {
    /// A learner that reports it has caught up asks for a new target at
    /// once (the seed design's second rebalance), instead of waiting for
    /// the probing interval.
    pub(super) fn signal_caught_up_learners(
        &mut self,
        group_name: &str,
        slot: &Slot,
        now: Millis,
        out: &mut Output,
    ) {
        let (group, liveness) = self.entry_mut(group_name);
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
            let liveness = self.liveness_mut(group_name);
            let paced = liveness.pending_since_ms.is_none() || liveness.catch_up_only;
            self.bump_urgently(group_name, now, out);
            // A batch of catch-ups alone waits for the pace of the last
            // install (targets.rs); a member's failure or arrival in it
            // does not.
            self.liveness_mut(group_name).catch_up_only = paced;
        }
    }
}

/// The installed target for an assignor's answer: the answer itself, with
/// the host's learner safety in [`LearnerMode::Host`]: an active task the
/// answer moves away from a live holder, to a member that has not reported
/// catching up on it, stays on its holder. If the holder has another task
/// the new member is caught up on, that one moves instead (same balance,
/// no cold move); otherwise the new member gets a learner for it, at most
/// `max_learners` in the group. Invariant 5 of docs/design.md, for any assignor.
pub(super) fn safe_target(
    group: &Group,
    liveness: &Liveness,
    slots: &[Slot],
    tasks: &[TaskRef],
    assignment: &Assignment,
) -> BTreeMap<Slot, SlotTarget> {
    let config = &group.config;
    let mut target: BTreeMap<Slot, SlotTarget> = group
        .members
        .keys()
        .map(|slot| (slot.clone(), SlotTarget::default()))
        .collect();
    let slot_of = |member: u32| -> &Slot { &slots[member as usize] };
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
        let mut new_owner: BTreeMap<&TaskRef, Slot> = BTreeMap::new();
        for (slot, t) in &target {
            for task in &t.active {
                new_owner.insert(task, slot.clone());
            }
        }
        // A holder may keep a task it subscribes to and does not drain;
        // otherwise the task must move, and its move warms up first (the
        // others can wait on their holder), or a stream of optional cold
        // moves could take every learner slot for good.
        let may_keep = |task: &TaskRef, slot: &Slot| {
            let holder = &group.members[slot];
            holder.topics.contains(&task.topic) && !holder.draining
        };
        let mut cold_moves: Vec<(TaskRef, Slot, Slot)> = new_owner
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
        let free_cold: Vec<(TaskRef, Slot)> = new_owner
            .iter()
            .filter(|(task, to)| {
                group.holdings.holder(task).is_none() && !liveness.caught_up(to, task, acceptable)
            })
            .map(|(task, to)| ((*task).clone(), to.clone()))
            .collect();
        // Who is caught up on what, from the reported lags (a member reports
        // only the tasks whose state it keeps): the searches below look at
        // those, not at every member or every task a holder has.
        let mut caught_up_on: BTreeMap<&TaskRef, Vec<&Slot>> = BTreeMap::new();
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
                        && group.holdings.holder(other) == Some(&from)
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
    // Borrowed field by field: no copy of a slot's tasks, which showed in
    // the profile of a big group's installs.
    for SlotTarget {
        active,
        learner,
        standby,
    } in target.values_mut()
    {
        learner.retain(|task| !active.contains(task));
        standby.retain(|task| !active.contains(task) && !learner.contains(task));
    }
    target
}
