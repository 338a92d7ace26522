//! The example assignors in C, JavaScript and Python
//! (`examples/{c-sticky,js-sticky,python-sticky}`), built from source with
//! their own toolchains by `examples/build-languages.sh` (as `.ci/run`
//! does), driven through the real binary as their authors would:
//!
//! - each is a component of the assignor interface 0.2 that declares
//!   `capabilities.load`;
//! - offline, `assignd run` on `examples/group.json` and on a generated
//!   input with capacities, stale owners, a topic nobody subscribes to and
//!   a subscription to a topic that does not exist: every task of a
//!   subscribed topic is active on exactly one of its subscribers and no
//!   other task is placed; fed its own answer back as the current owners,
//!   it keeps every owner (stickiness); with loads, the tasks without an
//!   owner go to the least loaded member, without them the counts balance;
//! - live, on one `assignd serve` per language: the component is uploaded,
//!   a group of three static members heartbeating over HTTP settles under
//!   the built-in `sticky`, is hot-swapped to the module, takes a fourth
//!   member (who gets tasks while the others only give some up), is
//!   swapped back to `sticky`, and rolled back to the module. After each
//!   step the members' holdings cover every task exactly once; after every
//!   single heartbeat, no task is held by two members; every heartbeat is
//!   answered 200, and the module is called without a failure;
//! - live with loads: in a group with a `load_unit` bound to the module,
//!   three members asked for a full report send their tasks' loads in
//!   their heartbeats; when one leaves, its tasks go to the least loaded
//!   of the other two, not one to each as the counts would have it;
//! - their guides, as an author reads them in a folder of their own: the
//!   commands reach the clone only through a variable, the JavaScript
//!   build says which one when the WIT is missing, the Python guide lists
//!   every file it runs, and the fuel budgets quoted are the host's.
//!
//! The components are found in the folder named by
//! `ASSIGND_LANGUAGE_COMPONENTS`. Unset, each component test prints one line saying
//! what to set and passes (a developer without the toolchains); set, a
//! missing or unloadable component fails the test.

use crate::common;

use crate::common::{Member, Server};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const COMPONENTS_VAR: &str = "ASSIGND_LANGUAGE_COMPONENTS";
const GROUP: &str = "languages";
const VERSION: &str = "0.2.0";
/// The live group's tasks: 24 + 6.
const TOPICS: [(&str, u64); 2] = [("orders", 24), ("payments", 6)];
/// The longest a group may take to settle after a change.
const SETTLE_DEADLINE: Duration = Duration::from_secs(60);

type Task = (String, u64);

/// The component `NAME.wasm` in the folder `ASSIGND_LANGUAGE_COMPONENTS`
/// names; `None`, after one line saying how to run the test, when unset.
fn component(name: &str) -> Option<PathBuf> {
    let Some(dir) = std::env::var_os(COMPONENTS_VAR) else {
        eprintln!(
            "{name}: not run: set {COMPONENTS_VAR}=DIR, a folder with c-sticky.wasm, \
             js-sticky.wasm and python-sticky.wasm; examples/build-languages.sh [DIR] \
             installs the toolchains and builds them (default DIR: target/language-components)"
        );
        return None;
    };
    assert!(!dir.is_empty(), "{COMPONENTS_VAR} is set but empty");
    let path = Path::new(&dir).join(format!("{name}.wasm"));
    assert!(
        path.is_file(),
        "{COMPONENTS_VAR}={} has no {name}.wasm: build it with examples/build-languages.sh",
        Path::new(&dir).display()
    );
    Some(path)
}

// --- offline ---------------------------------------------------------------

/// `assignd run --module MODULE --input INPUT` with `cache` as its cache
/// directory; the Assignment document it printed.
fn run(module: &Path, input: &Path, cache: &Path) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_assignd"))
        .arg("run")
        .arg("--module")
        .arg(module)
        .arg("--input")
        .arg(input)
        .arg("--cache-dir")
        .arg(cache)
        .arg("--stats")
        .output()
        .expect("cannot start assignd");
    assert_eq!(
        output.status.code(),
        Some(0),
        "assignd run --module {} --input {}: {}",
        module.display(),
        input.display(),
        common::stderr(&output)
    );
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "assignd run printed no JSON ({e}): {}",
            common::stdout(&output)
        )
    })
}

