//! The checks' shortcuts give the errors the full checks give: an input
//! whose owners are all in range, an answer without rows, a topic every
//! member reads, rows grouped by task or in any order.

use super::*;
use crate::model::{Member, Topic};

/// Topics `t0`, `t1`, … with these partition counts; members `m0`, `m1`, …
/// each on the subscription set (topic indices) at its position.
fn group(partitions: &[u32], member_topics: &[&[u32]]) -> GroupInput {
    let mut subscriptions: Vec<Vec<u32>> = Vec::new();
    let members = member_topics
        .iter()
        .enumerate()
        .map(|(m, topics)| {
            let set = subscriptions
                .iter()
                .position(|s| s == topics)
                .unwrap_or_else(|| {
                    subscriptions.push(topics.to_vec());
                    subscriptions.len() - 1
                });
            Member {
                id: format!("m{m}"),
                name: None,
                rack: None,
                capacity: 1,
                subscription: set as u32,
                load_capacity: None,
                utilisation: None,
            }
        })
        .collect();
    let input = GroupInput {
        topics: partitions
            .iter()
            .enumerate()
            .map(|(t, &partitions)| Topic {
                name: format!("t{t}"),
                partitions,
            })
            .collect(),
        subscriptions,
        members,
        active_owner: vec![NO_MEMBER; partitions.iter().sum::<u32>() as usize],
        learners: TaskMembers::default(),
        standbys: TaskMembers::default(),
        lags: Default::default(),
        params: Default::default(),
        load_unit: None,
        loads: Default::default(),
    };
    check_input(&input, &InputLimits::default()).expect("a valid input");
    input
}

fn rows(pairs: &[(u32, u32)]) -> TaskMembers {
    let mut rows = TaskMembers::default();
    for &(task, member) in pairs {
        rows.push(task, member);
    }
    rows
}

/// Three members reading both topics (3 and 2 partitions), task `i` on
/// member `i % 3`.
fn everyone_reads_everything() -> (GroupInput, Assignment) {
    let input = group(&[3, 2], &[&[0, 1], &[0, 1], &[0, 1]]);
    let out = Assignment {
        active_owner: vec![0, 1, 2, 0, 1],
        ..Assignment::default()
    };
    (input, out)
}

#[test]
fn an_answer_without_rows_names_its_first_bad_owner() {
    let (input, mut out) = everyone_reads_everything();
    assert_eq!(check_assignment(&input, &out, 16), Ok(()));
    out.active_owner[4] = 3;
    out.active_owner[3] = NO_MEMBER;
    assert_eq!(
        check_assignment(&input, &out, 16),
        Err(InvalidAssignment::Unassigned {
            topic: "t1".into(),
            partition: 0
        })
    );
    out.active_owner[1] = 7;
    assert_eq!(
        check_assignment(&input, &out, 16),
        Err(InvalidAssignment::UnknownMember {
            role: Role::Active,
            member: 7
        })
    );
}

#[test]
fn an_owner_off_its_topic_is_named_when_not_everyone_reads_it() {
    // m0 reads t0 only, m1 both: t1 is not read by everyone.
    let input = group(&[2, 2], &[&[0], &[0, 1]]);
    let mut out = Assignment {
        active_owner: vec![0, 1, 1, 1],
        ..Assignment::default()
    };
    assert_eq!(check_assignment(&input, &out, 16), Ok(()));
    out.active_owner[3] = 0;
    assert_eq!(
        check_assignment(&input, &out, 16),
        Err(InvalidAssignment::NotSubscribed {
            role: Role::Active,
            member: "m0".into(),
            topic: "t1".into(),
            partition: 1
        })
    );
}

