//! The spec's syntax: each field parsed, defaulted and refused with its
//! field named.

use std::collections::BTreeMap;

use super::super::*;

fn request() -> RolloutRequest {
    RolloutRequest {
        id: "r1".into(),
        module: "payments-v2".into(),
        groups: "prefix:orders-".into(),
        ..Default::default()
    }
}

fn refused(request: &RolloutRequest) -> SpecError {
    RolloutSpec::parse(request).unwrap_err()
}

#[test]
fn the_smallest_request_takes_every_default() {
    let spec = RolloutSpec::parse(&request()).unwrap();
    assert_eq!(spec.selector, Selector::Prefix("orders-".into()));
    assert_eq!(
        spec.steps,
        [
            Step::Count(1),
            Step::Percent(10),
            Step::Percent(50),
            Step::Percent(100)
        ]
    );
    assert_eq!(spec.every_ms, 300_000);
    assert_eq!(spec.shadow_ms, 300_000);
    assert_eq!(spec.abort_on, [AbortRule::Failures]);
}

#[test]
fn every_field_parses_as_the_cli_spells_it() {
    let spec = RolloutSpec::parse(&RolloutRequest {
        params: BTreeMap::from([("max_moves".into(), "3".into())]),
        groups: "label:team=payments".into(),
        steps: Some("2,25%,100%".into()),
        every: Some("30s".into()),
        shadow: Some("1h".into()),
        abort_on: vec![
            "failures".into(),
            "moves>2.5".into(),
            "moves>1.5x".into(),
            "rebalance_ms>30000".into(),
        ],
        ..request()
    })
    .unwrap();
    assert_eq!(
        spec.selector,
        Selector::Label {
            key: "team".into(),
            value: "payments".into()
        }
    );
    assert_eq!(
        spec.steps,
        [Step::Count(2), Step::Percent(25), Step::Percent(100)]
    );
    assert_eq!((spec.every_ms, spec.shadow_ms), (30_000, 3_600_000));
    assert_eq!(
        spec.abort_on,
        [
            AbortRule::Failures,
            AbortRule::MovesAbove {
                excess_milli: 2_500
            },
            AbortRule::MovesRatio { ratio_milli: 1_500 },
            AbortRule::RebalanceMsAbove { ms: 30_000 },
        ]
    );
    // Serialized, every part reads as the CLI spells it.
    let json = serde_json::to_value(&spec).unwrap();
    assert_eq!(json["selector"], "label:team=payments");
    assert_eq!(json["steps"], serde_json::json!(["2", "25%", "100%"]));
    assert_eq!(
        json["abort_on"],
        serde_json::json!(["failures", "moves>2.5", "moves>1.5x", "rebalance_ms>30000"])
    );
    let back: RolloutSpec = serde_json::from_value(json).unwrap();
    assert_eq!(back, spec);
}

