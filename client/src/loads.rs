//! A member's load reports, without I/O: the load the application set for
//! each of its active tasks, its utilisation and load capacity, what the
//! host has acknowledged of them, and so which of them the next heartbeat
//! carries. The machine (`machine`) asks it for the fields of each
//! heartbeat and tells it each heartbeat's outcome; it knows nothing of
//! HTTP, time or the rest of the member's state.
//!
//! The rule: nothing is sent until an answer's `load_report` says
//! `changes` or `full` (an older host refuses unknown fields). After
//! `full`, the next heartbeat carries every known load of an active task
//! (an unknown one is left out: unknown is not zero), and the utilisation
//! and load capacity when set. After `changes`, it carries the tasks whose
//! load moved by more than the threshold (relative to the value the host
//! acknowledged) or that were never acknowledged, the utilisation when it
//! moved by more than [`UTILISATION_STEP`], and the load capacity when it
//! changed. A value counts as acknowledged only once the heartbeat that
//! carried it got an answer. Consecutive partitions of equal load go as
//! one range item.

use std::collections::BTreeMap;

use crate::Task;
pub use crate::wire::{LOAD_MAX, LoadItem, LoadReport, UTILISATION_MAX};

/// How far a task's load may move, relative to the value the host
/// acknowledged, before it is sent again (10 %).
pub const LOAD_THRESHOLD_DEFAULT: f64 = 0.1;
/// How far the utilisation may move (absolute, 1.0 = fully used) before it
/// is sent again.
pub const UTILISATION_STEP: f64 = 0.05;

/// The load fields of one heartbeat; all `None`: it carries none.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadFields {
    pub loads: Option<Vec<LoadItem>>,
    pub utilisation: Option<f64>,
    pub load_capacity: Option<f64>,
}

/// Whether `load` is a load the host accepts.
pub fn valid_load(load: f64) -> bool {
    load.is_finite() && (0.0..=LOAD_MAX).contains(&load)
}

/// Whether `utilisation` is one the host accepts.
pub fn valid_utilisation(utilisation: f64) -> bool {
    utilisation.is_finite() && (0.0..=UTILISATION_MAX).contains(&utilisation)
}

/// Whether `capacity` is a load capacity the host accepts.
pub fn valid_load_capacity(capacity: f64) -> bool {
    capacity.is_finite() && capacity > 0.0 && capacity <= LOAD_MAX
}

/// What a heartbeat in flight carried: acknowledged once it is answered.
#[derive(Debug)]
struct Sent {
    full: bool,
    loads: Vec<(Task, f64)>,
    utilisation: Option<f64>,
    load_capacity: Option<f64>,
}

/// Known values and acknowledged values (see the module doc).
#[derive(Debug)]
pub struct LoadBook {
    threshold: f64,
    report: LoadReport,
    loads: BTreeMap<Task, f64>,
    acked: BTreeMap<Task, f64>,
    utilisation: Option<f64>,
    acked_utilisation: Option<f64>,
    load_capacity: Option<f64>,
    acked_load_capacity: Option<f64>,
    in_flight: Option<Sent>,
}

impl Default for LoadBook {
    fn default() -> Self {
        LoadBook::new(LOAD_THRESHOLD_DEFAULT)
    }
}

impl LoadBook {
    /// A book that resends a task's load once it moved by more than
    /// `threshold` (relative, e.g. 0.1 for 10 %).
    pub fn new(threshold: f64) -> Self {
        LoadBook {
            threshold,
            report: LoadReport::None,
            loads: BTreeMap::new(),
            acked: BTreeMap::new(),
            utilisation: None,
            acked_utilisation: None,
            load_capacity: None,
            acked_load_capacity: None,
            in_flight: None,
        }
    }

    /// What the last answer asked for.
    pub fn report(&self) -> LoadReport {
        self.report
    }

    /// The application's current load of an active task. Returns whether
    /// the value was valid (an invalid one changes nothing).
    pub fn set_load(&mut self, task: Task, load: f64) -> bool {
        let valid = valid_load(load);
        if valid {
            self.loads.insert(task, load);
        }
        valid
    }

    /// The member's measured utilisation (`None`: unknown). Returns
    /// whether the value was valid (an invalid one changes nothing).
    pub fn set_utilisation(&mut self, utilisation: Option<f64>) -> bool {
        let valid = utilisation.is_none_or(valid_utilisation);
        if valid {
            self.utilisation = utilisation;
        }
        valid
    }

