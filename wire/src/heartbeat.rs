//! The heartbeat's request and answer bodies. Their names are the member
//! protocol; do not rename them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ranges::{self, TaskList};
use crate::{LagRow, LoadItem, LoadReport, Task};

/// The member epoch a join sends.
pub const JOIN_EPOCH: i64 = 0;
/// The member epoch a leave sends.
pub const LEAVE_EPOCH: i64 = -1;

/// `POST /v1/groups/{group}/heartbeat`: a member joins (member epoch 0,
/// with an empty member id or one it chose), heartbeats (its member id and
/// epoch), or leaves (member epoch -1).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct HeartbeatRequest {
    /// The member's id. On join (member epoch 0): empty, and the host
    /// issues one; or an id the member chose (1 to 64 bytes of A-Z, a-z,
    /// 0-9, '.', '_', '-'; e.g. a random UUID) and sends again if it
    /// retries the join, which then answers as the same member (KIP-848).
    /// After: the id of the join's answer.
    #[cfg_attr(feature = "openapi", schema(max_length = 64))]
    pub member_id: String,
    /// A static member's name: it keeps its tasks across restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_name: Option<String>,
    /// 0 to join, -1 to leave, otherwise the member's epoch.
    pub member_epoch: i64,
    /// The topics the member subscribes to; required on join, optional
    /// after (unchanged when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topics: Option<Vec<String>>,
    #[serde(default)]
    pub rack: Option<String>,
    /// The member's relative weight (default 1), up to 2^32 − 1.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 1, maximum = 4294967295.0, format = Int64)
    )]
    pub capacity: Option<u32>,
    /// The tasks the member holds now (active, and revoking ones not yet
    /// released): each item a task `[topic, partition]` or a range
    /// `[topic, first, last]` (inclusive), so a member of a million tasks
    /// reports them in a few bytes; at most a group's task limit in all.
    #[serde(
        default,
        serialize_with = "ranges::write_optional_ranges",
        deserialize_with = "ranges::read_optional"
    )]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<crate::TaskItem>>))]
    pub owned: Option<Vec<Task>>,
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
    /// Where the member serves (a URL or `host:port`, 1 to
    /// [`ENDPOINT_BYTES_MAX`](crate::ENDPOINT_BYTES_MAX) bytes of visible
    /// ASCII), for the group's routing table: sent on join and when it
    /// changes; absent leaves it as it is, `""` removes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(max_length = 256))]
    pub endpoint: Option<String>,
    /// Small string pairs shown with the member in the routing table (at
    /// most [`METADATA_PAIRS_MAX`](crate::METADATA_PAIRS_MAX)): sent on join
    /// and when they change, replacing the previous ones; absent leaves
    /// them as they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<BTreeMap<String, String>>,
    /// The load of tasks the member holds active, in the group's
    /// `load_unit`: each item `[topic, partition, load]` or `[topic, first,
    /// last, load]` (every partition of the range has that load), a load
    /// from 0 to [`LOAD_MAX`](crate::LOAD_MAX); at most a group's task
    /// limit of items. A later item for the same task wins; tasks the
    /// member does not hold active are ignored. Sent only after an answer
    /// said `load_report` is `full` or `changes` (a host from before loads
    /// refuses the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Vec<crate::LoadItem>>))]
    pub loads: Option<Vec<LoadItem>>,
    /// The member's own measured use of its capacity, 0 to
    /// [`UTILISATION_MAX`](crate::UTILISATION_MAX) (1.0: fully used).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 0, maximum = 10))]
    pub utilisation: Option<f64>,
    /// The load the member can carry, in the group's `load_unit`: more
    /// than 0, at most [`LOAD_MAX`](crate::LOAD_MAX).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(exclusive_minimum = 0, maximum = 1e15))]
    pub load_capacity: Option<f64>,
}

