//! How long a member's tasks stay its own when the host hears nothing more
//! from it: the lease each answer carries ([`Coordinator::lease_ms`]), the
//! longest lease an answer can give ([`lease_ms_max`]), the longer lease a
//! member keeps while its heartbeats cannot reach the coordinator
//! ([`Coordinator::unreached_lease_ms`]), and what a restarted host takes of
//! the leases it cannot know ([`Coordinator::restarted`]). A
//! handover (a new incarnation of a name waiting for the old one's last
//! lease) starts at the join (membership.rs) and is honoured in the answer
//! (heartbeat.rs); the leases it waits for are kept here.

use super::{BACKPRESSURE_TIMEOUT_DIVISOR, Coordinator};
use crate::protocol::group::{GroupConfig, Member, Millis, Slot};

impl Coordinator {
    /// After recovery, before serving: the previous process may have
    /// answered any member just before it stopped, and how long that
    /// answer's lease runs was never logged. So every member that holds
    /// tasks is taken to hold the longest lease an answer could give it,
    /// unreached grace included (its heartbeats found no coordinator while
    /// none served the shard), from `now`: a new incarnation of its name (a takeover right after
    /// the restart) is granted its tasks only once that has passed, as
    /// invariant 1 asks of every other handover, and one that was already
    /// waiting for the incarnation it replaced ([`Group::handovers`](crate::protocol::group::Group::handovers))
    /// waits that long again. Timers are not moved: a member's timeout
    /// from `now` is never shorter.
    pub fn restarted(&mut self, now: Millis) {
        self.observe_time(now);
        for (name, entry) in &mut self.groups {
            self.deadlines.mark_group(name);
            let (group, liveness) = (&entry.group, &mut entry.liveness);
            // The previous process may have served routing tables just
            // before it stopped: their promise is kept as if served now.
            let routes_end = now.saturating_add(group.config.routes_valid_ms);
            liveness.routes_promised_until_ms = Some(routes_end);
            liveness.revocations_held_until_ms = Some(routes_end);
            liveness.grants_held_until_ms = Some(routes_end);
            for (slot, member) in &group.members {
                let Some(held) = group
                    .holdings
                    .member(slot)
                    .filter(|h| h.held().next().is_some())
                else {
                    continue;
                };
                let end = now
                    .saturating_add(lease_ms_max(&group.config, member))
                    .saturating_add(self.unreached_grace_ms);
                let promised = liveness.lease_end_ms.entry(slot.clone()).or_insert(end);
                *promised = (*promised).max(end);
                // An incarnation that was still waiting for the one it
                // replaced waits on: that one may still run on its lease.
                if group.handovers.contains(slot) {
                    let handover = liveness.handover.entry(slot.clone()).or_default();
                    // And tables served before the restart may name it.
                    handover.until_ms = handover.until_ms.max(end).max(routes_end);
                    handover.tasks.extend(held.held().cloned());
                }
            }
        }
    }

    /// How long after `now` the slot keeps its tasks if the host hears
    /// nothing more from it: the earliest of its session (or registration)
    /// timeout, the fence for tasks it has not released, the end of its
    /// drain, and what could start right after this answer: a drain an
    /// admin starts, a revocation at its next heartbeat, the name map
    /// dropped. A member that stops processing once this long has passed
    /// since it *sent* the heartbeat stops before the host can give its
    /// tasks to anyone else, however long it was stalled.
    /// `interval_ms` is the heartbeat interval of this answer: the margin
    /// for a revocation at the next heartbeat is at least that long (under
    /// backpressure it is longer than the group's interval).
    pub(super) fn lease_ms(
        &self,
        group_name: &str,
        slot: &Slot,
        now: Millis,
        interval_ms: u64,
    ) -> u64 {
        let group = self.group_at(group_name);
        let config = &group.config;
        let member = &group.members[slot];
        let liveness = self.liveness(group_name);
        let mut removal = self.silent_removal_ms(group_name, slot, now);
        if let Some(&since) = liveness.and_then(|l| l.revoking_since_ms.get(slot)) {
            // The grace heartbeat interval of `tick` is left out on purpose:
            // it stays a margin for the answer's way back.
            removal = removal.min(since.saturating_add(config.expansion_timeout_ms));
        } else {
            // Nothing to release yet, but the next heartbeat may be told to
            // revoke and its answer be lost: the member, still holding this
            // lease, cannot know, and `tick` fences it an expansion timeout
            // and a heartbeat interval after that heartbeat. It comes after
            // this one: the gap between the two is the margin here.
            removal = removal.min(
                now.saturating_add(config.expansion_timeout_ms)
                    .saturating_add(config.heartbeat_interval_ms.max(interval_ms)),
            );
        }
        let lease_ms = removal.saturating_sub(now);
        debug_assert!(
            lease_ms <= lease_ms_max(config, member),
            "a lease past the longest a restarted host assumes"
        );
        lease_ms
    }

