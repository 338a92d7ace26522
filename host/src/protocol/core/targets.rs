//! New targets: a group's batch of changes waits for its expansion timeout
//! (none when urgent, a backoff while the assignor fails), then one assignor
//! call per group goes out in [`Output`] ([`CallInFlight`] remembers what its
//! indices mean); its answer, or its fallback's, comes back through
//! [`Coordinator::assignment_computed`] or [`Coordinator::fallback_computed`]
//! and is installed after the learner safety (learners.rs), or counted as a
//! failure. No assignor is called here.

use std::collections::BTreeMap;
use std::sync::Arc;

use assignd_guest_sdk::Assignment;

use super::{
    AssignorCall, CallInFlight, Coordinator, Output, input::assignor_input, learners::safe_target,
};
use crate::protocol::group::{
    AssignorFailure, AssignorFailures, Group, GroupConfig, Installed, Liveness, Millis, Record,
    Slot, SlotTarget, Task, assignor_retry_ms,
};

impl Coordinator {
    /// How long until the group's next target should be installed, if one
    /// is on its way: the batch's wait still to run; while the assignor
    /// computes it, as long again as it has taken so far (a call takes
    /// milliseconds, but one that runs to its time limit must not have
    /// every member beat at the handoff interval all along).
    pub(super) fn target_due_in_ms(&self, group_name: &str, now: Millis) -> Option<u64> {
        let group = self.group_at(group_name);
        if group.group_epoch == group.target_epoch {
            return None;
        }
        let liveness = self.liveness(group_name)?;
        if liveness.computing_epoch.is_some() {
            return Some(now.saturating_sub(liveness.last_call_ms.unwrap_or(now)));
        }
        let due = call_due_ms(&group.config, liveness)?;
        Some(due.saturating_sub(now))
    }

    /// Starts a target computation when the group needs one, none is in
    /// flight, and the current batch of changes has waited the expansion
    /// timeout (the first target of a group waits too, so that a fleet
    /// starting together lands in one target).
    pub(super) fn maybe_call_assignor(&mut self, group_name: &str, now: Millis, out: &mut Output) {
        let entry = self
            .groups
            .get_mut(group_name)
            .expect("a group the caller checked");
        let (group, liveness) = (&entry.group, &mut entry.liveness);
        if group.group_epoch == group.target_epoch || liveness.computing_epoch.is_some() {
            return;
        }
        let Some(due) = call_due_ms(&group.config, liveness) else {
            return;
        };
        if now < due {
            return;
        }
        liveness.pending_since_ms = None;
        liveness.urgent = false;
        liveness.catch_up_only = false;
        liveness.last_call_ms = Some(now);
        liveness.computing_epoch = Some(group.group_epoch);
        let reason = liveness.rebalances.call_started();
        let (input, slots, tasks) = assignor_input(group, liveness, now);
        entry.call = Some(CallInFlight {
            epoch: group.group_epoch,
            slots,
            tasks,
            assignor: group.config.assignor.clone(),
        });
        let assignor = group.config.assignor.clone();
        out.shadow_calls.extend(self.shadow_call_beside(
            group_name,
            &assignor,
            reason.label(),
            &input,
            now,
        ));
        let group = self.group_at(group_name);
        out.assignor_calls.push(AssignorCall {
            group: group_name.to_owned(),
            epoch: group.group_epoch,
            assignor: group.config.assignor.clone(),
            reason,
            limits: group.config.assignor_limits,
            fallback: group.config.fallback_assignor.clone(),
            input,
        });
    }

    /// The runtime's answer to an [`AssignorCall`]. An answer for an epoch
    /// the group has moved past is discarded (and a new call starts when
    /// due); a failed call keeps the last good target.
    pub fn assignment_computed(
        &mut self,
        group_name: &str,
        epoch: u64,
        result: Result<Assignment, impl Into<AssignorFailure>>,
        now: Millis,
    ) -> Output {
        self.answer(group_name, epoch, None, result.map_err(Into::into), now)
    }

    /// The runtime's answer to an [`AssignorCall`] whose assignor failed
    /// with `failure`, after it asked the binding's fallback: the failure
    /// shows on the group as any other, and the fallback's answer, if it
    /// has one, is installed as the bound assignor's would have been.
    pub fn fallback_computed(
        &mut self,
        group_name: &str,
        epoch: u64,
        failure: AssignorFailure,
        fallback: Result<Assignment, impl Into<AssignorFailure>>,
        now: Millis,
    ) -> Output {
        self.answer(
            group_name,
            epoch,
            Some(failure),
            fallback.map_err(Into::into),
            now,
        )
    }

