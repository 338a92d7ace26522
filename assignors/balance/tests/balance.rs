//! Properties and exact answers of `assignor_balance::balance`.

mod common;

use assignd_guest_sdk::validate::check_assignment;
use assignd_guest_sdk::{Assignment, GroupInput, NO_MEMBER};
use assignor_balance::{ImprovingMove, balance, find_improving_move};
use common::*;
use proptest::prelude::*;

fn check_valid(input: &GroupInput, owners: &[u32]) -> Result<(), TestCaseError> {
    let out = Assignment {
        active_owner: owners.to_vec(),
        ..Default::default()
    };
    check_assignment(input, &out, usize::MAX).map_err(|e| TestCaseError::fail(e.to_string()))
}

proptest! {
    #[test]
    fn answers_are_valid_and_deterministic(shape in shapes(3, false)) {
        let input = build(&shape);
        let owners = balance(&input);
        check_valid(&input, &owners)?;
        prop_assert_eq!(&owners, &balance(&input));
    }

    #[test]
    fn homogeneous_groups_are_within_one_of_weighted_share(mut shape in shapes(3, false)) {
        shape.homogeneous = true;
        let input = build(&shape);
        let owners = balance(&input);
        within_one_of_weighted_share(&input, &owners).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn mixed_groups_have_no_improving_move(mut shape in shapes(3, false)) {
        shape.homogeneous = false;
        let input = build(&shape);
        prop_assume!(!is_homogeneous(&input));
        let owners = balance(&input);
        prop_assert_eq!(naive_improving_move(&input, &owners), None);
    }

    #[test]
    fn capacity_one_groups_have_no_improving_move(shape in shapes(1, false)) {
        let input = build(&shape);
        let owners = balance(&input);
        prop_assert_eq!(find_improving_move(&input, &owners), None);
    }

    #[test]
    fn a_balanced_answer_is_a_fixed_point(shape in shapes(3, false)) {
        let mut input = build(&shape);
        input.active_owner = balance(&input);
        prop_assert_eq!(balance(&input), input.active_owner);
    }
}

#[test]
fn seven_tasks_over_three_members() {
    let input = uniform_group(3, 1, 7);
    assert_eq!(balance(&input), vec![0, 0, 0, 1, 1, 2, 2]);
}

#[test]
fn capacity_two_carries_twice_the_tasks() {
    let mut input = uniform_group(2, 1, 6);
    input.members[1].capacity = 2;
    assert_eq!(balance(&input), vec![0, 0, 1, 1, 1, 1]);
}

#[test]
fn over_quota_owner_keeps_its_first_tasks_and_hands_the_rest_on() {
    let mut input = uniform_group(3, 1, 6);
    input.active_owner = vec![2, 2, 2, 2, 2, 2];
    assert_eq!(balance(&input), vec![2, 2, 0, 0, 1, 1]);
}

#[test]
fn unsubscribed_topic_stays_unowned_and_unsubscribed_owner_loses_its_task() {
    let mut input = uniform_group(2, 2, 4);
    // Both members subscribe to topic 0 only; member 1 held a task of topic 1.
    for m in 0..input.members.len() {
        input.set_topics(m, vec![0]);
    }
    input.active_owner = vec![1, 1, 1, NO_MEMBER];
    assert_eq!(balance(&input), vec![1, 0, NO_MEMBER, NO_MEMBER]);
}

#[test]
fn mixed_subscriptions_balance_topic_by_topic() {
    // Member 0 subscribes to topic 0 only, member 1 to both; topic 1's 4
    // tasks can only go to member 1, so topic 0's 4 tasks go to member 0.
    let mut input = uniform_group(2, 2, 8);
    input.set_topics(0, vec![0]);
    input.active_owner = vec![1; 8];
    assert_eq!(balance(&input), vec![0, 0, 0, 0, 1, 1, 1, 1]);
}

#[test]
fn find_improving_move_names_a_move() {
    let input = uniform_group(2, 1, 3);
    assert_eq!(
        find_improving_move(&input, &[0, 0, 0]),
        Some(ImprovingMove {
            task: 0,
            from: 0,
            to: 1
        })
    );
    assert_eq!(find_improving_move(&input, &[0, 0, 1]), None);
}
