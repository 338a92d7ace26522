//! The HTTP API: axum routes for members and admins, and their OpenAPI
//! document. Thin by design: a handler parses, calls the [`Runtime`], and
//! maps the result; every failure is an [`ApiError`] with one mapping to a
//! status and a JSON error body. It owns no state and never touches the
//! protocol core except through the runtime.
//!
//! [`app`] builds the router that `assignd serve` runs (on [`server`], its
//! bounded accept loop) and that the tests
//! drive in process with `tower::ServiceExt::oneshot`. Every route but the
//! member heartbeat, `/v1/groups/{group}/coordinator`, `/healthz`,
//! `/metrics` and `/v1/openapi.json` requires the admin token ([`auth`]);
//! the console's files at `/ui` ([`console`]) need none either.

mod assignors;
pub mod auth;
pub mod console;
mod error;
mod groups;
mod large_bodies;
mod limits_doc;
mod load_views;
mod members;
pub mod metric_families;
mod metrics;
mod preview;
mod rollouts;
pub mod routes;
pub mod routing;
pub mod server;
mod shadow_views;
mod shadows;
mod shards;
mod views;
pub mod wire;

#[cfg(test)]
mod tests;

use std::sync::{Arc, OnceLock};

use axum::Json;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, MatchedPath, State};
use axum::http::{Method, Request, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::trace::TraceLayer;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use auth::AdminToken;
pub use error::{ApiError, BODY_BYTES_MAX, protocol_status};

use crate::runtime::Runtime;
use wire::{ErrorBody, Health};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "assignd",
        description = "A group coordinator with WebAssembly assignor plugins. Every error answers \
                       `{\"error\": {\"code\": \"...\", \"message\": \"...\"}}`; an unknown route is \
                       404 `not_found`, a wrong method 405 `method_not_allowed`. Every route but the \
                       member heartbeat, `/v1/groups/{group}/coordinator`, `/healthz`, `/metrics` \
                       (unless the host runs with `--metrics-auth`) and `/v1/openapi.json` requires the \
                       admin token as `Authorization: Bearer TOKEN`: 401 `unauthorized` without it, 403 \
                       `forbidden` with another token. A body that does not arrive within the host's \
                       body-read timeout is answered 408 `request_timeout`; a connection past the \
                       host's connection cap is answered 503 `too_many_connections` (with \
                       `Retry-After`) and closed."
    ),
    components(schemas(ErrorBody)),
    tags(
        (name = "members", description = "The member protocol: join, heartbeat, leave"),
        (name = "groups", description = "Administration of groups"),
        (name = "assignors", description = "The assignor registry: upload, list, show, delete modules"),
        (name = "routing", description = "Who owns what: a group's routing table, its watch and key lookups, for readers outside the group"),
        (name = "rollouts", description = "Rollouts: a module bound to a growing share of groups, watched, rolled back by itself"),
        (name = "shards", description = "The host's shards: which it has and serves, loading and unloading"),
        (name = "service", description = "The service itself"),
    )
)]
struct ApiDoc;

/// The admin routes: every route that reads or changes the coordinator's
/// state other than the member protocol. [`app`] puts the admin token in
/// front of each; a route added here cannot be forgotten.
fn admin_routes() -> OpenApiRouter<Arc<Runtime>> {
    OpenApiRouter::new()
        .routes(routes!(groups::list_groups))
        .routes(routes!(groups::put_group, groups::get_group))
        .routes(routes!(groups::assignor_input))
        .routes(routes!(groups::drain_member))
        .routes(routes!(groups::bind_assignor))
        .routes(routes!(groups::rollback_assignor))
        .routes(routes!(
            shadows::bind_shadow,
            shadows::end_shadow,
            shadows::get_shadow
        ))
        .routes(routes!(preview::preview_assignor))
        .routes(routes!(shards::list_shards))
        .routes(routes!(shards::load_shard))
        .routes(routes!(shards::unload_shard))
        .routes(routes!(
            assignors::upload_assignor,
            assignors::list_assignors
        ))
        .routes(routes!(assignors::get_assignor, assignors::delete_assignor))
        .routes(routes!(auth::token_access))
        .routes(routes!(rollouts::start_rollout, rollouts::list_rollouts))
        .routes(routes!(rollouts::get_rollout))
        .routes(routes!(rollouts::pause_rollout))
        .routes(routes!(rollouts::resume_rollout))
        .routes(routes!(rollouts::abort_rollout))
}

/// The routes without the admin token: the member protocol (which checks
/// a group's member token itself, if the group has one), the document and
/// the health check.
fn open_routes() -> OpenApiRouter<Arc<Runtime>> {
    // The heartbeat's own body limit, past the other routes': a member of
    // the largest group the host accepts reports every task it holds,
    // within one budget of such bodies for the whole host.
    let heartbeat = OpenApiRouter::new()
        .routes(routes!(members::heartbeat))
        .route_layer(axum::middleware::from_fn_with_state(
            large_bodies::LargeBodies::default(),
            large_bodies::admit,
        ));
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(heartbeat)
        .routes(routes!(routes::get_routes))
        .routes(routes!(routes::lookup))
        .routes(routes!(routing::coordinator))
        .routes(routes!(openapi_json))
        .routes(routes!(healthz))
}

