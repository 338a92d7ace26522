//! The host's metrics: the one process-wide Prometheus recorder behind the
//! `metrics` facade, installed on first use, and its text rendering for
//! `GET /metrics`. It owns no metric itself: each part of the host
//! records its own through the `metrics` macros (names `assignd_*`,
//! seconds for durations, `_total` for counters); [`FAMILIES`] gives every
//! name its help line and unit, in one list (docs/architecture.md,
//! "Metrics", has the same list with the labels), described and, where the
//! labels are known, set to zero at install.

use std::sync::OnceLock;

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Histogram buckets for durations, in seconds: 100 µs to 30 s.
const SECONDS_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
];

/// Histogram buckets for an assignor call's fuel (wasm instructions,
/// roughly): a thousand to ten billion.
const FUEL_BUCKETS: &[f64] = &[1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10];

/// Histogram buckets for the records of one log append (a group commit).
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0];

/// The recorder's handle, installing the recorder on the first call. If
/// another recorder was installed first (a test harness, an embedding
/// program), metrics go there and this handle renders only what it saw.
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
            .and_then(|b| b.set_buckets_for_metric(Matcher::Full(ASSIGNOR_FUEL.into()), FUEL_BUCKETS))
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Full(LOG_BATCH_RECORDS.into()), BATCH_BUCKETS)
            })
            .expect("the bucket lists are not empty");
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        match metrics::set_global_recorder(recorder) {
            Ok(()) => describe(),
            Err(error) => {
                tracing::warn!(%error, "another metrics recorder is installed; /metrics shows nothing")
            }
        }
        handle
    })
}

/// Every metric in Prometheus' text exposition format; a family without
/// a series yet still has its HELP and TYPE lines.
pub fn render() -> String {
    let handle = handle();
    handle.run_upkeep();
    let mut text = handle.render();
    for &(name, kind, _, help) in FAMILIES {
        if !text.contains(&format!("# TYPE {name} ")) {
            text.push_str(&format!(
                "# HELP {name} {help}\n# TYPE {name} {}\n\n",
                kind.label()
            ));
        }
    }
    text
}

const ASSIGNOR_FUEL: &str = "assignd_assignor_fuel";
const LOG_BATCH_RECORDS: &str = "assignd_log_batch_records";

