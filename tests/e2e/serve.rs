//! `assignd serve` as an operator and its members use it: the real binary
//! on a free port, driven over raw HTTP. Three members join a group of 12
//! tasks and heartbeat as a member library would (reporting what they
//! hold, releasing revoked tasks by the next beat) until the group is
//! stable; at every observed point no task is held by two members, and at
//! the end every task is active on exactly one. Waits poll with deadlines;
//! the server is killed by a drop guard whatever happens.

mod common;

use common::Server;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn tasks(value: &Value) -> BTreeSet<(String, u64)> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("a task list: {value}"))
        .iter()
        .map(|task| {
            (
                task[0].as_str().expect("topic").to_owned(),
                task[1].as_u64().expect("partition"),
            )
        })
        .collect()
}

/// One simulated member: what it was last told, and what it holds.
struct Member {
    name: &'static str,
    member_id: String,
    member_epoch: u64,
    active: BTreeSet<(String, u64)>,
    revoking: BTreeSet<(String, u64)>,
    learner: BTreeSet<(String, u64)>,
}

impl Member {
    /// What it holds now: every active task, and revoked ones not yet
    /// released (released by the next heartbeat).
    fn held(&self) -> BTreeSet<(String, u64)> {
        self.active.union(&self.revoking).cloned().collect()
    }

    fn heartbeat(&mut self, server: &Server, group: &str) {
        // Revoked tasks are released before this beat: report without them.
        let owned: Vec<Value> = self.active.iter().map(|(t, p)| json!([t, p])).collect();
        // Warming up is instant here: every learner task reports lag 0,
        // which lets the host move it.
        let lags: Vec<Value> = self.learner.iter().map(|(t, p)| json!([t, p, 0])).collect();
        let body = json!({
            "member_id": self.member_id,
            "member_epoch": self.member_epoch,
            "owned": owned,
            "lags": lags,
        });
        let (status, answer) = server.call(
            "POST",
            &format!("/v1/groups/{group}/heartbeat"),
            Some(&body),
        );
        assert_eq!(status, 200, "{} heartbeat: {answer}", self.name);
        self.absorb(&answer);
    }

    fn absorb(&mut self, answer: &Value) {
        self.member_id = answer["member_id"].as_str().expect("member_id").to_owned();
        self.member_epoch = answer["member_epoch"].as_u64().expect("member_epoch");
        self.active = tasks(&answer["active"]);
        self.revoking = tasks(&answer["revoking"]);
        self.learner = tasks(&answer["learner"]);
    }
}

/// No task is held by two members at this point.
fn assert_no_double_holding(members: &[Member], when: &str) {
    let mut holder: BTreeMap<(String, u64), &str> = BTreeMap::new();
    for member in members {
        for task in member.held() {
            if let Some(other) = holder.insert(task.clone(), member.name) {
                panic!("{when}: task {task:?} held by {other} and {}", member.name);
            }
        }
    }
}

fn join(server: &Server, group: &str, name: &'static str) -> Member {
    let (status, answer) = server.call(
        "POST",
        &format!("/v1/groups/{group}/heartbeat"),
        Some(&json!({
            "member_id": "",
            "member_name": name,
            "member_epoch": 0,
            "topics": ["orders"],
            "rack": null,
            "capacity": 1,
        })),
    );
    assert_eq!(status, 200, "{name} joins: {answer}");
    let mut member = Member {
        name,
        member_id: String::new(),
        member_epoch: 0,
        active: BTreeSet::new(),
        revoking: BTreeSet::new(),
        learner: BTreeSet::new(),
    };
    member.absorb(&answer);
    assert!(!member.member_id.is_empty());
    member
}

