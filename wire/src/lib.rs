//! The member protocol as it crosses HTTP: the JSON bodies of `POST
//! /v1/groups/{group}/heartbeat` (request and answer), of the routing
//! table (`GET /v1/groups/{group}/routes`, and Kafka's key-to-partition
//! mapping every router shares), and the compact task-list form both
//! sides write and read. The host (its API layer) and
//! the member client both speak these types, so the two cannot drift.
//!
//! It owns the encoding only: what a field means to the group is decided
//! by the host's protocol core, what it means to a member by the client.
//! Each side converts these bodies to its own types. With the `openapi`
//! feature the bodies also describe themselves as utoipa schemas, for the
//! host's OpenAPI document.
//!
//! Tasks are `[topic, partition]`, lag rows `[topic, partition, lag]`; a
//! task list may also hold ranges `[topic, first, last]` (see [`ranges`]).
//! Load items are `[topic, partition, load]` or `[topic, first, last,
//! load]` ([`LoadItem`]).

mod error;
mod heartbeat;
mod loads;
pub mod ranges;
mod routes;
#[cfg(feature = "openapi")]
mod schema;
mod size;
mod task;

pub use error::{ErrorBody, ErrorCode, ErrorDetail};
pub use heartbeat::{HeartbeatRequest, HeartbeatResponseBody, JOIN_EPOCH, LEAVE_EPOCH};
pub use loads::{LOAD_MAX, LoadItem, LoadReport, UTILISATION_MAX};
pub use routes::{
    ENDPOINT_BYTES_MAX, LookupBody, METADATA_KEY_BYTES_MAX, METADATA_PAIRS_MAX,
    METADATA_VALUE_BYTES_MAX, RouteMember, RouteMove, RouteOwner, RoutesBody, TaskRange,
    TaskRanges, murmur2, partition_for_key,
};
#[cfg(feature = "openapi")]
pub use schema::TaskItem;
pub use size::{
    HEARTBEAT_BODY_BYTES_MAX, escaped_len_bytes, heartbeat_bytes_max,
    heartbeat_with_loads_bytes_max,
};
pub use task::{LagRow, Task};

/// The most tasks one task list of a body may hold once its ranges are
/// expanded (a range is cheap to send, not to expand); a longer list is
/// refused while it is read. The host's limit on a group's tasks.
pub const TASKS_PER_LIST_MAX: u64 = 1_000_000;

#[cfg(test)]
mod tests;
