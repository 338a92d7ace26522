//! The body of every failed answer, `{"error": {"code", "message"}}`:
//! written by the host, read by the member client.

use serde::{Deserialize, Serialize};

/// The error body of every failure (4xx and 5xx).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    /// A stable code: unknown_group, unknown_member, fenced, replaced, stale_epoch,
    /// not_owned, group_full, no_previous_binding, invalid_request, unknown_assignor,
    /// invalid_json, invalid_path, payload_too_large,
    /// unsupported_media_type, not_found, method_not_allowed,
    /// unauthorized, forbidden, storage_failed, storage_unavailable, shard_unavailable,
    /// not_coordinator, coordinator_unreachable, internal.
    pub code: String,
    /// What went wrong, for a person.
    pub message: String,
    /// `not_coordinator` (307): where to send the request instead, the
    /// answer's `Location` (the coordinating node's advertised URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}
