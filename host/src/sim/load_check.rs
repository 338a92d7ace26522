//! The load invariants of docs/design.md (10 to 13) as pure checks over
//! the core's groups, the assignor input a target was computed from and
//! the moves the simulator saw. Like [`super::check`], none of them changes
//! anything, so a test can feed them hand-made breaches.
//!
//! Whether the band is reachable (invariant 10 binds only then) is decided
//! soundly: either by a sufficient condition (every member subscribes to
//! every topic and no task's load exceeds `b` times the smallest share: a
//! greedy that gives each task to the member furthest below its share ends
//! with every member within one task's load of its share), or for tiny
//! groups by trying every assignment. Otherwise the band is taken as
//! unreachable and not checked.

use std::collections::{BTreeMap, BTreeSet};

use assignd_guest_sdk::{Assignment, GroupInput, NO_MEMBER};

use crate::protocol::group::{Group, Millis, Slot, SlotTarget, Task};

/// The most assignments the exact reachability test tries
/// (members^tasks).
const BRUTE_FORCE_ASSIGNMENTS_MAX: f64 = 50_000.0;

/// Slack on the band's edges for the sums' rounding, relative to the
/// group's total load.
const BAND_SLACK: f64 = 1e-9;

/// What an assignor call saw of the loads, by slot: the known loads of
/// the group's tasks, each member's weight and topics, and the band.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadInput {
    pub band: f64,
    /// Every task of the group's topics, as the input had them.
    pub tasks: Vec<Task>,
    /// The known loads (a task without one is unknown, not zero).
    pub loads: BTreeMap<Task, f64>,
    /// Each member's weight: its load capacity if every member declared
    /// one, else its capacity.
    pub weights: BTreeMap<Slot, f64>,
    pub topics: BTreeMap<Slot, BTreeSet<String>>,
}

impl LoadInput {
    /// The loads of `input` (of a group with a load unit), its members by
    /// their slots in `group` (the group the call was made from); `None`
    /// when the group takes no loads or its band param is not valid.
    pub fn of(input: &GroupInput, group: &Group) -> Option<LoadInput> {
        input.load_unit.as_ref()?;
        let band = assignd_guest_sdk::load::band(&input.params).ok()?;
        let tasks: Vec<Task> = input
            .topics
            .iter()
            .flat_map(|t| (0..t.partitions).map(|p| Task::new(&t.name, p)))
            .collect();
        let loads = input
            .task_loads()
            .into_iter()
            .zip(&tasks)
            .filter_map(|(load, task)| Some((task.clone(), load?)))
            .collect();
        let by_capacity = input.members.iter().any(|m| m.load_capacity.is_none());
        let mut weights = BTreeMap::new();
        let mut topics = BTreeMap::new();
        for member in &input.members {
            let slot = group.slot_of(&member.id)?.clone();
            let weight = match member.load_capacity {
                Some(c) if !by_capacity => c,
                _ => f64::from(member.capacity),
            };
            let subscribed = input
                .topics_of(member)
                .iter()
                .map(|&t| input.topics[t as usize].name.clone())
                .collect();
            weights.insert(slot.clone(), weight);
            topics.insert(slot, subscribed);
        }
        Some(LoadInput {
            band,
            tasks,
            loads,
            weights,
            topics,
        })
    }

    /// Whether every task's load is known.
    pub fn complete(&self) -> bool {
        self.tasks.iter().all(|t| self.loads.contains_key(t))
    }

    fn total(&self) -> f64 {
        self.loads.values().sum()
    }

    /// Each member's share of the total load.
    pub fn shares(&self) -> BTreeMap<&Slot, f64> {
        let total = self.total();
        let weight: f64 = self.weights.values().sum();
        self.weights
            .iter()
            .map(|(slot, w)| {
                (
                    slot,
                    if weight > 0.0 {
                        total * w / weight
                    } else {
                        0.0
                    },
                )
            })
            .collect()
    }

    /// Whether `load` is in band for `share`.
    fn in_band(&self, load: f64, share: f64) -> bool {
        let slack = BAND_SLACK * self.total().max(1.0);
        load >= share * (1.0 - self.band) - slack && load <= self.band_top(share)
    }

