//! The shard's timer table: every deadline of every group, by kind, so that
//! [`Coordinator::poll_timeout`] answers the earliest one and a tick visits
//! only the groups that are due. An idle group costs nothing between its
//! deadlines.
//!
//! The table is derived data: each deadline is computed from a group's
//! state and liveness by [`slot_deadline`] and [`group_deadline`], the same
//! conditions [`Coordinator::tick`] acts on, so it is never written to the
//! log and a restart rebuilds it. A record, an admin command or an
//! assignor answer marks its whole group, computed again lazily before the
//! next tick or `poll_timeout`; a steady heartbeat (no record, no call)
//! updates its own slot's deadline at once, in place.
//! [`Coordinator::check_deadlines`] compares the table with a computation
//! from scratch (the simulator runs it after every tick, beside the full
//! scan [`Coordinator::tick_every_group`] on a copy of the core).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::Coordinator;
use super::load_trigger::load_check_at;
use super::targets::call_due_ms;
use crate::protocol::group::{Group, Liveness, Millis, Slot, answer_wait_ms};

/// What a deadline is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TimerKind {
    /// A timer that has not started: a member or batch recovered from the
    /// log, a drain, or the probing clock of a group never ticked. The next
    /// tick starts it from that tick's time.
    Start,
    /// A dynamic member's session timeout.
    Session,
    /// A static member's registration timeout.
    Registration,
    /// A member that was asked to release tasks and has not: it is fenced.
    ReleaseFence,
    /// A draining member's scale-down timeout.
    Drain,
    /// A member whose own timer has passed, but whose lease still runs:
    /// nothing takes its tasks before the lease ends.
    Lease,
    /// A batch of changes waits for its expansion timeout before the
    /// assignor is asked.
    Expansion,
    /// The assignor failed: the batch waits for the backoff.
    AssignorRetry,
    /// While learners exist, the assignor is asked again now and then.
    Probing,
    /// An assignor call's answer never came back: it is asked again.
    AnswerOverdue,
    /// The load trigger looks at the group's loads again.
    LoadCheck,
}

impl TimerKind {
    pub const ALL: [TimerKind; 11] = [
        TimerKind::Start,
        TimerKind::Session,
        TimerKind::Registration,
        TimerKind::ReleaseFence,
        TimerKind::Drain,
        TimerKind::Lease,
        TimerKind::Expansion,
        TimerKind::AssignorRetry,
        TimerKind::Probing,
        TimerKind::AnswerOverdue,
        TimerKind::LoadCheck,
    ];

