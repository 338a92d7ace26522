//! A cluster node restarted through the real binary the moment it was
//! killed with -9, on the same data dir, against a real 3-member etcd:
//! it joins again at once (it revokes the lease its dead process left,
//! and says so in one line) instead of exiting because its own name is
//! still registered, takes its share back, and every group is as it was.
//! A different process with the same `--node` and another data dir is
//! still refused while the node lives, and one on the same data dir is
//! refused by the data dir's lock without touching the live node.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::Server;
use assignd::cluster::local_etcd::LocalEtcd;
use serde_json::{Value, json};

const SHARDS: u64 = 8;
const PREFIX: &str = "/restart/";
/// The default lease: long enough that a restart that waited for the old
/// registration to end would be a restart refused first.
const LEASE_TTL_MS: &str = "5000";
/// How long a test waits for the cluster to reach a state: a bound, not a
/// wait.
const SETTLE_WITHIN: Duration = Duration::from_secs(60);

fn serve_args<'a>(etcd: &'a str, name: &'a str) -> Vec<&'a str> {
    vec![
        "--etcd",
        etcd,
        "--etcd-prefix",
        PREFIX,
        "--node",
        name,
        "--lease-ttl-ms",
        LEASE_TTL_MS,
        "--shards",
        "8",
    ]
}

/// A node named `name` on `data_dir`, its log (at info) in `log`.
fn node(etcd: &LocalEtcd, data_dir: &Path, name: &str, log: &Path) -> Server {
    let endpoints = etcd.endpoints().join(",");
    let log = std::fs::File::create(log).expect("a log file");
    Server::start_with(data_dir, &serve_args(&endpoints, name), |command| {
        command.env("RUST_LOG", "info").stderr(log);
    })
}

/// Starts `assignd serve` as a node that must not join: waits for it to
/// exit and returns its exit code and stderr.
fn refused(etcd: &LocalEtcd, data_dir: &Path, name: &str) -> (Option<i32>, String) {
    let endpoints = etcd.endpoints().join(",");
    let child = Command::new(env!("CARGO_BIN_EXE_assignd"))
        .args(["serve", "--listen", "127.0.0.1:0"])
        .args(serve_args(&endpoints, name))
        .arg("--data-dir")
        .arg(data_dir)
        .env("ASSIGND_ADMIN_TOKEN", common::ADMIN_TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("assignd serve starts");
    let mut server = Server {
        child,
        base: String::new(),
    };
    let status = server.exit_by(
        Instant::now() + SETTLE_WITHIN,
        "the second node never exited",
    );
    let mut stderr = String::new();
    use std::io::Read;
    let _ = server
        .child
        .stderr
        .take()
        .expect("piped stderr")
        .read_to_string(&mut stderr);
    (status.code(), stderr)
}

/// Waits until the nodes serve `counts` shards each (in order), disjoint.
fn wait_for_shares(nodes: &[&Server], counts: &[usize]) {
    let started = Instant::now();
    loop {
        let sets: Vec<BTreeSet<u64>> = nodes.iter().map(|n| n.served_shards()).collect();
        let all: BTreeSet<u64> = sets.iter().flatten().copied().collect();
        let total: usize = sets.iter().map(BTreeSet::len).sum();
        if sets.iter().map(BTreeSet::len).eq(counts.iter().copied()) && all.len() == total {
            return;
        }
        assert!(
            started.elapsed() < SETTLE_WITHIN,
            "the nodes serve {sets:?}, not {counts:?} shards each"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every group's view, read through `node` (forwarded to its owner).
fn views(node: &Server, groups: &[String]) -> Vec<Value> {
    groups
        .iter()
        .map(|group| {
            let (status, view) = node.call("GET", &format!("/v1/groups/{group}"), None);
            assert_eq!(status, 200, "{group}: {view}");
            json!([view["group_epoch"], view["config"]])
        })
        .collect()
}

#[test]
fn a_node_killed_and_restarted_at_once_on_its_data_dir_joins_again() {
    let (_runtime, etcd) = common::local_etcd(&common::scratch("restart-etcd"), 3);
    let (dir_a, dir_b) = (common::scratch("restart-a"), common::scratch("restart-b"));
    let logs = common::scratch("restart-logs");
    let a = node(&etcd, &dir_a, "a", &logs.join("a.log"));
    let mut b = node(&etcd, &dir_b, "b", &logs.join("b.log"));
    wait_for_shares(&[&a, &b], &[4, 4]);
    let groups: Vec<String> = (0..SHARDS).map(|i| format!("g{i}")).collect();
    let config = json!({"topics": [{"name": "orders", "partitions": 4}]});
    for group in &groups {
        let (status, body) = a.call("PUT", &format!("/v1/groups/{group}"), Some(&config));
        assert_eq!(status, 201, "{body}");
    }
    let before = views(&a, &groups);

    b.child.kill().expect("kill -9 b");
    let _ = b.child.wait();
    // At once: b's lease, its registration and its shards' claims are
    // all still in etcd. Server::start fails the test if it exits.
    let b = node(&etcd, &dir_b, "b", &logs.join("b-restarted.log"));
    wait_for_shares(&[&a, &b], &[4, 4]);
    assert_eq!(views(&b, &groups), before, "every group as it was");
    let log = std::fs::read_to_string(logs.join("b-restarted.log")).expect("b's log");
    let said: Vec<&str> = log
        .lines()
        .filter(|line| line.contains("this node's previous process"))
        .collect();
    assert_eq!(said.len(), 1, "one line says what happened:\n{log}");
    assert!(said[0].contains("revoked its lease"), "{}", said[0]);

    // Another process named b, with its own data dir: refused, b lives on.
    let (code, stderr) = refused(&etcd, &common::scratch("restart-other"), "b");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("a live node is named \"b\" already"),
        "{stderr}"
    );
    // A second process on b's data dir: the lock refuses it before it
    // reaches etcd, so it revokes nothing of the live b.
    let (code, stderr) = refused(&etcd, &dir_b, "b");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("LOCK"), "{stderr}");
    assert_eq!(b.served_shards().len(), 4, "b still serves its share");
    let renewals = b
        .metric("assignd_cluster_lease_renewals_total")
        .expect("renewals");
    let deadline = Instant::now() + SETTLE_WITHIN;
    while b.metric("assignd_cluster_lease_renewals_total") <= Some(renewals) {
        assert!(Instant::now() < deadline, "b's lease is not renewed");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        b.metric("assignd_cluster_step_downs_total"),
        Some(0.0),
        "b never lost its lease"
    );
    let (status, health) = b.call("GET", "/healthz", None);
    assert_eq!((status, health), (200, json!({"status": "ok"})));
}
