//! Shadow assignors: asked beside every live call with the same input and
//! their own params, compared and never installed; a shadow still running
//! makes the next live call go without one; a failing shadow is only news;
//! binding the shadow's module ends it; and the history of installed
//! targets.

use std::collections::BTreeMap;

use super::harness::*;
use crate::protocol::core::{HeartbeatResponse, Output, ShadowSpec};
use crate::protocol::group::{
    BindingSpec, CallLimits, CallStats, Record, SHADOW_COMPARISONS_MAX, ShadowBinding,
};
use crate::sim::assign_natively;
use crate::sim::tests::shadows::without_shadows;

fn spec(assignor: &str) -> ShadowSpec {
    ShadowSpec {
        assignor: assignor.into(),
        params: BTreeMap::new(),
        limits: CallLimits::default(),
    }
}

/// Three members settled on `sticky`, 12 tasks.
fn settled_group() -> (Harness, Vec<HeartbeatResponse>) {
    let mut h = Harness::new(12);
    let mut members = vec![h.join(None), h.join(None), h.join(None)];
    h.at(EXPANSION_MS);
    h.settle(&mut members);
    (h, members)
}

fn shadow(h: &mut Harness, spec: Option<ShadowSpec>) {
    let out = h.core.bind_shadow(GROUP, spec, h.now).unwrap();
    h.absorb(out);
}

#[test]
fn a_shadow_changes_no_record_but_its_own_binding() {
    let run = |with_shadow: bool| {
        let (mut h, mut members) = settled_group();
        if with_shadow {
            shadow(&mut h, Some(spec("range")));
        }
        members.push(h.join(None));
        h.advance(h.now + 2 * EXPANSION_MS, &mut members);
        h.settle(&mut members);
        members.remove(0);
        h.advance(h.now + 2 * SESSION_MS, &mut members);
        h.settle(&mut members);
        h
    };
    let shadowed = run(true);
    let plain = run(false);
    assert_eq!(without_shadows(&shadowed.log), plain.log);
    let comparisons = &shadowed.core.liveness(GROUP).unwrap().shadows.comparisons;
    assert!(comparisons.len() >= 2, "{comparisons:?}");
    let bound = shadowed
        .log
        .iter()
        .filter(|r| matches!(r, Record::ShadowBound { .. }));
    assert_eq!(bound.count(), 1);
}

#[test]
fn a_shadow_gets_the_live_input_with_its_own_params_and_is_compared() {
    let (mut h, mut members) = settled_group();
    let mut with_params = spec("range");
    with_params.params.insert("note".into(), "shadowed".into());
    shadow(&mut h, Some(with_params));
    let before = h.core.group(GROUP).unwrap().shadow.clone().unwrap();
    assert_eq!(before.assignor, "range");
    members.push(h.join(None));
    let out = h.core.tick(h.now + EXPANSION_MS);
    h.now += EXPANSION_MS;
    assert_eq!((out.assignor_calls.len(), out.shadow_calls.len()), (1, 1));
    let (live, shade) = (&out.assignor_calls[0], &out.shadow_calls[0]);
    assert_eq!(
        (shade.epoch, shade.assignor.as_str()),
        (live.epoch, "range")
    );
    assert_eq!(
        shade.input.params.get("note").map(String::as_str),
        Some("shadowed")
    );
    assert_eq!(live.input.params.get("note"), None);
    // The host's own params reach the shadow too.
    for key in crate::protocol::core::HOST_PARAMS {
        assert_eq!(
            shade.input.params.get(key),
            live.input.params.get(key),
            "{key}"
        );
    }
    let mut same_input = (*shade.input).clone();
    same_input.params = live.input.params.clone();
    assert_eq!(same_input, live.input);

    let live_answer = assign_natively("sticky", &live.input).unwrap();
    let shadow_answer = assign_natively("range", &shade.input).unwrap();
    let stats = CallStats {
        elapsed_ms: Some(2.5),
        fuel: Some(1_000),
    };
    let (group, epoch, input) = (live.group.clone(), live.epoch, live.input.clone());
    h.log.extend(out.records);
    h.core.shadow_computed(
        &group,
        epoch,
        "range",
        Ok(shadow_answer.clone()),
        stats,
        h.now,
    );
    h.core.live_call_measured(
        &group,
        CallStats {
            elapsed_ms: Some(1.0),
            fuel: Some(10),
        },
    );
    let out =
        h.core
            .assignment_computed(&group, epoch, Ok::<_, String>(live_answer.clone()), h.now);
    h.absorb(out);
    let comparison = h
        .core
        .liveness(GROUP)
        .unwrap()
        .shadows
        .comparisons
        .back()
        .unwrap()
        .clone();
    let moved = |after: &[u32]| {
        input
            .active_owner
            .iter()
            .zip(after)
            .filter(|(b, a)| **b != assignd_guest_sdk::NO_MEMBER && b != a)
            .count() as u64
    };
    assert_eq!(comparison.epoch, epoch);
    assert_eq!(comparison.reason, "join");
    assert_eq!((comparison.tasks, comparison.members), (12, 4));
    assert_eq!(comparison.live.assignor, "sticky");
    assert_eq!(
        comparison.live.moved,
        Some(moved(&live_answer.active_owner))
    );
    assert_eq!(
        comparison.shadow.moved,
        Some(moved(&shadow_answer.active_owner))
    );
    assert_eq!(
        comparison.live.count_spread,
        Some(0),
        "12 tasks on 4 members"
    );
    assert_eq!(comparison.shadow.stats, stats);
    assert_eq!(comparison.live.stats.fuel, Some(10));
    let disagree = live_answer
        .active_owner
        .iter()
        .zip(&shadow_answer.active_owner)
        .filter(|(a, b)| a != b)
        .count() as u64;
    assert_eq!(comparison.disagreeing_tasks, Some(disagree));
    let target = h.core.group(GROUP).unwrap().target.clone();
    h.settle(&mut members);
    assert_eq!(
        h.core.group(GROUP).unwrap().target,
        target,
        "the live answer is the target"
    );
}

