//! Upgrades through the real binaries: a 3-node cluster of the previous
//! release (built here from its tagged commit) upgraded one node at a
//! time to this build under member load loses nothing, rebalances
//! nothing and stops no member; the cluster's record format level rises
//! only once every live node reads the higher version, a node that
//! cannot read it refuses to join, and a node of the previous release
//! that joins anyway refuses to load a shard it cannot read and gets
//! none placed on it; a data dir written at a newer version refuses to
//! open under an older binary.
//!
//! This build reads and writes format version 5 and still writes 4, the
//! previous release's: a rolling upgrade runs at level 4 until its last
//! node is upgraded, then rises to 5. The gating between two builds of
//! this release needs a version above this build's: the test-only version
//! 6 (`ASSIGND_TEST_FORMAT_VERSION_6=1`, version 5's payloads under the
//! next number; docs/architecture.md, "Cluster mode").

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use crate::common::Server;
use crate::common::members::Members;
use assignd::cluster::local_etcd::LocalEtcd;
use serde_json::{Value, json};

/// The previous release: its tag, and its commit for a clone without tags.
const PREVIOUS_TAG: &str = "v0.1.0";
const PREVIOUS_COMMIT: &str = "c58fcd9754d2678f5ede454d35cfad9d5b4cb137";

const SHARDS: u64 = 8;
const LEASE_TTL_MS: u64 = 2_000;
/// How long a test waits for the cluster to reach a state: a bound, not a
/// wait.
const SETTLE_WITHIN: Duration = Duration::from_secs(60);
const GROUPS: [&str; 8] = ["g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7"];
const TEST_VERSION_ENV: (&str, &str) = ("ASSIGND_TEST_FORMAT_VERSION_6", "1");

/// The previous release's `assignd`, built on first use under
/// `target/upgrade/COMMIT/` (kept: a later run finds it there).
fn previous_release() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let root = common::workspace_root();
        let commit = previous_commit(&root);
        let dir = root.join("target").join("upgrade").join(&commit);
        let binary = dir.join("target").join("debug").join("assignd");
        if binary.exists() {
            return binary;
        }
        let src = dir.join("src");
        let _ = std::fs::remove_dir_all(&src);
        std::fs::create_dir_all(&src).expect("a source folder");
        let archive = dir.join("src.tar");
        run(Command::new("git")
            .arg("-C")
            .arg(&root)
            .args(["archive", "--format=tar", "-o"])
            .arg(&archive)
            .arg(&commit));
        run(Command::new("tar")
            .arg("-xf")
            .arg(&archive)
            .arg("-C")
            .arg(&src));
        let started = Instant::now();
        run(Command::new("cargo")
            .args(["build", "-p", "assignd"])
            .current_dir(&src)
            .env("CARGO_TARGET_DIR", dir.join("target"))
            .env_remove("RUSTUP_TOOLCHAIN"));
        eprintln!(
            "built the previous release ({PREVIOUS_TAG}, {commit}) in {} s",
            started.elapsed().as_secs()
        );
        binary
    })
}

/// The previous release's commit, by its tag or else by its hash; a
/// clone that has neither (a shallow one) fails saying what to fetch.
fn previous_commit(root: &Path) -> String {
    for name in [
        format!("{PREVIOUS_TAG}^{{commit}}"),
        format!("{PREVIOUS_COMMIT}^{{commit}}"),
    ] {
        let found = Command::new("git")
            .arg("-C")
            .arg(root)
            .args(["rev-parse", "--verify", "--quiet", &name])
            .output()
            .expect("git runs");
        if found.status.success() {
            return String::from_utf8_lossy(&found.stdout).trim().to_owned();
        }
    }
    panic!(
        "the previous release's commit {PREVIOUS_COMMIT} ({PREVIOUS_TAG}) is not in this clone: \
         fetch it (`git fetch --unshallow`, or `git fetch origin {PREVIOUS_COMMIT}`) and run again"
    );
}

fn run(command: &mut Command) {
    let status = command
        .status()
        .unwrap_or_else(|e| panic!("{command:?}: {e}"));
    assert!(status.success(), "{command:?}: {status}");
}

fn this_build() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_assignd"))
}

