//! One simulated member driven by hand: its lease counts from when it sent
//! the heartbeat, and once its lease passes it stops processing and says
//! so.

use std::collections::BTreeSet;

use super::{task, tasks};
use crate::protocol::core::{Heartbeat, HeartbeatResponse};
use crate::sim::member::SimMember;
use crate::sim::rng::Rng;

/// A simulated member after its join was answered at `sent_at` with
/// `active` and `lease_ms`.
fn member_holding(active: &[u32], sent_at: u64, lease_ms: u64) -> (SimMember, Rng) {
    let mut rng = Rng::new(7);
    let mut member = SimMember::new(0, None, ["t0".to_owned()].into(), sent_at);
    let join = beat(&mut member, sent_at);
    assert_eq!(join.member_epoch, 0, "{join:?}");
    member.on_response(&answer(active, &[], lease_ms), 0, sent_at, &mut rng);
    (member, rng)
}

/// `member`'s heartbeat, due at `now`.
fn beat(member: &mut SimMember, now: u64) -> Heartbeat {
    let configured = ["t0".to_owned()].into();
    member.request("g", &configured, now).expect("due")
}

/// An answer with a heartbeat interval of 200 ms.
fn answer(active: &[u32], revoking: &[u32], lease_ms: u64) -> HeartbeatResponse {
    HeartbeatResponse {
        member_id: "m1".into(),
        member_epoch: 3,
        heartbeat_interval_ms: 200,
        active: tasks(active),
        revoking: tasks(revoking),
        learner: BTreeSet::new(),
        standby: BTreeSet::new(),
        draining: false,
        drained: false,
        lease_ms,
        unreached_lease_ms: lease_ms,
        unreached_flight_ms: lease_ms,
        load_report: assignd_wire::LoadReport::None,
    }
}

#[test]
fn a_member_counts_its_lease_from_when_it_sent_the_heartbeat() {
    let (mut member, mut rng) = member_holding(&[0, 1], 1_000, 500);
    assert_eq!(member.lease_end_ms(), Some(1_500));
    // Sent at 1,200 (its interval after the join), answered (late) at
    // 1,300: the lease counts from 1,200.
    assert!((1_200..1_500).contains(&member.next_beat_ms));
    beat(&mut member, 1_200);
    member.on_response(&answer(&[0, 1], &[], 500), 0, 1_300, &mut rng);
    assert_eq!(member.lease_end_ms(), Some(1_700));
    // Sent at 1,400, its answer lost (learnt at its timeout, 1 s later):
    // the lease is not extended, and it wakes at its end.
    member.request_timeout_ms = 1_000;
    let beat = beat(&mut member, 1_400);
    assert_eq!(beat.owned.as_deref().map(<[_]>::len), Some(2));
    member.send_unanswered(1_400);
    assert_eq!(member.lease_end_ms(), Some(1_700));
    assert_eq!(member.next_beat_ms, 1_700);
    assert_eq!(member.belief().owns.len(), 2);
    assert!(member.wake_in_flight(1_700), "it stops processing there");
    assert!(member.belief().owns.is_empty());
}

#[test]
fn a_member_whose_lease_passed_stops_processing_and_says_so() {
    let (mut member, mut rng) = member_holding(&[0, 1], 1_000, 500);
    // Task 1 is revoked; the member takes long to stop it.
    member.release_delay_ms = (5_000, 5_000);
    beat(&mut member, 1_200);
    member.on_response(&answer(&[0], &[1], 500), 0, 1_200, &mut rng);
    assert_eq!(member.belief().owns, vec![&task(0), &task(1)]);
    // Stalled well past its lease; its first action after it:
    let beat_after = beat(&mut member, 4_000);
    assert_eq!(
        beat_after.owned,
        Some(Vec::new()),
        "it reports holding nothing"
    );
    assert_eq!(beat_after.member_id, "m1", "it keeps its member id");
    assert_eq!(beat_after.member_epoch, 3, "and its epoch");
    assert!(member.belief().owns.is_empty());
    // A newer answer gives tasks and a lease again.
    member.on_response(&answer(&[0], &[], 500), 0, 4_000, &mut rng);
    assert_eq!(member.lease_end_ms(), Some(4_500));
    assert_eq!(member.belief().owns, vec![&task(0)]);
    // An answer whose lease is over on arrival grants nothing, and the
    // member says so at once.
    beat(&mut member, 4_200);
    member.on_response(&answer(&[0], &[], 0), 0, 4_200, &mut rng);
    assert!(member.belief().owns.is_empty());
    assert_eq!(member.next_beat_ms, 4_201);
}