    /// The most a member of `share` may carry in band.
    fn band_top(&self, share: f64) -> f64 {
        share * (1.0 + self.band) + BAND_SLACK * self.total().max(1.0)
    }

    /// Whether the built-in balancer is proven to reach the band on this
    /// input: every load known, every member subscribed to every topic,
    /// and no task heavier than `b` times the smallest share (then giving
    /// each task to the member furthest below its share keeps everyone
    /// within one task of theirs). Invariant 10 holds the balancer to
    /// this; [`LoadInput::band_reachable`] is wider, and the balancer's
    /// greedy does not always find an assignment it knows exists.
    pub fn band_guaranteed(&self) -> bool {
        if !self.complete() || self.weights.is_empty() {
            return false;
        }
        let shares = self.shares();
        let everyone_subscribes = self.tasks.iter().all(|task| {
            self.topics
                .values()
                .all(|topics| topics.contains(&task.topic))
        });
        let smallest = shares.values().copied().fold(f64::INFINITY, f64::min);
        let largest_task = self.loads.values().copied().fold(0.0, f64::max);
        everyone_subscribes && largest_task <= self.band * smallest
    }

    /// Whether some assignment of the tasks to subscribed members puts
    /// every member in band, as far as the module doc's sound tests can
    /// tell (`false` when they cannot).
    pub fn band_reachable(&self) -> bool {
        if !self.complete() || self.weights.is_empty() {
            return false;
        }
        if self.band_guaranteed() {
            return true;
        }
        let shares = self.shares();
        let tries = (self.weights.len() as f64).powi(self.tasks.len() as i32);
        tries <= BRUTE_FORCE_ASSIGNMENTS_MAX && self.some_assignment_in_band(&shares)
    }

    /// Tries every assignment of the tasks to subscribed members, pruning
    /// a member past its band's top.
    fn some_assignment_in_band(&self, shares: &BTreeMap<&Slot, f64>) -> bool {
        let slots: Vec<&Slot> = shares.keys().copied().collect();
        let mut loads = vec![0.0; slots.len()];
        self.place(0, &slots, shares, &mut loads)
    }

    fn place(
        &self,
        next: usize,
        slots: &[&Slot],
        shares: &BTreeMap<&Slot, f64>,
        loads: &mut [f64],
    ) -> bool {
        let Some(task) = self.tasks.get(next) else {
            return slots
                .iter()
                .zip(loads.iter())
                .all(|(slot, &load)| self.in_band(load, shares[slot]));
        };
        let load = self.loads[task];
        for (i, slot) in slots.iter().enumerate() {
            if !self.topics[*slot].contains(&task.topic) {
                continue;
            }
            loads[i] += load;
            let fits = loads[i] <= self.band_top(shares[slot]);
            if fits && self.place(next + 1, slots, shares, loads) {
                return true;
            }
            loads[i] -= load;
        }
        false
    }
}

/// Invariant 10, once a target computed from `input` has settled (every
/// slot holds exactly its target's active tasks, no learners): when every
/// load was known and the band is reachable, every member's load is in
/// band of its share. `holdings` is each slot's active tasks.
pub fn check_band(
    input: &LoadInput,
    reachable: bool,
    holdings: &BTreeMap<Slot, BTreeSet<Task>>,
) -> Result<(), String> {
    if !reachable {
        return Ok(());
    }
    let shares = input.shares();
    for (slot, share) in shares {
        let held = holdings.get(slot);
        let load: f64 = held
            .into_iter()
            .flatten()
            .filter_map(|t| input.loads.get(t))
            .sum();
        if !input.in_band(load, share) {
            let b = input.band;
            return Err(format!(
                "invariant 10: settled on a target whose loads were all known and whose band is reachable, {slot} carries {load:.3} against its share {share:.3} (band {b}: {:.3} ..= {:.3})",
                share * (1.0 - b),
                share * (1.0 + b),
            ));
        }
    }
    Ok(())
}

