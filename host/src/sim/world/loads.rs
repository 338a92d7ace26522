//! The schedule's loads. Which groups take loads, with what settings (a
//! load unit, a small half-life, window and cooldown so that load
//! rebalances happen within a schedule, a band, load capacities) and what
//! [`LoadPlan`] shapes their tasks' loads, all drawn from the loads' own
//! generator so that the rest of a schedule draws as it would without
//! them; what the simulated application tells each member's machine of
//! its active tasks' loads before each request; freezes and thaws with
//! the admin's config changes; and the load invariants (10 to 13 of
//! docs/design.md), fed from the world's steps: each assignor call's input
//! as it leaves (with its reason), each target as it lands with its reason
//! (read from the core's public liveness, `rebalances.last`), and each
//! group after every step. The checks themselves are pure ([`crate::sim::load_check`]).

use std::collections::BTreeMap;

use super::World;
use crate::protocol::core::AssignorCall;
use crate::protocol::group::{
    Group, GroupConfig, Liveness, Millis, RebalanceReason, Slot, SlotTarget, Task,
};
use crate::sim::Violation;
use crate::sim::load_check::{self, LoadInput, moves_started, settled_owners};
use crate::sim::loads::LoadPlan;
use crate::sim::rng::Rng;

/// What the loads' generator is seeded with, besides the seed.
pub(super) const LOADS_SEED_SALT: u64 = 0x6c6f_6164_7321_0001;

/// Probability that a config change also freezes a group, or thaws a
/// frozen one.
const FREEZE_TOGGLE_P: f64 = 0.25;

/// The bands a load group draws from (`None`: the param unset).
const BANDS: [Option<&str>; 5] = [
    None,
    Some("tight"),
    Some("default"),
    Some("loose"),
    Some("0.2"),
];

/// A load group's own draws.
#[derive(Clone, Debug)]
pub(super) struct LoadLane {
    pub(super) plan: LoadPlan,
    /// Members declare a load capacity of this much per unit of
    /// `capacity` (`None`: none does).
    pub(super) capacity_unit: Option<f64>,
    /// Some members leave theirs out (the shares then go by `capacity`).
    pub(super) capacity_partial: bool,
}

/// The target installed last, and what its assignor call saw.
#[derive(Clone, Debug)]
struct Installed {
    epoch: u64,
    input: LoadInput,
    /// Computed once per target: the exact test can be slow.
    reachable: bool,
    /// Invariant 10 was checked on it once settled (for the statistics).
    counted: bool,
}

/// What the world keeps of one group for the load invariants.
#[derive(Clone, Debug, Default)]
pub(super) struct LoadWatch {
    /// The loads each assignor call in flight saw, by its group epoch.
    calls: BTreeMap<u64, LoadInput>,
    /// Set when the target came from a load-balancing assignor in a group
    /// that was not frozen.
    installed: Option<Installed>,
    /// Each task's last move by a load rebalance alone.
    load_moves: BTreeMap<Task, Millis>,
    /// While the group is frozen: each task's settled owner after the last
    /// step.
    frozen_owners: Option<BTreeMap<Task, Slot>>,
}

/// Draws whether a group takes loads (with probability `p`) and, if so,
/// its load settings into `config` and its plan.
pub(super) fn draw_load_lane(
    rng: &mut Rng,
    p: f64,
    config: &mut GroupConfig,
    now: Millis,
) -> Option<LoadLane> {
    if !rng.chance(p) {
        return None;
    }
    config.load_unit = Some("records/s".into());
    config.load_half_life_ms = *rng.pick(&[0, 200, 1_000]);
    config.load_window_ms = rng.range(200, 2_000);
    config.load_cooldown_ms = rng.range(1_000, 6_000);
    if let Some(band) = *rng.pick(&BANDS) {
        config
            .params
            .insert(assignd_guest_sdk::load::BAND_PARAM.into(), band.into());
    }
    let plan = LoadPlan::draw(rng, now);
    // A member carries tens of typical tasks.
    let capacity_unit = rng.chance(0.4).then(|| plan.base * *rng.pick(&[8.0, 40.0]));
    Some(LoadLane {
        plan,
        capacity_unit,
        capacity_partial: capacity_unit.is_some() && rng.chance(0.3),
    })
}

/// The reason of the target for `epoch` as the core's liveness has it.
fn reason_of(liveness: &Liveness, epoch: u64) -> Option<RebalanceReason> {
    liveness
        .rebalances
        .last
        .filter(|last| last.epoch == epoch)
        .map(|last| last.reason)
}

impl World {
    /// The load capacity a new process of group `lane` declares.
    pub(super) fn draw_load_capacity(&mut self, lane: usize, capacity: u32) -> Option<f64> {
        let loads = self.lanes[lane].loads.as_ref()?;
        let unit = loads.capacity_unit?;
        let partial = loads.capacity_partial;
        if partial && self.load_rng.chance(0.5) {
            return None;
        }
        Some(unit * f64::from(capacity))
    }

