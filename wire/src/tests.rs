use serde_json::json;

use crate::{
    ErrorCode, HeartbeatRequest, HeartbeatResponseBody, LagRow, LoadItem, LoadReport,
    TASKS_PER_LIST_MAX, Task,
};

fn tasks(topic: &str, partitions: impl IntoIterator<Item = u32>) -> Vec<Task> {
    partitions
        .into_iter()
        .map(|p| Task::new(topic, p))
        .collect()
}

fn answer(task_ranges: bool) -> HeartbeatResponseBody {
    HeartbeatResponseBody {
        member_id: "m-1".into(),
        member_epoch: 7,
        heartbeat_interval_ms: 3_000,
        active: [
            tasks("orders", 0..3),
            tasks("orders", [7]),
            tasks("payments", 1..3),
        ]
        .concat(),
        revoking: tasks("orders", [9]),
        learner: Vec::new(),
        standby: tasks("payments", [5, 6, 8]),
        draining: false,
        drained: false,
        lease_ms: Some(45_000),
        unreached_lease_ms: Some(55_000),
        unreached_flight_ms: Some(6_000),
        load_report: LoadReport::None,
        task_ranges,
    }
}

/// The host writes an answer in either form; the reader the client uses
/// gets the same tasks back from both.
#[test]
fn an_answer_round_trips_in_ranges_and_in_pairs() {
    let ranged = serde_json::to_value(answer(true)).unwrap();
    assert_eq!(
        ranged,
        json!({
            "member_id": "m-1", "member_epoch": 7, "heartbeat_interval_ms": 3000,
            "active": [["orders", 0, 2], ["orders", 7], ["payments", 1, 2]],
            "revoking": [["orders", 9]], "learner": [],
            "standby": [["payments", 5, 6], ["payments", 8]],
            "draining": false, "drained": false, "lease_ms": 45000,
            "unreached_lease_ms": 55000, "unreached_flight_ms": 6000,
        })
    );
    let pairs = serde_json::to_value(answer(false)).unwrap();
    assert_eq!(
        pairs["active"],
        json!([
            ["orders", 0],
            ["orders", 1],
            ["orders", 2],
            ["orders", 7],
            ["payments", 1],
            ["payments", 2]
        ])
    );
    // `task_ranges` is how to write, not part of the answer.
    let read = |value| serde_json::from_value::<HeartbeatResponseBody>(value).unwrap();
    assert_eq!(read(ranged), answer(false));
    assert_eq!(read(pairs), answer(false));
}

/// What the client sends, the host reads: `owned` as ranges, expanded.
#[test]
fn a_request_round_trips_with_owned_as_ranges() {
    let request = HeartbeatRequest {
        member_id: "m-1".into(),
        member_name: None,
        member_epoch: 7,
        topics: None,
        rack: None,
        capacity: Some(1),
        owned: Some([tasks("orders", 0..100_000), tasks("payments", [0, 1, 2, 5])].concat()),
        lags: Some(vec![LagRow("orders".into(), 3, 1_500)]),
        drain: false,
        task_ranges: true,
        endpoint: None,
        metadata: None,
        loads: None,
        utilisation: None,
        load_capacity: None,
    };
    let json = serde_json::to_value(&request).unwrap();
    assert_eq!(
        json,
        json!({
            "member_id": "m-1", "member_epoch": 7, "rack": null, "capacity": 1,
            "owned": [["orders", 0, 99_999], ["payments", 0, 2], ["payments", 5]],
            "lags": [["orders", 3, 1500]], "drain": false, "task_ranges": true,
        })
    );
    assert_eq!(
        serde_json::from_value::<HeartbeatRequest>(json).unwrap(),
        request
    );
}

/// A join as the e2e tests send it: every optional field absent.
#[test]
fn a_minimal_join_reads_with_defaults() {
    let request: HeartbeatRequest = serde_json::from_value(json!({
        "member_id": "", "member_epoch": 0, "topics": ["orders"],
    }))
    .unwrap();
    assert_eq!(
        request,
        HeartbeatRequest {
            topics: Some(vec!["orders".into()]),
            ..HeartbeatRequest::default()
        }
    );
    let owned_null: HeartbeatRequest =
        serde_json::from_value(json!({"member_id": "m", "member_epoch": 3, "owned": null}))
            .unwrap();
    assert_eq!(owned_null.owned, None);
    let unknown = serde_json::from_value::<HeartbeatRequest>(
        json!({"member_id": "m", "member_epoch": 3, "ownd": []}),
    );
    assert!(unknown.is_err(), "unknown fields are refused");
}

#[test]
fn the_reader_refuses_backward_ranges_long_lists_and_odd_items() {
    let owned = |items| {
        serde_json::from_value::<HeartbeatRequest>(
            json!({"member_id": "m", "member_epoch": 3, "owned": items}),
        )
        .map(|request| request.owned.unwrap().len())
        .map_err(|error| error.to_string())
    };
    assert!(
        owned(json!([["orders", 5, 2]]))
            .unwrap_err()
            .contains("ends before it starts")
    );
    let max = u32::try_from(TASKS_PER_LIST_MAX).unwrap();
    assert_eq!(owned(json!([["a", 0, max - 1]])), Ok(max as usize));
    assert!(
        owned(json!([["a", 0, max - 1], ["b", 0]]))
            .unwrap_err()
            .contains(&format!("more than {TASKS_PER_LIST_MAX} tasks"))
    );
    // Refused before expanding: a range of 4 billion tasks costs nothing.
    assert!(owned(json!([["a", 0, u32::MAX]])).is_err());
    assert!(owned(json!([["a"]])).is_err());
    assert!(owned(json!([["a", 0, 1, 2]])).is_err());
}

