//! The shadow routes of a group: bind a shadow assignor beside the live
//! one (`PUT /v1/groups/{group}/shadow`), end it (`DELETE`), read it and
//! its comparisons (`GET`). Each parses, calls the runtime and maps; the
//! wire types are in `shadow_views.rs`.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;

use super::error::{ApiError, ApiJson, ApiPath};
use super::shadow_views::{ShadowRequest, ShadowView, shadow_view_or_none};
use super::wire::ErrorBody;
use crate::protocol::core::ProtocolError;
use crate::runtime::Runtime;

/// Reads the shadow of `group` (404 if the group does not exist).
async fn read_shadow(runtime: &Arc<Runtime>, group: &str) -> Result<ShadowView, ApiError> {
    runtime
        .read(group, |core, _| {
            let bound = core.group(group)?;
            Some(shadow_view_or_none(
                bound.shadow.as_ref(),
                core.liveness(group),
            ))
        })
        .await?
        .ok_or_else(|| ProtocolError::UnknownGroup(group.to_owned()).into())
}

/// Binds a shadow assignor beside the group's live one.
///
/// Every time the live assignor is asked for a target, the shadow is asked
/// the same input (with its own params), off the group's path and below
/// the live call's priority; its answer is validated and compared with
/// the live one, never applied. The assignor and its params are checked as
/// `PUT .../assignor` checks them. Binding another shadow replaces it (and
/// starts its comparisons over); the same one again changes nothing.
/// Binding the shadow's assignor live (`PUT .../assignor`) ends the
/// shadow.
#[utoipa::path(
    put,
    path = "/v1/groups/{group}/shadow",
    tag = "groups",
    params(("group" = String, Path, description = "The group's name")),
    request_body = ShadowRequest,
    responses(
        (status = 200, description = "Bound (or already bound); the group's shadow", body = ShadowView),
        (status = 400, description = "`invalid_json`, `invalid_path`, `invalid_request` (params or limits past their bounds), `params_rejected` (the assignor refuses its params), `unknown_assignor`", body = ErrorBody),
        (status = 404, description = "`unknown_group`", body = ErrorBody),
        (status = 409, description = "`format_level_too_low` (the cluster still writes a record format without shadows)", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`", body = ErrorBody),
        (status = 503, description = "`storage_failed`", body = ErrorBody),
    )
)]
pub async fn bind_shadow(
    State(runtime): State<Arc<Runtime>>,
    ApiPath(group): ApiPath<String>,
    ApiJson(request): ApiJson<ShadowRequest>,
) -> Result<Json<ShadowView>, ApiError> {
    tracing::Span::current().record("group", group.as_str());
    runtime.bind_shadow(&group, Some(request.spec())).await?;
    Ok(Json(read_shadow(&runtime, &group).await?))
}

/// Ends the group's shadow assignor (nothing to end changes nothing).
#[utoipa::path(
    delete,
    path = "/v1/groups/{group}/shadow",
    tag = "groups",
    params(("group" = String, Path, description = "The group's name")),
    responses(
        (status = 200, description = "Ended (or there was none); the group's shadow, `binding` null", body = ShadowView),
        (status = 400, description = "`invalid_path`", body = ErrorBody),
        (status = 404, description = "`unknown_group`", body = ErrorBody),
        (status = 503, description = "`storage_failed`", body = ErrorBody),
    )
)]
pub async fn end_shadow(
    State(runtime): State<Arc<Runtime>>,
    ApiPath(group): ApiPath<String>,
) -> Result<Json<ShadowView>, ApiError> {
    tracing::Span::current().record("group", group.as_str());
    runtime.bind_shadow(&group, None).await?;
    Ok(Json(read_shadow(&runtime, &group).await?))
}

/// The group's shadow assignor, the totals of its comparisons and the last
/// comparisons (soft state: a restarted host starts them over).
#[utoipa::path(
    get,
    path = "/v1/groups/{group}/shadow",
    tag = "groups",
    params(("group" = String, Path, description = "The group's name")),
    responses(
        (status = 200, description = "The shadow (`binding` null when the group has none)", body = ShadowView),
        (status = 400, description = "`invalid_path`", body = ErrorBody),
        (status = 404, description = "`unknown_group`", body = ErrorBody),
        (status = 503, description = "`storage_failed`", body = ErrorBody),
    )
)]
pub async fn get_shadow(
    State(runtime): State<Arc<Runtime>>,
    ApiPath(group): ApiPath<String>,
) -> Result<Json<ShadowView>, ApiError> {
    tracing::Span::current().record("group", group.as_str());
    Ok(Json(read_shadow(&runtime, &group).await?))
}
