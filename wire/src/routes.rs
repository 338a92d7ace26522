//! The routing API's bodies (`GET /v1/groups/{group}/routes` and
//! `/routes/lookup`, docs/routing.md) and the one mapping of a key to a
//! partition that every router and the host share: Kafka's default
//! partitioner.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::Task;
use crate::ranges;

/// The longest member endpoint, in bytes.
pub const ENDPOINT_BYTES_MAX: usize = 256;
/// The most metadata pairs a member may publish.
pub const METADATA_PAIRS_MAX: usize = 16;
/// The longest metadata key, in bytes (at least 1).
pub const METADATA_KEY_BYTES_MAX: usize = 64;
/// The longest metadata value, in bytes.
pub const METADATA_VALUE_BYTES_MAX: usize = 256;

/// A run of consecutive partitions of one topic, `first` to `last` (both
/// included): `[topic, first, last]` in JSON, or `[topic, partition]` for
/// one partition.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskRange {
    pub topic: String,
    pub first: u32,
    pub last: u32,
}

impl TaskRange {
    pub fn contains(&self, topic: &str, partition: u32) -> bool {
        self.topic == topic && (self.first..=self.last).contains(&partition)
    }

    /// The range's tasks, first to last.
    pub fn tasks(&self) -> impl Iterator<Item = Task> + '_ {
        (self.first..=self.last).map(|partition| Task::new(self.topic.clone(), partition))
    }
}

impl Serialize for TaskRange {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if self.first == self.last {
            (&self.topic, self.first).serialize(serializer)
        } else {
            (&self.topic, self.first, self.last).serialize(serializer)
        }
    }
}

impl<'de> Deserialize<'de> for TaskRange {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let ranges::Item(topic, first, last) = ranges::Item::deserialize(deserializer)?;
        if first > last {
            return Err(serde::de::Error::custom(format!(
                "the range [{topic:?}, {first}, {last}] ends before it starts"
            )));
        }
        Ok(TaskRange { topic, first, last })
    }
}

/// A task list as runs of partitions, never expanded: a table of a million
/// tasks is a few thousand of these.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "openapi", schema(value_type = Vec<crate::TaskItem>))]
#[serde(transparent)]
pub struct TaskRanges(pub Vec<TaskRange>);

impl TaskRanges {
    /// The runs of `tasks`, in the order given (sorted tasks give the
    /// fewest runs).
    pub fn from_tasks<'a>(tasks: impl IntoIterator<Item = &'a Task>) -> Self {
        let mut runs: Vec<TaskRange> = Vec::new();
        for task in tasks {
            match runs.last_mut() {
                Some(run)
                    if run.topic == task.topic
                        && run.last.checked_add(1) == Some(task.partition) =>
                {
                    run.last = task.partition;
                }
                _ => runs.push(TaskRange {
                    topic: task.topic.clone(),
                    first: task.partition,
                    last: task.partition,
                }),
            }
        }
        TaskRanges(runs)
    }

    /// Every task, run by run.
    pub fn tasks(&self) -> impl Iterator<Item = Task> + '_ {
        self.0.iter().flat_map(TaskRange::tasks)
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A member as the routing table shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RouteMember {
    /// A static member's name; `null` for a dynamic member.
    pub member_name: Option<String>,
    /// Where it serves, as it published it; `null` if it did not.
    pub endpoint: Option<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

/// Tasks about to change owner: `from` the member that holds them now
/// (`null`: nobody) `to` the member the target gives them (`null`: nobody
/// yet).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RouteMove {
    pub from: Option<String>,
    pub to: Option<String>,
    pub tasks: TaskRanges,
}

/// `GET /v1/groups/{group}/routes`: who owns what at one table epoch.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RoutesBody {
    pub group: String,
    /// The table's counter: rises with every change to what it says, and
    /// never goes back (restarts and takeovers included).
    pub epoch: u64,
    /// The group epoch (the targets' counter), for reference.
    pub group_epoch: u64,
    /// For this long after the request was sent, no task in `active` and
    /// not in `moving` gets another active owner.
    pub valid_ms: u64,
    /// Each topic's partition count.
    pub topics: BTreeMap<String, u32>,
    /// Every member of the group, by member id.
    pub members: BTreeMap<String, RouteMember>,
    /// Per member id, the tasks it processes now.
    pub active: BTreeMap<String, TaskRanges>,
    /// Per member id, the tasks it warms up to take over.
    #[serde(default)]
    pub learner: BTreeMap<String, TaskRanges>,
    /// Per member id, the hot copies it keeps.
    #[serde(default)]
    pub standby: BTreeMap<String, TaskRanges>,
    /// Tasks about to change owner.
    #[serde(default)]
    pub moving: Vec<RouteMove>,
    /// Tasks nobody processes now.
    #[serde(default)]
    pub unowned: TaskRanges,
}

