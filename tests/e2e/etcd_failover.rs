//! One etcd member of three killed, the one that leads, through the real
//! binary: two nodes serve groups whose members heartbeat while their
//! configs are written again and again, so that writes are in flight when
//! the leader dies. A write held by a member that had not yet noticed its
//! leader was gone moves to the new leader, and no member's lease runs
//! out: the members see no loss, fencing or replacement, the nodes keep
//! their shards, and every write lands.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::common::Server;
use crate::common::members::Members;
use serde_json::{Value, json};

const SHARDS: u64 = 8;
/// How long the test waits for the cluster to reach a state: a bound, not
/// a wait.
const SETTLE_WITHIN: Duration = Duration::from_secs(60);
/// How long the members are watched after the leader is killed: longer
/// than a member's lease, so a heartbeat held past it would have shown.
const WATCHED_FOR: Duration = Duration::from_secs(6);
const GROUPS: [&str; 6] = ["fo-a", "fo-b", "fo-c", "fo-d", "fo-e", "fo-f"];
const WORKERS: [&str; 2] = ["worker-1", "worker-2"];

/// A member's lease is its heartbeat interval plus its expansion timeout
/// (3 s here), counted from when it sent its last answered heartbeat: an
/// answer held 2 s or more behind a write costs the member its lease.
fn group_config(session_timeout_ms: u64) -> Value {
    json!({"topics": [{"name": "orders", "partitions": 4}],
           "heartbeat_interval_ms": 1_000, "expansion_timeout_ms": 2_000,
           "session_timeout_ms": session_timeout_ms})
}

fn node(etcd: &assignd::cluster::local_etcd::LocalEtcd, name: &str) -> Server {
    let endpoints = etcd.endpoints().join(",");
    let shards = SHARDS.to_string();
    Server::start(
        &common::scratch(&format!("etcd-failover-{name}")),
        &[
            "--etcd",
            &endpoints,
            "--etcd-prefix",
            "/etcd-failover/",
            "--node",
            name,
            "--lease-ttl-ms",
            "5000",
            "--shards",
            &shards,
        ],
    )
}

/// The index of the member that leads, as etcd's status API says.
fn leader(endpoints: &[String]) -> usize {
    let deadline = Instant::now() + SETTLE_WITHIN;
    loop {
        let statuses: Vec<Value> = endpoints
            .iter()
            .map(|endpoint| {
                let url = format!("{endpoint}/v3/maintenance/status");
                Server::agent()
                    .post(&url)
                    .send_json(json!({}))
                    .ok()
                    .and_then(|mut r| r.body_mut().read_json::<Value>().ok())
                    .unwrap_or(Value::Null)
            })
            .collect();
        let leader = statuses.iter().find_map(|s| s["leader"].as_str());
        if let Some(i) = statuses.iter().position(|s| {
            s["header"]["member_id"]
                .as_str()
                .is_some_and(|m| Some(m) == leader)
        }) {
            return i;
        }
        assert!(
            Instant::now() < deadline,
            "etcd has no leader: {statuses:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A config write: when it started, how long it took, its status and
/// answer.
struct Written {
    started: Instant,
    took: Duration,
    status: u16,
    answer: Value,
}

/// Writes `group`'s config again and again through `node` (alternating its
/// session timeout, so that each write is a record), until `stop`.
fn write_config(node: &Server, group: &str, stop: &AtomicBool) -> Vec<Written> {
    let mut written = Vec::new();
    for round in 0u64.. {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let config = group_config(45_000 + 1_000 * (round % 2));
        let started = Instant::now();
        let (status, answer) = node.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
        written.push(Written {
            started,
            took: started.elapsed(),
            status,
            answer,
        });
        // Less load on the machine, and still a write started within any
        // election.
        std::thread::sleep(Duration::from_millis(20));
    }
    written
}

fn counter(node: &Server, name: &str) -> f64 {
    node.metric(name).unwrap_or(0.0)
}

/// The etcd leader killed while config writes are in flight costs no
/// member its lease: a write held by a member whose leader died is sent
/// again to the new leader within the election, and a heartbeat waits at
/// most that long for its group's write. (With one bound of 3 s per etcd
/// request, a write sent to a follower just before the kill stayed
/// unanswered for the whole bound, and the heartbeats of its group waited
/// over 3 s, past their members' leases.)
#[cfg(unix)]
#[test]
fn a_killed_etcd_leader_costs_no_member_its_lease_and_every_write_lands() {
    let (_etcd_runtime, mut etcd) = common::local_etcd(&common::scratch("etcd-failover"), 3);
    let a = node(&etcd, "a");
    let b = node(&etcd, "b");
    let deadline = Instant::now() + SETTLE_WITHIN;
    loop {
        let (on_a, on_b) = (a.served_shards(), b.served_shards());
        if on_a.len() == 4 && on_b.len() == 4 && on_a.is_disjoint(&on_b) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the nodes never split the shards"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for group in GROUPS {
        let (status, body) = a.call(
            "PUT",
            &format!("/v1/groups/{group}"),
            Some(&group_config(45_000)),
        );
        assert_eq!(status, 201, "{group}: {body}");
    }
    let members = Members::start(&format!("{},{}", a.base, b.base), &GROUPS, &WORKERS);
    // Every member holds two tasks of its group's four.
    members.wait_settled(2, SETTLE_WITHIN);
    let holdings = members.holdings();
    let shares = (a.served_shards(), b.served_shards());

    let stop = Arc::new(AtomicBool::new(false));
    let (written, killed) = std::thread::scope(|scope| {
        // One writer per group, so that every group has a write in flight
        // or starting while the leader is gone.
        let writers: Vec<_> = GROUPS
            .iter()
            .zip([&a, &b].into_iter().cycle())
            .map(|(group, node)| {
                let stop = stop.clone();
                scope.spawn(move || write_config(node, group, &stop))
            })
            .collect();
        // Writes flow for a while, then the leader dies under them.
        std::thread::sleep(Duration::from_secs(1));
        let leader = leader(&etcd.endpoints());
        etcd.kill(leader);
        let killed = Instant::now();
        let deadline = killed + SETTLE_WITHIN;
        while killed.elapsed() < WATCHED_FOR || !members.all_answered_after(killed + WATCHED_FOR) {
            assert!(
                Instant::now() < deadline,
                "a member was never answered again"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::SeqCst);
        let written: Vec<Written> = writers
            .into_iter()
            .flat_map(|w| w.join().expect("a writer"))
            .collect();
        (written, killed)
    });

    let slowest_put = written.iter().map(|w| w.took).max().unwrap_or_default();
    eprintln!(
        "etcd leader killed under {} config writes: slowest heartbeat after the kill {} ms, slowest PUT {} ms",
        written.len(),
        members.longest_heartbeat_after(killed).as_millis(),
        slowest_put.as_millis()
    );
    assert_eq!(
        members.trouble(),
        Vec::<String>::new(),
        "no member lost its lease"
    );
    assert_eq!(members.holdings(), holdings, "every member kept its tasks");
    for w in &written {
        assert_eq!(w.status, 200, "every write lands: {}", w.answer);
    }
    assert!(
        written
            .iter()
            .any(|w| w.started > killed + Duration::from_secs(1)),
        "writes went on after the kill"
    );
    for node in [&a, &b] {
        assert_eq!(counter(node, "assignd_cluster_step_downs_total"), 0.0);
    }
    assert_eq!(
        (a.served_shards(), b.served_shards()),
        shares,
        "no shard moved"
    );
}
