//! Property tests over random groups: the SDK's assignor contract (run
//! through the harness, so every answer is also checked exactly as the host
//! would check it), and what is particular to this assignor.

mod common;

use std::collections::BTreeMap;

use assignd_guest_sdk::GroupInput;
use assignd_guest_sdk::harness::run;
use assignd_guest_sdk::testing::{Promises, check_contract};
use assignor_range::Range;
use common::{ByMember, by_member, groups, kafka_key};
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The contract every assignor keeps (the host accepts the answer, so
    /// the tasks of topics nobody subscribes to stay unowned; no learners
    /// or standbys, which it does not declare; the same input gives the
    /// same answer), and both promises of a stateless assignor: who gets
    /// what by member id does not depend on the members' order, and the
    /// previous assignment plays no part.
    #[test]
    fn keeps_the_assignor_contract(input in groups(false), seed in any::<u64>()) {
        check_contract::<Range>(&input, Promises::STATELESS, seed)?;
    }

    #[test]
    fn matches_kafka(input in groups(false)) {
        let out = run::<Range>(&input).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(by_member(&input, &out), kafka_range(&input));
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
