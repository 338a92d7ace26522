//! Departures: a silent member expires, a slow releaser is fenced, a
//! departure asks for the next target at once, and a late host does not
//! expire members for its own lateness.

use super::harness::*;
use super::records::{bumped, installed, removed};
use crate::protocol::core::{Heartbeat, LEAVE_EPOCH};
use crate::protocol::group::{RemovalReason, Slot};

#[test]
fn a_silent_dynamic_member_expires_and_a_slow_releaser_is_fenced() {
    let mut h = Harness::new(4);
    let mut members = vec![h.join(None), h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    // Member 1 goes silent; member 0 keeps heartbeating.
    h.advance(1_000 + SESSION_MS - 1, &mut members[..1]);
    assert_eq!(h.core.group(GROUP).unwrap().members.len(), 2, "not yet");
    // The tick past its session removes it, and, a departure being urgent,
    // member 0 is given every task at once.
    let epoch = h.core.group(GROUP).unwrap().group_epoch;
    let mark = h.log.len();
    h.at(1_999 + SESSION_MS);
    let silent = Slot::dynamic(&members[1].member_id);
    let every_task = tasks(0..4);
    let staying = [(&Slot::dynamic(&members[0].member_id), &every_task)];
    assert_eq!(
        h.records_since(mark),
        [
            removed(&silent, RemovalReason::Expired),
            bumped(epoch + 1),
            installed(epoch + 1, staying),
        ]
    );
    members[0] = h.beat(&members[0]);
    h.advance(2_000 + SESSION_MS + EXPANSION_MS, &mut members[..1]);
    h.settle(&mut members[..1]);
    assert_eq!(members[0].active, tasks(0..4));

    // A newcomer makes member 0 release half; member 0 never reports the
    // release, and is fenced after the expansion timeout.
    let t = h.now;
    let mut newcomer = vec![h.join(None)];
    h.advance(t + EXPANSION_MS, &mut newcomer);
    let asked = h
        .send(Heartbeat {
            owned: Some(members[0].active.iter().cloned().collect()),
            lags: None,
            drain: false,
            ..request_from(&members[0])
        })
        .unwrap();
    assert_eq!(asked.revoking.len(), 2);
    h.advance(t + 2 * EXPANSION_MS, &mut newcomer);
    // Held past the expansion timeout: the next tick fences it, and the
    // newcomer is given every task at once.
    let epoch = h.core.group(GROUP).unwrap().group_epoch;
    let mark = h.log.len();
    h.at(t + 3 * EXPANSION_MS);
    let slow = Slot::dynamic(&members[0].member_id);
    let staying = [(&Slot::dynamic(&newcomer[0].member_id), &every_task)];
    assert_eq!(
        h.records_since(mark),
        [
            removed(&slow, RemovalReason::Fenced),
            bumped(epoch + 1),
            installed(epoch + 1, staying),
        ]
    );
    newcomer[0] = h.beat(&newcomer[0]);
    h.advance(t + 5 * EXPANSION_MS, &mut newcomer);
    h.settle(&mut newcomer);
    assert_eq!(newcomer[0].active, tasks(0..4));
}

/// The expansion timeout batches arrivals only: a departure (a leave, an
/// expiry) asks for the next target at once, so the departed member's
/// tasks have an owner again on the next heartbeat of those who stay.
#[test]
fn a_departure_starts_the_next_target_at_once() {
    let mut h = Harness::new(4);
    let mut members = vec![h.join(None), h.join(None), h.join(None)];
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    assert_eq!(all_active(&members), tasks(0..4));

    // A leave: the one who stays gets everything at the same instant.
    let left = members.pop().unwrap();
    h.send(Heartbeat {
        member_epoch: LEAVE_EPOCH,
        ..request_from(&left)
    })
    .unwrap();
    h.settle(&mut members);
    assert_eq!(
        all_active(&members),
        tasks(0..4),
        "the leaver's tasks are granted before any expansion timeout passed"
    );

    // An expiry: member 1 goes silent; at the tick that removes it the
    // target is computed, and member 0's next beat gets its tasks.
    let silent_since = h.now;
    let epoch = h.core.group(GROUP).unwrap().group_epoch;
    let mut alive = vec![members[0].clone()];
    let mut t = silent_since;
    let mut last_tick = Vec::new();
    while h.core.group(GROUP).unwrap().members.len() == 2 {
        t += 100;
        let mark = h.log.len();
        h.at(t);
        last_tick = h.records_since(mark).to_vec();
        alive[0] = h.beat(&alive[0]);
        assert!(t < silent_since + 2 * SESSION_MS, "never expired");
    }
    let every_task = tasks(0..4);
    let staying = [(&Slot::dynamic(&alive[0].member_id), &every_task)];
    assert_eq!(
        last_tick,
        [
            removed(
                &Slot::dynamic(&members[1].member_id),
                RemovalReason::Expired
            ),
            bumped(epoch + 1),
            installed(epoch + 1, staying),
        ],
        "the tick that removes it installs the next target"
    );
    alive[0] = h.beat(&alive[0]);
    h.settle(&mut alive);
    assert_eq!(
        alive[0].active,
        tasks(0..4),
        "granted at the expiry's own instant"
    );
}

#[test]
fn a_member_is_not_expired_for_the_time_the_host_itself_was_late() {
    use crate::protocol::core::HostLoad;
    let mut h = Harness::new(4);
    let mut members = vec![h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    // The host stalls past the member's session timeout: the member's
    // heartbeats of that time wait in the queue. The tick at the end of
    // the stall knows how late it is and expires nobody.
    let stall_end = h.now + SESSION_MS + 5_000;
    h.now = stall_end;
    let late = HostLoad {
        late_ms: SESSION_MS + 5_000,
    };
    let out = h.core.tick_loaded(stall_end, late);
    assert!(out.records.is_empty(), "{:?}", out.records);
    h.absorb(out);
    // Its queued heartbeat is served next: the member is still in the
    // group, with its tasks, and is told to beat less often, within its
    // lease and well within its session timeout.
    let (answer, out) = h
        .core
        .heartbeat_loaded(
            &Heartbeat {
                owned: Some(members[0].active.iter().cloned().collect()),
                ..request_from(&members[0])
            },
            stall_end,
            HostLoad { late_ms: 1_000 },
        )
        .unwrap();
    h.absorb(out);
    assert_eq!(answer.active, tasks(0..4));
    assert_eq!(answer.heartbeat_interval_ms, 2_000);
    assert!(answer.lease_ms > answer.heartbeat_interval_ms, "{answer:?}");
    let capped = h
        .core
        .heartbeat_loaded(
            &request_from(&answer),
            stall_end,
            HostLoad { late_ms: 60_000 },
        )
        .unwrap()
        .0;
    assert_eq!(capped.heartbeat_interval_ms, SESSION_MS / 4);
    assert!(capped.lease_ms > capped.heartbeat_interval_ms, "{capped:?}");
    // A member that really went silent still expires: the lateness is
    // taken off its silence, not forgiven for ever.
    h.now = stall_end + SESSION_MS + 1_000;
    let out = h.core.tick_loaded(h.now, HostLoad { late_ms: 1_000 });
    h.absorb(out);
    assert!(h.core.group(GROUP).unwrap().members.is_empty());
}

/// A dynamic member's leave removes it and bumps the group epoch, and, a
/// departure being urgent, the next target is installed at once.
#[test]
fn a_leave_emits_exactly_the_removal_the_bump_and_the_next_target() {
    let mut h = Harness::new(4);
    let mut members = vec![h.join(None), h.join(None)];
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    let epoch = h.core.group(GROUP).unwrap().group_epoch;
    let (leaving, staying) = (&members[0], &members[1]);
    let mark = h.log.len();
    h.send(Heartbeat {
        member_epoch: LEAVE_EPOCH,
        ..request_from(leaving)
    })
    .unwrap();
    let every_task = tasks(0..4);
    assert_eq!(
        h.records_since(mark),
        [
            removed(&Slot::dynamic(&leaving.member_id), RemovalReason::Left),
            bumped(epoch + 1),
            installed(
                epoch + 1,
                [(&Slot::dynamic(&staying.member_id), &every_task)]
            ),
        ]
    );
}