    /// The name `/metrics` and `GET /v1/shards` show.
    pub fn name(self) -> &'static str {
        match self {
            TimerKind::Start => "start",
            TimerKind::Session => "session",
            TimerKind::Registration => "registration",
            TimerKind::ReleaseFence => "release_fence",
            TimerKind::Drain => "drain",
            TimerKind::Lease => "lease",
            TimerKind::Expansion => "expansion",
            TimerKind::AssignorRetry => "assignor_retry",
            TimerKind::Probing => "probing",
            TimerKind::AnswerOverdue => "answer_overdue",
            TimerKind::LoadCheck => "load_check",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One deadline: when, and what for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadline {
    pub at_ms: Millis,
    pub kind: TimerKind,
}

impl Deadline {
    fn earliest(a: Option<Deadline>, b: Deadline) -> Deadline {
        match a {
            Some(a) if a.at_ms <= b.at_ms => a,
            _ => b,
        }
    }
}

/// The earliest moment [`Coordinator::tick`] may act on `slot` of `group`:
/// its drain, its silence or its unreleased tasks, never before the lease
/// it was given ends; [`TimerKind::Start`] at 0 while one of its timers has
/// not started. A tick at this time may still do nothing (a host running
/// late judges silence later): a deadline is never later than the action.
pub fn slot_deadline(group: &Group, liveness: Option<&Liveness>, slot: &Slot) -> Option<Deadline> {
    let member = group.members.get(slot)?;
    let config = &group.config;
    let start = Deadline {
        at_ms: 0,
        kind: TimerKind::Start,
    };
    // Left during a handover: it goes when the replaced incarnation's
    // lease ends.
    if let Some(liveness) = liveness.filter(|l| l.departing.contains(slot)) {
        return Some(Deadline {
            at_ms: liveness.lease_floor_ms(slot).unwrap_or(0),
            kind: TimerKind::Lease,
        });
    }
    let mut earliest: Option<Deadline> = None;
    if member.draining {
        earliest = Some(match liveness.and_then(|l| l.draining_since_ms.get(slot)) {
            Some(&since) => Deadline {
                at_ms: since.saturating_add(config.scale_down_timeout_ms),
                kind: TimerKind::Drain,
            },
            None => start,
        });
    }
    let silence = match liveness.and_then(|l| l.last_seen_ms.get(slot)) {
        Some(&last) if member.name.is_some() => Deadline {
            at_ms: last.saturating_add(config.registration_timeout_ms),
            kind: TimerKind::Registration,
        },
        Some(&last) => Deadline {
            at_ms: last.saturating_add(config.session_timeout_ms),
            kind: TimerKind::Session,
        },
        None => start,
    };
    earliest = Some(Deadline::earliest(earliest, silence));
    if let Some(&since) = liveness.and_then(|l| l.revoking_since_ms.get(slot)) {
        let fence = Deadline {
            at_ms: since
                .saturating_add(config.expansion_timeout_ms)
                .saturating_add(config.heartbeat_interval_ms),
            kind: TimerKind::ReleaseFence,
        };
        earliest = Some(Deadline::earliest(earliest, fence));
    }
    let earliest = earliest.expect("a member always has a silence timer");
    match liveness.and_then(|l| l.lease_floor_ms(slot)) {
        Some(end) if end > earliest.at_ms => Some(Deadline {
            at_ms: end,
            kind: TimerKind::Lease,
        }),
        _ => Some(earliest),
    }
}

/// The earliest moment [`Coordinator::tick`] may act on `group` as a
/// whole: a batch recovered without its start, the expansion wait (or the
/// assignor's backoff) of the batch under way, the probing interval while
/// learners exist, the next check of its loads (load_trigger.rs).
pub fn group_deadline(group: &Group, liveness: Option<&Liveness>) -> Option<Deadline> {
    let start = Deadline {
        at_ms: 0,
        kind: TimerKind::Start,
    };
    let Some(liveness) = liveness else {
        // Never ticked: the first tick starts its probing clock.
        return Some(start);
    };
    let Some(last_call) = liveness.last_call_ms else {
        return Some(start);
    };
    let computing = liveness.computing_epoch.is_some();
    if group.group_epoch != group.target_epoch {
        if computing {
            // The answer comes back as an input, not with time, unless it
            // never does.
            return Some(Deadline {
                at_ms: last_call.saturating_add(answer_wait_ms(&group.config)),
                kind: TimerKind::AnswerOverdue,
            });
        }
        let Some(due) = call_due_ms(&group.config, liveness) else {
            return Some(start);
        };
        let retrying = liveness
            .failures
            .as_ref()
            .is_some_and(|f| f.consecutive > 0 && !f.served_by_fallback && !liveness.urgent);
        return Some(Deadline {
            at_ms: due,
            kind: if retrying {
                TimerKind::AssignorRetry
            } else {
                TimerKind::Expansion
            },
        });
    }
    let learners = group.target.values().any(|t| !t.learner.is_empty());
    let probing = (learners && !computing).then(|| Deadline {
        at_ms: last_call.saturating_add(group.config.probing_interval_ms),
        kind: TimerKind::Probing,
    });
    let load = load_check_at(group, liveness).map(|at_ms| Deadline {
        at_ms,
        kind: TimerKind::LoadCheck,
    });
    match (probing, load) {
        (Some(probing), load) => Some(Deadline::earliest(load, probing)),
        (None, load) => load,
    }
}

/// One group's deadlines.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct GroupTimers {
    group: Option<Deadline>,
    slots: HashMap<Slot, Deadline>,
    /// `slots` by time, earliest first.
    slots_by_time: BTreeSet<(Millis, Slot)>,
}

impl GroupTimers {
    fn earliest(&self) -> Option<Millis> {
        let slot = self.slots_by_time.first().map(|(at, _)| *at);
        match (self.group.map(|d| d.at_ms), slot) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn computed(group: &Group, liveness: Option<&Liveness>) -> GroupTimers {
        let mut timers = GroupTimers {
            group: group_deadline(group, liveness),
            ..GroupTimers::default()
        };
        for slot in group.members.keys() {
            let deadline = slot_deadline(group, liveness, slot).expect("a member of the group");
            timers.slots_by_time.insert((deadline.at_ms, slot.clone()));
            timers.slots.insert(slot.clone(), deadline);
        }
        timers
    }

    fn kinds(&self) -> impl Iterator<Item = TimerKind> + '_ {
        self.group
            .iter()
            .chain(self.slots.values())
            .map(|deadline| deadline.kind)
    }
}

/// Every group's deadlines, and what inputs marked since they were last
/// computed.
#[derive(Clone, Debug, Default)]
pub(super) struct Deadlines {
    groups: HashMap<String, GroupTimers>,
    /// Each group's earliest deadline, earliest first.
    queue: BTreeSet<(Millis, String)>,
    /// Deadlines per [`TimerKind`], by its index.
    by_kind: [usize; TimerKind::ALL.len()],
    /// Groups to compute again whole.
    dirty_groups: BTreeSet<String>,
    /// Per group, slots to compute again with the group's own deadline (no
    /// slot: only the group's own), in place.
    dirty_slots: BTreeMap<String, BTreeSet<Slot>>,
    /// Groups the last tick visited.
    pub(super) ticked_last: usize,
}

impl Deadlines {
    /// Something changed `group` as a whole (its config, its name map, an
    /// admin command, an assignor answer).
    pub(super) fn mark_group(&mut self, group: &str) {
        if !self.dirty_groups.contains(group) {
            self.dirty_groups.insert(group.to_owned());
        }
    }