/// A member in a lookup's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RouteOwner {
    pub member_id: String,
    pub member_name: Option<String>,
    pub endpoint: Option<String>,
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

/// `GET /v1/groups/{group}/routes/lookup`: one key's task and its owners.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LookupBody {
    pub topic: String,
    pub partition: u32,
    pub epoch: u64,
    pub valid_ms: u64,
    /// The member processing the task now; `null`: nobody.
    pub owner: Option<RouteOwner>,
    /// The member the task moves to, if it is moving.
    pub moving_to: Option<RouteOwner>,
    pub learners: Vec<RouteOwner>,
    pub standbys: Vec<RouteOwner>,
}

/// Kafka's murmur2 (the 32-bit MurmurHash2 of `key` with seed
/// `0x9747b28c`), as `org.apache.kafka.common.utils.Utils.murmur2`.
pub fn murmur2(key: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let mut h = SEED ^ key.len() as u32;
    let mut chunks = key.chunks_exact(4);
    for chunk in &mut chunks {
        let mut k = u32::from_le_bytes(chunk.try_into().expect("4 bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= u32::from(tail[2]) << 16;
    }
    if tail.len() >= 2 {
        h ^= u32::from(tail[1]) << 8;
    }
    if !tail.is_empty() {
        h ^= u32::from(tail[0]);
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition of `key` in a topic of `partitions` partitions, as
/// Kafka's default partitioner picks it for a keyed record:
/// `toPositive(murmur2(key)) % partitions`. `partitions` is at least 1.
pub fn partition_for_key(key: &[u8], partitions: u32) -> u32 {
    assert!(partitions > 0, "a topic has at least one partition");
    (murmur2(key) as u32 & 0x7fff_ffff) % partitions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur2_and_partitions_match_kafkas_vectors() {
        let vectors: serde_json::Value = serde_json::from_str(include_str!(
            "../../clients/conformance/routes/murmur2.json"
        ))
        .unwrap();
        let cases = vectors["cases"].as_array().unwrap();
        assert!(cases.len() > 10);
        for case in cases {
            let key = hex(case["key_hex"].as_str().unwrap());
            if let Some(text) = case["key"].as_str() {
                assert_eq!(text.as_bytes(), key);
            }
            assert_eq!(i64::from(murmur2(&key)), case["murmur2"].as_i64().unwrap());
            for (partitions, partition) in case["partitions"].as_object().unwrap() {
                let partitions: u32 = partitions.parse().unwrap();
                let expected = partition.as_u64().unwrap() as u32;
                assert_eq!(partition_for_key(&key, partitions), expected, "{case}");
            }
        }
    }

    #[test]
    fn a_table_writes_its_task_lists_as_ranges_and_reads_them_back() {
        let mut body = RoutesBody {
            group: "g".into(),
            epoch: 3,
            ..RoutesBody::default()
        };
        let tasks: Vec<Task> = (0..6)
            .map(|p| Task::new("t", p))
            .chain([Task::new("t", 9)])
            .collect();
        body.active
            .insert("m-1".into(), TaskRanges::from_tasks(&tasks));
        let json = serde_json::to_string(&body).unwrap();
        assert!(
            json.contains(r#""active":{"m-1":[["t",0,5],["t",9]]}"#),
            "{json}"
        );
        let back: RoutesBody = serde_json::from_str(&json).unwrap();
        assert_eq!(back, body);
        assert_eq!(back.active["m-1"].tasks().collect::<Vec<_>>(), tasks);
        let backwards = serde_json::from_str::<TaskRanges>(r#"[["t", 5, 2]]"#);
        assert!(
            backwards
                .unwrap_err()
                .to_string()
                .contains("ends before it starts")
        );
    }

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }
}
