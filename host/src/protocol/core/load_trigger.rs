//! The load trigger: when a group's loads stay outside their band for the
//! load window, the group is bumped for a new target with reason `load`, at
//! most once per load cooldown. It owns the decision and its clock
//! ([`LoadClock`] in the group's liveness) and the table of which assignors
//! declare they balance load ([`AssignorLoads`]); it reads the loads only
//! through the load view (loads.rs) and changes nothing else.
//!
//! The trigger samples: while a group may rebalance for load it has a
//! deadline in the timer table ([`load_check_at`], kind `load_check`), one
//! heartbeat interval apart (loads change when members report, once an
//! interval), and exactly at the end of the window or cooldown. A group may
//! rebalance for load only when it has a load unit, is not frozen, its
//! assignor declares `capabilities.load`, no target is wanted or computed,
//! no learner warms up, every member reached its target, and every load is
//! known (unknown is not zero: a host that just took a group waits for
//! every member's full report). Checks that find the loads outside the band
//! in a row, no more than two intervals apart, make the window; any other
//! check, and any target installed, starts it over. The cooldown counts
//! from the last load rebalance, whatever it moved (a rebalance that moved
//! nothing does not ask again at once), and after a restart or a takeover
//! from this host's first check of the group (so never sooner than a
//! cooldown after it took the group).

use std::collections::{BTreeMap, BTreeSet};

use assignd_guest_sdk::load::{BAND_DEFAULT, band};

use super::{Coordinator, Output, loads::load_view};
use crate::protocol::group::{Group, Liveness, LoadClock, Millis, RebalanceReason};

/// The least time between two checks of a group's loads, whatever its
/// heartbeat interval: each check costs a pass over the group's tasks.
pub const LOAD_CHECK_MS_MIN: u64 = 100;

/// Which assignors (by the reference a group's config names) declare that
/// they balance load, as the runtime last told the core
/// ([`Coordinator::describe_assignor_load`]); the references the trigger
/// needed and found no word of wait in `wanted`
/// ([`Coordinator::assignors_to_describe`]). The core never loads a module
/// itself.
#[derive(Clone, Debug, Default)]
pub(super) struct AssignorLoads {
    known: BTreeMap<String, bool>,
    wanted: BTreeSet<String>,
}

impl Coordinator {
    /// Assignor references a load trigger is waiting to hear about: the
    /// runtime looks each up (its module's `capabilities.load`) and answers
    /// with [`Coordinator::describe_assignor_load`].
    pub fn assignors_to_describe(&self) -> Vec<String> {
        self.assignor_loads.wanted.iter().cloned().collect()
    }

    /// Whether the assignor `reference` balances load (its
    /// `capabilities.load`). Only groups bound to one that does are
    /// rebalanced for load. Kept for the process: a reference names the
    /// same module as long as it resolves.
    pub fn describe_assignor_load(&mut self, reference: &str, load: bool) {
        self.assignor_loads.wanted.remove(reference);
        self.assignor_loads.known.insert(reference.to_owned(), load);
    }

    /// Whether the assignor `reference` balances load, as the runtime
    /// said; `None` until it has.
    pub fn assignor_balances_load(&self, reference: &str) -> Option<bool> {
        self.assignor_loads.known.get(reference).copied()
    }

