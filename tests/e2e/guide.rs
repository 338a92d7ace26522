//! docs/writing-an-assignor.md, followed as a plugin author would: the
//! guide's code blocks are the files of `examples/my-assignor` (so the two
//! cannot drift apart), and the crate, built from source, goes through the
//! guide's steps: `assignd component new`, `assignd run` offline on
//! examples/group.json, then against the real `assignd serve` with three
//! members heartbeating: `assignd assignor upload`, `assignd group
//! preview`, `bind`, the group's target reaching the strategy's visible
//! property (every `payments` task on the pinned member, nothing else on
//! it), and `rollback`. Waits poll with deadlines.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::common::{Member, Server, scratch, stderr, stdout, tasks, workspace_root};
use serde_json::{Value, json};

const GUIDE: &str = "docs/writing-an-assignor.md";
const CRATE_DIR: &str = "examples/my-assignor";
const PACKAGE: &str = "my-assignor";
/// The guide's dependency path (a clone of the repository next to the
/// author's crate) and the crate's own (inside the repository).
const GUIDE_SDK_PATH: &str = r#"path = "../assignd/guest-sdk""#;
const CRATE_SDK_PATH: &str = r#"path = "../../guest-sdk""#;
/// The crate's files the guide shows in full.
const SHOWN_FILES: &[&str] = &["Cargo.toml", "src/lib.rs", "tests/pin.rs"];

/// The pin the guide uses, and what it means.
const PIN: &str = "pin=payments:worker-a";
const PINNED_MEMBER: &str = "worker-a";
const PAYMENTS: u64 = 4;
const ORDERS: u64 = 12;

/// How long a group may take to reach a target or settle.
const CONVERGE_DEADLINE: Duration = Duration::from_secs(60);

/// The fenced code blocks of `markdown` whose info string names a file
/// (```` ```rust src/lib.rs ````), by that name. A name shown twice is
/// an error.
fn named_blocks(markdown: &str) -> BTreeMap<String, String> {
    let mut blocks = BTreeMap::new();
    let mut lines = markdown.lines();
    while let Some(line) = lines.next() {
        let Some(info) = line.strip_prefix("```") else {
            continue;
        };
        let name = info.split_whitespace().nth(1).map(str::to_owned);
        let mut body = String::new();
        for line in lines.by_ref() {
            if line.starts_with("```") {
                break;
            }
            body.push_str(line);
            body.push('\n');
        }
        if let Some(name) = name {
            assert!(
                blocks.insert(name.clone(), body).is_none(),
                "{GUIDE} shows {name} twice"
            );
        }
    }
    blocks
}

/// The guide shows the crate's files exactly, but for where the SDK is.
#[test]
fn the_guides_code_is_the_example_crate() {
    let root = workspace_root();
    let guide = std::fs::read_to_string(root.join(GUIDE)).expect("the guide");
    let blocks = named_blocks(&guide);
    let names: Vec<&str> = blocks.keys().map(String::as_str).collect();
    let mut expected = SHOWN_FILES.to_vec();
    expected.sort_unstable();
    assert_eq!(names, expected, "the files {GUIDE} shows in full");
    for (name, shown) in &blocks {
        let path = root.join(CRATE_DIR).join(name);
        let actual =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if name == "Cargo.toml" {
            assert!(
                shown.contains(GUIDE_SDK_PATH),
                "the guide's Cargo.toml depends on the SDK by {GUIDE_SDK_PATH}"
            );
        }
        let shown = shown.replace(GUIDE_SDK_PATH, CRATE_SDK_PATH);
        if shown != actual {
            let line = shown
                .lines()
                .zip(actual.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| shown.lines().count().min(actual.lines().count()));
            panic!(
                "{GUIDE}'s {name} differs from {} from line {}: update one from the other",
                path.display(),
                line + 1
            );
        }
    }
}

/// The crate built for wasm32-unknown-unknown from source, then made a
/// component with the guide's command; once per test binary.
fn component() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| build_component(&scratch("guide-component")))
        .clone()
}