    /// The load the member can carry (`None`: unknown). Returns whether
    /// the value was valid (an invalid one changes nothing).
    pub fn set_load_capacity(&mut self, capacity: Option<f64>) -> bool {
        let valid = capacity.is_none_or(valid_load_capacity);
        if valid {
            self.load_capacity = capacity;
        }
        valid
    }

    /// Forgets the loads of tasks that are not active here any more (and
    /// what the host acknowledged of them: if they come back, they are
    /// sent again).
    pub fn retain_active(&mut self, active: impl Fn(&Task) -> bool) {
        self.loads.retain(|task, _| active(task));
        self.acked.retain(|task, _| active(task));
    }

    /// The fields of the heartbeat built now, which is in flight from now
    /// until [`answered`](LoadBook::answered) or
    /// [`failed`](LoadBook::failed).
    pub fn build(&mut self) -> LoadFields {
        let sent = match self.report {
            LoadReport::None => None,
            LoadReport::Full => Some(Sent {
                full: true,
                loads: self.loads.iter().map(|(t, l)| (t.clone(), *l)).collect(),
                utilisation: self.utilisation,
                load_capacity: self.load_capacity,
            }),
            LoadReport::Changes => Some(self.changes()),
        };
        let fields = sent
            .as_ref()
            .map_or_else(LoadFields::default, |sent| LoadFields {
                loads: (sent.full || !sent.loads.is_empty()).then(|| items(&sent.loads)),
                utilisation: sent.utilisation,
                load_capacity: sent.load_capacity,
            });
        self.in_flight = sent;
        fields
    }

    fn changes(&self) -> Sent {
        let threshold = self.threshold;
        let moved = |task: &Task, load: f64| match self.acked.get(task) {
            None => true,
            Some(&acked) => (load - acked).abs() > threshold * acked,
        };
        let utilisation = self.utilisation.filter(|&u| {
            self.acked_utilisation
                .is_none_or(|acked| (u - acked).abs() > UTILISATION_STEP)
        });
        Sent {
            full: false,
            loads: self
                .loads
                .iter()
                .filter(|(task, load)| moved(task, **load))
                .map(|(t, l)| (t.clone(), *l))
                .collect(),
            utilisation,
            load_capacity: self
                .load_capacity
                .filter(|&c| self.acked_load_capacity != Some(c)),
        }
    }

    /// The heartbeat in flight got an answer asking `report` next: what it
    /// carried is the host's now. An answer asking anything but changes
    /// means the host holds none of this member's loads.
    pub fn answered(&mut self, report: LoadReport) {
        if let Some(sent) = self.in_flight.take() {
            if sent.full {
                self.acked = sent.loads.into_iter().collect();
                self.acked_utilisation = sent.utilisation;
                self.acked_load_capacity = sent.load_capacity;
            } else {
                self.acked.extend(sent.loads);
                self.acked_utilisation = sent.utilisation.or(self.acked_utilisation);
                self.acked_load_capacity = sent.load_capacity.or(self.acked_load_capacity);
            }
        }
        self.report = report;
        if report != LoadReport::Changes {
            self.forget_acked();
        }
    }

    /// The heartbeat in flight failed: the host may not have what it
    /// carried, so the next one carries it again.
    pub fn failed(&mut self) {
        self.in_flight = None;
    }

    /// The member leaves the group or joins as a new member: nothing is
    /// sent until an answer asks again.
    pub fn reset(&mut self) {
        self.in_flight = None;
        self.report = LoadReport::None;
        self.forget_acked();
    }

    fn forget_acked(&mut self) {
        self.acked.clear();
        self.acked_utilisation = None;
        self.acked_load_capacity = None;
    }
}

