//! Cluster mode through the real binary, against a real 3-member etcd
//! cluster on loopback (`LocalEtcd`: free ports, a temporary folder): two
//! nodes split the shards; a node killed with -9 has its shards taken over
//! with their groups, epochs and assignments, its members keep their
//! tasks, and restarted it takes its share back; an owner paused past its
//! lease (SIGSTOP) answers nothing from its stale state when it resumes
//! and steps down; a node stopped with SIGTERM hands its shards over, and
//! one added takes its share, unnoticed by the members; any node answers
//! any request; one etcd member down changes nothing, and with the quorum
//! lost writes are refused until it returns, with nothing lost.

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
    runtime: tokio::runtime::Runtime,
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
            runtime,
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

    // b restarted: it joins again, takes its share back by hand-over, and
    // every group is as it was, wherever it is served.
    let before = durable_parts(&a);
    let b = cluster.node("b");
    wait_for_shares(&[&a, &b], &[4, 4]);
    for (i, group) in GROUPS.iter().enumerate() {
        let server = owner(&[&a, &b], group);
        let held = members[i].active.clone();
        members[i].heartbeat(server, group);
        assert_eq!(members[i].active, held, "{group}: no rebalance");
    }
    assert_eq!(
        durable_parts(&b),
        before,
        "b restarted: every group as it was"
    );
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

/// Members run by the client library, in this process, with both nodes
/// as bootstrap URLs: what each saw, and when each last heard its
/// coordinator. Each task's holder is tracked across a group's members:
/// a member told a task is assigned while another still holds it is
/// double ownership, recorded as trouble.
struct LibraryMembers {
    _runtime: tokio::runtime::Runtime,
    /// Per member: its group, the tasks it holds now, and every event
    /// that is an error, a loss or a fencing.
    seen: Vec<std::sync::Arc<std::sync::Mutex<Seen>>>,
    /// Static members per group.
    per_group: usize,
    _handles: Vec<assignd_client::MemberHandle>,
}

#[derive(Default)]
struct Seen {
    held: BTreeSet<String>,
    trouble: Vec<String>,
    /// Successful heartbeats: when each ended, and how long it took
    /// (redirects and retries within it included).
    answered: Vec<(Instant, Duration)>,
}

/// Per group, per task: the member that holds it.
type Holders = std::sync::Arc<std::sync::Mutex<std::collections::BTreeMap<String, String>>>;

struct Answered(std::sync::Arc<std::sync::Mutex<Seen>>);

impl assignd_client::HeartbeatObserver for Answered {
    fn heartbeat(&self, latency: Duration, result: Result<(), &assignd_client::ClientError>) {
        if result.is_ok() {
            self.0
                .lock()
                .unwrap()
                .answered
                .push((Instant::now(), latency));
        }
    }
}

/// The static member names of a group's members.
const WORKERS: [&str; 2] = ["worker-1", "worker-2"];

impl LibraryMembers {
    /// One member per group.
    fn start(bootstrap: &str, groups: &[&str]) -> LibraryMembers {
        Self::start_many(bootstrap, groups, 1)
    }

