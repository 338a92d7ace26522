//! Running a group's shadow assignor beside its live one: each
//! [`ShadowCall`] of a core step runs in a fresh sandbox like a live call
//! (`assignors::call_module`), under the host's limits lowered by the
//! shadow's, on the engine's shadow threads (below every live call, with
//! instance slots of their own: `crate::plugins::GuestThreads::for_shadows`),
//! so a slow or spinning shadow never takes a live call's slot or CPU. A
//! call finding every shadow thread busy is not queued: the core is told
//! (`Coordinator::shadow_dropped`) and counts it as skipped. The answer, or
//! the failure as `code: message`, goes back through
//! `Coordinator::shadow_computed` in a light step that emits nothing: a
//! shadow never changes the group. Each call runs in a tracing span
//! `shadow_call` (group, epoch, module); a shadow's failure is logged at
//! `info`, never as an error, since the group's view shows it. Also the
//! binding of a shadow ([`Runtime::bind_shadow`]) and the shadow metrics
//! by module.

use std::sync::Arc;

use metrics::Unit;
use tracing::Instrument;

use crate::plugins::GuestThreadError;
use crate::protocol::core::{Output, ProtocolError, ShadowCall, ShadowSpec};
use crate::protocol::group::{BindingSpec, CallStats};
use crate::telemetry::{Family, Kind};

use super::assignors::{ModuleCall, call_module, forward_guest_logs};
use super::execute::{FORMAT_WITH_SHADOWS, Weight};
use super::{Runtime, RuntimeError};

impl Runtime {
    /// Starts every shadow call that finds a free shadow thread, and tells
    /// the core of each that does not; returns at once.
    pub(super) fn start_shadow_calls(self: &Arc<Self>, calls: Vec<ShadowCall>) {
        for call in calls {
            let span = shadow_call_span(&call);
            let ShadowCall {
                group,
                epoch,
                assignor,
                limits,
                input,
            } = call;
            let limits = self.limits_of(&limits);
            let registry = self.registry.clone();
            let module = assignor.clone();
            let blocking_span = span.clone();
            let engine = self.registry.engine().clone();
            let started = engine.try_on_shadow_thread(move || {
                let _span = blocking_span.enter();
                call_module(&registry, &module, &input, &limits)
            });
            let runtime = self.clone();
            match started {
                Some(running) => {
                    tokio::spawn(
                        async move {
                            let answered = running.await;
                            runtime
                                .record_shadow(&group, epoch, &assignor, answered)
                                .await;
                        }
                        .instrument(span),
                    );
                }
                None => {
                    metrics::counter!("assignd_shadow_calls_dropped_total").increment(1);
                    tracing::debug!(parent: &span, "shadow call dropped: every shadow thread is busy");
                    tokio::spawn(async move {
                        runtime.drop_shadow(&group, epoch).await;
                    });
                }
            }
        }
    }

    /// Hands a shadow's answer (or failure) to the group's core; a call
    /// the shadow threads never ran (at shutdown) is dropped.
    async fn record_shadow(
        self: &Arc<Self>,
        group: &str,
        epoch: u64,
        assignor: &str,
        answered: Result<ModuleCall, GuestThreadError>,
    ) {
        let (result, stats) = match answered {
            Ok(call) => {
                let stats = call.stats();
                (report(call, group, assignor), stats)
            }
            Err(GuestThreadError::Stopped) => {
                self.drop_shadow(group, epoch).await;
                return;
            }
            Err(panicked @ GuestThreadError::Panicked(_)) => {
                tracing::error!(%panicked, "a shadow assignor call panicked");
                (Err(format!("host_panic: {panicked}")), CallStats::default())
            }
        };
        let recorded = self
            .execute(group, Weight::Light, |core, now| {
                core.shadow_computed(group, epoch, assignor, result, stats, now);
                Ok(((), Output::default()))
            })
            .await;
        if let Err(error) = recorded {
            tracing::info!(%error, "a shadow assignor's answer dropped");
        }
    }

