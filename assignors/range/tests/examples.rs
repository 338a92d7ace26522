//! Exact answers: Kafka's documented examples and the member order rules.

mod common;

use assignd_guest_sdk::Assignor;
use assignd_guest_sdk::harness::{run, run_json};
use assignd_guest_sdk::testing::{GroupSpec, Subscriptions, group};
use assignor_range::Range;
use common::{by_member, expected, input_of};
use serde_json::json;

/// The example of Kafka's `RangeAssignor` javadoc.
#[test]
fn kafka_javadoc_example() {
    let input = input_of(
        &[("t0", 3), ("t1", 3)],
        &[("C0", None, &["t0", "t1"]), ("C1", None, &["t0", "t1"])],
    );
    let out = run::<Range>(&input).unwrap();
    assert_eq!(
        by_member(&input, &out),
        expected(&[
            ("C0", &[("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)]),
            ("C1", &[("t0", 2), ("t1", 2)]),
        ])
    );
}

/// 10 partitions over 3 subscribers: 4, 3, 3; fewer partitions than
/// subscribers: the last subscribers get nothing; a member's unsubscribed
/// topic is split among the others only.
#[test]
fn uneven_and_mixed_subscriptions() {
    let input = input_of(
        &[("a", 10), ("b", 2), ("c", 0), ("d", 2)],
        &[
            ("m2", None, &["a", "b"]),
            ("m0", None, &["a", "b", "c"]),
            ("m1", None, &["a", "b", "d"]),
        ],
    );
    let out = run::<Range>(&input).unwrap();
    assert_eq!(
        by_member(&input, &out),
        expected(&[
            ("m0", &[("a", 0), ("a", 1), ("a", 2), ("a", 3), ("b", 0)]),
            (
                "m1",
                &[("a", 4), ("a", 5), ("a", 6), ("b", 1), ("d", 0), ("d", 1)]
            ),
            ("m2", &[("a", 7), ("a", 8), ("a", 9)]),
        ])
    );
}

/// Static members come first, by name (not by id); dynamic members follow by
/// id; a topic nobody subscribes to stays unowned.
#[test]
fn static_members_first_by_name() {
    let input = input_of(
        &[("t", 4), ("orphan", 2)],
        &[
            ("a-dynamic", None, &["t"]),
            ("z-static", Some("alpha"), &["t"]),
            ("b-static", Some("beta"), &["t"]),
            ("0-dynamic", None, &["t"]),
        ],
    );
    let out = run::<Range>(&input).unwrap();
    assert_eq!(
        by_member(&input, &out),
        expected(&[
            ("z-static", &[("t", 0)]),
            ("b-static", &[("t", 1)]),
            ("0-dynamic", &[("t", 2)]),
            ("a-dynamic", &[("t", 3)]),
        ])
    );
    assert_eq!(&out.active_owner[4..], &[u32::MAX, u32::MAX]);
}

/// Capacity is ignored: a member of capacity 5 gets an equal share.
#[test]
fn ignores_capacity() {
    let mut input = input_of(&[("t", 4)], &[("a", None, &["t"]), ("b", None, &["t"])]);
    input.members[0].capacity = 5;
    let out = run::<Range>(&input).unwrap();
    assert_eq!(out.active_counts(2), vec![2, 2]);
}

#[test]
fn no_members_and_no_topics() {
    let input = input_of(&[("t", 3)], &[]);
    assert_eq!(
        run::<Range>(&input).unwrap().active_owner,
        vec![u32::MAX; 3]
    );
    let input = input_of(&[], &[("a", None, &[])]);
    assert!(run::<Range>(&input).unwrap().active_owner.is_empty());
}

/// The offline JSON contract end to end: topic order of the document is
/// kept, every member is present, lists are in task order.
#[test]
fn json_document() {
    let doc = json!({
        "topics": {"orders": 5, "payments": 2, "audit": 1},
        "members": [
            {"id": "m2", "topics": ["orders", "payments"], "capacity": 3,
             "active": [["orders", 0], ["orders", 1]]},
            {"id": "m1", "name": "worker-b", "topics": ["orders"]},
            {"id": "m3", "topics": []}
        ]
    });
    let out = run_json::<Range>(&doc.to_string(), &["unused=1"]).unwrap();
    assert_eq!(
        out,
        json!({
            "m2": {"active": [["orders", 3], ["orders", 4], ["payments", 0], ["payments", 1]],
                   "learner": [], "standby": []},
            "m1": {"active": [["orders", 0], ["orders", 1], ["orders", 2]],
                   "learner": [], "standby": []},
            "m3": {"active": [], "learner": [], "standby": []}
        })
    );
}

#[test]
fn info() {
    let info = Range::info();
    assert_eq!(
        (info.name.as_str(), info.version.as_str()),
        ("range", "1.0.0")
    );
    assert_eq!(info.capabilities, Default::default());
    assert!(info.params.is_empty());
}

/// Benchmark scale (10,000 members, 500,000 partitions, mixed
/// subscriptions), validated. Slow in debug builds, so opt-in:
/// `cargo test --release -p assignor-range -- --ignored`.
#[test]
#[ignore]
fn benchmark_scale() {
    let input = group(&GroupSpec::grid(
        10_000,
        50,
        50,
        Subscriptions::Heterogeneous { groups: 3 },
    ));
    let start = std::time::Instant::now();
    let out = run::<Range>(&input).unwrap();
    eprintln!(
        "range at 10,000 x 500,000: {:?} (with validation)",
        start.elapsed()
    );
    assert_eq!(out.active_owner.len(), 500_000);
}