/// What kind of metric a family is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    /// The kind as Prometheus' `# TYPE` line names it.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// Every metric family the recorder holds: name, kind, unit, help.
/// Labels are bounded: a state, a reason, a module (modules are limited),
/// an HTTP method, route template and status; never a group or a member
/// id: the per-group figures are rendered on demand from the last scan
/// (`GET /metrics?groups=true`, [`crate::runtime::observe::render_groups`]),
/// so the recorder and a default scrape stay the same size however many
/// groups there are.
pub const FAMILIES: &[(&str, Kind, Unit, &str)] = &[
    // Groups and members: refreshed about once a second by the runtime's
    // ticker from one scan of the core (runtime/observe.rs).
    (
        "assignd_groups",
        Kind::Gauge,
        Unit::Count,
        "Groups by state (stable, assigning: a new target is wanted, reconciling: members are moving to the target)",
    ),
    (
        "assignd_members",
        Kind::Gauge,
        Unit::Count,
        "Members of every group by state (stable, revoking: must release tasks, unreleased: waits for tasks others release, away: a static member gone for now, draining)",
    ),
    (
        "assignd_tasks_revoking",
        Kind::Gauge,
        Unit::Count,
        "Tasks members of every group have been asked to release and still hold (tasks moving)",
    ),
    (
        "assignd_learners_pending",
        Kind::Gauge,
        Unit::Count,
        "Learner tasks in the installed targets of every group (warming up before ownership moves)",
    ),
    (
        "assignd_rebalances_total",
        Kind::Counter,
        Unit::Count,
        "Targets installed (one per assignment the host accepted), every group",
    ),
    (
        "assignd_rebalance_seconds",
        Kind::Histogram,
        Unit::Seconds,
        "From the epoch bump that started a rebalance to the group being stable again",
    ),
    (
        "assignd_members_removed_total",
        Kind::Counter,
        Unit::Count,
        "Members taken out of a group, by reason (left, expired, fenced, drain_timed_out)",
    ),
    // Assignor calls (runtime/assignors.rs).
    (
        "assignd_assignor_calls_total",
        Kind::Counter,
        Unit::Count,
        "Assignor calls per module, answered or failed",
    ),
    (
        "assignd_assignor_failures_total",
        Kind::Counter,
        Unit::Count,
        "Assignor calls that failed, per module and failure code",
    ),
    (
        "assignd_assignor_call_seconds",
        Kind::Histogram,
        Unit::Seconds,
        "Duration of one assignor call (loading and running the module)",
    ),
    (
        ASSIGNOR_FUEL,
        Kind::Histogram,
        Unit::Count,
        "Fuel one successful assignor call used (about one unit per wasm instruction)",
    ),
    // HTTP (api/metrics.rs).
    (
        "assignd_http_request_seconds",
        Kind::Histogram,
        Unit::Seconds,
        "HTTP request latency by method, route template and status",
    ),
    // The record log (log/writer.rs).
    (
        "assignd_log_write_seconds",
        Kind::Histogram,
        Unit::Seconds,
        "Duration of one batch write to the record log (before its fsync)",
    ),
    (
        "assignd_log_fsync_seconds",
        Kind::Histogram,
        Unit::Seconds,
        "Duration of one fsync of the record log",
    ),
    (
        LOG_BATCH_RECORDS,
        Kind::Histogram,
        Unit::Count,
        "Records in one append to the record log (one group commit)",
    ),
    (
        "assignd_log_records_total",
        Kind::Counter,
        Unit::Count,
        "Records appended to the record log",
    ),
    (
        "assignd_log_maintenance_failures_total",
        Kind::Counter,
        Unit::Count,
        "Record log maintenance steps that failed and will be retried (compaction, roll: a new segment, head: updating HEAD); appends go on",
    ),
    // The host's shards (runtime/mod.rs).
    (
        "assignd_shards",
        Kind::Gauge,
        Unit::Count,
        "shards the host's groups are spread over (fixed for its data dir)",
    ),
    (
        "assignd_shards_served",
        Kind::Gauge,
        Unit::Count,
        "shards this host serves now (loaded: their groups answer)",
    ),
    // The shards' timer tables (protocol/core/deadlines.rs).
    (
        "assignd_timers",
        Kind::Gauge,
        Unit::Count,
        "deadlines in the served shards' timer tables, by kind (at the scrape)",
    ),
    (
        "assignd_timer_ticks_total",
        Kind::Counter,
        Unit::Count,
        "ticks of a shard: each at its earliest deadline, at most one per 50 ms",
    ),
    (
        "assignd_timer_groups_visited_total",
        Kind::Counter,
        Unit::Count,
        "groups the ticks visited (those due): an idle group is not visited",
    ),
    // The host's own lateness (runtime/lateness.rs).
    (
        "assignd_host_late_seconds",
        Kind::Gauge,
        Unit::Seconds,
        "how late the host runs at the scrape (a timer that fired after its deadline, a heartbeat that waited for its shard), decaying; members are told to beat less often meanwhile",
    ),
    (
        "assignd_host_late_total",
        Kind::Counter,
        Unit::Count,
        "times the host started running late (at least 20 ms behind; each a warn log line)",
    ),
    // The HTTP server's connections (api/server.rs).
    (
        "assignd_http_connections",
        Kind::Gauge,
        Unit::Count,
        "HTTP connections open now (at most serve --connections-max)",
    ),
    (
        "assignd_http_connections_refused_total",
        Kind::Counter,
        Unit::Count,
        "HTTP connections refused at the connection cap (answered 503 too_many_connections)",
    ),
    (
        "assignd_http_accept_failures_total",
        Kind::Counter,
        Unit::Count,
        "Failed accepts of new HTTP connections (e.g. out of file descriptors)",
    ),
    // The caps on groups and modules (runtime/group_cap.rs, registry).
    (
        "assignd_groups_max",
        Kind::Gauge,
        Unit::Count,
        "Groups this host serves at most (serve --groups-max; assignd_groups counts them)",
    ),
    (
        "assignd_modules",
        Kind::Gauge,
        Unit::Count,
        "Uploaded modules kept (in a cluster: the cluster's, of which this node has a copy)",
    ),
    (
        "assignd_modules_max",
        Kind::Gauge,
        Unit::Count,
        "Uploaded modules kept at most (serve --modules-max)",
    ),
    (
        "assignd_module_bytes",
        Kind::Gauge,
        Unit::Bytes,
        "The uploaded modules' bytes in total",
    ),
    (
        "assignd_module_bytes_max",
        Kind::Gauge,
        Unit::Bytes,
        "The uploaded modules' bytes in total at most (serve --module-bytes-max)",
    ),
    // Cluster mode (cluster/node.rs, api/routing.rs); absent on one host.
    (
        "assignd_cluster_nodes",
        Kind::Gauge,
        Unit::Count,
        "live nodes of the cluster, as the last placement round read them",
    ),
    (
        "assignd_cluster_etcd_available",
        Kind::Gauge,
        Unit::Count,
        "1 while etcd answered the node's last call (a lease renewal, a placement read, a step-down's revoke or new lease), 0 from the first of them it does not answer (writes are refused as storage_unavailable)",
    ),
    (
        "assignd_cluster_lease_renewals_total",
        Kind::Counter,
        Unit::Count,
        "renewals of the node's lease that etcd answered",
    ),
    (
        "assignd_cluster_lease_renewal_failures_total",
        Kind::Counter,
        Unit::Count,
        "renewals of the node's lease that failed (the lease holds until its TTL ends)",
    ),
    (
        "assignd_cluster_step_downs_total",
        Kind::Counter,
        Unit::Count,
        "times the node's lease ended unrenewed and it stopped serving every shard",
    ),
    (
        "assignd_cluster_shards_taken_total",
        Kind::Counter,
        Unit::Count,
        "shards this node claimed and loaded (a join's share, a takeover, a reload after an unanswered write)",
    ),
    (
        "assignd_cluster_shards_handed_over_total",
        Kind::Counter,
        Unit::Count,
        "shards this node unloaded and released for another node (placement moved them)",
    ),
    (
        "assignd_cluster_etcd_compactions_total",
        Kind::Counter,
        Unit::Count,
        "compactions of etcd's history this node made (the live node of the lowest name makes them)",
    ),
    (
        "assignd_cluster_redirects_total",
        Kind::Counter,
        Unit::Count,
        "heartbeats answered 307 to the node that coordinates their group",
    ),
    (
        "assignd_cluster_forwards_total",
        Kind::Counter,
        Unit::Count,
        "admin requests forwarded to the node that coordinates their group",
    ),
];

