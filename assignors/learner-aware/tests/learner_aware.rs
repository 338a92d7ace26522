//! Properties and exact answers of the `learner-aware` assignor, run
//! through the SDK harness (which validates every answer as the host would).

#[path = "../../balance/tests/common/mod.rs"]
mod common;

use assignd_guest_sdk::harness::{run, run_json};
use assignd_guest_sdk::testing::{Promises, check_contract};
use assignd_guest_sdk::{Assignor, GroupIndex, GroupInput, NO_MEMBER};
use assignor_learner_aware::LearnerAware;
use common::*;
use proptest::prelude::*;

fn with_params(
    mut input: GroupInput,
    acceptable_recovery_lag: u64,
    max_learners: u64,
    num_standby: u64,
) -> GroupInput {
    input.params.insert(
        "acceptable_recovery_lag".into(),
        acceptable_recovery_lag.to_string(),
    );
    input
        .params
        .insert("max_learners".into(), max_learners.to_string());
    input
        .params
        .insert("num_standby".into(), num_standby.to_string());
    input
}

fn params() -> impl Strategy<Value = (u64, u64, u64)> {
    (
        prop::sample::select(vec![0u64, 5_000, 10_000, 30_000]),
        0u64..=4,
        0u64..=3,
    )
}

proptest! {
    #[test]
    fn answers_follow_the_high_availability_rules(shape in shapes(3, true), (lag, max_learners, num_standby) in params()) {
        let input = with_params(build(&shape), lag, max_learners, num_standby);
        // Valid, deterministic, learners and standbys only as declared.
        let out = check_contract::<LearnerAware>(&input, Promises::NONE, shape.seed)?;
        let index = GroupIndex::new(&input);
        let caught_up = |task: u32, m: u32| index.lag(&input, task, m).is_some_and(|l| l <= lag);
        let target = assignor_balance::balance(&input);

        for (task, &owner) in out.active_owner.iter().enumerate() {
            let task = task as u32;
            if owner == NO_MEMBER {
                continue;
            }
            let topic = index.task_topic[task as usize];
            let someone_caught_up = index.topic_subscribers[topic as usize].iter().any(|&m| caught_up(task, m));
            prop_assert!(caught_up(task, owner) || !someone_caught_up,
                "task {task} active on lagging member {owner} though a caught-up subscriber exists");
        }

        prop_assert!(out.learners.len() as u64 <= max_learners);
        for (task, learner) in out.learners.iter() {
            prop_assert_eq!(learner, target[task as usize], "a learner warms the balanced owner");
            prop_assert_ne!(learner, out.active_owner[task as usize]);
        }

        let mut per_task = vec![Vec::new(); out.active_owner.len()];
        for (task, m) in out.standbys.iter() {
            per_task[task as usize].push(m);
        }
        for (task, standbys) in per_task.iter().enumerate() {
            let owner = out.active_owner[task];
            let learner = out.learners.iter().find(|&(t, _)| t as usize == task).map(|(_, m)| m);
            prop_assert!(!standbys.iter().any(|&m| Some(m) == learner), "standby on the learner of task {task}");
            let eligible = if owner == NO_MEMBER {
                0
            } else {
                let topic = index.task_topic[task] as usize;
                index.topic_subscribers[topic].iter().filter(|&&m| m != owner && Some(m) != learner).count()
            };
            prop_assert_eq!(standbys.len(), eligible.min(num_standby as usize), "standbys of task {}", task);
        }
    }

    #[test]
    fn with_everyone_caught_up_it_is_the_balanced_answer(shape in shapes(3, false)) {
        let input = with_params(build(&shape), u64::MAX, 2, 0);
        // No lag rows: only current owners count as caught up, so give
        // every subscriber a lag of 0.
        let mut input = input;
        let index = GroupIndex::new(&input);
        for task in 0..input.active_owner.len() as u32 {
            for &m in &index.topic_subscribers[index.task_topic[task as usize] as usize] {
                input.lags.push(task, m, 0);
            }
        }
        let out = run::<LearnerAware>(&input).unwrap();
        prop_assert_eq!(out.active_owner, assignor_balance::balance(&input));
        prop_assert!(out.learners.is_empty());
    }
}

