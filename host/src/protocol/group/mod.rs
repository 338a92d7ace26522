//! A group's durable state and the records that change it. Every change the
//! core makes is a [`Record`]; [`Group::apply`] is the only code that
//! mutates a group, for live changes and for replay alike. Transient data
//! (when each member was last heard from, an assignor call in flight) lives
//! beside it in [`Liveness`] and is rebuilt, not replayed.
//!
//! - `config`: a group's config as an admin sets it, and its defaults;
//! - `records`: the records, and the assignor bindings they keep;
//! - `slot`: a member's place in its group, [`Slot`];
//! - `state`: a group's durable state, its [`Phase`] and `apply`;
//! - `liveness`: the transient state beside it, and assignor failures.
//!
//! This module holds the two types all of them share: [`Millis`] and
//! [`TaskRef`].

use serde::{Deserialize, Serialize};

mod config;
mod liveness;
mod records;
mod slot;
mod state;

pub use config::{BindingSpec, CallLimits, GroupConfig, LearnerMode, TopicConfig, defaults};
pub use liveness::{
    ANSWER_WAIT_MIN_MS, ASSIGNOR_RETRY_MAX_MS, AssignorFailure, AssignorFailures, Handover,
    Liveness, answer_wait_ms, assignor_retry_ms,
};
pub use records::{BINDINGS_MAX, Binding, Record, RemovalReason};
pub use slot::Slot;
pub(crate) use state::holdings_by_slot;
pub use state::{FENCED_MEMBER_IDS_MAX, Group, Member, Phase, SlotTarget};

/// Milliseconds on the caller's clock; the core never reads a clock.
pub type Millis = u64;

/// A task: one partition of one topic. Keyed by name, so that adding
/// partitions or topics renumbers nothing. In JSON it is `[topic, partition]`,
/// as in docs/design.md's offline contract.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(from = "(String, u32)", into = "(String, u32)")]
pub struct TaskRef {
    pub topic: String,
    pub partition: u32,
}

impl TaskRef {
    pub fn new(topic: &str, partition: u32) -> Self {
        TaskRef {
            topic: topic.to_owned(),
            partition,
        }
    }
}

impl From<(String, u32)> for TaskRef {
    fn from((topic, partition): (String, u32)) -> Self {
        TaskRef { topic, partition }
    }
}

impl From<TaskRef> for (String, u32) {
    fn from(task: TaskRef) -> Self {
        (task.topic, task.partition)
    }
}
