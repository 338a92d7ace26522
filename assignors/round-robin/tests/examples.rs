//! Exact answers: Kafka's documented examples and the ordering rules.

#[path = "../../range/tests/common/mod.rs"]
mod common;

use assignd_guest_sdk::Assignor;
use assignd_guest_sdk::harness::{run, run_json};
use assignd_guest_sdk::testing::{GroupSpec, Subscriptions, group};
use assignor_round_robin::RoundRobin;
use common::{by_member, expected, input_of};
use serde_json::json;

/// The first example of Kafka's `RoundRobinAssignor` javadoc.
#[test]
fn kafka_javadoc_identical_subscriptions() {
    let input = input_of(
        &[("t0", 3), ("t1", 3)],
        &[("C0", None, &["t0", "t1"]), ("C1", None, &["t0", "t1"])],
    );
    let out = run::<RoundRobin>(&input).unwrap();
    assert_eq!(
        by_member(&input, &out),
        expected(&[
            ("C0", &[("t0", 0), ("t0", 2), ("t1", 1)]),
            ("C1", &[("t0", 1), ("t1", 0), ("t1", 2)]),
        ])
    );
}

/// The second example of the javadoc: C0 subscribes to t0, C1 to t0 and t1,
/// C2 to t0, t1 and t2; the topics have 1, 2 and 3 partitions.
#[test]
fn kafka_javadoc_different_subscriptions() {
    let input = input_of(
        &[("t0", 1), ("t1", 2), ("t2", 3)],
        &[
            ("C0", None, &["t0"]),
            ("C1", None, &["t0", "t1"]),
            ("C2", None, &["t0", "t1", "t2"]),
        ],
    );
    let out = run::<RoundRobin>(&input).unwrap();
    assert_eq!(
        by_member(&input, &out),
        expected(&[
            ("C0", &[("t0", 0)]),
            ("C1", &[("t1", 0)]),
            ("C2", &[("t1", 1), ("t2", 0), ("t2", 1), ("t2", 2)]),
        ])
    );
}

/// Tasks go in topic *name* order, not input order; static members come
/// first by name, then dynamic ones by id; the iterator does not move for a
/// topic nobody subscribes to.
#[test]
fn ordering_rules() {
    let input = input_of(
        &[("zeta", 2), ("alpha", 3), ("middle", 4)],
        &[
            ("d-2", None, &["alpha", "zeta"]),
            ("s-x", Some("static-b"), &["alpha", "zeta"]),
            ("d-1", None, &["alpha", "zeta"]),
            ("s-y", Some("static-a"), &["alpha", "zeta"]),
        ],
    );
    // Order: s-y, s-x, d-1, d-2. alpha 0..3 -> s-y, s-x, d-1; zeta 0..2 ->
    // d-2, s-y; middle stays unowned.
    let out = run::<RoundRobin>(&input).unwrap();
    assert_eq!(
        by_member(&input, &out),
        expected(&[
            ("s-y", &[("alpha", 0), ("zeta", 1)]),
            ("s-x", &[("alpha", 1)]),
            ("d-1", &[("alpha", 2)]),
            ("d-2", &[("zeta", 0)]),
        ])
    );
    assert_eq!(&out.active_owner[5..], &[u32::MAX; 4]);
}

/// The iterator position carries across topics and wraps past members that
/// do not subscribe (here after the single subscriber of "b").
#[test]
fn iterator_carries_across_topics() {
    let input = input_of(
        &[("a", 1), ("b", 2), ("c", 3)],
        &[
            ("m0", None, &["a", "c"]),
            ("m1", None, &["a", "b", "c"]),
            ("m2", None, &["a", "c"]),
        ],
    );
    // a0 -> m0; b0 -> m1, b1 -> m1 (wraps past m2, m0); c0 -> m2, c1 -> m0,
    // c2 -> m1.
    let out = run::<RoundRobin>(&input).unwrap();
    assert_eq!(
        by_member(&input, &out),
        expected(&[
            ("m0", &[("a", 0), ("c", 1)]),
            ("m1", &[("b", 0), ("b", 1), ("c", 2)]),
            ("m2", &[("c", 0)]),
        ])
    );
}

/// Capacity is ignored: a member of capacity 5 gets an equal share.
#[test]
fn ignores_capacity() {
    let mut input = input_of(&[("t", 4)], &[("a", None, &["t"]), ("b", None, &["t"])]);
    input.members[0].capacity = 5;
    let out = run::<RoundRobin>(&input).unwrap();
    assert_eq!(out.active_counts(2), vec![2, 2]);
}

#[test]
fn no_members_and_no_topics() {
    let input = input_of(&[("t", 3)], &[]);
    assert_eq!(
        run::<RoundRobin>(&input).unwrap().active_owner,
        vec![u32::MAX; 3]
    );
    let input = input_of(&[], &[("a", None, &[])]);
    assert!(run::<RoundRobin>(&input).unwrap().active_owner.is_empty());
}

/// The offline JSON contract end to end.
#[test]
fn json_document() {
    let doc = json!({
        "topics": {"orders": 4, "payments": 2, "audit": 1},
        "members": [
            {"id": "m2", "topics": ["orders", "payments"], "capacity": 3,
             "active": [["orders", 0], ["orders", 1]]},
            {"id": "m1", "name": "worker-b", "topics": ["orders"]},
            {"id": "m3", "topics": []}
        ]
    });
    // Order m1 (static), m2, m3. orders 0..4 -> m1, m2, m1, m2; payments
    // -> m2, m2 (only subscriber); audit nobody's.
    let out = run_json::<RoundRobin>(&doc.to_string(), &["unused=1"]).unwrap();
    assert_eq!(
        out,
        json!({
            "m2": {"active": [["orders", 1], ["orders", 3], ["payments", 0], ["payments", 1]],
                   "learner": [], "standby": []},
            "m1": {"active": [["orders", 0], ["orders", 2]],
                   "learner": [], "standby": []},
            "m3": {"active": [], "learner": [], "standby": []}
        })
    );
}

#[test]
fn info() {
    let info = RoundRobin::info();
    assert_eq!(
        (info.name.as_str(), info.version.as_str()),
        ("round-robin", "1.0.0")
    );
    assert_eq!(info.capabilities, Default::default());
    assert!(info.params.is_empty());
}

/// Benchmark scale (10,000 members, 500,000 partitions, mixed
/// subscriptions), validated. Slow in debug builds, so opt-in:
/// `cargo test --release -p assignor-round-robin -- --ignored`.
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
    let out = run::<RoundRobin>(&input).unwrap();
    eprintln!(
        "round-robin at 10,000 x 500,000: {:?} (with validation)",
        start.elapsed()
    );
    assert_eq!(out.active_owner.len(), 500_000);
}
