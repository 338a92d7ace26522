//! One heartbeat over HTTP/1.1: encode, send with a timeout, classify the
//! answer. It owns the URL layout and the mapping of HTTP outcomes to
//! [`ClientError`]; it never retries and holds no member state.

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderValue};

use crate::ClientError;
use crate::config::MemberConfig;
use crate::wire::{ErrorBody, HeartbeatRequest, HeartbeatResponse};

/// The longest error body kept in a message.
const ERROR_BODY_LEN_MAX: usize = 512;

/// The longest `Retry-After` the client takes from the host, in seconds.
const RETRY_AFTER_S_MAX: u64 = 60;

pub struct Transport {
    client: reqwest::Client,
    /// The shared pool this member sends over, if any (it waits for a turn).
    shared: Option<crate::Connections>,
    /// Each request's, on a shared pool as on the member's own.
    request_timeout: std::time::Duration,
    heartbeat_url: reqwest::Url,
    /// `Bearer TOKEN` of the member token, if any (marked sensitive).
    authorization: Option<HeaderValue>,
}

impl Transport {
    pub fn new(config: &MemberConfig) -> Result<Self, ClientError> {
        let mut url = reqwest::Url::parse(&config.url)
            .map_err(|e| ClientError::Config(format!("url {:?}: {e}", config.url)))?;
        if url.cannot_be_a_base() || !matches!(url.scheme(), "http" | "https") {
            return Err(ClientError::Config(format!(
                "url {:?} is not an http:// base URL",
                config.url
            )));
        }
        url.path_segments_mut()
            .expect("checked: a base URL")
            .pop_if_empty()
            .extend(["v1", "groups", &config.group, "heartbeat"]);
        let client = match &config.connections {
            Some(shared) => shared.client().clone(),
            None => reqwest::Client::builder()
                .connect_timeout(config.request_timeout)
                .pool_idle_timeout(crate::config::CONNECTION_IDLE_MAX)
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
            heartbeat_url: url,
            authorization,
        })
    }

    pub async fn heartbeat(
        &self,
        request: &HeartbeatRequest,
    ) -> Result<HeartbeatResponse, ClientError> {
        // On a shared pool the wait for a turn counts in the request's time.
        let _turn = match &self.shared {
            Some(shared) => Some(
                tokio::time::timeout(self.request_timeout, shared.turn())
                    .await
                    .map_err(|_| {
                        ClientError::Transport(format!(
                            "no turn on the shared connections within {:?}",
                            self.request_timeout
                        ))
                    })?,
            ),
            None => None,
        };
        let mut post = self
            .client
            .post(self.heartbeat_url.clone())
            .timeout(self.request_timeout)
            .json(request);
        if let Some(authorization) = &self.authorization {
            post = post.header(AUTHORIZATION, authorization.clone());
        }
        let answer = post
            .send()
            .await
            .map_err(|e| ClientError::Transport(describe(&e)))?;
        let status = answer.status();
        // Seconds only (the host sends no HTTP dates), capped: a host's
        // hint must not park a member past its own lease.
        let retry_after = answer
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(|s| Duration::from_secs(s.min(RETRY_AFTER_S_MAX)));
        let body = answer
            .bytes()
            .await
            .map_err(|e| ClientError::Transport(describe(&e)))?;
        if status.is_success() {
            return serde_json::from_slice(&body)
                .map_err(|e| ClientError::Decode(format!("heartbeat answer: {e}")));
        }
        let error = serde_json::from_slice::<ErrorBody>(&body).ok();
        let message = match &error {
            Some(body) => body.error.message.clone(),
            None => {
                let text = String::from_utf8_lossy(&body);
                let mut cut = ERROR_BODY_LEN_MAX.min(text.len());
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                text[..cut].to_owned()
            }
        };
        match error {
            Some(body) if status.is_client_error() => Err(ClientError::Api {
                status: status.as_u16(),
                code: body.error.code,
                message,
                retry_after,
            }),
            _ if status.is_server_error() => Err(ClientError::Server {
                status: status.as_u16(),
                message,
                retry_after,
            }),
            _ => Err(ClientError::Decode(format!(
                "HTTP {status} without an error body: {message}"
            ))),
        }
    }
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