/// Every family's help line and unit, once, at install; and every series
/// whose labels are known before its first event at zero, so dashboards
/// and alerts see them from the first scrape. (A family whose labels are
/// not known yet, HTTP latency, shows its HELP and TYPE lines: [`render`].)
fn describe() {
    for &(name, kind, unit, help) in FAMILIES {
        match kind {
            Kind::Counter => describe_counter!(name, unit, help),
            Kind::Gauge => describe_gauge!(name, unit, help),
            Kind::Histogram => describe_histogram!(name, unit, help),
        }
    }
    use crate::protocol::group::{Phase, RemovalReason};
    use crate::runtime::observe::MEMBER_STATES;
    for state in Phase::ALL {
        metrics::gauge!("assignd_groups", "state" => state.label()).set(0.0);
    }
    for state in MEMBER_STATES {
        metrics::gauge!("assignd_members", "state" => state).set(0.0);
    }
    metrics::gauge!("assignd_tasks_revoking").set(0.0);
    metrics::gauge!("assignd_learners_pending").set(0.0);
    metrics::counter!("assignd_rebalances_total").absolute(0);
    for reason in [
        RemovalReason::Left,
        RemovalReason::Expired,
        RemovalReason::Fenced,
        RemovalReason::DrainTimedOut,
    ] {
        metrics::counter!("assignd_members_removed_total", "reason" => reason.label()).absolute(0);
    }
    for module in crate::plugins::BUILTIN_NAMES {
        metrics::counter!("assignd_assignor_calls_total", "module" => *module).absolute(0);
        // Registered without a sample: rendered with zero counts.
        let _ = metrics::histogram!("assignd_assignor_call_seconds", "module" => *module);
        let _ = metrics::histogram!(ASSIGNOR_FUEL, "module" => *module);
    }
    for name in [
        "assignd_rebalance_seconds",
        "assignd_log_write_seconds",
        "assignd_log_fsync_seconds",
        LOG_BATCH_RECORDS,
    ] {
        let _ = metrics::histogram!(name);
    }
    metrics::counter!("assignd_log_records_total").absolute(0);
    for step in crate::log::MAINTENANCE_STEPS {
        metrics::counter!("assignd_log_maintenance_failures_total", "step" => *step).absolute(0);
    }
    metrics::gauge!("assignd_host_late_seconds").set(0.0);
    metrics::counter!("assignd_host_late_total").absolute(0);
    metrics::gauge!("assignd_http_connections").set(0.0);
    metrics::counter!("assignd_http_connections_refused_total").absolute(0);
    metrics::counter!("assignd_http_accept_failures_total").absolute(0);
}
