//! Property tests over random groups, run through the SDK harness so that
//! every answer is also checked exactly as the host would check it.

mod common;

use std::collections::BTreeMap;

use assignd_guest_sdk::harness::run;
use assignd_guest_sdk::{GroupInput, NO_MEMBER};
use assignor_range::Range;
use common::{ByMember, by_member, groups, kafka_key, permute_members};
use proptest::prelude::*;

/// Kafka's `RangeAssignor.assign` transcribed by names (topic → sorted
/// consumers → `start = per * i + min(i, extra)`), independent of the
/// crate's flat-vector version.
fn kafka_range(input: &GroupInput) -> ByMember {
    let mut out: ByMember = input
        .members
        .iter()
        .map(|m| (m.id.clone(), Vec::new()))
        .collect();
    for (t, topic) in input.topics.iter().enumerate() {
        let mut consumers: Vec<_> = input
            .members
            .iter()
            .filter(|m| input.topics_of(m).contains(&(t as u32)))
            .collect();
        if consumers.is_empty() {
            continue;
        }
        consumers.sort_by(|a, b| kafka_key(a).cmp(&kafka_key(b)));
        let n = topic.partitions as usize;
        let per = n / consumers.len();
        let extra = n % consumers.len();
        for (i, consumer) in consumers.iter().enumerate() {
            let start = per * i + i.min(extra);
            let length = per + usize::from(i < extra);
            let tasks = out.get_mut(&consumer.id).unwrap();
            tasks.extend((start..start + length).map(|p| (topic.name.clone(), p as u32)));
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
        let out = run::<Range>(&input).map_err(|e| TestCaseError::fail(e.to_string()))?;
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
        let out = run::<Range>(&input).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(by_member(&input, &out), kafka_range(&input));
    }

    /// Same input, same answer; and the answer per member id does not
    /// depend on the order of the members in the input.
    #[test]
    fn deterministic((input, permutation) in shuffled_group()) {
        let first = run::<Range>(&input).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let second = run::<Range>(&input).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&first, &second);
        let shuffled = permute_members(&input, &permutation);
        let third = run::<Range>(&shuffled).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(by_member(&input, &first), by_member(&shuffled, &third));
    }

    /// The previous assignment plays no part in the answer.
    #[test]
    fn ignores_previous_assignment(input in groups(false)) {
        let out = run::<Range>(&input).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let fresh = GroupInput {
            active_owner: vec![NO_MEMBER; input.task_count()],
            ..input.clone()
        };
        prop_assert_eq!(run::<Range>(&fresh).map_err(|e| TestCaseError::fail(e.to_string()))?, out);
    }

    /// Per topic, the subscribers' shares differ by at most one, and
    /// non-subscribers get nothing.
    #[test]
    fn balanced_per_topic(input in groups(false)) {
        let out = run::<Range>(&input).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let offsets = input.topic_offsets();
        for t in 0..input.topics.len() {
            let mut counts: BTreeMap<u32, u32> = input
                .members
                .iter()
                .enumerate()
                .filter(|(_, m)| input.subscribes(m, t as u32))
                .map(|(i, _)| (i as u32, 0))
                .collect();
            if counts.is_empty() {
                continue;
            }
            for task in offsets[t]..offsets[t + 1] {
                *counts.get_mut(&out.active_owner[task as usize]).unwrap() += 1;
            }
            if let (Some(min), Some(max)) = (counts.values().min(), counts.values().max()) {
                prop_assert!(max - min <= 1, "topic {t}: counts {counts:?}");
            }
        }
    }
}
