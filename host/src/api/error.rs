//! The API's one error type and its one mapping to HTTP: every failure,
//! from a malformed body to a fenced member, answers a status and
//! `{"error": {"code": "...", "message": "..."}}`. Server-side failures are
//! logged here and answered without their details. The extractors
//! [`ApiJson`] and [`ApiPath`] turn axum's rejections into this type.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection};
use axum::extract::{FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use super::wire::{ErrorBody, ErrorCode, ErrorDetail};
use crate::protocol::core::ProtocolError;
use crate::registry::RegistryError;
use crate::runtime::RuntimeError;

/// The largest request body accepted.
pub const BODY_BYTES_MAX: usize = 1 << 20;

/// Every way a request fails.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// Not JSON, or not the expected shape (missing field, wrong type,
    /// unknown field, value out of range).
    #[error("{0}")]
    InvalidJson(String),
    #[error("{0}")]
    InvalidPath(String),
    #[error(
        "the request body is larger than the route's limit ({BODY_BYTES_MAX} bytes; a heartbeat's {} bytes)",
        assignd_wire::HEARTBEAT_BODY_BYTES_MAX
    )]
    PayloadTooLarge,
    #[error(
        "the module is larger than {} bytes",
        crate::registry::MODULE_UPLOAD_BYTES_MAX
    )]
    ModuleTooLarge,
    /// A missing or malformed query parameter.
    #[error("{0}")]
    InvalidQuery(String),
    #[error("{0}")]
    UnsupportedMediaType(String),
    #[error("no route for {method} {path}")]
    NotFound { method: String, path: String },
    #[error("{path} does not accept {method}")]
    MethodNotAllowed { method: String, path: String },
    /// No credential where one is required: no `Authorization: Bearer`
    /// header (answered with `WWW-Authenticate: Bearer`).
    #[error("{0}")]
    Unauthorized(&'static str),
    /// A bearer token that is not the one required.
    #[error("{0}")]
    Forbidden(&'static str),
    /// The read-only token on an admin route that changes something.
    #[error("the read-only token reads and changes nothing: this route needs the admin token")]
    ReadOnlyToken,
    /// A heartbeat body past the ordinary limit while the host reads as
    /// many as it may at once (`api/large_bodies.rs`).
    #[error(
        "the host is reading as many large heartbeat bodies as it may at once ({} bytes in all); retry shortly",
        super::large_bodies::LARGE_BODIES_BYTES_MAX
    )]
    LargeBodiesBusy,
    /// A routes watch past the host's watcher cap (`serve
    /// --routes-watchers-max`).
    #[error(
        "this host holds as many routes watchers as it may ({0}); retry after Retry-After seconds"
    )]
    TooManyWatchers(usize),
    /// A routes lookup of a topic the group does not have.
    #[error("group {group:?} has no topic {topic:?}")]
    UnknownTopic { group: String, topic: String },
    /// The request body did not arrive within the body-read timeout.
    #[error(transparent)]
    BodyTimeout(#[from] super::server::BodyTimeout),
    /// The connection ended (closed or reset) before the whole body its
    /// head declared arrived.
    #[error("the request body was cut short: the connection ended before all of it arrived ({0})")]
    BodyIncomplete(String),
    /// Cluster mode: another node coordinates the group; the request
    /// belongs at `location` (answered 307 with `Location`).
    #[error("group {group:?} is coordinated by node {node:?}: send the request to {location}")]
    NotCoordinator {
        group: String,
        node: String,
        location: String,
    },
    /// Cluster mode: the node coordinating the group did not answer a
    /// request forwarded to it.
    #[error("node {node:?}, which coordinates the group, did not answer: {reason}")]
    CoordinatorUnreachable { node: String, reason: String },
    /// A rollout request refused (`crate::rollout_runner`).
    #[error(transparent)]
    Rollout(#[from] crate::rollout_runner::RolloutRefusal),
    /// A handler panicked (a bug).
    #[error("internal error")]
    Panicked,
}

impl From<ProtocolError> for ApiError {
    fn from(error: ProtocolError) -> Self {
        ApiError::Runtime(RuntimeError::Protocol(error))
    }
}

/// The status of each protocol error code.
pub fn protocol_status(error: &ProtocolError) -> StatusCode {
    match error {
        ProtocolError::UnknownGroup(_) | ProtocolError::UnknownMember(..) => StatusCode::NOT_FOUND,
        ProtocolError::Fenced { .. }
        | ProtocolError::Replaced { .. }
        | ProtocolError::StaleEpoch { .. }
        | ProtocolError::NotOwned { .. }
        | ProtocolError::GroupFull(_)
        | ProtocolError::NoPreviousBinding(_) => StatusCode::CONFLICT,
        ProtocolError::Invalid(_) => StatusCode::BAD_REQUEST,
    }
}

impl ApiError {
    /// The status and stable code of this error.
    pub fn status_and_code(&self) -> (StatusCode, ErrorCode) {
        match self {
            ApiError::Runtime(RuntimeError::Protocol(e)) => (protocol_status(e), e.error_code()),
            ApiError::Runtime(RuntimeError::UnknownAssignor { .. }) => {
                (StatusCode::BAD_REQUEST, ErrorCode::UnknownAssignor)
            }
            ApiError::Runtime(RuntimeError::EmptyGroup(_)) => {
                (StatusCode::CONFLICT, ErrorCode::EmptyGroup)
            }
            ApiError::Runtime(RuntimeError::GroupsMaxReached { .. }) => {
                (StatusCode::CONFLICT, ErrorCode::GroupsMaxReached)
            }
            ApiError::Runtime(
                RuntimeError::MemberTokenMissing(_) | RuntimeError::ReaderTokenMissing(_),
            ) => (StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized),
            ApiError::Runtime(
                RuntimeError::MemberTokenWrong(_) | RuntimeError::ReaderTokenWrong(_),
            ) => (StatusCode::FORBIDDEN, ErrorCode::Forbidden),
            ApiError::Runtime(RuntimeError::FormatLevelTooLow { .. }) => {
                (StatusCode::CONFLICT, ErrorCode::FormatLevelTooLow)
            }
            ApiError::Runtime(RuntimeError::ConfigWithoutMemberToken(_)) => {
                (StatusCode::BAD_REQUEST, ErrorCode::MemberTokenRequired)
            }
            // Refused whatever the heartbeat carries: the group is at fault.
            ApiError::Runtime(RuntimeError::MemberTokenRequired(_)) => {
                (StatusCode::FORBIDDEN, ErrorCode::MemberTokenRequired)
            }
            ApiError::Runtime(RuntimeError::JoinRateLimited { .. }) => {
                (StatusCode::TOO_MANY_REQUESTS, ErrorCode::JoinRateLimited)
            }
            ApiError::Runtime(RuntimeError::AssignorFailed { .. }) => {
                (StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::AssignorFailed)
            }
            ApiError::Runtime(RuntimeError::Storage(_)) => {
                (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::StorageFailed)
            }
            ApiError::Runtime(RuntimeError::ShardNotServed { .. }) => {
                (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::ShardUnavailable)
            }
            ApiError::Runtime(RuntimeError::StorageUnavailable(_)) => (
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::StorageUnavailable,
            ),
            ApiError::Runtime(RuntimeError::UnknownShard { .. }) => {
                (StatusCode::NOT_FOUND, ErrorCode::UnknownShard)
            }
            ApiError::Runtime(RuntimeError::ShardLoadFailed { .. }) => {
                (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::ShardLoadFailed)
            }
            ApiError::Runtime(RuntimeError::Internal(_)) | ApiError::Panicked => {
                (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Internal)
            }
            ApiError::InvalidJson(_) => (StatusCode::BAD_REQUEST, ErrorCode::InvalidJson),
            ApiError::InvalidPath(_) => (StatusCode::BAD_REQUEST, ErrorCode::InvalidPath),
            ApiError::Runtime(RuntimeError::Registry(e)) => registry_status_and_code(e),
            ApiError::PayloadTooLarge | ApiError::ModuleTooLarge => {
                (StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::PayloadTooLarge)
            }
            ApiError::InvalidQuery(_) => (StatusCode::BAD_REQUEST, ErrorCode::InvalidQuery),
            ApiError::TooManyWatchers(_) => {
                (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::TooManyWatchers)
            }
            ApiError::UnknownTopic { .. } => (StatusCode::NOT_FOUND, ErrorCode::UnknownTopic),
            ApiError::UnsupportedMediaType(_) => (
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                ErrorCode::UnsupportedMediaType,
            ),
            ApiError::NotFound { .. } => (StatusCode::NOT_FOUND, ErrorCode::NotFound),
            ApiError::MethodNotAllowed { .. } => {
                (StatusCode::METHOD_NOT_ALLOWED, ErrorCode::MethodNotAllowed)
            }
            ApiError::Unauthorized(_) => (StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized),
            ApiError::Forbidden(_) => (StatusCode::FORBIDDEN, ErrorCode::Forbidden),
            ApiError::ReadOnlyToken => (StatusCode::FORBIDDEN, ErrorCode::ReadOnlyToken),
            ApiError::BodyTimeout(_) => (StatusCode::REQUEST_TIMEOUT, ErrorCode::RequestTimeout),
            ApiError::BodyIncomplete(_) => (StatusCode::BAD_REQUEST, ErrorCode::IncompleteBody),
            ApiError::NotCoordinator { .. } => {
                (StatusCode::TEMPORARY_REDIRECT, ErrorCode::NotCoordinator)
            }
            ApiError::CoordinatorUnreachable { .. } => (
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::CoordinatorUnreachable,
            ),
            ApiError::LargeBodiesBusy => (
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::TooManyLargeBodies,
            ),
            ApiError::Rollout(refusal) => rollout_status_and_code(refusal),
        }
    }
}

/// The status and code of each rollout refusal.
fn rollout_status_and_code(
    refusal: &crate::rollout_runner::RolloutRefusal,
) -> (StatusCode, ErrorCode) {
    use crate::rollout_runner::RolloutRefusal as R;
    match refusal {
        R::Spec(_) | R::Reason(_) => (StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest),
        R::UnknownModule(_) => (StatusCode::NOT_FOUND, ErrorCode::UnknownModule),
        R::UnknownRollout(_) => (StatusCode::NOT_FOUND, ErrorCode::UnknownRollout),
        R::Exists(_) => (StatusCode::CONFLICT, ErrorCode::RolloutExists),
        R::GroupInRollout { .. } => (StatusCode::CONFLICT, ErrorCode::GroupInRollout),
        R::EmptySelection(_) => (StatusCode::CONFLICT, ErrorCode::EmptySelection),
        R::Phase(_) => (StatusCode::CONFLICT, ErrorCode::RolloutPhase),
        R::NotCoordinating => (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::ShardUnavailable),
        R::Unavailable(_) => (
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::StorageUnavailable,
        ),
    }
}

/// The status and code of each registry refusal. A module that does not
/// load answers the plugin runtime's code for what failed (`not_wasm`,
/// `core_module`, `wrong_world`, `foreign_import`, `compile_failed`, …).
fn registry_status_and_code(error: &RegistryError) -> (StatusCode, ErrorCode) {
    match error {
        RegistryError::InvalidName(_) => (StatusCode::BAD_REQUEST, ErrorCode::InvalidModuleName),
        RegistryError::Invalid(crate::plugins::PluginError::CompileBusy { .. }) => {
            (StatusCode::SERVICE_UNAVAILABLE, ErrorCode::CompileBusy)
        }
        RegistryError::Invalid(plugin) => (StatusCode::BAD_REQUEST, plugin.error_code()),
        RegistryError::SelfTest { .. } => {
            (StatusCode::UNPROCESSABLE_ENTITY, ErrorCode::SelfTestFailed)
        }
        RegistryError::ParamsRejected { .. } => {
            (StatusCode::BAD_REQUEST, ErrorCode::ParamsRejected)
        }
        RegistryError::NameTaken { .. } => (StatusCode::CONFLICT, ErrorCode::ModuleNameTaken),
        RegistryError::ModulesMaxReached { .. } => {
            (StatusCode::CONFLICT, ErrorCode::ModulesMaxReached)
        }
        RegistryError::ModuleBytesMaxReached { .. } => {
            (StatusCode::CONFLICT, ErrorCode::ModuleBytesMaxReached)
        }
        RegistryError::Unknown(_) => (StatusCode::NOT_FOUND, ErrorCode::UnknownModule),
        RegistryError::Builtin(_) => (StatusCode::CONFLICT, ErrorCode::BuiltinAssignor),
        RegistryError::InUse { .. } => (StatusCode::CONFLICT, ErrorCode::ModuleInUse),
        RegistryError::Storage(_) | RegistryError::GuestThread(_) => {
            (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Internal)
        }
    }
}

/// How the host logs an answer, by its error code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// A refusal by design the caller acts on (retry, fix the request):
    /// the event behind it, a shard moving or etcd away, is logged once
    /// where it happens.
    Debug,
    /// A refusal by design an operator may want to see (a limit reached):
    /// at most one line per [`REFUSED_LOG_INTERVAL_MS`](super::server::REFUSED_LOG_INTERVAL_MS) per code, with the
    /// count since the last.
    Warn,
    /// What needs a person: the storage failed, a bug. The details are
    /// logged and never answered.
    Error,
}

