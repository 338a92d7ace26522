//! Load reports: the smoothing with given times, what a member is asked to
//! report (full after a join and after a restart, then changes), which
//! reports are taken (active tasks only, a later item wins), every bound
//! refused with nothing changed, and the load view's shares, imbalance
//! and completeness (unknown is not zero).

use assignd_wire::{LOAD_MAX, LoadItem, LoadReport};

use super::harness::{GROUP, Harness, config, request_from};
use crate::protocol::core::{
    Coordinator, Heartbeat, HeartbeatResponse, LoadView, ProtocolError, TASKS_PER_GROUP_MAX,
    load_view,
};
use crate::protocol::group::{Estimate, GroupConfig, Task, TopicConfig};

const UNIT: &str = "records/s";

/// `partitions` tasks of `orders`, loads in records/s, no smoothing unless
/// a test sets it.
fn load_config(partitions: u32) -> GroupConfig {
    GroupConfig {
        load_unit: Some(UNIT.into()),
        load_half_life_ms: 0,
        ..config(partitions)
    }
}

fn view(h: &Harness) -> LoadView {
    let group = h.core.group(GROUP).unwrap();
    let liveness = h.core.liveness(GROUP).unwrap();
    load_view(group, liveness, h.now).expect("the group takes loads")
}

/// A heartbeat after `last` that holds what it was given and reports
/// `loads`, and optionally its utilisation and load capacity.
fn report(
    last: &HeartbeatResponse,
    loads: Vec<LoadItem>,
    utilisation: Option<f64>,
    load_capacity: Option<f64>,
) -> Heartbeat {
    Heartbeat {
        owned: Some(last.active.iter().cloned().collect()),
        loads: Some(loads),
        utilisation,
        load_capacity,
        ..request_from(last)
    }
}

fn item(partition: u32, load: f64) -> LoadItem {
    LoadItem::task("orders", partition, load)
}

fn task(partition: u32) -> Task {
    Task::new("orders", partition)
}

/// Two members holding two tasks each, settled.
fn two_members(h: &mut Harness) -> (HeartbeatResponse, HeartbeatResponse) {
    let a = h.join(None);
    let b = h.join(None);
    h.at(super::harness::EXPANSION_MS);
    let mut members = [a, b];
    h.settle(&mut members);
    let [a, b] = members;
    assert_eq!((a.active.len(), b.active.len()), (2, 2));
    (a, b)
}

#[test]
fn the_estimate_decays_toward_the_latest_report_by_its_half_life() {
    let half_life = 10_000;
    let mut estimate = Estimate::first(100.0, 0);
    // No history is not zero: the first report is the estimate.
    assert_eq!(estimate.at(0, half_life), 100.0);
    assert_eq!(estimate.at(50_000, half_life), 100.0);
    estimate.report(200.0, 10_000, half_life);
    assert_eq!(estimate.at(10_000, half_life), 100.0);
    assert_eq!(estimate.at(20_000, half_life), 150.0);
    assert_eq!(estimate.at(30_000, half_life), 175.0);
    // The next report carries on from where the estimate had got.
    estimate.report(0.0, 20_000, half_life);
    assert_eq!(estimate.smoothed, 150.0);
    assert_eq!(estimate.at(30_000, half_life), 75.0);
    // A half-life of 0: the latest report wins at once.
    assert_eq!(estimate.at(20_000, 0), 0.0);
}

#[test]
fn a_member_is_asked_for_a_full_report_until_it_sends_one_then_for_changes() {
    let mut h = Harness::with_config(load_config(4));
    let joined = h.join(None);
    assert_eq!(joined.load_report, LoadReport::Full);
    let beat = h.beat(&joined);
    assert_eq!(beat.load_report, LoadReport::Full, "no report yet");
    let reported = h.send(report(&beat, vec![], Some(0.5), None)).unwrap();
    assert_eq!(reported.load_report, LoadReport::Changes);
    assert_eq!(h.beat(&reported).load_report, LoadReport::Changes);

    // A group without a load unit asks for nothing and takes nothing.
    let mut plain = Harness::new(4);
    let joined = plain.join(None);
    assert_eq!(joined.load_report, LoadReport::None);
    let answer = plain
        .send(report(&joined, vec![item(0, -1.0)], Some(99.0), Some(0.0)))
        .unwrap();
    assert_eq!(answer.load_report, LoadReport::None);
    let liveness = plain.core.liveness(GROUP).unwrap();
    assert_eq!(liveness.loads, Default::default());
}

