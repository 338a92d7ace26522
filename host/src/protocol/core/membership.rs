//! Who is in a group: joins (a host-issued or member-chosen id; a static
//! name's slot taken over by a new incarnation, which is fenced from the old
//! one's tasks until its lease ends; the name map dropped by a nameless
//! join), leaves, removals (left, expired, fenced, drained) and drains. Each
//! handler emits the membership records and keeps the slot's transient
//! liveness in step; asking for the new target is targets.rs's.

use std::collections::BTreeSet;

use super::{
    Coordinator, Heartbeat, MEMBER_ID_LEN_MAX, MEMBERS_PER_GROUP_MAX, Output, ProtocolError,
    invalid,
};
use crate::protocol::group::{
    FENCED_MEMBER_IDS_MAX, Group, Member, Millis, RebalanceReason, Record, RemovalReason, Slot,
    Task,
};
use crate::protocol::splitmix::splitmix;

impl Coordinator {
    /// The next host-issued id: derived from the seed, the group and the
    /// ids issued so far; one a member chose itself is skipped.
    fn next_member_id(&self, group: &Group) -> String {
        let mut h = splitmix(self.seed);
        for b in group.name.bytes() {
            h = splitmix(h ^ u64::from(b));
        }
        (0u64..)
            .map(|k| {
                format!(
                    "m-{:016x}",
                    splitmix(h ^ group.member_ids_issued.wrapping_add(k << 32))
                )
            })
            .find(|id| group.slot_of(id).is_none() && !group.is_fenced(id))
            .expect("an unused id among 2^64")
    }

    /// Starts draining a member: the assignor stops seeing it, its tasks get
    /// learners elsewhere and move as they catch up, and once it holds
    /// nothing it is told it may exit. After the scale-down timeout the rest
    /// moves anyway and the member is fenced.
    pub(super) fn start_drain(
        &mut self,
        group_name: &str,
        slot: &Slot,
        now: Millis,
        out: &mut Output,
    ) {
        self.emit(
            out,
            Record::MemberDraining {
                group: group_name.to_owned(),
                slot: slot.to_owned(),
            },
        );
        let liveness = self.liveness_mut(group_name);
        liveness.draining_since_ms.insert(slot.to_owned(), now);
        self.bump_urgently(group_name, RebalanceReason::Drain, now, out);
    }

    /// An admin asks a member to drain; `member` is a member id or a static
    /// member name.
    pub fn drain(
        &mut self,
        group_name: &str,
        member: &str,
        now: Millis,
    ) -> Result<Output, ProtocolError> {
        self.observe_time(now);
        self.deadlines.mark_group(group_name);
        let group = self
            .group(group_name)
            .ok_or_else(|| ProtocolError::UnknownGroup(group_name.to_owned()))?;
        let slot = match group.slot_of(member) {
            Some(slot) => slot.clone(),
            None => {
                let named = Slot::named(member);
                if group.members.contains_key(&named) {
                    named
                } else {
                    return Err(ProtocolError::UnknownMember(
                        member.to_owned(),
                        group_name.to_owned(),
                    ));
                }
            }
        };
        let mut out = Output::default();
        if !group.members[&slot].draining {
            self.start_drain(group_name, &slot, now, &mut out);
            self.maybe_call_assignor(group_name, now, &mut out);
        }
        Ok(out)
    }

    /// The slot of a current member id, or why it has none: another
    /// incarnation took its name (the request names a static slot that has
    /// another member id now, or this host saw the takeover), it was
    /// removed, or it is unknown.
    pub(super) fn current_slot(&self, request: &Heartbeat) -> Result<Slot, ProtocolError> {
        let (group_name, member_id) = (&request.group, &request.member_id);
        let group = self.group_at(group_name);
        if let Some(slot) = group.slot_of(member_id) {
            return Ok(slot.clone());
        }
        let replaced_by_name = request
            .member_name
            .as_ref()
            .filter(|_| !group.dynamic_only)
            .filter(|name| group.members.contains_key(&Slot::named(name)))
            .cloned();
        let replaced = replaced_by_name.or_else(|| {
            self.liveness(group_name)
                .and_then(|l| l.replaced.iter().find(|(id, _)| id == member_id))
                .map(|(_, name)| name.clone())
        });
        if let Some(member_name) = replaced {
            return Err(ProtocolError::Replaced {
                member_id: member_id.clone(),
                member_name,
            });
        }
        if group.is_fenced(member_id) {
            return Err(ProtocolError::Fenced {
                member_id: member_id.clone(),
            });
        }
        Err(ProtocolError::UnknownMember(
            member_id.clone(),
            group_name.clone(),
        ))
    }