/// The one place that decides how loudly an answer is logged. ERROR is
/// kept for what needs a person, so an alert on ERROR does not fire on a
/// takeover, an etcd outage (logged once by the node) or a limit doing
/// its job. A server error this does not know is an ERROR. (A connection
/// past the cap never reaches the router: the accept loop answers it and
/// logs a rate-limited WARN, [`super::server`].)
pub fn log_level(status: StatusCode, code: ErrorCode) -> LogLevel {
    match code {
        ErrorCode::ShardUnavailable
        | ErrorCode::CoordinatorUnreachable
        | ErrorCode::StorageUnavailable => LogLevel::Debug,
        ErrorCode::CompileBusy
        | ErrorCode::GroupsMaxReached
        | ErrorCode::ModulesMaxReached
        | ErrorCode::ModuleBytesMaxReached
        | ErrorCode::TooManyLargeBodies
        | ErrorCode::TooManyWatchers => LogLevel::Warn,
        _ if status.is_server_error() => LogLevel::Error,
        _ => LogLevel::Debug,
    }
}

/// The refusals of one [`LogLevel::Warn`] code: when one was last logged,
/// and how many came since.
#[derive(Clone, Copy)]
struct Refusals {
    logged: Option<std::time::Instant>,
    unlogged: u64,
}

