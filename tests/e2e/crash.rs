//! Invariant 6 of docs/design.md against the real binary: `assignd serve` on
//! one data dir is killed with SIGKILL at random moments of a churning
//! workload and restarted, again and again; after every restart the host
//! must hold everything it acknowledged before the kill.
//!
//! The workload, driven over HTTP the way members and an admin would:
//! - group `statics`: static members (named) heartbeating, each reporting
//!   what it holds and releasing revoked tasks by its next beat; now and
//!   then a new static member joins, and the admin raises the partition
//!   count;
//! - group `dynamics`: nameless members joining and leaving. (A nameless
//!   join into a stable group with static members would switch that group
//!   to dynamic membership, so they live in a group of their own.)
//!
//! After each restart, before anything else talks to the host:
//! - (a) both groups exist with the last acknowledged config (or the one a
//!   request in flight at the kill was setting); their group and target
//!   epochs are at least the highest any acknowledged answer showed; every
//!   member whose join was acknowledged (and whose leave was not) is there
//!   with the same member id — static ones in their named slots — at a
//!   member epoch at least the last one acknowledged to it, still holding
//!   what it was last told if its epoch has not moved; no acknowledged
//!   leave is undone; the only member nobody acknowledged is one whose
//!   join was in flight; no task is held twice.
//! - the surviving members carry on with the ids and epochs they had (a
//!   restart of the host is invisible to them) until both groups are
//!   stable; if the host was not mid-assignment at the kill, the targets
//!   it had then are the targets it settles on.
//! - (b) every static member restarts too: it rejoins with epoch 0 and its
//!   name, gets a new member id and exactly its target's tasks back, at its
//!   epoch; no member's target changes and the group epoch does not move;
//!   the old incarnation's id is told `replaced`.
//!
//! A second test damages the log on purpose: a flipped byte in the middle
//! of the segment keeps the host from starting (one `error:` line naming
//! the file and offset) until `assignd log repair` cuts it; a truncated
//! tail is cut with a warning and the state before it comes back.
//!
//! Waits poll with deadlines; the only sleep that is not a poll is the
//! random delay before each kill (the crash moment). The schedule is seeded
//! (`ASSIGND_CRASH_SEED`); the timing of the kills is not reproducible.

use crate::common;

use crate::common::tasks;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

type Task = (String, u64);

const STATICS: &str = "statics";
const DYNAMICS: &str = "dynamics";
/// Kills in the churn test.
const KILLS: usize = 24;
const START_DEADLINE: Duration = Duration::from_secs(60);
const SETTLE_DEADLINE: Duration = Duration::from_secs(30);
const STATIC_MEMBERS_MAX: usize = 6;
const DYNAMIC_MEMBERS_MAX: usize = 5;
const PARTITIONS_MAX: u64 = 96;

/// The seeded schedule: the host's SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        assignd::protocol::splitmix::next(&mut self.0)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A request whose answer never came: the server is gone.
#[derive(Debug)]
struct Lost(String);

/// A running `assignd serve`, killed on drop.
struct Server {
    child: Option<Child>,
    base: String,
    agent: ureq::Agent,
    stderr: Option<std::thread::JoinHandle<String>>,
}

/// What starting the server led to.
enum Started {
    Serving(Server),
    Exited { status: ExitStatus, stderr: String },
}

/// The tests that read or damage the log serve one shard, so that one
/// folder holds every record: `log_dir`.
fn start(data_dir: &Path) -> Started {
    start_with(data_dir, &["--shards", "1"])
}

/// The log folder of a data dir served with one shard.
fn log_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("shards").join("0000")
}

fn start_with(data_dir: &Path, extra: &[&str]) -> Started {
    let mut child = Command::new(env!("CARGO_BIN_EXE_assignd"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .args(extra)
        .env("ASSIGND_ADMIN_TOKEN", common::ADMIN_TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start assignd serve");
    let stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let (lines, first_line) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let _ = reader.read_line(&mut line);
        let _ = lines.send(line);
        // Keep draining, so the server never blocks on a full pipe.
        let _ = std::io::copy(&mut reader, &mut std::io::sink());
    });
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let line = first_line
        .recv_timeout(START_DEADLINE)
        .expect("assignd serve printed no line in time");
    let Some(address) = line.trim_end().strip_prefix("listening on ") else {
        assert!(line.is_empty(), "unexpected first line: {line:?}");
        // Stdout closed without a line: the process is exiting.
        let status = child.wait().expect("wait");
        let stderr = stderr.join().expect("stderr thread");
        return Started::Exited { status, stderr };
    };
    Started::Serving(Server {
        child: Some(child),
        base: address.to_owned(),
        agent: ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(20)))
            .build()
            .into(),
        stderr: Some(stderr),
    })
}

fn serve(data_dir: &Path) -> Server {
    serve_with(data_dir, &["--shards", "1"])
}

/// `serve` with the default shard count (the groups of a test are in
/// different shards).
fn serve_sharded(data_dir: &Path) -> Server {
    serve_with(data_dir, &[])
}