    /// `per_group` members per group (at most [`WORKERS`]).
    fn start_many(bootstrap: &str, groups: &[&str], per_group: usize) -> LibraryMembers {
        use assignd_client::{Event, Member, MemberConfig, NoLags};
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime");
        let mut seen = Vec::new();
        let mut handles = Vec::new();
        for group in groups {
            let holders = Holders::default();
            for worker in &WORKERS[..per_group] {
                let state = std::sync::Arc::new(std::sync::Mutex::new(Seen::default()));
                let config = MemberConfig::new(bootstrap, *group, ["orders"]).with_name(*worker);
                let (handle, mut events) = runtime.block_on(async {
                    Member::start_observed(
                        config,
                        NoLags,
                        std::sync::Arc::new(Answered(state.clone())),
                    )
                    .expect("a valid config")
                });
                let pump_state = state.clone();
                let holders = holders.clone();
                let me = format!("{group}/{worker}");
                runtime.spawn(async move {
                    while let Some(event) = events.recv().await {
                        let mut seen = pump_state.lock().unwrap();
                        let mut holders = holders.lock().unwrap();
                        let mut release = |seen: &mut Seen, tasks: &[assignd_client::Task]| {
                            for task in tasks {
                                let task = task.to_string();
                                seen.held.remove(&task);
                                if holders.get(&task) == Some(&me) {
                                    holders.remove(&task);
                                }
                            }
                        };
                        match event {
                            Event::Assigned(tasks) | Event::Promoted(tasks) => {
                                for task in tasks.iter().map(ToString::to_string) {
                                    if let Some(other) = holders.get(&task).filter(|o| **o != me) {
                                        seen.trouble.push(format!(
                                            "double ownership: {me} got {task}, which {other} holds"
                                        ));
                                    }
                                    holders.insert(task.clone(), me.clone());
                                    seen.held.insert(task);
                                }
                            }
                            Event::Revoked { tasks, ack } => {
                                release(&mut seen, &tasks);
                                ack.ack();
                            }
                            Event::Lost(tasks) => {
                                seen.trouble.push(format!("lost {tasks:?}"));
                                release(&mut seen, &tasks);
                            }
                            Event::Error(error) => seen.trouble.push(format!("error {error}")),
                            Event::Fenced { .. } | Event::Replaced { .. } => {
                                seen.trouble.push(format!("{event:?}"));
                            }
                            _ => {}
                        }
                    }
                });
                seen.push(state);
                handles.push(handle);
            }
        }
        LibraryMembers {
            _runtime: runtime,
            seen,
            per_group,
            _handles: handles,
        }
    }

