//! Property tests over random groups: the SDK's assignor contract (run
//! through the harness, so every answer is also checked exactly as the host
//! would check it), and what is particular to this assignor.

#[path = "../../range/tests/common/mod.rs"]
mod common;

use assignd_guest_sdk::GroupInput;
use assignd_guest_sdk::harness::run;
use assignd_guest_sdk::testing::{Promises, check_contract};
use assignor_round_robin::RoundRobin;
use common::{ByMember, by_member, groups, kafka_key};
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
        check_contract::<RoundRobin>(&input, Promises::STATELESS, seed)?;
    }

    #[test]
    fn matches_kafka(input in groups(false)) {
        let out = run::<RoundRobin>(&input).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(by_member(&input, &out), kafka_round_robin(&input));
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
