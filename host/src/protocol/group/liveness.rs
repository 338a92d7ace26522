//! The transient state beside each group ([`Liveness`]): when each slot was
//! last heard from, the current batch of changes, the call in flight,
//! releases, drains, leases, handovers and lags, and the assignor's
//! failures. Rebuilt after a restart, never written to the log.

use std::collections::{BTreeMap, BTreeSet};

use super::{Millis, Slot, Task};

/// Transient per-group state, rebuilt rather than replayed: when each slot
/// was last heard from, when the current batch of changes started, which
/// target computation is in flight, since when each member has been asked
/// to release tasks. Every map keyed by slot is moved by
/// [`Liveness::rekey`] and cleared when the slot is removed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Liveness {
    pub last_seen_ms: BTreeMap<Slot, Millis>,
    /// When the oldest change not yet in a target happened.
    pub pending_since_ms: Option<Millis>,
    /// The group epoch of the assignor call in flight.
    pub computing_epoch: Option<u64>,
    /// Since when each slot has had tasks to release.
    pub revoking_since_ms: BTreeMap<Slot, Millis>,
    /// The lags each slot last reported, per task (replaced by each report).
    pub lags: BTreeMap<Slot, BTreeMap<Task, u64>>,
    /// Learners already reported caught up, so that each catch-up asks for
    /// one new target, not one per heartbeat.
    pub caught_up_signalled: BTreeSet<(Slot, Task)>,
    /// Since when each draining slot has been draining (restarted from
    /// recovered state after a host restart).
    pub draining_since_ms: BTreeMap<Slot, Millis>,
    /// The latest end of a lease each slot was given (the answer's time
    /// plus its `lease_ms`). No timer removes the slot before it, so a
    /// config change that shortens a timeout cannot break a lease already
    /// given. Not kept over a restart: every timer then restarts later.
    pub lease_end_ms: BTreeMap<Slot, Millis>,
    /// The end of the unreached lease of each slot's last answer (its time
    /// plus its `unreached_lease_ms`): the member may process until then
    /// while its later heartbeats reach no coordinator. Replaced by each
    /// heartbeat handled, since one that reached the coordinator voids the
    /// member's claim to an earlier one. No timer removes the slot before
    /// it either ([`Liveness::lease_floor_ms`]).
    pub unreached_end_ms: BTreeMap<Slot, Millis>,
    /// Member ids this host saw replaced by a new incarnation of their
    /// name, with the name (oldest first, at most
    /// [`FENCED_MEMBER_IDS_MAX`](super::FENCED_MEMBER_IDS_MAX)), so that
    /// the old incarnation is told `replaced` even when its heartbeat does
    /// not carry its name.
    pub replaced: std::collections::VecDeque<(String, String)>,
    /// Per slot taken over by a new incarnation while the previous one's
    /// lease still ran: the tasks that incarnation held, and when that lease
    /// ends. The new incarnation is granted them only then (invariant 1 for
    /// two live processes with one name).
    pub handover: BTreeMap<Slot, Handover>,
    /// Slots whose incarnation left while the one it replaced may still
    /// process under its lease (a handover under way): removed, as left,
    /// once that lease ends rather than at once, so that no target gives
    /// the tasks that incarnation holds to another member before then.
    pub departing: BTreeSet<Slot>,
    /// When the assignor was last asked (for the probing interval).
    pub last_call_ms: Option<Millis>,
    /// The next call skips the expansion wait (a learner caught up, a drain
    /// began, a member departed).
    pub urgent: bool,
    /// A call for a batch of learners' catch-ups alone waits until then:
    /// set from the size of the target just installed, so that a big group
    /// whose every catch-up asks for a new target installs one only now and
    /// then (`TARGET_ROWS_PER_PACE_MS` in the core).
    pub paced_until_ms: Option<Millis>,
    /// The open batch holds learners' catch-ups and nothing else, so it
    /// waits for [`Liveness::paced_until_ms`].
    pub catch_up_only: bool,
    /// The group's assignor failures since this host started (none if its
    /// assignor never failed): transient, not in the log.
    pub failures: Option<AssignorFailures>,
    /// Why the group rebalances, and its load trigger's clock.
    pub rebalances: super::Rebalances,
    /// The latest end of the promise of a routing table served
    /// (`routes_valid_ms` after it was served).
    pub routes_promised_until_ms: Option<Millis>,
    /// Revocations wait until then: a target was installed while tables
    /// served before it still promised the tasks' owners, who keep
    /// them (and so serve what those tables send them) until then.
    pub revocations_held_until_ms: Option<Millis>,
    /// Grants wait until then: a member was removed or replaced while
    /// tables served before still named it.
    pub grants_held_until_ms: Option<Millis>,
    /// The loads members reported: soft state, lost on a restart or a
    /// takeover, when every member is asked for a full report again.
    pub loads: super::loads::LoadBook,
    /// The shadow assignor's comparisons with the live one.
    pub shadows: super::ShadowLog,
}