#[test]
fn info_lists_capabilities_and_params() {
    let info = LearnerAware::info();
    assert_eq!(
        (info.name.as_str(), info.version.as_str()),
        ("learner-aware", "1.0.0")
    );
    assert!(info.capabilities.learners && info.capabilities.standbys && info.capabilities.racks);
    assert!(info.capabilities.load);
    let params: Vec<(&str, &str)> = info
        .params
        .iter()
        .map(|p| (p.name.as_str(), p.default_value.as_str()))
        .collect();
    assert_eq!(
        params,
        [
            ("acceptable_recovery_lag", "10000"),
            ("max_learners", "2"),
            ("num_standby", "0"),
            ("load_band", "default")
        ]
    );
    assert!(info.params.iter().all(|p| !p.description.is_empty()));
}

/// Member m1 owns all four tasks; the new m2 is caught up on orders-2 only.
const LEARNER_CASE: &str = r#"{
    "topics": {"orders": 4},
    "members": [
        {"id": "m1", "topics": ["orders"], "rack": "az-1",
         "active": [["orders", 0], ["orders", 1], ["orders", 2], ["orders", 3]]},
        {"id": "m2", "topics": ["orders"], "rack": "az-2",
         "lags": [["orders", 2, 1500], ["orders", 3, 50000]]}
    ]
}"#;

#[test]
fn a_cold_target_warms_up_as_a_learner() {
    let out = run_json::<LearnerAware>(LEARNER_CASE, &[]).unwrap();
    let expected = concat!(
        r#"{"m1":{"active":[["orders",0],["orders",1],["orders",3]],"learner":[],"standby":[]},"#,
        r#""m2":{"active":[["orders",2]],"learner":[["orders",3]],"standby":[]}}"#
    );
    assert_eq!(out.to_string(), expected);
}

#[test]
fn no_learner_slots_keeps_the_task_on_its_owner() {
    let out = run_json::<LearnerAware>(LEARNER_CASE, &["max_learners=0"]).unwrap();
    let expected = concat!(
        r#"{"m1":{"active":[["orders",0],["orders",1],["orders",3]],"learner":[],"standby":[]},"#,
        r#""m2":{"active":[["orders",2]],"learner":[],"standby":[]}}"#
    );
    assert_eq!(out.to_string(), expected);
}

#[test]
fn standbys_go_to_the_other_members() {
    let out = run_json::<LearnerAware>(LEARNER_CASE, &["num_standby=1"]).unwrap();
    let expected = concat!(
        r#"{"m1":{"active":[["orders",0],["orders",1],["orders",3]],"learner":[],"standby":[["orders",2]]},"#,
        r#""m2":{"active":[["orders",2]],"learner":[["orders",3]],"standby":[["orders",0],["orders",1]]}}"#
    );
    assert_eq!(out.to_string(), expected);
}

#[test]
fn invalid_param_is_refused() {
    let err = run_json::<LearnerAware>(LEARNER_CASE, &["max_learners=many"]).unwrap_err();
    assert!(err.contains("max_learners"), "{err}");
}

