//! The decisions behind a [`Rollout`]'s inputs: the next command each
//! group needs in the current phase ([`Rollout::drive_group`]), what a
//! command's outcome changes, when a phase's wait ends and what follows
//! it, and the rollback.

use super::command::{Action, BindingRef, Command};
use super::event::EventKind;
use super::machine::{Outputs, Rollout};
use super::state::{Phase, Side};

/// Attempts of a restore or unshadow before it is given up (and the
/// group named in the rollout's `failed` event).
pub const REVERT_ATTEMPTS_MAX: u32 = 5;
/// The wait before a refused restore or unshadow is tried again.
pub const REVERT_RETRY_MS: u64 = 5_000;

impl Rollout {
    /// Issues the command every group needs now.
    pub(super) fn drive_all(&mut self, out: &mut Outputs, now: u64) {
        let names: Vec<String> = self.groups.keys().cloned().collect();
        for name in names {
            self.drive_group(out, &name, now);
        }
    }

    /// Issues the command `name` needs in the current phase, if any and
    /// if none of its own is in flight or waiting for a retry:
    ///
    /// - shadowing: its shadow;
    /// - step k: its bind, once k reaches its step;
    /// - completing: its unshadow;
    /// - rolling back: its restore first, then its unshadow.
    pub(super) fn drive_group(&mut self, out: &mut Outputs, name: &str, now: u64) {
        let Some(run) = self.groups.get_mut(name) else {
            return;
        };
        if run.in_flight.is_some() || run.retry_at_ms.is_some_and(|at| at > now) {
            return;
        }
        run.retry_at_ms = None;
        let action = match &self.phase {
            Phase::Shadowing if run.shadow == Side::Untouched => {
                run.shadow = Side::Applying;
                Action::Shadow {
                    module: self.spec.module.clone(),
                    params: self.spec.params.clone(),
                }
            }
            Phase::Step { step } if run.bind == Side::Untouched && run.step <= *step => {
                run.bind = Side::Applying;
                Action::Bind {
                    binding: BindingRef {
                        assignor: self.spec.module.clone(),
                        params: self.spec.params.clone(),
                        limits: run.previous.limits,
                        fallback: run.previous.fallback.clone(),
                    },
                }
            }
            Phase::RollingBack { .. } if run.bind == Side::Applied => {
                run.bind = Side::Reverting;
                Action::Restore {
                    binding: run.previous.clone(),
                }
            }
            Phase::Completing | Phase::RollingBack { .. } if run.shadow == Side::Applied => {
                run.shadow = Side::Reverting;
                Action::Unshadow {
                    restore: run.previous_shadow.clone(),
                }
            }
            _ => return,
        };
        let id = self.next_command_id;
        self.next_command_id += 1;
        run.in_flight = Some(id);
        let command = Command {
            id,
            group: name.to_owned(),
            action,
        };
        self.in_flight.insert(id, command.clone());
        out.commands.push(command);
    }

    /// What `command`'s outcome changes, then the group's next command.
    pub(super) fn landed(
        &mut self,
        out: &mut Outputs,
        command: Command,
        result: Result<(), String>,
        now: u64,
    ) {
        let error = match result {
            Ok(()) => return self.succeeded(out, command, now),
            Err(error) => error,
        };
        let group = command.group;
        let run = self.groups.get_mut(&group).expect("a group of the rollout");
        run.in_flight = None;
        run.last_error = Some(error.clone());
        let side = run.side_mut(&command.action);
        // Refused: the change may have landed all the same, so the side
        // counts as changed and is put back (commands are idempotent).
        let reverting = *side == Side::Reverting;
        *side = Side::Applied;
        let attempt = if reverting {
            run.revert_failures += 1;
            if run.revert_failures >= REVERT_ATTEMPTS_MAX {
                *run.side_mut(&command.action) = Side::GaveUp;
            } else {
                run.retry_at_ms = Some(now + REVERT_RETRY_MS);
            }
            run.revert_failures
        } else {
            1
        };
        let action = command.action.name();
        let failed = EventKind::CommandFailed {
            id: command.id,
            group: group.clone(),
            action: action.to_owned(),
            error: error.clone(),
            attempt,
        };
        self.emit(out, now, failed);
        if !reverting && self.phase.is_advancing() {
            let reason = format!("{action} of group {group} refused: {error}");
            self.roll_back(out, reason, now);
        } else {
            self.drive_group(out, &group, now);
        }
    }

