//! Hot swaps under load, with the real `assignd serve`: a group of 40 tasks
//! and 20 members heartbeating over HTTP (10 dynamic, then 10 static),
//! each in its own thread and behaving like a real member: it reports what
//! it holds, stops processing a revoked task and reports it released on its
//! next beat, and warms up its learner (and standby) tasks, reporting a lag
//! that falls from `LAG_START` to 0 as it replays.
//!
//! The group's assignor is swapped while the members run: `range` →
//! `sticky` → `learner-aware` (with a param) → an uploaded module (the
//! `spin-when-told` test guest, built from source, which answers a plain
//! round-robin) → rollback, which must bring back `learner-aware` with its
//! param. After each swap the group reaches a stable target of the new
//! binding (as `GET /v1/groups/{g}` shows it): every task active on exactly
//! one member, no learners left, and the members' own account agreeing
//! with the host's; `range` and the uploaded module are checked to have
//! placed exactly their assignment.
//!
//! Throughout: every heartbeat is answered 200 (never an error, never
//! `fenced`); invariant 1 holds by the members' own account (a ledger of
//! who processes what: a task is entered when a member is told it holds it
//! and left just before the member reports it released, and entering a
//! task another member holds is a violation) and in every sampled group
//! view; invariant 4: a task whose owner is the same at two consecutive
//! stable targets was never revoked in between. Every wait polls with a
//! deadline.

use crate::common;

use crate::common::Server;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const GROUP: &str = "hot-swap";
const TOPIC: &str = "orders";
const PARTITIONS: u64 = 40;
/// Members of each kind: dynamic ones join first (a nameless join into a
/// stable group with static members would drop the name map), then static.
const PER_KIND: usize = 10;
const MEMBERS: usize = 2 * PER_KIND;
/// A learner's lag when it starts warming up, how fast it replays, and the
/// lag at which the group counts it caught up.
const LAG_START: u64 = 500;
const REPLAY_PER_SEC: f64 = 5_000.0;
const ACCEPTABLE_LAG: u64 = 50;
/// The longest any phase may take.
const PHASE_DEADLINE: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(20);

type Task = (String, u64);

/// What the members say, shared by their threads and the test.
#[derive(Default)]
struct Ledger {
    /// Who processes each task, by the members' own account.
    holder: BTreeMap<Task, String>,
    /// Invariant 1 breaches and tasks dropped without a revocation.
    violations: Vec<String>,
    /// Heartbeats not answered 200 (or not answered at all).
    failures: Vec<String>,
    /// Every revocation a member was told of, in order: (member, task).
    revoked: Vec<(String, Task)>,
    /// Each member's id and its last answer's learners and revoking tasks.
    members: BTreeMap<String, Told>,
    /// Every (member, task) a member was told to warm up as a learner.
    learners: BTreeSet<(String, Task)>,
    heartbeats: u64,
}

#[derive(Default)]
struct Told {
    member_id: String,
    learner: BTreeSet<Task>,
    revoking: BTreeSet<Task>,
}

impl Ledger {
    fn of(&self, member: &str) -> BTreeSet<Task> {
        self.holder
            .iter()
            .filter(|(_, m)| *m == member)
            .map(|(t, _)| t.clone())
            .collect()
    }

    fn member_of_id(&self, member_id: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|(_, told)| told.member_id == member_id)
            .map(|(name, _)| name.as_str())
    }
}

fn tasks(value: &Value) -> Result<BTreeSet<Task>, String> {
    value
        .as_array()
        .ok_or_else(|| format!("not a task list: {value}"))?
        .iter()
        .map(|task| match (task[0].as_str(), task[1].as_u64()) {
            (Some(topic), Some(partition)) => Ok((topic.to_owned(), partition)),
            _ => Err(format!("not a task: {task}")),
        })
        .collect()
}

/// One simulated member process.
struct Member {
    /// Its label in the ledger (and, if static, its member name).
    label: String,
    is_static: bool,
    url: String,
    agent: ureq::Agent,
    ledger: Arc<Mutex<Ledger>>,
    member_id: String,
    member_epoch: u64,
    active: BTreeSet<Task>,
    revoking: BTreeSet<Task>,
    /// Learner and standby tasks: the ones it keeps state for and warms up.
    warm: BTreeSet<Task>,
    /// When it started warming each of them.
    warming_since: BTreeMap<Task, Instant>,
    interval: Duration,
}

