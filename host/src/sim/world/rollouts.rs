//! A rollout in the schedules: with [`Options::rollouts`](crate::sim::Options),
//! on one host, the rollout decision core (`crate::rollout`, the same
//! machine `assignd serve` runs) rolls a built-in assignor out over every
//! group of the schedule while the chaos goes on: its commands (shadow,
//! bind, restore, unshadow) go to the shards' cores as an admin's would,
//! and it samples each group's health from the core's own state. Every
//! invariant is checked as always; and once the rollout has ended, the
//! groups no admin reconfigured meanwhile are where it says: all on the
//! module when it completed, all back on their binding and shadow when it
//! rolled back. Its draws come from its own generator.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use super::World;
use crate::protocol::core::ShadowSpec;
use crate::protocol::group::{BindingSpec, CallLimits, Group, Liveness, Millis};
use crate::rollout::{
    Action, Baseline, BindingRef, Command, GroupStart, HealthSample, Outputs, Phase, Rollout,
    RolloutRequest, RolloutSpec,
};
use crate::sim::Violation;
use crate::sim::rng::Rng;

/// What the rollouts' own generator is seeded with, besides the seed.
pub(super) const ROLLOUTS_SEED_SALT: u64 = 0x726f_6c6c_6f75_7421;

/// The modules a schedule's rollout may roll out, and its abort rules.
const MODULES: [&str; 3] = ["range", "round-robin", "learner-aware"];
const RULES: [&str; 4] = ["failures", "moves>0", "moves>1.5x", "rebalance_ms>2000"];

/// How often the rollout samples its groups (virtual ms).
const SAMPLE_MS: Millis = 250;

/// A schedule's rollout and what the simulator keeps beside it.
pub(super) struct SimRollout {
    rollout: Rollout,
    module: String,
    /// What each group was bound to and shadowed by when it started.
    started: BTreeMap<String, GroupStart>,
    /// Commands not yet performed, in issue order.
    queue: VecDeque<Command>,
    next_sample_ms: Millis,
    /// Per group: the group epoch when the rollout started, and when the
    /// module was bound (the baseline counts the rebalances in between,
    /// the sample those after).
    epoch_started: BTreeMap<String, u64>,
    epoch_bound: BTreeMap<String, u64>,
    /// Groups an admin reconfigured after the rollout started: their
    /// binding is the admin's, not the rollout's.
    reconfigured: BTreeSet<String>,
}

impl World {
    /// Starts the schedule's rollout over every group, when it has one.
    pub(super) fn start_rollout(&mut self) -> Result<(), Violation> {
        let Some(rng) = self.rollout_rng.as_mut() else {
            return Ok(());
        };
        let module = (*rng.pick(&MODULES)).to_owned();
        let rule = (*rng.pick(&RULES)).to_owned();
        let names: Vec<String> = self.lanes.iter().map(|l| l.name.clone()).collect();
        let request = RolloutRequest {
            id: "sim".into(),
            module: module.clone(),
            params: BTreeMap::new(),
            groups: format!("list:{}", names.join(",")),
            steps: Some("1,50%,100%".into()),
            every: Some("1s".into()),
            shadow: Some("1s".into()),
            abort_on: vec![rule],
        };
        let spec = RolloutSpec::parse(&request).map_err(|e| self.violation(e.to_string()))?;
        let starts: Vec<GroupStart> = (0..self.lanes.len())
            .map(|lane| {
                let group = self.group(lane);
                GroupStart {
                    name: group.name.clone(),
                    current_binding: group.config.binding_spec().into(),
                    current_shadow: group.shadow.as_ref().map(|s| BindingRef {
                        assignor: s.assignor.clone(),
                        params: s.params.clone(),
                        limits: s.limits,
                        fallback: None,
                    }),
                }
            })
            .collect();
        let epochs = (0..self.lanes.len())
            .map(|lane| (self.lanes[lane].name.clone(), self.group(lane).group_epoch))
            .collect();
        let (rollout, out) = Rollout::start(spec, starts.clone(), self.now)
            .map_err(|e| self.violation(format!("the rollout was refused: {e}")))?;
        self.note(|_| format!("rollout of {module} over {} groups", starts.len()));
        let mut sim = SimRollout {
            rollout,
            module,
            started: starts.into_iter().map(|g| (g.name.clone(), g)).collect(),
            queue: VecDeque::new(),
            next_sample_ms: self.now,
            epoch_started: epochs,
            epoch_bound: BTreeMap::new(),
            reconfigured: BTreeSet::new(),
        };
        sim.queue.extend(out.commands);
        self.rollout = Some(sim);
        Ok(())
    }

    /// Notes that an admin reconfigured group `name`.
    pub(super) fn rollout_note_config(&mut self, name: &str) {
        if let Some(sim) = &mut self.rollout {
            sim.reconfigured.insert(name.to_owned());
        }
    }

    /// Performs the rollout's commands, samples its groups when due, and
    /// ticks it.
    pub(super) fn drive_rollout(&mut self) -> Result<(), Violation> {
        let Some(mut sim) = self.rollout.take() else {
            return Ok(());
        };
        let now = self.now;
        let result = self.drive(&mut sim, now);
        self.rollout = Some(sim);
        result
    }

    fn drive(&mut self, sim: &mut SimRollout, now: Millis) -> Result<(), Violation> {
        while let Some(command) = sim.queue.pop_front() {
            let result = self.perform(sim, &command)?;
            let out = sim.rollout.command_done(command.id, result, now);
            sim.queue.extend(out.commands);
        }
        if now >= sim.next_sample_ms {
            sim.next_sample_ms = now + SAMPLE_MS;
            for lane in 0..self.lanes.len() {
                let name = self.lanes[lane].name.clone();
                let sample = self.sample(sim, lane, now);
                let out: Outputs = sim.rollout.observed(&name, sample, now);
                sim.queue.extend(out.commands);
            }
        }
        if sim.rollout.poll_timeout().is_some_and(|due| due <= now) {
            let out = sim.rollout.tick(now);
            sim.queue.extend(out.commands);
        }
        Ok(())
    }

