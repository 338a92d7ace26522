//! The ownership ledger: turns the simulated members' own view of what they
//! hold into figures per group and window (tasks moved, task-seconds
//! without an active owner or with a restoring one, double ownership,
//! lease lapses), and the timeline of the totals over every group. The
//! members report to it through the fleet's listener; it knows nothing of
//! the host or of how the figures are printed.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use assignd_client::{Status, Task};
use tokio::sync::watch;

use super::lock;

/// Figures of one group over one window (between two churn events).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Window {
    /// Times a task became active on a member other than its last owner.
    pub moved: u64,
    /// Task-seconds a task that had had an owner had none.
    pub ownerless_task_s: f64,
    /// Task-seconds a task's active owner was restoring its state.
    pub restoring_task_s: f64,
    /// Times a task became active on a second member (must be 0).
    pub double_ownership: u64,
    /// Times a task became active on a member while its previous owner
    /// still listed it, but that owner's lease had run out: stalled, it
    /// had stopped processing without learning that the host removed it.
    pub lease_lapses: u64,
    /// The most tasks without an owner at once.
    pub ownerless_max: u64,
}

/// Who holds what in one group, as the members themselves know it.
struct GroupLedger {
    owners: HashMap<Task, Vec<u64>>,
    /// Each member's status: what it may process now (its lease).
    statuses: HashMap<u64, watch::Receiver<Status>>,
    last_owner: HashMap<Task, u64>,
    restoring: HashSet<(Task, u64)>,
    /// Tasks that have had an owner and have none now.
    ownerless: u64,
    doubled: u64,
    since: Instant,
    windows: Vec<Window>,
}

impl GroupLedger {
    fn integrate(&mut self, now: Instant) {
        let dt = now.saturating_duration_since(self.since).as_secs_f64();
        let window = self.windows.last_mut().expect("one window at least");
        window.ownerless_task_s += self.ownerless as f64 * dt;
        window.restoring_task_s += self.restoring.len() as f64 * dt;
        self.since = now;
    }

    /// Tasks without an owner and tasks restoring now.
    fn counts(&self) -> (u64, u64) {
        (self.ownerless, self.restoring.len() as u64)
    }
}

/// The ledgers of every group, and the double ownerships in all.
pub struct Ledger {
    groups: Vec<Mutex<GroupLedger>>,
    double_ownership: AtomicU64,
    lease_lapses: AtomicU64,
    totals: Mutex<Totals>,
}

/// Tasks without an active owner and tasks restoring, over every group,
/// and their history once [`Ledger::record_timeline`] started it.
#[derive(Default)]
struct Totals {
    ownerless: u64,
    restoring: u64,
    timeline: Option<(Instant, Timeline)>,
}

/// The totals over every group at each change (exact, not sampled):
/// `t_s[i]` seconds after recording started, the counts from then on.
/// Changes within the same millisecond keep the last counts.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Timeline {
    pub t_s: Vec<f64>,
    /// Tasks that have had an owner and have none.
    pub ownerless: Vec<u64>,
    /// Tasks whose active owner restores their state.
    pub restoring: Vec<u64>,
}

impl Timeline {
    fn push(&mut self, t_s: f64, ownerless: u64, restoring: u64) {
        if let Some(&last) = self.t_s.last()
            && t_s - last < 1e-3
        {
            *self.ownerless.last_mut().expect("same length") = ownerless;
            *self.restoring.last_mut().expect("same length") = restoring;
            return;
        }
        self.t_s.push(t_s);
        self.ownerless.push(ownerless);
        self.restoring.push(restoring);
    }
}

/// A group's ledger now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Holding {
    pub ownerless: u64,
    pub restoring: u64,
    /// Tasks active on two members now.
    pub doubled: u64,
}