    /// A join: the member gets a slot (its own, or its static name's, taken
    /// from an earlier incarnation) and, unless it only replaced an
    /// incarnation with the same subscription, asks for a new target.
    pub(super) fn join(
        &mut self,
        request: &Heartbeat,
        topics: Option<BTreeSet<String>>,
        now: Millis,
        out: &mut Output,
    ) -> Result<Slot, ProtocolError> {
        let Some(topics) = topics else {
            return invalid("a join must carry the member's topics".into());
        };
        let group_name = request.group.clone();
        let group = self.group_at(&group_name);
        let name = request.member_name.clone().filter(|_| !group.dynamic_only);
        let member_id = if request.member_id.is_empty() {
            self.next_member_id(group)
        } else {
            request.member_id.clone()
        };
        let mut member = Member {
            member_id,
            name: name.clone(),
            topics,
            rack: request.rack.clone(),
            capacity: request.capacity.unwrap_or(1),
            away: false,
            draining: false,
            endpoint: request.endpoint.clone().filter(|e| !e.is_empty()),
            metadata: request.metadata.clone().unwrap_or_default(),
        };
        let slot = group.join_slot(name.as_deref(), &member.member_id);
        let mut handover_started = false;
        let needs_target = match group.members.get(&slot) {
            // A restart (or a second process) with the same name: the new
            // incarnation takes the slot and its tasks, the old one is
            // fenced. Nobody else's assignment changes unless the
            // subscription did.
            Some(previous) => {
                // A draining member stays draining across restarts.
                member.draining = previous.draining;
                let topics_changed = previous.topics != member.topics;
                let previous_id = previous.member_id.clone();
                let named = name.clone().expect("a static slot");
                handover_started =
                    self.replace_incarnation(&group_name, &slot, previous_id, named, now);
                topics_changed
            }
            None => {
                self.open_slot(&group_name, name.is_some(), out)?;
                true
            }
        };
        self.emit(
            out,
            Record::MemberJoined {
                group: group_name.clone(),
                slot: slot.clone(),
                member,
            },
        );
        if handover_started {
            self.emit(
                out,
                Record::HandoverStarted {
                    group: group_name.clone(),
                    slot: slot.clone(),
                },
            );
        }
        if needs_target {
            self.bump(&group_name, RebalanceReason::Join, now, out);
        }
        Ok(slot)
    }

    /// A new incarnation takes a static slot from `previous_id`: the old
    /// one is told it was replaced, and, if it may still process the
    /// slot's tasks under the last lease it was given (two processes with
    /// one name), the new one gets them only once that lease ends, as a
    /// removed member's next owner would. Returns whether such a handover
    /// started.
    fn replace_incarnation(
        &mut self,
        group_name: &str,
        slot: &Slot,
        previous_id: String,
        name: String,
        now: Millis,
    ) -> bool {
        let held: BTreeSet<Task> = self
            .group_at(group_name)
            .holdings
            .member(slot)
            .map(|h| h.held().cloned().collect())
            .unwrap_or_default();
        let liveness = self.liveness_mut(group_name);
        if liveness.replaced.len() == FENCED_MEMBER_IDS_MAX {
            liveness.replaced.pop_front();
        }
        liveness.replaced.push_back((previous_id, name));
        // The replaced incarnation may still process until its lease
        // ends, and routing tables served until now may still name it.
        let until_ms = liveness
            .lease_floor_ms(slot)
            .into_iter()
            .chain(liveness.routes_promised_until_ms)
            .max();
        if let Some(until_ms) = until_ms
            && until_ms > now
            && !held.is_empty()
        {
            let handover = liveness.handover.entry(slot.clone()).or_default();
            handover.until_ms = handover.until_ms.max(until_ms);
            handover.tasks.extend(held);
            return true;
        }
        false
    }

