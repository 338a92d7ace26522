//! A group's shadow assignor: binding it ([`Coordinator::bind_shadow`]),
//! asking it beside the live assignor on the same input (a [`ShadowCall`]
//! next to each [`AssignorCall`](super::AssignorCall)), and comparing the
//! two answers when both are in ([`Coordinator::shadow_computed`]). The
//! shadow's answer is never made safe, installed or recorded: only the
//! binding is a record (`ShadowBound`), and the comparisons are soft
//! state (`group::ShadowLog`). No assignor is called here.

use std::collections::BTreeMap;
use std::sync::Arc;

use assignd_guest_sdk::{Assignment, GroupInput, NO_MEMBER};

use super::{Coordinator, HOST_PARAMS, Output, ProtocolError, config::check_config};
use crate::protocol::group::{
    CallLimits, CallStats, Millis, PendingComparison, Record, ShadowBinding, ShadowComparison,
    SideAnswer, SideSummary,
};

/// What a shadow is bound with: the assignor, its params and the limits
/// of its calls (under the host's ceilings).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShadowSpec {
    pub assignor: String,
    pub params: BTreeMap<String, String>,
    pub limits: CallLimits,
}

/// A shadow's call for the runtime to run: the live call's input with the
/// shadow's params, below the live call's priority, its answer going back
/// through [`Coordinator::shadow_computed`].
#[derive(Clone, Debug, PartialEq)]
pub struct ShadowCall {
    pub group: String,
    pub epoch: u64,
    pub assignor: String,
    pub limits: CallLimits,
    pub input: Arc<GroupInput>,
}

impl Coordinator {
    /// Binds `spec` as the group's shadow, or ends its shadow (`None`).
    /// The same shadow again, or ending none, changes nothing. The
    /// caller has checked that the assignor exists and takes the params.
    pub fn bind_shadow(
        &mut self,
        name: &str,
        spec: Option<ShadowSpec>,
        now: Millis,
    ) -> Result<Output, ProtocolError> {
        self.observe_time(now);
        let group = self
            .group(name)
            .ok_or_else(|| ProtocolError::UnknownGroup(name.to_owned()))?;
        if let Some(spec) = &spec {
            // Checked as the binding it would be when made live.
            let mut config = group.config.clone();
            config.assignor = spec.assignor.clone();
            config.params = spec.params.clone();
            config.assignor_limits = spec.limits;
            check_config(&config)?;
        }
        let same = match (&group.shadow, &spec) {
            (None, None) => true,
            (Some(bound), Some(spec)) => {
                bound.assignor == spec.assignor
                    && bound.params == spec.params
                    && bound.limits == spec.limits
            }
            _ => false,
        };
        let mut out = Output::default();
        if same {
            return Ok(out);
        }
        let shadow = spec.map(|spec| ShadowBinding {
            assignor: spec.assignor,
            params: spec.params,
            limits: spec.limits,
            epoch: group.group_epoch,
            at_ms: now,
        });
        self.emit_shadow(name, shadow, &mut out);
        Ok(out)
    }

    /// Records the group's new shadow (or its end) and forgets the
    /// comparisons of the one before.
    pub(super) fn emit_shadow(
        &mut self,
        name: &str,
        shadow: Option<ShadowBinding>,
        out: &mut Output,
    ) {
        self.emit(
            out,
            Record::ShadowBound {
                group: name.to_owned(),
                shadow,
            },
        );
        self.entry_mut(name).1.shadows.clear();
    }