/// Every route, registered once for the router and the document alike:
/// the open routes, and the admin routes behind `admin` (the document only
/// needs their description).
fn routes(admin: Option<Arc<AdminToken>>) -> OpenApiRouter<Arc<Runtime>> {
    let mut admin_routes = admin_routes();
    auth::document_admin_routes(admin_routes.get_openapi_mut());
    // `/metrics` is open unless the operator guards it (`serve
    // --metrics-auth`); the document describes it open, and says so.
    let metrics = OpenApiRouter::new().routes(routes!(metrics::metrics));
    let mut open_routes = open_routes();
    if admin.as_ref().is_some_and(|admin| admin.guards_metrics()) {
        admin_routes = admin_routes.merge(metrics);
    } else {
        open_routes = open_routes.merge(metrics);
    }
    if let Some(admin) = admin {
        admin_routes = admin_routes.route_layer(axum::middleware::from_fn_with_state(
            admin,
            auth::require_admin,
        ));
    }
    let mut routes = open_routes.merge(admin_routes);
    auth::document_schemes(routes.get_openapi_mut());
    routes
}

/// The OpenAPI document of every route.
pub fn openapi() -> &'static utoipa::openapi::OpenApi {
    static DOC: OnceLock<utoipa::openapi::OpenApi> = OnceLock::new();
    DOC.get_or_init(|| routes(None).into_openapi())
}

/// The application: every route (the admin routes behind `admin`, the
/// admin token), JSON fallbacks for unknown routes and wrong methods, the
/// body limit, panics answered as 500, one tracing span per request
/// (with `group` and `member` fields the handlers fill), and every
/// request timed by route template and status.
pub fn app(runtime: Arc<Runtime>, admin: AdminToken) -> axum::Router {
    app_with(runtime, admin, Arc::default())
}

/// [`app`] with the host's cap on routes watchers.
pub fn app_with(
    runtime: Arc<Runtime>,
    admin: AdminToken,
    watchers: Arc<routes::Watchers>,
) -> axum::Router {
    let admin = Arc::new(admin);
    let (router, _) = routes(Some(admin.clone())).split_for_parts();
    finish(router, runtime, admin, watchers)
}

/// The application of a cluster node: [`app`] with every request for a
/// group another node coordinates redirected or forwarded there
/// ([`routing`]), by `directory`.
pub fn cluster_app(
    runtime: Arc<Runtime>,
    admin: AdminToken,
    directory: Arc<crate::cluster::Directory>,
    watchers: Arc<routes::Watchers>,
) -> axum::Router {
    let admin = Arc::new(admin);
    let (router, _) = routes(Some(admin.clone())).split_for_parts();
    let routing = Arc::new(routing::Routing::new(runtime.clone(), directory));
    let router = router
        .layer(axum::middleware::from_fn_with_state(
            routing.clone(),
            routing::route,
        ))
        .layer(axum::Extension(routing));
    finish(router, runtime, admin, watchers)
}

fn finish(
    router: axum::Router<Arc<Runtime>>,
    runtime: Arc<Runtime>,
    admin: Arc<AdminToken>,
    watchers: Arc<routes::Watchers>,
) -> axum::Router {
    // The layers every route shares, outermost first, composed into one
    // layer: each `Router::layer` call wraps every route in a boxed
    // service that a request clones and boxes its future through, so
    // four calls cost a heartbeat four of each.
    let shared = tower::ServiceBuilder::new()
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(metrics::RequestTimers::default()),
            metrics::observe_request,
        ))
        // No line per failed response here: every error answer is logged
        // where it is made, at its code's level (`error::log_level`), so a
        // refusal by design (a takeover's `shard_unavailable`, `/healthz`
        // while etcd is away) is no ERROR line.
        .layer(
            TraceLayer::new_for_http()
                .make_span_with(request_span)
                .on_failure(()),
        )
        .layer(CatchPanicLayer::custom(
            |_panic: Box<dyn std::any::Any + Send>| ApiError::Panicked.into_response(),
        ))
        .layer(DefaultBodyLimit::max(BODY_BYTES_MAX))
        // The routing routes read the admin token and the watcher cap.
        .layer(axum::Extension(admin))
        .layer(axum::Extension(watchers));
    router
        .merge(console::router())
        .method_not_allowed_fallback(method_not_allowed)
        .fallback(not_found)
        .layer(shared)
        .with_state(runtime)
}

fn request_span(request: &Request<Body>) -> tracing::Span {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("(none)", MatchedPath::as_str);
    tracing::info_span!(
        "request",
        method = %request.method(),
        uri = %request.uri(),
        route,
        group = tracing::field::Empty,
        member = tracing::field::Empty,
    )
}

async fn not_found(method: Method, uri: Uri) -> ApiError {
    ApiError::NotFound {
        method: method.to_string(),
        path: uri.path().to_owned(),
    }
}

async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::MethodNotAllowed {
        method: method.to_string(),
        path: uri.path().to_owned(),
    }
}

/// This document.
#[utoipa::path(
    get,
    path = "/v1/openapi.json",
    tag = "service",
    responses((status = 200, description = "The OpenAPI document", body = Object))
)]
async fn openapi_json() -> Json<&'static utoipa::openapi::OpenApi> {
    Json(openapi())
}

/// Whether the service is up and can persist changes.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "service",
    responses(
        (status = 200, description = "Serving", body = Health),
        (status = 503, description = "`storage_failed`: persisting changes failed, and every request is refused; `storage_unavailable`: the storage (cluster mode's etcd) does not answer, and changes are refused until it does", body = Health),
    )
)]
async fn healthz(State(runtime): State<Arc<Runtime>>) -> Response {
    let (status, text) = if runtime.storage_unavailable() {
        (StatusCode::SERVICE_UNAVAILABLE, "storage_unavailable")
    } else if runtime.failed() {
        (StatusCode::SERVICE_UNAVAILABLE, "storage_failed")
    } else {
        (StatusCode::OK, "ok")
    };
    (
        status,
        Json(Health {
            status: text.to_owned(),
        }),
    )
        .into_response()
}
