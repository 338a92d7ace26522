//! Big groups through the real binary: members holding many tasks that
//! form no ranges, and the host's limit on what such a member sends.

use crate::common;

use std::time::{Duration, Instant};

use crate::common::{Member, Server};
use serde_json::json;

/// A topic name as long as real ones are: 50,000 of its tasks as
/// `[topic, partition]` pairs are 1.35 MB, past the other routes' 1 MiB.
const TOPIC: &str = "orders-eu-west-1";
const PARTITIONS: u64 = 100_000;

/// Round-robin over two members gives each every other partition: 50,000
/// tasks that form no ranges, so each heartbeat lists them one by one
/// (and, while they warm up, a lag on each). Each member's heartbeats fit
/// the heartbeat's limit, and the group settles.
#[test]
fn two_members_of_fifty_thousand_scattered_tasks_settle() {
    let server = Server::start(&common::scratch("scattered"), &[]);
    let group = "scattered";
    let config = json!({
        "topics": [{"name": TOPIC, "partitions": PARTITIONS}],
        "assignor": "round-robin",
        "expansion_timeout_ms": 50,
    });
    let (status, view) = server.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
    assert_eq!(status, 201, "{view}");
    let mut members = [
        Member::join_topics(&server, group, "worker-a", &[TOPIC]),
        Member::join_topics(&server, group, "worker-b", &[TOPIC]),
    ];
    let deadline = Instant::now() + Duration::from_secs(300);
    // Settled: two rounds in a row stable with 50,000 each, so that the
    // second round's heartbeats report every task the first gave.
    let mut settled_rounds = 0;
    loop {
        for member in members.iter_mut() {
            // Asserts a 200 answer: a 413 fails here.
            member.heartbeat(&server, group);
        }
        let (status, view) = server.call("GET", &format!("/v1/groups/{group}"), None);
        assert_eq!(status, 200, "{view}");
        let settled = view["state"] == "stable"
            && members.iter().all(|m| {
                m.active.len() as u64 == PARTITIONS / 2
                    && m.revoking.is_empty()
                    && m.learner.is_empty()
            });
        settled_rounds = if settled { settled_rounds + 1 } else { 0 };
        if settled_rounds == 2 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never settled: {:?}",
            members
                .iter()
                .map(|m| (m.active.len(), m.revoking.len(), m.learner.len()))
                .collect::<Vec<_>>()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for member in &members {
        let partitions: Vec<u64> = member.active.iter().map(|(_, p)| *p).collect();
        assert!(
            partitions.windows(2).all(|w| w[1] > w[0] + 1),
            "{}: no two tasks in a row",
            member.name
        );
    }
}

/// A group whose heartbeats could be past the heartbeat's limit is
/// refused when it is configured, with a message that says why, and is
/// not created: ten topics of 100,000 partitions (the task limit) with
/// 13-byte names. With 12-byte names it fits.
#[test]
fn a_group_whose_heartbeats_could_not_fit_is_refused_up_front() {
    let server = Server::start(&common::scratch("too-big"), &[]);
    let config = |name_len: usize| {
        let topics: Vec<_> = (0..10)
            .map(|i| json!({"name": format!("{i:0>name_len$}"), "partitions": PARTITIONS}))
            .collect();
        json!({"topics": topics, "assignor": "range", "learners": "off"})
    };
    let (status, answer) = server.call("PUT", "/v1/groups/too-big", Some(&config(13)));
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["code"], "invalid_request");
    let message = answer["error"]["message"].as_str().expect("a message");
    assert!(message.contains("heartbeat body limit"), "{message}");
    let (status, _) = server.call("GET", "/v1/groups/too-big", None);
    assert_eq!(status, 404, "not created");
    let (status, answer) = server.call("PUT", "/v1/groups/fits", Some(&config(12)));
    assert_eq!(status, 201, "{answer}");
}

