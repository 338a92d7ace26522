//! The API's wire types: request and response bodies with their OpenAPI
//! schemas. The heartbeat's names are the member protocol the client
//! library speaks; do not rename them. Tasks are `[topic, partition]` and
//! lag rows `[topic, partition, lag]`, as in docs/design.md's offline contract.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::openapi::schema::{ArrayBuilder, ArrayItems, ObjectBuilder, Schema, Type};
use utoipa::openapi::{KnownFormat, RefOr, SchemaFormat};
use utoipa::{PartialSchema, ToSchema};

use crate::protocol::group::{CallLimits, GroupConfig, TaskRef};

// `TaskRef` lives in the protocol core, which knows nothing of OpenAPI; its
// schema is written here.
impl PartialSchema for TaskRef {
    fn schema() -> RefOr<Schema> {
        tuple_schema(
            "A task: `[topic, partition]`.",
            vec![
                string_schema(),
                integer_schema(KnownFormat::Int32, "partition"),
            ],
            serde_json::json!(["orders", 0]),
        )
    }
}

impl ToSchema for TaskRef {
    fn name() -> Cow<'static, str> {
        "Task".into()
    }
}

/// A member's lag on one task: `[topic, partition, lag]`, the number of
/// records its local state is behind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LagRow(pub String, pub u32, pub u64);

impl PartialSchema for LagRow {
    fn schema() -> RefOr<Schema> {
        tuple_schema(
            "A lag report: `[topic, partition, lag]`.",
            vec![
                string_schema(),
                integer_schema(KnownFormat::Int32, "partition"),
                integer_schema(KnownFormat::Int64, "lag in records"),
            ],
            serde_json::json!(["orders", 3, 1500]),
        )
    }
}

impl ToSchema for LagRow {
    fn name() -> Cow<'static, str> {
        "LagRow".into()
    }
}

fn string_schema() -> Schema {
    ObjectBuilder::new().schema_type(Type::String).into()
}

fn integer_schema(format: KnownFormat, description: &str) -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::Integer)
        .format(Some(SchemaFormat::KnownFormat(format)))
        .minimum(Some(0))
        .description(Some(description))
        .into()
}

fn tuple_schema(
    description: &str,
    items: Vec<Schema>,
    example: serde_json::Value,
) -> RefOr<Schema> {
    let len = items.len();
    ArrayBuilder::new()
        .prefix_items(items)
        .items(ArrayItems::False)
        .min_items(Some(len))
        .max_items(Some(len))
        .description(Some(description))
        .examples([example])
        .into()
}

/// `POST /v1/groups/{group}/heartbeat`: a member joins (member epoch 0,
/// with an empty member id or one it chose), heartbeats (its member id and
/// epoch), or leaves (member epoch -1).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {
    /// The member's id. On join (member epoch 0): empty, and the host
    /// issues one; or an id the member chose (1 to 64 bytes of A-Z, a-z,
    /// 0-9, '.', '_', '-'; e.g. a random UUID) and sends again if it
    /// retries the join, which then answers as the same member (KIP-848).
    /// After: the id of the join's answer.
    #[schema(max_length = 64)]
    pub member_id: String,
    /// A static member's name: it keeps its tasks across restarts.
    #[serde(default)]
    pub member_name: Option<String>,
    /// 0 to join, -1 to leave, otherwise the member's epoch.
    pub member_epoch: i64,
    /// The topics the member subscribes to; required on join, optional
    /// after (unchanged when absent).
    #[serde(default)]
    pub topics: Option<Vec<String>>,
    #[serde(default)]
    pub rack: Option<String>,
    /// The member's relative weight (default 1), up to 2^32 − 1.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 4294967295.0, format = Int64)]
    pub capacity: Option<u32>,
    /// The tasks the member holds now (active, and revoking ones not yet
    /// released): each item a task `[topic, partition]` or a range
    /// `[topic, first, last]` (inclusive), so a member of a million tasks
    /// reports them in a few bytes; at most a group's task limit in all.
    #[serde(default, deserialize_with = "owned_tasks")]
    #[schema(value_type = Option<Vec<TaskItem>>)]
    pub owned: Option<Vec<TaskRef>>,
    /// How far behind the member's local state is per task it has state
    /// for.
    #[serde(default)]
    pub lags: Option<Vec<LagRow>>,
    /// Ask to leave gracefully once the member's tasks have moved.
    #[serde(default)]
    pub drain: bool,
    /// Answer with the task lists compact, as `owned` is sent: each run of
    /// consecutive partitions of a topic as one range `[topic, first,
    /// last]`, a lone task as `[topic, partition]`. Without it every task
    /// is a `[topic, partition]` item (about 17 bytes a task: 17 MB for a
    /// member of a million).
    #[serde(default)]
    pub task_ranges: bool,
}

