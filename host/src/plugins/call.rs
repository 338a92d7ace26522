//! One sandboxed call: a fresh `Store` and instance per call (a trapped
//! instance is never reused), fuel and an epoch deadline set from the
//! limits, a resource limiter on memory, guest log lines collected under a
//! cap, traps mapped to [`PluginError`], and the answer validated against
//! its input before anyone sees it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use assignd_guest_sdk::log::PANIC_PREFIX;
use assignd_guest_sdk::validate::{
    InputLimits, InvalidAssignment, check_assignment, check_input, rows_max_for,
};
use assignd_guest_sdk::{
    AssignError, Assignment, Capabilities, GroupInput, Info, ParamSpec, TaskMembers,
};
use wasmtime::{Engine, ResourceLimiter, Store, Trap};

use super::bindings::PluginPre;
use super::bindings::assignd::assignor::log::{Host as LogHost, Level};
use super::bindings::assignd::assignor::types as wit;
use super::engine::{CallSlots, LoadedModule, PluginEngine};
use super::error::PluginError;
use super::limits::{EPOCH_TICK_MS, Limits};

/// One line a guest logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestLogLine {
    pub level: &'static str,
    pub message: String,
}

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

/// Per-store state: the memory cap and what the guest logged.
pub(super) struct GuestState {
    memory_max_bytes: u64,
    /// Bytes of all the store's linear memories together: the cap is the
    /// call's, not each memory's (a component may hold
    /// `MEMORIES_PER_CALL_MAX` of them).
    memory_bytes: u64,
    memory_denied_bytes: Option<u64>,
    logs: Vec<GuestLogLine>,
    logs_dropped: u64,
    log_lines_max: usize,
    log_line_len_max: usize,
    /// Bytes of the lines kept so far, against `log_bytes_max`.
    log_bytes: usize,
    log_bytes_max: usize,
    panic_message: Option<String>,
}

impl GuestState {
    fn new(limits: &Limits) -> Self {
        GuestState {
            memory_max_bytes: limits.memory_max_bytes,
            memory_bytes: 0,
            memory_denied_bytes: None,
            logs: Vec::new(),
            logs_dropped: 0,
            log_lines_max: limits.log_lines_max,
            log_line_len_max: limits.log_line_len_max,
            log_bytes: 0,
            log_bytes_max: limits.log_bytes_max,
            panic_message: None,
        }
    }
}

/// Tables beyond this many elements are refused (a guest's function
/// tables are small; this only stops a table bomb).
const TABLE_ELEMENTS_MAX: usize = 1 << 20;

impl ResourceLimiter for GuestState {
    /// Also called for each memory's initial size (from 0) when the
    /// instance is made, so `memory_bytes` counts every memory from the
    /// start.
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total =
            (self.memory_bytes.saturating_sub(current as u64)).saturating_add(desired as u64);
        if total > self.memory_max_bytes {
            // Stop the guest right here, rather than let its allocator abort
            // with an anonymous `unreachable`: the error can then name the
            // size it asked for (all its memories together).
            self.memory_denied_bytes = Some(total);
            return Err(wasmtime::Error::msg("memory limit reached"));
        }
        self.memory_bytes = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= TABLE_ELEMENTS_MAX)
    }
}

fn level_name(level: Level) -> &'static str {
    match level {
        Level::Trace => "trace",
        Level::Debug => "debug",
        Level::Info => "info",
        Level::Warn => "warn",
        Level::Error => "error",
    }
}

/// `message` cut to `len_max` bytes (at a char boundary) and marked so.
/// A cut message is a fresh copy of the kept prefix: `String::truncate`
/// would keep the whole allocation, and a guest's 64 MiB line would hold
/// 64 MiB of host memory for as long as the line is kept.
fn truncate(message: String, len_max: usize) -> String {
    if message.len() <= len_max {
        return message;
    }
    let mut cut = len_max;
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut kept = String::with_capacity(cut + '…'.len_utf8());
    kept.push_str(&message[..cut]);
    kept.push('…');
    kept
}

/// The types interface has no functions; the linker still wants it.
impl wit::Host for GuestState {}

impl LogHost for GuestState {
    fn log(&mut self, level: Level, message: String) {
        if matches!(level, Level::Error)
            && let Some(panic) = message.strip_prefix(PANIC_PREFIX)
        {
            // Rust renders a panic as "panicked at FILE:LINE:COL:\nMESSAGE";
            // it becomes the call's error, on one line, rather than a log line.
            let one_line = panic.lines().collect::<Vec<_>>().join(" ");
            self.panic_message = Some(truncate(one_line, self.log_line_len_max));
            return;
        }
        let message = truncate(message, self.log_line_len_max);
        if self.logs.len() >= self.log_lines_max
            || self.log_bytes + message.len() > self.log_bytes_max
        {
            self.logs_dropped += 1;
            return;
        }
        self.log_bytes += message.len();
        self.logs.push(GuestLogLine {
            level: level_name(level),
            message,
        });
    }
}

