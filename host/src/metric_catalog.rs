//! Every metric family of the host in one list, gathered from the modules
//! that declare them next to the code that records them (each module's
//! families, and the zeroing of its series whose labels are known, in its
//! own `metric_families`), and the install of the recorder with it
//! ([`install`]): `serve` and the demo call it before anything records.
//! docs/architecture.md, "Metrics", has the same list with the labels.
//! The per-group families are rendered on demand from the last scan
//! (`GET /metrics?groups=true`,
//! [`crate::runtime::observe::render_groups`]), never held by the
//! recorder.

use metrics_exporter_prometheus::PrometheusHandle;

use crate::api::metric_families as http;
use crate::cluster::metric_families as cluster;
use crate::log::metric_families as log;
use crate::registry::metric_families as registry;
use crate::rollout_runner::events as rollouts;
use crate::runtime::metric_families as runtime;
use crate::telemetry::{self, Family};

/// Every family, in the order a scrape lists those without a series yet.
const FAMILIES: &[&[Family]] = &[
    runtime::GROUP_FAMILIES,
    runtime::ASSIGNOR_FAMILIES,
    runtime::SHADOW_FAMILIES,
    http::HTTP_REQUEST_FAMILIES,
    log::LOG_FAMILIES,
    runtime::SHARD_FAMILIES,
    runtime::TIMER_FAMILIES,
    runtime::LATENESS_FAMILIES,
    http::HTTP_CONNECTION_FAMILIES,
    http::ROUTES_FAMILIES,
    runtime::GROUP_CAP_FAMILIES,
    registry::MODULE_FAMILIES,
    cluster::CLUSTER_FAMILIES,
    http::CLUSTER_ROUTING_FAMILIES,
    rollouts::ROLLOUT_FAMILIES,
];

/// Installs the recorder with every family (see [`telemetry::install`]).
pub fn install() -> &'static PrometheusHandle {
    telemetry::install(FAMILIES, zero_known_series)
}

/// Every series whose labels are known before its first event, at zero.
fn zero_known_series() {
    runtime::zero_group_series();
    runtime::zero_assignor_series();
    runtime::zero_shadow_series();
    log::zero_log_series();
    runtime::zero_lateness_series();
    http::zero_http_connection_series();
    rollouts::zero_rollout_series();
}
