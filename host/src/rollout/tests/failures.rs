//! The machine when something goes wrong: an unhealthy module, refused
//! commands, samples out of order.

use super::*;

fn failing(at: u64) -> HealthSample {
    HealthSample {
        live_failures_of_module: 1,
        ..healthy(at, true)
    }
}

/// 6 groups in steps 1, 3, 6, run until step 2's binds landed at 3_050.
fn at_step_two() -> (Rollout, World, Vec<GroupStart>) {
    let groups = groups(6);
    let mut world = World::of(&groups);
    let (mut rollout, out) = Rollout::start(spec_with("1,3,6", &[]), groups.clone(), 0).unwrap();
    finish_commands(&mut rollout, &mut world, out, 10);
    let out = observe_all(&mut rollout, &world, 2_020);
    finish_commands(&mut rollout, &mut world, out, 2_030);
    let out = observe_all(&mut rollout, &world, 3_040);
    assert_eq!(rollout.phase(), &Phase::Step { step: 2 });
    finish_commands(&mut rollout, &mut world, out, 3_050);
    assert_eq!(world.on_module(), [name(1), name(2), name(3)]);
    (rollout, world, groups)
}

fn restore(group: usize) -> (String, &'static str) {
    (name(group), "restore")
}

fn unshadow(group: usize) -> (String, &'static str) {
    (name(group), "unshadow")
}

fn actions(commands: &[Command]) -> Vec<(String, &'static str)> {
    commands
        .iter()
        .map(|c| (c.group.clone(), c.action.name()))
        .collect()
}

#[test]
fn a_module_failing_at_step_two_rolls_back_exactly_the_groups_of_steps_one_and_two() {
    let (mut rollout, mut world, groups) = at_step_two();
    let out = rollout.observed(&name(2), failing(3_100), 3_100);
    let reason = "group g02 unhealthy: failures: 1 failures of the module (1 live, 0 shadow)";
    assert_eq!(
        out.events[1].kind,
        EventKind::Aborting {
            reason: reason.into()
        }
    );
    // Restores first for the bound groups, unshadows for the others; the
    // bound ones are unshadowed once restored.
    assert_eq!(
        actions(&out.commands),
        [
            restore(1),
            restore(2),
            restore(3),
            unshadow(4),
            unshadow(5),
            unshadow(6)
        ]
    );
    let restores: Vec<&Command> = out.commands[..3].iter().collect();
    for (i, command) in restores.iter().enumerate() {
        assert_eq!(
            command.action,
            Action::Restore {
                binding: previous(i + 1)
            }
        );
    }
    let first = out.commands[0].clone();
    world.perform(&first);
    let next = rollout.command_done(first.id, Ok(()), 3_110);
    assert_eq!(actions(&next.commands), [unshadow(1)]);
    let rest = Outputs {
        commands: out.commands[1..]
            .iter()
            .cloned()
            .chain(next.commands)
            .collect(),
        events: vec![],
    };
    let events = finish_commands(&mut rollout, &mut world, rest, 3_120);
    assert_eq!(events.last(), Some(&EventKind::RolledBack));
    assert!(world.on_module().is_empty());
    assert_eq!(world, World::of(&groups));
    let status = rollout.status();
    assert_eq!(status.unhealthy.len(), 1);
    assert_eq!(status.unhealthy[0].group, name(2));
    assert_eq!((status.groups.unhealthy, status.groups.restored), (1, 5));
}

#[test]
fn a_shadow_failure_rolls_back_before_anything_is_bound() {
    let groups = groups(3);
    let mut world = World::of(&groups);
    let (mut rollout, out) = Rollout::start(spec_with("1,100%", &[]), groups.clone(), 0).unwrap();
    finish_commands(&mut rollout, &mut world, out, 10);
    let sample = HealthSample {
        shadow_failures: 1,
        ..healthy(500, false)
    };
    let out = rollout.observed(&name(3), sample, 500);
    assert_eq!(
        actions(&out.commands),
        [unshadow(1), unshadow(2), unshadow(3)]
    );
    finish_commands(&mut rollout, &mut world, out, 510);
    assert!(matches!(rollout.phase(), Phase::RolledBack { .. }));
    assert_eq!(world, World::of(&groups));
}