    /// The group's load check, at its deadline ([`load_check_at`]): a
    /// sample of its loads against the band, and a bump for load when they
    /// stayed outside it for the window and the cooldown has passed.
    /// Nothing happens before the deadline (a visit for another timer, or
    /// the full scan).
    pub(super) fn check_load(&mut self, group_name: &str, now: Millis, out: &mut Output) {
        let entry = self
            .groups
            .get_mut(group_name)
            .expect("a group the caller checked");
        let (group, liveness) = (&entry.group, &mut entry.liveness);
        if load_check_at(group, liveness).is_none_or(|at| now < at) {
            return;
        }
        // Noted at the first check that runs, not at the first visit: a
        // tick visits only the groups it has a deadline for, a full scan
        // every group, and both must leave the same state.
        liveness.rebalances.load.took_ms.get_or_insert(now);
        let config = &group.config;
        let interval = check_interval_ms(group);
        let clock = &mut liveness.rebalances.load;
        match self.assignor_loads.known.get(&config.assignor) {
            None => {
                // Keep the run as it is: the runtime answers before the
                // next tick.
                self.assignor_loads.wanted.insert(config.assignor.clone());
                clock.next_check_ms = Some(now.saturating_add(interval));
                return;
            }
            Some(false) => {
                // Only a new binding (which installs a target, and so
                // checks again) can change this.
                clock.outside_since_ms = None;
                clock.next_check_ms =
                    Some(now.saturating_add(config.load_cooldown_ms.max(interval)));
                return;
            }
            Some(true) => {}
        }
        let outside = outside_band(group, liveness, now);
        let clock = &mut liveness.rebalances.load;
        let due = judge(clock, config, outside, interval, now);
        if due {
            clock.last_load_ms = Some(now);
            clock.outside_since_ms = None;
            clock.next_check_ms = None;
            tracing::info!(
                group = group_name,
                "loads outside their band: a load rebalance"
            );
            self.bump_urgently(group_name, RebalanceReason::Load, now, out);
        }
    }
}

/// Notes one check's finding in `clock` and says whether a load rebalance
/// is due: the loads outside the band (`outside`: `None` when they cannot
/// be judged now) at every check for the window, and the cooldown passed.
fn judge(
    clock: &mut LoadClock,
    config: &crate::protocol::group::GroupConfig,
    outside: Option<bool>,
    interval: u64,
    now: Millis,
) -> bool {
    let in_a_row = clock
        .last_check_ms
        .is_some_and(|at| now <= at.saturating_add(interval.saturating_mul(2)));
    clock.last_check_ms = Some(now);
    clock.next_check_ms = Some(now.saturating_add(interval));
    if outside != Some(true) {
        clock.outside_since_ms = None;
        return false;
    }
    let since = match clock.outside_since_ms {
        Some(since) if in_a_row => since,
        _ => *clock.outside_since_ms.insert(now),
    };
    let cooled_from = clock.last_load_ms.or(clock.took_ms).unwrap_or(now);
    let due = since
        .saturating_add(config.load_window_ms)
        .max(cooled_from.saturating_add(config.load_cooldown_ms));
    if now >= due {
        return true;
    }
    clock.next_check_ms = Some(now.saturating_add(interval).min(due));
    false
}

/// Whether the group's loads are outside their band now; `None` when they
/// cannot be judged: a member has not reached its target, or a load is
/// unknown.
fn outside_band(group: &Group, liveness: &Liveness, now: Millis) -> Option<bool> {
    if !group.is_stable() {
        return None;
    }
    let view = load_view(group, liveness, now)?;
    if !view.complete {
        return None;
    }
    // The assignor refuses a bad band when it is bound; one that does not
    // read it still gets the default.
    let band = band(&group.config.params).unwrap_or(BAND_DEFAULT);
    Some(!view.in_band(band))
}

/// When the group's next load check is due, if it may rebalance for load
/// at all: it has a load unit, is not frozen, no target is wanted or
/// computed and no learner warms up. `Some(0)`: at the next tick (a target
/// was just installed). The timer table's `load_check` deadline.
pub(super) fn load_check_at(group: &Group, liveness: &Liveness) -> Option<Millis> {
    let watched = group.config.load_unit.is_some()
        && !group.config.frozen
        && group.group_epoch == group.target_epoch
        && liveness.computing_epoch.is_none()
        && group.target.values().all(|t| t.learner.is_empty());
    watched.then(|| liveness.rebalances.load.next_check_ms.unwrap_or(0))
}

/// How often a group's loads are checked: once a heartbeat interval, when
/// every member has reported once.
fn check_interval_ms(group: &Group) -> u64 {
    group.config.heartbeat_interval_ms.max(LOAD_CHECK_MS_MIN)
}
