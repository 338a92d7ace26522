//! One member heartbeat: the request checked before anything changes; a
//! join, a leave or a heartbeat of a current member (membership.rs); the
//! member reconciled toward the installed target; and its answer (its
//! assignment, learners and standbys, a heartbeat interval shortened in a
//! handoff and lengthened under backpressure, its lease, what to report
//! of its loads).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use assignd_wire::LoadReport;

use super::{
    BACKPRESSURE_FACTOR, BACKPRESSURE_TIMEOUT_DIVISOR, Coordinator, HANDOFF_HEARTBEAT_INTERVAL_MS,
    Heartbeat, HeartbeatResponse, HostLoad, JOIN_EPOCH, LEAVE_EPOCH, MEMBER_NAME_LEN_MAX, Output,
    ProtocolError, TASKS_PER_GROUP_MAX, TOPICS_PER_GROUP_MAX, invalid, leases::member_timeout_ms,
    load_reports::load_report, membership::check_member_id, refuse_invisible,
};
use crate::protocol::group::{
    Group, Handover, Member, Millis, RebalanceReason, Record, Slot, SlotTarget, Task,
};
use crate::protocol::reconcile::{MemberAssignment, MemberState};

impl Coordinator {
    /// Handles one member heartbeat, the host on time.
    pub fn heartbeat(
        &mut self,
        request: &Heartbeat,
        now: Millis,
    ) -> Result<(HeartbeatResponse, Output), ProtocolError> {
        self.heartbeat_loaded(request, now, HostLoad::default())
    }

    /// Handles one member heartbeat while the host runs `load.late_ms`
    /// late: the member is told to beat less often (backpressure).
    pub fn heartbeat_loaded(
        &mut self,
        request: &Heartbeat,
        now: Millis,
        load: HostLoad,
    ) -> Result<(HeartbeatResponse, Output), ProtocolError> {
        self.observe_time(now);
        let group = self
            .group(&request.group)
            .ok_or_else(|| ProtocolError::UnknownGroup(request.group.clone()))?;
        let topics = check_member_input(request)?;
        super::routes::check_published(request)?;
        let lags = reported_lags(group, request)?;
        let takes_loads = super::load_reports::check_load_report(group, request)?;
        if !request.member_id.is_empty() {
            check_member_id(&request.member_id)?;
        }
        let mut out = Output::default();
        // A join is epoch 0 with no member id (the host issues one) or with
        // an id the group does not know (the member chose it). Epoch 0 with
        // a current id is a retried join (its answer was lost) or a member
        // that has not reached any target yet: the same member, answered
        // as a heartbeat, whatever epoch its slot is at.
        if request.member_id.is_empty() && request.member_epoch != JOIN_EPOCH {
            return invalid("a request without a member id must join with member epoch 0".into());
        }
        let joining = request.member_epoch == JOIN_EPOCH
            && (request.member_id.is_empty()
                || (group.slot_of(&request.member_id).is_none()
                    && !group.is_fenced(&request.member_id)));
        let slot = match request.member_epoch {
            JOIN_EPOCH if joining => self.join(request, topics, now, &mut out)?,
            LEAVE_EPOCH => {
                let response = self.leave_by_heartbeat(request, now, &mut out)?;
                return Ok((response, out));
            }
            sent if sent < LEAVE_EPOCH => {
                return invalid(format!(
                    "member epoch {sent} is not -1, 0 or a member epoch"
                ));
            }
            sent => {
                let slot = self.current_member_beat(request, sent, topics, now, &mut out)?;
                self.publish_endpoint(request, &slot, &mut out);
                slot
            }
        };
        self.note_contact(request, &slot, lags, now, &mut out);
        if joining {
            self.forget_member_loads(&request.group, &slot);
        }
        if takes_loads {
            self.take_load_report(&request.group, &slot, request, now);
        }
        self.reconcile_slot(
            &request.group,
            &slot,
            request.owned.as_deref(),
            now,
            &mut out,
        );
        self.maybe_call_assignor(&request.group, now, &mut out);
        self.snapshot_if_stable(&request.group, now, &mut out);
        let response = self.response(&request.group, &slot, now, load);
        self.promise_lease(&request.group, &slot, now, &response);
        // Besides what its records marked, a heartbeat changed its own
        // slot's timers and, with a call it started, the group's own.
        self.refresh_slot_deadline(&request.group, &slot);
        Ok((response, out))
    }