#[test]
fn a_row_off_its_topic_or_on_its_owner_is_named() {
    let input = group(&[2, 2], &[&[0], &[0, 1], &[0, 1]]);
    let mut out = Assignment {
        active_owner: vec![0, 1, 1, 2],
        standbys: rows(&[(0, 1), (2, 2), (3, 1)]),
        ..Assignment::default()
    };
    assert_eq!(check_assignment(&input, &out, 16), Ok(()));
    out.learners = rows(&[(1, 2), (2, 0)]);
    assert_eq!(
        check_assignment(&input, &out, 16),
        Err(InvalidAssignment::NotSubscribed {
            role: Role::Learner,
            member: "m0".into(),
            topic: "t1".into(),
            partition: 0
        })
    );
    out.learners = rows(&[(1, 2), (3, 2)]);
    assert_eq!(
        check_assignment(&input, &out, 16),
        Err(InvalidAssignment::OnActiveOwner {
            role: Role::Learner,
            member: "m2".into(),
            topic: "t1".into(),
            partition: 1
        })
    );
}

#[test]
fn a_duplicate_is_the_same_whatever_the_rows_order() {
    let (input, mut out) = everyone_reads_everything();
    // Task 1 (t0-1) holds m0 twice as a learner and m2 as learner and
    // standby; task 4 (t1-1) holds m2 twice. The error names task 1's
    // lowest twice-placed member, again as a learner.
    let learners = [(4, 2), (1, 2), (1, 0), (3, 1), (1, 0)];
    let standbys = [(4, 2), (1, 2), (0, 1)];
    let expected = Err(InvalidAssignment::Duplicate {
        role: Role::Learner,
        member: "m0".into(),
        topic: "t0".into(),
        partition: 1,
    });
    out.learners = rows(&learners);
    out.standbys = rows(&standbys);
    assert!(!out.learners.task.is_sorted(), "the counting sort's path");
    assert_eq!(check_assignment(&input, &out, 16), expected);
    out.normalize();
    assert!(out.learners.task.is_sorted() && out.standbys.task.is_sorted());
    assert_eq!(check_assignment(&input, &out, 16), expected);
}

#[test]
fn a_member_both_learner_and_standby_is_a_duplicate_as_standby() {
    let (input, mut out) = everyone_reads_everything();
    for sorted in [true, false] {
        out.learners = rows(&[(0, 1), (2, 1)]);
        out.standbys = if sorted {
            rows(&[(0, 2), (2, 0), (2, 1), (4, 2)])
        } else {
            rows(&[(4, 2), (2, 1), (0, 2), (2, 0)])
        };
        assert_eq!(
            check_assignment(&input, &out, 16),
            Err(InvalidAssignment::Duplicate {
                role: Role::Standby,
                member: "m1".into(),
                topic: "t0".into(),
                partition: 2
            }),
            "rows sorted: {sorted}"
        );
        out.standbys = rows(&[(0, 2), (2, 0), (4, 2)]);
        assert_eq!(check_assignment(&input, &out, 16), Ok(()));
    }
}

#[test]
fn a_misplaced_row_is_named_before_an_earlier_duplicate() {
    let (input, mut out) = everyone_reads_everything();
    out.learners = rows(&[(0, 1), (0, 1)]);
    out.standbys = rows(&[(4, 9)]);
    assert_eq!(
        check_assignment(&input, &out, 16),
        Err(InvalidAssignment::UnknownMember {
            role: Role::Standby,
            member: 9
        })
    );
}

#[test]
fn an_input_names_its_first_owner_out_of_range() {
    let mut input = group(&[3, 2], &[&[0, 1], &[0, 1], &[0, 1]]);
    input.active_owner = vec![NO_MEMBER, 2, 0, NO_MEMBER, 1];
    assert_eq!(check_input(&input, &InputLimits::default()), Ok(()));
    input.active_owner[3] = 7;
    input.active_owner[1] = 3;
    assert_eq!(
        check_input(&input, &InputLimits::default()),
        Err(InvalidInput(
            "active_owner of task 1 is member index 3, but there are 3 members".into()
        ))
    );
}
