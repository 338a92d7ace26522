//! Running the core's assignor calls: each on `spawn_blocking`, never on a
//! request path and never under the core's lock, so that one group's slow
//! assignor delays no other group's heartbeats. The answer (or the failure,
//! as one line) goes back through `Coordinator::assignment_computed`, whose
//! output is handled like any other.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::plugins::{BUILTIN_NAMES, CallOutcome, PluginError};
use crate::protocol::core::AssignorCall;

use super::Runtime;

impl Runtime {
    /// Starts every call on its own task and returns at once.
    pub(super) fn start_assignor_calls(self: &Arc<Self>, calls: Vec<AssignorCall>) {
        for call in calls {
            self.calls_in_flight.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(self.clone().run_assignor_call(call));
        }
    }

    /// One call, start to finish. Boxed: its output may start further
    /// calls, which spawn this same future.
    fn run_assignor_call(
        self: Arc<Self>,
        call: AssignorCall,
    ) -> Pin<Box<dyn Future<Output = ()> + Send + 'static>> {
        Box::pin(async move {
            let AssignorCall {
                group,
                epoch,
                assignor,
                input,
            } = call;
            let registry = self.registry.clone();
            let limits = self.limits;
            let name = assignor.clone();
            let started = Instant::now();
            let result =
                tokio::task::spawn_blocking(move || -> Result<CallOutcome, PluginError> {
                    let module = registry.load(&name)?;
                    registry.engine().assign(&module, &input, &limits)
                })
                .await;
            let elapsed_ms = started.elapsed().as_secs_f64() * 1e3;
            let result = match result {
                Ok(Ok(outcome)) => {
                    tracing::debug!(
                        group,
                        epoch,
                        assignor,
                        elapsed_ms,
                        call_ms = outcome.stats.call_ms,
                        fuel = outcome.stats.fuel,
                        "assignor answered"
                    );
                    Ok(outcome.assignment)
                }
                Ok(Err(error)) => {
                    tracing::warn!(group, epoch, assignor, code = error.code(), %error, "assignor call failed");
                    Err(error.to_string())
                }
                Err(join_error) => {
                    tracing::error!(group, epoch, assignor, %join_error, "assignor call panicked");
                    Err(format!("the assignor call panicked: {join_error}"))
                }
            };
            let answered = self
                .execute(|core, now| Ok(((), core.assignment_computed(&group, epoch, result, now))))
                .await;
            if let Err(error) = answered {
                tracing::error!(group, epoch, %error, "recording an assignor's answer failed");
            }
            self.calls_finished.fetch_add(1, Ordering::SeqCst);
            self.calls_in_flight.fetch_sub(1, Ordering::SeqCst);
        })
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
