//! A cluster of members, as an application runs them: the real
//! `assignd serve` and members built with `assignd-client` in this test
//! process, each with a fake lag source whose learners catch up over time.
//!
//! One scenario, in phases: three static members settle on 12 tasks; three
//! more join and take their share through learners (seen in the group view)
//! that are promoted once caught up; one member crashes (its handle dropped,
//! no leave) and a new incarnation of its name comes back within the
//! registration timeout to exactly its tasks while nobody else's assignment
//! moves; one member drains and leaves with its tasks moved to the others.
//!
//! Throughout, two witnesses check invariant 1 (no task active on two
//! members at once): a sampler reading `GET /v1/groups/{g}` (no task held by
//! two members), and a ledger fed by the members' own events (a task is
//! entered on `Assigned`/`Promoted` and left on `Revoked` — before the
//! acknowledgement — or `Lost`; entering a task another member has is a
//! violation). Every wait polls with a deadline. The group has a member
//! token, which every member sends.

use crate::common;

use crate::common::Server;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use assignd_client::{Assignment, Event, Member, MemberConfig, MemberHandle, Task};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

const GROUP: &str = "orders-app";
const TASKS: u32 = 12;
/// The longest any phase may take.
const PHASE_DEADLINE: Duration = Duration::from_secs(60);
/// How often waits and the sampler look.
const POLL: Duration = Duration::from_millis(20);
/// A learner's fake lag when it starts, and how fast it replays.
const LEARNER_LAG_START: u64 = 2_000;
const REPLAY_PER_SEC: f64 = 4_000.0;

/// The group's member token: every worker heartbeats with it.
const MEMBER_TOKEN: &str = "cluster-member-token-7d2e";

/// The admin side: creating the group and reading its view.
#[derive(Clone)]
struct Admin {
    http: reqwest::Client,
    base: String,
}

impl Admin {
    async fn put_group(&self, config: Value) {
        let answer = self
            .http
            .put(format!("{}/v1/groups/{GROUP}", self.base))
            .bearer_auth(common::ADMIN_TOKEN)
            .json(&config)
            .send()
            .await
            .expect("PUT the group");
        let status = answer.status();
        let body = answer.text().await.unwrap_or_default();
        assert!(
            status.is_success(),
            "PUT /v1/groups/{GROUP}: {status} {body}"
        );
    }

    async fn view(&self) -> View {
        let answer = self
            .http
            .get(format!("{}/v1/groups/{GROUP}", self.base))
            .bearer_auth(common::ADMIN_TOKEN)
            .send()
            .await
            .expect("GET the group");
        assert!(answer.status().is_success(), "GET: {}", answer.status());
        View(answer.json().await.expect("a group view"))
    }
}

/// `GET /v1/groups/{g}`, read loosely.
#[derive(Clone, Debug)]
struct View(Value);

fn task_list(value: &Value) -> BTreeSet<Task> {
    serde_json::from_value(value.clone()).expect("a task list")
}

impl View {
    fn members(&self) -> &[Value] {
        self.0["members"].as_array().expect("members")
    }

    fn member(&self, name: &str) -> Option<&Value> {
        self.members()
            .iter()
            .find(|m| m["name"].as_str() == Some(name))
    }

    /// Active tasks by member name.
    fn active(&self) -> BTreeMap<String, BTreeSet<Task>> {
        self.members()
            .iter()
            .map(|m| {
                (
                    m["name"].as_str().unwrap_or("?").to_owned(),
                    task_list(&m["active"]),
                )
            })
            .collect()
    }

    fn learners(&self) -> usize {
        self.0["learners"].as_array().map_or(0, Vec::len)
    }

    fn stable(&self) -> bool {
        self.0["state"] == "stable"
    }

    /// Tasks held (active or revoking) by two members.
    fn held_twice(&self) -> Vec<(Task, String, String)> {
        let mut holder: BTreeMap<Task, String> = BTreeMap::new();
        let mut twice = Vec::new();
        for m in self.members() {
            let name = m["slot"].as_str().unwrap_or("?").to_owned();
            for task in task_list(&m["active"])
                .into_iter()
                .chain(task_list(&m["revoking"]))
            {
                if let Some(other) = holder.insert(task.clone(), name.clone()) {
                    twice.push((task, other, name.clone()));
                }
            }
        }
        twice
    }

    /// Every task active on exactly one member, and the group stable.
    fn settled(&self, members: usize) -> bool {
        let active = self.active();
        let all: Vec<&Task> = active.values().flatten().collect();
        let distinct: BTreeSet<&Task> = all.iter().copied().collect();
        self.stable()
            && self.members().len() == members
            && all.len() == TASKS as usize
            && distinct.len() == TASKS as usize
    }
}