#[test]
fn a_refused_bind_rolls_back_and_restores_that_group_too() {
    let groups = groups(2);
    let mut world = World::of(&groups);
    let (mut rollout, out) = Rollout::start(spec_with("1,100%", &[]), groups.clone(), 0).unwrap();
    finish_commands(&mut rollout, &mut world, out, 10);
    let out = observe_all(&mut rollout, &world, 2_020);
    let bind = out.commands[0].clone();
    let out = rollout.command_done(bind.id, Err("group g01 not found".into()), 2_030);
    assert_eq!(
        out.events[0].kind,
        EventKind::CommandFailed {
            id: bind.id,
            group: name(1),
            action: "bind".into(),
            error: "group g01 not found".into(),
            attempt: 1
        }
    );
    assert_eq!(
        rollout.phase(),
        &Phase::RollingBack {
            reason: "bind of group g01 refused: group g01 not found".into()
        }
    );
    // The refused bind may have landed: the group is restored all the same.
    assert_eq!(actions(&out.commands), [restore(1), unshadow(2)]);
    finish_commands(&mut rollout, &mut world, out, 2_040);
    assert_eq!(world, World::of(&groups));
}

#[test]
fn a_refused_restore_is_retried_then_given_up_naming_the_group() {
    let (mut rollout, mut world, _) = at_step_two();
    let out = rollout.abort("stop", 4_000).unwrap();
    let mut stuck = out.commands[1].clone();
    assert_eq!(stuck.action.name(), "restore");
    let others = Outputs {
        commands: out
            .commands
            .iter()
            .filter(|c| c.id != stuck.id)
            .cloned()
            .collect(),
        events: vec![],
    };
    finish_commands(&mut rollout, &mut world, others, 4_010);
    let mut now = 4_020;
    for attempt in 1..=REVERT_ATTEMPTS_MAX {
        let out = rollout.command_done(stuck.id, Err("etcd unavailable".into()), now);
        assert!(
            matches!(&out.events[0].kind, EventKind::CommandFailed { attempt: a, .. } if *a == attempt)
        );
        if attempt == REVERT_ATTEMPTS_MAX {
            // Given up: the group's unshadow still goes out.
            assert_eq!(actions(&out.commands), [unshadow(2)]);
            let events = finish_commands(&mut rollout, &mut world, out, now);
            assert_eq!(
                events.last(),
                Some(&EventKind::Failed {
                    groups: vec![name(2)]
                })
            );
            break;
        }
        assert!(out.commands.is_empty());
        assert_eq!(rollout.poll_timeout(), Some(now + REVERT_RETRY_MS));
        assert_eq!(rollout.tick(now + REVERT_RETRY_MS - 1), Outputs::default());
        now += REVERT_RETRY_MS;
        let retry = rollout.tick(now);
        assert_eq!(actions(&retry.commands), [restore(2)]);
        stuck = retry.commands[0].clone();
    }
    assert!(matches!(rollout.phase(), Phase::Failed { reason } if reason.contains("g02")));
    assert_eq!(
        world.on_module(),
        [name(2)],
        "never silently: named as failed"
    );
    assert_eq!(rollout.status().failed, [name(2)]);
}

#[test]
fn a_restore_waits_for_the_bind_in_flight_it_undoes() {
    let (mut rollout, mut world, _) = at_step_two();
    let out = observe_all(&mut rollout, &world, 4_060);
    assert_eq!(
        actions(&out.commands),
        [(name(4), "bind"), (name(5), "bind"), (name(6), "bind")]
    );
    let abort = rollout.abort("stop", 4_070).unwrap();
    let touched: Vec<String> = abort.commands.iter().map(|c| c.group.clone()).collect();
    assert_eq!(
        touched,
        [name(1), name(2), name(3)],
        "g04 to g06 wait for their binds"
    );
    let bind = out.commands[0].clone();
    world.perform(&bind);
    let next = rollout.command_done(bind.id, Ok(()), 4_080);
    assert_eq!(actions(&next.commands), [restore(4)]);
}

#[test]
fn stale_unknown_and_repeated_inputs_change_nothing() {
    let (mut rollout, _, _) = at_step_two();
    let before = rollout.clone();
    assert_eq!(
        rollout.observed("nope", failing(5_000), 5_000),
        Outputs::default()
    );
    rollout.observed(&name(1), healthy(5_000, true), 5_000);
    // An older sample, failing, is ignored: the newer one says more.
    assert_eq!(
        rollout.observed(&name(1), failing(4_000), 5_001),
        Outputs::default()
    );
    assert_eq!(rollout.command_done(77, Ok(()), 5_002), Outputs::default());
    assert_eq!(rollout.phase(), before.phase());
    assert_eq!(
        rollout.pause(&"x".repeat(REASON_LEN_MAX + 1), 5_003),
        Err(RolloutError::ReasonTooLong(1025))
    );
}
