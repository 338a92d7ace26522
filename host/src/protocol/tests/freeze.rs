//! Freezing a group: while frozen, a joiner gets nothing and nothing moves
//! but the tasks of a member that leaves; new partitions are placed; the
//! target's learners stay as they are; unfreezing asks for a new target
//! (reason config) that gives the joiner its share. Every target's reason
//! shows on the group.

use std::collections::BTreeSet;

use super::harness::*;
use crate::protocol::core::{Heartbeat, LEAVE_EPOCH};
use crate::protocol::group::{GroupConfig, RebalanceReason, Slot, Task, TopicConfig};

fn frozen(config: GroupConfig) -> GroupConfig {
    GroupConfig {
        frozen: true,
        ..config
    }
}

fn last_reason(h: &Harness) -> RebalanceReason {
    let last = h.core.liveness(GROUP).unwrap().rebalances.last.unwrap();
    assert_eq!(last.epoch, h.core.group(GROUP).unwrap().target_epoch);
    last.reason
}

fn target_active(h: &Harness, member: &str) -> BTreeSet<Task> {
    h.core
        .group(GROUP)
        .unwrap()
        .target_of(&Slot::dynamic(member))
        .active
        .clone()
}

/// Two members settled on 8 tasks, then the group frozen.
fn frozen_pair() -> (Harness, Vec<crate::protocol::core::HeartbeatResponse>) {
    let mut h = Harness::new(8);
    let mut members = vec![h.join(None), h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    // The group's creation opened the batch the joins rode in.
    assert_eq!(last_reason(&h), RebalanceReason::Config);
    let epoch = h.core.group(GROUP).unwrap().group_epoch;
    h.configure(frozen(config(8)));
    assert_eq!(
        h.core.group(GROUP).unwrap().group_epoch,
        epoch,
        "freezing asks for no target"
    );
    (h, members)
}

#[test]
fn a_frozen_group_gives_a_joiner_nothing_until_it_is_unfrozen() {
    let (mut h, mut members) = frozen_pair();
    let before: Vec<BTreeSet<Task>> = members.iter().map(|m| m.active.clone()).collect();
    members.push(h.join(None));
    let epoch = h.core.group(GROUP).unwrap().group_epoch;
    h.advance(h.now + 2 * EXPANSION_MS, &mut members);
    assert_eq!(
        h.core.group(GROUP).unwrap().target_epoch,
        epoch,
        "the join was answered"
    );
    assert_eq!(last_reason(&h), RebalanceReason::Join);
    h.settle(&mut members);
    for (member, before) in members.iter().zip(&before) {
        assert_eq!(&member.active, before, "nothing moved");
        assert!(member.revoking.is_empty());
    }
    assert!(members[2].active.is_empty(), "the joiner got nothing");
    assert!(target_active(&h, &members[2].member_id).is_empty());

    // Unfrozen: a new target for the config change gives the joiner its
    // share.
    h.configure(config(8));
    h.advance(h.now + 2 * EXPANSION_MS, &mut members);
    h.settle(&mut members);
    assert_eq!(last_reason(&h), RebalanceReason::Config);
    assert!(members[2].active.len() >= 2, "the joiner got tasks");
    assert_eq!(all_active(&members), tasks(0..8));
}

#[test]
fn a_member_leaving_a_frozen_group_moves_only_its_tasks() {
    let (mut h, mut members) = frozen_pair();
    members.push(h.join(None));
    h.advance(h.now + 2 * EXPANSION_MS, &mut members);
    h.settle(&mut members);
    let (kept, left) = (members[0].active.clone(), members[1].active.clone());
    assert_eq!(kept.len(), 4);
    h.send(Heartbeat {
        member_epoch: LEAVE_EPOCH,
        ..request_from(&members[1])
    })
    .unwrap();
    members.remove(1);
    h.advance(h.now + 2 * EXPANSION_MS, &mut members);
    h.settle(&mut members);
    assert_eq!(last_reason(&h), RebalanceReason::Leave);
    assert!(
        members[0].active.is_superset(&kept),
        "the member that stays keeps all it had"
    );
    assert_eq!(
        all_active(&members),
        tasks(0..8),
        "the leaver's tasks moved"
    );
    let joiner_got = &members[1].active;
    assert!(joiner_got.is_subset(&left), "only the leaver's tasks moved");
}

#[test]
fn new_partitions_of_a_frozen_group_are_placed_and_old_ones_stay() {
    let (mut h, mut members) = frozen_pair();
    let before: Vec<BTreeSet<Task>> = members.iter().map(|m| m.active.clone()).collect();
    h.configure(frozen(GroupConfig {
        topics: vec![TopicConfig {
            name: "orders".into(),
            partitions: 12,
        }],
        ..config(8)
    }));
    h.advance(h.now + 2 * EXPANSION_MS, &mut members);
    h.settle(&mut members);
    assert_eq!(last_reason(&h), RebalanceReason::Config);
    assert_eq!(all_active(&members), tasks(0..12));
    for (member, before) in members.iter().zip(&before) {
        assert!(member.active.is_superset(before), "an owned task stayed");
    }
}

#[test]
fn a_frozen_group_keeps_its_learners_and_places_no_new_one_for_a_joiner() {
    let mut h = Harness::with_config(learner_config(4, 2));
    let mut members = vec![h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    assert_eq!(members[0].active, tasks(0..4));
    // A second member: two tasks move to it, cold, so it warms them up.
    members.push(h.join(None));
    h.advance(h.now + 2 * EXPANSION_MS, &mut members);
    h.settle(&mut members);
    let warming = members[1].learner.clone();
    assert_eq!(warming.len(), 2, "learners placed before the freeze");
    h.configure(frozen(learner_config(4, 2)));
    // A third member, while frozen: the learners stay, nothing is new.
    members.push(h.join(None));
    h.advance(h.now + 2 * EXPANSION_MS, &mut members);
    h.settle(&mut members);
    assert_eq!(
        members[1].learner, warming,
        "the learners stay as they were"
    );
    assert_eq!(members[0].active, tasks(0..4), "nothing moved");
    assert!(members[2].active.is_empty() && members[2].learner.is_empty());
}

#[test]
fn a_frozen_task_stays_on_its_cold_owner_though_another_member_is_caught_up_on_it() {
    let mut h = Harness::with_config(learner_config(4, 2));
    let mut members = vec![h.join(None), h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    h.configure(frozen(learner_config(4, 2)));
    // The second member leaves: the target gives its tasks to the first,
    // which has not heartbeated since, so nobody holds them.
    let left = members[1].active.clone();
    assert_eq!(left.len(), 2);
    h.send(Heartbeat {
        member_epoch: LEAVE_EPOCH,
        ..request_from(&members[1])
    })
    .unwrap();
    h.at(h.now + 2 * EXPANSION_MS);
    assert_eq!(last_reason(&h), RebalanceReason::Leave);
    let owner = members[0].member_id.clone();
    assert_eq!(target_active(&h, &owner), tasks(0..4));
    let group = h.core.group(GROUP).unwrap();
    assert!(left.iter().all(|t| group.holdings.holder(t).is_none()));
    // A joiner reports it has caught up on those tasks; its join asks for
    // a new target, which must keep them on their owner all the same.
    let joiner = h.join(None);
    let warm: Vec<(Task, u64)> = left.iter().map(|t| (t.clone(), 0)).collect();
    let mut joiner = vec![h.beat_with_lags(&joiner, warm)];
    let epoch = h.core.group(GROUP).unwrap().group_epoch;
    h.advance(h.now + 2 * EXPANSION_MS, &mut joiner);
    assert_eq!(h.core.group(GROUP).unwrap().target_epoch, epoch);
    assert_eq!(last_reason(&h), RebalanceReason::Join);
    assert_eq!(
        target_active(&h, &owner),
        tasks(0..4),
        "the freeze holds through the learner safety"
    );
    assert!(target_active(&h, &joiner[0].member_id).is_empty());
    let owner = h.beat(&members[0]);
    assert_eq!(owner.active, tasks(0..4));
}
