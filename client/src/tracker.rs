//! What the application has been told, and what it must be told next: the
//! member's side of incremental cooperative rebalancing, without I/O.
//!
//! It owns three rules:
//! - a task the host moves to `revoking` is reported owned until the
//!   application acknowledges releasing it, and never after;
//! - a task the host gives (back) while the application is still releasing
//!   it is granted only after that release is acknowledged;
//! - the `owned` report never names a task the host's last answer does not
//!   hold for this member (the host refuses such a report).
//!
//! The member machine (`machine`) feeds it answers and acknowledgements and
//! turns its [`Change`]s into events; it knows nothing of HTTP or time.

use std::collections::{BTreeMap, BTreeSet};

use crate::Task;
use crate::wire::HeartbeatResponse;

/// A member's assignment as the application has been told it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assignment {
    /// Tasks the application may process.
    pub active: BTreeSet<Task>,
    /// Tasks the application was asked to release and has not acknowledged
    /// yet; still reported owned.
    pub revoking: BTreeSet<Task>,
    /// Tasks to warm up (replay state for) and report lag on. A learner
    /// the host stopped listing stays here while it may be on its way to
    /// becoming active (until promoted or stopped).
    pub learner: BTreeSet<Task>,
    /// Hot copies to keep.
    pub standby: BTreeSet<Task>,
    /// The member is draining.
    pub draining: bool,
}

/// One thing the application must learn, in the order it must learn them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The host no longer counts these as held by this member: stop at once.
    Lost(Vec<Task>),
    /// Stop processing, then acknowledge `ack`.
    Revoked {
        ack: u64,
        tasks: Vec<Task>,
    },
    LearnerStopped(Vec<Task>),
    StandbyStopped(Vec<Task>),
    /// Learner or standby copies that became active.
    Promoted(Vec<Task>),
    /// Tasks that became active without a warm copy here.
    Assigned(Vec<Task>),
    LearnerStarted(Vec<Task>),
    StandbyStarted(Vec<Task>),
    Draining,
    Drained,
}

#[derive(Debug, Default)]
pub struct Tracker {
    active: BTreeSet<Task>,
    /// Tasks being released, by the acknowledgement that releases them.
    revoking: BTreeMap<Task, u64>,
    learner: Copies,
    standby: Copies,
    draining: bool,
    /// What the host's last answer said this member holds (active and
    /// revoking) and may become active.
    host_held: BTreeSet<Task>,
    host_active: BTreeSet<Task>,
    /// Acknowledgement ids are never reused, so one from before a reset
    /// matches nothing.
    next_ack: u64,
}

fn vec(tasks: impl IntoIterator<Item = Task>) -> Vec<Task> {
    tasks.into_iter().collect()
}

/// How many answers a copy the host stopped listing is kept while the
/// member's epoch stays put (see [`Copies`]).
const AWAIT_ANSWERS_MAX: u32 = 10;

/// Warm copies of one kind (learners or standbys) as the application has
/// been told them.
///
/// When a learner catches up, the host's next target makes the task active
/// on this member, but grants it only once its old owner has released it;
/// meanwhile the answers list the task neither as learner nor as active. So
/// a copy the answers stop listing is kept (still warming, its lag still
/// reported, which is what keeps the host's learner safety satisfied)
/// until it is granted (then it is *promoted*) or the member's epoch moves
/// past the answer that dropped it (a new target without it) or
/// [`AWAIT_ANSWERS_MAX`] answers went by (then it is stopped).
#[derive(Debug, Default)]
struct Copies {
    told: BTreeSet<Task>,
    /// Told copies the answers no longer list: the member epoch of the
    /// answer that dropped each, and how many more answers it may wait.
    awaiting: BTreeMap<Task, (i64, u32)>,
}

impl Copies {
    /// Applies an answer's list at member epoch `epoch`; `granted` tasks
    /// became active here and leave without a stop. Returns the copies
    /// started and stopped.
    fn update(
        &mut self,
        listed: &BTreeSet<Task>,
        granted: &BTreeSet<Task>,
        epoch: i64,
    ) -> (Vec<Task>, Vec<Task>) {
        let started = vec(listed.difference(&self.told).cloned());
        let dropped: Vec<Task> = self
            .told
            .iter()
            .filter(|t| !listed.contains(*t) && !granted.contains(*t))
            .cloned()
            .collect();
        let mut stopped = Vec::new();
        for task in dropped {
            match self.awaiting.get_mut(&task) {
                Some((dropped_at, left)) => {
                    *left = left.saturating_sub(1);
                    if epoch > *dropped_at || *left == 0 {
                        self.awaiting.remove(&task);
                        stopped.push(task);
                    }
                }
                None => {
                    self.awaiting.insert(task, (epoch, AWAIT_ANSWERS_MAX));
                }
            }
        }
        self.awaiting
            .retain(|t, _| !listed.contains(t) && !granted.contains(t));
        self.told = listed.iter().chain(self.awaiting.keys()).cloned().collect();
        (started, stopped)
    }

