//! Shard lifecycle: starting a runtime (its shards loaded in parallel),
//! loading a shard from its store and serving it, unloading it (its timers
//! stopped, its queue flushed, its last state handed back to the store),
//! and what the host says of each shard.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::plugins::PluginEngine;
use crate::protocol::group::Millis;
use crate::protocol::shard::ShardId;
use crate::registry::Registry;

use super::execute::lock_shard_aside;
use super::{
    Clock, GroupCap, Lateness, MemoryStore, PersistError, RecordSink, Runtime, RuntimeConfig,
    RuntimeError, ShardStore, shard,
};

/// What the host says of one of its shards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardStatus {
    pub shard: ShardId,
    pub served: bool,
    /// Groups in the shard (0 while it is not served).
    pub groups: u64,
    /// When its timers next fire, in ms from now (0: due now); `None`
    /// while no timer runs or the shard is not served.
    pub next_deadline_in_ms: Option<u64>,
    /// Its deadlines by kind (`TimerKind::name`), the kinds it has.
    pub timers: Vec<(&'static str, usize)>,
}

impl Runtime {
    /// A runtime whose shards are kept in memory, every record going to
    /// `sink`; every shard served.
    pub fn new(
        config: RuntimeConfig,
        clock: Clock,
        sink: Arc<dyn RecordSink>,
        engine: Arc<PluginEngine>,
    ) -> Arc<Self> {
        Self::start(
            config,
            clock,
            Arc::new(MemoryStore::new(sink)),
            Arc::new(Registry::in_memory(engine)),
        )
        .expect("a memory store always loads")
    }

    /// A runtime over `store`, every shard loaded (several at once) and
    /// served. Each shard's timers start afresh: every member gets its
    /// full session or registration timeout from now, so a restarted host
    /// causes no rebalance if members come back in time.
    pub fn start(
        config: RuntimeConfig,
        clock: Clock,
        store: Arc<dyn ShardStore>,
        registry: Arc<Registry>,
    ) -> Result<Arc<Self>, RuntimeError> {
        let every: Vec<ShardId> = (0..config.shard_count).collect();
        Self::start_serving(config, clock, store, registry, &every)
    }

    /// A runtime over `store` serving only `serve` (cluster mode starts
    /// with none: placement loads the node's shards with
    /// [`Runtime::load_shard`]).
    pub fn start_serving(
        config: RuntimeConfig,
        clock: Clock,
        store: Arc<dyn ShardStore>,
        registry: Arc<Registry>,
        serve: &[ShardId],
    ) -> Result<Arc<Self>, RuntimeError> {
        // Metrics recorded from here on reach `GET /metrics`.
        crate::telemetry::handle();
        let runtime = Self::unserved(config, clock, store, registry);
        runtime.load_in_parallel(serve)?;
        runtime.publish_shards();
        Ok(runtime)
    }

    /// A runtime with every shard, none served yet.
    fn unserved(
        config: RuntimeConfig,
        clock: Clock,
        store: Arc<dyn ShardStore>,
        registry: Arc<Registry>,
    ) -> Arc<Self> {
        Arc::new(Runtime {
            shards: (0..config.shard_count)
                .map(|id| Arc::new(shard::Shard::new(id)))
                .collect(),
            store,
            seed: config.seed,
            unreached_grace_ms: config.unreached_grace_ms,
            clock,
            registry,
            limits: config.limits,
            admission: config.admission,
            calls_in_flight: AtomicU64::new(0),
            calls_finished: AtomicU64::new(0),
            lateness: Lateness::default(),
            tick_granularity: Mutex::new(None),
            serving_until_ms: AtomicU64::new(Millis::MAX),
            storage_unavailable: Mutex::new(None),
            shared_modules: std::sync::OnceLock::new(),
            group_cap: GroupCap::default(),
        })
    }

    /// Loads and serves the shards `ids`, spread over one thread per core.
    fn load_in_parallel(&self, ids: &[ShardId]) -> Result<(), RuntimeError> {
        let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
        let loaded = std::thread::scope(|scope| {
            let chunks: Vec<_> = ids
                .chunks(ids.len().div_ceil(workers).max(1))
                .map(|chunk| {
                    scope.spawn(move || {
                        chunk
                            .iter()
                            .map(|&id| self.load_blocking(id))
                            .collect::<Result<Vec<()>, RuntimeError>>()
                    })
                })
                .collect();
            chunks
                .into_iter()
                .map(|chunk| chunk.join().expect("loading a shard panicked"))
                .collect::<Result<Vec<_>, RuntimeError>>()
        });
        loaded.map(|_| ())
    }

