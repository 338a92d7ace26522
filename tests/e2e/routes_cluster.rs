//! The routing API in a 3-node cluster through the real binaries: any
//! node answers a reader-token read (forwarded to the group's
//! coordinator), a stream is redirected there, and a watch survives a
//! kill -9 of the coordinator: it resumes from its epoch on the new one,
//! whose table (recovered from the group's records in etcd) neither goes
//! back nor misses the change that follows.

use crate::common;

use std::time::{Duration, Instant};

use crate::common::{Member, Server};
use crate::routes::get_as;
use assignd::cluster::local_etcd::LocalEtcd;
use serde_json::{Value, json};

/// The group every test here routes (the key-value example's too).
pub(crate) const GROUP: &str = "kv";
const READER_TOKEN: &str = "e2e-reader-token-77a1";
const WITHIN: Duration = Duration::from_secs(60);

pub(crate) struct Cluster {
    _runtime: tokio::runtime::Runtime,
    etcd: LocalEtcd,
    prefix: String,
}

impl Cluster {
    pub(crate) fn start(name: &str) -> Cluster {
        let (runtime, etcd) = common::local_etcd(&common::scratch(name), 3);
        Cluster {
            _runtime: runtime,
            etcd,
            prefix: format!("/{name}/"),
        }
    }

    pub(crate) fn node(&self, name: &str) -> Server {
        let endpoints = self.etcd.endpoints().join(",");
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
                "2000",
                "--shards",
                "4",
            ],
        )
    }
}

/// The base URL of the node that coordinates the group now, once one does.
pub(crate) fn coordinator(nodes: &[&Server]) -> String {
    let deadline = Instant::now() + WITHIN;
    loop {
        for node in nodes {
            let (status, answer) =
                node.call("GET", &format!("/v1/groups/{GROUP}/coordinator"), None);
            if status == 200
                && let Some(url) = answer["url"].as_str()
                && nodes.iter().any(|n| n.base == url)
            {
                return url.to_owned();
            }
        }
        assert!(Instant::now() < deadline, "no coordinator for {GROUP}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn node_at<'a>(nodes: &[&'a Server], url: &str) -> &'a Server {
    nodes.iter().find(|n| n.base == url).expect("a live node")
}

/// The table through `node` with the reader token, retried while the
/// group is between coordinators (503, as a router does).
fn routes_via(node: &Server, query: &str) -> Value {
    let deadline = Instant::now() + WITHIN;
    loop {
        let path = format!("/v1/groups/{GROUP}/routes{query}");
        let (status, table, _) = get_as(node, &path, Some(READER_TOKEN));
        if status == 200 {
            return table;
        }
        assert_eq!(status, 503, "{table}");
        assert!(Instant::now() < deadline, "never answered: {table}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Heartbeats `member` at the coordinator until its group is stable with
/// it holding tasks.
fn settle(nodes: &[&Server], member: &mut Member) {
    let deadline = Instant::now() + WITHIN;
    loop {
        let owner = node_at(nodes, &coordinator(nodes));
        let (status, _) = member.try_heartbeat(owner, GROUP, json!({}));
        let (_, view) = owner.call("GET", &format!("/v1/groups/{GROUP}"), None);
        if status == 200 && view["state"] == "stable" && !member.active.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "never stable: {view}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn any_node_answers_a_reader_and_a_watch_survives_a_kill_9_of_the_coordinator() {
    let cluster = Cluster::start("routes-cluster");
    let mut servers = vec![cluster.node("a"), cluster.node("b"), cluster.node("c")];
    let nodes: Vec<&Server> = servers.iter().collect();
    let config = json!({
        "topics": [{"name": "orders", "partitions": 8}],
        "expansion_timeout_ms": 100, "heartbeat_interval_ms": 200,
        "session_timeout_ms": 20_000, "learners": "off",
        "reader_token": READER_TOKEN,
    });
    let (status, answer) = nodes[0].put_group_retrying(GROUP, &config, WITHIN);
    assert!(status == 200 || status == 201, "{answer}");
    let owner_url = coordinator(&nodes);
    let owner = node_at(&nodes, &owner_url);
    let body = json!({
        "member_id": "", "member_epoch": 0, "topics": ["orders"],
        "endpoint": "http://10.0.0.5:8080",
    });
    let mut member = Member::join_with(owner, GROUP, "serving", body);
    settle(&nodes, &mut member);

    // Every node answers the same table to the reader token.
    let tables: Vec<Value> = nodes.iter().map(|n| routes_via(n, "")).collect();
    assert!(tables.windows(2).all(|w| w[0] == w[1]), "{tables:?}");
    let before = tables[0].clone();
    assert_eq!(
        before["members"][&member.member_id]["endpoint"],
        "http://10.0.0.5:8080"
    );
    // A stream is sent to the coordinator itself.
    let other = nodes.iter().find(|n| n.base != owner_url).unwrap();
    let redirected = ureq_stream_status(other);
    assert_eq!(redirected.0, 307);
    assert_eq!(
        redirected.1.as_deref(),
        Some(format!("{owner_url}/v1/groups/{GROUP}/routes").as_str())
    );

    // The coordinator dies; a watcher on a surviving node resumes from
    // its epoch on the new coordinator.
    let epoch = before["epoch"].as_u64().unwrap();
    let killed = servers.iter().position(|s| s.base == owner_url).unwrap();
    servers[killed].signal(libc::SIGKILL);
    let dead = servers.remove(killed);
    drop(dead);
    let nodes: Vec<&Server> = servers.iter().collect();
    let watcher = nodes[0];
    let after_takeover = routes_via(watcher, &format!("?after_epoch={epoch}&wait_ms=200"));
    assert!(
        after_takeover["epoch"].as_u64().unwrap() >= epoch,
        "{after_takeover}"
    );
    assert_eq!(
        after_takeover["members"], before["members"],
        "nothing was lost"
    );
    assert_eq!(after_takeover["active"], before["active"], "nobody moved");

    // A change after the takeover: the watch that waits past the
    // recovered epoch is told of it.
    let recovered = after_takeover["epoch"].as_u64().unwrap();
    let changed = std::thread::scope(|scope| {
        let waiting =
            scope.spawn(|| routes_via(watcher, &format!("?after_epoch={recovered}&wait_ms=20000")));
        let deadline = Instant::now() + WITHIN;
        loop {
            let new_owner = node_at(&nodes, &coordinator(&nodes));
            let (status, _) = member.try_heartbeat(
                new_owner,
                GROUP,
                json!({"endpoint": "http://10.0.0.9:8080"}),
            );
            if status == 200 {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the member never reached the new coordinator"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        waiting.join().unwrap()
    });
    assert!(changed["epoch"].as_u64().unwrap() > recovered, "{changed}");
    assert_eq!(
        changed["members"][&member.member_id]["endpoint"],
        "http://10.0.0.9:8080"
    );
}

/// Opens the routes stream at `node`: its status and `Location`.
fn ureq_stream_status(node: &Server) -> (u16, Option<String>) {
    let url = format!("{}/v1/groups/{GROUP}/routes", node.base);
    let response = Server::agent()
        .get(&url)
        .header("accept", "text/event-stream")
        .header("authorization", &format!("Bearer {READER_TOKEN}"))
        .call()
        .unwrap();
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    (response.status().as_u16(), location)
}
