//! Rollouts through the real `assignd serve` (docs/rollout.md): a module
//! that fails on every call, rolled out over 100 groups, stops by itself
//! and puts every group back; a healthy one completes; a rollout survives
//! a kill -9 of its host and finishes after the restart; a rebalance
//! after the bind that moves more than `moves>X` allows rolls back; the operator's
//! pause, resume and abort, and the refusals (400, 404, 409), over HTTP
//! and through `assignd rollout`.
//!
//! Groups are cheap: one topic of two partitions and one member that
//! joins once and never beats again (its session outlasts the test), so
//! every bind makes the assignor run once.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{self, ADMIN_TOKEN, Server};

/// The test guest, uploaded as this; with `trap=yes` every call panics.
const FAILING: &str = "spinner@0.1.0";

/// The read-only token of the operator's test.
const READ_ONLY: &str = "e2e-read-only-token-77a1";

/// How long a rollout of these tests may take to reach a phase.
const PHASE_DEADLINE: Duration = Duration::from_secs(60);

/// Creates `name` on `sticky` (with `shadow` as its shadow, if any) and
/// joins one member to it.
fn group(server: &Server, name: &str, shadow: Option<&str>) {
    let config = json!({
        "topics": [{"name": "orders", "partitions": 2}],
        "assignor": "sticky",
        "session_timeout_ms": 600_000,
        "expansion_timeout_ms": 50,
        "labels": {"tier": "test"},
    });
    let (status, answer) = server.call("PUT", &format!("/v1/groups/{name}"), Some(&config));
    assert_eq!(status, 201, "{answer}");
    let join = json!({"member_id": "", "member_epoch": 0, "topics": ["orders"]});
    let path = format!("/v1/groups/{name}/heartbeat");
    let (status, answer) = server.call("POST", &path, Some(&join));
    assert_eq!(status, 200, "{answer}");
    if let Some(shadow) = shadow {
        let body = json!({"assignor": shadow});
        let (status, answer) =
            server.call("PUT", &format!("/v1/groups/{name}/shadow"), Some(&body));
        assert_eq!(status, 200, "{answer}");
    }
}

fn view(server: &Server, name: &str) -> Value {
    let (status, view) = server.call("GET", &format!("/v1/groups/{name}"), None);
    assert_eq!(status, 200, "{view}");
    view
}

fn start(server: &Server, body: Value) -> Value {
    let (status, answer) = server.call("POST", "/v1/rollouts", Some(&body));
    assert_eq!(status, 201, "{answer}");
    answer
}

fn status(server: &Server, id: &str) -> Value {
    let (status, answer) = server.call("GET", &format!("/v1/rollouts/{id}"), None);
    assert_eq!(status, 200, "{answer}");
    answer
}