/// Logs one refusal of `code` at WARN unless one was logged less than
/// [`REFUSED_LOG_INTERVAL_MS`](super::server::REFUSED_LOG_INTERVAL_MS)
/// ago; the line counts the refusals since.
fn warn_rate_limited(code: ErrorCode, error: &ApiError) {
    use std::collections::BTreeMap;
    use std::sync::Mutex;
    use std::time::{Duration, Instant};

    use super::server::REFUSED_LOG_INTERVAL_MS;

    static REFUSED: Mutex<BTreeMap<ErrorCode, Refusals>> = Mutex::new(BTreeMap::new());
    let mut refused = REFUSED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let refusals = refused.entry(code).or_insert(Refusals {
        logged: None,
        unlogged: 0,
    });
    refusals.unlogged += 1;
    let interval = Duration::from_millis(REFUSED_LOG_INTERVAL_MS);
    if refusals.logged.is_none_or(|at| at.elapsed() >= interval) {
        tracing::warn!(error = %error, code = code.as_str(), refused = refusals.unlogged, "requests refused");
        refusals.logged = Some(Instant::now());
        refusals.unlogged = 0;
    } else {
        tracing::debug!(error = %error, code = code.as_str(), "request refused");
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (status, code) = self.status_and_code();
        let level = log_level(status, code);
        match level {
            LogLevel::Debug => {
                tracing::debug!(error = %self, code = code.as_str(), "request refused")
            }
            LogLevel::Warn => warn_rate_limited(code, &self),
            // Logged with its details; the client gets no internals.
            LogLevel::Error => {
                tracing::error!(error = %self, code = code.as_str(), "request failed")
            }
        }
        let message = if code == ErrorCode::StorageUnavailable {
            // The node logs the outage once; its cause (etcd's endpoints
            // and errors) is the operator's, not the caller's.
            "the coordinator's storage does not answer, so no change can be made durable now \
             (one this answers may or may not have landed); retry later"
                .to_owned()
        } else if level == LogLevel::Error {
            match status {
                StatusCode::SERVICE_UNAVAILABLE => {
                    "the coordinator cannot persist changes and refuses requests; see the server log"
                        .to_owned()
                }
                _ => "internal error; see the server log".to_owned(),
            }
        } else {
            self.to_string()
        };
        let body = ErrorBody {
            error: ErrorDetail {
                code: code.as_str().to_owned(),
                message,
                location: match &self {
                    ApiError::NotCoordinator { location, .. } => Some(location.clone()),
                    _ => None,
                },
            },
        };
        let mut response = (status, Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let ApiError::Runtime(RuntimeError::JoinRateLimited { retry_after_ms, .. }) = &self {
            // Whole seconds, rounded up: never 0.
            let seconds = retry_after_ms.div_ceil(1_000).max(1);
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        match &self {
            ApiError::Runtime(
                RuntimeError::ShardNotServed { .. } | RuntimeError::StorageUnavailable(_),
            )
            | ApiError::CoordinatorUnreachable { .. }
            | ApiError::TooManyWatchers(_)
            | ApiError::LargeBodiesBusy => {
                // A shard is unserved while it loads, unloads or moves:
                // briefly. The storage's outage may last, and the caller
                // asks again anyway.
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, HeaderValue::from(1u32));
            }
            ApiError::NotCoordinator { location, .. } => {
                if let Ok(value) = HeaderValue::from_str(location) {
                    response.headers_mut().insert(header::LOCATION, value);
                }
            }
            _ => {}
        }
        response
    }
}

impl ApiError {
    /// The error of a body that could not be read: 408 if the server's
    /// body-read deadline cut it, else `otherwise`.
    pub fn body_failed(error: &(dyn std::error::Error + 'static), otherwise: ApiError) -> ApiError {
        body_timeout(error).map_or(otherwise, ApiError::BodyTimeout)
    }
}

/// The error of an upload body that could not be read: 408 if the
/// server's body-read deadline cut it, 400 `incomplete_body` if the
/// connection ended before the body did (hyper's error is in the chain of
/// causes), else it was over `limit`: `too_large`.
pub fn upload_body_failed(
    error: &(dyn std::error::Error + 'static),
    too_large: ApiError,
) -> ApiError {
    if let Some(timeout) = body_timeout(error) {
        return ApiError::BodyTimeout(timeout);
    }
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(cut) = error.downcast_ref::<hyper::Error>() {
            return ApiError::BodyIncomplete(cut.to_string());
        }
        cause = error.source();
    }
    too_large
}

/// The [`BodyTimeout`](super::server::BodyTimeout) somewhere in `error`'s
/// chain of causes, if the server's deadline is why a body read failed.
fn body_timeout(error: &(dyn std::error::Error + 'static)) -> Option<super::server::BodyTimeout> {
    let mut cause = Some(error);
    while let Some(error) = cause {
        if let Some(timeout) = error.downcast_ref::<super::server::BodyTimeout>() {
            return Some(super::server::BodyTimeout(timeout.0));
        }
        cause = error.source();
    }
    None
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        if let Some(timeout) = body_timeout(&rejection) {
            return ApiError::BodyTimeout(timeout);
        }
        match rejection.status() {
            StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => {
                ApiError::UnsupportedMediaType(rejection.body_text())
            }
            _ => ApiError::InvalidJson(rejection.body_text()),
        }
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::InvalidPath(rejection.body_text())
    }
}

/// A JSON body whose rejections are [`ApiError`]s.
pub struct ApiJson<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = json_bytes(request, state).await?;
        // A key twice in one object is refused, at every depth: serde_json
        // keeps the last for a map, so `{"member_token": "…",
        // "member_token": null}` would silently mean the second.
        if let Err(error) = serde_json::from_slice::<NoDuplicateKeys>(&bytes)
            && error.is_data()
        {
            return Err(ApiError::InvalidJson(format!(
                "Failed to parse the request body as JSON: {error}"
            )));
        }
        let Json(value) = Json::<T>::from_bytes(&bytes)?;
        Ok(ApiJson(value))
    }
}

