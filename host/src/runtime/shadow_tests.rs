//! The runtime's shadow calls with a manual clock: a shadow is asked
//! beside the live assignor and compared; a shadow call that finds every
//! shadow thread busy is not queued but counted as skipped, and the live
//! target comes all the same; a shadow is checked as a bind is.

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use super::{Clock, CountingSink, Runtime, RuntimeConfig, RuntimeError, TokenChanges};
use crate::plugins::{EngineConfig, Limits, PluginEngine};
use crate::protocol::core::{ProtocolError, ShadowSpec};
use crate::protocol::group::{GroupConfig, ShadowLog, TopicConfig};

const GROUP: &str = "g";
const EXPANSION_MS: u64 = 100;

/// A runtime whose engine has `shadow_calls_max` shadow threads, with the
/// group `g` on sticky shadowed by range (its first call not yet due).
async fn shadowed(shadow_calls_max: u32) -> (Arc<Runtime>, Arc<PluginEngine>) {
    let engine = Arc::new(
        PluginEngine::new(EngineConfig {
            shadow_calls_max,
            ..EngineConfig::default()
        })
        .expect("engine"),
    );
    let config = RuntimeConfig {
        seed: 1,
        limits: Limits::default(),
        admission: Default::default(),
        shard_count: 1,
        unreached_grace_ms: 0,
    };
    let runtime = Runtime::new(
        config,
        Clock::manual(0),
        Arc::new(CountingSink::default()),
        engine.clone(),
    );
    let group = GroupConfig {
        assignor: "sticky".into(),
        expansion_timeout_ms: EXPANSION_MS,
        ..GroupConfig::with_topics(vec![TopicConfig {
            name: "t".into(),
            partitions: 4,
        }])
    };
    runtime
        .configure(GROUP, group, TokenChanges::KEEP)
        .await
        .expect("configured");
    let bound = runtime
        .bind_shadow(GROUP, Some(spec("range")))
        .await
        .expect("bound");
    assert!(bound, "a new shadow");
    (runtime, engine)
}

fn spec(assignor: &str) -> ShadowSpec {
    ShadowSpec {
        assignor: assignor.into(),
        params: Default::default(),
        limits: Default::default(),
    }
}

/// Lets the group's first call start, then polls its shadow log (and
/// whether its target is in) until `done` holds.
async fn after_the_first_call(runtime: &Arc<Runtime>, done: impl Fn(&ShadowLog, bool) -> bool) {
    runtime.clock().advance(EXPANSION_MS);
    runtime.tick().await.expect("ticked");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (log, installed) = runtime
            .read(GROUP, |core, _| {
                let group = core.group(GROUP).expect("the group");
                let log = core.liveness(GROUP).expect("its liveness").shadows.clone();
                (log, group.target_epoch == group.group_epoch)
            })
            .await
            .expect("read");
        if done(&log, installed) {
            return;
        }
        assert!(Instant::now() < deadline, "{log:?}, installed: {installed}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_is_asked_beside_the_live_call_and_compared() {
    let (runtime, _engine) = shadowed(1).await;
    after_the_first_call(&runtime, |log, installed| {
        installed && log.totals.compared == 1
    })
    .await;
    let log = runtime
        .read(GROUP, |core, _| {
            core.liveness(GROUP).unwrap().shadows.clone()
        })
        .await
        .unwrap();
    let compared = &log.comparisons[0];
    assert_eq!(compared.live.assignor, "sticky");
    assert_eq!(compared.shadow.assignor, "range");
    assert_eq!(compared.shadow.failure, None);
    assert!(compared.live.stats.elapsed_ms.is_some(), "{compared:?}");
    assert!(compared.shadow.stats.fuel.is_some(), "{compared:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shadow_call_finding_every_shadow_thread_busy_is_skipped() {
    let (runtime, engine) = shadowed(1).await;
    // The only shadow thread is taken until the end.
    let release = Arc::new(Barrier::new(2));
    let held = release.clone();
    let holding = engine
        .try_on_shadow_thread(move || {
            held.wait();
        })
        .expect("a free shadow thread");
    after_the_first_call(&runtime, |log, installed| {
        installed && log.totals.skipped == 1 && !log.shadow_running
    })
    .await;
    let log = runtime
        .read(GROUP, |core, _| {
            core.liveness(GROUP).unwrap().shadows.clone()
        })
        .await
        .unwrap();
    assert_eq!(log.totals.compared, 0, "{log:?}");
    assert_eq!(log.pending, None, "given up");
    release.wait();
    holding.await.expect("ran");
}

#[tokio::test]
async fn a_shadow_is_checked_as_a_bind() {
    let (runtime, _engine) = shadowed(1).await;
    let unknown = runtime.bind_shadow(GROUP, Some(spec("nothing-such"))).await;
    assert!(
        matches!(&unknown, Err(RuntimeError::UnknownAssignor { name }) if name == "nothing-such"),
        "{unknown:?}"
    );
    let no_group = runtime.bind_shadow("nobody", Some(spec("range"))).await;
    assert!(
        matches!(
            &no_group,
            Err(RuntimeError::Protocol(ProtocolError::UnknownGroup(_)))
        ),
        "{no_group:?}"
    );
    let same = runtime.bind_shadow(GROUP, Some(spec("range"))).await;
    assert!(!same.expect("the same shadow"), "nothing changed");
    assert!(runtime.bind_shadow(GROUP, None).await.expect("ended"));
    assert!(!runtime.bind_shadow(GROUP, None).await.expect("none to end"));
}
