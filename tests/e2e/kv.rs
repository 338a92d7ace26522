//! The example key-value service (examples/kv) through the real binaries:
//! a host, a group with a reader token and learners, three workers, the
//! router and the load running all along. The workers scale up to six,
//! back down to three (SIGTERM: each drains and exits 0), and one is
//! killed with -9. Nothing acknowledged may be lost, and every request
//! refused or misrouted meanwhile must succeed in the end. The router's
//! misroutes, retries and refusals during each rebalance are printed.
//!
//! The example is built with `cargo build -p assignd-kv` on first use
//! (the cargo that runs the tests), into the workspace's target dir.
//!
//! `ASSIGND_KV_LEARNERS=off` runs the same without learners (the group's
//! `learners`; `host` by default), for the figures with and without them:
//! `ASSIGND_KV_LEARNERS=off cargo test -p assignd --test e2e kv:: -- --nocapture`.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::common::Server;
use serde_json::{Value, json};

pub(crate) const GROUP: &str = "kv";
pub(crate) const READER_TOKEN: &str = "e2e-kv-reader-token-3c9e";
pub(crate) const PARTITIONS: usize = 12;
/// How long a process may take to reach a state: a bound, not a wait.
pub(crate) const REACH_WITHIN: Duration = Duration::from_secs(45);
/// The router forwards this many requests after a rebalance settled
/// before its counters are read: the tail of the rebalance included.
pub(crate) const SETTLED_REQUESTS: u64 = 200;

/// The group's `learners`: `ASSIGND_KV_LEARNERS`, `host` by default.
fn learners() -> String {
    std::env::var("ASSIGND_KV_LEARNERS").unwrap_or_else(|_| "host".into())
}

pub(crate) fn group_config() -> Value {
    json!({
        "topics": [{"name": "kv", "partitions": PARTITIONS}],
        "learners": learners(),
        "heartbeat_interval_ms": 300,
        "session_timeout_ms": 3000,
        "expansion_timeout_ms": 2000,
        "acceptable_recovery_lag": 10,
        "max_learners": PARTITIONS,
        "routes_valid_ms": 1000,
        "reader_token": READER_TOKEN,
    })
}

/// `target/debug/assignd-kv` (under `CARGO_TARGET_DIR` if set), built
/// once per test process.
pub(crate) fn kv_binary() -> &'static Path {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    BINARY.get_or_init(|| {
        let root = common::workspace_root();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "assignd-kv"])
            .current_dir(&root)
            .status()
            .expect("cargo runs");
        assert!(status.success(), "cargo build -p assignd-kv: {status}");
        // Where that cargo put it: the same environment as this one's.
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map_or_else(|| root.join("target"), |dir| root.join(dir));
        target.join("debug/assignd-kv")
    })
}

