//! The host runs assignors of both versions of the assignor interface, with
//! the real binary:
//!
//! - a component built for 0.1 (`tests/fixtures/sticky-wit-0.1.wasm`, the
//!   built-in `sticky` before loads existed) answers an input with loads
//!   offline (it gets the input without them), and, uploaded, serves a
//!   group whose members report loads, through a join;
//! - a 0.2 guest (`tests/guests/load-echo`) sees the loads: it puts every
//!   task on the member with the largest load capacity, and with
//!   `echo=yes` refuses naming the unit, the loads and the members'
//!   capacities and utilisations it got: offline, and live, where they are
//!   what the members reported.
//!
//! `assignd info` and the registry say which version each was built for
//! and whether it balances load.

use crate::common::{self, Member, Server};

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use assignd_guest_sdk::json::{parse_assignment, parse_input};
use assignd_guest_sdk::validate::{InputLimits, check_assignment};
use serde_json::{Value, json};

const EXIT_GUEST_FAILED: i32 = 3;

/// Orders' partitions 0 and 1 on `a`, loads of three tasks known (one of
/// a topic that does not exist), `b` declares the largest load capacity.
const INPUT_WITH_LOADS: &str = r#"{
  "topics": {"orders": 6, "payments": 2},
  "load_unit": "records/s",
  "members": [
    {"id": "a", "topics": ["orders", "payments"], "load_capacity": 100, "utilisation": 0.5,
     "active": [["orders", 0], ["orders", 1]]},
    {"id": "b", "topics": ["orders", "payments"], "load_capacity": 400},
    {"id": "c", "topics": ["orders"]}
  ],
  "loads": [["orders", 0, 120.5], ["payments", 1, 7], ["gone", 0, 1]]
}"#;

fn fixture_0_1() -> PathBuf {
    common::workspace_root().join("tests/fixtures/sticky-wit-0.1.wasm")
}

fn load_echo() -> PathBuf {
    common::bad_guest("test-guest-load-echo")
}

fn info(module: &str) -> Value {
    let output = common::assignd(&["info", "--module", module]);
    assert_eq!(output.status.code(), Some(0), "{}", common::stderr(&output));
    serde_json::from_str(&common::stdout(&output)).unwrap()
}

#[test]
fn info_names_the_interface_version_and_the_load_capability() {
    let old = info(fixture_0_1().to_str().unwrap());
    assert_eq!(
        (&old["name"], &old["wit_version"]),
        (&json!("sticky"), &json!("0.1.0"))
    );
    assert_eq!(old["capabilities"]["load"], false, "{old}");
    let new = info(load_echo().to_str().unwrap());
    assert_eq!(new["wit_version"], "0.2.0", "{new}");
    assert_eq!(new["capabilities"]["load"], true, "{new}");
    let builtin = info("sticky");
    assert_eq!(builtin["wit_version"], "0.2.0", "{builtin}");
}

