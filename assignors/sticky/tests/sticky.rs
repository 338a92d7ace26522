//! Properties and exact answers of the `sticky` assignor, run through the
//! SDK harness (which validates every answer as the host would).

#[path = "../../balance/tests/common/mod.rs"]
mod common;

use assignd_guest_sdk::harness::{run, run_json};
use assignd_guest_sdk::testing::{
    Promises, add_member, all_topics, check_contract, moved_tasks, remove_member, settle,
};
use assignd_guest_sdk::{Assignor, NO_MEMBER};
use assignor_sticky::Sticky;
use common::*;
use proptest::prelude::*;

proptest! {
    /// The contract every assignor keeps: answers the host accepts, the
    /// same answer for the same input, and no learners or standbys (it
    /// declares neither). A sticky assignor promises nothing more: its
    /// answer follows the previous one.
    #[test]
    fn keeps_the_assignor_contract(shape in shapes(3, true)) {
        check_contract::<Sticky>(&build(&shape), Promises::NONE, shape.seed)?;
    }

    #[test]
    fn capacity_one_homogeneous_groups_differ_by_at_most_one(mut shape in shapes(1, false)) {
        shape.homogeneous = true;
        let input = build(&shape);
        let out = run::<Sticky>(&input).unwrap();
        let counts = counts(&input, &out.active_owner);
        prop_assert!(counts.iter().max().unwrap() - counts.iter().min().unwrap() <= 1, "{counts:?}");
    }

    #[test]
    fn weighted_homogeneous_groups_are_within_one_of_share(mut shape in shapes(3, false)) {
        shape.homogeneous = true;
        let input = build(&shape);
        let out = run::<Sticky>(&input).unwrap();
        within_one_of_weighted_share(&input, &out.active_owner).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn mixed_groups_have_no_improving_move(mut shape in shapes(3, false)) {
        shape.homogeneous = false;
        let input = build(&shape);
        let out = run::<Sticky>(&input).unwrap();
        prop_assert_eq!(naive_improving_move(&input, &out.active_owner), None);
    }

    #[test]
    fn a_new_member_takes_only_its_share(members in 1u32..=30, topics in 1u32..=6, tasks in 0u32..=300) {
        let fresh = uniform_group(members, topics, tasks);
        let settled = settle(&fresh, &run::<Sticky>(&fresh).unwrap());
        let grown = add_member(&settled, "newcomer", all_topics(&settled));
        let out = run::<Sticky>(&grown).unwrap();
        let moved = moved_tasks(&settled.active_owner, &out.active_owner);
        prop_assert!(moved as u32 <= tasks.div_ceil(members + 1) + 1, "moved {moved}");
    }

    #[test]
    fn a_leaving_member_moves_only_its_tasks(members in 2u32..=30, topics in 1u32..=6, tasks in 0u32..=300, leaver in 0u32..30) {
        let leaver = leaver % members;
        let fresh = uniform_group(members, topics, tasks);
        let settled = settle(&fresh, &run::<Sticky>(&fresh).unwrap());
        let shrunk = remove_member(&settled, leaver);
        let out = run::<Sticky>(&shrunk).unwrap();
        // moved_tasks ignores tasks that had no owner: exactly the leaver's.
        prop_assert_eq!(moved_tasks(&shrunk.active_owner, &out.active_owner), 0);
    }
}

#[test]
fn info_names_the_assignor() {
    let info = Sticky::info();
    assert_eq!(
        (info.name.as_str(), info.version.as_str()),
        ("sticky", "1.0.0")
    );
    let params: Vec<(&str, &str)> = info
        .params
        .iter()
        .map(|p| (p.name.as_str(), p.default_value.as_str()))
        .collect();
    assert_eq!(params, [("load_band", "default")]);
    assert!(!info.capabilities.learners && !info.capabilities.standbys && !info.capabilities.racks);
    assert!(info.capabilities.load);
}

#[test]
fn seven_tasks_over_three_members() {
    let input = uniform_group(3, 1, 7);
    assert_eq!(
        run::<Sticky>(&input).unwrap().active_owner,
        vec![0, 0, 0, 1, 1, 2, 2]
    );
}

#[test]
fn capacity_two_versus_one() {
    let mut input = uniform_group(2, 1, 9);
    input.members[0].capacity = 2;
    assert_eq!(
        run::<Sticky>(&input).unwrap().active_owner,
        vec![0, 0, 0, 0, 0, 0, 1, 1, 1]
    );
}

#[test]
fn unsubscribed_topic_gets_no_member() {
    let mut input = uniform_group(2, 2, 4);
    input.set_topics(0, vec![0]);
    input.set_topics(1, vec![0]);
    let out = run::<Sticky>(&input).unwrap();
    assert_eq!(out.active_owner[2..], [NO_MEMBER, NO_MEMBER]);
}

#[test]
fn json_document_round_trip() {
    let doc = r#"{
        "topics": {"orders": 4, "audit": 2},
        "members": [
            {"id": "m1", "topics": ["orders", "audit"], "active": [["orders", 0], ["orders", 1], ["orders", 2]]},
            {"id": "m2", "topics": ["orders"], "capacity": 1}
        ]
    }"#;
    let out = run_json::<Sticky>(doc, &[]).unwrap();
    // audit can only go to m1, so m2 takes orders until loads are even:
    // m1 keeps orders-0 and audit, m2 gets the unowned orders-3 and two of
    // m1's orders.
    let expected = concat!(
        r#"{"m1":{"active":[["orders",0],["audit",0],["audit",1]],"learner":[],"standby":[]},"#,
        r#""m2":{"active":[["orders",1],["orders",2],["orders",3]],"learner":[],"standby":[]}}"#
    );
    assert_eq!(out.to_string(), expected);
}
