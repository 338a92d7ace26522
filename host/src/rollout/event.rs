//! What a rollout decided ([`Event`]): every decision is one, for the
//! shell to log, to count as a metric (by [`EventKind::name`]) and to show
//! as the rollout's history (the machine keeps the last [`EVENTS_MAX`]).

use serde::{Deserialize, Serialize};

use super::command::CommandId;
use super::rules::AbortRule;

/// Events a rollout keeps in its history; the oldest are forgotten past
/// this (the shell's log keeps them all).
pub const EVENTS_MAX: usize = 256;

/// One decision, at `at_ms` on the machine's clock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// 1 for the rollout's first event, one more for each later one.
    pub seq: u64,
    pub at_ms: u64,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What was decided.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum EventKind {
    /// The rollout started on `groups` groups, bound in steps of these
    /// cumulative sizes.
    Started {
        groups: usize,
        step_sizes: Vec<usize>,
    },
    /// The module is being shadowed on every selected group; the shadow
    /// period runs once every shadow is in place.
    ShadowBegan {
        groups: usize,
    },
    /// Step `step` of `steps` (from 1) began: these groups are bound now.
    StepBegan {
        step: usize,
        steps: usize,
        groups: Vec<String>,
    },
    /// A group's bind landed.
    GroupBound {
        group: String,
    },
    /// A group failed a rule.
    GroupUnhealthy {
        group: String,
        rule: AbortRule,
        detail: String,
    },
    /// A command was refused (or failed); `attempt` counts from 1.
    CommandFailed {
        id: CommandId,
        group: String,
        action: String,
        error: String,
        attempt: u32,
    },
    Paused {
        reason: String,
    },
    Resumed,
    /// Rolling back every group the rollout touched.
    Aborting {
        reason: String,
    },
    /// A group is back on its previous binding.
    GroupRestored {
        group: String,
    },
    /// A group's previous shadow (or none) is back.
    GroupUnshadowed {
        group: String,
    },
    /// Every step stayed healthy: every group is on the module and no
    /// shadow of the rollout's is left.
    Completed,
    /// Every group the rollout touched is back as it was.
    RolledBack,
    /// The rollout ended leaving these groups as it could not put them
    /// back (their restore or unshadow was refused every attempt).
    Failed {
        groups: Vec<String>,
    },
}

impl EventKind {
    /// The event's name: its JSON tag, for logs and metric labels.
    pub fn name(&self) -> &'static str {
        match self {
            EventKind::Started { .. } => "started",
            EventKind::ShadowBegan { .. } => "shadow_began",
            EventKind::StepBegan { .. } => "step_began",
            EventKind::GroupBound { .. } => "group_bound",
            EventKind::GroupUnhealthy { .. } => "group_unhealthy",
            EventKind::CommandFailed { .. } => "command_failed",
            EventKind::Paused { .. } => "paused",
            EventKind::Resumed => "resumed",
            EventKind::Aborting { .. } => "aborting",
            EventKind::GroupRestored { .. } => "group_restored",
            EventKind::GroupUnshadowed { .. } => "group_unshadowed",
            EventKind::Completed => "completed",
            EventKind::RolledBack => "rolled_back",
            EventKind::Failed { .. } => "failed",
        }
    }
}
