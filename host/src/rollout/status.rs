//! [`RolloutStatus`]: the view of a rollout that `rollout status` shows,
//! serializable as it is.

use serde::{Deserialize, Serialize};

use super::event::Event;
use super::machine::Rollout;
use super::rules::AbortRule;
use super::state::{Phase, Side};

/// Events a status shows, the latest.
pub const STATUS_EVENTS_MAX: usize = 20;

/// A rollout at a glance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RolloutStatus {
    pub id: String,
    pub module: String,
    pub phase: Phase,
    /// Why the rollout is paused, if it is.
    pub paused: Option<String>,
    /// The current step (from 1), 0 before the first one.
    pub step: usize,
    pub steps: usize,
    /// How many groups are bound once each step is done.
    pub step_sizes: Vec<usize>,
    pub groups: GroupCounts,
    /// Every group found unhealthy, with the rule and why.
    pub unhealthy: Vec<UnhealthyGroup>,
    /// Groups the rollout could not put back.
    pub failed: Vec<String>,
    /// The wait is over, and the next sample of the groups not seen since
    /// it began decides.
    pub awaiting_samples: bool,
    /// When the machine next decides by time alone (see
    /// [`Rollout::poll_timeout`]).
    pub next_decision_ms: Option<u64>,
    pub started_ms: u64,
    /// The latest events, oldest first.
    pub last_events: Vec<Event>,
}

/// How many groups are where. Each group counts once, in the first of
/// these that holds: unhealthy, failed (could not be put back),
/// restored (its binding or shadow put back), bound, shadowed, pending.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupCounts {
    pub pending: usize,
    pub shadowed: usize,
    pub bound: usize,
    pub restored: usize,
    pub unhealthy: usize,
    pub failed: usize,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnhealthyGroup {
    pub group: String,
    pub rule: AbortRule,
    pub detail: String,
}

impl Rollout {
    /// The status view.
    pub fn status(&self) -> RolloutStatus {
        let mut groups = GroupCounts::default();
        let mut unhealthy = Vec::new();
        let mut failed = Vec::new();
        for (name, run) in &self.groups {
            let reverted = run.bind == Side::Reverted || run.shadow == Side::Reverted;
            if let Some((rule, detail)) = &run.unhealthy {
                groups.unhealthy += 1;
                unhealthy.push(UnhealthyGroup {
                    group: name.clone(),
                    rule: *rule,
                    detail: detail.clone(),
                });
            } else if run.bind == Side::GaveUp || run.shadow == Side::GaveUp {
                groups.failed += 1;
                failed.push(name.clone());
            } else if reverted && !run.bind.touched() && !run.shadow.touched() {
                groups.restored += 1;
            } else if run.bind.touched() {
                groups.bound += 1;
            } else if run.shadow.touched() {
                groups.shadowed += 1;
            } else {
                groups.pending += 1;
            }
        }
        let step = match self.phase {
            Phase::Step { step } => step,
            Phase::Shadowing => 0,
            _ => self.highest_step_begun(),
        };
        let skip = self.events.len().saturating_sub(STATUS_EVENTS_MAX);
        RolloutStatus {
            id: self.spec.id.clone(),
            module: self.spec.module.clone(),
            phase: self.phase.clone(),
            paused: self.paused.clone(),
            step,
            steps: self.step_sizes.len(),
            step_sizes: self.step_sizes.clone(),
            groups,
            unhealthy,
            failed,
            awaiting_samples: self.awaiting_samples,
            next_decision_ms: self.poll_timeout(),
            started_ms: self.started_ms,
            last_events: self.events.iter().skip(skip).cloned().collect(),
        }
    }

    /// The highest step whose groups were bound (0 if none).
    fn highest_step_begun(&self) -> usize {
        self.groups
            .values()
            .filter(|run| run.bind != Side::Untouched)
            .map(|run| run.step)
            .max()
            .unwrap_or(0)
    }
}
