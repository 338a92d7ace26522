//! The shards of `assignd serve`, as an operator sees them: the shard
//! count fixed by the data dir, groups spread over the shards, a shard
//! unloaded and loaded again at runtime with its members keeping their
//! tasks, and a data dir of one record log (written before shards)
//! migrated on first start.

use crate::common;

use std::collections::BTreeSet;

use crate::common::{Member, Server};
use serde_json::{Value, json};

use assignd::protocol::shard::shard_of;

fn group_config() -> Value {
    json!({"topics": [{"name": "orders", "partitions": 4}], "expansion_timeout_ms": 100})
}

/// Heartbeats `member` until it holds all four tasks of its group (the
/// first target comes after the group's expansion timeout).
fn settle(server: &Server, member: &mut Member, group: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if member.active.len() == 4 && member.revoking.is_empty() {
            return;
        }
        member.heartbeat(server, group);
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("{group}: {} holds {:?}", member.name, member.active);
}

fn served(server: &Server) -> BTreeSet<u64> {
    server.served_shards()
}

#[test]
fn groups_spread_over_the_shards_and_a_shard_unloads_and_loads_at_runtime() {
    let help = common::assignd(&["serve", "--help"]);
    assert!(
        common::stdout(&help).contains("--shards <N>"),
        "{}",
        common::stdout(&help)
    );
    let data_dir = common::scratch("shards-runtime");
    let server = Server::start(&data_dir, &[]);
    let (status, shards) = server.call("GET", "/v1/shards", None);
    assert_eq!(status, 200, "{shards}");
    assert_eq!(shards["shard_count"], 64, "the default: {shards}");
    assert_eq!(served(&server), (0..64).collect());

    const NAMES: [&str; 8] = ["w0", "w1", "w2", "w3", "w4", "w5", "w6", "w7"];
    let groups: Vec<String> = (0..8).map(|i| format!("group-{i}")).collect();
    let mut members = Vec::new();
    for (group, name) in groups.iter().zip(NAMES) {
        let (status, value) =
            server.call("PUT", &format!("/v1/groups/{group}"), Some(&group_config()));
        assert_eq!(status, 201, "{value}");
        let mut member = Member::join(&server, group, name);
        settle(&server, &mut member, group);
        members.push(member);
    }
    let shard_of_group: Vec<u32> = groups.iter().map(|g| shard_of(g, 64)).collect();
    let distinct: BTreeSet<u32> = shard_of_group.iter().copied().collect();
    assert!(distinct.len() > 1, "the groups are in several shards");
    let (_, shards) = server.call("GET", "/v1/shards", None);
    for shard in shards["shards"].as_array().expect("shards") {
        let id = shard["shard"].as_u64().expect("an id") as u32;
        let expected = shard_of_group.iter().filter(|&&s| s == id).count() as u64;
        assert_eq!(shard["groups"], expected, "shard {id}: {shards}");
    }
    let (status, list) = server.call("GET", "/v1/groups", None);
    assert_eq!(status, 200);
    let listed: Vec<&str> = list["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| g["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(listed, groups, "every shard's groups, by name");

    // Unload the first group's shard: its groups answer 503 until it is
    // loaded again; a group of another shard is served meanwhile.
    let unloaded = shard_of_group[0];
    let other = shard_of_group
        .iter()
        .position(|&s| s != unloaded)
        .expect("a group of another shard");
    let (status, change) = server.call("POST", &format!("/v1/shards/{unloaded}/unload"), None);
    assert_eq!(status, 200, "{change}");
    assert_eq!(change["changed"], true);
    assert!(!served(&server).contains(&u64::from(unloaded)));
    let (status, refused) = members[0].try_heartbeat(&server, &groups[0], json!({}));
    assert_eq!(
        (status, &refused["error"]["code"]),
        (503, &json!("shard_unavailable")),
        "{refused}"
    );
    let (status, refused) = server.call("GET", &format!("/v1/groups/{}", groups[0]), None);
    assert_eq!(
        (status, &refused["error"]["code"]),
        (503, &json!("shard_unavailable"))
    );
    let epoch = members[other].member_epoch;
    members[other].heartbeat(&server, &groups[other]);
    assert_eq!(members[other].member_epoch, epoch);
    let (status, again) = server.call("POST", &format!("/v1/shards/{unloaded}/unload"), None);
    assert_eq!((status, &again["changed"]), (200, &json!(false)));

    let (status, change) = server.call("POST", &format!("/v1/shards/{unloaded}/load"), None);
    assert_eq!(
        (status, &change["changed"]),
        (200, &json!(true)),
        "{change}"
    );
    assert_eq!(served(&server), (0..64).collect());
    // The member kept its tasks and epoch through the unload: nothing
    // rebalanced.
    let (epoch, held) = (members[0].member_epoch, members[0].active.clone());
    members[0].heartbeat(&server, &groups[0]);
    assert_eq!(
        (members[0].member_epoch, &members[0].active),
        (epoch, &held)
    );

    let (status, unknown) = server.call("POST", "/v1/shards/64/unload", None);
    assert_eq!(
        (status, &unknown["error"]["code"]),
        (404, &json!("unknown_shard"))
    );
    let metrics = common::Server::agent()
        .get(&format!("{}/metrics", server.base))
        .call()
        .expect("GET /metrics")
        .body_mut()
        .read_to_string()
        .expect("a body");
    assert!(metrics.contains("assignd_shards 64"), "{metrics}");
    assert!(metrics.contains("assignd_shards_served 64"), "{metrics}");
    let _ = std::fs::remove_dir_all(&data_dir);
}

#[test]
fn a_data_dir_keeps_the_shard_count_it_was_created_with() {
    let data_dir = common::scratch("shards-count");
    let dir = data_dir.to_str().expect("a UTF-8 path");
    {
        let server = Server::start(&data_dir, &["--shards", "4"]);
        let (_, shards) = server.call("GET", "/v1/shards", None);
        assert_eq!(shards["shard_count"], 4, "{shards}");
    }
    let refused = common::assignd(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        dir,
        "--shards",
        "8",
    ]);
    common::assert_one_error_line(&refused, 1, "has 4 shards");
    let server = Server::start(&data_dir, &[]);
    let (_, shards) = server.call("GET", "/v1/shards", None);
    assert_eq!(shards["shard_count"], 4, "the data dir's count: {shards}");
    drop(server);
    let check = common::assignd(&["log", "check", "--data-dir", dir, "--shard", "3"]);
    assert!(check.status.success(), "{}", common::stderr(&check));
    assert!(common::stdout(&check).starts_with("shard 3: segment "));
    let unknown = common::assignd(&["log", "check", "--data-dir", dir, "--shard", "4"]);
    common::assert_one_error_line(&unknown, 1, "there is no shard 4");
    let _ = std::fs::remove_dir_all(&data_dir);
}

