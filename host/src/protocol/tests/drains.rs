//! Drains: a draining member hands its tasks over through learners, and one
//! that asks to drain itself is fenced after the scale-down timeout.

use std::collections::BTreeSet;

use super::harness::*;
use super::records::{bumped, installed, removed};
use crate::protocol::core::{Heartbeat, LEAVE_EPOCH};
use crate::protocol::group::{GroupConfig, RemovalReason, Slot, Task};

#[test]
fn a_draining_member_hands_over_through_learners_then_may_exit() {
    let mut h = Harness::with_config(learner_config(12, 10));
    let mut members = vec![
        h.join(Some("worker-a")),
        h.join(Some("worker-b")),
        h.join(Some("worker-c")),
    ];
    h.at(1_000);
    h.settle(&mut members);
    let leaving = members[0].active.clone();
    let out = h.core.drain(GROUP, "worker-a", h.now).unwrap();
    h.absorb(out);
    h.settle(&mut members);
    assert!(members[0].draining && !members[0].drained);
    assert_eq!(members[0].active, leaving, "kept until a new owner is warm");
    let warming: BTreeSet<Task> = members[1..]
        .iter()
        .flat_map(|m| m.learner.iter().cloned())
        .collect();
    assert_eq!(warming, leaving);
    for member in &mut members[1..] {
        *member = h.beat_with_lags(&member.clone(), lags_of(member, 0));
    }
    h.settle(&mut members);
    assert!(members[0].active.is_empty());
    assert!(members[0].drained, "told it may exit");
    assert_eq!(all_active(&members[1..]), tasks(0..12));
    // Its leave removes a static member for good (not a temporary leave),
    // and, a departure being urgent, the next target is installed at once:
    // the two who stay keep what they hold.
    let epoch = h.core.group(GROUP).unwrap().group_epoch;
    let mark = h.log.len();
    h.send(Heartbeat {
        member_epoch: LEAVE_EPOCH,
        ..request_from(&members[0])
    })
    .unwrap();
    let staying = [
        (&Slot::named("worker-b"), &members[1].active),
        (&Slot::named("worker-c"), &members[2].active),
    ];
    assert_eq!(
        h.records_since(mark),
        [
            removed(&Slot::named("worker-a"), RemovalReason::Left),
            bumped(epoch + 1),
            installed(epoch + 1, staying),
        ]
    );
}

#[test]
fn a_member_may_ask_to_drain_itself_and_is_fenced_after_the_scale_down_timeout() {
    let mut h = Harness::with_config(GroupConfig {
        scale_down_timeout_ms: 20_000,
        ..learner_config(12, 10)
    });
    let mut members = vec![h.join(None), h.join(None), h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    members[0] = h
        .send(Heartbeat {
            drain: true,
            owned: Some(members[0].active.iter().cloned().collect()),
            ..request_from(&members[0])
        })
        .unwrap();
    assert!(members[0].draining);
    // Nobody catches up: the draining member keeps its tasks until the
    // scale-down timeout, then it is fenced and they move anyway.
    h.advance(20_000, &mut members);
    assert!(members[0].active.len() == 4, "held until the timeout");
    assert_eq!(
        [&members[1].active, &members[0].active, &members[2].active],
        [&tasks(0..4), &tasks(4..8), &tasks(8..12)]
    );
    // The tick at the deadline of the drain begun at t=1000 removes it; a
    // departure being urgent, the next target is installed at once: the
    // two who stay keep theirs and split the drained member's tasks.
    let epoch = h.core.group(GROUP).unwrap().group_epoch;
    let mark = h.log.len();
    h.at(21_000);
    let staying = [
        (&Slot::dynamic(&members[1].member_id), &tasks(0..6)),
        (&Slot::dynamic(&members[2].member_id), &tasks(6..12)),
    ];
    let drained = Slot::dynamic(&members[0].member_id);
    assert_eq!(
        h.records_since(mark),
        [
            removed(&drained, RemovalReason::DrainTimedOut),
            bumped(epoch + 1),
            installed(epoch + 1, staying),
        ]
    );
    for member in &mut members[1..] {
        *member = h.beat(member);
    }
    h.advance(22_000, &mut members[1..]);
    h.advance(25_000, &mut members[1..]);
    assert_eq!(all_active(&members[1..]), tasks(0..12));
}
