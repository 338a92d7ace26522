//! The quiet phase: no more churn, and every group must settle (a stable
//! group, nothing pending, every slot served by an up-to-date process)
//! within a generous budget, where invariant 2 is checked. A group that
//! never settles is a liveness failure, described member by member.

use std::collections::{BTreeMap, BTreeSet};

use super::World;
use crate::protocol::group::Millis;
use crate::sim::Violation;
use crate::sim::check::{self, tasks_str};
use crate::sim::member::Status;

impl World {
    /// No more churn: every process heartbeats on time and releases at
    /// once, learners catch up fast, answers come at once, nothing is lost.
    /// Runs until every group settles (then checks invariant 2 in each) or
    /// a generous bound passes (a liveness failure).
    pub(super) fn quiet_phase(&mut self) -> Result<(), Violation> {
        let budget_ms = self.calm_down();
        let deadline = self.now + budget_ms;
        let lanes = 0..self.lanes.len();
        loop {
            if lanes.clone().all(|lane| self.settled(lane, false)) {
                self.note(|_| "settled".into());
                return self.check_settled();
            }
            if self.now > deadline && lanes.clone().all(|lane| self.settled(lane, true)) {
                // Learners keep coming and going (an assignor whose plan
                // never converges): invariant 2 must hold all the same
                // whenever the group is stable.
                self.note(|_| "stable, but learners keep moving".into());
                self.stats.unsettled += 1;
                return self.check_settled();
            }
            if self.now > deadline + budget_ms {
                let unsettled: Vec<String> = lanes
                    .clone()
                    .filter(|&lane| !self.settled(lane, true))
                    .map(|lane| self.describe_unsettled(lane))
                    .collect();
                return Err(self.violation(format!(
                    "invariant 2: not stable after {} ms without churn: {}",
                    2 * budget_ms,
                    unsettled.join("; ")
                )));
            }
            self.advance()?;
        }
    }

    /// Ends the churn (see [`Self::quiet_phase`]), starts a process in each
    /// group that no running process serves, and returns the time the
    /// groups get to settle: the slowest group's budget, plus in cluster
    /// mode time for takeovers.
    fn calm_down(&mut self) -> Millis {
        self.quiet = true;
        self.note(|_| "quiet phase".into());
        self.still_loads();
        let now = self.now;
        let mut takeover_ms = 0;
        if let Some(cluster) = &mut self.cluster {
            cluster.calm_down(now);
            takeover_ms = 4 * cluster.ttl_ms;
        }
        self.cut_off.clear();
        for process in self.processes.iter_mut().filter(|p| p.is_running()) {
            process.release_delay_ms = (0, 0);
            process.catch_up_per_ms = u64::MAX / 4;
            process.wake_by(now + process.interval_ms);
        }
        for call in &mut self.calls {
            call.due_ms = call.due_ms.min(now + 20);
        }
        let mut budget_ms = 0;
        for lane in 0..self.lanes.len() {
            let serving = self.processes.iter().any(|p| {
                p.lane == lane && p.status == Status::Running && !p.draining && !p.want_drain
            });
            if !serving {
                let name = self.draw_name(lane);
                let topics = self.configured_topics(lane);
                let pid = self.spawn(lane, name, topics, BTreeMap::new());
                self.processes[pid].release_delay_ms = (0, 0);
                self.processes[pid].catch_up_per_ms = u64::MAX / 4;
            }
            budget_ms = budget_ms.max(self.settle_budget_ms(lane) + takeover_ms);
        }
        budget_ms
    }

    /// How long group `lane` may take to settle: a few of each of its
    /// timeouts, and per task an expansion, a few heartbeats and, if
    /// routers read its table, the promise a move may wait for.
    fn settle_budget_ms(&self, lane: usize) -> Millis {
        let config = &self.group(lane).config;
        let tasks = config.task_count();
        3 * (config.registration_timeout_ms
            + config.scale_down_timeout_ms
            + config.session_timeout_ms
            + config.probing_interval_ms)
            + (tasks + 10)
                * (config.expansion_timeout_ms
                    + 4 * config.heartbeat_interval_ms
                    + self.routes_hold_ms(lane))
    }

    /// Invariant 2 in every group.
    fn check_settled(&self) -> Result<(), Violation> {
        for lane in 0..self.lanes.len() {
            check::check_settled(self.group(lane), &self.beliefs(lane))
                .map_err(|e| self.violation(format!("{e} (group {})", self.lanes[lane].name)))?;
        }
        Ok(())
    }

    /// Whether nothing is left to happen in group `lane`: a stable group
    /// with no learners (unless `learners_allowed`), no call pending, every
    /// slot served by a running process that is up to date with the host.
    fn settled(&self, lane: usize, learners_allowed: bool) -> bool {
        let group = self.group(lane);
        if (self.cluster.is_some() && self.serving_owner(self.lanes[lane].shard).is_none())
            || group.group_epoch != group.target_epoch
            || self.calls.iter().any(|call| call.lane == lane)
            || !group.is_stable()
            || (!learners_allowed && group.learner_count() > 0)
        {
            return false;
        }
        let mut served = BTreeSet::new();
        for process in self
            .processes
            .iter()
            .filter(|p| p.lane == lane && p.is_running())
        {
            if process.status != Status::Running
                || process.want_drain
                || process.pending_topics.is_some()
                || !process.revoking().is_empty()
            {
                return false;
            }
            let Some(slot) = group.slot_of(process.member_id()) else {
                return false;
            };
            let held = group.holdings.member(slot);
            if held.is_none_or(|h| h.active != *process.active())
                || (!learners_allowed && !process.learner().is_empty())
            {
                return false;
            }
            served.insert(slot);
        }
        group
            .members
            .iter()
            .all(|(slot, m)| !m.draining && !m.away && served.contains(slot))
    }

    /// Group `lane` and its processes, for a liveness failure.
    fn describe_unsettled(&self, lane: usize) -> String {
        let group = self.group(lane);
        let mut parts = vec![format!(
            "group {} epoch {} target epoch {} calls pending {}",
            group.name,
            group.group_epoch,
            group.target_epoch,
            self.calls.iter().filter(|call| call.lane == lane).count()
        )];
        for (slot, member) in &group.members {
            let held = group.holdings.member(slot).cloned().unwrap_or_default();
            let target = group.target_of(slot);
            parts.push(format!(
                "{slot} ({}{}{}) e{} {:?} active=[{}] revoking=[{}] target=[{}] learner=[{}]",
                member.member_id,
                if member.away { " away" } else { "" },
                if member.draining { " draining" } else { "" },
                held.epoch,
                held.state,
                tasks_str(&held.active),
                tasks_str(&held.revoking),
                tasks_str(&target.active),
                tasks_str(&target.learner)
            ));
        }
        for process in self
            .processes
            .iter()
            .filter(|p| p.lane == lane && p.is_running())
        {
            parts.push(format!(
                "{} {} e{} {:?} active=[{}] revoking=[{}] learner=[{}]",
                process.label(),
                process.member_id(),
                process.epoch(),
                process.status,
                tasks_str(process.active()),
                tasks_str(process.revoking()),
                tasks_str(process.learner())
            ));
        }
        parts.join("; ")
    }
}
