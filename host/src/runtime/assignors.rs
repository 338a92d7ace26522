//! Running the core's assignor calls: each on a guest thread (below the
//! host's CPU priority: `crate::plugins::GuestThreads`), never on a
//! request path and never under the core's lock, so that one group's slow
//! assignor delays no other group's heartbeats. A call runs under the host's
//! limits lowered by the binding's; if it fails and the binding names a
//! fallback, the fallback runs next, in the same blocking task. The answer
//! (or the failure, as one line) goes back through
//! `Coordinator::assignment_computed` (or `fallback_computed`), whose output
//! is handled like any other. Each call runs in a tracing span
//! `assignor_call` with its group, epoch and module (the fallback's run in
//! a nested `fallback_call` naming the fallback), so every line it logs,
//! the guest's included, carries them.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Instant;

use assignd_guest_sdk::{Assignment, GroupInput};
use metrics::Unit;
use tracing::Instrument;

use crate::plugins::{BUILTIN_NAMES, GuestLogLine, GuestThreadError, Limits, PluginError};
use crate::protocol::core::AssignorCall;
use crate::protocol::group::{AssignorFailure, CallLimits, CallStats};
use crate::registry::Registry;
use crate::telemetry::{Family, Kind};

use super::{Runtime, RuntimeError, Weight};

impl Runtime {
    /// Starts every call on its own task and returns at once.
    pub(super) fn start_assignor_calls(self: &Arc<Self>, calls: Vec<AssignorCall>) {
        for call in calls {
            self.calls_in_flight.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(self.clone().run_assignor_call(call));
        }
    }

    /// One call, start to finish: the bound module (and, if it fails, the
    /// fallback) runs on a guest thread, and the answer goes back into the
    /// group's shard. Boxed: its output may start further calls, which
    /// spawn this same future.
    fn run_assignor_call(
        self: Arc<Self>,
        call: AssignorCall,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        let span = assignor_call_span(&call);
        let blocking_span = span.clone();
        Box::pin(
            async move {
                let AssignorCall {
                    group,
                    epoch,
                    assignor,
                    limits: binding,
                    fallback,
                    input,
                    reason: _,
                } = call;
                let limits = self.limits_of(&binding);
                let answered = self
                    .call_on_guest_thread(&assignor, fallback, input, limits, blocking_span)
                    .await;
                let Some(recorded) = self.record_answer(&group, epoch, &assignor, answered).await
                else {
                    return;
                };
                log_unrecorded_answer(&group, epoch, recorded);
                self.calls_finished.fetch_add(1, Ordering::SeqCst);
                self.calls_in_flight.fetch_sub(1, Ordering::SeqCst);
            }
            .instrument(span),
        )
    }

    /// The host's limits lowered by the binding's.
    pub(super) fn limits_of(&self, binding: &CallLimits) -> Limits {
        self.limits.lowered_by(
            binding.fuel_max,
            binding.time_limit_ms,
            binding
                .memory_max_mib
                .map(|mib| mib.saturating_mul(1 << 20)),
        )
    }

    /// Runs the bound module on a guest thread, and the fallback after it
    /// if it failed and the binding names one.
    async fn call_on_guest_thread(
        &self,
        assignor: &str,
        fallback: Option<String>,
        input: GroupInput,
        limits: Limits,
        span: tracing::Span,
    ) -> Result<Answers, GuestThreadError> {
        // The fallback is the group's safety net: it runs under the
        // host's ceilings, not the limits that distrust the bound module.
        let fallback_limits = self.limits;
        let registry = self.registry.clone();
        let bound = assignor.to_owned();
        let engine = registry.engine().clone();
        engine
            .on_guest_thread(move || {
                let _span = span.enter();
                let first = call_module(&registry, &bound, &input, &limits);
                let second = match (&first.result, &fallback) {
                    (Err(_), Some(fallback)) => {
                        let _fallback =
                            tracing::warn_span!("fallback_call", module = fallback.as_str())
                                .entered();
                        Some((
                            fallback.clone(),
                            call_module(&registry, fallback, &input, &fallback_limits),
                        ))
                    }
                    _ => None,
                };
                (first, second)
            })
            .await
    }

