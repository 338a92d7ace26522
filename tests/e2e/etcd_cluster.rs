//! Cluster mode through the real binary, against a real 3-member etcd
//! cluster on loopback (`LocalEtcd`: free ports, a temporary folder): two
//! nodes split the shards; a node killed with -9 has its shards taken over
//! with their groups, epochs and assignments, its members keep their
//! tasks, and restarted it takes its share back; the owner of churning
//! groups (static and dynamic members joining and leaving) killed with -9
//! loses nothing it answered, and no task is held twice from the members'
//! view at any answer; an owner paused past its
//! lease (SIGSTOP) answers nothing from its stale state when it resumes
//! and steps down; a node stopped with SIGTERM hands its shards over, and
//! one added takes its share, unnoticed by the members; any node answers
//! any request; one etcd member down changes nothing, and with the quorum
//! lost writes are refused until it returns, with nothing lost, and
//! `/healthz` and every refusal say `storage_unavailable` whichever of the
//! node's etcd calls (a placement read, its lease renewal) fails first.

use crate::common;

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::common::{Member, Server};
use assignd::cluster::local_etcd::LocalEtcd;
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
        let (runtime, etcd) = common::local_etcd(&common::scratch(name), 3);
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
        self.node_prepared(name, lease_ttl_ms, |_| {})
    }

    /// A node whose log (info and up, one JSON object a line) goes to
    /// `log`.
    fn node_logged(&self, name: &str, lease_ttl_ms: u64, log: &Path) -> Server {
        let log = std::fs::File::create(log).expect("a log file");
        self.node_prepared(name, lease_ttl_ms, |command| {
            command
                .env("RUST_LOG", "info")
                .env("ASSIGND_LOG_FORMAT", "json")
                .stderr(log);
        })
    }

    fn node_prepared(
        &self,
        name: &str,
        lease_ttl_ms: u64,
        prepare: impl FnOnce(&mut std::process::Command),
    ) -> Server {
        let endpoints = self.etcd.endpoints().join(",");
        let ttl = lease_ttl_ms.to_string();
        let shards = SHARDS.to_string();
        Server::start_with(
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
            prepare,
        )
    }
}

/// The lines of a JSON log whose message starts with `message`.
fn logged(log: &Path, message: &str) -> Vec<Value> {
    std::fs::read_to_string(log)
        .expect("the log")
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| {
            line["fields"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with(message))
        })
        .collect()
}

fn served(server: &Server) -> BTreeSet<u64> {
    server.served_shards()
}

