//! The bare heartbeat route: `POST /v1/groups/{group}/heartbeat` and
//! nothing behind it. It parses a member's heartbeat body and answers a
//! body of the shape and size assignd answers a settled member (its
//! `owned` as `active`, the other lists empty), both with assignd's own
//! wire types (`assignd-wire`: the same serde code, the same ranges reader
//! and writer), so what it costs is what HTTP and JSON alone cost. It owns
//! no state and checks nothing of the protocol.
//!
//! Shared by the `bare_heartbeat` example (the ceiling of
//! host/benches/heartbeat_ratio.py, over sockets) and the `http_stack`
//! bench (the same ceiling in process), so both measure one handler.

use assignd_wire::{HeartbeatRequest, HeartbeatResponseBody};
use axum::extract::Path;
use axum::routing::post;
use axum::{Json, Router};

/// What a steady answer tells a member, as a settled assignd group would
/// with the benchmark's config: the numbers only size the body.
const HEARTBEAT_INTERVAL_MS: u64 = 5_000;
const LEASE_MS: u64 = 300_000;

/// The router of the one member route.
pub fn router() -> Router {
    Router::new().route("/v1/groups/{group}/heartbeat", post(heartbeat))
}

async fn heartbeat(
    Path(_group): Path<String>,
    Json(request): Json<HeartbeatRequest>,
) -> Json<HeartbeatResponseBody> {
    Json(HeartbeatResponseBody {
        member_epoch: u64::try_from(request.member_epoch).unwrap_or(0),
        member_id: request.member_id,
        heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS,
        active: request.owned.unwrap_or_default(),
        revoking: Vec::new(),
        learner: Vec::new(),
        standby: Vec::new(),
        draining: request.drain,
        drained: false,
        lease_ms: Some(LEASE_MS),
        unreached_lease_ms: Some(LEASE_MS),
        unreached_flight_ms: Some(LEASE_MS),
        load_report: Default::default(),
        task_ranges: request.task_ranges,
    })
}
