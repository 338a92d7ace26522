//! The API's wire types: the admin routes' request and response bodies
//! with their OpenAPI schemas, and the conversions between the member
//! protocol's bodies (the `assignd-wire` crate, which the client library
//! speaks too) and the protocol core's heartbeat input and answer. Tasks
//! are `[topic, partition]` and lag rows `[topic, partition, lag]`, as in
//! docs/design.md's offline contract.

use std::collections::BTreeMap;

pub use assignd_wire::{
    ErrorBody, ErrorCode, ErrorDetail, HeartbeatRequest, HeartbeatResponseBody, LagRow, LookupBody,
    RoutesBody, TaskItem,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub use super::limits_doc::CallLimitsDoc;
use crate::protocol::core::{Heartbeat, HeartbeatResponse, TASKS_PER_GROUP_MAX};
use crate::protocol::group::{CallLimits, GroupConfig, Task};

// The wire refuses a task list longer than a group may have tasks, before
// it expands one.
const _: () = assert!(assignd_wire::TASKS_PER_LIST_MAX == TASKS_PER_GROUP_MAX);

/// A member's heartbeat body to `group` as the core's input.
pub fn heartbeat_request(group: String, body: HeartbeatRequest) -> Heartbeat {
    Heartbeat {
        group,
        member_id: body.member_id,
        member_name: body.member_name,
        member_epoch: body.member_epoch,
        topics: body.topics,
        rack: body.rack,
        capacity: body.capacity,
        owned: body.owned.map(|tasks| tasks.into_iter().collect()),
        lags: body.lags.map(|rows| {
            rows.into_iter()
                .map(|LagRow(topic, partition, lag)| (Task { topic, partition }, lag))
                .collect()
        }),
        drain: body.drain,
        endpoint: body.endpoint,
        metadata: body.metadata,
        loads: body.loads,
        utilisation: body.utilisation,
        load_capacity: body.load_capacity,
    }
}

/// The core's answer to a heartbeat as its body; `task_ranges`: the
/// request asked for the task lists as ranges.
pub fn heartbeat_response(response: HeartbeatResponse, task_ranges: bool) -> HeartbeatResponseBody {
    let tasks = |tasks: std::collections::BTreeSet<Task>| tasks.into_iter().collect();
    HeartbeatResponseBody {
        member_id: response.member_id,
        member_epoch: response.member_epoch,
        heartbeat_interval_ms: response.heartbeat_interval_ms,
        active: tasks(response.active),
        revoking: tasks(response.revoking),
        learner: tasks(response.learner),
        standby: tasks(response.standby),
        draining: response.draining,
        drained: response.drained,
        lease_ms: Some(response.lease_ms),
        unreached_lease_ms: Some(response.unreached_lease_ms),
        unreached_flight_ms: Some(response.unreached_flight_ms),
        load_report: response.load_report,
        task_ranges,
    }
}

/// Where a group is on its way to its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum GroupState {
    /// Every member holds exactly its target at the target epoch.
    Stable,
    /// The group needs a new target (its group epoch is ahead of its
    /// target epoch).
    Assigning,
    /// The target is current; members are still releasing or receiving
    /// tasks.
    Reconciling,
}

/// One line of `GET /v1/groups`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GroupSummary {
    pub name: String,
    pub group_epoch: u64,
    pub target_epoch: u64,
    pub state: GroupState,
    pub members: usize,
    pub assignor: String,
}

/// `GET /v1/groups`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct GroupList {
    pub groups: Vec<GroupSummary>,
}

/// `GET /v1/groups/{group}/coordinator`: the node that coordinates a
/// group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Coordinator {
    pub group: String,
    /// The group's shard.
    pub shard: u32,
    /// The coordinating node's name; absent on one host (not a cluster).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Its advertised base URL; absent on one host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Whether the node that answered is the coordinator.
    pub this_node: bool,
}

/// Where a member is in reaching its target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReconcileState {
    /// Holds exactly its target at the target epoch.
    Stable,
    /// Must release its revoking tasks before its epoch advances.
    UnrevokedTasks,
    /// At the target epoch, waiting for others to release tasks it gets.
    UnreleasedTasks,
}

