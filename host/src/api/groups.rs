//! The admin routes: configure groups, look at them, capture a group's
//! assignor input, drain a member.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;

use super::error::{ApiError, ApiJson, ApiPath};
use super::views::{LargeJson, group_summary, group_view};
use super::wire::{BindRequest, ErrorBody, GroupConfigDoc, GroupList, GroupView};
use crate::protocol::core::ProtocolError;
use crate::protocol::group::BindingSpec;
use crate::runtime::Runtime;

/// Reads the view of `group` (404 if it does not exist).
async fn view(runtime: &Arc<Runtime>, group: &str) -> Result<GroupView, ApiError> {
    runtime
        .read(group, |core, now| group_view(core, group, now))
        .await?
        .ok_or_else(|| ProtocolError::UnknownGroup(group.to_owned()).into())
}

/// Creates a group or replaces its config.
///
/// Only `topics` is required; every other field has a default. A change to
/// the topics, the assignor, its params or the learner settings asks for a
/// new target. The assignor is a built-in name, an uploaded module's id, or
/// `name@version` of an uploaded module. `member_token` (write-only) sets
/// the token the group's heartbeats must carry, `null` removes it, and a
/// body without it keeps the group's.
#[utoipa::path(
    put,
    path = "/v1/groups/{group}",
    tag = "groups",
    params(("group" = String, Path, description = "The group's name (1 to 255 bytes)")),
    request_body = GroupConfigDoc,
    responses(
        (status = 201, description = "The group was created", body = GroupView),
        (status = 200, description = "The config was replaced (or was already this)", body = GroupView),
        (status = 400, description = "`invalid_json`, `invalid_path`, `invalid_request` (a limit or timeout out of range, a name holding a control or format character), `unknown_assignor`, `member_token_required` (the host requires a member token: `serve --require-member-token`)", body = ErrorBody),
        (status = 409, description = "`groups_max_reached`: the host serves `serve --groups-max` groups already; a new group is refused, an existing one is updated", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`", body = ErrorBody),
        (status = 503, description = "`storage_failed`", body = ErrorBody),
    )
)]
pub async fn put_group(
    State(runtime): State<Arc<Runtime>>,
    ApiPath(group): ApiPath<String>,
    ApiJson(body): ApiJson<serde_json::Map<String, serde_json::Value>>,
) -> Result<(StatusCode, LargeJson<GroupView>), ApiError> {
    tracing::Span::current().record("group", group.as_str());
    let (config, tokens) = super::auth::split_config(body)?;
    let created = runtime.configure(&group, config, tokens).await?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, LargeJson(view(&runtime, &group).await?)))
}

/// Every group, one summary each.
#[utoipa::path(
    get,
    path = "/v1/groups",
    tag = "groups",
    responses(
        (status = 200, description = "Every group", body = GroupList),
        (status = 503, description = "`storage_failed`", body = ErrorBody),
    )
)]
pub async fn list_groups(State(runtime): State<Arc<Runtime>>) -> Result<Json<GroupList>, ApiError> {
    let mut groups: Vec<_> = runtime
        .read_every_shard(|core, _| core.groups().map(group_summary).collect::<Vec<_>>())
        .await?
        .into_iter()
        .flatten()
        .collect();
    // By name, whichever shard holds each.
    groups.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Json(GroupList { groups }))
}

/// A group's config, epochs, state, members (with their holdings, targets
/// and lags) and learners.
#[utoipa::path(
    get,
    path = "/v1/groups/{group}",
    tag = "groups",
    params(("group" = String, Path, description = "The group's name")),
    responses(
        (status = 200, description = "The group", body = GroupView),
        (status = 400, description = "`invalid_path`: a path parameter that is not UTF-8", body = ErrorBody),
        (status = 404, description = "`unknown_group`", body = ErrorBody),
        (status = 503, description = "`storage_failed`", body = ErrorBody),
    )
)]
pub async fn get_group(
    State(runtime): State<Arc<Runtime>>,
    ApiPath(group): ApiPath<String>,
) -> Result<LargeJson<GroupView>, ApiError> {
    tracing::Span::current().record("group", group.as_str());
    Ok(LargeJson(view(&runtime, &group).await?))
}

/// The group's input for its assignor as the next call would see it, in
/// the GroupInput JSON of docs/design.md: feed it to `assignd run --input` to
/// replay a live group's situation offline.
#[utoipa::path(
    get,
    path = "/v1/groups/{group}/assignor-input",
    tag = "groups",
    params(("group" = String, Path, description = "The group's name")),
    responses(
        (status = 200, description = "The GroupInput document", body = Object),
        (status = 400, description = "`invalid_path`: a path parameter that is not UTF-8", body = ErrorBody),
        (status = 404, description = "`unknown_group`", body = ErrorBody),
        (status = 503, description = "`storage_failed`", body = ErrorBody),
    )
)]
pub async fn assignor_input(
    State(runtime): State<Arc<Runtime>>,
    ApiPath(group): ApiPath<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    tracing::Span::current().record("group", group.as_str());
    let input = runtime
        .read(&group, |core, _| {
            core.assignor_input(&group)
                .map(|input| assignd_guest_sdk::json::input_to_json(&input))
        })
        .await?
        .ok_or_else(|| ProtocolError::UnknownGroup(group.clone()))?;
    Ok(Json(input))
}

/// Asks a member to drain: the assignor stops seeing it, its tasks move as
/// learners elsewhere catch up, and once it holds nothing its heartbeat
/// answers `drained`. After the group's scale-down timeout the rest moves
/// anyway.
#[utoipa::path(
    post,
    path = "/v1/groups/{group}/members/{member}/drain",
    tag = "groups",
    params(
        ("group" = String, Path, description = "The group's name"),
        ("member" = String, Path, description = "A member id, or a static member's name"),
    ),
    responses(
        (status = 202, description = "The drain started", body = GroupView),
        (status = 200, description = "The member was already draining", body = GroupView),
        (status = 400, description = "`invalid_path`: a path parameter that is not UTF-8", body = ErrorBody),
        (status = 404, description = "`unknown_group`, `unknown_member`", body = ErrorBody),
        (status = 503, description = "`storage_failed`", body = ErrorBody),
    )
)]
pub async fn drain_member(
    State(runtime): State<Arc<Runtime>>,
    ApiPath((group, member)): ApiPath<(String, String)>,
) -> Result<(StatusCode, LargeJson<GroupView>), ApiError> {
    let span = tracing::Span::current();
    span.record("group", group.as_str());
    span.record("member", member.as_str());
    let started = runtime.drain(&group, &member).await?;
    let status = if started {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((status, LargeJson(view(&runtime, &group).await?)))
}

/// Binds the group to an assignor and params: a hot swap.
///
/// `module` is a built-in name, an uploaded module's id, or `name@version`;
/// `params` is optional (none). The group epoch is bumped and the new
/// target is computed at once (no expansion wait), then reached
/// cooperatively: tasks that do not move are not revoked, and members need
/// no restart. The binding is appended to the group's history (the last
/// 32). Binding what is already bound changes nothing (200 either way).
#[utoipa::path(
    put,
    path = "/v1/groups/{group}/assignor",
    tag = "groups",
    params(("group" = String, Path, description = "The group's name")),
    request_body = BindRequest,
    responses(
        (status = 200, description = "Bound (or already bound); the group view with its bindings", body = GroupView),
        (status = 400, description = "`invalid_json`, `invalid_path`, `invalid_request` (params past their limits), `unknown_assignor`", body = ErrorBody),
        (status = 404, description = "`unknown_group`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`", body = ErrorBody),
        (status = 503, description = "`storage_failed`", body = ErrorBody),
    )
)]
pub async fn bind_assignor(
    State(runtime): State<Arc<Runtime>>,
    ApiPath(group): ApiPath<String>,
    ApiJson(request): ApiJson<BindRequest>,
) -> Result<LargeJson<GroupView>, ApiError> {
    tracing::Span::current().record("group", group.as_str());
    let spec = BindingSpec {
        assignor: request.module,
        params: request.params,
        limits: request.limits,
        fallback: request.fallback,
    };
    runtime.bind(&group, spec).await?;
    Ok(LargeJson(view(&runtime, &group).await?))
}

/// Binds the group back to the binding before its current one.
///
/// The rollback is itself a new binding (its `rollback_to` names the one it
/// returned to), so a second rollback returns to where the first started,
/// like `cd -`. Hot, as a bind.
#[utoipa::path(
    post,
    path = "/v1/groups/{group}/assignor/rollback",
    tag = "groups",
    params(("group" = String, Path, description = "The group's name")),
    responses(
        (status = 200, description = "Rolled back; the group view with its bindings", body = GroupView),
        (status = 400, description = "`unknown_assignor` (the previous module was deleted since), `invalid_path`", body = ErrorBody),
        (status = 404, description = "`unknown_group`", body = ErrorBody),
        (status = 409, description = "`no_previous_binding`", body = ErrorBody),
        (status = 503, description = "`storage_failed`", body = ErrorBody),
    )
)]
pub async fn rollback_assignor(
    State(runtime): State<Arc<Runtime>>,
    ApiPath(group): ApiPath<String>,
) -> Result<LargeJson<GroupView>, ApiError> {
    tracing::Span::current().record("group", group.as_str());
    runtime.rollback(&group).await?;
    Ok(LargeJson(view(&runtime, &group).await?))
}