#[test]
fn a_shadow_still_running_makes_the_next_live_call_go_without_one() {
    let (mut h, mut members) = settled_group();
    shadow(&mut h, Some(spec("range")));
    members.push(h.join(None));
    let first = h.core.tick(h.now + EXPANSION_MS);
    h.now += EXPANSION_MS;
    let slow = first.shadow_calls[0].clone();
    let call = first.assignor_calls[0].clone();
    h.log.extend(first.records);
    let answer = assign_natively("sticky", &call.input);
    let out = h.core.assignment_computed(GROUP, call.epoch, answer, h.now);
    h.absorb(out);
    members.push(h.join(None));
    let second = h.core.tick(h.now + EXPANSION_MS);
    h.now += EXPANSION_MS;
    assert_eq!(
        (second.assignor_calls.len(), second.shadow_calls.len()),
        (1, 0)
    );
    h.absorb(second);
    let log = &h.core.liveness(GROUP).unwrap().shadows;
    assert_eq!(log.totals.skipped, 1);
    assert!(log.comparisons.is_empty());
    // The slow answer still completes its own comparison.
    let answer = assign_natively("range", &slow.input);
    h.core.shadow_computed(
        GROUP,
        slow.epoch,
        "range",
        answer,
        CallStats::default(),
        h.now,
    );
    let log = &h.core.liveness(GROUP).unwrap().shadows;
    assert_eq!(log.comparisons.len(), 1);
    assert_eq!(log.comparisons[0].epoch, slow.epoch);
    assert!(!log.shadow_running);
}

#[test]
fn a_failing_shadow_is_news_and_a_dropped_one_is_skipped() {
    let (mut h, mut members) = settled_group();
    shadow(&mut h, Some(spec("range")));
    members.push(h.join(None));
    let out = h.core.tick(h.now + EXPANSION_MS);
    h.now += EXPANSION_MS;
    let (call, shade) = (out.assignor_calls[0].clone(), out.shadow_calls[0].clone());
    h.log.extend(out.records);
    let failure = Err("fuel_exhausted: out of fuel".to_owned());
    h.core.shadow_computed(
        GROUP,
        shade.epoch,
        "range",
        failure,
        CallStats::default(),
        h.now,
    );
    let answer = assign_natively("sticky", &call.input);
    let out = h.core.assignment_computed(GROUP, call.epoch, answer, h.now);
    h.absorb(out);
    let liveness = h.core.liveness(GROUP).unwrap();
    let comparison = liveness.shadows.comparisons.back().unwrap();
    assert_eq!(
        comparison.shadow.failure.as_deref(),
        Some("fuel_exhausted: out of fuel")
    );
    assert_eq!(
        (comparison.shadow.moved, comparison.disagreeing_tasks),
        (None, None)
    );
    assert_eq!(liveness.shadows.totals.shadow_failures, 1);
    assert!(
        liveness.failures.is_none(),
        "the live assignor did not fail"
    );
    assert_eq!(h.core.group(GROUP).unwrap().target_epoch, call.epoch);

    members.push(h.join(None));
    let out = h.core.tick(h.now + EXPANSION_MS);
    h.now += EXPANSION_MS;
    let shade = out.shadow_calls[0].clone();
    h.core.shadow_dropped(GROUP, shade.epoch);
    let out = Output {
        shadow_calls: Vec::new(),
        ..out
    };
    h.absorb(out);
    let shadows = &h.core.liveness(GROUP).unwrap().shadows;
    assert_eq!((shadows.totals.skipped, shadows.totals.compared), (1, 1));
    assert!(shadows.pending.is_none() && !shadows.shadow_running);
}

