//! The console at `/ui`: the operators' pages (groups, a group live, the
//! modules, the cluster), hand-written HTML, CSS and JavaScript modules
//! from `host/console/`, embedded in the binary at build time so that the
//! host serves them with nothing to install or build. It owns serving
//! those files (their content types, caching and the Content-Security-Policy
//! that keeps the pages to their own scripts) and nothing else: the pages
//! read the API like any client, with the token the operator logs in with,
//! so the files themselves need no token.

use axum::extract::Path;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

use super::error::ApiError;

/// Where the console lives.
pub const CONSOLE_PATH: &str = "/ui";

/// The policy every console answer carries: scripts, styles, images and
/// API calls from this host only, no inline script or style, no framing.
pub const CONTENT_SECURITY_POLICY_VALUE: &str = "default-src 'self'; script-src 'self'; \
     style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; \
     base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// One file of the console.
pub struct Asset {
    /// Its name under `/ui/`.
    pub name: &'static str,
    pub content_type: &'static str,
    pub body: &'static str,
}

macro_rules! asset {
    ($name:literal, $content_type:expr) => {
        Asset {
            name: $name,
            content_type: $content_type,
            body: include_str!(concat!("../../console/", $name)),
        }
    };
}

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";

/// Every file of `host/console/` (a test checks that the folder holds no
/// other, and that every file a page names is here).
pub const ASSETS: &[Asset] = &[
    asset!("index.html", HTML),
    asset!("style.css", CSS),
    asset!("app.js", JS),
    asset!("api.js", JS),
    asset!("dom.js", JS),
    asset!("table.js", JS),
    asset!("groups.js", JS),
    asset!("group.js", JS),
    asset!("assignment.js", JS),
    asset!("modules.js", JS),
    asset!("rollouts.js", JS),
    asset!("cluster.js", JS),
];

/// The console's routes: `/ui` and `/ui/` answer the page, `/ui/{file}`
/// one of its files. Merged into the app outside the admin token and the
/// OpenAPI document (they are not API routes).
pub fn router<S: Clone + Send + Sync + 'static>() -> axum::Router<S> {
    axum::Router::new()
        .route(CONSOLE_PATH, get(index))
        .route("/ui/", get(|| async { Redirect::permanent(CONSOLE_PATH) }))
        .route("/ui/{file}", get(file))
}

async fn index(headers: HeaderMap) -> Response {
    serve(&ASSETS[0], &headers)
}

async fn file(Path(name): Path<String>, headers: HeaderMap) -> Response {
    match ASSETS.iter().find(|asset| asset.name == name) {
        Some(asset) => serve(asset, &headers),
        None => ApiError::NotFound {
            method: "GET".into(),
            path: format!("{CONSOLE_PATH}/{name}"),
        }
        .into_response(),
    }
}

/// `asset` with its headers; 304 when the browser's copy is this one. The
/// files change only with the binary, and the browser asks each time
/// (`no-cache`) with the ETag it holds.
fn serve(asset: &Asset, request: &HeaderMap) -> Response {
    let etag = etag(asset.body);
    let fresh = request
        .get(IF_NONE_MATCH)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.split(',').any(|tag| tag.trim() == etag));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        asset.body.into_response()
    };
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY_VALUE),
    );
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(ETAG, value);
    }
    response
}

/// A strong ETag of `body`: the first 16 hex digits of its sha256.
fn etag(body: &str) -> String {
    let hex = super::auth::digest_hex(body);
    format!("\"{}\"", &hex[..16])
}
