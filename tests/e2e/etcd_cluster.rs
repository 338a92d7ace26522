//! Cluster mode through the real binary, against a real 3-member etcd
//! cluster on loopback (`LocalEtcd`: free ports, a temporary folder): two
//! nodes split the shards; a node killed with -9 has its shards taken over
//! with their groups, epochs and assignments, and its members keep their
//! tasks; an owner paused past its lease (SIGSTOP) answers nothing from
//! its stale state when it resumes and steps down; a node stopped with
//! SIGTERM hands its shards over.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use assignd::cluster::local_etcd::LocalEtcd;
use common::{Member, Server};
use serde_json::{Value, json};

const SHARDS: u64 = 8;
/// The lease TTL the nodes run with: takeovers are due within two of it.
const LEASE_TTL_MS: u64 = 2_000;
/// How long a test waits for the cluster to reach a state: a bound, not a
/// wait.
const SETTLE_WITHIN: Duration = Duration::from_secs(60);

struct Cluster {
    _runtime: tokio::runtime::Runtime,
    etcd: LocalEtcd,
    prefix: String,
}

impl Cluster {
    fn start(name: &str) -> Cluster {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let etcd = runtime
            .block_on(LocalEtcd::start(&common::scratch(name), 3))
            .unwrap_or_else(|e| panic!("{e:#}"));
        Cluster {
            _runtime: runtime,
            etcd,
            prefix: format!("/{name}/"),
        }
    }

    fn node(&self, name: &str) -> Server {
        self.node_with_lease(name, LEASE_TTL_MS)
    }

    fn node_with_lease(&self, name: &str, lease_ttl_ms: u64) -> Server {
        let endpoints = self.etcd.endpoints().join(",");
        let ttl = lease_ttl_ms.to_string();
        let shards = SHARDS.to_string();
        Server::start(
            &common::scratch(&format!("{}-{name}", self.prefix.trim_matches('/'))),
            &[
                "--etcd",
                &endpoints,
                "--etcd-prefix",
                &self.prefix,
                "--node",
                name,
                "--lease-ttl-ms",
                &ttl,
                "--shards",
                &shards,
            ],
        )
    }
}

fn served(server: &Server) -> BTreeSet<u64> {
    server.served_shards()
}

