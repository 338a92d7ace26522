//! The runtime: glues the sans-IO protocol core to time, persistence and
//! the plugin engine. The host's groups are spread over a fixed number of
//! shards (`crate::protocol::shard`); each served shard is one
//! [`Coordinator`] behind its own `std::sync::Mutex` (core calls take
//! microseconds; a lock is never held across an await, a persist or an
//! assignor call, and never two at once but for a module's delete), with
//! its own record queue and sink and its own timer task (`shard.rs`). The
//! runtime reads the clock and passes the time into every core call, wakes
//! each shard's timers at the core's earliest deadline, and handles every
//! core [`Output`] the same way:
//!
//! 1. its records are queued for the shard's [`RecordSink`] under the
//!    shard's lock, so the sink sees them in apply order; the caller's
//!    answer waits until they are durable (a step that wrote nothing waits
//!    for its group's records in flight, never for another group's);
//! 2. its assignor calls each run on a guest thread, off every request
//!    path, and their answers go back into the group's shard (whose output
//!    is handled the same way).
//!
//! It also measures how late it runs itself (timers that fire after their
//! deadline, heartbeats that wait for their shard) and hands that to the
//! core with every tick and heartbeat, so that members are not expired for
//! the host's own lateness and are told to beat less often instead.
//!
//! It knows nothing of HTTP: the `api` module maps its results and errors.

mod assignors;
mod clock;
mod group_cap;
mod lateness;
mod member_token;
pub mod observe;
mod preview;
mod shard;
mod sink;
#[cfg(test)]
mod tests;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use crate::plugins::{BUILTIN_NAMES, Limits, PluginEngine};
use crate::protocol::core::{
    Coordinator, Heartbeat, HeartbeatResponse, Output, ProtocolError, TimerKind,
};
use crate::protocol::group::{BindingSpec, GroupConfig, Millis};
use crate::protocol::shard::{ShardId, shard_of};
use crate::registry::{Entry, Registry, RegistryError, Resolved};

pub use clock::Clock;
pub use group_cap::{GROUPS_MAX_DEFAULT, GroupCap};
pub use lateness::Lateness;
pub use member_token::{AdmissionPolicy, MemberTokenChange};
pub use preview::Preview;
pub use shard::{MemoryStore, ShardStore};
pub use sink::{CountingSink, PersistError, RecordQueue, RecordSink, StorageUnavailable};

/// How often the core's timers are advanced by default.
pub const TICK_INTERVAL_MS: u64 = 50;

/// Why the runtime refused or could not finish a request.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// The core refused the input; nothing changed.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// A config names an assignor this host cannot run; nothing changed.
    #[error(
        "assignor {name:?} is neither a built-in assignor ({}) nor an uploaded module (by id or name@version)",
        BUILTIN_NAMES.join(", ")
    )]
    UnknownAssignor { name: String },
    /// The module registry refused an upload or a delete; nothing changed.
    #[error(transparent)]
    Registry(#[from] RegistryError),
    /// A preview on a group with no members (none that is not draining):
    /// there is nothing to assign to; nothing changed.
    #[error(
        "group {0:?} has no members to assign to; a preview needs at least one member that is not draining"
    )]
    EmptyGroup(String),
    /// A preview's candidate trapped, passed a limit or answered an
    /// invalid assignment; nothing changed.
    #[error("assignor {module:?} failed: {message}")]
    AssignorFailed { module: String, message: String },
    /// The change was applied but could not be made durable; from now on
    /// every request is refused.
    #[error(transparent)]
    Storage(PersistError),
    /// The storage does not answer (cluster mode: etcd has no quorum, or
    /// none of its members is reachable). A change this answers may or may
    /// not have landed; once the storage answers again the shard is loaded
    /// afresh from what did, and a retry sees it.
    #[error("the storage does not answer, so no change can be made durable now; retry later: {0}")]
    StorageUnavailable(String),
    /// A heartbeat without a bearer token to a group with a member
    /// token; nothing changed.
    #[error("group {0:?} needs its member token: send `Authorization: Bearer TOKEN`")]
    MemberTokenMissing(String),
    /// A heartbeat whose bearer token is not its group's member token;
    /// nothing changed.
    #[error("the token is not group {0:?}'s member token")]
    MemberTokenWrong(String),
    /// A heartbeat to a group without a member token on a host that
    /// requires one (`serve --require-member-token`); nothing changed.
    #[error(
        "this host requires a member token of every group, and group {0:?} has none: an admin must set `member_token` in its config"
    )]
    MemberTokenRequired(String),
    /// A config that would leave its group without a member token on a
    /// host that requires one; nothing changed.
    #[error(
        "this host requires a member token of every group (serve --require-member-token): group {0:?}'s config needs `member_token`"
    )]
    ConfigWithoutMemberToken(String),
    /// A join that would create a member in a group without a member
    /// token, while the group's join bucket is empty; nothing changed.
    #[error(
        "group {group:?} has no member token and takes new members at a limited rate; retry in {retry_after_ms} ms"
    )]
    JoinRateLimited { group: String, retry_after_ms: u64 },
    /// The group's shard is not served by this host now (it is being
    /// loaded or unloaded, or its load failed); nothing changed.
    #[error(
        "shard {shard} (of group {group:?}) is not served by this host right now; retry shortly"
    )]
    ShardNotServed { shard: ShardId, group: String },
    /// An admin request named a shard this host does not have.
    #[error("there is no shard {shard}: this host has shards 0 to {}", shard_count - 1)]
    UnknownShard { shard: u64, shard_count: u32 },
    /// A shard could not be loaded from its store; it stays unserved.
    #[error("shard {shard} could not be loaded: {message}")]
    ShardLoadFailed { shard: ShardId, message: String },
    /// A bug: the core panicked while holding its lock.
    /// The host serves `groups_max` groups already (`serve --groups-max`).
    #[error(
        "this host serves {max} groups or more, its limit (serve --groups-max): no group is created here until it serves fewer"
    )]
    GroupsMaxReached { max: u64 },
    #[error("internal error: {0}")]
    Internal(&'static str),
}