    /// `granted` tasks became active: they are copies no more.
    fn promote(&mut self, granted: &BTreeSet<Task>) {
        self.told.retain(|t| !granted.contains(t));
        self.awaiting.retain(|t, _| !granted.contains(t));
    }
}

impl Tracker {
    pub fn new() -> Self {
        Tracker::default()
    }

    pub fn assignment(&self) -> Assignment {
        Assignment {
            active: self.active.clone(),
            revoking: self.revoking.keys().cloned().collect(),
            learner: self.learner.told.clone(),
            standby: self.standby.told.clone(),
            draining: self.draining,
        }
    }

    /// The `owned` report: active tasks and unacknowledged revocations that
    /// the host still counts as this member's.
    pub fn owned(&self) -> Vec<Task> {
        self.active
            .iter()
            .chain(self.revoking.keys())
            .filter(|t| self.host_held.contains(*t))
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }

    /// Applies a heartbeat answer.
    pub fn on_response(&mut self, response: &HeartbeatResponse) -> Vec<Change> {
        let mut changes = Vec::new();
        self.host_active = response.active.clone();
        self.host_held = response.active.union(&response.revoking).cloned().collect();

        let lost: BTreeSet<Task> = self
            .active
            .iter()
            .filter(|t| !self.host_held.contains(*t))
            .cloned()
            .collect();
        if !lost.is_empty() {
            self.active.retain(|t| !lost.contains(t));
            changes.push(Change::Lost(vec(lost)));
        }
        let revoked: BTreeSet<Task> = self
            .active
            .iter()
            .filter(|t| response.revoking.contains(*t))
            .cloned()
            .collect();
        if !revoked.is_empty() {
            let ack = self.next_ack;
            self.next_ack += 1;
            self.active.retain(|t| !revoked.contains(t));
            for task in &revoked {
                self.revoking.insert(task.clone(), ack);
            }
            changes.push(Change::Revoked {
                ack,
                tasks: vec(revoked),
            });
        }

        let granted = self.grantable();
        let (promoted, assigned) = self.split_warm(&granted);
        let epoch = response.member_epoch;
        let (learner_started, learner_stopped) =
            self.learner.update(&response.learner, &granted, epoch);
        let (standby_started, standby_stopped) =
            self.standby.update(&response.standby, &granted, epoch);
        self.active.extend(granted);

        for (tasks, change) in [
            (
                learner_stopped,
                Change::LearnerStopped as fn(Vec<Task>) -> Change,
            ),
            (standby_stopped, Change::StandbyStopped),
            (promoted, Change::Promoted),
            (assigned, Change::Assigned),
            (learner_started, Change::LearnerStarted),
            (standby_started, Change::StandbyStarted),
        ] {
            if !tasks.is_empty() {
                changes.push(change(tasks));
            }
        }
        if response.draining && !self.draining {
            changes.push(Change::Draining);
        }
        self.draining = response.draining;
        if response.drained {
            changes.push(Change::Drained);
        }
        changes
    }

    /// Splits newly granted tasks into promoted copies and cold
    /// assignments, and forgets the copies.
    fn split_warm(&mut self, granted: &BTreeSet<Task>) -> (Vec<Task>, Vec<Task>) {
        let split = granted
            .iter()
            .cloned()
            .partition(|t| self.learner.told.contains(t) || self.standby.told.contains(t));
        self.learner.promote(granted);
        self.standby.promote(granted);
        split
    }

    /// Tasks the host gives as active that the application does not have
    /// yet and is not still releasing.
    fn grantable(&self) -> BTreeSet<Task> {
        self.host_active
            .iter()
            .filter(|t| !self.active.contains(*t) && !self.revoking.contains_key(*t))
            .cloned()
            .collect()
    }

    /// The application released the tasks of acknowledgement `ack`. Returns
    /// what that unblocks: tasks the host gave back meanwhile. An unknown
    /// `ack` (from before a reset, or acknowledged twice) changes nothing.
    pub fn on_ack(&mut self, ack: u64) -> (bool, Vec<Change>) {
        let before = self.revoking.len();
        self.revoking.retain(|_, a| *a != ack);
        if self.revoking.len() == before {
            return (false, Vec::new());
        }
        let granted = self.grantable();
        let (promoted, assigned) = self.split_warm(&granted);
        self.active.extend(granted);
        let mut changes = Vec::new();
        if !promoted.is_empty() {
            changes.push(Change::Promoted(promoted));
        }
        if !assigned.is_empty() {
            changes.push(Change::Assigned(assigned));
        }
        (true, changes)
    }