/// An item of a heartbeat's `owned` (and, with `task_ranges`, of its
/// answer's task lists): `[topic, partition]` or `[topic, first, last]`.
/// Only its schema: `owned_tasks` reads it, `write_tasks` writes it.
pub struct TaskItem;

impl PartialSchema for TaskItem {
    fn schema() -> RefOr<Schema> {
        utoipa::openapi::schema::OneOfBuilder::new()
            .item(TaskRef::schema())
            .item(tuple_schema(
                "Tasks `[topic, first, last]`: partitions first to last, both included.",
                vec![
                    string_schema(),
                    integer_schema(KnownFormat::Int32, "first partition"),
                    integer_schema(KnownFormat::Int32, "last partition"),
                ],
                serde_json::json!(["orders", 0, 99999]),
            ))
            .description(Some("A task, or a range of one topic's partitions"))
            .into()
    }
}

impl ToSchema for TaskItem {
    fn name() -> Cow<'static, str> {
        "TaskItem".into()
    }
}

/// Reads `owned`: tasks and ranges expanded to tasks, refused past
/// [`crate::protocol::core::TASKS_PER_GROUP_MAX`] in all (a range is
/// cheap to send, not to expand) or with `first > last`.
fn owned_tasks<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<TaskRef>>, D::Error> {
    struct Items;
    impl<'de> serde::de::Visitor<'de> for Items {
        type Value = Option<Vec<TaskRef>>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of [topic, partition] or [topic, first, last]")
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_none<E>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
        fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_seq(self)
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            use serde::de::Error;
            let max = crate::protocol::core::TASKS_PER_GROUP_MAX;
            let mut tasks = Vec::new();
            while let Some(item) = seq.next_element::<OwnedRange>()? {
                let OwnedRange(topic, first, last) = item;
                if first > last {
                    return Err(A::Error::custom(format!(
                        "owned: [{topic:?}, {first}, {last}] ends before it starts"
                    )));
                }
                if tasks.len() as u64 + u64::from(last - first) + 1 > max {
                    return Err(A::Error::custom(format!("owned: more than {max} tasks")));
                }
                tasks.extend((first..=last).map(|partition| TaskRef {
                    topic: topic.clone(),
                    partition,
                }));
            }
            Ok(Some(tasks))
        }
    }
    deserializer.deserialize_option(Items)
}

/// `[topic, partition]` as `(topic, partition, partition)`, or
/// `[topic, first, last]`.
struct OwnedRange(String, u32, u32);

impl<'de> Deserialize<'de> for OwnedRange {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Item;
        impl<'de> serde::de::Visitor<'de> for Item {
            type Value = OwnedRange;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("[topic, partition] or [topic, first, last]")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<OwnedRange, A::Error> {
                use serde::de::Error;
                let topic: String = seq
                    .next_element()?
                    .ok_or_else(|| A::Error::invalid_length(0, &self))?;
                let first: u32 = seq
                    .next_element()?
                    .ok_or_else(|| A::Error::invalid_length(1, &self))?;
                let last: u32 = seq.next_element()?.unwrap_or(first);
                if seq.next_element::<serde::de::IgnoredAny>()?.is_some() {
                    return Err(A::Error::invalid_length(4, &self));
                }
                Ok(OwnedRange(topic, first, last))
            }
        }
        deserializer.deserialize_seq(Item)
    }
}

