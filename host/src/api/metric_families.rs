//! The HTTP layer's metric families: request latency (`metrics.rs`),
//! connections (`server.rs`), routes watchers (`routes.rs`) and, in
//! cluster mode, redirects and forwards (`routing.rs`). `crate::metric_catalog` gathers them.

use metrics::Unit;

use crate::telemetry::{Family, Kind};

/// Request latency by method, route template and status (`metrics.rs`).
pub const HTTP_REQUEST_FAMILIES: &[Family] = &[Family::new(
    "assignd_http_request_seconds",
    Kind::Histogram,
    Unit::Seconds,
    "HTTP request latency by method, route template and status",
)];

/// The server's connections (`server.rs`).
pub const HTTP_CONNECTION_FAMILIES: &[Family] = &[
    Family::new(
        "assignd_http_connections",
        Kind::Gauge,
        Unit::Count,
        "HTTP connections open now (at most serve --connections-max)",
    ),
    Family::new(
        "assignd_http_connections_refused_total",
        Kind::Counter,
        Unit::Count,
        "HTTP connections refused at the connection cap (answered 503 too_many_connections)",
    ),
    Family::new(
        "assignd_http_accept_failures_total",
        Kind::Counter,
        Unit::Count,
        "Failed accepts of new HTTP connections (e.g. out of file descriptors)",
    ),
];

/// The routes watchers (`routes.rs`).
pub const ROUTES_FAMILIES: &[Family] = &[Family::new(
    "assignd_routes_watchers",
    Kind::Gauge,
    Unit::Count,
    "Routes watchers held now: blocking queries waiting and event streams open (at most serve --routes-watchers-max)",
)];

/// Sets the connection and watcher series to zero.
pub fn zero_http_connection_series() {
    metrics::gauge!("assignd_routes_watchers").set(0.0);
    metrics::gauge!("assignd_http_connections").set(0.0);
    metrics::counter!("assignd_http_connections_refused_total").absolute(0);
    metrics::counter!("assignd_http_accept_failures_total").absolute(0);
}

/// Cluster mode: requests sent to the node that coordinates their group
/// (`routing.rs`).
pub const CLUSTER_ROUTING_FAMILIES: &[Family] = &[
    Family::new(
        "assignd_cluster_redirects_total",
        Kind::Counter,
        Unit::Count,
        "heartbeats answered 307 to the node that coordinates their group",
    ),
    Family::new(
        "assignd_cluster_forwards_total",
        Kind::Counter,
        Unit::Count,
        "admin requests forwarded to the node that coordinates their group",
    ),
];