/// `loads` (sorted by task) as items: each run of consecutive partitions
/// of a topic with the same load as one range.
pub fn items(loads: &[(Task, f64)]) -> Vec<LoadItem> {
    let mut items: Vec<LoadItem> = Vec::new();
    for (task, load) in loads {
        match items.last_mut() {
            Some(last)
                if last.topic == task.topic
                    && last.load.to_bits() == load.to_bits()
                    && last.last.checked_add(1) == Some(task.partition) =>
            {
                last.last = task.partition;
            }
            _ => items.push(LoadItem {
                topic: task.topic.clone(),
                first: task.partition,
                last: task.partition,
                load: *load,
            }),
        }
    }
    items
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(p: u32) -> Task {
        Task::new("orders", p)
    }

    fn book_with(loads: &[(u32, f64)]) -> LoadBook {
        let mut book = LoadBook::default();
        for &(p, load) in loads {
            assert!(book.set_load(t(p), load));
        }
        book
    }

    fn sent(fields: &LoadFields) -> serde_json::Value {
        json!([fields.loads, fields.utilisation, fields.load_capacity])
    }

    #[test]
    fn nothing_is_sent_until_an_answer_asks() {
        let mut book = book_with(&[(0, 5.0)]);
        book.set_utilisation(Some(0.5));
        assert_eq!(book.build(), LoadFields::default());
        book.answered(LoadReport::None);
        assert_eq!(book.build(), LoadFields::default());
    }

    #[test]
    fn a_full_report_carries_every_known_load_in_ranges() {
        let mut book = book_with(&[(0, 5.0), (1, 5.0), (2, 5.0), (4, 5.0), (5, 7.5)]);
        book.set_load_capacity(Some(100.0));
        book.answered(LoadReport::Full);
        assert_eq!(
            sent(&book.build()),
            json!([
                [
                    ["orders", 0, 2, 5.0],
                    ["orders", 4, 5.0],
                    ["orders", 5, 7.5]
                ],
                null,
                100.0
            ])
        );
        // Nothing known: still a report, an empty one.
        let mut empty = LoadBook::default();
        empty.answered(LoadReport::Full);
        assert_eq!(sent(&empty.build()), json!([[], null, null]));
    }

    #[test]
    fn changes_carry_what_moved_past_the_threshold_or_was_never_sent() {
        let mut book = book_with(&[(0, 100.0), (1, 100.0)]);
        book.set_utilisation(Some(0.5));
        book.answered(LoadReport::Full);
        book.build();
        book.answered(LoadReport::Changes);
        assert_eq!(book.build(), LoadFields::default(), "nothing moved");
        book.answered(LoadReport::Changes);
        book.set_load(t(0), 110.0); // exactly 10 %: not more
        book.set_load(t(1), 89.0);
        book.set_load(t(2), 1.0);
        book.set_utilisation(Some(0.54));
        assert_eq!(
            sent(&book.build()),
            json!([[["orders", 1, 89.0], ["orders", 2, 1.0]], null, null])
        );
        book.answered(LoadReport::Changes);
        book.set_utilisation(Some(0.56));
        book.set_load(t(1), 97.0); // within 10 % of 89
        assert_eq!(sent(&book.build()), json!([null, 0.56, null]));
    }

    #[test]
    fn a_failed_heartbeat_is_resent_and_a_full_answer_forgets_what_was_acknowledged() {
        let mut book = book_with(&[(0, 10.0)]);
        book.answered(LoadReport::Changes);
        let first = sent(&book.build());
        book.failed();
        assert_eq!(sent(&book.build()), first);
        book.answered(LoadReport::Changes);
        assert_eq!(book.build(), LoadFields::default());
        // A new coordinator has nothing: all again.
        book.answered(LoadReport::Full);
        assert_eq!(
            sent(&book.build()),
            json!([[["orders", 0, 10.0]], null, null])
        );
    }

    #[test]
    fn loads_of_tasks_no_longer_active_are_forgotten() {
        let mut book = book_with(&[(0, 10.0), (1, 20.0)]);
        book.answered(LoadReport::Full);
        book.build();
        book.answered(LoadReport::Changes);
        book.retain_active(|task| task.partition == 0);
        book.set_load(t(1), 20.0);
        // Task 1 came back: never acknowledged since, so it is sent.
        assert_eq!(
            sent(&book.build()),
            json!([[["orders", 1, 20.0]], null, null])
        );
    }

    #[test]
    fn values_the_host_refuses_are_never_kept() {
        let mut book = LoadBook::default();
        for load in [-1.0, f64::NAN, f64::INFINITY, LOAD_MAX * 2.0] {
            assert!(!book.set_load(t(0), load), "{load}");
        }
        assert!(book.set_load(t(0), LOAD_MAX));
        assert!(!book.set_utilisation(Some(UTILISATION_MAX + 0.1)));
        assert!(!book.set_load_capacity(Some(0.0)));
        assert!(book.set_load_capacity(None));
        book.answered(LoadReport::Full);
        assert_eq!(
            sent(&book.build()),
            json!([[["orders", 0, LOAD_MAX]], null, null])
        );
    }
}
