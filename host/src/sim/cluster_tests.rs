//! The cluster layer's tests: many seeds of schedules served by a cluster
//! of nodes keep every invariant across takeovers, each seed run twice
//! with the same outcome; a node past its lease is fenced; and broken
//! nodes (serving past their lease, ignoring fencing) are caught.

use std::time::Instant;

use super::cluster::{Cluster, ClusterOptions, NodeFault, NodeState};
use super::rng::Rng;
use super::store::Op;
use super::{Options, Report, Stats, run_many_on, run_schedule_on, summary_line};
use crate::protocol::core::Coordinator;
use crate::protocol::group::{GroupConfig, Millis, TopicConfig};

/// Schedules of the main cluster test (each run twice).
const SCHEDULES: u64 = 120;

/// Steps per cluster schedule: more than one host's, so that every
/// schedule lives through several lease TTLs and takeovers.
const STEPS: u64 = 600;

fn options() -> Options {
    Options {
        steps: STEPS,
        ..Options::default()
    }
}

fn failures(reports: &[Report]) -> Vec<String> {
    reports
        .iter()
        .filter_map(|r| r.violation.as_ref().map(ToString::to_string))
        .collect()
}

#[test]
fn cluster_schedules_keep_every_invariant_across_takeovers_and_replay_exactly() {
    let started = Instant::now();
    let cluster = ClusterOptions::default();
    let first = run_many_on(1, SCHEDULES, &options(), Some(&cluster), 2);
    let second = run_many_on(1, SCHEDULES, &options(), Some(&cluster), 2);
    println!("{} in {:?}", summary_line(&first), started.elapsed());
    let failed = failures(&first);
    assert!(
        failed.is_empty(),
        "{} violations:\n{}",
        failed.len(),
        failed.join("\n")
    );
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(a.seed, b.seed);
        assert_eq!(a.fingerprint, b.fingerprint, "seed {} ran twice", a.seed);
        assert_eq!(a.stats, b.stats, "seed {} ran twice", a.seed);
    }
    let stats = first.iter().fold(Stats::default(), |mut s, r| {
        s.add(&r.stats);
        s
    });
    let c = &stats.cluster;
    println!("{c:?}");
    // The schedules reach what they are meant to exercise. Not fenced
    // writes: a correct node stops serving when its lease may have ended,
    // before its claim can go, so the guard is a backstop that the broken
    // nodes below and `a_paused_owner_is_taken_over_and_its_writes_are_fenced`
    // exercise.
    for (what, count) in [
        ("node crashes", c.node_crashes),
        ("node pauses", c.node_pauses),
        ("partitions", c.partitions),
        ("graceful leaves", c.node_leaves),
        ("takeovers", c.takeovers),
        ("step-downs", c.step_downs),
        ("redirects", c.redirects),
        ("unanswered heartbeats", c.unanswered),
        ("store answers lost", c.answers_lost),
        ("leases expired", c.leases_expired),
        ("static returns", stats.static_returns),
        ("targets", stats.targets),
    ] {
        assert!(count >= SCHEDULES / 20, "too few {what}: {count}");
    }
}

#[test]
fn a_cluster_seed_replays_its_trace_exactly() {
    let options = Options {
        trace: true,
        ..options()
    };
    let cluster = ClusterOptions::default();
    for seed in [3, 1_000_007] {
        let a = run_schedule_on(seed, &options, Some(&cluster));
        let b = run_schedule_on(seed, &options, Some(&cluster));
        assert!(a.violation.is_none(), "{:?}", a.violation);
        assert_eq!(a.trace, b.trace, "seed {seed}");
        assert_eq!(a.fingerprint, b.fingerprint);
        assert!(
            a.trace.iter().any(|line| line.contains("loads shard")),
            "the trace shows the cluster"
        );
    }
}

/// Runs every node event due up to `until`.
fn run_until(cluster: &mut Cluster, until: Millis) {
    while let Some((due, node)) = cluster.next_event()
        && due <= until
    {
        cluster.on_event(node, due);
    }
}

fn two_node_cluster(fault: Option<NodeFault>) -> Cluster {
    let options = ClusterOptions {
        nodes: Some(2),
        fault,
    };
    let mut cluster = Cluster::new(&mut Rng::new(7), &options, vec![1, 2], false);
    cluster.boot(0);
    cluster
}

/// A configure's records, to write as a batch.
fn some_records() -> Vec<crate::protocol::group::Record> {
    let config = GroupConfig::with_topics(vec![TopicConfig {
        name: "t0".into(),
        partitions: 2,
    }]);
    Coordinator::new(1)
        .configure("g", config, 0)
        .expect("a valid config")
        .records
}

