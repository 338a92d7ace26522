//! Shared by the end-to-end tests: the real `assignd` binary, the
//! misbehaving guests of `tests/guests/` built from source once per test
//! binary, hand-written WAT fixtures, scratch files, and the host crate's
//! source read as a tree of modules (`source_tree`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

mod crafted;
pub mod members;
pub mod source_tree;
pub use crafted::*;

pub const BAD_GUESTS: &[&str] = &[
    "test-guest-spin-forever",
    "test-guest-memory-hog",
    "test-guest-panicking",
    "test-guest-invalid-output",
    "test-guest-spin-when-told",
    // Not misbehaving: a 0.2 guest that shows the loads it got.
    "test-guest-load-echo",
];

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A scratch directory unique to this test process, the test file that
/// asks for it, and `name`: every test file runs in the one process, so
/// two files may use the same name at once.
#[track_caller]
pub fn scratch(name: &str) -> PathBuf {
    let file = Path::new(std::panic::Location::caller().file())
        .file_stem()
        .and_then(|stem| stem.to_str())
        .unwrap_or("e2e");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("e2e-{}-{file}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The component file of a misbehaving guest (package name), built on
/// first use.
pub fn bad_guest(package: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let dir = BUILT.get_or_init(|| {
        let out = scratch("guests");
        assignd_guest_build::build(&workspace_root(), BAD_GUESTS, &out)
            .unwrap_or_else(|e| panic!("building the test guests: {e}"));
        out
    });
    dir.join(format!("{package}.wasm"))
}

/// The `spin-when-told` guest's core module made to loop in its start
/// function ([`with_start_loop`]), as a component: refused at upload,
/// where `info()` is called on a first instance, by the call's limits.
pub fn start_loop_component() -> Vec<u8> {
    bad_guest("test-guest-spin-when-told");
    let core = assignd_guest_build::target_dir(&workspace_root())
        .join(assignd_guest_build::TARGET)
        .join(assignd_guest_build::PROFILE)
        .join("test_guest_spin_when_told.wasm");
    let core = std::fs::read(&core).unwrap_or_else(|e| panic!("{}: {e}", core.display()));
    assignd_guest_build::componentize(&with_start_loop(&core))
        .unwrap_or_else(|e| panic!("the start-loop component: {e}"))
}

/// A component that exports something other than the assignor interface.
pub const OTHER_WORLD_WAT: &str = r#"
(component
  (core module $m (func (export "f") (result i32) i32.const 42))
  (core instance $i (instantiate $m))
  (func (export "hello") (result u32) (canon lift (core func $i "f")))
)"#;

pub fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Runs `assignd` with `args`, with a cache directory of its own.
pub fn assignd(args: &[&str]) -> Output {
    // A cache of its own per call: tests run in parallel in one process,
    // and `scratch` empties the folder it returns, so a shared one could be
    // removed under another call's feet (its artifact write then fails and
    // logs a second line on stderr).
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let cache = scratch(&format!("cache-{call}"));
    Command::new(env!("CARGO_BIN_EXE_assignd"))
        .args(args)
        .env("ASSIGND_CACHE_DIR", &cache)
        .output()
        .expect("cannot start assignd")
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Asserts the run failed with exit `code`, printed nothing on stdout and
/// exactly one `error: …` line on stderr containing `needle`.
pub fn assert_one_error_line(output: &Output, code: i32, needle: &str) {
    let err = stderr(output);
    assert_eq!(
        output.status.code(),
        Some(code),
        "exit status; stderr: {err}"
    );
    assert!(
        output.stdout.is_empty(),
        "stdout must be empty, got: {}",
        stdout(output)
    );
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line on stderr, got: {err:?}");
    assert!(
        lines[0].starts_with("error: "),
        "line starts with error: {err:?}"
    );
    assert!(lines[0].contains(needle), "expected {needle:?} in {err:?}");
}

/// The small example input of docs/design.md's contract (three members).
pub fn example_input() -> PathBuf {
    workspace_root().join("examples/group.json")
}

/// How long `assignd serve` may take to print its address.
pub const SERVE_START_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

/// An etcd of `members` members on free loopback ports under `dir`
/// (`LocalEtcd`, stopped on drop), and the runtime that watches its
/// processes, which must live as long as it does.
pub fn local_etcd(
    dir: &Path,
    members: usize,
) -> (
    tokio::runtime::Runtime,
    assignd::cluster::local_etcd::LocalEtcd,
) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime");
    let etcd = runtime
        .block_on(assignd::cluster::local_etcd::LocalEtcd::start(dir, members))
        .unwrap_or_else(|e| panic!("{e:#}"));
    (runtime, etcd)
}

/// The admin token every [`Server`] is started with (through
/// `ASSIGND_ADMIN_TOKEN`) and that [`Server::call`] and [`Server::upload`]
/// send; a test that runs the CLI against it passes it as `ASSIGND_TOKEN`.
pub const ADMIN_TOKEN: &str = "e2e-admin-token-5f1c";

/// The real `assignd serve` on a free port, killed on drop.
pub struct Server {
    pub child: std::process::Child,
    /// `http://127.0.0.1:PORT`, as the server printed it.
    pub base: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts `assignd serve --listen 127.0.0.1:0 --data-dir DATA_DIR`
    /// with `extra` arguments and waits for its `listening on` line.
    pub fn start(data_dir: &Path, extra: &[&str]) -> Server {
        Self::start_with(data_dir, extra, |_| {})
    }

    /// [`Server::start`], with `prepare` given the command before it is
    /// spawned (to set limits on the child, say).
    pub fn start_with(
        data_dir: &Path,
        extra: &[&str],
        prepare: impl FnOnce(&mut Command),
    ) -> Server {
        use std::io::{BufRead, BufReader};
        use std::process::Stdio;

        let mut command = Command::new(env!("CARGO_BIN_EXE_assignd"));
        command
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(extra)
            .arg("--data-dir")
            .arg(data_dir)
            .env("ASSIGND_ADMIN_TOKEN", ADMIN_TOKEN)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        prepare(&mut command);
        let mut child = command.spawn().expect("cannot start assignd serve");
        let stdout = child.stdout.take().expect("piped stdout");
        let (lines, first_line) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let _ = lines.send(line);
            // Keep draining, so the server never blocks on a full pipe.
            let _ = std::io::copy(&mut reader, &mut std::io::sink());
        });
        let mut server = Server {
            child,
            base: String::new(),
        };
        let line = first_line
            .recv_timeout(SERVE_START_DEADLINE)
            .expect("assignd serve printed no line in time");
        let address = line
            .trim_end()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"));
        assert!(address.starts_with("http://127.0.0.1:"), "{address}");
        assert!(!address.ends_with(":0"), "the real port: {address}");
        server.base = address.to_owned();
        server
    }

    /// Sends `signal` (`libc::SIGTERM`, say) to the server straight from
    /// this process: no `kill` child, so it lands as soon as possible.
    #[cfg(unix)]
    pub fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).expect("a pid fits pid_t");
        // SAFETY: kill(2) on our own child's pid, which it stays until
        // reaped (by `wait` on `self.child`, which needs `&mut`).
        let sent = unsafe { libc::kill(pid, signal) };
        assert_eq!(sent, 0, "kill: {}", std::io::Error::last_os_error());
    }

    /// Waits for the server to exit, failing the test with `what` if it
    /// still runs at `deadline`; its exit status.
    pub fn exit_by(
        &mut self,
        deadline: std::time::Instant,
        what: &str,
    ) -> std::process::ExitStatus {
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    pub fn agent() -> ureq::Agent {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            // A cluster's 307 is checked as it is, not followed.
            .max_redirects(0)
            .timeout_global(Some(std::time::Duration::from_secs(60)))
            .build()
            .into()
    }

    /// The status and JSON answer (`Null` for an empty body) of a response.
    fn answer(
        method: &str,
        url: &str,
        response: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> (u16, serde_json::Value) {
        let mut response = response.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .unwrap_or_else(|e| panic!("{method} {url}: reading the body: {e}"));
        if text.is_empty() {
            return (status, serde_json::Value::Null);
        }
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method} {url}: not JSON ({e}): {text}"));
        (status, value)
    }

    /// Sends `body` (if any) as JSON and returns the status and the answer.
    pub fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let url = format!("{}{path}", self.base);
        let agent = Self::agent();
        let bearer = format!("Bearer {ADMIN_TOKEN}");
        let response = match (method, body) {
            ("GET", None) => agent.get(&url).header("authorization", &bearer).call(),
            ("DELETE", None) => agent.delete(&url).header("authorization", &bearer).call(),
            ("PUT", Some(body)) => agent
                .put(&url)
                .header("authorization", &bearer)
                .send_json(body),
            ("POST", Some(body)) => agent
                .post(&url)
                .header("authorization", &bearer)
                .send_json(body),
            ("POST", None) => agent
                .post(&url)
                .header("authorization", &bearer)
                .send_empty(),
            other => panic!("unsupported call {other:?}"),
        };
        Self::answer(method, &url, response)
    }

    /// `PUT /v1/groups/{group}` with `config`, retried while the group's
    /// shard is between nodes (503 `shard_unavailable`, "retry shortly"),
    /// as any client would, for at most `within`; returns the answer that
    /// was not that.
    pub fn put_group_retrying(
        &self,
        group: &str,
        config: &serde_json::Value,
        within: std::time::Duration,
    ) -> (u16, serde_json::Value) {
        let deadline = std::time::Instant::now() + within;
        loop {
            let (status, body) = self.call("PUT", &format!("/v1/groups/{group}"), Some(config));
            if status != 503 || body["error"]["code"] != "shard_unavailable" {
                return (status, body);
            }
            assert!(std::time::Instant::now() < deadline, "{group}: {body}");
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }

    /// The value of the series `name` (a metric name, with its labels if
    /// it has any) in `GET /metrics`; `None` if it has no such series.
    pub fn metric(&self, name: &str) -> Option<f64> {
        let url = format!("{}/metrics", self.base);
        let mut response = Self::agent()
            .get(&url)
            .call()
            .unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let text = response.body_mut().read_to_string().expect("the metrics");
        text.lines()
            .filter(|line| !line.starts_with('#'))
            .find_map(|line| {
                let (series, value) = line.rsplit_once(' ')?;
                (series == name).then(|| value.parse().expect("a number"))
            })
    }

    /// The shards this server serves now (`GET /v1/shards`).
    pub fn served_shards(&self) -> std::collections::BTreeSet<u64> {
        let (status, shards) = self.call("GET", "/v1/shards", None);
        assert_eq!(status, 200, "{shards}");
        shards["served"]
            .as_array()
            .expect("served")
            .iter()
            .map(|s| s.as_u64().expect("an id"))
            .collect()
    }

    /// Rolls `group`'s assignor back to its binding before (expects 200);
    /// returns the answer and the binding the rollback made.
    pub fn rollback(&self, group: &str) -> (serde_json::Value, serde_json::Value) {
        let (status, rolled) = self.call(
            "POST",
            &format!("/v1/groups/{group}/assignor/rollback"),
            None,
        );
        assert_eq!(status, 200, "{rolled}");
        let binding = rolled["bindings"]
            .as_array()
            .and_then(|bindings| bindings.last())
            .cloned()
            .unwrap_or_else(|| panic!("a rollback without bindings: {rolled}"));
        (rolled, binding)
    }

    /// Uploads a component as `name@version`.
    pub fn upload(&self, name: &str, version: &str, bytes: &[u8]) -> (u16, serde_json::Value) {
        let url = format!("{}/v1/assignors?name={name}&version={version}", self.base);
        let response = Self::agent()
            .post(&url)
            .header("content-type", "application/wasm")
            .header("authorization", format!("Bearer {ADMIN_TOKEN}"))
            .send(bytes);
        Self::answer("POST", &url, response)
    }
}

