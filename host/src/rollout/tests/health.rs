//! The verdict's thresholds, exactly: at the limit a rule holds, one
//! over it fires.

use super::super::*;

fn sample(rebalances: u64, moved_total: u64) -> HealthSample {
    HealthSample {
        rebalances,
        moved_total,
        bound_to_module: true,
        shadow_is_module: true,
        ..Default::default()
    }
}

fn rule(text: &str) -> Vec<AbortRule> {
    vec![text.parse().unwrap()]
}

fn fires(rules: &[AbortRule], baseline: Baseline, sample: &HealthSample) -> bool {
    matches!(judge(rules, &baseline, sample), Verdict::Unhealthy { .. })
}

#[test]
fn failures_fire_on_the_first_live_or_shadow_failure() {
    let rules = rule("failures");
    let base = Baseline::default();
    assert_eq!(judge(&rules, &base, &sample(0, 0)), Verdict::Healthy);
    let shadow = HealthSample {
        shadow_failures: 1,
        bound_to_module: false,
        ..sample(0, 0)
    };
    assert_eq!(
        judge(&rules, &base, &shadow),
        Verdict::Unhealthy {
            rule: AbortRule::Failures,
            detail: "1 failures of the module (0 live, 1 shadow)".into()
        }
    );
    let live = HealthSample {
        live_failures_of_module: 2,
        ..sample(0, 0)
    };
    assert!(fires(&rules, base, &live));
}

#[test]
fn moves_over_a_count_compare_means_exactly() {
    // Baseline 10 moves over 4 rebalances: 2.5 a rebalance; limit + 1.5
    // is 4 a rebalance.
    let base = Baseline {
        rebalances: 4,
        moved_total: 10,
    };
    let rules = rule("moves>1.5");
    assert!(!fires(&rules, base, &sample(3, 12)), "4.0 is not over 4");
    assert!(fires(&rules, base, &sample(3, 13)), "4.33 is over 4");
    assert!(!fires(&rules, base, &sample(1000, 4000)));
    assert!(fires(&rules, base, &sample(1000, 4001)));
    let Verdict::Unhealthy { detail, .. } = judge(&rules, &base, &sample(3, 13)) else {
        panic!("unhealthy")
    };
    assert_eq!(
        detail,
        "4.33 tasks moved per rebalance over 3 rebalances since binding, baseline 2.50 over 4 (limit: baseline + 1.5)"
    );
}

#[test]
fn moves_over_a_ratio_compare_means_exactly() {
    let base = Baseline {
        rebalances: 3,
        moved_total: 6,
    };
    let rules = rule("moves>1.5x");
    assert!(!fires(&rules, base, &sample(2, 6)), "3 is 1.5 × 2");
    assert!(fires(&rules, base, &sample(2, 7)));
    // Without a baseline rebalance, any move is over any ratio.
    assert!(fires(&rules, Baseline::default(), &sample(5, 1)));
    assert!(!fires(&rules, Baseline::default(), &sample(5, 0)));
}

#[test]
fn moves_and_rebalance_rules_judge_only_the_bound_module() {
    let rules = vec![
        "moves>0".parse().unwrap(),
        "rebalance_ms>100".parse().unwrap(),
    ];
    let base = Baseline::default();
    let unbound = HealthSample {
        bound_to_module: false,
        rebalance_ms_max: 500,
        ..sample(3, 30)
    };
    assert_eq!(judge(&rules, &base, &unbound), Verdict::Healthy);
    // No rebalance since binding: no mean to judge.
    assert_eq!(judge(&rules, &base, &sample(0, 0)), Verdict::Healthy);
    let slow = HealthSample {
        rebalance_ms_max: 101,
        ..sample(0, 0)
    };
    assert_eq!(
        judge(&rules, &base, &slow),
        Verdict::Unhealthy {
            rule: AbortRule::RebalanceMsAbove { ms: 100 },
            detail: "a rebalance since binding took 101 ms (limit: 100 ms)".into()
        }
    );
    let at_limit = HealthSample {
        rebalance_ms_max: 100,
        ..sample(0, 0)
    };
    assert_eq!(judge(&rules, &base, &at_limit), Verdict::Healthy);
}

#[test]
fn the_first_rule_that_fires_gives_the_verdict() {
    let rules: Vec<AbortRule> = vec![
        "rebalance_ms>10".parse().unwrap(),
        "failures".parse().unwrap(),
    ];
    let both = HealthSample {
        live_failures_of_module: 1,
        rebalance_ms_max: 11,
        ..sample(1, 1)
    };
    let Verdict::Unhealthy { rule, .. } = judge(&rules, &Baseline::default(), &both) else {
        panic!("unhealthy")
    };
    assert_eq!(rule, AbortRule::RebalanceMsAbove { ms: 10 });
}

#[test]
fn huge_counters_do_not_overflow() {
    let base = Baseline {
        rebalances: u64::MAX,
        moved_total: u64::MAX,
    };
    let rules = rule("moves>1000000");
    assert!(!fires(&rules, base, &sample(u64::MAX, u64::MAX)));
    assert!(fires(&rule("moves>0"), base, &sample(1, 2)));
    assert!(fires(
        &rule("moves>1000x"),
        Baseline {
            rebalances: u64::MAX,
            moved_total: 1
        },
        &sample(1, 1)
    ));
    assert!(!fires(
        &rule("moves>999999.999"),
        base,
        &sample(u64::MAX, u64::MAX)
    ));
}
