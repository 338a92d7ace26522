//! A member process's heartbeat (join, heartbeat or leave): what the
//! process sends, where it goes (its shard's core on one host; in cluster
//! mode, through its network and [`super::routing`] to a node), and what
//! the process makes of the outcome: an answer, a refusal, an answer lost,
//! or in cluster mode nothing until its request timeout, the heartbeat in
//! flight meanwhile. Invariant 3 is checked at each static member's return.

use std::collections::BTreeSet;

use super::World;
use super::routing::Routed;
use super::trace::describe_heartbeat;
use crate::protocol::core::{Heartbeat, HeartbeatResponse, LEAVE_EPOCH, Output, ProtocolError};
use crate::protocol::group::{Group, Millis, Slot};
use crate::sim::Violation;
use crate::sim::check::{self, tasks_str};
use crate::sim::member::Reach;

/// A heartbeat on its way: who sends it, when, and what kind it is.
struct Sending {
    pid: usize,
    lane: usize,
    shard: usize,
    now: Millis,
    /// The process's label, for the trace.
    label: String,
    /// Its first join (no member id yet).
    joining: bool,
    leaving: bool,
}

/// A heartbeat a core handled (or, on one host, always): its result.
struct Delivered {
    result: Result<(HeartbeatResponse, Output), ProtocolError>,
    /// Cluster mode: the load of its shard that answered.
    answered_by: Option<u64>,
    /// Cluster mode: the process's network went down with it in flight (or
    /// flapped): its answer is lost.
    answer_cut: bool,
}

impl World {
    /// One heartbeat (join, heartbeat or leave) of process `pid`.
    pub(super) fn beat(&mut self, pid: usize) -> Result<(), Violation> {
        self.wait_out_stall();
        let now = self.now;
        let lane = self.processes[pid].lane;
        let configured = self.configured_topics(lane);
        let process = &self.processes[pid];
        if !process.is_running() {
            // It left before it had joined.
            return Ok(());
        }
        if process.in_flight_until_ms.is_some() {
            return self.in_flight(pid);
        }
        let Some((request, sending)) = self.next_request(pid, &configured, now) else {
            // Woken with nothing to send: it sleeps on.
            return Ok(());
        };
        let static_return = self.static_return(&sending, &request);
        self.step += 1;
        let Some(delivered) = self.send_heartbeat(&sending, &request)? else {
            return self.check_step(Some(lane));
        };
        let leaving = sending.leaving;
        let lost =
            (!self.quiet && !leaving && self.rng.chance(self.lanes[lane].scenario.lost_response_p))
                || (delivered.answer_cut && !leaving);
        self.note(|_| {
            describe_heartbeat(
                &sending.label,
                sending.joining,
                sending.leaving,
                &request,
                &delivered.result,
                lost,
            )
        });
        match delivered.result {
            Ok((response, out)) => {
                if let Some((slot, before)) = &static_return {
                    check::check_static_return(
                        before,
                        self.group(lane),
                        slot,
                        &response,
                        &out.records,
                        request.owned.as_deref(),
                        request.lags.as_deref(),
                    )
                    .map_err(|e| self.violation(e))?;
                    self.stats.static_returns += 1;
                }
                if self.cluster.is_none() {
                    self.absorb(sending.shard, out)?;
                }
                if lost {
                    self.answer_lost(&sending);
                } else {
                    self.answered(&sending, &response, delivered.answered_by);
                }
            }
            Err(error) => self.heartbeat_refused(&sending, &request, error)?,
        }
        self.check_step(Some(lane))
    }

    /// What process `pid` sends next, if anything, and what kind it is.
    /// First it notes its lease passing while it holds tasks, or (cluster
    /// mode) its processing on past its plain lease, on the unreached one.
    fn next_request(
        &mut self,
        pid: usize,
        configured: &BTreeSet<String>,
        now: Millis,
    ) -> Option<(Heartbeat, Sending)> {
        let lane = self.processes[pid].lane;
        let loads = self.task_loads(lane, self.processes[pid].active());
        let process = &mut self.processes[pid];
        process.measure_loads(loads);
        let lease_over = (process.holds_tasks() && process.lease_passed(now)).then(|| {
            format!(
                "{}: lease ended at {:?}, stops processing active=[{}] revoking=[{}]",
                process.label(),
                process.lease_end_ms(),
                tasks_str(process.active()),
                tasks_str(process.revoking())
            )
        });
        // Cluster mode: it processes past its plain lease, on the
        // unreached lease (noted once an answer).
        let extension = (process.past_plain_lease(now) && !process.extended).then(|| {
            process.extended = true;
            format!(
                "{}: keeps processing active=[{}] past its lease ({:?}) while unreached, until {:?}",
                process.label(),
                tasks_str(process.active()),
                process.lease_until_ms,
                process.lease_end_ms()
            )
        });
        let joining = process.member_id().is_empty();
        let request = process.request(&self.lanes[lane].name, configured, now);
        let label = process.label().to_owned();
        if let Some(line) = lease_over {
            self.stats.leases_lapsed += 1;
            self.note(|_| line);
        }
        if let Some(line) = extension {
            if let Some(cluster) = &mut self.cluster {
                cluster.stats.leases_extended += 1;
            }
            self.note(|_| line);
        }
        let request = request?;
        let sending = Sending {
            pid,
            lane,
            shard: self.lanes[lane].shard,
            now,
            label,
            joining,
            leaving: request.member_epoch == LEAVE_EPOCH,
        };
        Some((request, sending))
    }

