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
//! [`Task`].

mod apply;
mod bindings;
mod config;
mod liveness;
mod loads;
mod rebalance;
mod records;
mod shadows;
mod state;

pub use super::slot::Slot;
pub use bindings::{BINDINGS_MAX, Binding, ShadowBinding};
pub use config::{
    BindingSpec, CallLimits, GroupConfig, LABEL_KEY_LEN_MAX, LABEL_VALUE_LEN_MAX, LABELS_MAX,
    LOAD_COOLDOWN_MS_MAX, LOAD_HALF_LIFE_MS_MAX, LOAD_UNIT_LEN_MAX, LOAD_WINDOW_MS_MAX,
    LearnerMode, TopicConfig, defaults,
};
pub use liveness::{
    ANSWER_WAIT_MS_MIN, ASSIGNOR_RETRY_MS_MAX, AssignorFailure, AssignorFailures, Handover,
    Liveness, answer_wait_ms, assignor_retry_ms,
};
pub use loads::{Estimate, LoadBook, MemberLoads};
pub use rebalance::{
    Installed, LastRebalance, LoadClock, REBALANCE_HISTORY_MAX, RebalanceEntry, RebalanceReason,
    Rebalances,
};
pub use records::{Record, RemovalReason};
pub use shadows::{
    CallStats, PendingComparison, SHADOW_COMPARISONS_MAX, ShadowComparison, ShadowLog,
    ShadowTotals, SideAnswer, SideSummary,
};
pub(crate) use state::holdings_by_slot;
pub use state::{FENCED_MEMBER_IDS_MAX, Group, Member, Phase, SlotTarget};

/// Milliseconds on the caller's clock; the core never reads a clock.
pub type Millis = u64;

/// A task: one partition of one topic, keyed by name, so that adding
/// partitions or topics renumbers nothing; in JSON `[topic, partition]`, as
/// in docs/design.md's offline contract. The wire crate's type, so the
/// core, the API and the client share one definition.
pub use assignd_wire::Task;