/// A JSON task list (`[["orders", 0], ...]`) as a set of (topic, partition).
pub fn tasks(value: &serde_json::Value) -> std::collections::BTreeSet<(String, u64)> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("a task list: {value}"))
        .iter()
        .map(|task| {
            (
                task[0].as_str().expect("topic").to_owned(),
                task[1].as_u64().expect("partition"),
            )
        })
        .collect()
}

/// One member simulated over raw HTTP: what it was last told, and what it
/// holds. It reports what it holds, releases revoked tasks by its next
/// beat, and warms learners up instantly (lag 0).
pub struct Member {
    pub name: &'static str,
    pub member_id: String,
    pub member_epoch: u64,
    pub active: std::collections::BTreeSet<(String, u64)>,
    pub revoking: std::collections::BTreeSet<(String, u64)>,
    pub learner: std::collections::BTreeSet<(String, u64)>,
}

impl Member {
    /// Joins `group` as the static member `name`, subscribed to `orders`.
    pub fn join(server: &Server, group: &str, name: &'static str) -> Member {
        Self::join_topics(server, group, name, &["orders"])
    }

    /// Joins `group` as the static member `name`, subscribed to `topics`.
    pub fn join_topics(
        server: &Server,
        group: &str,
        name: &'static str,
        topics: &[&str],
    ) -> Member {
        let member = Self::join_with(
            server,
            group,
            name,
            serde_json::json!({
                "member_id": "",
                "member_name": name,
                "member_epoch": 0,
                "topics": topics,
                "rack": null,
                "capacity": 1,
            }),
        );
        assert!(!member.member_id.is_empty());
        member
    }

