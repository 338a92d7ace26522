//! `assignd run` as a user runs it: the real binary on JSON files, good and
//! bad, with built-in assignors and misbehaving guests built from source.
//! Every bad input must give one clear error line and a non-zero exit.

use crate::common::*;
use assignd_guest_sdk::json::{parse_assignment, parse_input};
use assignd_guest_sdk::validate::{InputLimits, check_assignment};

const EXIT_BAD_INPUT: i32 = 1;
const EXIT_GUEST_FAILED: i32 = 3;

fn small_input(dir: &std::path::Path) -> std::path::PathBuf {
    write(
        dir,
        "input.json",
        r#"{"topics": {"orders": 6, "payments": 2},
            "members": [
              {"id": "a", "topics": ["orders"]},
              {"id": "b", "topics": ["orders", "payments"]}
            ]}"#,
    )
}

#[test]
fn sticky_prints_a_valid_balanced_assignment_with_stats() {
    let output = assignd(&[
        "run",
        "--module",
        "sticky",
        "--input",
        example_input().to_str().unwrap(),
        "--stats",
    ]);
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    let text = std::fs::read_to_string(example_input()).unwrap();
    let input = parse_input(&text, &InputLimits::default()).unwrap();
    let answer = parse_assignment(&input, &stdout(&output)).unwrap();
    check_assignment(&input, &answer, 1 << 20).unwrap();
    let counts = answer.active_counts(input.members.len());
    let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    assert!(max - min <= 1, "balanced within one task: {counts:?}");
    let doc: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    let ids: Vec<&String> = doc.as_object().unwrap().keys().collect();
    assert_eq!(
        ids,
        ["m1", "m2", "m3"],
        "every member present, in input order"
    );

    let stats = stderr(&output);
    let fields: Vec<&str> = stats
        .trim()
        .split(' ')
        .map(|kv| kv.split_once('=').expect("key=value").0)
        .collect();
    assert_eq!(
        fields,
        [
            "compile_ms",
            "instantiate_ms",
            "call_ms",
            "validate_ms",
            "fuel"
        ]
    );
    let fuel: u64 = stats
        .trim()
        .rsplit_once("fuel=")
        .unwrap()
        .1
        .parse()
        .unwrap();
    assert!(fuel > 0, "the call burned fuel: {stats}");
}

#[test]
fn every_builtin_answers_validly_and_params_override_the_input() {
    for module in ["range", "round-robin", "sticky", "learner-aware"] {
        let output = assignd(&[
            "run",
            "--module",
            module,
            "--input",
            example_input().to_str().unwrap(),
            "--param",
            "num_standby=0",
        ]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{module}: {}",
            stderr(&output)
        );
        let text = std::fs::read_to_string(example_input()).unwrap();
        let input = parse_input(&text, &InputLimits::default()).unwrap();
        let answer = parse_assignment(&input, &stdout(&output)).unwrap();
        check_assignment(&input, &answer, 1 << 20).unwrap();
        assert!(
            answer.standbys.is_empty(),
            "{module}: num_standby=0 from --param wins"
        );
    }
}

#[test]
fn a_module_file_is_accepted_and_the_compiled_artifact_is_cached_on_disk() {
    let dir = scratch("module-file");
    let cache = dir.join("cache");
    let module = bad_guest("test-guest-invalid-output");
    let input = small_input(&dir);
    for _ in 0..2 {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_assignd"))
            .args(["run", "--module", module.to_str().unwrap(), "--input"])
            .arg(&input)
            .args(["--cache-dir"])
            .arg(&cache)
            .output()
            .unwrap();
        // The guest answers invalidly on purpose; what matters here is that
        // the file loaded, compiled and ran.
        assert_one_error_line(&output, EXIT_GUEST_FAILED, "invalid assignment");
    }
    let artifacts: Vec<_> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(artifacts.len(), 1, "one cached artifact: {artifacts:?}");
    assert!(artifacts[0].ends_with(".cwasm"));
}

