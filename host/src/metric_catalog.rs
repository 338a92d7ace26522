//! Every metric family of the host in one list, gathered from the modules
//! that declare them, and the install of the recorder with it
//! ([`install`]): `serve` and the demo call it before anything records.
//! The runtime's families live in the runtime (`runtime::metric_families`);
//! the others', which their modules record through the `metrics` macros
//! alone, are declared here. docs/architecture.md, "Metrics", has the same
//! list with the labels. The per-group families are rendered on demand
//! from the last scan (`GET /metrics?groups=true`,
//! [`crate::runtime::observe::render_groups`]), never held by the recorder.

use metrics::Unit;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::runtime::metric_families as runtime;
use crate::telemetry::{self, Family, Kind};

/// Every family, in the order a scrape lists those without a series yet.
const FAMILIES: &[&[Family]] = &[
    runtime::GROUP_FAMILIES,
    runtime::ASSIGNOR_FAMILIES,
    HTTP_REQUEST_FAMILIES,
    LOG_FAMILIES,
    runtime::SHARD_FAMILIES,
    runtime::TIMER_FAMILIES,
    runtime::LATENESS_FAMILIES,
    HTTP_CONNECTION_FAMILIES,
    runtime::GROUP_CAP_FAMILIES,
    MODULE_FAMILIES,
    CLUSTER_FAMILIES,
];

/// Installs the recorder with every family (see [`telemetry::install`]).
pub fn install() -> &'static PrometheusHandle {
    telemetry::install(FAMILIES, zero_known_series)
}

/// Every series whose labels are known before its first event, at zero.
fn zero_known_series() {
    runtime::zero_group_series();
    runtime::zero_assignor_series();
    zero_log_series();
    runtime::zero_lateness_series();
    zero_http_connection_series();
}

/// HTTP request latency (api/metrics.rs).
const HTTP_REQUEST_FAMILIES: &[Family] = &[Family::new(
    "assignd_http_request_seconds",
    Kind::Histogram,
    Unit::Seconds,
    "HTTP request latency by method, route template and status",
)];

/// The record log (log/writer.rs).
const LOG_FAMILIES: &[Family] = &[
    Family::new(
        "assignd_log_write_seconds",
        Kind::Histogram,
        Unit::Seconds,
        "Duration of one batch write to the record log (before its fsync)",
    ),
    Family::new(
        "assignd_log_fsync_seconds",
        Kind::Histogram,
        Unit::Seconds,
        "Duration of one fsync of the record log",
    ),
    Family::new(
        "assignd_log_batch_records",
        Kind::Histogram,
        Unit::Count,
        "Records in one append to the record log (one group commit)",
    )
    .with_buckets(BATCH_BUCKETS),
    Family::new(
        "assignd_log_records_total",
        Kind::Counter,
        Unit::Count,
        "Records appended to the record log",
    ),
    Family::new(
        "assignd_log_maintenance_failures_total",
        Kind::Counter,
        Unit::Count,
        "Record log maintenance steps that failed and will be retried (compaction, roll: a new segment, head: updating HEAD); appends go on",
    ),
];

/// Histogram buckets for the records of one log append (a group commit).
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0];

fn zero_log_series() {
    // Registered without a sample: rendered with zero counts.
    for name in [
        "assignd_log_write_seconds",
        "assignd_log_fsync_seconds",
        "assignd_log_batch_records",
    ] {
        let _ = metrics::histogram!(name);
    }
    metrics::counter!("assignd_log_records_total").absolute(0);
    for step in crate::log::MAINTENANCE_STEPS {
        metrics::counter!("assignd_log_maintenance_failures_total", "step" => *step).absolute(0);
    }
}

/// The HTTP server's connections (api/server.rs).
const HTTP_CONNECTION_FAMILIES: &[Family] = &[
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

fn zero_http_connection_series() {
    metrics::gauge!("assignd_http_connections").set(0.0);
    metrics::counter!("assignd_http_connections_refused_total").absolute(0);
    metrics::counter!("assignd_http_accept_failures_total").absolute(0);
}

/// The cap on modules (registry).
const MODULE_FAMILIES: &[Family] = &[
    Family::new(
        "assignd_modules",
        Kind::Gauge,
        Unit::Count,
        "Uploaded modules kept (in a cluster: the cluster's, of which this node has a copy)",
    ),
    Family::new(
        "assignd_modules_max",
        Kind::Gauge,
        Unit::Count,
        "Uploaded modules kept at most (serve --modules-max)",
    ),
    Family::new(
        "assignd_module_bytes",
        Kind::Gauge,
        Unit::Bytes,
        "The uploaded modules' bytes in total",
    ),
    Family::new(
        "assignd_module_bytes_max",
        Kind::Gauge,
        Unit::Bytes,
        "The uploaded modules' bytes in total at most (serve --module-bytes-max)",
    ),
];

/// Cluster mode (cluster/node.rs, api/routing.rs); absent on one host.
const CLUSTER_FAMILIES: &[Family] = &[
    Family::new(
        "assignd_cluster_nodes",
        Kind::Gauge,
        Unit::Count,
        "live nodes of the cluster, as the last placement round read them",
    ),
    Family::new(
        "assignd_cluster_etcd_available",
        Kind::Gauge,
        Unit::Count,
        "1 while etcd answered the node's last call (a lease renewal, a placement read, a step-down's revoke or new lease), 0 from the first of them it does not answer (writes are refused as storage_unavailable)",
    ),
    Family::new(
        "assignd_cluster_lease_renewals_total",
        Kind::Counter,
        Unit::Count,
        "renewals of the node's lease that etcd answered",
    ),
    Family::new(
        "assignd_cluster_lease_renewal_failures_total",
        Kind::Counter,
        Unit::Count,
        "renewals of the node's lease that failed (the lease holds until its TTL ends)",
    ),
    Family::new(
        "assignd_cluster_step_downs_total",
        Kind::Counter,
        Unit::Count,
        "times the node's lease ended unrenewed and it stopped serving every shard",
    ),
    Family::new(
        "assignd_cluster_shards_taken_total",
        Kind::Counter,
        Unit::Count,
        "shards this node claimed and loaded (a join's share, a takeover, a reload after an unanswered write)",
    ),
    Family::new(
        "assignd_cluster_shards_handed_over_total",
        Kind::Counter,
        Unit::Count,
        "shards this node unloaded and released for another node (placement moved them)",
    ),
    Family::new(
        "assignd_cluster_etcd_compactions_total",
        Kind::Counter,
        Unit::Count,
        "compactions of etcd's history this node made (the live node of the lowest name makes them)",
    ),
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