impl Ledger {
    pub fn new(groups: usize) -> Self {
        let now = Instant::now();
        Ledger {
            groups: (0..groups)
                .map(|_| {
                    Mutex::new(GroupLedger {
                        owners: HashMap::new(),
                        statuses: HashMap::new(),
                        last_owner: HashMap::new(),
                        restoring: HashSet::new(),
                        ownerless: 0,
                        doubled: 0,
                        since: now,
                        windows: vec![Window::default()],
                    })
                })
                .collect(),
            double_ownership: AtomicU64::new(0),
            lease_lapses: AtomicU64::new(0),
            totals: Mutex::new(Totals::default()),
        }
    }

    /// Starts recording the totals' timeline (from the counts now).
    pub fn record_timeline(&self) {
        let mut totals = lock(&self.totals);
        let mut timeline = Timeline::default();
        timeline.push(0.0, totals.ownerless, totals.restoring);
        totals.timeline = Some((Instant::now(), timeline));
    }

    /// The timeline so far, closed with the counts now (empty if not
    /// recording).
    pub fn timeline(&self) -> Timeline {
        let totals = lock(&self.totals);
        let Some((start, timeline)) = &totals.timeline else {
            return Timeline::default();
        };
        let mut timeline = timeline.clone();
        let now = start.elapsed().as_secs_f64();
        if timeline.t_s.last().is_some_and(|&t| now - t >= 1e-3) {
            timeline.push(now, totals.ownerless, totals.restoring);
        }
        timeline
    }

    /// Adds a group's change of counts to the totals (called with the
    /// group's lock held, so the totals change in the group's order).
    fn change(&self, before: (u64, u64), after: (u64, u64)) {
        if before == after {
            return;
        }
        let mut totals = lock(&self.totals);
        totals.ownerless = totals.ownerless + after.0 - before.0;
        totals.restoring = totals.restoring + after.1 - before.1;
        let (ownerless, restoring) = (totals.ownerless, totals.restoring);
        if let Some((start, timeline)) = &mut totals.timeline {
            timeline.push(start.elapsed().as_secs_f64(), ownerless, restoring);
        }
    }

    /// Starts a new window in every group; returns its index.
    pub fn open_window(&self) -> usize {
        let now = Instant::now();
        let mut index = 0;
        for group in &self.groups {
            let mut group = lock(group);
            group.integrate(now);
            group.windows.push(Window::default());
            index = group.windows.len() - 1;
        }
        index
    }

    /// The figures of `group` in window `index` so far.
    pub fn window(&self, group: usize, index: usize) -> Window {
        let mut group = lock(&self.groups[group]);
        group.integrate(Instant::now());
        group.windows.get(index).cloned().unwrap_or_default()
    }

    pub fn holding(&self, group: usize) -> Holding {
        let group = lock(&self.groups[group]);
        Holding {
            ownerless: group.ownerless,
            restoring: group.restoring.len() as u64,
            doubled: group.doubled,
        }
    }

    /// Each partition of `group`'s topic that has an active owner now, with
    /// it (the first, should a task be held twice).
    pub fn owners(&self, group: usize) -> Vec<(u32, u64)> {
        let group = lock(&self.groups[group]);
        group
            .owners
            .iter()
            .filter_map(|(task, owners)| Some((task.partition, *owners.first()?)))
            .collect()
    }

    pub fn double_ownership(&self) -> u64 {
        self.double_ownership.load(Ordering::Relaxed)
    }

    pub fn lease_lapses(&self) -> u64 {
        self.lease_lapses.load(Ordering::Relaxed)
    }

    /// Follows `member`'s status, to tell a lapsed lease from a second
    /// owner.
    pub(super) fn watch(&self, group: usize, member: u64, status: watch::Receiver<Status>) {
        lock(&self.groups[group]).statuses.insert(member, status);
    }