impl RuntimeError {
    /// The storage does not answer, or the shard is moving or being loaded
    /// again because of it: an outage that ends by itself, not a fault.
    pub fn is_storage_outage(&self) -> bool {
        matches!(
            self,
            RuntimeError::StorageUnavailable(_) | RuntimeError::ShardNotServed { .. }
        )
    }
}

impl From<PersistError> for RuntimeError {
    fn from(error: PersistError) -> Self {
        if error.unavailable {
            RuntimeError::StorageUnavailable(error.message.to_string())
        } else {
            RuntimeError::Storage(error)
        }
    }
}

/// The runtime's settings.
#[derive(Clone, Copy, Debug)]
pub struct RuntimeConfig {
    /// Member ids derive from this seed (see `Coordinator::new`).
    pub seed: u64,
    /// Limits of every assignor call.
    pub limits: Limits,
    /// How groups without a member token are treated.
    pub admission: AdmissionPolicy,
    /// How many shards the host's groups are spread over (fixed for a data
    /// dir: `crate::log::ShardedDir` records it).
    pub shard_count: u32,
    /// How much longer than its plain lease a member keeps its tasks while
    /// its heartbeats reach no coordinator (`unreached_lease_ms`): the time
    /// a takeover of a shard may take. 0 on a single node.
    pub unreached_grace_ms: u64,
}

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

/// Where a cluster keeps its uploaded modules: stored once, with a copy
/// in every node's registry. Its calls block: make them off the async
/// threads.
pub trait SharedModules: Send + Sync + 'static {
    /// Makes `entry`, just uploaded here as `bytes`, the cluster's;
    /// returns once that is durable. Refused if the cluster has another
    /// module of its name.
    fn publish(&self, entry: &Entry, bytes: &[u8]) -> Result<(), RegistryError>;
    /// Copies into `registry` every module of the cluster it lacks, and
    /// removes from it those the cluster deleted; returns how many it
    /// copied.
    fn copy_missing(&self, registry: &Registry) -> anyhow::Result<usize>;
    /// Deletes `entry` from the cluster unless a group of any node names
    /// it (`RegistryError::InUse`); once it returns `Ok`, no bind of it
    /// can land anywhere.
    fn delete(&self, entry: &Entry) -> Result<(), RegistryError>;
    /// Whether the module `reference` names (uploaded, held by the
    /// registry) is still the cluster's.
    fn is_shared(&self, reference: &str) -> Result<bool, RegistryError>;
}

/// The coordinator at run time; share it as `Arc<Runtime>`.
pub struct Runtime {
    /// Every shard of the host, served or not, by id.
    shards: Box<[Arc<shard::Shard>]>,
    store: Arc<dyn ShardStore>,
    seed: u64,
    /// Given to every core loaded ([`RuntimeConfig::unreached_grace_ms`]).
    unreached_grace_ms: u64,
    clock: Clock,
    registry: Arc<Registry>,
    limits: Limits,
    admission: AdmissionPolicy,
    calls_in_flight: AtomicU64,
    calls_finished: AtomicU64,
    /// How late the host runs (see [`Lateness`]).
    lateness: Lateness,
    /// The shortest time between two ticks of a shard, once timers run
    /// (`spawn_ticker`); `None` before.
    tick_granularity: Mutex<Option<Duration>>,
    /// Cluster mode: no request is served at or after this time (the
    /// runtime clock's ms) — when the node's lease may have ended, for all
    /// it knows, and another node may own its shards. `Millis::MAX`: no
    /// bound (one host).
    serving_until_ms: AtomicU64,
    /// Cluster mode: why the storage does not answer, while it does not
    /// (set and cleared by the node): a shard this host cannot serve for
    /// that is refused as [`RuntimeError::StorageUnavailable`].
    storage_unavailable: Mutex<Option<String>>,
    /// Cluster mode: the cluster's modules, of which the registry holds a
    /// copy.
    shared_modules: std::sync::OnceLock<Arc<dyn SharedModules>>,
    /// The groups of the served shards, and their cap.
    group_cap: GroupCap,
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
        let runtime = Arc::new(Runtime {
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
        });
        let ids = serve;
        let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
        let loaded = std::thread::scope(|scope| {
            let chunks: Vec<_> = ids
                .chunks(ids.len().div_ceil(workers).max(1))
                .map(|chunk| {
                    let runtime = &runtime;
                    scope.spawn(move || {
                        chunk
                            .iter()
                            .map(|&id| runtime.load_blocking(id))
                            .collect::<Result<Vec<()>, RuntimeError>>()
                    })
                })
                .collect();
            chunks
                .into_iter()
                .map(|chunk| chunk.join().expect("loading a shard panicked"))
                .collect::<Result<Vec<_>, RuntimeError>>()
        });
        loaded?;
        runtime.publish_shards();
        Ok(runtime)
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

