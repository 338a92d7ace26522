//! [`Rollout`]: one rollout's state and its inputs, sans-IO. Each input
//! takes `now` and returns [`Outputs`]: the commands to perform and the
//! events to log. The per-group decisions behind them (what command a
//! group needs next, when a phase ends) are in `drive.rs`; the status
//! view in `status.rs`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::command::{Command, CommandId, GroupStart};
use super::event::{EVENTS_MAX, Event, EventKind};
use super::health::{HealthSample, Verdict, judge};
use super::limits::{ROLLOUT_GROUPS_MAX, SpecError};
use super::spec::RolloutSpec;
use super::state::{GroupRun, Phase};
use super::steps::resolve_steps;
use crate::protocol::core::GROUP_NAME_LEN_MAX;

/// The longest reason an operator gives for a pause or an abort, in bytes.
pub const REASON_LEN_MAX: usize = 1024;

/// What one input asks of the shell: perform `commands` (after
/// persisting the machine), log and count `events`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outputs {
    pub commands: Vec<Command>,
    pub events: Vec<Event>,
}

/// Why an operator's input was refused; the machine is unchanged.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RolloutError {
    #[error("the rollout is {phase}: it can no longer be {action}")]
    NotAdvancing {
        phase: &'static str,
        action: &'static str,
    },
    #[error("the rollout is already paused: {reason}")]
    AlreadyPaused { reason: String },
    #[error("the rollout is not paused")]
    NotPaused,
    #[error("a reason is at most {REASON_LEN_MAX} bytes, got {0}")]
    ReasonTooLong(usize),
}

/// One rollout (see the module docs of `rollout`). Serialize it after
/// every input, before performing its commands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rollout {
    pub(super) spec: RolloutSpec,
    /// How many groups are bound once each step is done.
    pub(super) step_sizes: Vec<usize>,
    /// By name: the order the steps take them in.
    pub(super) groups: BTreeMap<String, GroupRun>,
    pub(super) phase: Phase,
    /// Why the rollout is paused, if it is.
    pub(super) paused: Option<String>,
    /// When the wait of the current phase began: when its last command
    /// landed (`None` while some are in flight).
    pub(super) wait_began_ms: Option<u64>,
    /// The wait is over but some group has no sample taken since it
    /// began: the next sample decides, not the clock.
    pub(super) awaiting_samples: bool,
    pub(super) next_command_id: CommandId,
    /// Every command issued and not reported done, by id.
    pub(super) in_flight: BTreeMap<CommandId, Command>,
    pub(super) events: VecDeque<Event>,
    pub(super) next_event_seq: u64,
    pub(super) started_ms: u64,
}

impl Rollout {
    /// Starts `spec` on the selected `groups` (any order; unique names):
    /// resolves the steps against their number and shadows every group.
    pub fn start(
        spec: RolloutSpec,
        groups: Vec<GroupStart>,
        now: u64,
    ) -> Result<(Rollout, Outputs), SpecError> {
        if groups.is_empty() || groups.len() > ROLLOUT_GROUPS_MAX {
            return Err(SpecError::new(
                "groups",
                format!(
                    "the selector must match 1 to {ROLLOUT_GROUPS_MAX} groups, it matched {}",
                    groups.len()
                ),
            ));
        }
        let names: BTreeSet<&str> = groups.iter().map(|g| g.name.as_str()).collect();
        if names.len() != groups.len() {
            return Err(SpecError::new("groups", "a group is named twice"));
        }
        if let Some(name) = names
            .iter()
            .find(|n| n.is_empty() || n.len() > GROUP_NAME_LEN_MAX)
        {
            return Err(SpecError::new(
                "groups",
                format!("{name:?} is not a group name"),
            ));
        }
        let step_sizes = resolve_steps(&spec.steps, groups.len())?;
        let mut sorted = groups;
        sorted.sort_by(|a, b| a.name.cmp(&b.name));
        let groups = sorted
            .into_iter()
            .enumerate()
            .map(|(i, g)| {
                let step = 1 + step_sizes.iter().take_while(|&&size| size <= i).count();
                let run = GroupRun::new(step, g.current_binding, g.current_shadow);
                (g.name, run)
            })
            .collect();
        let mut rollout = Rollout {
            spec,
            step_sizes,
            groups,
            phase: Phase::Shadowing,
            paused: None,
            wait_began_ms: None,
            awaiting_samples: false,
            next_command_id: 1,
            in_flight: BTreeMap::new(),
            events: VecDeque::new(),
            next_event_seq: 1,
            started_ms: now,
        };
        let mut out = Outputs::default();
        let started = EventKind::Started {
            groups: rollout.groups.len(),
            step_sizes: rollout.step_sizes.clone(),
        };
        rollout.emit(&mut out, now, started);
        let groups = rollout.groups.len();
        rollout.emit(&mut out, now, EventKind::ShadowBegan { groups });
        rollout.drive_all(&mut out, now);
        Ok((rollout, out))
    }

