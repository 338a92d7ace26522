//! Bindings: binding an assignor, rollback, and the bounded binding history.

use std::collections::BTreeSet;

use super::harness::*;
use super::records::bumped;
use crate::protocol::core::{Coordinator, HeartbeatResponse, Output, ProtocolError};
use crate::protocol::group::{BindingSpec, CallLimits, Record, Task};

/// The group's bindings as (seq, assignor, rollback_to).
fn bindings(h: &Harness) -> Vec<(u64, String, Option<u64>)> {
    h.core
        .group(GROUP)
        .unwrap()
        .bindings
        .iter()
        .map(|b| (b.seq, b.assignor.clone(), b.rollback_to))
        .collect()
}

/// Members whose target differs from what they hold (tasks not yet moved).
fn held_by_two(members: &[HeartbeatResponse]) -> bool {
    let mut seen = BTreeSet::new();
    members
        .iter()
        .flat_map(|m| m.active.iter().chain(&m.revoking))
        .any(|t| !seen.insert(t.clone()))
}

#[test]
fn a_bind_computes_the_new_target_at_once_and_members_reach_it_cooperatively() {
    let mut h = Harness::new(12);
    let mut members = vec![h.join(None), h.join(None), h.join(None)];
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    let before: Vec<BTreeSet<Task>> = members.iter().map(|m| m.active.clone()).collect();
    let epoch = h.core.group(GROUP).unwrap().group_epoch;
    let mark = h.log.len();
    // No time passes: the swap does not wait for the expansion timeout.
    let out = h
        .core
        .bind(GROUP, BindingSpec::assignor("range"), h.now)
        .unwrap();
    assert_eq!(
        out.assignor_calls.len(),
        1,
        "the new target is asked at once"
    );
    assert_eq!(out.assignor_calls[0].assignor, "range");
    h.absorb(out);
    let group = h.core.group(GROUP).unwrap();
    assert_eq!(group.config.assignor, "range");
    assert_eq!(
        (group.group_epoch, group.target_epoch),
        (epoch + 1, epoch + 1)
    );
    let bound = Record::AssignorBound {
        group: GROUP.into(),
        binding: group.bindings.back().expect("a binding").clone(),
    };
    let installed = Record::TargetInstalled {
        group: GROUP.into(),
        epoch: epoch + 1,
        target: group.target.clone(),
    };
    assert_eq!(h.records_since(mark), [bound, bumped(epoch + 1), installed]);
    assert_eq!(group.bindings.back().unwrap().assignor, "range");
    // Cooperative: each member keeps what the new target still gives it,
    // no task is ever held twice, and the new layout is reached.
    let target = group.target.clone();
    for _ in 0..4 {
        for i in 0..members.len() {
            members[i] = h.beat(&members[i].clone());
            let slot = members[i].member_id.clone();
            let kept: BTreeSet<Task> = before[i]
                .intersection(&target[slot.as_str()].active)
                .cloned()
                .collect();
            assert!(
                kept.is_subset(&members[i].active),
                "a task that stays was revoked"
            );
            assert!(!held_by_two(&members));
        }
    }
    for member in &members {
        assert_eq!(member.active, target[member.member_id.as_str()].active);
    }
    assert_eq!(all_active(&members), tasks(0..12));
    assert!(h.core.group(GROUP).unwrap().is_stable());
}

/// A binding with params, limits and a fallback.
fn round_robin_with_limits() -> BindingSpec {
    BindingSpec {
        params: [("k".to_owned(), "v".to_owned())].into(),
        limits: CallLimits {
            fuel_max: Some(5_000_000),
            time_limit_ms: Some(200),
            memory_max_mib: None,
        },
        fallback: Some("range".into()),
        ..BindingSpec::assignor("round-robin")
    }
}

