//! `GET /metrics`: the host's metrics for Prometheus to scrape. Open like
//! `/healthz`: it names groups and modules, never members or tokens. And
//! the one middleware that times every request.

use std::time::Instant;

use axum::body::Body;
use axum::extract::MatchedPath;
use axum::http::header::CONTENT_TYPE;
use axum::http::{Method, Request};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

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

/// Times a request into `assignd_http_request_seconds{method,route,status}`.
/// The route is the matched template (`/v1/groups/{group}/heartbeat`),
/// never the path a client sent, and an unusual method counts as `other`,
/// so the labels stay few whatever clients send.
pub async fn observe_request(request: Request<Body>, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(request.method());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str)
        .to_owned();
    let response = next.run(request).await;
    ::metrics::histogram!(
        "assignd_http_request_seconds",
        "method" => method,
        "route" => route,
        "status" => response.status().as_str().to_owned(),
    )
    .record(started.elapsed().as_secs_f64());
    response
}

fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::PATCH => "PATCH",
        Method::OPTIONS => "OPTIONS",
        _ => "other",
    }
}
