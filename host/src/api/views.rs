//! Read-only renderings of the core's state as wire types. They run under
//! the runtime's lock, so they only copy.

use std::collections::BTreeMap;

use crate::protocol::core::{Coordinator, load_view};
use crate::protocol::group::{
    AssignorFailures, Binding, Group, GroupConfig, LoadClock, Member, Phase, Slot, Task,
};
use crate::protocol::reconcile::MemberState;

use super::load_views::{group_load_view, member_load_view};
use super::shadow_views::{rebalance_views, shadow_view};

use super::wire::{
    AssignorFailuresView, BindingView, GroupState, GroupSummary, GroupView, LagRow,
    LastRebalanceView, LearnerView, LoadTriggerView, MemberView, ReconcileState, TargetView,
};

/// The group's state on the wire: its [`Group::phase`] (the metrics count
/// groups by the same rule).
pub fn group_state(group: &Group) -> GroupState {
    match group.phase() {
        Phase::Stable => GroupState::Stable,
        Phase::Assigning => GroupState::Assigning,
        Phase::Reconciling => GroupState::Reconciling,
    }
}

pub fn group_summary(group: &Group) -> GroupSummary {
    GroupSummary {
        name: group.name.clone(),
        group_epoch: group.group_epoch,
        target_epoch: group.target_epoch,
        state: group_state(group),
        members: group.members.len(),
        assignor: group.config.assignor.clone(),
    }
}

fn tasks<'a>(tasks: impl IntoIterator<Item = &'a Task>) -> Vec<Task> {
    tasks.into_iter().cloned().collect()
}

/// A slot's last reported lags, per task.
type SlotLags = BTreeMap<Task, u64>;

/// The full view of group `name` at `now`, if it exists.
pub fn group_view(
    core: &Coordinator,
    name: &str,
    now: crate::protocol::group::Millis,
) -> Option<GroupView> {
    let group = core.group(name)?;
    let liveness = core.liveness(name);
    let lags_of = |slot: &Slot| liveness.and_then(|l| l.lags.get(slot));
    let loads = liveness.and_then(|l| load_view(group, l, now));
    let mut members: Vec<MemberView> = group
        .members
        .iter()
        .map(|(slot, member)| member_view(group, slot, member, lags_of(slot)))
        .collect();
    for view in &mut members {
        let slot = Slot::from(view.slot.as_str());
        let lease_end = liveness.and_then(|l| l.lease_end_ms.get(&slot));
        view.lease_left_ms = lease_end.map(|end| end.saturating_sub(now));
        let seen = liveness.and_then(|l| l.last_seen_ms.get(&slot));
        view.last_seen_ms_ago = seen.map(|seen| now.saturating_sub(*seen));
    }
    // Both are in slot order.
    for (view, load) in members
        .iter_mut()
        .zip(loads.iter().flat_map(|v| &v.members))
    {
        view.load = Some(member_load_view(load));
    }
    Some(GroupView {
        name: group.name.clone(),
        config: GroupConfig {
            member_token_sha256: None,
            reader_token_sha256: None,
            ..group.config.clone()
        },
        member_token: group.config.member_token_sha256.is_some(),
        reader_token: group.config.reader_token_sha256.is_some(),
        group_epoch: group.group_epoch,
        target_epoch: group.target_epoch,
        state: group_state(group),
        learner_count: group.learner_count(),
        members,
        loads: loads.as_ref().map(group_load_view),
        learners: learner_views(group, lags_of),
        bindings: group.bindings.iter().map(binding_view).collect(),
        assignor_failures: liveness
            .and_then(|l| l.failures.as_ref())
            .map(failures_view),
        last_rebalance: liveness
            .and_then(|l| l.rebalances.last)
            .map(|last| LastRebalanceView {
                epoch: last.epoch,
                reason: last.reason.label().to_owned(),
                at_ms: last.at_ms,
            }),
        load_trigger: liveness
            .filter(|_| group.config.load_unit.is_some())
            .map(|l| {
                let balances = core.assignor_balances_load(&group.config.assignor);
                load_trigger_view(&group.config, &l.rebalances.load, balances)
            }),
        shadow: shadow_view(group.shadow.as_ref(), liveness),
        rebalances: rebalance_views(liveness),
    })
}

