//! The offline JSON contract: documents parse into the dense model and
//! render back unchanged, ambiguous documents are refused with a message
//! naming the culprit, and the contract checks refuse each kind of invalid
//! answer.

use assignd_guest_sdk::json::{assignment_to_json, input_to_json, parse_assignment, parse_input};
use assignd_guest_sdk::validate::{
    InputLimits, InvalidAssignment, ROWS_PER_TASK_MAX, Role, check_assignment, check_input,
    rows_max_for,
};
use assignd_guest_sdk::{GroupInput, NO_MEMBER, TaskMembers};
use proptest::prelude::*;

const DESIGN_EXAMPLE: &str = r#"{
  "topics": {"orders": 12, "payments": 4},
  "members": [
    {"id": "m1", "name": "worker-a", "topics": ["orders", "payments"],
     "rack": "az-1", "capacity": 1,
     "active": [["orders", 0], ["orders", 1]],
     "learner": [["payments", 2]],
     "standby": [],
     "lags": [["payments", 2, 1500]]}
  ],
  "params": {"acceptable_recovery_lag": "10000", "max_learners": "2", "num_standby": "0"}
}"#;

fn parse(text: &str) -> Result<GroupInput, String> {
    parse_input(text, &InputLimits::default()).map_err(|e| e.to_string())
}

#[test]
fn the_design_example_parses_into_dense_indices() {
    let input = parse(DESIGN_EXAMPLE).unwrap();
    assert_eq!(input.topic_offsets(), vec![0, 12, 16]);
    assert_eq!(input.topics_of(&input.members[0]), &[0, 1]);
    assert_eq!(input.active_owner[0], 0);
    assert_eq!(input.active_owner[1], 0);
    assert!(input.active_owner[2..].iter().all(|&m| m == NO_MEMBER));
    assert_eq!(
        input.learners,
        TaskMembers {
            task: vec![14],
            member: vec![0]
        }
    );
    assert_eq!(input.lags.iter().collect::<Vec<_>>(), vec![(14, 0, 1500)]);
    assert_eq!(input.param_u64("max_learners", 9), Ok(2));
    assert_eq!(input.param_u64("absent", 9), Ok(9));
}

const LOADS_EXAMPLE: &str = r#"{
  "topics": {"orders": 4, "payments": 2},
  "load_unit": "records/s",
  "members": [
    {"id": "m1", "topics": ["orders", "payments"], "load_capacity": 500, "utilisation": 0.7,
     "active": [["orders", 0], ["orders", 1]]},
    {"id": "m2", "topics": ["orders"], "active": [["orders", 2]]}
  ],
  "loads": [["orders", 0, 120.5], ["payments", 1, 0], ["gone", 0, 3], ["orders", 9, 1],
            ["orders", 2, 40]]
}"#;