    fn succeeded(&mut self, out: &mut Outputs, command: Command, now: u64) {
        let group = command.group;
        let run = self.groups.get_mut(&group).expect("a group of the rollout");
        run.in_flight = None;
        let side = run.side_mut(&command.action);
        let reverting = *side == Side::Reverting;
        *side = if reverting {
            Side::Reverted
        } else {
            Side::Applied
        };
        if reverting {
            run.revert_failures = 0;
        }
        let event = match command.action {
            Action::Bind { .. } => Some(EventKind::GroupBound {
                group: group.clone(),
            }),
            Action::Restore { .. } => Some(EventKind::GroupRestored {
                group: group.clone(),
            }),
            Action::Unshadow { .. } => Some(EventKind::GroupUnshadowed {
                group: group.clone(),
            }),
            Action::Shadow { .. } => None,
        };
        if let Some(event) = event {
            self.emit(out, now, event);
        }
        self.drive_group(out, &group, now);
    }

    /// Starts rolling back every group touched, for `reason`.
    pub(super) fn roll_back(&mut self, out: &mut Outputs, reason: String, now: u64) {
        self.phase = Phase::RollingBack {
            reason: reason.clone(),
        };
        self.paused = None;
        self.wait_began_ms = None;
        self.awaiting_samples = false;
        self.emit(out, now, EventKind::Aborting { reason });
        self.drive_all(out, now);
        self.advance(out, now);
    }

    /// Ends the current phase if it is done: a wait that ran its time
    /// with a fresh sample of every group in it (unless paused), or a
    /// cleanup with nothing left in flight or to retry.
    pub(super) fn advance(&mut self, out: &mut Outputs, now: u64) {
        if self.phase.is_advancing() {
            self.end_wait(out, now);
        }
        if matches!(self.phase, Phase::Completing | Phase::RollingBack { .. }) {
            self.try_finish(out, now);
        }
    }

    fn end_wait(&mut self, out: &mut Outputs, now: u64) {
        if !self.in_flight.is_empty() {
            return;
        }
        let began = *self.wait_began_ms.get_or_insert(now);
        let (period, step) = match self.phase {
            Phase::Shadowing => (self.spec.shadow_ms, 0),
            Phase::Step { step } => (self.spec.every_ms, step),
            _ => return,
        };
        if self.paused.is_some() || now < began + period {
            return;
        }
        // Every group in the wait (all of them while shadowing, the bound
        // ones in a step) must have been seen since it began: the clock
        // alone never takes a step.
        let stale = self.groups.values().any(|run| {
            (step == 0 || run.step <= step) && run.observed_ms.is_none_or(|at| at < began)
        });
        self.awaiting_samples = stale;
        if stale {
            return;
        }
        self.wait_began_ms = None;
        if step < self.step_sizes.len() {
            self.start_step(out, step + 1, now);
        } else {
            self.phase = Phase::Completing;
            self.drive_all(out, now);
        }
    }

    fn start_step(&mut self, out: &mut Outputs, step: usize, now: u64) {
        self.phase = Phase::Step { step };
        let groups: Vec<String> = self
            .groups
            .iter()
            .filter(|(_, run)| run.step == step)
            .map(|(name, _)| name.clone())
            .collect();
        let steps = self.step_sizes.len();
        let began = EventKind::StepBegan {
            step,
            steps,
            groups: groups.clone(),
        };
        self.emit(out, now, began);
        for name in groups {
            self.drive_group(out, &name, now);
        }
    }

    fn try_finish(&mut self, out: &mut Outputs, now: u64) {
        let retrying = self.groups.values().any(|run| run.retry_at_ms.is_some());
        if !self.in_flight.is_empty() || retrying {
            return;
        }
        let gave_up: Vec<String> = self
            .groups
            .iter()
            .filter(|(_, run)| run.bind == Side::GaveUp || run.shadow == Side::GaveUp)
            .map(|(name, _)| name.clone())
            .collect();
        let (phase, event) = match &self.phase {
            _ if !gave_up.is_empty() => {
                let reason = format!(
                    "{} groups could not be put back: {}",
                    gave_up.len(),
                    gave_up.join(", ")
                );
                (
                    Phase::Failed { reason },
                    EventKind::Failed { groups: gave_up },
                )
            }
            Phase::Completing => (Phase::Completed, EventKind::Completed),
            Phase::RollingBack { reason } => (
                Phase::RolledBack {
                    reason: reason.clone(),
                },
                EventKind::RolledBack,
            ),
            _ => return,
        };
        self.phase = phase;
        self.emit(out, now, event);
    }
}
