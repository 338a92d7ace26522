//! The rollout routes: start a rollout (`POST /v1/rollouts`), list them,
//! read one, pause, resume and abort it. Each parses, calls the host's
//! [`Rollouts`] runner (an extension `assignd serve` adds) and maps; the
//! decisions are the rollout core's (`crate::rollout`), the work the
//! runner's (`crate::rollout_runner`). In a cluster the routing layer
//! sends these requests to the node serving shard 0, which coordinates
//! every rollout.

use std::sync::Arc;

use axum::extract::Extension;
use axum::http::StatusCode;
use axum::{Json, body::Bytes};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::error::{ApiError, ApiJson, ApiPath};
use super::wire::ErrorBody;
use crate::rollout::RolloutStatus;
use crate::rollout_runner::{RolloutList, RolloutRefusal, Rollouts, StartRequest};

/// The body of pause, resume and abort: why, for the rollout's events
/// and the log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReasonBody {
    /// At most 1024 bytes.
    pub reason: String,
}

type Runner = Option<Extension<Arc<Rollouts>>>;

/// The runner, or 503 on an app without one.
fn runner(runner: Runner) -> Result<Arc<Rollouts>, ApiError> {
    runner
        .map(|Extension(runner)| runner)
        .ok_or(ApiError::Rollout(RolloutRefusal::NotCoordinating))
}

/// Starts a rollout: the module is shadowed on every selected group, then
/// bound to a growing share of them, step by step, each group's health
/// judged by the abort rules against its own baseline; any rule that
/// fires rolls every group touched back (docs/rollout.md).
#[utoipa::path(
    post,
    path = "/v1/rollouts",
    tag = "rollouts",
    request_body = StartRequest,
    responses(
        (status = 201, description = "Started: the rollout's status (phase, step k of n, groups by state, unhealthy groups, last events, next decision)", body = Object),
        (status = 400, description = "`invalid_json`, `invalid_request` (a spec that does not parse: the field and why)", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`", body = ErrorBody),
        (status = 404, description = "`unknown_module`", body = ErrorBody),
        (status = 409, description = "`group_in_rollout` (a selected group is in a rollout that has not ended), `empty_selection` (no group matches), `rollout_exists`", body = ErrorBody),
        (status = 503, description = "`shard_unavailable` (shard 0, which coordinates rollouts, is moving between nodes), `storage_unavailable`", body = ErrorBody),
    )
)]
pub async fn start_rollout(
    runner_ext: Runner,
    ApiJson(request): ApiJson<StartRequest>,
) -> Result<(StatusCode, Json<RolloutStatus>), ApiError> {
    let status = runner(runner_ext)?.start(request).await?;
    Ok((StatusCode::CREATED, Json(status)))
}

/// Every rollout kept: those that have not ended and the last finished
/// ones, with their phase and counts.
#[utoipa::path(
    get,
    path = "/v1/rollouts",
    tag = "rollouts",
    responses(
        (status = 200, description = "Every rollout, by id", body = RolloutList),
        (status = 503, description = "`shard_unavailable`", body = ErrorBody),
    )
)]
pub async fn list_rollouts(runner_ext: Runner) -> Result<Json<RolloutList>, ApiError> {
    Ok(Json(runner(runner_ext)?.list().await?))
}

/// A rollout's status: phase, step k of n, groups by state, unhealthy
/// groups with the rule and the numbers, groups that could not be put
/// back, the last events, when it next decides.
#[utoipa::path(
    get,
    path = "/v1/rollouts/{id}",
    tag = "rollouts",
    params(("id" = String, Path, description = "The rollout's id")),
    responses(
        (status = 200, description = "The rollout's status", body = Object),
        (status = 400, description = "`invalid_path`", body = ErrorBody),
        (status = 404, description = "`unknown_rollout`", body = ErrorBody),
        (status = 503, description = "`shard_unavailable`", body = ErrorBody),
    )
)]
pub async fn get_rollout(
    runner_ext: Runner,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<RolloutStatus>, ApiError> {
    Ok(Json(runner(runner_ext)?.status(&id).await?))
}

/// Holds a rollout where it is: no new step begins until it is resumed;
/// binds already begun land, and health is still judged.
#[utoipa::path(
    post,
    path = "/v1/rollouts/{id}/pause",
    tag = "rollouts",
    params(("id" = String, Path, description = "The rollout's id")),
    request_body = ReasonBody,
    responses(
        (status = 200, description = "Paused: the rollout's status", body = Object),
        (status = 400, description = "`invalid_json`, `invalid_path`, `invalid_request` (a reason past 1024 bytes)", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`", body = ErrorBody),
        (status = 404, description = "`unknown_rollout`", body = ErrorBody),
        (status = 409, description = "`rollout_phase`: paused already, or no longer going forward", body = ErrorBody),
        (status = 503, description = "`shard_unavailable`, `storage_unavailable`", body = ErrorBody),
    )
)]
pub async fn pause_rollout(
    runner_ext: Runner,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ReasonBody>,
) -> Result<Json<RolloutStatus>, ApiError> {
    Ok(Json(runner(runner_ext)?.pause(&id, &body.reason).await?))
}

/// Lets a paused rollout go on.
#[utoipa::path(
    post,
    path = "/v1/rollouts/{id}/resume",
    tag = "rollouts",
    params(("id" = String, Path, description = "The rollout's id")),
    request_body = ReasonBody,
    responses(
        (status = 200, description = "Resumed: the rollout's status", body = Object),
        (status = 400, description = "`invalid_json`, `invalid_path`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 404, description = "`unknown_rollout`", body = ErrorBody),
        (status = 409, description = "`rollout_phase`: not paused, or no longer going forward", body = ErrorBody),
        (status = 503, description = "`shard_unavailable`, `storage_unavailable`", body = ErrorBody),
    )
)]
pub async fn resume_rollout(
    runner_ext: Runner,
    ApiPath(id): ApiPath<String>,
    body: Bytes,
) -> Result<Json<RolloutStatus>, ApiError> {
    let reason = optional_reason(&body)?;
    tracing::info!(rollout = %id, reason, "rollout: resume asked");
    Ok(Json(runner(runner_ext)?.resume(&id).await?))
}

/// Rolls every group the rollout touched back to its previous binding
/// and shadow, now.
#[utoipa::path(
    post,
    path = "/v1/rollouts/{id}/abort",
    tag = "rollouts",
    params(("id" = String, Path, description = "The rollout's id")),
    request_body = ReasonBody,
    responses(
        (status = 200, description = "Rolling back: the rollout's status", body = Object),
        (status = 400, description = "`invalid_json`, `invalid_path`, `invalid_request` (a reason past 1024 bytes)", body = ErrorBody),
        (status = 413, description = "`payload_too_large`", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`", body = ErrorBody),
        (status = 404, description = "`unknown_rollout`", body = ErrorBody),
        (status = 409, description = "`rollout_phase`: the rollout has ended or is rolling back", body = ErrorBody),
        (status = 503, description = "`shard_unavailable`, `storage_unavailable`", body = ErrorBody),
    )
)]
pub async fn abort_rollout(
    runner_ext: Runner,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ReasonBody>,
) -> Result<Json<RolloutStatus>, ApiError> {
    Ok(Json(runner(runner_ext)?.abort(&id, &body.reason).await?))
}

/// A resume's reason: its body may be empty.
fn optional_reason(body: &Bytes) -> Result<String, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(String::new());
    }
    serde_json::from_slice::<ReasonBody>(body)
        .map(|b| b.reason)
        .map_err(|e| {
            ApiError::InvalidJson(format!("Failed to parse the request body as JSON: {e}"))
        })
}