    /// A leave (member epoch -1): the member goes (or, static, is away),
    /// the next target is asked for, and the answer holds nothing.
    fn leave_by_heartbeat(
        &mut self,
        request: &Heartbeat,
        now: Millis,
        out: &mut Output,
    ) -> Result<HeartbeatResponse, ProtocolError> {
        let slot = self.current_slot(request)?;
        self.leave(&request.group, &slot, now, out);
        self.maybe_call_assignor(&request.group, now, out);
        self.deadlines.mark_slot(&request.group, &slot);
        let group = self.group_at(&request.group);
        Ok(HeartbeatResponse {
            member_id: request.member_id.clone(),
            member_epoch: 0,
            heartbeat_interval_ms: group.config.heartbeat_interval_ms,
            active: BTreeSet::new(),
            revoking: BTreeSet::new(),
            learner: BTreeSet::new(),
            standby: BTreeSet::new(),
            draining: false,
            drained: true,
            lease_ms: 0,
            unreached_lease_ms: 0,
            unreached_flight_ms: 0,
            load_report: LoadReport::None,
        })
    }

    /// A heartbeat of a current member at member epoch `sent`: refused if
    /// the epoch is stale or it reports a task it was never given; a new
    /// subscription is recorded and asks for a new target. Returns its
    /// slot.
    fn current_member_beat(
        &mut self,
        request: &Heartbeat,
        sent: i64,
        topics: Option<BTreeSet<String>>,
        now: Millis,
        out: &mut Output,
    ) -> Result<Slot, ProtocolError> {
        let slot = self.current_slot(request)?;
        let group = self.group_at(&request.group);
        let joined = MemberAssignment::new();
        let held = group.holdings.member(&slot).unwrap_or(&joined);
        // A member may be one epoch behind (its last response was
        // lost), or retry its join (epoch 0); anything else is stale.
        if sent != JOIN_EPOCH && sent as u64 != held.epoch && sent as u64 != held.previous_epoch {
            return Err(ProtocolError::StaleEpoch {
                sent,
                current: held.epoch,
            });
        }
        // A steady member reports what it holds, in order (the
        // client sends sorted runs): one walk, not a lookup a task.
        let reports_holdings = |owned: &[Task]| {
            held.revoking.is_empty()
                && owned.len() == held.active.len()
                && owned.iter().eq(held.active.iter())
        };
        if let Some(owned) = &request.owned
            && !reports_holdings(owned)
            && let Some(task) = owned
                .iter()
                .find(|t| !held.active.contains(*t) && !held.revoking.contains(*t))
        {
            return Err(ProtocolError::NotOwned { task: task.clone() });
        }
        if let Some(topics) = topics
            && group.members[&slot].topics != topics
        {
            let mut member = group.members[&slot].clone();
            member.topics = topics;
            self.emit(
                out,
                Record::MemberJoined {
                    group: request.group.clone(),
                    slot: slot.clone(),
                    member,
                },
            );
            self.bump(&request.group, RebalanceReason::Subscription, now, out);
        }
        Ok(slot)
    }

    /// What a heartbeat that reached the host tells of its slot: it was
    /// seen now, its lags (a learner may have caught up), a drain it asks
    /// for, and the end of a handover whose wait is over.
    fn note_contact(
        &mut self,
        request: &Heartbeat,
        slot: &Slot,
        lags: Option<BTreeMap<Task, u64>>,
        now: Millis,
        out: &mut Output,
    ) {
        let liveness = self.liveness_mut(&request.group);
        match liveness.last_seen_ms.get_mut(slot) {
            Some(seen) => *seen = now,
            None => {
                liveness.last_seen_ms.insert(slot.clone(), now);
            }
        }
        if let Some(lags) = lags {
            liveness.lags.insert(slot.clone(), lags);
            self.signal_caught_up_learners(&request.group, slot, now, out);
        }
        if request.drain && !self.group_at(&request.group).members[slot].draining {
            self.start_drain(&request.group, slot, now, out);
        }
        let liveness = self.liveness_mut(&request.group);
        if liveness
            .handover
            .get(slot)
            .is_some_and(|handover| now >= handover.until_ms)
        {
            liveness.handover.remove(slot);
        }
        // The wait is over (or was lost with nothing to hold back): say so
        // in the log, so that a restart does not start it again.
        if !liveness.handover.contains_key(slot)
            && self.group_at(&request.group).handovers.contains(slot)
        {
            self.emit(
                out,
                Record::HandoverEnded {
                    group: request.group.clone(),
                    slot: slot.clone(),
                },
            );
        }
    }