    /// Sends the join `body` to `group` and takes the member from its 200
    /// answer; `label` names it in messages.
    pub fn join_with(
        server: &Server,
        group: &str,
        label: &'static str,
        body: serde_json::Value,
    ) -> Member {
        let (status, answer) = server.call(
            "POST",
            &format!("/v1/groups/{group}/heartbeat"),
            Some(&body),
        );
        assert_eq!(status, 200, "{label} joins: {answer}");
        let mut member = Member {
            name: label,
            member_id: String::new(),
            member_epoch: 0,
            active: Default::default(),
            revoking: Default::default(),
            learner: Default::default(),
        };
        member.absorb(&answer);
        member
    }

    /// What it holds now: every active task, and revoked ones not yet
    /// released (released by the next heartbeat).
    pub fn held(&self) -> std::collections::BTreeSet<(String, u64)> {
        self.active.union(&self.revoking).cloned().collect()
    }

    pub fn heartbeat(&mut self, server: &Server, group: &str) {
        use serde_json::{Value, json};
        // Revoked tasks are released before this beat: report without them.
        let owned: Vec<Value> = self.active.iter().map(|(t, p)| json!([t, p])).collect();
        // Warming up is instant here: every learner task reports lag 0,
        // which lets the host move it.
        let lags: Vec<Value> = self.learner.iter().map(|(t, p)| json!([t, p, 0])).collect();
        let body = json!({
            "member_id": self.member_id,
            "member_epoch": self.member_epoch,
            "owned": owned,
            "lags": lags,
        });
        let (status, answer) = server.call(
            "POST",
            &format!("/v1/groups/{group}/heartbeat"),
            Some(&body),
        );
        assert_eq!(status, 200, "{} heartbeat: {answer}", self.name);
        self.absorb(&answer);
    }