#[test]
fn bad_modules_give_one_clear_line() {
    let dir = scratch("bad-modules");
    let input = small_input(&dir);
    let input = input.to_str().unwrap();
    let cases = [
        (
            write(&dir, "text.wasm", "definitely not wasm"),
            "not a WebAssembly component",
        ),
        (
            write(&dir, "core.wasm", wat::parse_str("(module)").unwrap()),
            "core WebAssembly module, not a component",
        ),
        (
            write(&dir, "other.wasm", wat::parse_str(OTHER_WORLD_WAT).unwrap()),
            "does not export `assignd:assignor/assignor@0.2.0` or `assignd:assignor/assignor@0.1.0` (it exports: hello)",
        ),
        (
            write(&dir, "wasi.wasm", wat::parse_str(WASI_IMPORT_WAT).unwrap()),
            "imports `wasi:cli/environment@0.2.0`",
        ),
    ];
    for (module, needle) in cases {
        let output = assignd(&[
            "run",
            "--module",
            module.to_str().unwrap(),
            "--input",
            input,
        ]);
        assert_one_error_line(&output, EXIT_BAD_INPUT, needle);
    }
    let output = assignd(&["run", "--module", "no-such-assignor", "--input", input]);
    assert_one_error_line(&output, EXIT_BAD_INPUT, "neither a built-in assignor");
}

#[test]
fn misbehaving_guests_are_stopped_with_a_clear_line() {
    let dir = scratch("bad-guests");
    let input = small_input(&dir);
    let input = input.to_str().unwrap();
    let guest = |name: &str| bad_guest(name).to_str().unwrap().to_owned();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                guest("test-guest-spin-forever"),
                "--fuel-base".into(),
                "50000000".into(),
            ],
            "ran out of fuel",
        ),
        (
            vec![
                guest("test-guest-spin-forever"),
                "--fuel-base".into(),
                "1000000000000000".into(),
                "--time-limit-ms".into(),
                "300".into(),
            ],
            "ran longer than its time limit of 300 ms",
        ),
        (
            vec![
                guest("test-guest-memory-hog"),
                "--memory-max-mib".into(),
                "64".into(),
            ],
            "past its limit of 67108864 bytes",
        ),
        (
            vec![guest("test-guest-panicking")],
            "panicked: panicked at tests/guests/panicking/src/lib.rs",
        ),
        (
            vec![guest("test-guest-invalid-output")],
            "invalid assignment: task payments-0 is active on member \"a\", which does not subscribe to \"payments\"",
        ),
        (
            vec![
                guest("test-guest-invalid-output"),
                "--param".into(),
                "mode=unassigned".into(),
            ],
            "has no active owner",
        ),
        (
            vec![
                guest("test-guest-invalid-output"),
                "--param".into(),
                "mode=wrong-length".into(),
            ],
            "active owners list has 7 entries, but the input has 8 tasks",
        ),
        (
            vec![
                guest("test-guest-invalid-output"),
                "--param".into(),
                "mode=unknown-member".into(),
            ],
            "names member index 2, which is not in the input",
        ),
        (
            vec![
                guest("test-guest-invalid-output"),
                "--param".into(),
                "mode=learner-on-owner".into(),
            ],
            "which is also its active owner",
        ),
    ];
    for (module_args, needle) in cases {
        let mut args = vec!["run", "--input", input, "--module"];
        args.extend(module_args.iter().map(String::as_str));
        let output = assignd(&args);
        assert_one_error_line(&output, EXIT_GUEST_FAILED, needle);
    }
}

