//! Joins: arrivals batched into one target, a newcomer taking its share
//! cooperatively, member-chosen ids, and subscriptions (changed, or naming a
//! topic the group does not have yet).

use std::collections::BTreeSet;

use super::harness::*;
use super::records::{bumped, installed, joined, member, reconciled, snapshot};
use crate::protocol::core::{Heartbeat, LEAVE_EPOCH, ProtocolError};
use crate::protocol::group::{Slot, Task, TopicConfig};
use crate::protocol::reconcile::MemberState;

#[test]
fn arrivals_are_batched_into_one_target_and_every_task_gets_one_owner() {
    let mut h = Harness::new(12);
    let mut members = vec![h.join(None), h.join(None)];
    h.at(500);
    members.push(h.join(None));
    assert!(
        all_active(&members).is_empty(),
        "no target before the expansion timeout"
    );
    let mark = h.log.len();
    h.at(1_000);
    let installed_at_the_timeout = h.records_since(mark).to_vec();
    h.settle(&mut members);
    assert_eq!(all_active(&members), tasks(0..12));
    for member in &members {
        assert_eq!(member.active.len(), 4);
    }
    // Three arrivals, one target: the one their members now hold.
    let epoch = h.core.group(GROUP).unwrap().target_epoch;
    let slots: Vec<Slot> = members
        .iter()
        .map(|m| Slot::dynamic(&m.member_id))
        .collect();
    let target = slots.iter().zip(members.iter().map(|m| &m.active));
    assert_eq!(installed_at_the_timeout, [installed(epoch, target)]);
}

