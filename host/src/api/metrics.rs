//! `GET /metrics`: the host's metrics for Prometheus to scrape. Open like
//! `/healthz`: it names groups and modules, never members or tokens.

use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;

/// Every metric, in Prometheus' text exposition format.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "service",
    responses((status = 200, description = "Prometheus text format 0.0.4", body = String,
               content_type = "text/plain; version=0.0.4"))
)]
pub async fn metrics() -> impl IntoResponse {
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        crate::telemetry::render(),
    )
}
