//! The loads members report, as the host keeps them ([`LoadBook`]): each
//! task's smoothed estimate, and each slot's load capacity, smoothed
//! utilisation and whether it has reported since this host took the group.
//! Soft state beside the group in [`Liveness`](super::Liveness): never
//! logged, lost on a restart or a takeover (members are then asked for a
//! full report). It keeps what it is told; which reports are taken, and
//! what a view of them means, is the core's (`core/load_reports.rs`,
//! `core/loads.rs`).

use std::collections::BTreeMap;

use super::{Millis, Slot, Task};

/// A smoothed value: an exponential decay toward the latest report, with
/// the given half-life. The estimate at any time `now` is
/// `raw + (smoothed - raw) * 2^(-(now - at_ms) / half_life)`: the latest
/// report `raw` is taken to hold from when it came, so a value reported
/// once (members send only what changed) is reached in a few half-lives
/// rather than never.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// The estimate when the latest report came.
    pub smoothed: f64,
    /// The latest report.
    pub raw: f64,
    /// When the latest report came.
    pub at_ms: Millis,
}

impl Estimate {
    /// The first report of a value: no history is not a history of zero,
    /// so the estimate starts at the report.
    pub fn first(raw: f64, now: Millis) -> Self {
        Estimate {
            smoothed: raw,
            raw,
            at_ms: now,
        }
    }

    /// The estimate at `now` (not before the latest report). A half-life
    /// of 0 is no smoothing: the latest report.
    pub fn at(&self, now: Millis, half_life_ms: u64) -> f64 {
        if half_life_ms == 0 {
            return self.raw;
        }
        let elapsed = now.saturating_sub(self.at_ms) as f64;
        let decay = (-elapsed / half_life_ms as f64).exp2();
        self.raw + (self.smoothed - self.raw) * decay
    }

    /// Takes a new report `raw` at `now`: the estimate carries on from
    /// where the previous report had taken it.
    pub fn report(&mut self, raw: f64, now: Millis, half_life_ms: u64) {
        self.smoothed = self.at(now, half_life_ms);
        self.raw = raw;
        self.at_ms = now;
    }
}

/// What one slot's member said of itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemberLoads {
    /// The load the member can carry, in the group's unit (latest wins).
    pub load_capacity: Option<f64>,
    /// How much of its own capacity the member measured it uses.
    pub utilisation: Option<Estimate>,
    /// It has reported since this host took the group (or since this
    /// incarnation joined): until then it is asked for a full report.
    pub reported: bool,
}

/// The loads of one group, as reported.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadBook {
    /// Each task's estimate, by topic then partition: a topic's name is
    /// kept once, not once per task (a group may have a million). A task's
    /// estimate is the task's, whoever holds it: it stays when the task
    /// moves.
    tasks: BTreeMap<String, BTreeMap<u32, Estimate>>,
    /// Per slot: what its member reported of itself.
    members: BTreeMap<Slot, MemberLoads>,
}

// Every value the book holds was checked finite before it came in, so
// `PartialEq` on it is an equivalence.
impl Eq for LoadBook {}

impl LoadBook {
    /// Task `task`'s estimate, if a load was ever reported for it.
    pub fn task(&self, task: &Task) -> Option<&Estimate> {
        self.tasks.get(task.topic.as_str())?.get(&task.partition)
    }

    /// Task `task`'s estimated load at `now`, if it is known.
    pub fn task_load(&self, task: &Task, now: Millis, half_life_ms: u64) -> Option<f64> {
        self.task(task).map(|e| e.at(now, half_life_ms))
    }

    /// Takes a report of `raw` for one task at `now`.
    pub fn report_task(
        &mut self,
        topic: &str,
        partition: u32,
        raw: f64,
        now: Millis,
        half_life_ms: u64,
    ) {
        let partitions = match self.tasks.get_mut(topic) {
            Some(partitions) => partitions,
            None => self.tasks.entry(topic.to_owned()).or_default(),
        };
        match partitions.get_mut(&partition) {
            Some(estimate) => estimate.report(raw, now, half_life_ms),
            None => {
                partitions.insert(partition, Estimate::first(raw, now));
            }
        }
    }

    /// The estimates of topic `topic`'s tasks, by partition.
    pub fn topic_estimates(&self, topic: &str) -> impl Iterator<Item = (u32, &Estimate)> {
        self.tasks
            .get(topic)
            .into_iter()
            .flat_map(|estimates| estimates.iter().map(|(&p, e)| (p, e)))
    }

    /// How many tasks have an estimate.
    pub fn known_tasks(&self) -> usize {
        self.tasks.values().map(BTreeMap::len).sum()
    }

    /// Drops the estimates of tasks the group no longer has: `partitions`
    /// gives a topic's partition count, `None` for a topic it lacks. Costs
    /// a lookup a topic, not a look at every task: it runs on every report.
    pub fn retain_tasks(&mut self, partitions: impl Fn(&str) -> Option<u32>) {
        self.tasks
            .retain(|topic, estimates| match partitions(topic) {
                Some(n) => {
                    if estimates.last_key_value().is_some_and(|(&p, _)| p >= n) {
                        estimates.split_off(&n);
                    }
                    !estimates.is_empty()
                }
                None => false,
            });
    }

    /// What slot `slot`'s member reported of itself, if anything.
    pub fn member(&self, slot: &str) -> Option<&MemberLoads> {
        self.members.get(slot)
    }

    /// What slot `slot`'s member reported of itself, to change.
    pub fn member_mut(&mut self, slot: &Slot) -> &mut MemberLoads {
        if !self.members.contains_key(slot) {
            self.members.insert(slot.clone(), MemberLoads::default());
        }
        self.members.get_mut(slot).expect("inserted above")
    }

    /// Whether slot `slot`'s member has reported since this host took the
    /// group or it joined.
    pub fn reported(&self, slot: &str) -> bool {
        self.members.get(slot).is_some_and(|m| m.reported)
    }

    /// Forgets what slot `slot`'s member said of itself (it left, or a new
    /// incarnation took the slot and will report anew). Its tasks'
    /// estimates stay: they are the tasks'.
    pub fn remove_slot(&mut self, slot: &str) {
        self.members.remove(slot);
    }

    /// Moves slot `from`'s entry to slot `to` (the slot was re-keyed).
    pub fn rekey(&mut self, from: &Slot, to: &Slot) {
        if let Some(member) = self.members.remove(from) {
            self.members.insert(to.clone(), member);
        }
    }
}
