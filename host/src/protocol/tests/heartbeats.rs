//! Heartbeat intervals: faster in a handoff and while a target is due, and
//! configs whose interval a silent member could not keep refused.

use super::harness::*;
use crate::protocol::core::{Heartbeat, HeartbeatResponse};
use crate::protocol::group::{GroupConfig, LearnerMode};

#[test]
fn members_in_a_handoff_are_asked_to_beat_faster_until_it_is_done() {
    use crate::protocol::core::HANDOFF_HEARTBEAT_INTERVAL_MS;
    let mut h = Harness::with_config(GroupConfig {
        learners: LearnerMode::Off,
        ..config(6)
    });
    let interval = h.core.group(GROUP).unwrap().config.heartbeat_interval_ms;
    assert!(interval > HANDOFF_HEARTBEAT_INTERVAL_MS);
    let mut members = vec![h.join(None), h.join(None)];
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    assert!(members.iter().all(|m| m.heartbeat_interval_ms == interval));
    // A third member: tasks move to it from the other two.
    members.push(h.join(None));
    h.at(2 * EXPANSION_MS);
    // It waits for releases; the others have tasks to release.
    members[2] = h.beat(&members[2]);
    assert!(members[2].active.is_empty() && !members[2].learner.is_empty());
    assert_eq!(
        members[2].heartbeat_interval_ms,
        HANDOFF_HEARTBEAT_INTERVAL_MS
    );
    for member in members.iter_mut().take(2) {
        *member = h.beat(member);
        assert!(!member.revoking.is_empty());
        assert_eq!(member.heartbeat_interval_ms, HANDOFF_HEARTBEAT_INTERVAL_MS);
    }
    // Once every task is where the target puts it, back to the group's.
    h.settle(&mut members);
    assert_eq!(all_active(&members), tasks(0..6));
    assert!(members.iter().all(|m| m.active.len() == 2));
    assert!(
        members.iter().all(|m| m.heartbeat_interval_ms == interval),
        "{:?}",
        members
            .iter()
            .map(|m| m.heartbeat_interval_ms)
            .collect::<Vec<_>>()
    );
}

/// A registration timeout below the heartbeat interval would make every
/// static member expire between two heartbeats and rejoin, bumping the
/// group for ever: such a config is refused, like a session timeout at or
/// below the interval.
#[test]
fn a_heartbeat_interval_must_be_below_both_timeouts_of_a_silent_member() {
    let mut h = Harness::new(2);
    let valid = h.core.group(GROUP).unwrap().config.clone();
    for (session_timeout_ms, registration_timeout_ms) in [(1_000, 30_000), (10_000, 1_000)] {
        let refused = h.core.configure(
            GROUP,
            GroupConfig {
                session_timeout_ms,
                registration_timeout_ms,
                ..valid.clone()
            },
            h.now,
        );
        assert_eq!(
            refused.unwrap_err().code(),
            "invalid_request",
            "session {session_timeout_ms} registration {registration_timeout_ms}"
        );
    }
    assert_eq!(h.core.group(GROUP).unwrap().config, valid);
    h.configure(GroupConfig {
        registration_timeout_ms: 1_001,
        ..valid
    });
}

/// While a new target is on its way, every member is asked to beat again
/// when it is due, so that revocations, grants and learners are heard when
/// the target is installed rather than up to a heartbeat interval later.
#[test]
fn members_beat_again_when_a_coming_target_is_due() {
    use crate::protocol::core::HANDOFF_HEARTBEAT_INTERVAL_MS;
    let mut h = Harness::with_config(GroupConfig {
        heartbeat_interval_ms: 5_000,
        ..config(6)
    });
    let mut members = vec![h.join(None), h.join(None)];
    assert!(
        members
            .iter()
            .all(|m| m.heartbeat_interval_ms <= EXPANSION_MS)
    );
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    assert!(members.iter().all(|m| m.heartbeat_interval_ms == 5_000));
    // A newcomer at 10 s: the batch closes an expansion timeout later.
    h.at(10_000);
    let newcomer = h.join(None);
    assert_eq!(newcomer.heartbeat_interval_ms, EXPANSION_MS);
    h.at(10_400);
    let old = h.beat(&members[0]);
    assert_eq!(old.heartbeat_interval_ms, EXPANSION_MS - 400);
    assert!(old.revoking.is_empty(), "no target yet");
    // At the due time, before any tick: this beat starts the assignor
    // call, and its answer asks for the next beat soon (never sooner than
    // the handoff interval); the next one hears the revocation.
    h.now = 10_000 + EXPANSION_MS;
    let computing = h.beat(&old);
    assert!(computing.revoking.is_empty(), "{computing:?}");
    assert_eq!(
        computing.heartbeat_interval_ms,
        HANDOFF_HEARTBEAT_INTERVAL_MS
    );
    let told = h.beat(&computing);
    assert!(!told.revoking.is_empty(), "{told:?}");
    assert_eq!(told.heartbeat_interval_ms, HANDOFF_HEARTBEAT_INTERVAL_MS);

    // A slow assignor: while its call runs, a member is asked back after
    // as long again as the call has taken, not every 100 ms.
    let mut h = Harness::with_config(GroupConfig {
        heartbeat_interval_ms: 5_000,
        ..config(6)
    });
    let first = h.join(None);
    let request = |last: &HeartbeatResponse| Heartbeat {
        owned: Some(Vec::new()),
        ..request_from(last)
    };
    let (_, out) = h.core.heartbeat(&request(&first), EXPANSION_MS).unwrap();
    assert_eq!(out.assignor_calls.len(), 1, "the call starts, unanswered");
    let (waiting, _) = h
        .core
        .heartbeat(&request(&first), EXPANSION_MS + 1_500)
        .unwrap();
    assert_eq!(waiting.heartbeat_interval_ms, 1_500);
    let (waiting, _) = h
        .core
        .heartbeat(&request(&first), EXPANSION_MS + 4_000)
        .unwrap();
    assert_eq!(waiting.heartbeat_interval_ms, 4_000);
}