/// Hosts before `lease_ms`, `unreached_lease_ms`, `draining` or `drained`
/// left them out.
#[test]
fn an_answer_without_its_newer_fields_reads_as_unknown_or_false() {
    let read: HeartbeatResponseBody = serde_json::from_value(json!({
        "member_id": "m", "member_epoch": 4, "heartbeat_interval_ms": 3000,
        "active": [["orders", 0]], "revoking": [], "learner": [], "standby": [],
    }))
    .unwrap();
    assert_eq!(
        (read.lease_ms, read.draining, read.drained, read.active),
        (None, false, false, tasks("orders", [0]))
    );
    assert_eq!(
        (read.unreached_lease_ms, read.unreached_flight_ms),
        (None, None)
    );
}

#[test]
fn every_error_code_is_spelled_once_in_snake_case_and_reads_back() {
    let mut spelled = std::collections::BTreeSet::new();
    for &code in ErrorCode::ALL {
        let text = code.as_str();
        assert!(
            !text.is_empty() && text.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
            "{text:?} is not snake_case"
        );
        assert!(spelled.insert(text), "{text:?} is spelled twice");
        assert_eq!(ErrorCode::parse(text), Some(code));
    }
    assert_eq!(ErrorCode::parse("a_code_a_newer_host_may_add"), None);
}

/// Load items in both forms: a task's `[topic, partition, load]` and a
/// range's `[topic, first, last, load]`; integer and fractional loads; the
/// writer picks the short form for a single task.
#[test]
fn load_items_read_and_write_in_both_forms() {
    let request: HeartbeatRequest = serde_json::from_value(json!({
        "member_id": "m", "member_epoch": 3,
        "loads": [["orders", 3, 120.5], ["orders", 0, 99, 0], ["orders", 7, 7, 2], ["pay", 1, 5]],
        "utilisation": 0.7, "load_capacity": 500,
    }))
    .unwrap();
    let items = vec![
        LoadItem::task("orders", 3, 120.5),
        LoadItem::range("orders", 0, 99, 0.0),
        LoadItem::task("orders", 7, 2.0),
        LoadItem::task("pay", 1, 5.0),
    ];
    assert_eq!(request.loads.as_deref(), Some(&items[..]));
    assert_eq!(request.utilisation, Some(0.7));
    assert_eq!(request.load_capacity, Some(500.0));
    assert_eq!(items[1].len(), 100);
    let written = serde_json::to_value(&items).unwrap();
    assert_eq!(
        written,
        json!([
            ["orders", 3, 120.5],
            ["orders", 0, 99, 0.0],
            ["orders", 7, 2.0],
            ["pay", 1, 5.0]
        ])
    );
    assert_eq!(
        serde_json::from_value::<Vec<LoadItem>>(written).unwrap(),
        items
    );
}

/// An item that is neither form is refused while it is read: too short,
/// too long, a range whose end is not a partition, a load that is not a
/// number.
#[test]
fn malformed_load_items_are_refused() {
    for item in [
        json!(["orders", 3]),
        json!(["orders"]),
        json!(["orders", 0, 9, 1.0, 2.0]),
        json!(["orders", 0, 9.5, 1.0]),
        json!(["orders", 0, -1, 1.0]),
        json!(["orders", 0, 4_294_967_296u64, 1.0]),
        json!(["orders", 0, "1.0"]),
        json!(["orders", -1, 1.0]),
        json!({"topic": "orders"}),
    ] {
        assert!(
            serde_json::from_value::<LoadItem>(item.clone()).is_err(),
            "{item} was read"
        );
    }
}

/// A request without load fields writes none (a host from before loads
/// refuses unknown fields); an answer writes `load_report` only when it
/// is not `none`, and an answer without it, or with a value a newer host
/// added, reads as `none`.
#[test]
fn load_fields_are_left_out_when_absent() {
    let request = serde_json::to_value(HeartbeatRequest::default()).unwrap();
    for field in ["loads", "utilisation", "load_capacity"] {
        assert!(request.get(field).is_none(), "{field} in {request}");
    }
    let none = serde_json::to_value(answer(false)).unwrap();
    assert!(none.get("load_report").is_none(), "{none}");
    let full = HeartbeatResponseBody {
        load_report: LoadReport::Full,
        ..answer(false)
    };
    let written = serde_json::to_value(&full).unwrap();
    assert_eq!(written["load_report"], "full");
    let read = |value| serde_json::from_value::<HeartbeatResponseBody>(value).unwrap();
    assert_eq!(read(written.clone()), full);
    let mut newer = written;
    newer["load_report"] = json!("sampled");
    assert_eq!(read(newer).load_report, LoadReport::None);
    let changes = serde_json::from_value::<LoadReport>(json!("changes")).unwrap();
    assert_eq!(changes, LoadReport::Changes);
}