#[test]
fn binding_the_shadows_module_makes_it_live_and_ends_the_shadow() {
    let (mut h, _members) = settled_group();
    shadow(&mut h, Some(spec("range")));
    let mark = h.log.len();
    let out = h
        .core
        .bind(GROUP, BindingSpec::assignor("range"), h.now)
        .unwrap();
    h.absorb(out);
    let kinds: Vec<&str> = h.records_since(mark).iter().map(kind).collect();
    assert_eq!(
        kinds[..3],
        ["AssignorBound", "ShadowBound", "GroupEpochBumped"],
        "{kinds:?}"
    );
    assert_eq!(h.core.group(GROUP).unwrap().shadow, None);
    assert_eq!(h.core.group(GROUP).unwrap().config.assignor, "range");
}

#[test]
fn the_same_shadow_again_or_no_shadow_ended_changes_nothing() {
    let (mut h, _members) = settled_group();
    let none = h.core.bind_shadow(GROUP, None, h.now).unwrap();
    assert!(none.records.is_empty());
    shadow(&mut h, Some(spec("range")));
    let again = h
        .core
        .bind_shadow(GROUP, Some(spec("range")), h.now)
        .unwrap();
    assert!(again.records.is_empty());
    let out = h.core.bind_shadow(GROUP, None, h.now).unwrap();
    assert_eq!(
        out.records,
        vec![Record::ShadowBound {
            group: GROUP.into(),
            shadow: None
        }]
    );
    h.absorb(out);
    assert_eq!(h.core.group(GROUP).unwrap().shadow, None);
}

#[test]
fn a_bad_shadow_is_refused_and_changes_nothing() {
    let (mut h, _members) = settled_group();
    let mut too_many = spec("range");
    for i in 0..100 {
        too_many.params.insert(format!("p{i}"), "v".into());
    }
    for bad in [spec(""), too_many] {
        let before = h.core.group(GROUP).unwrap().clone();
        let refused = h.core.bind_shadow(GROUP, Some(bad), h.now);
        assert!(refused.is_err(), "{refused:?}");
        assert_eq!(h.core.group(GROUP).unwrap(), &before);
    }
    let unknown = h
        .core
        .bind_shadow("no-such-group", Some(spec("range")), h.now);
    assert!(unknown.is_err());
}

#[test]
fn a_shadow_binding_is_replayed_and_its_comparisons_are_not() {
    let (mut h, mut members) = settled_group();
    shadow(&mut h, Some(spec("round-robin")));
    members.push(h.join(None));
    h.advance(h.now + 2 * EXPANSION_MS, &mut members);
    let expected = ShadowBinding {
        assignor: "round-robin".into(),
        params: BTreeMap::new(),
        limits: CallLimits::default(),
        epoch: 4,
        at_ms: EXPANSION_MS,
    };
    assert_eq!(
        h.core.group(GROUP).unwrap().shadow.as_ref(),
        Some(&expected)
    );
    let mut replayed = crate::protocol::core::Coordinator::new(7);
    for record in &h.log {
        replayed.apply(record);
    }
    assert_eq!(
        replayed.group(GROUP).unwrap().shadow.as_ref(),
        Some(&expected)
    );
    assert!(
        !h.core
            .liveness(GROUP)
            .unwrap()
            .shadows
            .comparisons
            .is_empty()
    );
    assert!(
        replayed
            .liveness(GROUP)
            .unwrap()
            .shadows
            .comparisons
            .is_empty()
    );
}

#[test]
fn comparisons_are_bounded() {
    let (mut h, mut members) = settled_group();
    shadow(&mut h, Some(spec("range")));
    for _ in 0..SHADOW_COMPARISONS_MAX + 3 {
        members.push(h.join(None));
        h.advance(h.now + 2 * EXPANSION_MS, &mut members);
        members.pop();
        h.advance(h.now + 2 * SESSION_MS, &mut members);
    }
    let shadows = &h.core.liveness(GROUP).unwrap().shadows;
    assert_eq!(shadows.comparisons.len(), SHADOW_COMPARISONS_MAX);
    assert!(shadows.totals.compared > SHADOW_COMPARISONS_MAX as u64);
}

#[test]
fn the_history_keeps_what_each_target_moved_and_when_the_group_settled() {
    let (mut h, mut members) = settled_group();
    let first = *h
        .core
        .liveness(GROUP)
        .unwrap()
        .rebalances
        .history
        .back()
        .unwrap();
    assert_eq!((first.moved, first.reason.label()), (0, "config"));
    assert!(first.settled_ms.is_some(), "{first:?}");
    members.push(h.join(None));
    let joined_at = h.now;
    h.advance(h.now + 2 * EXPANSION_MS, &mut members);
    h.settle(&mut members);
    let history = &h.core.liveness(GROUP).unwrap().rebalances.history;
    let entry = history.back().unwrap();
    // 12 tasks on 3 members, then on 4: sticky moves 3.
    assert_eq!((entry.reason.label(), entry.moved), ("join", 3));
    assert!(entry.asked_ms >= joined_at && entry.at_ms >= entry.asked_ms);
    let settled = entry.settled_ms.expect("the group settled");
    assert!(settled >= entry.at_ms);
}

fn kind(record: &Record) -> &'static str {
    crate::log::frame::RecordType::of(record).name()
}
