//! Static members: a restart or a leave within the registration timeout keeps
//! the slot and its tasks, and a second process with the same name waits for
//! the old one's lease before it gets them.

use std::collections::BTreeSet;

use super::harness::*;
use super::records::{away, bumped, installed, joined, member, reconciled, removed, snapshot};
use crate::protocol::core::{Heartbeat, LEAVE_EPOCH, ProtocolError};
use crate::protocol::group::{RemovalReason, Slot, Task};
use crate::protocol::reconcile::MemberState;

#[test]
fn a_static_member_restarting_in_time_gets_exactly_its_tasks_back() {
    let mut h = Harness::new(9);
    let mut members = vec![
        h.join(Some("worker-a")),
        h.join(Some("worker-b")),
        h.join(None),
    ];
    h.at(1_000);
    h.settle(&mut members);
    let snapshot: Vec<BTreeSet<Task>> = members.iter().map(|m| m.active.clone()).collect();
    let mark = h.log.len();
    // worker-a's pod restarts before the host noticed anything.
    h.advance(5_000, &mut members[1..]);
    let restarted = h.join(Some("worker-a"));
    assert_ne!(
        restarted.member_id, members[0].member_id,
        "a new incarnation"
    );
    assert_eq!(restarted.active, snapshot[0], "exactly its old tasks");
    // The slot's new incarnation, and no rebalance.
    let new_incarnation = member(&restarted.member_id, Some("worker-a"));
    assert_eq!(
        h.records_since(mark),
        [joined(&Slot::named("worker-a"), new_incarnation)]
    );
    // The old incarnation is told it was replaced; nobody else moved.
    let stale = h.send(request_from(&members[0]));
    assert!(
        matches!(stale, Err(ProtocolError::Replaced { .. })),
        "{stale:?}"
    );
    members[0] = restarted;
    h.settle(&mut members);
    for (member, before) in members.iter().zip(&snapshot) {
        assert_eq!(&member.active, before);
    }
}

