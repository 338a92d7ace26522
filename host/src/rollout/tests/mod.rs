//! Tests of the rollout core: the spec's syntax (`spec.rs`), the verdict
//! (`health.rs`), the machine's phases with their exact commands
//! (`machine.rs`, `failures.rs`), and random runs against the invariants
//! (`proptests.rs`). The fixtures here: a spec, groups, samples, and a
//! [`World`] that performs commands on a model of the groups.

use std::collections::BTreeMap;

use super::*;

mod failures;
mod health;
mod machine;
mod proptests;
mod spec;

pub const MODULE: &str = "payments-v2";

/// A spec over `prefix:g` with these steps, 1 s waits and the given
/// abort rules (none: `failures`).
pub fn spec_with(steps: &str, abort_on: &[&str]) -> RolloutSpec {
    RolloutSpec::parse(&RolloutRequest {
        id: "r1".into(),
        module: MODULE.into(),
        params: BTreeMap::from([("k".into(), "v".into())]),
        groups: "prefix:g".into(),
        steps: Some(steps.into()),
        every: Some("1s".into()),
        shadow: Some("2s".into()),
        abort_on: abort_on.iter().map(|r| r.to_string()).collect(),
    })
    .unwrap()
}

/// `g01`, `g02`, … each bound to `sticky-{i}` with a limit and a
/// fallback; odd ones have a shadow of their own.
pub fn groups(n: usize) -> Vec<GroupStart> {
    (1..=n)
        .rev()
        .map(|i| GroupStart {
            name: name(i),
            current_binding: previous(i),
            current_shadow: (i % 2 == 1).then(|| BindingRef {
                assignor: format!("old-shadow-{i}"),
                params: BTreeMap::new(),
                limits: Default::default(),
                fallback: None,
            }),
        })
        .collect()
}

pub fn name(i: usize) -> String {
    format!("g{i:02}")
}

pub fn previous(i: usize) -> BindingRef {
    BindingRef {
        assignor: format!("sticky-{i}"),
        params: BTreeMap::from([("p".into(), i.to_string())]),
        limits: crate::protocol::group::CallLimits {
            fuel_max: Some(1_000 + i as u64),
            ..Default::default()
        },
        fallback: Some("range".into()),
    }
}

/// The binding a rollout binds group `i` to.
pub fn bound(i: usize) -> BindingRef {
    BindingRef {
        assignor: MODULE.into(),
        params: BTreeMap::from([("k".into(), "v".into())]),
        ..previous(i)
    }
}

/// A healthy sample at `at` of a group in the state the rollout put it.
pub fn healthy(at: u64, bound: bool) -> HealthSample {
    HealthSample {
        bound_to_module: bound,
        shadow_is_module: true,
        observed_at_ms: at,
        ..Default::default()
    }
}

/// The groups as the shell's side sees them: each one's binding and
/// shadow, changed only by performing commands.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct World {
    pub bindings: BTreeMap<String, BindingRef>,
    pub shadows: BTreeMap<String, Option<BindingRef>>,
}

impl World {
    pub fn of(groups: &[GroupStart]) -> World {
        let mut world = World::default();
        for g in groups {
            world
                .bindings
                .insert(g.name.clone(), g.current_binding.clone());
            world
                .shadows
                .insert(g.name.clone(), g.current_shadow.clone());
        }
        world
    }

    pub fn perform(&mut self, command: &Command) {
        let group = command.group.clone();
        match &command.action {
            Action::Shadow { module, params } => {
                let shadow = BindingRef {
                    assignor: module.clone(),
                    params: params.clone(),
                    limits: Default::default(),
                    fallback: None,
                };
                self.shadows.insert(group, Some(shadow));
            }
            Action::Unshadow { restore } => {
                self.shadows.insert(group, restore.clone());
            }
            Action::Bind { binding } | Action::Restore { binding } => {
                self.bindings.insert(group, binding.clone());
            }
        }
    }

    /// Groups whose binding is the module.
    pub fn on_module(&self) -> Vec<String> {
        self.bindings
            .iter()
            .filter(|(_, b)| b.assignor == MODULE)
            .map(|(g, _)| g.clone())
            .collect()
    }
}

/// Performs every command of `out` and reports it done at `now`,
/// repeatedly, until none is left; returns all outputs' events.
pub fn finish_commands(
    rollout: &mut Rollout,
    world: &mut World,
    out: Outputs,
    now: u64,
) -> Vec<EventKind> {
    let mut events: Vec<EventKind> = out.events.into_iter().map(|e| e.kind).collect();
    let mut queue = out.commands;
    while let Some(command) = queue.first().cloned() {
        queue.remove(0);
        world.perform(&command);
        let next = rollout.command_done(command.id, Ok(()), now);
        events.extend(next.events.into_iter().map(|e| e.kind));
        queue.extend(next.commands);
    }
    events
}

/// Samples every group healthy at `now`, as the world shows it.
pub fn observe_all(rollout: &mut Rollout, world: &World, now: u64) -> Outputs {
    let mut all = Outputs::default();
    let names: Vec<String> = world.bindings.keys().cloned().collect();
    for group in names {
        let bound = world.bindings[&group].assignor == MODULE;
        let out = rollout.observed(&group, healthy(now, bound), now);
        all.commands.extend(out.commands);
        all.events.extend(out.events);
    }
    all
}