    /// Waits until every group's members hold all four of its tasks,
    /// spread evenly.
    fn wait_settled(&self) {
        let share = 4 / self.per_group;
        let deadline = Instant::now() + SETTLE_WITHIN;
        while !self
            .seen
            .iter()
            .all(|s| s.lock().unwrap().held.len() == share)
        {
            assert!(Instant::now() < deadline, "the members never settled");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Every member's tasks now.
    fn holdings(&self) -> Vec<BTreeSet<String>> {
        self.seen
            .iter()
            .map(|s| s.lock().unwrap().held.clone())
            .collect()
    }

    /// The trouble that is not an error answer: losses, fencings,
    /// double ownership.
    fn worse_than_errors(&self) -> Vec<String> {
        self.trouble()
            .into_iter()
            .filter(|t| !t.starts_with("error "))
            .collect()
    }

    /// Waits until every member has been answered after `since`.
    fn wait_answered_after(&self, since: Instant) {
        let deadline = Instant::now() + SETTLE_WITHIN;
        while !self.seen.iter().all(|s| {
            s.lock()
                .unwrap()
                .answered
                .last()
                .is_some_and(|&(at, _)| at > since)
        }) {
            assert!(
                Instant::now() < deadline,
                "a member was never answered again"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The longest heartbeat of any member that ended in `from..=to`:
    /// how long a member waited for its coordinator.
    fn longest_heartbeat(&self, from: Instant, to: Instant) -> Duration {
        self.seen
            .iter()
            .flat_map(|s| {
                let seen = s.lock().unwrap();
                seen.answered
                    .iter()
                    .filter(|&&(at, _)| at > from && at <= to)
                    .map(|&(_, took)| took)
                    .collect::<Vec<_>>()
            })
            .max()
            .unwrap_or_default()
    }

    fn trouble(&self) -> Vec<String> {
        self.seen
            .iter()
            .flat_map(|s| s.lock().unwrap().trouble.clone())
            .collect()
    }
}

/// Any node answers any request: admin requests are forwarded to the
/// group's owner, heartbeats redirected there; members of the client
/// library, given both nodes, follow. Then a node stopped with SIGTERM
/// hands its shards over while it still redirects, and no member sees an
/// error, a loss or a fencing, nor a rebalance.
#[cfg(unix)]
#[test]
fn any_node_answers_and_a_sigterm_hand_over_is_seen_by_no_member() {
    let cluster = Cluster::start("routing");
    let lease_ttl_ms = 60_000;
    let a = cluster.node_with_lease("a", lease_ttl_ms);
    let mut b = cluster.node_with_lease("b", lease_ttl_ms);
    wait_for_shares(&[&a, &b], &[4, 4]);
    // Every group is created through a, half of them forwarded to b.
    for group in GROUPS {
        let (status, body) = a.call("PUT", &format!("/v1/groups/{group}"), Some(&group_config()));
        assert_eq!(status, 201, "{group}: {body}");
    }
    let on_b: Vec<&str> = GROUPS
        .iter()
        .copied()
        .filter(|g| std::ptr::eq(owner(&[&a, &b], g), &b))
        .collect();
    assert!(!on_b.is_empty(), "some group is on b");
    for group in &on_b {
        let (status, body) = b.call("GET", &format!("/v1/groups/{group}"), None);
        assert_eq!(status, 200, "b holds {group}: {body}");
        let (status, body) = a.call("GET", &format!("/v1/groups/{group}/coordinator"), None);
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["node"], "b", "{body}");
        assert_eq!(body["url"], b.base.as_str(), "{body}");
    }
    let (status, list) = a.call("GET", "/v1/groups", None);
    assert_eq!(status, 200, "{list}");
    assert_eq!(
        list["groups"].as_array().unwrap().len(),
        GROUPS.len(),
        "{list}"
    );
    // A heartbeat to a for a group on b: 307 to b.
    let (status, body) = a.call(
        "POST",
        &format!("/v1/groups/{}/heartbeat", on_b[0]),
        Some(&json!({"member_id": "", "member_epoch": 0, "topics": ["orders"]})),
    );
    assert_eq!(status, 307, "{body}");
    assert_eq!(
        body["error"]["location"],
        format!("{}/v1/groups/{}/heartbeat", b.base, on_b[0]).as_str()
    );

    // Members given b first: b goes away under them.
    let members = LibraryMembers::start(&format!("{},{}", b.base, a.base), &GROUPS);
    members.wait_settled();
    let epochs: Vec<Value> = GROUPS
        .iter()
        .map(|g| a.call("GET", &format!("/v1/groups/{g}"), None).1["group_epoch"].clone())
        .collect();

    let stopped = Instant::now();
    signal(&b, "-TERM");
    let exited = b.child.wait().expect("b exits");
    assert!(exited.success(), "b exits cleanly: {exited}");
    wait_for_shares(&[&a], &[SHARDS as usize]);
    members.wait_answered_after(Instant::now());
    let waited = members.longest_heartbeat(stopped, Instant::now());
    eprintln!(
        "graceful hand-over on SIGTERM: the longest heartbeat: {} ms",
        waited.as_millis()
    );
    assert_eq!(
        members.trouble(),
        Vec::<String>::new(),
        "no member saw trouble"
    );
    assert!(
        members
            .seen
            .iter()
            .all(|s| s.lock().unwrap().held.len() == 4),
        "every member keeps its tasks"
    );
    let after: Vec<Value> = GROUPS
        .iter()
        .map(|g| a.call("GET", &format!("/v1/groups/{g}"), None).1["group_epoch"].clone())
        .collect();
    assert_eq!(after, epochs, "no group rebalanced");
}

/// Creates every group of [`GROUPS`] through `node` (forwarded to its
/// owner where that is another node).
fn create_groups(node: &Server, config: &Value) {
    for group in GROUPS {
        let (status, body) = node.call("PUT", &format!("/v1/groups/{group}"), Some(config));
        assert_eq!(status, 201, "{group}: {body}");
    }
}

/// Every group's durable part, read through `node`.
fn durable_parts(node: &Server) -> Vec<Value> {
    GROUPS
        .iter()
        .map(|group| {
            let (status, view) = node.call("GET", &format!("/v1/groups/{group}"), None);
            assert_eq!(status, 200, "{group}: {view}");
            durable_part(&view)
        })
        .collect()
}

fn counter(node: &Server, name: &str) -> f64 {
    node.metric(name)
        .unwrap_or_else(|| panic!("{} has no {name}", node.base))
}

/// A node added to a running cluster takes its share by hand-over: the
/// members (two per group) follow their groups to it, and none sees an
/// error, a loss, a fencing or a task held twice, nor a rebalance.
#[test]
fn a_node_added_takes_its_share_and_no_member_notices() {
    let cluster = Cluster::start("added");
    let a = cluster.node("a");
    wait_for_shares(&[&a], &[SHARDS as usize]);
    create_groups(&a, &group_config());
    let members = LibraryMembers::start_many(&a.base, &GROUPS, 2);
    members.wait_settled();
    let before = durable_parts(&a);
    let holdings = members.holdings();

    let b = cluster.node("b");
    let took = wait_for_shares(&[&a, &b], &[4, 4]);
    eprintln!("a node added: its share taken in {} ms", took.as_millis());
    members.wait_answered_after(Instant::now());
    assert_eq!(
        members.trouble(),
        Vec::<String>::new(),
        "no member saw trouble"
    );
    assert_eq!(members.holdings(), holdings, "every member keeps its tasks");
    assert_eq!(durable_parts(&a), before, "no group rebalanced");
    assert!(counter(&b, "assignd_cluster_shards_taken_total") >= 4.0);
    assert!(counter(&a, "assignd_cluster_shards_handed_over_total") >= 4.0);
}

/// One etcd member down (the one every node asks first): the nodes go on
/// through the others; no lease lapses, no shard moves, writes land and
/// no member sees anything.
#[test]
fn with_one_etcd_member_down_service_goes_on() {
    let mut cluster = Cluster::start("one-down");
    let a = cluster.node_with_lease("a", 5_000);
    let b = cluster.node_with_lease("b", 5_000);
    wait_for_shares(&[&a, &b], &[4, 4]);
    create_groups(&a, &group_config());
    let members = LibraryMembers::start_many(&format!("{},{}", a.base, b.base), &GROUPS, 2);
    members.wait_settled();
    let shares = (served(&a), served(&b));
    let holdings = members.holdings();
    let renewed = (
        counter(&a, "assignd_cluster_lease_renewals_total"),
        counter(&b, "assignd_cluster_lease_renewals_total"),
    );

    cluster.etcd.kill(0);
    let killed = Instant::now();
    for (node, group) in [(&a, "added-through-a"), (&b, "added-through-b")] {
        let (status, body) =
            node.call("PUT", &format!("/v1/groups/{group}"), Some(&group_config()));
        assert_eq!(status, 201, "a write lands: {body}");
    }
    // Three renewals each through the members left: a lease outlives two
    // that fail.
    let deadline = Instant::now() + SETTLE_WITHIN;
    while counter(&a, "assignd_cluster_lease_renewals_total") < renewed.0 + 3.0
        || counter(&b, "assignd_cluster_lease_renewals_total") < renewed.1 + 3.0
    {
        assert!(Instant::now() < deadline, "the leases were not renewed");
        std::thread::sleep(Duration::from_millis(100));
    }
    members.wait_answered_after(killed);
    for node in [&a, &b] {
        assert_eq!(counter(node, "assignd_cluster_step_downs_total"), 0.0);
        assert_eq!(counter(node, "assignd_cluster_etcd_available"), 1.0);
    }
    assert_eq!((served(&a), served(&b)), shares, "no shard moved");
    assert_eq!(
        members.trouble(),
        Vec::<String>::new(),
        "no member saw trouble"
    );
    assert_eq!(members.holdings(), holdings);
}

/// etcd's quorum lost (two members of three killed): writes through
/// either node are refused, 503 `storage_unavailable`, and none is
/// acknowledged; members keep their tasks (their leases outlast the
/// outage). Both members restarted: service resumes with every group as
/// it was, and no member lost a task or saw one held twice.
#[test]
fn with_the_quorum_lost_writes_are_refused_and_service_resumes_when_it_returns() {
    let mut cluster = Cluster::start("quorum");
    let a = cluster.node("a");
    let b = cluster.node("b");
    wait_for_shares(&[&a, &b], &[4, 4]);
    // Members' leases longer than the outage: a lease ends an expansion
    // timeout and a heartbeat interval after its answer (the host may
    // fence a member that missed a revocation that long after), 18 s.
    let config =
        json!({"topics": [{"name": "orders", "partitions": 4}], "expansion_timeout_ms": 15_000});
    create_groups(&a, &config);
    let members = LibraryMembers::start_many(&format!("{},{}", a.base, b.base), &GROUPS, 2);
    members.wait_settled();
    let before = durable_parts(&a);
    let holdings = members.holdings();

    cluster.etcd.kill(0);
    cluster.etcd.kill(1);
    let lost = Instant::now();
    // Through each node, a new group: refused every time, until the
    // refusal names the storage.
    let mut said = BTreeSet::new();
    while said.len() < 2 {
        assert!(
            lost.elapsed() < SETTLE_WITHIN,
            "never refused as storage_unavailable"
        );
        for (node, group) in [(&a, "added-through-a"), (&b, "added-through-b")] {
            let (status, body) =
                node.call("PUT", &format!("/v1/groups/{group}"), Some(&group_config()));
            assert_eq!(
                status, 503,
                "nothing is acknowledged without a quorum: {body}"
            );
            if body["error"]["code"] == "storage_unavailable" {
                said.insert(group);
            }
        }
    }
    let refused_after = lost.elapsed();
    for node in [&a, &b] {
        let (status, health) = node.call("GET", "/healthz", None);
        assert_eq!(
            (status, health),
            (503, json!({"status": "storage_unavailable"}))
        );
        // The node's own reads fail too, within a request timeout.
        while counter(node, "assignd_cluster_etcd_available") != 0.0 {
            assert!(lost.elapsed() < SETTLE_WITHIN, "the node never saw etcd go");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    cluster.etcd.restart(0).expect("m0 restarts");
    cluster.etcd.restart(1).expect("m1 restarts");
    let back = Instant::now();
    for (node, group) in [(&a, "added-through-a"), (&b, "added-through-b")] {
        let deadline = Instant::now() + SETTLE_WITHIN;
        loop {
            let (status, body) =
                node.call("PUT", &format!("/v1/groups/{group}"), Some(&group_config()));
            // 200: one of the refused attempts landed after all once the
            // quorum was back (a write etcd did not answer may still be
            // applied: refused, not acknowledged), and this one updated it.
            if status == 201 || status == 200 {
                break;
            }
            assert_eq!(status, 503, "{body}");
            assert!(Instant::now() < deadline, "service never resumed: {body}");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let resumed_after = back.elapsed();
    eprintln!(
        "quorum lost: writes refused as storage_unavailable {} ms after; service resumed {} ms after the quorum returned",
        refused_after.as_millis(),
        resumed_after.as_millis()
    );
    wait_for_shares(&[&a, &b], &[4, 4]);
    members.wait_answered_after(Instant::now());
    assert_eq!(durable_parts(&a), before, "every group as it was");
    assert_eq!(members.worse_than_errors(), Vec::<String>::new());
    assert_eq!(members.holdings(), holdings, "every member keeps its tasks");
}

/// A module uploaded through one node is the cluster's: groups that
/// either node coordinates are bound to it through either node, a member
/// of a group on the other node gets its tasks from it, and every node
/// lists it.
#[test]
fn a_module_uploaded_through_one_node_serves_groups_on_every_node() {
    let cluster = Cluster::start("modules");
    let a = cluster.node("a");
    let b = cluster.node("b");
    wait_for_shares(&[&a, &b], &[4, 4]);
    create_groups(&a, &group_config());
    let bytes = std::fs::read(common::bad_guest("test-guest-spin-when-told")).expect("guest");
    let (status, module) = a.upload("custom-rr", "1.0.0", &bytes);
    assert_eq!(status, 201, "{module}");
    for (i, group) in GROUPS.iter().enumerate() {
        // Through a and through b in turn, wherever the group is.
        let through = if i % 2 == 0 { &a } else { &b };
        let (status, view) = through.call(
            "PUT",
            &format!("/v1/groups/{group}/assignor"),
            Some(&json!({"module": "custom-rr@1.0.0", "params": {}})),
        );
        assert_eq!(status, 200, "{group} through {}: {view}", through.base);
        assert_eq!(view["config"]["assignor"], "custom-rr@1.0.0", "{view}");
    }
    let on_b = GROUPS
        .iter()
        .find(|g| std::ptr::eq(owner(&[&a, &b], g), &b))
        .expect("a group on b");
    let mut member = Member::join(&b, on_b, "worker");
    settle(&b, &mut member, on_b);
    let (status, view) = b.call("GET", &format!("/v1/groups/{on_b}"), None);
    assert_eq!(status, 200, "{view}");
    assert_eq!(
        view["bindings"].as_array().unwrap().last().unwrap()["module"],
        "custom-rr@1.0.0",
        "{view}"
    );
    for node in [&a, &b] {
        let (status, list) = node.call("GET", "/v1/assignors", None);
        assert_eq!(status, 200, "{list}");
        assert!(
            list["assignors"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["name"] == "custom-rr" && m["id"] == module["id"]),
            "{} lists the module: {list}",
            node.base
        );
        // Kept: no node can check the other nodes' groups.
        let (status, body) = node.call("DELETE", "/v1/assignors/custom-rr@1.0.0", None);
        assert_eq!(status, 409, "{body}");
        assert_eq!(body["error"]["code"], "not_supported_in_cluster", "{body}");
    }
}

/// etcd's history is compacted as the cluster writes: by the node of the
/// lowest name, every `--etcd-compaction-interval-ms`, so that etcd's
/// database does not grow with every write.
#[test]
fn the_node_of_the_lowest_name_compacts_etcds_history() {
    let cluster = Cluster::start("compaction");
    let endpoints = cluster.etcd.endpoints().join(",");
    let start = |name: &str| {
        Server::start(
            &common::scratch(&format!("compaction-{name}")),
            &[
                "--etcd",
                &endpoints,
                "--etcd-prefix",
                &cluster.prefix,
                "--node",
                name,
                "--shards",
                &SHARDS.to_string(),
                "--etcd-compaction-interval-ms",
                "1000",
            ],
        )
    };
    let a = start("a");
    let b = start("b");
    wait_for_shares(&[&a, &b], &[4, 4]);
    create_groups(&a, &group_config());
    let deadline = Instant::now() + SETTLE_WITHIN;
    while counter(&a, "assignd_cluster_etcd_compactions_total") < 2.0 {
        assert!(Instant::now() < deadline, "a never compacted");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(counter(&b, "assignd_cluster_etcd_compactions_total"), 0.0);
    // The history before is gone: a read at the first revision fails.
    let old = cluster.runtime.block_on(async {
        let etcd = assignd::cluster::Etcd::connect(cluster.etcd.config(&cluster.prefix))
            .await
            .expect("etcd");
        let prefix = etcd.key("");
        etcd.range_at(&prefix, &assignd::cluster::etcd::prefix_end(&prefix), 10, 2)
            .await
    });
    let error = old.expect_err("revision 2 is compacted");
    assert!(error.to_string().contains("compacted"), "{error}");
}
