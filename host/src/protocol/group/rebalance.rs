//! Why a group rebalances, and the clock of its load trigger: soft state
//! beside each group ([`Rebalances`], one field of
//! [`Liveness`](super::Liveness)), rebuilt rather than replayed. The
//! reason of each new target is news for the group's view and the metrics,
//! never a record: a restarted host knows only the targets it installs
//! itself. The trigger's decisions are the core's (`core::load_trigger`);
//! this holds only what they remember between ticks.

use super::{Millis, RemovalReason};

/// What asked for a new target: the first change of the batch a target
/// answers (later changes in the same batch ride along).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RebalanceReason {
    /// A member joined (or rejoined in a way that needs a new target).
    Join,
    /// A member left.
    Leave,
    /// A member's session or registration timeout passed.
    Expiry,
    /// A member held tasks past its release deadline and was fenced.
    Fence,
    /// A member changed the topics it subscribes to.
    Subscription,
    /// An admin changed the group's config or its assignor binding.
    Config,
    /// A learner reported catching up: ownership may move to it.
    CaughtUp,
    /// The probing safety net while learners exist.
    Probing,
    /// A member began draining, or its drain ran out.
    Drain,
    /// The group's loads stayed outside their band for the load window.
    Load,
    /// The group waited for a target when this host took it (a restart or
    /// a takeover): the change that asked for it was before.
    Recovered,
}

impl RebalanceReason {
    pub const ALL: [RebalanceReason; 11] = [
        RebalanceReason::Join,
        RebalanceReason::Leave,
        RebalanceReason::Expiry,
        RebalanceReason::Fence,
        RebalanceReason::Subscription,
        RebalanceReason::Config,
        RebalanceReason::CaughtUp,
        RebalanceReason::Probing,
        RebalanceReason::Drain,
        RebalanceReason::Load,
        RebalanceReason::Recovered,
    ];

    /// The reason as the group view, a metric label and a log field spell
    /// it.
    pub fn label(self) -> &'static str {
        match self {
            RebalanceReason::Join => "join",
            RebalanceReason::Leave => "leave",
            RebalanceReason::Expiry => "expiry",
            RebalanceReason::Fence => "fence",
            RebalanceReason::Subscription => "subscription",
            RebalanceReason::Config => "config",
            RebalanceReason::CaughtUp => "caught_up",
            RebalanceReason::Probing => "probing",
            RebalanceReason::Drain => "drain",
            RebalanceReason::Load => "load",
            RebalanceReason::Recovered => "recovered",
        }
    }

    /// The reason of the target a member's removal asks for.
    pub fn of_removal(reason: RemovalReason) -> Self {
        match reason {
            RemovalReason::Left => RebalanceReason::Leave,
            RemovalReason::Expired => RebalanceReason::Expiry,
            RemovalReason::Fenced => RebalanceReason::Fence,
            RemovalReason::DrainTimedOut => RebalanceReason::Drain,
        }
    }
}

/// The last target this host installed for a group, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LastRebalance {
    /// The group epoch the target answers.
    pub epoch: u64,
    pub reason: RebalanceReason,
    /// When it was installed (host ms).
    pub at_ms: Millis,
}

/// One target this host installed: why, what it moved, and when the
/// group was stable again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RebalanceEntry {
    /// The group epoch the target answers.
    pub epoch: u64,
    pub reason: RebalanceReason,
    /// When the assignor was asked, and when its answer was installed
    /// (host ms).
    pub asked_ms: Millis,
    pub at_ms: Millis,
    /// Active tasks whose owner the target changed.
    pub moved: u64,
    /// Learner rows the target added.
    pub learners_started: u64,
    /// When every member held exactly this target (or a later one), if it
    /// has yet.
    pub settled_ms: Option<Millis>,
}

/// Installed targets a group's history keeps; the oldest are forgotten
/// past this.
pub const REBALANCE_HISTORY_MAX: usize = 32;

/// A group's rebalance reasons and its load trigger's clock.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rebalances {
    /// The reason of the batch of changes not yet given to the assignor.
    pub batch: Option<RebalanceReason>,
    /// The reason of the call in flight, kept for its retries until a
    /// target is installed.
    pub computing: Option<RebalanceReason>,
    /// The last target installed by this host.
    pub last: Option<LastRebalance>,
    /// The last [`REBALANCE_HISTORY_MAX`] targets this host installed,
    /// oldest first.
    pub history: std::collections::VecDeque<RebalanceEntry>,
    pub load: LoadClock,
}

/// What the load trigger remembers between its checks. All of it starts
/// over when a host takes the group: its loads are unknown then anyway.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadClock {
    /// When this host took the group (its first tick of it): the first
    /// load rebalance waits a cooldown from then, since the last one
    /// before may have been just before.
    pub took_ms: Option<Millis>,
    /// When this host last asked for a target for load: the cooldown
    /// counts from then, whatever the answer moved.
    pub last_load_ms: Option<Millis>,
    /// Since when the checks in a row have found the loads outside the
    /// band (the first such check).
    pub outside_since_ms: Option<Millis>,
    /// The last check that looked at the loads.
    pub last_check_ms: Option<Millis>,
    /// When to check next; `None`: at the next tick (a target was just
    /// installed, or the group was never checked).
    pub next_check_ms: Option<Millis>,
}

impl Rebalances {
    /// A change asks for a new target: the batch's reason, unless an
    /// earlier change opened it.
    pub fn asked(&mut self, reason: RebalanceReason) {
        self.batch.get_or_insert(reason);
    }

    /// An assignor call starts: the reason of its batch, or of the call it
    /// retries, or a target the group waited for when this host took it.
    pub fn call_started(&mut self) -> RebalanceReason {
        let reason = self
            .batch
            .take()
            .or(self.computing)
            .unwrap_or(RebalanceReason::Recovered);
        self.computing = Some(reason);
        reason
    }

    /// A target for `epoch` was installed at `now`: its reason is the
    /// group's last, and the load window starts over (the loads it was
    /// judging are no longer where they were).
    pub fn installed(&mut self, installed: Installed, now: Millis) {
        let reason = self.computing.take().unwrap_or(RebalanceReason::Recovered);
        self.last = Some(LastRebalance {
            epoch: installed.epoch,
            reason,
            at_ms: now,
        });
        if self.history.len() == REBALANCE_HISTORY_MAX {
            self.history.pop_front();
        }
        self.history.push_back(RebalanceEntry {
            epoch: installed.epoch,
            reason,
            asked_ms: installed.asked_ms.unwrap_or(now),
            at_ms: now,
            moved: installed.moved,
            learners_started: installed.learners_started,
            settled_ms: None,
        });
        self.load.outside_since_ms = None;
        self.load.next_check_ms = None;
    }

    /// The group is stable at its target: every rebalance not yet settled
    /// is, now.
    pub fn settled(&mut self, now: Millis) {
        for entry in self.history.iter_mut().rev() {
            if entry.settled_ms.is_some() {
                break;
            }
            entry.settled_ms = Some(now);
        }
    }
}

/// What installing a target did, for the group's history.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Installed {
    pub epoch: u64,
    /// When its call was started, if this host started it.
    pub asked_ms: Option<Millis>,
    pub moved: u64,
    pub learners_started: u64,
}
