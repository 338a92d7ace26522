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
    /// Sent compact: each run of consecutive partitions of a topic as one
    /// range `[topic, first, last]` (a lone task as `[topic, partition]`),
    /// so a member of a million tasks fits the host's body limit. In
    /// order: the runs are found in sorted tasks.
    #[serde(
        serialize_with = "owned_as_ranges",
        deserialize_with = "owned_from_ranges"
    )]
    pub owned: Vec<Task>,
    /// `[topic, partition, lag]` rows.
    pub lags: Vec<(String, u32, u64)>,
    pub drain: bool,
    /// Asks for the answer's task lists in the same compact form (hosts
    /// before it ignore it and answer `[topic, partition]` items, which
    /// are read as well).
    #[serde(default)]
    pub task_ranges: bool,
}

/// Writes sorted `tasks` as `[topic, partition]` and `[topic, first,
/// last]` items, the host's `owned` format (host/src/api/wire.rs).
fn owned_as_ranges<S: serde::Serializer>(tasks: &[Task], serializer: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeSeq;
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

/// Reads `owned` back: `[topic, partition]` and `[topic, first, last]`
/// items, each range expanded (what the host accepts; a test's fake host
/// reads what the client sent).
fn owned_from_ranges<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<Task>, D::Error> {
    tasks_from_ranges(deserializer)
}

/// Reads an answer's task list: `[topic, partition]` and `[topic, first,
/// last]` items.
fn task_set_from_ranges<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeSet<Task>, D::Error> {
    tasks_from_ranges(deserializer)
}

fn tasks_from_ranges<'de, D: serde::Deserializer<'de>, C: Default + Extend<Task>>(
    deserializer: D,
) -> Result<C, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Item {
        Task(String, u32),
        Range(String, u32, u32),
    }
    let mut tasks = C::default();
    for item in Vec::<Item>::deserialize(deserializer)? {
        match item {
            Item::Task(topic, partition) => tasks.extend([Task::new(topic, partition)]),
            Item::Range(topic, first, last) if first <= last => {
                tasks.extend((first..=last).map(|p| Task::new(topic.clone(), p)));
            }
            Item::Range(topic, first, last) => {
                return Err(serde::de::Error::custom(format!(
                    "the range [{topic:?}, {first}, {last}] ends before it starts"
                )));
            }
        }
    }
    Ok(tasks)
}

/// The 200 answer to a heartbeat.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatResponse {
    pub member_id: String,
    pub member_epoch: i64,
    pub heartbeat_interval_ms: u64,
    #[serde(default, deserialize_with = "task_set_from_ranges")]
    pub active: BTreeSet<Task>,
    #[serde(default, deserialize_with = "task_set_from_ranges")]
    pub revoking: BTreeSet<Task>,
    #[serde(default, deserialize_with = "task_set_from_ranges")]
    pub learner: BTreeSet<Task>,
    #[serde(default, deserialize_with = "task_set_from_ranges")]
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

#[cfg(test)]
mod tests {
    use super::*;

    fn request(owned: Vec<Task>) -> HeartbeatRequest {
        HeartbeatRequest {
            member_id: "m".into(),
            member_name: None,
            member_epoch: 3,
            topics: None,
            rack: None,
            capacity: 1,
            owned,
            lags: Vec::new(),
            drain: false,
            task_ranges: true,
        }
    }

    /// Issue 12, item 17: `owned` of 100,000 tasks was 1.89 MB, over the
    /// host's 1 MiB body limit; runs of partitions go as ranges.
    #[test]
    fn owned_tasks_are_sent_as_ranges_per_topic() {
        let owned: Vec<Task> = (0..100_000)
            .map(|p| Task::new("orders", p))
            .chain([0, 1, 2, 5, 7, 8].map(|p| Task::new("payments", p)))
            .collect();
        let json = serde_json::to_value(request(owned)).unwrap();
        assert_eq!(
            json["owned"],
            serde_json::json!([
                ["orders", 0, 99_999],
                ["payments", 0, 2],
                ["payments", 5],
                ["payments", 7, 8]
            ])
        );
        let million: Vec<Task> = (0..10)
            .flat_map(|t| (0..100_000).map(move |p| Task::new(format!("topic-{t}"), p)))
            .collect();
        let body = serde_json::to_vec(&request(million)).unwrap();
        assert!(body.len() < 1_000, "{} bytes", body.len());
    }

    /// The answer of a host asked for `task_ranges` lists runs as ranges;
    /// an older host's `[topic, partition]` items read the same.
    #[test]
    fn an_answers_ranges_and_pairs_read_as_tasks() {
        let ranged: HeartbeatResponse = serde_json::from_value(serde_json::json!({
            "member_id": "m", "member_epoch": 4, "heartbeat_interval_ms": 3000,
            "active": [["orders", 0, 2], ["orders", 7]], "revoking": [["payments", 1, 3]],
            "learner": [], "standby": [["orders", 9]], "lease_ms": 6000,
        }))
        .unwrap();
        let pairs: HeartbeatResponse = serde_json::from_value(serde_json::json!({
            "member_id": "m", "member_epoch": 4, "heartbeat_interval_ms": 3000,
            "active": [["orders", 0], ["orders", 1], ["orders", 2], ["orders", 7]],
            "revoking": [["payments", 1], ["payments", 2], ["payments", 3]],
            "learner": [], "standby": [["orders", 9]], "lease_ms": 6000,
        }))
        .unwrap();
        assert_eq!(ranged, pairs);
        assert_eq!(ranged.active.len(), 4);
        assert!(serde_json::to_value(request(Vec::new())).unwrap()["task_ranges"] == true);
    }
}
