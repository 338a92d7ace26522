//! Learners: a learner that reports catching up asks for a new target at
//! once, and [`safe_target`] turns any assignor's answer into a target that
//! keeps the host's learner safety (invariant 5 of docs/design.md: no active
//! task moves cold from a live holder), and a frozen group's freeze.

use std::collections::{BTreeMap, BTreeSet};

use assignd_guest_sdk::{Assignment, NO_MEMBER};

use super::{Coordinator, Output, freeze::hold_frozen, swaps::Swaps};
use crate::protocol::group::{
    Group, LearnerMode, Liveness, Millis, RebalanceReason, Slot, SlotTarget, Task,
};

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
            self.bump_urgently(group_name, RebalanceReason::CaughtUp, now, out);
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
/// A frozen group's answer is first held to its installed target
/// (freeze.rs), and the learner safety then moves none of the tasks held:
/// the freeze outranks a warm member's claim on a task with no holder.
pub(super) fn safe_target(
    group: &Group,
    liveness: &Liveness,
    slots: &[Slot],
    tasks: &[Task],
    assignment: &Assignment,
) -> BTreeMap<Slot, SlotTarget> {
    let (mut target, mut learners) = answer_as_target(group, slots, tasks, assignment);
    let held = hold_frozen(group, &mut target);
    if group.config.frozen {
        learners = target.values().map(|t| t.learner.len() as u32).sum();
    }
    if group.config.learners == LearnerMode::Host {
        let learners = warm_free_tasks(group, liveness, &held, &mut target, learners);
        keep_cold_moves_on_their_holders(group, liveness, &held, &mut target, learners);
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

/// The answer as a target of every member, and how many learners it
/// placed (at most `max_learners` in [`LearnerMode::Host`]).
fn answer_as_target(
    group: &Group,
    slots: &[Slot],
    tasks: &[Task],
    assignment: &Assignment,
) -> (BTreeMap<Slot, SlotTarget>, u32) {
    let config = &group.config;
    // Each member's rows are gathered first and each set is built at once
    // from them: a big answer's rows inserted one by one showed in the
    // profile of its install.
    let mut rows = vec![Rows::default(); slots.len()];
    for (task, &owner) in tasks.iter().zip(&assignment.active_owner) {
        if owner != NO_MEMBER {
            rows[owner as usize].active.push(task.clone());
        }
    }
    let mut learners = 0u32;
    if config.learners != LearnerMode::Off {
        for (task, member) in assignment.learners.iter() {
            if config.learners == LearnerMode::Host && learners >= config.max_learners {
                break;
            }
            rows[member as usize]
                .learner
                .push(tasks[task as usize].clone());
            learners += 1;
        }
    }
    for (task, member) in assignment.standbys.iter() {
        rows[member as usize]
            .standby
            .push(tasks[task as usize].clone());
    }
    let mut target: BTreeMap<Slot, SlotTarget> = group
        .members
        .keys()
        .map(|slot| (slot.clone(), SlotTarget::default()))
        .collect();
    for (slot, rows) in slots.iter().zip(rows) {
        if rows.active.is_empty() && rows.learner.is_empty() && rows.standby.is_empty() {
            continue;
        }
        *target
            .get_mut(slot)
            .expect("the answer was validated against this input") = SlotTarget {
            active: rows.active.into_iter().collect(),
            learner: rows.learner.into_iter().collect(),
            standby: rows.standby.into_iter().collect(),
        };
    }
    (target, learners)
}

/// One member's rows of an answer, in the answer's order.
#[derive(Clone, Default)]
struct Rows {
    active: Vec<Task>,
    learner: Vec<Task>,
    standby: Vec<Task>,
}

/// A task nobody holds (its owner failed, or it is new) goes to a member
/// already caught up on it (a standby, an old owner) if the answer put it
/// on a cold one: failover without a replay. The answer's owner warms up,
/// so that balance returns once it caught up. Returns the learners placed.
/// A task a freeze `held` on its owner stays there.
fn warm_free_tasks(
    group: &Group,
    liveness: &Liveness,
    held: &BTreeSet<Task>,
    target: &mut BTreeMap<Slot, SlotTarget>,
    mut learners: u32,
) -> u32 {
    let config = &group.config;
    let acceptable = config.acceptable_recovery_lag;
    let mut free_cold: Vec<(Task, Slot)> = target
        .iter()
        .flat_map(|(slot, t)| t.active.iter().map(move |task| (task, slot)))
        .filter(|(task, to)| {
            group.holdings.holder(task).is_none()
                && !held.contains(*task)
                && !liveness.caught_up(to, task, acceptable)
        })
        .map(|(task, to)| (task.clone(), to.clone()))
        .collect();
    if free_cold.is_empty() {
        return learners;
    }
    free_cold.sort(); // in task order
    // Who is caught up on what, from the reported lags (a member reports
    // only the tasks whose state it keeps): the search below looks at
    // those, not at every member or every task a holder has.
    let mut caught_up_on: BTreeMap<&Task, Vec<&Slot>> = BTreeMap::new();
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
            let cold = target.get_mut(&to).expect("a member");
            cold.active.remove(&task);
            if learners < config.max_learners && cold.learner.insert(task.clone()) {
                learners += 1;
            }
            target.get_mut(&warm).expect("a member").active.insert(task);
        }
    }
    learners
}