fn build_component(dir: &Path) -> PathBuf {
    let root = workspace_root();
    assignd_guest_build::build(&root, &[PACKAGE], &dir.join("built"))
        .unwrap_or_else(|e| panic!("building {PACKAGE}: {e}"));
    let core = assignd_guest_build::target_dir(&root)
        .join(assignd_guest_build::TARGET)
        .join(assignd_guest_build::PROFILE)
        .join(format!("{}.wasm", PACKAGE.replace('-', "_")));
    let out = dir.join("my-assignor.wasm");
    let made = assignd(&[
        "component",
        "new",
        core.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_success(&made, "component new");
    out
}

fn assignd(args: &[&str]) -> Output {
    common::assignd(args)
}

fn assert_success(output: &Output, what: &str) {
    assert_eq!(
        output.status.code(),
        Some(0),
        "assignd {what}: stderr: {}",
        stderr(output)
    );
}

/// Runs the remote CLI against `server` (host and token from the
/// environment, as the guide exports them) and parses its JSON answer.
fn cli(server: &Server, args: &[&str]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_assignd"))
        .args(args)
        .env("ASSIGND_HOST", &server.base)
        .env("ASSIGND_TOKEN", common::ADMIN_TOKEN)
        .stdin(Stdio::null())
        .output()
        .expect("cannot start assignd");
    assert_success(&output, &args.join(" "));
    serde_json::from_str(&stdout(&output))
        .unwrap_or_else(|e| panic!("assignd {args:?}: not JSON ({e}): {}", stdout(&output)))
}

type Task = (String, u64);

fn payments() -> BTreeSet<Task> {
    (0..PAYMENTS).map(|p| ("payments".to_owned(), p)).collect()
}

fn all_tasks() -> BTreeSet<Task> {
    let orders = (0..ORDERS).map(|p| ("orders".to_owned(), p));
    orders.chain(payments()).collect()
}

/// The strategy's visible property on per-member active sets: the pinned
/// member has exactly the payments tasks, every task has one owner.
fn pinned(active: &BTreeMap<String, BTreeSet<Task>>) -> bool {
    let mut owned = BTreeSet::new();
    for set in active.values() {
        for task in set {
            if !owned.insert(task.clone()) {
                return false;
            }
        }
    }
    active.get(PINNED_MEMBER) == Some(&payments()) && owned == all_tasks()
}

/// `assignd run` offline on the bundled example group, as the guide does.
#[test]
fn offline_run_pins_the_topic() {
    let module = component();
    let input = common::example_input();
    let run = |pin: &str| {
        assignd(&[
            "run",
            "--module",
            module.to_str().unwrap(),
            "--input",
            input.to_str().unwrap(),
            "--param",
            pin,
        ])
    };
    let output = run(PIN);
    assert_success(&output, "run");
    let answer: Value = serde_json::from_str(&stdout(&output)).expect("an Assignment document");
    // examples/group.json: m1 is worker-a, m2 worker-b, m3 worker-c.
    let active: BTreeMap<String, BTreeSet<Task>> =
        [("m1", "worker-a"), ("m2", "worker-b"), ("m3", "worker-c")]
            .iter()
            .map(|(id, name)| ((*name).to_owned(), tasks(&answer[id]["active"])))
            .collect();
    assert!(pinned(&active), "{answer}");
    // worker-b keeps the orders it had (6..12): the rest is sticky.
    let kept: BTreeSet<Task> = (6..12).map(|p| ("orders".to_owned(), p)).collect();
    assert_eq!(active["worker-b"], kept, "{answer}");

    // A malformed pin is the assignor's refusal: exit 3, one line.
    let refused = run("pin=payments");
    common::assert_one_error_line(&refused, 3, "expected TOPIC:MEMBER");
}

/// Per member name: its target's active tasks and what it holds.
fn targets_and_holdings(
    view: &Value,
) -> (
    BTreeMap<String, BTreeSet<Task>>,
    BTreeMap<String, BTreeSet<Task>>,
) {
    let mut targets = BTreeMap::new();
    let mut held = BTreeMap::new();
    for member in view["members"].as_array().expect("members") {
        let name = member["name"].as_str().expect("a static name").to_owned();
        targets.insert(name.clone(), tasks(&member["target"]["active"]));
        held.insert(name, tasks(&member["active"]));
    }
    (targets, held)
}

/// Heartbeats every member until `done(view)` holds for the group view,
/// or panics at the deadline with the last view.
fn heartbeat_until(
    server: &Server,
    group: &str,
    members: &mut [Member],
    what: &str,
    done: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + CONVERGE_DEADLINE;
    loop {
        for member in members.iter_mut() {
            member.heartbeat(server, group);
        }
        let (status, view) = server.call("GET", &format!("/v1/groups/{group}"), None);
        assert_eq!(status, 200, "{view}");
        if done(&view) {
            return view;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not within {CONVERGE_DEADLINE:?}: {view}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stable, and every member holds exactly its target.
fn settled(view: &Value) -> bool {
    let (targets, held) = targets_and_holdings(view);
    view["state"] == "stable" && targets == held
}

#[test]
fn upload_preview_bind_and_roll_back_on_a_live_group() {
    let dir = scratch("guide-live");
    let module = component();
    let server = Server::start(&dir.join("data"), &[]);
    let group = "billing";

    // The guide's group, with quick timers so the test is short.
    let quick = common::write(
        &dir,
        "quick.json",
        r#"{"topics": [], "heartbeat_interval_ms": 200, "expansion_timeout_ms": 300}"#,
    );
    let created = cli(
        &server,
        &[
            "group",
            "create",
            group,
            "--topic",
            "orders:12",
            "--topic",
            "payments:4",
            "--config",
            quick.to_str().unwrap(),
        ],
    );
    assert_eq!(created["config"]["assignor"], "sticky");
    let mut members: Vec<Member> = ["worker-a", "worker-b", "worker-c"]
        .into_iter()
        .map(|name| Member::join_topics(&server, group, name, &["orders", "payments"]))
        .collect();
    let view = heartbeat_until(
        &server,
        group,
        &mut members,
        "stable under sticky",
        |view| {
            let (targets, _) = targets_and_holdings(view);
            settled(view) && targets.values().flatten().count() == all_tasks().len()
        },
    );
    let (before, _) = targets_and_holdings(&view);

    // Upload.
    let uploaded = cli(
        &server,
        &[
            "assignor",
            "upload",
            module.to_str().unwrap(),
            "--name",
            "my-assignor",
            "--version",
            "0.1.0",
        ],
    );
    assert_eq!(uploaded["name"], "my-assignor");
    assert_eq!(uploaded["info"]["name"], "pin-topics");

    // Preview: the plugin's answer pins payments; every payments task not
    // on worker-a yet either moves to it or is held back for it until it
    // has warmed up; nothing is applied.
    let preview = cli(
        &server,
        &[
            "group",
            "preview",
            group,
            "my-assignor@0.1.0",
            "--param",
            PIN,
        ],
    );
    let answer: BTreeMap<String, BTreeSet<Task>> = preview["assignment"]
        .as_array()
        .expect("assignment rows")
        .iter()
        .map(|row| {
            let slot = row["member"].as_str().expect("a slot");
            let name = slot.strip_prefix("static:").unwrap_or(slot).to_owned();
            (name, tasks(&row["active"]))
        })
        .collect();
    assert!(pinned(&answer), "{preview}");
    let slot = format!("static:{PINNED_MEMBER}");
    for task in payments() {
        if before[PINNED_MEMBER].contains(&task) {
            continue;
        }
        let pair = json!([task.0, task.1]);
        let moved = preview["moves"]
            .as_array()
            .expect("moves")
            .iter()
            .any(|m| m["task"] == pair && m["to"] == slot.as_str());
        let held = preview["held_back"]
            .as_array()
            .expect("held_back")
            .iter()
            .any(|h| h["task"] == pair && h["wanted"] == slot.as_str());
        assert!(
            moved || held,
            "{task:?} neither moves nor is held back: {preview}"
        );
    }
    assert!(preview["balance_after"]["spread"].is_u64(), "{preview}");
    let unchanged = cli(&server, &["group", "show", group]);
    assert_eq!(unchanged["config"]["assignor"], "sticky");

    // Bind, and heartbeat until the group runs the strategy.
    let bound = cli(
        &server,
        &["group", "bind", group, "my-assignor@0.1.0", "--param", PIN],
    );
    assert_eq!(bound["config"]["assignor"], "my-assignor@0.1.0");
    let view = heartbeat_until(&server, group, &mut members, "pinned target", |view| {
        let (targets, _) = targets_and_holdings(view);
        settled(view) && pinned(&targets)
    });
    assert!(view.get("assignor_failures").is_none(), "{view}");

    // Roll back: the previous binding returns, and the group settles under it.
    let rolled = cli(&server, &["group", "rollback", group]);
    assert_eq!(rolled["config"]["assignor"], "sticky", "{rolled}");
    assert_eq!(rolled["config"]["params"], json!({}), "{rolled}");
    let last = rolled["bindings"]
        .as_array()
        .expect("bindings")
        .last()
        .cloned();
    assert_eq!(
        last.as_ref().map(|b| &b["module"]),
        Some(&json!("sticky")),
        "{rolled}"
    );
    heartbeat_until(
        &server,
        group,
        &mut members,
        "stable after rollback",
        |view| {
            let (targets, _) = targets_and_holdings(view);
            settled(view) && targets.values().flatten().count() == all_tasks().len()
        },
    );
}
