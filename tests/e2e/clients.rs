//! Every client's example worker against the real binary: the same
//! scenarios, run for the Rust, Python, Go, Java and TypeScript clients.
//! Each worker is started as a user starts it (`clients/<lang>/worker`,
//! the Rust one from `target/debug/examples/worker`) and speaks the
//! contract of clients/README.md: one JSON line per event on stdout.
//!
//! - On a single node: a worker given `--load-per-task` in a group with a
//!   `load_unit` has its tasks' loads shown in the group view; a worker
//!   takes every task; a second one warms its
//!   share up as learners before it takes it (promoted, not assigned);
//!   SIGTERM drains it and it exits 0 once its tasks moved; a static
//!   worker killed with -9 and restarted with its name gets exactly its
//!   tasks back and nobody else's assignment changes; a second process
//!   with the same name replaces it, and it stops; a dynamic worker
//!   stalled (SIGSTOP) past its session timeout is told fenced when it
//!   resumes, and rejoins. No task is ever held by two workers at once.
//! - In a 3-node cluster: the node coordinating the group is killed with
//!   -9; the workers keep their tasks through the takeover (no `lost`, no
//!   `fenced`, no second `joined`), and the new coordinator runs the group.
//!
//! Which clients must run: `ASSIGND_CLIENTS` (comma-separated, as `.ci/run`
//! sets it, after building them); a client it names whose worker is
//! missing fails. Without it, the tests of the clients not built are
//! skipped with a note.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::Server;
use assignd::cluster::local_etcd::LocalEtcd;
use serde_json::{Value, json};

/// How long a worker may take to reach a state: a bound, not a wait
/// (a JVM's start and a cluster's takeover included).
const REACH_WITHIN: Duration = Duration::from_secs(90);
const PARTITIONS: u32 = 6;
/// The node lease of the cluster: a takeover is due within two of it.
const NODE_LEASE_TTL_MS: &str = "2000";

type Held = BTreeSet<(String, u32)>;

/// The command that starts `lang`'s example worker, or why there is none.
fn launcher(lang: &str) -> Result<PathBuf, String> {
    let root = common::workspace_root();
    let path = match lang {
        "rust" => root.join("target/debug/examples/worker"),
        _ => root.join("clients").join(lang).join("worker"),
    };
    if !path.is_file() {
        return Err(format!("{} does not exist", path.display()));
    }
    if lang != "rust" && !root.join("clients").join(lang).join(".built").is_file() {
        return Err(format!(
            "clients/{lang} is not built (run clients/{lang}/build.sh)"
        ));
    }
    Ok(path)
}

/// The launcher of `lang`, or `None` when its test is to be skipped.
fn worker_command(lang: &str) -> Option<PathBuf> {
    let required = std::env::var("ASSIGND_CLIENTS")
        .map(|list| list.split(',').any(|l| l.trim() == lang))
        .unwrap_or(false);
    match launcher(lang) {
        Ok(path) => Some(path),
        Err(why) if required => panic!("ASSIGND_CLIENTS names {lang}, but {why}"),
        Err(why) => {
            eprintln!(
                "skipped: the {lang} worker is not available ({why}); set ASSIGND_CLIENTS to require it"
            );
            None
        }
    }
}

/// A running example worker and every line it printed.
struct Worker {
    label: String,
    child: Child,
    lines: Arc<Mutex<Vec<Value>>>,
    /// The thread that reads its stdout: it has every line once it ends.
    reader: std::thread::JoinHandle<()>,
    stderr: PathBuf,
    /// When it was killed with -9 (wall-clock ms): it held nothing after.
    killed_at_ms: Option<u64>,
}

