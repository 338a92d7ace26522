//! The runtime's timer tasks on the real clock: what they measure of the
//! host's lateness. (The rest of the runtime is driven through the API with
//! a manual clock, `api/tests/`; a manual clock runs no timer task.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{
    Clock, CountingSink, MemoryStore, Runtime, RuntimeConfig, TICK_INTERVAL_MS, TokenChanges,
};
use crate::plugins::{EngineConfig, Limits, PluginEngine};
use crate::protocol::core::{Coordinator, Heartbeat};
use crate::protocol::group::GroupConfig;
use crate::registry::Registry;

const GROUP: &str = "g";
/// How long the host has been up, idle, when the test starts.
const IDLE_MS: u64 = 5_000;

fn config() -> RuntimeConfig {
    RuntimeConfig {
        seed: 1,
        limits: Limits::default(),
        admission: Default::default(),
        shard_count: 1,
        unreached_grace_ms: 0,
    }
}

fn group_config() -> GroupConfig {
    serde_json::from_value(serde_json::json!({
        "topics": [{"name": "t", "partitions": 2}],
        "heartbeat_interval_ms": 3_000,
        "expansion_timeout_ms": 10_000,
    }))
    .unwrap()
}

fn engine() -> Arc<PluginEngine> {
    Arc::new(PluginEngine::new(EngineConfig::default()).expect("engine"))
}

/// The real clock, started `IDLE_MS` ago: a host that has been up and
/// idle that long, without the test waiting for it.
fn clock_up_for_a_while() -> Clock {
    let start = Instant::now()
        .checked_sub(Duration::from_millis(IDLE_MS))
        .expect("the machine has been up for a few seconds");
    Clock::Monotonic(start)
}

/// A store holding shard 0 as another node left it: `records` replayed.
fn store_left_with(records: &[crate::protocol::group::Record]) -> MemoryStore {
    let mut replayed = Coordinator::new(1);
    for record in records {
        replayed.apply(record);
    }
    let store = MemoryStore::new(Arc::new(CountingSink::default()));
    super::ShardStore::unloaded(&store, 0, replayed);
    store
}

