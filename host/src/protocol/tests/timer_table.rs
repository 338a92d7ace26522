//! The timer table: what each kind of deadline is for, that a tick visits
//! only the groups due, and that idle groups cost nothing between their
//! deadlines.

use super::harness::*;
use crate::protocol::core::Output;
use crate::protocol::core::{Coordinator, Heartbeat, HeartbeatResponse, HostLoad, TimerKind};
use crate::protocol::group::{GroupConfig, Millis, Record, RemovalReason, Slot};
use crate::sim::assign_natively;

fn count(core: &mut Coordinator, kind: TimerKind) -> usize {
    core.timers_by_kind()
        .into_iter()
        .find(|(k, _)| *k == kind)
        .map_or(0, |(_, n)| n)
}

/// `groups` groups of `members` settled dynamic members each, every
/// member's last heartbeat at `settled_at`, with each member's group
/// and last answer.
fn settled_groups(
    groups: usize,
    members: usize,
) -> (Coordinator, Millis, Vec<(String, HeartbeatResponse)>) {
    let mut core = Coordinator::new(3);
    let mut beats: Vec<(String, HeartbeatResponse)> = Vec::new();
    let mut now = 0;
    for g in 0..groups {
        let name = format!("g{g}");
        core.configure(&name, config(4), now).unwrap();
        for _ in 0..members {
            let join = Heartbeat::join(&name, None, vec!["orders".into()]);
            beats.push((name.clone(), core.heartbeat(&join, now).unwrap().0));
        }
    }
    let answer = |core: &mut Coordinator, out: Output, now| {
        let mut pending = out.assignor_calls;
        while let Some(call) = pending.pop() {
            let answer = assign_natively(&call.assignor, &call.input);
            let more = core.assignment_computed(&call.group, call.epoch, answer, now);
            pending.extend(more.assignor_calls);
        }
    };
    now += EXPANSION_MS;
    let out = core.tick(now);
    answer(&mut core, out, now);
    for _ in 0..4 {
        for (group, beat) in beats.iter_mut() {
            let request = Heartbeat {
                group: group.clone(),
                owned: Some(beat.active.iter().cloned().collect()),
                ..request_from(beat)
            };
            let (response, out) = core.heartbeat(&request, now).unwrap();
            answer(&mut core, out, now);
            *beat = response;
        }
    }
    for g in 0..groups {
        assert!(core.group(&format!("g{g}")).unwrap().is_stable());
    }
    core.check_deadlines().unwrap();
    (core, now, beats)
}

/// What a tick at which every member of every group expires emits: group
/// by group, each member's removal and the epoch bump that follows it.
fn every_member_expired(core: &Coordinator) -> Vec<Record> {
    let mut records = Vec::new();
    for group in core.groups() {
        for (epoch, slot) in (group.group_epoch + 1..).zip(group.members.keys()) {
            records.push(Record::MemberRemoved {
                group: group.name.clone(),
                slot: slot.clone(),
                reason: RemovalReason::Expired,
            });
            records.push(Record::GroupEpochBumped {
                group: group.name.clone(),
                epoch,
            });
        }
    }
    records
}

#[test]
fn idle_groups_are_not_visited_before_their_members_deadlines() {
    let (mut core, settled_at, _) = settled_groups(200, 3);
    assert_eq!(count(&mut core, TimerKind::Session), 600);
    assert_eq!(count(&mut core, TimerKind::Start), 0);
    let first = core.poll_timeout().expect("members have session timeouts");
    assert!(first > settled_at, "nothing is due right after settling");
    // Every tick before the earliest deadline visits no group and
    // changes nothing.
    for now in (settled_at..first).step_by(50) {
        let out = core.tick(now);
        assert_eq!(out, Output::default());
        assert_eq!(core.groups_ticked_last(), 0, "at {now}");
    }
    // The members' last heartbeat was at `settled_at`: they expire at
    // their session timeout (the tick visits every group then).
    assert_eq!(first, settled_at + SESSION_MS);
    let expired = every_member_expired(&core);
    assert_eq!(expired.len(), 2 * 600);
    let out = core.tick(first);
    assert_eq!(core.groups_ticked_last(), 200);
    assert_eq!(out.records, expired);
    core.check_deadlines().unwrap();
}

