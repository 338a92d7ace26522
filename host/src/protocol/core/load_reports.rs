//! A heartbeat's load report: its `loads`, `utilisation` and
//! `load_capacity` checked before anything changes, taken for the tasks the
//! member holds active (a report on a task it no longer holds, as in a race
//! with a revocation, is dropped), and what the answer asks it to report
//! next (`load_report`). A group without a load unit takes no loads: its
//! members' load fields are ignored, never refused. What is kept is soft
//! state ([`LoadBook`](crate::protocol::group::LoadBook)); nothing here
//! emits a record.

use std::collections::BTreeMap;

use assignd_wire::{LOAD_MAX, LoadItem, LoadReport, UTILISATION_MAX};

use super::{Coordinator, Heartbeat, ProtocolError, TASKS_PER_GROUP_MAX, invalid};
use crate::protocol::group::{Estimate, Group, Liveness, Millis, Slot, Task};

/// Checks a heartbeat's load fields against the bounds; returns whether
/// there is a report to take (the group takes loads and the heartbeat
/// carries one).
pub(super) fn check_load_report(group: &Group, request: &Heartbeat) -> Result<bool, ProtocolError> {
    if group.config.load_unit.is_none() {
        return Ok(false);
    }
    if let Some(items) = &request.loads {
        check_items(group, items)?;
    }
    if let Some(utilisation) = request.utilisation
        && !(0.0..=UTILISATION_MAX).contains(&utilisation)
    {
        return invalid(format!(
            "utilisation {utilisation} is not from 0 to {UTILISATION_MAX}"
        ));
    }
    if let Some(capacity) = request.load_capacity
        && !(capacity > 0.0 && capacity <= LOAD_MAX)
    {
        return invalid(format!(
            "load_capacity {capacity} is not more than 0 and at most {LOAD_MAX:e}"
        ));
    }
    Ok(request.loads.is_some() || request.utilisation.is_some() || request.load_capacity.is_some())
}

/// The items' count, each load, each range, and how many of the group's
/// tasks they name in all (a range past a topic's partitions names only
/// those it has), so that taking them is bounded.
fn check_items(group: &Group, items: &[LoadItem]) -> Result<(), ProtocolError> {
    if items.len() as u64 > TASKS_PER_GROUP_MAX {
        return invalid(format!("loads: more than {TASKS_PER_GROUP_MAX} items"));
    }
    let partitions = partitions_by_topic(group);
    let mut named = 0u64;
    for item in items {
        let LoadItem {
            topic,
            first,
            last,
            load,
        } = item;
        if !(0.0..=LOAD_MAX).contains(load) {
            return invalid(format!(
                "loads: the load {load} of [{topic:?}, {first}, {last}] is not from 0 to {LOAD_MAX:e}"
            ));
        }
        if first > last {
            return invalid(format!(
                "loads: the range [{topic:?}, {first}, {last}] ends before it starts"
            ));
        }
        if let Some(&n) = partitions.get(topic.as_str())
            && *first < n
        {
            named += u64::from((*last).min(n - 1) - first) + 1;
        }
    }
    if named > TASKS_PER_GROUP_MAX {
        return invalid(format!(
            "loads: the items name more than {TASKS_PER_GROUP_MAX} tasks"
        ));
    }
    Ok(())
}

fn partitions_by_topic(group: &Group) -> BTreeMap<&str, u32> {
    group
        .config
        .topics
        .iter()
        .map(|t| (t.name.as_str(), t.partitions))
        .collect()
}

impl Coordinator {
    /// Takes the checked load report of `request` from slot `slot`'s
    /// member: the loads of the tasks it holds active, its utilisation and
    /// load capacity; it has reported from now on.
    pub(super) fn take_load_report(
        &mut self,
        group_name: &str,
        slot: &Slot,
        request: &Heartbeat,
        now: Millis,
    ) {
        let (group, liveness) = self.entry_mut(group_name);
        let half_life_ms = group.config.load_half_life_ms;
        let partitions = partitions_by_topic(group);
        let book = &mut liveness.loads;
        // Estimates of tasks the group no longer has (a topic removed or
        // shrunk since) go before any is added.
        book.retain_tasks(|topic| partitions.get(topic).copied());
        let held = group.holdings.member(slot).map(|held| &held.active);
        for item in request.loads.iter().flatten() {
            let (Some(held), Some(&n)) = (held, partitions.get(item.topic.as_str())) else {
                continue;
            };
            if item.first >= n {
                continue;
            }
            let first = Task::new(item.topic.as_str(), item.first);
            let last = Task::new(item.topic.as_str(), item.last.min(n - 1));
            for task in held.range(first..=last) {
                book.report_task(&task.topic, task.partition, item.load, now, half_life_ms);
            }
        }
        let member = book.member_mut(slot);
        if let Some(utilisation) = request.utilisation {
            match &mut member.utilisation {
                Some(estimate) => estimate.report(utilisation, now, half_life_ms),
                None => member.utilisation = Some(Estimate::first(utilisation, now)),
            }
        }
        if let Some(capacity) = request.load_capacity {
            member.load_capacity = Some(capacity);
        }
        member.reported = true;
    }

    /// A new incarnation joined slot `slot`: what the previous one said of
    /// itself is not this one's, and it is asked for a full report.
    pub(super) fn forget_member_loads(&mut self, group_name: &str, slot: &Slot) {
        self.liveness_mut(group_name).loads.remove_slot(slot);
    }
}

/// What slot `slot`'s member is asked to report next.
pub(super) fn load_report(group: &Group, liveness: Option<&Liveness>, slot: &str) -> LoadReport {
    if group.config.load_unit.is_none() {
        LoadReport::None
    } else if liveness.is_some_and(|l| l.loads.reported(slot)) {
        LoadReport::Changes
    } else {
        LoadReport::Full
    }
}
