//! The member route: one heartbeat request joins, heartbeats, reports
//! owned tasks and lags, drains or leaves.

use std::sync::Arc;

use axum::Json;
use axum::extract::State;

use super::auth::MemberCredential;
use super::error::{ApiError, ApiPath, StructJson};
use super::wire::{ErrorBody, HeartbeatRequest, HeartbeatResponseBody};
use super::wire::{heartbeat_request, heartbeat_response};
use crate::runtime::Runtime;

/// A member's heartbeat.
///
/// Member epoch 0 joins (`topics` required), with an empty member id (the
/// host issues one) or with an id the member chose: sent again on a retry
/// of the join, it is the same member, answered as a heartbeat (KIP-848);
/// -1 leaves (a static member keeps its slot until its registration
/// timeout); anything else must be the member's epoch or the one before it
/// (a lost response). While the host runs late it answers with a longer
/// `heartbeat_interval_ms` (backpressure) rather than expire members. The answer is the member's reconciled assignment: it may
/// process `active`, must release `revoking` and report `owned` without
/// them, and warms up `learner` and `standby` tasks.
///
/// A group with a member token (`member_token` in its config) needs it as
/// `Authorization: Bearer TOKEN`; the admin token is not accepted in its
/// place. A group without one takes any heartbeat, unless the host
/// requires member tokens (`serve --require-member-token`); its joins that
/// add a member are limited per group (`serve --tokenless-join-burst-max`,
/// `--tokenless-join-rate-per-s`).
#[utoipa::path(
    post,
    path = "/v1/groups/{group}/heartbeat",
    tag = "members",
    security((), ("member_token" = [])),
    params(("group" = String, Path, description = "The group's name")),
    request_body = HeartbeatRequest,
    responses(
        (status = 200, description = "The member's assignment", body = HeartbeatResponseBody),
        (status = 307, description = "`not_coordinator` (cluster mode): another node coordinates the group; send this and the next heartbeats to `Location` (also `error.location`)", body = ErrorBody),
        (status = 400, description = "`invalid_json`, `invalid_path`, `invalid_request`", body = ErrorBody),
        (status = 401, description = "`unauthorized`: the group has a member token and none was sent", body = ErrorBody),
        (status = 403, description = "`forbidden`: the token is not the group's member token; `member_token_required`: the group has none and the host requires one (`serve --require-member-token`)", body = ErrorBody),
        (status = 404, description = "`unknown_group`, `unknown_member`", body = ErrorBody),
        (status = 409, description = "`fenced` (removed: rejoin with epoch 0), `replaced` (another incarnation took the member name: stop, do not rejoin), `stale_epoch`, `not_owned`, `group_full`", body = ErrorBody),
        (status = 413, description = "`payload_too_large`: the body is past the heartbeat's limit of 64 MiB (a member of any group the host accepts fits)", body = ErrorBody),
        (status = 408, description = "`request_timeout`: the body did not arrive within the body-read timeout", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`", body = ErrorBody),
        (status = 429, description = "`join_rate_limited`: a join that would add a member to a group without a member token, past the group's join rate; retry after `Retry-After` seconds", body = ErrorBody),
        (status = 503, description = "`storage_failed`; `storage_unavailable` (cluster mode: etcd does not answer; keep the tasks while the lease runs and retry after `Retry-After`); `shard_unavailable`, `coordinator_unreachable` (cluster mode: the group's shard is between nodes; retry after `Retry-After`); `too_many_large_bodies` (a body past 1 MiB while the host reads as many large bodies as it may at once, 256 MiB in all; retry after `Retry-After`)", body = ErrorBody),
    )
)]
pub async fn heartbeat(
    State(runtime): State<Arc<Runtime>>,
    ApiPath(group): ApiPath<String>,
    MemberCredential(token): MemberCredential,
    StructJson(body): StructJson<HeartbeatRequest>,
) -> Result<Json<HeartbeatResponseBody>, ApiError> {
    let span = tracing::Span::current();
    span.record("group", group.as_str());
    let member = match (&body.member_id, &body.member_name) {
        (id, _) if !id.is_empty() => id.as_str(),
        (_, Some(name)) => name.as_str(),
        _ => "",
    };
    span.record("member", member);
    let nameless_join = member.is_empty();
    let task_ranges = body.task_ranges;
    let request = heartbeat_request(group, body);
    let response = runtime.heartbeat(&request, token.as_deref()).await?;
    if nameless_join {
        // A nameless join: the span gets the id the host just issued.
        span.record("member", response.member_id.as_str());
    }
    Ok(Json(heartbeat_response(response, task_ranges)))
}