    /// Remembers the leases an answer gave its slot's member.
    fn promise_lease(
        &mut self,
        group_name: &str,
        slot: &Slot,
        now: Millis,
        response: &HeartbeatResponse,
    ) {
        let lease_end = now.saturating_add(response.lease_ms);
        let liveness = self.liveness_mut(group_name);
        match liveness.lease_end_ms.get_mut(slot) {
            Some(promised) => *promised = (*promised).max(lease_end),
            None => {
                liveness.lease_end_ms.insert(slot.clone(), lease_end);
            }
        }
        // Replaced, not kept at its latest: this heartbeat reached the
        // coordinator, so the member no longer counts on an earlier
        // answer's unreached lease (only on its plain lease, kept above).
        let unreached_end = now.saturating_add(response.unreached_lease_ms);
        match liveness.unreached_end_ms.get_mut(slot) {
            Some(end) => *end = unreached_end,
            None => {
                liveness
                    .unreached_end_ms
                    .insert(slot.clone(), unreached_end);
            }
        }
    }

    /// What a member is told: its reconciled assignment and its target's
    /// learners and standbys.
    fn response(
        &self,
        group_name: &str,
        slot: &Slot,
        now: Millis,
        load: HostLoad,
    ) -> HeartbeatResponse {
        let group = self.group_at(group_name);
        let joined = MemberAssignment::new();
        let reconciled = group.holdings.member(slot).unwrap_or(&joined);
        let target = group.target_of(slot);
        let member = &group.members[slot];
        let drained = member.draining
            && reconciled.held().next().is_none()
            && target.active.is_empty()
            && group.target_epoch >= group.group_epoch;
        // Tasks a replaced incarnation may still process are not this
        // incarnation's yet: it warms them up until their lease ends.
        let handover = self
            .liveness(group_name)
            .and_then(|l| l.handover.get(slot))
            .filter(|h| now < h.until_ms);
        let (held, waiting) = withhold_handover(reconciled, handover);
        // The target's tasks not granted yet. A member that holds exactly
        // its target has none, and is not compared task by task (it may
        // hold a million).
        let holds_target = handover.is_none()
            && held.state == MemberState::Stable
            && held.epoch == group.target_epoch;
        debug_assert!(!holds_target || held.active.len() == target.active.len());
        let ungranted: Vec<&Task> = if holds_target {
            Vec::new()
        } else {
            target.active.difference(&held.active).collect()
        };
        let learner = target
            .learner
            .iter()
            .chain(ungranted.iter().copied())
            .chain(&waiting)
            .cloned()
            .collect();
        // A member in a handoff (tasks to release, tasks waiting for their
        // old owner's release, or learners about to take tasks over) beats
        // faster, so that it learns of its grant a round trip after the
        // release rather than up to a heartbeat interval later.
        // A member whose revocation waits for the routing tables'
        // promise beats fast too: it hears of it as soon as that ends.
        let revocation_held =
            held.epoch != group.target_epoch && self.moves_held(group_name, now, true);
        let moving = !held.revoking.is_empty()
            || handover.is_some()
            || !ungranted.is_empty()
            || revocation_held;
        let in_handoff = moving || self.warms_up_unpaced(group_name, group, target, now);
        let heartbeat_interval_ms =
            self.heartbeat_interval_ms(group_name, group, member, in_handoff, now, load);
        let lease_ms = self.lease_ms(group_name, slot, now, heartbeat_interval_ms);
        HeartbeatResponse {
            member_id: member.member_id.clone(),
            member_epoch: held.epoch,
            heartbeat_interval_ms,
            active: held.active.clone(),
            revoking: held.revoking.clone(),
            // Warm-up copies need no handover: a learner or standby may start
            // replaying as soon as the target names it. A task the target
            // gives this member but its old owner has not released yet is
            // listed as a learner too, so the member keeps warming it (and
            // reporting its lag) until it is granted.
            learner,
            standby: target.standby.clone(),
            draining: member.draining,
            drained,
            lease_ms,
            unreached_lease_ms: self.unreached_lease_ms(group_name, slot, now, lease_ms),
            unreached_flight_ms: self.unreached_flight_ms(group_name, slot, now),
            load_report: load_report(group, self.liveness(group_name), slot),
        }
    }

