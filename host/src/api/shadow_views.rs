//! A group's shadow assignor and its rebalance history on the wire: the
//! body of `PUT /v1/groups/{group}/shadow`, the answer of `GET
//! /v1/groups/{group}/shadow` and the group view's `shadow` and
//! `rebalances`, rendered from the core's `ShadowBinding`, `ShadowLog`
//! and `Rebalances::history`. Only copies.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::protocol::core::ShadowSpec;
use crate::protocol::group::{
    CallLimits, Liveness, RebalanceEntry, ShadowBinding, ShadowComparison, ShadowTotals,
    SideSummary,
};

use super::limits_doc::CallLimitsDoc;

/// The body of `PUT /v1/groups/{group}/shadow`: the assignor to ask beside
/// the live one, its params and the limits of its calls (as `PUT
/// .../assignor`'s, without a fallback).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShadowRequest {
    /// A built-in assignor's name, an uploaded module's id (sha256), or
    /// `name@version` of an uploaded module (`module` is taken too, as in
    /// `PUT .../assignor`).
    #[serde(alias = "module")]
    pub assignor: String,
    /// The shadow's params (none if absent); the host's own params
    /// (`acceptable_recovery_lag`, ...) come from the live binding.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// Limits on the shadow's calls, each capped by the host's ceiling.
    #[serde(default)]
    #[schema(value_type = CallLimitsDoc)]
    pub limits: CallLimits,
}

impl ShadowRequest {
    pub fn spec(self) -> ShadowSpec {
        ShadowSpec {
            assignor: self.assignor,
            params: self.params,
            limits: self.limits,
        }
    }
}

/// A group's shadow: its binding, and what its answers showed since this
/// host took the group (soft state: a restart starts the comparisons over).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ShadowView {
    /// The shadow bound now; `null` when the group has none.
    pub binding: Option<ShadowBindingView>,
    pub totals: ShadowTotalsView,
    /// The last comparisons (at most 32), oldest first.
    pub comparisons: Vec<ShadowComparisonView>,
}

/// A shadow assignor bound beside the live one.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ShadowBindingView {
    pub assignor: String,
    pub params: BTreeMap<String, String>,
    #[schema(value_type = CallLimitsDoc)]
    pub limits: CallLimits,
    /// The group epoch when it was bound.
    pub epoch: u64,
    /// The host's clock when bound (ms since that host process started).
    pub at_ms: u64,
}

/// Sums over the group's comparisons since this host took it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ShadowTotalsView {
    /// Comparisons completed (both answers in).
    pub compared: u64,
    /// Shadow calls that failed.
    pub shadow_failures: u64,
    /// Live calls that failed while compared.
    pub live_failures: u64,
    /// Live calls that went without a shadow call: the shadow's previous
    /// call still ran, or every shadow thread was busy.
    pub skipped: u64,
    /// Tasks the live answers moved.
    pub live_moved: u64,
    /// Tasks the shadow's answers would have moved.
    pub shadow_moved: u64,
    /// Comparisons whose answers disagreed on some task's owner.
    pub disagreements: u64,
}

/// The live answer and the shadow's to one input, side by side.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ShadowComparisonView {
    /// The group epoch the live call computed a target for.
    pub epoch: u64,
    /// When the second answer came (host ms).
    pub at_ms: u64,
    /// Why the group rebalanced (as `last_rebalance.reason`).
    pub reason: String,
    pub tasks: u64,
    pub members: u64,
    pub live: SideView,
    pub shadow: SideView,
    /// Tasks whose active owner differs between the two answers (absent
    /// unless both answered).
    pub disagreeing_tasks: Option<u64>,
}

/// One side of a comparison. The live side is the assignor's raw answer,
/// before the host made it safe for learners.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SideView {
    pub assignor: String,
    /// `code: message` of its failure; absent when it answered.
    pub failure: Option<String>,
    /// Active tasks whose owner the answer changes.
    pub moved: Option<u64>,
    /// Learner rows in the answer that are not learners now.
    pub learners_started: Option<u64>,
    /// The most active tasks on one member minus the fewest.
    pub count_spread: Option<u64>,
    /// The most loaded member's load over its fair share (1.0 = even),
    /// when every active task's load is known.
    pub load_imbalance: Option<f64>,
    /// How long the call took (loading and running the module).
    pub elapsed_ms: Option<f64>,
    /// The fuel it burned, when it answered.
    pub fuel: Option<u64>,
}