/// The answer's active tasks by member id.
fn actives(answer: &Value) -> BTreeMap<String, BTreeSet<Task>> {
    answer
        .as_object()
        .unwrap_or_else(|| panic!("an Assignment object: {answer}"))
        .iter()
        .map(|(id, member)| (id.clone(), common::tasks(&member["active"])))
        .collect()
}

/// Asserts `answer` is a valid assignment of the GroupInput `input`: every
/// member present, every task of a topic someone subscribes to active on
/// exactly one of its subscribers, nothing else placed.
fn assert_valid(input: &Value, answer: &Value) {
    let members = input["members"].as_array().expect("members");
    let ids: BTreeSet<String> = members
        .iter()
        .map(|m| m["id"].as_str().expect("id").to_owned())
        .collect();
    let active = actives(answer);
    assert_eq!(
        active.keys().cloned().collect::<BTreeSet<_>>(),
        ids,
        "every member of the input in the answer, and no other: {answer}"
    );
    let subscribes = |id: &str, topic: &str| {
        members.iter().any(|m| {
            m["id"] == id
                && m["topics"]
                    .as_array()
                    .expect("topics")
                    .iter()
                    .any(|t| t == topic)
        })
    };
    let mut owner: BTreeMap<&Task, &str> = BTreeMap::new();
    for (id, tasks) in &active {
        for task in tasks {
            if let Some(other) = owner.insert(task, id) {
                panic!("{task:?} active on {other} and {id}: {answer}");
            }
            assert!(
                subscribes(id, &task.0),
                "{task:?} on {id}, who does not subscribe to it: {answer}"
            );
        }
    }
    let mut expected = BTreeSet::new();
    for (topic, partitions) in input["topics"].as_object().expect("topics") {
        if ids.iter().any(|id| subscribes(id, topic)) {
            for p in 0..partitions.as_u64().expect("partitions") {
                expected.insert((topic.clone(), p));
            }
        }
    }
    let placed: BTreeSet<Task> = owner.keys().map(|t| (*t).clone()).collect();
    assert_eq!(
        placed, expected,
        "every task of a subscribed topic placed once, no other: {answer}"
    );
}

/// `input` with `answer`'s active tasks as each member's current owners
/// (and no learners or standbys).
fn fed_back(input: &Value, answer: &Value) -> Value {
    let mut next = input.clone();
    for member in next["members"].as_array_mut().expect("members") {
        let id = member["id"].as_str().expect("id").to_owned();
        member["active"] = answer[&id]["active"].clone();
        member["learner"] = json!([]);
        member["standby"] = json!([]);
    }
    next
}

/// A larger input than examples/group.json, with what a real group has:
/// capacities 1 to 3, members subscribed to different topics (one to a
/// topic that does not exist yet), a topic nobody subscribes to, current
/// owners of which some are stale (a partition that no longer exists, a
/// topic the member left), and a new member with nothing.
fn generated_input() -> Value {
    let mut members = Vec::new();
    for i in 0..9u64 {
        let topics = match i % 3 {
            0 => json!(["orders", "payments"]),
            1 => json!(["orders"]),
            _ => json!(["orders", "payments", "clicks", "not-yet"]),
        };
        // Members 0 to 5 own orders in blocks of 10; member 0 also holds a
        // partition that is gone, member 1 a payments task it no longer
        // subscribes to.
        let mut active: Vec<Value> = if i < 6 {
            (i * 10..i * 10 + 10)
                .map(|p| json!(["orders", p]))
                .collect()
        } else {
            Vec::new()
        };
        match i {
            0 => active.push(json!(["orders", 500])),
            1 => active.push(json!(["payments", 3])),
            _ => {}
        }
        members.push(json!({
            "id": format!("m{i}"),
            "name": format!("worker-{i}"),
            "topics": topics,
            "capacity": 1 + i % 3,
            "active": active,
        }));
    }
    json!({
        "topics": {"orders": 97, "payments": 13, "clicks": 8, "audit": 5},
        "members": members,
    })
}