    /// Whether the slot's target has learners whose catch-up may move them
    /// soon. A learner's catch-up cannot move it before the group's next
    /// call, which a big target paces: until then a member that only warms
    /// up beats at the group's interval, not every handoff interval with
    /// an answer of every task it holds.
    fn warms_up_unpaced(
        &self,
        group_name: &str,
        group: &Group,
        target: &SlotTarget,
        now: Millis,
    ) -> bool {
        let paced = self
            .liveness(group_name)
            .and_then(|l| l.paced_until_ms)
            .is_some_and(|until| until > now.saturating_add(group.config.heartbeat_interval_ms));
        !target.learner.is_empty() && !paced
    }

    /// The interval a member is told to beat at: the group's, shortened in
    /// a handoff and while a new target is due, lengthened under
    /// backpressure.
    fn heartbeat_interval_ms(
        &self,
        group_name: &str,
        group: &Group,
        member: &Member,
        in_handoff: bool,
        now: Millis,
        load: HostLoad,
    ) -> u64 {
        let mut heartbeat_interval_ms = if in_handoff {
            group
                .config
                .heartbeat_interval_ms
                .min(HANDOFF_HEARTBEAT_INTERVAL_MS)
        } else {
            group.config.heartbeat_interval_ms
        };
        // A new target is on its way: beat again when it should be there,
        // so that every member hears of it (revocations, grants, learners)
        // about when it is installed, not up to an interval later.
        if let Some(due_ms) = self.target_due_in_ms(group_name, now) {
            heartbeat_interval_ms =
                heartbeat_interval_ms.min(due_ms.max(HANDOFF_HEARTBEAT_INTERVAL_MS));
        }
        // Backpressure: a late host asks for fewer heartbeats, never so few
        // that the member could miss its timeout.
        let pressure_ms = load
            .late_ms
            .saturating_mul(BACKPRESSURE_FACTOR)
            .min(member_timeout_ms(&group.config, member) / BACKPRESSURE_TIMEOUT_DIVISOR);
        heartbeat_interval_ms.max(pressure_ms)
    }

    /// Reconciles one slot against the installed target and records the
    /// result if it changed; `reported`: the tasks the member says it
    /// holds, if it said.
    fn reconcile_slot(
        &mut self,
        group_name: &str,
        slot: &Slot,
        reported: Option<&[Task]>,
        now: Millis,
        out: &mut Output,
    ) {
        let group = self.group_at(group_name);
        if group.target_epoch == 0 {
            return;
        }
        let joined = MemberAssignment::new();
        let current = group.holdings.member(slot).unwrap_or(&joined);
        if current.state == MemberState::Stable && current.epoch == group.target_epoch {
            // Nothing to move: a steady heartbeat costs no copy of the
            // member's tasks (a member may hold a million).
            self.liveness_mut(group_name).revoking_since_ms.remove(slot);
            return;
        }
        let owned = reported.map(|reported| {
            let mut owned: BTreeSet<Task> = reported.iter().cloned().collect();
            // The replaced incarnation may still hold these: this one
            // cannot release them for it.
            if let Some(handover) = self.liveness(group_name).and_then(|l| l.handover.get(slot)) {
                owned.extend(handover.tasks.iter().cloned());
            }
            owned
        });
        let target = &group.target_of(slot).active;
        let holdings = &group.holdings;
        // Routing tables served before a member was removed or replaced
        // still name it: its tasks are granted to nobody until then.
        let grants_held = self.moves_held(group_name, now, false);
        let next = crate::protocol::reconcile::reconcile(
            current,
            group.target_epoch,
            target,
            owned.as_ref(),
            |task| grants_held || holdings.holder(task).is_some_and(|h| h != slot.as_str()),
        );
        // Tables served before the target still promise this member's
        // tasks to it: it keeps them (and serves them) until then.
        let revokes_more = next.revoking.iter().any(|t| !current.revoking.contains(t));
        if revokes_more && self.moves_held(group_name, now, true) {
            return;
        }
        let changed = next != *current;
        let liveness = self.liveness_mut(group_name);
        // Tasks a replaced incarnation may still hold cannot be released by
        // this one: its time to release starts when the wait is over, not
        // while it lasts (a restarted host waits the longest lease, longer
        // than the release timeout).
        let held_back = liveness
            .handover
            .get(slot)
            .is_some_and(|h| next.revoking.iter().any(|t| h.tasks.contains(t)));
        if next.state == MemberState::UnrevokedTasks && held_back {
            liveness.revoking_since_ms.insert(slot.to_owned(), now);
        } else if next.state == MemberState::UnrevokedTasks {
            liveness
                .revoking_since_ms
                .entry(slot.to_owned())
                .or_insert(now);
        } else {
            liveness.revoking_since_ms.remove(slot);
        }
        if changed {
            self.emit(
                out,
                Record::MemberReconciled {
                    group: group_name.to_owned(),
                    slot: slot.to_owned(),
                    assignment: next,
                },
            );
        }
    }
}

