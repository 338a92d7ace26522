//! `GET /metrics`: the host's metrics for Prometheus to scrape. Open like
//! `/healthz` unless `serve --metrics-auth` puts it behind the admin token;
//! by default it names no group (host-wide figures, by module, state or
//! route), so its size does not grow with the groups; `?groups=true` adds
//! the per-group gauges of the last scan. And the one middleware that
//! times every request.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use ::metrics::Histogram;

use axum::body::Body;
use axum::extract::{MatchedPath, State};
use axum::http::header::CONTENT_TYPE;
use axum::http::{Method, Request, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::ApiError;
use super::wire::ErrorBody;
use crate::runtime::Runtime;

/// Every metric, in Prometheus' text exposition format. Open, unless the
/// host runs with `serve --metrics-auth`: then it needs the admin token
/// (401 without it, 403 with another).
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "service",
    params(("groups" = Option<bool>, Query,
            description = "`true` adds the per-group gauges of the last scan \
                           (`assignd_group_*{group}`: members by state, epochs, tasks moving, \
                           learners, and a group's load, imbalance and whether its loads are \
                           complete, and a shadow assignor's comparisons): a few series per \
                           group, so that scrape grows with the groups")),
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", body = String,
         content_type = "text/plain; version=0.0.4"),
        (status = 400, description = "`groups` is neither `true` nor `false`", body = ErrorBody),
    )
)]
pub async fn metrics(
    State(runtime): State<Arc<Runtime>>,
    uri: Uri,
) -> Result<impl IntoResponse, ApiError> {
    let mut groups = false;
    for pair in uri.query().unwrap_or("").split('&') {
        match pair.split_once('=').unwrap_or((pair, "")) {
            ("groups", "true") => groups = true,
            ("groups", "false") => groups = false,
            ("groups", other) => {
                return Err(ApiError::InvalidQuery(format!(
                    "query parameter \"groups\" is true or false, not {other:?}"
                )));
            }
            _ => {}
        }
    }
    // The gauges of groups and members are the scrape's: an idle host
    // spends nothing on them between scrapes. The scan takes every
    // shard's lock in turn, so it runs off the workers: it may wait for a
    // large group's step.
    crate::runtime::off_the_workers(|| runtime.refresh_gauges());
    let mut text = crate::telemetry::render();
    if groups {
        crate::runtime::observe::render_groups(&mut text);
        crate::runtime::load_gauges::render_groups(&mut text);
        crate::runtime::shadow_gauges::render_groups(&mut text);
    }
    Ok((
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        text,
    ))
}

/// Times a request into `assignd_http_request_seconds{method,route,status}`.
/// The route is the matched template (`/v1/groups/{group}/heartbeat`),
/// never the path a client sent, and an unusual method counts as `other`,
/// so the labels stay few whatever clients send.
pub async fn observe_request(
    State(timers): State<Arc<RequestTimers>>,
    request: Request<Body>,
    next: Next,
) -> Response {
    let started = Instant::now();
    let method = method_label(request.method());
    let route = request.extensions().get::<MatchedPath>().cloned();
    let response = next.run(request).await;
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    timers
        .histogram(method, route, response.status().as_u16())
        .record(started.elapsed().as_secs_f64());
    response
}

/// The request-time histogram of each (route, method, status) an app has
/// answered, kept so that timing a request allocates nothing: building a
/// labelled key and looking it up in the recorder took about 2 % of a
/// steady heartbeat's server CPU. The labels are bounded (route templates, eight
/// methods, the statuses the API answers), and so is this.
#[derive(Default)]
pub struct RequestTimers {
    by_route: std::sync::RwLock<HashMap<String, Vec<MethodStatusTimer>>>,
}

/// One route's histogram for one method and status.
type MethodStatusTimer = (&'static str, u16, Histogram);

impl RequestTimers {
    fn histogram(&self, method: &'static str, route: &str, status: u16) -> Histogram {
        let known = |timers: &[MethodStatusTimer]| {
            timers
                .iter()
                .find(|(m, s, _)| *m == method && *s == status)
                .map(|(_, _, histogram)| histogram.clone())
        };
        let by_route = self.by_route.read().unwrap_or_else(|e| e.into_inner());
        if let Some(histogram) = by_route.get(route).and_then(|timers| known(timers)) {
            return histogram;
        }
        drop(by_route);
        let histogram = ::metrics::histogram!(
            "assignd_http_request_seconds",
            "method" => method,
            "route" => route.to_owned(),
            "status" => status.to_string(),
        );
        let mut by_route = self.by_route.write().unwrap_or_else(|e| e.into_inner());
        let timers = by_route.entry(route.to_owned()).or_default();
        if known(timers).is_none() {
            timers.push((method, status, histogram.clone()));
        }
        histogram
    }
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