/// Heartbeats every member in turn until the group is stable with
/// `counts` active tasks per member (the host's learner safety moves tasks
/// to the newcomers as they report catching up, a few at a time); checks after every response that no
/// task is held twice, by the members or in the host's view. Returns how
/// many revocations the members were asked for.
fn converge(server: &Server, group: &str, members: &mut [Member], counts: &[usize]) -> usize {
    let all: BTreeSet<(String, u64)> = (0..12).map(|p| ("orders".to_owned(), p)).collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut revoked = BTreeSet::new();
    let mut rounds = 0;
    loop {
        rounds += 1;
        for i in 0..members.len() {
            members[i].heartbeat(server, group);
            for task in &members[i].revoking {
                revoked.insert((members[i].name, task.clone()));
            }
            assert_no_double_holding(members, &format!("round {rounds}"));
        }
        let (status, view) = server.call("GET", &format!("/v1/groups/{group}"), None);
        assert_eq!(status, 200);
        // The host's own view never has a task on two members either.
        let mut seen = BTreeSet::new();
        for member in view["members"].as_array().expect("members") {
            for task in tasks(&member["active"]).union(&tasks(&member["revoking"])) {
                assert!(
                    seen.insert(task.clone()),
                    "host view: {task:?} twice: {view}"
                );
            }
        }
        let target_epoch = view["target_epoch"].as_u64().expect("target_epoch");
        let stable = view["state"] == "stable"
            && members
                .iter()
                .all(|m| m.revoking.is_empty() && m.member_epoch == target_epoch);
        let active: Vec<usize> = members.iter().map(|m| m.active.len()).collect();
        if stable && active == counts {
            let mut owners: BTreeMap<(String, u64), usize> = BTreeMap::new();
            for member in members.iter() {
                for task in &member.active {
                    *owners.entry(task.clone()).or_default() += 1;
                }
            }
            assert_eq!(
                owners.keys().cloned().collect::<BTreeSet<_>>(),
                all,
                "every task active somewhere"
            );
            assert!(owners.values().all(|&n| n == 1), "exactly once: {owners:?}");
            return revoked.len();
        }
        assert!(
            Instant::now() < deadline,
            "not stable after {rounds} rounds: {view}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn three_members_converge_on_twelve_tasks_without_double_ownership() {
    let server = Server::start(&common::scratch("serve-converge"), &[]);
    let group = "orders-app";

    let (status, health) = server.call("GET", "/healthz", None);
    assert_eq!((status, health["status"].as_str()), (200, Some("ok")));

    let config = json!({
        "topics": [{"name": "orders", "partitions": 12}],
        "assignor": "sticky",
        "expansion_timeout_ms": 200,
    });
    let (status, view) = server.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
    assert_eq!(status, 201, "created: {view}");
    assert_eq!(view["config"]["topics"][0]["partitions"], 12);
    let (status, _) = server.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
    assert_eq!(status, 200, "the same config again is an update");

    // worker-a alone gets every task; then b and c join, warm up as
    // learners, and a must release two thirds of its tasks before they are
    // granted elsewhere.
    let mut members = vec![join(&server, group, "worker-a")];
    let revoked = converge(&server, group, &mut members, &[12]);
    assert_eq!(revoked, 0);
    members.push(join(&server, group, "worker-b"));
    members.push(join(&server, group, "worker-c"));
    assert_no_double_holding(&members, "after the joins");
    let revoked = converge(&server, group, &mut members, &[4, 4, 4]);
    assert_eq!(revoked, 8, "a released the tasks b and c took");

    // The summary and the captured assignor input agree with the view.
    let (status, list) = server.call("GET", "/v1/groups", None);
    assert_eq!(status, 200);
    assert_eq!(list["groups"][0]["name"], group);
    assert_eq!(list["groups"][0]["members"], 3);
    assert_eq!(list["groups"][0]["state"], "stable");
    let (status, input) = server.call("GET", &format!("/v1/groups/{group}/assignor-input"), None);
    assert_eq!(status, 200);
    assert_eq!(input["topics"], json!({"orders": 12}));
    assert_eq!(input["members"].as_array().unwrap().len(), 3);

    // An error over the wire has the one error shape.
    let (status, error) = server.call(
        "POST",
        &format!("/v1/groups/{group}/heartbeat"),
        Some(&json!({"member_id": "nobody", "member_epoch": 1})),
    );
    assert_eq!(status, 404);
    assert_eq!(error["error"]["code"], "unknown_member");
}

#[cfg(unix)]
#[test]
fn sigterm_stops_the_server_cleanly() {
    let mut server = Server::start(&common::scratch("serve-sigterm"), &[]);
    let (status, _) = server.call("GET", "/healthz", None);
    assert_eq!(status, 200);
    let killed = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .expect("cannot run kill");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = server.child.try_wait().expect("wait") {
            break status;
        }
        assert!(Instant::now() < deadline, "still running after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit status after SIGTERM: {status}");
}