#[test]
fn a_0_1_component_answers_an_input_with_loads() {
    let dir = common::scratch("offline-0.1");
    let input_path = common::write(&dir, "input.json", INPUT_WITH_LOADS);
    let output = common::assignd(&[
        "run",
        "--module",
        fixture_0_1().to_str().unwrap(),
        "--input",
        input_path.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", common::stderr(&output));
    let input = parse_input(INPUT_WITH_LOADS, &InputLimits::default()).unwrap();
    let answer = parse_assignment(&input, &common::stdout(&output)).unwrap();
    check_assignment(&input, &answer, 1 << 20).unwrap();
    assert!(answer.active_owner.iter().all(|&m| m < 3), "{answer:?}");
    // Sticky: a's tasks stay.
    assert_eq!(&answer.active_owner[..2], &[0, 0]);
}

#[test]
fn a_0_2_guest_sees_the_loads_offline() {
    let dir = common::scratch("offline-0.2");
    let input_path = common::write(&dir, "input.json", INPUT_WITH_LOADS);
    let module = load_echo();
    let run = |params: &[&str]| {
        let mut args = vec![
            "run",
            "--module",
            module.to_str().unwrap(),
            "--input",
            input_path.to_str().unwrap(),
        ];
        args.extend_from_slice(params);
        common::assignd(&args)
    };
    let output = run(&[]);
    assert_eq!(output.status.code(), Some(0), "{}", common::stderr(&output));
    let input = parse_input(INPUT_WITH_LOADS, &InputLimits::default()).unwrap();
    let answer = parse_assignment(&input, &common::stdout(&output)).unwrap();
    assert_eq!(answer.active_owner, vec![1; 8], "every task on b");

    let output = run(&["--param", "echo=yes"]);
    common::assert_one_error_line(
        &output,
        EXIT_GUEST_FAILED,
        "load_unit=records/s loads=[orders-0=120.5 payments-1=7] \
         members=[a:cap=100:util=0.5 b:cap=400:util=- c:cap=-:util=-]",
    );
}

/// Heartbeats until the group is stable with every task active exactly
/// once and `per_member` on each member.
fn converge(server: &Server, group: &str, members: &mut [Member], per_member: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for member in members.iter_mut() {
            member.heartbeat(server, group);
        }
        let (status, view) = server.call("GET", &format!("/v1/groups/{group}"), None);
        assert_eq!(status, 200, "{view}");
        let stable = view["state"] == "stable"
            && members.iter().all(|m| {
                m.revoking.is_empty()
                    && Some(m.member_epoch) == view["target_epoch"].as_u64()
                    && m.active.len() == per_member
            });
        if stable {
            let all: BTreeSet<_> = members.iter().flat_map(|m| m.active.clone()).collect();
            assert_eq!(all.len(), per_member * members.len(), "each task once");
            return;
        }
        assert!(Instant::now() < deadline, "{group} not stable: {view}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn group_config(assignor: &str, params: Value) -> Value {
    json!({
        "topics": [{"name": "orders", "partitions": 6}],
        "assignor": assignor,
        "params": params,
        "load_unit": "records/s",
        // No smoothing: the input holds the latest reports as they are.
        "load_half_life_ms": 0,
        "expansion_timeout_ms": 50,
        "learners": "off",
    })
}

/// One heartbeat of `member` reporting its load capacity, its
/// utilisation if given, and a load of `per_task(partition)` for each of
/// its active tasks.
fn beat_reporting(
    server: &Server,
    group: &str,
    member: &mut Member,
    capacity: f64,
    utilisation: Option<f64>,
    per_task: fn(u64) -> f64,
) {
    let loads: Vec<Value> = member
        .active
        .iter()
        .map(|(topic, partition)| json!([topic, partition, per_task(*partition)]))
        .collect();
    let mut extra = json!({"load_capacity": capacity, "loads": loads});
    if let Some(utilisation) = utilisation {
        extra["utilisation"] = json!(utilisation);
    }
    let (status, answer) = member.try_heartbeat(server, group, extra);
    assert_eq!(status, 200, "{answer}");
}

/// The message of the group's latest assignor failure once it contains
/// `needle`, `member` heartbeating meanwhile.
fn failure_containing(server: &Server, group: &str, member: &mut Member, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        member.heartbeat(server, group);
        let (_, view) = server.call("GET", &format!("/v1/groups/{group}"), None);
        let message = view["assignor_failures"]["message"].as_str().unwrap_or("");
        if message.contains(needle) {
            return message.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no failure with {needle:?}: {view}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Binds the group `new` to load-echo with `params`.
fn bind(server: &Server, params: Value) {
    let (status, view) = server.call(
        "PUT",
        "/v1/groups/new/assignor",
        Some(&json!({"module": "load-echo@0.2.0", "params": params})),
    );
    assert_eq!(status, 200, "{view}");
}

/// A 0.1 component serves a group whose members report loads: it gets the
/// input without them, and the group converges, again after a join.
#[test]
fn a_0_1_component_serves_a_group_whose_members_report_loads() {
    let server = Server::start(&common::scratch("live-0.1"), &[]);
    let bytes = std::fs::read(fixture_0_1()).unwrap();
    let (status, module) = server.upload("sticky-old", "0.1.0", &bytes);
    assert_eq!(status, 201, "{module}");
    assert_eq!(module["info"]["wit_version"], "0.1.0", "{module}");
    assert_eq!(module["info"]["capabilities"]["load"], false, "{module}");
    let config = group_config("sticky-old@0.1.0", json!({}));
    let (status, view) = server.call("PUT", "/v1/groups/old", Some(&config));
    assert_eq!(status, 201, "{view}");
    let mut members: Vec<Member> = ["m1", "m2"]
        .into_iter()
        .map(|name| Member::join(&server, "old", name))
        .collect();
    converge(&server, "old", &mut members, 3);
    for member in &mut members {
        beat_reporting(&server, "old", member, 50.0, Some(0.5), |p| p as f64);
    }
    members.push(Member::join(&server, "old", "m3"));
    converge(&server, "old", &mut members, 2);
    // The captured input carries the loads, and replays offline.
    let (status, input) = server.call("GET", "/v1/groups/old/assignor-input", None);
    assert_eq!(status, 200, "{input}");
    assert_eq!(input["load_unit"], "records/s", "{input}");
    assert_eq!(input["loads"].as_array().map(Vec::len), Some(6), "{input}");
    let capacities: Vec<&Value> = input["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["load_capacity"])
        .collect();
    assert_eq!(
        capacities.iter().filter(|c| **c == 50.0).count(),
        2,
        "{input}"
    );
    let dir = common::scratch("live-0.1-capture");
    let captured = common::write(&dir, "input.json", input.to_string());
    let output = common::assignd(&[
        "run",
        "--module",
        load_echo().to_str().unwrap(),
        "--input",
        captured.to_str().unwrap(),
        "--param",
        "echo=yes",
    ]);
    common::assert_one_error_line(
        &output,
        EXIT_GUEST_FAILED,
        "loads=[orders-0=0 orders-1=1 orders-2=2 orders-3=3 orders-4=4 orders-5=5]",
    );
}

/// A 0.2 guest sees what members report: their load capacities decide its
/// answer, and its refusal names the tasks' loads and the utilisation.
#[test]
fn a_0_2_guest_sees_the_loads_members_report() {
    let server = Server::start(&common::scratch("live-0.2"), &[]);
    let bytes = std::fs::read(load_echo()).unwrap();
    let (status, module) = server.upload("load-echo", "0.2.0", &bytes);
    assert_eq!(status, 201, "{module}");
    assert_eq!(module["info"]["capabilities"]["load"], true, "{module}");
    let config = group_config("load-echo@0.2.0", json!({}));
    let (status, view) = server.call("PUT", "/v1/groups/new", Some(&config));
    assert_eq!(status, 201, "{view}");
    let mut small = Member::join(&server, "new", "small");
    let mut big = Member::join(&server, "new", "big");
    beat_reporting(&server, "new", &mut small, 100.0, None, |_| 0.0);
    beat_reporting(&server, "new", &mut big, 400.0, Some(0.5), |_| 0.0);
    // A new binding asks for a target: every task on the member with the
    // larger capacity.
    bind(&server, json!({"echo": "no"}));
    let deadline = Instant::now() + Duration::from_secs(60);
    while big.active.len() < 6 || !small.held().is_empty() {
        small.heartbeat(&server, "new");
        big.heartbeat(&server, "new");
        assert!(Instant::now() < deadline, "big never got every task");
        std::thread::sleep(Duration::from_millis(20));
    }
    beat_reporting(&server, "new", &mut big, 400.0, Some(0.5), |p| {
        10.0 * p as f64 + 0.5
    });

    bind(&server, json!({"echo": "yes"}));
    let message = failure_containing(&server, "new", &mut big, "load_unit=records/s");
    for said in [
        "loads=[orders-0=0.5 orders-1=10.5 orders-2=20.5 orders-3=30.5 orders-4=40.5 orders-5=50.5]",
        &format!("{}:cap=100:util=-", small.member_id),
        &format!("{}:cap=400:util=0.5", big.member_id),
    ] {
        assert!(message.contains(said), "{said}: {message}");
    }
}
