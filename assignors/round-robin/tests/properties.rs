//! Property tests over random groups, run through the SDK harness so that
//! every answer is also checked exactly as the host would check it.

#[path = "../../range/tests/common/mod.rs"]
mod common;

use assignd_guest_sdk::harness::run;
use assignd_guest_sdk::{GroupInput, NO_MEMBER};
use assignor_round_robin::RoundRobin;
use common::{ByMember, by_member, groups, kafka_key, permute_members};
use proptest::prelude::*;

/// Kafka's `RoundRobinAssignor.assign` transcribed literally: a circular
/// iterator stepped one member at a time, by names. The crate's version
/// skips ahead by binary search and must give exactly this answer.
fn kafka_round_robin(input: &GroupInput) -> ByMember {
    let mut out: ByMember = input
        .members
        .iter()
        .map(|m| (m.id.clone(), Vec::new()))
        .collect();
    let mut members: Vec<_> = input.members.iter().collect();
    members.sort_by(|a, b| kafka_key(a).cmp(&kafka_key(b)));
    let mut topics: Vec<(&str, u32)> = (0..input.topics.len() as u32)
        .filter(|&t| input.members.iter().any(|m| input.subscribes(m, t)))
        .map(|t| (input.topics[t as usize].name.as_str(), t))
        .collect();
    topics.sort();
    let mut at = 0;
    for (name, t) in topics {
        for p in 0..input.topics[t as usize].partitions {
            while !input.subscribes(members[at], t) {
                at = (at + 1) % members.len();
            }
            out.get_mut(&members[at].id)
                .unwrap()
                .push((name.to_owned(), p));
            at = (at + 1) % members.len();
        }
    }
    for tasks in out.values_mut() {
        tasks.sort();
    }
    out
}

fn shuffled_group() -> impl Strategy<Value = (GroupInput, Vec<usize>)> {
    groups(false).prop_flat_map(|input| {
        let n = input.members.len();
        (Just(input), Just((0..n).collect::<Vec<_>>()).prop_shuffle())
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The harness validates the answer; beyond that no task of a topic
    /// nobody subscribes to is owned, and no learners or standbys appear.
    #[test]
    fn answers_are_valid(input in groups(false)) {
        let out = run::<RoundRobin>(&input).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(out.learners.is_empty());
        prop_assert!(out.standbys.is_empty());
        let offsets = input.topic_offsets();
        for t in 0..input.topics.len() {
            let subscribed = input.members.iter().any(|m| input.subscribes(m, t as u32));
            for task in offsets[t]..offsets[t + 1] {
                prop_assert_eq!(out.active_owner[task as usize] == NO_MEMBER, !subscribed);
            }
        }
    }

    #[test]
    fn matches_kafka(input in groups(false)) {
        let out = run::<RoundRobin>(&input).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(by_member(&input, &out), kafka_round_robin(&input));
    }

    /// Same input, same answer; and the answer per member id does not
    /// depend on the order of the members in the input.
    #[test]
    fn deterministic((input, permutation) in shuffled_group()) {
        let first = run::<RoundRobin>(&input).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let second = run::<RoundRobin>(&input).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&first, &second);
        let shuffled = permute_members(&input, &permutation);
        let third = run::<RoundRobin>(&shuffled).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(by_member(&input, &first), by_member(&shuffled, &third));
    }

    /// The previous assignment plays no part in the answer.
    #[test]
    fn ignores_previous_assignment(input in groups(false)) {
        let out = run::<RoundRobin>(&input).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let fresh = GroupInput {
            active_owner: vec![NO_MEMBER; input.task_count()],
            ..input.clone()
        };
        prop_assert_eq!(
            run::<RoundRobin>(&fresh).map_err(|e| TestCaseError::fail(e.to_string()))?,
            out
        );
    }

    /// With every member subscribed to every topic, totals differ by at
    /// most one.
    #[test]
    fn balanced_when_homogeneous(input in groups(true)) {
        let out = run::<RoundRobin>(&input).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let counts = out.active_counts(input.members.len());
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        prop_assert!(max - min <= 1, "counts {counts:?}");
    }
}