/// Waits (deadline 10 s) until the shard's timer task has started every
/// timer that had not started: it has ticked the shard once.
async fn until_timers_started(runtime: &Runtime) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let statuses = runtime.shard_statuses();
        if statuses
            .iter()
            .all(|s| s.served && s.timers.iter().all(|(kind, _)| *kind != "start"))
        {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the timer task never ticked: {statuses:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Joins a member and asserts the host is not late: the member is told
/// the configured interval.
async fn join_on_time(runtime: &Arc<Runtime>) {
    let response = runtime
        .heartbeat(&Heartbeat::join(GROUP, None, vec!["t".into()]), None)
        .await
        .unwrap();
    // A busy machine may make a timer really late by tens of ms; the
    // defect counted the whole idle time.
    let late_ms = runtime.lateness().late_ms(runtime.now_ms());
    assert!(
        late_ms < IDLE_MS / 5,
        "the host was idle, not late: {late_ms} ms"
    );
    assert_eq!(response.heartbeat_interval_ms, 3_000);
}

/// Regression: a group's first timer (not started yet) is due at 0, and
/// the timer task measured its lateness from there — a host idle for 5 s
/// before its first group "ran 5 s late" and told the first member to beat
/// every 11 s instead of 3.
#[tokio::test]
async fn a_host_idle_before_its_first_group_is_not_late() {
    let runtime = Runtime::new(
        config(),
        clock_up_for_a_while(),
        Arc::new(CountingSink::default()),
        engine(),
    );
    runtime.spawn_ticker(Duration::from_millis(TICK_INTERVAL_MS));
    runtime
        .configure(GROUP, group_config(), TokenChanges::KEEP)
        .await
        .unwrap();
    until_timers_started(&runtime).await;
    join_on_time(&runtime).await;
    runtime.stop_timers();
}

/// The same for a shard loaded while the host runs (cluster mode's
/// takeover, a share on joining): its groups' timers, replayed from
/// records, have not started.
#[tokio::test]
async fn a_shard_loaded_late_in_the_run_is_not_late() {
    // The shard's records as another node left them: a group with a member.
    let mut previous = Coordinator::new(1);
    let mut records = previous
        .configure(GROUP, group_config(), 0)
        .unwrap()
        .records;
    let (_, joined) = previous
        .heartbeat(&Heartbeat::join(GROUP, None, vec!["t".into()]), 0)
        .unwrap();
    records.extend(joined.records);
    let store = store_left_with(&records);

    let runtime = Runtime::start_serving(
        config(),
        clock_up_for_a_while(),
        Arc::new(store),
        Arc::new(Registry::in_memory(engine())),
        &[],
    )
    .unwrap();
    runtime.spawn_ticker(Duration::from_millis(TICK_INTERVAL_MS));
    assert!(runtime.load_shard(0).await.unwrap());
    until_timers_started(&runtime).await;
    join_on_time(&runtime).await;
    runtime.stop_timers();
}

fn config_of(partitions: u32) -> GroupConfig {
    serde_json::from_value(serde_json::json!({
        "topics": [{"name": "t", "partitions": partitions}],
    }))
    .unwrap()
}

/// A group of `LARGE_GROUP_TASKS` tasks or more is known as large to its
/// shard from its first step on (so each of its steps, and a tick of its
/// shard, runs off the async workers), and no longer once it shrinks; a
/// shard loaded with one knows it at once.
#[tokio::test]
async fn a_shard_knows_its_large_groups_from_their_steps_and_its_load() {
    use super::scope::Scope;
    use super::shard::LARGE_GROUP_TASKS;
    let large = u32::try_from(LARGE_GROUP_TASKS).unwrap();
    let runtime = Runtime::new(
        config(),
        Clock::monotonic(),
        Arc::new(CountingSink::default()),
        engine(),
    );
    let shard = &runtime.shards[0];
    let configure = |group: &'static str, partitions: u32| {
        let runtime = runtime.clone();
        async move {
            runtime
                .configure(group, config_of(partitions), TokenChanges::KEEP)
                .await
                .unwrap();
        }
    };
    configure("small", large - 1).await;
    assert!(!shard.large_groups.holds(Scope::Group("small")));
    assert!(
        !shard.large_groups.holds(Scope::Shard),
        "no large group in the shard"
    );
    configure("big", large).await;
    assert!(shard.large_groups.holds(Scope::Group("big")));
    assert!(
        shard.large_groups.holds(Scope::Shard),
        "the shard holds one"
    );
    assert!(!shard.large_groups.holds(Scope::Group("small")));
    configure("big", 8).await;
    assert!(!shard.large_groups.holds(Scope::Group("big")), "it shrank");
    assert!(!shard.large_groups.holds(Scope::Shard));

    // A shard loaded (a restart, a takeover) with a large group in it.
    let mut previous = Coordinator::new(1);
    let records = previous
        .configure("big", config_of(large), 0)
        .unwrap()
        .records;
    let store = store_left_with(&records);
    let loaded = Runtime::start(
        config(),
        Clock::monotonic(),
        Arc::new(store),
        Arc::new(Registry::in_memory(engine())),
    )
    .unwrap();
    assert!(loaded.shards[0].large_groups.holds(Scope::Group("big")));
}

/// Regression: `/healthz`'s question (is the storage unavailable, has a
/// shard failed) and cluster routing's (is this shard served here) took
/// every shard's lock, so they waited as long as a large group's step held
/// its shard (up to 0.8 s with 100,000 tasks and 3 standbys each), and
/// blocked the async worker that asked. They are answered while a shard's
/// lock is held.
#[test]
fn health_and_routing_are_answered_while_a_shard_is_locked() {
    let runtime = Runtime::new(
        config(),
        Clock::monotonic(),
        Arc::new(CountingSink::default()),
        engine(),
    );
    let held = runtime.shards[0].state.lock().unwrap();
    let (answer, answered) = std::sync::mpsc::channel();
    let asking = runtime.clone();
    std::thread::spawn(move || {
        let _ = answer.send((
            asking.storage_unavailable(),
            asking.failed(),
            asking.serves(0),
        ));
    });
    // A bound on a wait that must not happen at all: before the fix the
    // answer came only once the lock was released, below.
    let during = answered.recv_timeout(Duration::from_secs(10));
    drop(held);
    assert_eq!(
        during.expect("answered while the shard's lock is held"),
        (false, false, true)
    );
}

/// Holds every persist of a batch with a record of group `held` until
/// opened; lets the others through.
struct HoldGroup {
    held: &'static str,
    open: std::sync::Mutex<bool>,
    opened: std::sync::Condvar,
}

impl super::RecordSink for HoldGroup {
    fn persist(&self, records: &[crate::protocol::group::Record]) -> anyhow::Result<()> {
        if records.iter().any(|r| r.group() == self.held) {
            let mut open = self.open.lock().unwrap();
            while !*open {
                open = self.opened.wait(open).unwrap();
            }
        }
        Ok(())
    }
}

impl HoldGroup {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.opened.notify_all();
    }
}

