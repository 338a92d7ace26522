//! One `assign` call: the input checked, a fresh `Store` and instance
//! (`sandbox.rs`: a trapped instance is never reused), the guest's answer
//! validated against its input before anyone sees it, and what the call
//! cost; the guest's log lines go to the host's log.

use std::time::{Duration, Instant};

use assignd_guest_sdk::validate::{
    InputLimits, InvalidAssignment, check_assignment, check_input, rows_max_for,
};
use assignd_guest_sdk::{AssignError, Assignment, GroupInput};

use super::engine::{LoadedModule, PluginEngine};
use super::error::PluginError;
use super::limits::Limits;
use super::sandbox::{GuestLogLine, capped, classify, new_store, truncate};

/// What one call cost.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CallStats {
    /// Creating the store and instantiating from the pre-linked component.
    pub instantiate_ms: f64,
    /// The call itself, including copying the input in and the answer out.
    pub call_ms: f64,
    /// Checking the answer against the input.
    pub validate_ms: f64,
    /// Fuel the guest burned.
    pub fuel: u64,
}

/// A successful call: a valid assignment and what it cost.
#[derive(Clone, Debug)]
pub struct CallOutcome {
    pub assignment: Assignment,
    pub stats: CallStats,
    pub logs: Vec<GuestLogLine>,
    /// Lines beyond the per-call cap, counted but not kept.
    pub logs_dropped: u64,
}

fn emit_logs(module: &str, logs: &[GuestLogLine], dropped: u64) {
    for line in logs {
        match line.level {
            "error" => tracing::error!(target: "assignd::guest", module, "{}", line.message),
            "warn" => tracing::warn!(target: "assignd::guest", module, "{}", line.message),
            "info" => tracing::info!(target: "assignd::guest", module, "{}", line.message),
            "debug" => tracing::debug!(target: "assignd::guest", module, "{}", line.message),
            _ => tracing::trace!(target: "assignd::guest", module, "{}", line.message),
        }
    }
    if dropped > 0 {
        tracing::warn!(target: "assignd::guest", module, dropped, "guest log lines dropped over the per-call limit");
    }
}

/// The guest's refusal, its message cut to `len_max` bytes.
fn refused(error: AssignError, len_max: usize) -> PluginError {
    PluginError::Refused(match error {
        AssignError::InvalidParam(m) => AssignError::InvalidParam(truncate(m, len_max)),
        AssignError::UnsupportedInput(m) => AssignError::UnsupportedInput(truncate(m, len_max)),
        AssignError::Failed(m) => AssignError::Failed(truncate(m, len_max)),
    })
}

impl PluginEngine {
    /// Runs `module` on `input` in a fresh sandbox and returns its answer
    /// once validated. The input is checked first; an invalid input never
    /// reaches the guest.
    pub fn assign(
        &self,
        module: &LoadedModule,
        input: &GroupInput,
        limits: &Limits,
    ) -> Result<CallOutcome, PluginError> {
        let (result, logs, logs_dropped) = self.assign_keeping_logs(module, input, limits);
        emit_logs(&module.info.name, &logs, logs_dropped);
        result.map(|outcome| CallOutcome {
            logs,
            logs_dropped,
            ..outcome
        })
    }

    /// [`Self::assign`] without emitting the guest's log lines: they are
    /// returned (the lines kept, the lines dropped over the per-call cap)
    /// whether the call succeeded or failed, for the caller to forward.
    pub fn assign_keeping_logs(
        &self,
        module: &LoadedModule,
        input: &GroupInput,
        limits: &Limits,
    ) -> (Result<CallOutcome, PluginError>, Vec<GuestLogLine>, u64) {
        let mut logs = Vec::new();
        let mut logs_dropped = 0;
        let result = self.assign_inner(module, input, limits, &mut logs, &mut logs_dropped);
        (result, logs, logs_dropped)
    }

    fn assign_inner(
        &self,
        module: &LoadedModule,
        input: &GroupInput,
        limits: &Limits,
        logs_out: &mut Vec<GuestLogLine>,
        logs_dropped_out: &mut u64,
    ) -> Result<CallOutcome, PluginError> {
        check_input(input, &InputLimits::default()).map_err(PluginError::InvalidInput)?;
        let limits = &capped(self.memory_ceiling_bytes, limits);
        let fuel = limits.fuel_for(input.task_count(), input.members.len());
        let _slot = self.slots.acquire();
        let started = Instant::now();
        let mut store = new_store(&self.engine, limits, fuel);
        let plugin = match module.pre.instantiate(&mut store) {
            Ok(plugin) => plugin,
            Err(e) => {
                return Err(PluginError::Instantiate(format!(
                    "{}",
                    classify(e, &store, limits, fuel)
                )));
            }
        };
        let instantiated = Instant::now();
        // The input of the module's version: a 0.1 module gets no loads.
        let answer = plugin.call_assign(&mut store, input);
        let called = Instant::now();
        let fuel_used = fuel - store.get_fuel().unwrap_or(0);
        *logs_dropped_out = store.data().logs_dropped;
        *logs_out = std::mem::take(&mut store.data_mut().logs);
        let assignment = match answer {
            Ok(Ok(assignment)) => assignment,
            Ok(Err(error)) => return Err(refused(error, limits.log_line_len_max)),
            Err(e) => return Err(classify(e, &store, limits, fuel)),
        };
        check_answer(input, &assignment, limits)?;
        let validated = Instant::now();
        // The host's work on the answer counts against the call's time:
        // an answer that is valid but took the host past the limit to
        // check is refused like a guest that ran past it. (The rows cap
        // keeps that work linear in the input.)
        if validated - instantiated > Duration::from_millis(limits.time_limit_ms) {
            return Err(PluginError::Timeout {
                limit_ms: limits.time_limit_ms,
            });
        }
        let ms = |from: Instant, to: Instant| (to - from).as_secs_f64() * 1e3;
        Ok(CallOutcome {
            assignment,
            stats: CallStats {
                instantiate_ms: ms(started, instantiated),
                call_ms: ms(instantiated, called),
                validate_ms: ms(called, validated),
                fuel: fuel_used,
            },
            logs: Vec::new(),
            logs_dropped: 0,
        })
    }
}

/// Checks an answer against its input, within the limits' cap on rows.
fn check_answer(
    input: &GroupInput,
    assignment: &Assignment,
    limits: &Limits,
) -> Result<(), PluginError> {
    let rows_max = rows_max_for(
        input,
        limits.output_rows_per_task_max,
        limits.output_rows_max,
    );
    check_assignment(input, assignment, rows_max).map_err(|e| match e {
        InvalidAssignment::TooManyRows { .. } => PluginError::OutputTooLarge(e.to_string()),
        other => PluginError::InvalidAssignment(other),
    })
}