    /// The shadow's call beside a live call starting now with `input`, if
    /// the group has a shadow and its previous call has answered (a live
    /// call that goes without one is counted as skipped).
    pub(super) fn shadow_call_beside(
        &mut self,
        name: &str,
        live_assignor: &str,
        reason: &'static str,
        input: &GroupInput,
        now: Millis,
    ) -> Option<ShadowCall> {
        let (group, liveness) = self.entry_mut(name);
        let shadow = group.shadow.clone()?;
        let log = &mut liveness.shadows;
        if log.shadow_running {
            log.totals.skipped += 1;
            return None;
        }
        let epoch = group.group_epoch;
        let mut shadow_input = input.clone();
        shadow_input.params = shadow.params.clone();
        for key in HOST_PARAMS {
            if let Some(value) = input.params.get(key) {
                shadow_input
                    .params
                    .entry(key.to_owned())
                    .or_insert(value.clone());
            }
        }
        // One copy of the input serves the call and the comparison: they
        // differ from the live input only in the params, which the
        // comparison does not read.
        let shadow_input = Arc::new(shadow_input);
        log.shadow_running = true;
        log.pending = Some(PendingComparison {
            epoch,
            input: shadow_input.clone(),
            live_assignor: live_assignor.to_owned(),
            shadow_assignor: shadow.assignor.clone(),
            reason,
            asked_ms: now,
            live: None,
            shadow: None,
        });
        Some(ShadowCall {
            group: name.to_owned(),
            epoch,
            assignor: shadow.assignor,
            limits: shadow.limits,
            input: shadow_input,
        })
    }

    /// The live answer for `epoch` (the bound assignor's, or its failure)
    /// as one side of the pending comparison.
    pub(super) fn shadow_live_answered(
        &mut self,
        name: &str,
        epoch: u64,
        result: Result<&Assignment, String>,
        now: Millis,
    ) {
        let Some(entry) = self.groups.get_mut(name) else {
            return;
        };
        let log = &mut entry.liveness.shadows;
        let stats = log.live_stats.take().unwrap_or_default();
        let Some(pending) = log.pending.as_mut().filter(|p| p.epoch == epoch) else {
            return;
        };
        pending.live = Some(SideAnswer {
            result: result.cloned(),
            stats,
        });
        finish_if_complete(log, now);
    }

    /// The runtime's measure of the live call for `epoch`, handed in just
    /// before its answer, for the comparison's time and fuel.
    pub fn live_call_measured(&mut self, name: &str, stats: CallStats) {
        if let Some(entry) = self.groups.get_mut(name)
            && entry.liveness.shadows.pending.is_some()
        {
            entry.liveness.shadows.live_stats = Some(stats);
        }
    }

    /// The runtime's answer to a [`ShadowCall`]: kept beside the live
    /// answer to the same input, and compared once both are in. An answer
    /// of a shadow since replaced or ended, or for a comparison already
    /// given up, is dropped. Nothing is emitted: a shadow never changes
    /// the group.
    pub fn shadow_computed(
        &mut self,
        name: &str,
        epoch: u64,
        assignor: &str,
        result: Result<Assignment, String>,
        stats: CallStats,
        now: Millis,
    ) {
        self.observe_time(now);
        let Some(entry) = self.groups.get_mut(name) else {
            return;
        };
        let log = &mut entry.liveness.shadows;
        log.shadow_running = false;
        let Some(pending) = log
            .pending
            .as_mut()
            .filter(|p| p.epoch == epoch && p.shadow_assignor == assignor)
        else {
            return;
        };
        pending.shadow = Some(SideAnswer { result, stats });
        finish_if_complete(log, now);
    }
}

impl Coordinator {
    /// The runtime did not run a [`ShadowCall`] (its shadow queue was
    /// full, or it is shutting down): the comparison is given up and
    /// counted as skipped, never as the shadow's failure.
    pub fn shadow_dropped(&mut self, name: &str, epoch: u64) {
        let Some(entry) = self.groups.get_mut(name) else {
            return;
        };
        let log = &mut entry.liveness.shadows;
        log.shadow_running = false;
        if log.pending.as_ref().is_some_and(|p| p.epoch == epoch) {
            log.pending = None;
            log.totals.skipped += 1;
        }
    }
}

/// Moves the pending comparison to the history once both sides are in.
fn finish_if_complete(log: &mut crate::protocol::group::ShadowLog, now: Millis) {
    let complete = log
        .pending
        .as_ref()
        .is_some_and(|p| p.live.is_some() && p.shadow.is_some());
    if !complete {
        return;
    }
    let pending = log.pending.take().expect("checked above");
    let comparison = compare(&pending, now);
    tracing::debug!(
        epoch = comparison.epoch,
        live = comparison.live.assignor,
        shadow = comparison.shadow.assignor,
        live_moved = comparison.live.moved,
        shadow_moved = comparison.shadow.moved,
        disagreeing_tasks = comparison.disagreeing_tasks,
        shadow_failure = comparison.shadow.failure,
        "shadow compared"
    );
    log.push(comparison);
}