/// What the members' events say each one is processing.
#[derive(Default)]
struct Ledger {
    active: BTreeMap<Task, String>,
    violations: Vec<String>,
    /// Every event, in the order the members saw them.
    log: Vec<(String, String)>,
}

impl Ledger {
    fn start(&mut self, name: &str, tasks: &[Task]) {
        for task in tasks {
            if let Some(other) = self.active.insert(task.clone(), name.to_owned())
                && other != name
            {
                self.violations
                    .push(format!("{task} active on {name} while {other} has it"));
            }
        }
    }

    fn stop(&mut self, name: &str, tasks: &[Task]) {
        for task in tasks {
            if self.active.get(task).map(String::as_str) == Some(name) {
                self.active.remove(task);
            }
        }
    }

    fn of(&self, name: &str) -> BTreeSet<Task> {
        self.active
            .iter()
            .filter(|(_, n)| *n == name)
            .map(|(t, _)| t.clone())
            .collect()
    }

    fn events_of(&self, name: &str) -> Vec<String> {
        self.log
            .iter()
            .filter(|(n, _)| n == name)
            .map(|(_, e)| e.clone())
            .collect()
    }
}

/// A fake state store: a task's state, once this member starts warming
/// it, is `LEARNER_LAG_START` behind and replays at `REPLAY_PER_SEC`; it
/// is kept (on "disk") when the copy stops.
fn lag_source() -> impl FnMut(&Assignment) -> Vec<(Task, u64)> + Send + 'static {
    let mut started: BTreeMap<Task, Instant> = BTreeMap::new();
    move |assignment: &Assignment| {
        let warming: BTreeSet<&Task> = assignment
            .learner
            .iter()
            .chain(&assignment.standby)
            .collect();
        warming
            .into_iter()
            .map(|task| {
                let since = *started.entry(task.clone()).or_insert_with(Instant::now);
                let replayed = (since.elapsed().as_secs_f64() * REPLAY_PER_SEC) as u64;
                (task.clone(), LEARNER_LAG_START.saturating_sub(replayed))
            })
            .collect()
    }
}

/// One member process: the client's handle and the task applying its
/// events to the ledger.
struct Worker {
    name: String,
    handle: MemberHandle,
    pump: JoinHandle<()>,
}

impl Worker {
    fn start(base: &str, name: &str, ledger: &Arc<Mutex<Ledger>>) -> Worker {
        let config = MemberConfig::new(base, GROUP, ["orders"])
            .with_name(name)
            .with_member_token(MEMBER_TOKEN)
            .with_request_timeout(Duration::from_secs(2));
        let (handle, mut events) = Member::start(config, lag_source()).expect("a valid config");
        let ledger = ledger.clone();
        let worker = name.to_owned();
        let pump = tokio::spawn(async move {
            while let Some(event) = events.recv().await {
                let mut ledger = ledger.lock().unwrap();
                let line = match &event {
                    Event::Assigned(tasks) => format!("assigned {}", list(tasks)),
                    Event::Promoted(tasks) => format!("promoted {}", list(tasks)),
                    Event::Revoked { tasks, .. } => format!("revoked {}", list(tasks)),
                    Event::Lost(tasks) => format!("lost {}", list(tasks)),
                    Event::LearnerStarted(tasks) => format!("learner started {}", list(tasks)),
                    Event::LearnerStopped(tasks) => format!("learner stopped {}", list(tasks)),
                    Event::Error(error) => format!("error {error}"),
                    other => format!("{other:?}"),
                };
                ledger.log.push((worker.clone(), line));
                match event {
                    Event::Assigned(tasks) | Event::Promoted(tasks) => {
                        ledger.start(&worker, &tasks);
                    }
                    Event::Revoked { tasks, ack } => {
                        // Processing stops before the acknowledgement.
                        ledger.stop(&worker, &tasks);
                        ack.ack();
                    }
                    Event::Lost(tasks) => ledger.stop(&worker, &tasks),
                    Event::Fenced { .. } => {
                        ledger.violations.push(format!("{worker} was fenced"));
                    }
                    _ => {}
                }
            }
        });
        Worker {
            name: name.to_owned(),
            handle,
            pump,
        }
    }

