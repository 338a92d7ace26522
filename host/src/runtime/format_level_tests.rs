//! The cluster's record format level gates what a config or heartbeat may
//! set: while a rolling upgrade still writes an older format, what only a
//! newer one keeps is refused (`FormatLevelTooLow`) before anything is
//! written, and the same request is taken once the level allows it.

use std::sync::Arc;

use super::{
    Clock, CountingSink, MemoryStore, Runtime, RuntimeConfig, RuntimeError, ShardStore,
    TokenChanges,
};
use crate::plugins::{EngineConfig, Limits, PluginEngine};
use crate::protocol::core::{Coordinator, Heartbeat};
use crate::protocol::group::{GroupConfig, TopicConfig};
use crate::protocol::shard::ShardId;
use crate::registry::Registry;

const GROUP: &str = "g";

/// Shards in memory, written at a fixed format `level`.
struct AtLevel {
    memory: MemoryStore,
    level: u8,
}

impl ShardStore for AtLevel {
    fn load(
        &self,
        shard: ShardId,
        seed: u64,
    ) -> anyhow::Result<(Coordinator, Arc<dyn super::sink::RecordSink>)> {
        self.memory.load(shard, seed)
    }

    fn unloaded(&self, shard: ShardId, core: Coordinator) {
        self.memory.unloaded(shard, core);
    }

    fn format_level(&self) -> Option<u8> {
        Some(self.level)
    }
}

/// A runtime whose store writes format `level`, and the sink that counts
/// what it persists.
fn runtime_at(level: u8) -> (Arc<Runtime>, Arc<CountingSink>) {
    let sink = Arc::new(CountingSink::default());
    let store = AtLevel {
        memory: MemoryStore::new(sink.clone()),
        level,
    };
    let engine = Arc::new(PluginEngine::new(EngineConfig::default()).expect("engine"));
    let config = RuntimeConfig {
        seed: 1,
        limits: Limits::default(),
        admission: Default::default(),
        shard_count: 1,
        unreached_grace_ms: 0,
    };
    let runtime = Runtime::start(
        config,
        Clock::manual(0),
        Arc::new(store),
        Arc::new(Registry::in_memory(engine)),
    )
    .expect("a memory store loads");
    (runtime, sink)
}

fn config() -> GroupConfig {
    GroupConfig::with_topics(vec![TopicConfig {
        name: "t".into(),
        partitions: 2,
    }])
}

/// One config per load setting, each set away from its default.
fn each_load_setting() -> Vec<GroupConfig> {
    vec![
        GroupConfig {
            load_unit: Some("records/s".into()),
            ..config()
        },
        GroupConfig {
            load_half_life_ms: 0,
            ..config()
        },
        GroupConfig {
            load_window_ms: 1_000,
            ..config()
        },
        GroupConfig {
            load_cooldown_ms: 1_000,
            ..config()
        },
        GroupConfig {
            frozen: true,
            ..config()
        },
    ]
}

#[tokio::test]
async fn load_settings_are_refused_below_level_6_and_nothing_is_written() {
    for level in [4, 5] {
        let (runtime, sink) = runtime_at(level);
        for load in each_load_setting() {
            let refused = runtime
                .configure(GROUP, load.clone(), TokenChanges::KEEP)
                .await
                .expect_err("refused");
            assert!(
                matches!(
                    refused,
                    RuntimeError::FormatLevelTooLow { needs: 6, level: l, .. } if l == level
                ),
                "{load:?}: {refused:?}"
            );
            assert!(
                refused.to_string().contains(&format!(
                    "needs record format version 6, and this cluster still writes {level}"
                )),
                "{refused}"
            );
        }
        assert_eq!(sink.records(), 0, "level {level}: nothing written");
        // The defaults are what the older format keeps: taken.
        assert!(
            runtime
                .configure(GROUP, config(), TokenChanges::KEEP)
                .await
                .unwrap()
        );
    }
}

#[tokio::test]
async fn load_settings_are_taken_at_level_6() {
    let (runtime, _) = runtime_at(6);
    for load in each_load_setting() {
        runtime
            .configure(GROUP, load, TokenChanges::KEEP)
            .await
            .expect("taken");
    }
}

#[tokio::test]
async fn routes_settings_need_level_5_only() {
    let promise = GroupConfig {
        routes_valid_ms: 500,
        ..config()
    };
    let (at_4, sink) = runtime_at(4);
    let refused = at_4
        .configure(GROUP, promise.clone(), TokenChanges::KEEP)
        .await
        .expect_err("refused");
    assert!(
        matches!(
            refused,
            RuntimeError::FormatLevelTooLow {
                needs: 5,
                level: 4,
                ..
            }
        ),
        "{refused:?}"
    );
    assert_eq!(sink.records(), 0);
    let (at_5, _) = runtime_at(5);
    at_5.configure(GROUP, promise, TokenChanges::KEEP)
        .await
        .expect("taken at 5");
    let mut join = Heartbeat::join(GROUP, None, vec!["t".into()]);
    join.endpoint = Some("10.0.0.5:8080".into());
    at_5.heartbeat(&join, None).await.expect("an endpoint at 5");
}

fn labelled() -> GroupConfig {
    GroupConfig {
        labels: [("team".to_owned(), "payments".to_owned())].into(),
        ..config()
    }
}

#[tokio::test]
async fn labels_are_refused_below_level_7_and_nothing_is_written() {
    for level in [4, 5, 6] {
        let (runtime, sink) = runtime_at(level);
        let refused = runtime
            .configure(GROUP, labelled(), TokenChanges::KEEP)
            .await
            .expect_err("refused");
        assert!(
            matches!(
                refused,
                RuntimeError::FormatLevelTooLow { needs: 7, level: l, .. } if l == level
            ),
            "{refused:?}"
        );
        assert!(
            refused.to_string().starts_with(&format!(
                "a label needs record format version 7, and this cluster still writes {level}"
            )),
            "{refused}"
        );
        assert_eq!(sink.records(), 0, "level {level}: nothing written");
    }
}

#[tokio::test]
async fn labels_are_taken_at_level_7() {
    let (runtime, _) = runtime_at(7);
    assert!(
        runtime
            .configure(GROUP, labelled(), TokenChanges::KEEP)
            .await
            .expect("taken")
    );
}

/// The check the shadow binding makes before it writes anything.
#[tokio::test]
async fn a_shadow_assignor_needs_level_7() {
    let (runtime, _) = runtime_at(7);
    runtime
        .check_format_level("a shadow assignor", super::execute::FORMAT_WITH_SHADOWS)
        .expect("a shadow at level 7");
    let (runtime, _) = runtime_at(6);
    runtime
        .check_format_level("a shadow assignor", super::execute::FORMAT_WITH_SHADOWS)
        .expect_err("no shadow at level 6");
}
