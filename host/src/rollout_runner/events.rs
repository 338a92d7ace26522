//! What the runner tells the operator: each rollout event as one log line
//! (info; unhealthy groups, refused commands and rollbacks at warn, never
//! error: a rollback is the product working), and the rollout metric
//! families, declared here and gathered by `crate::metric_catalog`.

use metrics::Unit;

use crate::rollout::{Event, EventKind, Phase};
use crate::telemetry::{Family, Kind};

/// The rollout families.
pub const ROLLOUT_FAMILIES: &[Family] = &[
    Family::new(
        "assignd_rollout_events_total",
        Kind::Counter,
        Unit::Count,
        "Rollout events (decisions) by kind: started, step_began, group_unhealthy, aborting, rolled_back, ...",
    ),
    Family::new(
        "assignd_rollouts",
        Kind::Gauge,
        Unit::Count,
        "Rollouts this node coordinates, by phase",
    ),
    Family::new(
        "assignd_rollout_commands_total",
        Kind::Counter,
        Unit::Count,
        "Commands a rollout performed on its groups, by action (shadow, unshadow, bind, restore) and result (ok, refused)",
    ),
];

/// Every phase's name, for the gauge's series.
pub const PHASES: [&str; 7] = [
    "shadowing",
    "step",
    "completing",
    "rolling_back",
    "completed",
    "rolled_back",
    "failed",
];

/// Sets the rollout series whose labels are known to zero.
pub fn zero_rollout_series() {
    for phase in PHASES {
        metrics::gauge!("assignd_rollouts", "phase" => phase).set(0.0);
    }
}

/// Logs and counts one event of rollout `id`; `step` is the rollout's
/// current step (0 while shadowing).
pub fn report(id: &str, step: usize, event: &Event) {
    let kind = event.kind.name();
    metrics::counter!("assignd_rollout_events_total", "kind" => kind).increment(1);
    let seq = event.seq;
    match &event.kind {
        EventKind::GroupUnhealthy {
            group,
            rule,
            detail,
        } => {
            tracing::warn!(rollout = id, seq, step, group, rule = %rule, detail, "rollout: group unhealthy")
        }
        EventKind::CommandFailed {
            group,
            action,
            error,
            attempt,
            ..
        } => {
            tracing::warn!(
                rollout = id,
                seq,
                step,
                group,
                action,
                error,
                attempt,
                "rollout: command refused"
            )
        }
        EventKind::Aborting { reason } => {
            tracing::warn!(rollout = id, seq, step, reason, "rollout: rolling back")
        }
        EventKind::Failed { groups } => {
            tracing::warn!(rollout = id, seq, step, groups = ?groups, "rollout: failed, groups left as they are")
        }
        EventKind::RolledBack => {
            tracing::warn!(rollout = id, seq, step, "rollout: rolled back")
        }
        EventKind::GroupBound { group }
        | EventKind::GroupRestored { group }
        | EventKind::GroupUnshadowed { group } => {
            tracing::info!(
                rollout = id,
                seq,
                step,
                group,
                event = kind,
                "rollout: {kind}"
            )
        }
        EventKind::StepBegan {
            step,
            steps,
            groups,
        } => {
            tracing::info!(
                rollout = id,
                seq,
                step,
                steps,
                groups = groups.len(),
                "rollout: step began"
            )
        }
        EventKind::Paused { reason } => {
            tracing::info!(rollout = id, seq, step, reason, "rollout: paused")
        }
        _ => tracing::info!(rollout = id, seq, step, event = kind, "rollout: {kind}"),
    }
}

/// Counts one command performed.
pub fn count_command(action: &'static str, ok: bool) {
    let result = if ok { "ok" } else { "refused" };
    metrics::counter!("assignd_rollout_commands_total", "action" => action, "result" => result)
        .increment(1);
}

/// Sets the gauge from the phases of the rollouts coordinated here.
pub fn set_phases<'a>(phases: impl Iterator<Item = &'a Phase>) {
    let mut counts = [0u32; PHASES.len()];
    for phase in phases {
        if let Some(i) = PHASES.iter().position(|p| *p == phase.name()) {
            counts[i] += 1;
        }
    }
    for (phase, count) in PHASES.iter().zip(counts) {
        metrics::gauge!("assignd_rollouts", "phase" => *phase).set(f64::from(count));
    }
}
