//! The host's metrics: the one process-wide Prometheus recorder behind the
//! `metrics` facade, installed on first use, and its text rendering for
//! `GET /metrics`. It owns no metric itself: each part of the host
//! records its own through the `metrics` macros (names `assignd_*`,
//! seconds for durations, `_total` for counters).

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Histogram buckets for durations, in seconds: 100 µs to 30 s.
const SECONDS_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
];

/// The recorder's handle, installing the recorder on the first call. If
/// another recorder was installed first (a test harness, an embedding
/// program), metrics go there and this handle renders only what it saw.
pub fn handle() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let builder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
            .expect("the bucket list is not empty");
        let recorder = builder.build_recorder();
        let handle = recorder.handle();
        if let Err(error) = metrics::set_global_recorder(recorder) {
            tracing::warn!(%error, "another metrics recorder is installed; /metrics shows nothing");
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
