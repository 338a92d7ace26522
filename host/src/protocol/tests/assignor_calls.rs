//! Assignor calls: stale answers discarded, failures kept on the last good
//! target and retried with backoff, a fallback answering for a failing
//! assignor, an answer that never comes back, and the pace of catch-up calls
//! after a big target.

use assignor_sticky::Sticky;

use super::harness::*;
use super::records::{bumped, installed_now, removed};
use crate::protocol::core::{Coordinator, Heartbeat, LEAVE_EPOCH};
use crate::protocol::group::{AssignorFailure, GroupConfig, Record, RemovalReason, Slot};
use crate::sim::assign_natively;

#[test]
fn an_answer_for_an_old_epoch_is_discarded() {
    let mut h = Harness::new(4);
    let _a = h.join(None);
    let out = h.core.tick(1_000);
    assert_eq!(out.assignor_calls.len(), 1);
    let call = out.assignor_calls[0].clone();
    h.log.extend(out.records);
    // Another member arrives while the call runs.
    h.now = 1_100;
    let _b = h.join(None);
    let answer = assignd_guest_sdk::harness::run::<Sticky>(&call.input).map_err(|e| e.to_string());
    let out = h.core.assignment_computed(GROUP, call.epoch, answer, 1_200);
    assert_eq!(
        out.records,
        Vec::<Record>::new(),
        "the group moved on: no stale target"
    );
    h.absorb(out);
    h.at(2_200);
    let group = h.core.group(GROUP).unwrap();
    assert_eq!(
        group.target_epoch, group.group_epoch,
        "a fresh target follows"
    );
    assert_eq!(group.target.len(), 2);
}

