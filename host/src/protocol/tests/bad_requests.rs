//! Bad requests: each kind of refused heartbeat or config changes nothing.

use super::harness::*;
use crate::protocol::core::{Heartbeat, HeartbeatResponse, JOIN_EPOCH};
use crate::protocol::group::Task;

#[test]
fn bad_requests_are_refused_and_change_nothing() {
    let mut h = Harness::new(4);
    let mut members = vec![h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    let before = h.core.group(GROUP).cloned();
    let cases = refused_heartbeats(&members[0]);
    for (request, code) in cases {
        let records_before = h.log.len();
        let error = h.core.heartbeat(&request, 2_000).unwrap_err();
        assert_eq!(error.code(), code, "{error}");
        assert_eq!(h.log.len(), records_before);
        assert_eq!(
            h.core.group(GROUP).cloned(),
            before,
            "state untouched by {code}"
        );
    }
}

#[test]
fn bad_configs_are_refused_and_change_nothing() {
    let mut h = Harness::new(4);
    let mut members = vec![h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    let before = h.core.group(GROUP).cloned();
    let mut bad = config(4);
    bad.session_timeout_ms = 0;
    assert!(h.core.configure(GROUP, bad, 2_000).is_err());
    let mut bad = config(4);
    bad.topics[0].partitions = 1_000_000_000;
    assert!(h.core.configure(GROUP, bad, 2_000).is_err());
    assert_eq!(h.core.group(GROUP).cloned(), before);
}

/// Heartbeats of `member` (settled in a group of 4 partitions) that are
/// refused, each with the code it is refused with.
fn refused_heartbeats(member: &HeartbeatResponse) -> Vec<(Heartbeat, &'static str)> {
    let base = request_from(member);
    vec![
        (
            Heartbeat {
                group: "nope".into(),
                ..base.clone()
            },
            "unknown_group",
        ),
        (
            Heartbeat {
                member_id: "m-ghost".into(),
                ..base.clone()
            },
            "unknown_member",
        ),
        (
            Heartbeat {
                member_epoch: member.member_epoch as i64 + 5,
                ..base.clone()
            },
            "stale_epoch",
        ),
        (
            Heartbeat {
                member_epoch: -7,
                ..base.clone()
            },
            "invalid_request",
        ),
        (
            Heartbeat {
                owned: Some(vec![Task::new("orders", 99)]),
                lags: None,
                drain: false,
                ..base.clone()
            },
            "not_owned",
        ),
        (
            Heartbeat {
                topics: Some(vec![String::new()]),
                ..base.clone()
            },
            "invalid_request",
        ),
        (
            Heartbeat {
                member_name: Some("x".repeat(10_000)),
                ..base.clone()
            },
            "invalid_request",
        ),
        (
            Heartbeat {
                capacity: Some(0),
                ..base.clone()
            },
            "invalid_request",
        ),
        (
            Heartbeat {
                member_id: String::new(),
                member_epoch: JOIN_EPOCH,
                topics: None,
                ..base.clone()
            },
            "invalid_request",
        ),
    ]
}
