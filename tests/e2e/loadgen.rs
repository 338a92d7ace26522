//! `assignd loadgen` against the real `assignd serve`: simulated stateful
//! members, one scale event, and the report's sanity (no task ever active
//! on two members, heartbeats flowing, the scale event settled with tasks
//! moved).

use crate::common::{ADMIN_TOKEN, Server, assert_one_error_line, assignd, scratch, stderr, stdout};

#[test]
fn loadgen_reports_a_scale_event_that_settles_with_no_double_ownership() {
    let dir = scratch("loadgen");
    let server = Server::start(&dir.join("data"), &["--fsync", "never"]);
    let report = dir.join("report.json");
    let output = assignd(&[
        "loadgen",
        "--host",
        &server.base,
        "--token",
        ADMIN_TOKEN,
        "--groups",
        "2",
        "--members",
        "3",
        "--tasks",
        "24",
        "--interval-ms",
        "200",
        "--expansion-timeout-ms",
        "300",
        "--assignor",
        "learner-aware",
        "--changelog-len",
        "2000",
        "--replay-rate",
        "5000",
        "--duration",
        "7",
        "--churn",
        "scale:3->6@1s",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "loadgen failed: {}\n{}",
        stdout(&output),
        stderr(&output)
    );
    let text = std::fs::read_to_string(&report).expect("the report was written");
    let report: serde_json::Value = serde_json::from_str(&text).expect("the report is JSON");
    assert_eq!(report["double_ownership"], 0, "{report:#}");
    assert!(
        report["heartbeats_per_s"].as_f64().unwrap() > 0.0,
        "{report:#}"
    );
    assert!(
        report["latency_ms"]["p99"].as_f64().unwrap() > 0.0,
        "{report:#}"
    );
    assert_eq!(report["config"]["churn"][0], "scale:3->6@1s");
    let events = report["events"].as_array().expect("events");
    assert_eq!(events.len(), 1, "{report:#}");
    let event = &events[0];
    assert_eq!(event["kind"], "scale");
    assert_eq!(event["members_before"], 3);
    assert_eq!(event["members_after"], 6);
    assert_eq!(event["groups_settled"], 2, "both groups settled: {event:#}");
    assert_eq!(event["all_settled"], true);
    let settled = event["settled_s"]["max"].as_f64().unwrap();
    assert!(settled > 0.0 && settled < 6.0, "{event:#}");
    // Each group of 24 tasks on 3 → 6 members moves 12 tasks, each once
    // when it moves warm.
    assert!(
        event["tasks_moved"].as_u64().unwrap() >= 2 * 12,
        "{event:#}"
    );
    assert_eq!(event["double_ownership"], 0);
    for group in event["per_group"].as_array().unwrap() {
        assert!(group["settled_s"].as_f64().is_some(), "{group:#}");
        assert!(group["tasks_moved"].as_u64().unwrap() >= 12, "{group:#}");
    }
    // The line on stdout says the same.
    let out = stdout(&output);
    assert!(out.contains("double_ownership=0"), "{out}");
    assert!(out.contains("event=scale:3->6@1s settled=2/2"), "{out}");
}

#[test]
fn loadgen_refuses_a_bad_churn_spec_as_a_usage_error() {
    for (spec, needle) in [
        ("scale:3->6", "no @TIME"),
        ("grow:3@1s", "unknown kind"),
        ("scale:3->6@1", "needs a unit"),
        ("scale:4->6@1s", "have 3 members then, not 4"),
        ("scale:3->6@2s,scale:6->4@1s", "increasing time order"),
        ("kill:3@1s", "at least one must stay"),
    ] {
        let output = assignd(&[
            "loadgen",
            "--host",
            "http://127.0.0.1:9",
            "--members",
            "3",
            "--churn",
            spec,
        ]);
        assert_one_error_line(&output, 2, needle);
    }
}

/// `--shadow` binds the shadow, with its `--shadow-param`s, on every group
/// loadgen creates; a shadow param without a shadow is a usage error.
#[test]
fn loadgen_binds_the_shadow_on_every_group_it_creates() {
    let dir = scratch("loadgen-shadow");
    let server = Server::start(&dir.join("data"), &["--fsync", "never"]);
    let output = assignd(&[
        "loadgen",
        "--host",
        &server.base,
        "--token",
        ADMIN_TOKEN,
        "--groups",
        "2",
        "--members",
        "2",
        "--tasks",
        "8",
        "--interval-ms",
        "200",
        "--duration",
        "1",
        "--shadow",
        "range",
        "--shadow-param",
        "note=x",
    ]);
    assert!(
        output.status.success(),
        "loadgen failed: {}",
        stderr(&output)
    );
    for group in ["loadgen-0", "loadgen-1"] {
        let (status, shadow) = server.call("GET", &format!("/v1/groups/{group}/shadow"), None);
        assert_eq!(status, 200, "{shadow:#}");
        assert_eq!(shadow["binding"]["assignor"], "range", "{shadow:#}");
        assert_eq!(shadow["binding"]["params"]["note"], "x", "{shadow:#}");
    }
    let output = assignd(&[
        "loadgen",
        "--host",
        "http://127.0.0.1:9",
        "--shadow-param",
        "note=x",
    ]);
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
}

/// `assignd loadgen watchers`: every watcher of the group's routing table
/// is told of every change (a member's heartbeat with new metadata), and
/// none of their queries fails.
#[test]
fn loadgen_watchers_tells_every_watcher_of_every_change() {
    let dir = scratch("loadgen-watchers");
    let server = Server::start(&dir.join("data"), &["--fsync", "never"]);
    let report = dir.join("watchers.json");
    let output = assignd(&[
        "loadgen",
        "watchers",
        "--host",
        &server.base,
        "--token",
        ADMIN_TOKEN,
        "--watchers",
        "50",
        "--members",
        "2",
        "--tasks",
        "8",
        "--idle-s",
        "0.5",
        "--changes",
        "2",
        "--change-gap-ms",
        "100",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert!(
        output.status.success(),
        "loadgen watchers failed: {}\n{}",
        stdout(&output),
        stderr(&output)
    );
    let text = std::fs::read_to_string(&report).expect("the report was written");
    let report: serde_json::Value = serde_json::from_str(&text).expect("the report is JSON");
    assert_eq!(report["errors"], 0, "{report:#}");
    // Without --host-pid the host's CPU and memory are left out.
    assert!(report["host_cpu_percent_with"].is_null(), "{report:#}");
    let changes = report["changes"].as_array().expect("changes");
    assert_eq!(changes.len(), 2, "{report:#}");
    for change in changes {
        assert_eq!(change["told"], 50, "{change:#}");
        assert!(
            change["epoch_after"].as_u64() > change["epoch_before"].as_u64(),
            "{change:#}"
        );
    }
}
