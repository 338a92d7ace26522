//! The machine's phases on a healthy run, pausing, aborting, and a
//! restart in the middle, with the exact commands each input issues.

use super::*;

fn shadow(id: CommandId, i: usize) -> Command {
    Command {
        id,
        group: name(i),
        action: Action::Shadow {
            module: MODULE.into(),
            params: BTreeMap::from([("k".into(), "v".into())]),
        },
    }
}

fn bind(id: CommandId, i: usize) -> Command {
    Command {
        id,
        group: name(i),
        action: Action::Bind { binding: bound(i) },
    }
}

fn unshadow(id: CommandId, i: usize, groups: &[GroupStart]) -> Command {
    let restore = groups
        .iter()
        .find(|g| g.name == name(i))
        .unwrap()
        .current_shadow
        .clone();
    Command {
        id,
        group: name(i),
        action: Action::Unshadow { restore },
    }
}

fn kinds(out: &Outputs) -> Vec<&'static str> {
    out.events.iter().map(|e| e.kind.name()).collect()
}

/// Starts 4 groups in steps 1, 50%, 100% (1, 2, 4 groups) and performs
/// the shadows at 10.
fn started() -> (Rollout, World, Vec<GroupStart>) {
    let groups = groups(4);
    let mut world = World::of(&groups);
    let (mut rollout, out) =
        Rollout::start(spec_with("1,50%,100%", &[]), groups.clone(), 0).unwrap();
    assert_eq!(kinds(&out), ["started", "shadow_began"]);
    assert_eq!(
        out.commands,
        [shadow(1, 1), shadow(2, 2), shadow(3, 3), shadow(4, 4)]
    );
    assert_eq!(rollout.step_sizes(), [1, 2, 4]);
    assert_eq!(
        rollout.poll_timeout(),
        None,
        "no wait while shadows are in flight"
    );
    finish_commands(&mut rollout, &mut world, out, 10);
    (rollout, world, groups)
}

#[test]
fn a_healthy_rollout_shadows_binds_step_by_step_and_completes() {
    let (mut rollout, mut world, groups) = started();
    // The shadow period (2 s) runs from the last shadow's landing.
    assert_eq!(rollout.poll_timeout(), Some(2_010));
    assert_eq!(rollout.tick(2_009), Outputs::default());
    // Its end without a sample since it began takes no step.
    assert_eq!(rollout.tick(2_010), Outputs::default());
    assert!(rollout.status().awaiting_samples);
    assert_eq!(rollout.poll_timeout(), None);

    let out = observe_all(&mut rollout, &world, 2_020);
    assert_eq!(kinds(&out), ["step_began"]);
    assert_eq!(out.commands, [bind(5, 1)]);
    assert_eq!(rollout.phase(), &Phase::Step { step: 1 });
    let events = finish_commands(&mut rollout, &mut world, out, 2_030);
    assert_eq!(events.last().unwrap().name(), "group_bound");
    assert_eq!(rollout.poll_timeout(), Some(3_030));

    let out = rollout.tick(3_030);
    assert_eq!(out, Outputs::default(), "the last samples predate the wait");
    let out = observe_all(&mut rollout, &world, 3_040);
    assert_eq!(out.commands, [bind(6, 2)]);
    let EventKind::StepBegan {
        step,
        steps,
        groups: bound_now,
    } = &out.events[0].kind
    else {
        panic!("{out:?}")
    };
    assert_eq!((*step, *steps, bound_now.clone()), (2, 3, vec![name(2)]));
    finish_commands(&mut rollout, &mut world, out, 3_050);

    // A sample past the wait's end decides at once, without a tick.
    let out = observe_all(&mut rollout, &world, 4_050);
    assert_eq!(out.commands, [bind(7, 3), bind(8, 4)]);
    finish_commands(&mut rollout, &mut world, out, 4_060);
    assert_eq!(rollout.status().groups.bound, 4);

    observe_all(&mut rollout, &world, 5_000);
    let out = rollout.tick(5_060);
    assert_eq!(rollout.phase(), &Phase::Completing);
    assert_eq!(
        out.commands,
        [
            unshadow(9, 1, &groups),
            unshadow(10, 2, &groups),
            unshadow(11, 3, &groups),
            unshadow(12, 4, &groups)
        ]
    );
    let events = finish_commands(&mut rollout, &mut world, out, 5_070);
    assert_eq!(events.last(), Some(&EventKind::Completed));
    assert_eq!(rollout.phase(), &Phase::Completed);
    assert_eq!(rollout.poll_timeout(), None);
    assert_eq!(world.on_module().len(), 4);
    for g in &groups {
        assert_eq!(world.shadows[&g.name], g.current_shadow, "{}", g.name);
    }
    // An ended rollout takes no more input.
    assert_eq!(rollout.tick(99_999), Outputs::default());
    assert_eq!(
        observe_all(&mut rollout, &world, 99_999),
        Outputs::default()
    );
}