    /// Loads shard `id` from the store and serves it (it must not be
    /// served already).
    fn load_blocking(&self, id: ShardId) -> Result<(), RuntimeError> {
        let (mut core, sink) =
            self.store
                .load(id, self.seed)
                .map_err(|e| RuntimeError::ShardLoadFailed {
                    shard: id,
                    message: format!("{e:#}"),
                })?;
        core.set_unreached_grace_ms(self.unreached_grace_ms);
        core.restarted(self.clock.now());
        let mut state = self.shards[id as usize]
            .state
            .lock()
            .map_err(|_| RuntimeError::Internal("a shard's core panicked earlier"))?;
        assert!(state.is_none(), "shard {id} loaded twice");
        self.shards[id as usize].large_groups.reset(&core);
        let served = shard::Served::new(core, sink, self.admission);
        *self.shards[id as usize]
            .persist_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(served.queue.failure_cell());
        self.group_cap.loaded(served.core.groups().count() as u64);
        *state = Some(served);
        self.shards[id as usize]
            .served
            .store(true, Ordering::Release);
        Ok(())
    }

    /// Every shard: served or not, and its groups.
    pub fn shard_statuses(&self) -> Vec<ShardStatus> {
        self.shards
            .iter()
            .map(|shard| {
                let mut state = lock_shard_aside(shard);
                let now = self.clock.now();
                let served = state.as_mut();
                let is_served = served.is_some();
                let (groups, next_deadline_in_ms, timers) = match served {
                    Some(served) => (
                        served.core.groups().count() as u64,
                        served.core.poll_timeout().map(|at| at.saturating_sub(now)),
                        served
                            .core
                            .timers_by_kind()
                            .into_iter()
                            .filter(|(_, n)| *n > 0)
                            .map(|(kind, n)| (kind.name(), n))
                            .collect(),
                    ),
                    None => (0, None, Vec::new()),
                };
                ShardStatus {
                    shard: shard.id,
                    served: is_served,
                    groups,
                    next_deadline_in_ms,
                    timers,
                }
            })
            .collect()
    }

    /// Loads shard `id` (replays its records, starts its timers) and serves
    /// it; returns false if it was served already.
    pub async fn load_shard(self: &Arc<Self>, id: u64) -> Result<bool, RuntimeError> {
        let shard = self.shard(id)?.clone();
        let _transition = shard.transition.lock().await;
        if shard.served.load(Ordering::Acquire) {
            return Ok(false);
        }
        let runtime = self.clone();
        let shard_id = shard.id;
        tokio::task::spawn_blocking(move || runtime.load_blocking(shard_id))
            .await
            .map_err(|_| RuntimeError::Internal("loading a shard panicked"))??;
        let granularity = *self
            .tick_granularity
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(granularity) = granularity {
            self.spawn_timers(&shard, granularity);
        }
        self.publish_shards();
        tracing::info!(shard = shard_id, "shard loaded");
        Ok(true)
    }

    /// Stops serving shard `id`: its timers stop, its core is taken out
    /// under its lock (requests for its groups are refused from then on,
    /// and assignor answers for them dropped), everything it queued is made
    /// durable, and the store gets its last state back; returns false if
    /// it was not served.
    pub async fn unload_shard(self: &Arc<Self>, id: u64) -> Result<bool, RuntimeError> {
        let shard = self.shard(id)?.clone();
        let _transition = shard.transition.lock().await;
        shard.stop_timer();
        let Some(served) = ({
            let mut state = lock_shard_aside(&shard);
            shard.served.store(false, Ordering::Release);
            let served = state.take();
            shard.route_watches.close();
            if let Some(served) = &served {
                self.group_cap.unloaded(served.core.groups().count() as u64);
            }
            served
        }) else {
            return Ok(false);
        };
        *shard
            .persist_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
        let shard::Served { core, queue, .. } = served;
        let durable = queue.submit(Vec::new());
        let flushed = durable.await;
        let store = self.store.clone();
        let shard_id = shard.id;
        // Dropping the queue joins its thread (a blocking wait) and
        // releases the sink.
        tokio::task::spawn_blocking(move || {
            drop(queue);
            store.unloaded(shard_id, core);
        })
        .await
        .map_err(|_| RuntimeError::Internal("unloading a shard panicked"))?;
        self.publish_shards();
        tracing::info!(shard = shard_id, "shard unloaded");
        match flushed {
            Ok(Ok(())) => Ok(true),
            Ok(Err(e)) => Err(e.into()),
            Err(_) => Err(PersistError::new("the persistence thread has stopped").into()),
        }
    }

    /// Unloads every served shard (shutdown: everything queued is made
    /// durable and every sink released).
    pub async fn unload_all(self: &Arc<Self>) {
        for id in 0..self.shard_count() {
            if let Err(error) = self.unload_shard(u64::from(id)).await {
                tracing::error!(shard = id, %error, "unloading the shard failed");
            }
        }
    }
}
