//! Timers: [`Coordinator::tick`] visits the groups whose deadline has come
//! (the table of deadlines.rs) and judges each member against its session
//! or registration timeout, its release and its drain deadline (allowing
//! for the host's own lateness, never before a lease it was given ends),
//! reopens a batch recovered from the log, probes while learners exist,
//! checks loads (load_trigger.rs), and starts the assignor calls that are
//! due.

use std::collections::BTreeSet;

use super::{Coordinator, HostLoad, Output};
use crate::protocol::group::{Millis, RebalanceReason, RemovalReason, answer_wait_ms};

impl Coordinator {
    /// Advances timers: expired members, members that did not release in
    /// time, and batches whose expansion timeout has passed; the host on
    /// time.
    pub fn tick(&mut self, now: Millis) -> Output {
        self.tick_loaded(now, HostLoad::default())
    }

    /// [`Coordinator::tick`] while the host runs `load.late_ms` late: a
    /// member's silence is judged at `now - late_ms`, since its heartbeats
    /// of that time may still wait to be served (the tick itself fired
    /// late, requests queued). Leases are still judged at `now`. Only the
    /// groups with a deadline at or before `now` are visited: for any
    /// other, a visit would change nothing.
    pub fn tick_loaded(&mut self, now: Millis, load: HostLoad) -> Output {
        let due = self.due_groups(now);
        self.tick_groups(due, now, load)
    }

    /// [`Coordinator::tick_loaded`] visiting every group, due or not: the
    /// full scan the timer table must agree with (the simulator runs both).
    pub fn tick_every_group(&mut self, now: Millis, load: HostLoad) -> Output {
        let every = self.groups.keys().cloned().collect();
        self.tick_groups(every, now, load)
    }

    fn tick_groups(&mut self, names: BTreeSet<String>, now: Millis, load: HostLoad) -> Output {
        self.observe_time(now);
        let mut out = Output::default();
        self.deadlines.ticked_last = names.len();
        for name in names {
            self.tick_group(&name, now, load, &mut out);
            self.deadlines.mark_group(&name);
        }
        out
    }

    fn tick_group(&mut self, name: &str, now: Millis, load: HostLoad, out: &mut Output) {
        let judged = now.saturating_sub(load.late_ms);
        {
            let Some(entry) = self.groups.get_mut(name) else {
                return;
            };
            let (group, liveness) = (&entry.group, &mut entry.liveness);
            let mut expired = Vec::new();
            for (slot, member) in &group.members {
                // The member may still process under a lease given before
                // a config change shortened its timeouts: no timer takes
                // its tasks before that lease ends.
                if liveness.lease_floor_ms(slot).is_some_and(|end| now < end) {
                    continue;
                }
                if liveness.departing.contains(slot) {
                    expired.push((slot.clone(), RemovalReason::Left));
                    continue;
                }
                if member.draining {
                    let since = *liveness
                        .draining_since_ms
                        .entry(slot.clone())
                        .or_insert(now);
                    if judged >= since.saturating_add(group.config.scale_down_timeout_ms) {
                        expired.push((slot.clone(), RemovalReason::DrainTimedOut));
                        continue;
                    }
                }
                let last = *liveness.last_seen_ms.entry(slot.clone()).or_insert(now);
                let timeout = if member.name.is_some() {
                    group.config.registration_timeout_ms
                } else {
                    group.config.session_timeout_ms
                };
                if judged >= last.saturating_add(timeout) {
                    expired.push((slot.clone(), RemovalReason::Expired));
                } else if liveness.revoking_since_ms.get(slot).is_some_and(|&since| {
                    // The member can only report the release on a later
                    // heartbeat: one interval of grace on top.
                    judged
                        >= since
                            .saturating_add(group.config.expansion_timeout_ms)
                            .saturating_add(group.config.heartbeat_interval_ms)
                }) {
                    expired.push((slot.clone(), RemovalReason::Fenced));
                }
            }
            // A call whose answer never came back (the runtime could not
            // deliver it): ask again at once.
            if liveness.computing_epoch.is_some()
                && liveness
                    .last_call_ms
                    .is_some_and(|at| now >= at.saturating_add(answer_wait_ms(&group.config)))
            {
                liveness.computing_epoch = None;
                liveness.urgent = true;
                entry.call = None;
            }
            // A group recovered from the log while it waited for a target
            // has no batch open: start one.
            if group.group_epoch != group.target_epoch
                && liveness.computing_epoch.is_none()
                && liveness.pending_since_ms.is_none()
            {
                liveness.pending_since_ms = Some(now);
            }
            // The probing safety net: while learners exist, re-ask the
            // assignor now and then even if no learner reported catching up.
            let last_call = *liveness.last_call_ms.get_or_insert(now);
            let probe = expired.is_empty()
                && group.learner_count() > 0
                && group.group_epoch == group.target_epoch
                && liveness.computing_epoch.is_none()
                && now >= last_call.saturating_add(group.config.probing_interval_ms);
            for (slot, reason) in expired {
                self.remove(name, &slot, reason, now, out);
            }
            if probe {
                self.bump_urgently(name, RebalanceReason::Probing, now, out);
            }
            self.check_load(name, now, out);
            self.maybe_call_assignor(name, now, out);
        }
    }
}