#[test]
fn bad_input_documents_give_one_clear_line() {
    let dir = scratch("bad-inputs");
    let cases = [
        (
            r#"{"topics": {"orders": 2}, "members": [{"id": "a", "topics": ["orders"], "active": [["orders", -1]]}]}"#,
            "member \"a\": active names partition -1 of \"orders\", which is negative",
        ),
        (
            r#"{"topics": {"orders": -3}, "members": []}"#,
            "topic \"orders\": partition count -3 is negative",
        ),
        (
            r#"{"topics": {"orders": 2}, "members": [{"id": "a", "topics": ["orders"]}, {"id": "a", "topics": ["orders"]}]}"#,
            "member id \"a\" appears twice",
        ),
        (
            r#"{"topics": {"orders": 2}, "members": [{"id": "a", "topics": ["orders"], "active": [["orders", 0]]}, {"id": "b", "topics": ["orders"], "active": [["orders", 0]]}]}"#,
            "task orders-0 is active on two members: \"a\" and \"b\"",
        ),
        (
            r#"{"topics": {"orders": 2}, "members": [{"id": "a", "topics": ["orders"], "colour": "red"}]}"#,
            "unknown field `colour`",
        ),
        (
            r#"{"topics": {"orders": 2}, "members": [{"id": "a", "topics": ["orders"]}]"#,
            "EOF while parsing",
        ),
    ];
    for (i, (doc, needle)) in cases.into_iter().enumerate() {
        let input = write(&dir, &format!("input-{i}.json"), doc);
        let output = assignd(&[
            "run",
            "--module",
            "sticky",
            "--input",
            input.to_str().unwrap(),
        ]);
        assert_one_error_line(&output, EXIT_BAD_INPUT, needle);
    }
    let output = assignd(&["run", "--module", "sticky", "--input", "/no/such/file.json"]);
    assert_one_error_line(
        &output,
        EXIT_BAD_INPUT,
        "cannot read input /no/such/file.json",
    );
    let input = small_input(&dir);
    let output = assignd(&[
        "run",
        "--module",
        "learner-aware",
        "--input",
        input.to_str().unwrap(),
        "--param",
        "max_learners=lots",
    ]);
    assert_one_error_line(&output, EXIT_GUEST_FAILED, "max_learners");
    let output = assignd(&[
        "run",
        "--module",
        "sticky",
        "--input",
        input.to_str().unwrap(),
        "--param",
        "novalue",
    ]);
    assert_one_error_line(&output, EXIT_BAD_INPUT, "not of the form KEY=VALUE");
}

#[test]
fn info_describes_a_builtin() {
    let output = assignd(&["info", "--module", "learner-aware"]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(doc["name"], "learner-aware");
    assert_eq!(doc["capabilities"]["learners"], true);
    let params: Vec<&str> = doc["params"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(params.contains(&"acceptable_recovery_lag"), "{params:?}");
    assert_eq!(doc["id"].as_str().unwrap().len(), 64, "sha256 hex id");
}

/// `assignd info … | head` and the like: a stdout whose reader is gone
/// ends the output quietly, exit 0, no panic.
#[test]
fn a_closed_stdout_is_not_a_panic() {
    for args in [
        &["info", "--module", "learner-aware"][..],
        &[
            "run",
            "--module",
            "sticky",
            "--input",
            example_input().to_str().unwrap(),
        ][..],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_assignd"))
            .args(args)
            .env("ASSIGND_CACHE_DIR", scratch("cache"))
            .stdout(writer)
            .output()
            .unwrap();
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(!stderr(&output).contains("panicked"), "{}", stderr(&output));
    }
}

/// Kafka's own `AbstractStickyAssignorTest` cases about
/// topics that do not exist, through `assignd run`: a subscription to a
/// topic not in `topics` is a wish that gives nothing, and tasks in
/// `active` of a topic (or partition) that no longer exists are dropped.
/// Each case: the input, then the number of active tasks per member, and
/// tasks that must stay where they were.
#[test]
fn kafkas_sticky_cases_with_missing_topics_give_kafkas_answers() {
    let dir = scratch("kafka-missing-topics");
    // Name, input, active tasks per member, tasks that stay (member, topic,
    // partition).
    type Case<'a> = (&'a str, &'a str, &'a [usize], &'a [(&'a str, &'a str, u64)]);
    let cases: [Case; 5] = [
        (
            "testOneConsumerNonexistentTopic",
            r#"{"topics": {}, "members": [{"id": "consumer", "topics": ["topic"]}]}"#,
            &[0],
            &[],
        ),
        (
            "testAssignmentUpdatedForDeletedTopic",
            r#"{"topics": {"topic01": 1, "topic03": 100},
                "members": [{"id": "consumer", "topics": ["topic01", "topic02", "topic03"]}]}"#,
            &[101],
            &[],
        ),
        (
            "testNoExceptionThrownWhenOnlySubscribedTopicDeleted",
            r#"{"topics": {}, "members": [{"id": "consumer01", "topics": ["topic01"],
                "active": [["topic01", 0], ["topic01", 1], ["topic01", 2]]}]}"#,
            &[0],
            &[],
        ),
        (
            "owned partitions of a deleted topic beside a kept one (sticky)",
            r#"{"topics": {"t1": 2},
                "members": [
                  {"id": "c1", "topics": ["t1", "t2"], "active": [["t1", 0], ["t2", 0], ["t2", 1]]},
                  {"id": "c2", "topics": ["t1", "t2"], "active": [["t1", 1], ["t2", 2]]}
                ]}"#,
            &[1, 1],
            &[("c1", "t1", 0), ("c2", "t1", 1)],
        ),
        (
            "owned partitions past a topic's (shrunk) partition count",
            r#"{"topics": {"t1": 2},
                "members": [
                  {"id": "c1", "topics": ["t1"], "active": [["t1", 0], ["t1", 2], ["t1", 3]]},
                  {"id": "c2", "topics": ["t1"], "active": [["t1", 1], ["t1", 4]]}
                ]}"#,
            &[1, 1],
            &[("c1", "t1", 0), ("c2", "t1", 1)],
        ),
    ];
    for (i, (case, doc, counts, kept)) in cases.into_iter().enumerate() {
        let path = write(&dir, &format!("case-{i}.json"), doc);
        let output = assignd(&[
            "run",
            "--module",
            "sticky",
            "--input",
            path.to_str().unwrap(),
        ]);
        assert_eq!(
            output.status.code(),
            Some(0),
            "{case}: stderr: {}",
            stderr(&output)
        );
        let answer: serde_json::Value = serde_json::from_str(&stdout(&output)).unwrap();
        let ids: Vec<&String> = answer.as_object().unwrap().keys().collect();
        assert_eq!(
            ids.len(),
            counts.len(),
            "{case}: every member present: {answer}"
        );
        for (id, &count) in ids.iter().zip(counts) {
            let active = tasks(&answer[id.as_str()]["active"]);
            assert_eq!(active.len(), count, "{case}: {id}: {answer}");
        }
        for &(id, topic, partition) in kept {
            assert!(
                tasks(&answer[id]["active"]).contains(&(topic.to_owned(), partition)),
                "{case}: {id} keeps {topic}-{partition}: {answer}"
            );
        }
    }
}