/// An active task the answer moves from its live holder to a member not
/// caught up on it stays on its holder, which swaps away a task the new
/// member is caught up on if it has one, or else the new member warms it
/// up as a learner while `max_learners` allows. A task a freeze `held` on
/// its owner is never the one swapped away.
fn keep_cold_moves_on_their_holders(
    group: &Group,
    liveness: &Liveness,
    held: &BTreeSet<Task>,
    target: &mut BTreeMap<Slot, SlotTarget>,
    mut learners: u32,
) {
    let config = &group.config;
    let acceptable = config.acceptable_recovery_lag;
    // A holder may keep a task it subscribes to and does not drain;
    // otherwise the task must move, and its move warms up first (the
    // others can wait on their holder), or a stream of optional cold
    // moves could take every learner slot for good.
    let may_keep = |task: &Task, slot: &Slot| {
        let holder = &group.members[slot];
        holder.topics.contains(&task.topic) && !holder.draining
    };
    let mut cold_moves: Vec<(Task, Slot, Slot)> = target
        .iter()
        .flat_map(|(to, t)| t.active.iter().map(move |task| (task, to)))
        .filter_map(|(task, to)| {
            let from = group.holdings.holder(task)?;
            (from != to && !liveness.caught_up(to, task, acceptable))
                .then(|| (task.clone(), from.to_owned(), to.clone()))
        })
        .collect();
    // Stable: in task order within each kind, as the swaps' choice is.
    cold_moves.sort_by(|a, b| (may_keep(&a.0, &a.1), &a.0).cmp(&(may_keep(&b.0, &b.1), &b.0)));
    let mut swaps = Swaps::new(group, liveness, held, target);
    let mut unwarmed = Vec::new();
    for (task, from, to) in cold_moves {
        target.get_mut(&to).expect("a member").active.remove(&task);
        target
            .get_mut(&from)
            .expect("a holder is a member")
            .active
            .insert(task.clone());
        swaps.now_active(&task);
        // A holder that may not keep the task (it no longer subscribes
        // to its topic, or it drains) must see it warm up elsewhere: a
        // swap would leave it there with no learner, for good.
        let swap = may_keep(&task, &from)
            .then(|| swaps.first(&to, &from, &task))
            .flatten();
        match swap {
            Some(other) => {
                swaps.no_longer_active(other);
                target
                    .get_mut(&from)
                    .expect("a member")
                    .active
                    .remove(other);
                target
                    .get_mut(&to)
                    .expect("a member")
                    .active
                    .insert(other.clone());
            }
            None if learners < config.max_learners => {
                let placed = target.get_mut(&to).expect("a member").learner.insert(task);
                learners += u32::from(placed);
            }
            None => unwarmed.push((task, to)),
        }
    }
    warm_the_rest(target, unwarmed, config.max_learners);
}

/// Learners for the cold moves that found no swap and no learner slot
/// while the answer's own learners counted, as far as `max_learners`
/// allows once those that end up active where they are no longer count
/// (the caller drops them: they must not keep a cold move from warming).
fn warm_the_rest(
    target: &mut BTreeMap<Slot, SlotTarget>,
    unwarmed: Vec<(Task, Slot)>,
    max_learners: u32,
) {
    let mut placed: u32 = target
        .values()
        .map(|t| t.learner.difference(&t.active).count() as u32)
        .sum();
    for (task, to) in unwarmed {
        if placed >= max_learners {
            break;
        }
        let slot = target.get_mut(&to).expect("a member");
        placed += u32::from(slot.learner.insert(task));
    }
}
