//! Why the runtime refused or could not finish a request: one error enum
//! for every entry point, which the `api` module maps to HTTP.

use crate::plugins::BUILTIN_NAMES;
use crate::protocol::core::ProtocolError;
use crate::protocol::shard::ShardId;
use crate::registry::RegistryError;

use super::sink::PersistError;

/// Why the runtime refused or could not finish a request.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The core refused the input; nothing changed.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// A config names an assignor this host cannot run; nothing changed.
    #[error(
        "assignor {name:?} is neither a built-in assignor ({}) nor an uploaded module (by id or name@version)",
        BUILTIN_NAMES.join(", ")
    )]
    UnknownAssignor { name: String },
    /// The module registry refused an upload or a delete; nothing changed.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A preview on a group with no members (none that is not draining):
    /// there is nothing to assign to; nothing changed.
    #[error(
        "group {0:?} has no members to assign to; a preview needs at least one member that is not draining"
    )]
    EmptyGroup(String),
    /// A preview's candidate trapped, passed a limit or answered an
    /// invalid assignment; nothing changed.
    #[error("assignor {module:?} failed: {message}")]
    AssignorFailed { module: String, message: String },
    /// The change was applied but could not be made durable; from now on
    /// every request is refused.
    #[error(transparent)]
    Storage(PersistError),
    /// The storage does not answer (cluster mode: etcd has no quorum, or
    /// none of its members is reachable). A change this answers may or may
    /// not have landed; once the storage answers again the shard is loaded
    /// afresh from what did, and a retry sees it.
    #[error("the storage does not answer, so no change can be made durable now; retry later: {0}")]
    StorageUnavailable(String),
    /// A heartbeat without a bearer token to a group with a member
    /// token; nothing changed.
    #[error("group {0:?} needs its member token: send `Authorization: Bearer TOKEN`")]
    MemberTokenMissing(String),
    /// A heartbeat whose bearer token is not its group's member token;
    /// nothing changed.
    #[error("the token is not group {0:?}'s member token")]
    MemberTokenWrong(String),
    /// Something only format version `needs` can keep, while the cluster
    /// writes an older one (a rolling upgrade under way); nothing changed.
    #[error(
        "{what} needs record format version {needs}, and this cluster still writes {level} (a rolling upgrade under way): upgrade every node first"
    )]
    FormatLevelTooLow {
        what: &'static str,
        needs: u8,
        level: u8,
    },
    /// A routes read without a bearer token.
    #[error(
        "reading group {0:?}'s routes needs its reader token or the admin token: send `Authorization: Bearer TOKEN`"
    )]
    ReaderTokenMissing(String),
    /// A routes read whose token is neither the group's reader token nor
    /// the admin token.
    #[error("the token is neither group {0:?}'s reader token nor the admin token")]
    ReaderTokenWrong(String),
    /// A heartbeat to a group without a member token on a host that
    /// requires one (`serve --require-member-token`); nothing changed.
    #[error(
        "this host requires a member token of every group, and group {0:?} has none: an admin must set `member_token` in its config"
    )]
    MemberTokenRequired(String),
    /// A config that would leave its group without a member token on a
    /// host that requires one; nothing changed.
    #[error(
        "this host requires a member token of every group (serve --require-member-token): group {0:?}'s config needs `member_token`"
    )]
    ConfigWithoutMemberToken(String),
    /// A join that would create a member in a group without a member
    /// token, while the group's join bucket is empty; nothing changed.
    #[error(
        "group {group:?} has no member token and takes new members at a limited rate; retry in {retry_after_ms} ms"
    )]
    JoinRateLimited { group: String, retry_after_ms: u64 },
    /// The group's shard is not served by this host now (it is being
    /// loaded or unloaded, or its load failed); nothing changed.
    /// `group`: the group a step of one group was for.
    #[error(
        "shard {shard}{} is not served by this host right now; retry shortly",
        .group.as_ref().map(|group| format!(" (of group {group:?})")).unwrap_or_default()
    )]
    ShardNotServed {
        shard: ShardId,
        group: Option<String>,
    },
    /// An admin request named a shard this host does not have.
    #[error("there is no shard {shard}: this host has shards 0 to {}", shard_count - 1)]
    UnknownShard { shard: u64, shard_count: u32 },
    /// A shard could not be loaded from its store; it stays unserved.
    #[error("shard {shard} could not be loaded: {message}")]
    ShardLoadFailed { shard: ShardId, message: String },
    /// A bug: the core panicked while holding its lock.
    /// The host serves `groups_max` groups already (`serve --groups-max`).
    #[error(
        "this host serves {max} groups or more, its limit (serve --groups-max): no group is created here until it serves fewer"
    )]
    GroupsMaxReached { max: u64 },
    #[error("internal error: {0}")]
    Internal(&'static str),
}

impl RuntimeError {
    /// The storage does not answer, or the shard is moving or being loaded
    /// again because of it: an outage that ends by itself, not a fault.
    pub fn is_storage_outage(&self) -> bool {
        matches!(
            self,
            RuntimeError::StorageUnavailable(_) | RuntimeError::ShardNotServed { .. }
        )
    }
}

impl From<PersistError> for RuntimeError {
    fn from(error: PersistError) -> Self {
        if error.unavailable {
            RuntimeError::StorageUnavailable(error.message.to_string())
        } else {
            RuntimeError::Storage(error)
        }
    }
}
