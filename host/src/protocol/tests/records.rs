//! Expected records, built short: each constructor makes one record of the
//! harness's group, so that a test can write the exact ordered list a step
//! must emit and compare it whole.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::harness::{GROUP, Harness};
use crate::protocol::group::{Member, Record, RemovalReason, Slot, SlotTarget, Task};
use crate::protocol::reconcile::{MemberAssignment, MemberState};

/// A member subscribed to `orders` with the default capacity, as a join
/// of the harness makes it; `name` for a static member.
pub(super) fn member(member_id: &str, name: Option<&str>) -> Member {
    Member {
        member_id: member_id.to_owned(),
        name: name.map(str::to_owned),
        topics: ["orders".to_owned()].into(),
        rack: None,
        capacity: 1,
        away: false,
        draining: false,
        endpoint: None,
        metadata: Default::default(),
    }
}

pub(super) fn joined(slot: &Slot, member: Member) -> Record {
    Record::MemberJoined {
        group: GROUP.into(),
        slot: slot.clone(),
        member,
    }
}

/// A snapshot of the group as it is now.
pub(super) fn snapshot(h: &Harness) -> Record {
    Record::GroupSnapshot {
        group: GROUP.into(),
        state: Box::new(h.core.group(GROUP).expect("the group").clone()),
    }
}

pub(super) fn bumped(epoch: u64) -> Record {
    Record::GroupEpochBumped {
        group: GROUP.into(),
        epoch,
    }
}

pub(super) fn away(slot: &Slot) -> Record {
    Record::MemberAway {
        group: GROUP.into(),
        slot: slot.clone(),
        away: true,
    }
}

pub(super) fn removed(slot: &Slot, reason: RemovalReason) -> Record {
    Record::MemberRemoved {
        group: GROUP.into(),
        slot: slot.clone(),
        reason,
    }
}

/// A target of active tasks only (no learners, no standbys).
pub(super) fn installed<'a>(
    epoch: u64,
    active: impl IntoIterator<Item = (&'a Slot, &'a BTreeSet<Task>)>,
) -> Record {
    let target: BTreeMap<Slot, SlotTarget> = active
        .into_iter()
        .map(|(slot, tasks)| {
            let target = SlotTarget {
                active: tasks.clone(),
                ..SlotTarget::default()
            };
            (slot.clone(), target)
        })
        .collect();
    Record::TargetInstalled {
        group: GROUP.into(),
        epoch,
        target: Arc::new(target),
    }
}

/// The target the group holds now, as installed at `epoch`: for a target
/// too big to write out, whose contents the test checks otherwise.
pub(super) fn installed_now(h: &Harness, epoch: u64) -> Record {
    Record::TargetInstalled {
        group: GROUP.into(),
        epoch,
        target: h.core.group(GROUP).expect("the group").target.clone(),
    }
}

/// A slot's holdings recorded: its reconciliation `state` at member epoch
/// `epochs.0` (after `epochs.1`), its active tasks and those it releases.
pub(super) fn reconciled(
    slot: &Slot,
    state: MemberState,
    epochs: (u64, u64),
    active: BTreeSet<Task>,
    revoking: BTreeSet<Task>,
) -> Record {
    Record::MemberReconciled {
        group: GROUP.into(),
        slot: slot.clone(),
        assignment: MemberAssignment {
            state,
            epoch: epochs.0,
            previous_epoch: epochs.1,
            active,
            revoking,
        },
    }
}
