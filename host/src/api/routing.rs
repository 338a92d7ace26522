//! Cluster routing: any node answers any request. It owns what a node does
//! with a request for a group whose shard another node coordinates
//! ([`route`], a layer on every route in cluster mode):
//!
//! - a member's heartbeat, and a routes event stream, are answered `307
//!   Temporary Redirect` with `Location` at the owner's advertised URL (and
//!   the same in the error body), so that any HTTP client can follow it and
//!   the member sends its next heartbeats there directly;
//! - an admin request is forwarded to the owner on the caller's behalf
//!   (its headers, `Authorization` included, and body), and the owner's
//!   answer is passed back as it came;
//! - `GET /v1/groups` asks every node for its groups and answers them all;
//! - a rollout request (`/v1/rollouts…`) is forwarded to the node serving
//!   shard 0, which coordinates every rollout;
//! - `GET /v1/groups/{group}/coordinator` ([`coordinator`]) names the owner.
//!
//! A forwarded request carries [`FORWARDED_BY_HEADER`] and is never
//! forwarded again: a node that is no longer the owner when it arrives
//! answers 503 `shard_unavailable`, and the caller retries. While a shard
//! is between owners (none, or one that is not yet a live node) the local
//! handler answers, which is 503 `shard_unavailable` with `Retry-After`.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::{FromRequestParts, MatchedPath, RawPathParams, Request, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::{ApiError, ApiPath, BODY_BYTES_MAX};
use super::wire::{Coordinator, ErrorBody, GroupList};
use crate::cluster::{Directory, NodeAddress};
use crate::runtime::Runtime;

/// Marks a request one node forwarded to another (its value: the
/// forwarding node's name).
pub const FORWARDED_BY_HEADER: &str = "x-assignd-forwarded-by";

/// How long a forwarded request may take at the owner: an admin request
/// may run the assignor (a bind's self-test, a preview), whose own budget
/// is seconds.
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(30);
// A forwarded blocking query of the routes is answered within it.
const _: () = assert!(super::routes::ROUTES_WAIT_MS_MAX < FORWARD_TIMEOUT.as_millis() as u64);

/// The largest answer passed back from the owner: a group's view with
/// every task of a large group fits.
pub const FORWARDED_ANSWER_BYTES_MAX: usize = 64 << 20;
// A forwarded heartbeat's answer lists at most the tasks its body may.
const _: () = assert!(FORWARDED_ANSWER_BYTES_MAX as u64 >= assignd_wire::HEARTBEAT_BODY_BYTES_MAX);

/// What the routing layer needs: the runtime (whether this node serves a
/// shard), the directory (who does) and an HTTP client for forwarding.
pub struct Routing {
    runtime: Arc<Runtime>,
    directory: Arc<Directory>,
    client: reqwest::Client,
}

impl Routing {
    pub fn new(runtime: Arc<Runtime>, directory: Arc<Directory>) -> Self {
        let client = reqwest::Client::builder()
            // An owner's redirect is passed back, not followed.
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(2))
            .build()
            .expect("an HTTP client without TLS builds");
        Routing {
            runtime,
            directory,
            client,
        }
    }

    pub fn directory(&self) -> &Arc<Directory> {
        &self.directory
    }

    /// The live node that coordinates `group`, if it is another node;
    /// `None` when this node serves it or nobody is known to.
    fn elsewhere(&self, group: &str) -> Option<NodeAddress> {
        self.shard_elsewhere(self.runtime.shard_of(group))
    }

    /// The live node that serves `shard`, if it is another node.
    fn shard_elsewhere(&self, shard: crate::protocol::shard::ShardId) -> Option<NodeAddress> {
        if self.runtime.serves(shard) {
            return None;
        }
        self.directory
            .owner(shard)
            .filter(|owner| owner.name != self.directory.me())
    }
}