    /// Hands the answers (or the guest thread's failure) to the group's
    /// core. `None`: the engine is shutting down and never ran the call,
    /// which is not the assignor's failure; nothing waits for the answer
    /// (a call in flight is transient state).
    async fn record_answer(
        self: &Arc<Self>,
        group: &str,
        epoch: u64,
        assignor: &str,
        answered: Result<Answers, GuestThreadError>,
    ) -> Option<Result<(), RuntimeError>> {
        match answered {
            Ok((first, second)) => {
                let stats = first.stats();
                let bound = first.report(group, epoch, assignor);
                let second = second.map(|(name, call)| call.report(group, epoch, &name));
                Some(
                    self.execute(group, Weight::Heavy, |core, now| {
                        core.live_call_measured(group, stats);
                        Ok((
                            (),
                            match (bound, second) {
                                (Err(failure), Some(fallback)) => {
                                    core.fallback_computed(group, epoch, failure, fallback, now)
                                }
                                (bound, _) => core.assignment_computed(group, epoch, bound, now),
                            },
                        ))
                    })
                    .await,
                )
            }
            Err(GuestThreadError::Stopped) => {
                tracing::debug!(group, epoch, assignor, "assignor call dropped at shutdown");
                None
            }
            Err(panicked @ GuestThreadError::Panicked(_)) => {
                tracing::error!(group, epoch, assignor, %panicked, "assignor call panicked");
                let failure = AssignorFailure::new("host_panic", panicked.to_string());
                Some(
                    self.execute(group, Weight::Light, |core, now| {
                        Ok((
                            (),
                            core.assignment_computed(group, epoch, Err(failure), now),
                        ))
                    })
                    .await,
                )
            }
        }
    }

    /// Compiles every built-in assignor in the background, so that a
    /// group's first call does not pay for it (and a broken build shows in
    /// the log at start).
    pub fn preload_builtins(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let engine = self.registry.engine().clone();
        tokio::task::spawn_blocking(move || {
            for name in BUILTIN_NAMES {
                let started = Instant::now();
                match engine.load_builtin(name) {
                    Ok(module) => tracing::debug!(
                        assignor = name,
                        from_disk_cache = module.from_disk_cache,
                        elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
                        "assignor loaded"
                    ),
                    Err(error) => {
                        tracing::error!(assignor = name, %error, "cannot load a built-in assignor")
                    }
                }
            }
        })
    }
}

/// The bound module's run, and the fallback's (named) if it ran.
type Answers = (ModuleCall, Option<(String, ModuleCall)>);

/// A call's span. At warn level, so that under the default filter (`warn`)
/// the lines that show (a failure, a guest's warnings) still carry the
/// call's group, epoch and module. A root span: a call is often started
/// while the previous call's answer is handled, inside its span, and a
/// child there would carry every earlier call's span.
fn assignor_call_span(call: &AssignorCall) -> tracing::Span {
    tracing::warn_span!(
        parent: None,
        "assignor_call",
        group = call.group.as_str(),
        epoch = call.epoch,
        module = call.assignor.as_str(),
        reason = call.reason.label(),
    )
}

/// Logs an answer the core could not take: dropped if the shard was
/// unloaded while the call ran (or cannot be written now, its storage
/// silent), since whoever loads it next asks again (the recovered group
/// waits for a target); an error otherwise.
fn log_unrecorded_answer(group: &str, epoch: u64, recorded: Result<(), RuntimeError>) {
    match recorded {
        Ok(()) => {}
        Err(
            error @ (RuntimeError::ShardNotServed { .. } | RuntimeError::StorageUnavailable(_)),
        ) => {
            tracing::info!(group, epoch, %error, "an assignor's answer dropped");
        }
        Err(error) => {
            tracing::error!(group, epoch, %error, "recording an assignor's answer failed");
        }
    }
}

