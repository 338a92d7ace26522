//! The assignor's data model: plain Rust mirrors of the WIT records in
//! `wit/assignor.wit`, shared by guests, the native harness and the host.
//!
//! Tasks are numbered densely: the tasks of topic `t` are
//! `first_task(t) .. first_task(t) + partitions(t)`. Members are numbered by
//! their position in [`GroupInput::members`]. Per-task data is kept in
//! columns (`Vec<u32>` / `Vec<u64>`) because that is how it crosses the wasm
//! boundary cheaply; [`crate::index::GroupIndex`] builds the lookups a
//! strategy needs on top of them.

use std::collections::BTreeMap;
use std::fmt;

/// A member index meaning "no member" (an unowned task).
pub const NO_MEMBER: u32 = u32::MAX;

/// A topic and its partition count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topic {
    pub name: String,
    pub partitions: u32,
}

/// One worker process in the group.
#[derive(Clone, Debug, PartialEq)]
pub struct Member {
    /// Host-issued (dynamic) or stable (static) member id; unique in the group.
    pub id: String,
    /// The static member name (KIP-345 group instance id), if any.
    pub name: Option<String>,
    pub rack: Option<String>,
    /// Relative weight, at least 1.
    pub capacity: u32,
    /// The member's topics: an index into [`GroupInput::subscriptions`].
    /// Members with equal subscriptions have equal indices.
    pub subscription: u32,
    /// The load the member says it can carry, in the group's load unit;
    /// when every member declares one it weighs members instead of
    /// `capacity`.
    pub load_capacity: Option<f64>,
    /// The member's own measured use of its capacity (1.0 = fully used),
    /// smoothed by the host.
    pub utilisation: Option<f64>,
}

/// Rows of (task, member) pairs, as two columns of equal length.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskMembers {
    pub task: Vec<u32>,
    pub member: Vec<u32>,
}

impl TaskMembers {
    pub fn len(&self) -> usize {
        self.task.len()
    }

    pub fn is_empty(&self) -> bool {
        self.task.is_empty()
    }

    pub fn push(&mut self, task: u32, member: u32) {
        self.task.push(task);
        self.member.push(member);
    }

    /// The (task, member) rows.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.task.iter().copied().zip(self.member.iter().copied())
    }

    /// Sorts rows by (task, member) so that equal sets compare equal.
    pub fn sort(&mut self) {
        let mut rows: Vec<(u32, u32)> = self.iter().collect();
        rows.sort_unstable();
        self.task = rows.iter().map(|r| r.0).collect();
        self.member = rows.iter().map(|r| r.1).collect();
    }
}

/// Rows of (task, member, lag) triples, as three columns of equal length.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskLags {
    pub task: Vec<u32>,
    pub member: Vec<u32>,
    pub lag: Vec<u64>,
}

impl TaskLags {
    pub fn len(&self) -> usize {
        self.task.len()
    }

    pub fn is_empty(&self) -> bool {
        self.task.is_empty()
    }

    pub fn push(&mut self, task: u32, member: u32, lag: u64) {
        self.task.push(task);
        self.member.push(member);
        self.lag.push(lag);
    }

    /// The (task, member, lag) rows.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32, u64)> + '_ {
        self.task
            .iter()
            .zip(&self.member)
            .zip(&self.lag)
            .map(|((t, m), l)| (*t, *m, *l))
    }
}

/// Rows of (task, load) pairs, as two columns of equal length: the tasks
/// whose load the host knows, in the group's load unit. A task without a
/// row has an unknown load (which is not zero).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TaskLoads {
    pub task: Vec<u32>,
    pub load: Vec<f64>,
}

impl TaskLoads {
    pub fn len(&self) -> usize {
        self.task.len()
    }

    pub fn is_empty(&self) -> bool {
        self.task.is_empty()
    }

    pub fn push(&mut self, task: u32, load: f64) {
        self.task.push(task);
        self.load.push(load);
    }

    /// The (task, load) rows.
    pub fn iter(&self) -> impl Iterator<Item = (u32, f64)> + '_ {
        self.task.iter().copied().zip(self.load.iter().copied())
    }
}

/// Everything an assignor sees: the group's topics, members, current
/// assignment, lags, loads and params.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupInput {
    pub topics: Vec<Topic>,
    /// The distinct subscription sets, each of topic indices, strictly
    /// ascending. See [`GroupInput::topics_of`].
    pub subscriptions: Vec<Vec<u32>>,
    pub members: Vec<Member>,
    /// One entry per task: current active owner or [`NO_MEMBER`].
    pub active_owner: Vec<u32>,
    pub learners: TaskMembers,
    pub standbys: TaskMembers,
    pub lags: TaskLags,
    pub params: BTreeMap<String, String>,
    /// The unit the group's loads are measured in (e.g. "records/s"), or
    /// None when the group takes no loads.
    pub load_unit: Option<String>,
    /// The known loads of tasks; see [`GroupInput::task_loads`].
    pub loads: TaskLoads,
}

/// A task as (topic index, partition).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TaskId {
    pub topic: u32,
    pub partition: u32,
}

impl GroupInput {
    /// Total number of tasks over all topics.
    pub fn task_count(&self) -> usize {
        self.topics.iter().map(|t| t.partitions as usize).sum()
    }