    /// Invariant 3 applies to a new incarnation of a static slot that
    /// still exists, with the same subscription: that slot and its group
    /// before the join.
    fn static_return(&self, sending: &Sending, request: &Heartbeat) -> Option<(Slot, Group)> {
        sending
            .joining
            .then_some(())
            .and(request.member_name.as_ref())
            .and_then(|name| {
                let group = self.group(sending.lane);
                let slot = Slot::named(name);
                let topics: Option<BTreeSet<String>> =
                    request.topics.as_ref().map(|t| t.iter().cloned().collect());
                (!group.dynamic_only
                    && group
                        .members
                        .get(&slot)
                        .is_some_and(|m| Some(&m.topics) == topics.as_ref()))
                .then(|| (slot, group.clone()))
            })
    }

    /// Sends the heartbeat: on one host to its shard's core; in cluster
    /// mode through the process's network ([`Self::route_cut_off`]) to a
    /// node ([`Self::route_heartbeat`]). `None` if no answer came back (the
    /// process has taken that in).
    fn send_heartbeat(
        &mut self,
        sending: &Sending,
        request: &Heartbeat,
    ) -> Result<Option<Delivered>, Violation> {
        let load = self.host_load();
        let (routed, answer_cut) = self.route_cut_off(sending.pid, sending.now);
        if self.cluster.is_none() {
            let result =
                self.shards[sending.shard]
                    .core
                    .heartbeat_loaded(request, sending.now, load);
            return Ok(Some(Delivered {
                result,
                answered_by: None,
                answer_cut,
            }));
        }
        let routed = match routed {
            Some(routed) => routed,
            None => self.route_heartbeat(sending.pid, sending.shard, request)?,
        };
        match routed {
            Routed::Answered {
                result,
                incarnation,
            } => Ok(Some(Delivered {
                result: *result,
                answered_by: Some(incarnation),
                answer_cut,
            })),
            Routed::Unanswered { why, reach } => {
                let label = &sending.label;
                self.note(|_| format!("{label} heartbeat unanswered ({reach:?}): {why}"));
                if let Some(cluster) = &mut self.cluster {
                    cluster.stats.unanswered += 1;
                    if reach == Reach::Unreached {
                        cluster.stats.unreached += 1;
                    }
                }
                if reach == Reach::MaybeReached {
                    // It waits for its request timeout.
                    self.send_unanswered(sending.pid);
                } else {
                    self.unanswered(sending.pid, reach);
                }
                Ok(None)
            }
        }
    }

    /// The answer to a heartbeat a core handled is lost on its way back.
    fn answer_lost(&mut self, sending: &Sending) {
        self.stats.lost_responses += 1;
        if sending.joining {
            self.stats.lost_joins += 1;
        }
        if self.cluster.is_some() {
            // It waits for its request timeout.
            self.send_unanswered(sending.pid);
        } else {
            self.unanswered(sending.pid, Reach::MaybeReached);
        }
    }

    /// The answer reached its process (from load `answered_by` of the
    /// shard, in cluster mode), which takes it in.
    fn answered(
        &mut self,
        sending: &Sending,
        response: &HeartbeatResponse,
        answered_by: Option<u64>,
    ) {
        let (pid, now) = (sending.pid, sending.now);
        let initial_lag_max = 5 * self.group(sending.lane).config.acceptable_recovery_lag + 2_000;
        if let Some(incarnation) = answered_by {
            self.answered_in_cluster(pid, incarnation, response);
        }
        let process = &mut self.processes[pid];
        let granted = !response.active.is_empty() || !response.revoking.is_empty();
        let note = process.on_response(response, initial_lag_max, now, &mut self.rng);
        if granted && process.lease_passed(now) {
            self.stats.leases_lapsed += 1;
        }
        if let Some(note) = note {
            let label = &sending.label;
            self.note(|_| format!("  {label}: {note}"));
        }
    }

    /// The host refused the heartbeat: the machine rejoins, or stops
    /// (`replaced`, or a leave). Any other refusal of a request the client
    /// may send is a violation.
    fn heartbeat_refused(
        &mut self,
        sending: &Sending,
        request: &Heartbeat,
        error: ProtocolError,
    ) -> Result<(), Violation> {
        match error {
            _ if sending.leaving => self.refused(sending.pid, &error),
            ProtocolError::Fenced { .. }
            | ProtocolError::UnknownMember(..)
            | ProtocolError::StaleEpoch { .. }
            | ProtocolError::Replaced { .. } => self.refused(sending.pid, &error),
            other => {
                return Err(self.violation(format!(
                    "{}: the host refused a request the client may send: {other} ({request:?})",
                    sending.label
                )));
            }
        }
        Ok(())
    }