/// A task's move as a target started it: when, and whether the target
/// was a load rebalance alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    pub at_ms: Millis,
    pub for_load_alone: bool,
}

/// The tasks `target` starts moving, from the `previous` target: tasks
/// given, active or as learners, to a slot that had neither role for them
/// before (a learner promoted where it warmed up is the end of a move
/// already counted, not a new one). A task that had no owner in the
/// previous target is placed, not moved.
pub fn moves_started(
    previous: &BTreeMap<Slot, SlotTarget>,
    target: &BTreeMap<Slot, SlotTarget>,
) -> BTreeSet<Task> {
    let mut placed: BTreeMap<&Task, BTreeSet<&Slot>> = BTreeMap::new();
    let mut owned: BTreeSet<&Task> = BTreeSet::new();
    for (slot, t) in previous {
        for task in t.active.iter().chain(&t.learner) {
            placed.entry(task).or_default().insert(slot);
        }
        owned.extend(&t.active);
    }
    let mut started = BTreeSet::new();
    for (slot, t) in target {
        for task in t.active.iter().chain(&t.learner) {
            let before = placed.get(task);
            if owned.contains(task) && !before.is_some_and(|slots| slots.contains(slot)) {
                started.insert(task.clone());
            }
        }
    }
    started
}

/// Invariant 11, at a target that starts moving `moved` at `now`: no task
/// moves a second time for a load rebalance alone within `cooldown_ms` of
/// its last move for a load rebalance alone. `last` holds each task's last
/// such move; it is updated by the caller.
pub fn check_cooldown(
    last: &BTreeMap<Task, Millis>,
    moved: &BTreeSet<Task>,
    now: Millis,
    cooldown_ms: u64,
) -> Result<(), String> {
    for task in moved {
        if let Some(&at) = last.get(task)
            && now < at.saturating_add(cooldown_ms)
        {
            return Err(format!(
                "invariant 11: {task:?} moves for load again at t={now}, {} ms after its last move for load (cooldown {cooldown_ms} ms)",
                now - at
            ));
        }
    }
    Ok(())
}

/// Each slot's active tasks in `group`'s holdings.
pub fn active_owners(group: &Group) -> BTreeMap<Task, Slot> {
    let mut owners = BTreeMap::new();
    for (slot, assignment) in group.holdings.members() {
        for task in &assignment.active {
            owners.insert(task.clone(), slot.clone());
        }
    }
    owners
}

/// Whether `slot` still owns tasks of `topic` as a live member of
/// `group`: a member, not draining, subscribed to the topic.
fn stays(group: &Group, slot: &str, topic: &str) -> bool {
    group
        .members
        .get(slot)
        .is_some_and(|m| !m.draining && m.topics.contains(topic))
}

/// The tasks `group` holds active where its target keeps them: each
/// task's settled owner (a task on its way to another member is not in
/// it).
pub fn settled_owners(group: &Group) -> BTreeMap<Task, Slot> {
    let mut owners = active_owners(group);
    owners.retain(|task, slot| group.target_of(slot).active.contains(task));
    owners
}

/// Invariant 12, at a target installed while `before` is frozen: every
/// task the previous target gives active to a slot that is still a live
/// member subscribed to its topic stays active there (only free tasks
/// take the answer).
pub fn check_frozen_target(
    before: &Group,
    target: &BTreeMap<Slot, SlotTarget>,
) -> Result<(), String> {
    let tasks: BTreeSet<Task> = before.tasks().collect();
    for (slot, previous) in before.target.iter() {
        for task in &previous.active {
            if !tasks.contains(task) || !stays(before, slot, &task.topic) {
                continue;
            }
            if target.get(slot).is_some_and(|t| t.active.contains(task)) {
                continue;
            }
            // A move the previous target started, which the learner safety
            // takes back to the member still processing the task because
            // its new owner is not caught up (invariant 5): nothing moves.
            let processing = before.holdings.holder(task);
            let back = processing
                .is_some_and(|holder| target.get(holder).is_some_and(|t| t.active.contains(task)));
            if !back {
                return Err(format!(
                    "invariant 12: the group is frozen, yet its new target moves {task:?} off {slot}, a live member subscribed to its topic"
                ));
            }
        }
    }
    Ok(())
}

