//! [`Swaps`]: which of a holder's tasks a new owner could take instead of a
//! task it is not caught up on, kept as an index while the learner safety
//! (learners.rs) moves tasks between members, so that each choice is a
//! lookup. Why an index: searching the new owner's reported lags once per
//! cold move is quadratic in the group. 10,000 tasks moved to the one
//! member of five with no copy of them, while every member reports lags on
//! its standbys, take 5.7 s that way under the shard's lock, 24 ms with the
//! index (`cargo bench -p assignd --bench heartbeat -- install/`).

use std::collections::{BTreeMap, BTreeSet};

use crate::protocol::group::{Group, Liveness, Slot, SlotTarget, Task};

/// For each held task some member has caught up on, its holder and those
/// members; for each (new owner, holder) pair, the holder's tasks active in
/// the target being built that the new owner has caught up on and
/// subscribes to. Borrowed from the group and its liveness, which do not
/// change while a target is built.
pub(super) struct Swaps<'a> {
    warm: BTreeMap<&'a Task, (&'a Slot, Vec<&'a Slot>)>,
    by_pair: BTreeMap<(&'a Slot, &'a Slot), BTreeSet<&'a Task>>,
}

impl<'a> Swaps<'a> {
    /// The index for `target` as it stands. A task in `held` (a frozen
    /// group's, held on its owner) is never offered: a swap would move it.
    pub(super) fn new(
        group: &'a Group,
        liveness: &'a Liveness,
        held: &BTreeSet<Task>,
        target: &BTreeMap<Slot, SlotTarget>,
    ) -> Self {
        let acceptable = group.config.acceptable_recovery_lag;
        let mut swaps = Swaps {
            warm: BTreeMap::new(),
            by_pair: BTreeMap::new(),
        };
        for (to, lags) in &liveness.lags {
            let Some(member) = group.members.get(to) else {
                continue;
            };
            for (task, _) in lags.iter().filter(|&(_, &lag)| lag <= acceptable) {
                let Some(holder) = group.holdings.holder(task) else {
                    continue;
                };
                if !member.topics.contains(&task.topic) || held.contains(task) {
                    continue;
                }
                swaps
                    .warm
                    .entry(task)
                    .or_insert((holder, Vec::new()))
                    .1
                    .push(to);
                if target.get(holder).is_some_and(|t| t.active.contains(task)) {
                    swaps.by_pair.entry((to, holder)).or_default().insert(task);
                }
            }
        }
        swaps
    }

    /// The first (in task order) of `from`'s tasks other than `task` that
    /// `to` could take instead of it.
    pub(super) fn first(&self, to: &Slot, from: &Slot, task: &Task) -> Option<&'a Task> {
        self.by_pair
            .get(&(to, from))?
            .iter()
            .find(|other| **other != task)
            .copied()
    }

    /// `task` became active on its holder in the target.
    pub(super) fn now_active(&mut self, task: &Task) {
        if let Some((&task, (holder, warm))) = self.warm.get_key_value(task) {
            for &to in warm {
                self.by_pair.entry((to, holder)).or_default().insert(task);
            }
        }
    }

    /// `task` is no longer active on its holder in the target.
    pub(super) fn no_longer_active(&mut self, task: &Task) {
        if let Some((holder, warm)) = self.warm.get(task) {
            for &to in warm {
                if let Some(tasks) = self.by_pair.get_mut(&(to, *holder)) {
                    tasks.remove(task);
                }
            }
        }
    }
}