#[test]
fn loads_parse_into_task_rows_and_render_back() {
    let input = parse(LOADS_EXAMPLE).unwrap();
    assert_eq!(input.load_unit.as_deref(), Some("records/s"));
    assert_eq!(input.members[0].load_capacity, Some(500.0));
    assert_eq!(input.members[0].utilisation, Some(0.7));
    assert_eq!(
        (input.members[1].load_capacity, input.members[1].utilisation),
        (None, None)
    );
    // Rows of a topic or partition that does not exist are dropped.
    assert_eq!(
        input.loads.iter().collect::<Vec<_>>(),
        vec![(0, 120.5), (5, 0.0), (2, 40.0)]
    );
    assert_eq!(
        input.task_loads(),
        vec![Some(120.5), None, Some(40.0), None, None, Some(0.0)]
    );
    let doc = input_to_json(&input);
    assert_eq!(doc["load_unit"], "records/s");
    assert_eq!(
        doc["loads"],
        serde_json::json!([
            ["orders", 0, 120.5],
            ["orders", 2, 40.0],
            ["payments", 1, 0.0]
        ])
    );
    assert_eq!(doc["members"][0]["load_capacity"], 500.0);
    assert_eq!(doc["members"][0]["utilisation"], 0.7);
    assert!(doc["members"][1].get("load_capacity").is_none());
    let without = parse(r#"{"topics": {"t": 1}, "members": []}"#).unwrap();
    let doc = input_to_json(&without);
    assert!(
        doc.get("load_unit").is_none() && doc.get("loads").is_none(),
        "{doc}"
    );
}

#[test]
fn bad_loads_are_refused_naming_the_field() {
    let doc = |unit: &str, member: &str, loads: &str| {
        format!(
            r#"{{"topics": {{"t": 2}}, {unit} "members": [{{"id": "a", "topics": ["t"] {member}}}],
                "loads": [{loads}]}}"#
        )
    };
    let unit = r#""load_unit": "records/s","#;
    for (text, said) in [
        (doc(unit, "", r#"["t", 0, -1]"#), "load -1"),
        (doc(unit, "", r#"["t", 0, 2e15]"#), "task 0 has load"),
        (doc(unit, "", r#"["t", -1, 1]"#), "partition -1"),
        (doc("", "", r#"["t", 0, 1]"#), "no load_unit"),
        (
            doc(r#""load_unit": "records per s","#, "", ""),
            "load_unit \"records per s\"",
        ),
        (doc(r#""load_unit": "","#, "", ""), "load_unit \"\""),
        (doc(unit, r#", "load_capacity": 0"#, ""), "load_capacity 0"),
        (
            doc(unit, r#", "utilisation": 10.5"#, ""),
            "utilisation 10.5",
        ),
        (
            doc(unit, r#", "utilisation": -0.1"#, ""),
            "utilisation -0.1",
        ),
    ] {
        let error = parse(&text).expect_err(&text);
        assert!(error.contains(said), "{said}: {error}");
    }
    let long = format!(r#""load_unit": "{}","#, "u".repeat(33));
    assert!(
        parse(&doc(&long, "", ""))
            .unwrap_err()
            .contains("1 to 32 bytes")
    );
    let longest = format!(r#""load_unit": "{}","#, "u".repeat(32));
    assert!(
        parse(&doc(
            &longest,
            r#", "load_capacity": 1e15, "utilisation": 10"#,
            r#"["t", 1, 1e15]"#
        ))
        .is_ok()
    );
}

#[test]
fn optional_fields_take_their_defaults() {
    let input =
        parse(r#"{"topics": {"t": 1}, "members": [{"id": "a", "topics": ["t"]}]}"#).unwrap();
    let member = &input.members[0];
    assert_eq!(
        (
            member.capacity,
            member.name.as_deref(),
            member.rack.as_deref()
        ),
        (1, None, None)
    );
    assert!(input.params.is_empty());
}

#[test]
fn ambiguous_documents_are_refused_by_name() {
    let cases = [
        (
            r#"{"topics": {"t": 1.5}, "members": []}"#,
            "partition count must be a whole number",
        ),
        (
            r#"{"topics": {"t": 2000000}, "members": []}"#,
            "more than the limit of 1000000",
        ),
        (
            r#"{"topics": {"t": 1}, "members": [{"id": "a", "topics": ["t"], "active": [["t", -1]]}]}"#,
            "active names partition -1 of \"t\", which is negative",
        ),
        (
            r#"{"topics": {"t": 1}, "members": [{"id": "a", "topics": ["t"], "capacity": 0}]}"#,
            "capacity 0 must be a whole number of at least 1",
        ),
        (
            r#"{"topics": {"t": 1}, "members": [{"id": "a", "topics": ["t"], "lags": [["t", 0, -1]]}]}"#,
            "lag -1 for t-0 is negative",
        ),
        (
            r#"{"topics": {"t": 1}, "members": [{"id": "a", "topics": ["t"], "lags": [["t", 0, 1], ["t", 0, 2]]}]}"#,
            "more than once",
        ),
        (
            r#"{"topics": {"t": 1}, "members": [{"id": "a", "name": "n", "topics": ["t"]}, {"id": "b", "name": "n", "topics": ["t"]}]}"#,
            "member name \"n\" is used by two members",
        ),
        (
            r#"{"topics": {"t": 1}, "members": [{"id": "", "topics": ["t"]}]}"#,
            "member id \"\" must be 1 to 255 bytes long",
        ),
        (
            r#"{"topics": {"t": 1}, "members": [], "params": {"k": [1]}}"#,
            "param \"k\" must be a string, number or boolean",
        ),
    ];
    for (doc, needle) in cases {
        let error = parse(doc).unwrap_err();
        assert!(
            error.contains(needle),
            "{doc}: expected {needle:?} in {error:?}"
        );
    }
}

/// As in Kafka (and docs/design.md's offline contract): a subscription to a
/// topic not in `topics` is kept out of the member's subscription, and
/// tasks of topics or partitions that do not exist are dropped from
/// `active`, `learner`, `standby` and `lags`.
#[test]
fn missing_topics_and_partitions_are_ignored_not_refused() {
    let input = parse(
        r#"{"topics": {"t": 2}, "members": [
            {"id": "a", "topics": ["t", "gone"], "active": [["t", 0], ["gone", 0], ["t", 7]],
             "learner": [["gone", 1]], "standby": [["t", 9]], "lags": [["gone", 0, 5], ["t", 1, 3]]},
            {"id": "b", "topics": ["gone"], "active": [["gone", 0]]}
        ]}"#,
    )
    .unwrap();
    assert_eq!(input.topics_of(&input.members[0]), [0]);
    assert!(input.topics_of(&input.members[1]).is_empty());
    assert_eq!(input.active_owner, [0, NO_MEMBER]);
    assert!(input.learners.is_empty() && input.standbys.is_empty());
    assert_eq!(input.lags.iter().collect::<Vec<_>>(), [(1, 0, 3)]);
}

#[test]
fn answers_render_every_member_in_input_order() {
    let input = parse(
        DESIGN_EXAMPLE
            .replace("\"standby\": []", "\"standby\": [], \"rack\": \"x\"")
            .as_str(),
    );
    // A duplicate key is a JSON error, not a silent overwrite.
    assert!(input.is_err());
    let input = parse(
        r#"{"topics": {"t": 3}, "members": [{"id": "z", "topics": ["t"]}, {"id": "a", "topics": ["t"]}]}"#,
    )
    .unwrap();
    let mut out = input.empty_assignment();
    out.active_owner = vec![1, 0, 1];
    out.standbys.push(1, 1);
    let doc = assignment_to_json(&input, &out);
    assert_eq!(
        doc.to_string(),
        r#"{"z":{"active":[["t",1]],"learner":[],"standby":[]},"a":{"active":[["t",0],["t",2]],"learner":[],"standby":[["t",1]]}}"#
    );
    let mut back = parse_assignment(&input, &doc.to_string()).unwrap();
    back.normalize();
    out.normalize();
    assert_eq!(back, out);
}

#[test]
fn each_invalid_answer_is_refused_with_its_own_error() {
    let input = parse(
        r#"{"topics": {"t": 2, "u": 1, "nobody": 1},
            "members": [{"id": "a", "topics": ["t"]}, {"id": "b", "topics": ["t", "u"]}]}"#,
    )
    .unwrap();
    let valid = |f: &dyn Fn(&mut assignd_guest_sdk::Assignment)| {
        let mut out = input.empty_assignment();
        out.active_owner = vec![0, 1, 1, NO_MEMBER];
        f(&mut out);
        check_assignment(&input, &out, 4)
    };
    assert_eq!(valid(&|_| {}), Ok(()));
    assert!(matches!(
        valid(&|o| {
            o.active_owner.pop();
        }),
        Err(InvalidAssignment::WrongTaskCount {
            expected: 4,
            got: 3
        })
    ));
    assert!(matches!(
        valid(&|o| o.active_owner[0] = NO_MEMBER),
        Err(InvalidAssignment::Unassigned { .. })
    ));
    assert!(matches!(
        valid(&|o| o.active_owner[2] = 0),
        Err(InvalidAssignment::NotSubscribed {
            role: Role::Active,
            ..
        })
    ));
    assert!(matches!(
        valid(&|o| o.active_owner[3] = 1),
        Err(InvalidAssignment::NotSubscribed { .. })
    ));
    assert!(matches!(
        valid(&|o| o.active_owner[0] = 7),
        Err(InvalidAssignment::UnknownMember {
            role: Role::Active,
            member: 7
        })
    ));
    assert!(matches!(
        valid(&|o| o.learners.push(0, 0)),
        Err(InvalidAssignment::OnActiveOwner {
            role: Role::Learner,
            ..
        })
    ));
    assert!(matches!(
        valid(&|o| o.standbys.push(2, 0)),
        Err(InvalidAssignment::NotSubscribed {
            role: Role::Standby,
            ..
        })
    ));
    assert!(matches!(
        valid(&|o| o.standbys.push(9, 0)),
        Err(InvalidAssignment::UnknownTask { task: 9, .. })
    ));
    assert!(matches!(
        valid(&|o| {
            o.learners.push(0, 1);
            o.standbys.push(0, 1);
        }),
        Err(InvalidAssignment::Duplicate {
            role: Role::Standby,
            ..
        })
    ));
    assert!(matches!(
        valid(&|o| {
            o.learners.task.push(0);
        }),
        Err(InvalidAssignment::ColumnLengthMismatch { .. })
    ));
    assert!(matches!(
        valid(&|o| for _ in 0..5 {
            o.learners.push(0, 1)
        }),
        Err(InvalidAssignment::TooManyRows {
            rows: 5,
            max: 4,
            ..
        })
    ));
}

fn arbitrary_input() -> impl Strategy<Value = GroupInput> {
    (1usize..5, 0usize..6).prop_flat_map(|(topics, members)| {
        (
            proptest::collection::vec(0u32..20, topics),
            proptest::collection::vec(
                (
                    proptest::collection::vec(any::<bool>(), topics),
                    1u32..4,
                    any::<bool>(),
                    0u32..3,
                ),
                members,
            ),
            proptest::collection::vec((any::<u32>(), any::<u32>(), 0u64..100_000, 0u8..4), 0..30),
        )
            .prop_map(move |(partitions, members, rows)| {
                let mut input = GroupInput::default();
                for (t, p) in partitions.iter().enumerate() {
                    input.topics.push(assignd_guest_sdk::Topic {
                        name: format!("topic-{t}"),
                        partitions: *p,
                    });
                }
                for (m, (subs, capacity, named, rack)) in members.iter().enumerate() {
                    // Some members declare loads, some do not.
                    let load_capacity = named.then(|| f64::from(*capacity) * 100.5);
                    let utilisation = (*rack > 0).then(|| f64::from(*rack) * 0.35);
                    let subscribed = (0..topics as u32).filter(|&t| subs[t as usize]).collect();
                    let subscription = input.intern_subscription(subscribed);
                    input.members.push(assignd_guest_sdk::Member {
                        id: format!("member-{m}"),
                        name: named.then(|| format!("name-{m}")),
                        rack: (*rack > 0).then(|| format!("rack-{rack}")),
                        capacity: *capacity,
                        subscription,
                        load_capacity,
                        utilisation,
                    });
                }
                let tasks = input.task_count() as u32;
                input.active_owner = vec![NO_MEMBER; tasks as usize];
                if tasks > 0 && !input.members.is_empty() {
                    let count = input.members.len() as u32;
                    let mut seen_lags = std::collections::HashSet::new();
                    for (task, member, lag, kind) in rows {
                        let (task, member) = (task % tasks, member % count);
                        match kind {
                            0 => {
                                input.active_owner[task as usize] = member;
                                input.load_unit = Some("records/s".into());
                                input.loads.push(task, lag as f64 / 7.0);
                            }
                            1 => input.learners.push(task, member),
                            2 => input.standbys.push(task, member),
                            _ => {
                                if seen_lags.insert((task, member)) {
                                    input.lags.push(task, member, lag)
                                }
                            }
                        }
                    }
                }
                input.params.insert("num_standby".into(), "1".into());
                input
            })
    })
}

fn canonical(mut input: GroupInput) -> GroupInput {
    // Rendering sorts loads by task, keeping the order of a task's rows.
    let mut loads: Vec<(u32, f64)> = input.loads.iter().collect();
    loads.sort_by_key(|row| row.0);
    input.loads = Default::default();
    for (task, load) in loads {
        input.loads.push(task, load);
    }
    input.learners.sort();
    input.standbys.sort();
    let mut lags: Vec<_> = input.lags.iter().collect();
    lags.sort_unstable();
    input.lags = Default::default();
    for (t, m, l) in lags {
        input.lags.push(t, m, l);
    }
    input
}

proptest! {
    #[test]
    fn rendering_an_input_and_parsing_it_back_gives_the_same_input(input in arbitrary_input()) {
        prop_assert!(check_input(&input, &InputLimits::default()).is_ok());
        let text = input_to_json(&input).to_string();
        let back = parse(&text).map_err(TestCaseError::fail)?;
        prop_assert_eq!(canonical(back), canonical(input));
    }
}

/// A valid active assignment of `input`: each task on the first member
/// that subscribes to its topic, counting from the task's number.
fn some_valid_owners(input: &GroupInput) -> Vec<u32> {
    let offsets = input.topic_offsets();
    let count = input.members.len() as u32;
    (0..input.task_count() as u32)
        .map(|task| {
            let topic = offsets.partition_point(|&o| o <= task) as u32 - 1;
            (0..count)
                .map(|k| (task + k) % count.max(1))
                .find(|&m| {
                    let set = input.members[m as usize].subscription as usize;
                    input.subscriptions[set].contains(&topic)
                })
                .unwrap_or(NO_MEMBER)
        })
        .collect()
}

proptest! {
    /// The counting check of learner and standby rows agrees with the
    /// obvious one (a set of every placement): same verdict, and when the
    /// only fault is a placement made twice, that is the error.
    #[test]
    fn the_row_checks_agree_with_a_set_of_every_placement(
        input in arbitrary_input(),
        rows in proptest::collection::vec((any::<u32>(), any::<u32>(), any::<bool>()), 0..40),
    ) {
        let mut out = input.empty_assignment();
        out.active_owner = some_valid_owners(&input);
        let (tasks, members) = (input.task_count() as u32, input.members.len() as u32);
        if tasks > 0 && members > 0 {
            for (task, member, standby) in rows {
                let (task, member) = (task % tasks, member % members);
                if standby { out.standbys.push(task, member) } else { out.learners.push(task, member) }
            }
        }
        let offsets = input.topic_offsets();
        let subscribes = |task: u32, member: u32| {
            let topic = offsets.partition_point(|&o| o <= task) as u32 - 1;
            let set = input.members[member as usize].subscription as usize;
            input.subscriptions[set].contains(&topic)
        };
        let all: Vec<(u32, u32)> = out.learners.iter().chain(out.standbys.iter()).collect();
        let misplaced = all
            .iter()
            .any(|&(t, m)| !subscribes(t, m) || out.active_owner[t as usize] == m);
        let distinct: std::collections::HashSet<_> = all.iter().collect();
        let duplicated = distinct.len() < all.len();
        let verdict = check_assignment(&input, &out, usize::MAX);
        prop_assert_eq!(verdict.is_ok(), !misplaced && !duplicated, "{:?}", verdict);
        if duplicated && !misplaced {
            let is_duplicate = matches!(verdict, Err(InvalidAssignment::Duplicate { .. }));
            prop_assert!(is_duplicate, "{:?}", verdict);
        }
    }
}

/// The rows an answer may hold follow its input: so many per task (no
/// more than the other members to hold them), under the absolute cap.
#[test]
fn the_rows_an_answer_may_hold_follow_its_input() {
    let input = |tasks: u32, members: usize| {
        let text = format!(
            r#"{{"topics": {{"t": {tasks}}}, "members": [{}]}}"#,
            (0..members)
                .map(|m| format!(r#"{{"id": "m{m}", "topics": ["t"]}}"#))
                .collect::<Vec<_>>()
                .join(",")
        );
        parse(&text).unwrap()
    };
    let big = input(100_000, 20);
    assert_eq!(rows_max_for(&big, ROWS_PER_TASK_MAX, usize::MAX), 800_000);
    assert_eq!(rows_max_for(&big, ROWS_PER_TASK_MAX, 500_000), 500_000);
    // Three members: each task has two others to hold its rows.
    assert_eq!(
        rows_max_for(&input(100_000, 3), ROWS_PER_TASK_MAX, usize::MAX),
        200_000
    );
    // Small inputs keep room for the error that names a misplaced row.
    assert_eq!(
        rows_max_for(&input(4, 1), ROWS_PER_TASK_MAX, usize::MAX),
        1024
    );
    // An answer over it is refused as too large, whatever its rows.
    let mut out = big.empty_assignment();
    out.active_owner = some_valid_owners(&big);
    for task in 0..100_000 {
        for member in 0..9 {
            out.standbys
                .push(task, (out.active_owner[task as usize] + 1 + member) % 20);
        }
    }
    assert_eq!(
        check_assignment(
            &big,
            &out,
            rows_max_for(&big, ROWS_PER_TASK_MAX, usize::MAX)
        ),
        Err(InvalidAssignment::TooManyRows {
            role: Role::Standby,
            rows: 900_000,
            max: 800_000
        })
    );
    out.standbys = TaskMembers::default();
    assert_eq!(
        check_assignment(
            &big,
            &out,
            rows_max_for(&big, ROWS_PER_TASK_MAX, usize::MAX)
        ),
        Ok(())
    );
}
