//! A group's durable state ([`Group`]: its members, epochs, target and
//! holdings) and what it can tell of itself: its [`Phase`], its slots, its
//! fenced ids. The one code that changes it, [`Group::apply`], is in
//! `apply.rs`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{Binding, GroupConfig, Slot, Task};
use crate::protocol::reconcile::{Holdings, MemberAssignment};

/// What the target gives one slot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotTarget {
    /// Tasks the slot processes (granted once their old owner released them).
    pub active: BTreeSet<Task>,
    /// Tasks the slot warms up (replays state for) before taking them over.
    pub learner: BTreeSet<Task>,
    /// Hot copies kept for failover.
    pub standby: BTreeSet<Task>,
}

/// A member slot: one worker identity. A dynamic member's slot is its
/// member id; a static member's slot is its name, and survives restarts
/// (each restart is a new incarnation with a new member id).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// The member id the current incarnation must send.
    pub member_id: String,
    /// The static member name, if the member is static.
    pub name: Option<String>,
    pub topics: BTreeSet<String>,
    pub rack: Option<String>,
    pub capacity: u32,
    /// A static member that left temporarily (it keeps its slot until its
    /// registration timeout).
    pub away: bool,
    /// Asked to leave the group gracefully: the assignor no longer sees it,
    /// its tasks move as learners elsewhere catch up, then it may exit.
    #[serde(default)]
    pub draining: bool,
    /// Where the member serves, as it published it, for the routing table.
    #[serde(default)]
    pub endpoint: Option<String>,
    /// The small string pairs it published with it.
    #[serde(default)]
    pub metadata: BTreeMap<String, String>,
}

/// Where a group is on its way to its target: the one rule behind the
/// state the API shows and the groups the metrics count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Every member holds exactly its target at the target epoch.
    Stable,
    /// The group needs a new target.
    Assigning,
    /// The target is current; members are still releasing or receiving
    /// tasks.
    Reconciling,
}

impl Phase {
    pub const ALL: [Phase; 3] = [Phase::Stable, Phase::Assigning, Phase::Reconciling];

    /// The phase as a metric label and log field.
    pub fn label(self) -> &'static str {
        match self {
            Phase::Stable => "stable",
            Phase::Assigning => "assigning",
            Phase::Reconciling => "reconciling",
        }
    }
}

/// A group's durable state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub name: String,
    pub config: GroupConfig,
    /// Bumped whenever the group needs a new target.
    pub group_epoch: u64,
    /// The epoch of the installed target.
    pub target_epoch: u64,
    /// Slots by slot key.
    pub members: BTreeMap<Slot, Member>,
    /// The installed target per slot, shared with the record that
    /// installed it: a big group's target is hundreds of thousands of
    /// rows, and copying it under the shard's lock on every install (and
    /// every snapshot) showed in the profile.
    pub target: Arc<BTreeMap<Slot, SlotTarget>>,
    /// What each slot holds now, and who holds each task.
    #[serde(with = "holdings_by_slot")]
    pub holdings: Holdings<Task>,
    /// Member ids of earlier incarnations (and of removed members) whose
    /// requests must be refused as fenced, oldest first.
    pub fenced_member_ids: std::collections::VecDeque<String>,
    /// Member ids issued so far in this group; the next id derives from it.
    pub member_ids_issued: u64,
    /// Once a group has fallen back to dynamic membership, names are
    /// ignored.
    pub dynamic_only: bool,
    /// The target epoch of the last [`Record::GroupSnapshot`](super::Record::GroupSnapshot).
    pub snapshot_epoch: u64,
    /// The last [`BINDINGS_MAX`](super::BINDINGS_MAX) assignor bindings, oldest first; the last
    /// one is the current binding.
    pub bindings: std::collections::VecDeque<Binding>,
    /// Slots whose incarnation waits for the lease of the one it replaced
    /// ([`Record::HandoverStarted`](super::Record::HandoverStarted)). How long is not durable (leases are
    /// in the process's own time): a restarted host waits the longest lease
    /// an answer could have given.
    pub handovers: BTreeSet<Slot>,
    /// The routing table's epoch: one more for every record that changes
    /// what the table says (`Group::apply`), so that a watcher resumes from
    /// it on any host that replays the group.
    pub routes_epoch: u64,
    /// The assignor shadowing the bound one, if any
    /// ([`Record::ShadowBound`](super::Record::ShadowBound)).
    pub shadow: Option<super::ShadowBinding>,
}

/// Holdings go to disk as each slot's assignment; the task → holder index
/// is rebuilt on load.
pub(crate) mod holdings_by_slot {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::{Holdings, MemberAssignment, Slot, Task};

