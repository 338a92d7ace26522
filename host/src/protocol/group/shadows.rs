//! What a group remembers of its shadow assignor's answers: soft state
//! beside each group ([`ShadowLog`], one field of
//! [`Liveness`](super::Liveness)), like its failures and loads. The
//! shadow's binding is durable ([`ShadowBinding`](super::ShadowBinding));
//! its comparisons are news for the group's view and the metrics, lost on
//! a restart or a takeover, since replay never runs a guest. The core
//! (`core::shadows`) fills it; this holds only the data and its bounds.

use std::collections::VecDeque;
use std::sync::Arc;

use assignd_guest_sdk::GroupInput;
use serde::Serialize;

use super::Millis;

/// Comparisons kept per group; the oldest are forgotten past this.
pub const SHADOW_COMPARISONS_MAX: usize = 32;

/// A group's shadow comparisons: the one waiting for its second answer,
/// the last [`SHADOW_COMPARISONS_MAX`], and totals since this host took
/// the group.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShadowLog {
    /// The comparison whose answers are still coming, if any.
    pub pending: Option<PendingComparison>,
    /// Whether the shadow's call is still running (a live call that
    /// starts meanwhile goes without a shadow call: a slow shadow never
    /// piles calls up).
    pub shadow_running: bool,
    /// The latest comparisons, oldest first.
    pub comparisons: VecDeque<ShadowComparison>,
    pub totals: ShadowTotals,
    /// The runtime's measure of the live call just answered, until its
    /// answer joins the pending comparison.
    pub live_stats: Option<CallStats>,
}

/// One live call and its shadow's, while their answers come in.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingComparison {
    pub epoch: u64,
    /// The input both were asked, as the shadow got it (the live call's
    /// differs only in its params, which the comparison does not read).
    pub input: Arc<GroupInput>,
    /// The live assignor and the shadow, as referenced when asked.
    pub live_assignor: String,
    pub shadow_assignor: String,
    /// The rebalance's reason, as a label.
    pub reason: &'static str,
    pub asked_ms: Millis,
    pub live: Option<SideAnswer>,
    pub shadow: Option<SideAnswer>,
}

/// One side's answer as it came back: the raw assignment (the shadow's is
/// never made safe or installed) or the failure, and what it cost.
#[derive(Clone, Debug, PartialEq)]
pub struct SideAnswer {
    pub result: Result<assignd_guest_sdk::Assignment, String>,
    pub stats: CallStats,
}

/// What one assignor call cost, as the runtime measured it (`None` where
/// it was not measured: the simulator's native assignors).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CallStats {
    pub elapsed_ms: Option<f64>,
    pub fuel: Option<u64>,
}

/// The live answer and the shadow's to one input, side by side.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ShadowComparison {
    /// The group epoch the live call computed a target for.
    pub epoch: u64,
    /// When the second answer came (host ms).
    pub at_ms: Millis,
    /// Why the group rebalanced.
    pub reason: &'static str,
    pub tasks: u64,
    pub members: u64,
    pub live: SideSummary,
    pub shadow: SideSummary,
    /// Tasks whose active owner differs between the two answers (when both
    /// answered).
    pub disagreeing_tasks: Option<u64>,
}

/// One side of a comparison: its assignor, whether it answered, and what
/// its answer would do to the group's current assignment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SideSummary {
    pub assignor: String,
    /// `code: message` of its failure (a trap, a limit, an invalid
    /// answer, the guest's own error); `None` when it answered.
    pub failure: Option<String>,
    /// Active tasks that would change owner (a task with no owner now
    /// that gets one is placed, not moved).
    pub moved: Option<u64>,
    /// Learner rows in the answer that are not learners now.
    pub learners_started: Option<u64>,
    /// The most active tasks on one member minus the fewest.
    pub count_spread: Option<u64>,
    /// The most loaded member's load over its fair share (1.0 = even),
    /// when every active task's load is known.
    pub load_imbalance: Option<f64>,
    #[serde(flatten)]
    pub stats: CallStats,
}

/// Sums over a group's comparisons since this host took it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ShadowTotals {
    /// Comparisons completed.
    pub compared: u64,
    /// Shadow calls that failed.
    pub shadow_failures: u64,
    /// Live calls that failed while compared.
    pub live_failures: u64,
    /// Live calls that went without a shadow call, its previous one still
    /// running.
    pub skipped: u64,
    /// Tasks moved by the live answers, and would-be moves of the shadow's.
    pub live_moved: u64,
    pub shadow_moved: u64,
    /// Comparisons where the two answers disagreed on some owner.
    pub disagreements: u64,
}

// Its floats are measured times and loads checked finite before they
// came in, so `PartialEq` on it is an equivalence.
impl Eq for ShadowLog {}

impl ShadowLog {
    /// Keeps a finished comparison, forgetting the oldest past the bound.
    pub fn push(&mut self, comparison: ShadowComparison) {
        let totals = &mut self.totals;
        totals.compared += 1;
        totals.shadow_failures += u64::from(comparison.shadow.failure.is_some());
        totals.live_failures += u64::from(comparison.live.failure.is_some());
        totals.live_moved += comparison.live.moved.unwrap_or(0);
        totals.shadow_moved += comparison.shadow.moved.unwrap_or(0);
        totals.disagreements += u64::from(comparison.disagreeing_tasks.is_some_and(|d| d > 0));
        if self.comparisons.len() == SHADOW_COMPARISONS_MAX {
            self.comparisons.pop_front();
        }
        self.comparisons.push_back(comparison);
    }

    /// Forgets the comparisons: the shadow ended or was replaced. A call
    /// of the previous shadow may still run: its answer is dropped, and
    /// no second call starts meanwhile.
    pub fn clear(&mut self) {
        *self = ShadowLog {
            shadow_running: self.shadow_running,
            ..ShadowLog::default()
        };
    }
}