    /// Process `pid`'s request was refused: it takes the refusal in.
    fn refused(&mut self, pid: usize, error: &ProtocolError) {
        let process = &mut self.processes[pid];
        if let Some(note) = process.on_refused(error, self.now, &mut self.rng) {
            let label = process.label().to_owned();
            self.note(|_| format!("  {label}: {note}"));
        }
    }

    /// Process `pid`'s heartbeat got no answer (`reach` says whether a core
    /// may have handled it): it learns so and schedules its next one.
    fn unanswered(&mut self, pid: usize, reach: Reach) {
        let now = self.now;
        let process = &mut self.processes[pid];
        let held = process.holds_tasks();
        let note = process.on_unanswered(reach, now, &mut self.rng);
        if held && !process.holds_tasks() {
            self.stats.leases_lapsed += 1;
        }
        if let Some(note) = note {
            let label = self.processes[pid].label().to_owned();
            self.note(|_| format!("  {label}: {note}"));
        }
    }

    /// Cluster mode: process `pid`'s heartbeat (a core handled it, or may
    /// have) lost its answer: it is in flight until the process's request
    /// timeout, on the lease [`SimMember::lease_end_ms`] bounds.
    fn send_unanswered(&mut self, pid: usize) {
        let now = self.now;
        let process = &mut self.processes[pid];
        let until = process.send_unanswered(now);
        let (on_unreached, binds) = (
            process.counts_on_unreached_lease(),
            process.flight_bound_binds(),
        );
        let line = format!(
            "  {}: in flight until {until}, lease until {:?}{}",
            process.label(),
            process.lease_end_ms(),
            if binds {
                format!(
                    " (the flight bound; unreached lease until {:?})",
                    process.unreached_lease_until()
                )
            } else {
                String::new()
            }
        );
        let stats = &mut self.cluster.as_mut().expect("cluster mode").stats;
        stats.in_flight += 1;
        stats.in_flight_unreached += u64::from(on_unreached);
        stats.flight_bound_binding += u64::from(binds);
        self.note(|_| line);
    }

    /// Cluster mode: process `pid` has a heartbeat in flight. At its
    /// request timeout it learns that the heartbeat may have reached a
    /// coordinator; before, its lease ended (it stops processing) or it
    /// acks a revoked task it has stopped.
    fn in_flight(&mut self, pid: usize) -> Result<(), Violation> {
        let now = self.now;
        let lane = self.processes[pid].lane;
        let process = &mut self.processes[pid];
        let until = process.in_flight_until_ms.expect("in flight");
        if now >= until {
            let label = process.label().to_owned();
            self.note(|_| format!("{label} heartbeat unanswered (MaybeReached): timed out"));
            if let Some(cluster) = &mut self.cluster {
                cluster.stats.unanswered += 1;
            }
            self.unanswered(pid, Reach::MaybeReached);
            return self.check_step(Some(lane));
        }
        let binds = process.flight_bound_binds();
        let line = format!(
            "{}: lease ended at {:?} with a heartbeat in flight until {until}, stops processing active=[{}] revoking=[{}]",
            process.label(),
            process.lease_end_ms(),
            tasks_str(process.active()),
            tasks_str(process.revoking())
        );
        if process.wake_in_flight(now) {
            self.stats.leases_lapsed += 1;
            if binds {
                let cluster = self.cluster.as_mut().expect("cluster mode");
                cluster.stats.flight_bound_stops += 1;
            }
            self.note(|_| line);
        }
        self.check_step(Some(lane))
    }

    /// Cluster mode: an answer from load `incarnation` of its shard reached
    /// process `pid` (before it takes it in). If the process was
    /// processing past its plain lease on the unreached lease and the
    /// answer keeps some of those tasks its, it kept them through; through
    /// a takeover if another load than the last one to answer it did.
    fn answered_in_cluster(&mut self, pid: usize, incarnation: u64, response: &HeartbeatResponse) {
        let now = self.now;
        let previous = self.answered_by.insert(pid, incarnation);
        let process = &self.processes[pid];
        if !process.past_plain_lease(now) {
            return;
        }
        let kept: Vec<_> = process
            .active()
            .iter()
            .filter(|t| response.active.contains(*t))
            .collect();
        if kept.is_empty() {
            return;
        }
        let taken_over = previous.is_some_and(|p| p != incarnation);
        let line = format!(
            "  {}: kept [{}] past its lease ({:?}) while unreached, and still has them{}",
            process.label(),
            tasks_str(kept),
            process.lease_until_ms,
            if taken_over {
                " from another load of the shard"
            } else {
                ""
            }
        );
        let cluster = self.cluster.as_mut().expect("cluster mode");
        cluster.stats.leases_extended_kept += 1;
        if taken_over {
            cluster.stats.kept_through_takeovers += 1;
        }
        self.note(|_| line);
    }
}