/// Opens the sink when dropped, so that a failing test does not hang on
/// the persistence thread.
struct OpenOnDrop(Arc<HoldGroup>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.open();
    }
}

/// Heartbeats as the member of `response` holding what it was given.
fn beat(group: &str, response: &crate::protocol::core::HeartbeatResponse) -> Heartbeat {
    Heartbeat {
        member_id: response.member_id.clone(),
        member_epoch: i64::try_from(response.member_epoch).unwrap(),
        topics: None,
        owned: Some(response.active.iter().cloned().collect()),
        ..Heartbeat::join(group, None, vec![])
    }
}

/// Regression: a step that wrote nothing waited for every write queued on
/// its shard before it, so a steady member's heartbeat waited as long as
/// a config write of another group of the shard was in flight (etcd
/// electing a leader: seconds, past members' leases). It waits only for
/// its own group's writes, whose state its answer may show.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steady_heartbeat_does_not_wait_for_another_groups_write() {
    let sink = Arc::new(HoldGroup {
        held: "slow",
        open: std::sync::Mutex::new(false),
        opened: std::sync::Condvar::new(),
    });
    let runtime = Runtime::new(config(), Clock::monotonic(), sink.clone(), engine());
    let _open = OpenOnDrop(sink.clone());
    runtime.spawn_ticker(Duration::from_millis(TICK_INTERVAL_MS));
    let quick: GroupConfig = serde_json::from_value(serde_json::json!({
        "topics": [{"name": "t", "partitions": 2}],
        "expansion_timeout_ms": 100,
    }))
    .unwrap();
    runtime
        .configure("fast", quick, TokenChanges::KEEP)
        .await
        .unwrap();
    let mut answer = runtime
        .heartbeat(&Heartbeat::join("fast", None, vec!["t".into()]), None)
        .await
        .unwrap();
    // Until the member holds both tasks at a settled epoch.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let next = runtime
            .heartbeat(&beat("fast", &answer), None)
            .await
            .unwrap();
        let settled = next.active.len() == 2 && next.member_epoch == answer.member_epoch;
        answer = next;
        if settled {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the member never settled: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let writing = runtime.clone();
    let write = tokio::spawn(async move {
        writing
            .configure("slow", group_config(), TokenChanges::KEEP)
            .await
    });
    // Until the write is applied and queued (the group is in the core).
    let applied = || {
        let state = runtime.shards[0].state.lock().unwrap();
        state.as_ref().unwrap().core.group("slow").is_some()
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !applied() {
        assert!(Instant::now() < deadline, "the write was never applied");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // A bound on a wait that must not happen at all: before the fix the
    // answer came only once the write was durable, below.
    let steady = tokio::time::timeout(
        Duration::from_secs(10),
        runtime.heartbeat(&beat("fast", &answer), None),
    )
    .await
    .expect("answered while another group's write is in flight")
    .unwrap();
    assert_eq!(steady.active, answer.active);
    // The written group's own view waits for its write.
    let own = runtime.clone();
    let view = tokio::spawn(async move {
        own.read("slow", |core, _| core.group("slow").is_some())
            .await
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !view.is_finished(),
        "the written group's view waits for the write"
    );
    sink.open();
    assert!(write.await.unwrap().unwrap(), "the group was created");
    assert!(view.await.unwrap().unwrap());
    runtime.stop_timers();
}