/// `assignd run` on `input` (written as `NAME.json` in `dir`) gives a valid
/// answer, and fed that answer back keeps every owner.
fn assert_valid_and_sticky(module: &Path, dir: &Path, name: &str, input: &Value, cache: &Path) {
    let path = common::write(dir, &format!("{name}.json"), input.to_string());
    let answer = run(module, &path, cache);
    assert_valid(input, &answer);

    let again_input = fed_back(input, &answer);
    let path = common::write(
        dir,
        &format!("{name}-fed-back.json"),
        again_input.to_string(),
    );
    let again = run(module, &path, cache);
    assert_valid(&again_input, &again);
    assert_eq!(
        actives(&again),
        actives(&answer),
        "{name}: fed its own answer back, every owner keeps its tasks"
    );
}

/// The tasks `orders-P` for each P of `partitions`.
fn orders(partitions: &[u64]) -> BTreeSet<Task> {
    partitions
        .iter()
        .map(|p| ("orders".to_owned(), *p))
        .collect()
}

/// `assignd run` on `input`, written as `NAME.json` in `dir`: the answer's
/// active tasks by member id.
fn run_actives(
    module: &Path,
    dir: &Path,
    name: &str,
    input: &Value,
    cache: &Path,
) -> BTreeMap<String, BTreeSet<Task>> {
    let path = common::write(dir, &format!("{name}.json"), input.to_string());
    actives(&run(module, &path, cache))
}

/// Offline with loads: `a` carries 90, `b` 10, and the two tasks nobody
/// holds (20 each) both go to `b`; without the loads, one goes to each. A
/// task of unknown load counts as the mean of the known ones, not as zero;
/// load capacities weigh the members when every member declared one.
fn assert_free_tasks_follow_the_loads(module: &Path, dir: &Path, cache: &Path) {
    let mut input = json!({
        "topics": {"orders": 6},
        "members": [
            {"id": "a", "topics": ["orders"], "active": [["orders", 0], ["orders", 1]]},
            {"id": "b", "topics": ["orders"], "active": [["orders", 2], ["orders", 3]]},
        ],
    });
    let by_count = run_actives(module, dir, "without-loads", &input, cache);
    assert_eq!(
        (by_count["a"].len(), by_count["b"].len()),
        (3, 3),
        "without loads the counts balance: {by_count:?}"
    );
    input["load_unit"] = json!("records/s");
    input["loads"] = json!([
        ["orders", 0, 45],
        ["orders", 1, 45],
        ["orders", 2, 5],
        ["orders", 3, 5],
        ["orders", 4, 20],
        ["orders", 5, 20],
    ]);
    let by_load = run_actives(module, dir, "with-loads", &input, cache);
    let expected = (orders(&[0, 1]), orders(&[2, 3, 4, 5]));
    assert_eq!(
        (by_load["a"].clone(), by_load["b"].clone()),
        expected,
        "a keeps its own, both free tasks to the least loaded: {by_load:?}"
    );

    // Known: orders-0 30, orders-1 10 (mean 20). b's orders-2 counts 20, so
    // orders-1 goes to b (20 < 30) and orders-3 to a (30 = 30: the lower
    // index). Were unknown zero, b would take both.
    let unknown = json!({
        "topics": {"orders": 4},
        "load_unit": "records/s",
        "members": [
            {"id": "a", "topics": ["orders"], "active": [["orders", 0]]},
            {"id": "b", "topics": ["orders"], "active": [["orders", 2]]},
        ],
        "loads": [["orders", 0, 30], ["orders", 1, 10]],
    });
    let by_mean = run_actives(module, dir, "unknown-loads", &unknown, cache);
    assert_eq!(
        (by_mean["a"].clone(), by_mean["b"].clone()),
        (orders(&[0, 3]), orders(&[1, 2])),
        "an unknown load counts as the mean of the known: {by_mean:?}"
    );

    // b can carry three times a's load: it takes three of four equal tasks;
    // with a's load capacity missing, capacities (1 and 1) weigh instead.
    let mut weighted = json!({
        "topics": {"orders": 4},
        "load_unit": "records/s",
        "members": [
            {"id": "a", "topics": ["orders"], "load_capacity": 100},
            {"id": "b", "topics": ["orders"], "load_capacity": 300},
        ],
        "loads": (0..4).map(|p| json!(["orders", p, 10])).collect::<Vec<_>>(),
    });
    let by_weight = run_actives(module, dir, "load-capacity", &weighted, cache);
    assert_eq!(
        (by_weight["a"].len(), by_weight["b"].len()),
        (1, 3),
        "load capacities weigh: {by_weight:?}"
    );
    weighted["members"][0]
        .as_object_mut()
        .expect("a member")
        .remove("load_capacity");
    let by_capacity = run_actives(module, dir, "some-load-capacity", &weighted, cache);
    assert_eq!(
        (by_capacity["a"].len(), by_capacity["b"].len()),
        (2, 2),
        "capacities weigh unless every member has a load capacity: {by_capacity:?}"
    );
}