/// The routing layer (see the module doc).
pub async fn route(State(routing): State<Arc<Routing>>, request: Request, next: Next) -> Response {
    if request.headers().contains_key(FORWARDED_BY_HEADER) {
        return next.run(request).await;
    }
    let Some(template) = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_owned())
    else {
        return next.run(request).await;
    };
    if template == "/v1/groups" && request.method() == Method::GET {
        return list_every_node(&routing, request, next)
            .await
            .unwrap_or_else(IntoResponse::into_response);
    }
    if template.starts_with("/v1/rollouts") {
        // Shard 0's node coordinates every rollout.
        let shard = crate::rollout_runner::store::COORDINATOR_SHARD;
        let Some(owner) = routing.shard_elsewhere(shard) else {
            return next.run(request).await;
        };
        metrics::counter!("assignd_cluster_forwards_total").increment(1);
        return forward(&routing, &owner, request)
            .await
            .unwrap_or_else(IntoResponse::into_response);
    }
    if !template.starts_with("/v1/groups/{group}") || template == "/v1/groups/{group}/coordinator" {
        return next.run(request).await;
    }
    let (mut parts, body) = request.into_parts();
    let group: Option<String> =
        <RawPathParams as FromRequestParts<()>>::from_request_parts(&mut parts, &())
            .await
            .ok()
            .and_then(|params| {
                params
                    .iter()
                    .find(|(name, _)| *name == "group")
                    .map(|(_, value)| value.to_owned())
            });
    let request = Request::from_parts(parts, body);
    let Some(group) = group else {
        return next.run(request).await;
    };
    let Some(owner) = routing.elsewhere(&group) else {
        return next.run(request).await;
    };
    // A heartbeat, and a routes stream (which a forward could not pass on
    // as it comes), go to the owner themselves.
    let stream =
        template == "/v1/groups/{group}/routes" && super::routes::wants_stream(request.headers());
    if template == "/v1/groups/{group}/heartbeat" || stream {
        let location = at(&owner, &request);
        metrics::counter!("assignd_cluster_redirects_total").increment(1);
        return ApiError::NotCoordinator {
            group,
            node: owner.name,
            location,
        }
        .into_response();
    }
    metrics::counter!("assignd_cluster_forwards_total").increment(1);
    forward(&routing, &owner, request)
        .await
        .unwrap_or_else(IntoResponse::into_response)
}

/// `request`'s path and query at `node`.
fn at(node: &NodeAddress, request: &Request) -> String {
    let path = request.uri().path_and_query().map_or("/", |p| p.as_str());
    format!("{}{path}", node.url.trim_end_matches('/'))
}

/// Hop-by-hop headers (RFC 9110 §7.6.1), which belong to one connection
/// and are never passed on; `host` and `content-length` are the new
/// request's own.
fn passed_on(name: &HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "proxy-authenticate"
            | "proxy-authorization"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
            | "host"
            | "content-length"
    )
}

fn copy_headers(from: &HeaderMap, to: &mut HeaderMap) {
    for (name, value) in from {
        if passed_on(name) {
            to.append(name.clone(), value.clone());
        }
    }
}

/// Sends `request` to `owner` and answers what it answered.
async fn forward(
    routing: &Routing,
    owner: &NodeAddress,
    request: Request,
) -> Result<Response, ApiError> {
    let url = at(owner, &request);
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, BODY_BYTES_MAX)
        .await
        .map_err(|e| ApiError::body_failed(&e, ApiError::PayloadTooLarge))?;
    let mut headers = HeaderMap::new();
    copy_headers(&parts.headers, &mut headers);
    headers.insert(
        HeaderName::from_static(FORWARDED_BY_HEADER),
        HeaderValue::from_str(routing.directory.me()).map_err(|_| {
            ApiError::Runtime(crate::runtime::RuntimeError::Internal(
                "a node name that is not a header value",
            ))
        })?,
    );
    let answer = send(routing, owner, parts.method, &url, headers, body).await?;
    Ok(answer)
}