/// One target this host installed for the group (the last 32, oldest
/// first): soft state, started over by a restart.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RebalanceView {
    /// The group epoch the target answers.
    pub epoch: u64,
    /// What asked for it (as `last_rebalance.reason`).
    pub reason: String,
    /// When the assignor was asked, and when the target was installed
    /// (host ms).
    pub asked_ms: u64,
    pub at_ms: u64,
    /// Active tasks whose owner the target changed.
    pub moved: u64,
    /// Learner rows the target added.
    pub learners_started: u64,
    /// When every member held it (or a later target), if they have yet.
    pub settled_ms: Option<u64>,
}

/// The group's shadow: its binding and its comparisons (`None` when it
/// has no shadow and no comparisons are left from one).
pub fn shadow_view(
    binding: Option<&ShadowBinding>,
    liveness: Option<&Liveness>,
) -> Option<ShadowView> {
    let log = liveness.map(|l| &l.shadows);
    let totals = log.map(|l| l.totals).unwrap_or_default();
    let compared = log.is_some_and(|l| !l.comparisons.is_empty());
    if binding.is_none() && !compared && totals == ShadowTotals::default() {
        return None;
    }
    Some(ShadowView {
        binding: binding.map(|b| ShadowBindingView {
            assignor: b.assignor.clone(),
            params: b.params.clone(),
            limits: b.limits,
            epoch: b.epoch,
            at_ms: b.at_ms,
        }),
        totals: totals_view(&totals),
        comparisons: log
            .into_iter()
            .flat_map(|l| &l.comparisons)
            .map(comparison_view)
            .collect(),
    })
}

/// [`shadow_view`], or an empty one: the answer of `GET .../shadow`.
pub fn shadow_view_or_none(
    binding: Option<&ShadowBinding>,
    liveness: Option<&Liveness>,
) -> ShadowView {
    shadow_view(binding, liveness).unwrap_or(ShadowView {
        binding: None,
        totals: ShadowTotalsView::default(),
        comparisons: Vec::new(),
    })
}

fn totals_view(totals: &ShadowTotals) -> ShadowTotalsView {
    ShadowTotalsView {
        compared: totals.compared,
        shadow_failures: totals.shadow_failures,
        live_failures: totals.live_failures,
        skipped: totals.skipped,
        live_moved: totals.live_moved,
        shadow_moved: totals.shadow_moved,
        disagreements: totals.disagreements,
    }
}

fn comparison_view(comparison: &ShadowComparison) -> ShadowComparisonView {
    ShadowComparisonView {
        epoch: comparison.epoch,
        at_ms: comparison.at_ms,
        reason: comparison.reason.to_owned(),
        tasks: comparison.tasks,
        members: comparison.members,
        live: side_view(&comparison.live),
        shadow: side_view(&comparison.shadow),
        disagreeing_tasks: comparison.disagreeing_tasks,
    }
}

fn side_view(side: &SideSummary) -> SideView {
    SideView {
        assignor: side.assignor.clone(),
        failure: side.failure.clone(),
        moved: side.moved,
        learners_started: side.learners_started,
        count_spread: side.count_spread,
        load_imbalance: side.load_imbalance,
        elapsed_ms: side.stats.elapsed_ms,
        fuel: side.stats.fuel,
    }
}

/// The targets this host installed for the group, oldest first.
pub fn rebalance_views(liveness: Option<&Liveness>) -> Vec<RebalanceView> {
    liveness
        .into_iter()
        .flat_map(|l| &l.rebalances.history)
        .map(|entry: &RebalanceEntry| RebalanceView {
            epoch: entry.epoch,
            reason: entry.reason.label().to_owned(),
            asked_ms: entry.asked_ms,
            at_ms: entry.at_ms,
            moved: entry.moved,
            learners_started: entry.learners_started,
            settled_ms: entry.settled_ms,
        })
        .collect()
}
