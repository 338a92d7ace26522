//! One heartbeat over HTTP/1.1: encode, send with a timeout, classify the
//! answer. It owns the URL layout, where the heartbeat goes (a cluster's
//! redirects and bootstrap URLs) and the mapping of HTTP outcomes to
//! [`ClientError`]; it holds no member state.
//!
//! In a cluster any node answers: a node that does not coordinate the
//! group answers `307` with the coordinator's URL, which the transport
//! follows at once (up to [`REDIRECTS_MAX`] hops) and remembers, so the
//! next heartbeats go there directly. When the remembered node stops
//! answering (it died, or left), the transport forgets it and asks the
//! bootstrap URLs again, in turn. A shard between owners (503
//! `shard_unavailable`) is retried within the same request timeout, after
//! a short pause: the member loop sees neither a move nor a takeover as
//! long as it ends within that time.
//!
//! It also tells whether a failed heartbeat may have reached the group's
//! coordinator: one whose every attempt was refused a connection (never
//! sent), redirected (a node that does not coordinate the group) or
//! answered 503 `shard_unavailable` (a node that does not serve the
//! group's shard) certainly did not, and fails as
//! [`ClientError::Unreached`]; the member loop then keeps its tasks on the
//! answer's unreached lease. A timeout, a connection lost after sending,
//! any other failure or any answer may have reached it.

use std::sync::Mutex;
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, HeaderValue};

use crate::ClientError;
use crate::config::MemberConfig;
use crate::wire::{ErrorBody, HeartbeatRequest, HeartbeatResponse};

/// The longest error body kept in a message.
const ERROR_BODY_BYTES_MAX: usize = 512;

/// The longest `Retry-After` the client takes from the host, in seconds.
const RETRY_AFTER_S_MAX: u64 = 60;

/// The most redirects one heartbeat follows (a stale node may point at a
/// node that has just handed the group on).
pub const REDIRECTS_MAX: u32 = 5;

/// The first pause before a heartbeat to a shard between owners is sent
/// again; it doubles up to [`IN_TRANSIT_PAUSE_MAX`], within the request
/// timeout.
const IN_TRANSIT_PAUSE_MIN: Duration = Duration::from_millis(25);
const IN_TRANSIT_PAUSE_MAX: Duration = Duration::from_millis(400);

/// The host's codes the transport handles itself.
const NOT_COORDINATOR: &str = assignd_wire::ErrorCode::NotCoordinator.as_str();
const SHARD_UNAVAILABLE: &str = "shard_unavailable";
const COORDINATOR_UNREACHABLE: &str = "coordinator_unreachable";

pub struct Transport {
    client: reqwest::Client,
    /// The shared pool this member sends over, if any (it waits for a turn).
    shared: Option<crate::Connections>,
    /// Each request's, on a shared pool as on the member's own.
    request_timeout: std::time::Duration,
    /// The heartbeat URL at each bootstrap URL (`MemberConfig::url`), in
    /// order.
    bootstrap: Vec<reqwest::Url>,
    /// Where heartbeats go now: the coordinator a redirect named, or a
    /// bootstrap URL (by index).
    target: Mutex<Target>,
    /// `Bearer TOKEN` of the member token, if any (marked sensitive).
    authorization: Option<HeaderValue>,
}

#[derive(Clone)]
enum Target {
    Bootstrap(usize),
    /// The coordinator's heartbeat URL, and the bootstrap URL (by index)
    /// to ask again when it stops answering: the one that led here.
    Coordinator(reqwest::Url, usize),
}

impl Target {
    /// Where to go when this target does not answer.
    fn next(&self, bootstraps: usize) -> Target {
        match self {
            Target::Coordinator(_, from) => Target::Bootstrap(*from),
            Target::Bootstrap(i) => Target::Bootstrap((i + 1) % bootstraps),
        }
    }

    fn bootstrap(&self) -> usize {
        match self {
            Target::Coordinator(_, from) | Target::Bootstrap(from) => *from,
        }
    }
}

/// What one request came back with.
enum Outcome {
    /// The heartbeat's result: an answer, or a failure after which no other
    /// node is tried (a timeout, a host failure, an unreadable answer). Any
    /// of them may have reached the coordinator.
    Done(Result<HeartbeatResponse, ClientError>),
    /// A failure after which no other node is tried, and which reached no
    /// coordinator: the request never went out (no turn on the shared
    /// connections in time), or a node that does not coordinate the group
    /// redirected it without a usable location.
    NotReached(ClientError),
    /// Sent elsewhere: the coordinator's heartbeat URL. The node that
    /// answered does not coordinate the group.
    Redirected(reqwest::Url),
    /// The group's shard is between owners: try again shortly.
    /// `may_have_reached` is false for 503 `shard_unavailable` (the node
    /// does not serve the shard and processed nothing).
    InTransit {
        error: ClientError,
        may_have_reached: bool,
    },
    /// This node refused the connection: the request was never sent.
    Refused(ClientError),
    /// The connection failed after the request may have gone out (reset,
    /// closed before the answer): the node may have processed it.
    Unanswered(ClientError),
}