/// Tasks a replaced incarnation of a static slot may still process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Handover {
    /// The end of the last lease the host gave the replaced incarnation.
    pub until_ms: Millis,
    pub tasks: BTreeSet<Task>,
}

/// A failed assignor call as the runtime reports it to the core: the
/// plugin error's code (`PluginError::code`) and its message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssignorFailure {
    pub code: String,
    pub message: String,
}

impl AssignorFailure {
    pub fn new(code: impl Into<String>, message: impl Into<String>) -> Self {
        AssignorFailure {
            code: code.into(),
            message: message.into(),
        }
    }
}

/// A bare message (the simulator's and the tests' native assignors).
impl From<String> for AssignorFailure {
    fn from(message: String) -> Self {
        AssignorFailure::new("assignor_error", message)
    }
}

/// A group's assignor failures: the last one, how many in a row (0 again
/// after a success) and in all, and the last success after a failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AssignorFailures {
    /// The module the failed call ran.
    pub module: String,
    pub code: String,
    pub message: String,
    /// When the last failure was recorded (host ms).
    pub at_ms: Millis,
    pub consecutive: u64,
    pub total: u64,
    pub last_success_ms: Option<Millis>,
    /// The binding's fallback when the last failure happened.
    pub fallback: Option<String>,
    /// Whether the installed target is the fallback's answer (the bound
    /// assignor failed on the last call).
    pub served_by_fallback: bool,
    /// Targets the fallback answered in all.
    pub fallback_answers: u64,
    /// The fallback's own failure on the last call, if it failed too.
    pub fallback_error: Option<String>,
}

/// The retry delay after `consecutive` failures in a row: the expansion
/// timeout, doubled for each failure after the first, capped at
/// [`ASSIGNOR_RETRY_MS_MAX`] (never below the expansion timeout).
pub fn assignor_retry_ms(expansion_timeout_ms: u64, consecutive: u64) -> u64 {
    let doublings = consecutive.saturating_sub(1).min(20) as u32;
    expansion_timeout_ms
        .saturating_mul(1 << doublings)
        .min(ASSIGNOR_RETRY_MS_MAX)
        .max(expansion_timeout_ms)
}

/// The longest wait between retries of a failing assignor.
pub const ASSIGNOR_RETRY_MS_MAX: u64 = 60_000;

/// How long the core waits for the answer to an assignor call before it
/// asks again, at least (twice the binding's time limit if that is
/// longer): an answer the runtime could not deliver (the shard was not
/// served for a moment when it came back, its node paused past its
/// lease) must not leave the group without a target for ever.
pub const ANSWER_WAIT_MS_MIN: u64 = 60_000;

/// How long the core waits for the answer to a call under `config`.
pub fn answer_wait_ms(config: &super::GroupConfig) -> u64 {
    config
        .assignor_limits
        .time_limit_ms
        .map_or(0, |ms| ms.saturating_mul(2))
        .max(ANSWER_WAIT_MS_MIN)
}

impl Liveness {
    /// Until when slot's member may still process under a lease it was
    /// given, plain or unreached: no timer takes its tasks and no new
    /// incarnation gets them before then.
    pub fn lease_floor_ms(&self, slot: &Slot) -> Option<Millis> {
        let plain = self.lease_end_ms.get(slot).copied();
        let unreached = self.unreached_end_ms.get(slot).copied();
        plain.max(unreached)
    }

    /// Moves what is kept for slot `from` to slot `to` (a static slot
    /// re-keyed by member id when the name map is dropped), so that its
    /// deadlines, its lease promise, its lags and its caught-up signals
    /// carry on as they were instead of starting over.
    pub fn rekey(&mut self, from: &Slot, to: &Slot) {
        fn move_entry<V>(map: &mut BTreeMap<Slot, V>, from: &Slot, to: &Slot) {
            if let Some(value) = map.remove(from) {
                map.insert(to.clone(), value);
            }
        }
        move_entry(&mut self.last_seen_ms, from, to);
        move_entry(&mut self.revoking_since_ms, from, to);
        move_entry(&mut self.lags, from, to);
        move_entry(&mut self.draining_since_ms, from, to);
        move_entry(&mut self.lease_end_ms, from, to);
        move_entry(&mut self.unreached_end_ms, from, to);
        move_entry(&mut self.handover, from, to);
        self.loads.rekey(from, to);
        if self.departing.remove(from) {
            self.departing.insert(to.clone());
        }
        self.caught_up_signalled = std::mem::take(&mut self.caught_up_signalled)
            .into_iter()
            .map(|(slot, task)| {
                if slot == *from {
                    (to.clone(), task)
                } else {
                    (slot, task)
                }
            })
            .collect();
    }

    /// Whether `slot` last reported a lag on `task` at or under `acceptable`.
    pub fn caught_up(&self, slot: &str, task: &Task, acceptable: u64) -> bool {
        self.lags
            .get(slot)
            .and_then(|lags| lags.get(task))
            .is_some_and(|&lag| lag <= acceptable)
    }
}