#[test]
fn learner_slots_prefer_continuing_learners_then_least_lag() {
    // m1 owns tasks 0..6, m2 joins cold on all of them: the target gives m2
    // tasks 3, 4, 5, all lagging. Task 5 already has m2 as learner, task 4
    // lags least; one slot each way.
    let mut input = uniform_group(2, 1, 6);
    input.active_owner = vec![0; 6];
    for (task, lag) in [(3, 90_000), (4, 20_000), (5, 80_000)] {
        input.lags.push(task, 1, lag);
    }
    input.learners.push(5, 1);
    let input = with_params(input, 10_000, 1, 0);
    let out = run::<LearnerAware>(&input).unwrap();
    assert_eq!(out.active_owner, vec![0; 6]);
    assert_eq!(out.learners.iter().collect::<Vec<_>>(), [(5, 1)]);
    let input = with_params(input, 10_000, 2, 0);
    let mut out = run::<LearnerAware>(&input).unwrap();
    out.normalize();
    assert_eq!(out.learners.iter().collect::<Vec<_>>(), [(4, 1), (5, 1)]);
}

#[test]
fn standbys_prefer_another_rack() {
    // m0 (rack a) owns the task; m1 shares rack a, m2 is on rack b.
    let mut input = uniform_group(3, 1, 1);
    input.active_owner = vec![0];
    for (m, rack) in [(0, "a"), (1, "a"), (2, "b")] {
        input.members[m].rack = Some(rack.into());
    }
    for m in 0..3 {
        input.lags.push(0, m, 0);
    }
    let out = run::<LearnerAware>(&with_params(input.clone(), 10_000, 2, 1)).unwrap();
    assert_eq!(out.standbys.iter().collect::<Vec<_>>(), [(0, 2)]);
    // Rack diversity beats stickiness to a previous standby on the same rack.
    input.standbys.push(0, 1);
    let out = run::<LearnerAware>(&with_params(input.clone(), 10_000, 2, 1)).unwrap();
    assert_eq!(out.standbys.iter().collect::<Vec<_>>(), [(0, 2)]);
    // Two standbys: both other members, whatever their racks.
    let mut out = run::<LearnerAware>(&with_params(input, 10_000, 2, 2)).unwrap();
    out.normalize();
    assert_eq!(out.standbys.iter().collect::<Vec<_>>(), [(0, 1), (0, 2)]);
}

/// A scale-down, as the host asks it: 20 members of 5 tasks each, the 5
/// draining ones left out of the input (their 25 tasks look free), each of
/// those tasks still warm on one remaining member (an earlier owner). Rounds
/// follow as the host would run them: the answer is installed, learners
/// catch up at once. Each freed task should move once, and nothing else.
#[test]
fn a_scale_down_moves_each_freed_task_once_and_nothing_else() {
    const MEMBERS: u32 = 15;
    const TASKS: u32 = 100;
    let mut input = uniform_group(MEMBERS, 1, TASKS);
    let kept = (MEMBERS * 5) as usize;
    input.active_owner = (0..TASKS)
        .map(|t| {
            if (t as usize) < kept {
                t / 5
            } else {
                NO_MEMBER
            }
        })
        .collect();
    for task in kept as u32..TASKS {
        input.lags.push(task, task % MEMBERS, 0);
    }
    let mut input = with_params(input, 10_000, TASKS as u64, 0);
    let mut moves = vec![0u32; TASKS as usize];
    for _round in 0..10 {
        let out = run::<LearnerAware>(&input).unwrap();
        for (task, (&before, &after)) in
            input.active_owner.iter().zip(&out.active_owner).enumerate()
        {
            if before != after {
                moves[task] += 1;
            }
        }
        let done = out.learners.is_empty() && out.active_owner == input.active_owner;
        input.active_owner = out.active_owner.clone();
        input.learners = out.learners.clone();
        for (task, member) in out.learners.iter() {
            input.lags.push(task, member, 0);
        }
        if done {
            let counts = out.active_counts(MEMBERS as usize);
            assert!(counts.iter().all(|&c| c == 6 || c == 7), "{counts:?}");
            assert!(
                moves[..kept].iter().all(|&m| m == 0),
                "kept tasks moved: {moves:?}"
            );
            assert!(
                moves[kept..].iter().all(|&m| m == 1),
                "freed tasks: {moves:?}"
            );
            return;
        }
    }
    panic!("not settled in 10 rounds: {moves:?}");
}