/// What the installed target gives a member.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TargetView {
    pub active: Vec<Task>,
    pub learner: Vec<Task>,
    pub standby: Vec<Task>,
}

/// One member slot of a group.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemberView {
    /// The slot key: the member id of a dynamic member, `static:{name}`
    /// for a static one.
    pub slot: String,
    pub member_id: String,
    pub name: Option<String>,
    pub topics: Vec<String>,
    pub rack: Option<String>,
    #[schema(minimum = 1, maximum = 4294967295.0, format = Int64)]
    pub capacity: u32,
    /// A static member that left temporarily and keeps its slot.
    pub away: bool,
    pub draining: bool,
    /// Where the member serves, as it published it (the routing table's).
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The metadata it published with it.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
    pub member_epoch: u64,
    pub reconcile_state: ReconcileState,
    /// What the member holds and may process.
    pub active: Vec<Task>,
    /// What the member holds and must release.
    pub revoking: Vec<Task>,
    pub target: TargetView,
    /// The lags the member last reported.
    pub lags: Vec<LagRow>,
    /// Its load against its share (absent when the group has no
    /// `load_unit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<super::load_views::MemberLoadView>,
    /// How much longer the last lease the host gave the member runs (0:
    /// it ran out); absent before this host process answered it.
    #[serde(default)]
    pub lease_left_ms: Option<u64>,
    /// How long ago this host process last heard from the member.
    #[serde(default)]
    pub last_seen_ms_ago: Option<u64>,
}

/// A learner in the installed target, with the lag its member last
/// reported on it (none if it has not reported one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LearnerView {
    pub task: Task,
    pub slot: String,
    pub member_id: String,
    pub lag: Option<u64>,
}

/// `GET /v1/groups/{group}`: a group's config and state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GroupView {
    pub name: String,
    /// The config, without its member and reader tokens (see
    /// `member_token`, `reader_token`).
    #[schema(value_type = GroupConfigDoc)]
    #[serde(serialize_with = "config_without_tokens")]
    pub config: GroupConfig,
    /// Whether the group's heartbeats need a member token (the token
    /// itself, or its hash, is never shown).
    #[serde(default)]
    pub member_token: bool,
    /// Whether the group has a reader token for its routes (never shown).
    #[serde(default)]
    pub reader_token: bool,
    pub group_epoch: u64,
    pub target_epoch: u64,
    pub state: GroupState,
    pub learner_count: usize,
    pub members: Vec<MemberView>,
    /// The group's loads: unit, total, imbalance, whether every load is
    /// known (absent when the group has no `load_unit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loads: Option<super::load_views::GroupLoadView>,
    pub learners: Vec<LearnerView>,
    /// The last assignor bindings (at most 32), oldest first; the last is
    /// the current one (`config.assignor`, `config.params`).
    pub bindings: Vec<BindingView>,
    /// The group's assignor failures since this host process started
    /// (absent if its assignor never failed there): transient state, not
    /// kept across a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignor_failures: Option<AssignorFailuresView>,
    /// The last target this host process installed, and why (absent until
    /// it installs one): transient state, not kept across a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_rebalance: Option<LastRebalanceView>,
    /// Where the load trigger stands (absent when the group has no
    /// `load_unit`): transient state, started over by a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_trigger: Option<LoadTriggerView>,
    /// The group's shadow assignor and its comparisons with the live one
    /// (absent when it has none and no comparisons are left from one);
    /// the comparisons are transient state, started over by a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shadow: Option<super::shadow_views::ShadowView>,
    /// The last targets this host process installed (at most 32, oldest
    /// first): why, what they moved, when they settled. Transient state.
    #[serde(default)]
    pub rebalances: Vec<super::shadow_views::RebalanceView>,
}

