//! The member side of the heartbeat protocol as it crosses HTTP: the JSON
//! request and response bodies and the error body. It owns the encoding
//! only; what the fields mean to a member is decided in `tracker` and
//! `member`.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// A task: one partition of one topic. In JSON it is `[topic, partition]`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(from = "(String, u32)", into = "(String, u32)")]
pub struct Task {
    pub topic: String,
    pub partition: u32,
}

impl Task {
    pub fn new(topic: impl Into<String>, partition: u32) -> Self {
        Task {
            topic: topic.into(),
            partition,
        }
    }
}

impl std::fmt::Display for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.topic, self.partition)
    }
}

impl From<(String, u32)> for Task {
    fn from((topic, partition): (String, u32)) -> Self {
        Task { topic, partition }
    }
}

impl From<Task> for (String, u32) {
    fn from(task: Task) -> Self {
        (task.topic, task.partition)
    }
}

/// The member epoch a join sends (with an empty member id).
pub const JOIN_EPOCH: i64 = 0;
/// The member epoch a leave sends.
pub const LEAVE_EPOCH: i64 = -1;

/// `POST /v1/groups/{group}/heartbeat`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatRequest {
    /// On join: the id the member chose (kept across retries of the join).
    pub member_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub member_name: Option<String>,
    pub member_epoch: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topics: Option<Vec<String>>,
    pub rack: Option<String>,
    pub capacity: u32,
    pub owned: Vec<Task>,
    /// `[topic, partition, lag]` rows.
    pub lags: Vec<(String, u32, u64)>,
    pub drain: bool,
}

/// The 200 answer to a heartbeat.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatResponse {
    pub member_id: String,
    pub member_epoch: i64,
    pub heartbeat_interval_ms: u64,
    #[serde(default)]
    pub active: BTreeSet<Task>,
    #[serde(default)]
    pub revoking: BTreeSet<Task>,
    #[serde(default)]
    pub learner: BTreeSet<Task>,
    #[serde(default)]
    pub standby: BTreeSet<Task>,
    #[serde(default)]
    pub draining: bool,
    #[serde(default)]
    pub drained: bool,
    /// How long after answering the host may give this member's tasks to
    /// others if it hears nothing more (absent from hosts before it).
    #[serde(default)]
    pub lease_ms: Option<u64>,
}

/// The body of every 4xx/5xx answer: `{"error": {"code", "message"}}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub code: String,
    pub message: String,
}