/// A guest whose answer moves every task of a big group with standbys on
/// three other members (the `spin-when-told` guest's `shift`): with two
/// learners at a time (the default `max_learners`), each catch-up asks
/// for a new target, and each target is the whole group's placement. The
/// host paces the group's calls by the size of its last target, so in a
/// window it calls the guest (and installs its answer) no more than once
/// per pace, not once per round of catch-ups (each answer a whole
/// placement of 160,000 rows).
#[test]
fn a_big_answer_that_moves_every_task_is_installed_at_a_pace() {
    const TASKS: u64 = 40_000;
    const INTERVAL_MS: u64 = 500;
    let server = Server::start(&common::scratch("far"), &[]);
    let bytes = std::fs::read(common::bad_guest("test-guest-spin-when-told")).expect("guest");
    let (status, module) = server.upload("far", "1.0.0", &bytes);
    assert_eq!(status, 201, "{module}");
    let group = "far";
    let config = json!({
        "topics": [{"name": "orders", "partitions": TASKS}],
        "assignor": "far@1.0.0",
        "params": {"standbys": "3"},
        // Also the time a member has to release a task: generous, for a
        // debug build's answers of 40,000 tasks.
        "expansion_timeout_ms": 3_000,
        "heartbeat_interval_ms": INTERVAL_MS,
        "session_timeout_ms": 60_000,
        "registration_timeout_ms": 60_000,
    });
    let (status, view) = server.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
    assert_eq!(status, 201, "{view}");
    let names = ["w-a", "w-b", "w-c", "w-d", "w-e", "w-f", "w-g", "w-h"];
    let mut members: Vec<Member> = names
        .iter()
        .map(|name| Member::join(&server, group, name))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        for member in members.iter_mut() {
            member.heartbeat(&server, group);
        }
        let (_, view) = server.call("GET", &format!("/v1/groups/{group}"), None);
        if view["state"] == "stable"
            && members
                .iter()
                .all(|m| m.active.len() as u64 == TASKS / 8 && m.revoking.is_empty())
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never settled: {}",
            view["state"]
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let target_epoch = |server: &Server| {
        let (_, view) = server.call("GET", &format!("/v1/groups/{group}"), None);
        view["target_epoch"].as_u64().expect("target_epoch")
    };
    // Every task one member further: every active task moves, cold.
    let bound = target_epoch(&server);
    let binding = json!({"module": "far@1.0.0", "params": {"standbys": "3", "shift": "1"}});
    let (status, view) = server.call(
        "PUT",
        &format!("/v1/groups/{group}/assignor"),
        Some(&binding),
    );
    assert_eq!(status, 200, "{view}");
    let rows = TASKS * 4; // each task active and on 3 standbys
    let pace = Duration::from_millis(rows / assignd::protocol::core::TARGET_ROWS_PER_PACE_MS);
    // The window starts once the bind's own target (a change of config,
    // not paced) is installed.
    let deadline = Instant::now() + Duration::from_secs(120);
    while target_epoch(&server) == bound {
        assert!(Instant::now() < deadline, "the bind's target never came");
        std::thread::sleep(Duration::from_millis(20));
    }
    let calls = |server: &Server| {
        server
            .metric(r#"assignd_assignor_calls_total{module="far@1.0.0"}"#)
            .expect("the guest's calls counted") as u64
    };
    let first = calls(&server);
    let window = Instant::now();
    let mut rounds = 0u64;
    while window.elapsed() < 2 * pace {
        rounds += 1;
        for member in members.iter_mut() {
            // Learners catch up at once: each beat reports lag 0 on them,
            // so every round asks for a new target. The others beat now
            // and then (a debug build answers 20,000 tasks slowly).
            if !member.learner.is_empty() || !member.revoking.is_empty() || rounds.is_multiple_of(8)
            {
                member.heartbeat(&server, group);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = window.elapsed();
    let called = calls(&server) - first;
    // The pace is an upper bound whatever the machine's speed: calls only
    // come slower on a slow one. One more for a call between the clock
    // read and the count's, one for a call due as the window opened.
    let most = (elapsed.as_millis() / pace.as_millis()) as u64 + 2;
    assert!(
        called <= most,
        "{called} calls in {elapsed:?}, at most {most} at one per {pace:?}"
    );
    eprintln!("{called} calls in {elapsed:?} over {rounds} rounds of heartbeats");
}

/// A big group whose five members keep standbys of each task on the three
/// members after its owner, and report them caught up, is bound to an
/// answer that moves every task to the one member with no copy of it: the
/// learner safety keeps every move on its holder, choosing for each one a
/// swap among the new owner's caught-up tasks. A bystander group on the
/// same shard (one shard) beats all along, and each of its answers comes
/// back within the lease its previous answer gave: no member of another
/// group stops while the big one installs (a search of the new owner's
/// every reported lag once per move would hold the shard for longer than
/// the bystander's lease).
#[test]
fn a_bystander_keeps_its_lease_while_a_big_answer_moves_every_task_cold() {
    const TASKS: u64 = 40_000;
    let server = Server::start(&common::scratch("far-cold"), &["--shards", "1"]);
    let bytes = std::fs::read(common::bad_guest("test-guest-spin-when-told")).expect("guest");
    let (status, module) = server.upload("far", "1.0.0", &bytes);
    assert_eq!(status, 201, "{module}");
    let (group, bystanders) = ("far", "bystanders");
    let config = json!({
        "topics": [{"name": "orders", "partitions": TASKS}],
        "assignor": "far@1.0.0",
        "params": {"standbys": "3"},
        "expansion_timeout_ms": 3_000,
        "heartbeat_interval_ms": 500,
        "session_timeout_ms": 60_000,
        "registration_timeout_ms": 60_000,
    });
    let (status, view) = server.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
    assert_eq!(status, 201, "{view}");
    let small = json!({
        "topics": [{"name": "events", "partitions": 8}],
        "expansion_timeout_ms": 4_000,
        "heartbeat_interval_ms": 1_000,
        "session_timeout_ms": 10_000,
    });
    let (status, view) = server.call("PUT", &format!("/v1/groups/{bystanders}"), Some(&small));
    assert_eq!(status, 201, "{view}");
    let mut bystander = Member::join_dynamic(&server, bystanders, "bystander", &["events"]);
    let names = ["w-a", "w-b", "w-c", "w-d", "w-e"];
    let mut members: Vec<Member> = names
        .iter()
        .map(|name| Member::join(&server, group, name))
        .collect();
    let mut standbys = vec![serde_json::Value::Null; members.len()];
    // Each member reports lag 0 on its standbys (and learners): it keeps
    // them warm.
    let beat = |member: &mut Member, standby: &mut serde_json::Value| {
        let warm: Vec<serde_json::Value> = member
            .learner
            .iter()
            .chain(&standby_tasks(standby))
            .map(|(t, p)| json!([t, p, 0]))
            .collect();
        let (status, answer) = member.try_heartbeat(&server, group, json!({"lags": warm}));
        assert_eq!(status, 200, "{answer}");
        *standby = answer["standby"].clone();
    };
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        for (member, standby) in members.iter_mut().zip(&mut standbys) {
            beat(member, standby);
        }
        let (_, view) = server.call("GET", &format!("/v1/groups/{group}"), None);
        if view["state"] == "stable"
            && members
                .iter()
                .all(|m| m.active.len() as u64 == TASKS / 5 && m.revoking.is_empty())
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "never settled: {}",
            view["state"]
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // Once more, so that every member has reported its standbys warm.
    for (member, standby) in members.iter_mut().zip(&mut standbys) {
        beat(member, standby);
    }
    let target_epoch = || {
        let (_, view) = server.call("GET", &format!("/v1/groups/{group}"), None);
        view["target_epoch"].as_u64().expect("target_epoch")
    };
    let bound = target_epoch();
    // Partition p on member (p + 4) mod 5: the one after its 3 standbys.
    let binding = json!({"module": "far@1.0.0", "params": {"standbys": "3", "shift": "4"}});
    let (status, view) = server.call(
        "PUT",
        &format!("/v1/groups/{group}/assignor"),
        Some(&binding),
    );
    assert_eq!(status, 200, "{view}");
    let mut lease = Duration::from_millis(u64::MAX / 2);
    let (mut beats_after_install, mut slowest) = (0, Duration::ZERO);
    let bind_done = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(300);
    while beats_after_install < 3 {
        if target_epoch() > bound {
            beats_after_install += 1;
        }
        let sent = Instant::now();
        let (status, answer) = bystander.try_heartbeat(&server, bystanders, json!({}));
        let took = sent.elapsed();
        slowest = slowest.max(took);
        assert_eq!(status, 200, "{answer}");
        assert!(
            took < lease,
            "the bystander's answer took {took:?}, past the {lease:?} lease it held"
        );
        lease = Duration::from_millis(answer["lease_ms"].as_u64().expect("lease_ms"));
        assert!(Instant::now() < deadline, "the far target never came");
        std::thread::sleep(Duration::from_millis(200));
    }
    eprintln!(
        "far target in {:?}; the bystander's slowest answer {slowest:?}",
        bind_done.elapsed()
    );
}

/// The standbys of a heartbeat's answer (none before the first).
fn standby_tasks(standby: &serde_json::Value) -> std::collections::BTreeSet<(String, u64)> {
    if standby.is_null() {
        Default::default()
    } else {
        common::tasks(standby)
    }
}