    pub(super) fn active(&self, group: usize, member: u64, task: &Task, restoring: bool) {
        let mut ledger = lock(&self.groups[group]);
        let now = Instant::now();
        // A grant the member's loop has already taken back: its worker
        // hears of events after the loop publishes its status, and under
        // load it lags behind; meanwhile the lease ran out or the host
        // removed the member (`Lost`). The worker never processes the task
        // (it checks `may_process` before every step): it is no owner, and
        // its late `released` changes nothing.
        if ledger
            .statuses
            .get(&member)
            .is_some_and(|status| !status.borrow().may_process(task, now))
        {
            tracing::debug!(group, member, %task, "a grant taken back before the worker heard of it");
            return;
        }
        ledger.integrate(now);
        let before = ledger.counts();
        self.drop_stopped_owners(&mut ledger, group, member, task, now);
        let owners = ledger.owners.entry(task.clone()).or_default();
        let had_owner = !owners.is_empty();
        owners.push(member);
        let doubled = owners.len() == 2;
        let holders = format!("{owners:?}");
        let previous = ledger.last_owner.insert(task.clone(), member);
        let window = ledger.windows.last_mut().expect("one window at least");
        if had_owner {
            window.double_ownership += 1;
            self.double_ownership.fetch_add(1, Ordering::Relaxed);
            tracing::error!(group, member, %task, holders, "a task is active on two members");
        }
        if previous.is_some_and(|p| p != member) {
            window.moved += 1;
        }
        if doubled {
            ledger.doubled += 1;
        }
        if !had_owner && previous.is_some() {
            ledger.ownerless -= 1;
        }
        if restoring {
            ledger.restoring.insert((task.clone(), member));
        }
        self.change(before, ledger.counts());
    }

    /// Drops the other owners of `task` that may no longer process it:
    /// they have stopped. Their loop forgot the task (told it `Lost`)
    /// before the ledger heard of the release, or their lease ran out while
    /// they were stalled, fenced without knowing it. The latter is a lease
    /// lapse: the task was without an owner from the lease's end to now.
    fn drop_stopped_owners(
        &self,
        ledger: &mut GroupLedger,
        group: usize,
        member: u64,
        task: &Task,
        now: Instant,
    ) {
        let stopped: Vec<(u64, Option<Instant>)> = ledger
            .owners
            .get(task)
            .into_iter()
            .flatten()
            .filter(|&&owner| owner != member)
            .filter_map(|&owner| {
                let status = ledger.statuses.get(&owner)?.borrow();
                if status.may_process(task, now) {
                    return None;
                }
                Some((owner, status.lease_until.filter(|&until| until <= now)))
            })
            .collect();
        for (owner, lapsed_at) in stopped {
            let owners = ledger.owners.get_mut(task).expect("listed above");
            let was_doubled = owners.len() == 2;
            owners.retain(|&o| o != owner);
            let none_left = owners.is_empty();
            if was_doubled {
                ledger.doubled -= 1;
            }
            if none_left {
                // Released now, taken by `member` next: as a release
                // then a grant.
                ledger.ownerless += 1;
            }
            ledger.restoring.remove(&(task.clone(), owner));
            if let Some(until) = lapsed_at {
                let window = ledger.windows.last_mut().expect("one window at least");
                window.lease_lapses += 1;
                window.ownerless_task_s += now.saturating_duration_since(until).as_secs_f64();
                self.lease_lapses.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(group, member = owner, %task, "the owner's lease ran out before it learned it lost the task");
            }
        }
    }

    pub(super) fn restored(&self, group: usize, member: u64, task: &Task) {
        let mut ledger = lock(&self.groups[group]);
        ledger.integrate(Instant::now());
        let before = ledger.counts();
        ledger.restoring.remove(&(task.clone(), member));
        self.change(before, ledger.counts());
    }