#[test]
fn loads_are_taken_for_active_tasks_only_and_a_later_item_wins() {
    let mut h = Harness::with_config(load_config(8));
    let a = h.join(None);
    h.at(super::harness::EXPANSION_MS);
    let a = h.beat(&a);
    assert_eq!(a.active.len(), 8);
    let loads = vec![
        LoadItem::range("orders", 0, 3, 5.0),
        item(2, 7.0),
        // Past the topic's partitions, and a topic the group lacks.
        LoadItem::range("orders", 6, 1_000, 1.0),
        LoadItem::task("payments", 0, 3.0),
    ];
    let a = h.send(report(&a, loads, None, Some(40.0))).unwrap();
    let book = &h.core.liveness(GROUP).unwrap().loads;
    let load = |p| book.task_load(&task(p), h.now, 0);
    let expected = [5.0, 5.0, 7.0, 5.0, -1.0, -1.0, 1.0, 1.0].map(|l| (l >= 0.0).then_some(l));
    assert_eq!((0..8).map(load).collect::<Vec<_>>(), expected);
    assert_eq!(book.known_tasks(), 6);
    // Another member joins: half of the tasks are revoked from the first.
    let b = h.join(None);
    h.at(h.now + super::harness::EXPANSION_MS);
    let a = h.send(report(&a, vec![], None, None)).unwrap();
    assert!(!a.revoking.is_empty(), "{a:?}");
    // A report on a task being revoked (the member has not heard yet) is
    // dropped; one on a task it still holds active is taken.
    let revoked = a.revoking.iter().next().unwrap().partition;
    let kept = a.active.iter().next().unwrap().partition;
    let reported = vec![item(revoked, 99.0), item(kept, 11.0)];
    h.send(report(&a, reported, None, None)).unwrap();
    let book = &h.core.liveness(GROUP).unwrap().loads;
    assert_ne!(book.task_load(&task(revoked), h.now, 0), Some(99.0));
    assert_eq!(book.task_load(&task(kept), h.now, 0), Some(11.0));
    // The second member has reported nothing: its tasks keep their
    // estimates (a task's load is the task's).
    let _ = b;
}

#[test]
fn the_view_gives_shares_by_capacity_ratios_and_the_imbalance() {
    let mut h = Harness::with_config(load_config(4));
    let (a, b) = two_members(&mut h);
    let loads = |member: &HeartbeatResponse, each: f64| {
        member
            .active
            .iter()
            .map(|t| item(t.partition, each))
            .collect()
    };
    h.send(report(&a, loads(&a, 30.0), Some(0.9), None))
        .unwrap();
    let before = view(&h);
    assert!(!before.complete, "the second member's tasks are unknown");
    assert_eq!(before.total, 60.0);
    h.send(report(&b, loads(&b, 10.0), None, None)).unwrap();
    let view = view(&h);
    assert!(view.complete);
    assert_eq!(view.unit, UNIT);
    assert_eq!(view.total, 80.0);
    assert!(!view.by_load_capacity, "only one member declared one");
    let a_view = view.member(&a.member_id).unwrap();
    assert_eq!(
        (a_view.load, a_view.share, a_view.ratio),
        (60.0, 40.0, Some(1.5))
    );
    assert_eq!(a_view.utilisation, Some(0.9));
    let b_view = view.member(&b.member_id).unwrap();
    assert_eq!((b_view.load, b_view.ratio), (20.0, Some(0.5)));
    assert_eq!(view.imbalance, Some(1.5));
    assert!(!view.in_band(0.25));
    assert!(view.in_band(0.5));
}