    pub fn absorb(&mut self, answer: &serde_json::Value) {
        self.member_id = answer["member_id"].as_str().expect("member_id").to_owned();
        self.member_epoch = answer["member_epoch"].as_u64().expect("member_epoch");
        self.active = tasks(&answer["active"]);
        self.revoking = tasks(&answer["revoking"]);
        self.learner = tasks(&answer["learner"]);
    }
}

impl Member {
    /// Joins `group` as a dynamic member (no member name) subscribed to
    /// `topics`; `label` names it in messages only.
    pub fn join_dynamic(
        server: &Server,
        group: &str,
        label: &'static str,
        topics: &[&str],
    ) -> Member {
        Self::join_with(
            server,
            group,
            label,
            serde_json::json!({"member_id": "", "member_epoch": 0, "topics": topics}),
        )
    }

    /// One heartbeat as [`Member::heartbeat`] sends it, with the fields of
    /// `extra` (an object) added or replaced, answered with any status: the
    /// member absorbs a 200 answer only.
    pub fn try_heartbeat(
        &mut self,
        server: &Server,
        group: &str,
        extra: serde_json::Value,
    ) -> (u16, serde_json::Value) {
        use serde_json::{Value, json};
        let owned: Vec<Value> = self.active.iter().map(|(t, p)| json!([t, p])).collect();
        let lags: Vec<Value> = self.learner.iter().map(|(t, p)| json!([t, p, 0])).collect();
        let mut body = json!({
            "member_id": self.member_id,
            "member_epoch": self.member_epoch,
            "owned": owned,
            "lags": lags,
        });
        for (key, value) in extra.as_object().expect("an object of fields") {
            body[key] = value.clone();
        }
        let (status, answer) = server.call(
            "POST",
            &format!("/v1/groups/{group}/heartbeat"),
            Some(&body),
        );
        if status == 200 {
            self.absorb(&answer);
        }
        (status, answer)
    }
}

/// Sets the child's RLIMIT_NOFILE, soft and hard, to `descriptors`
/// (`serve` raises soft to hard, so both are lowered).
#[cfg(target_os = "linux")]
pub fn limit_descriptors(command: &mut std::process::Command, descriptors: u64) {
    limit_descriptors_to(command, descriptors, descriptors);
}

#[cfg(target_os = "linux")]
pub fn limit_descriptors_to(command: &mut std::process::Command, soft: u64, hard: u64) {
    use std::os::unix::process::CommandExt;

    // SAFETY: setrlimit is async-signal-safe; nothing else runs between
    // fork and exec here.
    unsafe {
        command.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: soft,
                rlim_max: hard,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}
