//! Upgrades through the real binaries: a 3-node cluster of an older build
//! (the previous release, and the last build whose newest format is 6,
//! each built here from its commit) upgraded one node at a time to this
//! build under member load loses nothing, rebalances nothing and stops no
//! member, refuses labels until the last node is upgraded, then rises to
//! format 7 and takes them; the cluster's record format level
//! rises only once every live node reads the higher version, a node that
//! cannot read it refuses to join, and a node of the previous release
//! that joins anyway refuses to load a shard it cannot read and gets
//! none placed on it; a data dir written at a newer version refuses to
//! open under an older binary.
//!
//! This build reads and writes format version 7 and still writes 6, 5
//! and 4: a rolling upgrade runs at the old build's level (4 for the
//! previous release, 6 for the format 6 build) until its last node is
//! upgraded, then rises to 7. The gating between two builds of this
//! release needs a version above this build's: the test-only version 8
//! (`ASSIGND_TEST_FORMAT_VERSION_8=1`, version 7's payloads under the next
//! number; docs/architecture.md, "Cluster mode").

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

/// An older build: its tag, if it has one, and its commit for a clone
/// without tags.
struct Release {
    tag: Option<&'static str>,
    commit: &'static str,
}

/// The previous release: record format 4, before the feature levels.
const PREVIOUS: Release = Release {
    tag: Some("v0.1.0"),
    commit: "c58fcd9754d2678f5ede454d35cfad9d5b4cb137",
};
/// The last build whose newest record format is 6 (load settings, no
/// labels or shadow assignor), untagged: what a cluster of this release's
/// previous format runs.
const FORMAT_6: Release = Release {
    tag: None,
    commit: "9d226a7bc547f57f2412213c2156a1b896067780",
};

const SHARDS: u64 = 8;
const LEASE_TTL_MS: u64 = 2_000;
/// How long a test waits for the cluster to reach a state: a bound, not a
/// wait.
const SETTLE_WITHIN: Duration = Duration::from_secs(60);
const GROUPS: [&str; 8] = ["g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7"];
const TEST_VERSION_ENV: (&str, &str) = ("ASSIGND_TEST_FORMAT_VERSION_8", "1");

/// The previous release's `assignd`.
fn previous_release() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| build(&PREVIOUS))
}

/// The `assignd` of [`FORMAT_6`].
fn format_6_build() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| build(&FORMAT_6))
}

/// `release`'s `assignd`, built on first use and kept as
/// `target/upgrade/COMMIT/assignd` (a later run finds it there). Every
/// older build shares one target directory (and one for its guests): their
/// dependencies are nearly all the same versions, so the second build
/// compiles little more than the workspace's own crates. One build at a
/// time, each copying its binary out before the next can overwrite it.
fn build(release: &Release) -> PathBuf {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _building = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let root = common::workspace_root();
    let commit = release_commit(&root, release);
    let upgrade = root.join("target").join("upgrade");
    let dir = upgrade.join(&commit);
    let binary = dir.join("assignd");
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
    let shared = upgrade.join("target");
    run(Command::new("cargo")
        .args(["build", "-p", "assignd"])
        .current_dir(&src)
        .env("CARGO_TARGET_DIR", &shared)
        .env("ASSIGND_GUEST_TARGET_DIR", upgrade.join("guests"))
        .env_remove("RUSTUP_TOOLCHAIN"));
    std::fs::copy(shared.join("debug").join("assignd"), &binary).expect("the built assignd copied");
    let _ = std::fs::remove_dir_all(&src);
    let _ = std::fs::remove_file(&archive);
    eprintln!(
        "built {commit} ({:?}) in {} s",
        release.tag,
        started.elapsed().as_secs()
    );
    binary
}

