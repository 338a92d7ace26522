//! Random runs: sequences of samples (healthy or failing), ticks, command
//! outcomes (done, refused, refused yet landed, reported twice), operator
//! inputs and restarts, with the invariants checked after every input:
//!
//! - (a) a group is on the module only in a step at or past its own (or
//!   while completing or rolling back), and a bind is issued only then;
//! - (b) once rolled back, every group is as it was, and every group a
//!   bind was issued for had a restore issued after its last bind;
//! - (c) repeating a command (performing it again after a restart, or
//!   reporting it twice) changes nothing;
//! - (d) no more groups are bound than the current step's size;
//! - (e) completed only if no group was ever found unhealthy;
//!
//! and at the end, the rollout, driven healthily, ends.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::*;

const STEPS: [&str; 5] = [
    "100%",
    "1,100%",
    "1,50%,100%",
    "1,10%,50%,100%",
    "25%,50%,75%,100%",
];

#[derive(Clone, Copy, Debug)]
enum Health {
    Fine,
    LiveFailure,
    ShadowFailure,
    ManyMoves,
}

#[derive(Clone, Debug)]
enum Op {
    Tick(u64),
    ObserveAll,
    Observe { group: usize, health: Health },
    Done { pick: usize, ok: bool, landed: bool },
    RepeatDone { pick: usize },
    Pause,
    Resume,
    Abort,
    Restart { performed_first: bool },
}

fn op() -> impl Strategy<Value = Op> {
    let health = prop_oneof![
        6 => Just(Health::Fine),
        1 => Just(Health::LiveFailure),
        1 => Just(Health::ShadowFailure),
        1 => Just(Health::ManyMoves),
    ];
    prop_oneof![
        4 => (0u64..2_500).prop_map(Op::Tick),
        4 => Just(Op::ObserveAll),
        2 => (0usize..16, health).prop_map(|(group, health)| Op::Observe { group, health }),
        8 => (0usize..16, prop::bool::weighted(0.9), any::<bool>())
            .prop_map(|(pick, ok, landed)| Op::Done { pick, ok, landed }),
        1 => (0usize..16).prop_map(|pick| Op::RepeatDone { pick }),
        1 => Just(Op::Pause),
        1 => Just(Op::Resume),
        1 => Just(Op::Abort),
        1 => any::<bool>().prop_map(|performed_first| Op::Restart { performed_first }),
    ]
}

/// The shell's side of a run: the world, the commands not reported yet,
/// the ones reported, what each group was last issued, and what was
/// ever decided.
struct Run {
    rollout: Rollout,
    world: World,
    initial: World,
    now: u64,
    pending: Vec<Command>,
    reported: Vec<Command>,
    /// Per group, the last command performed.
    last_performed: BTreeMap<String, Command>,
    /// Per group, the binding commands issued, in order.
    bindings_issued: BTreeMap<String, Vec<&'static str>>,
    /// Per group, the failures and moves counted so far (cumulative).
    counters: BTreeMap<String, HealthSample>,
    ever_unhealthy: bool,
}

impl Run {
    fn take(&mut self, out: Outputs) -> Result<(), TestCaseError> {
        for command in &out.commands {
            if let Action::Bind { .. } = command.action {
                let step = self.rollout.group(&command.group).unwrap().step;
                let phase = self.rollout.phase();
                prop_assert!(
                    matches!(phase, Phase::Step { step: k } if *k >= step),
                    "(a) bind of a step-{} group in {:?}",
                    step,
                    phase
                );
            }
            if matches!(command.action, Action::Bind { .. } | Action::Restore { .. }) {
                let issued = self
                    .bindings_issued
                    .entry(command.group.clone())
                    .or_default();
                issued.push(command.action.name());
            }
        }
        self.ever_unhealthy |= out
            .events
            .iter()
            .any(|e| matches!(e.kind, EventKind::GroupUnhealthy { .. }));
        self.pending.extend(out.commands);
        self.check()
    }

