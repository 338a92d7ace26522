//! The runtime: glues the sans-IO protocol core to time, persistence and
//! the plugin engine. The host's groups are spread over a fixed number of
//! shards (`crate::protocol::shard`); each served shard is one
//! [`Coordinator`](crate::protocol::core::Coordinator) behind its own `std::sync::Mutex` (core calls take
//! microseconds; a lock is never held across an await, a persist or an
//! assignor call, and never two at once but for a module's delete), with
//! its own record queue and sink and its own timer task (`shard.rs`). The
//! runtime reads the clock and passes the time into every core call, wakes
//! each shard's timers at the core's earliest deadline, and handles every
//! core [`Output`](crate::protocol::core::Output) the same way:
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
//!
//! Where each part lives: this file holds the [`Runtime`] and its small
//! accessors; `execute.rs` the request path every step takes
//! ([`Runtime::heartbeat`], reads, and the locking helpers);
//! `lifecycle.rs` starting the runtime and loading and unloading shards;
//! `admin.rs` configure, bind, rollback and drain; `modules.rs` uploads,
//! deletes and the cluster's [`SharedModules`]; `assignors.rs` the
//! assignor calls; `shadows.rs` the shadow assignors' calls and binding;
//! `timers.rs` each shard's timer task; `gauges.rs`, `observe.rs`,
//! `load_gauges.rs` and `shadow_gauges.rs` the figures for `GET /metrics`; `error.rs` the
//! [`RuntimeError`].

mod admin;
mod assignors;
mod clock;
mod error;
mod execute;
#[cfg(test)]
mod format_level_tests;
mod gauges;
mod group_cap;
mod lateness;
mod lifecycle;
pub mod load_gauges;
mod member_token;
mod modules;
pub mod observe;
mod preview;
mod route_watches;
mod routes;
mod scope;
pub mod shadow_gauges;
#[cfg(test)]
mod shadow_tests;
mod shadows;
mod shard;
mod sink;
#[cfg(test)]
mod tests;
mod timers;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::plugins::Limits;
use crate::protocol::group::Millis;
use crate::protocol::shard::{ShardId, shard_of};
use crate::registry::Registry;

pub use clock::Clock;
pub use error::RuntimeError;
use execute::Weight;
pub(crate) use execute::off_the_workers;
pub use group_cap::{GROUPS_MAX_DEFAULT, GroupCap};
pub use lateness::Lateness;
pub use lifecycle::ShardStatus;
pub use member_token::{AdmissionPolicy, TokenChange, TokenChanges};
pub use modules::SharedModules;
pub use preview::Preview;
pub use routes::{RoutesAccess, ServedRoutes};
pub use shard::{MemoryStore, ShardStore};
pub use sink::{CountingSink, PersistError, RecordQueue, RecordSink, StorageUnavailable};

/// The runtime's metric families, each declared (and its known series set
/// to zero) in the file that records it; `crate::metric_catalog` gathers
/// them.
pub mod metric_families {
    pub use super::assignors::{ASSIGNOR_FAMILIES, zero_assignor_series};
    pub use super::gauges::{SHARD_FAMILIES, TIMER_FAMILIES};
    pub use super::group_cap::GROUP_CAP_FAMILIES;
    pub use super::lateness::{LATENESS_FAMILIES, zero_lateness_series};
    pub use super::observe::{GROUP_FAMILIES, zero_group_series};
    pub use super::shadows::{SHADOW_FAMILIES, zero_shadow_series};
}

/// How often the core's timers are advanced by default.
pub const TICK_INTERVAL_MS: u64 = 50;

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

    /// Cluster mode: the storage does not answer (`Some(why)`) or does
    /// again (`None`).
    pub fn set_storage_unavailable(&self, why: Option<String>) {
        *self
            .storage_unavailable
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = why;
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
}
