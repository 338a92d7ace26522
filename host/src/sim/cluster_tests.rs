//! The cluster layer's tests: many seeds of schedules served by a cluster
//! of nodes keep every invariant across takeovers, each seed run twice
//! with the same outcome; members keep their tasks past their plain lease
//! on the unreached lease through takeovers; a node past its lease is
//! fenced; and broken nodes (serving past their lease, ignoring fencing)
//! and a member that counts on the unreached lease after an ambiguous
//! outcome are caught.

use std::collections::BTreeSet;
use std::time::Instant;

use super::check::{self, Belief};
use super::cluster::{Cluster, ClusterOptions, NodeFault, NodeState};
use super::member::{Reach, SimMember};
use super::rng::Rng;
use super::store::Op;
use super::{
    Options, assign_natively, run_many_on, run_schedule_on, summary_line, summed_stats,
    violation_lines,
};
use crate::protocol::core::{Coordinator, HeartbeatResponse, Output};
use crate::protocol::group::{GroupConfig, LearnerMode, Millis, TopicConfig};

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

#[test]
fn cluster_schedules_keep_every_invariant_across_takeovers_and_replay_exactly() {
    let started = Instant::now();
    let cluster = ClusterOptions::default();
    let first = run_many_on(1, SCHEDULES, &options(), Some(&cluster), 2);
    let second = run_many_on(1, SCHEDULES, &options(), Some(&cluster), 2);
    println!("{} in {:?}", summary_line(&first), started.elapsed());
    let failed = violation_lines(&first);
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
    let stats = summed_stats(&first);
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
        ("provably unreached heartbeats", c.unreached),
        ("members' networks down", c.cut_offs),
        ("leases extended while unreached", c.leases_extended),
        (
            "tasks kept through a takeover on the unreached lease",
            c.kept_through_takeovers,
        ),
        ("store answers lost", c.answers_lost),
        ("leases expired", c.leases_expired),
        ("static returns", stats.static_returns),
        ("targets", stats.targets),
        ("routing tables read", stats.routes_read),
        ("keys routed", stats.keys_routed),
        ("keys routed across moves", stats.keys_routed_across_moves),
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

/// The unreached lease in a schedule: a member whose heartbeats provably
/// reached no coordinator while its shard was taken over keeps processing
/// its tasks past its plain lease, on the unreached lease of its last
/// answer, and the node that took the shard over answers it with those
/// tasks still its, every invariant holding throughout. The first such seed
/// of a few, its trace read in order for one process.
#[test]
fn a_member_keeps_its_tasks_past_its_plain_lease_through_a_takeover() {
    let cluster = ClusterOptions::default();
    let reports = run_many_on(1, 20, &options(), Some(&cluster), 2);
    assert!(
        violation_lines(&reports).is_empty(),
        "{:?}",
        violation_lines(&reports)
    );
    let seed = reports
        .iter()
        .find(|r| r.stats.cluster.kept_through_takeovers > 0)
        .map(|r| r.seed)
        .expect("a schedule of 20 keeps tasks through a takeover");
    let traced = Options {
        trace: true,
        ..options()
    };
    let report = run_schedule_on(seed, &traced, Some(&cluster));
    assert!(report.violation.is_none(), "{:?}", report.violation);
    let kept = report
        .trace
        .iter()
        .position(|line| line.contains("from another load of the shard"))
        .expect("the trace says so");
    // `#S t=T   pN(wK): kept [...]`: the process, and what came before.
    let process = report.trace[kept]
        .split_whitespace()
        .nth(2)
        .and_then(|p| p.strip_suffix(':'))
        .expect("a process")
        .to_owned();
    let before = &report.trace[..kept];
    let past = before
        .iter()
        .rposition(|l| l.contains(&format!("{process}: keeps processing active=")))
        .expect("it processed past its plain lease first");
    // Its last answer before: every heartbeat since went unanswered.
    let answered = before[..past]
        .iter()
        .rposition(|l| l.contains(&format!(" {process} beat ")) && !l.contains("LOST"))
        .expect("an answer gave it the lease");
    let since = &before[answered + 1..];
    assert!(
        since
            .iter()
            .any(|l| l.contains(&format!("{process} heartbeat unanswered (Unreached)"))),
        "a heartbeat that provably reached no coordinator: {since:#?}"
    );
    assert!(
        !since
            .iter()
            .any(|l| l.contains(&format!("{process} heartbeat unanswered (MaybeReached)"))),
        "and none that may have reached one: {since:#?}"
    );
    assert!(
        since.iter().any(|l| l.contains("loads shard")),
        "a node took a shard over meanwhile: {since:#?}"
    );
}

/// The group of the hand-made schedules below.
const G: &str = "g";
/// Its members' expansion timeout and heartbeat interval.
const INTERVAL_MS: u64 = 500;

/// A core with an unreached grace and the simulated members of a
/// hand-made schedule; assignor calls are answered at once.
struct Hand {
    core: Coordinator,
    now: Millis,
    rng: Rng,
}

impl Hand {
    /// A core with a 4 s unreached grace and the group `G`: 2 tasks of
    /// `t0` by `range`, no learners, a 10 s session and `INTERVAL_MS`.
    fn new() -> Hand {
        let mut hand = Hand {
            core: Coordinator::new(1),
            now: 0,
            rng: Rng::new(7),
        };
        hand.core.set_unreached_grace_ms(4_000);
        let config = GroupConfig {
            learners: LearnerMode::Off,
            assignor: "range".into(),
            session_timeout_ms: 10_000,
            expansion_timeout_ms: INTERVAL_MS,
            heartbeat_interval_ms: INTERVAL_MS,
            ..GroupConfig::with_topics(vec![TopicConfig {
                name: "t0".into(),
                partitions: 2,
            }])
        };
        let out = hand.core.configure(G, config, 0).unwrap();
        hand.absorb(out);
        hand
    }

    /// What the members of `G` subscribe to.
    fn topics() -> BTreeSet<String> {
        ["t0".to_owned()].into()
    }

    fn absorb(&mut self, out: Output) {
        for call in out.assignor_calls {
            let answer = assign_natively(&call.assignor, &call.input);
            let more = self
                .core
                .assignment_computed(&call.group, call.epoch, answer, self.now);
            self.absorb(more);
        }
    }

    fn at(&mut self, now: Millis) {
        self.now = now;
        let out = self.core.tick(now);
        self.absorb(out);
    }

    /// `member`'s next heartbeat, handled; its answer taken in unless
    /// `lost` (then the member learns only that it may have reached).
    fn beat(&mut self, member: &mut SimMember, lost: bool) -> HeartbeatResponse {
        let response = self.handle(member);
        if lost {
            member.on_unanswered(Reach::MaybeReached, self.now, &mut self.rng);
        } else {
            member.on_response(&response, 0, self.now, &mut self.rng);
        }
        response
    }

    /// `member`'s next heartbeat, handled, its answer lost: the member
    /// learns so only at its request timeout, and meanwhile has that
    /// heartbeat in flight.
    fn beat_in_flight(&mut self, member: &mut SimMember) -> HeartbeatResponse {
        let response = self.handle(member);
        member.send_unanswered(self.now);
        response
    }

    /// `member`'s next heartbeat, which provably reaches no coordinator
    /// (its network is down).
    fn beat_unreached(&mut self, member: &mut SimMember) {
        if member.request(G, &BTreeSet::new(), self.now).is_some() {
            member.on_unanswered(Reach::Unreached, self.now, &mut self.rng);
        }
    }

    /// Each member whose time has come runs: `c` heartbeats, `a` (its
    /// network down) heartbeats in vain, or acts on its lease while its
    /// heartbeat is in flight, or learns at its timeout that it may have
    /// reached.
    fn run_due(&mut self, a: &mut SimMember, c: &mut SimMember) {
        let now = self.now;
        if now >= a.next_beat_ms {
            match a.in_flight_until_ms {
                Some(until) if now >= until => {
                    a.on_unanswered(Reach::MaybeReached, now, &mut self.rng);
                }
                Some(_) => {
                    a.wake_in_flight(now);
                }
                None => self.beat_unreached(a),
            }
        }
        if now >= c.next_beat_ms {
            self.beat(c, false);
        }
    }

    /// `from` was fenced and `to` holds both tasks.
    fn assert_taken_over(&self, from: &SimMember, to: &SimMember) {
        assert!(
            self.core
                .group(G)
                .unwrap()
                .slot_of(from.member_id())
                .is_none(),
            "{} was fenced",
            from.member_id()
        );
        assert_eq!(to.active().len(), 2, "and the other has both tasks");
    }

    /// `member`'s next heartbeat (due now), handled by the core.
    fn handle(&mut self, member: &mut SimMember) -> HeartbeatResponse {
        let request = member
            .request(G, &Self::topics(), self.now)
            .expect("a heartbeat is due");
        let (response, out) = self.core.heartbeat(&request, self.now).unwrap();
        self.absorb(out);
        response
    }

    /// Invariant 1 from the members' side, as the world checks it.
    fn check(&self, members: &[&SimMember]) -> Result<(), String> {
        let beliefs: Vec<Belief<'_>> = members.iter().map(|m| m.belief()).collect();
        check::check_beliefs(self.core.group(G).unwrap(), &beliefs)?;
        check::check_leased_beliefs(&beliefs, self.now)
    }
}

/// The unreached lease by hand, on a core with a 4 s unreached grace: a's
/// heartbeat at 1,700 ms starts a revocation (c joined) and reaches the
/// core, but its answer is lost; then a's network goes down (every later
/// heartbeat provably unreached). The core fences a an expansion timeout
/// and an interval later and c gets the task. A member that follows the
/// rule fell back to the plain lease of its last answer (1,000 + 1,000 ms)
/// at the lost answer; one that counts on the unreached lease after an
/// ambiguous outcome too keeps the task until 1,000 + 5,000 ms. Returns the
/// first breach the checks report, and a's lease after the lost answer.
fn lost_revocation_then_unreached(extends_when_unsure: bool) -> (Result<(), String>, Millis) {
    let mut hand = Hand::new();
    let topics = Hand::topics();
    let mut a = SimMember::new(0, None, topics.clone(), 0);
    a.extends_when_unsure = extends_when_unsure;
    let mut c = SimMember::new(1, None, topics, 0);
    hand.beat(&mut a, false);
    hand.at(500);
    hand.beat(&mut a, false);
    assert_eq!(a.active().len(), 2);
    hand.at(1_000);
    let answer = hand.beat(&mut a, false);
    assert_eq!(answer.lease_ms, 1_000);
    assert_eq!(answer.unreached_lease_ms, 5_000);
    hand.at(1_100);
    hand.beat(&mut c, false);
    hand.at(1_600);
    hand.beat(&mut c, false);
    hand.at(1_700);
    let told = hand.beat(&mut a, true);
    assert_eq!(told.revoking.len(), 1, "{told:?}");
    let lease_end = a.lease_end_ms().expect("answered before");
    let mut breach = Ok(());
    while hand.now < 7_000 && breach.is_ok() {
        let now = hand.now + 100;
        hand.at(now);
        hand.run_due(&mut a, &mut c);
        breach = hand.check(&[&a, &c]);
    }
    hand.assert_taken_over(&a, &c);
    (breach, lease_end)
}

/// The in-flight bound by hand, on a core with a 4 s unreached grace: a's
/// heartbeat at 1,500 ms provably reaches no coordinator (a is on the
/// unreached lease of its answer at 1,000 ms: until 6,000 ms). Its next, at
/// 1,700 ms, reaches the core, starts a revocation (c joined) and loses its
/// answer; a learns so only when its request times out, 3 s later. The
/// core fences a an expansion timeout and an interval after handling it
/// (2,700 ms) and c gets the task. A member that follows the rule counts,
/// while that heartbeat is in flight, on the unreached lease only until
/// its send time plus `unreached_flight_ms` (1,700 + 1,000 ms), past its
/// plain lease (2,000 ms); one that ignores the bound keeps the task until
/// 6,000 ms. Returns the first breach the checks report, and a's lease
/// while in flight.
fn revocation_told_in_flight_on_the_unreached_lease(
    ignores_flight_bound: bool,
) -> (Result<(), String>, Millis) {
    let mut hand = Hand::new();
    let topics = Hand::topics();
    let mut a = SimMember::new(0, None, topics.clone(), 0);
    a.request_timeout_ms = 3_000;
    a.ignores_flight_bound = ignores_flight_bound;
    let mut c = SimMember::new(1, None, topics, 0);
    hand.beat(&mut a, false);
    hand.at(500);
    hand.beat(&mut a, false);
    hand.at(1_000);
    let answer = hand.beat(&mut a, false);
    assert_eq!(answer.lease_ms, 1_000);
    assert_eq!(answer.unreached_lease_ms, 5_000);
    assert_eq!(answer.unreached_flight_ms, 1_000);
    hand.at(1_100);
    hand.beat(&mut c, false);
    hand.at(1_500);
    hand.beat_unreached(&mut a);
    assert_eq!(a.lease_end_ms(), Some(6_000), "on the unreached lease");
    hand.at(1_600);
    hand.beat(&mut c, false);
    hand.at(1_700);
    let told = hand.beat_in_flight(&mut a);
    assert_eq!(told.revoking.len(), 1, "{told:?}");
    let lease_end = a.lease_end_ms().expect("answered before");
    let mut breach = Ok(());
    while hand.now < 7_000 && breach.is_ok() {
        let now = hand.now + 100;
        hand.at(now);
        hand.run_due(&mut a, &mut c);
        breach = hand.check(&[&a, &c]);
    }
    hand.assert_taken_over(&a, &c);
    (breach, lease_end)
}

/// The checks caught a member holding both tasks (p0, p1) past its lease.
fn assert_lease_breach_of_both_tasks(checked: Result<(), String>) {
    let breach = checked.expect_err("the checks catch it");
    assert!(breach.starts_with("invariant 1 (leases):"), "{breach}");
    assert!(
        breach.contains("p0 (") && breach.contains("p1 ("),
        "{breach}"
    );
}

#[test]
fn a_member_that_ignores_the_flight_bound_is_caught() {
    let (honest, lease_end) = revocation_told_in_flight_on_the_unreached_lease(false);
    assert_eq!(honest, Ok(()));
    assert_eq!(lease_end, 2_700, "the send time plus the flight bound");
    let (broken, lease_end) = revocation_told_in_flight_on_the_unreached_lease(true);
    assert_eq!(lease_end, 6_000, "the whole unreached lease, wrongly");
    assert_lease_breach_of_both_tasks(broken);
}

#[test]
fn a_member_that_counts_on_the_unreached_lease_after_an_ambiguous_outcome_is_caught() {
    let (honest, lease_end) = lost_revocation_then_unreached(false);
    assert_eq!(honest, Ok(()));
    assert_eq!(lease_end, 2_000, "the plain lease after the lost answer");
    let (broken, lease_end) = lost_revocation_then_unreached(true);
    assert_eq!(lease_end, 6_000, "the unreached lease, wrongly");
    assert_lease_breach_of_both_tasks(broken);
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
/// (else the shard stays unserved for good).
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