/// Polls rollout `id` until `done` holds of its status; the status.
fn wait_for(server: &Server, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + PHASE_DEADLINE;
    loop {
        let status = status(server, id);
        if done(&status) {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "rollout {id}: {what}, still {status:#}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn phase(status: &Value) -> &str {
    status["phase"]["phase"].as_str().unwrap_or("")
}

fn events(status: &Value) -> Vec<String> {
    status["last_events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_owned())
        .collect()
}

fn upload_failing(server: &Server) {
    let guest = std::fs::read(common::bad_guest("test-guest-spin-when-told")).expect("a guest");
    let (status, answer) = server.upload("spinner", "0.1.0", &guest);
    assert_eq!(status, 201, "{answer}");
}

#[test]
fn a_failing_module_over_100_groups_stops_by_itself_and_every_group_is_put_back() {
    let dir = common::scratch("failing");
    let server = Server::start(&dir, &["--shards", "4"]);
    upload_failing(&server);
    let names: Vec<String> = (0..100).map(|i| format!("fleet-{i:03}")).collect();
    for (i, name) in names.iter().enumerate() {
        group(&server, name, (i % 10 == 0).then_some("range"));
    }
    start(
        &server,
        json!({
            "id": "bad", "module": FAILING, "params": {"trap": "yes"}, "groups": "prefix:fleet-",
            "steps": "1,10%,50%,100%", "every": "1s", "shadow_for": "1s", "abort_on": ["failures"],
        }),
    );
    let end = wait_for(&server, "bad", "rolled back", |s| phase(s) == "rolled_back");
    let reason = end["phase"]["reason"].as_str().unwrap();
    assert!(reason.contains("unhealthy: failures"), "{reason}");
    let unhealthy = &end["unhealthy"][0];
    assert_eq!(unhealthy["rule"], "failures", "{end:#}");
    assert!(
        unhealthy["detail"]
            .as_str()
            .unwrap()
            .contains("failures of the module"),
        "{end:#}"
    );
    assert!(
        end["step"].as_u64().unwrap() <= 1,
        "stopped at step 1 at the latest: {end:#}"
    );
    // The stored rollout is the whole record: its last 256 events (the
    // status shows the last 20, here 100 groups unshadowed).
    let stored: Value =
        serde_json::from_slice(&std::fs::read(dir.join("rollouts/bad.json")).unwrap()).unwrap();
    let stored = json!({"last_events": stored["rollout"]["events"]});
    let seen = events(&stored);
    for kind in [
        "started",
        "shadow_began",
        "group_unhealthy",
        "aborting",
        "rolled_back",
    ] {
        assert!(seen.iter().any(|e| e == kind), "{kind}: {seen:?}");
    }
    let unshadowed = seen.iter().filter(|e| *e == "group_unshadowed").count();
    assert_eq!(unshadowed, 100, "{seen:?}");
    for (i, name) in names.iter().enumerate() {
        let view = view(&server, name);
        assert_eq!(
            view["config"]["assignor"], "sticky",
            "{name} back on its binding"
        );
        let shadow = view["shadow"]["binding"]["assignor"].as_str();
        let expected = (i % 10 == 0).then_some("range");
        assert_eq!(shadow, expected, "{name} back on its own shadow");
    }
    // Every decision counted, every command too.
    let counted = |series: &str| server.metric(series).unwrap_or(0.0);
    assert_eq!(
        counted("assignd_rollout_events_total{kind=\"group_unshadowed\"}"),
        100.0
    );
    assert_eq!(
        counted("assignd_rollout_events_total{kind=\"rolled_back\"}"),
        1.0
    );
    assert_eq!(
        counted("assignd_rollout_commands_total{action=\"shadow\",result=\"ok\"}"),
        100.0
    );
    assert_eq!(counted("assignd_rollouts{phase=\"rolled_back\"}"), 1.0);
    let (_, list) = server.call("GET", "/v1/rollouts", None);
    assert_eq!(list["rollouts"][0]["phase"], "rolled_back", "{list}");
}

#[test]
fn a_healthy_module_completes_and_every_group_runs_it() {
    let dir = common::scratch("healthy");
    let server = Server::start(&dir, &["--shards", "2"]);
    for i in 0..10 {
        group(&server, &format!("ok-{i}"), None);
    }
    start(
        &server,
        json!({"id": "good", "module": "range", "groups": "label:tier=test", "every": "1s", "shadow_for": "1s"}),
    );
    let end = wait_for(&server, "good", "completed", |s| phase(s) == "completed");
    assert_eq!(end["step_sizes"], json!([1, 5, 10]), "{end:#}");
    assert_eq!(end["groups"]["bound"], 10, "{end:#}");
    for i in 0..10 {
        let view = view(&server, &format!("ok-{i}"));
        assert_eq!(view["config"]["assignor"], "range");
        assert!(
            view["shadow"]["binding"].is_null(),
            "no shadow left: {}",
            view["shadow"]
        );
    }
}

#[test]
fn a_rollout_survives_a_kill_9_of_its_host_and_finishes() {
    let dir = common::scratch("crash");
    let mut server = Server::start(&dir, &["--shards", "2"]);
    for i in 0..6 {
        group(&server, &format!("kept-{i}"), None);
    }
    start(
        &server,
        json!({"id": "durable", "module": "range", "groups": "prefix:kept-", "steps": "1,50%,100%",
               "every": "2s", "shadow_for": "1s"}),
    );
    wait_for(&server, "durable", "past step 1", |s| {
        s["step"].as_u64() >= Some(1) && s["groups"]["bound"].as_u64() >= Some(1)
    });
    server.signal(libc::SIGKILL);
    let _ = server.child.wait();
    drop(server);
    let server = Server::start(&dir, &["--shards", "2"]);
    let end = wait_for(&server, "durable", "completed after the restart", |s| {
        phase(s) == "completed"
    });
    assert_eq!(end["groups"]["bound"], 6, "{end:#}");
    for i in 0..6 {
        assert_eq!(
            view(&server, &format!("kept-{i}"))["config"]["assignor"],
            "range"
        );
    }
}

fn refused(server: &Server, method: &str, path: &str, body: Option<Value>) -> (u16, String) {
    let (status, answer) = server.call(method, path, body.as_ref());
    let code = answer["error"]["code"].as_str().unwrap_or("").to_owned();
    (status, code)
}

#[test]
fn pause_resume_abort_and_the_refusals() {
    let dir = common::scratch("operator");
    let server = Server::start(&dir, &["--shards", "2", "--read-only-token", READ_ONLY]);
    for i in 0..3 {
        group(&server, &format!("op-{i}"), None);
    }
    let spec = |id: &str| json!({"id": id, "module": "range", "groups": "prefix:op-", "every": "1h", "shadow_for": "1h"});
    let bad_steps = json!({"module": "range", "groups": "prefix:op-", "steps": "50%,10%"});
    assert_eq!(
        refused(&server, "POST", "/v1/rollouts", Some(bad_steps)),
        (400, "invalid_request".into())
    );
    let unknown = json!({"module": "nope@1", "groups": "prefix:op-"});
    assert_eq!(
        refused(&server, "POST", "/v1/rollouts", Some(unknown)),
        (404, "unknown_module".into())
    );
    let nothing = json!({"module": "range", "groups": "prefix:none-"});
    assert_eq!(
        refused(&server, "POST", "/v1/rollouts", Some(nothing)),
        (409, "empty_selection".into())
    );
    assert_eq!(
        refused(&server, "GET", "/v1/rollouts/none", None),
        (404, "unknown_rollout".into())
    );
    start(&server, spec("first"));
    // The read-only token reads rollouts and changes none.
    let as_reader = |method: &str, path: &str| {
        let url = format!("{}{path}", server.base);
        let request = match method {
            "GET" => Server::agent()
                .get(&url)
                .header("authorization", &format!("Bearer {READ_ONLY}"))
                .call(),
            _ => Server::agent()
                .post(&url)
                .header("authorization", &format!("Bearer {READ_ONLY}"))
                .send_json(json!({"reason": "reader"})),
        };
        request.expect("an answer").status().as_u16()
    };
    assert_eq!(as_reader("GET", "/v1/rollouts/first"), 200);
    assert_eq!(as_reader("GET", "/v1/rollouts"), 200);
    assert_eq!(as_reader("POST", "/v1/rollouts/first/pause"), 403);
    assert_eq!(
        refused(&server, "POST", "/v1/rollouts", Some(spec("second"))),
        (409, "group_in_rollout".into())
    );

    let reason = |text: &str| Some(json!({"reason": text}));
    let (status, paused) = server.call(
        "POST",
        "/v1/rollouts/first/pause",
        reason("looking").as_ref(),
    );
    assert_eq!(
        (status, paused["paused"].as_str()),
        (200, Some("looking")),
        "{paused}"
    );
    assert_eq!(
        refused(&server, "POST", "/v1/rollouts/first/pause", reason("again")),
        (409, "rollout_phase".into())
    );
    let (status, resumed) =
        server.call("POST", "/v1/rollouts/first/resume", reason("seen").as_ref());
    assert_eq!(
        (status, &resumed["paused"]),
        (200, &Value::Null),
        "{resumed}"
    );
    assert_eq!(
        refused(&server, "POST", "/v1/rollouts/first/resume", reason("x")),
        (409, "rollout_phase".into())
    );

    let cli = |args: &[&str]| {
        let mut all = vec!["rollout"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--host", &server.base, "--token", ADMIN_TOKEN]);
        common::assignd(&all)
    };
    let aborted = cli(&["abort", "first", "--reason", "enough"]);
    assert!(aborted.status.success(), "{}", common::stderr(&aborted));
    let end = wait_for(&server, "first", "rolled back", |s| {
        phase(s) == "rolled_back"
    });
    assert_eq!(end["phase"]["reason"], "aborted: enough", "{end:#}");
    assert_eq!(
        refused(&server, "POST", "/v1/rollouts/first/abort", reason("again")),
        (409, "rollout_phase".into())
    );
    for i in 0..3 {
        let view = view(&server, &format!("op-{i}"));
        assert_eq!(view["config"]["assignor"], "sticky");
        assert!(view["shadow"]["binding"].is_null(), "{}", view["shadow"]);
    }
    let shown = cli(&["status", "first"]);
    let text = common::stdout(&shown);
    assert!(
        text.contains("phase: rolled_back (aborted: enough)"),
        "{text}"
    );
    let listed = cli(&["list", "--json"]);
    let list: Value = serde_json::from_str(&common::stdout(&listed)).expect("JSON");
    assert_eq!(list["rollouts"][0]["id"], "first", "{list}");
    let missing = cli(&["status", "none"]);
    common::assert_one_error_line(&missing, 1, "unknown_rollout");
}

#[test]
fn a_rebalance_that_moves_more_than_the_rule_allows_rolls_back() {
    let dir = common::scratch("moves");
    let server = Server::start(&dir, &["--shards", "2"]);
    for i in 0..3 {
        let name = format!("mv-{i}");
        group(&server, &name, None);
        // Moves go straight to their new owner, no learner first.
        let (status, view) = server.call("GET", &format!("/v1/groups/{name}"), None);
        assert_eq!(status, 200, "{view}");
        let mut config = view["config"].clone();
        config["learners"] = json!("off");
        let (status, answer) = server.call("PUT", &format!("/v1/groups/{name}"), Some(&config));
        assert_eq!(status, 200, "{answer}");
    }
    start(
        &server,
        json!({"id": "moves", "module": "range", "groups": "prefix:mv-", "steps": "1,100%",
               "every": "1m", "shadow_for": "1s", "abort_on": ["moves>0.5"]}),
    );
    // Bound once the bind landed (the status counts a bind in flight).
    wait_for(&server, "moves", "mv-0 bound", |s| {
        events(s).iter().any(|e| e == "group_bound")
    });
    // The bind's own rebalance is not held against the module; the next,
    // a member joining, moves one of the two partitions.
    let join = json!({"member_id": "", "member_epoch": 0, "topics": ["orders"]});
    let (status, answer) = server.call("POST", "/v1/groups/mv-0/heartbeat", Some(&join));
    assert_eq!(status, 200, "{answer}");
    let end = wait_for(&server, "moves", "rolled back", |s| {
        phase(s) == "rolled_back"
    });
    let unhealthy = &end["unhealthy"][0];
    assert_eq!(
        (&unhealthy["group"], &unhealthy["rule"]),
        (&json!("mv-0"), &json!("moves>0.5")),
        "{end:#}"
    );
    let detail = unhealthy["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("1.00 tasks moved per rebalance over 1 rebalances"),
        "{detail}"
    );
    assert_eq!(view(&server, "mv-0")["config"]["assignor"], "sticky");
}
