//! Leases: what an answer promises (the plain and the unreached lease) and
//! that the host keeps it through config changes and restarts of a member.

use std::collections::BTreeSet;

use super::harness::*;
use super::records::{bumped, installed, removed};
use crate::protocol::core::{Heartbeat, HeartbeatResponse};
use crate::protocol::group::{GroupConfig, RemovalReason, Slot, Task};

/// The lease in an answer at `t` is the time until the earliest moment the
/// host could remove the member if it heard nothing more: no sooner.
#[test]
fn a_lease_ends_no_later_than_the_host_could_give_the_tasks_away() {
    let mut h = Harness::new(4);
    let mut members = vec![h.join(None), h.join(None), h.join(Some("w"))];
    // Nothing to release yet, but the next heartbeat may be told to revoke
    // and its answer be lost: the host fences an expansion timeout and a
    // heartbeat interval after that heartbeat.
    assert_eq!(members[0].lease_ms, EXPANSION_MS + 1_000);
    assert_eq!(members[2].lease_ms, EXPANSION_MS + 1_000);
    // Past that, the session timeout bounds it, for a static member too: a
    // nameless join may drop the name map right after the answer, and the
    // member then expires as a dynamic one.
    let mut long = Harness::with_config(GroupConfig {
        expansion_timeout_ms: 3 * REGISTRATION_MS,
        ..config(4)
    });
    assert_eq!(long.join(None).lease_ms, SESSION_MS);
    assert_eq!(long.join(Some("w")).lease_ms, SESSION_MS);
    h.at(EXPANSION_MS);
    h.settle(&mut members);

    // A newcomer: the member with two tasks is told to release one; its
    // lease is now the expansion timeout from then, and shrinks while it
    // does not release.
    let mut others: Vec<HeartbeatResponse> = Vec::new();
    let mut busy = None;
    for member in members {
        if member.active.len() == 2 && busy.is_none() {
            busy = Some(member);
        } else {
            others.push(member);
        }
    }
    let busy = busy.expect("4 tasks over 3 members");
    others.push(h.join(None));
    h.at(2 * EXPANSION_MS);
    h.settle(&mut others);
    let owned = Some(busy.active.iter().cloned().collect());
    let told = h
        .send(Heartbeat {
            owned: owned.clone(),
            ..request_from(&busy)
        })
        .unwrap();
    assert_eq!(told.revoking.len(), 1, "{told:?}");
    assert_eq!(told.lease_ms, EXPANSION_MS);
    h.at(2 * EXPANSION_MS + 300);
    let still = h
        .send(Heartbeat {
            owned,
            ..request_from(&told)
        })
        .unwrap();
    assert_eq!(still.lease_ms, EXPANSION_MS - 300);
    // Silent from here: still a member at the last moment of its lease.
    let lease_end = 2 * EXPANSION_MS + 300 + still.lease_ms;
    h.advance(lease_end - 1, &mut others);
    assert!(h.is_member(&told.member_id));
    h.advance(lease_end + 2 * EXPANSION_MS, &mut others);
    assert!(!h.is_member(&told.member_id));

    // A scale-down timeout shorter than the rest bounds every lease: an
    // admin may start a drain right after an answer. A draining member's
    // lease runs out with its drain.
    h.configure(GroupConfig {
        scale_down_timeout_ms: 1_500,
        ..config(4)
    });
    h.settle(&mut others);
    assert!(others.iter().all(|m| m.lease_ms == 1_500), "{others:?}");
    let start = h.now;
    let out = h.core.drain(GROUP, &others[0].member_id, start).unwrap();
    h.absorb(out);
    h.at(start + 1_000);
    others[0] = h.beat(&others[0]);
    assert!(others[0].draining);
    assert!(others[0].lease_ms <= 500, "{}", others[0].lease_ms);
}

/// A lease once given is kept: shortening the session timeout of a live
/// group does not remove a silent member before the lease it holds ends.
#[test]
fn a_config_change_does_not_cut_a_lease_short() {
    let long = GroupConfig {
        expansion_timeout_ms: 5_000,
        ..config(2)
    };
    let mut h = Harness::with_config(long.clone());
    let mut members = vec![h.join(None), h.join(None)];
    h.at(5_000);
    h.settle(&mut members);
    let silent = members.pop().unwrap();
    let lease = silent.lease_ms;
    assert_eq!(lease, SESSION_MS.min(5_000 + 1_000));
    let lease_end = h.now + lease;
    h.configure(GroupConfig {
        session_timeout_ms: 2_000,
        ..long
    });
    h.advance(lease_end - 1, &mut members);
    let group = h.core.group(GROUP).unwrap();
    assert!(
        group.slot_of(&silent.member_id).is_some(),
        "kept until its lease ends"
    );
    // The next step's tick expires it; a departure being urgent, the one
    // who stays is given every task at once.
    let epoch = h.core.group(GROUP).unwrap().group_epoch;
    let mark = h.log.len();
    h.at(lease_end - 1 + 1_000);
    let every_task = tasks(0..2);
    let staying = [(&Slot::dynamic(&members[0].member_id), &every_task)];
    assert_eq!(
        h.records_since(mark),
        [
            removed(&Slot::dynamic(&silent.member_id), RemovalReason::Expired),
            bumped(epoch + 1),
            installed(epoch + 1, staying),
        ],
        "then expired"
    );
    members[0] = h.beat(&members[0]);
    h.advance(lease_end + 1_000, &mut members);
    let group = h.core.group(GROUP).unwrap();
    assert!(
        group.slot_of(&silent.member_id).is_none(),
        "its slot is gone"
    );
}