#[test]
fn a_static_member_that_leaves_keeps_its_slot_until_its_registration_timeout() {
    let mut h = Harness::new(6);
    let mut members = vec![h.join(Some("worker-a")), h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    let a_tasks = members[0].active.clone();
    h.send(Heartbeat {
        member_epoch: LEAVE_EPOCH,
        ..request_from(&members[0])
    })
    .unwrap();
    // The other member keeps heartbeating; worker-a's tasks stay parked.
    h.advance(20_000, &mut members[1..]);
    assert_eq!(members[1].active.len(), 3);
    let back = h.join(Some("worker-a"));
    assert_eq!(back.active, a_tasks, "back in time: same tasks");
    // Leave again and stay away past the registration timeout.
    h.send(Heartbeat {
        member_epoch: LEAVE_EPOCH,
        ..request_from(&back)
    })
    .unwrap();
    h.advance(20_000 + REGISTRATION_MS - 1, &mut members[1..]);
    assert!(
        h.core
            .group(GROUP)
            .unwrap()
            .members
            .contains_key("static:worker-a")
    );
    let (epoch, mark) = (h.core.group(GROUP).unwrap().group_epoch, h.log.len());
    h.advance(20_000 + REGISTRATION_MS, &mut members[1..]);
    // Expired, and, a departure being urgent, its tasks go to the other
    // member at once, which takes them on its next beat.
    let other = Slot::dynamic(&members[1].member_id);
    let every_task = tasks(0..6);
    assert_eq!(
        h.records_since(mark),
        [
            removed(&Slot::named("worker-a"), RemovalReason::Expired),
            bumped(epoch + 1),
            installed(epoch + 1, [(&other, &every_task)]),
            reconciled(
                &other,
                MemberState::Stable,
                (epoch + 1, epoch),
                every_task.clone(),
                BTreeSet::new()
            ),
            snapshot(&h),
        ]
    );
    let mut rest = vec![members[1].clone()];
    h.advance(20_000 + REGISTRATION_MS + EXPANSION_MS, &mut rest);
    h.settle(&mut rest);
    assert_eq!(rest[0].active, tasks(0..6), "the slot's tasks moved on");
}

/// Two live processes with one member name. The new incarnation takes the
/// slot, but is granted its tasks only once the last lease given to the old
/// one has run out (meanwhile they are its learners); the old one is told
/// `replaced`, not `fenced`, whether or not its heartbeat names it, and is
/// granted nothing.
#[test]
fn a_second_process_with_the_same_name_gets_the_tasks_only_after_the_old_lease() {
    let mut h = Harness::new(4);
    let mut members = vec![h.join(Some("w")), h.join(None)];
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    let old = members[0].clone();
    assert_eq!(old.active.len(), 2);
    let lease_end = h.now + old.lease_ms;
    assert!(old.lease_ms > 0);

    // The second process joins while the first one's lease runs.
    let mut new = h.join(Some("w"));
    assert_ne!(new.member_id, old.member_id);
    assert!(
        new.active.is_empty(),
        "granted during the old lease: {new:?}"
    );
    assert!(new.learner.is_superset(&old.active), "it warms them up");
    for name in [Some("w".to_owned()), None] {
        let stale = h.send(Heartbeat {
            member_name: name,
            owned: Some(old.active.iter().cloned().collect()),
            ..request_from(&old)
        });
        assert!(
            matches!(stale, Err(ProtocolError::Replaced { .. })),
            "{stale:?}"
        );
    }
    // Its own reports (nothing owned) release nothing for the old one.
    while h.now + 100 < lease_end {
        h.at(h.now + 100);
        new = h.beat(&new);
        assert!(new.active.is_empty(), "at {}: {new:?}", h.now);
        assert!(new.heartbeat_interval_ms <= 100, "beats fast meanwhile");
    }
    h.at(lease_end);
    new = h.beat(&new);
    assert_eq!(new.active, old.active, "granted once the old lease ended");
    // A removed member is still told `fenced` (rejoining is right).
    let other = members[1].clone();
    h.send(Heartbeat {
        member_epoch: LEAVE_EPOCH,
        ..request_from(&other)
    })
    .unwrap();
    let gone = h.send(request_from(&other));
    assert!(
        matches!(gone, Err(ProtocolError::Fenced { .. })),
        "{gone:?}"
    );
}

/// A static member that left (a graceful restart) gave its lease back:
/// its next incarnation gets the slot's tasks at once.
#[test]
fn a_static_member_that_left_is_back_with_its_tasks_at_once() {
    let mut h = Harness::new(4);
    let mut members = vec![h.join(Some("w")), h.join(None)];
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    let old = members[0].clone();
    assert!(old.lease_ms > 0);
    h.send(Heartbeat {
        member_epoch: LEAVE_EPOCH,
        ..request_from(&old)
    })
    .unwrap();
    let back = h.join(Some("w"));
    assert_eq!(back.active, old.active);
}

/// Two processes with one name in a draining slot: the second one joins
/// while the first one's lease runs (a handover: the slot's tasks are
/// withheld from it), then leaves. Removing the slot at once, its handover
/// with it, would let the next target give the first process's tasks to
/// another member while that process may still process them under its
/// lease (invariant 1): the slot goes, as left, once that lease ends, and
/// only then do its tasks move.
#[test]
fn a_second_process_that_leaves_a_draining_slot_does_not_free_the_first_ones_tasks() {
    let mut h = Harness::new(4);
    let mut members = vec![h.join(Some("w")), h.join(None)];
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    let old = h
        .send(Heartbeat {
            drain: true,
            owned: Some(members[0].active.iter().cloned().collect()),
            ..request_from(&members[0])
        })
        .unwrap();
    assert!(old.draining && !old.active.is_empty(), "{old:?}");
    let lease_end = h.now + old.lease_ms;
    // A second process joins with the name (the tasks are withheld from
    // it while the first one's lease runs), then leaves.
    let new = h.join(Some("w"));
    assert!(new.active.is_empty(), "{new:?}");
    h.send(Heartbeat {
        member_epoch: LEAVE_EPOCH,
        member_name: Some("w".into()),
        ..request_from(&new)
    })
    .unwrap();
    let other = h.beat(&members[1]);
    let other = h.beat(&other);
    assert!(h.now < lease_end);
    assert!(
        other.active.is_disjoint(&old.active),
        "granted {:?} at {} while the first process's lease runs until {lease_end}",
        other.active.intersection(&old.active).collect::<Vec<_>>(),
        h.now
    );
    // The tick at which that lease ends removes the slot (as left); a
    // departure being urgent, its tasks move in the next target at once.
    let mut other = vec![other];
    h.advance(lease_end - 1_000, &mut other);
    assert!(h.is_member(&new.member_id), "kept while the lease runs");
    let epoch = h.core.group(GROUP).unwrap().group_epoch;
    let mark = h.log.len();
    h.at(lease_end);
    let every_task = tasks(0..4);
    let staying = [(&Slot::dynamic(&other[0].member_id), &every_task)];
    assert_eq!(
        h.records_since(mark),
        [
            removed(&Slot::named("w"), RemovalReason::Left),
            bumped(epoch + 1),
            installed(epoch + 1, staying),
        ]
    );
    other[0] = h.beat(&other[0]);
    let group = h.core.group(GROUP).unwrap();
    assert!(group.slot_of(&new.member_id).is_none(), "the slot is gone");
    h.at(h.now + EXPANSION_MS);
    h.settle(&mut other);
    assert!(other[0].active.is_superset(&old.active), "{:?}", other[0]);
}

/// A static member's leave only marks its slot away: nothing is removed
/// and no new target is asked for.
#[test]
fn a_static_leave_emits_exactly_its_away_mark() {
    let mut h = Harness::new(4);
    let mut members = vec![h.join(Some("worker-a")), h.join(None)];
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    let mark = h.log.len();
    h.send(Heartbeat {
        member_epoch: LEAVE_EPOCH,
        ..request_from(&members[0])
    })
    .unwrap();
    assert_eq!(h.records_since(mark), [away(&Slot::named("worker-a"))]);
}
