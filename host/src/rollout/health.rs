//! A group's health under a rollout: what the shell observes of one group
//! ([`HealthSample`]), what it is compared with ([`Baseline`]), and the
//! verdict of the abort rules ([`judge`]), a pure function with exact
//! thresholds (integer arithmetic only).

use serde::{Deserialize, Serialize};

use super::rules::{AbortRule, milli_text};

/// How the group moved tasks under its previous binding, since the
/// rollout began (its shadow period, and its wait for its own step): the
/// live side of the shadow comparisons. Its counters stop growing when
/// the module is bound, so the latest sample's baseline is the one taken
/// at binding.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Baseline {
    /// Rebalances (new targets) under the previous binding.
    pub rebalances: u64,
    /// Active tasks those rebalances moved, summed.
    pub moved_total: u64,
}

/// The largest counter the moves rules compare (2^40, a trillion): larger
/// ones are taken as this, so that the exact comparison fits in `u128`.
/// No group rebalances or moves that much.
pub const COUNTER_MAX: u64 = 1 << 40;

/// What the shell observes of one group. Every counter is cumulative
/// since the rollout first touched the group (those of the bound module
/// are 0 until it is bound), so a missed sample loses nothing and a
/// stale one says less, never something false.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthSample {
    /// Failures (trap, limit, invalid answer) of the rollout's module
    /// while bound to the group.
    pub live_failures_of_module: u64,
    /// Failures of the rollout's module as the group's shadow.
    pub shadow_failures: u64,
    /// Rebalances since the module was bound.
    pub rebalances: u64,
    /// Active tasks moved by those rebalances, summed.
    pub moved_total: u64,
    /// The longest of those rebalances, from new target to settled (ms).
    pub rebalance_ms_max: u64,
    /// Whether the group's binding is the rollout's module now: the moves
    /// and rebalance rules judge only such a sample (of a group the
    /// rollout bound), so one taken before a bind landed counts nothing
    /// against the module.
    pub bound_to_module: bool,
    /// Whether the group's shadow is the rollout's module now: for the
    /// shell's logs; the verdict takes `shadow_failures` as they are
    /// (they are the module's by definition).
    pub shadow_is_module: bool,
    /// The group under its previous binding.
    pub baseline: Baseline,
    /// When the shell took the sample, on the machine's clock.
    pub observed_at_ms: u64,
}

/// What the abort rules say of one sample.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum Verdict {
    Healthy,
    /// The first rule (in the spec's order) that fired, and the numbers
    /// that made it fire.
    Unhealthy {
        rule: AbortRule,
        detail: String,
    },
}

/// Judges `sample` by `rules`, in their order; the first that fires gives
/// the verdict. The thresholds, all strict:
///
/// - `failures`: `live_failures_of_module + shadow_failures > 0`;
/// - `moves>X`: `moved_total / rebalances > baseline mean + X`;
/// - `moves>Rx`: `moved_total / rebalances > R × baseline mean`;
/// - `rebalance_ms>Y`: `rebalance_ms_max > Y`.
///
/// The baseline mean is `baseline.moved_total / baseline.rebalances`, or
/// 0 when the group did not rebalance before binding (so a ratio rule
/// then fires on any move: nothing to compare with is not a licence).
/// The moves and rebalance rules judge only a sample that shows the
/// module bound with at least one rebalance since: before, there is
/// nothing of the module's to judge.
pub fn judge(rules: &[AbortRule], baseline: &Baseline, sample: &HealthSample) -> Verdict {
    for rule in rules {
        if let Some(detail) = fires(*rule, baseline, sample) {
            return Verdict::Unhealthy {
                rule: *rule,
                detail,
            };
        }
    }
    Verdict::Healthy
}

/// Why `rule` fires on `sample`, or `None`.
fn fires(rule: AbortRule, baseline: &Baseline, sample: &HealthSample) -> Option<String> {
    let judged_live = sample.bound_to_module && sample.rebalances > 0;
    // Means compared as fractions: a/b > c/d + x/1000 is
    // 1000·a·d > 1000·c·b + x·b·d (b, d > 0), in u128; with counters at
    // most 2^40 and x at most 2^30 nothing overflows. A baseline with no
    // rebalance has mean 0 (c = 0, d = 1).
    let clamp = |n: u64| u128::from(n.min(COUNTER_MAX));
    let (a, b) = (clamp(sample.moved_total), clamp(sample.rebalances));
    let (c, d) = match baseline.rebalances {
        0 => (0, 1),
        n => (clamp(baseline.moved_total), clamp(n)),
    };
    let moves = || {
        format!(
            "{} tasks moved per rebalance over {} rebalances since binding, baseline {} over {}",
            mean(sample.moved_total, sample.rebalances),
            sample.rebalances,
            mean(baseline.moved_total, baseline.rebalances),
            baseline.rebalances
        )
    };
    match rule {
        AbortRule::Failures => {
            let failures = sample.live_failures_of_module + sample.shadow_failures;
            (failures > 0).then(|| {
                format!(
                    "{failures} failures of the module ({} live, {} shadow)",
                    sample.live_failures_of_module, sample.shadow_failures
                )
            })
        }
        AbortRule::MovesAbove { excess_milli } => {
            let over = 1_000 * a * d > 1_000 * c * b + u128::from(excess_milli) * b * d;
            (judged_live && over).then(|| {
                format!(
                    "{} (limit: baseline + {})",
                    moves(),
                    milli_text(excess_milli)
                )
            })
        }
        AbortRule::MovesRatio { ratio_milli } => {
            let over = 1_000 * a * d > u128::from(ratio_milli) * c * b;
            (judged_live && over).then(|| {
                format!(
                    "{} (limit: baseline × {})",
                    moves(),
                    milli_text(ratio_milli)
                )
            })
        }
        AbortRule::RebalanceMsAbove { ms } => {
            let over = sample.bound_to_module && sample.rebalance_ms_max > ms;
            over.then(|| {
                format!(
                    "a rebalance since binding took {} ms (limit: {ms} ms)",
                    sample.rebalance_ms_max
                )
            })
        }
    }
}

/// `total / count` with two decimals, for the details.
fn mean(total: u64, count: u64) -> String {
    if count == 0 {
        return "0".into();
    }
    let hundredths = u128::from(total) * 100 / u128::from(count);
    format!("{}.{:02}", hundredths / 100, hundredths % 100)
}