#[test]
fn a_data_dir_of_one_log_is_migrated_into_shards_on_first_start() {
    use assignd::log::{FsyncPolicy, LogSink};
    use assignd::protocol::core::{Coordinator, Heartbeat};
    use assignd::protocol::group::{GroupConfig, TopicConfig};

    // The data dir as assignd wrote it before shards: one log in DIR/log
    // holding twelve groups, each with a static member.
    let data_dir = common::scratch("shards-migration");
    let sink = LogSink::open(&data_dir.join("log"), FsyncPolicy::Always, &[]).expect("a log");
    let mut core = Coordinator::new(7);
    let groups: Vec<String> = (0..12).map(|i| format!("legacy-{i}")).collect();
    // The core's time only moves forward: each group 2 ms after the last.
    for (at, group) in (0..).step_by(2).zip(&groups) {
        let topics = vec![TopicConfig {
            name: "orders".into(),
            partitions: 4,
        }];
        let out = core
            .configure(group, GroupConfig::with_topics(topics), at)
            .expect("configure");
        sink.append(&out.records).expect("append");
        let (_, out) = core
            .heartbeat(
                &Heartbeat::join(group, Some("keeper"), vec!["orders".into()]),
                at + 1,
            )
            .expect("join");
        sink.append(&out.records).expect("append");
    }
    drop(sink);

    for run in ["the first start", "the second start"] {
        let server = Server::start(&data_dir, &["--shards", "16"]);
        for group in &groups {
            let (status, view) = server.call("GET", &format!("/v1/groups/{group}"), None);
            assert_eq!(status, 200, "{run}: {view}");
            let names: Vec<&str> = view["members"]
                .as_array()
                .expect("members")
                .iter()
                .filter_map(|m| m["name"].as_str())
                .collect();
            assert_eq!(names, ["keeper"], "{run}: {group}: {view}");
            assert!(view["group_epoch"].as_u64() >= Some(1), "{run}: {view}");
        }
        let (_, shards) = server.call("GET", "/v1/shards", None);
        assert_eq!(shards["shard_count"], 16, "{run}: {shards}");
        let total: u64 = shards["shards"]
            .as_array()
            .expect("shards")
            .iter()
            .map(|s| s["groups"].as_u64().expect("groups"))
            .sum();
        assert_eq!(total, 12, "{run}: {shards}");
        for group in &groups {
            let shard = shard_of(group, 16);
            let (_, shards) = server.call("GET", "/v1/shards", None);
            assert!(
                shards["shards"][shard as usize]["groups"].as_u64() >= Some(1),
                "{run}: {group} in shard {shard}: {shards}"
            );
        }
    }
    assert!(!data_dir.join("log").exists(), "the old log moved away");
    assert!(
        data_dir.join("log.before-shards").is_dir(),
        "the old log is kept for the operator"
    );
    let dir = data_dir.to_str().expect("a UTF-8 path");
    let check = common::assignd(&["log", "check", "--data-dir", dir]);
    assert!(check.status.success(), "{}", common::stderr(&check));
    assert!(common::stdout(&check).ends_with("ok\n"));
    let _ = std::fs::remove_dir_all(&data_dir);
}
