//! The body of every failed answer, `{"error": {"code", "message"}}`:
//! written by the host, read by the member client; and [`ErrorCode`], every
//! code the host's API can answer, spelled once for the host, the client
//! and the docs.

use serde::{Deserialize, Serialize};

/// Declares [`ErrorCode`] with each variant's wire spelling, so the list of
/// codes ([`ErrorCode::ALL`]) and their spelling cannot disagree.
macro_rules! error_codes {
    ($($(#[doc = $doc:literal])* $variant:ident => $code:literal,)*) => {
        /// Every stable code of an error body the host's API can answer.
        /// The host answers only these (its error mapping returns this
        /// type); a client reads the body's code as a string, so a code a
        /// newer host adds is not an error to an older client.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum ErrorCode {
            $($(#[doc = $doc])* $variant,)*
        }

        impl ErrorCode {
            /// Every code, in declaration order.
            pub const ALL: &[ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The code as the error body spells it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $code,)*
                }
            }

            /// The code a body spells `code`, if it is one this crate knows.
            pub fn parse(code: &str) -> Option<ErrorCode> {
                match code {
                    $($code => Some(ErrorCode::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

error_codes! {
    // Membership (the protocol core's refusals).
    /// The group does not exist (a heartbeat that is not a join).
    UnknownGroup => "unknown_group",
    /// The member id is not in the group.
    UnknownMember => "unknown_member",
    /// The member was removed (it left, expired, or held tasks too long):
    /// rejoining with epoch 0 is right.
    Fenced => "fenced",
    /// Another incarnation took the member's name (two processes share
    /// it): stop, do not rejoin.
    Replaced => "replaced",
    /// The member's epoch is not the one the host has for it.
    StaleEpoch => "stale_epoch",
    /// The member reports owning a task the group never gave it.
    NotOwned => "not_owned",
    /// The request breaks a rule or a limit of the protocol.
    InvalidRequest => "invalid_request",
    /// The group has as many members as it may.
    GroupFull => "group_full",
    /// A rollback with no earlier binding to return to.
    NoPreviousBinding => "no_previous_binding",
    /// The group's heartbeats need its member token and this one has none.
    MemberTokenRequired => "member_token_required",
    /// Too many joins of one group too fast (with `Retry-After`).
    JoinRateLimited => "join_rate_limited",
    // Routing.
    /// A routes lookup names a topic the group does not have.
    UnknownTopic => "unknown_topic",
    /// The host holds as many routes watchers as it may (with
    /// `Retry-After`).
    TooManyWatchers => "too_many_watchers",
    /// A cluster in a rolling upgrade refuses what its older nodes could
    /// not read back (an endpoint, a reader token) until every node is
    /// upgraded.
    FormatLevelTooLow => "format_level_too_low",
    // Requests the host cannot read.
    /// The body is not the JSON the route takes.
    InvalidJson => "invalid_json",
    /// A path parameter is malformed.
    InvalidPath => "invalid_path",
    /// A query parameter is malformed.
    InvalidQuery => "invalid_query",
    /// The body is larger than the route takes.
    PayloadTooLarge => "payload_too_large",
    /// The body's content type is not the route's.
    UnsupportedMediaType => "unsupported_media_type",
    /// The body did not arrive in time.
    RequestTimeout => "request_timeout",
    /// The connection ended before the body did.
    IncompleteBody => "incomplete_body",
    /// No such route.
    NotFound => "not_found",
    /// The route does not take this method (with `Allow`).
    MethodNotAllowed => "method_not_allowed",
    /// No bearer token where one is needed.
    Unauthorized => "unauthorized",
    /// A bearer token that is not the one the route needs.
    Forbidden => "forbidden",
    /// The read-only token on a route that changes something.
    ReadOnlyToken => "read_only_token",
    // Groups and assignors.
    /// A binding names an assignor the host does not have.
    UnknownAssignor => "unknown_assignor",
    /// A preview or assignor call for a group without members.
    EmptyGroup => "empty_group",
    /// The host holds as many groups as `serve --groups-max` allows.
    GroupsMaxReached => "groups_max_reached",
    /// The assignor failed on the preview's input.
    AssignorFailed => "assignor_failed",
    // The module registry.
    /// A module name that is not a valid name.
    InvalidModuleName => "invalid_module_name",
    /// The module loads but its self-test assignment fails.
    SelfTestFailed => "self_test_failed",
    /// The binding's params are refused by the module.
    ParamsRejected => "params_rejected",
    /// The name and version are taken by other bytes.
    ModuleNameTaken => "module_name_taken",
    /// The host holds as many modules as `serve --modules-max` allows.
    ModulesMaxReached => "modules_max_reached",
    /// The modules' bytes would pass `serve --module-bytes-max`.
    ModuleBytesMaxReached => "module_bytes_max_reached",
    /// No such module.
    UnknownModule => "unknown_module",
    /// A built-in assignor cannot be deleted.
    BuiltinAssignor => "builtin_assignor",
    /// A group is bound to the module.
    ModuleInUse => "module_in_use",
    // Rollouts.
    /// No rollout of that id.
    UnknownRollout => "unknown_rollout",
    /// A rollout of that id exists already.
    RolloutExists => "rollout_exists",
    /// A group the rollout selects is in another rollout that has not
    /// ended: one rollout per group at a time.
    GroupInRollout => "group_in_rollout",
    /// The rollout's selector matches no group.
    EmptySelection => "empty_selection",
    /// A pause, resume or abort the rollout's phase does not allow.
    RolloutPhase => "rollout_phase",
    // A module that does not load (the plugin runtime's refusals).
    /// The bytes are not WebAssembly.
    NotWasm => "not_wasm",
    /// A core module, not a component.
    CoreModule => "core_module",
    /// A WebAssembly version the engine does not read.
    UnsupportedWasmVersion => "unsupported_wasm_version",
    /// The component did not compile.
    CompileFailed => "compile_failed",
    /// The compile ran past its time limit.
    CompileTimeout => "compile_timeout",
    /// The compile ran past its memory limit.
    CompileMemoryLimit => "compile_memory_limit",
    /// The compiler's process panicked, died of a signal or exited otherwise.
    CompileCrashed => "compile_crashed",
    /// The compiled code is larger than the host keeps.
    CompileOutputTooLarge => "compile_output_too_large",
    /// Every compile slot is busy (with `Retry-After`).
    CompileBusy => "compile_busy",
    /// The component imports something the host does not provide.
    ForeignImport => "foreign_import",
    /// The component does not export the assignor world.
    WrongWorld => "wrong_world",
    /// The component could not be instantiated.
    InstantiateFailed => "instantiate_failed",
    /// A call ran out of fuel.
    OutOfFuel => "out_of_fuel",
    /// A call ran past its time limit.
    Timeout => "timeout",
    /// A call grew past its memory limit.
    MemoryLimit => "memory_limit",
    /// A call overflowed its stack.
    StackOverflow => "stack_overflow",
    /// The guest panicked.
    Panicked => "panicked",
    /// The guest trapped.
    Trapped => "trapped",
    /// The guest refused its input.
    Refused => "refused",
    /// The guest's answer is larger than the host reads.
    OutputTooLarge => "output_too_large",
    /// The guest's answer breaks the assignment contract.
    InvalidAssignment => "invalid_assignment",
    /// The input the host built is not one the contract allows.
    InvalidInput => "invalid_input",
    /// A module file could not be read.
    ReadFailed => "read_failed",
    // Shards, storage and the cluster.
    /// No shard of that number.
    UnknownShard => "unknown_shard",
    /// The storage failed: the shard stops until it is loaded again.
    StorageFailed => "storage_failed",
    /// The storage does not answer now: retry later.
    StorageUnavailable => "storage_unavailable",
    /// The shard is not served here now (moving between nodes): retry.
    ShardUnavailable => "shard_unavailable",
    /// The shard could not be loaded.
    ShardLoadFailed => "shard_load_failed",
    /// Another node coordinates the group (307, with `Location`).
    NotCoordinator => "not_coordinator",
    /// The node that coordinates the group does not answer.
    CoordinatorUnreachable => "coordinator_unreachable",
    /// The server is at its connection cap (with `Retry-After`).
    TooManyConnections => "too_many_connections",
    /// A large heartbeat with the large bodies' budget spent.
    TooManyLargeBodies => "too_many_large_bodies",
    /// A bug: the details are in the host's log.
    Internal => "internal",
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error body of every failure (4xx and 5xx).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorDetail {
    /// A stable code, one of [`ErrorCode`]'s (`fenced`, `stale_epoch`,
    /// `not_coordinator`, …).
    pub code: String,
    /// What went wrong, for a person.
    pub message: String,
    /// `not_coordinator` (307): where to send the request instead, the
    /// answer's `Location` (the coordinating node's advertised URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
}