/// Waits until the nodes serve `counts` shards each (in order), disjoint;
/// returns how long that took.
fn wait_for_shares(nodes: &[&Server], counts: &[usize]) -> Duration {
    let started = Instant::now();
    loop {
        let sets: Vec<BTreeSet<u64>> = nodes.iter().map(|n| served(n)).collect();
        let all: BTreeSet<u64> = sets.iter().flatten().copied().collect();
        let total: usize = sets.iter().map(BTreeSet::len).sum();
        if sets.iter().map(BTreeSet::len).eq(counts.iter().copied()) && all.len() == total {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < SETTLE_WITHIN,
            "the nodes serve {sets:?}, not {counts:?} shards each"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn group_config() -> Value {
    json!({"topics": [{"name": "orders", "partitions": 4}], "expansion_timeout_ms": 100})
}

/// Heartbeats `member` until it holds all four tasks of its group.
fn settle(server: &Server, member: &mut Member, group: &str) {
    let deadline = Instant::now() + SETTLE_WITHIN;
    while member.active.len() < 4 || !member.revoking.is_empty() {
        assert!(Instant::now() < deadline, "{group}: {:?}", member.active);
        member.heartbeat(server, group);
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What must survive a takeover of a group: its epochs and, per member,
/// its slot, member id, member epoch and active tasks.
fn durable_part(view: &Value) -> Value {
    let members: Vec<Value> = view["members"]
        .as_array()
        .expect("members")
        .iter()
        .map(|m| json!([m["slot"], m["member_id"], m["member_epoch"], m["active"]]))
        .collect();
    json!({
        "group_epoch": view["group_epoch"],
        "target_epoch": view["target_epoch"],
        "members": members,
    })
}

const GROUPS: [&str; 8] = ["g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7"];

/// Creates the groups on `a` (serving every shard), each with one settled
/// static member.
fn groups_with_members(a: &Server) -> Vec<Member> {
    GROUPS
        .iter()
        .map(|group| {
            let (status, body) =
                a.call("PUT", &format!("/v1/groups/{group}"), Some(&group_config()));
            assert_eq!(status, 201, "{body}");
            let mut member = Member::join(a, group, "worker");
            settle(a, &mut member, group);
            member
        })
        .collect()
}

/// The node of `nodes` that serves `group` now.
fn owner<'a>(nodes: &[&'a Server], group: &str) -> &'a Server {
    let shard = assignd::protocol::shard::shard_of(group, SHARDS as u32);
    nodes
        .iter()
        .find(|n| served(n).contains(&u64::from(shard)))
        .unwrap_or_else(|| panic!("nobody serves {group}"))
}

/// Sends `server` the signal `name` (`-STOP`, `-TERM`, ...).
#[cfg(unix)]
fn signal(server: &Server, name: &str) {
    let status = std::process::Command::new("kill")
        .args([name, &server.child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill {name}");
}

#[test]
fn a_killed_nodes_shards_are_taken_over_with_their_groups_and_members_keep_their_tasks() {
    let cluster = Cluster::start("kill9");
    let a = cluster.node("a");
    wait_for_shares(&[&a], &[SHARDS as usize]);
    let mut members = groups_with_members(&a);

    let mut b = cluster.node("b");
    wait_for_shares(&[&a, &b], &[4, 4]);
    let on_b: Vec<usize> = (0..GROUPS.len())
        .filter(|&i| std::ptr::eq(owner(&[&a, &b], GROUPS[i]), &b))
        .collect();
    assert!(!on_b.is_empty(), "some group moved to b");
    let mut before = Vec::new();
    for &i in &on_b {
        // The moved group answers on b, from what a wrote.
        members[i].heartbeat(&b, GROUPS[i]);
        assert_eq!(members[i].active.len(), 4, "{} keeps its tasks", GROUPS[i]);
        let (status, view) = b.call("GET", &format!("/v1/groups/{}", GROUPS[i]), None);
        assert_eq!(status, 200, "{view}");
        before.push(durable_part(&view));
    }

    b.child.kill().expect("kill -9 b");
    let _ = b.child.wait();
    let took = wait_for_shares(&[&a], &[SHARDS as usize]);
    eprintln!(
        "takeover after kill -9: {} ms (lease TTL {LEASE_TTL_MS} ms)",
        took.as_millis()
    );
    assert!(
        took < Duration::from_millis(2 * LEASE_TTL_MS + 3_000),
        "taken over in {took:?}"
    );
    for (k, &i) in on_b.iter().enumerate() {
        let (status, view) = a.call("GET", &format!("/v1/groups/{}", GROUPS[i]), None);
        assert_eq!(status, 200, "{view}");
        assert_eq!(durable_part(&view), before[k], "{} as b left it", GROUPS[i]);
        let held = members[i].active.clone();
        let epoch = members[i].member_epoch;
        members[i].heartbeat(&a, GROUPS[i]);
        assert_eq!(members[i].active, held, "{}: no rebalance", GROUPS[i]);
        assert_eq!(
            members[i].member_epoch, epoch,
            "{}: no new epoch",
            GROUPS[i]
        );
    }
}

#[cfg(unix)]
#[test]
fn an_owner_paused_past_its_lease_answers_nothing_stale_and_steps_down() {
    let cluster = Cluster::start("sigstop");
    let a = cluster.node("a");
    wait_for_shares(&[&a], &[SHARDS as usize]);
    let mut members = groups_with_members(&a);
    let b = cluster.node("b");
    wait_for_shares(&[&a, &b], &[4, 4]);
    let i = (0..GROUPS.len())
        .find(|&i| std::ptr::eq(owner(&[&a, &b], GROUPS[i]), &b))
        .expect("a group on b");
    members[i].heartbeat(&b, GROUPS[i]);

    signal(&b, "-STOP");
    wait_for_shares(&[&a], &[SHARDS as usize]);
    signal(&b, "-CONT");
    // Resumed, b still holds the shard in memory: it must not answer from
    // it (its lease has ended; a owns the group now).
    let (status, answer) = members[i].try_heartbeat(&b, GROUPS[i], json!({}));
    assert_eq!(status, 503, "{answer}");
    assert_eq!(answer["error"]["code"], "shard_unavailable", "{answer}");
    // It steps down, joins again and gets its share back; the group's
    // member is intact through all of it.
    wait_for_shares(&[&a, &b], &[4, 4]);
    let server = owner(&[&a, &b], GROUPS[i]);
    let held = members[i].active.clone();
    members[i].heartbeat(server, GROUPS[i]);
    assert_eq!(members[i].active, held);
}

#[cfg(unix)]
#[test]
fn a_node_stopped_with_sigterm_hands_its_shards_over() {
    let cluster = Cluster::start("sigterm");
    // A lease long enough that a takeover by expiry could not pass for
    // a hand-over.
    let lease_ttl_ms = 60_000;
    let a = cluster.node_with_lease("a", lease_ttl_ms);
    let mut b = cluster.node_with_lease("b", lease_ttl_ms);
    wait_for_shares(&[&a, &b], &[4, 4]);
    signal(&b, "-TERM");
    let exited = b.child.wait().expect("b exits");
    assert!(exited.success(), "b exits cleanly: {exited}");
    let took = wait_for_shares(&[&a], &[SHARDS as usize]);
    eprintln!("hand-over on SIGTERM: {} ms", took.as_millis());
    // Released, not expired: a takes them in its next placement rounds,
    // long before b's lease would have ended.
    assert!(
        took < Duration::from_millis(lease_ttl_ms / 2),
        "took {took:?}"
    );
}