    /// Whether any task is active or being released here.
    pub fn holds_any(&self) -> bool {
        !self.active.is_empty() || !self.revoking.is_empty()
    }

    /// Whether `task` is active here (not being released).
    pub fn is_active(&self, task: &Task) -> bool {
        self.active.contains(task)
    }

    /// Whether `task` is active or being released here.
    pub fn holds(&self, task: &Task) -> bool {
        self.active.contains(task) || self.revoking.contains_key(task)
    }

    /// Whether the member is draining, as the host last said.
    pub fn is_draining(&self) -> bool {
        self.draining
    }

    /// Whether any task is being released here (revoked, not yet
    /// acknowledged).
    pub fn is_releasing(&self) -> bool {
        !self.revoking.is_empty()
    }

    /// Forgets everything (the member was fenced or removed, its lease ran
    /// out, or it rejoins as a new member); returns every task the
    /// application held, active or still being released.
    pub fn reset(&mut self) -> Vec<Task> {
        let held: BTreeSet<Task> = self
            .active
            .iter()
            .chain(self.revoking.keys())
            .cloned()
            .collect();
        let next_ack = self.next_ack;
        *self = Tracker {
            next_ack,
            ..Tracker::default()
        };
        vec(held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(p: u32) -> Task {
        Task::new("orders", p)
    }

    fn set(ps: &[u32]) -> BTreeSet<Task> {
        ps.iter().map(|&p| t(p)).collect()
    }

    fn tasks(ps: &[u32]) -> Vec<Task> {
        ps.iter().map(|&p| t(p)).collect()
    }

    fn answer(active: &[u32], revoking: &[u32], learner: &[u32]) -> HeartbeatResponse {
        HeartbeatResponse {
            member_id: "m".into(),
            member_epoch: 1,
            heartbeat_interval_ms: 100,
            active: set(active),
            revoking: set(revoking),
            learner: set(learner),
            ..HeartbeatResponse::default()
        }
    }

    #[test]
    fn a_revocation_is_owned_until_acknowledged() {
        let mut tracker = Tracker::new();
        assert_eq!(
            tracker.on_response(&answer(&[0, 1], &[], &[])),
            vec![Change::Assigned(tasks(&[0, 1]))]
        );
        let changes = tracker.on_response(&answer(&[0], &[1], &[]));
        assert_eq!(
            changes,
            vec![Change::Revoked {
                ack: 0,
                tasks: tasks(&[1])
            }]
        );
        assert_eq!(tracker.owned(), tasks(&[0, 1]));
        // The same answer again (nothing acknowledged yet): nothing new.
        assert!(tracker.on_response(&answer(&[0], &[1], &[])).is_empty());
        assert_eq!(tracker.on_ack(0), (true, vec![]));
        assert_eq!(tracker.owned(), tasks(&[0]));
        assert_eq!(tracker.on_ack(0), (false, vec![]), "twice is a no-op");
        assert!(tracker.on_response(&answer(&[0], &[], &[])).is_empty());
    }

    #[test]
    fn a_learner_that_becomes_active_is_promoted() {
        let mut tracker = Tracker::new();
        tracker.on_response(&answer(&[0], &[], &[]));
        assert_eq!(
            tracker.on_response(&answer(&[0], &[], &[5])),
            vec![Change::LearnerStarted(tasks(&[5]))]
        );
        assert_eq!(
            tracker.on_response(&answer(&[0, 5, 6], &[], &[])),
            vec![Change::Promoted(tasks(&[5])), Change::Assigned(tasks(&[6]))]
        );
    }

    fn at(epoch: i64, mut response: HeartbeatResponse) -> HeartbeatResponse {
        response.member_epoch = epoch;
        response
    }

    #[test]
    fn a_caught_up_learner_waiting_for_its_release_is_kept_then_promoted() {
        let mut tracker = Tracker::new();
        tracker.on_response(&at(1, answer(&[0], &[], &[5])));
        // The new target gives 5 to this member at epoch 2, but its old
        // owner still holds it: the answer lists it nowhere.
        assert!(
            tracker
                .on_response(&at(2, answer(&[0], &[], &[])))
                .is_empty()
        );
        assert_eq!(tracker.assignment().learner, set(&[5]), "still warming");
        assert!(
            tracker
                .on_response(&at(2, answer(&[0], &[], &[])))
                .is_empty()
        );
        assert_eq!(
            tracker.on_response(&at(2, answer(&[0, 5], &[], &[]))),
            vec![Change::Promoted(tasks(&[5]))]
        );
        assert!(tracker.assignment().learner.is_empty());
    }

    #[test]
    fn a_dropped_learner_stops_when_the_epoch_moves_on_or_the_wait_runs_out() {
        let mut tracker = Tracker::new();
        tracker.on_response(&at(1, answer(&[0], &[], &[5, 6])));
        assert!(
            tracker
                .on_response(&at(2, answer(&[0], &[], &[6])))
                .is_empty()
        );
        // A newer target without 5: it went elsewhere.
        assert_eq!(
            tracker.on_response(&at(3, answer(&[0], &[], &[6]))),
            vec![Change::LearnerStopped(tasks(&[5]))]
        );
        assert!(
            tracker
                .on_response(&at(3, answer(&[0], &[], &[])))
                .is_empty()
        );
        for _ in 1..AWAIT_ANSWERS_MAX {
            assert!(
                tracker
                    .on_response(&at(3, answer(&[0], &[], &[])))
                    .is_empty()
            );
        }
        assert_eq!(
            tracker.on_response(&at(3, answer(&[0], &[], &[]))),
            vec![Change::LearnerStopped(tasks(&[6]))]
        );
        assert!(tracker.assignment().learner.is_empty());
    }

    #[test]
    fn a_dropped_learner_listed_again_just_goes_on() {
        let mut tracker = Tracker::new();
        tracker.on_response(&at(1, answer(&[], &[], &[5])));
        assert!(
            tracker
                .on_response(&at(2, answer(&[], &[], &[])))
                .is_empty()
        );
        assert!(
            tracker
                .on_response(&at(3, answer(&[], &[], &[5])))
                .is_empty()
        );
        assert!(
            tracker
                .on_response(&at(4, answer(&[], &[], &[5])))
                .is_empty()
        );
        assert_eq!(tracker.assignment().learner, set(&[5]));
    }

    #[test]
    fn a_task_given_back_while_releasing_waits_for_the_acknowledgement() {
        let mut tracker = Tracker::new();
        tracker.on_response(&answer(&[0, 1], &[], &[]));
        tracker.on_response(&answer(&[0], &[1], &[]));
        // The host gives 1 back before the application released it.
        assert!(tracker.on_response(&answer(&[0, 1], &[], &[])).is_empty());
        assert_eq!(tracker.owned(), tasks(&[0, 1]));
        assert_eq!(
            tracker.on_ack(0),
            (true, vec![Change::Assigned(tasks(&[1]))])
        );
        assert_eq!(tracker.owned(), tasks(&[0, 1]));
    }

    #[test]
    fn a_task_the_host_no_longer_holds_is_lost_and_never_reported() {
        let mut tracker = Tracker::new();
        tracker.on_response(&answer(&[0, 1, 2], &[], &[]));
        tracker.on_response(&answer(&[0, 1], &[2], &[]));
        // A rejoin answer: the slot kept 0 only.
        assert_eq!(
            tracker.on_response(&answer(&[0], &[], &[])),
            vec![Change::Lost(tasks(&[1]))]
        );
        assert_eq!(tracker.owned(), tasks(&[0]), "2 is not the host's any more");
        assert_eq!(tracker.assignment().revoking, set(&[2]));
    }

    #[test]
    fn reset_returns_everything_held_and_forgets_old_acks() {
        let mut tracker = Tracker::new();
        tracker.on_response(&answer(&[0, 1], &[], &[3]));
        tracker.on_response(&answer(&[0], &[1], &[3]));
        assert_eq!(tracker.reset(), tasks(&[0, 1]));
        assert_eq!(tracker.assignment(), Assignment::default());
        assert_eq!(tracker.on_ack(0), (false, vec![]));
        // Acknowledgement ids keep counting after a reset.
        tracker.on_response(&answer(&[7], &[], &[]));
        let changes = tracker.on_response(&answer(&[], &[7], &[]));
        assert_eq!(
            changes,
            vec![Change::Revoked {
                ack: 1,
                tasks: tasks(&[7])
            }]
        );
    }

    #[test]
    fn drains_are_reported_once() {
        let mut tracker = Tracker::new();
        let mut draining = answer(&[0], &[], &[]);
        draining.draining = true;
        assert_eq!(
            tracker.on_response(&draining),
            vec![Change::Assigned(tasks(&[0])), Change::Draining]
        );
        assert!(tracker.on_response(&draining).is_empty());
        let mut releasing = answer(&[], &[0], &[]);
        releasing.draining = true;
        assert_eq!(
            tracker.on_response(&releasing),
            vec![Change::Revoked {
                ack: 0,
                tasks: tasks(&[0])
            }]
        );
        tracker.on_ack(0);
        let mut drained = answer(&[], &[], &[]);
        drained.draining = true;
        drained.drained = true;
        assert_eq!(tracker.on_response(&drained), vec![Change::Drained]);
        assert_eq!(
            tracker.assignment(),
            Assignment {
                draining: true,
                ..Assignment::default()
            }
        );
    }
}
