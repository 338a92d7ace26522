//! The load trigger: loads outside their band for the load window ask the
//! assignor once, with reason `load`; not before the window, not within
//! the cooldown, never while a load is unknown (a restarted host waits for
//! every member's report, and its cooldown starts when it took the group),
//! never for a frozen group or an assignor that does not balance load.

use super::harness::*;
use crate::protocol::core::{
    Coordinator, Heartbeat, HeartbeatResponse, HostLoad, LOAD_CHECK_MS_MIN, TimerKind,
    group_deadline,
};
use crate::protocol::group::{GroupConfig, Millis, RebalanceReason, Task};

const WINDOW_MS: u64 = 5_000;
const COOLDOWN_MS: u64 = 1_000;

/// 4 tasks, no smoothing (the latest report is the load), a load window
/// of [`WINDOW_MS`] and a cooldown of `cooldown_ms`.
fn load_config(cooldown_ms: u64) -> GroupConfig {
    GroupConfig {
        load_unit: Some("records/s".into()),
        load_half_life_ms: 0,
        load_window_ms: WINDOW_MS,
        load_cooldown_ms: cooldown_ms,
        ..config(4)
    }
}

/// A hot partition 0 (1,000), the rest cold (1): no two members can be in
/// a 10 % band, whatever the assignment.
fn hot_task(task: &Task) -> f64 {
    if task.partition == 0 { 1_000.0 } else { 1.0 }
}

