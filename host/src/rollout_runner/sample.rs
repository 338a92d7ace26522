//! A group's health sample, read from its view (`GET /v1/groups/{g}`).
//! The view's counters are soft state: they start at 0 again after a
//! host restart or a takeover of the group's shard, and a shadow's start
//! over when it is bound again. So each sample adds only what grew since
//! the last one to the rollout's own counters ([`Tally`]), which are
//! persisted with the rollout: what a restarted or new coordinator goes
//! on from. Pure: the view and the time come in, the sample goes out.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::rollout::{Baseline, HealthSample};

/// The rollout's counters of one group, kept across restarts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Failures of the module while bound, since the bind.
    pub live_failures: u64,
    /// Failures of the module as the group's shadow.
    pub shadow_failures: u64,
    /// Rebalances after the bind's own, their moves and the longest.
    pub rebalances: u64,
    pub moved_total: u64,
    pub rebalance_ms_max: u64,
    /// The group under its previous binding (the live side of the shadow
    /// comparisons) until the module is bound.
    pub baseline: Baseline,
    /// The group epoch the module's binding took effect at; rebalances
    /// after it are the module's (the bind's own rebalance, which any
    /// change of assignor makes, is not held against it).
    pub bind_epoch: Option<u64>,
    /// The highest epoch of a rebalance counted.
    pub counted_epoch: u64,
    /// The view's counters as last seen, to count what grew since.
    pub seen: Seen,
}

/// The soft counters of the view as the last sample saw them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seen {
    pub failures_total: u64,
    pub shadow_failures: u64,
    pub compared: u64,
    pub live_moved: u64,
}

/// What grew from `before` to `now`: a counter that went down started
/// over (a restart, a takeover, a shadow bound again), and all of it is
/// new.
fn grown(before: u64, now: u64) -> u64 {
    if now >= before { now - before } else { now }
}

fn number(value: &Value) -> u64 {
    value.as_u64().unwrap_or(0)
}

/// Samples the group of `view` for a rollout of `module`, at `now_ms`
/// (the machine's clock), adding to `tally`.
pub fn sample(view: &Value, module: &str, tally: &mut Tally, now_ms: u64) -> HealthSample {
    let bound = view["config"]["assignor"].as_str() == Some(module);
    let shadow = &view["shadow"];
    let shadow_is_module = shadow["binding"]["assignor"].as_str() == Some(module);
    let failures_total = number(&view["assignor_failures"]["total"]);
    let totals = &shadow["totals"];
    let (shadow_failures, compared, live_moved) = (
        number(&totals["shadow_failures"]),
        number(&totals["compared"]),
        number(&totals["live_moved"]),
    );
    let seen = &tally.seen;
    let new_failures = grown(seen.failures_total, failures_total);
    let new_shadow_failures = grown(seen.shadow_failures, shadow_failures);
    let new_compared = grown(seen.compared, compared);
    let new_live_moved = grown(seen.live_moved, live_moved);
    tally.seen = Seen {
        failures_total,
        shadow_failures,
        compared,
        live_moved,
    };
    if bound {
        tally.live_failures += new_failures;
        if tally.bind_epoch.is_none() {
            tally.bind_epoch = module_binding_epoch(view, module);
        }
        count_rebalances(view, tally);
    } else {
        tally.baseline.rebalances += new_compared;
        tally.baseline.moved_total += new_live_moved;
    }
    if shadow_is_module {
        tally.shadow_failures += new_shadow_failures;
    }
    HealthSample {
        live_failures_of_module: tally.live_failures,
        shadow_failures: tally.shadow_failures,
        rebalances: tally.rebalances,
        moved_total: tally.moved_total,
        rebalance_ms_max: tally.rebalance_ms_max,
        bound_to_module: bound,
        shadow_is_module,
        baseline: tally.baseline,
        observed_at_ms: now_ms,
    }
}

/// The epoch of the group's latest binding to `module`.
fn module_binding_epoch(view: &Value, module: &str) -> Option<u64> {
    view["bindings"]
        .as_array()?
        .iter()
        .rev()
        .find(|b| b["module"].as_str() == Some(module))
        .and_then(|b| b["epoch"].as_u64())
}