#[test]
fn a_paused_owner_is_taken_over_and_its_writes_are_fenced() {
    let mut cluster = two_node_cluster(None);
    let owner = cluster.owner(0, 0).expect("boot serves every shard");
    let other = 1 - owner;
    assert!(cluster.persist(owner, 0, &some_records(), 1).acked);
    let ttl = cluster.ttl_ms;
    cluster.pause(owner, 3 * ttl);
    run_until(&mut cluster, 3 * ttl - 1);
    assert_eq!(cluster.owner(0, 3 * ttl - 1), Some(other), "taken over");
    assert_eq!(cluster.stats.takeovers, 1);
    // The paused node resumes with its stale core of shard 0: by its own
    // clock its lease is over, so it does not serve it; and a write it
    // tries anyway is refused by the store.
    run_until(&mut cluster, 3 * ttl);
    assert_eq!(cluster.nodes[owner].state, NodeState::Up);
    let now = 3 * ttl;
    assert!(cluster.serving(owner, 0, now).is_none());
    assert!(cluster.nodes[owner].served.contains_key(&0) || cluster.stats.step_downs > 0);
    if cluster.nodes[owner].served.contains_key(&0) {
        let persisted = cluster.persist(owner, 0, &some_records(), now);
        assert!(!persisted.landed, "a write under a lost claim never lands");
        assert_eq!(cluster.stats.writes_fenced, 1);
    }
    cluster
        .check()
        .expect("nothing durable lost, nothing unfenced");
    // The new owner replayed the batch the old one wrote.
    let records = cluster.durable_records(0).expect("decodes");
    assert_eq!(records, some_records());
}

#[test]
fn a_node_that_ignores_fencing_is_caught_by_the_monitor() {
    let mut cluster = two_node_cluster(Some(NodeFault::UnguardedWrites));
    let owner = cluster.owner(0, 0).expect("boot serves every shard");
    let ttl = cluster.ttl_ms;
    cluster.pause(owner, 3 * ttl);
    run_until(&mut cluster, 3 * ttl - 1);
    let now = 3 * ttl - 1;
    // Still paused, it wakes into a write of its stale core.
    let persisted = cluster.persist(owner, 0, &some_records(), now);
    assert!(persisted.landed, "an unguarded write lands");
    let breach = cluster.check().expect_err("the monitor sees it");
    assert!(breach.starts_with("invariant 8: fencing"), "{breach}");
}

/// Whether a violation names a broken invariant, or the log's records no
/// longer replaying to the state served (what a stale writer causes), not
/// a panic of the core.
fn is_a_breach(description: &str) -> bool {
    description.starts_with("invariant") || description.starts_with("replaying the records")
}

/// Schedules a broken node runs: a node serving past its lease is caught
/// in about one schedule in five (only where a takeover happens while it
/// still answers).
const FAULT_SCHEDULES: u64 = 80;

/// Runs `fault` over [`FAULT_SCHEDULES`] seeds: it is caught in at least
/// 10 of them, each time as a breach.
fn assert_caught(fault: NodeFault) {
    let cluster = ClusterOptions {
        nodes: None,
        fault: Some(fault),
    };
    let reports = run_many_on(1, FAULT_SCHEDULES, &options(), Some(&cluster), 2);
    let caught: Vec<&str> = reports
        .iter()
        .filter_map(|r| r.violation.as_ref())
        .map(|v| v.description.as_str())
        .collect();
    assert!(
        caught.len() >= 10,
        "caught in only {} of {FAULT_SCHEDULES} schedules: {caught:#?}",
        caught.len()
    );
    assert!(caught.iter().all(|d| is_a_breach(d)), "{caught:#?}");
}

#[test]
fn a_node_that_serves_past_its_lease_is_caught() {
    assert_caught(NodeFault::ServePastLease);
}

#[test]
fn a_node_that_ignores_fencing_is_caught() {
    assert_caught(NodeFault::UnguardedWrites);
}

/// A claim whose answer was lost stands in the store under its node's
/// lease while the node does not serve the shard: once the plan gives the
/// shard to another node, the claimant releases it and the other takes it
/// (found by the simulator: shard 2 of seed 319 stayed unserved forever).
#[test]
fn a_stale_claim_of_a_shard_not_served_is_released_to_the_plans_owner() {
    let mut cluster = two_node_cluster(None);
    let (a, b) = (0, 1);
    let shard_of_b = (0..2)
        .find(|&s| cluster.owner(s, 0) == Some(b))
        .expect("the boot spreads the shards");
    // b loses the shard (its core dropped, as after a failed load), and
    // a's claim of it lands with its answer lost.
    let dropped = cluster.nodes[b].served.remove(&shard_of_b).expect("served");
    let now = 1;
    cluster
        .store
        .txn(
            &[],
            &[Op::Delete {
                key: dropped.claim.key.clone(),
            }],
            now,
        )
        .unwrap();
    let lease_of_a = cluster.store.peek("nodes/n0").expect("registered").lease;
    cluster
        .store
        .txn(
            &[],
            &[Op::Put {
                key: dropped.claim.key.clone(),
                value: b"n0".to_vec(),
                lease: lease_of_a,
            }],
            now,
        )
        .unwrap();
    assert!(!cluster.nodes[a].served.contains_key(&shard_of_b));
    run_until(&mut cluster, 4 * PLACEMENT_ROUNDS_MS);
    assert_eq!(
        cluster.owner(shard_of_b, 4 * PLACEMENT_ROUNDS_MS),
        Some(b),
        "the plan's owner serves the shard"
    );
}

/// Longer than a placement round at every drawn TTL.
const PLACEMENT_ROUNDS_MS: Millis = 600;