/// A body type whose own `Deserialize` refuses a key twice: a struct
/// derived by serde (which answers `duplicate field`) with no map and no
/// flattened field at any depth. Implement it only for such a type.
pub trait RefusesDuplicateKeys: DeserializeOwned {}

impl RefusesDuplicateKeys for assignd_wire::HeartbeatRequest {}

/// [`ApiJson`] for a [`RefusesDuplicateKeys`] body: read in one pass,
/// without the second pass over the body that finds a key twice in a map.
/// The member route takes it: that pass, with a set of every object's
/// keys, was about a twentieth of a steady heartbeat's server CPU.
pub struct StructJson<T>(pub T);

impl<T: RefusesDuplicateKeys, S: Send + Sync> FromRequest<S> for StructJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = json_bytes(request, state).await?;
        // Parsed plainly first: axum's parse tracks the path to every
        // field for its error message, which costs a good part of the
        // parse. A body that fails is parsed again by axum, for the same
        // error as before.
        if let Ok(value) = serde_json::from_slice::<T>(&bytes) {
            return Ok(StructJson(value));
        }
        let Json(value) = Json::<T>::from_bytes(&bytes)?;
        Ok(StructJson(value))
    }
}

/// The body of a request that says it is JSON, whole.
async fn json_bytes<S: Send + Sync>(
    request: Request,
    state: &S,
) -> Result<axum::body::Bytes, ApiError> {
    if !json_content_type(request.headers()) {
        return Err(ApiError::UnsupportedMediaType(
            "Expected request with `Content-Type: application/json`".into(),
        ));
    }
    axum::body::Bytes::from_request(request, state)
        .await
        .map_err(|rejection| match rejection.status() {
            StatusCode::PAYLOAD_TOO_LARGE => ApiError::PayloadTooLarge,
            _ => ApiError::body_failed(&rejection, ApiError::InvalidJson(rejection.body_text())),
        })
}