    /// Makes room for a new slot: refused in a full group; a nameless join
    /// (`named` false) into a stable group with static members drops the
    /// name map first.
    fn open_slot(
        &mut self,
        group_name: &str,
        named: bool,
        out: &mut Output,
    ) -> Result<(), ProtocolError> {
        let group = self.group_at(group_name);
        if group.members.len() >= MEMBERS_PER_GROUP_MAX {
            return Err(ProtocolError::GroupFull(group_name.to_owned()));
        }
        // The seed design's fallback: a nameless join into a stable group
        // with static members switches it to dynamic membership for good.
        let has_static = group.members.values().any(|m| m.name.is_some());
        if !named && has_static && !group.dynamic_only && group.is_stable() {
            let moves = group.slots_without_names();
            self.emit(
                out,
                Record::NameMapDropped {
                    group: group_name.to_owned(),
                },
            );
            // The slots' timers, lease promises and lags move with them: a
            // drain keeps its deadline, and no timer of the new slot acts
            // before a lease given under the old one.
            let liveness = self.liveness_mut(group_name);
            for (from, to) in &moves {
                liveness.rekey(from, to);
            }
        }
        Ok(())
    }

    pub(super) fn leave(&mut self, group_name: &str, slot: &Slot, now: Millis, out: &mut Output) {
        let group = self.group_at(group_name);
        let member = &group.members[slot];
        let handover_pending = self
            .liveness(group_name)
            .and_then(|l| l.handover.get(slot))
            .is_some_and(|h| h.until_ms > now && !h.tasks.is_empty());
        if member.draining && handover_pending {
            // This incarnation gives its own lease back, not the one of
            // the incarnation it replaced, which may still process the
            // slot's tasks: the slot goes once that lease ends
            // (`tick_group`), not now.
            self.liveness_mut(group_name)
                .departing
                .insert(slot.to_owned());
            self.deadlines.mark_slot(group_name, slot);
        } else if member.name.is_some() && !member.draining {
            self.emit(
                out,
                Record::MemberAway {
                    group: group_name.to_owned(),
                    slot: slot.to_owned(),
                    away: true,
                },
            );
            // It stopped processing before it left: no lease of it runs on,
            // and a new incarnation gets the slot's tasks at once.
            let liveness = self.liveness_mut(group_name);
            liveness.lease_end_ms.remove(slot);
            liveness.unreached_end_ms.remove(slot);
        } else {
            self.remove(group_name, slot, RemovalReason::Left, now, out);
        }
    }

    pub(super) fn remove(
        &mut self,
        group_name: &str,
        slot: &Slot,
        reason: RemovalReason,
        now: Millis,
        out: &mut Output,
    ) {
        self.emit(
            out,
            Record::MemberRemoved {
                group: group_name.to_owned(),
                slot: slot.to_owned(),
                reason,
            },
        );
        let liveness = self.liveness_mut(group_name);
        liveness.last_seen_ms.remove(slot);
        liveness.revoking_since_ms.remove(slot);
        liveness.lags.remove(slot);
        liveness.loads.remove_slot(slot);
        liveness.draining_since_ms.remove(slot);
        liveness.lease_end_ms.remove(slot);
        liveness.unreached_end_ms.remove(slot);
        liveness.handover.remove(slot);
        liveness.departing.remove(slot);
        liveness.caught_up_signalled.retain(|(s, _)| s != slot);
        // The expansion timeout batches arrivals; a departure (a leave, an
        // expiry, a fence, a drain that ran out) leaves tasks without an
        // owner, so the next target is asked for at once (as KIP-848's
        // coordinator does), together with whatever the batch holds.
        let why = RebalanceReason::of_removal(reason);
        self.bump_urgently(group_name, why, now, out);
    }
}

/// Refuses a member-chosen id that is empty, too long or has characters
/// outside `[A-Za-z0-9._-]` (host-issued ids, `m-` and hex, pass).
pub(super) fn check_member_id(member_id: &str) -> Result<(), ProtocolError> {
    if member_id.is_empty()
        || member_id.len() > MEMBER_ID_LEN_MAX
        || !member_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return invalid(format!(
            "member_id must be empty (the host issues one) or 1 to {MEMBER_ID_LEN_MAX} bytes of A-Z, a-z, 0-9, '.', '_', '-'"
        ));
    }
    Ok(())
}
