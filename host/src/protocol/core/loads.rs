//! The load view: a group's loads at a moment, as every reader of them
//! sees them (the load trigger, the group view, the metrics). Per member:
//! the load of the tasks its target gives it, its share of the group's load,
//! their ratio, its utilisation and load capacity; for the group: the
//! imbalance and whether every load is known. One definition of shares and
//! imbalance for all of them; it reads the reports the core kept
//! ([`LoadBook`](crate::protocol::group::LoadBook)) and changes nothing.

use crate::protocol::group::{Group, Liveness, Millis, Slot, Task};

/// A group's loads at one moment.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadView {
    /// The group's load unit.
    pub unit: String,
    /// Every member of the group, in slot order.
    pub members: Vec<MemberLoad>,
    /// The known load of every task the target gives a member.
    pub total: f64,
    /// The largest ratio of a member's load to its share (1.0 is perfect);
    /// members with no share are skipped. `None` when no member has one
    /// (no load, or no member that takes tasks).
    pub imbalance: Option<f64>,
    /// Every active task of the current target has a known load. Until
    /// then no load rebalance may start: unknown is not zero.
    pub complete: bool,
    /// The weights are the members' load capacities (every member that
    /// takes tasks declared one); otherwise their `capacity`.
    pub by_load_capacity: bool,
}

/// One member's load against its share.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberLoad {
    pub slot: Slot,
    /// The known loads of the tasks its target gives it active, added up.
    pub load: f64,
    /// Its target's active tasks whose load is not known.
    pub unknown_tasks: u64,
    /// Its weight: its load capacity or its capacity (0 while draining:
    /// it is leaving, and takes no share).
    pub weight: f64,
    /// Its share of the group's load: `total * weight / sum of weights`.
    pub share: f64,
    /// `load / share`; `None` when its share is 0.
    pub ratio: Option<f64>,
    /// Its smoothed utilisation, if it reported one.
    pub utilisation: Option<f64>,
    /// The load it said it can carry, if it did.
    pub load_capacity: Option<f64>,
}

impl LoadView {
    /// Whether every member with a share carries between `share * (1 -
    /// band)` and `share * (1 + band)`.
    pub fn in_band(&self, band: f64) -> bool {
        self.members
            .iter()
            .filter(|m| m.share > 0.0)
            .all(|m| m.load >= m.share * (1.0 - band) && m.load <= m.share * (1.0 + band))
    }

    /// Slot `slot`'s entry, if it is a member.
    pub fn member(&self, slot: &str) -> Option<&MemberLoad> {
        self.members.iter().find(|m| m.slot.as_str() == slot)
    }
}

/// Group `group`'s loads at `now`, from what its members reported
/// (`liveness.loads`); `None` when the group takes no loads (it has no
/// load unit).
pub(crate) fn load_view(group: &Group, liveness: &Liveness, now: Millis) -> Option<LoadView> {
    let unit = group.config.load_unit.clone()?;
    let half_life_ms = group.config.load_half_life_ms;
    let book = &liveness.loads;
    let takes_tasks = |slot: &Slot| !group.members[slot].draining;
    let by_load_capacity = group
        .members
        .keys()
        .filter(|s| takes_tasks(s))
        .all(|slot| book.member(slot).is_some_and(|m| m.load_capacity.is_some()))
        && group.members.keys().any(takes_tasks);
    let mut members = Vec::with_capacity(group.members.len());
    for (slot, member) in &group.members {
        let reported = book.member(slot);
        let load_capacity = reported.and_then(|m| m.load_capacity);
        let weight = match (takes_tasks(slot), by_load_capacity) {
            (false, _) => 0.0,
            (true, true) => load_capacity.unwrap_or(0.0),
            (true, false) => f64::from(member.capacity),
        };
        let (load, unknown_tasks) = target_load(&group.target_of(slot).active, |task| {
            book.task_load(task, now, half_life_ms)
        });
        members.push(MemberLoad {
            slot: slot.clone(),
            load,
            unknown_tasks,
            weight,
            share: 0.0,
            ratio: None,
            utilisation: reported
                .and_then(|m| m.utilisation)
                .map(|u| u.at(now, half_life_ms)),
            load_capacity,
        });
    }
    let total: f64 = members.iter().map(|m| m.load).sum();
    let weights: f64 = members.iter().map(|m| m.weight).sum();
    let mut imbalance: Option<f64> = None;
    for member in &mut members {
        if weights > 0.0 {
            member.share = total * member.weight / weights;
        }
        if member.share > 0.0 {
            let ratio = member.load / member.share;
            member.ratio = Some(ratio);
            imbalance = Some(imbalance.map_or(ratio, |worst| worst.max(ratio)));
        }
    }
    let complete = members.iter().all(|m| m.unknown_tasks == 0);
    Some(LoadView {
        unit,
        members,
        total,
        imbalance,
        complete,
        by_load_capacity,
    })
}

/// The known loads of `tasks` added up, and how many are unknown.
fn target_load<'a>(
    tasks: impl IntoIterator<Item = &'a Task>,
    load_of: impl Fn(&Task) -> Option<f64>,
) -> (f64, u64) {
    let mut load = 0.0;
    let mut unknown = 0;
    for task in tasks {
        match load_of(task) {
            Some(known) => load += known,
            None => unknown += 1,
        }
    }
    (load, unknown)
}
