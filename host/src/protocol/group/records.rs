//! The records: every change the core makes to a group is one [`Record`],
//! written to the log and applied by `Group::apply`; with the reasons a
//! member is removed.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Binding, Group, GroupConfig, Member, ShadowBinding, Slot, SlotTarget, Task};
use crate::protocol::reconcile::MemberAssignment;

/// Why a member left the group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RemovalReason {
    /// It asked to leave.
    Left,
    /// Its session or registration timeout passed.
    Expired,
    /// It held tasks past the expansion timeout after being asked to release
    /// them.
    Fenced,
    /// It was draining and its scale-down timeout passed.
    DrainTimedOut,
}

impl RemovalReason {
    /// The reason as a metric label and log field.
    pub fn label(self) -> &'static str {
        match self {
            RemovalReason::Left => "left",
            RemovalReason::Expired => "expired",
            RemovalReason::Fenced => "fenced",
            RemovalReason::DrainTimedOut => "drain_timed_out",
        }
    }
}

/// Every change the core makes to a group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Record {
    /// A group was created or its config replaced.
    GroupConfigured { group: String, config: GroupConfig },
    /// A new slot, or a new incarnation of a static slot (which fences the
    /// previous member id).
    MemberJoined {
        group: String,
        slot: Slot,
        member: Member,
    },
    /// A static member left temporarily, or came back.
    MemberAway {
        group: String,
        slot: Slot,
        away: bool,
    },
    /// A slot is gone; its tasks are free at once.
    MemberRemoved {
        group: String,
        slot: Slot,
        reason: RemovalReason,
    },
    /// The group needs a new target.
    GroupEpochBumped { group: String, epoch: u64 },
    /// The target for an epoch, per slot: the assignor's answer after the
    /// host's learner safety.
    TargetInstalled {
        group: String,
        epoch: u64,
        target: Arc<BTreeMap<Slot, SlotTarget>>,
    },
    /// A member was asked to drain (by an admin or itself).
    MemberDraining { group: String, slot: Slot },
    /// A member's reconciled assignment.
    MemberReconciled {
        group: String,
        slot: Slot,
        assignment: MemberAssignment<Task>,
    },
    /// A join without a name switched the group to dynamic membership:
    /// every static slot becomes a dynamic one keyed by its member id.
    NameMapDropped { group: String },
    /// The group's complete durable state (static name map, epochs, target,
    /// holdings), written each time the group becomes stable. Applying it
    /// replaces the group, so every earlier record of the group is garbage
    /// the log may compact away.
    GroupSnapshot { group: String, state: Box<Group> },
    /// The group was bound to an assignor and params (at creation, by a
    /// config change, by `PUT .../assignor`, or by a rollback): sets
    /// `config.assignor` / `config.params` and appends to the history.
    AssignorBound { group: String, binding: Binding },
    /// A new incarnation of a static slot waits for the last lease given to
    /// the one it replaced before it is granted the slot's tasks (the
    /// previous incarnation may still run). Logged so that a host restarted
    /// meanwhile keeps waiting ([`Group::handovers`]).
    HandoverStarted { group: String, slot: Slot },
    /// That wait is over.
    HandoverEnded { group: String, slot: Slot },
    /// A member published a new endpoint or metadata for the routing
    /// table (at its join they are part of [`Record::MemberJoined`]).
    MemberEndpointChanged {
        group: String,
        slot: Slot,
        endpoint: Option<String>,
        metadata: BTreeMap<String, String>,
    },
    /// A shadow assignor was bound beside the group's assignor, replaced,
    /// or (`None`) ended. It changes no target.
    ShadowBound {
        group: String,
        shadow: Option<ShadowBinding>,
    },
}

impl Record {
    pub fn group(&self) -> &str {
        match self {
            Record::GroupConfigured { group, .. }
            | Record::MemberJoined { group, .. }
            | Record::MemberAway { group, .. }
            | Record::MemberRemoved { group, .. }
            | Record::GroupEpochBumped { group, .. }
            | Record::TargetInstalled { group, .. }
            | Record::MemberReconciled { group, .. }
            | Record::MemberDraining { group, .. }
            | Record::GroupSnapshot { group, .. }
            | Record::AssignorBound { group, .. }
            | Record::HandoverStarted { group, .. }
            | Record::HandoverEnded { group, .. }
            | Record::MemberEndpointChanged { group, .. }
            | Record::ShadowBound { group, .. }
            | Record::NameMapDropped { group } => group,
        }
    }

    /// Whether the record changes what the group's routing table says (an
    /// owner, a learner, a standby, a move, a member or its endpoint, the
    /// topics), so that the table's epoch rises with it. A snapshot
    /// carries the epoch it was taken at.
    pub fn changes_routes(&self) -> bool {
        match self {
            Record::GroupConfigured { .. }
            | Record::MemberJoined { .. }
            | Record::MemberRemoved { .. }
            | Record::TargetInstalled { .. }
            | Record::MemberReconciled { .. }
            | Record::NameMapDropped { .. }
            | Record::MemberEndpointChanged { .. } => true,
            Record::MemberAway { .. }
            | Record::GroupEpochBumped { .. }
            | Record::MemberDraining { .. }
            | Record::GroupSnapshot { .. }
            | Record::AssignorBound { .. }
            | Record::HandoverStarted { .. }
            | Record::HandoverEnded { .. }
            | Record::ShadowBound { .. } => false,
        }
    }
}