/// `release`'s commit, by its tag or else by its hash; a clone that has
/// neither (a shallow one) fails saying what to fetch.
fn release_commit(root: &Path, release: &Release) -> String {
    let by_tag = release.tag.map(|tag| format!("{tag}^{{commit}}"));
    let by_hash = format!("{}^{{commit}}", release.commit);
    for name in by_tag.into_iter().chain([by_hash]) {
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
    let commit = release.commit;
    panic!(
        "the older build's commit {commit} ({:?}) is not in this clone: \
         fetch it (`git fetch --unshallow`, or `git fetch origin {commit}`) and run again",
        release.tag
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
            // This build's view shows the routes promise, the load
            // settings and the labels, which older builds do not have, at
            // their defaults.
            let mut config = view["config"].clone();
            if let Some(config) = config.as_object_mut() {
                for (field, default) in [
                    ("labels", json!({})),
                    ("routes_valid_ms", json!(2_000)),
                    ("load_unit", Value::Null),
                    ("load_half_life_ms", json!(30_000)),
                    ("load_window_ms", json!(60_000)),
                    ("load_cooldown_ms", json!(300_000)),
                    ("frozen", json!(false)),
                ] {
                    if config.get(field) == Some(&default) {
                        config.remove(field);
                    }
                }
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
    rolling_upgrade(previous_release(), 4, "upgrade");
}

#[test]
fn a_rolling_upgrade_from_format_6_rises_to_7_and_takes_labels_only_then() {
    rolling_upgrade(format_6_build(), 6, "upgrade6");
}

/// A 3-node cluster of `old` (which writes format `old_level` at most)
/// under member load, each node stopped with SIGTERM and started as this
/// build on the same name, port and data dir, one after the other: no
/// member sees an error, every group's config, epochs and assignment stay
/// as they were (no rebalance), and labels are refused (409) until the
/// last node is upgraded; then the level rises to 7 by itself and they
/// are taken, framed at 7.
fn rolling_upgrade(old: &Path, old_level: u8, name: &str) {
    let _turn = one_at_a_time();
    let cluster = Cluster::start(name);
    let seats = ["n1", "n2", "n3"].map(|name| cluster.seat(name));
    let mut nodes: Vec<Server> = seats
        .iter()
        .map(|seat| cluster.node(old, seat, &[]).expect("an old node starts").0)
        .collect();
    wait_settled(&nodes.iter().collect::<Vec<_>>());
    wait_level(&cluster, old_level);
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
            assert_eq!(features["format_version"], old_level, "{features}");
            assert_labels_refused(&nodes[..=i]);
        }
        let expected: BTreeMap<String, bool> = seats
            .iter()
            .enumerate()
            .map(|(j, s)| (s.name.to_owned(), j <= i || old_level >= 5))
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
    // Every node reads 7 now: the level rises by itself, and labels are
    // taken, framed at 7.
    wait_level(&cluster, 7);
    let (status, body) = nodes[0].put_group_retrying(GROUPS[0], &labelled_config(), SETTLE_WITHIN);
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["config"]["labels"],
        json!({"team": "payments"}),
        "{body}"
    );
    let versions = cluster.frame_versions();
    // A cluster starts at level 4 until its first levelled node raises it.
    let written: BTreeSet<u8> = [4, old_level, 7].into();
    assert!(versions.is_subset(&written), "{versions:?}");
    assert!(versions.contains(&7), "{versions:?}");
}

/// Waits until the cluster's format level is `level`.
fn wait_level(cluster: &Cluster, level: u8) {
    let deadline = Instant::now() + SETTLE_WITHIN;
    while cluster.features(&[])["format_version"] != level {
        assert!(Instant::now() < deadline, "the level never became {level}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// [`group_config`] with a label: what only format 7 keeps.
fn labelled_config() -> Value {
    let mut config = group_config(100);
    config["labels"] = json!({"team": "payments"});
    config
}

/// Asks each group's coordinator among the upgraded `nodes` to set
/// labels, while the cluster writes an older format: each refuses with
/// 409 `format_level_too_low` (nothing changes; the caller checks).
fn assert_labels_refused(nodes: &[Server]) {
    let mut asked = 0;
    for group in GROUPS {
        let shard = u64::from(assignd::protocol::shard::shard_of(group, SHARDS as u32));
        let Some(node) = nodes.iter().find(|n| n.served_shards().contains(&shard)) else {
            continue;
        };
        let (status, body) = node.put_group_retrying(group, &labelled_config(), SETTLE_WITHIN);
        assert_eq!(status, 409, "{group}: {body}");
        assert_eq!(body["error"]["code"], "format_level_too_low", "{body}");
        asked += 1;
    }
    assert!(asked > 0, "no group on an upgraded node");
}

#[test]
fn the_format_version_rises_only_once_every_node_reads_it_and_older_nodes_stay_out() {
    let previous = previous_release();
    let _turn = one_at_a_time();
    let cluster = Cluster::start("gate");
    let [a_seat, b_seat, c_seat, d_seat] = ["a", "b", "c", "d"].map(|name| cluster.seat(name));
    // b first: a alone would raise the level to 8 before b joins, and b
    // would be refused.
    let (b, _) = cluster.node(this_build(), &b_seat, &[]).unwrap();
    let (mut a, _) = cluster
        .node(this_build(), &a_seat, &[TEST_VERSION_ENV])
        .unwrap();
    wait_settled(&[&a, &b]);
    create_groups(&a, &group_config(100));
    let features = cluster.features(&[]);
    assert_eq!(features["format_version"], 7, "b reads only 7: {features}");
    assert_eq!(features["highest_safe"], 7, "{features}");
    let refused = Command::new(this_build())
        .args(["cluster", "features", "--etcd"])
        .arg(cluster.etcd.endpoints().join(","))
        .args(["--etcd-prefix", &cluster.prefix, "--set", "8"])
        .env("ASSIGND_ADMIN_TOKEN", common::ADMIN_TOKEN)
        .output()
        .unwrap();
    common::assert_one_error_line(&refused, 1, "node b reads format versions 1 to 7");

    // b upgraded: every node reads 8, and the level rises by itself.
    stop(b);
    let (b, _) = cluster
        .node(this_build(), &b_seat, &[TEST_VERSION_ENV])
        .unwrap();
    wait_level(&cluster, 8);
    wait_settled(&[&a, &b]);
    // Writes after the rise are framed at 8: every group's config.
    create_groups(&a, &group_config(200));
    let before = durable_parts(&a);
    assert_eq!(cluster.frame_versions(), BTreeSet::from([7, 8]));

    // A node that reads only 7 refuses to join.
    let Err(refused) = cluster.node(this_build(), &c_seat, &[]) else {
        panic!("c joined a cluster whose level it cannot read");
    };
    assert!(
        refused.contains(
            "cannot join the cluster: this cluster writes record format version 8, newer than this assignd reads (1 to 7)"
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

    for (older, reads) in [
        (this_build(), "1 to 7"),
        (format_6_build(), "1 to 6"),
        (previous, "1 to 4"),
    ] {
        let reason = format!("format version 8 is newer than this assignd reads ({reads})");
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
