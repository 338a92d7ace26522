//! The data a [`Rollout`](super::Rollout) keeps: its [`Phase`] and, per
//! group, what it did to the group's shadow and binding ([`GroupRun`]).
//! Data only; the decisions are in `machine.rs` and `drive.rs`.

use serde::{Deserialize, Serialize};

use super::command::{Action, BindingRef, CommandId};
use super::health::Baseline;
use super::rules::AbortRule;

/// Where a rollout is. Pausing is not a phase of its own: a paused
/// rollout stays in its phase (see [`Rollout::pause`](super::Rollout::pause)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// The module shadows every selected group: no group is bound yet.
    Shadowing,
    /// Step `step` (from 1): the groups of steps 1 to `step` are bound.
    Step { step: usize },
    /// Every step stayed healthy; the rollout's shadows are being removed.
    Completing,
    /// Putting every group the rollout touched back, for `reason`.
    RollingBack { reason: String },
    /// Ended: every group runs the module, no shadow of the rollout left.
    Completed,
    /// Ended: every group touched is back on its previous binding and
    /// shadow.
    RolledBack { reason: String },
    /// Ended: some groups could not be put back (or unshadowed after a
    /// completion); their names are in the last event.
    Failed { reason: String },
}

impl Phase {
    /// The phase's name, as in JSON.
    pub fn name(&self) -> &'static str {
        match self {
            Phase::Shadowing => "shadowing",
            Phase::Step { .. } => "step",
            Phase::Completing => "completing",
            Phase::RollingBack { .. } => "rolling_back",
            Phase::Completed => "completed",
            Phase::RolledBack { .. } => "rolled_back",
            Phase::Failed { .. } => "failed",
        }
    }

    /// Whether the rollout has ended.
    pub fn is_terminal(&self) -> bool {
        matches!(
            self,
            Phase::Completed | Phase::RolledBack { .. } | Phase::Failed { .. }
        )
    }

    /// Whether the rollout still goes forward (may bind, may be paused).
    pub fn is_advancing(&self) -> bool {
        matches!(self, Phase::Shadowing | Phase::Step { .. })
    }
}

/// What the rollout did to one side (the shadow or the binding) of a
/// group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// Not touched.
    Untouched,
    /// Its command is in flight.
    Applying,
    /// The module is on it (or may be: a refused command may have landed,
    /// so it is put back all the same).
    Applied,
    /// Its restore (or unshadow) is in flight.
    Reverting,
    /// Put back as it was.
    Reverted,
    /// Its restore (or unshadow) was refused every attempt.
    GaveUp,
}

impl Side {
    /// Whether the module is, or may be, on this side.
    pub fn touched(self) -> bool {
        matches!(self, Side::Applying | Side::Applied | Side::Reverting)
    }
}

/// One selected group in a rollout.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupRun {
    /// The step (from 1) that binds it: groups in name order fill the
    /// steps in order.
    pub step: usize,
    pub previous: BindingRef,
    pub previous_shadow: Option<BindingRef>,
    pub shadow: Side,
    pub bind: Side,
    /// The one command in flight for this group (one at a time, so that
    /// a restore never overtakes the bind it undoes).
    pub in_flight: Option<CommandId>,
    /// Refusals of the current restore or unshadow, reset when one lands.
    pub revert_failures: u32,
    /// A refused restore or unshadow is retried at this time.
    pub retry_at_ms: Option<u64>,
    /// The latest sample's baseline.
    pub baseline: Baseline,
    /// When the latest sample was taken.
    pub observed_ms: Option<u64>,
    /// The rule that found the group unhealthy, and why.
    pub unhealthy: Option<(AbortRule, String)>,
    /// The last refusal of a command for this group.
    pub last_error: Option<String>,
}

impl GroupRun {
    pub fn new(step: usize, previous: BindingRef, previous_shadow: Option<BindingRef>) -> Self {
        GroupRun {
            step,
            previous,
            previous_shadow,
            shadow: Side::Untouched,
            bind: Side::Untouched,
            in_flight: None,
            revert_failures: 0,
            retry_at_ms: None,
            baseline: Baseline::default(),
            observed_ms: None,
            unhealthy: None,
            last_error: None,
        }
    }

    /// The side `action` changes: the shadow or the binding.
    pub(super) fn side_mut(&mut self, action: &Action) -> &mut Side {
        match action {
            Action::Shadow { .. } | Action::Unshadow { .. } => &mut self.shadow,
            Action::Bind { .. } | Action::Restore { .. } => &mut self.bind,
        }
    }
}