/// Counts the rebalances after the bind not counted yet, and the
/// longest settled one.
fn count_rebalances(view: &Value, tally: &mut Tally) {
    let Some(bind_epoch) = tally.bind_epoch else {
        return;
    };
    let Some(history) = view["rebalances"].as_array() else {
        return;
    };
    for entry in history {
        let epoch = number(&entry["epoch"]);
        if epoch <= bind_epoch {
            continue;
        }
        if epoch > tally.counted_epoch {
            tally.counted_epoch = epoch;
            tally.rebalances += 1;
            tally.moved_total += number(&entry["moved"]);
        }
        if let Some(settled) = entry["settled_ms"].as_u64() {
            let took = settled.saturating_sub(number(&entry["at_ms"]));
            tally.rebalance_ms_max = tally.rebalance_ms_max.max(took);
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const MODULE: &str = "m@1";

    fn view(assignor: &str, failures: u64, shadow: Value, rebalances: Value) -> Value {
        json!({
            "config": {"assignor": assignor},
            "assignor_failures": {"module": assignor, "total": failures},
            "shadow": shadow,
            "bindings": [{"module": "sticky", "epoch": 1}, {"module": MODULE, "epoch": 5}],
            "rebalances": rebalances,
        })
    }

    fn shadow(failures: u64, compared: u64, live_moved: u64) -> Value {
        json!({
            "binding": {"assignor": MODULE},
            "totals": {"shadow_failures": failures, "compared": compared, "live_moved": live_moved},
        })
    }

    #[test]
    fn the_baseline_grows_until_the_bind_and_shadow_failures_count_once_each() {
        let mut tally = Tally::default();
        let s = sample(
            &view("sticky", 3, shadow(0, 2, 6), json!([])),
            MODULE,
            &mut tally,
            10,
        );
        assert!(!s.bound_to_module && s.shadow_is_module);
        assert_eq!(s.live_failures_of_module, 0, "the old assignor's failures");
        assert_eq!(
            s.baseline,
            Baseline {
                rebalances: 2,
                moved_total: 6
            }
        );
        let s = sample(
            &view("sticky", 3, shadow(1, 3, 8), json!([])),
            MODULE,
            &mut tally,
            20,
        );
        assert_eq!(
            (
                s.shadow_failures,
                s.baseline.rebalances,
                s.baseline.moved_total
            ),
            (1, 3, 8)
        );
        // A restart: the soft counters start over, and what they show is new.
        let s = sample(
            &view("sticky", 0, shadow(0, 1, 4), json!([])),
            MODULE,
            &mut tally,
            30,
        );
        assert_eq!(
            (
                s.shadow_failures,
                s.baseline.rebalances,
                s.baseline.moved_total
            ),
            (1, 4, 12)
        );
        let s = sample(
            &view("sticky", 0, shadow(1, 1, 4), json!([])),
            MODULE,
            &mut tally,
            40,
        );
        assert_eq!(s.shadow_failures, 2);
        assert_eq!(s.observed_at_ms, 40);
    }

    #[test]
    fn failures_and_rebalances_after_the_bind_are_the_modules() {
        let mut tally = Tally::default();
        sample(
            &view("sticky", 4, shadow(0, 1, 2), json!([])),
            MODULE,
            &mut tally,
            1,
        );
        let rebalances = json!([
            {"epoch": 5, "moved": 9, "at_ms": 100, "settled_ms": 900},
            {"epoch": 6, "moved": 2, "at_ms": 1000, "settled_ms": 1300},
            {"epoch": 7, "moved": 1, "at_ms": 2000},
        ]);
        let s = sample(
            &view(MODULE, 6, Value::Null, rebalances.clone()),
            MODULE,
            &mut tally,
            2,
        );
        assert!(s.bound_to_module && !s.shadow_is_module);
        assert_eq!(s.live_failures_of_module, 2);
        assert_eq!(
            (s.rebalances, s.moved_total, s.rebalance_ms_max),
            (2, 3, 300)
        );
        assert_eq!(
            s.baseline,
            Baseline {
                rebalances: 1,
                moved_total: 2
            },
            "frozen at the bind"
        );
        let s = sample(
            &view(MODULE, 6, Value::Null, rebalances),
            MODULE,
            &mut tally,
            3,
        );
        assert_eq!(
            (s.rebalances, s.live_failures_of_module),
            (2, 2),
            "counted once"
        );
    }
}