#[test]
fn a_pause_holds_the_next_step_until_resumed() {
    let (mut rollout, mut world, _) = started();
    let out = rollout.pause("looking at g02", 100).unwrap();
    assert_eq!(
        out.events[0].kind,
        EventKind::Paused {
            reason: "looking at g02".into()
        }
    );
    assert_eq!(
        rollout.pause("again", 101),
        Err(RolloutError::AlreadyPaused {
            reason: "looking at g02".into()
        })
    );
    assert_eq!(rollout.poll_timeout(), None);
    assert_eq!(observe_all(&mut rollout, &world, 5_000), Outputs::default());
    assert_eq!(rollout.tick(6_000), Outputs::default());
    assert_eq!(rollout.status().paused.as_deref(), Some("looking at g02"));

    let out = rollout.resume(6_500).unwrap();
    assert_eq!(kinds(&out), ["resumed", "step_began"]);
    assert_eq!(out.commands, [bind(5, 1)]);
    assert_eq!(rollout.resume(6_600), Err(RolloutError::NotPaused));
    finish_commands(&mut rollout, &mut world, out, 6_510);
    assert_eq!(world.on_module(), [name(1)]);
}

#[test]
fn an_unhealthy_group_during_a_pause_still_rolls_back() {
    let (mut rollout, mut world, _) = started();
    let out = observe_all(&mut rollout, &world, 2_020);
    finish_commands(&mut rollout, &mut world, out, 2_030);
    rollout.pause("holding", 2_040).unwrap();
    let failing = HealthSample {
        live_failures_of_module: 1,
        ..healthy(2_050, true)
    };
    let out = rollout.observed(&name(1), failing, 2_050);
    assert_eq!(kinds(&out), ["group_unhealthy", "aborting"]);
    assert_eq!(rollout.paused(), None);
    finish_commands(&mut rollout, &mut world, out, 2_060);
    assert!(matches!(rollout.phase(), Phase::RolledBack { .. }));
    assert!(world.on_module().is_empty());
}

#[test]
fn an_abort_rolls_back_every_group_touched_and_ends_input() {
    let (mut rollout, mut world, groups) = started();
    let out = observe_all(&mut rollout, &world, 2_020);
    finish_commands(&mut rollout, &mut world, out, 2_030);
    let out = rollout.abort("wrong module", 2_100).unwrap();
    assert_eq!(
        out.events[0].kind,
        EventKind::Aborting {
            reason: "aborted: wrong module".into()
        }
    );
    assert_eq!(
        out.commands[0],
        Command {
            id: 6,
            group: name(1),
            action: Action::Restore {
                binding: previous(1)
            }
        }
    );
    assert_eq!(
        out.commands[1..],
        [
            unshadow(7, 2, &groups),
            unshadow(8, 3, &groups),
            unshadow(9, 4, &groups)
        ]
    );
    let events = finish_commands(&mut rollout, &mut world, out, 2_110);
    assert_eq!(events.last(), Some(&EventKind::RolledBack));
    assert_eq!(World::of(&groups), world, "every group is as it was");
    assert_eq!(
        rollout.phase(),
        &Phase::RolledBack {
            reason: "aborted: wrong module".into()
        }
    );
    for refused in [
        rollout.abort("again", 3_000),
        rollout.pause("now", 3_000),
        rollout.resume(3_000),
    ] {
        assert!(
            matches!(
                refused,
                Err(RolloutError::NotAdvancing {
                    phase: "rolled_back",
                    ..
                })
            ),
            "{refused:?}"
        );
    }
    let status = rollout.status();
    assert_eq!(status.groups.restored, 4);
    assert_eq!(status.step, 1);
}