/// A call's limits with its memory cap lowered to the engine's ceiling
/// (the pool's slot size).
fn capped(memory_ceiling_bytes: u64, limits: &Limits) -> Limits {
    Limits {
        memory_max_bytes: limits.memory_max_bytes.min(memory_ceiling_bytes),
        ..*limits
    }
}

/// A store for one call; the caller holds a call slot for as long as the
/// store lives.
fn new_store(engine: &Engine, limits: &Limits, fuel: u64) -> Store<GuestState> {
    let mut store = Store::new(engine, GuestState::new(limits));
    store.limiter(|state| state);
    store
        .set_fuel(fuel)
        .expect("fuel metering is enabled on the engine");
    // One tick more than the limit: the current tick may be about to end.
    store.set_epoch_deadline(limits.time_limit_ms.div_ceil(EPOCH_TICK_MS) + 1);
    store.epoch_deadline_trap();
    store
}

/// Maps a wasmtime error from instantiating or calling a guest to the
/// failure it stands for.
fn classify(
    error: wasmtime::Error,
    store: &Store<GuestState>,
    limits: &Limits,
    fuel: u64,
) -> PluginError {
    let state = store.data();
    if let Some(requested_bytes) = state.memory_denied_bytes {
        return PluginError::MemoryLimit {
            requested_bytes,
            limit_bytes: limits.memory_max_bytes,
        };
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => PluginError::OutOfFuel { fuel },
        Some(Trap::Interrupt) => PluginError::Timeout {
            limit_ms: limits.time_limit_ms,
        },
        Some(Trap::StackOverflow) => PluginError::StackOverflow,
        Some(Trap::UnreachableCodeReached) if state.panic_message.is_some() => {
            PluginError::Panicked {
                message: state.panic_message.clone().unwrap_or_default(),
            }
        }
        _ => PluginError::Trapped {
            message: format!("{error:#}"),
        },
    }
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

/// What an `info()` call needs of its engine, owned, so that it can run
/// on a guest thread while the engine's `load` waits for it.
pub(super) struct InfoCall {
    pub engine: Engine,
    pub slots: Arc<CallSlots>,
    pub memory_ceiling_bytes: u64,
    pub pre: PluginPre<GuestState>,
}

/// Calls `info()` on a fresh instance.
pub(super) fn call_info(call: &InfoCall, limits: &Limits) -> Result<Info, PluginError> {
    let limits = &capped(call.memory_ceiling_bytes, limits);
    let fuel = limits.fuel_base;
    let _slot = call.slots.acquire();
    let mut store = new_store(&call.engine, limits, fuel);
    let pre = &call.pre;
    let plugin = match pre.instantiate(&mut store) {
        Ok(plugin) => plugin,
        Err(e) => {
            return Err(PluginError::Instantiate(format!(
                "{:#}",
                classify(e, &store, limits, fuel)
            )));
        }
    };
    let info = plugin
        .assignd_assignor_assignor()
        .call_info(&mut store)
        .map_err(|e| classify(e, &store, limits, fuel))?;
    let len_max = limits.log_line_len_max;
    Ok(Info {
        name: truncate(info.name, len_max),
        version: truncate(info.version, len_max),
        description: truncate(info.description, len_max),
        capabilities: Capabilities {
            learners: info.capabilities.learners,
            standbys: info.capabilities.standbys,
            racks: info.capabilities.racks,
        },
        params: info
            .params
            .into_iter()
            .map(|p| ParamSpec {
                name: truncate(p.name, len_max),
                default_value: truncate(p.default_value, len_max),
                description: truncate(p.description, len_max),
            })
            .collect(),
    })
}

fn to_wit(input: &GroupInput) -> wit::GroupInput {
    let rows = |rows: &TaskMembers| wit::TaskMembers {
        task: rows.task.clone(),
        member: rows.member.clone(),
    };
    wit::GroupInput {
        topics: input
            .topics
            .iter()
            .map(|t| wit::Topic {
                name: t.name.clone(),
                partitions: t.partitions,
            })
            .collect(),
        members: input
            .members
            .iter()
            .map(|m| wit::Member {
                id: m.id.clone(),
                name: m.name.clone(),
                rack: m.rack.clone(),
                capacity: m.capacity,
                subscription: m.subscription,
            })
            .collect(),
        subscriptions: input.subscriptions.clone(),
        active_owner: input.active_owner.clone(),
        learners: rows(&input.learners),
        standbys: rows(&input.standbys),
        lags: wit::TaskLags {
            task: input.lags.task.clone(),
            member: input.lags.member.clone(),
            lag: input.lags.lag.clone(),
        },
        params: input
            .params
            .iter()
            .map(|(key, value)| wit::Param {
                key: key.clone(),
                value: value.clone(),
            })
            .collect(),
    }
}

fn refused(error: wit::AssignError, len_max: usize) -> PluginError {
    PluginError::Refused(match error {
        wit::AssignError::InvalidParam(m) => AssignError::InvalidParam(truncate(m, len_max)),
        wit::AssignError::UnsupportedInput(m) => {
            AssignError::UnsupportedInput(truncate(m, len_max))
        }
        wit::AssignError::Failed(m) => AssignError::Failed(truncate(m, len_max)),
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
        let wit_input = to_wit(input);
        let answer = plugin
            .assignd_assignor_assignor()
            .call_assign(&mut store, &wit_input);
        let called = Instant::now();
        let fuel_used = fuel - store.get_fuel().unwrap_or(0);
        *logs_dropped_out = store.data().logs_dropped;
        *logs_out = std::mem::take(&mut store.data_mut().logs);
        let answer = match answer {
            Ok(Ok(answer)) => answer,
            Ok(Err(error)) => return Err(refused(error, limits.log_line_len_max)),
            Err(e) => return Err(classify(e, &store, limits, fuel)),
        };
        let assignment = Assignment {
            active_owner: answer.active_owner,
            learners: TaskMembers {
                task: answer.learners.task,
                member: answer.learners.member,
            },
            standbys: TaskMembers {
                task: answer.standbys.task,
                member: answer.standbys.member,
            },
        };
        let rows_max = rows_max_for(
            input,
            limits.output_rows_per_task_max,
            limits.output_rows_max,
        );
        check_assignment(input, &assignment, rows_max).map_err(|e| match e {
            InvalidAssignment::TooManyRows { .. } => PluginError::OutputTooLarge(e.to_string()),
            other => PluginError::InvalidAssignment(other),
        })?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A cut line keeps only its prefix's memory: `String::truncate`
    /// alone kept the whole allocation (a 5 KB guest held 3.2 GiB).
    #[test]
    fn a_cut_line_keeps_only_the_memory_of_its_prefix() {
        let long = "x".repeat(1 << 20);
        let cut = truncate(long, 4096);
        assert_eq!(cut.len(), 4096 + '…'.len_utf8());
        assert!(cut.capacity() < 8192, "capacity {}", cut.capacity());
        let short = truncate("ünïcode".to_owned(), 2);
        assert_eq!(short, "ü…");
    }

    /// The memory cap is the call's: two memories of a component share
    /// it (each had the whole cap, so a call could hold twice it).
    #[test]
    fn the_memory_cap_counts_every_memory_of_the_call() {
        let mib = 1 << 20;
        let limits = Limits {
            memory_max_bytes: 512 * mib,
            ..Limits::default()
        };
        let mut state = GuestState::new(&limits);
        let (first, second) = (300 * mib as usize, 200 * mib as usize);
        assert!(state.memory_growing(0, first, None).unwrap());
        assert!(state.memory_growing(0, second, None).unwrap());
        // The first memory grows by 12 MiB: 512 MiB in all, at the cap.
        assert!(
            state
                .memory_growing(first, first + 12 * mib as usize, None)
                .unwrap()
        );
        assert!(state.memory_growing(second, second + 1, None).is_err());
        assert_eq!(state.memory_denied_bytes, Some(512 * mib + 1));
    }

    /// A call keeps at most `log_bytes_max` bytes of lines, whatever their
    /// count; the rest are counted.
    #[test]
    fn a_call_keeps_at_most_its_log_bytes() {
        let limits = Limits::default();
        let mut state = GuestState::new(&limits);
        for _ in 0..limits.log_lines_max {
            state.log(Level::Info, "y".repeat(10 << 20));
        }
        let kept: usize = state.logs.iter().map(|l| l.message.len()).sum();
        assert!(kept <= limits.log_bytes_max, "{kept} bytes kept");
        assert!(!state.logs.is_empty());
        assert_eq!(
            state.logs.len() as u64 + state.logs_dropped,
            limits.log_lines_max as u64
        );
        assert!(state.logs.iter().all(|l| l.message.capacity() < 8192));
    }
}