#[test]
fn each_bad_field_is_refused_by_name() {
    let cases: Vec<(RolloutRequest, &str, &str)> = vec![
        (
            RolloutRequest {
                id: "".into(),
                ..request()
            },
            "id",
            "1 to 64 bytes",
        ),
        (
            RolloutRequest {
                id: "a b".into(),
                ..request()
            },
            "id",
            "[A-Za-z0-9._-]",
        ),
        (
            RolloutRequest {
                module: "".into(),
                ..request()
            },
            "module",
            "uploaded",
        ),
        (
            RolloutRequest {
                params: BTreeMap::from([("".into(), "v".into())]),
                ..request()
            },
            "param",
            "keys must be 1 to 255 bytes",
        ),
        (
            RolloutRequest {
                params: (0..63).map(|i| (format!("k{i}"), "v".into())).collect(),
                ..request()
            },
            "param",
            "more than 62 params",
        ),
        (
            RolloutRequest {
                groups: "orders".into(),
                ..request()
            },
            "groups",
            "none of prefix:P",
        ),
        (
            RolloutRequest {
                groups: "prefix:".into(),
                ..request()
            },
            "groups",
            "must not be empty",
        ),
        (
            RolloutRequest {
                groups: "list:a,,b".into(),
                ..request()
            },
            "groups",
            "1 to 255 bytes",
        ),
        (
            RolloutRequest {
                groups: "list:a,a".into(),
                ..request()
            },
            "groups",
            "named twice",
        ),
        (
            RolloutRequest {
                groups: "label:team".into(),
                ..request()
            },
            "groups",
            "not KEY=VALUE",
        ),
        (
            RolloutRequest {
                steps: Some("".into()),
                ..request()
            },
            "steps",
            "neither a count",
        ),
        (
            RolloutRequest {
                steps: Some("0,100%".into()),
                ..request()
            },
            "steps",
            "neither a count",
        ),
        (
            RolloutRequest {
                steps: Some("101%".into()),
                ..request()
            },
            "steps",
            "1% to 100%",
        ),
        (
            RolloutRequest {
                steps: Some("10%,10%,100%".into()),
                ..request()
            },
            "steps",
            "shares must grow: 10% after 10%",
        ),
        (
            RolloutRequest {
                steps: Some("5,2".into()),
                ..request()
            },
            "steps",
            "counts must grow: 2 after 5",
        ),
        (
            RolloutRequest {
                steps: Some("100%,5".into()),
                ..request()
            },
            "steps",
            "nothing may follow 100%",
        ),
        (
            RolloutRequest {
                steps: Some("1,50%".into()),
                ..request()
            },
            "steps",
            "last step must take every group",
        ),
        (
            RolloutRequest {
                steps: Some(
                    (1..=21)
                        .map(|i| i.to_string())
                        .collect::<Vec<_>>()
                        .join(","),
                ),
                ..request()
            },
            "steps",
            "at most 20 steps, got 21",
        ),
        (
            RolloutRequest {
                every: Some("5".into()),
                ..request()
            },
            "every",
            "not a duration",
        ),
        (
            RolloutRequest {
                every: Some("5d".into()),
                ..request()
            },
            "every",
            "not a duration",
        ),
        (
            RolloutRequest {
                every: Some("999ms".into()),
                ..request()
            },
            "every",
            "1s to 24h",
        ),
        (
            RolloutRequest {
                every: Some("25h".into()),
                ..request()
            },
            "every",
            "1s to 24h",
        ),
        (
            RolloutRequest {
                shadow: Some("0s".into()),
                ..request()
            },
            "shadow",
            "1s to 24h",
        ),
        (
            RolloutRequest {
                abort_on: vec!["crashes".into()],
                ..request()
            },
            "abort-on",
            "none of failures",
        ),
        (
            RolloutRequest {
                abort_on: vec!["moves>-1".into()],
                ..request()
            },
            "abort-on",
            "a count of tasks",
        ),
        (
            RolloutRequest {
                abort_on: vec!["moves>1.2345".into()],
                ..request()
            },
            "abort-on",
            "at most 3 decimals",
        ),
        (
            RolloutRequest {
                abort_on: vec!["moves>0.5x".into()],
                ..request()
            },
            "abort-on",
            "1x to 1000x",
        ),
        (
            RolloutRequest {
                abort_on: vec!["rebalance_ms>1s".into()],
                ..request()
            },
            "abort-on",
            "whole number of ms",
        ),
        (
            RolloutRequest {
                abort_on: vec!["failures".into(); 9],
                ..request()
            },
            "abort-on",
            "at most 8 rules",
        ),
    ];
    for (request, field, needle) in cases {
        let error = refused(&request);
        assert_eq!(error.field, field, "{request:?}: {error}");
        assert!(error.message.contains(needle), "{request:?}: {error}");
    }
}

#[test]
fn durations_take_the_four_units_and_the_period_limits_hold() {
    for (text, ms) in [
        ("250ms", 250),
        ("30s", 30_000),
        ("5m", 300_000),
        ("1h", 3_600_000),
    ] {
        assert_eq!(parse_duration_ms(text), Ok(ms));
    }
    for text in ["", "m", "1.5s", "-1s", "1 s", "99999999999999999999h"] {
        assert!(parse_duration_ms(text).is_err(), "{text:?}");
    }
    let with_every = |every: &str| RolloutRequest {
        every: Some(every.into()),
        ..request()
    };
    assert_eq!(
        RolloutSpec::parse(&with_every("1s")).unwrap().every_ms,
        EVERY_MS_MIN
    );
    assert_eq!(
        RolloutSpec::parse(&with_every("24h")).unwrap().every_ms,
        EVERY_MS_MAX
    );
    assert_eq!(
        RolloutSpec::parse(&with_every("1s")).unwrap().shadow_ms,
        1_000
    );
}