    /// Performs one command at the group's shard, as an admin's request.
    fn perform(
        &mut self,
        sim: &mut SimRollout,
        command: &Command,
    ) -> Result<Result<(), String>, Violation> {
        let lane = self.lane_named(&command.group);
        let (name, shard, now) = (command.group.clone(), self.lanes[lane].shard, self.now);
        let shadow_of = |b: &BindingRef| ShadowSpec {
            assignor: b.assignor.clone(),
            params: b.params.clone(),
            limits: b.limits,
        };
        let core = &mut self.shards[shard].core;
        let output = match &command.action {
            Action::Shadow { module, params } => core.bind_shadow(
                &name,
                Some(ShadowSpec {
                    assignor: module.clone(),
                    params: params.clone(),
                    limits: CallLimits::default(),
                }),
                now,
            ),
            Action::Unshadow { restore } => {
                core.bind_shadow(&name, restore.as_ref().map(shadow_of), now)
            }
            Action::Bind { binding } | Action::Restore { binding } => {
                let spec: BindingSpec = binding.clone().into();
                core.bind(&name, spec, now)
            }
        };
        self.note(|_| format!("rollout {} {name}", command.action.name()));
        self.stats.rollout_commands += 1;
        match output {
            Ok(out) => {
                if matches!(command.action, Action::Bind { .. }) {
                    sim.epoch_bound.insert(name, self.group(lane).group_epoch);
                }
                self.absorb(shard, out)?;
                self.check_state()?;
                Ok(Ok(()))
            }
            Err(e) => Ok(Err(e.to_string())),
        }
    }

    /// Group `lane`'s health as the shell would see it in its view.
    fn sample(&self, sim: &SimRollout, lane: usize, now: Millis) -> HealthSample {
        let group = self.group(lane);
        let empty = Liveness::default();
        let liveness = self
            .core(self.lanes[lane].shard)
            .liveness(&group.name)
            .unwrap_or(&empty);
        let started = sim.epoch_started.get(&group.name).copied().unwrap_or(0);
        let bound = sim.epoch_bound.get(&group.name).copied();
        let history = &liveness.rebalances.history;
        let before = history
            .iter()
            .filter(|r| r.epoch > started && bound.is_none_or(|b| r.epoch <= b));
        let after: Vec<_> = history
            .iter()
            .filter(|r| bound.is_some_and(|b| r.epoch > b))
            .collect();
        let module = sim.module.as_str();
        let failures = liveness
            .failures
            .as_ref()
            .filter(|f| f.module == module && group.config.assignor == module)
            .map_or(0, |f| f.total);
        let shadow_is_module = group.shadow.as_ref().is_some_and(|s| s.assignor == module);
        HealthSample {
            live_failures_of_module: failures,
            shadow_failures: if shadow_is_module {
                liveness.shadows.totals.shadow_failures
            } else {
                0
            },
            rebalances: after.len() as u64,
            moved_total: after.iter().map(|r| r.moved).sum(),
            rebalance_ms_max: after
                .iter()
                .filter_map(|r| r.settled_ms.map(|s| s.saturating_sub(r.at_ms)))
                .max()
                .unwrap_or(0),
            bound_to_module: group.config.assignor == module,
            shadow_is_module,
            baseline: Baseline {
                rebalances: before.clone().count() as u64,
                moved_total: before.map(|r| r.moved).sum(),
            },
            observed_at_ms: now,
        }
    }

    /// Once the rollout has ended: every group no admin reconfigured is
    /// where it says.
    pub(super) fn check_rollout(&mut self) -> Result<(), Violation> {
        let Some(sim) = &self.rollout else {
            return Ok(());
        };
        let completed = match sim.rollout.phase() {
            Phase::Completed => true,
            Phase::RolledBack { .. } => false,
            _ => return Ok(()),
        };
        if completed {
            self.stats.rollouts_completed += 1;
        } else {
            self.stats.rollouts_rolled_back += 1;
        }
        let Some(sim) = &self.rollout else {
            return Ok(());
        };
        for lane in 0..self.lanes.len() {
            let group: &Group = self.group(lane);
            if sim.reconfigured.contains(&group.name) {
                continue;
            }
            let start = &sim.started[&group.name];
            let binding: BindingRef = group.config.binding_spec().into();
            let shadow = group
                .shadow
                .as_ref()
                .map(|s| (s.assignor.as_str(), &s.params));
            let shadow_before = start
                .current_shadow
                .as_ref()
                .map(|s| (s.assignor.as_str(), &s.params));
            let bound_right = if completed {
                binding.assignor == sim.module
            } else {
                binding == start.current_binding
            };
            if !bound_right || shadow != shadow_before {
                return Err(self.violation(format!(
                    "rollout {}: group {} is bound to {:?} with shadow {shadow:?} (started on {:?} with {shadow_before:?})",
                    if completed { "completed" } else { "rolled back" },
                    group.name,
                    binding.assignor,
                    start.current_binding.assignor
                )));
            }
        }
        Ok(())
    }
}

/// The rollouts' generator of a schedule with a rollout.
pub(super) fn rollout_rng(seed: u64, rollouts: bool) -> Option<Rng> {
    rollouts.then(|| Rng::new(seed ^ ROLLOUTS_SEED_SALT))
}