/// Compiling is bounded (invariant 7): a crafted component that costs
/// Cranelift many seconds is stopped at the compile's time limit, and one
/// that needs more memory than the compiler may use is refused, each with
/// one line naming the limit (and the allocation that failed); an honest guest compiles under the default
/// bounds.
#[test]
fn compiling_a_component_is_bounded_in_time_and_memory() {
    let dir = scratch("cli-run-compile-bounds");
    let input = small_input(&dir);
    let input = input.to_str().unwrap();
    let slow = write(&dir, "slow.wasm", slow_to_compile_component());
    let output = assignd(&[
        "run",
        "--module",
        slow.to_str().unwrap(),
        "--input",
        input,
        "--compile-time-base-ms",
        "1000",
        "--compile-time-per-mib-ms",
        "0",
    ]);
    assert_one_error_line(
        &output,
        EXIT_BAD_INPUT,
        "compiling the component took longer than its limit of 1000 ms",
    );
    let honest = bad_guest("test-guest-spin-when-told");
    let honest = honest.to_str().unwrap();
    let output = assignd(&[
        "run",
        "--module",
        honest,
        "--input",
        input,
        "--compile-memory-max-mib",
        "1",
    ]);
    assert_one_error_line(
        &output,
        EXIT_BAD_INPUT,
        "compiling the component needed more than its memory limit of 1048576 bytes",
    );
    // The line quotes the child's failed allocation, not Rust's hint
    // about backtraces that follows it on the child's stderr.
    let line = stderr(&output);
    let quoted = line
        .trim_end()
        .strip_suffix(" bytes failed)")
        .and_then(|head| head.rsplit_once("(memory allocation of "))
        .map(|(_, bytes)| bytes);
    assert!(
        quoted.is_some_and(|bytes| bytes.parse::<u64>().is_ok()),
        "{line}"
    );
    let output = assignd(&["run", "--module", honest, "--input", input]);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
}
