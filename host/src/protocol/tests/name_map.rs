//! The name map dropped by a nameless join into a stable static group: slots
//! re-keyed by member id, with their drain deadlines, lags and leases.

use std::collections::BTreeSet;

use super::harness::*;
use super::records::{bumped, installed, joined, member, reconciled, removed};
use crate::protocol::core::HeartbeatResponse;
use crate::protocol::group::{GroupConfig, Record, RemovalReason, Slot, Task};
use crate::protocol::reconcile::MemberState;

/// A nameless join into a stable static group: it drops the name map,
/// then joins as any newcomer.
fn join_dropping_the_name_map(h: &mut Harness) -> HeartbeatResponse {
    let (epoch, mark) = (h.core.group(GROUP).unwrap().group_epoch, h.log.len());
    let newcomer = h.join(None);
    let slot = Slot::dynamic(&newcomer.member_id);
    let none = BTreeSet::new();
    let dropped = Record::NameMapDropped {
        group: GROUP.into(),
    };
    assert_eq!(
        h.records_since(mark),
        [
            dropped,
            joined(&slot, member(&newcomer.member_id, None)),
            bumped(epoch + 1),
            // At the installed target's epoch, with nothing yet.
            reconciled(&slot, MemberState::Stable, (epoch, 0), none.clone(), none),
        ]
    );
    newcomer
}

#[test]
fn a_nameless_join_into_a_stable_static_group_drops_the_name_map() {
    let mut h = Harness::new(6);
    let mut members = vec![h.join(Some("worker-a")), h.join(Some("worker-b"))];
    h.at(1_000);
    h.settle(&mut members);
    members.push(join_dropping_the_name_map(&mut h));
    let group = h.core.group(GROUP).unwrap();
    assert!(group.dynamic_only);
    assert!(group.members.values().all(|m| m.name.is_none()));
    // The former static members carry on with their ids and tasks.
    h.at(3_000);
    h.settle(&mut members);
    assert_eq!(all_active(&members), tasks(0..6));
    // A named join now makes a dynamic member.
    let late = h.join(Some("worker-c"));
    let group = h.core.group(GROUP).unwrap();
    assert!(group.members.contains_key(late.member_id.as_str()));
}

/// Static worker-a drains (nobody is warm on its tasks, so it keeps them)
/// from t=1000 with the scale-down timeout given; worker-b warms them up,
/// reporting lag 5000; at t=3000 a nameless join drops the name map, and
/// both slots are re-keyed by member id. Returns the harness and a, b, and
/// the newcomer, each as last answered.
fn drain_then_drop_the_name_map(scale_down_ms: u64) -> (Harness, Vec<HeartbeatResponse>) {
    let mut h = Harness::with_config(GroupConfig {
        scale_down_timeout_ms: scale_down_ms,
        ..learner_config(4, 10)
    });
    let mut members = vec![h.join(Some("worker-a")), h.join(Some("worker-b"))];
    h.at(1_000);
    h.settle(&mut members);
    let out = h.core.drain(GROUP, "worker-a", h.now).unwrap();
    h.absorb(out);
    h.settle(&mut members);
    assert!(members[0].draining && !members[0].active.is_empty());
    members[1] = h.beat_with_lags(&members[1].clone(), lags_of(&members[1], 5_000));
    h.advance(3_000, &mut members);
    members.push(join_dropping_the_name_map(&mut h));
    assert!(h.core.group(GROUP).unwrap().members[members[0].member_id.as_str()].draining);
    (h, members)
}

/// The name map dropped while a member drains: its slot is re-keyed by
/// member id, and its drain deadline, counted from when the drain began,
/// moves with it rather than starting over at the next tick; so do the
/// lags its peer reported.
#[test]
fn a_drain_keeps_its_deadline_when_the_name_map_is_dropped() {
    let (mut h, mut members) = drain_then_drop_the_name_map(20_000);
    let input = h.core.assignor_input(GROUP).unwrap();
    assert!(
        input.lags.iter().any(|(_, _, lag)| lag == 5_000),
        "the assignor still sees worker-b's lags"
    );
    h.advance(20_000, &mut members);
    let draining = members[0].member_id.clone();
    assert!(h.is_member(&draining));
    let epoch = h.core.group(GROUP).unwrap().group_epoch;
    let mark = h.log.len();
    h.at(21_000);
    // Removed on the deadline of the drain begun at t=1000; a departure
    // being urgent, the next target is installed at once: worker-b keeps
    // its tasks and the newcomer takes the drained member's.
    let staying = [
        (&Slot::dynamic(&members[1].member_id), &members[1].active),
        (&Slot::dynamic(&members[2].member_id), &members[0].active),
    ];
    assert_eq!(
        h.records_since(mark),
        [
            removed(&Slot::dynamic(&draining), RemovalReason::DrainTimedOut),
            bumped(epoch + 1),
            installed(epoch + 1, staying),
        ]
    );
}

/// The name map dropped, then the timeouts shortened: the drain deadline
/// and the session have long passed under the new config, but the draining
/// member, silent since its last answer, is removed only once the lease
/// that answer gave it ends: the lease promise moves with the slot, so the
/// new slot's timers, started afresh, do not remove it within a second.
#[test]
fn a_lease_given_before_the_name_map_is_dropped_is_kept() {
    let (mut h, mut members) = drain_then_drop_the_name_map(20_000);
    let silent = members.remove(0);
    let lease_end = 3_000 + silent.lease_ms;
    let config = h.core.group(GROUP).unwrap().config.clone();
    h.configure(GroupConfig {
        heartbeat_interval_ms: 100,
        session_timeout_ms: 600,
        scale_down_timeout_ms: 500,
        ..config
    });
    let mut removed_at = None;
    let mut removing_tick = Vec::new();
    let mut epoch = 0;
    for now in (3_100..=lease_end + 1_000).step_by(100) {
        epoch = h.core.group(GROUP).unwrap().group_epoch;
        let mark = h.log.len();
        h.at(now);
        removing_tick = h.records_since(mark).to_vec();
        for member in &mut members {
            *member = h.beat(member);
        }
        if !h.is_member(&silent.member_id) {
            removed_at = Some(now);
            break;
        }
    }
    let removed_at = removed_at.expect("removed once its lease ends");
    // That tick removes it; a departure being urgent, the newcomer is given
    // its tasks at once and worker-b keeps the rest.
    let kept: BTreeSet<Task> = tasks(0..4).difference(&silent.active).cloned().collect();
    let staying = [
        (&Slot::dynamic(&members[0].member_id), &kept),
        (&Slot::dynamic(&members[1].member_id), &silent.active),
    ];
    let drained = Slot::dynamic(&silent.member_id);
    assert_eq!(
        removing_tick,
        [
            removed(&drained, RemovalReason::DrainTimedOut),
            bumped(epoch + 1),
            installed(epoch + 1, staying),
        ]
    );
    assert!(
        removed_at >= lease_end,
        "removed at {removed_at}, but its lease runs until {lease_end}"
    );
    assert!(removed_at < lease_end + 100, "and not later");
}