    fn check(&self) -> Result<(), TestCaseError> {
        let rollout = &self.rollout;
        let on_module = self.world.on_module();
        match rollout.phase() {
            Phase::Shadowing => prop_assert!(on_module.is_empty(), "(a) bound while shadowing"),
            Phase::Step { step } => {
                for group in &on_module {
                    prop_assert!(rollout.group(group).unwrap().step <= *step, "(a) {}", group);
                }
                let size = rollout.step_sizes()[step - 1];
                let bound = self
                    .world
                    .bindings
                    .keys()
                    .filter(|g| rollout.bound(g))
                    .count();
                prop_assert!(bound <= size, "(d) {} bound in a step of {}", bound, size);
                prop_assert!(on_module.len() <= size, "(d) {:?}", on_module);
            }
            Phase::RolledBack { .. } => {
                prop_assert_eq!(&self.world, &self.initial, "(b) not as it was");
                for (group, issued) in &self.bindings_issued {
                    prop_assert_eq!(
                        issued.last(),
                        Some(&"restore"),
                        "(b) {}: {:?}",
                        group,
                        issued
                    );
                }
            }
            Phase::Completed => {
                prop_assert!(
                    !self.ever_unhealthy,
                    "(e) completed after an unhealthy verdict"
                );
                prop_assert_eq!(on_module.len(), self.world.bindings.len());
                prop_assert_eq!(&self.world.shadows, &self.initial.shadows);
            }
            _ => {}
        }
        Ok(())
    }

    fn sample(&mut self, group: &str, health: Health) -> HealthSample {
        let bound = self.world.bindings[group].assignor == MODULE;
        let shadowed = self.world.shadows[group]
            .as_ref()
            .is_some_and(|s| s.assignor == MODULE);
        let counters = self.counters.entry(group.to_owned()).or_default();
        match health {
            Health::Fine => {}
            Health::LiveFailure if bound => counters.live_failures_of_module += 1,
            Health::ShadowFailure if shadowed => counters.shadow_failures += 1,
            Health::ManyMoves if bound => {
                counters.rebalances += 1;
                counters.moved_total += 100;
            }
            _ => {}
        }
        HealthSample {
            bound_to_module: bound,
            shadow_is_module: shadowed,
            observed_at_ms: self.now,
            ..counters.clone()
        }
    }

    fn observe(&mut self, group: &str, health: Health) -> Result<(), TestCaseError> {
        let sample = self.sample(group, health);
        let out = self.rollout.observed(group, sample, self.now);
        self.take(out)
    }

    fn apply(&mut self, op: Op) -> Result<(), TestCaseError> {
        let names: Vec<String> = self.world.bindings.keys().cloned().collect();
        match op {
            Op::Tick(ms) => {
                self.now += ms;
                let out = self.rollout.tick(self.now);
                self.take(out)?;
            }
            Op::ObserveAll => {
                for group in &names {
                    self.observe(group, Health::Fine)?;
                }
            }
            Op::Observe { group, health } => self.observe(&names[group % names.len()], health)?,
            Op::Done { pick, ok, landed } if !self.pending.is_empty() => {
                let command = self.pending.remove(pick % self.pending.len());
                if ok || landed {
                    self.perform(&command);
                }
                let result = if ok { Ok(()) } else { Err("refused".into()) };
                let out = self.rollout.command_done(command.id, result, self.now);
                self.reported.push(command);
                self.take(out)?;
            }
            Op::RepeatDone { pick } if !self.reported.is_empty() => {
                let command = self.reported[pick % self.reported.len()].clone();
                let before = self.rollout.clone();
                // What a shell that died after performing it does again.
                if self.last_performed.get(&command.group) == Some(&command) {
                    let world = self.world.clone();
                    self.world.perform(&command);
                    prop_assert_eq!(&self.world, &world, "(c) performed again");
                }
                let out = self.rollout.command_done(command.id, Ok(()), self.now);
                prop_assert_eq!(out, Outputs::default(), "(c) reported again");
                prop_assert_eq!(&self.rollout, &before, "(c) reported again");
            }
            Op::Pause => self.operator(|r, now| r.pause("pause", now))?,
            Op::Resume => self.operator(|r, now| r.resume(now))?,
            Op::Abort => self.operator(|r, now| r.abort("abort", now))?,
            Op::Restart { performed_first } => self.restart(performed_first)?,
            Op::Done { .. } | Op::RepeatDone { .. } => {}
        }
        Ok(())
    }