/// One member: what it declared, what it holds, its target and its lags.
fn member_view(group: &Group, slot: &Slot, member: &Member, lags: Option<&SlotLags>) -> MemberView {
    let held = group.holdings.member(slot).cloned().unwrap_or_default();
    let target = group.target_of(slot);
    MemberView {
        slot: slot.to_string(),
        member_id: member.member_id.clone(),
        name: member.name.clone(),
        topics: member.topics.iter().cloned().collect(),
        rack: member.rack.clone(),
        capacity: member.capacity,
        away: member.away,
        draining: member.draining,
        endpoint: member.endpoint.clone(),
        metadata: member.metadata.clone(),
        member_epoch: held.epoch,
        reconcile_state: match held.state {
            MemberState::Stable => ReconcileState::Stable,
            MemberState::UnrevokedTasks => ReconcileState::UnrevokedTasks,
            MemberState::UnreleasedTasks => ReconcileState::UnreleasedTasks,
        },
        active: tasks(&held.active),
        revoking: tasks(&held.revoking),
        target: TargetView {
            active: tasks(&target.active),
            learner: tasks(&target.learner),
            standby: tasks(&target.standby),
        },
        lags: lags
            .into_iter()
            .flatten()
            .map(|(task, &lag)| LagRow(task.topic.clone(), task.partition, lag))
            .collect(),
        load: None,
        lease_left_ms: None,
        last_seen_ms_ago: None,
    }
}

/// Every learner of the group's target, with the lag its member last
/// reported for the task.
fn learner_views<'a>(
    group: &'a Group,
    lags_of: impl Fn(&Slot) -> Option<&'a SlotLags>,
) -> Vec<LearnerView> {
    group
        .target
        .iter()
        .flat_map(|(slot, target)| target.learner.iter().map(move |task| (slot, task)))
        .map(|(slot, task)| LearnerView {
            task: task.clone(),
            slot: slot.to_string(),
            member_id: group
                .members
                .get(slot)
                .map(|m| m.member_id.clone())
                .unwrap_or_default(),
            lag: lags_of(slot).and_then(|lags| lags.get(task)).copied(),
        })
        .collect()
}

fn binding_view(binding: &Binding) -> BindingView {
    BindingView {
        seq: binding.seq,
        module: binding.assignor.clone(),
        params: binding.params.clone(),
        limits: binding.limits,
        fallback: binding.fallback.clone(),
        epoch: binding.epoch,
        at_ms: binding.at_ms,
        rollback_to: binding.rollback_to,
    }
}

fn load_trigger_view(
    config: &GroupConfig,
    clock: &LoadClock,
    assignor_balances_load: Option<bool>,
) -> LoadTriggerView {
    LoadTriggerView {
        outside_band_since_ms: clock.outside_since_ms,
        last_load_rebalance_ms: clock.last_load_ms,
        cooldown_until_ms: clock
            .last_load_ms
            .or(clock.took_ms)
            .map(|from| from.saturating_add(config.load_cooldown_ms)),
        assignor_balances_load,
    }
}

fn failures_view(failures: &AssignorFailures) -> AssignorFailuresView {
    AssignorFailuresView {
        module: failures.module.clone(),
        code: failures.code.clone(),
        message: failures.message.clone(),
        at_ms: failures.at_ms,
        consecutive: failures.consecutive,
        total: failures.total,
        last_success_ms: failures.last_success_ms,
        fallback: failures.fallback.clone(),
        served_by_fallback: failures.served_by_fallback,
        fallback_answers: failures.fallback_answers,
        fallback_error: failures.fallback_error.clone(),
    }
}

/// A JSON body rendered off the runtime's workers. A group's view is
/// linear in its tasks and rows (100,000 tasks with three standbys each
/// render tens of MB), and axum's `Json` would render it on the worker
/// that also runs other groups' heartbeats.
pub struct LargeJson<T>(pub T);

impl<T: serde::Serialize> axum::response::IntoResponse for LargeJson<T> {
    fn into_response(self) -> axum::response::Response {
        let body = crate::runtime::off_the_workers(|| serde_json::to_vec(&self.0))
            .expect("a wire type always renders as JSON");
        (
            [(axum::http::header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response()
    }
}