    /// `first_task[t]` for every topic, plus the total task count at the end.
    pub fn topic_offsets(&self) -> Vec<u32> {
        let mut offsets = Vec::with_capacity(self.topics.len() + 1);
        let mut next = 0u32;
        for topic in &self.topics {
            offsets.push(next);
            next += topic.partitions;
        }
        offsets.push(next);
        offsets
    }

    /// The topics `member` subscribes to, ascending.
    pub fn topics_of(&self, member: &Member) -> &[u32] {
        &self.subscriptions[member.subscription as usize]
    }

    /// Whether `member` subscribes to topic index `topic`.
    pub fn subscribes(&self, member: &Member, topic: u32) -> bool {
        self.topics_of(member).binary_search(&topic).is_ok()
    }

    /// The index of subscription set `topics` (ascending topic indices),
    /// added if the group does not have it yet. Linear in the number of
    /// distinct sets: meant for building inputs, not for hot loops.
    pub fn intern_subscription(&mut self, topics: Vec<u32>) -> u32 {
        match self.subscriptions.iter().position(|s| *s == topics) {
            Some(i) => i as u32,
            None => {
                self.subscriptions.push(topics);
                (self.subscriptions.len() - 1) as u32
            }
        }
    }

    /// Makes member `m` subscribe to exactly `topics` (ascending).
    pub fn set_topics(&mut self, m: usize, topics: Vec<u32>) {
        let subscription = self.intern_subscription(topics);
        self.members[m].subscription = subscription;
    }

    /// Index of the topic with this name.
    pub fn topic_index(&self, name: &str) -> Option<u32> {
        self.topics
            .iter()
            .position(|t| t.name == name)
            .map(|i| i as u32)
    }

    /// Index of the member with this id.
    pub fn member_index(&self, id: &str) -> Option<u32> {
        self.members
            .iter()
            .position(|m| m.id == id)
            .map(|i| i as u32)
    }

    /// A parameter, or `default` when the group does not set it.
    pub fn param<'a>(&'a self, key: &str, default: &'a str) -> &'a str {
        self.params.get(key).map(String::as_str).unwrap_or(default)
    }

    /// A parameter parsed as an unsigned integer, or `default` when unset.
    pub fn param_u64(&self, key: &str, default: u64) -> Result<u64, AssignError> {
        match self.params.get(key) {
            None => Ok(default),
            Some(raw) => raw.trim().parse().map_err(|_| {
                AssignError::InvalidParam(format!(
                    "param {key}={raw:?} is not a non-negative integer"
                ))
            }),
        }
    }

    /// An empty assignment of the right shape: every task unowned.
    pub fn empty_assignment(&self) -> Assignment {
        Assignment {
            active_owner: vec![NO_MEMBER; self.task_count()],
            learners: TaskMembers::default(),
            standbys: TaskMembers::default(),
        }
    }
}

/// An assignor's answer: the target active owner of every task, plus the
/// learners and standbys to place.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assignment {
    /// One entry per task: target active owner, or [`NO_MEMBER`] for a task
    /// of a topic nobody subscribes to.
    pub active_owner: Vec<u32>,
    pub learners: TaskMembers,
    pub standbys: TaskMembers,
}

impl Assignment {
    /// Sorts learner and standby rows so that equal answers compare equal.
    pub fn normalize(&mut self) {
        self.learners.sort();
        self.standbys.sort();
    }

    /// Number of active tasks per member.
    pub fn active_counts(&self, member_count: usize) -> Vec<u32> {
        let mut counts = vec![0u32; member_count];
        for &owner in &self.active_owner {
            if owner != NO_MEMBER {
                counts[owner as usize] += 1;
            }
        }
        counts
    }
}

/// What an assignor can make use of.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Capabilities {
    pub learners: bool,
    pub standbys: bool,
    pub racks: bool,
    /// It balances by the tasks' loads (reads `loads`, members'
    /// `load_capacity` and the `load_band` param).
    pub load: bool,
}

/// A parameter an assignor reads, with its default.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamSpec {
    pub name: String,
    pub default_value: String,
    pub description: String,
}

impl ParamSpec {
    pub fn new(name: &str, default_value: &str, description: &str) -> Self {
        Self {
            name: name.to_owned(),
            default_value: default_value.to_owned(),
            description: description.to_owned(),
        }
    }
}

/// Who an assignor is and what it supports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Info {
    pub name: String,
    pub version: String,
    pub description: String,
    pub capabilities: Capabilities,
    pub params: Vec<ParamSpec>,
}

/// An assignor's refusal to answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AssignError {
    /// A parameter has a value the assignor cannot use.
    InvalidParam(String),
    /// The input is one the assignor cannot handle.
    UnsupportedInput(String),
    /// Anything else.
    Failed(String),
}

impl fmt::Display for AssignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AssignError::InvalidParam(m) => write!(f, "invalid param: {m}"),
            AssignError::UnsupportedInput(m) => write!(f, "unsupported input: {m}"),
            AssignError::Failed(m) => write!(f, "assignment failed: {m}"),
        }
    }
}

impl std::error::Error for AssignError {}
