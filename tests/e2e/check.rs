//! `assignd check` as an operator runs it before an upload: the real
//! binary on built-in assignors, misbehaving guests built from source and
//! captured input files; its table, its JSON and its exit status.

use crate::common::*;

const EXIT_GUEST_FAILED: i32 = 3;
const EXIT_BAD_INPUT: i32 = 1;

/// Every generated case of one round, as the table and the JSON name them.
const CASES: [&str; 12] = [
    "fresh/small",
    "fresh/racks",
    "fresh/capacities",
    "churn",
    "churn/join-2",
    "churn/leave-1",
    "churn/static-return",
    "skew/subsets",
    "skew/hot-topic",
    "loads/fresh",
    "loads/count-balanced",
    "large",
];

/// The names in the first column of the table's case lines.
fn table_cases(out: &str) -> Vec<String> {
    out.lines()
        .skip(2)
        .take_while(|l| !l.starts_with("median"))
        .map(|l| l.split_whitespace().next().unwrap_or_default().to_owned())
        .collect()
}

fn json_of(output: &std::process::Output) -> serde_json::Value {
    serde_json::from_str(&stdout(output))
        .unwrap_or_else(|e| panic!("--json parses: {e}\n{}", stdout(output)))
}

#[test]
fn sticky_passes_and_its_table_names_every_case() {
    let output = assignd(&["check", "sticky"]);
    let out = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "{out}\n{}", stderr(&output));
    assert_eq!(table_cases(&out), CASES, "{out}");
    assert!(
        out.lines().next().unwrap().starts_with("checking sticky"),
        "{out}"
    );
    let verdict = out.lines().last().unwrap();
    assert!(
        verdict.starts_with("passed: sticky answered all 12 cases"),
        "{out}"
    );
    // The loads cases weigh the loads; the others have none.
    let load_cell = |case: &str| {
        let line = out.lines().find(|l| l.starts_with(case)).unwrap();
        line.split("  ")
            .filter(|c| !c.is_empty())
            .nth(8)
            .unwrap()
            .trim()
            .to_owned()
    };
    assert_eq!(load_cell("fresh/small"), "- / -", "{out}");
    assert_ne!(load_cell("loads/count-balanced"), "- / -", "{out}");
}

#[test]
fn json_against_range_has_the_documented_fields() {
    let output = assignd(&[
        "check",
        "round-robin",
        "--against",
        "range",
        "--large-members",
        "0",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let doc = json_of(&output);
    assert_eq!(doc["module"]["name"], "round-robin");
    assert_eq!(doc["against"]["name"], "range");
    assert_eq!(doc["against"]["source"], "range");
    assert_eq!(doc["seed"], 1);
    assert_eq!(doc["passed"], true);
    assert_eq!(doc["failed_cases"], serde_json::json!([]));
    let cases = doc["cases"].as_array().unwrap();
    let names: Vec<&str> = cases.iter().map(|c| c["case"].as_str().unwrap()).collect();
    assert_eq!(names, CASES[..11], "no large case with --large-members 0");
    let side_fields = [
        "result",
        "code",
        "reason",
        "call_ms",
        "fuel",
        "count_spread",
        "count_max_over_mean",
        "load_max_over_mean",
        "tasks_moved",
    ];
    for case in cases {
        for key in ["tasks", "members", "loads"] {
            assert!(case.get(key).is_some(), "{key} in {case}");
        }
        for side in ["module", "against"] {
            for field in side_fields {
                assert!(case[side].get(field).is_some(), "{side}.{field} in {case}");
            }
            assert_eq!(case[side]["result"], "ok", "{case}");
        }
    }
    // A fresh group of 3 members and 24 tasks: 8 each, nothing moved.
    assert_eq!(cases[0]["module"]["count_spread"], 0);
    assert_eq!(cases[0]["module"]["tasks_moved"], 0);
    let total = &doc["total"]["module"];
    for field in [
        "calls",
        "ok",
        "invalid",
        "failed",
        "skipped",
        "call_ms",
        "fuel",
        "count_spread_max",
        "count_max_over_mean_max",
        "load_max_over_mean_max",
        "tasks_moved",
    ] {
        assert!(total.get(field).is_some(), "total.module.{field}");
    }
    assert_eq!(total["calls"], 11);
    assert!(total["fuel"]["median"].as_f64().unwrap() > 0.0);
}

#[test]
fn failing_guests_exit_3_and_name_their_failure_codes() {
    // The spinning guest with little fuel: its failure is the same
    // whatever the machine's speed.
    let little_fuel = ["--fuel-base", "1000000", "--fuel-per-item", "0"];
    for (guest, code, extra) in [
        ("test-guest-panicking", "panicked", &[][..]),
        ("test-guest-invalid-output", "invalid_assignment", &[][..]),
        ("test-guest-spin-forever", "out_of_fuel", &little_fuel[..]),
    ] {
        let module = bad_guest(guest);
        let mut args = vec!["check", module.to_str().unwrap(), "--large-members", "0"];
        args.extend(extra);
        let output = assignd(&args);
        let out = stdout(&output);
        assert_eq!(
            output.status.code(),
            Some(EXIT_GUEST_FAILED),
            "{guest}: {out}"
        );
        let small = out.lines().find(|l| l.starts_with("fresh/small")).unwrap();
        assert!(small.contains(&format!("{code} / ok")), "{guest}: {small}");
        assert!(out.contains("failures:\n  fresh/small (module): "), "{out}");
        assert!(out.lines().last().unwrap().starts_with("FAILED: "), "{out}");
        // Churn steps after a start without an answer are skipped.
        let step = out.lines().find(|l| l.starts_with("churn/join-2")).unwrap();
        assert!(step.contains("skipped / ok"), "{guest}: {step}");
        let err = stderr(&output);
        let error = err.lines().find(|l| l.starts_with("error: ")).unwrap();
        assert!(error.contains("fresh/small"), "{guest}: {err}");
    }
}

#[test]
fn an_input_file_is_a_case_of_its_own() {
    let input = example_input();
    let output = assignd(&[
        "check",
        "learner-aware",
        "--cases",
        "0",
        "--input",
        input.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let doc = json_of(&output);
    let cases = doc["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 1, "{doc}");
    assert_eq!(cases[0]["case"], input.display().to_string());
    assert_eq!(cases[0]["members"], 3);
    assert_eq!(cases[0]["module"]["result"], "ok");
}

#[test]
fn a_missing_module_or_bad_input_json_is_one_error_line_and_exit_1() {
    let dir = scratch("check-bad-input");
    let missing = dir.join("missing.wasm");
    let output = assignd(&["check", missing.to_str().unwrap()]);
    assert_one_error_line(&output, EXIT_BAD_INPUT, "neither a built-in assignor");
    let output = assignd(&["check", "sticky", "--against", missing.to_str().unwrap()]);
    assert_one_error_line(&output, EXIT_BAD_INPUT, "--against");
    let bad = write(&dir, "bad.json", "{\"topics\": {\"t\": 2}, \"members\": [");
    let output = assignd(&["check", "sticky", "--input", bad.to_str().unwrap()]);
    assert_one_error_line(&output, EXIT_BAD_INPUT, "bad.json");
    let output = assignd(&["check", "sticky", "--param", "no-equals-sign"]);
    assert_one_error_line(&output, EXIT_BAD_INPUT, "no-equals-sign");
    let not_wasm = write(&dir, "not.wasm", "hello");
    let output = assignd(&["check", not_wasm.to_str().unwrap()]);
    assert_one_error_line(&output, EXIT_BAD_INPUT, "not a WebAssembly component");
}