/// A free loopback port, for a node that restarts on the same address.
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
    listener.local_addr().expect("an address").port()
}

/// The tests of this file take turns: each bounds how soon leases and
/// hand-overs happen, which two at once on 2 cores would make a matter
/// of the machine's load.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(|e| e.into_inner())
}

struct Cluster {
    runtime: tokio::runtime::Runtime,
    etcd: LocalEtcd,
    prefix: String,
    dir: PathBuf,
}

/// A node's name, port and data dir: what it keeps across an upgrade.
struct Seat {
    name: &'static str,
    port: u16,
    data_dir: PathBuf,
}

impl Cluster {
    fn start(name: &str) -> Cluster {
        let dir = common::scratch(name);
        let (runtime, etcd) = common::local_etcd(&dir, 3);
        Cluster {
            runtime,
            etcd,
            prefix: format!("/{name}/"),
            dir,
        }
    }

    fn seat(&self, name: &'static str) -> Seat {
        let data_dir = self.dir.join(name);
        std::fs::create_dir_all(&data_dir).expect("a data dir");
        Seat {
            name,
            port: free_port(),
            data_dir,
        }
    }

    /// Starts `binary` as the node of `seat`; its stderr goes to
    /// `stderr-N.log` in the seat's data dir. `Err` with that stderr if
    /// it exits before it listens.
    fn node(
        &self,
        binary: &Path,
        seat: &Seat,
        env: &[(&str, &str)],
    ) -> Result<(Server, PathBuf), String> {
        let endpoints = self.etcd.endpoints().join(",");
        let args = [
            "--etcd",
            &endpoints,
            "--etcd-prefix",
            &self.prefix,
            "--node",
            seat.name,
            "--lease-ttl-ms",
            &LEASE_TTL_MS.to_string(),
            "--shards",
            &SHARDS.to_string(),
        ];
        serve(binary, &seat.data_dir, seat.port, &args, env)
    }

    /// `assignd cluster features` of this build, as JSON.
    fn features(&self, extra: &[&str]) -> Value {
        let output = Command::new(this_build())
            .args(["cluster", "features", "--etcd"])
            .arg(self.etcd.endpoints().join(","))
            .args(["--etcd-prefix", &self.prefix])
            .args(extra)
            .env("ASSIGND_ADMIN_TOKEN", common::ADMIN_TOKEN)
            .output()
            .expect("assignd cluster features runs");
        assert!(output.status.success(), "{}", common::stderr(&output));
        serde_json::from_str(&common::stdout(&output)).expect("JSON")
    }

    /// The format version byte of every frame of every shard's log in
    /// etcd.
    fn frame_versions(&self) -> BTreeSet<u8> {
        let etcd = self.runtime.block_on(async {
            assignd::cluster::Etcd::connect(self.etcd.config(&self.prefix))
                .await
                .expect("etcd")
        });
        let from = etcd.key("shards/");
        let to = etcd.key("shards0");
        let (chunks, _) = self
            .runtime
            .block_on(etcd.range(&from, &to, 6))
            .expect("the logs");
        let mut versions = BTreeSet::new();
        for (key, value) in chunks {
            if !String::from_utf8_lossy(&key).contains("/log/") {
                continue;
            }
            // A flag byte, then frames (length, CRC, version, type, payload).
            let mut frames = &value[1..];
            while frames.len() >= 10 {
                let length = u32::from_le_bytes(frames[0..4].try_into().unwrap()) as usize;
                versions.insert(frames[8]);
                frames = &frames[(8 + length).min(frames.len())..];
            }
        }
        versions
    }
}

/// Starts `binary serve` on `port` with `args`; waits for its
/// `listening on` line, or its exit (then `Err` with its stderr).
fn serve(
    binary: &Path,
    data_dir: &Path,
    port: u16,
    args: &[&str],
    env: &[(&str, &str)],
) -> Result<(Server, PathBuf), String> {
    use std::io::{BufRead, BufReader};
    static RUNS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let log = data_dir.join(format!("stderr-{run}.log"));
    let mut child = Command::new(binary)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .env("ASSIGND_ADMIN_TOKEN", common::ADMIN_TOKEN)
        .env("RUST_LOG", "info")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).expect("a log file"))
        .spawn()
        .expect("assignd serve starts");
    let stdout = child.stdout.take().expect("piped");
    let (lines, first) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let _ = lines.send(line);
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    let line = first
        .recv_timeout(common::SERVE_START_DEADLINE)
        .expect("serve printed its line or exited in time");
    let expected = format!("listening on http://127.0.0.1:{port}");
    if line.trim_end() == expected {
        return Ok((
            Server {
                child,
                base: format!("http://127.0.0.1:{port}"),
            },
            log,
        ));
    }
    let status = child.wait().expect("it exits");
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    Err(format!("{status}: {line}{stderr}"))
}