/// Checks what a heartbeat says of its member before anything changes:
/// its name, subscription and rack (lengths and the name rule,
/// [`refuse_invisible`]) and its capacity. Returns the subscription, if
/// the heartbeat carries one.
fn check_member_input(request: &Heartbeat) -> Result<Option<BTreeSet<String>>, ProtocolError> {
    if let Some(name) = &request.member_name {
        if name.is_empty() || name.len() > MEMBER_NAME_LEN_MAX {
            return invalid(format!(
                "member name must be 1 to {MEMBER_NAME_LEN_MAX} bytes"
            ));
        }
        refuse_invisible("member name", name)?;
    }
    let topics = match &request.topics {
        Some(topics) => {
            if topics.len() > TOPICS_PER_GROUP_MAX {
                return invalid(format!("more than {TOPICS_PER_GROUP_MAX} topics"));
            }
            // A subscription is a wish, as in Kafka: a topic the group
            // does not have (not added yet, or removed since) is kept and
            // gives nothing until an admin configures it, so that a
            // rolling deploy may subscribe before the topic exists.
            for topic in topics {
                if topic.is_empty() || topic.len() > MEMBER_NAME_LEN_MAX {
                    return invalid(format!(
                        "topic name {topic:?} must be 1 to {MEMBER_NAME_LEN_MAX} bytes"
                    ));
                }
                refuse_invisible("topic name", topic)?;
            }
            Some(topics.iter().cloned().collect())
        }
        None => None,
    };
    if request.capacity == Some(0) {
        return invalid("capacity must be at least 1".into());
    }
    if let Some(rack) = &request.rack {
        if rack.len() > MEMBER_NAME_LEN_MAX {
            return invalid(format!("rack must be at most {MEMBER_NAME_LEN_MAX} bytes"));
        }
        refuse_invisible("rack", rack)?;
    }
    Ok(topics)
}

/// The member's holdings as its answer shows them, and the tasks withheld
/// from them: those a replaced incarnation may still process (`handover`,
/// while its wait lasts) are not this incarnation's yet, and the ones it
/// would hold active it warms up meanwhile.
fn withhold_handover<'a>(
    reconciled: &'a MemberAssignment<Task>,
    handover: Option<&Handover>,
) -> (Cow<'a, MemberAssignment<Task>>, BTreeSet<Task>) {
    let mut held = Cow::Borrowed(reconciled);
    let mut waiting = BTreeSet::new();
    if let Some(handover) = handover {
        waiting = held.active.intersection(&handover.tasks).cloned().collect();
        let held = held.to_mut();
        held.active.retain(|t| !handover.tasks.contains(t));
        held.revoking.retain(|t| !handover.tasks.contains(t));
    }
    (held, waiting)
}

/// The lags a heartbeat reports, by task, if it reports any: those on
/// tasks the group no longer has are dropped; too many are refused.
fn reported_lags(
    group: &Group,
    request: &Heartbeat,
) -> Result<Option<BTreeMap<Task, u64>>, ProtocolError> {
    let lags = match &request.lags {
        Some(lags) if lags.is_empty() => return Ok(Some(BTreeMap::new())),
        Some(lags) => lags,
        None => return Ok(None),
    };
    let partitions: BTreeMap<&str, u32> = group
        .config
        .topics
        .iter()
        .map(|t| (t.name.as_str(), t.partitions))
        .collect();
    let mut by_task = BTreeMap::new();
    for (task, lag) in lags {
        // Lags on tasks that no longer exist (a topic removed since) are
        // dropped, not refused: the member may not have heard yet.
        if partitions
            .get(task.topic.as_str())
            .is_some_and(|&n| task.partition < n)
        {
            by_task.insert(task.clone(), *lag);
        }
    }
    if lags.len() as u64 > TASKS_PER_GROUP_MAX {
        return invalid(format!("more than {TASKS_PER_GROUP_MAX} lags"));
    }
    Ok(Some(by_task))
}