/// The answer to a heartbeat. Its task lists are `[topic, partition]`
/// items, or compact (see [`TaskItem`]) when the request asked for
/// `task_ranges`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, ToSchema)]
pub struct HeartbeatResponseBody {
    pub member_id: String,
    pub member_epoch: u64,
    /// How often to heartbeat.
    pub heartbeat_interval_ms: u64,
    /// Tasks the member may process.
    #[serde(deserialize_with = "task_items")]
    #[schema(value_type = Vec<TaskItem>)]
    pub active: Vec<TaskRef>,
    /// Tasks the member must release, then report without.
    #[serde(deserialize_with = "task_items")]
    #[schema(value_type = Vec<TaskItem>)]
    pub revoking: Vec<TaskRef>,
    /// Tasks to warm up (report lag on); they become active once caught up.
    #[serde(deserialize_with = "task_items")]
    #[schema(value_type = Vec<TaskItem>)]
    pub learner: Vec<TaskRef>,
    /// Hot copies to keep for failover.
    #[serde(deserialize_with = "task_items")]
    #[schema(value_type = Vec<TaskItem>)]
    pub standby: Vec<TaskRef>,
    /// The member is draining.
    pub draining: bool,
    /// The member was draining and holds nothing more: it may leave and
    /// exit.
    pub drained: bool,
    /// The member's lease, in ms: if the host hears nothing more from the
    /// member, it may give the member's tasks to others this long after
    /// answering (session or registration timeout, an unreleased task's
    /// fence, a drain's end). A member must stop processing every task
    /// once this long has passed since it *sent* this heartbeat without a
    /// newer answer: then it has stopped before anyone else starts.
    pub lease_ms: u64,
    /// Write the task lists as ranges (the request's `task_ranges`); not a
    /// field of the answer.
    #[serde(skip)]
    pub task_ranges: bool,
}

impl Serialize for HeartbeatResponseBody {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        struct Tasks<'a>(&'a [TaskRef], bool);
        impl Serialize for Tasks<'_> {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                write_tasks(self.0, self.1, serializer)
            }
        }
        let ranges = self.task_ranges;
        let mut body = serializer.serialize_struct("HeartbeatResponseBody", 10)?;
        body.serialize_field("member_id", &self.member_id)?;
        body.serialize_field("member_epoch", &self.member_epoch)?;
        body.serialize_field("heartbeat_interval_ms", &self.heartbeat_interval_ms)?;
        body.serialize_field("active", &Tasks(&self.active, ranges))?;
        body.serialize_field("revoking", &Tasks(&self.revoking, ranges))?;
        body.serialize_field("learner", &Tasks(&self.learner, ranges))?;
        body.serialize_field("standby", &Tasks(&self.standby, ranges))?;
        body.serialize_field("draining", &self.draining)?;
        body.serialize_field("drained", &self.drained)?;
        body.serialize_field("lease_ms", &self.lease_ms)?;
        body.end()
    }
}

/// Writes sorted `tasks` as `[topic, partition]` items or, with `ranges`,
/// each run of consecutive partitions of a topic as `[topic, first, last]`
/// (a lone task still `[topic, partition]`).
fn write_tasks<S: serde::Serializer>(
    tasks: &[TaskRef],
    ranges: bool,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
    if !ranges {
        return tasks.serialize(serializer);
    }
    let mut runs: Vec<(&str, u32, u32)> = Vec::new();
    for task in tasks {
        match runs.last_mut() {
            Some((topic, _, last))
                if *topic == task.topic && last.checked_add(1) == Some(task.partition) =>
            {
                *last = task.partition;
            }
            _ => runs.push((&task.topic, task.partition, task.partition)),
        }
    }
    let mut seq = serializer.serialize_seq(Some(runs.len()))?;
    for (topic, first, last) in runs {
        if first == last {
            seq.serialize_element(&(topic, first))?;
        } else {
            seq.serialize_element(&(topic, first, last))?;
        }
    }
    seq.end()
}