    /// An answer (the bound assignor's, or its fallback's after
    /// `bound_failure`) to the group's call in flight: installed if it is
    /// for the group's epoch, else counted and a new call started when due.
    fn answer(
        &mut self,
        group_name: &str,
        epoch: u64,
        bound_failure: Option<AssignorFailure>,
        result: Result<Assignment, AssignorFailure>,
        now: Millis,
    ) -> Output {
        self.observe_time(now);
        self.deadlines.mark_group(group_name);
        let mut out = Output::default();
        let Some(entry) = self.groups.get_mut(group_name) else {
            return out;
        };
        let Some(call) = entry.call.take() else {
            return out;
        };
        let live = match (&bound_failure, &result) {
            (Some(failure), _) | (None, Err(failure)) => {
                Err(format!("{}: {}", failure.code, failure.message))
            }
            (None, Ok(assignment)) => Ok(assignment),
        };
        if call.assignor == entry.group.config.assignor {
            self.shadow_live_answered(group_name, epoch, live, now);
        }
        let entry = self.groups.get_mut(group_name).expect("checked above");
        let (group, liveness) = (&entry.group, &mut entry.liveness);
        liveness.computing_epoch = None;
        let answer = Answer {
            group_name,
            epoch,
            bound_failure,
            result,
            now,
        };
        if call.epoch != epoch || epoch != group.group_epoch {
            count_late_answer(group, liveness, &call, answer);
            self.maybe_call_assignor(group_name, now, &mut out);
            return out;
        }
        let Some(assignment) = count_answer(liveness, &group.config, answer) else {
            return out;
        };
        let target = safe_target(group, liveness, &call.slots, &call.tasks, &assignment);
        self.install_target(group_name, epoch, target, now, &mut out);
        out
    }

    /// Installs a target made safe, paces the group's next call for
    /// catch-ups by its size, and forgets the caught-up signals of tasks
    /// that are no longer learners where they were signalled.
    fn install_target(
        &mut self,
        group_name: &str,
        epoch: u64,
        target: BTreeMap<Slot, SlotTarget>,
        now: Millis,
        out: &mut Output,
    ) {
        let (moved, learners_started) = changes_between(&self.group_at(group_name).target, &target);
        self.emit(
            out,
            Record::TargetInstalled {
                group: group_name.to_owned(),
                epoch,
                target: Arc::new(target),
            },
        );
        // A caught-up signal belongs to one warm-up: once the task is no
        // longer a learner of that slot, a later warm-up must signal anew.
        let (group, liveness) = self.entry_mut(group_name);
        liveness.paced_until_ms = Some(now.saturating_add(pace_ms(group)));
        let installed = Installed {
            epoch,
            asked_ms: liveness.last_call_ms,
            moved,
            learners_started,
        };
        liveness.rebalances.installed(installed, now);
        liveness.caught_up_signalled.retain(|(slot, task)| {
            group
                .target
                .get(slot)
                .is_some_and(|t| t.learner.contains(task))
        });
        // Members learn their new target on their next heartbeat.
    }
}

/// An assignor call's answer as the runtime delivered it.
struct Answer<'a> {
    group_name: &'a str,
    epoch: u64,
    /// The bound assignor's failure, when `result` is its fallback's.
    bound_failure: Option<AssignorFailure>,
    result: Result<Assignment, AssignorFailure>,
    now: Millis,
}

/// Active tasks whose owner `new` changes from `old` (a task with no owner
/// before is placed, not moved), and the learner rows `new` adds.
fn changes_between(
    old: &BTreeMap<Slot, SlotTarget>,
    new: &BTreeMap<Slot, SlotTarget>,
) -> (u64, u64) {
    let owners: BTreeMap<&Task, &Slot> = old
        .iter()
        .flat_map(|(slot, t)| t.active.iter().map(move |task| (task, slot)))
        .collect();
    let moved = new
        .iter()
        .flat_map(|(slot, t)| t.active.iter().map(move |task| (task, slot)))
        .filter(|(task, slot)| owners.get(task).is_some_and(|owner| owner != slot))
        .count();
    let learners_started = new
        .iter()
        .flat_map(|(slot, t)| t.learner.iter().map(move |task| (slot, task)))
        .filter(|(slot, task)| !old.get(*slot).is_some_and(|t| t.learner.contains(*task)))
        .count();
    (moved as u64, learners_started as u64)
}

/// An answer too late to install: a failure of the assignor still bound is
/// the group's news and its backoff (a guest that fails slower than its
/// group changes would otherwise never show failing, and be asked again at
/// once, for ever). The group's batch stays open.
fn count_late_answer(group: &Group, liveness: &mut Liveness, call: &CallInFlight, answer: Answer) {
    let failure = match (&answer.bound_failure, &answer.result) {
        (Some(failure), _) | (None, Err(failure)) => Some(failure.clone()),
        (None, Ok(_)) => None,
    };
    if let Some(failure) = failure
        && call.assignor == group.config.assignor
    {
        let failures = record_failure(
            liveness,
            answer.group_name,
            answer.epoch,
            &group.config,
            failure,
            answer.now,
        );
        failures.served_by_fallback = answer.bound_failure.is_some() && answer.result.is_ok();
        // The backoff counts from this failure.
        liveness.pending_since_ms = Some(answer.now);
    }
    liveness.pending_since_ms.get_or_insert(answer.now);
}