/// One module's run on a call's input: its answer, its log lines, and how
/// long it took.
pub(super) struct ModuleCall {
    pub(super) result: Result<crate::plugins::CallOutcome, PluginError>,
    pub(super) logs: Vec<GuestLogLine>,
    pub(super) logs_dropped: u64,
    pub(super) elapsed: std::time::Duration,
}

/// Loads `name` from the registry and runs it on `input` within `limits`.
pub(super) fn call_module(
    registry: &Registry,
    name: &str,
    input: &GroupInput,
    limits: &Limits,
) -> ModuleCall {
    let started = Instant::now();
    let (result, logs, logs_dropped) = match registry.load(name) {
        Ok(module) => registry
            .engine()
            .assign_keeping_logs(&module, input, limits),
        Err(error) => (Err(error), Vec::new(), 0),
    };
    ModuleCall {
        result,
        logs,
        logs_dropped,
        elapsed: started.elapsed(),
    }
}

impl ModuleCall {
    /// What the call cost, for a shadow's comparison: its time, and its
    /// fuel when it answered.
    pub(super) fn stats(&self) -> CallStats {
        CallStats {
            elapsed_ms: Some(self.elapsed.as_secs_f64() * 1e3),
            fuel: self.result.as_ref().ok().map(|outcome| outcome.stats.fuel),
        }
    }

    /// Forwards the guest's log lines and counts the call in the metrics;
    /// the answer, or the failure as the core records it. (The core logs
    /// a failure, with the group's failure counts.)
    fn report(self, group: &str, epoch: u64, module: &str) -> Result<Assignment, AssignorFailure> {
        forward_guest_logs(
            group,
            module,
            &self.logs,
            self.logs_dropped,
            tracing::Level::ERROR,
        );
        let seconds = self.elapsed.as_secs_f64();
        // By module, not by group: series per group would grow the
        // recorder and every scrape with the groups (the group's view
        // has its own failure counts).
        let labels = [("module", module.to_owned())];
        metrics::histogram!("assignd_assignor_call_seconds", &labels).record(seconds);
        match self.result {
            Ok(outcome) => {
                metrics::counter!("assignd_assignor_calls_total", &labels).increment(1);
                metrics::histogram!("assignd_assignor_fuel", &labels)
                    .record(outcome.stats.fuel as f64);
                tracing::debug!(
                    group,
                    epoch,
                    module,
                    elapsed_ms = seconds * 1e3,
                    call_ms = outcome.stats.call_ms,
                    fuel = outcome.stats.fuel,
                    "assignor answered"
                );
                Ok(outcome.assignment)
            }
            Err(error) => {
                metrics::counter!("assignd_assignor_calls_total", &labels).increment(1);
                metrics::counter!(
                    "assignd_assignor_failures_total",
                    "module" => module.to_owned(),
                    "code" => error.code(),
                )
                .increment(1);
                Err(AssignorFailure::new(error.code(), error.to_string()))
            }
        }
    }
}

/// At most this many guest log lines per group per second reach the host's
/// log; the rest are counted and reported as one line.
pub const GUEST_LOG_LINES_PER_SECOND: u64 = 20;

/// One group's guest log budget: the current one-second window, the lines
/// it let through, and the lines dropped since the last report.
#[derive(Debug)]
struct LogBudget {
    window: Instant,
    passed: u64,
    dropped: u64,
}

static GUEST_LOG_BUDGETS: LazyLock<Mutex<HashMap<String, LogBudget>>> =
    LazyLock::new(Default::default);