/// A target installed, and what asked for it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LastRebalanceView {
    /// The group epoch the target answers.
    pub epoch: u64,
    /// The first change of the batch it answers: `join`, `leave`,
    /// `expiry`, `fence`, `subscription`, `config`, `caught_up`,
    /// `probing`, `drain`, `load` or `recovered` (a target the group
    /// waited for when this host took it).
    pub reason: String,
    /// When it was installed: host milliseconds (since that host process
    /// started).
    pub at_ms: u64,
}

/// The load trigger of a group with a `load_unit` (host ms, since that host
/// process started).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LoadTriggerView {
    /// Since when the checks in a row found the loads outside their band,
    /// if they do; a load rebalance follows `load_window_ms` after it, once
    /// the cooldown has passed.
    pub outside_band_since_ms: Option<u64>,
    /// The last load rebalance this host asked for, if any.
    pub last_load_rebalance_ms: Option<u64>,
    /// No load rebalance before then: `load_cooldown_ms` after the last,
    /// or after this host took the group.
    pub cooldown_until_ms: Option<u64>,
    /// Whether the bound assignor balances load (its `capabilities.load`;
    /// only then does the group rebalance for load); absent until the
    /// host has looked.
    pub assignor_balances_load: Option<bool>,
}

/// Serializes a config without its token digests, whatever they hold.
fn config_without_tokens<S: serde::Serializer>(
    config: &GroupConfig,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut value = serde_json::to_value(config).map_err(serde::ser::Error::custom)?;
    if let Some(map) = value.as_object_mut() {
        map.remove("member_token_sha256");
        map.remove("reader_token_sha256");
    }
    value.serialize(serializer)
}

/// A group's assignor failures: the last one, and how many.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AssignorFailuresView {
    /// The module reference the failed call ran.
    pub module: String,
    /// What went wrong, as a stable code (`out_of_fuel`, `timeout`,
    /// `panicked`, `invalid_assignment`, `unknown_module`, ...).
    pub code: String,
    pub message: String,
    /// When the last failure happened: host milliseconds (since that host
    /// process started).
    pub at_ms: u64,
    /// Failures in a row; 0 once a call succeeds again.
    pub consecutive: u64,
    /// Failures in all.
    pub total: u64,
    /// The last success after the first failure, if any (host ms).
    pub last_success_ms: Option<u64>,
    /// The binding's fallback when the last failure happened.
    pub fallback: Option<String>,
    /// Whether the installed target is the fallback's answer.
    pub served_by_fallback: bool,
    /// Targets the fallback answered in all.
    pub fallback_answers: u64,
    /// The fallback's own failure on the last call, if it failed too.
    pub fallback_error: Option<String>,
}

/// The body of `PUT /v1/groups/{group}/assignor`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BindRequest {
    /// A built-in assignor's name, an uploaded module's id (sha256), or
    /// `name@version` of an uploaded module.
    pub module: String,
    /// The assignor's params (none if absent).
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// Limits on this binding's calls; each is capped by the host's
    /// ceiling (the limits `assignd serve` was started with).
    #[serde(default)]
    #[schema(value_type = CallLimitsDoc)]
    pub limits: CallLimits,
    /// An assignor (built-in or uploaded) that answers when this one fails;
    /// the failure still shows on the group.
    #[serde(default)]
    pub fallback: Option<String>,
}

/// One assignor binding of a group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BindingView {
    /// 1 for the group's first binding, one more for each later one.
    pub seq: u64,
    /// The module reference as bound.
    pub module: String,
    pub params: BTreeMap<String, String>,
    #[schema(value_type = CallLimitsDoc)]
    pub limits: CallLimits,
    pub fallback: Option<String>,
    /// The group epoch the binding took effect at.
    pub epoch: u64,
    /// The host's clock when bound: milliseconds since that host process
    /// started (comparable within one run only).
    pub at_ms: u64,
    /// The `seq` of the binding this one rolled back to, if it is a
    /// rollback.
    pub rollback_to: Option<u64>,
}

/// `GET /healthz`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Health {
    pub status: String,
}