/// Reads an answer's task list in either form (the tests read answers).
fn task_items<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<TaskRef>, D::Error> {
    Ok(owned_tasks(deserializer)?.unwrap_or_default())
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
    pub active: Vec<TaskRef>,
    pub learner: Vec<TaskRef>,
    pub standby: Vec<TaskRef>,
}

/// One member slot of a group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
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
    pub member_epoch: u64,
    pub reconcile_state: ReconcileState,
    /// What the member holds and may process.
    pub active: Vec<TaskRef>,
    /// What the member holds and must release.
    pub revoking: Vec<TaskRef>,
    pub target: TargetView,
    /// The lags the member last reported.
    pub lags: Vec<LagRow>,
}

/// A learner in the installed target, with the lag its member last
/// reported on it (none if it has not reported one).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct LearnerView {
    pub task: TaskRef,
    pub slot: String,
    pub member_id: String,
    pub lag: Option<u64>,
}

/// `GET /v1/groups/{group}`: a group's config and state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GroupView {
    pub name: String,
    /// The config, without its member token (see `member_token`).
    #[schema(value_type = GroupConfigDoc)]
    #[serde(serialize_with = "config_without_member_token")]
    pub config: GroupConfig,
    /// Whether the group's heartbeats need a member token (the token
    /// itself, or its hash, is never shown).
    #[serde(default)]
    pub member_token: bool,
    pub group_epoch: u64,
    pub target_epoch: u64,
    pub state: GroupState,
    pub learner_count: usize,
    pub members: Vec<MemberView>,
    pub learners: Vec<LearnerView>,
    /// The last assignor bindings (at most 32), oldest first; the last is
    /// the current one (`config.assignor`, `config.params`).
    pub bindings: Vec<BindingView>,
    /// The group's assignor failures since this host process started
    /// (absent if its assignor never failed there): transient state, not
    /// kept across a restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assignor_failures: Option<AssignorFailuresView>,
}

/// Serializes a config without `member_token_sha256`, whatever it holds.
fn config_without_member_token<S: serde::Serializer>(
    config: &GroupConfig,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut value = serde_json::to_value(config).map_err(serde::ser::Error::custom)?;
    if let Some(map) = value.as_object_mut() {
        map.remove("member_token_sha256");
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

/// Limits one binding puts on its assignor calls, under the host's
/// ceilings; an absent limit is the ceiling.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct CallLimitsDoc {
    /// Fuel one call may burn (about one unit per wasm instruction).
    #[schema(minimum = 1)]
    fuel_max: Option<u64>,
    /// Wall-clock time one call may take.
    #[schema(minimum = 1)]
    time_limit_ms: Option<u64>,
    /// Memory the guest may grow to.
    #[schema(minimum = 1, maximum = 4096)]
    memory_max_mib: Option<u64>,
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

/// The error body of every failure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// A stable code: unknown_group, unknown_member, fenced, replaced, stale_epoch,
    /// not_owned, group_full, no_previous_binding, invalid_request, unknown_assignor,
    /// invalid_json, invalid_path, payload_too_large,
    /// unsupported_media_type, not_found, method_not_allowed,
    /// unauthorized, forbidden, storage_failed, internal.
    pub code: String,
    /// What went wrong, for a person.
    pub message: String,
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
    pub active: Vec<TaskRef>,
    pub learner: Vec<TaskRef>,
    pub standby: Vec<TaskRef>,
}

/// A task whose active owner would change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PreviewMove {
    pub task: TaskRef,
    /// Its owner in the installed target (none if unassigned).
    pub from: Option<String>,
    /// Its owner in the target the host would install (none if unassigned).
    pub to: Option<String>,
}

/// A learner the host would create (not in the installed target).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PreviewLearner {
    pub task: TaskRef,
    pub member: String,
}

/// A task the candidate moves but the host's learner safety keeps on its
/// owner until the new one is warm.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct PreviewHeldBack {
    pub task: TaskRef,
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