/// Counts an answer for the group's epoch in its liveness: a success, a
/// fallback's answer for a failure, or a failure (the last good target
/// kept, the failure recorded for the group's view, and a retry with
/// backoff). Returns the assignment to install, if any.
fn count_answer(
    liveness: &mut Liveness,
    config: &GroupConfig,
    answer: Answer,
) -> Option<Assignment> {
    let (group_name, epoch, now) = (answer.group_name, answer.epoch, answer.now);
    match (answer.bound_failure, answer.result) {
        (None, Ok(assignment)) => {
            if let Some(failures) = &mut liveness.failures {
                failures.consecutive = 0;
                failures.served_by_fallback = false;
                failures.last_success_ms = Some(now);
            }
            Some(assignment)
        }
        (Some(failure), Ok(assignment)) => {
            let failures = record_failure(liveness, group_name, epoch, config, failure, now);
            failures.served_by_fallback = true;
            failures.fallback_answers += 1;
            failures.fallback_error = None;
            Some(assignment)
        }
        (bound_failure, Err(error)) => {
            let (failure, fallback_error) = match bound_failure {
                Some(failure) => (failure, Some(error)),
                None => (error, None),
            };
            let failures = record_failure(liveness, group_name, epoch, config, failure, now);
            failures.served_by_fallback = false;
            failures.fallback_error = fallback_error.map(|e| format!("{}: {}", e.code, e.message));
            liveness.pending_since_ms = Some(now);
            None
        }
    }
}

/// Counts one failure of a group's bound assignor in its transient
/// liveness, for the group's view and the retry backoff.
fn record_failure<'a>(
    liveness: &'a mut Liveness,
    group: &str,
    epoch: u64,
    config: &GroupConfig,
    failure: AssignorFailure,
    now: Millis,
) -> &'a mut AssignorFailures {
    let failures = liveness.failures.get_or_insert(AssignorFailures {
        module: String::new(),
        code: String::new(),
        message: String::new(),
        at_ms: now,
        consecutive: 0,
        total: 0,
        last_success_ms: None,
        fallback: None,
        served_by_fallback: false,
        fallback_answers: 0,
        fallback_error: None,
    });
    failures.module = config.assignor.clone();
    failures.code = failure.code;
    failures.message = failure.message;
    failures.at_ms = now;
    failures.consecutive += 1;
    failures.total += 1;
    failures.fallback = config.fallback_assignor.clone();
    tracing::warn!(
        group,
        epoch,
        module = failures.module,
        code = failures.code,
        message = failures.message,
        consecutive = failures.consecutive,
        fallback = failures.fallback,
        "assignor failed"
    );
    failures
}

/// Placements (active, learner and standby rows) of an installed target
/// per ms that a call for learners' catch-ups alone then waits. Each
/// install costs the host work under the shard's lock in proportion to
/// the rows (the answer made safe, the record written and applied, the
/// members' answers that follow), and a guest may ask for many moves that
/// warm up a few at a time (`max_learners`), each catch-up asking again:
/// paced, one group's installs take a bounded share of the host (a target
/// of 400,000 rows, 100,000 tasks with 3 standbys each, is followed by a
/// catch-up's call 20 s later at the soonest, as Kafka Streams' probing
/// rebalances follow warm-ups), a group of a few hundred rows is not
/// slowed, and a change of members or config is never paced.
pub const TARGET_ROWS_PER_PACE_MS: u64 = 20;

/// How long the group's next call waits after installing its target.
fn pace_ms(group: &Group) -> u64 {
    let rows: usize = group
        .target
        .values()
        .map(|t| t.active.len() + t.learner.len() + t.standby.len())
        .sum();
    rows as u64 / TARGET_ROWS_PER_PACE_MS
}

/// When the group's open batch of changes may go to the assignor: its
/// wait ([`batch_wait_ms`]) from its start, and a batch of catch-ups alone
/// not before the pace of the last install; `None` with no batch open.
pub(super) fn call_due_ms(config: &GroupConfig, liveness: &Liveness) -> Option<Millis> {
    let since = liveness.pending_since_ms?;
    let due = since.saturating_add(batch_wait_ms(config, liveness));
    let paced = liveness.paced_until_ms.filter(|_| liveness.catch_up_only);
    Some(due.max(paced.unwrap_or(0)))
}

/// How long a batch of changes waits before the assignor is asked: the
/// expansion timeout; nothing for an urgent batch (a learner caught up, a
/// drain began, a member departed); backoff while the assignor fails (not while its fallback
/// answers for it: the group is served).
pub(super) fn batch_wait_ms(config: &GroupConfig, liveness: &Liveness) -> u64 {
    match &liveness.failures {
        _ if liveness.urgent => 0,
        Some(f) if f.consecutive > 0 && !f.served_by_fallback => {
            assignor_retry_ms(config.expansion_timeout_ms, f.consecutive)
        }
        _ => config.expansion_timeout_ms,
    }
}