// The schema of the core's `GroupConfig` (the request body of `PUT
// /v1/groups/{group}`, which is deserialized into `GroupConfig` itself, so
// parsing and defaults are the core's). A test checks that the two list the
// same fields.

/// One topic of a group.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct TopicConfigDoc {
    name: String,
    #[schema(maximum = 100_000)]
    partitions: u32,
}

/// Who places learners: `host` makes every assignor safe, `assignor` trusts
/// the assignor's learners, `off` moves tasks as soon as they are released.
#[derive(ToSchema)]
#[serde(rename_all = "snake_case")]
#[allow(dead_code)]
pub enum LearnerModeDoc {
    Host,
    Assignor,
    Off,
}

/// A group's config; only `topics` is required.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct GroupConfigDoc {
    topics: Vec<TopicConfigDoc>,
    /// A built-in assignor: range, round-robin, sticky, learner-aware.
    #[schema(default = "sticky")]
    assignor: Option<String>,
    /// Assignor params.
    params: Option<BTreeMap<String, String>>,
    /// How long a silent dynamic member stays in the group.
    #[schema(default = 45_000, minimum = 1)]
    session_timeout_ms: Option<u64>,
    /// How long a silent static member keeps its slot.
    #[schema(default = 120_000, minimum = 1)]
    registration_timeout_ms: Option<u64>,
    /// How long arrivals are batched into one new target, and the longest
    /// a member may take to release a task.
    #[schema(default = 3_000, minimum = 1)]
    expansion_timeout_ms: Option<u64>,
    /// How often members should heartbeat (below the session and registration timeouts).
    #[schema(default = 3_000, minimum = 1)]
    heartbeat_interval_ms: Option<u64>,
    #[schema(default = "host")]
    learners: Option<LearnerModeDoc>,
    /// A lag at or under this counts as caught up.
    #[schema(default = 10_000)]
    acceptable_recovery_lag: Option<u64>,
    /// The most learners in the group at once.
    #[schema(default = 2)]
    max_learners: Option<u32>,
    /// How often the assignor is re-asked while learners exist.
    #[schema(default = 60_000, minimum = 1)]
    probing_interval_ms: Option<u64>,
    /// How long a draining member keeps tasks whose learners have not
    /// caught up.
    #[schema(default = 300_000, minimum = 1)]
    scale_down_timeout_ms: Option<u64>,
    /// Limits on the group's assignor calls, under the host's ceilings.
    assignor_limits: Option<CallLimitsDoc>,
    /// An assignor that answers when the bound one fails.
    fallback_assignor: Option<String>,
    /// Write-only: the token the group's members must send as
    /// `Authorization: Bearer TOKEN` (16 to 1024 visible ASCII
    /// characters). The host keeps only its sha256 and never shows it;
    /// absent keeps the group's token, `null` removes it.
    #[schema(min_length = 16, max_length = 1024, write_only)]
    member_token: Option<String>,
    /// How long a routing table stays valid after it is served: until
    /// then no task it shows unmoved gets another owner (a move waits for
    /// it while routers read the group). 0: no promise.
    #[schema(default = 2_000, minimum = 0, maximum = 60_000)]
    routes_valid_ms: Option<u64>,
    /// Write-only: the token that reads the group's routes
    /// (`/v1/groups/{group}/routes`) and nothing else (16 to 1024 visible
    /// ASCII characters). Kept as its sha256, never shown; absent keeps
    /// it, `null` removes it.
    #[schema(min_length = 16, max_length = 1024, write_only)]
    reader_token: Option<String>,
    /// The unit of the loads members report, e.g. `records/s` (1 to 32
    /// visible ASCII characters). Absent or `null`: the group takes no
    /// loads.
    #[schema(min_length = 1, max_length = 32)]
    load_unit: Option<String>,
    /// The half-life of the smoothing of each task's reported load. 0: no
    /// smoothing (the latest report wins).
    #[schema(default = 30_000, minimum = 0, maximum = 3_600_000)]
    load_half_life_ms: Option<u64>,
    /// How long the loads must stay outside their band before a load
    /// rebalance.
    #[schema(default = 60_000, minimum = 0, maximum = 3_600_000)]
    load_window_ms: Option<u64>,
    /// The least time between two load rebalances.
    #[schema(default = 300_000, minimum = 0, maximum = 86_400_000)]
    load_cooldown_ms: Option<u64>,
    /// Nothing moves for any reason but a member leaving.
    #[schema(default = false)]
    frozen: Option<bool>,
    /// `key: value` labels to sort groups by (e.g. `team: payments`),
    /// which a rollout's `label:` selector matches: at most 16, keys of 1
    /// to 63 and values of at most 63 visible ASCII bytes. Refused below
    /// record format level 7 during a rolling upgrade.
    labels: Option<BTreeMap<String, String>>,
}