/// The two answers to one input, side by side.
pub fn compare(pending: &PendingComparison, now: Millis) -> ShadowComparison {
    let live = pending.live.as_ref().expect("a complete comparison");
    let shadow = pending.shadow.as_ref().expect("a complete comparison");
    let input = &pending.input;
    let disagreeing_tasks = match (&live.result, &shadow.result) {
        (Ok(a), Ok(b)) => Some(
            a.active_owner
                .iter()
                .zip(&b.active_owner)
                .filter(|(x, y)| x != y)
                .count() as u64,
        ),
        _ => None,
    };
    ShadowComparison {
        epoch: pending.epoch,
        at_ms: now,
        reason: pending.reason,
        tasks: input.active_owner.len() as u64,
        members: input.members.len() as u64,
        live: summarize(input, &pending.live_assignor, live),
        shadow: summarize(input, &pending.shadow_assignor, shadow),
        disagreeing_tasks,
    }
}

/// What one answer would do to the input's current assignment.
pub fn summarize(input: &GroupInput, assignor: &str, answer: &SideAnswer) -> SideSummary {
    let mut summary = SideSummary {
        assignor: assignor.to_owned(),
        failure: None,
        moved: None,
        learners_started: None,
        count_spread: None,
        load_imbalance: None,
        stats: answer.stats,
    };
    let assignment = match &answer.result {
        Ok(assignment) => assignment,
        Err(failure) => {
            summary.failure = Some(failure.clone());
            return summary;
        }
    };
    summary.moved = Some(moved_tasks(&input.active_owner, &assignment.active_owner));
    summary.learners_started = Some(learners_started(input, assignment));
    let counts = assignment.active_counts(input.members.len());
    let spread = counts.iter().max().zip(counts.iter().min());
    summary.count_spread = spread.map(|(max, min)| u64::from(max - min));
    summary.load_imbalance = load_imbalance(input, assignment);
    summary
}

/// Tasks owned now whose owner the answer changes.
pub fn moved_tasks(before: &[u32], after: &[u32]) -> u64 {
    before
        .iter()
        .zip(after)
        .filter(|(b, a)| **b != NO_MEMBER && b != a)
        .count() as u64
}

/// Learner rows of the answer that are not learners in the input.
fn learners_started(input: &GroupInput, assignment: &Assignment) -> u64 {
    let now: std::collections::BTreeSet<(u32, u32)> = input
        .learners
        .task
        .iter()
        .copied()
        .zip(input.learners.member.iter().copied())
        .collect();
    assignment
        .learners
        .task
        .iter()
        .zip(&assignment.learners.member)
        .filter(|(t, m)| !now.contains(&(**t, **m)))
        .count() as u64
}

/// The most loaded member's load over its fair share of the total, the
/// shares weighed by declared load capacities when every member has one,
/// else by capacity; `None` unless every task the answer places has a
/// known load and the total is positive.
pub fn load_imbalance(input: &GroupInput, assignment: &Assignment) -> Option<f64> {
    input.load_unit.as_ref()?;
    let task_loads = input.task_loads();
    let mut member_loads = vec![0.0f64; input.members.len()];
    for (task, &owner) in assignment.active_owner.iter().enumerate() {
        if owner == NO_MEMBER {
            continue;
        }
        let load = (*task_loads.get(task)?)?;
        *member_loads.get_mut(owner as usize)? += load;
    }
    let total: f64 = member_loads.iter().sum();
    let weights: Vec<f64> = if input.members.iter().all(|m| m.load_capacity.is_some()) {
        input
            .members
            .iter()
            .map(|m| m.load_capacity.unwrap_or(0.0))
            .collect()
    } else {
        input
            .members
            .iter()
            .map(|m| f64::from(m.capacity))
            .collect()
    };
    let weight_total: f64 = weights.iter().sum();
    if total <= 0.0 || weight_total <= 0.0 {
        return None;
    }
    member_loads
        .iter()
        .zip(&weights)
        .filter(|(_, w)| **w > 0.0)
        .map(|(load, w)| load / (total * w / weight_total))
        .fold(None, |max: Option<f64>, ratio| {
            Some(max.map_or(ratio, |m| m.max(ratio)))
        })
}