/// Waits until the nodes serve `counts` shards each (in order), disjoint,
/// and each of them routes every one of those shards to the node serving
/// it (its view of the directory caught up: until then, a request it
/// gets for a shard that just moved away is answered 503
/// `shard_unavailable`); returns how long that took.
fn wait_for_shares(nodes: &[&Server], counts: &[usize]) -> Duration {
    let started = Instant::now();
    loop {
        let sets: Vec<BTreeSet<u64>> = nodes.iter().map(|n| served(n)).collect();
        let all: BTreeSet<u64> = sets.iter().flatten().copied().collect();
        let total: usize = sets.iter().map(BTreeSet::len).sum();
        if sets.iter().map(BTreeSet::len).eq(counts.iter().copied())
            && all.len() == total
            && routes_agree(nodes, &sets)
        {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < SETTLE_WITHIN,
            "the nodes serve {sets:?}, not {counts:?} shards each"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits until `node`'s `GET /v1/shards` names itself and lists the live
/// nodes with the count of shards each owns, as `nodes` (the console's
/// cluster page reads it).
fn wait_for_shards_view(node: &Server, nodes: &[(&str, usize)]) {
    let started = Instant::now();
    loop {
        let (status, view) = node.call("GET", "/v1/shards", None);
        assert_eq!(status, 200, "{view}");
        let listed: Vec<(String, usize)> = view["nodes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|n| {
                let shards = n["shards"].as_array().map_or(0, Vec::len);
                (n["name"].as_str().unwrap_or_default().to_owned(), shards)
            })
            .collect();
        let wanted: Vec<(String, usize)> = nodes.iter().map(|&(n, c)| (n.to_owned(), c)).collect();
        if listed == wanted && view["node"].is_string() {
            return;
        }
        assert!(
            started.elapsed() < SETTLE_WITHIN,
            "the shards view lists {listed:?}, not {wanted:?}: {view}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether every node of `nodes` names, as the coordinator of a group of
/// each shard in `sets`, the node whose set holds it.
fn routes_agree(nodes: &[&Server], sets: &[BTreeSet<u64>]) -> bool {
    nodes.iter().all(|asked| {
        nodes.iter().zip(sets).all(|(owner, shards)| {
            shards.iter().all(|&shard| {
                let (status, body) = asked.call(
                    "GET",
                    &format!("/v1/groups/{}/coordinator", group_of_shard(shard)),
                    None,
                );
                status == 200 && body["url"] == owner.base.as_str()
            })
        })
    })
}

/// A group name whose shard is `shard`.
fn group_of_shard(shard: u64) -> String {
    (0..)
        .map(|i| format!("probe-{i}"))
        .find(|g| u64::from(assignd::protocol::shard::shard_of(g, SHARDS as u32)) == shard)
        .expect("some name lands on every shard")
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

/// The tests of this file take turns. Each runs an etcd cluster and
/// several nodes, and bounds how soon leases, takeovers and hand-overs
/// happen; two at once on a 2-core machine made those bounds a matter of
/// the machine's load (a different test timed out in each of three full
/// runs), not of the code.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn a_killed_nodes_shards_are_taken_over_with_their_groups_and_members_keep_their_tasks() {
    let _turn = one_at_a_time();
    let cluster = Cluster::start("kill9");
    let a = cluster.node("a");
    wait_for_shares(&[&a], &[SHARDS as usize]);
    let mut members = groups_with_members(&a);

    let mut b = cluster.node("b");
    wait_for_shares(&[&a, &b], &[4, 4]);
    wait_for_shards_view(&b, &[("a", 4), ("b", 4)]);
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
    let _turn = one_at_a_time();
    let cluster = Cluster::start("sigstop");
    let a = cluster.node("a");
    wait_for_shares(&[&a], &[SHARDS as usize]);
    let mut members = groups_with_members(&a);
    let b_log = common::scratch("sigstop-logs").join("b.log");
    let b = cluster.node_logged("b", LEASE_TTL_MS, &b_log);
    wait_for_shares(&[&a, &b], &[4, 4]);
    let i = (0..GROUPS.len())
        .find(|&i| std::ptr::eq(owner(&[&a, &b], GROUPS[i]), &b))
        .expect("a group on b");
    members[i].heartbeat(&b, GROUPS[i]);

    b.signal(libc::SIGSTOP);
    wait_for_shares(&[&a], &[SHARDS as usize]);
    b.signal(libc::SIGCONT);
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
    // Its step-down says what etcd answered: the old lease had expired,
    // not that etcd was unavailable.
    assert_eq!(
        logged(&b_log, "stepping down: revoking the old lease failed"),
        Vec::<Value>::new()
    );
    let expired = logged(&b_log, "stepping down: the old lease had expired already");
    assert!(!expired.is_empty(), "b's step-down names the expired lease");
}

#[cfg(unix)]
#[test]
fn a_node_stopped_with_sigterm_hands_its_shards_over() {
    let _turn = one_at_a_time();
    let cluster = Cluster::start("sigterm");
    // A lease long enough that a takeover by expiry could not pass for
    // a hand-over.
    let lease_ttl_ms = 60_000;
    let a = cluster.node_with_lease("a", lease_ttl_ms);
    let mut b = cluster.node_with_lease("b", lease_ttl_ms);
    wait_for_shares(&[&a, &b], &[4, 4]);
    b.signal(libc::SIGTERM);
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

/// Members whose plain lease is shorter than a takeover keep their tasks
/// through it: after kill -9 of their groups' owner, their heartbeats find
/// no coordinator (refused, redirected to the dead node, 503
/// `shard_unavailable`), so each keeps its tasks on the unreached lease of
/// its last answer (the plain one plus two node TTLs) until a survivor
/// answers it with the same tasks. No member loses a task or is fenced,
/// and nobody rebalances. (Before the unreached lease, every member here
/// stopped all its tasks: a 1 s interval and a 0.5 s expansion timeout
/// give a 1.5 s lease against a takeover of one TTL, 2 s, and more.)
#[cfg(unix)]
#[test]
fn members_keep_their_tasks_through_a_takeover_longer_than_their_plain_lease() {
    let _turn = one_at_a_time();
    let cluster = Cluster::start("unreached");
    let a = cluster.node("a");
    let mut b = cluster.node("b");
    wait_for_shares(&[&a, &b], &[4, 4]);
    let groups = groups_on(&b, "short-lease", 2);
    let config = json!({"topics": [{"name": "orders", "partitions": 4}],
                        "heartbeat_interval_ms": 1_000, "expansion_timeout_ms": 500});
    for group in &groups {
        create_group(&a, group, &config);
    }
    let names: Vec<&str> = groups.iter().map(String::as_str).collect();
    let members = LibraryMembers::start_many(&format!("{},{}", a.base, b.base), &names, 2);
    members.wait_settled();
    let before = members.holdings();
    let epochs = |node: &Server| -> Vec<Value> {
        groups
            .iter()
            .map(|g| node.call("GET", &format!("/v1/groups/{g}"), None).1["group_epoch"].clone())
            .collect()
    };
    let epochs_before = epochs(&a);

    b.child.kill().expect("kill -9 b");
    let _ = b.child.wait();
    let killed = Instant::now();
    let took = wait_for_shares(&[&a], &[SHARDS as usize]);
    members.wait_answered_after(killed + took);
    eprintln!(
        "takeover after kill -9: {} ms (node TTL {LEASE_TTL_MS} ms, members' plain lease 1,500 ms); longest answered heartbeat through it {} ms",
        took.as_millis(),
        members
            .longest_heartbeat(killed, Instant::now())
            .as_millis()
    );
    assert_eq!(members.worse_than_errors(), Vec::<String>::new());
    assert_eq!(members.holdings(), before, "every member kept its tasks");
    assert_eq!(epochs(&a), epochs_before, "nobody rebalanced");
}

/// Any node answers any request: admin requests are forwarded to the
/// group's owner, heartbeats redirected there; members of the client
/// library, given both nodes, follow. Then a node stopped with SIGTERM
/// hands its shards over while it still redirects, and no member sees an
/// error, a loss or a fencing, nor a rebalance.
#[cfg(unix)]
#[test]
fn any_node_answers_and_a_sigterm_hand_over_is_seen_by_no_member() {
    let _turn = one_at_a_time();
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
    b.signal(libc::SIGTERM);
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
/// A shard still moving between nodes (placement after a start, a join
/// or a hand-over) answers 503 `shard_unavailable`, "retry shortly": the
/// creation is retried, as any client would, until the shards settle.
fn create_groups(node: &Server, config: &Value) {
    for group in GROUPS {
        create_group(node, group, config);
    }
}

/// Creates `group` through `node`, retrying 503 `shard_unavailable` (its
/// shard still moving after a node joined), as any client would.
fn create_group(node: &Server, group: &str, config: &Value) {
    let (status, body) = node.put_group_retrying(group, config, SETTLE_WITHIN);
    assert_eq!(status, 201, "{group}: {body}");
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
    let _turn = one_at_a_time();
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
    let _turn = one_at_a_time();
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
    let _turn = one_at_a_time();
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

/// With etcd's quorum just lost, `node` is probed (a write: `group`
/// created, which the quorum loss must not acknowledge) until it has stepped
/// down twice (a whole step-down, its revoke and its new lease failing,
/// and the renewal after it). Every write is refused 503; from the moment
/// either signal says `storage_unavailable`, and at the latest from the
/// node's first step-down (it steps down because a renewal went
/// unanswered), every write is refused `storage_unavailable` (never
/// `shard_unavailable`, which a client takes for "reached no
/// coordinator") and `/healthz` says `storage_unavailable`. Before that
/// the node cannot know: a write may find its lease's bound passed while
/// the renewal is still unanswered. Then the quorum comes back and
/// service resumes.
fn quorum_loss_signals(cluster: &mut Cluster, node: &Server, group: &str) {
    let path = format!("/v1/groups/{group}");
    let step_downs = counter(node, "assignd_cluster_step_downs_total");
    let lost = Instant::now();
    let mut said = false;
    loop {
        let stepped_down = counter(node, "assignd_cluster_step_downs_total") - step_downs;
        if stepped_down >= 2.0 {
            break;
        }
        assert!(
            lost.elapsed() < SETTLE_WITHIN,
            "the node never stepped down"
        );
        let strict = said || stepped_down >= 1.0;
        let at = lost.elapsed().as_millis();
        let (status, body) = node.call("PUT", &path, Some(&group_config()));
        let code = body["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert_eq!(
            status, 503,
            "nothing is acknowledged without a quorum: {body}"
        );
        if strict {
            assert_eq!(
                code, "storage_unavailable",
                "{at} ms after the quorum was lost: {body}"
            );
        } else {
            assert!(
                ["storage_unavailable", "shard_unavailable"].contains(&code.as_str()),
                "{body}"
            );
        }
        let (status, health) = node.call("GET", "/healthz", None);
        if strict || status != 200 || code == "storage_unavailable" {
            assert_eq!(
                (status, &health),
                (503, &json!({"status": "storage_unavailable"})),
                "{at} ms after the quorum was lost: healthz after a write refused {code}"
            );
            said = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(said, "/healthz never said storage_unavailable");
    cluster.etcd.restart(0).expect("m0 restarts");
    cluster.etcd.restart(1).expect("m1 restarts");
    let deadline = Instant::now() + SETTLE_WITHIN;
    loop {
        let (status, body) = node.call("PUT", &path, Some(&group_config()));
        if status == 201 || status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "service never resumed: {body}");
        std::thread::sleep(Duration::from_millis(100));
    }
    while node.call("GET", "/healthz", None).0 != 200 {
        assert!(Instant::now() < deadline, "/healthz never said ok again");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// etcd's quorum lost just after the node renewed its lease: a placement
/// read fails first (the next renewal is a third of the lease away), and
/// the renewals, the step-down and the new lease fail after it.
#[test]
fn with_the_quorum_lost_after_a_renewal_the_signals_say_storage_unavailable() {
    let _turn = one_at_a_time();
    let mut cluster = Cluster::start("quorum-read-first");
    let log = common::scratch("quorum-read-first-logs").join("a.log");
    let a = cluster.node_logged("a", 5_000, &log);
    wait_for_shares(&[&a], &[SHARDS as usize]);
    let renewals = counter(&a, "assignd_cluster_lease_renewals_total");
    let deadline = Instant::now() + SETTLE_WITHIN;
    while counter(&a, "assignd_cluster_lease_renewals_total") == renewals {
        assert!(Instant::now() < deadline, "the lease is not renewed");
        std::thread::sleep(Duration::from_millis(10));
    }
    cluster.etcd.kill(0);
    cluster.etcd.kill(1);
    quorum_loss_signals(&mut cluster, &a, "probe");
    let said = logged(&log, "etcd does not answer");
    assert_eq!(
        said[0]["fields"]["failed"], "reading the cluster",
        "{said:?}"
    );
}

/// etcd's quorum lost while the node was paused for longer than its
/// renewal interval: resumed, it renews first (unless the pause caught it
/// in the middle of a placement round, or the surviving etcd member still
/// led and renewed: then the quorum is lost again, at most
/// [`RENEWAL_FIRST_TRIES_MAX`] times), and with a lease (1 s)
/// shorter than etcd's request bound the failed renewal is a step-down at
/// once: its revoke and its new lease fail before any placement read
/// does. The signals say `storage_unavailable` all along all the same.
#[cfg(unix)]
#[test]
fn with_the_quorum_lost_before_a_renewal_the_signals_say_storage_unavailable() {
    let _turn = one_at_a_time();
    let mut cluster = Cluster::start("quorum-renewal-first");
    let log = common::scratch("quorum-renewal-first-logs").join("a.log");
    let lease_ttl_ms = 1_000;
    let a = cluster.node_logged("a", lease_ttl_ms, &log);
    let mut firsts = Vec::new();
    while firsts.last().map(String::as_str) != Some("renewing the lease") {
        assert!(
            firsts.len() < RENEWAL_FIRST_TRIES_MAX,
            "the renewal never failed first: {firsts:?}"
        );
        wait_for_shares(&[&a], &[SHARDS as usize]);
        let said = logged(&log, "etcd does not answer").len();
        a.signal(libc::SIGSTOP);
        cluster.etcd.kill(0);
        cluster.etcd.kill(1);
        // Past the renewal interval (a third of the lease), so that the
        // first call of the node's next round is a renewal; and past two
        // of etcd's election timeouts (LocalEtcd's: 500 ms), so that the
        // surviving member no longer leads: a leader renews leases
        // without its quorum until it notices the loss.
        std::thread::sleep(Duration::from_millis(lease_ttl_ms / 3 + 1_200));
        a.signal(libc::SIGCONT);
        quorum_loss_signals(&mut cluster, &a, &format!("probe-{}", firsts.len()));
        let first = &logged(&log, "etcd does not answer")[said];
        firsts.push(
            first["fields"]["failed"]
                .as_str()
                .expect("failed")
                .to_owned(),
        );
    }
    eprintln!("the calls that failed first: {firsts:?}");
}

/// How many quorum losses the test above may take to have the renewal
/// fail first.
const RENEWAL_FIRST_TRIES_MAX: usize = 8;

/// A module uploaded through one node is the cluster's: groups that
/// either node coordinates are bound to it through either node, a member
/// of a group on the other node gets its tasks from it, and every node
/// lists it. Its delete is refused through either node while a group of
/// either node names it, and once none does it is deleted: no node binds
/// it or lists it any more.
#[test]
fn a_module_uploaded_through_one_node_serves_groups_on_every_node() {
    let _turn = one_at_a_time();
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
    }

    // Deleting it: refused through either node while any group names it,
    // those of the other node's shards included.
    for node in [&a, &b] {
        let (status, body) = node.call("DELETE", "/v1/assignors/custom-rr@1.0.0", None);
        assert_eq!(status, 409, "{body}");
        assert_eq!(body["error"]["code"], "module_in_use", "{body}");
    }
    // Every group rebound but the one on b: still refused through a,
    // naming that group.
    for group in GROUPS.iter().filter(|g| *g != on_b) {
        let (status, view) = a.call(
            "PUT",
            &format!("/v1/groups/{group}/assignor"),
            Some(&json!({"module": "sticky", "params": {}})),
        );
        assert_eq!(status, 200, "{group}: {view}");
    }
    let (status, body) = a.call("DELETE", "/v1/assignors/custom-rr@1.0.0", None);
    assert_eq!(status, 409, "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.ends_with(&format!(": {on_b}")), "{body}");
    // The last one rebound: deleted through a.
    let (status, view) = b.call(
        "PUT",
        &format!("/v1/groups/{on_b}/assignor"),
        Some(&json!({"module": "sticky", "params": {}})),
    );
    assert_eq!(status, 200, "{view}");
    let (status, body) = a.call("DELETE", "/v1/assignors/custom-rr@1.0.0", None);
    assert_eq!(status, 204, "{body}");
    // Unknown on every node: no bind of it is taken (at once, even where
    // the copy was not dropped yet), and every node stops listing it
    // (within its sync interval).
    for node in [&a, &b] {
        for group in GROUPS {
            let (status, body) = node.call(
                "PUT",
                &format!("/v1/groups/{group}/assignor"),
                Some(&json!({"module": "custom-rr@1.0.0", "params": {}})),
            );
            assert_eq!(status, 400, "{group} through {}: {body}", node.base);
            assert_eq!(body["error"]["code"], "unknown_assignor", "{body}");
        }
        let deadline = Instant::now() + SETTLE_WITHIN;
        loop {
            let (status, list) = node.call("GET", "/v1/assignors", None);
            assert_eq!(status, 200, "{list}");
            if !list["assignors"]
                .as_array()
                .unwrap()
                .iter()
                .any(|m| m["id"] == module["id"])
            {
                break;
            }
            assert!(Instant::now() < deadline, "{} still lists it", node.base);
            std::thread::sleep(Duration::from_millis(50));
        }
        let (status, body) = node.call("DELETE", "/v1/assignors/custom-rr@1.0.0", None);
        assert_eq!(status, 404, "{body}");
    }
}

/// etcd's history is compacted as the cluster writes: by the node of the
/// lowest name, every `--etcd-compaction-interval-ms`, so that etcd's
/// database does not grow with every write.
#[test]
fn the_node_of_the_lowest_name_compacts_etcds_history() {
    let _turn = one_at_a_time();
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

/// A task as members see it.
type Task = (String, u64);

/// Where a churning member is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Its join was sent and not yet answered 200: it is sent again (with
    /// the same member id, so a lost answer joins it once).
    Joining,
    /// Joined: it heartbeats every round.
    In,
    /// Its leave was sent and not yet answered 200.
    Leaving,
    /// Left, acknowledged (`left_acked`) or not.
    Out,
}

/// One member of the churn test over raw HTTP: what it was told and what
/// it holds, by its own view (a task is held from the answer that grants
/// it until the member releases it by its next heartbeat, leaves, or its
/// lease runs out without an answer).
struct ChurnMember {
    group: String,
    /// Static members carry a name; dynamic ones do not.
    name: Option<String>,
    member_id: String,
    member_epoch: u64,
    phase: Phase,
    /// Its last leave was answered 200.
    left_acked: bool,
    active: BTreeSet<Task>,
    revoking: BTreeSet<Task>,
    learner: BTreeSet<Task>,
    held: BTreeSet<Task>,
    /// When it must stop every task without a newer answer: when the last
    /// answered heartbeat was sent, plus the answer's `lease_ms`.
    lease_until: Option<Instant>,
    /// The node that answered it last (where 307s led), if it still does.
    coordinator: Option<String>,
    /// Successful heartbeats after the kill.
    answered_after_kill: u64,
    /// The last request's outcome, for a failure's message.
    last: String,
}

/// The churn test's driver: members of several groups heartbeat in
/// rounds, through any node (following 307 redirects, falling back to the
/// next node when one does not answer), while some join and leave; every
/// answer is checked against what the members were told before.
struct Churn {
    nodes: Vec<String>,
    agent: ureq::Agent,
    members: Vec<ChurnMember>,
    rng: u64,
    /// Round-robin over `nodes` for members without a coordinator.
    next_node: usize,
    /// Per group, the highest group epoch read.
    group_epochs: std::collections::BTreeMap<String, u64>,
    /// Per member id, the highest member epoch the group views showed.
    viewed_epochs: std::collections::BTreeMap<String, u64>,
    /// Leases that ran out without an answer.
    lapses: Vec<String>,
    /// Membership changes answered 200 (joins and leaves).
    acked_changes: u64,
    /// Answers checked for double ownership while their group's members
    /// held tasks.
    checks: u64,
    /// Violations seen: each one fails the test.
    trouble: Vec<String>,
}

/// A heartbeat's outcome: the final status and body, or no answer at all
/// (the node is down).
type Outcome = Option<(u16, Value)>;

impl Churn {
    fn new(nodes: &[&Server]) -> Churn {
        Churn {
            nodes: nodes.iter().map(|n| n.base.clone()).collect(),
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .max_redirects(0)
                .timeout_global(Some(Duration::from_secs(5)))
                .build()
                .into(),
            members: Vec::new(),
            rng: 0x5eed_c4a5_e0f1_2345,
            next_node: 0,
            group_epochs: Default::default(),
            viewed_epochs: Default::default(),
            lapses: Vec::new(),
            acked_changes: 0,
            checks: 0,
            trouble: Vec::new(),
        }
    }

    /// splitmix64: a seeded, reproducible choice of who churns.
    fn random(&mut self, below: u64) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % below
    }

    /// Adds a member that joins at its next round.
    fn add(&mut self, group: &str, name: Option<&str>) {
        let k = self.members.len();
        self.members.push(ChurnMember {
            group: group.to_owned(),
            name: name.map(str::to_owned),
            member_id: format!("churn-{k}-0"),
            member_epoch: 0,
            phase: Phase::Joining,
            left_acked: false,
            active: BTreeSet::new(),
            revoking: BTreeSet::new(),
            learner: BTreeSet::new(),
            held: BTreeSet::new(),
            lease_until: None,
            coordinator: None,
            answered_after_kill: 0,
            last: String::new(),
        });
    }

    /// POSTs `body` to the group's heartbeat through `base`, following
    /// 307s (at most two hops).
    fn post(&self, base: &str, group: &str, body: &Value) -> (Outcome, String) {
        let mut url = format!("{base}/v1/groups/{group}/heartbeat");
        for _ in 0..3 {
            let Ok(mut response) = self.agent.post(&url).send_json(body) else {
                return (None, url);
            };
            let status = response.status().as_u16();
            let text = response.body_mut().read_to_string().unwrap_or_default();
            let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            if status == 307 {
                let location = response
                    .headers()
                    .get("location")
                    .and_then(|l| l.to_str().ok())
                    .map(str::to_owned)
                    .unwrap_or_else(|| value["error"]["location"].as_str().unwrap().to_owned());
                url = location;
                continue;
            }
            return (Some((status, value)), url);
        }
        (None, url)
    }

    /// The member's lease ran out without an answer: it stops every task.
    fn expire_leases(&mut self, now: Instant) {
        for m in &mut self.members {
            if !m.held.is_empty() && m.lease_until.is_some_and(|until| until <= now) {
                self.lapses.push(format!("{}/{}", m.group, m.member_id));
                m.held.clear();
            }
        }
    }

    /// Invariant 1 from the members' view: within a group, no task is held
    /// by two members whose leases run.
    fn check_no_double_ownership(&mut self, group: &str) {
        let now = Instant::now();
        self.expire_leases(now);
        let mut holder: std::collections::BTreeMap<&Task, &str> = Default::default();
        let members = self.members.iter().filter(|m| m.group == group);
        if members.clone().any(|m| !m.held.is_empty()) {
            self.checks += 1;
        }
        for m in members {
            for task in &m.held {
                if let Some(other) = holder.insert(task, &m.member_id) {
                    self.trouble.push(format!(
                        "double ownership in {group}: {task:?} held by {other} and {}",
                        m.member_id
                    ));
                }
            }
        }
    }

    /// One round: a few members churn, every other one heartbeats, and
    /// every group's view is read once.
    fn round(&mut self, churn: bool, killed: bool) {
        if churn && self.random(3) == 0 {
            let i = self.random(self.members.len() as u64) as usize;
            let m = &mut self.members[i];
            match m.phase {
                Phase::In => m.phase = Phase::Leaving,
                Phase::Out => {
                    // A new incarnation: a new member id (a static one
                    // under its old name).
                    let (prefix, n) = m.member_id.rsplit_once('-').expect("churn-K-N");
                    m.member_id = format!("{prefix}-{}", n.parse::<u64>().unwrap() + 1);
                    m.member_epoch = 0;
                    m.left_acked = false;
                    m.phase = Phase::Joining;
                }
                Phase::Joining | Phase::Leaving => {}
            }
        }
        for i in 0..self.members.len() {
            self.beat(i, killed);
        }
        let groups: BTreeSet<String> = self.members.iter().map(|m| m.group.clone()).collect();
        for group in groups {
            self.read_view(&group);
        }
    }

    /// Sends member `i` its request for this round and checks the answer.
    fn beat(&mut self, i: usize, killed: bool) {
        let m = &mut self.members[i];
        let body = match m.phase {
            Phase::Out => return,
            Phase::Joining => {
                json!({"member_id": m.member_id, "member_name": m.name, "member_epoch": 0,
                       "topics": ["orders"]})
            }
            Phase::In => {
                // Revoked tasks are released before this beat.
                m.held = m.active.clone();
                let owned: Vec<Value> = m.active.iter().map(|(t, p)| json!([t, p])).collect();
                let lags: Vec<Value> = m.learner.iter().map(|(t, p)| json!([t, p, 0])).collect();
                json!({"member_id": m.member_id, "member_epoch": m.member_epoch,
                       "owned": owned, "lags": lags})
            }
            Phase::Leaving => {
                // It stops processing before it leaves.
                m.held.clear();
                json!({"member_id": m.member_id, "member_epoch": -1})
            }
        };
        let group = m.group.clone();
        let mut coordinator = m.coordinator.clone();
        let sent = Instant::now();
        // As a client does: the node it last heard from, else the next
        // node it knows; a node that does not answer, the next one. (Only
        // one pick per round would let a member whose turn always falls
        // on the dead node never reach a survivor.)
        let mut tries = 0;
        let (outcome, url) = loop {
            let base = coordinator.take().unwrap_or_else(|| {
                self.next_node = (self.next_node + 1) % self.nodes.len();
                self.nodes[self.next_node].clone()
            });
            let (outcome, url) = self.post(&base, &group, &body);
            tries += 1;
            if outcome.is_some() || tries > self.nodes.len() {
                break (outcome, url);
            }
        };
        let m = &mut self.members[i];
        let answered_by = url.split("/v1/").next().unwrap_or_default().to_owned();
        m.last = match &outcome {
            Some((status, answer)) => format!("{url}: {status} {}", answer["error"]),
            None => format!("{url}: no answer"),
        };
        let Some((status, answer)) = outcome else {
            m.coordinator = None;
            return;
        };
        let me = format!("{group}/{} ({:?})", m.member_id, m.phase);
        match (m.phase, status) {
            (Phase::Leaving, 200) => {
                m.phase = Phase::Out;
                m.left_acked = true;
                m.lease_until = None;
                m.active.clear();
                m.revoking.clear();
                m.learner.clear();
                self.acked_changes += 1;
            }
            // An earlier leave of it landed, unanswered.
            (Phase::Leaving, 404 | 409)
                if matches!(
                    answer["error"]["code"].as_str(),
                    Some("unknown_member" | "fenced")
                ) =>
            {
                m.phase = Phase::Out;
                m.lease_until = None;
            }
            (Phase::Joining | Phase::In, 200) => {
                let epoch = answer["member_epoch"].as_u64().expect("member_epoch");
                if answer["member_id"] != m.member_id.as_str() {
                    self.trouble
                        .push(format!("{me}: answered as {}", answer["member_id"]));
                }
                if epoch < m.member_epoch {
                    self.trouble.push(format!(
                        "{me}: member epoch back from {} to {epoch}",
                        m.member_epoch
                    ));
                }
                if m.phase == Phase::Joining {
                    self.acked_changes += 1;
                    m.phase = Phase::In;
                }
                m.member_epoch = epoch;
                m.active = common::tasks(&answer["active"]);
                m.revoking = common::tasks(&answer["revoking"]);
                m.learner = common::tasks(&answer["learner"]);
                m.held = m.active.union(&m.revoking).cloned().collect();
                let lease_ms = answer["lease_ms"].as_u64().expect("lease_ms");
                m.lease_until = Some(sent + Duration::from_millis(lease_ms));
                m.coordinator = Some(answered_by);
                if killed {
                    m.answered_after_kill += 1;
                }
                self.check_no_double_ownership(&group);
            }
            // Between owners, or the redirect led to the node killed:
            // tried again next round, elsewhere.
            (_, 503) => m.coordinator = None,
            // A join past the group's tokenless join rate: again later.
            (Phase::Joining, 429) => {}
            (_, status) => {
                self.trouble.push(format!("{me}: {status} {answer}"));
                // Not sent again: one report is enough.
                m.phase = Phase::Out;
                m.held.clear();
            }
        }
    }

    /// Reads `group`'s view through any node: its group epoch and member
    /// epochs never go backwards.
    fn read_view(&mut self, group: &str) {
        self.next_node = (self.next_node + 1) % self.nodes.len();
        let url = format!("{}/v1/groups/{group}", self.nodes[self.next_node]);
        let Ok(mut response) = self
            .agent
            .get(&url)
            .header("authorization", format!("Bearer {}", common::ADMIN_TOKEN))
            .call()
        else {
            return;
        };
        if response.status().as_u16() != 200 {
            return;
        }
        let view: Value = response.body_mut().read_json().expect("a group view");
        self.check_view(group, &view);
    }

    fn check_view(&mut self, group: &str, view: &Value) {
        let epoch = view["group_epoch"].as_u64().expect("group_epoch");
        let seen = self.group_epochs.entry(group.to_owned()).or_default();
        if epoch < *seen {
            self.trouble
                .push(format!("{group}: group epoch back from {seen} to {epoch}"));
        }
        *seen = epoch.max(*seen);
        for member in view["members"].as_array().expect("members") {
            let id = member["member_id"].as_str().expect("member_id").to_owned();
            let epoch = member["member_epoch"].as_u64().expect("member_epoch");
            let seen = self.viewed_epochs.entry(id.clone()).or_default();
            if epoch < *seen {
                self.trouble.push(format!(
                    "{group}: member {id}'s epoch back from {seen} to {epoch} in the view"
                ));
            }
            *seen = epoch.max(*seen);
        }
    }

    /// The members not settled or not answered since the kill, one line
    /// each with their last outcome.
    fn unsettled(&self) -> String {
        self.members
            .iter()
            .filter(|m| {
                !matches!(m.phase, Phase::In | Phase::Out)
                    || (m.phase == Phase::In && m.answered_after_kill == 0)
            })
            .map(|m| format!("{}/{} {:?}: {}\n", m.group, m.member_id, m.phase, m.last))
            .collect()
    }

    /// Whether every member is settled: none joining or leaving.
    fn quiet(&self) -> bool {
        self.members
            .iter()
            .all(|m| matches!(m.phase, Phase::In | Phase::Out))
    }
}

/// Group names whose shard `node` serves, `count` of them.
fn groups_on(node: &Server, prefix: &str, count: usize) -> Vec<String> {
    let shards = served(node);
    (0..)
        .map(|i| format!("{prefix}-{i}"))
        .filter(|g| {
            shards.contains(&u64::from(assignd::protocol::shard::shard_of(
                g,
                SHARDS as u32,
            )))
        })
        .take(count)
        .collect()
}

/// kill -9 of the node that owns two groups while their members churn: in
/// one, static members (a name each) leave and come back as new
/// incarnations; in the other, dynamic members join and leave; every
/// member heartbeats in rounds through any of the three nodes, following
/// 307s. The survivors take the groups over, and across the whole run:
/// no two members whose leases run hold a task at once (checked at every
/// answer), no member epoch or group epoch goes backwards (in the answers
/// and in the group views), and no answered change is lost: every member
/// whose join was answered heartbeats on (never `unknown_member` or
/// `fenced`), and at the end the groups hold exactly the members whose
/// joins were answered, every static name maps to its last incarnation,
/// and a static member that left keeps its slot.
#[test]
fn a_killed_owner_is_taken_over_under_churn_and_nothing_answered_is_lost() {
    let _turn = one_at_a_time();
    let cluster = Cluster::start("churn-kill9");
    let a = cluster.node("a");
    let mut b = cluster.node("b");
    let c = cluster.node("c");
    wait_for_shares(&[&a, &b, &c], &[3, 3, 2]);
    let static_group = groups_on(&b, "static", 1).remove(0);
    let dynamic_group = groups_on(&b, "dynamic", 1).remove(0);
    // A lease that outlasts a takeover (about a node TTL and a third, plus
    // the replay): a heartbeat interval and an expansion timeout, 5.2 s.
    let config = json!({"topics": [{"name": "orders", "partitions": 8}],
                        "expansion_timeout_ms": 200, "heartbeat_interval_ms": 5_000});
    for group in [&static_group, &dynamic_group] {
        create_group(&a, group, &config);
    }
    let mut churn = Churn::new(&[&a, &b, &c]);
    for name in ["s-0", "s-1", "s-2", "s-3"] {
        churn.add(&static_group, Some(name));
    }
    for _ in 0..4 {
        churn.add(&dynamic_group, None);
    }

    // Churn before the kill.
    let rounds_before = 60;
    for _ in 0..rounds_before {
        churn.round(true, false);
        std::thread::sleep(Duration::from_millis(30));
    }
    let acked_before = churn.acked_changes;
    b.child.kill().expect("kill -9 b");
    let _ = b.child.wait();
    let killed = Instant::now();
    // Churn through the takeover, and on after it.
    let mut taken_over = None;
    let mut rounds_after = 0;
    while taken_over.is_none() || rounds_after < 60 {
        assert!(killed.elapsed() < SETTLE_WITHIN, "no takeover");
        churn.round(true, true);
        if taken_over.is_none() && served(&a).len() + served(&c).len() == SHARDS as usize {
            taken_over = Some(killed.elapsed());
        }
        if taken_over.is_some() {
            rounds_after += 1;
        }
        std::thread::sleep(Duration::from_millis(30));
    }
    let acked_through = churn.acked_changes - acked_before;
    // Quiet: pending joins and leaves land, every member in its group is
    // answered by a survivor.
    let deadline = Instant::now() + SETTLE_WITHIN;
    loop {
        churn.round(false, true);
        let answered = churn
            .members
            .iter()
            .all(|m| m.phase != Phase::In || m.answered_after_kill > 0);
        if churn.quiet() && answered {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the members never settled: {:?}\n{}",
            churn.trouble,
            churn.unsettled()
        );
        std::thread::sleep(Duration::from_millis(30));
    }
    eprintln!(
        "kill -9 under churn: taken over in {} ms; {acked_before} changes answered before, {acked_through} after; {} answers checked; leases lapsed: {:?}",
        taken_over.unwrap().as_millis(),
        churn.checks,
        churn.lapses
    );
    assert_eq!(churn.trouble, Vec::<String>::new());
    assert!(acked_before > 0 && acked_through > 0, "churn on both sides");
    assert!(churn.checks > 0, "the members held tasks");

    // What the survivors hold is what the members were answered.
    for group in [&static_group, &dynamic_group] {
        let (status, view) = a.call("GET", &format!("/v1/groups/{group}"), None);
        assert_eq!(status, 200, "{view}");
        churn.check_view(group, &view);
        let slots: std::collections::BTreeMap<String, &Value> = view["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| (m["member_id"].as_str().unwrap().to_owned(), m))
            .collect();
        for m in churn.members.iter().filter(|m| &m.group == group) {
            let found = slots.get(&m.member_id);
            match (m.phase, &m.name) {
                (Phase::In, name) => {
                    let found = found.unwrap_or_else(|| {
                        panic!("{group}: {} joined and is gone: {view}", m.member_id)
                    });
                    assert_eq!(found["away"], false, "{view}");
                    assert!(found["member_epoch"].as_u64().unwrap() >= m.member_epoch);
                    if let Some(name) = name {
                        assert_eq!(found["slot"], format!("static:{name}").as_str(), "{view}");
                    }
                }
                // A static member that left keeps its slot, and its name
                // still maps to it.
                (Phase::Out, Some(name)) if m.left_acked => {
                    let found = found.unwrap_or_else(|| {
                        panic!("{group}: static {name} left and lost its slot: {view}")
                    });
                    assert_eq!(found["slot"], format!("static:{name}").as_str(), "{view}");
                    assert_eq!(found["away"], true, "{view}");
                }
                (Phase::Out, None) if m.left_acked => {
                    assert!(found.is_none(), "{group}: {} left: {view}", m.member_id);
                }
                _ => {}
            }
        }
    }
    assert_eq!(churn.trouble, Vec::<String>::new());
    let (status, coordinator) = a.call(
        "GET",
        &format!("/v1/groups/{static_group}/coordinator"),
        None,
    );
    assert_eq!(status, 200, "{coordinator}");
    assert_ne!(coordinator["node"], "b", "a survivor coordinates it");
}