/// Whether the request says its body is JSON (`application/json` or
/// `application/*+json`, parameters allowed), as axum's `Json` checks.
fn json_content_type(headers: &axum::http::HeaderMap) -> bool {
    let Some(value) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || essence
            .strip_prefix("application/")
            .is_some_and(|subtype| subtype.ends_with("+json"))
}

/// Any JSON value, refusing an object that holds a key twice.
struct NoDuplicateKeys;

impl<'de> serde::Deserialize<'de> for NoDuplicateKeys {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NoDuplicateKeys)
    }
}

impl<'de> serde::de::Visitor<'de> for NoDuplicateKeys {
    type Value = NoDuplicateKeys;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_str<E>(self, _: &str) -> Result<Self, E> {
        Ok(self)
    }
    fn visit_unit<E>(self) -> Result<Self, E> {
        Ok(self)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<NoDuplicateKeys>()?.is_some() {}
        Ok(self)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self, A::Error> {
        let mut keys = std::collections::HashSet::new();
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if !keys.insert(key.clone().into_owned()) {
                return Err(serde::de::Error::custom(format!("duplicate key {key:?}")));
            }
            map.next_value::<NoDuplicateKeys>()?;
        }
        Ok(self)
    }
}

/// Path parameters whose rejections are [`ApiError`]s.
pub struct ApiPath<T>(pub T);