#[test]
fn rollback_returns_to_the_previous_binding_and_twice_toggles() {
    let mut h = Harness::new(6);
    let mut members = vec![h.join(None), h.join(None)];
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    assert_eq!(
        h.core.rollback(GROUP, h.now).unwrap_err(),
        ProtocolError::NoPreviousBinding(GROUP.into()),
        "only the creation's binding"
    );
    let out = h
        .core
        .bind(GROUP, round_robin_with_limits(), h.now)
        .unwrap();
    h.absorb(out);
    h.settle(&mut members);
    // The same binding again changes nothing.
    let same = h
        .core
        .bind(GROUP, round_robin_with_limits(), h.now)
        .unwrap();
    assert_eq!(same, Output::default());
    let out = h.core.rollback(GROUP, h.now).unwrap();
    assert_eq!(out.assignor_calls.len(), 1);
    h.absorb(out);
    let group = h.core.group(GROUP).unwrap();
    assert_eq!(group.config.binding_spec(), BindingSpec::assignor("sticky"));
    h.settle(&mut members);
    let out = h.core.rollback(GROUP, h.now).unwrap();
    h.absorb(out);
    assert_eq!(h.core.group(GROUP).unwrap().config.assignor, "round-robin");
    assert_eq!(
        h.core.group(GROUP).unwrap().config.binding_spec(),
        round_robin_with_limits(),
        "params, limits and fallback come back too"
    );
    assert_eq!(
        bindings(&h),
        vec![
            (1, "sticky".into(), None),
            (2, "round-robin".into(), None),
            (3, "sticky".into(), Some(1)),
            (4, "round-robin".into(), Some(2)),
        ]
    );
    h.settle(&mut members);
    assert_eq!(all_active(&members), tasks(0..6));
}

/// A bind or rollback of an unknown group, and a binding with a bad
/// name, too many params, bad limits or an empty fallback, are refused
/// and change nothing.
#[test]
fn bad_bindings_are_refused_and_change_nothing() {
    let mut h = Harness::new(6);
    let mut members = vec![h.join(None), h.join(None)];
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    let out = h
        .core
        .bind(GROUP, round_robin_with_limits(), h.now)
        .unwrap();
    h.absorb(out);
    h.settle(&mut members);
    let log = h.log.len();
    let group = h.core.group(GROUP).unwrap().clone();
    assert!(matches!(
        h.core.bind("nope", BindingSpec::assignor("range"), h.now),
        Err(ProtocolError::UnknownGroup(_))
    ));
    assert!(matches!(
        h.core.bind(GROUP, BindingSpec::assignor(""), h.now),
        Err(ProtocolError::Invalid(_))
    ));
    let too_many = BindingSpec {
        params: (0..100).map(|i| (format!("k{i}"), String::new())).collect(),
        ..BindingSpec::assignor("range")
    };
    assert!(matches!(
        h.core.bind(GROUP, too_many, h.now),
        Err(ProtocolError::Invalid(_))
    ));
    for limits in [
        CallLimits {
            fuel_max: Some(0),
            ..CallLimits::default()
        },
        CallLimits {
            memory_max_mib: Some(5_000),
            ..CallLimits::default()
        },
    ] {
        let spec = BindingSpec {
            limits,
            ..BindingSpec::assignor("range")
        };
        assert!(matches!(
            h.core.bind(GROUP, spec, h.now),
            Err(ProtocolError::Invalid(_))
        ));
    }
    let empty_fallback = BindingSpec {
        fallback: Some(String::new()),
        ..BindingSpec::assignor("range")
    };
    assert!(matches!(
        h.core.bind(GROUP, empty_fallback, h.now),
        Err(ProtocolError::Invalid(_))
    ));
    assert!(matches!(
        h.core.rollback("nope", h.now),
        Err(ProtocolError::UnknownGroup(_))
    ));
    assert_eq!(h.core.group(GROUP), Some(&group));
    assert_eq!(h.log.len(), log);
}

#[test]
fn the_binding_history_is_bounded_and_kept_by_snapshots() {
    let mut h = Harness::new(4);
    let mut members = vec![h.join(None)];
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    for i in 0..40 {
        let assignor = if i % 2 == 0 { "range" } else { "sticky" };
        let out = h
            .core
            .bind(GROUP, BindingSpec::assignor(assignor), h.now)
            .unwrap();
        h.absorb(out);
        h.settle(&mut members);
    }
    let group = h.core.group(GROUP).unwrap();
    assert_eq!(group.bindings.len(), crate::protocol::group::BINDINGS_MAX);
    assert_eq!(group.bindings.back().unwrap().seq, 41);
    assert_eq!(group.bindings.front().unwrap().seq, 41 - 31);
    // The latest snapshot carries the history; replaying from it alone
    // gives the same group.
    let snapshot = h
        .log
        .iter()
        .rev()
        .find(|r| matches!(r, Record::GroupSnapshot { .. }))
        .unwrap();
    let mut replayed = Coordinator::new(7);
    replayed.apply(snapshot);
    assert_eq!(replayed.group(GROUP), Some(group));
}
