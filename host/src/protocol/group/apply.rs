//! [`Group::apply`]: the one code that changes a group's state, one
//! [`Record`] at a time, for live changes and replay alike.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{BINDINGS_MAX, Binding, Group, Member, Record, Slot, SlotTarget, Task};
use crate::protocol::reconcile::MemberAssignment;

impl Group {
    /// Applies one record: the only way a group changes. It asserts what
    /// it relies on (the record's slot is a member, epochs only move
    /// forward, a target is never ahead of the group epoch, a reconciled
    /// epoch never ahead of the target, a handover ends only once
    /// started): the core's handlers check their input before they emit,
    /// and replay asks `Coordinator::check_replay` before each record (a
    /// damaged log is refused, not applied), so a failed assertion is a
    /// bug.
    pub fn apply(&mut self, record: &Record) {
        debug_assert_eq!(record.group(), self.name);
        if record.changes_routes() {
            self.routes_epoch += 1;
        }
        match record {
            Record::GroupConfigured { config, .. } => self.config = config.clone(),
            Record::MemberJoined { slot, member, .. } => self.apply_member_joined(slot, member),
            Record::MemberAway { slot, away, .. } => {
                self.member_mut(slot).away = *away;
            }
            Record::MemberRemoved { slot, .. } => self.apply_member_removed(slot),
            Record::GroupEpochBumped { epoch, .. } => self.apply_epoch_bump(*epoch),
            Record::TargetInstalled { epoch, target, .. } => self.apply_target(*epoch, target),
            Record::MemberReconciled {
                slot, assignment, ..
            } => self.apply_reconciled(slot, assignment),
            Record::GroupSnapshot { state, .. } => {
                assert_eq!(state.name, self.name, "a snapshot of another group");
                *self = (**state).clone();
            }
            Record::AssignorBound { binding, .. } => self.apply_binding(binding),
            Record::ShadowBound { shadow, .. } => self.shadow = shadow.clone(),
            Record::MemberDraining { slot, .. } => {
                self.member_mut(slot).draining = true;
            }
            Record::HandoverStarted { slot, .. } => {
                assert!(self.members.contains_key(slot), "{}", self.no_slot(slot));
                self.handovers.insert(slot.clone());
            }
            Record::HandoverEnded { slot, .. } => {
                assert!(
                    self.handovers.remove(slot),
                    "group {:?}: a handover of slot {slot:?} ends that never started",
                    self.name
                );
            }
            Record::NameMapDropped { .. } => self.apply_name_map_dropped(),
            Record::MemberEndpointChanged {
                slot,
                endpoint,
                metadata,
                ..
            } => {
                let member = self.member_mut(slot);
                member.endpoint = endpoint.clone();
                member.metadata = metadata.clone();
            }
        }
    }

    /// [`Record::MemberJoined`]: the slot's member, an earlier incarnation
    /// of it fenced.
    fn apply_member_joined(&mut self, slot: &Slot, member: &Member) {
        if let Some(previous) = self.members.get(slot) {
            self.fence(previous.member_id.clone());
        }
        self.members.insert(slot.clone(), member.clone());
        self.member_ids_issued += 1;
    }

    /// [`Record::MemberRemoved`]: the member fenced, its slot's holdings,
    /// target and handover gone.
    fn apply_member_removed(&mut self, slot: &Slot) {
        let member = self.members.remove(slot);
        let member = member.unwrap_or_else(|| panic!("{}", self.no_slot(slot)));
        self.fence(member.member_id);
        self.holdings.remove(slot);
        Arc::make_mut(&mut self.target).remove(slot);
        self.handovers.remove(slot);
    }

    /// [`Record::GroupEpochBumped`]: the group epoch, only ever forward.
    fn apply_epoch_bump(&mut self, epoch: u64) {
        assert!(
            epoch > self.group_epoch,
            "group {:?}: epoch {epoch} is not past {}",
            self.name,
            self.group_epoch
        );
        self.group_epoch = epoch;
    }

    /// [`Record::TargetInstalled`]: the target, never behind the installed
    /// one nor ahead of the group epoch.
    fn apply_target(&mut self, epoch: u64, target: &Arc<BTreeMap<Slot, SlotTarget>>) {
        assert!(
            self.target_epoch <= epoch && epoch <= self.group_epoch,
            "group {:?}: target epoch {epoch} is not between {} and the group epoch {}",
            self.name,
            self.target_epoch,
            self.group_epoch
        );
        self.target_epoch = epoch;
        self.target = Arc::clone(target);
    }

    /// [`Record::MemberReconciled`]: what a member's slot holds, never at
    /// an epoch past the target's.
    fn apply_reconciled(&mut self, slot: &Slot, assignment: &MemberAssignment<Task>) {
        assert!(self.members.contains_key(slot), "{}", self.no_slot(slot));
        assert!(
            assignment.epoch <= self.target_epoch,
            "group {:?}: slot {slot:?} reconciled at epoch {} past the target epoch {}",
            self.name,
            assignment.epoch,
            self.target_epoch
        );
        self.holdings.set(slot, assignment.clone());
    }

    /// [`Record::AssignorBound`]: the binding in the config and at the end
    /// of the bounded history.
    fn apply_binding(&mut self, binding: &Binding) {
        self.config.set_binding(binding.spec());
        if self.bindings.len() == BINDINGS_MAX {
            self.bindings.pop_front();
        }
        self.bindings.push_back(binding.clone());
    }

    /// [`Record::NameMapDropped`]: names are ignored from now on, and each
    /// static slot is re-keyed by member id; its target, holdings and
    /// handover move with it.
    fn apply_name_map_dropped(&mut self) {
        self.dynamic_only = true;
        for (slot, key) in self.slots_without_names() {
            let member = self.members.remove(&slot).expect("a member's slot");
            self.members.insert(key.clone(), member);
            let target = Arc::make_mut(&mut self.target);
            if let Some(tasks) = target.remove(&slot) {
                target.insert(key.clone(), tasks);
            }
            if let Some(held) = self.holdings.remove(&slot) {
                self.holdings.set(&key, held);
            }
            if self.handovers.remove(&slot) {
                self.handovers.insert(key.clone());
            }
        }
        for member in self.members.values_mut() {
            member.name = None;
            member.away = false;
        }
    }

    fn member_mut(&mut self, slot: &str) -> &mut Member {
        if !self.members.contains_key(slot) {
            panic!("{}", self.no_slot(slot));
        }
        self.members.get_mut(slot).expect("checked above")
    }

    fn no_slot(&self, slot: &str) -> String {
        format!(
            "group {:?}: a record of slot {slot:?}, which is not a member",
            self.name
        )
    }
}