impl<T: DeserializeOwned + Send, S: Send + Sync> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let Path(value) = Path::<T>::from_request_parts(parts, state).await?;
        Ok(ApiPath(value))
    }
}

#[cfg(test)]
mod log_level_tests {
    use super::*;

    #[test]
    fn only_what_needs_a_person_is_an_error() {
        let unavailable = StatusCode::SERVICE_UNAVAILABLE;
        for code in [
            ErrorCode::ShardUnavailable,
            ErrorCode::CoordinatorUnreachable,
            ErrorCode::StorageUnavailable,
        ] {
            assert_eq!(log_level(unavailable, code), LogLevel::Debug, "{code}");
        }
        assert_eq!(
            log_level(unavailable, ErrorCode::CompileBusy),
            LogLevel::Warn
        );
        // A server error not listed as a refusal by design needs a person.
        for code in [
            ErrorCode::StorageFailed,
            ErrorCode::ShardLoadFailed,
            ErrorCode::ReadFailed,
        ] {
            assert_eq!(log_level(unavailable, code), LogLevel::Error, "{code}");
        }
        assert_eq!(
            log_level(StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::Internal),
            LogLevel::Error
        );
        for (status, code) in [
            (StatusCode::BAD_REQUEST, ErrorCode::InvalidJson),
            (StatusCode::CONFLICT, ErrorCode::Fenced),
            (StatusCode::TOO_MANY_REQUESTS, ErrorCode::JoinRateLimited),
        ] {
            assert_eq!(log_level(status, code), LogLevel::Debug, "{code}");
        }
    }