#[test]
fn a_heartbeat_moves_only_its_own_members_deadline() {
    let (mut core, settled_at, beats) = settled_groups(3, 2);
    let before = core.poll_timeout().unwrap();
    // Every member but one beats later: the earliest deadline is the
    // silent one's, and only its group is due then.
    let later = settled_at + 2_000;
    let (_, silent) = &beats[0];
    for (group, beat) in &beats[1..] {
        let request = Heartbeat {
            group: group.clone(),
            ..request_from(beat)
        };
        let (_, out) = core.heartbeat(&request, later).unwrap();
        assert!(out.records.is_empty(), "a steady heartbeat");
    }
    core.check_deadlines().unwrap();
    assert_eq!(core.poll_timeout(), Some(before), "the silent member's");
    let epoch = core.group("g0").unwrap().group_epoch;
    let out = core.tick(before);
    assert_eq!(core.groups_ticked_last(), 1, "only g0 is due");
    let silent_slot = Slot::dynamic(&silent.member_id);
    assert_eq!(
        out.records,
        [
            Record::MemberRemoved {
                group: "g0".into(),
                slot: silent_slot,
                reason: RemovalReason::Expired,
            },
            Record::GroupEpochBumped {
                group: "g0".into(),
                epoch: epoch + 1,
            },
        ]
    );
    assert!(
        !core
            .group("g0")
            .unwrap()
            .members
            .contains_key(silent.member_id.as_str())
    );
    // A departure asks for a target at once: the call's answer is an
    // input, not a deadline; the others are the beats' session timeouts.
    assert_eq!(out.assignor_calls.len(), 1);
    assert_eq!(core.poll_timeout(), Some(later + SESSION_MS));
}

#[test]
fn each_kind_of_deadline_is_kept_while_its_timer_runs() {
    // Each slot is timed by its earliest deadline: a drain shorter
    // than the session timeout shows as a drain.
    let mut h = Harness::with_config(GroupConfig {
        scale_down_timeout_ms: SESSION_MS / 2,
        ..config(4)
    });
    assert_eq!(
        count(&mut h.core, TimerKind::Start),
        1,
        "a new group's probing clock"
    );
    h.at(0);
    assert_eq!(count(&mut h.core, TimerKind::Start), 0);
    let a = h.join(Some("a"));
    assert_eq!(count(&mut h.core, TimerKind::Registration), 1);
    assert_eq!(
        count(&mut h.core, TimerKind::Expansion),
        1,
        "the join's batch"
    );
    let b = h.join(None);
    assert_eq!(count(&mut h.core, TimerKind::Session), 1);
    h.at(EXPANSION_MS);
    let mut members = vec![a, b];
    h.settle(&mut members);
    assert_eq!(count(&mut h.core, TimerKind::Expansion), 0);
    // A newcomer: the batch waits for its expansion timeout; then the
    // members asked to release are timed by the release fence.
    let c = h.join(None);
    assert_eq!(count(&mut h.core, TimerKind::Expansion), 1);
    h.at(h.now + EXPANSION_MS);
    members[0] = h.beat(&members[0]);
    assert!(
        !members[0].revoking.is_empty() || !members[1].revoking.is_empty() || {
            members[1] = h.beat(&members[1]);
            !members[1].revoking.is_empty()
        }
    );
    assert!(count(&mut h.core, TimerKind::ReleaseFence) >= 1);
    members.push(c);
    h.settle(&mut members);
    assert_eq!(count(&mut h.core, TimerKind::ReleaseFence), 0);
    // A drain is timed by the scale-down timeout.
    let out = h.core.drain(GROUP, &members[0].member_id, h.now).unwrap();
    h.absorb(out);
    assert_eq!(count(&mut h.core, TimerKind::Drain), 1);
}

#[test]
fn a_restarted_core_starts_every_timer_at_its_first_tick() {
    let (core, settled_at, _) = settled_groups(10, 2);
    let mut recovered = Coordinator::new(3);
    for group in core.groups() {
        recovered.apply(&Record::GroupSnapshot {
            group: group.name.clone(),
            state: Box::new(group.clone()),
        });
    }
    let restart_at = settled_at + 500;
    recovered.restarted(restart_at);
    recovered.check_deadlines().unwrap();
    assert_eq!(recovered.poll_timeout(), Some(0), "timers not started yet");
    let out = recovered.tick_loaded(restart_at, HostLoad::default());
    assert!(out.records.is_empty());
    assert_eq!(recovered.groups_ticked_last(), 10);
    // Every member holding tasks keeps the longest lease from the
    // restart; its silence is judged from when that lease ends.
    let lease_end = recovered.poll_timeout().unwrap();
    assert!(lease_end > restart_at);
    assert_eq!(count(&mut recovered, TimerKind::Lease), 20);
    assert_eq!(count(&mut recovered, TimerKind::Start), 0);
    recovered.tick(lease_end);
    assert_eq!(count(&mut recovered, TimerKind::Session), 20);
    assert_eq!(recovered.poll_timeout(), Some(lease_end + SESSION_MS));
}
