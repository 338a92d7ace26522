//! Properties of `assignor_balance::balance` on mixed groups made of a few
//! large subscription classes (members sharing one topic set), the shape of
//! Kafka's heterogeneous benchmarks: placement then takes turns between
//! classes, and settling starts from nearly even loads.

mod common;

use assignd_guest_sdk::validate::check_assignment;
use assignd_guest_sdk::{Assignment, GroupInput, Member, NO_MEMBER};
use assignor_balance::balance;
use common::{Rng, naive_improving_move, random_topics};
use proptest::prelude::*;

/// Members fall into `classes` classes by index, each class subscribing to
/// its own random non-empty topic set; `owned_percent` of the tasks start
/// on a random member (subscribed or not).
#[derive(Clone, Copy, Debug)]
struct ClassShape {
    members: u32,
    topics: u32,
    classes: u32,
    max_partitions: u32,
    max_capacity: u32,
    owned_percent: u64,
    seed: u64,
}

fn class_shapes() -> impl Strategy<Value = ClassShape> {
    (
        1u32..=120,
        1u32..=8,
        2u32..=4,
        0u32..=150,
        1u32..=3,
        prop_oneof![Just(0u64), Just(100u64), 0u64..=100],
        any::<u64>(),
    )
        .prop_map(
            |(members, topics, classes, max_partitions, max_capacity, owned_percent, seed)| {
                ClassShape {
                    members,
                    topics,
                    classes,
                    max_partitions,
                    max_capacity,
                    owned_percent,
                    seed,
                }
            },
        )
}

fn build(shape: &ClassShape) -> GroupInput {
    let mut rng = Rng(shape.seed);
    let mut input = random_topics(&mut rng, shape.topics, shape.max_partitions);
    let class_topics: Vec<Vec<u32>> = (0..shape.classes)
        .map(|_| {
            let first = rng.below(u64::from(shape.topics)) as u32;
            (0..shape.topics)
                .filter(|&t| t == first || rng.below(2) == 0)
                .collect()
        })
        .collect();
    for m in 0..shape.members {
        let topics = class_topics[(m % shape.classes) as usize].clone();
        let member = Member {
            id: format!("member-{m}"),
            name: None,
            rack: None,
            capacity: 1 + rng.below(u64::from(shape.max_capacity)) as u32,
            subscription: input.intern_subscription(topics),
            load_capacity: None,
            utilisation: None,
        };
        input.members.push(member);
    }
    let task_count: u32 = input.topics.iter().map(|t| t.partitions).sum();
    input.active_owner = (0..task_count)
        .map(|_| {
            if rng.below(100) < shape.owned_percent {
                rng.below(u64::from(shape.members)) as u32
            } else {
                NO_MEMBER
            }
        })
        .collect();
    input
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn answers_are_valid_without_improving_moves_and_a_fixed_point(shape in class_shapes()) {
        let mut input = build(&shape);
        let owners = balance(&input);
        let out = Assignment {
            active_owner: owners.clone(),
            ..Default::default()
        };
        check_assignment(&input, &out, usize::MAX)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(naive_improving_move(&input, &owners), None);
        input.active_owner = owners;
        prop_assert_eq!(balance(&input), input.active_owner);
    }
}