/// A group of two members on `config`, settled, whose assignor balances
/// load.
fn pair(config: GroupConfig) -> (Harness, Vec<HeartbeatResponse>) {
    let mut h = Harness::with_config(config);
    h.core.describe_assignor_load("sticky", true);
    let mut members = vec![h.join(None), h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    assert_eq!(all_active(&members), tasks(0..4));
    (h, members)
}

/// A heartbeat like [`Harness::beat`] that reports `load` of every active
/// task, or no load at all.
fn beat_loads(
    h: &mut Harness,
    last: &HeartbeatResponse,
    load: Option<fn(&Task) -> f64>,
) -> HeartbeatResponse {
    let loads = load.map(|load| {
        last.active
            .iter()
            .map(|t| assignd_wire::LoadItem::task(t.topic.clone(), t.partition, load(t)))
            .collect()
    });
    h.send(Heartbeat {
        owned: Some(last.active.iter().cloned().collect()),
        loads,
        ..request_from(last)
    })
    .unwrap()
}

/// Steps to `to` a second at a time, as [`Harness::at`] does (the due
/// groups' tick checked against the full scan), each member reporting
/// `load` after each tick; returns when each load rebalance was asked for.
fn run(
    h: &mut Harness,
    members: &mut [HeartbeatResponse],
    to: Millis,
    load: Option<fn(&Task) -> f64>,
) -> Vec<Millis> {
    let mut load_calls = Vec::new();
    while h.now < to {
        let now = (h.now + 1_000).min(to);
        h.now = now;
        let mut scanned = h.core.clone();
        let reference = scanned.tick_every_group(now, HostLoad::default());
        let out = h.core.tick(now);
        assert_eq!(out, reference, "the due groups' tick and the full scan");
        assert_eq!(h.core.difference_from(&scanned), None);
        let reasons: Vec<RebalanceReason> = out.assignor_calls.iter().map(|c| c.reason).collect();
        if reasons.contains(&RebalanceReason::Load) {
            assert_eq!(reasons, [RebalanceReason::Load], "one call, for load");
            load_calls.push(now);
        }
        h.absorb(out);
        for member in members.iter_mut() {
            *member = beat_loads(h, member, load);
        }
    }
    load_calls
}

#[test]
fn loads_outside_the_band_for_the_window_ask_once_with_reason_load() {
    let (mut h, mut members) = pair(load_config(COOLDOWN_MS));
    // The first reports come after the tick at 2 s; the tick at 3 s is the
    // first to see the loads outside the band.
    let calls = run(
        &mut h,
        &mut members,
        3_000 + WINDOW_MS - 1_000,
        Some(hot_task),
    );
    assert_eq!(calls, [] as [Millis; 0], "not before the window");
    let calls = run(&mut h, &mut members, 3_000 + WINDOW_MS, Some(hot_task));
    assert_eq!(calls, [3_000 + WINDOW_MS]);
    let last = h.core.liveness(GROUP).unwrap().rebalances.last.unwrap();
    assert_eq!(last.reason, RebalanceReason::Load);
    assert_eq!(last.epoch, h.core.group(GROUP).unwrap().target_epoch);
}

#[test]
fn loads_back_inside_the_band_start_the_window_over() {
    let (mut h, mut members) = pair(load_config(COOLDOWN_MS));
    assert!(run(&mut h, &mut members, 5_000, Some(hot_task)).is_empty());
    // Even for a second: the next time outside starts a new window.
    assert!(run(&mut h, &mut members, 6_000, Some(|_| 1.0)).is_empty());
    let calls = run(&mut h, &mut members, 20_000, Some(hot_task));
    // The loads reported at 6 s are seen in band at 7 s; outside again
    // from 8 s.
    assert_eq!(calls.first(), Some(&(8_000 + WINDOW_MS)));
}

#[test]
fn a_second_load_rebalance_waits_for_the_cooldown() {
    // The hot task keeps the loads outside the band whatever moves.
    let cooldown_ms = 3 * WINDOW_MS;
    let (mut h, mut members) = pair(load_config(cooldown_ms));
    let calls = run(&mut h, &mut members, 40_000, Some(hot_task));
    // The first waits a cooldown from this host's first check of the
    // group's loads (at 2 s, the first tick once the group is settled);
    // each next one a cooldown from the one before.
    assert_eq!(
        calls,
        [2_000 + cooldown_ms, 2_000 + 2 * cooldown_ms],
        "one per cooldown"
    );
}

#[test]
fn balanced_loads_ask_nothing() {
    let (mut h, mut members) = pair(load_config(COOLDOWN_MS));
    assert!(run(&mut h, &mut members, 30_000, Some(|_| 5.0)).is_empty());
}

#[test]
fn a_frozen_group_never_rebalances_for_load() {
    let (mut h, mut members) = pair(GroupConfig {
        frozen: true,
        ..load_config(COOLDOWN_MS)
    });
    assert!(run(&mut h, &mut members, 30_000, Some(hot_task)).is_empty());
}

#[test]
fn an_assignor_that_does_not_balance_load_is_not_asked_for_load() {
    let (mut h, mut members) = pair(load_config(COOLDOWN_MS));
    h.core.describe_assignor_load("sticky", false);
    assert!(run(&mut h, &mut members, 30_000, Some(hot_task)).is_empty());
}

#[test]
fn an_assignor_not_described_yet_is_asked_about_and_the_group_waits() {
    let mut h = Harness::with_config(load_config(COOLDOWN_MS));
    let mut members = vec![h.join(None), h.join(None)];
    h.at(1_000);
    h.settle(&mut members);
    assert!(run(&mut h, &mut members, 20_000, Some(hot_task)).is_empty());
    assert_eq!(h.core.assignors_to_describe(), ["sticky"]);
    h.core.describe_assignor_load("sticky", true);
    assert!(h.core.assignors_to_describe().is_empty());
    let calls = run(&mut h, &mut members, 40_000, Some(hot_task));
    assert_eq!(calls.first(), Some(&(21_000 + WINDOW_MS)));
}

#[test]
fn unknown_loads_never_rebalance_for_load_even_when_members_join() {
    let (mut h, mut members) = pair(load_config(COOLDOWN_MS));
    assert!(run(&mut h, &mut members, 7_000, Some(hot_task)).is_empty());
    // A restart: a fresh core from the records, which has no loads.
    let mut restarted = Coordinator::new(7);
    for record in &h.log {
        restarted.apply(record);
    }
    restarted.describe_assignor_load("sticky", true);
    h.core = restarted;
    let took_ms = h.now + 1_000;
    // Members that do not report yet, and one that joins.
    assert!(run(&mut h, &mut members, 20_000, None).is_empty());
    members.push(h.join(None));
    assert!(run(&mut h, &mut members, 40_000, None).is_empty());
    let view = h.core.liveness(GROUP).unwrap().rebalances.last.unwrap();
    assert_ne!(view.reason, RebalanceReason::Load, "the join was served");
    // Reports complete the loads: the window runs from the first check
    // that sees them, and the cooldown has long passed since the restart.
    let calls = run(&mut h, &mut members, 60_000, Some(hot_task));
    assert_eq!(calls.first(), Some(&(42_000 + WINDOW_MS)));
    assert!(took_ms + COOLDOWN_MS < 42_000);
}

#[test]
fn after_a_restart_the_first_load_rebalance_waits_a_cooldown_from_then() {
    let cooldown_ms = 4 * WINDOW_MS;
    let (mut h, mut members) = pair(load_config(cooldown_ms));
    assert!(run(&mut h, &mut members, 15_000, Some(hot_task)).is_empty());
    let mut restarted = Coordinator::new(7);
    for record in &h.log {
        restarted.apply(record);
    }
    restarted.describe_assignor_load("sticky", true);
    h.core = restarted;
    // The first tick after the restart, at 16 s, is when it took the group.
    let calls = run(&mut h, &mut members, 40_000, Some(hot_task));
    assert_eq!(calls, [16_000 + cooldown_ms]);
}

#[test]
fn loads_are_checked_once_a_heartbeat_interval_but_never_more_often_than_the_floor() {
    for (interval_ms, expected_ms) in [(1_000, 1_000), (10, LOAD_CHECK_MS_MIN)] {
        let (mut h, mut members) = pair(GroupConfig {
            heartbeat_interval_ms: interval_ms,
            ..load_config(COOLDOWN_MS)
        });
        run(&mut h, &mut members, 3_000, Some(|_| 5.0));
        let group = h.core.group(GROUP).unwrap();
        let deadline = group_deadline(group, h.core.liveness(GROUP)).unwrap();
        assert_eq!(deadline.kind, TimerKind::LoadCheck);
        assert_eq!(deadline.at_ms, 3_000 + expected_ms);
    }
}
