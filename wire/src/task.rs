//! A task and a lag row as the member protocol writes them.

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

/// A member's lag on one task: `[topic, partition, lag]`, the number of
/// records its local state is behind.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LagRow(pub String, pub u32, pub u64);