#[test]
fn load_capacities_weigh_the_shares_once_every_member_declared_one() {
    let mut h = Harness::with_config(load_config(4));
    let (a, b) = two_members(&mut h);
    let loads = |member: &HeartbeatResponse| {
        member
            .active
            .iter()
            .map(|t| item(t.partition, 10.0))
            .collect()
    };
    h.send(report(&a, loads(&a), None, Some(300.0))).unwrap();
    h.send(report(&b, loads(&b), None, Some(100.0))).unwrap();
    let view = view(&h);
    assert!(view.by_load_capacity);
    let a_view = view.member(&a.member_id).unwrap();
    assert_eq!((a_view.share, a_view.load_capacity), (30.0, Some(300.0)));
    assert_eq!(view.member(&b.member_id).unwrap().ratio, Some(2.0));
    assert_eq!(view.imbalance, Some(2.0));
}

#[test]
fn unknown_loads_are_not_zero() {
    let mut h = Harness::with_config(load_config(4));
    let (a, _b) = two_members(&mut h);
    let first = a.active.iter().next().unwrap().partition;
    h.send(report(&a, vec![item(first, 0.0)], None, None))
        .unwrap();
    let view = view(&h);
    assert!(!view.complete);
    let a_view = view.member(&a.member_id).unwrap();
    assert_eq!((a_view.load, a_view.unknown_tasks), (0.0, 1));
    // A known zero is known.
    assert_eq!(
        h.core
            .liveness(GROUP)
            .unwrap()
            .loads
            .task_load(&task(first), h.now, 0),
        Some(0.0)
    );
}

#[test]
fn a_restarted_host_asks_for_full_reports_and_its_loads_are_incomplete() {
    let mut h = Harness::with_config(load_config(4));
    let (a, b) = two_members(&mut h);
    let all = |m: &HeartbeatResponse| m.active.iter().map(|t| item(t.partition, 1.0)).collect();
    let a = h.send(report(&a, all(&a), None, None)).unwrap();
    let b = h.send(report(&b, all(&b), None, None)).unwrap();
    assert!(view(&h).complete);
    assert_eq!(h.beat(&a).load_report, LoadReport::Changes);
    // A fresh coordinator replays the log: the records are the truth,
    // and they hold no loads.
    let mut restarted = Coordinator::new(7);
    for record in &h.log {
        restarted.apply(record);
    }
    h.core = restarted;
    let incomplete = view(&h);
    assert!(!incomplete.complete);
    assert_eq!(incomplete.total, 0.0);
    assert_eq!(incomplete.imbalance, None);
    let a = h.beat(&a);
    assert_eq!(a.load_report, LoadReport::Full);
    let a = h.send(report(&a, all(&a), None, None)).unwrap();
    assert_eq!(a.load_report, LoadReport::Changes);
    assert!(!view(&h).complete, "the other member has not reported");
    let b = h.beat(&b);
    assert_eq!(b.load_report, LoadReport::Full);
    h.send(report(&b, all(&b), None, None)).unwrap();
    assert!(view(&h).complete);
}

#[test]
fn a_new_incarnation_of_a_name_is_asked_for_a_full_report() {
    let mut h = Harness::with_config(load_config(2));
    let first = h.join(Some("w1"));
    let reported = h.send(report(&first, vec![], None, Some(5.0))).unwrap();
    assert_eq!(reported.load_report, LoadReport::Changes);
    let again = h.join(Some("w1"));
    assert_eq!(again.load_report, LoadReport::Full);
    let book = &h.core.liveness(GROUP).unwrap().loads;
    assert_eq!(book.member("static:w1"), None, "the old capacity is gone");
}

