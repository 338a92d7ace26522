//! `POST /v1/groups/{group}/assignor/preview`: what a candidate assignor
//! would do to a group, with nothing applied.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use assignd_guest_sdk::Assignment;
use axum::Json;
use axum::extract::State;

use super::error::{ApiError, ApiJson, ApiPath};
use super::wire::{
    Balance, ErrorBody, PreviewHeldBack, PreviewLearner, PreviewMemberAssignment, PreviewMove,
    PreviewRequest, PreviewView, TargetView,
};
use crate::protocol::group::{Slot, SlotTarget, Task};
use crate::runtime::{Preview, Runtime};

/// Previews a candidate assignor and params on the group's current input.
///
/// Runs `module` (a built-in name, an uploaded module's id, or
/// `name@version`) with `params` (the group's current params if absent) on
/// the input `GET .../assignor-input` shows, off the request path and under
/// the host's limits, and answers its raw assignment and what the host
/// would install: the target after the learner safety, the tasks that
/// would move, the learners that would be created, the tasks held back on
/// their owner for warm-up, and the balance before and after. Nothing is
/// applied or recorded.
#[utoipa::path(
    post,
    path = "/v1/groups/{group}/assignor/preview",
    tag = "groups",
    params(("group" = String, Path, description = "The group's name")),
    request_body = PreviewRequest,
    responses(
        (status = 200, description = "What the candidate would do; nothing applied", body = PreviewView),
        (status = 400, description = "`invalid_json`, `invalid_path`, `invalid_request` (the group changed while the preview ran), `unknown_assignor`", body = ErrorBody),
        (status = 404, description = "`unknown_group`", body = ErrorBody),
        (status = 409, description = "`empty_group`: no member to assign to", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`", body = ErrorBody),
        (status = 422, description = "`assignor_failed`: the candidate trapped, passed a limit or answered an invalid assignment", body = ErrorBody),
        (status = 503, description = "`storage_failed`", body = ErrorBody),
    )
)]
pub async fn preview_assignor(
    State(runtime): State<Arc<Runtime>>,
    ApiPath(group): ApiPath<String>,
    ApiJson(request): ApiJson<PreviewRequest>,
) -> Result<Json<PreviewView>, ApiError> {
    tracing::Span::current().record("group", group.as_str());
    let preview = runtime
        .preview(&group, &request.module, request.params)
        .await?;
    Ok(Json(preview_view(request.module, preview)))
}

fn tasks(set: &BTreeSet<Task>) -> Vec<Task> {
    set.iter().cloned().collect()
}

fn owners(target: &BTreeMap<Slot, SlotTarget>) -> BTreeMap<&Task, &Slot> {
    target
        .iter()
        .flat_map(|(slot, t)| t.active.iter().map(move |task| (task, slot)))
        .collect()
}

/// Active tasks per member of `members` (every member of the group).
fn balance<'a>(
    target: &BTreeMap<Slot, SlotTarget>,
    members: impl Iterator<Item = &'a Slot>,
) -> Balance {
    let active: BTreeMap<String, usize> = members
        .map(|slot| {
            (
                slot.to_string(),
                target.get(slot).map_or(0, |t| t.active.len()),
            )
        })
        .collect();
    let min = active.values().copied().min().unwrap_or(0);
    let max = active.values().copied().max().unwrap_or(0);
    Balance {
        active,
        min,
        max,
        spread: max - min,
    }
}

/// The wire view of a preview: the raw answer by member, the target the
/// host would install, and what changes between the current target and it.
pub fn preview_view(module: String, preview: Preview) -> PreviewView {
    let Preview {
        prepared,
        assignment,
        before,
        after,
    } = preview;
    let (raw, wanted) = raw_assignment(&prepared.slots, &prepared.tasks, &assignment);
    let from = owners(&before);
    let to = owners(&after);
    PreviewView {
        module,
        params: prepared.input.params.clone(),
        assignment: raw,
        target: after
            .iter()
            .map(|(slot, t)| (slot.to_string(), target_view(t)))
            .collect(),
        moves: moves(&prepared.tasks, &from, &to),
        learners_created: learners_created(&before, &after),
        held_back: held_back(&wanted, &from, &to),
        balance_before: balance(&before, after.keys()),
        balance_after: balance(&after, after.keys()),
    }
}

/// The assignor's answer by member (every slot listed, in input order), and
/// the active owner it wanted for each task it placed.
fn raw_assignment<'a>(
    slots: &'a [Slot],
    all_tasks: &'a [Task],
    assignment: &Assignment,
) -> (Vec<PreviewMemberAssignment>, BTreeMap<&'a Task, &'a Slot>) {
    let mut raw: Vec<PreviewMemberAssignment> = slots
        .iter()
        .map(|slot| PreviewMemberAssignment {
            member: slot.to_string(),
            ..Default::default()
        })
        .collect();
    let mut wanted: BTreeMap<&Task, &Slot> = BTreeMap::new();
    for (task, &owner) in all_tasks.iter().zip(&assignment.active_owner) {
        if let Some(row) = raw.get_mut(owner as usize) {
            row.active.push(task.clone());
            wanted.insert(task, &slots[owner as usize]);
        }
    }
    for (task, member) in assignment.learners.iter() {
        raw[member as usize]
            .learner
            .push(all_tasks[task as usize].clone());
    }
    for (task, member) in assignment.standbys.iter() {
        raw[member as usize]
            .standby
            .push(all_tasks[task as usize].clone());
    }
    (raw, wanted)
}

fn target_view(target: &SlotTarget) -> TargetView {
    TargetView {
        active: tasks(&target.active),
        learner: tasks(&target.learner),
        standby: tasks(&target.standby),
    }
}

/// Every task whose active owner differs between the two targets.
fn moves(
    all_tasks: &[Task],
    from: &BTreeMap<&Task, &Slot>,
    to: &BTreeMap<&Task, &Slot>,
) -> Vec<PreviewMove> {
    all_tasks
        .iter()
        .filter_map(|task| {
            let (f, t) = (from.get(task), to.get(task));
            (f != t).then(|| PreviewMove {
                task: task.clone(),
                from: f.map(|s| s.to_string()),
                to: t.map(|s| s.to_string()),
            })
        })
        .collect()
}

/// The learners of `after` that `before` does not have on the same slot.
fn learners_created(
    before: &BTreeMap<Slot, SlotTarget>,
    after: &BTreeMap<Slot, SlotTarget>,
) -> Vec<PreviewLearner> {
    after
        .iter()
        .flat_map(|(slot, t)| {
            let old = before.get(slot);
            t.learner
                .iter()
                .filter(move |task| !old.is_some_and(|o| o.learner.contains(*task)))
                .map(move |task| PreviewLearner {
                    task: task.clone(),
                    member: slot.to_string(),
                })
        })
        .collect()
}

/// The tasks the assignor wanted elsewhere that stay on their current
/// owner (the learner safety holds them back for warm-up).
fn held_back(
    wanted: &BTreeMap<&Task, &Slot>,
    from: &BTreeMap<&Task, &Slot>,
    to: &BTreeMap<&Task, &Slot>,
) -> Vec<PreviewHeldBack> {
    wanted
        .iter()
        .filter_map(|(task, want)| {
            let owner = *to.get(task)?;
            (owner != *want && from.get(task) == Some(&owner)).then(|| PreviewHeldBack {
                task: (*task).clone(),
                owner: owner.to_string(),
                wanted: want.to_string(),
            })
        })
        .collect()
}