    /// Something changed what `slot` of `group` is timed by (a record of
    /// that slot), and maybe the group's own deadline: a join into a group
    /// of 10,000 members costs O(log n) here, not a pass over the group.
    pub(super) fn mark_slot(&mut self, group: &str, slot: &Slot) {
        if self.dirty_groups.contains(group) {
            return;
        }
        match self.dirty_slots.get_mut(group) {
            Some(slots) => {
                if !slots.contains(slot) {
                    slots.insert(slot.clone());
                }
            }
            None => {
                self.dirty_slots
                    .insert(group.to_owned(), BTreeSet::from([slot.clone()]));
            }
        }
    }

    /// Something changed only `group`'s own deadline (a new group epoch, a
    /// target installed).
    pub(super) fn mark_group_deadline(&mut self, group: &str) {
        if !self.dirty_groups.contains(group) && !self.dirty_slots.contains_key(group) {
            self.dirty_slots.insert(group.to_owned(), BTreeSet::new());
        }
    }

    /// The groups due at `now`, by name (the order of the full scan).
    fn due(&self, now: Millis) -> BTreeSet<String> {
        self.queue
            .iter()
            .take_while(|(at, _)| *at <= now)
            .map(|(_, group)| group.clone())
            .collect()
    }

    fn earliest(&self) -> Option<Millis> {
        self.queue.first().map(|(at, _)| *at)
    }

    fn count(&mut self, timers: &GroupTimers, sign: isize) {
        for kind in timers.kinds() {
            let count = &mut self.by_kind[kind.index()];
            *count = count.checked_add_signed(sign).expect("counted once each");
        }
    }

    /// Replaces `name`'s deadlines (none: the group is gone).
    fn put(&mut self, name: &str, timers: Option<GroupTimers>) {
        if let Some(old) = self.groups.remove(name) {
            if let Some(at) = old.earliest() {
                self.queue.remove(&(at, name.to_owned()));
            }
            self.count(&old, -1);
        }
        if let Some(timers) = timers {
            if let Some(at) = timers.earliest() {
                self.queue.insert((at, name.to_owned()));
            }
            self.count(&timers, 1);
            self.groups.insert(name.to_owned(), timers);
        }
    }
}

impl Coordinator {
    /// The earliest deadline of any group (host ms): the runtime may sleep
    /// until then, and a tick before it changes nothing. `None`: no timer
    /// runs (no group, or only groups waiting for inputs).
    pub fn poll_timeout(&mut self) -> Option<Millis> {
        self.refresh_deadlines();
        self.deadlines.earliest()
    }

    /// How many deadlines of each kind the table holds now.
    pub fn timers_by_kind(&mut self) -> Vec<(TimerKind, usize)> {
        self.refresh_deadlines();
        TimerKind::ALL
            .iter()
            .map(|&kind| (kind, self.deadlines.by_kind[kind.index()]))
            .collect()
    }

    /// How many groups the last tick visited (those that were due).
    pub fn groups_ticked_last(&self) -> usize {
        self.deadlines.ticked_last
    }

    /// The groups due at `now`, with the table brought up to date.
    pub(super) fn due_groups(&mut self, now: Millis) -> BTreeSet<String> {
        self.refresh_deadlines();
        self.deadlines.due(now)
    }

    /// Computes what inputs marked since the last time.
    fn refresh_deadlines(&mut self) {
        for name in std::mem::take(&mut self.deadlines.dirty_groups) {
            let timers = self
                .group(&name)
                .map(|group| GroupTimers::computed(group, self.liveness(&name)));
            self.deadlines.dirty_slots.remove(&name);
            self.deadlines.put(&name, timers);
        }
        for (name, slots) in std::mem::take(&mut self.deadlines.dirty_slots) {
            self.update_deadlines(&name, slots.iter());
        }
    }

    /// A steady heartbeat changed only what `slot` of `group` is timed by:
    /// its deadline and the group's own are updated now, in place, counting
    /// each change, so the beat costs O(log n) and not a pass over its
    /// group. A group marked whole is computed later anyway.
    pub(super) fn refresh_slot_deadline(&mut self, name: &str, slot: &Slot) {
        if self.deadlines.dirty_groups.contains(name) {
            return;
        }
        self.update_deadlines(name, std::iter::once(slot));
    }