impl Outcome {
    /// Whether this request may have reached the group's coordinator.
    fn may_have_reached(&self) -> bool {
        match self {
            Outcome::Done(_) | Outcome::Unanswered(_) => true,
            Outcome::NotReached(_) | Outcome::Redirected(_) | Outcome::Refused(_) => false,
            Outcome::InTransit {
                may_have_reached, ..
            } => *may_have_reached,
        }
    }
}

/// `error`, the last of a heartbeat whose attempts all failed: as it is if
/// one of them may have reached the coordinator, else as
/// [`ClientError::Unreached`].
fn failed(error: ClientError, may_have_reached: bool) -> ClientError {
    if may_have_reached {
        error
    } else {
        ClientError::Unreached(error.to_string())
    }
}

impl Transport {
    pub fn new(config: &MemberConfig) -> Result<Self, ClientError> {
        let bootstrap = config
            .urls()
            .map(|base| group_route_url(base, &config.group, "heartbeat"))
            .collect::<Result<Vec<_>, _>>()?;
        if bootstrap.is_empty() {
            return Err(ClientError::Config("no host URL".into()));
        }
        let client = match &config.connections {
            Some(shared) => shared.client().clone(),
            None => reqwest::Client::builder()
                .connect_timeout(config.request_timeout)
                .pool_idle_timeout(crate::config::CONNECTION_IDLE_MAX)
                // Followed here, with the member token kept (reqwest drops
                // `Authorization` on a redirect to another host).
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .map_err(|e| ClientError::Config(format!("HTTP client: {e}")))?,
        };
        let authorization = config
            .member_token
            .as_ref()
            .map(|token| bearer(token))
            .transpose()?;
        Ok(Transport {
            client,
            shared: config.connections.clone(),
            request_timeout: config.request_timeout,
            bootstrap,
            target: Mutex::new(Target::Bootstrap(0)),
            authorization,
        })
    }

