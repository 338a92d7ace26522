//! Learners: the host's learner safety, max_learners, learners off, a
//! learner-aware assignor, probing, and a failed owner's tasks going to a
//! warm member.

use std::collections::BTreeSet;

use super::harness::*;
use super::records::{bumped, installed, installed_now};
use crate::protocol::core::{Heartbeat, LEAVE_EPOCH};
use crate::protocol::group::{GroupConfig, LearnerMode, Slot, Task};

#[test]
fn host_learner_safety_keeps_a_cold_move_on_its_owner_until_the_learner_catches_up() {
    // `sticky` knows nothing about lag; the host still never moves an
    // active task to a cold member.
    let mut h = Harness::with_config(learner_config(12, 10));
    let mut members = vec![h.join(None), h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    let before: Vec<BTreeSet<Task>> = members.iter().map(|m| m.active.clone()).collect();
    members.push(h.join(None));
    h.at(2_000);
    h.settle(&mut members);
    for (i, member) in members.iter().take(2).enumerate() {
        assert_eq!(member.active, before[i], "nothing moved to a cold member");
        assert!(member.revoking.is_empty());
    }
    assert!(members[2].active.is_empty());
    assert_eq!(
        members[2].learner.len(),
        4,
        "the newcomer warms up its share"
    );
    assert!(
        members[2]
            .learner
            .iter()
            .all(|t| before.iter().any(|b| b.contains(t)))
    );
    // Still far behind: nothing moves, and no new target is asked for.
    let mark = h.log.len();
    members[2] = h.beat_with_lags(&members[2].clone(), lags_of(&members[2], 5_000));
    h.settle(&mut members);
    assert_eq!(h.records_since(mark), [], "nothing is recorded");
    assert!(members[2].active.is_empty());
    // Caught up: a new target at once (no expansion wait, no probing
    // delay), and the owners are asked to release on their next heartbeat.
    let learning = members[2].learner.clone();
    let epoch = h.core.group(GROUP).unwrap().group_epoch;
    let mark = h.log.len();
    members[2] = h.beat_with_lags(&members[2].clone(), lags_of(&members[2], 0));
    let kept: Vec<BTreeSet<Task>> = before
        .iter()
        .map(|held| held.difference(&learning).cloned().collect())
        .collect();
    let target = [
        (&Slot::dynamic(&members[0].member_id), &kept[0]),
        (&Slot::dynamic(&members[1].member_id), &kept[1]),
        (&Slot::dynamic(&members[2].member_id), &learning),
    ];
    assert_eq!(
        h.records_since(mark),
        [bumped(epoch + 1), installed(epoch + 1, target)],
        "the catch-up re-asks at once: the warm tasks move to the learner"
    );
    let revoked: BTreeSet<Task> = members
        .iter_mut()
        .take(2)
        .flat_map(|m| {
            *m = h.beat(m);
            m.revoking.clone()
        })
        .collect();
    assert_eq!(revoked, learning, "exactly the warm tasks move");
    h.settle(&mut members);
    assert_eq!(members[2].active, learning);
    assert!(members[2].learner.is_empty(), "a promoted learner is done");
    assert_eq!(all_active(&members), tasks(0..12));
    assert!(h.core.group(GROUP).unwrap().is_stable());
}

#[test]
fn max_learners_caps_the_warmups_and_the_rest_follow_as_they_catch_up() {
    let mut h = Harness::with_config(learner_config(12, 2));
    let mut members = vec![h.join(None), h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    members.push(h.join(None));
    h.at(2_000);
    h.settle(&mut members);
    assert_eq!(members[2].learner.len(), 2, "at most max_learners at once");
    let mut promoted = BTreeSet::new();
    for round in 0..6 {
        let learning = members[2].learner.clone();
        if learning.is_empty() {
            break;
        }
        assert!(learning.len() <= 2, "round {round}: {learning:?}");
        members[2] = h.beat_with_lags(&members[2].clone(), lags_of(&members[2], 0));
        h.settle(&mut members);
        assert!(learning.is_subset(&members[2].active), "round {round}");
        promoted.extend(learning);
    }
    assert_eq!(promoted.len(), 4);
    assert_eq!(members[2].active, promoted);
    assert_eq!(all_active(&members), tasks(0..12));
}

#[test]
fn with_learners_off_a_task_moves_as_soon_as_it_is_released() {
    let mut h = Harness::with_config(GroupConfig {
        learners: LearnerMode::Off,
        ..learner_config(12, 10)
    });
    let mut members = vec![h.join(None), h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    members.push(h.join(None));
    h.at(2_000);
    h.settle(&mut members);
    assert_eq!(members[2].active.len(), 4);
    assert!(members.iter().all(|m| m.learner.is_empty()));
}

#[test]
fn a_learner_aware_assignor_places_its_own_learners() {
    let mut h = Harness::with_config(GroupConfig {
        assignor: "learner-aware".into(),
        learners: LearnerMode::Assignor,
        ..learner_config(12, 10)
    });
    let mut members = vec![h.join(None), h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    let before = all_active(&members[..2]);
    members.push(h.join(None));
    h.at(2_000);
    h.settle(&mut members);
    assert!(
        !members[2].learner.is_empty(),
        "the assignor placed learners"
    );
    assert_eq!(all_active(&members[..2]), before, "nothing moved cold");
    // Its learners report caught up: the assignor moves them.
    members[2] = h.beat_with_lags(&members[2].clone(), lags_of(&members[2], 0));
    h.settle(&mut members);
    assert!(!members[2].active.is_empty());
    assert_eq!(all_active(&members), tasks(0..12));
}

#[test]
fn the_probing_interval_re_asks_the_assignor_while_learners_exist() {
    let mut h = Harness::with_config(GroupConfig {
        probing_interval_ms: 10_000,
        ..learner_config(12, 10)
    });
    let mut members = vec![h.join(None), h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    members.push(h.join(None));
    h.advance(2_000, &mut members);
    assert!(!members[2].learner.is_empty());
    let targets = h.installed_targets();
    h.advance(11_000, &mut members);
    assert_eq!(
        h.installed_targets(),
        targets,
        "no probe before the interval"
    );
    // The probe: the tick at the interval asks the assignor again.
    let epoch = h.core.group(GROUP).unwrap().group_epoch;
    let mark = h.log.len();
    h.at(12_000);
    assert_eq!(
        h.records_since(mark),
        [bumped(epoch + 1), installed_now(&h, epoch + 1)],
        "one probe"
    );
    for member in &mut members {
        *member = h.beat(member);
    }
    let targets = h.installed_targets();
    h.advance(13_000, &mut members);
    assert_eq!(h.installed_targets(), targets, "only one");
}

#[test]
fn a_failed_owners_tasks_go_to_a_member_already_caught_up_on_them() {
    let mut h = Harness::with_config(learner_config(12, 10));
    let mut members = vec![h.join(None), h.join(None), h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    // Member 2 keeps warm copies of member 0's tasks (as a standby would).
    let failing = members[0].active.clone();
    let warm: Vec<(Task, u64)> = failing.iter().map(|t| (t.clone(), 0)).collect();
    members[2] = h.beat_with_lags(&members[2].clone(), warm);
    h.send(Heartbeat {
        member_epoch: LEAVE_EPOCH,
        ..request_from(&members[0])
    })
    .unwrap();
    members.remove(0);
    h.advance(h.now + 2 * EXPANSION_MS, &mut members);
    h.settle(&mut members);
    assert!(
        failing.is_subset(&members[1].active),
        "every task of the failed owner went to the warm member"
    );
    assert_eq!(all_active(&members), tasks(0..12));
    // The member the assignor preferred warms up, and balance returns once
    // it catches up.
    assert!(!members[0].learner.is_empty());
    members[0] = h.beat_with_lags(&members[0].clone(), lags_of(&members[0], 0));
    h.settle(&mut members);
    assert_eq!(members[0].active.len(), 6);
    assert_eq!(members[1].active.len(), 6);
}