    /// A crash: the loop and the event handling stop at once, nothing is
    /// sent, and the process no longer processes anything.
    async fn crash(self, ledger: &Arc<Mutex<Ledger>>) {
        self.handle.abort();
        self.pump.abort();
        let _ = self.pump.await;
        let mut ledger = ledger.lock().unwrap();
        let held: Vec<Task> = ledger.of(&self.name).into_iter().collect();
        ledger.stop(&self.name, &held);
    }
}

fn list(tasks: &[Task]) -> String {
    tasks
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// Polls `condition` on fresh group views until it holds.
async fn wait_until(admin: &Admin, what: &str, condition: impl Fn(&View) -> bool) -> View {
    let deadline = Instant::now() + PHASE_DEADLINE;
    loop {
        let view = admin.view().await;
        if condition(&view) {
            return view;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting until {what}; last view: {:#}",
            view.0
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Polls the ledger until `condition` holds.
async fn wait_ledger(ledger: &Arc<Mutex<Ledger>>, what: &str, condition: impl Fn(&Ledger) -> bool) {
    let deadline = Instant::now() + PHASE_DEADLINE;
    loop {
        {
            let ledger = ledger.lock().unwrap();
            if condition(&ledger) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "timed out waiting until {what}; events: {:#?}",
                ledger.log
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Reads the group view until stopped, recording any task held twice.
fn spawn_sampler(
    admin: Admin,
    stop: Arc<AtomicBool>,
    samples: Arc<AtomicUsize>,
    violations: Arc<Mutex<Vec<String>>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        while !stop.load(Ordering::Relaxed) {
            let view = admin.view().await;
            for (task, a, b) in view.held_twice() {
                violations
                    .lock()
                    .unwrap()
                    .push(format!("{task} held by {a} and {b}"));
            }
            samples.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(POLL).await;
        }
    })
}

fn assert_no_violations(ledger: &Arc<Mutex<Ledger>>, sampled: &Arc<Mutex<Vec<String>>>) {
    let ledger = ledger.lock().unwrap();
    assert!(
        ledger.violations.is_empty(),
        "members' events: {:?}\nevents: {:#?}",
        ledger.violations,
        ledger.log
    );
    let sampled = sampled.lock().unwrap();
    assert!(sampled.is_empty(), "group views: {sampled:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_scale_out_with_learners_restart_statically_and_drain_without_overlap() {
    let server = Server::start(&common::scratch("cluster"), &[]);
    let admin = Admin {
        http: reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .unwrap(),
        base: server.base.clone(),
    };
    admin
        .put_group(json!({
            "topics": [{"name": "orders", "partitions": TASKS}],
            "assignor": "learner-aware",
            "expansion_timeout_ms": 300,
            "heartbeat_interval_ms": 100,
            "session_timeout_ms": 3000,
            "registration_timeout_ms": 5000,
            "acceptable_recovery_lag": 100,
            "member_token": MEMBER_TOKEN
        }))
        .await;
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let samples = Arc::new(AtomicUsize::new(0));
    let sampled = Arc::new(Mutex::new(Vec::new()));
    let sampler = spawn_sampler(
        admin.clone(),
        stop.clone(),
        samples.clone(),
        sampled.clone(),
    );

    // Three members settle: 4 tasks each, as their own events say too.
    let mut workers: BTreeMap<String, Worker> = BTreeMap::new();
    for i in 1..=3 {
        let name = format!("worker-{i}");
        workers.insert(name.clone(), Worker::start(&server.base, &name, &ledger));
    }
    let view = wait_until(&admin, "three members hold all tasks", |v| v.settled(3)).await;
    for (name, tasks) in view.active() {
        assert_eq!(tasks.len(), 4, "{name}: {tasks:?}");
    }
    wait_ledger(&ledger, "the members process all tasks", |l| {
        l.active.len() == TASKS as usize
    })
    .await;
    assert_no_violations(&ledger, &sampled);

    // Scale out to six: the newcomers are cold, so their share arrives as
    // learners first, then moves as they catch up.
    for i in 4..=6 {
        let name = format!("worker-{i}");
        workers.insert(name.clone(), Worker::start(&server.base, &name, &ledger));
    }
    wait_until(&admin, "learners appear in the group view", |v| {
        v.learners() > 0
    })
    .await;
    let view = wait_until(&admin, "six members hold all tasks", |v| {
        v.settled(6) && v.active().values().all(|tasks| tasks.len() == 2)
    })
    .await;
    for i in 4..=6 {
        let name = format!("worker-{i}");
        let tasks = &view.active()[&name];
        assert_eq!(tasks.len(), 2, "{name}: {tasks:?}");
    }
    wait_ledger(&ledger, "the newcomers process their tasks", |l| {
        (4..=6).all(|i| l.of(&format!("worker-{i}")).len() == 2)
    })
    .await;
    {
        let ledger = ledger.lock().unwrap();
        for i in 4..=6 {
            let name = format!("worker-{i}");
            let events = ledger.events_of(&name);
            assert!(
                events.iter().any(|e| e.starts_with("learner started")),
                "{name} warmed up first: {events:?}"
            );
            assert!(
                events.iter().any(|e| e.starts_with("promoted")),
                "{name} got its tasks by promotion: {events:?}"
            );
        }
    }
    assert_no_violations(&ledger, &sampled);

    // A static member crashes and comes back within its registration
    // timeout: exactly its tasks return, nobody else's move.
    let before = admin.view().await;
    assert!(before.stable());
    let before_active = before.active();
    let victim = "worker-2";
    let others_events = ledger.lock().unwrap().log.len();
    workers.remove(victim).unwrap().crash(&ledger).await;
    // While it is away (a few heartbeat intervals), nothing moves.
    let away_until = Instant::now() + Duration::from_millis(600);
    while Instant::now() < away_until {
        assert_eq!(
            admin.view().await.active(),
            before_active,
            "nothing moves while it is away"
        );
        tokio::time::sleep(POLL).await;
    }
    let old_id = before.member(victim).unwrap()["member_id"].clone();
    workers.insert(
        victim.to_owned(),
        Worker::start(&server.base, victim, &ledger),
    );
    let view = wait_until(&admin, "the restarted member is back and stable", |v| {
        v.stable() && v.member(victim).is_some_and(|m| m["member_id"] != old_id)
    })
    .await;
    assert_eq!(view.active(), before_active, "exactly the same assignment");
    wait_ledger(&ledger, "the restarted member processes its tasks", |l| {
        l.of(victim) == before_active[victim]
    })
    .await;
    {
        let ledger = ledger.lock().unwrap();
        let moved: Vec<&(String, String)> = ledger.log[others_events..]
            .iter()
            .filter(|(name, event)| {
                name != victim
                    && ["assigned", "revoked", "promoted", "lost"]
                        .iter()
                        .any(|kind| event.starts_with(kind))
            })
            .collect();
        assert!(moved.is_empty(), "other members' tasks moved: {moved:?}");
        let back = ledger.events_of(victim);
        assert!(
            back.iter().any(|e| e.starts_with("assigned")),
            "the new incarnation was assigned its tasks: {back:?}"
        );
    }
    assert_no_violations(&ledger, &sampled);

    // A member drains: its tasks move to the others (through learners), it
    // is told it is drained, leaves, and its loop ends.
    let drained = "worker-5";
    let drained_tasks = admin.view().await.active()[drained].clone();
    assert!(!drained_tasks.is_empty());
    workers[drained].handle.drain();
    wait_ledger(&ledger, "the drained member is told so", |l| {
        l.events_of(drained).iter().any(|e| e == "Drained")
    })
    .await;
    let worker = workers.remove(drained).unwrap();
    let deadline = Instant::now() + PHASE_DEADLINE;
    while !worker.handle.is_finished() {
        assert!(Instant::now() < deadline, "the drained member's loop ended");
        tokio::time::sleep(POLL).await;
    }
    let view = wait_until(&admin, "five members hold all tasks", |v| v.settled(5)).await;
    assert!(view.member(drained).is_none(), "it left the group");
    {
        let ledger = ledger.lock().unwrap();
        assert!(ledger.of(drained).is_empty(), "it processes nothing");
        let events = ledger.events_of(drained);
        assert!(events.iter().any(|e| e == "Draining"), "{events:?}");
        let revoked: BTreeSet<String> = events
            .iter()
            .filter_map(|e| e.strip_prefix("revoked "))
            .flat_map(|tasks| tasks.split(',').map(str::to_owned))
            .collect();
        let expected: BTreeSet<String> = drained_tasks.iter().map(ToString::to_string).collect();
        assert!(
            expected.is_subset(&revoked),
            "its tasks {expected:?} were revoked: {events:?}"
        );
    }
    wait_ledger(&ledger, "the remaining members process all tasks", |l| {
        l.active.len() == TASKS as usize
    })
    .await;

    stop.store(true, Ordering::Relaxed);
    sampler.await.unwrap();
    assert!(
        samples.load(Ordering::Relaxed) > 20,
        "the sampler saw the group throughout"
    );
    assert_no_violations(&ledger, &sampled);
    for (_, worker) in workers {
        worker.handle.leave().await.expect("a clean leave");
        let _ = worker.pump.await;
    }
    drop(server);
}