/// One request to another node, its answer read whole (bounded).
async fn send(
    routing: &Routing,
    node: &NodeAddress,
    method: Method,
    url: &str,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Result<Response, ApiError> {
    let unreachable = |reason: String| ApiError::CoordinatorUnreachable {
        node: node.name.clone(),
        reason,
    };
    let answer = routing
        .client
        .request(method, url)
        .headers(headers)
        .body(body)
        .timeout(FORWARD_TIMEOUT)
        .send()
        .await
        .map_err(|e| unreachable(describe(&e)))?;
    let status = answer.status();
    let mut response_headers = HeaderMap::new();
    copy_headers(answer.headers(), &mut response_headers);
    if answer
        .content_length()
        .is_some_and(|len| len > FORWARDED_ANSWER_BYTES_MAX as u64)
    {
        return Err(unreachable(format!(
            "its answer is larger than {FORWARDED_ANSWER_BYTES_MAX} bytes"
        )));
    }
    let bytes = answer
        .bytes()
        .await
        .map_err(|e| unreachable(describe(&e)))?;
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    *response.headers_mut() = response_headers;
    Ok(response)
}

/// `GET /v1/groups` in a cluster: this node's groups and every other
/// node's, by name. A node that does not answer fails the whole list (a
/// list missing a node's groups would read as their absence).
async fn list_every_node(
    routing: &Routing,
    request: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let mut headers = HeaderMap::new();
    copy_headers(request.headers(), &mut headers);
    headers.insert(
        HeaderName::from_static(FORWARDED_BY_HEADER),
        HeaderValue::from_str(routing.directory.me()).unwrap_or(HeaderValue::from_static("?")),
    );
    let local = next.run(request).await;
    if local.status() != StatusCode::OK {
        return Ok(local);
    }
    let mut groups = read_list(local).await?;
    for node in routing.directory.others() {
        let url = format!("{}/v1/groups", node.url.trim_end_matches('/'));
        let answer = send(
            routing,
            &node,
            Method::GET,
            &url,
            headers.clone(),
            Default::default(),
        )
        .await?;
        if answer.status() != StatusCode::OK {
            return Ok(answer);
        }
        groups.groups.extend(read_list(answer).await?.groups);
    }
    groups.groups.sort_by(|a, b| a.name.cmp(&b.name));
    // A group that moved between two reads is listed once.
    groups.groups.dedup_by(|a, b| a.name == b.name);
    Ok(Json(groups).into_response())
}

async fn read_list(answer: Response) -> Result<GroupList, ApiError> {
    let bytes = axum::body::to_bytes(answer.into_body(), FORWARDED_ANSWER_BYTES_MAX)
        .await
        .map_err(|_| {
            ApiError::Runtime(crate::runtime::RuntimeError::Internal(
                "a group list unread",
            ))
        })?;
    serde_json::from_slice(&bytes).map_err(|_| {
        ApiError::Runtime(crate::runtime::RuntimeError::Internal(
            "a node answered a group list this node cannot read",
        ))
    })
}

/// A reqwest error with its causes.
fn describe(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The node that coordinates a group: where its members heartbeat.
///
/// One host coordinates every group itself (`node` and `url` are absent).
/// In a cluster the answer names the owner of the group's shard as this
/// node last read it; the group need not exist.
#[utoipa::path(
    get,
    path = "/v1/groups/{group}/coordinator",
    tag = "members",
    params(("group" = String, Path, description = "The group's name")),
    responses(
        (status = 200, description = "The coordinating node", body = Coordinator),
        (status = 400, description = "`invalid_path`", body = ErrorBody),
        (status = 503, description = "`shard_unavailable`: the group's shard is between owners; retry after `Retry-After` seconds", body = ErrorBody),
    )
)]
pub async fn coordinator(
    State(runtime): State<Arc<Runtime>>,
    routing: Option<axum::Extension<Arc<Routing>>>,
    ApiPath(group): ApiPath<String>,
) -> Result<Json<Coordinator>, ApiError> {
    let shard = runtime.shard_of(&group);
    let Some(axum::Extension(routing)) = routing else {
        return Ok(Json(Coordinator {
            group,
            shard,
            node: None,
            url: None,
            this_node: true,
        }));
    };
    let directory = routing.directory();
    let owner = if runtime.serves(shard) {
        let url = directory.view().nodes.get(directory.me()).cloned();
        url.map(|url| NodeAddress {
            name: directory.me().to_owned(),
            url,
        })
    } else {
        directory.owner(shard)
    };
    let Some(owner) = owner else {
        return Err(ApiError::Runtime(
            crate::runtime::RuntimeError::ShardNotServed {
                shard,
                group: Some(group),
            },
        ));
    };
    Ok(Json(Coordinator {
        group,
        shard,
        this_node: owner.name == directory.me(),
        node: Some(owner.name),
        url: Some(owner.url),
    }))
}
