//! Incremental cooperative reconciliation (KIP-429 / KIP-848's
//! `CurrentAssignmentBuilder`): how each member moves from what it holds to
//! what the group's target gives it, without ever stopping the world.
//!
//! It owns two rules:
//! - a member keeps every task its target still gives it, and is asked to
//!   release the rest before its epoch advances;
//! - a task is granted to its new owner only once nobody else holds it: its
//!   old owner acknowledged releasing it, or was removed (fenced, expired,
//!   left).
//!
//! It knows nothing of time, records, transport or assignors: the protocol
//! core calls it with a member's reported tasks and the current target.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::protocol::slot::Slot;

/// What a task is to the reconciliation: anything ordered (the core uses
/// (topic, partition) so that topic changes do not renumber tasks; tests
/// use integers).
pub trait Task: Ord + Clone + std::fmt::Debug {}

impl<T: Ord + Clone + std::fmt::Debug> Task for T {}

/// Where a member is in reaching its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemberState {
    /// Holds exactly its target at the target's epoch.
    Stable,
    /// Must release `revoking` before it can advance to the target epoch.
    UnrevokedTasks,
    /// At the target epoch, waiting for other members to release tasks its
    /// target gives it.
    UnreleasedTasks,
}

/// What the host grants one member.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberAssignment<T: Task> {
    pub state: MemberState,
    /// The member epoch: the target epoch it last reached.
    pub epoch: u64,
    /// The epoch before that: a member whose last response was lost may
    /// still send it.
    pub previous_epoch: u64,
    /// Tasks the member may process.
    pub active: BTreeSet<T>,
    /// Tasks the member must release; it still holds them until it reports
    /// they are gone.
    pub revoking: BTreeSet<T>,
}

impl<T: Task> MemberAssignment<T> {
    /// A member that just joined: nothing held, epoch 0.
    pub fn new() -> Self {
        MemberAssignment {
            state: MemberState::Stable,
            epoch: 0,
            previous_epoch: 0,
            active: BTreeSet::new(),
            revoking: BTreeSet::new(),
        }
    }

    /// Every task this member holds (active or being released).
    pub fn held(&self) -> impl Iterator<Item = &T> + '_ {
        self.active.iter().chain(&self.revoking)
    }
}

impl<T: Task> Default for MemberAssignment<T> {
    fn default() -> Self {
        Self::new()
    }
}

/// The next assignment of one member.
///
/// - `target_epoch`, `target`: the group's current target for this member.
/// - `owned`: the tasks the member reports holding in this heartbeat, if it
///   reported them (a heartbeat may omit them when nothing changed).
/// - `held_by_other(task)`: whether another member still holds `task`.
pub fn reconcile<T: Task>(
    current: &MemberAssignment<T>,
    target_epoch: u64,
    target: &BTreeSet<T>,
    owned: Option<&BTreeSet<T>>,
    held_by_other: impl Fn(&T) -> bool,
) -> MemberAssignment<T> {
    let mut next = current.clone();
    if next.state == MemberState::UnrevokedTasks {
        // A task the member reports gone is released; one the target has
        // given back since is simply kept (it never stopped holding it).
        for task in std::mem::take(&mut next.revoking) {
            let still_held = owned.is_none_or(|owned| owned.contains(&task));
            if !still_held {
                continue;
            }
            if target.contains(&task) {
                next.active.insert(task);
            } else {
                next.revoking.insert(task);
            }
        }
        if !next.revoking.is_empty() {
            return next;
        }
        next.state = MemberState::Stable;
    }
    if next.state == MemberState::Stable && next.epoch == target_epoch {
        return next;
    }
    let revoke: BTreeSet<T> = next.active.difference(target).cloned().collect();
    if !revoke.is_empty() {
        // Keep what does not move; the epoch waits for the release.
        next.active.retain(|task| target.contains(task));
        next.revoking = revoke;
        next.state = MemberState::UnrevokedTasks;
        return next;
    }
    for task in target {
        if !next.active.contains(task) && !held_by_other(task) {
            next.active.insert(task.clone());
        }
    }
    if next.epoch != target_epoch {
        next.previous_epoch = next.epoch;
        next.epoch = target_epoch;
    }
    next.state = if next.active.len() == target.len() {
        MemberState::Stable
    } else {
        MemberState::UnreleasedTasks
    };
    next
}

/// Every member's assignment and who holds each task: the group-wide view
/// that [`reconcile`] needs, kept consistent so that no task is ever held
/// by two members at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holdings<T: Task> {
    members: BTreeMap<Slot, MemberAssignment<T>>,
    holder: BTreeMap<T, Slot>,
}

impl<T: Task> Default for Holdings<T> {
    fn default() -> Self {
        Holdings {
            members: BTreeMap::new(),
            holder: BTreeMap::new(),
        }
    }
}

impl<T: Task> Holdings<T> {
    pub fn member(&self, id: &str) -> Option<&MemberAssignment<T>> {
        self.members.get(id)
    }

    pub fn members(&self) -> impl Iterator<Item = (&Slot, &MemberAssignment<T>)> {
        self.members.iter()
    }