#[test]
fn a_new_member_takes_tasks_cooperatively_and_nothing_else_moves() {
    let mut h = Harness::new(12);
    let mut members = vec![h.join(None), h.join(None), h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    let before: Vec<BTreeSet<Task>> = members.iter().map(|m| m.active.clone()).collect();
    members.push(h.join(None));
    h.at(2_000);
    // Each old member, on its next heartbeat, keeps what stays and is asked
    // to release exactly what moves.
    for (i, member) in members.iter_mut().take(3).enumerate() {
        let next = h.beat(member);
        assert!(
            next.active.is_subset(&before[i]),
            "nothing new is granted while revoking"
        );
        assert!(next.revoking.is_subset(&before[i]));
        assert_eq!(next.active.len() + next.revoking.len(), before[i].len());
        *member = next;
    }
    h.settle(&mut members);
    assert_eq!(all_active(&members), tasks(0..12));
    assert_eq!(members[3].active.len(), 3, "the newcomer got its share");
    for (i, member) in members.iter().take(3).enumerate() {
        assert!(
            member.active.is_subset(&before[i]),
            "old members only lost tasks"
        );
    }
}

#[test]
fn topic_changes_trigger_a_new_target() {
    let mut h = Harness::new(6);
    let mut members = vec![h.join(None), h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    assert_eq!(all_active(&members), tasks(0..6));
    // More partitions: the new tasks are assigned, old ones stay put.
    let before: Vec<BTreeSet<Task>> = members.iter().map(|m| m.active.clone()).collect();
    h.configure(config(10));
    h.advance(3_000, &mut members);
    h.settle(&mut members);
    assert_eq!(all_active(&members), tasks(0..10));
    for (i, m) in members.iter().enumerate() {
        assert!(before[i].is_subset(&m.active));
    }
    // A topic added that the members do not subscribe to changes nothing
    // for them; a topic removed is revoked from its holders.
    let mut two = config(10);
    two.topics.push(TopicConfig {
        name: "payments".into(),
        partitions: 4,
    });
    h.configure(two);
    h.advance(5_000, &mut members);
    assert_eq!(all_active(&members), tasks(0..10));
    h.configure(config(4));
    h.advance(7_000, &mut members);
    h.settle(&mut members);
    assert_eq!(all_active(&members), tasks(0..4));
}

/// A subscription is a wish. A member may subscribe to a topic the group
/// does not have: it is accepted, kept in the member's subscription, gives
/// nothing, and gives tasks once an admin adds it.
#[test]
fn a_subscription_to_a_topic_the_group_does_not_have_is_kept_until_it_exists() {
    let mut h = Harness::new(2);
    let mut members = vec![h.join(None)];
    let newcomer = h
        .send(Heartbeat {
            topics: Some(vec!["orders".into(), "newtopic".into()]),
            ..Heartbeat::join(GROUP, Some("w"), vec![])
        })
        .expect("an unknown topic is accepted");
    members.push(newcomer);
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    let group = h.core.group(GROUP).unwrap();
    assert!(group.members["static:w"].topics.contains("newtopic"));
    assert_eq!(all_active(&members), tasks(0..2));

    let mut with_new = config(2);
    with_new.topics.push(TopicConfig {
        name: "newtopic".into(),
        partitions: 3,
    });
    h.configure(with_new);
    h.at(2 * EXPANSION_MS);
    h.settle(&mut members);
    let new_tasks: BTreeSet<Task> = (0..3).map(|p| Task::new("newtopic", p)).collect();
    assert_eq!(members[1].active.intersection(&new_tasks).count(), 3);
    assert!(members[0].active.is_disjoint(&new_tasks));

    // Removed again: a restarted member still listing it may rejoin.
    h.configure(config(2));
    let again = h.send(Heartbeat {
        topics: Some(vec!["newtopic".into()]),
        ..Heartbeat::join(GROUP, Some("w"), vec![])
    });
    assert!(again.is_ok(), "{again:?}");
    // A subscription's names are bounded like the group's.
    let long = h.send(Heartbeat::join(GROUP, None, vec!["x".repeat(256)]));
    assert!(matches!(long, Err(ProtocolError::Invalid(_))), "{long:?}");
}

/// A join with the id the member chose.
fn join_as(member_id: &str, name: Option<&str>) -> Heartbeat {
    Heartbeat {
        member_id: member_id.into(),
        ..Heartbeat::join(GROUP, name, vec!["orders".into()])
    }
}

#[test]
fn a_join_retried_with_the_id_the_member_chose_is_the_same_member() {
    let mut h = Harness::new(4);
    let first = h.send(join_as("c-0123456789abcdef", None)).unwrap();
    assert_eq!(first.member_id, "c-0123456789abcdef");
    let mark = h.log.len();
    // Its answer was lost: the member sends the same join again, and is
    // answered as the same member; nothing is recorded.
    let again = h.send(join_as("c-0123456789abcdef", None)).unwrap();
    assert_eq!(again, first);
    assert_eq!(h.records_since(mark), &[]);
    assert_eq!(h.core.group(GROUP).unwrap().members.len(), 1);
    // Later too, after its slot got tasks (epoch past 0): the same member,
    // with its assignment.
    h.at(EXPANSION_MS);
    let mut members = vec![again];
    h.settle(&mut members);
    assert_eq!(members[0].active, tasks(0..4));
    let retried = h.send(join_as("c-0123456789abcdef", None)).unwrap();
    assert_eq!(retried.member_epoch, members[0].member_epoch);
    assert_eq!(retried.active, tasks(0..4));
    assert_eq!(h.core.group(GROUP).unwrap().members.len(), 1);
    // A static member's retried join keeps its incarnation (and fences
    // nobody).
    let named = h.send(join_as("c-named", Some("w"))).unwrap();
    let mark = h.log.len();
    assert_eq!(h.send(join_as("c-named", Some("w"))).unwrap(), named);
    assert_eq!(h.records_since(mark), &[]);
    // A host-issued id is never one a member chose.
    let issued = h.join(None);
    assert!(issued.member_id.starts_with("m-"), "{issued:?}");
    assert_eq!(h.core.group(GROUP).unwrap().members.len(), 3);
}

#[test]
fn a_join_whose_chosen_id_was_removed_is_fenced_and_a_bad_id_refused() {
    let mut h = Harness::new(4);
    let member = h.send(join_as("c-gone", None)).unwrap();
    let leave = Heartbeat {
        member_epoch: LEAVE_EPOCH,
        ..request_from(&member)
    };
    h.send(leave).unwrap();
    // A retry of the join that comes after the leave must not bring the
    // member back.
    assert!(matches!(
        h.send(join_as("c-gone", None)),
        Err(ProtocolError::Fenced { .. })
    ));
    let mark = h.log.len();
    let long = "x".repeat(65);
    for bad in ["has space", "a/b", "static:w", long.as_str(), "é"] {
        let error = h.send(join_as(bad, None)).unwrap_err();
        assert_eq!(error.code(), "invalid_request", "{bad:?}: {error}");
    }
    assert_eq!(h.records_since(mark), &[]);
    assert!(h.core.group(GROUP).unwrap().members.is_empty());
}

/// Each join records its member and bumps the group epoch; the batch's
/// one target is installed when the expansion timeout has passed; each
/// member's first beat records what it now holds, and the beat that leaves
/// the group stable snapshots it too.
#[test]
fn joins_a_target_and_first_beats_emit_exactly_their_records() {
    let mut h = Harness::new(4);
    let configured = h.core.group(GROUP).unwrap().group_epoch;
    let mark = h.log.len();
    let a = h.join(None);
    let a_slot = Slot::dynamic(&a.member_id);
    assert_eq!(
        h.records_since(mark),
        [
            joined(&a_slot, member(&a.member_id, None)),
            bumped(configured + 1)
        ]
    );
    let mark = h.log.len();
    let w = h.join(Some("w"));
    let w_slot = Slot::named("w");
    assert_eq!(
        h.records_since(mark),
        [
            joined(&w_slot, member(&w.member_id, Some("w"))),
            bumped(configured + 2)
        ]
    );
    let epoch = configured + 2;
    let mark = h.log.len();
    h.at(EXPANSION_MS);
    let (a_tasks, w_tasks) = (tasks(0..2), tasks(2..4));
    assert_eq!(
        h.records_since(mark),
        [installed(epoch, [(&a_slot, &a_tasks), (&w_slot, &w_tasks)])]
    );
    let mark = h.log.len();
    h.beat(&a);
    let stable = MemberState::Stable;
    let none = BTreeSet::new();
    assert_eq!(
        h.records_since(mark),
        [reconciled(
            &a_slot,
            stable,
            (epoch, 0),
            a_tasks,
            none.clone()
        )]
    );
    let mark = h.log.len();
    h.beat(&w);
    let w_reconciled = reconciled(&w_slot, stable, (epoch, 0), w_tasks, none);
    assert_eq!(h.records_since(mark), [w_reconciled, snapshot(&h)]);
}