/// A running `assignd-kv` and every line it printed.
pub(crate) struct Process {
    label: String,
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    /// The thread that reads its stdout: it has every line once it ends.
    reader: std::thread::JoinHandle<()>,
    stderr: PathBuf,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Process {
    pub(crate) fn start(label: &str, dir: &Path, args: &[&str]) -> Process {
        let stderr = dir.join(format!("{label}.stderr"));
        let mut child = Command::new(kv_binary())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&stderr).expect("a log file"))
            .spawn()
            .unwrap_or_else(|e| panic!("starting assignd-kv {label}: {e}"));
        let stdout = child.stdout.take().expect("piped");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        // Kept in the scratch directory too, beside its stderr.
        let mut copy = std::fs::File::create(dir.join(format!("{label}.stdout"))).expect("a file");
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = writeln!(copy, "{line}");
                sink.lock().unwrap().push(line);
            }
        });
        Process {
            label: label.to_owned(),
            child,
            lines,
            reader,
            stderr,
        }
    }

    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Its lines that are JSON events.
    fn events(&self) -> Vec<Value> {
        let lines = self.lines();
        lines
            .iter()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// The partitions it serves, as its events tell it.
    pub(crate) fn held(&self) -> usize {
        let mut held = std::collections::BTreeSet::new();
        for event in self.events() {
            let tasks = event["tasks"].as_array().cloned().unwrap_or_default();
            let partitions = tasks.iter().filter_map(|task| task[1].as_u64());
            match event["event"].as_str() {
                Some("assigned" | "promoted") => held.extend(partitions),
                Some("revoked" | "lost") => partitions.for_each(|p| {
                    held.remove(&p);
                }),
                _ => {}
            }
        }
        held.len()
    }

    pub(crate) fn count(&self, event: &str) -> usize {
        self.events().iter().filter(|e| e["event"] == event).count()
    }

    pub(crate) fn diagnose(&self) -> String {
        let log = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(30).collect();
        format!(
            "{}: stdout:\n  {}\nstderr (last lines):\n  {}",
            self.label,
            self.lines().join("\n  "),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n  ")
        )
    }

    pub(crate) fn wait_for(&self, what: &str, done: impl Fn(&Process) -> bool) {
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

    pub(crate) fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("a pid fits pid_t");
        // SAFETY: kill(2) on our own child, which stays ours until reaped.
        let sent = unsafe { libc::kill(pid, signal) };
        assert_eq!(sent, 0, "kill: {}", std::io::Error::last_os_error());
    }

    /// Waits for it to exit and for its last line to be read.
    pub(crate) fn exit(&mut self) -> ExitStatus {
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
}

/// Waits until each of `workers` serves `each` partitions.
pub(crate) fn wait_each_holds(workers: &[&Process], each: usize) {
    for worker in workers {
        worker.wait_for(&format!("served {each} partitions"), |w| w.held() == each);
    }
}

pub(crate) fn stats(router: &str) -> Value {
    let url = format!("{router}/stats");
    let mut response = Server::agent()
        .get(&url)
        .call()
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let text = response.body_mut().read_to_string().unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{url}: {e}: {text}"))
}

/// Waits until the router has forwarded `more` requests past `from`.
pub(crate) fn wait_forwarded(router: &str, from: &Value, more: u64) {
    let target = from["forwarded"].as_u64().unwrap() + more;
    let started = Instant::now();
    while stats(router)["forwarded"].as_u64().unwrap() < target {
        assert!(
            started.elapsed() < REACH_WITHIN,
            "the router forwarded fewer than {more} requests"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The router's counters' growth from `before` to `after`, as a line.
pub(crate) fn delta(phase: &str, before: &Value, after: &Value) -> Value {
    let grown = |path: &[&str]| {
        let at = |stats: &Value| path.iter().fold(stats, |v, p| &v[p]).as_u64().unwrap();
        at(after) - at(before)
    };
    // How many requests waited, and how long on average (ms).
    let durations = |name: &str| {
        let count = grown(&[name, "count"]);
        json!({"count": count, "ms_mean": grown(&[name, "ms_total"]).checked_div(count)})
    };
    json!({
        "phase": phase,
        "forwarded": grown(&["forwarded"]),
        "misrouted": grown(&["misrouted"]),
        "unreachable": grown(&["unreachable"]),
        "retried": grown(&["retried"]),
        "refused": grown(&["refused"]),
        "newer_table_after_misroute": durations("newer_table_after_misroute"),
        "answered_after_misroute": durations("answered_after_misroute"),
        "epochs": grown(&["epoch"]),
    })
}

/// A worker `label` of the group, given the host's URL (or a cluster's,
/// comma-separated), its changelogs under `dir/data`.
pub(crate) fn start_worker(dir: &Path, urls: &str, label: &str) -> Process {
    let data = dir.join("data");
    let partitions = PARTITIONS.to_string();
    let args = [
        "worker",
        "--url",
        urls,
        "--group",
        GROUP,
        "--listen",
        "127.0.0.1:0",
        "--data-dir",
        data.to_str().unwrap(),
        "--partitions",
        &partitions,
    ];
    Process::start(label, dir, &args)
}

/// The router in front of the group, given the host's URL (or a
/// cluster's, comma-separated): the process and the URL it listens on.
pub(crate) fn start_router(dir: &Path, urls: &str) -> (Process, String) {
    let args = [
        "router",
        "--url",
        urls,
        "--group",
        GROUP,
        "--token",
        READER_TOKEN,
        "--listen",
        "127.0.0.1:0",
    ];
    let router = Process::start("router", dir, &args);
    router.wait_for("listened", |r| !r.lines().is_empty());
    let url = router.lines()[0]
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("{}", router.diagnose()))
        .to_owned();
    (router, url)
}

/// The load through `router_url`: 40 keys, 200 requests a second, until
/// it is stopped.
pub(crate) fn start_load(dir: &Path, router_url: &str) -> Process {
    let args = [
        "load",
        "--router",
        router_url,
        "--keys",
        "40",
        "--rate",
        "200",
        "--seconds",
        "300",
    ];
    Process::start("load", dir, &args)
}

#[test]
fn kv_service_loses_nothing_through_scale_up_scale_down_and_a_kill() {
    kv_binary();
    let started = Instant::now();
    let dir = common::scratch("service");
    let server = Server::start(&dir.join("host"), &[]);
    let (status, body) = server.call("PUT", "/v1/groups/kv", Some(&group_config()));
    assert_eq!(status, 201, "{body}");
    let worker = |label: &str| start_worker(&dir, &server.base, label);

    let mut workers: Vec<Process> = ["w1", "w2", "w3"].into_iter().map(worker).collect();
    wait_each_holds(&workers.iter().collect::<Vec<_>>(), PARTITIONS / 3);

    let (_router, router_url) = start_router(&dir, &server.base);
    let mut load = start_load(&dir, &router_url);
    wait_forwarded(&router_url, &stats(&router_url), SETTLED_REQUESTS);

    let mut phases = Vec::new();
    let mut phase = |name: &str, change: &mut dyn FnMut()| {
        let before = stats(&router_url);
        let at = Instant::now();
        change();
        let settled_ms = at.elapsed().as_millis() as u64;
        wait_forwarded(&router_url, &stats(&router_url), SETTLED_REQUESTS);
        let mut line = delta(name, &before, &stats(&router_url));
        line["settled_ms"] = json!(settled_ms);
        println!("kv rebalance: {line}");
        phases.push(line);
    };

    phase("scale up 3 -> 6", &mut || {
        workers.extend(["w4", "w5", "w6"].into_iter().map(worker));
        wait_each_holds(&workers.iter().collect::<Vec<_>>(), PARTITIONS / 6);
    });
    let promoted: usize = workers[3..].iter().map(|w| w.count("promoted")).sum();
    if learners() != "off" {
        assert!(promoted > 0, "the new workers warmed up as learners first");
    }

    phase("scale down 6 -> 3 (SIGTERM)", &mut || {
        for leaving in &workers[3..] {
            leaving.signal(libc::SIGTERM);
        }
        for mut leaving in workers.drain(3..) {
            assert!(leaving.exit().success(), "{}", leaving.diagnose());
            assert_eq!(leaving.count("drained"), 1, "{}", leaving.diagnose());
        }
        wait_each_holds(&workers.iter().collect::<Vec<_>>(), PARTITIONS / 3);
    });

    phase("kill -9 of one worker", &mut || {
        let mut killed = workers.pop().expect("three workers");
        killed.child.kill().expect("kill -9");
        killed.child.wait().expect("reaped");
        wait_each_holds(&workers.iter().collect::<Vec<_>>(), PARTITIONS / 2);
    });

    load.signal(libc::SIGTERM);
    let status = load.exit();
    let summary: Value = load
        .lines()
        .last()
        .and_then(|line| serde_json::from_str(line).ok())
        .unwrap_or_else(|| panic!("no summary\n{}", load.diagnose()));
    println!("kv load: {summary}");
    let last = stats(&router_url);
    println!(
        "kv misroute to a newer table, longest: {} ms; to the answer, longest: {} ms",
        last["newer_table_after_misroute"]["ms_max"], last["answered_after_misroute"]["ms_max"]
    );
    println!(
        "kv test (learners {}) took {} ms",
        learners(),
        started.elapsed().as_millis()
    );
    assert_eq!(summary["lost"], 0, "{summary}");
    assert!(status.success(), "{}", load.diagnose());
    assert_eq!(
        summary["unfinished"], 0,
        "every request succeeded in the end: {summary}"
    );
    assert!(summary["puts_ok"].as_u64().unwrap() > 0, "{summary}");
    assert!(summary["gets_ok"].as_u64().unwrap() > 0, "{summary}");
}