    /// Tells the core a shadow call did not run.
    async fn drop_shadow(self: &Arc<Self>, group: &str, epoch: u64) {
        let told = self
            .execute(group, Weight::Light, |core, _| {
                core.shadow_dropped(group, epoch);
                Ok(((), Output::default()))
            })
            .await;
        if let Err(error) = told {
            tracing::debug!(group, epoch, %error, "a dropped shadow call's group is gone");
        }
    }

    /// Binds `spec` as the group's shadow assignor, or ends its shadow
    /// (`None`). Checked as a bind is: the assignor resolves (under the
    /// core's lock) and takes its params; the record format keeps shadows.
    /// Returns whether the shadow changed.
    pub async fn bind_shadow(
        self: &Arc<Self>,
        group: &str,
        spec: Option<ShadowSpec>,
    ) -> Result<bool, RuntimeError> {
        let binding = spec.as_ref().map(|spec| BindingSpec {
            assignor: spec.assignor.clone(),
            params: spec.params.clone(),
            limits: spec.limits,
            fallback: None,
        });
        if let Some(binding) = &binding {
            self.check_format_level("a shadow assignor", FORMAT_WITH_SHADOWS)?;
            self.check_params(binding).await?;
        }
        self.execute(group, Weight::Light, |core, now| {
            if core.group(group).is_none() {
                return Err(ProtocolError::UnknownGroup(group.to_owned()).into());
            }
            if let Some(binding) = &binding {
                self.check_resolves(binding)?;
            }
            let output = core.bind_shadow(group, spec, now)?;
            Ok((!output.records.is_empty(), output))
        })
        .await
    }
}

/// A shadow call's span: a root span (like `assignor_call`'s) at warn
/// level, so whatever the call logs carries its group, epoch and module.
fn shadow_call_span(call: &ShadowCall) -> tracing::Span {
    tracing::warn_span!(
        parent: None,
        "shadow_call",
        group = call.group.as_str(),
        epoch = call.epoch,
        module = call.assignor.as_str(),
    )
}

/// Forwards a shadow's guest log lines (at `info` at most) and counts the
/// call by module; its answer, or its failure as `code: message`.
fn report(
    call: ModuleCall,
    group: &str,
    module: &str,
) -> Result<assignd_guest_sdk::Assignment, String> {
    forward_guest_logs(
        group,
        module,
        &call.logs,
        call.logs_dropped,
        tracing::Level::INFO,
    );
    let labels = [("module", module.to_owned())];
    metrics::counter!("assignd_shadow_calls_total", &labels).increment(1);
    metrics::histogram!("assignd_shadow_call_seconds", &labels).record(call.elapsed.as_secs_f64());
    match call.result {
        Ok(outcome) => {
            tracing::debug!(fuel = outcome.stats.fuel, "shadow assignor answered");
            Ok(outcome.assignment)
        }
        Err(error) => {
            metrics::counter!(
                "assignd_shadow_failures_total",
                "module" => module.to_owned(),
                "code" => error.code(),
            )
            .increment(1);
            // Expected of a shadow on trial: the group's view shows it.
            tracing::info!(code = error.code(), %error, "shadow assignor failed");
            Err(format!("{}: {error}", error.code()))
        }
    }
}

/// The families this file records: shadow calls by module, their
/// failures and durations, and the calls not run.
pub const SHADOW_FAMILIES: &[Family] = &[
    Family::new(
        "assignd_shadow_calls_total",
        Kind::Counter,
        Unit::Count,
        "Shadow assignor calls per module, answered or failed",
    ),
    Family::new(
        "assignd_shadow_failures_total",
        Kind::Counter,
        Unit::Count,
        "Shadow assignor calls that failed, per module and failure code",
    ),
    Family::new(
        "assignd_shadow_call_seconds",
        Kind::Histogram,
        Unit::Seconds,
        "Duration of one shadow assignor call (loading and running the module)",
    ),
    Family::new(
        "assignd_shadow_calls_dropped_total",
        Kind::Counter,
        Unit::Count,
        "Shadow calls not run: every shadow thread was busy (serve --shadow-calls-max)",
    ),
];

/// Sets the shadow series whose labels are known to zero.
pub fn zero_shadow_series() {
    metrics::counter!("assignd_shadow_calls_dropped_total").absolute(0);
}
