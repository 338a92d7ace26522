//! Rollouts: binding an assignor module to a growing share of a set of
//! groups, watching each group's health against its own baseline, and
//! going on, pausing, or rolling every group touched back by itself.
//! This module is the decision core, sans-IO: it never touches the clock,
//! the disk, the network, the runtime or the protocol core. Every input
//! carries `now` (ms), and every change to a group is a [`Command`] the
//! shell performs and reports back.
//!
//! # The phases
//!
//! A rollout ([`Rollout::start`], from a [`RolloutSpec`] parsed from the
//! CLI's or the API's strings) goes through:
//!
//! 1. **Shadowing**: the module is set as the shadow of every selected
//!    group ([`Action::Shadow`]): it is asked beside the group's own
//!    assignor and its answers are compared, never installed. Once every
//!    shadow is in place, the shadow period (`shadow_ms`) runs. Meanwhile
//!    the groups' moves under their own assignor make their
//!    [`Baseline`]s, and a shadow failure (with the `failures` rule)
//!    rolls back before anything is bound.
//! 2. **Step 1 .. n**: groups in name order fill the steps
//!    ([`resolve_steps`]): step k binds the groups that bring the
//!    bound count to its size ([`Action::Bind`]). Once those binds
//!    landed, the step waits `every_ms`. A step ends when its wait is
//!    over and every bound group was sampled since the wait began (the
//!    clock alone never takes a step: without samples, the rollout
//!    waits).
//! 3. **Completing**, after the last step's wait: the rollout's shadows
//!    are removed (each group's earlier shadow restored), then
//!    **Completed**: every group runs the module.
//!
//! Any unhealthy verdict ([`judge`] of a [`HealthSample`] by the
//! [`AbortRule`]s), a refused shadow or bind, or an operator's
//! [`Rollout::abort`] leads to **RollingBack**: every group the rollout
//! bound is restored to its exact previous binding ([`Action::Restore`]),
//! then every group it shadowed gets its previous shadow back
//! ([`Action::Unshadow`]); then **RolledBack**. A refused restore or
//! unshadow is retried [`REVERT_ATTEMPTS_MAX`] times; a group still
//! refused is given up and the rollout ends **Failed**, naming it.
//!
//! [`Rollout::pause`] holds a rollout in its phase: no new step begins
//! until [`Rollout::resume`], but health is still judged, and an
//! unhealthy group still rolls everything back.
//!
//! # Driving it (the shell's part)
//!
//! Each input ([`Rollout::start`], [`Rollout::observed`],
//! [`Rollout::command_done`], [`Rollout::tick`], the operator's pause,
//! resume and abort) returns [`Outputs`]: commands and [`Event`]s. The
//! shell, for each:
//!
//! 1. persists the rollout (it is `Serialize`; JSON) — before anything
//!    else, write-ahead;
//! 2. logs and counts the events;
//! 3. performs the commands, the ones of one group in order (the machine
//!    never has two of one group in flight), and reports each with
//!    [`Rollout::command_done`].
//!
//! It samples every group the rollout touched now and then
//! ([`Rollout::observed`]) and calls [`Rollout::tick`] at
//! [`Rollout::poll_timeout`]. After a restart or a takeover it loads the
//! rollout and performs [`Rollout::recover`]'s commands again: every
//! command names its result in full (the binding, the shadow), so
//! performing one twice is performing it once. [`Rollout::status`] is
//! the view for `rollout status`.
//!
//! Files: `spec.rs` (the request, durations), `limits.rs`, `selector.rs`,
//! `steps.rs`, `rules.rs` (their syntax), `health.rs` (samples and the
//! verdict), `command.rs`, `event.rs`, `state.rs` (the kept data),
//! `machine.rs` (the inputs), `drive.rs` (the decisions behind them),
//! `status.rs`.

mod command;
mod drive;
mod event;
mod health;
mod limits;
mod machine;
mod rules;
mod selector;
mod spec;
mod state;
mod status;
mod steps;

pub use command::{Action, BindingRef, Command, CommandId, GroupStart};
pub use drive::{REVERT_ATTEMPTS_MAX, REVERT_RETRY_MS};
pub use event::{EVENTS_MAX, Event, EventKind};
pub use health::{Baseline, COUNTER_MAX, HealthSample, Verdict, judge};
pub use limits::{
    ABORT_RULES_MAX, EVERY_MS_DEFAULT, EVERY_MS_MAX, EVERY_MS_MIN, ROLLOUT_GROUPS_MAX,
    ROLLOUT_ID_LEN_MAX, STEPS_MAX, SpecError,
};
pub use machine::{Outputs, REASON_LEN_MAX, Rollout, RolloutError};
pub use rules::{AbortRule, MOVES_RATIO_MAX, default_abort_rules};
pub use selector::Selector;
pub use spec::{RolloutRequest, RolloutSpec, STEPS_DEFAULT, parse_duration_ms, parse_param};
pub use state::{GroupRun, Phase, Side};
pub use status::{GroupCounts, RolloutStatus, STATUS_EVENTS_MAX, UnhealthyGroup};
pub use steps::{Step, parse_steps, resolve_steps};

#[cfg(test)]
mod tests;
