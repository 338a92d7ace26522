//! The routing table: endpoints (published on join, changed by one
//! record, refused past their limits), the table's owners, moves and
//! unowned tasks, its epoch, key lookups, and the promise each served
//! table makes (no task it shows unmoved gets another owner before it
//! runs out).

use std::collections::BTreeMap;

use assignd_wire::{RoutesBody, TaskRange, partition_for_key};

use super::harness::*;
use crate::protocol::core::{Heartbeat, HeartbeatResponse, JOIN_EPOCH, ProtocolError};
use crate::protocol::group::{GroupConfig, Record, Task};

const VALID_MS: u64 = 3_000;

fn routed_config(partitions: u32) -> GroupConfig {
    GroupConfig {
        routes_valid_ms: VALID_MS,
        ..config(partitions)
    }
}

fn join_at(h: &mut Harness, endpoint: &str, metadata: &[(&str, &str)]) -> HeartbeatResponse {
    h.send(Heartbeat {
        endpoint: Some(endpoint.into()),
        metadata: Some(pairs(metadata)),
        ..Heartbeat::join(GROUP, None, vec!["orders".into()])
    })
    .unwrap()
}

fn pairs(metadata: &[(&str, &str)]) -> BTreeMap<String, String> {
    metadata
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn table(h: &Harness) -> RoutesBody {
    h.core.routes(GROUP).unwrap()
}

fn range(first: u32, last: u32) -> TaskRange {
    TaskRange {
        topic: "orders".into(),
        first,
        last,
    }
}

#[test]
fn a_members_endpoint_comes_with_its_join_and_a_change_is_one_record() {
    let mut h = Harness::with_config(routed_config(4));
    let a = join_at(&mut h, "http://10.0.0.5:8080", &[("zone", "a")]);
    let shown = &table(&h).members[&a.member_id];
    assert_eq!(shown.endpoint.as_deref(), Some("http://10.0.0.5:8080"));
    assert_eq!(shown.metadata, pairs(&[("zone", "a")]));
    let epoch = table(&h).epoch;

    // The same again, and a heartbeat without them: nothing recorded.
    let mark = h.log.len();
    let a = h
        .send(Heartbeat {
            endpoint: Some("http://10.0.0.5:8080".into()),
            metadata: Some(pairs(&[("zone", "a")])),
            ..request_from(&a)
        })
        .unwrap();
    let a = h.beat(&a);
    assert!(
        !h.records_since(mark)
            .iter()
            .any(|r| matches!(r, Record::MemberEndpointChanged { .. })),
        "{:?}",
        h.records_since(mark)
    );
    assert_eq!(table(&h).epoch, epoch);

    // A new endpoint alone keeps the metadata; "" removes the endpoint.
    let a = h
        .send(Heartbeat {
            endpoint: Some("10.0.0.6:9090".into()),
            ..request_from(&a)
        })
        .unwrap();
    let shown = table(&h).members[&a.member_id].clone();
    assert_eq!(shown.endpoint.as_deref(), Some("10.0.0.6:9090"));
    assert_eq!(shown.metadata, pairs(&[("zone", "a")]));
    assert_eq!(table(&h).epoch, epoch + 1);
    h.send(Heartbeat {
        endpoint: Some(String::new()),
        metadata: Some(BTreeMap::new()),
        ..request_from(&a)
    })
    .unwrap();
    let shown = &table(&h).members[&a.member_id];
    assert_eq!((shown.endpoint.clone(), shown.metadata.len()), (None, 0));
    // (The harness replays every record after each step: the endpoint is
    // durable state.)
}

#[test]
fn an_endpoint_or_metadata_past_its_limits_is_refused_and_changes_nothing() {
    let mut h = Harness::with_config(routed_config(4));
    let a = join_at(&mut h, "http://a", &[]);
    let too_many: Vec<(String, String)> = (0..17).map(|i| (format!("k{i}"), "v".into())).collect();
    type Published = (Option<String>, Option<BTreeMap<String, String>>);
    let cases: Vec<Published> = vec![
        (Some("x".repeat(257)), None),
        (Some("http://a b".into()), None),
        (Some("http://é".into()), None),
        (None, Some(too_many.into_iter().collect())),
        (None, Some(pairs(&[("", "v")]))),
        (None, Some([("k".repeat(65), "v".to_owned())].into())),
        (None, Some([("k".to_owned(), "v".repeat(257))].into())),
        (None, Some(pairs(&[("k", "a\u{7}b")]))),
    ];
    for (endpoint, metadata) in cases {
        let mark = h.log.len();
        let before = h.core.group(GROUP).cloned();
        let refused = h.send(Heartbeat {
            endpoint: endpoint.clone(),
            metadata: metadata.clone(),
            ..request_from(&a)
        });
        assert!(
            matches!(refused, Err(ProtocolError::Invalid(_))),
            "{endpoint:?} {metadata:?}: {refused:?}"
        );
        assert_eq!(h.log.len(), mark);
        assert_eq!(h.core.group(GROUP).cloned(), before);
        // A join carrying them is refused the same way.
        let join = h.send(Heartbeat {
            endpoint,
            metadata,
            ..Heartbeat::join(GROUP, None, vec!["orders".into()])
        });
        assert!(matches!(join, Err(ProtocolError::Invalid(_))), "{join:?}");
        assert_eq!(h.log.len(), mark);
    }
}

#[test]
fn the_table_shows_owners_moves_and_unowned_tasks_as_ranges() {
    let mut h = Harness::with_config(routed_config(8));
    let empty = table(&h);
    assert_eq!(empty.unowned.0, vec![range(0, 7)]);
    assert!(empty.active.is_empty() && empty.moving.is_empty());

    let mut a = join_at(&mut h, "http://a", &[]);
    h.advance(EXPANSION_MS, std::slice::from_mut(&mut a));
    h.settle(std::slice::from_mut(&mut a));
    let one = table(&h);
    assert_eq!(one.active[&a.member_id].0, vec![range(0, 7)]);
    assert!(one.unowned.is_empty() && one.moving.is_empty(), "{one:?}");
    assert_eq!(one.topics["orders"], 8);

    // A second member: half the tasks move to it, through a revocation.
    let b = join_at(&mut h, "http://b", &[]);
    let mut members = [a, b];
    h.advance(2 * EXPANSION_MS + 1, &mut []);
    members[0] = h.beat(&members[0]);
    let moving = table(&h);
    let moved: Vec<Task> = moving.moving.iter().flat_map(|m| m.tasks.tasks()).collect();
    assert_eq!(moved.len(), 4, "{moving:?}");
    for mv in &moving.moving {
        assert_eq!(mv.to.as_deref(), Some(members[1].member_id.as_str()));
    }
    // A revoked task stays its owner's until released; a released one
    // is nobody's until granted.
    let owned_by_a: Vec<Task> = moving.active[&members[0].member_id].tasks().collect();
    let unowned: Vec<Task> = moving.unowned.tasks().collect();
    assert_eq!(owned_by_a.len() + unowned.len(), 8, "{moving:?}");

    h.advance(h.now + VALID_MS + 1_000, &mut members);
    h.settle(&mut members);
    let settled = table(&h);
    assert!(
        settled.moving.is_empty() && settled.unowned.is_empty(),
        "{settled:?}"
    );
    let counts: Vec<usize> = settled.active.values().map(|r| r.tasks().count()).collect();
    assert_eq!(counts, [4, 4]);
    assert!(settled.epoch > moving.epoch && moving.epoch > one.epoch);
}

#[test]
fn a_lookup_hashes_the_key_as_kafka_does_and_names_the_owner() {
    let mut h = Harness::with_config(routed_config(12));
    let mut a = join_at(&mut h, "http://a", &[("zone", "z")]);
    h.advance(EXPANSION_MS, std::slice::from_mut(&mut a));
    h.settle(std::slice::from_mut(&mut a));
    for key in ["customer-42", "21", "", "ключ"] {
        let found = h.core.lookup(GROUP, "orders", key.as_bytes()).unwrap();
        assert_eq!(found.partition, partition_for_key(key.as_bytes(), 12));
        let owner = found.owner.unwrap();
        assert_eq!(owner.member_id, a.member_id);
        assert_eq!(owner.endpoint.as_deref(), Some("http://a"));
        assert_eq!(found.moving_to, None);
    }
    assert_eq!(h.core.lookup(GROUP, "refunds", b"k"), None);
}

/// The host maps keys to partitions exactly as the routers do: the shared
/// vectors (clients/conformance/routes/murmur2.json, Kafka's own first).
#[test]
fn a_lookup_puts_every_vector_key_on_its_partition() {
    let vectors: serde_json::Value = serde_json::from_str(include_str!(
        "../../../../clients/conformance/routes/murmur2.json"
    ))
    .unwrap();
    for partitions in [1u32, 3, 12, 100, 1000] {
        let h = Harness::with_config(routed_config(partitions));
        for case in vectors["cases"].as_array().unwrap() {
            let hex = case["key_hex"].as_str().unwrap();
            let key: Vec<u8> = (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect();
            let found = h.core.lookup(GROUP, "orders", &key).unwrap();
            let expected = &case["partitions"][partitions.to_string()];
            assert_eq!(
                u64::from(found.partition),
                expected.as_u64().unwrap(),
                "{case}"
            );
        }
    }
}

/// Scales 1 → 2 members while a router reads the table at `served_at`
/// (if any), and returns when the new member was first granted a task.
fn first_grant_after_scale_up(served_at: Option<u64>) -> u64 {
    let mut h = Harness::with_config(routed_config(4));
    let mut a = join_at(&mut h, "http://a", &[]);
    h.advance(EXPANSION_MS, std::slice::from_mut(&mut a));
    h.settle(std::slice::from_mut(&mut a));
    let start = h.now;
    let b = join_at(&mut h, "http://b", &[]);
    let mut members = [a, b];
    let mut promised: Option<(u64, RoutesBody)> = None;
    while h.now < start + 20_000 {
        if served_at == Some(h.now) {
            h.core.routes_served(GROUP, h.now);
            promised = Some((h.now + VALID_MS, table(&h)));
        }
        // Within a served table's promise, no task it shows unmoved is
        // held by anyone but the owner it names.
        if let Some((until, served)) = &promised
            && h.now < *until
        {
            assert_promise_kept(&h, served);
        }
        if !members[1].active.is_empty() {
            return h.now;
        }
        h.at(h.now + 100);
        for member in members.iter_mut() {
            *member = h.beat(member);
        }
    }
    panic!("the new member was never granted a task");
}

/// Every task the table shows unmoved is still held by the owner it
/// names: not moved, and not released either (its owner keeps serving it).
fn assert_promise_kept(h: &Harness, served: &RoutesBody) {
    let group = h.core.group(GROUP).unwrap();
    let moving: Vec<Task> = served.moving.iter().flat_map(|m| m.tasks.tasks()).collect();
    for (owner, ranges) in &served.active {
        for task in ranges.tasks().filter(|t| !moving.contains(t)) {
            let holder = group
                .holdings
                .holder(&task)
                .map(|slot| &group.members[slot].member_id);
            assert_eq!(
                holder,
                Some(owner),
                "{task} left its owner within the promise"
            );
        }
    }
}

#[test]
fn a_move_published_after_a_served_table_is_granted_only_once_its_promise_ends() {
    let unread = first_grant_after_scale_up(None);
    let read_at = 1_000 + 100;
    let read = first_grant_after_scale_up(Some(read_at));
    assert!(
        read >= read_at + VALID_MS,
        "granted at {read}, inside the promise of a table served at {read_at}"
    );
    assert!(
        unread < read_at + VALID_MS,
        "unread tables hold nothing: {unread}"
    );
}

#[test]
fn a_restarted_host_holds_grants_for_the_promise_it_cannot_know() {
    let mut h = Harness::with_config(routed_config(4));
    let mut a = join_at(&mut h, "http://a", &[]);
    h.advance(EXPANSION_MS, std::slice::from_mut(&mut a));
    h.settle(std::slice::from_mut(&mut a));
    let mut restarted = crate::protocol::core::Coordinator::new(7);
    for record in &h.log {
        restarted.apply(record);
    }
    restarted.restarted(h.now);
    h.core = restarted;
    let restart = h.now;
    let b = h
        .send(Heartbeat {
            member_epoch: JOIN_EPOCH,
            ..Heartbeat::join(GROUP, None, vec!["orders".into()])
        })
        .unwrap();
    let mut members = [h.beat(&a), b];
    let mut granted_at = None;
    while h.now < restart + 20_000 && granted_at.is_none() {
        h.at(h.now + 100);
        for member in members.iter_mut() {
            *member = h.beat(member);
        }
        if !members[1].active.is_empty() {
            granted_at = Some(h.now);
        }
    }
    let granted_at = granted_at.expect("granted in the end");
    assert!(
        granted_at >= restart + VALID_MS,
        "granted at {granted_at}, inside the promise a table served before the restart may have made"
    );
}