fn serve_with(data_dir: &Path, extra: &[&str]) -> Server {
    match start_with(data_dir, extra) {
        Started::Serving(server) => server,
        Started::Exited { status, stderr } => {
            panic!("assignd serve exited ({status}) instead of serving: {stderr}")
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Server {
    /// Kills the server (SIGKILL) and returns what it wrote on stderr.
    fn kill(mut self) -> String {
        let mut child = self.child.take().expect("running");
        let _ = child.kill();
        let _ = child.wait();
        self.stderr
            .take()
            .expect("once")
            .join()
            .expect("stderr thread")
    }

    /// Sends `body` (if any); the status and JSON answer, or `Lost` if no
    /// answer came (the server died).
    fn try_call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Value), Lost> {
        let url = format!("{}{path}", self.base);
        let bearer = format!("Bearer {}", common::ADMIN_TOKEN);
        let response = match (method, body) {
            ("GET", None) => self.agent.get(&url).header("authorization", &bearer).call(),
            ("PUT", Some(body)) => self
                .agent
                .put(&url)
                .header("authorization", &bearer)
                .send_json(body),
            ("POST", Some(body)) => self
                .agent
                .post(&url)
                .header("authorization", &bearer)
                .send_json(body),
            other => panic!("unsupported call {other:?}"),
        };
        let mut response = response.map_err(|e| Lost(format!("{method} {url}: {e}")))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| Lost(format!("{method} {url}: reading the body: {e}")))?;
        let value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{method} {url}: not JSON ({e}): {text}"));
        Ok((status, value))
    }

    /// A call that must be answered (nothing kills the server meanwhile).
    fn call(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        self.try_call(method, path, body)
            .unwrap_or_else(|Lost(e)| panic!("no answer: {e}"))
    }
}

/// One member as the test knows it: what the host last acknowledged to
/// it.
#[derive(Clone, Debug)]
struct Member {
    name: Option<String>,
    member_id: String,
    /// The member epoch of its last answer.
    epoch: u64,
    /// The highest member epoch any acknowledged answer showed for it.
    epoch_seen: u64,
    active: BTreeSet<Task>,
    revoking: BTreeSet<Task>,
}

impl Member {
    fn absorb(&mut self, answer: &Value) {
        self.member_id = answer["member_id"].as_str().expect("member_id").to_owned();
        self.epoch = answer["member_epoch"].as_u64().expect("member_epoch");
        self.epoch_seen = self.epoch_seen.max(self.epoch);
        self.active = tasks(&answer["active"]);
        self.revoking = tasks(&answer["revoking"]);
    }

    fn label(&self) -> String {
        match &self.name {
            Some(name) => format!("static member {name} ({})", self.member_id),
            None => format!("member {}", self.member_id),
        }
    }
}

/// One member in the host's view.
#[derive(Clone, Debug, PartialEq, Eq)]
struct MemberView {
    slot: String,
    member_id: String,
    name: Option<String>,
    away: bool,
    member_epoch: u64,
    active: BTreeSet<Task>,
    revoking: BTreeSet<Task>,
    target: BTreeSet<Task>,
}

/// `GET /v1/groups/{g}`, parsed.
#[derive(Clone, Debug)]
struct View {
    config: Value,
    group_epoch: u64,
    target_epoch: u64,
    state: String,
    /// By member id.
    members: BTreeMap<String, MemberView>,
}

impl View {
    fn parse(value: &Value) -> View {
        let members = value["members"]
            .as_array()
            .expect("members")
            .iter()
            .map(|m| {
                let member = MemberView {
                    slot: m["slot"].as_str().expect("slot").to_owned(),
                    member_id: m["member_id"].as_str().expect("member_id").to_owned(),
                    name: m["name"].as_str().map(str::to_owned),
                    away: m["away"].as_bool().expect("away"),
                    member_epoch: m["member_epoch"].as_u64().expect("member_epoch"),
                    active: tasks(&m["active"]),
                    revoking: tasks(&m["revoking"]),
                    target: tasks(&m["target"]["active"]),
                };
                (member.member_id.clone(), member)
            })
            .collect();
        let view = View {
            config: value["config"].clone(),
            group_epoch: value["group_epoch"].as_u64().expect("group_epoch"),
            target_epoch: value["target_epoch"].as_u64().expect("target_epoch"),
            state: value["state"].as_str().expect("state").to_owned(),
            members,
        };
        view.assert_no_double_holding();
        view
    }

    /// Invariant 1 in the host's own view.
    fn assert_no_double_holding(&self) {
        let mut holder = BTreeMap::new();
        for member in self.members.values() {
            for task in member.active.union(&member.revoking) {
                if let Some(other) = holder.insert(task.clone(), &member.member_id) {
                    panic!("{task:?} held by {other} and {}", member.member_id);
                }
            }
        }
    }

    /// Each slot's target.
    fn targets(&self) -> BTreeMap<String, BTreeSet<Task>> {
        self.members
            .values()
            .map(|m| (m.slot.clone(), m.target.clone()))
            .collect()
    }

    fn by_slot(&self, slot: &str) -> &MemberView {
        self.members
            .values()
            .find(|m| m.slot == slot)
            .unwrap_or_else(|| panic!("no slot {slot} in {self:?}"))
    }
}

/// One group as the test knows it: what the host acknowledged.
struct GroupModel {
    name: &'static str,
    topic: &'static str,
    /// The last acknowledged config, as the host shows it.
    config: Value,
    /// The config of a PUT in flight at a kill.
    pending_config: Option<Value>,
    /// The highest group and target epochs any acknowledged answer showed.
    group_epoch: u64,
    target_epoch: u64,
    /// Joined (acknowledged) and not left (acknowledged).
    members: Vec<Member>,
    /// A leave in flight at a kill.
    leaving: Vec<Member>,
    /// Member ids whose leave was acknowledged.
    left: Vec<String>,
    /// A join was in flight at a kill.
    joining: bool,
    /// Changes in flight at a kill (a join, a leave, a config) that turned
    /// out to have reached the log, and those that had not.
    in_flight_landed: usize,
    in_flight_lost: usize,
}

impl GroupModel {
    fn path(&self) -> String {
        format!("/v1/groups/{}", self.name)
    }

    fn partitions(&self) -> u64 {
        self.config["topics"][0]["partitions"]
            .as_u64()
            .expect("partitions")
    }

    fn note_view(&mut self, view: &View) {
        self.group_epoch = self.group_epoch.max(view.group_epoch);
        self.target_epoch = self.target_epoch.max(view.target_epoch);
        for member in &mut self.members {
            if let Some(seen) = view.members.get(&member.member_id) {
                member.epoch_seen = member.epoch_seen.max(seen.member_epoch);
            }
        }
    }

    fn view(&mut self, server: &Server) -> Result<View, Lost> {
        let (status, value) = server.try_call("GET", &self.path(), None)?;
        assert_eq!(status, 200, "GET {}: {value}", self.name);
        let view = View::parse(&value);
        self.note_view(&view);
        Ok(view)
    }

    /// Creates or replaces the config.
    fn configure(&mut self, server: &Server, config: Value) -> Result<u16, Lost> {
        let mut expected = if self.config.is_null() {
            config.clone()
        } else {
            self.config.clone()
        };
        expected["topics"] = config["topics"].clone();
        self.pending_config = Some(expected);
        let (status, value) = server.try_call("PUT", &self.path(), Some(&config))?;
        assert!(status == 200 || status == 201, "PUT {}: {value}", self.name);
        let view = View::parse(&value);
        self.config = view.config.clone();
        self.pending_config = None;
        self.note_view(&view);
        Ok(status)
    }

    fn join(&mut self, server: &Server, name: Option<String>) -> Result<(), Lost> {
        self.joining = true;
        let body = json!({
            "member_id": "",
            "member_name": name,
            "member_epoch": 0,
            "topics": [self.topic],
        });
        let (status, answer) =
            server.try_call("POST", &format!("{}/heartbeat", self.path()), Some(&body))?;
        assert_eq!(status, 200, "join {name:?}: {answer}");
        let mut member = Member {
            name,
            member_id: String::new(),
            epoch: 0,
            epoch_seen: 0,
            active: BTreeSet::new(),
            revoking: BTreeSet::new(),
        };
        member.absorb(&answer);
        self.target_epoch = self.target_epoch.max(member.epoch);
        self.members.push(member);
        self.joining = false;
        Ok(())
    }

    /// One heartbeat of member `i`: it has released what it was asked to,
    /// and reports the rest.
    fn heartbeat(&mut self, server: &Server, i: usize) -> Result<(), Lost> {
        let member = &self.members[i];
        let owned: Vec<Value> = member.active.iter().map(|(t, p)| json!([t, p])).collect();
        let body = json!({
            "member_id": member.member_id,
            "member_epoch": member.epoch,
            "owned": owned,
        });
        let (status, answer) =
            server.try_call("POST", &format!("{}/heartbeat", self.path()), Some(&body))?;
        assert_eq!(status, 200, "{} heartbeat: {answer}", member.label());
        self.members[i].absorb(&answer);
        self.target_epoch = self.target_epoch.max(self.members[i].epoch);
        Ok(())
    }

    fn leave(&mut self, server: &Server, i: usize) -> Result<(), Lost> {
        let member = self.members.remove(i);
        let body = json!({"member_id": member.member_id, "member_epoch": -1});
        self.leaving.push(member);
        let (status, answer) =
            server.try_call("POST", &format!("{}/heartbeat", self.path()), Some(&body))?;
        let member = self.leaving.pop().expect("pushed");
        assert_eq!(status, 200, "{} leaves: {answer}", member.label());
        self.left.push(member.member_id);
        Ok(())
    }

    /// Invariant 6 right after a restart: everything acknowledged is there.
    /// Settles what was in flight at the kill against what the host has.
    fn check_durable(&mut self, view: &View, cycle: usize) {
        let group = self.name;
        let context = format!("restart {cycle}, group {group}");
        if view.config != self.config {
            assert_eq!(
                Some(&view.config),
                self.pending_config.as_ref(),
                "{context}: the config is neither the acknowledged one nor the one in flight"
            );
            self.config = view.config.clone();
            self.in_flight_landed += 1;
        } else if self.pending_config.is_some() {
            self.in_flight_lost += 1;
        }
        self.pending_config = None;
        assert!(
            view.group_epoch >= self.group_epoch,
            "{context}: group epoch went back from {} to {}",
            self.group_epoch,
            view.group_epoch
        );
        assert!(
            view.target_epoch >= self.target_epoch,
            "{context}: target epoch went back from {} to {}",
            self.target_epoch,
            view.target_epoch
        );
        for member in &self.members {
            let Some(seen) = view.members.get(&member.member_id) else {
                panic!(
                    "{context}: {} was acknowledged and is gone: {view:?}",
                    member.label()
                );
            };
            if let Some(name) = &member.name {
                assert_eq!(
                    (seen.slot.as_str(), seen.name.as_deref()),
                    (format!("static:{name}").as_str(), Some(name.as_str())),
                    "{context}: the static mapping of {name}"
                );
            }
            assert!(
                seen.member_epoch >= member.epoch_seen,
                "{context}: {} went back from epoch {} to {}",
                member.label(),
                member.epoch_seen,
                seen.member_epoch
            );
            if seen.member_epoch == member.epoch {
                let held: BTreeSet<Task> = seen.active.union(&seen.revoking).cloned().collect();
                assert!(
                    member.active.is_subset(&held),
                    "{context}: {} was told it holds {:?} at epoch {}, the host now has {held:?}",
                    member.label(),
                    member.active,
                    member.epoch
                );
            }
        }
        for id in &self.left {
            assert!(
                !view.members.contains_key(id),
                "{context}: member {id}'s leave was acknowledged, and it is back"
            );
        }
        // A leave in flight at the kill happened or did not.
        for member in std::mem::take(&mut self.leaving) {
            if view.members.contains_key(&member.member_id) {
                self.members.push(member);
                self.in_flight_lost += 1;
            } else {
                self.left.push(member.member_id);
                self.in_flight_landed += 1;
            }
        }
        let known: BTreeSet<&str> = self.members.iter().map(|m| m.member_id.as_str()).collect();
        let unknown: Vec<&MemberView> = view
            .members
            .values()
            .filter(|m| !known.contains(m.member_id.as_str()))
            .collect();
        assert!(
            unknown.is_empty() || (self.joining && unknown.len() == 1),
            "{context}: members nobody acknowledged: {unknown:?} (a join in flight: {})",
            self.joining
        );
        // A join in flight at the kill that reached the log: the member is
        // in the group; it carries on as the host has it.
        if self.joining {
            if unknown.is_empty() {
                self.in_flight_lost += 1;
            } else {
                self.in_flight_landed += 1;
            }
        }
        for seen in unknown {
            self.members.push(Member {
                name: seen.name.clone(),
                member_id: seen.member_id.clone(),
                epoch: seen.member_epoch,
                epoch_seen: seen.member_epoch,
                active: seen.active.clone(),
                revoking: seen.revoking.clone(),
            });
        }
        self.joining = false;
        self.note_view(view);
    }

    /// Whether the view is stable and every member knows it.
    fn stable(&self, view: &View) -> bool {
        view.state == "stable"
            && view.group_epoch == view.target_epoch
            && self
                .members
                .iter()
                .all(|m| m.revoking.is_empty() && m.epoch == view.target_epoch)
    }
}

/// Both groups, the schedule, and what the run has seen.
struct World {
    groups: [GroupModel; 2],
    rng: Rng,
    next_static: usize,
    torn_tails_cut: usize,
    exact_target_checks: usize,
}

const STATICS_I: usize = 0;
const DYNAMICS_I: usize = 1;

fn config(topic: &str, partitions: u64) -> Value {
    json!({
        "topics": [{"name": topic, "partitions": partitions}],
        "assignor": "sticky",
        "learners": "off",
        "expansion_timeout_ms": 50,
        // Also the grace on top of the expansion timeout before a member
        // that has not released a task is fenced: a long one keeps a busy
        // machine from fencing the test's members.
        "heartbeat_interval_ms": 1000,
        "session_timeout_ms": 60000,
        "registration_timeout_ms": 60000,
    })
}

impl World {
    fn new(seed: u64) -> World {
        let group = |name, topic| GroupModel {
            name,
            topic,
            config: Value::Null,
            pending_config: None,
            group_epoch: 0,
            target_epoch: 0,
            members: Vec::new(),
            leaving: Vec::new(),
            left: Vec::new(),
            joining: false,
            in_flight_landed: 0,
            in_flight_lost: 0,
        };
        World {
            groups: [group(STATICS, "orders"), group(DYNAMICS, "events")],
            rng: Rng(seed),
            next_static: 0,
            torn_tails_cut: 0,
            exact_target_checks: 0,
        }
    }

    fn static_name(&mut self) -> String {
        self.next_static += 1;
        format!("worker-{}", self.next_static)
    }

    /// Heartbeats every member of both groups until both are stable.
    fn settle(&mut self, server: &Server, context: &str) -> [View; 2] {
        let deadline = Instant::now() + SETTLE_DEADLINE;
        loop {
            for group in &mut self.groups {
                for i in 0..group.members.len() {
                    group
                        .heartbeat(server, i)
                        .unwrap_or_else(|Lost(e)| panic!("{e}"));
                }
            }
            let views = [0, 1].map(|g| {
                self.groups[g]
                    .view(server)
                    .unwrap_or_else(|Lost(e)| panic!("{e}"))
            });
            if (0..2).all(|g| self.groups[g].stable(&views[g])) {
                return views;
            }
            assert!(
                Instant::now() < deadline,
                "{context}: not stable in time: {views:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Random member and admin traffic until a request goes unanswered.
    fn churn(&mut self, server: &Server) -> Lost {
        loop {
            if let Err(lost) = self.churn_round(server) {
                return lost;
            }
        }
    }

    fn churn_round(&mut self, server: &Server) -> Result<(), Lost> {
        for group in &mut self.groups {
            for i in 0..group.members.len() {
                group.heartbeat(server, i)?;
            }
        }
        let dynamics = self.groups[DYNAMICS_I].members.len();
        if dynamics < DYNAMIC_MEMBERS_MAX && self.rng.chance(30) {
            self.groups[DYNAMICS_I].join(server, None)?;
        }
        if dynamics > 1 && self.rng.chance(20) {
            let i = self.rng.below(dynamics as u64) as usize;
            self.groups[DYNAMICS_I].leave(server, i)?;
        }
        if self.groups[STATICS_I].members.len() < STATIC_MEMBERS_MAX && self.rng.chance(4) {
            let name = self.static_name();
            self.groups[STATICS_I].join(server, Some(name))?;
        }
        let partitions = self.groups[STATICS_I].partitions();
        if partitions < PARTITIONS_MAX && self.rng.chance(8) {
            let more = partitions + 1 + self.rng.below(4);
            self.groups[STATICS_I].configure(server, config("orders", more))?;
        }
        for group in &mut self.groups {
            group.view(server)?;
        }
        Ok(())
    }

    /// Everything after a restart: invariant 6, the members carrying on,
    /// then every static member restarting too.
    fn after_restart(&mut self, server: &Server, cycle: usize) {
        let context = format!("restart {cycle}");
        let before: Vec<View> = (0..2)
            .map(|g| {
                let (status, value) = server.call("GET", &self.groups[g].path(), None);
                assert_eq!(
                    status, 200,
                    "{context}: group {} after the restart: {value}",
                    self.groups[g].name
                );
                View::parse(&value)
            })
            .collect();
        for (group, view) in self.groups.iter_mut().zip(&before) {
            group.check_durable(view, cycle);
        }
        let [settled, _] = self.settle(server, &context);
        // Not mid-assignment at the kill: the targets the host had then are
        // where the group settles.
        let statics_before = &before[STATICS_I];
        if statics_before.group_epoch == statics_before.target_epoch {
            assert_eq!(
                settled.targets(),
                statics_before.targets(),
                "{context}: the targets changed while the members carried on"
            );
            self.exact_target_checks += 1;
        }
        self.rejoin_statics(server, &settled, &context);
    }

    /// (b): each static member restarts (epoch 0, its name) and gets
    /// exactly its target back; nobody else's target changes.
    fn rejoin_statics(&mut self, server: &Server, settled: &View, context: &str) {
        let group = &mut self.groups[STATICS_I];
        let path = format!("{}/heartbeat", group.path());
        let mut old_ids = Vec::new();
        for member in &mut group.members {
            let name = member.name.clone().expect("a static member");
            let slot = settled.by_slot(&format!("static:{name}"));
            let (status, answer) = server.call(
                "POST",
                &path,
                Some(&json!({
                    "member_id": "",
                    "member_name": name,
                    "member_epoch": 0,
                    "topics": [group.topic],
                })),
            );
            assert_eq!(status, 200, "{context}: {name} rejoins: {answer}");
            let old_id = member.member_id.clone();
            member.absorb(&answer);
            assert_ne!(
                member.member_id, old_id,
                "{context}: {name} is a new incarnation"
            );
            // Exactly its tasks back, at its epoch: granted at once, or (the
            // old incarnation got an answer since the restart, and may still
            // be processing under that lease) listed as learners until that
            // lease ends, while the host keeps them on the slot.
            let learner = tasks(&answer["learner"]);
            let withheld: BTreeSet<Task> =
                slot.target.difference(&member.active).cloned().collect();
            assert!(
                member.active.is_subset(&slot.target)
                    && withheld.is_subset(&learner)
                    && (member.revoking.len(), member.epoch) == (0, slot.member_epoch),
                "{context}: {name} gets exactly its tasks back, at its epoch: {answer}"
            );
            old_ids.push((name, old_id, slot.member_epoch));
        }
        let after = group.view(server).unwrap_or_else(|Lost(e)| panic!("{e}"));
        assert_eq!(
            (after.group_epoch, after.target_epoch, after.state.as_str()),
            (settled.group_epoch, settled.target_epoch, "stable"),
            "{context}: the rejoins asked for no new target"
        );
        assert_eq!(
            after.targets(),
            settled.targets(),
            "{context}: no member's target changed"
        );
        for (name, old_id, epoch) in old_ids {
            let (status, answer) = server.call(
                "POST",
                &path,
                Some(&json!({"member_id": old_id, "member_epoch": epoch})),
            );
            assert_eq!(
                (status, answer["error"]["code"].as_str()),
                (409, Some("replaced")),
                "{context}: {name}'s old incarnation: {answer}"
            );
        }
    }
}

fn seed() -> u64 {
    std::env::var("ASSIGND_CRASH_SEED")
        .ok()
        .map(|s| s.parse().expect("ASSIGND_CRASH_SEED is a number"))
        .unwrap_or(0x0061_7373_6967_6e64)
}

/// A server's stderr must hold no panic and no failed persist.
fn assert_quiet(stderr: &str, context: &str) {
    for bad in ["panicked", "persisting records failed", "ERROR"] {
        assert!(
            !stderr.contains(bad),
            "{context}: the server logged {bad:?}: {stderr}"
        );
    }
}

#[test]
fn sigkill_at_random_moments_loses_nothing_acknowledged() {
    let started = Instant::now();
    let seed = seed();
    let data_dir = common::scratch("crash-churn");
    let mut world = World::new(seed);

    let mut server = serve_sharded(&data_dir);
    let status = world.groups[STATICS_I]
        .configure(&server, config("orders", 12))
        .unwrap_or_else(|Lost(e)| panic!("{e}"));
    assert_eq!(status, 201);
    let status = world.groups[DYNAMICS_I]
        .configure(&server, config("events", 6))
        .unwrap_or_else(|Lost(e)| panic!("{e}"));
    assert_eq!(status, 201);
    for _ in 0..3 {
        let name = world.static_name();
        world.groups[STATICS_I]
            .join(&server, Some(name))
            .unwrap_or_else(|Lost(e)| panic!("{e}"));
    }
    for _ in 0..2 {
        world.groups[DYNAMICS_I]
            .join(&server, None)
            .unwrap_or_else(|Lost(e)| panic!("{e}"));
    }
    world.settle(&server, "start");

    for cycle in 1..=KILLS {
        // The crash moment: somewhere in the churn.
        let delay = Duration::from_millis(20 + world.rng.below(381));
        let mut child = server.child.take().expect("running");
        let killer = std::thread::spawn(move || {
            std::thread::sleep(delay);
            let exited_on_its_own = child.try_wait().expect("try_wait");
            child.kill().expect("SIGKILL");
            child.wait().expect("wait");
            exited_on_its_own
        });
        let Lost(what) = world.churn(&server);
        let exited_on_its_own = killer.join().expect("the killer thread");
        let stderr = server.stderr.take().expect("once").join().expect("stderr");
        assert!(
            exited_on_its_own.is_none(),
            "cycle {cycle}: the server died before the kill ({exited_on_its_own:?}); last request: {what}; stderr: {stderr}"
        );
        assert_quiet(&stderr, &format!("cycle {cycle}"));
        if stderr.contains("cutting a torn record") {
            world.torn_tails_cut += 1;
        }
        drop(server);

        server = serve_sharded(&data_dir);
        world.after_restart(&server, cycle);
    }
    let stderr = server.kill();
    assert_quiet(&stderr, "the last run");
    if stderr.contains("cutting a torn record") {
        world.torn_tails_cut += 1;
    }
    let [statics, dynamics] = &world.groups;
    eprintln!(
        "crash test: seed {seed}, {KILLS} kills in {:.1} s; torn tails cut on restart: {}; \
         restarts where the pre-kill targets were checked exactly: {}; changes in flight at a \
         kill: {} had reached the log, {} had not; at the end: statics \
         group epoch {} with {} members over {} partitions, dynamics group epoch {} with {} \
         members ({} acknowledged leaves)",
        started.elapsed().as_secs_f64(),
        world.torn_tails_cut,
        world.exact_target_checks,
        statics.in_flight_landed + dynamics.in_flight_landed,
        statics.in_flight_lost + dynamics.in_flight_lost,
        statics.group_epoch,
        statics.members.len(),
        statics.partitions(),
        dynamics.group_epoch,
        dynamics.members.len(),
        dynamics.left.len(),
    );
    let _ = std::fs::remove_dir_all(&data_dir);
}

/// The only segment file of a data dir (after its first run).
fn segment(data_dir: &Path) -> PathBuf {
    let mut files: Vec<PathBuf> = std::fs::read_dir(log_dir(data_dir))
        .expect("the log folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.pop().expect("one")
}

/// The start offset and size of every frame of a segment (docs/log-format.md:
/// after the segment header, frames of a 4-byte little-endian length of
/// what follows the CRC, then the CRC).
fn frames(bytes: &[u8]) -> Vec<(usize, usize)> {
    let mut frames = Vec::new();
    let mut at = assignd::log::segment::SEGMENT_HEADER_BYTES;
    while at < bytes.len() {
        let length = u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes")) as usize;
        frames.push((at, 8 + length));
        at += 8 + length;
    }
    assert_eq!(at, bytes.len(), "whole frames");
    frames
}

#[test]
fn a_damaged_log_is_refused_until_repaired_and_a_torn_tail_is_cut() {
    let data_dir = common::scratch("crash-damage");
    let mut world = World::new(seed());
    let server = serve(&data_dir);
    world.groups[DYNAMICS_I]
        .configure(&server, config("events", 6))
        .unwrap_or_else(|Lost(e)| panic!("{e}"));
    let statics = &mut world.groups[STATICS_I];
    statics
        .configure(&server, config("orders", 8))
        .unwrap_or_else(|Lost(e)| panic!("{e}"));
    for name in ["a", "b", "c"] {
        statics
            .join(&server, Some(name.to_owned()))
            .unwrap_or_else(|Lost(e)| panic!("{e}"));
    }
    world.settle(&server, "first target");
    world.groups[STATICS_I]
        .configure(&server, config("orders", 9))
        .unwrap_or_else(|Lost(e)| panic!("{e}"));
    let [settled, _] = world.settle(&server, "second target");
    // The last change is one record at the end of the log: `a` leaves for a
    // while (a static member keeps its slot).
    let a = world.groups[STATICS_I].members[0].clone();
    let (status, answer) = server.call(
        "POST",
        "/v1/groups/statics/heartbeat",
        Some(&json!({"member_id": a.member_id, "member_epoch": -1})),
    );
    assert_eq!(status, 200, "{answer}");
    let (_, away) = server.call("GET", "/v1/groups/statics", None);
    assert!(View::parse(&away).members[&a.member_id].away);
    assert_quiet(&server.kill(), "the first run");

    // A torn tail: the last record lost three bytes. The host starts, says
    // so, and has the state from before that record.
    let file = segment(&data_dir);
    let bytes = std::fs::read(&file).expect("the segment");
    std::fs::write(&file, &bytes[..bytes.len() - 3]).expect("truncate");
    let server = serve(&data_dir);
    let (status, value) = server.call("GET", "/v1/groups/statics", None);
    assert_eq!(status, 200);
    let recovered = View::parse(&value);
    assert_eq!(
        (
            recovered.group_epoch,
            recovered.target_epoch,
            &recovered.members,
            &recovered.config
        ),
        (
            settled.group_epoch,
            settled.target_epoch,
            &settled.members,
            &settled.config
        ),
        "the state before the torn record"
    );
    let stderr = server.kill();
    assert!(
        stderr.contains("WARN") && stderr.contains("cutting a torn record"),
        "a warning about the torn tail: {stderr}"
    );

    // Corruption: one byte flipped in a record in the middle of the
    // segment. The host refuses to start, naming the file and the offset.
    let bytes = std::fs::read(&file).expect("the segment");
    let frames = frames(&bytes);
    let middle = frames
        .iter()
        .position(|&(at, len)| at + len > bytes.len() / 2)
        .expect("a frame in the middle")
        .clamp(1, frames.len() - 2);
    let (offset, len) = frames[middle];
    let mut damaged = bytes.clone();
    damaged[offset + len / 2 + 5] ^= 0x20;
    std::fs::write(&file, &damaged).expect("damage");
    let Started::Exited { status, stderr } = start(&data_dir) else {
        panic!("assignd serve started on a corrupt log");
    };
    assert_eq!(status.code(), Some(1), "exit status; stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    for needle in [file.display().to_string(), format!("byte offset {offset}")] {
        assert!(lines[0].contains(&needle), "{needle:?} in {stderr}");
    }
    assert_eq!(
        std::fs::read(&file).expect("segment"),
        damaged,
        "refusing changed nothing"
    );

    let dir = data_dir.to_str().expect("a UTF-8 path");
    let check = common::assignd(&["log", "check", "--data-dir", dir]);
    let stderr = common::stderr(&check);
    assert_eq!(check.status.code(), Some(1), "check: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    assert!(
        lines[0].starts_with("error: shard 0: the record log is corrupt in ")
            && lines[0].contains(&format!("at byte offset {offset}")),
        "{stderr}"
    );
    assert!(
        common::stdout(&check).contains(&format!("records={middle}")),
        "check reports the records before the damage: {}",
        common::stdout(&check)
    );
    assert_eq!(
        std::fs::read(&file).expect("segment"),
        damaged,
        "check changed nothing"
    );

    assert_repair_cuts(dir, &file, offset as u64);
    assert_eq!(
        std::fs::metadata(&file).expect("segment").len(),
        offset as u64
    );

    // The host starts on what is left: the group, created by the first
    // record, is there.
    let server = serve(&data_dir);
    let (status, value) = server.call("GET", "/v1/groups/statics", None);
    assert_eq!(status, 200, "{value}");
    assert_quiet(&server.kill(), "after the repair");
    let _ = std::fs::remove_dir_all(&data_dir);
}

// Damage whose frames are valid: the CRCs match, the records or the
// segments do not fit together. Each is refused by `serve` and by `log
// check` with one line naming the file and the byte offset.

/// The segment files of a data dir, in number order.
fn segments(data_dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(log_dir(data_dir))
        .expect("the log folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    files.sort();
    files
}

/// `assignd serve` refuses to start on `data_dir` (exit 1, no panic, one
/// `error:` line naming `file`, the byte `offset` and `reason`), changing
/// nothing in the log; `assignd log check` reports the same.
fn assert_refused(data_dir: &Path, file: &Path, offset: u64, reason: &str) {
    let before = log_files(data_dir);
    let needles = [
        file.display().to_string(),
        format!("byte offset {offset}"),
        reason.to_owned(),
    ];
    let Started::Exited { status, stderr } = start(data_dir) else {
        panic!("assignd serve started on a log that does not fit together ({reason})");
    };
    assert_eq!(status.code(), Some(1), "exit status; stderr: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    for needle in &needles {
        assert!(lines[0].contains(needle), "{needle:?} in {stderr}");
    }
    assert_eq!(log_files(data_dir), before, "refusing changed nothing");

    let check = common::assignd(&["log", "check", "--data-dir", data_dir.to_str().unwrap()]);
    let stderr = common::stderr(&check);
    assert_eq!(check.status.code(), Some(1), "check: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    for needle in &needles {
        assert!(lines[0].contains(needle), "check: {needle:?} in {stderr}");
    }
    assert_eq!(log_files(data_dir), before, "check changed nothing");
}

/// Every file of the log folder and its bytes (the lock file aside).
fn log_files(data_dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    std::fs::read_dir(log_dir(data_dir))
        .expect("the log folder")
        .map(|e| e.expect("entry").path())
        .filter(|p| !p.ends_with("LOCK"))
        .map(|p| {
            let bytes = std::fs::read(&p).expect("a log file");
            (p, bytes)
        })
        .collect()
}

/// A frame holding `record` as it is written today (docs/log-format.md).
fn frame(record: &assignd::protocol::group::Record) -> Vec<u8> {
    let mut out = Vec::new();
    assignd::log::frame::encode(record, &mut out);
    out
}

/// `frame` with its version and type bytes replaced and its CRC made to
/// match again: a frame no torn write can produce.
fn reframed(mut frame: Vec<u8>, version: u8, kind: u8) -> Vec<u8> {
    frame[8] = version;
    frame[9] = kind;
    let crc = crc32c::crc32c(&frame[8..]);
    frame[4..8].copy_from_slice(&crc.to_le_bytes());
    frame
}

fn append(file: &Path, bytes: &[u8]) -> u64 {
    use std::io::Write;
    let mut out = std::fs::OpenOptions::new()
        .append(true)
        .open(file)
        .expect("the segment");
    let offset = out.metadata().expect("metadata").len();
    out.write_all(bytes).expect("append");
    offset
}

/// A host with group `statics` (static members `a` and `b`, stable) and
/// group `dynamics`, stopped; what it showed of `statics`.
fn settled_log(name: &str) -> (PathBuf, View) {
    let data_dir = common::scratch(name);
    let mut world = World::new(seed());
    let server = serve(&data_dir);
    world.groups[DYNAMICS_I]
        .configure(&server, config("events", 6))
        .unwrap_or_else(|Lost(e)| panic!("{e}"));
    let statics = &mut world.groups[STATICS_I];
    statics
        .configure(&server, config("orders", 8))
        .unwrap_or_else(|Lost(e)| panic!("{e}"));
    for name in ["a", "b"] {
        statics
            .join(&server, Some(name.to_owned()))
            .unwrap_or_else(|Lost(e)| panic!("{e}"));
    }
    let [settled, _] = world.settle(&server, "settled");
    assert_quiet(&server.kill(), "the first run");
    (data_dir, settled)
}

#[test]
fn records_that_do_not_fit_together_are_refused_with_the_file_and_offset() {
    use assignd::protocol::group::{Record, Slot, Task};
    use assignd::protocol::reconcile::{MemberAssignment, MemberState};

    let (data_dir, settled) = settled_log("crash-incoherent");
    let a = settled
        .members
        .values()
        .find(|m| m.name.as_deref() == Some("a"))
        .expect("member a");
    let (topic, partition) = a.active.first().cloned().expect("a holds a task");
    let b_takes_it = Record::MemberReconciled {
        group: STATICS.to_owned(),
        slot: Slot::named("b"),
        assignment: MemberAssignment {
            state: MemberState::Stable,
            epoch: settled.target_epoch,
            previous_epoch: 0,
            active: [Task::new(&topic, partition as u32)].into(),
            revoking: Default::default(),
        },
    };
    let other_group = {
        let mut core = assignd::protocol::core::Coordinator::new(0);
        core.apply(&Record::GroupConfigured {
            group: "elsewhere".to_owned(),
            config: assignd::protocol::group::GroupConfig::with_topics(Vec::new()),
        });
        Record::GroupSnapshot {
            group: STATICS.to_owned(),
            state: Box::new(core.group("elsewhere").expect("configured").clone()),
        }
    };
    let cases = [
        (
            Record::GroupEpochBumped {
                group: "ghost".to_owned(),
                epoch: 1,
            },
            "never configured",
        ),
        (b_takes_it, "while slot \"static:a\" holds it"),
        (other_group, "a snapshot of group \"elsewhere\""),
        (
            Record::GroupEpochBumped {
                group: STATICS.to_owned(),
                epoch: settled.group_epoch - 1,
            },
            "is not past its epoch",
        ),
    ];
    let file = segments(&data_dir).pop().expect("a segment");
    let intact = std::fs::read(&file).expect("the segment");
    for (record, reason) in &cases {
        std::fs::write(&file, &intact).expect("restore");
        let offset = append(&file, &frame(record));
        assert_refused(&data_dir, &file, offset, reason);
    }

    // Repair cuts the log where it stops fitting, says so, and the host
    // starts on what is before it.
    let dir = data_dir.to_str().expect("a UTF-8 path");
    let offset = intact.len() as u64;
    assert_repair_cuts(dir, &file, offset);
    let server = serve(&data_dir);
    let (status, value) = server.call("GET", "/v1/groups/statics", None);
    assert_eq!(status, 200, "{value}");
    assert_eq!(View::parse(&value).group_epoch, settled.group_epoch);
    assert_quiet(&server.kill(), "after the repair");
    let _ = std::fs::remove_dir_all(&data_dir);
}

#[test]
fn a_frame_of_a_newer_version_or_an_unknown_type_at_the_tail_is_refused_not_cut() {
    use assignd::protocol::group::Record;

    let (data_dir, settled) = settled_log("crash-newer");
    let file = segments(&data_dir).pop().expect("a segment");
    let intact = std::fs::read(&file).expect("the segment");
    let bumped = frame(&Record::GroupEpochBumped {
        group: STATICS.to_owned(),
        epoch: settled.group_epoch + 1,
    });
    let cases = [
        (
            reframed(bumped.clone(), 200, bumped[9]),
            "format version 200",
        ),
        (
            reframed(bumped.clone(), bumped[8], 250),
            "unknown record type 250",
        ),
    ];
    for (frame, reason) in &cases {
        std::fs::write(&file, &intact).expect("restore");
        let offset = append(&file, frame);
        assert_refused(&data_dir, &file, offset, reason);
    }
    let _ = std::fs::remove_dir_all(&data_dir);
}

/// Copies the shard count and the one shard's log folder (its lock
/// aside) of `from` into a new data dir.
fn copy_log(from: &Path, name: &str) -> PathBuf {
    let to = common::scratch(name);
    std::fs::create_dir_all(log_dir(&to)).expect("a log folder");
    std::fs::copy(
        from.join("shards").join("SHARD_COUNT"),
        to.join("shards").join("SHARD_COUNT"),
    )
    .expect("copy the shard count");
    for (path, bytes) in log_files(from) {
        std::fs::write(log_dir(&to).join(path.file_name().expect("a name")), bytes).expect("copy");
    }
    to
}

fn group_config(topic: &str) -> Value {
    json!({"topics": [{"name": topic, "partitions": 4}]})
}

#[test]
fn a_missing_first_middle_last_or_only_segment_is_refused_with_the_file_named() {
    // Three runs, each creating a group: each run writes its own segment.
    let data_dir = common::scratch("crash-missing");
    let mut only = None;
    for group in ["g1", "g2", "g3"] {
        let server = serve(&data_dir);
        let (status, value) = server.call(
            "PUT",
            &format!("/v1/groups/{group}"),
            Some(&group_config("orders")),
        );
        assert_eq!(status, 201, "{value}");
        assert_quiet(&server.kill(), group);
        if only.is_none() {
            only = Some(copy_log(&data_dir, "crash-missing-only"));
        }
    }
    let only = only.expect("copied after the first run");
    let only_file = segments(&only).pop().expect("one segment");
    std::fs::remove_file(&only_file).expect("remove");
    assert_refused(&only, &only_file, 0, "is missing");
    let files = segments(&data_dir);
    assert_eq!(files.len(), 3, "one segment per run: {files:?}");

    for (i, which) in ["first", "middle", "last"].iter().enumerate() {
        let damaged = copy_log(&data_dir, &format!("crash-missing-{which}"));
        let missing = log_dir(&damaged).join(files[i].file_name().expect("a name"));
        std::fs::remove_file(&missing).expect("remove");
        assert_refused(&damaged, &missing, 0, "is missing");
        if *which == "middle" {
            // Repair keeps what comes before the gap, says what it drops,
            // and the host starts on it: g1 is there, g3 is not.
            let dir = damaged.to_str().expect("a UTF-8 path");
            let repair = common::assignd(&["log", "repair", "--data-dir", dir]);
            let stdout = common::stdout(&repair);
            assert!(
                repair.status.success(),
                "repair: {}",
                common::stderr(&repair)
            );
            assert!(
                stdout.contains("is missing")
                    && stdout
                        .contains(&files[2].file_name().unwrap().to_string_lossy().into_owned()),
                "repair names the gap and what it removed: {stdout}"
            );
            let server = serve(&damaged);
            assert_eq!(server.call("GET", "/v1/groups/g1", None).0, 200);
            assert_eq!(server.call("GET", "/v1/groups/g3", None).0, 404);
            assert_quiet(&server.kill(), "after the repair");
        }
        let _ = std::fs::remove_dir_all(&damaged);
    }
    let _ = std::fs::remove_dir_all(&only);
    let _ = std::fs::remove_dir_all(&data_dir);
}

#[test]
fn a_data_dir_written_before_segment_headers_opens_and_is_migrated() {
    use assignd::protocol::core::Coordinator;
    use assignd::protocol::group::{GroupConfig, TopicConfig};

    // The log as assignd wrote it before segments had headers: frames from
    // the first byte of the file.
    let mut core = Coordinator::new(0);
    let topics = vec![TopicConfig {
        name: "orders".into(),
        partitions: 4,
    }];
    let out = core
        .configure("legacy", GroupConfig::with_topics(topics), 0)
        .expect("configure");
    let mut bytes = Vec::new();
    for record in &out.records {
        assignd::log::frame::encode(record, &mut bytes);
    }
    let data_dir = common::scratch("crash-legacy");
    std::fs::create_dir_all(data_dir.join("log")).expect("a log folder");
    let old = data_dir.join("log").join("00000000000000000000.seg");
    std::fs::write(&old, &bytes).expect("the old segment");

    for run in ["the first run", "the second run"] {
        let server = serve(&data_dir);
        let (status, value) = server.call("GET", "/v1/groups/legacy", None);
        assert_eq!(status, 200, "{run}: {value}");
        assert_eq!(value["config"]["topics"][0]["partitions"], 4, "{run}");
        assert_quiet(&server.kill(), run);
        for file in segments(&data_dir) {
            let head = std::fs::read(&file).expect("a segment");
            assert!(
                head.starts_with(b"assignd\0"),
                "{run}: {file:?} has a header"
            );
        }
    }
    assert!(
        !old.exists(),
        "the old segment was replaced by the migration"
    );
    let check = common::assignd(&["log", "check", "--data-dir", data_dir.to_str().unwrap()]);
    assert!(check.status.success(), "check: {}", common::stderr(&check));
    assert!(
        common::stdout(&check).ends_with("ok\n"),
        "{}",
        common::stdout(&check)
    );
    let _ = std::fs::remove_dir_all(&data_dir);
}

impl Server {
    /// `GET path` as text (for `/metrics`).
    fn text(&self, path: &str) -> String {
        let bearer = format!("Bearer {}", common::ADMIN_TOKEN);
        let mut response = self
            .agent
            .get(&format!("{}{path}", self.base))
            .header("authorization", &bearer)
            .call()
            .unwrap_or_else(|e| panic!("GET {path}: {e}"));
        response.body_mut().read_to_string().expect("a body")
    }
}

/// A compaction that cannot create its file (the host has run out of
/// descriptors) fails no request: the write is saved, so neither that
/// request nor a later one, `/healthz` included, is answered 503
/// `storage_failed` until a restart, and the compaction is retried later.
/// Here the file's name is taken by a directory, so creating it fails
/// (EISDIR) as it would with no descriptor left.
#[test]
fn a_compaction_that_cannot_create_its_file_fails_no_request_and_is_retried_later() {
    let data_dir = common::scratch("crash-compaction");
    let server = serve(&data_dir);
    let last = segments(&data_dir).pop().expect("a segment");
    let number: u64 = last
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .expect("a numbered segment");
    let blocker = log_dir(&data_dir).join(format!("{:020}.seg.tmp", number + 1));
    std::fs::create_dir(&blocker).expect("the blocking directory");
    // About 400 KB a config: the log passes the 4 MiB at which it compacts
    // within a dozen.
    let big = |flavour: usize| {
        let topics: Vec<Value> = (0..2000)
            .map(|i| json!({"name": format!("{}-{i}-{flavour}", "t".repeat(180)), "partitions": 1}))
            .collect();
        json!({ "topics": topics })
    };
    let mut flavour = 0;
    let mut put = |server: &Server| {
        flavour += 1;
        let (status, value) = server.call("PUT", "/v1/groups/big", Some(&big(flavour)));
        assert!(
            status == 200 || status == 201,
            "PUT {flavour}: {status} {}",
            value["error"]
        );
        let (status, value) = server.call("GET", "/healthz", None);
        assert_eq!(status, 200, "/healthz after PUT {flavour}: {value}");
        flavour
    };
    let failed = "assignd_log_maintenance_failures_total{step=\"compaction\"}";
    let deadline = Instant::now() + SETTLE_DEADLINE;
    // Described at zero from the start: wait for a failure counted.
    let failures = |metrics: &str| -> u64 {
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(failed))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or(0)
    };
    while failures(&server.text("/metrics")) == 0 {
        assert!(Instant::now() < deadline, "no compaction was attempted");
        put(&server);
    }
    // Appends go on while it cannot compact; once it can, it does.
    std::fs::remove_dir(&blocker).expect("unblock");
    let compacted = |dir: &Path| {
        segments(dir).first().is_some_and(|first| {
            let bytes = std::fs::read(first).expect("a segment");
            first != &last && bytes.get(9) == Some(&0)
        })
    };
    let deadline = Instant::now() + SETTLE_DEADLINE;
    let mut last_flavour = 0;
    while !compacted(&data_dir) {
        assert!(Instant::now() < deadline, "the compaction was not retried");
        last_flavour = put(&server);
    }
    let stderr = server.kill();
    assert_quiet(&stderr, "a failed compaction");
    assert!(
        stderr.contains("record log maintenance failed"),
        "the failure is logged: {stderr}"
    );
    let server = serve(&data_dir);
    let (status, value) = server.call("GET", "/v1/groups/big", None);
    assert_eq!(status, 200, "{value}");
    assert_eq!(
        value["config"]["topics"][0]["name"],
        format!("{}-0-{last_flavour}", "t".repeat(180)),
        "the last acknowledged config"
    );
    assert_quiet(&server.kill(), "after the compaction");
    let _ = std::fs::remove_dir_all(&data_dir);
}

/// Runs `assignd log repair` on the data dir `dir` and checks it succeeds
/// and says it cut `file` at `offset`.
fn assert_repair_cuts(dir: &str, file: &Path, offset: u64) {
    let repair = common::assignd(&["log", "repair", "--data-dir", dir]);
    assert!(
        repair.status.success(),
        "repair: {}",
        common::stderr(&repair)
    );
    assert!(
        common::stdout(&repair).contains(&format!("cut {} at offset {offset}", file.display())),
        "{}",
        common::stdout(&repair)
    );
}