impl Member {
    fn run(mut self, stop: Arc<AtomicBool>) {
        while !stop.load(Ordering::Relaxed) {
            if let Err(failure) = self.heartbeat() {
                // A failed member stops; the test sees the failure.
                self.ledger.lock().unwrap().failures.push(failure);
                return;
            }
            std::thread::sleep(self.interval);
        }
    }

    fn heartbeat(&mut self) -> Result<(), String> {
        // Revoked tasks are released (processing stopped) before the beat
        // that reports them gone.
        {
            let mut ledger = self.ledger.lock().unwrap();
            for task in std::mem::take(&mut self.revoking) {
                if ledger.holder.get(&task) == Some(&self.label) {
                    ledger.holder.remove(&task);
                }
            }
        }
        let body = if self.member_id.is_empty() {
            let mut join = json!({"member_id": "", "member_epoch": 0, "topics": [TOPIC]});
            if self.is_static {
                join["member_name"] = json!(self.label);
            }
            join
        } else {
            let owned: Vec<Value> = self.active.iter().map(|(t, p)| json!([t, p])).collect();
            let lags: Vec<Value> = self
                .warm
                .iter()
                .map(|task| {
                    let since = *self
                        .warming_since
                        .entry(task.clone())
                        .or_insert_with(Instant::now);
                    let replayed = (since.elapsed().as_secs_f64() * REPLAY_PER_SEC) as u64;
                    json!([task.0, task.1, LAG_START.saturating_sub(replayed)])
                })
                .collect();
            json!({
                "member_id": self.member_id,
                "member_epoch": self.member_epoch,
                "owned": owned,
                "lags": lags,
            })
        };
        let who = self.label.clone();
        let mut response = self
            .agent
            .post(&self.url)
            .send_json(&body)
            .map_err(|e| format!("{who}: heartbeat not answered: {e}"))?;
        let status = response.status().as_u16();
        let text = response
            .body_mut()
            .read_to_string()
            .map_err(|e| format!("{who}: reading the answer: {e}"))?;
        if status != 200 {
            return Err(format!("{who}: heartbeat answered {status}: {text}"));
        }
        let answer: Value =
            serde_json::from_str(&text).map_err(|e| format!("{who}: not JSON ({e}): {text}"))?;
        self.absorb(&answer)
            .map_err(|e| format!("{who}: unexpected answer ({e}): {answer}"))
    }

    fn absorb(&mut self, answer: &Value) -> Result<(), String> {
        let member_id = answer["member_id"].as_str().ok_or("no member_id")?;
        let member_epoch = answer["member_epoch"].as_u64().ok_or("no member_epoch")?;
        let active = tasks(&answer["active"])?;
        let revoking = tasks(&answer["revoking"])?;
        let learner = tasks(&answer["learner"])?;
        let standby = tasks(&answer["standby"])?;
        let interval = answer["heartbeat_interval_ms"]
            .as_u64()
            .ok_or("no heartbeat_interval_ms")?;

        {
            let mut ledger = self.ledger.lock().unwrap();
            let ledger = &mut *ledger;
            let held: BTreeSet<Task> = active.union(&revoking).cloned().collect();
            for task in ledger.of(&self.label).difference(&held) {
                ledger.violations.push(format!(
                    "{}: {task:?} dropped from its answer without a revocation",
                    self.label
                ));
                ledger.holder.remove(task);
            }
            for task in &held {
                if let Some(other) = ledger.holder.insert(task.clone(), self.label.clone())
                    && other != self.label
                {
                    ledger.violations.push(format!(
                        "{task:?} given to {} while {other} processes it",
                        self.label
                    ));
                }
            }
            for task in &revoking {
                ledger.revoked.push((self.label.clone(), task.clone()));
            }
            for task in &learner {
                ledger.learners.insert((self.label.clone(), task.clone()));
            }
            ledger.heartbeats += 1;
            ledger.members.insert(
                self.label.clone(),
                Told {
                    member_id: member_id.to_owned(),
                    learner: learner.clone(),
                    revoking: revoking.clone(),
                },
            );
        }

        self.member_id = member_id.to_owned();
        self.member_epoch = member_epoch;
        self.active = active;
        self.revoking = revoking;
        self.warm = learner.union(&standby).cloned().collect();
        // State of a task it neither processes nor warms is dropped.
        let keep: BTreeSet<&Task> = self.active.iter().chain(&self.warm).collect();
        self.warming_since.retain(|task, _| keep.contains(task));
        self.interval = Duration::from_millis(interval);
        Ok(())
    }
}