    /// The runtime clock now.
    pub fn now_ms(&self) -> Millis {
        self.clock.now()
    }

    /// Serves no request from `until_ms` on (the runtime clock), until
    /// told a later time: cluster mode's bound by the node's lease.
    pub fn serve_until(&self, until_ms: Millis) {
        self.serving_until_ms.store(until_ms, Ordering::SeqCst);
    }

    /// The groups of the served shards, and their cap (`serve
    /// --groups-max`).
    pub fn group_cap(&self) -> &GroupCap {
        &self.group_cap
    }

    /// Cluster mode: uploads go to `modules` too, and a binding that
    /// names a module the registry lacks copies the cluster's first.
    pub fn share_modules(&self, modules: Arc<dyn SharedModules>) {
        assert!(
            self.shared_modules.set(modules).is_ok(),
            "the shared modules are set once"
        );
    }

    /// Cluster mode: copies into the registry the cluster's modules it
    /// lacks (blocking); `Ok(0)` on one host.
    pub fn copy_missing_modules(&self) -> anyhow::Result<usize> {
        match self.shared_modules.get() {
            Some(modules) => modules.copy_missing(&self.registry),
            None => Ok(0),
        }
    }

    /// Uploads a module (blocking: it compiles): validated and stored in
    /// the registry and, in cluster mode, made the cluster's before the
    /// answer. Returns the entry and whether it is new to the registry.
    pub fn upload_module(
        &self,
        name: &str,
        version: &str,
        bytes: &[u8],
    ) -> Result<(Entry, bool), RuntimeError> {
        let Some(shared) = self.shared_modules.get() else {
            return Ok(self.registry.upload(name, version, bytes)?);
        };
        // The cluster's names first, so that a taken one is refused here
        // before anything is compiled.
        if let Err(error) = shared.copy_missing(&self.registry) {
            tracing::warn!(%error, "copying the cluster's modules before an upload failed");
        }
        let (entry, created) = self.registry.upload(name, version, bytes)?;
        if let Err(error) = shared.publish(&entry, bytes) {
            if created && matches!(error, RegistryError::NameTaken { .. }) {
                // Another node gave the name to other bytes meanwhile: the
                // cluster's module wins, and this copy goes.
                let _mutation = self.registry.mutation.blocking_lock();
                self.registry.unlist(&entry.module.id);
                let _ = self.registry.remove_files(&entry.module.id);
            }
            return Err(error.into());
        }
        Ok((entry, created))
    }

    /// Cluster mode: the storage does not answer (`Some(why)`) or does
    /// again (`None`).
    pub fn set_storage_unavailable(&self, why: Option<String>) {
        *self
            .storage_unavailable
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = why;
    }

    /// A request's refusal as its caller is told it: a shard not served
    /// while the storage does not answer is refused for the storage (it
    /// is not served because of it, and is served again once it answers).
    fn as_told(&self, error: RuntimeError) -> RuntimeError {
        match error {
            RuntimeError::ShardNotServed { .. } => match &*self
                .storage_unavailable
                .lock()
                .unwrap_or_else(|e| e.into_inner())
            {
                Some(why) => RuntimeError::StorageUnavailable(why.clone()),
                None => error,
            },
            error => error,
        }
    }

    /// The served shards whose persisting failed: each refuses every
    /// request until it is unloaded (and, in cluster mode, loaded again
    /// from what its storage holds).
    pub fn failed_shards(&self) -> Vec<ShardId> {
        self.shards
            .iter()
            .filter(|shard| shard.persist_failed())
            .map(|shard| shard.id)
            .collect()
    }

    /// How many shards the host's groups are spread over.
    pub fn shard_count(&self) -> u32 {
        self.shards.len() as u32
    }

    /// The shard that owns `group`.
    pub fn shard_of(&self, group: &str) -> ShardId {
        shard_of(group, self.shard_count())
    }

    /// Whether this host serves `shard` now.
    pub fn serves(&self, shard: ShardId) -> bool {
        self.shards
            .get(shard as usize)
            .is_some_and(|shard| shard.served.load(Ordering::Acquire))
    }