#[test]
fn a_member_one_epoch_behind_is_accepted_and_a_failed_assignor_is_retried() {
    let mut h = Harness::new(4);
    let mut members = vec![h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    let lost = members[0].clone();
    members.push(h.join(None));
    h.advance(2_000, &mut members[1..]);
    members[0] = h.beat(&members[0]);
    h.settle(&mut members);
    assert!(members[0].member_epoch > lost.member_epoch);
    // A response lost: the member sends its previous epoch, and is served.
    let again = h.send(Heartbeat {
        owned: Some(members[0].active.iter().cloned().collect()),
        lags: None,
        drain: false,
        ..request_from(&lost)
    });
    assert!(again.is_ok(), "{again:?}");

    // An assignor failure keeps the last target and is retried.
    let target_before = h.core.group(GROUP).unwrap().target.clone();
    let mut third = vec![h.join(None)];
    let now = h.now;
    let out = h.core.tick(now + EXPANSION_MS);
    h.now = now + EXPANSION_MS;
    assert_eq!(out.assignor_calls.len(), 1);
    let call = &out.assignor_calls[0];
    h.log.extend(out.records.clone());
    let failed = h.core.assignment_computed(
        GROUP,
        call.epoch,
        Err(AssignorFailure::new("trap", "guest trapped")),
        h.now,
    );
    assert!(failed.records.is_empty());
    let failures = h.core.liveness(GROUP).unwrap().failures.clone().unwrap();
    assert_eq!(
        (failures.code.as_str(), failures.message.as_str()),
        ("trap", "guest trapped")
    );
    assert_eq!((failures.consecutive, failures.total), (1, 1));
    assert_eq!(failures.at_ms, h.now);
    assert_eq!(
        h.core.group(GROUP).unwrap().target,
        target_before,
        "last good target kept"
    );
    h.advance(h.now + EXPANSION_MS, &mut third);
    let group = h.core.group(GROUP).unwrap();
    assert_eq!(
        group.target_epoch, group.group_epoch,
        "retried and installed"
    );
    let failures = h.core.liveness(GROUP).unwrap().failures.clone().unwrap();
    assert_eq!((failures.consecutive, failures.total), (0, 1), "cleared");
    assert!(failures.last_success_ms.is_some());
}

#[test]
fn a_fallback_answers_for_a_failing_assignor_and_the_failure_still_shows() {
    let mut h = Harness::with_config(GroupConfig {
        fallback_assignor: Some("range".into()),
        ..config(6)
    });
    let mut members = vec![h.join(None)];
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    let mut more = vec![h.join(None)];
    let out = h.core.tick(h.now + EXPANSION_MS);
    h.now += EXPANSION_MS;
    let [call] = &out.assignor_calls[..] else {
        panic!("one call: {:?}", out.assignor_calls)
    };
    assert_eq!(
        (call.assignor.as_str(), call.fallback.as_deref()),
        ("sticky", Some("range")),
        "the call names the fallback"
    );
    h.log.extend(out.records.clone());
    let answer = assignd_guest_sdk::harness::run::<assignor_range::Range>(&call.input)
        .map_err(|e| e.to_string());
    let installed = h.core.fallback_computed(
        GROUP,
        call.epoch,
        AssignorFailure::new("out_of_fuel", "ran out of fuel"),
        answer,
        h.now,
    );
    let records = installed.records.clone();
    h.absorb(installed);
    // Exactly the fallback's target, installed at the call's epoch.
    let target = h.core.group(GROUP).unwrap().target.clone();
    let expected = Record::TargetInstalled {
        group: GROUP.into(),
        epoch: call.epoch,
        target,
    };
    assert_eq!(records, [expected]);
    let failures = h.core.liveness(GROUP).unwrap().failures.clone().unwrap();
    assert_eq!(
        (
            failures.module.as_str(),
            failures.code.as_str(),
            failures.consecutive,
            failures.fallback.as_deref(),
            failures.served_by_fallback,
            failures.fallback_answers,
        ),
        ("sticky", "out_of_fuel", 1, Some("range"), true, 1)
    );
    members.append(&mut more);
    h.settle(&mut members);
    assert_eq!(all_active(&members), tasks(0..6));

    // The fallback failing too keeps the last target and shows both.
    let mut third = vec![h.join(None)];
    let out = h.core.tick(h.now + EXPANSION_MS);
    h.now += EXPANSION_MS;
    h.log.extend(out.records.clone());
    let target_before = h.core.group(GROUP).unwrap().target.clone();
    let failed = h.core.fallback_computed(
        GROUP,
        out.assignor_calls[0].epoch,
        AssignorFailure::new("trap", "guest trapped"),
        Err(AssignorFailure::new("invalid_assignment", "task twice")),
        h.now,
    );
    assert!(failed.records.is_empty());
    assert_eq!(h.core.group(GROUP).unwrap().target, target_before);
    let failures = h.core.liveness(GROUP).unwrap().failures.clone().unwrap();
    assert_eq!((failures.consecutive, failures.total), (2, 2));
    assert!(!failures.served_by_fallback);
    assert_eq!(
        failures.fallback_error.as_deref(),
        Some("invalid_assignment: task twice")
    );
    // The bound assignor answering again clears the run of failures.
    members.append(&mut third);
    h.advance(h.now + 4 * EXPANSION_MS, &mut members);
    h.settle(&mut members);
    let failures = h.core.liveness(GROUP).unwrap().failures.clone().unwrap();
    assert_eq!((failures.consecutive, failures.total), (0, 2));
    assert!(!failures.served_by_fallback);
    assert_eq!(all_active(&members), tasks(0..6));
}

#[test]
fn a_failing_assignor_is_retried_with_backoff_capped() {
    use crate::protocol::group::{ASSIGNOR_RETRY_MS_MAX, assignor_retry_ms};
    assert_eq!(assignor_retry_ms(100, 1), 100);
    assert_eq!(assignor_retry_ms(100, 2), 200);
    assert_eq!(assignor_retry_ms(100, 4), 800);
    assert_eq!(assignor_retry_ms(100, 64), ASSIGNOR_RETRY_MS_MAX);
    assert_eq!(assignor_retry_ms(0, 5), 0);
}

/// An assignor call whose answer the runtime cannot deliver (the shard
/// is not served for a moment when it comes back) must not leave the
/// group waiting for a target for ever: the core asks again once the
/// answer is overdue (`ANSWER_WAIT_MS_MIN`, or twice the binding's time
/// limit).
#[test]
fn an_assignor_call_whose_answer_never_comes_back_is_asked_again() {
    use crate::protocol::group::ANSWER_WAIT_MS_MIN;
    let mut core = Coordinator::new(7);
    let patient = GroupConfig {
        session_timeout_ms: 10 * ANSWER_WAIT_MS_MIN,
        ..config(4)
    };
    core.configure(GROUP, patient, 0).unwrap();
    let (_, out) = core
        .heartbeat(&Heartbeat::join(GROUP, None, vec!["orders".into()]), 0)
        .unwrap();
    assert!(out.assignor_calls.is_empty(), "the batch waits first");
    let first = core.tick(EXPANSION_MS);
    assert_eq!(first.assignor_calls.len(), 1);
    let epoch = first.assignor_calls[0].epoch;
    // Its answer is lost: nothing is asked until it is overdue.
    let due = EXPANSION_MS + ANSWER_WAIT_MS_MIN;
    assert_eq!(core.poll_timeout(), Some(due));
    assert!(core.tick(due - 1).assignor_calls.is_empty());
    core.check_deadlines().unwrap();
    let again = core.tick(due);
    assert_eq!(again.assignor_calls.len(), 1, "asked again");
    assert_eq!(again.assignor_calls[0].epoch, epoch);
    // Its answer installs a target; a late answer to the first is dropped.
    let call = &again.assignor_calls[0];
    let out = core.assignment_computed(
        GROUP,
        call.epoch,
        assign_natively(&call.assignor, &call.input),
        due + 1,
    );
    let group = core.group(GROUP).unwrap();
    let expected = Record::TargetInstalled {
        group: GROUP.into(),
        epoch,
        target: group.target.clone(),
    };
    assert_eq!(out.records, [expected]);
    assert_eq!(group.group_epoch, group.target_epoch);
    core.check_deadlines().unwrap();
}

/// A failure whose call the group has moved past (a member joined while a
/// slow guest ran to its time limit) still shows, and counts for the retry
/// backoff: dropped with the stale answer, a guest that fails slower than
/// its group changes would never show failing and would be asked again at
/// once.
#[test]
fn a_failure_that_comes_back_after_the_group_moved_on_still_shows_and_backs_off() {
    let mut h = Harness::new(4);
    let mut members = vec![h.join(None)];
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    let _second = h.join(None);
    let out = h.core.tick(h.now + EXPANSION_MS);
    h.now += EXPANSION_MS;
    let [call] = &out.assignor_calls[..] else {
        panic!("one call: {:?}", out.assignor_calls)
    };
    let (stale_epoch, group_epoch_before) = (call.epoch, h.core.group(GROUP).unwrap().group_epoch);
    h.log.extend(out.records.clone());
    // The group moves on while the guest runs.
    let _third = h.join(None);
    assert!(h.core.group(GROUP).unwrap().group_epoch > group_epoch_before);
    let failed = h.core.assignment_computed(
        GROUP,
        stale_epoch,
        Err(AssignorFailure::new("timeout", "ran past its time limit")),
        h.now,
    );
    assert!(failed.assignor_calls.is_empty(), "not asked again at once");
    let failures = h.core.liveness(GROUP).unwrap().failures.clone().unwrap();
    assert_eq!(
        (failures.code.as_str(), failures.consecutive),
        ("timeout", 1)
    );
}

/// A learner's catch-up asks for a new target, but a group's next call
/// waits for the pace of its last install (one ms per
/// `TARGET_ROWS_PER_PACE_MS` rows of it): a guest whose every answer moves
/// many tasks, a few warming up at a time, is asked again only that often.
#[test]
fn a_catch_up_after_a_big_target_waits_for_its_pace() {
    use crate::protocol::core::TARGET_ROWS_PER_PACE_MS;
    const PARTITIONS: u32 = 12_000;
    let mut h = Harness::with_config(learner_config(PARTITIONS, 2));
    let mut members = vec![h.join(None), h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    members.push(h.join(None));
    h.at(2_000);
    h.settle(&mut members);
    assert_eq!(members[2].learner.len(), 2);
    let installed_at = h.now;
    let pace_ms = (u64::from(PARTITIONS) + 2) / TARGET_ROWS_PER_PACE_MS;
    assert!(pace_ms > 100, "a pace the steps below can see");
    let learning = members[2].learner.clone();
    let epoch = h.core.group(GROUP).unwrap().group_epoch;
    let mark = h.log.len();
    members[2] = h.beat_with_lags(&members[2].clone(), lags_of(&members[2], 0));
    assert_eq!(
        h.records_since(mark),
        [bumped(epoch + 1)],
        "asked for, not installed at once"
    );
    let mark = h.log.len();
    h.at(installed_at + pace_ms - 1);
    assert_eq!(h.records_since(mark), [], "not before the pace");
    let mark = h.log.len();
    h.at(installed_at + pace_ms);
    assert_eq!(
        h.records_since(mark),
        [installed_now(&h, epoch + 1)],
        "at the pace"
    );
    h.settle(&mut members);
    assert!(learning.is_subset(&members[2].active));
}

/// The pace holds back catch-ups only: a member leaving while a paced
/// batch waits has its tasks placed at once.
#[test]
fn a_departure_is_not_held_back_by_the_pace() {
    const PARTITIONS: u32 = 12_000;
    let mut h = Harness::with_config(learner_config(PARTITIONS, 2));
    let mut members = vec![h.join(None), h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    members.push(h.join(None));
    h.at(2_000);
    h.settle(&mut members);
    let epoch = h.core.group(GROUP).unwrap().group_epoch;
    let mark = h.log.len();
    members[2] = h.beat_with_lags(&members[2].clone(), lags_of(&members[2], 0));
    assert_eq!(
        h.records_since(mark),
        [bumped(epoch + 1)],
        "the catch-up waits"
    );
    let mark = h.log.len();
    h.send(Heartbeat {
        member_epoch: LEAVE_EPOCH,
        ..request_from(&members[0])
    })
    .unwrap();
    let left = Slot::dynamic(&members[0].member_id);
    assert_eq!(
        h.records_since(mark),
        [
            removed(&left, RemovalReason::Left),
            bumped(epoch + 2),
            installed_now(&h, epoch + 2),
        ],
        "the departure does not"
    );
}