/// A refused report: the field named, its loads, utilisation and load
/// capacity.
type RefusedCase = (&'static str, Vec<LoadItem>, Option<f64>, Option<f64>);

/// Each out-of-bounds field is refused with `invalid_request` naming it,
/// and nothing changes: not the group, not what the host keeps.
#[test]
fn every_bound_is_refused_with_nothing_changed() {
    let mut h = Harness::with_config(GroupConfig {
        topics: vec![TopicConfig {
            name: "orders".into(),
            partitions: 100_000,
        }],
        ..load_config(1)
    });
    let joined = h.join(None);
    let whole = LoadItem::range("orders", 0, 99_999, 1.0);
    let cases: Vec<RefusedCase> = vec![
        ("loads", vec![item(0, -1.0)], None, None),
        ("loads", vec![item(0, LOAD_MAX * 2.0)], None, None),
        ("loads", vec![item(0, f64::NAN)], None, None),
        ("loads", vec![item(0, f64::INFINITY)], None, None),
        (
            "loads",
            vec![LoadItem::range("orders", 5, 4, 1.0)],
            None,
            None,
        ),
        ("loads", vec![whole; 11], None, None),
        (
            "loads",
            vec![item(0, 1.0); TASKS_PER_GROUP_MAX as usize + 1],
            None,
            None,
        ),
        ("utilisation", vec![], Some(-0.1), None),
        ("utilisation", vec![], Some(10.5), None),
        ("utilisation", vec![], Some(f64::NAN), None),
        ("load_capacity", vec![], None, Some(0.0)),
        ("load_capacity", vec![], None, Some(-1.0)),
        ("load_capacity", vec![], None, Some(LOAD_MAX * 2.0)),
        ("load_capacity", vec![], None, Some(f64::NAN)),
    ];
    let group = h.core.group(GROUP).cloned();
    let liveness = h.core.liveness(GROUP).cloned();
    let records = h.log.len();
    for (field, loads, utilisation, load_capacity) in cases {
        let refused = h.send(report(&joined, loads, utilisation, load_capacity));
        match refused {
            Err(ProtocolError::Invalid(message)) => {
                assert!(message.starts_with(field), "{field}: {message}")
            }
            other => panic!("{field}: {other:?}"),
        }
        assert_eq!(h.core.group(GROUP).cloned(), group, "{field}");
        assert_eq!(h.core.liveness(GROUP).cloned(), liveness, "{field}");
        assert_eq!(h.log.len(), records, "{field}");
    }
    // At the bounds, all is taken.
    let at_bounds = report(
        &joined,
        vec![item(0, LOAD_MAX), item(1, 0.0)],
        Some(10.0),
        Some(LOAD_MAX),
    );
    assert_eq!(h.send(at_bounds).unwrap().load_report, LoadReport::Changes);
}

/// The assignor sees the unit, a row for each task whose load is known
/// (estimated now, smoothed) and no row for the others, and each member's
/// load capacity and utilisation; a group without a unit sees none.
#[test]
fn the_assignor_input_carries_the_known_loads() {
    let mut h = Harness::with_config(GroupConfig {
        load_half_life_ms: 2_000,
        ..load_config(4)
    });
    let (a, b) = two_members(&mut h);
    let first = a.active.iter().next().unwrap().partition;
    h.send(report(&a, vec![item(first, 100.0)], Some(0.5), Some(400.0)))
        .unwrap();
    h.at(h.now + 2_000);
    h.send(report(&a, vec![item(first, 200.0)], Some(1.0), None))
        .unwrap();
    h.at(h.now + 2_000);
    let input = h.core.assignor_input(GROUP).unwrap();
    assert_eq!(input.load_unit.as_deref(), Some(UNIT));
    assert_eq!(input.loads.iter().collect::<Vec<_>>(), [(first, 150.0)]);
    let member = |id: &str| input.members.iter().find(|m| m.id == id).unwrap();
    assert_eq!(member(&a.member_id).load_capacity, Some(400.0));
    assert_eq!(member(&a.member_id).utilisation, Some(0.75));
    assert_eq!(member(&b.member_id).load_capacity, None);
    let plain = Harness::new(4).core.assignor_input(GROUP).unwrap();
    assert_eq!((plain.load_unit, plain.loads.len()), (None, 0));
}
