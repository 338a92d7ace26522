//! A rollout in a cluster on etcd, through the real binary: it is started
//! on the node that does not serve shard 0 (and forwarded), the node that
//! does coordinates it, is killed with SIGKILL mid-rollout, and the other
//! node takes shard 0 over, loads the rollout from etcd and finishes it.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{self, Server};

const SHARDS: u64 = 4;
const LEASE_TTL_MS: u64 = 2_000;
const SETTLE_WITHIN: Duration = Duration::from_secs(60);

fn node(etcd: &assignd::cluster::local_etcd::LocalEtcd, name: &str) -> Server {
    let endpoints = etcd.endpoints().join(",");
    Server::start(
        &common::scratch(&format!("node-{name}")),
        &[
            "--etcd",
            &endpoints,
            "--etcd-prefix",
            "/rollout-cluster/",
            "--node",
            name,
            "--lease-ttl-ms",
            &LEASE_TTL_MS.to_string(),
            "--shards",
            &SHARDS.to_string(),
        ],
    )
}

/// Polls until `done` holds, failing with `what` past the deadline.
fn eventually<T>(what: &str, mut done: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + SETTLE_WITHIN;
    loop {
        if let Some(value) = done() {
            return value;
        }
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Creates `group` through `via` and joins one member at its owner (the
/// heartbeat is redirected there).
fn group(nodes: &[&Server], via: &Server, group: &str) {
    let config = json!({"topics": [{"name": "orders", "partitions": 2}],
                        "session_timeout_ms": 600_000, "expansion_timeout_ms": 50});
    let (status, answer) = via.put_group_retrying(group, &config, SETTLE_WITHIN);
    assert!(status == 201 || status == 200, "{answer}");
    let join = json!({"member_id": "", "member_epoch": 0, "topics": ["orders"]});
    eventually(&format!("{group}'s member joins"), || {
        nodes.iter().find_map(|node| {
            let (status, _) = node.call(
                "POST",
                &format!("/v1/groups/{group}/heartbeat"),
                Some(&join),
            );
            (status == 200).then_some(())
        })
    });
}

/// The rollout's status through `node`, once it answers (503 while shard
/// 0 moves).
fn status(node: &Server, id: &str) -> Option<Value> {
    let (status, answer) = node.call("GET", &format!("/v1/rollouts/{id}"), None);
    (status == 200).then_some(answer)
}

#[test]
fn a_rollout_survives_a_kill_9_of_the_node_serving_shard_0_and_finishes() {
    let (_runtime, etcd) = common::local_etcd(&common::scratch("etcd"), 1);
    let a = node(&etcd, "a");
    let b = node(&etcd, "b");
    let zero_on_a = eventually("both nodes serve a share of the shards", || {
        let (on_a, on_b) = (a.served_shards(), b.served_shards());
        (on_a.len() + on_b.len() == SHARDS as usize && !on_a.is_empty() && !on_b.is_empty())
            .then(|| on_a.contains(&0))
    });
    let (mut coordinator, other) = if zero_on_a { (a, b) } else { (b, a) };
    let names: Vec<String> = (0..6).map(|i| format!("cl-{i}")).collect();
    for name in &names {
        group(&[&coordinator, &other], &other, name);
    }
    let body = json!({"id": "spread", "module": "range", "groups": "prefix:cl-",
                      "steps": "1,50%,100%", "every": "3s", "shadow_for": "1s"});
    let (status_code, answer) = other.call("POST", "/v1/rollouts", Some(&body));
    assert_eq!(status_code, 201, "started through the other node: {answer}");
    let before = eventually("the rollout binds its first step", || {
        status(&other, "spread").filter(|s| s["groups"]["bound"].as_u64() >= Some(1))
    });
    assert_eq!(
        before["phase"],
        json!({"phase": "step", "step": 1}),
        "mid-rollout: {before:#}"
    );
    coordinator.signal(libc::SIGKILL);
    let _ = coordinator.child.wait();
    let end = eventually("the survivor finishes the rollout", || {
        status(&other, "spread").filter(|s| s["phase"]["phase"] == "completed")
    });
    assert_eq!(end["groups"]["bound"], 6, "{end:#}");
    for name in &names {
        let view = eventually(&format!("{name} answers"), || {
            let (status, view) = other.call("GET", &format!("/v1/groups/{name}"), None);
            (status == 200).then_some(view)
        });
        assert_eq!(view["config"]["assignor"], "range", "{name}");
    }
}