    /// The API answers only [`ErrorCode`]s (its mapping returns that
    /// type), so listing every one in the architecture's table of errors
    /// lists every code the API can return.
    #[test]
    fn every_code_the_api_can_answer_is_in_the_documented_table() {
        let doc = include_str!("../../../docs/architecture.md");
        let start = doc.find("**Errors.** Every failure answers").unwrap();
        let end = start + doc[start..].find("Logging. One function").unwrap();
        let table = &doc[start..end];
        let missing: Vec<&str> = ErrorCode::ALL
            .iter()
            .map(|code| code.as_str())
            .filter(|code| !table.contains(&format!("`{code}`")))
            .collect();
        assert!(
            missing.is_empty(),
            "not in docs/architecture.md's errors: {missing:?}"
        );
    }

    #[test]
    fn a_refusal_by_design_answers_its_own_message_and_a_failure_hides_its_details() {
        let busy = ApiError::Runtime(RuntimeError::Registry(RegistryError::Invalid(
            crate::plugins::PluginError::CompileBusy { running: 2 },
        )));
        let message = error_message(busy.into_response());
        assert!(message.contains("being compiled already"), "{message}");
        let internal = ApiError::Runtime(RuntimeError::Internal("a secret detail"));
        let message = error_message(internal.into_response());
        assert_eq!(message, "internal error; see the server log");
    }

    fn error_message(response: Response) -> String {
        let body = body_bytes(response);
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        value["error"]["message"].as_str().unwrap().to_owned()
    }

    fn body_bytes(response: Response) -> Vec<u8> {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(axum::body::to_bytes(response.into_body(), usize::MAX))
            .unwrap()
            .to_vec()
    }
}