    fn perform(&mut self, command: &Command) {
        self.world.perform(command);
        self.last_performed
            .insert(command.group.clone(), command.clone());
    }

    fn operator(
        &mut self,
        input: impl Fn(&mut Rollout, u64) -> Result<Outputs, RolloutError>,
    ) -> Result<(), TestCaseError> {
        let before = self.rollout.clone();
        match input(&mut self.rollout, self.now) {
            Ok(out) => self.take(out),
            Err(_) => {
                prop_assert_eq!(
                    &self.rollout,
                    &before,
                    "a refused input changed the machine"
                );
                Ok(())
            }
        }
    }

    /// The shell persisted, (maybe) performed the commands, and died: a
    /// new one loads the rollout and performs `recover`'s commands.
    fn restart(&mut self, performed_first: bool) -> Result<(), TestCaseError> {
        if performed_first {
            for command in self.pending.clone() {
                self.perform(&command);
            }
        }
        let saved = serde_json::to_string(&self.rollout).unwrap();
        self.rollout = serde_json::from_str(&saved).unwrap();
        let mut recovered = self.rollout.recover(self.now);
        let ids = |commands: &[Command]| commands.iter().map(|c| c.id).collect::<BTreeSet<_>>();
        prop_assert_eq!(
            ids(&recovered),
            ids(&self.pending),
            "recover names what is in flight"
        );
        recovered.sort_by_key(|c| c.id);
        self.pending = recovered;
        self.check()
    }

    /// Drives the rollout healthily to its end.
    fn settle(&mut self) -> Result<(), TestCaseError> {
        if self.rollout.paused().is_some() {
            let out = self.rollout.resume(self.now).unwrap();
            self.take(out)?;
        }
        for _ in 0..200 {
            if self.rollout.phase().is_terminal() {
                return Ok(());
            }
            while !self.pending.is_empty() {
                self.apply(Op::Done {
                    pick: 0,
                    ok: true,
                    landed: true,
                })?;
            }
            self.apply(Op::ObserveAll)?;
            self.apply(Op::Tick(REVERT_RETRY_MS))?;
        }
        prop_assert!(false, "no end: {:?}", self.rollout.status());
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_runs_keep_the_invariants_and_end(
        group_count in 1usize..10,
        steps in 0usize..STEPS.len(),
        ops in prop::collection::vec(op(), 0..120),
        chaos in (prop::bool::weighted(0.3), prop::bool::weighted(0.4), prop::bool::weighted(0.4)),
    ) {
        // Some runs abort, some refuse commands, some fail: each alone
        // would end most runs early, before the later steps.
        let (aborts, refusals, failures) = chaos;
        let groups = groups(group_count);
        let world = World::of(&groups);
        let spec = spec_with(STEPS[steps], &["failures", "moves>5"]);
        let (rollout, out) = Rollout::start(spec, groups, 0).unwrap();
        let mut run = Run {
            rollout,
            initial: world.clone(),
            world,
            now: 0,
            pending: vec![],
            reported: vec![],
            last_performed: BTreeMap::new(),
            bindings_issued: BTreeMap::new(),
            counters: BTreeMap::new(),
            ever_unhealthy: false,
        };
        run.take(out)?;
        for op in ops {
            let op = match op {
                Op::Abort if !aborts => Op::Tick(0),
                Op::Done { pick, .. } if !refusals => Op::Done { pick, ok: true, landed: true },
                Op::Observe { group, .. } if !failures => Op::Observe { group, health: Health::Fine },
                op => op,
            };
            run.apply(op)?;
        }
        run.settle()?;
        run.check()?;
    }
}