    pub fn serialize<S: Serializer>(h: &Holdings<Task>, s: S) -> Result<S::Ok, S::Error> {
        let by_slot: BTreeMap<&Slot, &MemberAssignment<Task>> = h.members().collect();
        by_slot.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Holdings<Task>, D::Error> {
        let by_slot = BTreeMap::<Slot, MemberAssignment<Task>>::deserialize(d)?;
        let mut holdings: Holdings<Task> = Holdings::default();
        for (slot, assignment) in by_slot {
            // A task held twice (by two slots, or active and released by
            // one) would trip `Holdings::set`: refuse the snapshot instead.
            if let Some(task) = assignment.held().find(|task| {
                holdings.holder(task).is_some()
                    || assignment.revoking.contains(task) && assignment.active.contains(task)
            }) {
                return Err(serde::de::Error::custom(format!(
                    "snapshot holds {task:?} twice"
                )));
            }
            holdings.set(&slot, assignment);
        }
        Ok(holdings)
    }
}

/// Fenced ids kept per group to tell "fenced" from "unknown"; the oldest
/// are forgotten past this, and then answer "unknown member".
pub const FENCED_MEMBER_IDS_MAX: usize = 1024;

impl Group {
    pub fn new(name: &str, config: GroupConfig) -> Self {
        Group {
            name: name.to_owned(),
            config,
            group_epoch: 0,
            target_epoch: 0,
            members: BTreeMap::new(),
            target: Default::default(),
            holdings: Holdings::default(),
            fenced_member_ids: std::collections::VecDeque::new(),
            member_ids_issued: 0,
            dynamic_only: false,
            snapshot_epoch: 0,
            bindings: std::collections::VecDeque::new(),
            handovers: BTreeSet::new(),
            routes_epoch: 0,
            shadow: None,
        }
    }

    /// The binding before the current one, which a rollback returns to.
    pub fn previous_binding(&self) -> Option<&Binding> {
        self.bindings
            .len()
            .checked_sub(2)
            .map(|i| &self.bindings[i])
    }

    /// The slot a join takes: `static:{name}` for a named member (unless
    /// the group dropped its name map), else its member id (empty while the
    /// host is still to issue one).
    pub fn join_slot(&self, member_name: Option<&str>, member_id: &str) -> Slot {
        match member_name.filter(|_| !self.dynamic_only) {
            Some(name) => Slot::named(name),
            None => Slot::dynamic(member_id),
        }
    }

    /// The slot a member id belongs to, if it is current.
    pub fn slot_of(&self, member_id: &str) -> Option<&Slot> {
        self.members
            .iter()
            .find(|(_, m)| m.member_id == member_id)
            .map(|(slot, _)| slot)
    }

    /// Whether every member holds exactly its target at the target epoch.
    pub fn is_stable(&self) -> bool {
        self.group_epoch == self.target_epoch
            && self.members.keys().all(|slot| {
                self.holdings.member(slot).is_some_and(|a| {
                    a.epoch == self.target_epoch
                        && a.revoking.is_empty()
                        && self
                            .target
                            .get(slot)
                            .map_or(a.active.is_empty(), |t| a.active == t.active)
                })
            })
    }

    /// The group's [`Phase`].
    pub fn phase(&self) -> Phase {
        if self.is_stable() {
            Phase::Stable
        } else if self.group_epoch != self.target_epoch {
            Phase::Assigning
        } else {
            Phase::Reconciling
        }
    }

    /// The target of a slot (empty if the target does not name it).
    pub fn target_of(&self, slot: &str) -> &SlotTarget {
        static NOTHING: SlotTarget = SlotTarget {
            active: BTreeSet::new(),
            learner: BTreeSet::new(),
            standby: BTreeSet::new(),
        };
        self.target.get(slot).unwrap_or(&NOTHING)
    }

    /// Learners in the installed target.
    pub fn learner_count(&self) -> usize {
        self.target.values().map(|t| t.learner.len()).sum()
    }

    /// Every task of the group's topics.
    pub fn tasks(&self) -> impl Iterator<Item = Task> + '_ {
        self.config
            .topics
            .iter()
            .flat_map(|t| (0..t.partitions).map(|p| Task::new(&t.name, p)))
    }

    /// Where each static slot moves when the name map is dropped
    /// ([`Record::NameMapDropped`](super::Record::NameMapDropped)): from `static:{name}` to its member's
    /// id. The core moves the slot's transient state the same way.
    pub fn slots_without_names(&self) -> Vec<(Slot, Slot)> {
        self.members
            .iter()
            .filter(|(_, member)| member.name.is_some())
            .map(|(slot, member)| (slot.clone(), Slot::dynamic(&member.member_id)))
            .collect()
    }

    pub(super) fn fence(&mut self, member_id: String) {
        if self.fenced_member_ids.len() == FENCED_MEMBER_IDS_MAX {
            self.fenced_member_ids.pop_front();
        }
        self.fenced_member_ids.push_back(member_id);
    }

    /// Whether `member_id` belonged to an earlier incarnation or a removed
    /// member (among the last [`FENCED_MEMBER_IDS_MAX`]).
    pub fn is_fenced(&self, member_id: &str) -> bool {
        self.fenced_member_ids.iter().any(|id| id == member_id)
    }
}