    /// After a restart or a takeover: every command that may not have
    /// been performed, to perform again (with the same ids).
    pub fn recover(&self, _now: u64) -> Vec<Command> {
        self.in_flight.values().cloned().collect()
    }

    /// A sample of `group`'s health. While the rollout goes forward
    /// (paused or not), any unhealthy verdict rolls it back. An unknown
    /// group, a group not touched yet and a sample older than the last
    /// one are ignored.
    pub fn observed(&mut self, group: &str, sample: HealthSample, now: u64) -> Outputs {
        let mut out = Outputs::default();
        let Some(run) = self.groups.get_mut(group) else {
            return out;
        };
        if !run.shadow.touched() || run.observed_ms > Some(sample.observed_at_ms) {
            return out;
        }
        run.observed_ms = Some(sample.observed_at_ms);
        run.baseline = sample.baseline;
        // Judged even while paused: a pause holds the rollout's progress,
        // not its safety. The groups already bound run the module for
        // real, and an operator who paused to look must not find a
        // failing module left in place.
        if !self.phase.is_advancing() {
            return out;
        }
        let mut judged = sample;
        judged.bound_to_module &= run.bind.touched();
        if let Verdict::Unhealthy { rule, detail } =
            judge(&self.spec.abort_on, &run.baseline, &judged)
        {
            run.unhealthy = Some((rule, detail.clone()));
            let reason = format!("group {group} unhealthy: {rule}: {detail}");
            let group = group.to_owned();
            self.emit(
                &mut out,
                now,
                EventKind::GroupUnhealthy {
                    group,
                    rule,
                    detail,
                },
            );
            self.roll_back(&mut out, reason, now);
            return out;
        }
        self.advance(&mut out, now);
        out
    }

    /// The outcome of command `id`. A report of a command not in flight
    /// (a repeat, after a restart) is ignored. A refused shadow or bind
    /// rolls the rollout back (the group may be half-changed, and a
    /// module that cannot be bound everywhere is not rolled out); a
    /// refused restore or unshadow is retried
    /// ([`REVERT_ATTEMPTS_MAX`](super::REVERT_ATTEMPTS_MAX) attempts,
    /// [`REVERT_RETRY_MS`](super::REVERT_RETRY_MS) apart), then given up
    /// and named in the rollout's `failed` event.
    ///
    /// A group deleted meanwhile: the shell reports a restore or an
    /// unshadow of it done (nothing is left to put back), and a shadow or
    /// a bind of it refused.
    pub fn command_done(&mut self, id: CommandId, result: Result<(), String>, now: u64) -> Outputs {
        let mut out = Outputs::default();
        let Some(command) = self.in_flight.remove(&id) else {
            return out;
        };
        self.landed(&mut out, command, result, now);
        self.advance(&mut out, now);
        out
    }

    /// Time passed: retries due are issued, and the current wait may end.
    pub fn tick(&mut self, now: u64) -> Outputs {
        let mut out = Outputs::default();
        let due: Vec<String> = self
            .groups
            .iter()
            .filter(|(_, run)| run.retry_at_ms.is_some_and(|at| at <= now))
            .map(|(name, _)| name.clone())
            .collect();
        for name in due {
            self.drive_group(&mut out, &name, now);
        }
        self.advance(&mut out, now);
        out
    }