/// Stops `node` with SIGTERM (it hands its shards over) and waits for a
/// clean exit.
fn stop(mut node: Server) {
    node.signal(libc::SIGTERM);
    let status = node.exit_by(Instant::now() + SETTLE_WITHIN, "the node exits on SIGTERM");
    assert!(status.success(), "the node exits cleanly: {status}");
}

/// Waits until `nodes` serve every shard between them, each at least
/// one, none twice, and every node routes every shard to its server.
fn wait_settled(nodes: &[&Server]) {
    let deadline = Instant::now() + SETTLE_WITHIN;
    loop {
        let sets: Vec<BTreeSet<u64>> = nodes.iter().map(|n| n.served_shards()).collect();
        let all: BTreeSet<u64> = sets.iter().flatten().copied().collect();
        let total: usize = sets.iter().map(BTreeSet::len).sum();
        if all.len() == SHARDS as usize
            && total == all.len()
            && sets.iter().all(|s| !s.is_empty())
            && routes_agree(nodes, &sets)
        {
            return;
        }
        assert!(Instant::now() < deadline, "the nodes serve {sets:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn routes_agree(nodes: &[&Server], sets: &[BTreeSet<u64>]) -> bool {
    GROUPS.iter().all(|group| {
        let shard = u64::from(assignd::protocol::shard::shard_of(group, SHARDS as u32));
        let Some(owner) = nodes.iter().zip(sets).find(|(_, s)| s.contains(&shard)) else {
            return false;
        };
        nodes.iter().all(|asked| {
            let (status, body) =
                asked.call("GET", &format!("/v1/groups/{group}/coordinator"), None);
            status == 200 && body["url"] == owner.0.base.as_str()
        })
    })
}

fn group_config(expansion_timeout_ms: u64) -> Value {
    json!({"topics": [{"name": "orders", "partitions": 4}], "expansion_timeout_ms": expansion_timeout_ms})
}

/// Creates (or configures) every group through `node` with `config`,
/// retrying while its shard moves, and waits until each has its first
/// target.
fn create_groups(node: &Server, config: &Value) {
    for group in GROUPS {
        let (status, body) = node.put_group_retrying(group, config, SETTLE_WITHIN);
        assert!(status == 201 || status == 200, "{group}: {status} {body}");
    }
    // Each group's first target is installed after its PUT is answered:
    // what a test then reads as "before" must not race it.
    for group in GROUPS {
        let deadline = Instant::now() + SETTLE_WITHIN;
        loop {
            let (status, view) = node.call("GET", &format!("/v1/groups/{group}"), None);
            if status == 200 && view["target_epoch"] == view["group_epoch"] {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{group} never got its target: {status} {view}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// What nothing may change: each group's config, epochs and, per member,
/// its slot, member id, member epoch and active tasks.
fn durable_parts(node: &Server) -> Vec<Value> {
    GROUPS
        .iter()
        .map(|group| {
            let (status, view) = node.call("GET", &format!("/v1/groups/{group}"), None);
            assert_eq!(status, 200, "{group}: {view}");
            let members: Vec<Value> = view["members"]
                .as_array()
                .expect("members")
                .iter()
                .map(|m| json!([m["slot"], m["member_id"], m["member_epoch"], m["active"]]))
                .collect();
            // This build's view shows the routes promise, which the
            // previous release does not have, at its default.
            let mut config = view["config"].clone();
            if let Some(config) = config.as_object_mut()
                && config.get("routes_valid_ms") == Some(&json!(2_000))
            {
                config.remove("routes_valid_ms");
            }
            json!({
                "config": config,
                "group_epoch": view["group_epoch"],
                "target_epoch": view["target_epoch"],
                "members": members,
            })
        })
        .collect()
}

/// Each live node's entry in `assignd cluster features`: whether it
/// announced its support (this build does, the previous release not).
fn announced(features: &Value) -> BTreeMap<String, bool> {
    features["nodes"]
        .as_object()
        .expect("nodes")
        .iter()
        .map(|(name, node)| (name.clone(), node["registered"] == true))
        .collect()
}

#[test]
fn a_rolling_upgrade_from_the_previous_release_loses_nothing_and_stops_no_member() {
    let previous = previous_release();
    let _turn = one_at_a_time();
    let cluster = Cluster::start("upgrade");
    let seats = ["n1", "n2", "n3"].map(|name| cluster.seat(name));
    let mut nodes: Vec<Server> = seats
        .iter()
        .map(|seat| {
            cluster
                .node(previous, seat, &[])
                .expect("an old node starts")
                .0
        })
        .collect();
    wait_settled(&nodes.iter().collect::<Vec<_>>());
    create_groups(&nodes[0], &group_config(100));
    let bootstrap: Vec<String> = nodes.iter().map(|n| n.base.clone()).collect();
    let members = Members::start(&bootstrap.join(","), &GROUPS, &["worker-1", "worker-2"]);
    // Every member holds two tasks of its group's four.
    members.wait_settled(2, SETTLE_WITHIN);
    let before = durable_parts(&nodes[0]);
    let holdings = members.holdings();

    for (i, seat) in seats.iter().enumerate() {
        let old = nodes.remove(i);
        stop(old);
        let (new, _) = cluster
            .node(this_build(), seat, &[])
            .unwrap_or_else(|e| panic!("{} upgraded starts: {e}", seat.name));
        nodes.insert(i, new);
        wait_settled(&nodes.iter().collect::<Vec<_>>());
        members.wait_answered_after(Instant::now(), SETTLE_WITHIN);
        assert_eq!(
            (members.trouble(), members.errors()),
            (Vec::<String>::new(), Vec::<String>::new()),
            "after {}",
            seat.name
        );
        let features = cluster.features(&[]);
        if i + 1 < seats.len() {
            assert_eq!(features["format_version"], 4, "{features}");
        }
        let expected: BTreeMap<String, bool> = seats
            .iter()
            .enumerate()
            .map(|(j, s)| (s.name.to_owned(), j <= i))
            .collect();
        assert_eq!(announced(&features), expected, "{features}");
    }

    assert_eq!(
        durable_parts(&nodes[2]),
        before,
        "nothing changed: no rebalance"
    );
    assert_eq!(members.holdings(), holdings, "every member kept its tasks");
    assert_eq!(
        (members.trouble(), members.errors()),
        (Vec::<String>::new(), Vec::<String>::new())
    );
    // Every node reads 5 now: the level rises by itself.
    let deadline = Instant::now() + SETTLE_WITHIN;
    while cluster.features(&[])["format_version"] != 5 {
        assert!(Instant::now() < deadline, "the level never rose to 5");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        cluster.frame_versions().is_subset(&BTreeSet::from([4, 5])),
        "{:?}",
        cluster.frame_versions()
    );
}

#[test]
fn the_format_version_rises_only_once_every_node_reads_it_and_older_nodes_stay_out() {
    let previous = previous_release();
    let _turn = one_at_a_time();
    let cluster = Cluster::start("gate");
    let [a_seat, b_seat, c_seat, d_seat] = ["a", "b", "c", "d"].map(|name| cluster.seat(name));
    // b first: a alone would raise the level to 6 before b joins, and b
    // would be refused.
    let (b, _) = cluster.node(this_build(), &b_seat, &[]).unwrap();
    let (mut a, _) = cluster
        .node(this_build(), &a_seat, &[TEST_VERSION_ENV])
        .unwrap();
    wait_settled(&[&a, &b]);
    create_groups(&a, &group_config(100));
    let features = cluster.features(&[]);
    assert_eq!(features["format_version"], 5, "b reads only 5: {features}");
    assert_eq!(features["highest_safe"], 5, "{features}");
    let refused = Command::new(this_build())
        .args(["cluster", "features", "--etcd"])
        .arg(cluster.etcd.endpoints().join(","))
        .args(["--etcd-prefix", &cluster.prefix, "--set", "6"])
        .env("ASSIGND_ADMIN_TOKEN", common::ADMIN_TOKEN)
        .output()
        .unwrap();
    common::assert_one_error_line(&refused, 1, "node b reads format versions 1 to 5");

    // b upgraded: every node reads 6, and the level rises by itself.
    stop(b);
    let (b, _) = cluster
        .node(this_build(), &b_seat, &[TEST_VERSION_ENV])
        .unwrap();
    let deadline = Instant::now() + SETTLE_WITHIN;
    while cluster.features(&[])["format_version"] != 6 {
        assert!(Instant::now() < deadline, "the level never rose");
        std::thread::sleep(Duration::from_millis(50));
    }
    wait_settled(&[&a, &b]);
    // Writes after the rise are framed at 6: every group's config.
    create_groups(&a, &group_config(200));
    let before = durable_parts(&a);
    assert_eq!(cluster.frame_versions(), BTreeSet::from([5, 6]));

    // A node that reads only 5 refuses to join.
    let Err(refused) = cluster.node(this_build(), &c_seat, &[]) else {
        panic!("c joined a cluster whose level it cannot read");
    };
    assert!(
        refused.contains(
            "cannot join the cluster: this cluster writes record format version 6, newer than this assignd reads (1 to 5)"
        ),
        "{refused}"
    );

    // The previous release does not check: it joins, gets no shard
    // placed on it, and refuses each shard it tries whose log it cannot
    // read, saying why (one it can read, with no group written since the
    // rise, it may serve: it writes what every node reads).
    let (mut d, d_log) = cluster.node(previous, &d_seat, &[]).unwrap();
    let deadline = Instant::now() + SETTLE_WITHIN;
    while !announced(&cluster.features(&[])).contains_key("d") {
        assert!(Instant::now() < deadline, "d never registered");
        std::thread::sleep(Duration::from_millis(50));
    }
    stop(b);
    a.signal(libc::SIGTERM);
    a.exit_by(Instant::now() + SETTLE_WITHIN, "a exits");
    // Alone, d tries every shard and loads none.
    let reason = "is newer than this assignd reads (1 to 4)";
    let deadline = Instant::now() + SETTLE_WITHIN;
    while !std::fs::read_to_string(&d_log).unwrap().contains(reason) {
        assert!(Instant::now() < deadline, "d never said why it refuses");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(d.child.try_wait().unwrap().is_none(), "d still runs");
    let on_d = d.served_shards();
    for group in GROUPS {
        let shard = assignd::protocol::shard::shard_of(group, SHARDS as u32);
        assert!(
            !on_d.contains(&u64::from(shard)),
            "d serves {group}'s shard"
        );
    }
    stop(d);
    // b back: it takes every shard, as it was.
    let (b, _) = cluster
        .node(this_build(), &b_seat, &[TEST_VERSION_ENV])
        .unwrap();
    wait_settled(&[&b]);
    assert_eq!(durable_parts(&b), before);
}

#[test]
fn a_data_dir_written_at_a_newer_format_version_refuses_to_open_under_an_older_binary() {
    let previous = previous_release();
    let data_dir = common::scratch("downgrade");
    let port = free_port();
    let (newer, _) = serve(this_build(), &data_dir, port, &[], &[TEST_VERSION_ENV]).unwrap();
    create_groups(&newer, &group_config(100));
    let before = durable_parts(&newer);
    stop(newer);

    for (older, reads) in [(this_build(), "1 to 5"), (previous, "1 to 4")] {
        let reason = format!("format version 6 is newer than this assignd reads ({reads})");
        let refused = serve(older, &data_dir, port, &[], &[])
            .err()
            .unwrap_or_else(|| panic!("{} opened it", older.display()));
        assert!(refused.contains(&reason), "{}: {refused}", older.display());
    }
    // Nothing was cut: the newer binary opens it as it was.
    let (again, _) = serve(this_build(), &data_dir, port, &[], &[TEST_VERSION_ENV]).unwrap();
    assert_eq!(durable_parts(&again), before);
    stop(again);
}
