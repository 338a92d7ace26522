//! The host's metrics: the one process-wide Prometheus recorder behind the
//! `metrics` facade, installed on first use, and its text rendering for
//! `GET /metrics`. It owns no metric itself: each part of the host
//! records its own through the `metrics` macros (names `assignd_*`,
//! seconds for durations, `_total` for counters); [`describe`] gives every
//! name its help line and unit, in one list (docs/architecture.md,
//! "Metrics", has the same list with the labels).

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

/// Every metric in Prometheus' text exposition format.
pub fn render() -> String {
    let handle = handle();
    handle.run_upkeep();
    handle.render()
}

const ASSIGNOR_FUEL: &str = "assignd_assignor_fuel";
const LOG_BATCH_RECORDS: &str = "assignd_log_batch_records";

/// Every metric's help line and unit, once, at install. Labels are
/// bounded: `group` and `module` (groups and modules are limited), a
/// state or a status; never a member id.
fn describe() {
    // Groups and members: refreshed about once a second by the runtime's
    // ticker from one scan of the core (runtime/metrics.rs).
    describe_gauge!(
        "assignd_groups",
        Unit::Count,
        "Groups by state (stable, assigning: a new target is wanted, reconciling: members are moving to the target)"
    );
    describe_gauge!(
        "assignd_members",
        Unit::Count,
        "Members of a group by state (stable, revoking: must release tasks, unreleased: waits for tasks others release, away: a static member gone for now, draining)"
    );
    describe_gauge!(
        "assignd_group_epoch",
        Unit::Count,
        "A group's epoch: bumped whenever the group needs a new target"
    );
    describe_gauge!(
        "assignd_group_target_epoch",
        Unit::Count,
        "The epoch of a group's installed target"
    );
    describe_gauge!(
        "assignd_tasks_revoking",
        Unit::Count,
        "Tasks of a group its members have been asked to release and still hold (tasks moving)"
    );
    describe_gauge!(
        "assignd_learners_pending",
        Unit::Count,
        "Learner tasks in a group's installed target (warming up before ownership moves)"
    );
    describe_counter!(
        "assignd_rebalances_total",
        Unit::Count,
        "Targets installed for a group (one per assignment the host accepted)"
    );
    describe_histogram!(
        "assignd_rebalance_seconds",
        Unit::Seconds,
        "From the epoch bump that started a rebalance to the group being stable again"
    );
    // Assignor calls (runtime/assignors.rs).
    describe_counter!(
        "assignd_assignor_calls_total",
        Unit::Count,
        "Assignor calls per group and module, answered or failed"
    );
    describe_counter!(
        "assignd_assignor_failures_total",
        Unit::Count,
        "Assignor calls that failed, per group, module and failure code"
    );
    describe_histogram!(
        "assignd_assignor_call_seconds",
        Unit::Seconds,
        "Duration of one assignor call (loading and running the module)"
    );
    describe_histogram!(
        ASSIGNOR_FUEL,
        Unit::Count,
        "Fuel one successful assignor call used (about one unit per wasm instruction)"
    );
    // HTTP (api/mod.rs).
    describe_histogram!(
        "assignd_http_request_seconds",
        Unit::Seconds,
        "HTTP request latency by method, route template and status"
    );
    // The record log (log/writer.rs).
    describe_histogram!(
        "assignd_log_write_seconds",
        Unit::Seconds,
        "Duration of one batch write to the record log (before its fsync)"
    );
    describe_histogram!(
        "assignd_log_fsync_seconds",
        Unit::Seconds,
        "Duration of one fsync of the record log"
    );
    describe_histogram!(
        LOG_BATCH_RECORDS,
        Unit::Count,
        "Records in one append to the record log (one group commit)"
    );
    describe_counter!(
        "assignd_log_records_total",
        Unit::Count,
        "Records appended to the record log"
    );
}