// --- live ------------------------------------------------------------------

fn view(server: &Server, group: &str) -> Value {
    let (status, view) = server.call("GET", &format!("/v1/groups/{group}"), None);
    assert_eq!(status, 200, "{view}");
    view
}

fn all_tasks() -> BTreeSet<Task> {
    TOPICS
        .iter()
        .flat_map(|(topic, n)| (0..*n).map(|p| (topic.to_string(), p)))
        .collect()
}

/// Settles the group `GROUP` (see [`settle_group`]) on all its tasks.
fn settle(server: &Server, members: &mut [Member], seq: u64, what: &str) -> Value {
    settle_group(server, GROUP, &all_tasks(), members, seq, what)
}

/// Heartbeats every member, checking after each beat that no task is held
/// (active or being released) by two members, until `group` is stable on
/// its binding `seq` with every member holding exactly its target, no
/// learner left, and every one of `tasks` active on exactly one member.
/// Returns the group view then.
fn settle_group(
    server: &Server,
    group: &str,
    tasks: &BTreeSet<Task>,
    members: &mut [Member],
    seq: u64,
    what: &str,
) -> Value {
    let deadline = Instant::now() + SETTLE_DEADLINE;
    loop {
        for i in 0..members.len() {
            members[i].heartbeat(server, group);
            let mut holder: BTreeMap<Task, &str> = BTreeMap::new();
            for member in members.iter() {
                for task in member.held() {
                    if let Some(other) = holder.insert(task.clone(), member.name) {
                        panic!("{what}: {task:?} held by {other} and {}", member.name);
                    }
                }
            }
        }
        let view = view(server, group);
        let binding = view["bindings"].as_array().and_then(|b| b.last()).cloned();
        let target_epoch = view["target_epoch"].as_u64();
        let targets: BTreeMap<&str, BTreeSet<Task>> = view["members"]
            .as_array()
            .expect("members")
            .iter()
            .map(|m| {
                (
                    m["member_id"].as_str().expect("member_id"),
                    common::tasks(&m["target"]["active"]),
                )
            })
            .collect();
        let holds_target = members.iter().all(|m| {
            targets.get(m.member_id.as_str()) == Some(&m.active)
                && m.revoking.is_empty()
                && m.learner.is_empty()
                && Some(m.member_epoch) == target_epoch
        });
        let settled = view["state"] == "stable"
            && targets.len() == members.len()
            && binding.as_ref().and_then(|b| b["seq"].as_u64()) == Some(seq)
            && target_epoch >= binding.as_ref().and_then(|b| b["epoch"].as_u64())
            && holds_target;
        if settled {
            let held: Vec<&Task> = members.iter().flat_map(|m| &m.active).collect();
            let distinct: BTreeSet<Task> = held.iter().map(|t| (*t).clone()).collect();
            assert_eq!(held.len(), distinct.len(), "{what}: a task held twice");
            assert_eq!(&distinct, tasks, "{what}: every task active once");
            assert!(
                view.get("assignor_failures").is_none(),
                "{what}: the assignor failed: {view:#}"
            );
            return view;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: not settled within {SETTLE_DEADLINE:?}: {view:#}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Binds the group to `module`; returns the new binding's seq.
fn bind(server: &Server, module: &str) -> u64 {
    let (status, view) = server.call(
        "PUT",
        &format!("/v1/groups/{GROUP}/assignor"),
        Some(&json!({"module": module})),
    );
    assert_eq!(status, 200, "bind {module}: {view}");
    let binding = view["bindings"]
        .as_array()
        .expect("bindings")
        .last()
        .cloned();
    let binding = binding.expect("a binding");
    assert_eq!(binding["module"], module, "{binding}");
    binding["seq"].as_u64().expect("seq")
}

/// How many calls of `module` the host has counted, and how many failed
/// (failures are counted by module and code: the sum over the codes).
fn calls(server: &Server, module: &str) -> (f64, f64) {
    let url = format!("{}/metrics", server.base);
    let mut response = Server::agent()
        .get(&url)
        .call()
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let text = response.body_mut().read_to_string().expect("the metrics");
    let label = format!("module=\"{module}\"");
    let sum = |family: &str| -> f64 {
        let prefix = format!("{family}{{");
        text.lines()
            .filter(|line| line.starts_with(&prefix) && line.contains(&label))
            .map(|line| {
                let (_, value) = line.rsplit_once(' ').expect("a sample");
                value.parse::<f64>().expect("a number")
            })
            .sum()
    };
    (
        sum("assignd_assignor_calls_total"),
        sum("assignd_assignor_failures_total"),
    )
}

/// A group with a `load_unit`, bound to `reference`: three members settle
/// on two tasks each (no loads known yet: the counts balance), report their
/// tasks' loads once the host asks for a full report, and one leaves: both
/// its tasks go to the least loaded member left, who carries the least
/// even with them (the counts would give one to each).
fn free_tasks_follow_the_reported_loads(server: &Server, reference: &str) {
    const LOADS_GROUP: &str = "languages-loads";
    let config = json!({
        "topics": [{"name": "orders", "partitions": 6}],
        "assignor": reference,
        "learners": "off",
        "heartbeat_interval_ms": 200,
        "expansion_timeout_ms": 300,
        "load_unit": "records/s",
        "load_half_life_ms": 0,
        // No load rebalance within the test: only the leave moves tasks.
        "load_window_ms": 3_600_000,
    });
    let path = format!("/v1/groups/{LOADS_GROUP}");
    let (status, created) = server.call("PUT", &path, Some(&config));
    assert_eq!(status, 201, "{created}");
    let binding = view(server, LOADS_GROUP)["bindings"]
        .as_array()
        .and_then(|b| b.last())
        .cloned()
        .expect("a binding");
    assert_eq!(binding["module"], reference, "{binding}");
    let seq = binding["seq"].as_u64().expect("seq");
    let tasks: BTreeSet<Task> = (0..6).map(|p| ("orders".to_owned(), p)).collect();
    let mut members: Vec<Member> = ["load-a", "load-b", "load-c"]
        .into_iter()
        .map(|label| Member::join_dynamic(server, LOADS_GROUP, label, &["orders"]))
        .collect();
    settle_group(
        server,
        LOADS_GROUP,
        &tasks,
        &mut members,
        seq,
        "loads: joined",
    );
    assert!(members.iter().all(|m| m.active.len() == 2), "two each");

    for (member, load) in members.iter_mut().zip([40.0, 5.0, 15.0]) {
        let (status, answer) = member.try_heartbeat(server, LOADS_GROUP, json!({}));
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["load_report"], "full", "{answer}");
        let loads: Vec<Value> = member
            .active
            .iter()
            .map(|(t, p)| json!([t, p, load]))
            .collect();
        let (status, answer) = member.try_heartbeat(server, LOADS_GROUP, json!({"loads": loads}));
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["load_report"], "changes", "{answer}");
    }
    let loads = view(server, LOADS_GROUP)["loads"].clone();
    assert_eq!(
        (&loads["complete"], &loads["total"]),
        (&json!(true), &json!(120.0)),
        "{loads}"
    );

    let mut leaver = members.pop().expect("load-c");
    let left_behind = leaver.active.clone();
    let (status, answer) = leaver.try_heartbeat(server, LOADS_GROUP, json!({"member_epoch": -1}));
    assert_eq!(status, 200, "{answer}");
    let before: Vec<BTreeSet<Task>> = members.iter().map(|m| m.active.clone()).collect();
    let view = settle_group(
        server,
        LOADS_GROUP,
        &tasks,
        &mut members,
        seq,
        "loads: c left",
    );
    let heavy_b: BTreeSet<Task> = before[1].union(&left_behind).cloned().collect();
    assert_eq!(
        (&members[0].active, &members[1].active),
        (&before[0], &heavy_b),
        "a (80) keeps its two, b (10) takes both of c's (15 each): {view:#}"
    );
}

// --- one language ----------------------------------------------------------

fn offline_and_live(name: &str) {
    let Some(path) = component(name) else { return };
    let started = Instant::now();
    let dir = common::scratch(name);
    let bytes = std::fs::read(&path).expect("the component");

    // Upload first: the host compiles the component once into its data
    // dir's cache, which the offline runs then share. One upload at a time
    // across the tests: Cranelift compiles on every core, so two of the
    // 12-18 MB components at once take twice as long each (about 40 s on 2
    // cores), near the default compile limit, for no gain in total time.
    static UPLOADING: Mutex<()> = Mutex::new(());
    let data_dir = dir.join("data");
    let server = Server::start(&data_dir, &[]);
    let uploading = UPLOADING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let (status, module) = server.upload(name, VERSION, &bytes);
    drop(uploading);
    assert_eq!(status, 201, "upload {}: {module}", path.display());
    assert_eq!(module["info"]["name"], name, "{module}");
    assert_eq!(module["info"]["wit_version"], "0.2.0", "{module}");
    assert_eq!(module["info"]["capabilities"]["load"], true, "{module}");
    eprintln!("{name}: uploaded after {:?}", started.elapsed());

    // Offline.
    let cache = data_dir.join("cache");
    let example: Value =
        serde_json::from_str(&std::fs::read_to_string(common::example_input()).unwrap()).unwrap();
    assert_valid_and_sticky(&path, &dir, "group", &example, &cache);
    assert_valid_and_sticky(&path, &dir, "generated", &generated_input(), &cache);
    assert_free_tasks_follow_the_loads(&path, &dir, &cache);
    eprintln!("{name}: offline runs done after {:?}", started.elapsed());

    // Live: three static members settle under the built-in sticky.
    let config = json!({
        "topics": TOPICS.iter().map(|(t, n)| json!({"name": t, "partitions": n})).collect::<Vec<_>>(),
        "assignor": "sticky",
        "heartbeat_interval_ms": 200,
        "expansion_timeout_ms": 300,
    });
    let (status, created) = server.call("PUT", &format!("/v1/groups/{GROUP}"), Some(&config));
    assert_eq!(status, 201, "{created}");
    let topics = ["orders", "payments"];
    let mut members: Vec<Member> = ["worker-a", "worker-b", "worker-c"]
        .into_iter()
        .map(|worker| Member::join_topics(&server, GROUP, worker, &topics))
        .collect();
    settle(&server, &mut members, 1, "under sticky");

    // Hot swap to the module.
    let reference = format!("{name}@{VERSION}");
    let module_seq = bind(&server, &reference);
    settle(&server, &mut members, module_seq, "swapped to the module");
    let (called, failed) = calls(&server, &reference);
    assert!(called >= 1.0, "{reference} was called: {called}");

    // A fourth member joins: the module gives it tasks, and the others
    // only give some up (sticky); nobody holds more than its share.
    let before: Vec<BTreeSet<Task>> = members.iter().map(|m| m.active.clone()).collect();
    members.push(Member::join_topics(&server, GROUP, "worker-d", &topics));
    let view = settle(&server, &mut members, module_seq, "a fourth member joined");
    for (member, before) in members.iter().zip(&before) {
        assert!(
            member.active.is_subset(before),
            "{} only gives tasks up: before {before:?}, now {:?}",
            member.name,
            member.active
        );
    }
    let share = all_tasks().len().div_ceil(members.len());
    for member in &members {
        assert!(
            !member.active.is_empty() && member.active.len() <= share,
            "{}: {} tasks, share {share}: {view:#}",
            member.name,
            member.active.len()
        );
    }
    let (called_after, _) = calls(&server, &reference);
    assert!(
        called_after > called,
        "the new member's target came from {reference}"
    );

    // Back to the built-in, then roll back to the module.
    let sticky_seq = bind(&server, "sticky");
    settle(&server, &mut members, sticky_seq, "swapped back to sticky");
    let (rolled, binding) = server.rollback(GROUP);
    assert_eq!(binding["module"], reference.as_str(), "{binding}");
    assert_eq!(binding["rollback_to"], module_seq, "{binding}");
    assert_eq!(rolled["config"]["assignor"], reference.as_str(), "{rolled}");
    let seq = binding["seq"].as_u64().expect("seq");
    settle(&server, &mut members, seq, "rolled back to the module");

    free_tasks_follow_the_reported_loads(&server, &reference);

    let (_, failed_after) = calls(&server, &reference);
    assert_eq!(
        (failed, failed_after),
        (0.0, 0.0),
        "{reference} never failed"
    );
    eprintln!("{name}: passed in {:?}", started.elapsed());
}

#[test]
fn c_sticky_runs_offline_and_serves_a_live_group_through_hot_swaps() {
    offline_and_live("c-sticky");
}

#[test]
fn js_sticky_runs_offline_and_serves_a_live_group_through_hot_swaps() {
    offline_and_live("js-sticky");
}

#[test]
fn python_sticky_runs_offline_and_serves_a_live_group_through_hot_swaps() {
    offline_and_live("python-sticky");
}

/// An example's README, from the clone.
fn readme(example: &str) -> String {
    let path = common::workspace_root()
        .join("examples")
        .join(example)
        .join("README.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `n` with a comma between thousands: 11,100.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The fuel budgets the C and JavaScript guides quote are the host's
/// defaults for the inputs they measure (1,000 members; 100,000 and
/// 200,000 tasks).
#[test]
fn the_guides_quote_the_hosts_fuel_budgets() {
    let limits = assignd::plugins::Limits::default();
    let giga = |tasks| limits.fuel_for(tasks, 1_000) as f64 / 1e9;
    let js = format!(
        "default budgets for 1,000 members: {:.1} G and {:.1} G",
        giga(100_000),
        giga(200_000)
    );
    let text = readme("js-sticky").replace('\n', " ");
    assert!(
        text.contains(&js),
        "examples/js-sticky/README.md says {js:?}"
    );
    let c = format!(
        "default budget at that size is {} M",
        thousands(limits.fuel_for(100_000, 1_000) / 1_000_000)
    );
    let text = readme("c-sticky").replace('\n', " ");
    assert!(text.contains(&c), "examples/c-sticky/README.md says {c:?}");
}

/// The commands of the JavaScript and Python guides work from a folder of
/// one's own: no path into the clone but through a variable (a default
/// for inside the clone is fine), and the Python guide's file list holds
/// every file its commands run.
#[test]
fn the_guides_commands_work_outside_the_clone() {
    for example in ["js-sticky", "python-sticky"] {
        let text = readme(example);
        let mut in_sh = false;
        for line in text.lines() {
            match line.trim() {
                "```sh" => in_sh = true,
                "```" => in_sh = false,
                _ if in_sh => {
                    // `${ASSIGND_WIT:-../../guest-sdk/wit}`: the clone's
                    // own path only as a default.
                    // Comments may say where things are in the clone.
                    let command = line.split(" #").next().unwrap();
                    let outside_defaults: String = command
                        .split("${")
                        .enumerate()
                        .map(|(i, part)| {
                            if i == 0 {
                                part
                            } else {
                                part.split_once('}').map_or(part, |(_, rest)| rest)
                            }
                        })
                        .collect();
                    assert!(
                        !outside_defaults.contains("../"),
                        "examples/{example}/README.md: a path that resolves only in the clone: {line}"
                    );
                }
                _ => {}
            }
        }
    }
    let text = readme("python-sticky");
    let files = text
        .split("my-assignor/\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the file list of section 1");
    let listed: BTreeSet<&str> = files
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    for used in [
        "app.py",
        "build.sh",
        "requirements.txt",
        "test_app.py",
        "offline.py",
    ] {
        assert!(listed.contains(used), "section 1 lists {used}: {listed:?}");
    }
}

/// The JavaScript build, copied to a folder outside the clone, takes the
/// WIT world from `ASSIGND_WIT` and, without it, says in one line that
/// the folder is missing and what to set.
#[test]
fn the_js_build_outside_the_clone_names_the_missing_wit_and_its_variable() {
    let dir = common::scratch("js-build-outside");
    std::fs::create_dir_all(&dir).unwrap();
    let example = common::workspace_root().join("examples/js-sticky");
    for file in ["build.sh", "sticky.js", "package.json", "package-lock.json"] {
        std::fs::copy(example.join(file), dir.join(file)).unwrap();
    }
    for wit in [None, Some("/nonexistent/guest-sdk/wit")] {
        let mut command = Command::new("bash");
        command.arg(dir.join("build.sh")).env_remove("ASSIGND_WIT");
        if let Some(wit) = wit {
            command.env("ASSIGND_WIT", wit);
        }
        let output = command.output().expect("bash");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(1), "{stderr}");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "one line: {stderr}");
        let expected = wit.unwrap_or("../../guest-sdk/wit");
        for said in [expected, "No such file or directory", "set ASSIGND_WIT"] {
            assert!(lines[0].contains(said), "{said}: {stderr}");
        }
    }
}

/// The JavaScript build, with a stand-in for componentize-js, hands it
/// `ASSIGND_WIT` and, when it fails, keeps the cause its error wraps
/// ("No such file or directory") in its one line.
#[test]
fn the_js_build_passes_the_wit_on_and_keeps_the_cause_of_a_failure() {
    use std::os::unix::fs::PermissionsExt;

    let dir = common::scratch("js-build-stand-in");
    let bin = dir.join("node_modules/.bin");
    std::fs::create_dir_all(&bin).unwrap();
    let example = common::workspace_root().join("examples/js-sticky");
    for file in ["build.sh", "sticky.js", "package.json", "package-lock.json"] {
        std::fs::copy(example.join(file), dir.join(file)).unwrap();
    }
    // Newer than the lockfile: build.sh runs no `npm ci`.
    std::fs::write(dir.join("node_modules/.package-lock.json"), "{}").unwrap();
    let stand_in = bin.join("componentize-js");
    std::fs::write(
        &stand_in,
        "#!/usr/bin/env bash\n\
         echo \"args: $*\" >&2\n\
         if [ -n \"${FAIL:-}\" ]; then\n\
           echo 'Error: failed to parse the WIT package' >&2\n\
           echo 'Caused by:' >&2\n\
           echo '    0: reading deps/types.wit: No such file or directory (os error 2)' >&2\n\
           exit 1\n\
         fi\n\
         while [ $# -gt 0 ]; do [ \"$1\" = --out ] && echo wasm > \"$2\"; shift; done\n",
    )
    .unwrap();
    std::fs::set_permissions(&stand_in, std::fs::Permissions::from_mode(0o755)).unwrap();
    let wit = common::workspace_root().join("guest-sdk/wit");

    let output = Command::new("bash")
        .arg(dir.join("build.sh"))
        .env("ASSIGND_WIT", &wit)
        .output()
        .expect("bash");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    let log = std::fs::read_to_string(dir.join("target/componentize.log")).unwrap();
    assert!(
        log.contains(&format!("--wit {} ", wit.display())),
        "componentize-js got ASSIGND_WIT: {log}"
    );
    assert!(dir.join("target/js-sticky.wasm").exists());

    let output = Command::new("bash")
        .arg(dir.join("build.sh"))
        .env("ASSIGND_WIT", &wit)
        .env("FAIL", "1")
        .output()
        .expect("bash");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    for said in [
        "componentize-js failed: Error: failed to parse the WIT package",
        "No such file or directory",
    ] {
        assert!(lines[0].contains(said), "{said}: {stderr}");
    }
}