    fn shard(&self, id: u64) -> Result<&Arc<shard::Shard>, RuntimeError> {
        usize::try_from(id)
            .ok()
            .and_then(|i| self.shards.get(i))
            .ok_or(RuntimeError::UnknownShard {
                shard: id,
                shard_count: self.shard_count(),
            })
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

    /// Sets the shard gauges: how many shards the host has and serves.
    fn publish_shards(&self) {
        let served = self
            .shards
            .iter()
            .filter(|shard| shard.served.load(Ordering::Acquire))
            .count();
        self.publish_shard_counts(served);
    }

    fn publish_shard_counts(&self, served: usize) {
        ::metrics::gauge!("assignd_shards").set(self.shard_count() as f64);
        ::metrics::gauge!("assignd_shards_served").set(served as f64);
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

    /// Whether persisting has failed on a shard: its requests are refused
    /// from then on.
    pub fn failed(&self) -> bool {
        self.shards.iter().any(|shard| shard.persist_failed())
    }

    /// Whether the storage does not answer: the node says so, or a
    /// shard's last write went unanswered.
    pub fn storage_unavailable(&self) -> bool {
        self.storage_unavailable
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
            || self.shards.iter().any(|shard| {
                // Not under the shard's lock: `/healthz` asks, and must not
                // wait for a large group's step.
                shard
                    .persist_failure()
                    .is_some_and(|failure| failure.unavailable)
            })
    }

    /// The uploaded modules, and the engine every assignor runs in.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// The clock every core call is given.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// How late the host runs, as the core is told.
    pub fn lateness(&self) -> &Lateness {
        &self.lateness
    }

    /// Assignor calls started and not yet answered.
    pub fn calls_in_flight(&self) -> u64 {
        self.calls_in_flight.load(Ordering::SeqCst)
    }

    /// Assignor calls answered so far (successfully or not).
    pub fn calls_finished(&self) -> u64 {
        self.calls_finished.load(Ordering::SeqCst)
    }

    /// Runs `step` on a served shard's state, under its lock, with the
    /// current time; queues its records for persistence before the lock is
    /// released; wakes the shard's timers if the step brought a deadline
    /// forward; starts its assignor calls; and returns once its records
    /// (and all before them) are durable, or, if it wrote none, once the
    /// records of `group` it may show are (`""`: of the whole shard; see
    /// [`RecordQueue::submit_for`]). An error from `step` changed nothing.
    ///
    /// A step runs on the calling task's thread, but never so that it
    /// holds up a runtime worker: a heavy step (installing a group's new
    /// target, which is linear in its tasks and rows), and any step whose
    /// shard is busy (so it would wait for the lock), run in
    /// `tokio::task::block_in_place`, which hands the worker's other tasks
    /// to another thread first. Otherwise one big group's work on one
    /// shard, and the heartbeats queued behind it on that shard's lock,
    /// would hold the workers every other shard's requests need.
    async fn execute_on<T>(
        self: &Arc<Self>,
        shard: &shard::Shard,
        group: &str,
        weight: Weight,
        step: impl FnOnce(&mut shard::Served, Millis) -> Result<(T, Output), RuntimeError>,
    ) -> Result<T, RuntimeError> {
        // Every step of a large group (and of its whole shard) may be
        // linear in the group, whatever the step: run it as heavy.
        let was_large = shard.large_groups.holds(group);
        let weight = if was_large { Weight::Heavy } else { weight };
        let locked_step = || {
            let poisoned = |_| RuntimeError::Internal("a shard's core panicked earlier");
            let mut state = match shard.state.try_lock() {
                Ok(state) => state,
                Err(std::sync::TryLockError::WouldBlock) => {
                    off_the_workers(|| shard.state.lock()).map_err(poisoned)?
                }
                Err(std::sync::TryLockError::Poisoned(e)) => return Err(poisoned(e)),
            };
            let served = state.as_mut().ok_or_else(|| RuntimeError::ShardNotServed {
                shard: shard.id,
                group: group.to_owned(),
            })?;
            if let Some(failure) = served.queue.failure() {
                return Err(failure.clone().into());
            }
            let now = self.clock.now();
            if now >= self.serving_until_ms.load(Ordering::SeqCst) {
                // A node paused past its lease answers nothing from the
                // state it held: another node may own the shard now.
                return Err(RuntimeError::ShardNotServed {
                    shard: shard.id,
                    group: group.to_owned(),
                });
            }
            let (value, output) = step(served, now)?;
            if !group.is_empty() {
                let tasks = served
                    .core
                    .group(group)
                    .map_or(0, |g| g.config.task_count());
                if (tasks >= shard::LARGE_GROUP_TASKS) != was_large {
                    shard.large_groups.note(group, tasks);
                }
            }
            if !output.records.is_empty() {
                served
                    .rebalances
                    .observe(&output.records, now, observe::record);
            }
            if let Some(deadline) = served.core.poll_timeout() {
                shard.wake_before(deadline);
            }
            let durable = served.queue.submit_for(group, output.records);
            Ok((value, durable, output.assignor_calls))
        };
        let (value, durable, calls) = match weight {
            Weight::Light => locked_step(),
            Weight::Heavy => off_the_workers(locked_step),
        }?;
        self.start_assignor_calls(calls);
        durable.wait().await?;
        Ok(value)
    }

    /// [`Runtime::execute_on`] the shard of `group`, given its core.
    async fn execute<T>(
        self: &Arc<Self>,
        group: &str,
        weight: Weight,
        step: impl FnOnce(&mut Coordinator, Millis) -> Result<(T, Output), RuntimeError>,
    ) -> Result<T, RuntimeError> {
        let shard = self.shards[self.shard_of(group) as usize].clone();
        self.execute_on(&shard, group, weight, |served, now| {
            step(&mut served.core, now)
        })
        .await
        .map_err(|error| self.as_told(error))
    }

    /// Reads the core of `group`'s shard once everything applied to the
    /// group before is durable, so that nothing is shown that a crash
    /// could take back.
    pub async fn read<T>(
        self: &Arc<Self>,
        group: &str,
        read: impl FnOnce(&Coordinator, Millis) -> T,
    ) -> Result<T, RuntimeError> {
        self.execute(group, Weight::Heavy, |core, now| {
            Ok((read(core, now), Output::default()))
        })
        .await
    }

    /// [`Runtime::read`] on every served shard, in shard order (a listing
    /// of every group): each shard's part once what it applied before is
    /// durable. A shard not served is left out.
    pub async fn read_every_shard<T>(
        self: &Arc<Self>,
        read: impl Fn(&Coordinator, Millis) -> T,
    ) -> Result<Vec<T>, RuntimeError> {
        let mut parts = Vec::with_capacity(self.shards.len());
        for shard in self.shards.iter() {
            match self
                .execute_on(shard, "", Weight::Light, |served, now| {
                    Ok((read(&served.core, now), Output::default()))
                })
                .await
            {
                Ok(part) => parts.push(part),
                Err(RuntimeError::ShardNotServed { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(parts)
    }

    /// Creates or replaces a group's config; returns whether the group was
    /// created. The assignor must be one this host can run: a built-in, or
    /// an uploaded module by id or `name@version`. It is resolved under the
    /// core's lock, which a delete also takes to check that no group names
    /// the module, so a module cannot vanish from under a binding.
    /// `member_token` sets, removes or keeps the group's member token (in
    /// place of `config.member_token_sha256`), under the same lock.
    pub async fn configure(
        self: &Arc<Self>,
        group: &str,
        mut config: GroupConfig,
        member_token: MemberTokenChange,
    ) -> Result<bool, RuntimeError> {
        crate::protocol::core::check_config(&config)?;
        self.check_params(&config.binding_spec()).await?;
        self.execute(group, Weight::Light, |core, now| {
            self.check_resolves(&config.binding_spec())?;
            let created = core.group(group).is_none();
            config.member_token_sha256 = member_token.apply(core.group(group));
            self.admission
                .check_config(group, config.member_token_sha256.as_deref())?;
            if created {
                self.group_cap.admit()?;
            }
            let output = core.configure(group, config, now).inspect_err(|_| {
                if created {
                    self.group_cap.release();
                }
            })?;
            Ok((created, output))
        })
        .await
    }

    /// Binds a group to an assignor (a built-in, or an uploaded module by
    /// id or `name@version`) and params: a hot swap, its new target asked
    /// for at once. Resolved under the core's lock, as for `configure`.
    /// Returns whether the binding changed.
    pub async fn bind(
        self: &Arc<Self>,
        group: &str,
        spec: BindingSpec,
    ) -> Result<bool, RuntimeError> {
        self.check_params(&spec).await?;
        self.execute(group, Weight::Light, |core, now| {
            if core.group(group).is_none() {
                return Err(ProtocolError::UnknownGroup(group.to_owned()).into());
            }
            self.check_resolves(&spec)?;
            let output = core.bind(group, spec, now)?;
            Ok((!output.records.is_empty(), output))
        })
        .await
    }

    /// Whether a binding's assignor and fallback accept its params (see
    /// `Registry::check_params`), off the async workers. A reference that
    /// does not resolve is left to `check_resolves`, under the core's lock.
    async fn check_params(&self, spec: &BindingSpec) -> Result<(), RuntimeError> {
        let registry = self.registry.clone();
        let module = spec.assignor.clone();
        let spec = spec.clone();
        let shared = self.shared_modules.get().cloned();
        tokio::task::spawn_blocking(move || -> Result<(), RuntimeError> {
            let names = || std::iter::once(&spec.assignor).chain(&spec.fallback);
            if let Some(shared) = &shared
                && names().any(|name| registry.resolve(name).is_none())
            {
                // Uploaded through another node, and not copied here yet.
                if let Err(error) = shared.copy_missing(&registry) {
                    tracing::warn!(%error, "copying the cluster's modules failed");
                }
            }
            if let Some(shared) = &shared {
                for name in names() {
                    // Deleted from the cluster since this node copied it:
                    // it goes here too (and the bind is refused as
                    // unknown), rather than a batch that names it be
                    // refused by etcd.
                    if let Some(Resolved::Uploaded(id)) = registry.resolve(name)
                        && !shared.is_shared(name)?
                    {
                        let _mutation = registry.mutation.blocking_lock();
                        registry.unlist(&id);
                        registry.remove_files(&id)?;
                    }
                }
            }
            for name in names() {
                if registry.resolve(name).is_some() {
                    registry.check_params(name, &spec.params)?;
                }
            }
            Ok(())
        })
        .await
        .map_err(|join_error| RuntimeError::AssignorFailed {
            module,
            message: format!("checking the params panicked: {join_error}"),
        })?
    }

    /// Whether this host can run a binding's assignor and its fallback.
    fn check_resolves(&self, spec: &BindingSpec) -> Result<(), RuntimeError> {
        for name in std::iter::once(&spec.assignor).chain(&spec.fallback) {
            if self.registry.resolve(name).is_none() {
                return Err(RuntimeError::UnknownAssignor { name: name.clone() });
            }
        }
        Ok(())
    }

    /// Binds a group back to its previous binding. A module deleted since
    /// is `unknown_assignor`; nothing changes.
    pub async fn rollback(self: &Arc<Self>, group: &str) -> Result<(), RuntimeError> {
        self.execute(group, Weight::Light, |core, now| {
            let previous = core
                .group(group)
                .ok_or_else(|| ProtocolError::UnknownGroup(group.to_owned()))?
                .previous_binding()
                .ok_or_else(|| ProtocolError::NoPreviousBinding(group.to_owned()))?;
            self.check_resolves(&previous.spec())?;
            Ok(((), core.rollback(group, now)?))
        })
        .await
    }

    /// Deletes an uploaded module (by id or `name@version`) that no group's
    /// config names. The check and the unlisting happen under the core's
    /// lock, and the answer waits until every change before it is durable,
    /// so a config that stopped naming the module is in the log before the
    /// module's files go.
    pub async fn delete_assignor(self: &Arc<Self>, reference: &str) -> Result<Entry, RuntimeError> {
        if let Some(shared) = self.shared_modules.get().cloned() {
            return self.delete_shared_assignor(shared, reference).await;
        }
        let registry = self.registry.clone();
        let _mutation = registry.mutation.lock().await;
        let id = match registry.resolve(reference) {
            None => return Err(RegistryError::Unknown(reference.to_owned()).into()),
            Some(Resolved::Builtin(name)) => {
                return Err(RegistryError::Builtin(name.to_owned()).into());
            }
            Some(Resolved::Uploaded(id)) => id,
        };
        let entry = {
            // Every shard's lock at once (in shard order; nothing else takes
            // two), so that no config can come to name the module between
            // the check and the unlisting.
            let states: Vec<MutexGuard<'_, Option<shard::Served>>> =
                self.shards.iter().map(|shard| lock_shard(shard)).collect();
            let mut bound = Vec::new();
            for (shard, state) in self.shards.iter().zip(&states) {
                let Some(served) = state.as_ref() else {
                    return Err(RuntimeError::ShardNotServed {
                        shard: shard.id,
                        group: String::new(),
                    });
                };
                bound.extend(
                    served
                        .core
                        .groups()
                        .filter(|g| {
                            std::iter::once(&g.config.assignor)
                                .chain(&g.config.fallback_assignor)
                                .any(|name| {
                                    registry.resolve(name) == Some(Resolved::Uploaded(id.clone()))
                                })
                        })
                        .map(|g| g.name.clone()),
                );
            }
            if !bound.is_empty() {
                bound.sort();
                return Err(RegistryError::InUse {
                    id: id.clone(),
                    groups: bound.join(", "),
                }
                .into());
            }
            registry.unlist(&id).expect("a resolved module is listed")
        };
        // A config that stopped naming the module must be durable before
        // the module's files go.
        for shard in self.shards.iter() {
            match self
                .execute_on(shard, "", Weight::Light, |_, _| Ok(((), Output::default())))
                .await
            {
                Ok(()) | Err(RuntimeError::ShardNotServed { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        registry.remove_files(&id)?;
        Ok(entry)
    }

    /// Cluster mode's delete: a module is the cluster's, and the groups
    /// that may name it live on every node's shards, so the check is
    /// etcd's (`SharedModules::delete`: an index key per group that
    /// names a module, written with the records that make it name it);
    /// then the copy here goes. The other nodes drop theirs at their next
    /// sync, or at once when a bind names it.
    async fn delete_shared_assignor(
        self: &Arc<Self>,
        shared: Arc<dyn SharedModules>,
        reference: &str,
    ) -> Result<Entry, RuntimeError> {
        let registry = self.registry.clone();
        let reference = reference.to_owned();
        tokio::task::spawn_blocking(move || -> Result<Entry, RuntimeError> {
            if registry.resolve(&reference).is_none()
                && let Err(error) = shared.copy_missing(&registry)
            {
                tracing::warn!(%error, "copying the cluster's modules failed");
            }
            let _mutation = registry.mutation.blocking_lock();
            let entry = match registry.resolve(&reference) {
                None => return Err(RegistryError::Unknown(reference).into()),
                Some(Resolved::Builtin(name)) => {
                    return Err(RegistryError::Builtin(name.to_owned()).into());
                }
                Some(Resolved::Uploaded(id)) => registry.get(&id).expect("a resolved module"),
            };
            shared.delete(&entry)?;
            registry.unlist(&entry.module.id);
            registry.remove_files(&entry.module.id)?;
            Ok(entry)
        })
        .await
        .map_err(|join_error| {
            RuntimeError::from(RegistryError::Storage(format!(
                "deleting the module panicked: {join_error}"
            )))
        })?
    }

    /// One member heartbeat (join, heartbeat, leave). `member_token_sha256`
    /// is the sha256 (lowercase hex) of the bearer token the member sent,
    /// if any: a group with a member token refuses a heartbeat without it
    /// (`MemberTokenMissing`) or with another (`MemberTokenWrong`).
    pub async fn heartbeat(
        self: &Arc<Self>,
        request: &Heartbeat,
        member_token_sha256: Option<&str>,
    ) -> Result<HeartbeatResponse, RuntimeError> {
        let arrived = self.clock.now();
        let shard = self.shards[self.shard_of(&request.group) as usize].clone();
        self.execute_on(&shard, &request.group, Weight::Light, |served, now| {
            // A heartbeat that waited for its shard: the host runs late.
            self.lateness.observe(now.saturating_sub(arrived), now);
            served.admission.admit(
                served.core.group(&request.group),
                request,
                member_token_sha256,
                now,
            )?;
            Ok(served
                .core
                .heartbeat_loaded(request, now, self.lateness.load(now))?)
        })
        .await
        .map_err(|error| self.as_told(error))
    }

    /// An admin drain of a member (by member id or static name); returns
    /// whether the drain started now (false: it was already draining).
    pub async fn drain(self: &Arc<Self>, group: &str, member: &str) -> Result<bool, RuntimeError> {
        self.execute(group, Weight::Light, |core, now| {
            let output = core.drain(group, member, now)?;
            Ok((!output.records.is_empty(), output))
        })
        .await
    }

    /// Advances the timers of every served shard once, judging members'
    /// silence with the host's lateness taken off.
    pub async fn tick(self: &Arc<Self>) -> Result<(), RuntimeError> {
        for shard in self.shards.iter() {
            match self.tick_shard(shard).await {
                Ok(()) | Err(RuntimeError::ShardNotServed { .. }) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    async fn tick_shard(self: &Arc<Self>, shard: &shard::Shard) -> Result<(), RuntimeError> {
        self.execute_on(shard, "", Weight::Light, |served, now| {
            let output = served.core.tick_loaded(now, self.lateness.load(now));
            ::metrics::counter!("assignd_timer_ticks_total").increment(1);
            ::metrics::counter!("assignd_timer_groups_visited_total")
                .increment(served.core.groups_ticked_last() as u64);
            Ok(((), output))
        })
        .await
    }

    /// Scans every served shard once (under its lock, one at a time) and
    /// sets the group and member gauges (after the locks). `GET /metrics`
    /// calls it, so the figures are those of the scrape and an idle host
    /// spends nothing on them between scrapes.
    pub fn refresh_gauges(&self) {
        let mut figures = Vec::new();
        let mut served_count = 0;
        let mut timers = [0usize; TimerKind::ALL.len()];
        for shard in self.shards.iter() {
            if let Some(served) = lock_shard(shard).as_mut() {
                figures.extend(observe::scan(&served.core));
                for (i, (_, n)) in served.core.timers_by_kind().into_iter().enumerate() {
                    timers[i] += n;
                }
                served_count += 1;
            }
        }
        for (kind, n) in TimerKind::ALL.iter().zip(timers) {
            ::metrics::gauge!("assignd_timers", "kind" => kind.name()).set(n as f64);
        }
        ::metrics::gauge!("assignd_host_late_seconds")
            .set(self.lateness.late_ms(self.clock.now()) as f64 / 1000.0);
        figures.sort_by(|a, b| a.name.cmp(&b.name));
        observe::publish(&figures);
        self.publish_shard_counts(served_count);
    }

    /// Starts the timers of every served shard, and of every shard loaded
    /// from now on: each shard's task sleeps until its core's earliest
    /// deadline (`Coordinator::poll_timeout`), ticks the shard at most once
    /// per `granularity`, and stops when the shard is unloaded, the
    /// runtime is dropped (the tasks hold no strong reference) or
    /// [`Runtime::stop_timers`] is called.
    pub fn spawn_ticker(self: &Arc<Self>, granularity: Duration) {
        *self
            .tick_granularity
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(granularity);
        for shard in self.shards.iter() {
            if lock_shard(shard).is_some() {
                self.spawn_timers(shard, granularity);
            }
        }
    }

    /// Stops every shard's timer task.
    pub fn stop_timers(&self) {
        *self
            .tick_granularity
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = None;
        for shard in self.shards.iter() {
            shard.stop_timer();
        }
    }

    fn spawn_timers(self: &Arc<Self>, shard: &Arc<shard::Shard>, granularity: Duration) {
        let weak: Weak<Runtime> = Arc::downgrade(self);
        let task_shard = shard.clone();
        let task = tokio::spawn(async move {
            let shard = task_shard;
            let granularity_ms = u64::try_from(granularity.as_millis()).unwrap_or(u64::MAX);
            let mut failing = false;
            let mut last_tick_ms: Option<Millis> = None;
            loop {
                // When to tick next: the core's earliest deadline, but not
                // sooner than one granularity after the last tick (a
                // burst of changes costs one tick, not one each).
                let (sleep_until, armed_ms, clock_start) = {
                    let Some(runtime) = weak.upgrade() else {
                        return;
                    };
                    let mut state = lock_shard_aside(&shard);
                    let Some(served) = state.as_mut() else {
                        return;
                    };
                    let floor = last_tick_ms.map_or(0, |at| at.saturating_add(granularity_ms));
                    shard.floor_ms.store(floor, Ordering::Release);
                    let until = served
                        .core
                        .poll_timeout()
                        .map(|deadline| deadline.max(floor));
                    shard
                        .sleeping_until_ms
                        .store(until.unwrap_or(u64::MAX), Ordering::Release);
                    (until, runtime.clock.now(), runtime.clock.start())
                };
                let Some(start) = clock_start else {
                    // A manual clock: the test ticks by hand.
                    return;
                };
                let fired_for = match sleep_until {
                    Some(until) => {
                        let at = start + Duration::from_millis(until);
                        tokio::select! {
                            () = tokio::time::sleep_until(at.into()) => Some(until),
                            () = shard.wake.notified() => None,
                        }
                    }
                    None => {
                        shard.wake.notified().await;
                        None
                    }
                };
                let Some(until) = fired_for else {
                    // Woken for an earlier deadline: compute it again.
                    continue;
                };
                let Some(runtime) = weak.upgrade() else {
                    return;
                };
                let now = runtime.clock.now();
                // A timer that fires after its deadline: the host runs
                // late, but only from when the deadline was due and the
                // task knew of it (a group's first timer is due at 0).
                runtime
                    .lateness
                    .observe(lateness::timer_late_ms(until, armed_ms, now), now);
                last_tick_ms = Some(now);
                match runtime.tick_shard(&shard).await {
                    Ok(()) => failing = false,
                    Err(RuntimeError::ShardNotServed { .. }) => return,
                    Err(error) if !failing => {
                        // Logged once per run of failures, not every tick;
                        // an outage of the storage is reported where it is
                        // seen and ends by itself.
                        if error.is_storage_outage() {
                            tracing::warn!(shard = shard.id, %error, "tick failed");
                        } else {
                            tracing::error!(shard = shard.id, %error, "tick failed");
                        }
                        failing = true;
                    }
                    Err(_) => {}
                }
            }
        });
        if let Some(previous) = shard
            .timer
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .replace(task)
        {
            previous.abort();
        }
    }
}

/// How much work a core step may be, for [`Runtime::execute_on`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Weight {
    /// A heartbeat, an admin change, a tick: microseconds.
    Light,
    /// Linear in a group's tasks and rows: an assignor's answer.
    Heavy,
}

/// Runs `work` here, on a multi-threaded runtime's worker only after
/// handing the worker's other tasks over (`block_in_place`), so that they
/// do not wait for it: for work linear in a group's size. (A
/// current-thread runtime, as in unit tests, has no other worker to hand
/// them to, and outside a runtime there is nothing to hand over.)
pub(crate) fn off_the_workers<R>(work: impl FnOnce() -> R) -> R {
    let on_a_worker = tokio::runtime::Handle::try_current()
        .is_ok_and(|handle| handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if on_a_worker {
        tokio::task::block_in_place(work)
    } else {
        work()
    }
}

/// [`lock_shard`] without holding up a runtime worker: at once if the lock
/// is free, else waited for [`off_the_workers`] (a large group's step may
/// hold it for hundreds of ms, and the worker's other tasks would wait).
fn lock_shard_aside(shard: &shard::Shard) -> MutexGuard<'_, Option<shard::Served>> {
    match shard.state.try_lock() {
        Ok(state) => state,
        Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
        Err(std::sync::TryLockError::WouldBlock) => off_the_workers(|| lock_shard(shard)),
    }
}

/// A shard's state under its lock; a panic while it was held is a bug
/// already reported, and the state is still what `apply` left.
fn lock_shard(shard: &shard::Shard) -> MutexGuard<'_, Option<shard::Served>> {
    shard.state.lock().unwrap_or_else(|e| e.into_inner())
}