/// Sends a call's guest log lines to the host's tracing output, tagged
/// with the group and module, within the group's budget; a line louder
/// than `level_max` is logged at it (a shadow's lines are news, never an
/// alarm).
pub(super) fn forward_guest_logs(
    group: &str,
    module: &str,
    logs: &[GuestLogLine],
    capped: u64,
    level_max: tracing::Level,
) {
    if logs.is_empty() && capped == 0 {
        return;
    }
    let mut budgets = GUEST_LOG_BUDGETS.lock().unwrap_or_else(|e| e.into_inner());
    let now = Instant::now();
    let budget = budgets.entry(group.to_owned()).or_insert(LogBudget {
        window: now,
        passed: 0,
        dropped: 0,
    });
    if now.duration_since(budget.window).as_secs() >= 1 {
        if budget.dropped > 0 {
            tracing::warn!(
                group,
                module,
                dropped = budget.dropped,
                "dropped {} guest log lines",
                budget.dropped
            );
        }
        *budget = LogBudget {
            window: now,
            passed: 0,
            dropped: 0,
        };
    }
    budget.dropped += capped;
    for line in logs {
        if budget.passed >= GUEST_LOG_LINES_PER_SECOND {
            budget.dropped += 1;
            continue;
        }
        budget.passed += 1;
        let message = line.message.as_str();
        let level = match line.level {
            "error" => tracing::Level::ERROR,
            "warn" => tracing::Level::WARN,
            "info" => tracing::Level::INFO,
            "debug" => tracing::Level::DEBUG,
            _ => tracing::Level::TRACE,
        };
        // `Level` orders by verbosity: ERROR is the least verbose.
        match level.max(level_max).as_str() {
            "ERROR" => tracing::error!(target: "guest", group, module, "{message}"),
            "WARN" => tracing::warn!(target: "guest", group, module, "{message}"),
            "INFO" => tracing::info!(target: "guest", group, module, "{message}"),
            "DEBUG" => tracing::debug!(target: "guest", group, module, "{message}"),
            _ => tracing::trace!(target: "guest", group, module, "{message}"),
        }
    }
}

/// The families this file records: assignor calls by module, their
/// failures, durations and fuel.
pub const ASSIGNOR_FAMILIES: &[Family] = &[
    Family::new(
        "assignd_assignor_calls_total",
        Kind::Counter,
        Unit::Count,
        "Assignor calls per module, answered or failed",
    ),
    Family::new(
        "assignd_assignor_failures_total",
        Kind::Counter,
        Unit::Count,
        "Assignor calls that failed, per module and failure code",
    ),
    Family::new(
        "assignd_assignor_call_seconds",
        Kind::Histogram,
        Unit::Seconds,
        "Duration of one assignor call (loading and running the module)",
    ),
    Family::new(
        "assignd_assignor_fuel",
        Kind::Histogram,
        Unit::Count,
        "Fuel one successful assignor call used (about one unit per wasm instruction)",
    )
    .with_buckets(FUEL_BUCKETS),
];

/// Histogram buckets for an assignor call's fuel (wasm instructions,
/// roughly): a thousand to ten billion.
const FUEL_BUCKETS: &[f64] = &[1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10];

/// Sets the assignor families' series of every built-in assignor to zero.
pub fn zero_assignor_series() {
    for module in BUILTIN_NAMES {
        metrics::counter!("assignd_assignor_calls_total", "module" => *module).absolute(0);
        // Registered without a sample: rendered with zero counts.
        let _ = metrics::histogram!("assignd_assignor_call_seconds", "module" => *module);
        let _ = metrics::histogram!("assignd_assignor_fuel", "module" => *module);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_logs_are_rate_limited_per_group() {
        let line = GuestLogLine {
            level: "info",
            message: "hello".into(),
        };
        let lines = vec![line; 50];
        forward_guest_logs("flooding-group", "m", &lines, 3, tracing::Level::ERROR);
        forward_guest_logs("quiet-group", "m", &lines[..2], 0, tracing::Level::ERROR);
        let budgets = GUEST_LOG_BUDGETS.lock().unwrap();
        let flooding = &budgets["flooding-group"];
        assert_eq!(flooding.passed, GUEST_LOG_LINES_PER_SECOND);
        assert_eq!(flooding.dropped, 50 - GUEST_LOG_LINES_PER_SECOND + 3);
        assert_eq!(budgets["quiet-group"].passed, 2);
        assert_eq!(budgets["quiet-group"].dropped, 0);
    }
}
