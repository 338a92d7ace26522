//! The admin routes of the host's shards: which it has and serves, and
//! loading and unloading one at runtime (the steps that move a shard to
//! another host).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;

use super::error::{ApiError, ApiPath};
use super::routing::Routing;
use super::wire::ErrorBody;
use crate::runtime::Runtime;

/// The host's shards.
#[derive(Debug, Serialize, ToSchema)]
pub struct ShardList {
    /// The host's clock now, in the milliseconds (since the host process
    /// started) that the group view's `at_ms` fields count.
    pub now_ms: u64,
    /// This node's name (cluster mode; absent on one host).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// The cluster's live nodes and the shards each owns, as this node
    /// last read them (cluster mode; empty on one host).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<NodeView>,
    /// How many shards the host's groups are spread over: fixed for its
    /// data dir. A group's shard is CRC-32C of its name modulo this count.
    pub shard_count: u32,
    /// The shards this host serves now.
    pub served: Vec<u32>,
    /// Every shard, by id.
    pub shards: Vec<ShardView>,
}

/// One shard.
#[derive(Debug, Serialize, ToSchema)]
pub struct ShardView {
    pub shard: u32,
    /// Whether this host serves it now (its groups answer); an unserved
    /// shard's groups are answered 503 `shard_unavailable`.
    pub served: bool,
    /// Its groups (0 while not served).
    pub groups: u64,
    /// When its timers next fire, in ms from now (0: due); absent while no
    /// timer runs or the shard is not served.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_deadline_in_ms: Option<u64>,
    /// Its deadlines by kind (`session`, `registration`, `release_fence`,
    /// `drain`, `lease`, `expansion`, `assignor_retry`, `probing`, `start`):
    /// the kinds it has.
    pub timers: std::collections::BTreeMap<String, usize>,
}

/// A live node of the cluster.
#[derive(Debug, Serialize, ToSchema)]
pub struct NodeView {
    pub name: String,
    /// Its advertised base URL.
    pub url: String,
    /// The shards it owns.
    pub shards: Vec<u32>,
}

/// The cluster's nodes and their shards, by the directory.
fn nodes(directory: &crate::cluster::Directory) -> Vec<NodeView> {
    let view = directory.view();
    view.nodes
        .iter()
        .map(|(name, url)| NodeView {
            name: name.clone(),
            url: url.clone(),
            shards: view
                .owners
                .iter()
                .filter(|(_, owner)| *owner == name)
                .map(|(shard, _)| *shard)
                .collect(),
        })
        .collect()
}

/// What a load or unload did.
#[derive(Debug, Serialize, ToSchema)]
pub struct ShardChange {
    pub shard: u32,
    /// False when the shard already was in the state asked for.
    pub changed: bool,
    pub served: bool,
}

fn list(runtime: &Runtime, routing: Option<&Routing>) -> ShardList {
    let shards: Vec<ShardView> = runtime
        .shard_statuses()
        .into_iter()
        .map(|s| ShardView {
            shard: s.shard,
            served: s.served,
            groups: s.groups,
            next_deadline_in_ms: s.next_deadline_in_ms,
            timers: s
                .timers
                .into_iter()
                .map(|(kind, n)| (kind.to_owned(), n))
                .collect(),
        })
        .collect();
    ShardList {
        now_ms: runtime.now_ms(),
        node: routing.map(|r| r.directory().me().to_owned()),
        nodes: routing.map_or_else(Vec::new, |r| nodes(r.directory())),
        shard_count: runtime.shard_count(),
        served: shards
            .iter()
            .filter(|s| s.served)
            .map(|s| s.shard)
            .collect(),
        shards,
    }
}

/// The host's shards: the count, which it serves, and each one's groups;
/// in a cluster, the live nodes and the shards each owns.
#[utoipa::path(
    get,
    path = "/v1/shards",
    tag = "shards",
    responses((status = 200, description = "The shards", body = ShardList))
)]
pub async fn list_shards(
    State(runtime): State<Arc<Runtime>>,
    routing: Option<axum::Extension<Arc<Routing>>>,
) -> Json<ShardList> {
    Json(list(&runtime, routing.as_deref().map(|r| &**r)))
}

/// Loads a shard and serves it: its record log is replayed, its timers
/// start, every member of its groups gets a full timeout from now.
#[utoipa::path(
    post,
    path = "/v1/shards/{shard}/load",
    tag = "shards",
    params(("shard" = u64, Path, description = "The shard's id")),
    responses(
        (status = 200, description = "Served", body = ShardChange),
        (status = 400, description = "`invalid_path`: the shard is not a number", body = ErrorBody),
        (status = 404, description = "`unknown_shard`", body = ErrorBody),
        (status = 503, description = "`shard_load_failed`", body = ErrorBody),
    )
)]
pub async fn load_shard(
    State(runtime): State<Arc<Runtime>>,
    ApiPath(shard): ApiPath<u64>,
) -> Result<Json<ShardChange>, ApiError> {
    let changed = runtime.load_shard(shard).await?;
    Ok(Json(ShardChange {
        shard: shard as u32,
        changed,
        served: true,
    }))
}

/// Stops serving a shard: its timers stop, what it applied is made
/// durable, its log is released; its groups answer 503
/// `shard_unavailable` (with `Retry-After`) until it is loaded again.
#[utoipa::path(
    post,
    path = "/v1/shards/{shard}/unload",
    tag = "shards",
    params(("shard" = u64, Path, description = "The shard's id")),
    responses(
        (status = 200, description = "Not served", body = ShardChange),
        (status = 400, description = "`invalid_path`: the shard is not a number", body = ErrorBody),
        (status = 404, description = "`unknown_shard`", body = ErrorBody),
        (status = 503, description = "`storage_failed`", body = ErrorBody),
    )
)]
pub async fn unload_shard(
    State(runtime): State<Arc<Runtime>>,
    ApiPath(shard): ApiPath<u64>,
) -> Result<Json<ShardChange>, ApiError> {
    let changed = runtime.unload_shard(shard).await?;
    Ok(Json(ShardChange {
        shard: shard as u32,
        changed,
        served: false,
    }))
}