fn wall_clock_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_millis() as u64
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Worker {
    fn start(command: &Path, label: &str, dir: &Path, args: &[&str]) -> Worker {
        let stderr = dir.join(format!("{label}.stderr"));
        let mut child = Command::new(command)
            .args(args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("a log file"))
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", command.display()));
        let stdout = child.stdout.take().expect("piped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let who = label.to_owned();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("{who} printed a line that is not JSON ({e}): {line}")
                });
                sink.lock().unwrap().push(value);
            }
        });
        Worker {
            label: label.to_owned(),
            child,
            lines,
            reader,
            stderr,
            killed_at_ms: None,
        }
    }

    /// kill -9, and waits for it to be gone.
    fn kill(&mut self) {
        self.child.kill().expect("kill");
        self.child.wait().expect("wait");
        self.killed_at_ms = Some(wall_clock_ms());
    }

    fn lines(&self) -> Vec<Value> {
        self.lines.lock().unwrap().clone()
    }

    fn events(&self, kind: &str) -> Vec<Value> {
        self.lines()
            .into_iter()
            .filter(|line| line["event"] == kind)
            .collect()
    }

    /// The tasks it holds as its events tell it.
    fn held(&self) -> Held {
        let mut held = Held::new();
        for line in self.lines() {
            let tasks = task_set(&line["tasks"]);
            match line["event"].as_str() {
                Some("assigned" | "promoted") => held.extend(tasks),
                Some("revoked" | "lost") => held.retain(|t| !tasks.contains(t)),
                _ => {}
            }
        }
        held
    }

    fn diagnose(&self) -> String {
        let log = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        let lines: Vec<String> = self.lines().iter().map(Value::to_string).collect();
        format!(
            "{}: stdout:\n  {}\nstderr (last lines):\n  {}",
            self.label,
            lines.join("\n  "),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n  ")
        )
    }

    /// Waits until `done` holds of this worker.
    fn wait_for(&self, what: &str, done: impl Fn(&Worker) -> bool) {
        let started = Instant::now();
        while !done(self) {
            assert!(
                started.elapsed() < REACH_WITHIN,
                "{} never {what}\n{}",
                self.label,
                self.diagnose()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("a pid fits pid_t");
        // SAFETY: kill(2) on our own child, which stays ours until reaped.
        let sent = unsafe { libc::kill(pid, signal) };
        assert_eq!(sent, 0, "kill: {}", std::io::Error::last_os_error());
    }

    /// Waits for it to exit and for its last line to be read: the
    /// process can be gone before the reader has seen its final lines.
    fn exit(&mut self) -> ExitStatus {
        let started = Instant::now();
        loop {
            let exited = self.child.try_wait().expect("wait");
            if let Some(status) = exited.filter(|_| self.reader.is_finished()) {
                return status;
            }
            assert!(
                started.elapsed() < REACH_WITHIN,
                "{} did not exit\n{}",
                self.label,
                self.diagnose()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn last_stop_reason(&self) -> Option<String> {
        self.events("stopped")
            .last()
            .and_then(|line| line["reason"].as_str().map(str::to_owned))
    }
}

fn task_set(tasks: &Value) -> Held {
    tasks
        .as_array()
        .into_iter()
        .flatten()
        .map(|task| {
            (
                task[0].as_str().expect("a topic").to_owned(),
                task[1].as_u64().expect("a partition") as u32,
            )
        })
        .collect()
}

/// When a worker held a task: from, until (wall-clock ms), and who.
type Span<'a> = (u64, u64, &'a str);

/// Checks that no task was held by two workers at once, by the times
/// their events were printed: a worker holds a task from the line that
/// gave it (`assigned`, `promoted`) to the line that took it (`revoked`,
/// printed before it stops, or `lost`).
fn assert_never_held_twice(workers: &[&Worker]) {
    let mut spans: BTreeMap<(String, u32), Vec<Span>> = BTreeMap::new();
    for worker in workers {
        let mut since: BTreeMap<(String, u32), u64> = BTreeMap::new();
        for line in worker.lines() {
            let at = line["ts_ms"].as_u64().expect("ts_ms");
            for task in task_set(&line["tasks"]) {
                match line["event"].as_str() {
                    Some("assigned" | "promoted") => {
                        since.entry(task).or_insert(at);
                    }
                    Some("revoked" | "lost") => {
                        if let Some(from) = since.remove(&task) {
                            spans
                                .entry(task)
                                .or_default()
                                .push((from, at, &worker.label));
                        }
                    }
                    _ => {}
                }
            }
        }
        let end = worker.killed_at_ms.unwrap_or(u64::MAX);
        for (task, from) in since {
            spans
                .entry(task)
                .or_default()
                .push((from, end, &worker.label));
        }
    }
    for (task, mut spans) in spans {
        spans.sort();
        for pair in spans.windows(2) {
            let ((_, end, a), (start, _, b)) = (pair[0], pair[1]);
            assert!(
                start >= end,
                "{task:?} held by {a} until {end} and by {b} from {start}"
            );
        }
    }
}

fn group_config() -> Value {
    json!({
        "topics": [{"name": "orders", "partitions": PARTITIONS}],
        "heartbeat_interval_ms": 300,
        "session_timeout_ms": 3000,
        "registration_timeout_ms": 15000,
        "expansion_timeout_ms": 1000,
        "acceptable_recovery_lag": 200,
        "max_learners": 6,
        "scale_down_timeout_ms": 30000,
    })
}

/// The worker flags every scenario uses: fast replay, short changelogs.
fn worker_args<'a>(url: &'a str, state: &'a str, name: Option<&'a str>) -> Vec<&'a str> {
    let mut args = vec![
        "--url",
        url,
        "--group",
        "g",
        "--topics",
        "orders",
        "--state-dir",
        state,
        "--replay-rate",
        "20000",
        "--changelog-len",
        "2000",
    ];
    if let Some(name) = name {
        args.extend(["--name", name]);
    }
    args
}

fn holds(count: usize) -> impl Fn(&Worker) -> bool {
    move |worker| worker.held().len() == count
}

/// A worker started with `--load-per-task` in a group with a `load_unit`:
/// once the host asks, every task's load reaches the group view (the
/// group's total, complete, and the member's load).
fn reports_loads(command: &Path, server: &Server, dir: &Path, state: &str) {
    const LOAD_PER_TASK: f64 = 5.0;
    let mut config = group_config();
    config["load_unit"] = json!("records/s");
    let (status, body) = server.call("PUT", "/v1/groups/loads", Some(&config));
    assert_eq!(status, 201, "{body}");
    let mut args: Vec<&str> = worker_args(&server.base, state, Some("wl"))
        .into_iter()
        .map(|arg| if arg == "g" { "loads" } else { arg })
        .collect();
    args.extend(["--load-per-task", "5"]);
    let mut worker = Worker::start(command, "wl", dir, &args);
    worker.wait_for("held every task", holds(PARTITIONS as usize));
    let total = LOAD_PER_TASK * f64::from(PARTITIONS);
    let shown_within = Instant::now() + REACH_WITHIN;
    loop {
        let (_, view) = server.call("GET", "/v1/groups/loads", None);
        let loads = &view["loads"];
        let member_load = &view["members"][0]["load"]["load"];
        if loads["complete"] == true
            && loads["total"].as_f64() == Some(total)
            && member_load.as_f64() == Some(total)
        {
            assert_eq!(loads["unit"], "records/s", "{view}");
            break;
        }
        assert!(
            Instant::now() < shown_within,
            "the loads never reached the group view: {view}\n{}",
            worker.diagnose()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    worker.kill();
}

fn single_node(lang: &str) {
    let Some(command) = worker_command(lang) else {
        return;
    };
    let dir = common::scratch(&format!("clients-{lang}"));
    let server = Server::start(&dir.join("data"), &[]);
    let (status, body) = server.call("PUT", "/v1/groups/g", Some(&group_config()));
    assert_eq!(status, 201, "{body}");
    let state = dir.join("state");
    let state = state.to_str().unwrap();
    reports_loads(&command, &server, &dir, state);
    let start = |label: &str, name: Option<&str>| {
        Worker::start(
            &command,
            label,
            &dir,
            &worker_args(&server.base, state, name),
        )
    };

    // One worker takes every task; a second warms its share up first.
    let endpoint = format!("http://w1-{lang}.example:8080");
    let lang_pair = format!("lang={lang}");
    let mut w1_args = worker_args(&server.base, state, Some("w1"));
    w1_args.extend(["--endpoint", &endpoint, "--metadata", &lang_pair]);
    let w1 = Worker::start(&command, "w1", &dir, &w1_args);
    w1.wait_for("held every task", holds(PARTITIONS as usize));
    // Its endpoint and metadata are in the routing table.
    let w1_id = w1.events("joined")[0]["member_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, table) = server.call("GET", "/v1/groups/g/routes", None);
    assert_eq!(status, 200, "{table}");
    assert_eq!(
        table["members"][&w1_id]["endpoint"],
        endpoint.as_str(),
        "{table}"
    );
    assert_eq!(
        table["members"][&w1_id]["metadata"],
        json!({"lang": lang}),
        "{table}"
    );
    let mut w2 = start("w2", Some("w2"));
    w2.wait_for("took its share", holds(PARTITIONS as usize / 2));
    w1.wait_for("gave up half", holds(PARTITIONS as usize / 2));
    assert!(
        !w2.events("learner_started").is_empty(),
        "{}",
        w2.diagnose()
    );
    assert!(
        w2.events("assigned").is_empty() && !w2.events("promoted").is_empty(),
        "a warm learner is promoted, not assigned\n{}",
        w2.diagnose()
    );

    // SIGTERM drains: the tasks move back, then the worker exits 0.
    w2.signal(libc::SIGTERM);
    assert!(w2.exit().success(), "{}", w2.diagnose());
    assert!(!w2.events("draining").is_empty() && !w2.events("drained").is_empty());
    assert_eq!(w2.last_stop_reason().as_deref(), Some("drained"));
    w1.wait_for("took every task back", holds(PARTITIONS as usize));

    // A static worker killed -9 and restarted with its name gets exactly
    // its tasks back; nobody else's assignment changes.
    let mut w2b = start("w2b", Some("w2"));
    w2b.wait_for("took its share", holds(PARTITIONS as usize / 2));
    w1.wait_for("gave up half", holds(PARTITIONS as usize / 2));
    let w1_lines = w1.lines().len();
    let w2_tasks = w2b.held();
    w2b.kill();
    let w2c = start("w2c", Some("w2"));
    w2c.wait_for("got its tasks back", |w| w.held() == w2_tasks);
    let w1_since: Vec<Value> = w1.lines()[w1_lines..].to_vec();
    assert!(
        w1_since.iter().all(|line| line["event"] == "error"),
        "w1's assignment changed while w2 restarted: {w1_since:?}"
    );
    assert_never_held_twice(&[&w1, &w2, &w2b, &w2c]);

    // A second process with the same name replaces it: it stops.
    let mut w2c = w2c;
    let w2d = start("w2d", Some("w2"));
    assert!(!w2c.exit().success(), "{}", w2c.diagnose());
    assert_eq!(w2c.last_stop_reason().as_deref(), Some("replaced"));
    assert!(!w2c.events("replaced").is_empty());
    w2d.wait_for("took the slot's tasks", holds(PARTITIONS as usize / 2));

    // A dynamic worker stalled past its session timeout is fenced when it
    // resumes, and rejoins.
    let w3 = start("w3", None);
    w3.wait_for("took its share", holds(PARTITIONS as usize / 3));
    w3.signal(libc::SIGSTOP);
    let member_id = w3.events("joined")[0]["member_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let removed_within = Instant::now() + REACH_WITHIN;
    loop {
        let (_, view) = server.call("GET", "/v1/groups/g", None);
        if !view.to_string().contains(&member_id) {
            break;
        }
        assert!(Instant::now() < removed_within, "w3 never expired: {view}");
        std::thread::sleep(Duration::from_millis(50));
    }
    w3.signal(libc::SIGCONT);
    w3.wait_for("was fenced and rejoined", |w| {
        w.events("fenced")
            .first()
            .is_some_and(|f| f["rejoining"] == true)
            && w.events("joined").len() == 2
    });
    w3.wait_for("took a share again", holds(PARTITIONS as usize / 3));
}

/// A 1-member etcd and three nodes on loopback.
struct Cluster {
    _runtime: tokio::runtime::Runtime,
    _etcd: LocalEtcd,
    nodes: Vec<Option<Server>>,
}

impl Cluster {
    fn start(dir: &Path) -> Cluster {
        let (runtime, etcd) = common::local_etcd(&dir.join("etcd"), 1);
        let endpoints = etcd.endpoints().join(",");
        let nodes = ["a", "b", "c"]
            .into_iter()
            .map(|name| {
                Some(Server::start(
                    &dir.join(name),
                    &[
                        "--etcd",
                        &endpoints,
                        "--etcd-prefix",
                        "/clients/",
                        "--node",
                        name,
                        "--lease-ttl-ms",
                        NODE_LEASE_TTL_MS,
                        "--shards",
                        "8",
                    ],
                ))
            })
            .collect();
        Cluster {
            _runtime: runtime,
            _etcd: etcd,
            nodes,
        }
    }

    /// Waits until the live nodes split the 8 shards evenly (a node that
    /// joins takes its share from the others: members ride that out too,
    /// but this test is about the kill).
    fn settle(&self) {
        let started = Instant::now();
        loop {
            let sets: Vec<BTreeSet<u64>> = self.live().map(Server::served_shards).collect();
            let total: usize = sets.iter().map(BTreeSet::len).sum();
            let union: BTreeSet<u64> = sets.iter().flatten().copied().collect();
            let (fewest, most) = (
                sets.iter().map(BTreeSet::len).min().unwrap_or(0),
                sets.iter().map(BTreeSet::len).max().unwrap_or(0),
            );
            if total == 8 && union.len() == 8 && most - fewest <= 1 {
                return;
            }
            assert!(started.elapsed() < REACH_WITHIN, "the nodes serve {sets:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn live(&self) -> impl Iterator<Item = &Server> {
        self.nodes.iter().flatten()
    }

    /// The coordinator of group `g` once every live node names the same
    /// live one, and it serves the group.
    fn coordinator(&self) -> usize {
        let started = Instant::now();
        loop {
            let named: BTreeSet<String> = self
                .live()
                .map(|node| node.call("GET", "/v1/groups/g/coordinator", None))
                .filter(|(status, _)| *status == 200)
                .map(|(_, body)| body["url"].as_str().unwrap_or_default().to_owned())
                .collect();
            let agreed = (named.len() == 1)
                .then(|| named.into_iter().next().unwrap())
                .and_then(|url| {
                    self.nodes
                        .iter()
                        .position(|n| n.as_ref().is_some_and(|n| n.base == url))
                });
            if let Some(index) = agreed {
                let node = self.nodes[index].as_ref().unwrap();
                if node.call("GET", "/v1/groups/g", None).0 == 200 {
                    return index;
                }
            }
            assert!(
                started.elapsed() < REACH_WITHIN,
                "no agreed coordinator of g"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn cluster_takeover(lang: &str) {
    let Some(command) = worker_command(lang) else {
        return;
    };
    let dir = common::scratch(&format!("clients-cluster-{lang}"));
    let mut cluster = Cluster::start(&dir);
    cluster.settle();
    let first = cluster.live().next().unwrap();
    // A plain lease (an expansion timeout and an interval) longer than a
    // takeover (about two node lease TTLs): a heartbeat in flight when the
    // node dies may have reached it, and then only the plain lease holds,
    // by design; which heartbeat is in flight at the kill is timing. No
    // lease outlasts the member's timeout (its session timeout, for a
    // named member the shorter of that and its registration timeout), so
    // that is raised past the lease too: at 3 s it capped every lease at
    // 3 s, which a takeover on a loaded machine outlasted. The unreached
    // lease that covers the takeover otherwise is proven per client by the
    // vectors, and against the real host by etcd_cluster.rs.
    let mut config = group_config();
    config["expansion_timeout_ms"] = json!(5_000);
    config["session_timeout_ms"] = json!(10_000);
    let (status, body) = first.call("PUT", "/v1/groups/g", Some(&config));
    assert_eq!(status, 201, "{body}");
    cluster.coordinator();
    let urls: Vec<String> = cluster.live().map(|n| n.base.clone()).collect();
    let urls = urls.join(",");
    let state = dir.join("state");
    let state = state.to_str().unwrap();
    let start = |label: &str, name: Option<&str>| {
        Worker::start(&command, label, &dir, &worker_args(&urls, state, name))
    };
    let w1 = start("w1", Some("w1"));
    let w2 = start("w2", Some("w2"));
    w1.wait_for("took its share", holds(PARTITIONS as usize / 2));
    w2.wait_for("took its share", holds(PARTITIONS as usize / 2));

    // kill -9 the coordinator; another node takes the shard over.
    let before = cluster.coordinator();
    let mut dead = cluster.nodes[before].take().unwrap();
    dead.child.kill().unwrap();
    dead.child.wait().unwrap();
    let after = cluster.coordinator();
    assert_ne!(before, after);

    // The new coordinator runs the group: a third worker takes its share
    // from the two, which kept their tasks through the takeover.
    let w3 = start("w3", Some("w3"));
    for worker in [&w1, &w2, &w3] {
        worker.wait_for("holds a third", holds(PARTITIONS as usize / 3));
    }
    for worker in [&w1, &w2] {
        assert!(
            worker.events("lost").is_empty()
                && worker.events("fenced").is_empty()
                && worker.events("joined").len() == 1,
            "a member of a group whose coordinator died kept its tasks\n{}",
            worker.diagnose()
        );
    }
    assert_never_held_twice(&[&w1, &w2, &w3]);

    // SIGTERM drains through the new coordinator.
    let mut w1 = w1;
    w1.signal(libc::SIGTERM);
    assert!(w1.exit().success(), "{}", w1.diagnose());
    assert_eq!(
        w1.last_stop_reason().as_deref(),
        Some("drained"),
        "{}",
        w1.diagnose()
    );
    w2.wait_for("took w1's share", holds(PARTITIONS as usize / 2));
}

macro_rules! client_tests {
    ($($lang:ident),*) => {
        $(
            mod $lang {
                #[test]
                fn single_node_learners_drain_static_restart_replaced_and_fenced() {
                    super::single_node(stringify!($lang));
                }

                #[test]
                fn cluster_kill_9_of_the_coordinator_loses_no_task() {
                    super::cluster_takeover(stringify!($lang));
                }
            }
        )*
    };
}

client_tests!(rust, python, go, java, typescript);
