//! The example key-value service (examples/kv) on a 3-node cluster
//! through the real binaries: workers and the router are given every
//! node's URL, the load runs all along, and the node that coordinates the
//! group is killed with -9. The takeover stops no worker (their leases
//! cover it), the router keeps routing (its watch resumes on the new
//! coordinator), nothing acknowledged is lost and every request
//! succeeds in the end.

use std::time::Instant;

use crate::kv::{
    GROUP, PARTITIONS, Process, SETTLED_REQUESTS, delta, group_config, kv_binary, start_load,
    start_router, start_worker, stats, wait_each_holds, wait_forwarded,
};
use crate::routes_cluster::{Cluster, coordinator};
use serde_json::{Value, json};

/// The load's last line, once it stopped: its counts.
fn stop_load(mut load: Process) -> Value {
    load.signal(libc::SIGTERM);
    let status = load.exit();
    let summary: Value = load
        .lines()
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("no summary\n{}", load.diagnose()));
    assert!(status.success(), "{}", load.diagnose());
    summary
}

#[test]
fn kv_service_loses_nothing_through_a_kill_9_of_the_coordinating_node() {
    kv_binary();
    let cluster = Cluster::start("kv-cluster");
    let mut nodes = vec![cluster.node("a"), cluster.node("b"), cluster.node("c")];
    let urls = nodes
        .iter()
        .map(|n| n.base.clone())
        .collect::<Vec<_>>()
        .join(",");
    let mut config = group_config();
    // A member's leases outlast a takeover: its session, and (for a
    // heartbeat in flight when the node died, which may have reached it)
    // its plain lease, an expansion timeout and a heartbeat interval.
    config["session_timeout_ms"] = json!(20_000);
    config["expansion_timeout_ms"] = json!(10_000);
    let (status, body) = nodes[0].put_group_retrying(GROUP, &config, crate::kv::REACH_WITHIN);
    assert!(status == 200 || status == 201, "{body}");
    let dir = crate::common::scratch("kv-cluster-processes");
    let worker = |label: &str| start_worker(&dir, &urls, label);
    let workers: Vec<Process> = ["w1", "w2", "w3"].into_iter().map(worker).collect();
    wait_each_holds(&workers.iter().collect::<Vec<_>>(), PARTITIONS / 3);
    let (_router, router_url) = start_router(&dir, &urls);
    let load = start_load(&dir, &router_url);
    wait_forwarded(&router_url, &stats(&router_url), SETTLED_REQUESTS);

    let before = stats(&router_url);
    let at = Instant::now();
    let owner = coordinator(&nodes.iter().collect::<Vec<_>>());
    let killed = nodes.iter().position(|n| n.base == owner).unwrap();
    nodes[killed].signal(libc::SIGKILL);
    drop(nodes.remove(killed));
    // Served again through the new coordinator, by the same workers.
    wait_forwarded(&router_url, &stats(&router_url), SETTLED_REQUESTS);
    let mut line = delta(
        "kill -9 of the coordinating node",
        &before,
        &stats(&router_url),
    );
    line["settled_ms"] = json!(at.elapsed().as_millis() as u64);
    println!("kv rebalance: {line}");
    for worker in &workers {
        assert_eq!(
            worker.count("lost"),
            0,
            "a takeover costs no worker a task\n{}",
            worker.diagnose()
        );
    }
    wait_each_holds(&workers.iter().collect::<Vec<_>>(), PARTITIONS / 3);

    let summary = stop_load(load);
    println!("kv load (cluster): {summary}");
    assert_eq!(summary["lost"], 0, "{summary}");
    assert_eq!(
        summary["unfinished"], 0,
        "every request succeeded in the end: {summary}"
    );
    assert!(summary["puts_ok"].as_u64().unwrap() > 0, "{summary}");
}