    fn target(&self) -> Target {
        self.target
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn set_target(&self, target: Target) {
        *self.target.lock().unwrap_or_else(|e| e.into_inner()) = target;
    }

    /// Sends `request` to the group's coordinator, following redirects,
    /// trying the bootstrap URLs when the coordinator does not answer and
    /// waiting out a shard between owners, all within the request timeout.
    /// Fails as [`ClientError::Unreached`] when no attempt can have reached
    /// a coordinator of the group.
    pub async fn heartbeat(
        &self,
        request: &HeartbeatRequest,
    ) -> Result<HeartbeatResponse, ClientError> {
        let deadline = tokio::time::Instant::now() + self.request_timeout;
        let mut redirects = 0;
        // Each bootstrap URL is tried at most once per heartbeat.
        let mut unreachable_bootstraps = 0;
        let mut pause = IN_TRANSIT_PAUSE_MIN;
        // Over every attempt of this heartbeat: one that may have reached
        // the coordinator makes a failure ambiguous.
        let mut may_have_reached = false;
        loop {
            let target = self.target();
            let url = match &target {
                Target::Bootstrap(i) => self.bootstrap[*i].clone(),
                Target::Coordinator(url, _) => url.clone(),
            };
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                let error =
                    ClientError::Transport(format!("no answer within {:?}", self.request_timeout));
                return Err(failed(error, may_have_reached));
            }
            let outcome = self.send(url, request, left).await;
            may_have_reached |= outcome.may_have_reached();
            match outcome {
                Outcome::Done(result) => return result,
                Outcome::NotReached(error) => return Err(failed(error, may_have_reached)),
                Outcome::Redirected(to) if redirects < REDIRECTS_MAX => {
                    redirects += 1;
                    self.set_target(Target::Coordinator(to, target.bootstrap()));
                }
                Outcome::Redirected(to) => {
                    let error = ClientError::Transport(format!(
                        "more than {REDIRECTS_MAX} redirects, the last to {to}"
                    ));
                    return Err(failed(error, may_have_reached));
                }
                Outcome::InTransit { error, .. } => {
                    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                    if left <= pause {
                        return Err(failed(error, may_have_reached));
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(IN_TRANSIT_PAUSE_MAX);
                }
                Outcome::Refused(error) | Outcome::Unanswered(error) => {
                    // A coordinator that died or left: ask the bootstrap
                    // URL that led to it again.
                    if let Target::Bootstrap(_) = target {
                        unreachable_bootstraps += 1;
                    }
                    self.set_target(target.next(self.bootstrap.len()));
                    if unreachable_bootstraps >= self.bootstrap.len() {
                        return Err(failed(error, may_have_reached));
                    }
                }
            }
        }
    }

    /// One request to `url`, within `timeout`.
    async fn send(
        &self,
        url: reqwest::Url,
        request: &HeartbeatRequest,
        timeout: Duration,
    ) -> Outcome {
        // On a shared pool the wait for a turn counts in the request's time.
        let _turn = match &self.shared {
            Some(shared) => match tokio::time::timeout(timeout, shared.turn()).await {
                Ok(turn) => Some(turn),
                Err(_) => {
                    return Outcome::NotReached(ClientError::Transport(format!(
                        "no turn on the shared connections within {:?}",
                        self.request_timeout
                    )));
                }
            },
            None => None,
        };
        let mut post = self.client.post(url.clone()).timeout(timeout).json(request);
        if let Some(authorization) = &self.authorization {
            post = post.header(AUTHORIZATION, authorization.clone());
        }
        let answer = match post.send().await {
            Ok(answer) => answer,
            // Checked first: a connect timeout is a timeout too, but the
            // request never went out.
            Err(e) if e.is_connect() => {
                return Outcome::Refused(ClientError::Transport(describe(&e)));
            }
            Err(e) if e.is_timeout() => {
                // A node that stopped answering (paused, cut off): the
                // next heartbeat asks the (next) bootstrap URL.
                self.set_target(self.target().next(self.bootstrap.len()));
                return Outcome::Done(Err(ClientError::Transport(describe(&e))));
            }
            Err(e) => return Outcome::Unanswered(ClientError::Transport(describe(&e))),
        };
        let status = answer.status();
        let redirected = matches!(
            status,
            StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT
        );
        if redirected
            && let Some(to) = answer
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|location| url.join(location).ok())
                .filter(|to| matches!(to.scheme(), "http" | "https"))
        {
            return Outcome::Redirected(to);
        }
        // Seconds only (the host sends no HTTP dates), capped: a host's
        // hint must not park a member past its own lease.
        let retry_after = answer
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|s| Duration::from_secs(s.min(RETRY_AFTER_S_MAX)));
        let body = match answer.bytes().await {
            Ok(body) => body,
            Err(e) => return Outcome::Done(Err(ClientError::Transport(describe(&e)))),
        };
        if status.is_success() {
            return Outcome::Done(
                serde_json::from_slice(&body)
                    .map_err(|e| ClientError::Decode(format!("heartbeat answer: {e}"))),
            );
        }
        let error = serde_json::from_slice::<ErrorBody>(&body).ok();
        let message = match &error {
            Some(body) => body.error.message.clone(),
            None => {
                let text = String::from_utf8_lossy(&body);
                let mut cut = ERROR_BODY_BYTES_MAX.min(text.len());
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text[..cut].to_owned()
            }
        };
        let code = error.as_ref().map(|body| body.error.code.as_str());
        if status == StatusCode::SERVICE_UNAVAILABLE
            && matches!(code, Some(SHARD_UNAVAILABLE | COORDINATOR_UNREACHABLE))
        {
            return Outcome::InTransit {
                may_have_reached: code != Some(SHARD_UNAVAILABLE),
                error: ClientError::Server {
                    status: status.as_u16(),
                    message,
                    retry_after,
                },
            };
        }
        let refusal = match error {
            Some(body) if status.is_client_error() || body.error.code == NOT_COORDINATOR => {
                Err(ClientError::Api {
                    status: status.as_u16(),
                    code: body.error.code,
                    message,
                    retry_after,
                })
            }
            _ if status.is_server_error() => Err(ClientError::Server {
                status: status.as_u16(),
                message,
                retry_after,
            }),
            _ => Err(ClientError::Decode(format!(
                "HTTP {status} without an error body: {message}"
            ))),
        };
        match refusal {
            // A redirect the transport cannot follow still says the node
            // does not coordinate the group.
            Err(error) if redirected => Outcome::NotReached(error),
            result => Outcome::Done(result),
        }
    }
}

/// The URL of `group`'s route `route` (`heartbeat`, `routes`) at the host
/// whose base URL is `base`.
pub(crate) fn group_route_url(
    base: &str,
    group: &str,
    route: &str,
) -> Result<reqwest::Url, ClientError> {
    let mut url =
        reqwest::Url::parse(base).map_err(|e| ClientError::Config(format!("url {base:?}: {e}")))?;
    if url.cannot_be_a_base() || !matches!(url.scheme(), "http" | "https") {
        return Err(ClientError::Config(format!(
            "url {base:?} is not an http:// base URL"
        )));
    }
    url.path_segments_mut()
        .expect("checked: a base URL")
        .pop_if_empty()
        .extend(["v1", "groups", group, route]);
    Ok(url)
}

/// `Bearer TOKEN`, marked sensitive (kept out of debug output).
fn bearer(token: &str) -> Result<HeaderValue, ClientError> {
    let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| ClientError::Config("the member token is not a valid header value".into()))?;
    value.set_sensitive(true);
    Ok(value)
}

/// A reqwest error with its causes (reqwest's own text is often only "error
/// sending request").
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