    /// The loads the application of group `lane` measures now on
    /// `tasks` (none in a group without loads).
    pub(super) fn task_loads<'a>(
        &self,
        lane: usize,
        tasks: impl IntoIterator<Item = &'a Task>,
    ) -> Vec<(Task, f64)> {
        let Some(loads) = &self.lanes[lane].loads else {
            return Vec::new();
        };
        let config = &self.group(lane).config;
        tasks
            .into_iter()
            .filter_map(|task| {
                let topic = config.topics.iter().find(|t| t.name == task.topic)?;
                let load = loads.plan.load(task, topic.partitions, self.now);
                Some((task.clone(), load))
            })
            .collect()
    }

    /// A config change freezes the group now and then, or thaws it.
    pub(super) fn maybe_toggle_freeze(&mut self, lane: usize, config: &mut GroupConfig) {
        // Only groups that take loads are frozen: a frozen group with a
        // draining member can fail to settle (invariant 2), an open defect
        // the load schedules' seeds do not reach.
        if self.lanes[lane].loads.is_some() && self.load_rng.chance(FREEZE_TOGGLE_P) {
            config.frozen = !config.frozen;
            self.stats.freezes += u64::from(config.frozen);
        }
    }

    /// The quiet phase: the loads stand still from now on, so that the
    /// groups may settle on them.
    pub(super) fn still_loads(&mut self) {
        let now = self.now;
        for lane in &mut self.lanes {
            if let Some(loads) = &mut lane.loads {
                loads.plan.frozen_at_ms = Some(now);
            }
        }
    }

    /// An assignor call of group `lane` leaves: what it sees of the loads
    /// is kept for its target, and a load rebalance must see every load of
    /// a task held active (invariant 13).
    pub(super) fn watch_call(&mut self, lane: usize, call: &AssignorCall) -> Result<(), Violation> {
        let group = self.group(lane);
        let Some(input) = LoadInput::of(&call.input, group) else {
            return Ok(());
        };
        if call.reason == RebalanceReason::Load {
            load_check::check_load_call(&input, group)
                .map_err(|e| self.violation(format!("{e} (group {})", group.name)))?;
            self.stats.load_rebalances += 1;
        }
        self.lanes[lane].watch.calls.insert(call.epoch, input);
        Ok(())
    }

    /// A target for `epoch` of group `lane` lands on `before` (`liveness`:
    /// its core's, with the target's reason): invariants 11 and 13 at it,
    /// and what invariant 10 needs once it settles.
    pub(super) fn watch_target(
        &mut self,
        lane: usize,
        before: &Group,
        liveness: &Liveness,
        epoch: u64,
        target: &BTreeMap<Slot, SlotTarget>,
    ) -> Result<(), Violation> {
        let name = &before.name;
        if before.config.frozen {
            load_check::check_frozen_target(before, target)
                .map_err(|e| self.violation(format!("{e} (group {name})")))?;
        }
        let reason = reason_of(liveness, epoch);
        let watch = &mut self.lanes[lane].watch;
        let input = watch.calls.remove(&epoch);
        watch.calls.retain(|&e, _| e > epoch);
        if reason == Some(RebalanceReason::Load) {
            let moved = moves_started(&before.target, target);
            let cooldown = before.config.load_cooldown_ms;
            let checked = load_check::check_cooldown(&watch.load_moves, &moved, self.now, cooldown);
            for task in moved {
                watch.load_moves.insert(task, self.now);
            }
            checked.map_err(|e| self.violation(format!("{e} (group {name})")))?;
        }
        let Some(input) = input else {
            self.lanes[lane].watch.installed = None;
            return Ok(());
        };
        // A load rebalance moves nothing of unknown load. Other targets
        // may: a learner's warm-up swap or a lag-driven move is made for
        // the members' state, not the loads (the balancer's own answers
        // are checked where they are made).
        let balances = super::assignor_calls::balances_load(&before.config.assignor);
        if reason == Some(RebalanceReason::Load) {
            load_check::check_unknown_stay(&input, before, target)
                .map_err(|e| self.violation(format!("{e} (group {name})")))?;
        }
        let installed = (balances && !before.config.frozen).then(|| Installed {
            epoch,
            reachable: input.band_guaranteed(),
            input,
            counted: false,
        });
        self.lanes[lane].watch.installed = installed;
        Ok(())
    }

    /// The load invariants after a step in group `lane`: a frozen group
    /// moved nothing off a live member (12), and a settled target whose
    /// loads were all known keeps every member in band when it can (10).
    pub(super) fn check_loads(&mut self, lane: usize) -> Result<(), Violation> {
        let shard = self.lanes[lane].shard;
        let name = self.lanes[lane].name.clone();
        let Some(group) = self.core(shard).group(&name) else {
            return Ok(());
        };
        let frozen = group.config.frozen;
        let owners = frozen.then(|| settled_owners(group));
        if let (true, Some(before)) = (frozen, &self.lanes[lane].watch.frozen_owners) {
            load_check::check_frozen(before, group)
                .map_err(|e| self.violation(format!("{e} (group {name})")))?;
        }
        let settled = group.is_stable()
            && group.learner_count() == 0
            && group.members.values().all(|m| !m.draining);
        let holdings: BTreeMap<Slot, _> = group
            .holdings
            .members()
            .map(|(slot, a)| (slot.clone(), a.active.clone()))
            .collect();
        let target_epoch = group.target_epoch;
        let watch = &mut self.lanes[lane].watch;
        watch.frozen_owners = owners;
        let Some(installed) = watch
            .installed
            .as_mut()
            .filter(|i| settled && i.epoch == target_epoch)
        else {
            return Ok(());
        };
        let checked = load_check::check_band(&installed.input, installed.reachable, &holdings);
        if installed.reachable && !installed.counted {
            installed.counted = true;
            self.stats.band_checks += 1;
        }
        checked.map_err(|e| self.violation(format!("{e} (group {name})")))
    }
}