#[test]
fn selectors_match_by_prefix_list_or_label() {
    let labels = BTreeMap::from([("team".to_owned(), "payments".to_owned())]);
    let none = BTreeMap::new();
    let prefix: Selector = "prefix:orders-".parse().unwrap();
    assert!(prefix.matches("orders-eu", &none));
    assert!(!prefix.matches("order-eu", &none));
    let list: Selector = "list:a,c".parse().unwrap();
    assert!(list.matches("a", &none) && list.matches("c", &none));
    assert!(!list.matches("b", &labels));
    let label: Selector = "label:team=payments".parse().unwrap();
    assert!(label.matches("x", &labels));
    assert!(!label.matches("x", &none));
    let other: Selector = "label:team=search".parse().unwrap();
    assert!(!other.matches("x", &labels));
    for text in [
        "prefix:orders-",
        "list:a,c",
        "label:team=payments",
        "label:k=",
    ] {
        let selector: Selector = text.parse().unwrap();
        assert_eq!(selector.to_string(), text);
    }
}

#[test]
fn steps_resolve_shares_rounding_up_and_merge_steps_that_add_nothing() {
    let steps = parse_steps(STEPS_DEFAULT).unwrap();
    assert_eq!(resolve_steps(&steps, 100), Ok(vec![1, 10, 50, 100]));
    assert_eq!(resolve_steps(&steps, 15), Ok(vec![1, 2, 8, 15]));
    // 10% of 5 is 1, as is the step before: it adds nothing, is dropped.
    assert_eq!(resolve_steps(&steps, 5), Ok(vec![1, 3, 5]));
    assert_eq!(resolve_steps(&steps, 1), Ok(vec![1]));
    assert_eq!(Step::Percent(1).resolve(1_000), 10);
    assert_eq!(Step::Percent(1).resolve(3), 1);
    assert_eq!(Step::Percent(34).resolve(3), 2);

    let counts = parse_steps("1,3,5").unwrap();
    assert_eq!(resolve_steps(&counts, 5), Ok(vec![1, 3, 5]));
    let short = resolve_steps(&counts, 6).unwrap_err();
    assert!(short.message.contains("every one of the 6"), "{short}");
    let over = resolve_steps(&counts, 4).unwrap_err();
    assert!(
        over.message
            .contains("step 5 takes 5 groups, but the selector matched 4"),
        "{over}"
    );
    // 5 groups, then 10% of 20 = 2: fewer than before.
    let shrinking = resolve_steps(&parse_steps("5,10%,100%").unwrap(), 20).unwrap_err();
    assert!(
        shrinking.message.contains("fewer than the 5 before it"),
        "{shrinking}"
    );
}

#[test]
fn abort_rules_print_as_they_parse() {
    for text in [
        "failures",
        "moves>0",
        "moves>2",
        "moves>0.25",
        "moves>1x",
        "moves>1.5x",
        "rebalance_ms>0",
    ] {
        let rule: AbortRule = text.parse().unwrap();
        assert_eq!(rule.to_string(), text);
    }
    let rule: AbortRule = "moves>1.50".parse().unwrap();
    assert_eq!(
        rule,
        AbortRule::MovesAbove {
            excess_milli: 1_500
        }
    );
    assert_eq!(rule.to_string(), "moves>1.5");
    assert!("moves>1.".parse::<AbortRule>().is_err());
    assert!("moves>.5".parse::<AbortRule>().is_err());
}

#[test]
fn a_param_is_split_at_its_first_equals_sign() {
    assert_eq!(parse_param("a=b=c"), Ok(("a".into(), "b=c".into())));
    assert_eq!(parse_param("a="), Ok(("a".into(), "".into())));
    assert_eq!(parse_param("=b").unwrap_err().field, "param");
    assert_eq!(parse_param("ab").unwrap_err().field, "param");
}