#[test]
fn a_restored_rollout_reissues_the_commands_in_flight_and_goes_on_alike() {
    let (mut rollout, mut world, _) = started();
    let out = observe_all(&mut rollout, &world, 2_020);
    finish_commands(&mut rollout, &mut world, out, 2_030);
    let out = observe_all(&mut rollout, &world, 3_040);
    assert_eq!(out.commands, [bind(6, 2)]);

    // The shell persisted the machine, then crashed before the bind.
    let saved = serde_json::to_string(&rollout).unwrap();
    let mut restored: Rollout = serde_json::from_str(&saved).unwrap();
    assert_eq!(restored, rollout);
    assert_eq!(restored.recover(9_000), [bind(6, 2)]);

    // Performed twice (before the crash and after it): once is the same.
    let mut twice = world.clone();
    twice.perform(&out.commands[0]);
    twice.perform(&out.commands[0]);
    world.perform(&out.commands[0]);
    assert_eq!(twice, world);

    let a = rollout.command_done(6, Ok(()), 9_010);
    let b = restored.command_done(6, Ok(()), 9_010);
    assert_eq!(a, b);
    assert_eq!(restored, rollout);
    // A report repeated after the restart changes nothing.
    assert_eq!(restored.command_done(6, Ok(()), 9_020), Outputs::default());
    assert_eq!(restored, rollout);
    assert!(restored.recover(9_030).is_empty());
}

#[test]
fn the_history_keeps_the_last_events() {
    let groups = groups(300);
    let mut world = World::of(&groups);
    let (mut rollout, out) = Rollout::start(spec_with("100%", &[]), groups, 0).unwrap();
    finish_commands(&mut rollout, &mut world, out, 1);
    let out = observe_all(&mut rollout, &world, 3_000);
    let events = finish_commands(&mut rollout, &mut world, out, 3_001);
    assert_eq!(events.len(), 301, "a step and 300 groups bound");
    let kept: Vec<&Event> = rollout.events().collect();
    assert_eq!(kept.len(), EVENTS_MAX);
    assert_eq!(kept.last().unwrap().seq, 303);
    assert_eq!(kept[0].seq, 303 - EVENTS_MAX as u64 + 1);
    assert_eq!(rollout.status().last_events.len(), STATUS_EVENTS_MAX);
}

#[test]
fn a_start_is_refused_without_groups_or_with_steps_that_do_not_fit() {
    let refused =
        |spec: RolloutSpec, groups: Vec<GroupStart>| Rollout::start(spec, groups, 0).unwrap_err();
    let none = refused(spec_with("100%", &[]), vec![]);
    assert!(none.message.contains("matched 0"), "{none}");
    let mut twice = groups(2);
    twice[1].name = twice[0].name.clone();
    assert!(
        refused(spec_with("100%", &[]), twice)
            .message
            .contains("named twice")
    );
    let big = refused(spec_with("1,5", &[]), groups(3));
    assert!(big.message.contains("matched 3"), "{big}");
}

#[test]
fn the_status_shows_the_step_the_groups_and_the_next_decision() {
    let (mut rollout, mut world, _) = started();
    let out = observe_all(&mut rollout, &world, 2_020);
    finish_commands(&mut rollout, &mut world, out, 2_030);
    let status = serde_json::to_value(rollout.status()).unwrap();
    assert_eq!(status["id"], "r1");
    assert_eq!(
        status["phase"],
        serde_json::json!({"phase": "step", "step": 1})
    );
    assert_eq!(
        (status["step"].as_u64(), status["steps"].as_u64()),
        (Some(1), Some(3))
    );
    assert_eq!(
        status["groups"],
        serde_json::json!({"pending": 0, "shadowed": 3, "bound": 1, "restored": 0, "unhealthy": 0, "failed": 0})
    );
    assert_eq!(status["next_decision_ms"], 3_030);
    assert_eq!(status["paused"], serde_json::Value::Null);
    let last = status["last_events"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(
        last,
        serde_json::json!({"seq": 4, "at_ms": 2_030, "event": "group_bound", "group": "g01"})
    );
}