/// The answer to a heartbeat. Its task lists are `[topic, partition]`
/// items, or compact (see `TaskItem`) when the request asked for
/// `task_ranges`.
// Read leniently: a list, a flag or the lease a host leaves out reads as
// empty, false or unknown.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct HeartbeatResponseBody {
    pub member_id: String,
    pub member_epoch: u64,
    /// How often to heartbeat.
    pub heartbeat_interval_ms: u64,
    /// Tasks the member may process.
    #[serde(default, deserialize_with = "ranges::read")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::TaskItem>, required = true))]
    pub active: Vec<Task>,
    /// Tasks the member must release, then report without.
    #[serde(default, deserialize_with = "ranges::read")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::TaskItem>, required = true))]
    pub revoking: Vec<Task>,
    /// Tasks to warm up (report lag on); they become active once caught up.
    #[serde(default, deserialize_with = "ranges::read")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::TaskItem>, required = true))]
    pub learner: Vec<Task>,
    /// Hot copies to keep for failover.
    #[serde(default, deserialize_with = "ranges::read")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::TaskItem>, required = true))]
    pub standby: Vec<Task>,
    /// The member is draining.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub draining: bool,
    /// The member was draining and holds nothing more: it may leave and
    /// exit.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub drained: bool,
    /// The member's lease, in ms: if the host hears nothing more from the
    /// member, it may give the member's tasks to others this long after
    /// answering (session or registration timeout, an unreleased task's
    /// fence, a drain's end). A member must stop processing every task
    /// once this long has passed since it *sent* this heartbeat without a
    /// newer answer: then it has stopped before anyone else starts.
    // A host always sends it; `None` reads the answer of one from before
    // leases.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = u64, required = true))]
    pub lease_ms: Option<u64>,
    /// The member's lease, in ms, while none of its later heartbeats
    /// reaches the group's coordinator: each was refused a connection,
    /// redirected (307), or refused `shard_unavailable` (503), as happens
    /// while a cluster takes a dead node's shards over. Counted, like
    /// `lease_ms`, from when this heartbeat was sent. Once a later
    /// heartbeat may have reached the coordinator (a timeout, a reset, any
    /// other answer) only `lease_ms` counts. At least `lease_ms`; equal to
    /// it on a single node and when the answer has tasks to revoke.
    // `None` reads the answer of a host from before it.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = u64, required = true))]
    pub unreached_lease_ms: Option<u64>,
    /// While a later heartbeat is in flight, the unreached lease counts
    /// only until that heartbeat's send time plus this, in ms: should it
    /// reach the coordinator, the host takes none of the member's tasks
    /// sooner than this after handling it (an expansion timeout and a
    /// heartbeat interval, within the member's timeouts and drain), but
    /// the member learns whether it did only from the answer.
    // `None` reads the answer of a host from before it.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(value_type = u64, required = true))]
    pub unreached_flight_ms: Option<u64>,
    /// What to report of the member's loads in its next heartbeat:
    /// `none` (the group takes no loads; also what an absent field
    /// means), `full` (every active task's load, and the utilisation and
    /// load capacity), or `changes` (loads that moved past the member's
    /// threshold, and tasks not sent before).
    #[serde(default)]
    pub load_report: LoadReport,
    /// Write the task lists as ranges (the request's `task_ranges`); not a
    /// field of the answer.
    #[serde(skip)]
    pub task_ranges: bool,
}

impl Serialize for HeartbeatResponseBody {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let ranges = self.task_ranges;
        let list = |tasks| TaskList { tasks, ranges };
        let fields = if self.load_report.is_none() { 12 } else { 13 };
        let mut body = serializer.serialize_struct("HeartbeatResponseBody", fields)?;
        body.serialize_field("member_id", &self.member_id)?;
        body.serialize_field("member_epoch", &self.member_epoch)?;
        body.serialize_field("heartbeat_interval_ms", &self.heartbeat_interval_ms)?;
        body.serialize_field("active", &list(&self.active[..]))?;
        body.serialize_field("revoking", &list(&self.revoking[..]))?;
        body.serialize_field("learner", &list(&self.learner[..]))?;
        body.serialize_field("standby", &list(&self.standby[..]))?;
        body.serialize_field("draining", &self.draining)?;
        body.serialize_field("drained", &self.drained)?;
        body.serialize_field("lease_ms", &self.lease_ms)?;
        body.serialize_field("unreached_lease_ms", &self.unreached_lease_ms)?;
        body.serialize_field("unreached_flight_ms", &self.unreached_flight_ms)?;
        // Left out for a group without loads: its answer is as before.
        if !self.load_report.is_none() {
            body.serialize_field("load_report", &self.load_report)?;
        }
        body.end()
    }
}