    /// Updates `slots` of group `name` and its own deadline in place,
    /// counting each change.
    fn update_deadlines<'a>(&mut self, name: &str, slots: impl Iterator<Item = &'a Slot>) {
        let Some(entry) = self.groups.get(name) else {
            self.deadlines.put(name, None);
            return;
        };
        let (group, liveness) = (&entry.group, Some(&entry.liveness));
        let deadlines = &mut self.deadlines;
        let Some(timers) = deadlines.groups.get_mut(name) else {
            deadlines.put(name, Some(GroupTimers::computed(group, liveness)));
            return;
        };
        let earliest_before = timers.earliest();
        let by_kind = &mut deadlines.by_kind;
        let mut replace = |old: Option<Deadline>, new: Option<Deadline>| {
            if let Some(old) = old {
                by_kind[old.kind.index()] -= 1;
            }
            if let Some(new) = new {
                by_kind[new.kind.index()] += 1;
            }
        };
        let group_now = group_deadline(group, liveness);
        replace(timers.group, group_now);
        timers.group = group_now;
        for slot in slots {
            let new = slot_deadline(group, liveness, slot);
            let old = timers.slots.get(slot).copied();
            replace(old, new);
            if old != new {
                let mut key = slot.clone();
                if let Some(old) = old {
                    let by_time = (old.at_ms, key);
                    timers.slots_by_time.remove(&by_time);
                    key = by_time.1;
                }
                match (new, timers.slots.get_mut(slot)) {
                    (Some(new), Some(kept)) => {
                        *kept = new;
                        timers.slots_by_time.insert((new.at_ms, key));
                    }
                    (Some(new), None) => {
                        timers.slots_by_time.insert((new.at_ms, key.clone()));
                        timers.slots.insert(key, new);
                    }
                    (None, _) => {
                        timers.slots.remove(slot);
                    }
                }
            }
        }
        let earliest_after = timers.earliest();
        if earliest_before != earliest_after {
            if let Some(at) = earliest_before {
                deadlines.queue.remove(&(at, name.to_owned()));
            }
            if let Some(at) = earliest_after {
                deadlines.queue.insert((at, name.to_owned()));
            }
        }
    }

    /// Compares the table with deadlines computed from scratch for every
    /// group: the check that no input changed a timer without marking it.
    pub fn check_deadlines(&mut self) -> Result<(), String> {
        self.refresh_deadlines();
        let mut by_kind = [0usize; TimerKind::ALL.len()];
        for (name, entry) in &self.groups {
            let fresh = GroupTimers::computed(&entry.group, Some(&entry.liveness));
            for kind in fresh.kinds() {
                by_kind[kind.index()] += 1;
            }
            let kept = self.deadlines.groups.get(name);
            if kept != Some(&fresh) {
                return Err(format!(
                    "group {name:?}: the timer table holds {kept:?}, its state gives {fresh:?}"
                ));
            }
            if let Some(at) = fresh.earliest()
                && !self.deadlines.queue.contains(&(at, name.clone()))
            {
                return Err(format!(
                    "group {name:?}: its earliest deadline {at} is not queued"
                ));
            }
        }
        if self.deadlines.groups.len() != self.groups.len() {
            return Err("the timer table holds a group the core does not".into());
        }
        if self.deadlines.by_kind != by_kind {
            return Err(format!(
                "the timer counts are {:?}, the table holds {by_kind:?}",
                self.deadlines.by_kind
            ));
        }
        let queued: usize = self
            .deadlines
            .groups
            .values()
            .filter(|t| t.earliest().is_some())
            .count();
        if self.deadlines.queue.len() != queued {
            return Err("the timer queue holds stale entries".into());
        }
        Ok(())
    }

    /// Where this core's state differs from `other`'s (groups, liveness,
    /// calls in flight), if it does: the simulator compares a tick over
    /// the due groups with the full scan on a copy.
    pub fn difference_from(&self, other: &Coordinator) -> Option<String> {
        let name = self
            .groups
            .keys()
            .chain(other.groups.keys())
            .find(|name| self.groups.get(*name) != other.groups.get(*name))?;
        let (mine, theirs) = (self.groups.get(name), other.groups.get(name));
        let what = match (mine, theirs) {
            (Some(a), Some(b)) if a.group != b.group => "state",
            (Some(a), Some(b)) if a.liveness != b.liveness => {
                return Some(format!(
                    "the liveness of group {name:?} differs: {:?} against {:?}",
                    a.liveness, b.liveness
                ));
            }
            (Some(_), Some(_)) => "call in flight",
            _ => "existence",
        };
        Some(format!("group {name:?} differs: its {what}"))
    }
}