/// The member threads; stopped (and joined) on drop, whatever happens.
struct Crew {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl Crew {
    fn spawn(
        &mut self,
        server: &Server,
        ledger: &Arc<Mutex<Ledger>>,
        label: String,
        is_static: bool,
    ) {
        let member = Member {
            label,
            is_static,
            url: format!("{}/v1/groups/{GROUP}/heartbeat", server.base),
            agent: Server::agent(),
            ledger: ledger.clone(),
            member_id: String::new(),
            member_epoch: 0,
            active: BTreeSet::new(),
            revoking: BTreeSet::new(),
            warm: BTreeSet::new(),
            warming_since: BTreeMap::new(),
            interval: Duration::ZERO,
        };
        let stop = self.stop.clone();
        self.threads
            .push(std::thread::spawn(move || member.run(stop)));
    }
}

impl Drop for Crew {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

fn view(server: &Server) -> Value {
    let (status, view) = server.call("GET", &format!("/v1/groups/{GROUP}"), None);
    assert_eq!(status, 200, "{view}");
    view
}

/// Fails the test at once on any failed heartbeat or ledger violation,
/// and on a task held (active or revoking) by two members in `view`.
fn check(ledger: &Ledger, view: &Value) {
    assert!(
        ledger.failures.is_empty(),
        "failed heartbeats: {:#?}",
        ledger.failures
    );
    assert!(
        ledger.violations.is_empty(),
        "by the members' account: {:#?}",
        ledger.violations
    );
    let mut holder: BTreeMap<Task, &str> = BTreeMap::new();
    for member in view["members"].as_array().expect("members") {
        let slot = member["slot"].as_str().expect("slot");
        let held = tasks(&member["active"]).unwrap();
        for task in held.union(&tasks(&member["revoking"]).unwrap()) {
            if let Some(other) = holder.insert(task.clone(), slot) {
                panic!("group view: {task:?} held by {other} and {slot}: {view:#}");
            }
        }
    }
}

/// Polls the group view until `condition` holds, checking every sample.
fn wait_until(
    server: &Server,
    ledger: &Mutex<Ledger>,
    what: &str,
    condition: impl Fn(&Value, &Ledger) -> bool,
) -> Value {
    let deadline = Instant::now() + PHASE_DEADLINE;
    loop {
        let view = view(server);
        let ledger = ledger.lock().unwrap();
        check(&ledger, &view);
        if condition(&view, &ledger) {
            return view;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting until {what}; last view: {view:#}"
        );
        drop(ledger);
        std::thread::sleep(POLL);
    }
}

/// A settled group: its view, and the owner of each task by the members'
/// own account.
struct Settled {
    view: Value,
    owners: BTreeMap<Task, String>,
    /// How many revocations the ledger had recorded then.
    revoked: usize,
    /// How many (member, task) learners the members had been told of then.
    learners: usize,
}

/// Waits until the group is stable at a target computed for its binding
/// `seq` (or later) bound to `module` with `params`: all members present,
/// every task active on exactly one member, no learners left, and every
/// member's own account equal to the host's view of it.
fn settle(
    server: &Server,
    ledger: &Mutex<Ledger>,
    module: &str,
    params: &Value,
    seq: u64,
) -> Settled {
    let what = format!("the group is settled on {module} {params}");
    let view = wait_until(server, ledger, &what, |view, ledger| {
        let binding = view["bindings"].as_array().and_then(|b| b.last());
        let Some(binding) = binding else { return false };
        let Some(members) = view["members"].as_array() else {
            return false;
        };
        let mut active = Vec::new();
        for member in members {
            let target = tasks(&member["target"]["active"]).unwrap();
            let held = tasks(&member["active"]).unwrap();
            let Some(name) = ledger.member_of_id(member["member_id"].as_str().unwrap()) else {
                return false;
            };
            let told = &ledger.members[name];
            if held != target
                || ledger.of(name) != held
                || !told.learner.is_empty()
                || !told.revoking.is_empty()
            {
                return false;
            }
            active.extend(held);
        }
        let distinct: BTreeSet<&Task> = active.iter().collect();
        view["state"] == "stable"
            && view["learner_count"] == 0
            && binding["seq"].as_u64() == Some(seq)
            && view["target_epoch"].as_u64() >= binding["epoch"].as_u64()
            && members.len() == MEMBERS
            && active.len() as u64 == PARTITIONS
            && distinct.len() as u64 == PARTITIONS
    });
    // The binding shown is the one requested.
    assert_eq!(view["config"]["assignor"], module, "{view:#}");
    assert_eq!(view["config"]["params"], *params, "{view:#}");
    let binding = view["bindings"].as_array().unwrap().last().unwrap();
    assert_eq!(binding["module"], module, "{binding}");
    assert_eq!(binding["params"], *params, "{binding}");
    let ledger = ledger.lock().unwrap();
    Settled {
        view,
        owners: ledger.holder.clone(),
        revoked: ledger.revoked.len(),
        learners: ledger.learners.len(),
    }
}

/// Invariant 4 between two settled points: a task on the same member at
/// both was never revoked from it in between. Returns how many tasks moved.
fn assert_unmoved_never_revoked(
    ledger: &Mutex<Ledger>,
    before: &Settled,
    after: &Settled,
) -> usize {
    let ledger = ledger.lock().unwrap();
    let revoked: BTreeSet<&(String, Task)> = ledger.revoked[before.revoked..after.revoked]
        .iter()
        .collect();
    let mut moved = 0;
    for (task, owner) in &before.owners {
        if after.owners.get(task) == Some(owner) {
            assert!(
                !revoked.contains(&(owner.clone(), task.clone())),
                "{task:?} stayed on {owner} but was revoked in between"
            );
        } else {
            moved += 1;
        }
    }
    moved
}

/// The partitions each member (by member id) of a settled view holds.
fn partitions_by_member(view: &Value) -> Vec<(String, BTreeSet<u64>)> {
    view["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let id = m["member_id"].as_str().unwrap().to_owned();
            (
                id,
                tasks(&m["active"])
                    .unwrap()
                    .into_iter()
                    .map(|t| t.1)
                    .collect(),
            )
        })
        .collect()
}

/// How many standby copies the group's target places.
fn standbys(view: &Value) -> usize {
    view["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["target"]["standby"].as_array().map_or(0, Vec::len))
        .sum()
}

/// Binds the group to `module` with `params`; returns the new binding's seq.
fn bind(server: &Server, module: &str, params: &Value) -> u64 {
    let (status, view) = server.call(
        "PUT",
        &format!("/v1/groups/{GROUP}/assignor"),
        Some(&json!({"module": module, "params": params})),
    );
    assert_eq!(status, 200, "bind {module}: {view}");
    assert_eq!(view["config"]["assignor"], module, "{view}");
    let binding = view["bindings"].as_array().unwrap().last().unwrap();
    assert_eq!(binding["module"], module, "{binding}");
    binding["seq"].as_u64().expect("seq")
}

#[test]
fn twenty_members_ride_hot_swaps_and_a_rollback_without_a_failed_heartbeat() {
    let started = Instant::now();
    let bytes = std::fs::read(common::bad_guest("test-guest-spin-when-told")).expect("guest");
    let server = Server::start(&common::scratch("hot-swap"), &[]);
    let (status, module) = server.upload("custom-rr", "1.0.0", &bytes);
    assert_eq!(status, 201, "the guest passes its self-test: {module}");
    let custom = "custom-rr@1.0.0";

    let no_params = json!({});
    let config = json!({
        "topics": [{"name": TOPIC, "partitions": PARTITIONS}],
        "assignor": "range",
        // Generous next to the heartbeat interval: a member on this busy
        // machine is never fenced for releasing late.
        "expansion_timeout_ms": 1500,
        "heartbeat_interval_ms": 100,
        "session_timeout_ms": 30000,
        "registration_timeout_ms": 30000,
        "acceptable_recovery_lag": ACCEPTABLE_LAG,
        "max_learners": 10,
        "probing_interval_ms": 1000,
    });
    let (status, created) = server.call("PUT", &format!("/v1/groups/{GROUP}"), Some(&config));
    assert_eq!(status, 201, "{created}");

    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut crew = Crew {
        stop: Arc::new(AtomicBool::new(false)),
        threads: Vec::new(),
    };
    for i in 0..PER_KIND {
        crew.spawn(&server, &ledger, format!("dynamic-{i:02}"), false);
    }
    wait_until(&server, &ledger, "the dynamic members joined", |view, _| {
        view["members"]
            .as_array()
            .is_some_and(|m| m.len() == PER_KIND)
    });
    for i in 0..PER_KIND {
        crew.spawn(&server, &ledger, format!("static-{i:02}"), true);
    }

    // range: static members by name, then dynamic ones by id, each given
    // the next two partitions.
    let mut settled = settle(&server, &ledger, "range", &no_params, 1);
    let mut expected: Vec<(String, BTreeSet<u64>)> = partitions_by_member(&settled.view);
    let name_of: BTreeMap<String, String> = settled.view["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            let id = m["member_id"].as_str().unwrap().to_owned();
            let name = m["name"].as_str().map_or(format!("~{id}"), str::to_owned);
            (id, name)
        })
        .collect();
    expected.sort_by_key(|(id, _)| (name_of[id].starts_with('~'), name_of[id].clone()));
    for (k, (id, partitions)) in expected.iter().enumerate() {
        let pair = BTreeSet::from([2 * k as u64, 2 * k as u64 + 1]);
        assert_eq!(partitions, &pair, "range gives {} its pair", name_of[id]);
    }
    eprintln!("range settled after {:?}", started.elapsed());

    let learner_params = json!({"num_standby": "1"});
    let custom_params = json!({"spin": "no"});
    let swaps = [
        ("sticky", &no_params),
        ("learner-aware", &learner_params),
        (custom, &custom_params),
    ];
    let mut learner_aware_seq = 0;
    for (module, params) in swaps {
        let seq = bind(&server, module, params);
        if module == "learner-aware" {
            learner_aware_seq = seq;
        }
        let next = settle(&server, &ledger, module, params, seq);
        let moved = assert_unmoved_never_revoked(&ledger, &settled, &next);
        let warmed = next.learners - settled.learners;
        eprintln!(
            "{module} settled after {:?}: {moved} tasks moved, {warmed} learners",
            started.elapsed()
        );
        // learner-aware's param asks for a standby of every task; the others
        // place none.
        let copies = if module == "learner-aware" {
            PARTITIONS
        } else {
            0
        };
        assert_eq!(
            standbys(&next.view) as u64,
            copies,
            "{module}: {:#}",
            next.view
        );
        if module == custom {
            // Its moves go to members with no state: through learners that
            // catch up, as the members report.
            assert!(moved > 0 && warmed > 0, "{moved} moved, {warmed} learners");
        }
        settled = next;
    }

    // The uploaded module's answer is in place: partition p on the
    // (p mod 20)-th member in the group's (and its input's) member order.
    for (j, (id, partitions)) in partitions_by_member(&settled.view).iter().enumerate() {
        let expected: BTreeSet<u64> = (0..PARTITIONS)
            .filter(|p| *p as usize % MEMBERS == j)
            .collect();
        assert_eq!(partitions, &expected, "round-robin on member {id}");
    }
    let (status, input) = server.call("GET", &format!("/v1/groups/{GROUP}/assignor-input"), None);
    assert_eq!(status, 200, "{input}");
    let input_order: Vec<&str> = input["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    let view_order: Vec<String> = partitions_by_member(&settled.view)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(
        input_order, view_order,
        "the view lists members in input order"
    );

    // Rollback: back to learner-aware with its param.
    let (_, binding) = server.rollback(GROUP);
    assert_eq!(binding["rollback_to"], learner_aware_seq, "{binding}");
    let seq = binding["seq"].as_u64().unwrap();
    let next = settle(&server, &ledger, "learner-aware", &learner_params, seq);
    let moved = assert_unmoved_never_revoked(&ledger, &settled, &next);
    eprintln!(
        "rolled back after {:?}: {moved} tasks moved",
        started.elapsed()
    );
    assert_eq!(standbys(&next.view) as u64, PARTITIONS, "{:#}", next.view);
    let history: Vec<&str> = next.view["bindings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["module"].as_str().unwrap())
        .collect();
    assert_eq!(
        history,
        ["range", "sticky", "learner-aware", custom, "learner-aware"]
    );

    drop(crew);
    let ledger = ledger.lock().unwrap();
    check(&ledger, &view(&server));
    assert!(
        ledger.heartbeats > 5 * MEMBERS as u64,
        "the members heartbeat throughout: {}",
        ledger.heartbeats
    );
    eprintln!(
        "{} heartbeats, all answered 200, in {:?}",
        ledger.heartbeats,
        started.elapsed()
    );
}