/// An assignor this host can run: an uploaded module or a built-in.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct AssignorView {
    /// The sha256 of the component's bytes, lowercase hex.
    pub id: String,
    /// The name it was uploaded under (a built-in's own name).
    pub name: String,
    /// The version it was uploaded under (a built-in's `info()` version).
    pub version: String,
    /// A built-in ships inside the binary and cannot be deleted.
    pub builtin: bool,
    /// What the module's `info()` answered: name, version, description,
    /// capabilities, params with their defaults.
    #[schema(value_type = Object)]
    pub info: serde_json::Value,
    pub size_bytes: u64,
    /// Unix time of the upload, in milliseconds (absent for built-ins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uploaded_at_ms: Option<u64>,
}

/// Every assignor: the built-ins first, then the uploaded modules by id.
#[derive(Clone, Debug, Serialize, Deserialize, ToSchema)]
pub struct AssignorList {
    pub assignors: Vec<AssignorView>,
}

/// The body of `POST /v1/groups/{group}/assignor/preview`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PreviewRequest {
    /// A built-in assignor's name, an uploaded module's id (sha256), or
    /// `name@version` of an uploaded module.
    pub module: String,
    /// The params to run it with (the group's current params if absent).
    #[serde(default)]
    pub params: Option<BTreeMap<String, String>>,
}

/// What one member is given, by the candidate's raw answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PreviewMemberAssignment {
    /// The slot key, as in the group view: the member id of a dynamic
    /// member, `static:{name}` for a static one.
    pub member: String,
    pub active: Vec<Task>,
    pub learner: Vec<Task>,
    pub standby: Vec<Task>,
}

/// A task whose active owner would change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PreviewMove {
    pub task: Task,
    /// Its owner in the installed target (none if unassigned).
    pub from: Option<String>,
    /// Its owner in the target the host would install (none if unassigned).
    pub to: Option<String>,
}

/// A learner the host would create (not in the installed target).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PreviewLearner {
    pub task: Task,
    pub member: String,
}

/// A task the candidate moves but the host's learner safety keeps on its
/// owner until the new one is warm.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PreviewHeldBack {
    pub task: Task,
    /// Where it stays for now.
    pub owner: String,
    /// Where the candidate puts it.
    pub wanted: String,
}

/// Active tasks per member.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Balance {
    pub active: BTreeMap<String, usize>,
    pub min: usize,
    pub max: usize,
    /// `max - min`.
    pub spread: usize,
}

/// The answer of a preview: nothing was applied.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PreviewView {
    pub module: String,
    /// The params the candidate ran with (host keys included).
    pub params: BTreeMap<String, String>,
    /// The candidate's raw answer, per member it saw.
    pub assignment: Vec<PreviewMemberAssignment>,
    /// The target the host would install, after its learner safety.
    pub target: BTreeMap<String, TargetView>,
    /// Tasks whose active owner would change, from the installed target.
    pub moves: Vec<PreviewMove>,
    /// Learners that would be created.
    pub learners_created: Vec<PreviewLearner>,
    /// Tasks held back on their owner for warm-up.
    pub held_back: Vec<PreviewHeldBack>,
    /// Active tasks per member in the installed target.
    pub balance_before: Balance,
    /// Active tasks per member in the target the host would install.
    pub balance_after: Balance,
}
