//! Native tests: the code that ships as a component, run in-process by the
//! SDK's harness, which checks input and answer exactly as the host does.

use assignd_guest_sdk::harness::{HarnessError, run, run_json};
use assignd_guest_sdk::testing::{self, GroupSpec, Subscriptions};
use assignd_guest_sdk::{AssignError, log};
use my_assignor::PinTopics;
use serde_json::{Value, json};

/// Three workers; worker-a and worker-b share the work, worker-c is new.
const GROUP: &str = r#"{
  "topics": {"orders": 6, "payments": 2},
  "members": [
    {"id": "m1", "name": "worker-a", "topics": ["orders", "payments"],
     "active": [["orders", 0], ["orders", 1], ["orders", 2], ["payments", 0]]},
    {"id": "m2", "name": "worker-b", "topics": ["orders", "payments"],
     "active": [["orders", 3], ["orders", 4], ["orders", 5], ["payments", 1]]},
    {"id": "m3", "name": "worker-c", "topics": ["orders", "payments"]}
  ]
}"#;

fn active(out: &Value, member: &str) -> Value {
    out[member]["active"].clone()
}

#[test]
fn a_pinned_topic_goes_whole_to_its_member_and_nothing_else_does() {
    let out = run_json::<PinTopics>(GROUP, &["pin=orders:worker-c"]).unwrap();
    let orders: Vec<Value> = (0..6).map(|p| json!(["orders", p])).collect();
    assert_eq!(active(&out, "m3"), json!(orders));
    // payments is balanced over the others, each keeping what it had.
    assert_eq!(active(&out, "m1"), json!([["payments", 0]]));
    assert_eq!(active(&out, "m2"), json!([["payments", 1]]));
}

#[test]
fn without_a_pin_tasks_are_balanced_and_stay_where_they_are() {
    let out = run_json::<PinTopics>(GROUP, &[]).unwrap();
    // Fair share 3: worker-a and worker-b keep their orders, their
    // payments go to worker-c.
    assert_eq!(
        active(&out, "m1"),
        json!([["orders", 0], ["orders", 1], ["orders", 2]])
    );
    assert_eq!(
        active(&out, "m2"),
        json!([["orders", 3], ["orders", 4], ["orders", 5]])
    );
    assert_eq!(
        active(&out, "m3"),
        json!([["payments", 0], ["payments", 1]])
    );
}

#[test]
fn a_pin_to_a_missing_member_is_ignored_with_a_warning() {
    log::take_native_lines();
    let out = run_json::<PinTopics>(GROUP, &["pin=payments:worker-z"]).unwrap();
    let owned: usize = ["m1", "m2", "m3"]
        .iter()
        .map(|m| active(&out, m).as_array().unwrap().len())
        .sum();
    assert_eq!(owned, 8, "every task still has an owner: {out}");
    let lines = log::take_native_lines();
    assert!(
        lines
            .iter()
            .any(|(level, line)| *level == log::Level::Warn && line.contains("worker-z")),
        "{lines:?}"
    );
}

#[test]
fn a_malformed_pin_is_an_invalid_param() {
    let mut input = testing::group(&GroupSpec::grid(4, 12, 3, Subscriptions::Homogeneous));
    input.params.insert("pin".into(), "topic-0".into());
    assert!(matches!(
        run::<PinTopics>(&input),
        Err(HarnessError::Assign(AssignError::InvalidParam(_)))
    ));
}

#[test]
fn a_member_joining_takes_only_its_share() {
    // 10 members, 60 tasks over 3 topics; topic-1 pinned to member-3.
    let mut input = testing::group(&GroupSpec::grid(10, 6, 3, Subscriptions::Homogeneous));
    input.params.insert("pin".into(), "topic-1:member-3".into());
    let first = run::<PinTopics>(&input).unwrap();
    let topic_1 = 20..40;
    assert!(first.active_owner[topic_1.clone()].iter().all(|&m| m == 3));
    let counts = first.active_counts(10);
    assert_eq!(counts[3], 20, "member-3 holds topic-1 and nothing else");
    let others: Vec<u32> = counts
        .iter()
        .enumerate()
        .filter(|&(m, _)| m != 3)
        .map(|(_, &c)| c)
        .collect();
    assert!(
        others.iter().max().unwrap() - others.iter().min().unwrap() <= 1,
        "{counts:?}"
    );

    // One more member: it takes tasks from the others, nothing else moves.
    let next = testing::add_member(
        &testing::settle(&input, &first),
        "member-10",
        testing::all_topics(&input),
    );
    let second = run::<PinTopics>(&next).unwrap();
    let moved = testing::moved_tasks(&first.active_owner, &second.active_owner);
    assert_eq!(moved as u32, second.active_counts(11)[10]);
    assert!(moved >= 4);
}