/// The unreached grace of the cluster tests below (a takeover's time).
const GRACE_MS: u64 = 4_000;

/// An answer carries the unreached lease, the plain lease plus the grace
/// (the time a takeover may take) within the session timeout; on a single
/// node (no grace), and when the answer has tasks to revoke, it is the
/// plain lease.
#[test]
fn an_unreached_lease_adds_the_grace_unless_tasks_are_revoked() {
    let mut single = Harness::new(4);
    let alone = single.join(None);
    assert_eq!(alone.unreached_lease_ms, alone.lease_ms);

    let mut h = Harness::new(4);
    h.core.set_unreached_grace_ms(GRACE_MS);
    let mut members = vec![h.join(None), h.join(None)];
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    for member in &members {
        assert_eq!(member.active.len(), 2);
        assert_eq!(member.unreached_lease_ms, member.lease_ms + GRACE_MS);
        // A revocation at a later heartbeat is fenced this long after it.
        assert_eq!(member.unreached_flight_ms, EXPANSION_MS + 1_000);
    }
    h.core.set_unreached_grace_ms(10 * SESSION_MS);
    members[0] = h.beat(&members[0]);
    assert_eq!(
        members[0].unreached_lease_ms, SESSION_MS,
        "within the session"
    );
    h.core.set_unreached_grace_ms(GRACE_MS);

    // A newcomer: each old member is told to release one task.
    members.push(h.join(None));
    h.at(2 * EXPANSION_MS);
    let told = h.send(Heartbeat {
        owned: Some(members[0].active.iter().cloned().collect()),
        ..request_from(&members[0])
    });
    let told = told.unwrap();
    assert_eq!(told.revoking.len(), 1, "{told:?}");
    assert_eq!(told.unreached_lease_ms, told.lease_ms, "no grace: {told:?}");
}

/// A crashed static member's new incarnation gets the slot's tasks only
/// once the old one's unreached lease has ended, not its plain one: the old
/// process may still be processing while its heartbeats find no
/// coordinator.
#[test]
fn a_new_incarnation_waits_for_the_old_ones_unreached_lease() {
    let mut h = Harness::new(4);
    h.core.set_unreached_grace_ms(GRACE_MS);
    let mut members = vec![h.join(Some("w")), h.join(None)];
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    let old = members[0].clone();
    let plain_end = h.now + old.lease_ms;
    let unreached_end = h.now + old.unreached_lease_ms;
    assert_eq!(unreached_end, plain_end + GRACE_MS);

    h.at(plain_end + 100);
    let mut new = h.join(Some("w"));
    assert_ne!(new.member_id, old.member_id);
    while h.now + 100 < unreached_end {
        assert!(new.active.is_empty(), "at {}: {new:?}", h.now);
        h.at(h.now + 100);
        new = h.beat(&new);
    }
    h.at(unreached_end);
    new = h.beat(&new);
    assert_eq!(
        new.active, old.active,
        "granted once the unreached lease ended"
    );
}

/// A heartbeat that reached the coordinator voids the unreached lease of
/// the answers before it. A member told to revoke that then goes silent is
/// fenced at the usual time (an expansion timeout and an interval after it
/// was told), not after an earlier answer's grace.
#[test]
fn a_member_told_to_revoke_is_fenced_on_time_despite_an_earlier_unreached_lease() {
    let mut h = Harness::new(4);
    h.core.set_unreached_grace_ms(GRACE_MS);
    let mut members = vec![h.join(None), h.join(None)];
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    let earlier_end = h.now + members[0].unreached_lease_ms;
    members.push(h.join(None));
    h.at(h.now + EXPANSION_MS);
    let told = h
        .send(Heartbeat {
            owned: Some(members[0].active.iter().cloned().collect()),
            ..request_from(&members[0])
        })
        .unwrap();
    assert_eq!(told.revoking.len(), 1, "{told:?}");
    let fence = h.now + members[0].unreached_flight_ms;
    assert!(
        fence + 1_000 < earlier_end,
        "the test needs the fence first"
    );
    // Silent from here; the others beat on. Not before the in-flight bound
    // the earlier answer gave: the member may count on it until then.
    h.advance(fence - 1, &mut members[1..]);
    assert!(h.is_member(&told.member_id));
    // Fenced at that bound; a departure being urgent, the two others get
    // the next target at once: member 1 keeps its tasks, the newcomer takes
    // the rest.
    let epoch = h.core.group(GROUP).unwrap().group_epoch;
    let mark = h.log.len();
    h.at(fence);
    let rest: BTreeSet<Task> = tasks(0..4)
        .difference(&members[1].active)
        .cloned()
        .collect();
    let staying = [
        (&Slot::dynamic(&members[1].member_id), &members[1].active),
        (&Slot::dynamic(&members[2].member_id), &rest),
    ];
    assert_eq!(
        h.records_since(mark),
        [
            removed(&Slot::dynamic(&told.member_id), RemovalReason::Fenced),
            bumped(epoch + 1),
            installed(epoch + 1, staying),
        ]
    );
    for member in &mut members[1..] {
        *member = h.beat(member);
    }
    let group = h.core.group(GROUP).unwrap();
    assert!(
        group.slot_of(&told.member_id).is_none(),
        "fenced at {fence}, before the earlier unreached lease ended at {earlier_end}"
    );
}