    /// The member holding `task` (active or being released), if any.
    pub fn holder(&self, task: &T) -> Option<&Slot> {
        self.holder.get(task)
    }

    /// Reconciles member `id` (added if new) against its target and records
    /// the result; returns its new assignment.
    pub fn reconcile_member(
        &mut self,
        id: &str,
        target_epoch: u64,
        target: &BTreeSet<T>,
        owned: Option<&BTreeSet<T>>,
    ) -> &MemberAssignment<T> {
        let current = self.members.get(id).cloned().unwrap_or_default();
        let holder = &self.holder;
        let next = reconcile(&current, target_epoch, target, owned, |task| {
            holder.get(task).is_some_and(|h| *h != id)
        });
        self.set(id, next);
        &self.members[id]
    }

    /// Removes a member (left, fenced or expired): every task it held is
    /// free for its next owner at once.
    pub fn remove(&mut self, id: &str) -> Option<MemberAssignment<T>> {
        let removed = self.members.remove(id)?;
        for task in removed.held() {
            let previous = self.holder.remove(task);
            debug_assert!(
                previous.is_some_and(|h| h == id),
                "holder index out of step"
            );
        }
        Some(removed)
    }

    /// Replaces a member's assignment, keeping the holder index in step.
    /// Panics (a bug, not input) if it would give a task to two members.
    pub fn set(&mut self, id: &str, next: MemberAssignment<T>) {
        if let Some(previous) = self.members.get(id) {
            for task in previous.held() {
                self.holder.remove(task);
            }
        }
        for task in next.held() {
            let other = self.holder.insert(task.clone(), Slot::from_key(id));
            assert!(
                other.is_none(),
                "task {task:?} granted to {id} while {other:?} holds it"
            );
        }
        self.members.insert(Slot::from_key(id), next);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(tasks: &[u32]) -> BTreeSet<u32> {
        tasks.iter().copied().collect()
    }

    #[test]
    fn a_new_member_gets_its_free_target_at_once() {
        let next = reconcile(
            &MemberAssignment::new(),
            1,
            &set(&[0, 1]),
            None,
            |_: &u32| false,
        );
        assert_eq!(next.state, MemberState::Stable);
        assert_eq!(next.epoch, 1);
        assert_eq!(next.active, set(&[0, 1]));
    }

    #[test]
    fn a_moving_task_waits_for_its_release_and_nothing_else_pauses() {
        let mut group = Holdings::<u32>::default();
        group.reconcile_member("a", 1, &set(&[0, 1, 2]), None);
        // Target 2 moves task 2 from a to b.
        let b = group.reconcile_member("b", 2, &set(&[2]), None).clone();
        assert_eq!(b.state, MemberState::UnreleasedTasks);
        assert_eq!(
            (b.epoch, b.active.len()),
            (2, 0),
            "b waits: a still holds 2"
        );
        let a = group
            .reconcile_member("a", 2, &set(&[0, 1]), Some(&set(&[0, 1, 2])))
            .clone();
        assert_eq!(a.state, MemberState::UnrevokedTasks);
        assert_eq!(a.active, set(&[0, 1]), "tasks that do not move are kept");
        assert_eq!(a.revoking, set(&[2]));
        assert_eq!(a.epoch, 1, "the epoch waits for the release");
        // b heartbeats before a released: still nothing.
        let b = group
            .reconcile_member("b", 2, &set(&[2]), Some(&set(&[])))
            .clone();
        assert!(b.active.is_empty());
        // a reports it released 2.
        let a = group
            .reconcile_member("a", 2, &set(&[0, 1]), Some(&set(&[0, 1])))
            .clone();
        assert_eq!((a.state, a.epoch), (MemberState::Stable, 2));
        let b = group
            .reconcile_member("b", 2, &set(&[2]), Some(&set(&[])))
            .clone();
        assert_eq!((b.state, b.active), (MemberState::Stable, set(&[2])));
    }

    #[test]
    fn a_removed_member_frees_its_tasks_at_once() {
        let mut group = Holdings::<u32>::default();
        group.reconcile_member("a", 1, &set(&[0, 1]), None);
        group.reconcile_member("a", 2, &set(&[]), Some(&set(&[0, 1])));
        assert_eq!(
            group.holder(&0).map(Slot::as_str),
            Some("a"),
            "a still holds what it must release"
        );
        group.remove("a");
        assert_eq!(group.holder(&0), None);
        let b = group.reconcile_member("b", 2, &set(&[0, 1]), None);
        assert_eq!(b.active, set(&[0, 1]));
    }

    #[test]
    fn an_unacknowledged_revocation_keeps_the_member_where_it_is() {
        let mut group = Holdings::<u32>::default();
        group.reconcile_member("a", 1, &set(&[0]), None);
        let first = group
            .reconcile_member("a", 2, &set(&[]), Some(&set(&[0])))
            .clone();
        // No report, then a report that still holds 0: no change either time.
        assert_eq!(group.reconcile_member("a", 3, &set(&[]), None), &first);
        assert_eq!(
            group.reconcile_member("a", 3, &set(&[]), Some(&set(&[0]))),
            &first
        );
    }

    #[test]
    fn a_task_given_back_before_its_release_is_simply_kept() {
        let mut group = Holdings::<u32>::default();
        group.reconcile_member("a", 1, &set(&[0, 1]), None);
        group.reconcile_member("a", 2, &set(&[0]), Some(&set(&[0, 1])));
        // Target 3 gives 1 back to a before a released it.
        let a = group.reconcile_member("a", 3, &set(&[0, 1]), Some(&set(&[0, 1])));
        assert_eq!((a.state, a.epoch), (MemberState::Stable, 3));
        assert_eq!(a.active, set(&[0, 1]));
        assert!(a.revoking.is_empty());
    }

    #[test]
    fn revocations_are_released_one_by_one() {
        let mut group = Holdings::<u32>::default();
        group.reconcile_member("a", 1, &set(&[0, 1, 2]), None);
        group.reconcile_member("a", 2, &set(&[0]), Some(&set(&[0, 1, 2])));
        let a = group
            .reconcile_member("a", 2, &set(&[0]), Some(&set(&[0, 2])))
            .clone();
        assert_eq!(a.revoking, set(&[2]), "1 is released, 2 is not yet");
        assert_eq!(group.holder(&1), None, "a released task is free at once");
        let b = group.reconcile_member("b", 2, &set(&[1, 2]), None).clone();
        assert_eq!(
            (b.state, b.active),
            (MemberState::UnreleasedTasks, set(&[1]))
        );
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        const MEMBERS: [&str; 4] = ["a", "b", "c", "d"];
        const TASKS: u32 = 12;

        /// One step of a schedule: a new target, a member's heartbeat (with
        /// or without its revocations released), or a member removed.
        #[derive(Clone, Debug)]
        enum Step {
            NewTarget(Vec<u8>),
            Heartbeat { member: u8, releases: bool },
            Remove(u8),
        }

        fn step() -> impl Strategy<Value = Step> {
            prop_oneof![
                1 => proptest::collection::vec(0u8..4, TASKS as usize).prop_map(Step::NewTarget),
                6 => (0u8..4, any::<bool>())
                    .prop_map(|(member, releases)| Step::Heartbeat { member, releases }),
                1 => (0u8..4).prop_map(Step::Remove),
            ]
        }

        fn target_of(owners: &[u8], member: u8) -> BTreeSet<u32> {
            (0..TASKS)
                .filter(|&t| owners[t as usize] == member)
                .collect()
        }

        proptest! {
            /// Invariant 1 (never two holders) after every step, invariant 4
            /// (a task whose target owner does not change is never revoked),
            /// and convergence once the target stops moving.
            #[test]
            fn no_task_is_ever_held_twice_and_the_group_converges(
                first in proptest::collection::vec(0u8..4, TASKS as usize),
                steps in proptest::collection::vec(step(), 0..60),
            ) {
                let mut group = Holdings::<u32>::default();
                let mut owners = first;
                let mut epoch = 1u64;
                for step in steps {
                    match step {
                        Step::NewTarget(next) => {
                            owners = next;
                            epoch += 1;
                        }
                        Step::Heartbeat { member, releases } => {
                            let id = MEMBERS[member as usize];
                            let before = group.member(id).cloned().unwrap_or_default();
                            // The member reports what it holds; once it has
                            // released, its revoking tasks are gone.
                            let owned: BTreeSet<u32> = if releases {
                                before.active.clone()
                            } else {
                                before.held().copied().collect()
                            };
                            let target = target_of(&owners, member);
                            let after = group
                                .reconcile_member(id, epoch, &target, Some(&owned))
                                .clone();
                            for task in &after.revoking {
                                prop_assert!(
                                    !target.contains(task),
                                    "{id} asked to release {task}, which its target keeps"
                                );
                            }
                        }
                        Step::Remove(member) => {
                            group.remove(MEMBERS[member as usize]);
                        }
                    }
                    // `Holdings::set` asserts one holder per task; check the
                    // members' view against it as well.
                    let mut seen = BTreeSet::new();
                    for (_, assignment) in group.members() {
                        for task in assignment.held() {
                            prop_assert!(seen.insert(task), "task {task} held twice");
                        }
                    }
                }
                // Convergence: every member heartbeats (releasing) until the
                // group is stable on the last target.
                for _ in 0..3 {
                    for (m, id) in MEMBERS.iter().enumerate() {
                        let owned = group.member(id).map(|a| a.active.clone()).unwrap_or_default();
                        let target = target_of(&owners, m as u8);
                        group.reconcile_member(id, epoch, &target, Some(&owned));
                    }
                }
                for (m, id) in MEMBERS.iter().enumerate() {
                    let assignment = group.member(id).expect("every member heartbeated");
                    prop_assert_eq!(assignment.state, MemberState::Stable);
                    prop_assert_eq!(assignment.epoch, epoch);
                    prop_assert_eq!(&assignment.active, &target_of(&owners, m as u8));
                }
            }
        }
    }
}