/// Invariant 12, after a step through which `group` stayed frozen: every
/// task settled on a slot before the step (`before`, its
/// [`settled_owners`]) whose slot is still a live member subscribed to its
/// topic is still active there. A member leaving (removed, or draining)
/// may lose its tasks; a task the config took away is gone, not moved; a
/// move the target had started before the freeze goes on.
pub fn check_frozen(before: &BTreeMap<Task, Slot>, group: &Group) -> Result<(), String> {
    let tasks: BTreeSet<Task> = group.tasks().collect();
    for (task, slot) in before {
        if !tasks.contains(task) || !stays(group, slot, &task.topic) {
            continue;
        }
        let kept = group
            .holdings
            .member(slot)
            .is_some_and(|a| a.active.contains(task));
        if !kept {
            return Err(format!(
                "invariant 12: the group is frozen, yet {task:?} left {slot}, a live member subscribed to its topic (held by {:?} now)",
                group.holdings.holder(task)
            ));
        }
    }
    Ok(())
}

/// Invariant 13, first half: a load rebalance is asked for only while
/// every task held active has a known load (`input`, what the assignor is
/// given; `group`, the group it is asked for).
pub fn check_load_call(input: &LoadInput, group: &Group) -> Result<(), String> {
    let owners = active_owners(group);
    if let Some((task, slot)) = owners.iter().find(|(t, _)| !input.loads.contains_key(*t)) {
        return Err(format!(
            "invariant 13: a load rebalance is asked for while the load of {task:?} (active on {slot}) is unknown"
        ));
    }
    Ok(())
}

/// Invariant 13, second half, at a load rebalance's target installed in
/// `before` (a group with a load unit) from an input whose known loads are
/// `input`'s: no task of unknown load moves off an owner that stays (a live
/// member subscribed to its topic). A task's owner is where the previous
/// target puts it active (where the group was going, the assignor's
/// previous assignment): a move that target decided may go on.
pub fn check_unknown_stay(
    input: &LoadInput,
    before: &Group,
    target: &BTreeMap<Slot, SlotTarget>,
) -> Result<(), String> {
    if input.loads.is_empty() {
        return Ok(());
    }
    // A task the config took away is gone, not moved.
    let tasks: BTreeSet<&Task> = input.tasks.iter().collect();
    let owners = before
        .target
        .iter()
        .flat_map(|(slot, t)| t.active.iter().map(move |task| (task, slot)));
    for (task, slot) in owners {
        if !tasks.contains(task)
            || input.loads.contains_key(task)
            || !stays(before, slot, &task.topic)
        {
            continue;
        }
        let kept = target.get(slot).is_some_and(|t| t.active.contains(task));
        if !kept {
            return Err(format!(
                "invariant 13: a target moves {task:?}, whose load is unknown, off {slot}, which stays"
            ));
        }
    }
    Ok(())
}

/// Invariant 13, at an answer of the built-in load balancer (`sticky`, which
/// moves tasks for balance alone) to an input with some loads known: every
/// task of unknown load keeps its current owner while that owner still
/// subscribes to its topic. An unknown load is not zero: the balancer may
/// not move it to even the loads out.
pub fn check_answer_keeps_unknown(input: &GroupInput, answer: &Assignment) -> Result<(), String> {
    if input.loads.is_empty() {
        return Ok(());
    }
    let known = input.task_loads();
    let offsets = input.topic_offsets();
    for (task, &owner) in input.active_owner.iter().enumerate() {
        if owner == NO_MEMBER || known[task].is_some() {
            continue;
        }
        let topic = offsets.partition_point(|&first| first as usize <= task) as u32 - 1;
        let member = &input.members[owner as usize];
        if input.subscribes(member, topic) && answer.active_owner[task] != owner {
            return Err(format!(
                "invariant 13: the balancer moves task {task}, whose load is unknown, off member {} (to {})",
                member.id, answer.active_owner[task]
            ));
        }
    }
    Ok(())
}
