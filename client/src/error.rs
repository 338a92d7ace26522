//! The one error type of the client: what the host refused (with its
//! stable code), what never got an answer, what certainly reached no
//! coordinator, and misuse of the library.

/// The stable error codes of the host's `{"error": {"code", ...}}` body
/// that the member machine acts on, as string constants for matching a
/// body's code ([`ErrorCode`](assignd_wire::ErrorCode) lists them all).
pub mod codes {
    use assignd_wire::ErrorCode;

    pub const UNKNOWN_GROUP: &str = ErrorCode::UnknownGroup.as_str();
    pub const UNKNOWN_MEMBER: &str = ErrorCode::UnknownMember.as_str();
    /// The member was removed (it left, expired, or held tasks too long):
    /// rejoining is right.
    pub const FENCED: &str = ErrorCode::Fenced.as_str();
    /// Another incarnation took the member's name (two processes share
    /// it): rejoining would take the name back and fence the other one.
    pub const REPLACED: &str = ErrorCode::Replaced.as_str();
    pub const STALE_EPOCH: &str = ErrorCode::StaleEpoch.as_str();
    pub const NOT_OWNED: &str = ErrorCode::NotOwned.as_str();
    pub const INVALID_REQUEST: &str = ErrorCode::InvalidRequest.as_str();
    pub const INVALID_JSON: &str = ErrorCode::InvalidJson.as_str();
    pub const GROUP_FULL: &str = ErrorCode::GroupFull.as_str();
    /// The group has a member token and the heartbeat carried none.
    pub const UNAUTHORIZED: &str = ErrorCode::Unauthorized.as_str();
    /// The heartbeat's token is not the group's member token.
    pub const FORBIDDEN: &str = ErrorCode::Forbidden.as_str();
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// The host answered and refused the request (a 4xx with an error body).
    #[error("the host refused the request ({code}, HTTP {status}): {message}")]
    Api {
        status: u16,
        code: String,
        message: String,
        /// The answer's `Retry-After` (429 `join_rate_limited`, say): the
        /// host asks not to be sent this again sooner.
        retry_after: Option<std::time::Duration>,
    },
    /// The host failed (a 5xx): the request may or may not have been
    /// processed.
    #[error("the host failed (HTTP {status}): {message}")]
    Server {
        status: u16,
        message: String,
        /// The answer's `Retry-After` (503 `too_many_connections`, say).
        retry_after: Option<std::time::Duration>,
    },
    /// No answer: the connection was reset or closed after the request
    /// went out, or the request timed out. The request may or may not have
    /// been processed.
    #[error("no answer from the host: {0}")]
    Transport(String),
    /// No node that coordinates the group got the heartbeat: every attempt
    /// was refused a connection (the request never went out), redirected
    /// (`307`: the node does not coordinate the group) or answered 503
    /// `shard_unavailable` (the node does not serve the group's shard). The
    /// request was certainly not processed, so the host cannot have taken
    /// the member's tasks early through it (the member keeps them on its
    /// unreached lease, see `Status::lease_until`).
    #[error("no coordinator of the group got the heartbeat: {0}")]
    Unreached(String),
    /// An answer this client cannot read.
    #[error("unreadable answer from the host: {0}")]
    Decode(String),
    /// The member config cannot work.
    #[error("invalid member config: {0}")]
    Config(String),
}

impl ClientError {
    /// How long the host asked to wait before the next attempt
    /// (`Retry-After`), if it did.
    pub fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            ClientError::Api { retry_after, .. } | ClientError::Server { retry_after, .. } => {
                *retry_after
            }
            _ => None,
        }
    }

    /// The host's error code, for a refusal.
    pub fn code(&self) -> Option<&str> {
        match self {
            ClientError::Api { code, .. } => Some(code),
            _ => None,
        }
    }

    /// Whether retrying the same request later may succeed: no answer, no
    /// coordinator reached, or a host failure.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            ClientError::Server { .. } | ClientError::Transport(_) | ClientError::Unreached(_)
        )
    }
}