    /// Holds the rollout where it is: no new step (nor the first one)
    /// begins until [`Self::resume`]. Binds of a step already begun still
    /// land, and health is still judged.
    pub fn pause(&mut self, reason: &str, now: u64) -> Result<Outputs, RolloutError> {
        check_reason(reason)?;
        self.check_advancing("paused")?;
        if let Some(reason) = &self.paused {
            return Err(RolloutError::AlreadyPaused {
                reason: reason.clone(),
            });
        }
        let mut out = Outputs::default();
        self.paused = Some(reason.to_owned());
        let reason = reason.to_owned();
        self.emit(&mut out, now, EventKind::Paused { reason });
        Ok(out)
    }

    /// Ends a pause; a wait that ended meanwhile goes on at once.
    pub fn resume(&mut self, now: u64) -> Result<Outputs, RolloutError> {
        self.check_advancing("resumed")?;
        if self.paused.take().is_none() {
            return Err(RolloutError::NotPaused);
        }
        let mut out = Outputs::default();
        self.emit(&mut out, now, EventKind::Resumed);
        self.advance(&mut out, now);
        Ok(out)
    }

    /// Rolls every group the rollout touched back, now. Possible until
    /// the rollout ends, even while it completes (its groups are put back).
    pub fn abort(&mut self, reason: &str, now: u64) -> Result<Outputs, RolloutError> {
        check_reason(reason)?;
        if !self.phase.is_advancing() && self.phase != Phase::Completing {
            return Err(RolloutError::NotAdvancing {
                phase: self.phase.name(),
                action: "aborted",
            });
        }
        let mut out = Outputs::default();
        self.roll_back(&mut out, format!("aborted: {reason}"), now);
        Ok(out)
    }

    /// When [`Self::tick`] is next due: the end of the current wait or
    /// the next retry. `None`: nothing is due by time alone (commands are
    /// in flight, samples awaited, the rollout paused or ended).
    pub fn poll_timeout(&self) -> Option<u64> {
        let retry = self.groups.values().filter_map(|run| run.retry_at_ms).min();
        let waiting = self.paused.is_none() && !self.awaiting_samples;
        let wait_end = match (&self.phase, self.wait_began_ms) {
            (Phase::Shadowing, Some(began)) if waiting => Some(began + self.spec.shadow_ms),
            (Phase::Step { .. }, Some(began)) if waiting => Some(began + self.spec.every_ms),
            _ => None,
        };
        [retry, wait_end].into_iter().flatten().min()
    }

    pub fn spec(&self) -> &RolloutSpec {
        &self.spec
    }

    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    /// Why the rollout is paused, if it is.
    pub fn paused(&self) -> Option<&str> {
        self.paused.as_deref()
    }

    /// How many groups are bound once each step is done.
    pub fn step_sizes(&self) -> &[usize] {
        &self.step_sizes
    }

    /// One group's part in the rollout.
    pub fn group(&self, name: &str) -> Option<&GroupRun> {
        self.groups.get(name)
    }

    /// Every selected group and its part, by name.
    pub fn groups(&self) -> impl Iterator<Item = (&str, &GroupRun)> {
        self.groups.iter().map(|(name, run)| (name.as_str(), run))
    }

    /// When the rollout started, on the machine's clock.
    pub fn started_ms(&self) -> u64 {
        self.started_ms
    }

    /// The last [`EVENTS_MAX`] events, oldest first.
    pub fn events(&self) -> impl Iterator<Item = &Event> {
        self.events.iter()
    }

    /// Records `kind` in the history and in `out`.
    pub(super) fn emit(&mut self, out: &mut Outputs, now: u64, kind: EventKind) {
        let event = Event {
            seq: self.next_event_seq,
            at_ms: now,
            kind,
        };
        self.next_event_seq += 1;
        if self.events.len() == EVENTS_MAX {
            self.events.pop_front();
        }
        self.events.push_back(event.clone());
        out.events.push(event);
    }

    fn check_advancing(&self, action: &'static str) -> Result<(), RolloutError> {
        if self.phase.is_advancing() {
            return Ok(());
        }
        Err(RolloutError::NotAdvancing {
            phase: self.phase.name(),
            action,
        })
    }

    /// Whether the module is (or may be) bound to `group`.
    pub fn bound(&self, group: &str) -> bool {
        self.groups.get(group).is_some_and(|run| run.bind.touched())
    }
}

fn check_reason(reason: &str) -> Result<(), RolloutError> {
    if reason.len() > REASON_LEN_MAX {
        return Err(RolloutError::ReasonTooLong(reason.len()));
    }
    Ok(())
}
