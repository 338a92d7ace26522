//! The runtime's timer tasks on the real clock: what they measure of the
//! host's lateness. (The rest of the runtime is driven through the API with
//! a manual clock, `api/tests.rs`; a manual clock runs no timer task.)

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{
    Clock, CountingSink, MemberTokenChange, MemoryStore, Runtime, RuntimeConfig, TICK_INTERVAL_MS,
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
        .configure(GROUP, group_config(), MemberTokenChange::Keep)
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
                .configure(group, config_of(partitions), MemberTokenChange::Keep)
                .await
                .unwrap();
        }
    };
    configure("small", large - 1).await;
    assert!(!shard.large_groups.holds("small"));
    assert!(!shard.large_groups.holds(""), "no large group in the shard");
    configure("big", large).await;
    assert!(shard.large_groups.holds("big"));
    assert!(shard.large_groups.holds(""), "the shard holds one");
    assert!(!shard.large_groups.holds("small"));
    configure("big", 8).await;
    assert!(!shard.large_groups.holds("big"), "it shrank");
    assert!(!shard.large_groups.holds(""));

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
    assert!(loaded.shards[0].large_groups.holds("big"));
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