    pub(super) fn released(&self, group: usize, member: u64, tasks: &[Task]) {
        let mut ledger = lock(&self.groups[group]);
        ledger.integrate(Instant::now());
        let before = ledger.counts();
        for task in tasks {
            ledger.restoring.remove(&(task.clone(), member));
            let Some(owners) = ledger.owners.get_mut(task) else {
                continue;
            };
            let before = owners.len();
            owners.retain(|m| *m != member);
            let after = owners.len();
            if before == 2 && after == 1 {
                ledger.doubled -= 1;
            }
            if before > 0 && after == 0 {
                ledger.ownerless += 1;
                let ownerless = ledger.ownerless;
                let window = ledger.windows.last_mut().expect("one window at least");
                window.ownerless_max = window.ownerless_max.max(ownerless);
            }
        }
        self.change(before, ledger.counts());
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::loadgen::fleet::TOPIC;

    #[test]
    fn the_ledger_counts_moves_ownerless_and_restoring_time_and_double_ownership() {
        let ledger = Ledger::new(1);
        let (a, b) = (Task::new(TOPIC, 0), Task::new(TOPIC, 1));
        // The first assignment: no move, nothing ownerless before it.
        ledger.active(0, 1, &a, false);
        ledger.active(0, 1, &b, true);
        assert_eq!(ledger.holding(0).restoring, 1);
        ledger.restored(0, 1, &b);
        let window = ledger.open_window();
        // a moves from member 1 to member 2 through a gap.
        ledger.released(0, 1, std::slice::from_ref(&a));
        assert_eq!(ledger.holding(0).ownerless, 1);
        std::thread::sleep(Duration::from_millis(20));
        ledger.active(0, 2, &a, true);
        // b comes back to its owner: not a move.
        ledger.released(0, 1, std::slice::from_ref(&b));
        ledger.active(0, 1, &b, false);
        let figures = ledger.window(0, window);
        assert_eq!(figures.moved, 1);
        assert_eq!(figures.double_ownership, 0);
        assert_eq!(figures.ownerless_max, 1);
        assert!(figures.ownerless_task_s >= 0.02, "{figures:?}");
        assert_eq!(
            ledger.holding(0),
            Holding {
                ownerless: 0,
                restoring: 1,
                doubled: 0
            }
        );
        // A second owner is counted at once.
        ledger.active(0, 3, &a, false);
        assert_eq!(ledger.double_ownership(), 1);
        assert_eq!(ledger.holding(0).doubled, 1);
        ledger.released(0, 3, std::slice::from_ref(&a));
        assert_eq!(ledger.holding(0).doubled, 0);
    }

    /// A status holding `tasks` with a lease until `until`.
    fn status(tasks: &[&Task], until: Instant) -> watch::Receiver<Status> {
        let mut status = Status {
            lease_until: Some(until),
            ..Status::default()
        };
        status.assignment.active = tasks.iter().map(|&t| t.clone()).collect();
        watch::channel(status).1
    }

    #[test]
    fn a_second_owner_counts_as_a_lease_lapse_only_once_the_first_may_not_process() {
        let ledger = Ledger::new(1);
        let (a, b) = (Task::new(TOPIC, 0), Task::new(TOPIC, 1));
        let now = Instant::now();
        // Member 1 was granted a; its lease then ran out a second ago
        // (stalled, removed by the host without knowing it). Member 3's
        // lease runs.
        ledger.active(0, 1, &a, false);
        ledger.watch(0, 1, status(&[&a], now - Duration::from_secs(1)));
        ledger.watch(0, 3, status(&[&b], now + Duration::from_secs(60)));
        ledger.active(0, 3, &b, false);
        ledger.active(0, 5, &b, false);
        assert_eq!(ledger.double_ownership(), 1, "b on 3 and 5: 3 may process");
        // Member 2 takes a over: 1 had stopped when its lease ran out, a
        // second ago, and a was without an owner since.
        ledger.active(0, 2, &a, false);
        assert_eq!(ledger.double_ownership(), 1);
        assert_eq!(ledger.lease_lapses(), 1);
        let figures = ledger.window(0, 0);
        assert_eq!(
            (figures.lease_lapses, figures.moved),
            (1, 2),
            "b to 5, a to 2"
        );
        assert!(figures.ownerless_task_s >= 1.0, "{figures:?}");
        assert_eq!(ledger.holding(0).ownerless, 0);
        // Member 1 learns it lost a, late: nothing changes.
        ledger.released(0, 1, std::slice::from_ref(&a));
        assert_eq!(ledger.holding(0).ownerless, 0);
        // A member whose lease runs but whose loop forgot the task (told
        // it `Lost`) has stopped too: not a double, not a lapse.
        ledger.watch(0, 2, status(&[], now + Duration::from_secs(60)));
        ledger.active(0, 4, &a, false);
        assert_eq!(ledger.double_ownership(), 1);
        assert_eq!(ledger.lease_lapses(), 1);
    }

    #[test]
    fn a_grant_the_members_loop_took_back_before_its_worker_heard_is_no_second_owner() {
        // The overload report's "25 tasks active on two members": member 2
        // was granted a task, then its lease ran out (or the host removed
        // it) before its lagging worker took the grant in; the task went to
        // member 1, whose lease runs. Member 2 may not process it: its
        // late grant is not a double ownership.
        let ledger = Ledger::new(1);
        let a = Task::new(TOPIC, 0);
        let now = Instant::now();
        ledger.watch(0, 1, status(&[&a], now + Duration::from_secs(60)));
        ledger.watch(0, 2, status(&[], now + Duration::from_secs(60)));
        ledger.active(0, 1, &a, false);
        ledger.active(0, 2, &a, true);
        assert_eq!(ledger.double_ownership(), 0);
        assert_eq!(
            ledger.holding(0),
            Holding {
                ownerless: 0,
                restoring: 0,
                doubled: 0
            }
        );
        // Its worker then hears it lost the task: nothing changes.
        ledger.released(0, 2, std::slice::from_ref(&a));
        assert_eq!(ledger.holding(0).ownerless, 0);
        // A grant its loop still holds is counted, as a second owner.
        ledger.watch(0, 3, status(&[&a], now + Duration::from_secs(60)));
        ledger.active(0, 3, &a, false);
        assert_eq!(ledger.double_ownership(), 1);
    }

    #[test]
    fn the_timeline_records_the_totals_over_every_group_at_each_change() {
        let ledger = Ledger::new(2);
        let (a, b) = (Task::new(TOPIC, 0), Task::new(TOPIC, 1));
        ledger.active(0, 1, &a, false);
        ledger.active(1, 1, &b, true);
        assert_eq!(ledger.timeline(), Timeline::default(), "not recording yet");
        ledger.record_timeline();
        std::thread::sleep(Duration::from_millis(5));
        ledger.restored(1, 1, &b);
        std::thread::sleep(Duration::from_millis(5));
        ledger.released(0, 1, std::slice::from_ref(&a));
        ledger.released(1, 1, std::slice::from_ref(&b));
        std::thread::sleep(Duration::from_millis(5));
        ledger.active(0, 2, &a, true);
        ledger.active(1, 2, &b, false);
        let timeline = ledger.timeline();
        let points: Vec<(u64, u64)> = timeline
            .ownerless
            .iter()
            .copied()
            .zip(timeline.restoring.iter().copied())
            .collect();
        // Starts from the counts in force, then every change (changes
        // within one ms keep the last counts), ends with the counts now.
        assert_eq!(points.first(), Some(&(0, 1)));
        assert!(
            points.contains(&(0, 0)) && points.contains(&(2, 0)),
            "{points:?}"
        );
        assert_eq!(points.last(), Some(&(0, 1)));
        assert_eq!(timeline.t_s[0], 0.0);
        assert_eq!(timeline.t_s.len(), points.len());
        assert!(timeline.t_s.windows(2).all(|w| w[1] - w[0] >= 1e-3));
    }
}