    /// How long after `now` the slot keeps its tasks if none of its later
    /// heartbeats reaches this coordinator (they find no node serving the
    /// shard, as during a takeover): `lease_ms`, the answer's plain lease,
    /// plus the unreached grace, within the slot's timeouts and drain.
    ///
    /// Why it holds: the plain lease's margin is for a revocation told at
    /// the *next* heartbeat whose answer is lost; a revocation (and the
    /// fence after it) needs a heartbeat that reaches the coordinator, and
    /// so does everything else that takes a slot's tasks before its timeout
    /// (`revoking_since_ms` is set only while a heartbeat is handled). The
    /// member counts on this lease only while every heartbeat since this
    /// answer provably did not reach a coordinator; one that may have
    /// replaces it ([`Liveness::unreached_end_ms`](crate::protocol::group::Liveness::unreached_end_ms)),
    /// and no timer, handover or restart acts before it ends. An answer
    /// with tasks to revoke gets no grace: the fence for them is already
    /// running.
    pub(super) fn unreached_lease_ms(
        &self,
        group_name: &str,
        slot: &Slot,
        now: Millis,
        lease_ms: u64,
    ) -> u64 {
        let revoking = self
            .liveness(group_name)
            .is_some_and(|l| l.revoking_since_ms.contains_key(slot));
        if self.unreached_grace_ms == 0 || revoking {
            return lease_ms;
        }
        let unreached_ms = self
            .silent_removal_ms(group_name, slot, now)
            .saturating_sub(now)
            .min(lease_ms.saturating_add(self.unreached_grace_ms));
        unreached_ms.max(lease_ms)
    }

    /// The least time the host keeps the slot's tasks after handling any
    /// later heartbeat of it: a revocation told then is fenced an
    /// expansion timeout and a heartbeat interval later, its silence is
    /// judged from then, a drain ends no sooner than now plus the
    /// scale-down timeout (or its end, already set). A member on its
    /// unreached lease counts on it, while a heartbeat is in flight, only
    /// until that heartbeat's send time plus this: should the heartbeat
    /// reach the coordinator and its answer be lost, the member stops
    /// before the host can act on it. (A revocation already under way
    /// would be fenced sooner, but a member told to revoke, or whose
    /// heartbeat that told it may have arrived, is never on its unreached
    /// lease.)
    pub(super) fn unreached_flight_ms(&self, group_name: &str, slot: &Slot, now: Millis) -> u64 {
        let group = self.group_at(group_name);
        let config = &group.config;
        let member = &group.members[slot];
        config
            .expansion_timeout_ms
            .saturating_add(config.heartbeat_interval_ms)
            .min(member_timeout_ms(config, member))
            .min(self.drain_end_ms(group_name, slot, now).saturating_sub(now))
    }

    /// When the slot goes if the host hears nothing more from it and tells
    /// it nothing to release: its timeout from when it was last heard
    /// from, or its drain's end, whichever comes first.
    fn silent_removal_ms(&self, group_name: &str, slot: &Slot, now: Millis) -> Millis {
        let group = self.group_at(group_name);
        let last_seen = self
            .liveness(group_name)
            .and_then(|l| l.last_seen_ms.get(slot).copied())
            .unwrap_or(now);
        last_seen
            .saturating_add(member_timeout_ms(&group.config, &group.members[slot]))
            .min(self.drain_end_ms(group_name, slot, now))
    }

    /// When the slot's drain ends: the scale-down timeout after the drain
    /// began, or after `now` for a slot not draining (an admin may start a
    /// drain right after).
    fn drain_end_ms(&self, group_name: &str, slot: &Slot, now: Millis) -> Millis {
        let group = self.group_at(group_name);
        let drain_started = if group.members[slot].draining {
            self.liveness(group_name)
                .and_then(|l| l.draining_since_ms.get(slot).copied())
                .unwrap_or(now)
        } else {
            now
        };
        drain_started.saturating_add(group.config.scale_down_timeout_ms)
    }
}

/// How long a silent member keeps its tasks at most, as far as one answer
/// can know: a static member's registration timeout (a nameless join into
/// a stable group may drop the name map right after the answer: the member
/// then expires as a dynamic one, after the session timeout), a dynamic
/// member's session timeout.
pub(super) fn member_timeout_ms(config: &GroupConfig, member: &Member) -> u64 {
    if member.name.is_some() {
        config
            .registration_timeout_ms
            .min(config.session_timeout_ms)
    } else {
        config.session_timeout_ms
    }
}

/// The longest lease one answer can give `member` under `config` (what
/// [`Coordinator::lease_ms`] computes, at its largest): its timeout, or
/// the margin for a revocation at its next heartbeat, an expansion timeout
/// and the longest interval an answer asks for (backpressure's included),
/// whichever ends first.
fn lease_ms_max(config: &GroupConfig, member: &Member) -> u64 {
    let timeout_ms = member_timeout_ms(config, member);
    let interval_max_ms = config
        .heartbeat_interval_ms
        .max(timeout_ms / BACKPRESSURE_TIMEOUT_DIVISOR);
    timeout_ms.min(config.expansion_timeout_ms.saturating_add(interval_max_ms))
}
