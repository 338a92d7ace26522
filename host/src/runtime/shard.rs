//! A shard at run time: one protocol core with everything that changes
//! with it — its record queue (in front of the shard's own record sink),
//! its rebalance timings and its join buckets — behind the shard's own
//! lock, and the task that runs its timers. Shards never share a lock, so
//! heartbeats of groups in different shards never wait on each other.
//!
//! A shard is *loaded* (its store replays its records into a core and
//! opens its sink; its timers start), *served*, and *unloaded* (the core is
//! taken out under the lock, so nothing more is applied; everything queued
//! is made durable; the store gets the final state back and the sink is
//! released). Those three steps are all it takes to move a shard
//! elsewhere, so nothing outside the shard refers to a group's state.
//! Where a shard's records live is the [`ShardStore`]'s business: the
//! record log of `assignd serve` (`crate::log::ShardedDir`), or memory.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::protocol::core::Coordinator;
use crate::protocol::shard::ShardId;

use super::member_token::Admission;
use super::scope::Scope;
use super::sink::{PersistError, RecordQueue, RecordSink};
use super::{AdmissionPolicy, observe};

/// Where shards' records are kept: what a shard is loaded from and
/// written to.
pub trait ShardStore: Send + Sync {
    /// The shard's state as its durable records give it (a core whose
    /// member ids derive from `seed`), and the sink its records go to from
    /// now on. Called again after [`ShardStore::unloaded`] for the same
    /// shard, it gives the state the shard was unloaded with.
    fn load(&self, shard: ShardId, seed: u64)
    -> anyhow::Result<(Coordinator, Arc<dyn RecordSink>)>;

    /// The shard was unloaded with `core` as its last state, every record
    /// of which its sink has persisted; the sink has been dropped.
    fn unloaded(&self, shard: ShardId, core: Coordinator);

    /// The record format version the store writes now, if it may be
    /// older than this build's newest: a cluster's feature level, which
    /// rises during a rolling upgrade. `None`: always the newest (a data
    /// dir, memory).
    fn format_level(&self) -> Option<u8> {
        None
    }
}

/// Shards kept in memory (the demo, tests): every shard's records go to
/// one sink, and an unloaded shard's core is kept until it is loaded
/// again.
pub struct MemoryStore {
    sink: Arc<dyn RecordSink>,
    kept: Mutex<HashMap<ShardId, Coordinator>>,
}

impl MemoryStore {
    pub fn new(sink: Arc<dyn RecordSink>) -> Self {
        MemoryStore {
            sink,
            kept: Mutex::default(),
        }
    }
}

impl ShardStore for MemoryStore {
    fn load(
        &self,
        shard: ShardId,
        seed: u64,
    ) -> anyhow::Result<(Coordinator, Arc<dyn RecordSink>)> {
        let kept = self
            .kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&shard);
        Ok((
            kept.unwrap_or_else(|| Coordinator::new(seed)),
            self.sink.clone(),
        ))
    }

    fn unloaded(&self, shard: ShardId, core: Coordinator) {
        self.kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(shard, core);
    }
}

/// A served shard's state: all of it changes under the shard's one lock.
pub(super) struct Served {
    pub(super) core: Coordinator,
    /// In front of the shard's sink: records are queued in apply order,
    /// under the lock.
    pub(super) queue: RecordQueue,
    /// The shard's rebalances in progress, fed every record it emits.
    pub(super) rebalances: observe::Rebalances,
    /// The join buckets of the shard's groups without a member token.
    pub(super) admission: Admission,
}

impl Served {
    pub(super) fn new(
        core: Coordinator,
        sink: Arc<dyn RecordSink>,
        policy: AdmissionPolicy,
    ) -> Self {
        Served {
            core,
            queue: RecordQueue::start(sink),
            rebalances: observe::Rebalances::default(),
            admission: Admission::new(policy),
        }
    }
}

/// One shard of the host, served or not.
pub(super) struct Shard {
    pub(super) id: ShardId,
    /// `None` while the shard is not served: every request for its groups
    /// is refused, and nothing is applied.
    pub(super) state: Mutex<Option<Served>>,
    /// Loads and unloads of this shard, one at a time.
    pub(super) transition: tokio::sync::Mutex<()>,
    /// Wakes the shard's timer task when a deadline earlier than the one
    /// it sleeps until appears.
    pub(super) wake: tokio::sync::Notify,
    /// The deadline (ms on the runtime's clock) the timer task sleeps
    /// until; `u64::MAX` while it has none.
    pub(super) sleeping_until_ms: AtomicU64,
    /// The earliest the timer task ticks again (one granularity after its
    /// last tick): a deadline before it wakes nothing.
    pub(super) floor_ms: AtomicU64,
    /// The shard's timer task, while it is served with timers running.
    pub(super) timer: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// While served: its record queue's failure, readable without the
    /// shard's lock, which a large group's step may hold for a while
    /// (`/healthz` must not wait for it).
    pub(super) persist_failure: Mutex<Option<Arc<OnceLock<PersistError>>>>,
    /// Its groups whose every step is heavy ([`LargeGroups`]); readable
    /// without the shard's lock, since it decides how that lock is taken.
    pub(super) large_groups: LargeGroups,
    /// Whether `state` holds a served shard; set under the lock, read
    /// without it (every request in cluster mode asks where its group is
    /// served, and must not wait for a large group's step to learn it).
    pub(super) served: AtomicBool,
    /// Whether a heavy step holds `state`: a light step that finds the
    /// lock busy spins for it only while this is false.
    pub(super) heavy_step: AtomicBool,
    /// Its routing tables, serialized, and the change signals watchers
    /// of its groups sleep on.
    pub(super) route_watches: super::route_watches::RouteWatches,
}

/// A group of at least this many tasks is large: any step of it may be
/// linear in its size (the snapshot of a group turning stable, a
/// reconcile of thousands of tasks, an answer of hundreds of thousands of
/// rows), so each runs off the async workers. Measured: one group of
/// 100,000 tasks with 3 standbys each, rebalancing, had its heartbeats'
/// steps (and the snapshots they took) fill a worker's queue, and
/// `/healthz` waited up to 0.8 s behind them (docs/benchmarks.md, "One
/// group's big target and the others").
pub(super) const LARGE_GROUP_TASKS: u64 = 10_000;

/// The large groups of a shard, by name, as of each one's last step.
#[derive(Default)]
pub(super) struct LargeGroups(Mutex<HashSet<String>>);

impl LargeGroups {
    /// Whether the step's group is large; for a step of the whole shard
    /// (a tick, a listing), whether any of the shard's groups is.
    pub(super) fn holds(&self, scope: Scope<'_>) -> bool {
        let large = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match scope {
            Scope::Group(group) => large.contains(group),
            Scope::Shard => !large.is_empty(),
        }
    }

    /// `group` has `tasks` tasks (0: it is gone).
    pub(super) fn note(&self, group: &str, tasks: u64) {
        let mut large = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if tasks >= LARGE_GROUP_TASKS {
            if !large.contains(group) {
                large.insert(group.to_owned());
            }
        } else {
            large.remove(group);
        }
    }

    /// Exactly the groups of `core` that are large (a shard just loaded).
    pub(super) fn reset(&self, core: &Coordinator) {
        let mut large = self.0.lock().unwrap_or_else(|e| e.into_inner());
        large.clear();
        large.extend(
            core.groups()
                .filter(|group| group.config.task_count() >= LARGE_GROUP_TASKS)
                .map(|group| group.name.clone()),
        );
    }
}

impl Shard {
    pub(super) fn new(id: ShardId) -> Self {
        Shard {
            id,
            state: Mutex::new(None),
            transition: tokio::sync::Mutex::new(()),
            wake: tokio::sync::Notify::new(),
            sleeping_until_ms: AtomicU64::new(u64::MAX),
            floor_ms: AtomicU64::new(0),
            timer: Mutex::new(None),
            persist_failure: Mutex::new(None),
            large_groups: LargeGroups::default(),
            served: AtomicBool::new(false),
            heavy_step: AtomicBool::new(false),
            route_watches: Default::default(),
        }
    }

    /// Wakes the timer task if `deadline_ms` comes before the one it
    /// sleeps until (call it under the shard's lock, which the task holds
    /// while it chooses its deadline, so that no deadline is missed).
    pub(super) fn wake_before(&self, deadline_ms: u64) {
        let due = deadline_ms.max(self.floor_ms.load(Ordering::Acquire));
        if due < self.sleeping_until_ms.load(Ordering::Acquire) {
            self.wake.notify_one();
        }
    }

    /// Why the served shard's persisting failed, if it did (`None` while
    /// not served). Read without the shard's lock.
    pub(super) fn persist_failure(&self) -> Option<PersistError> {
        self.persist_failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|failure| failure.get().cloned())
    }

    /// Whether the served shard's persisting failed (false while not
    /// served).
    pub(super) fn persist_failed(&self) -> bool {
        self.persist_failure().is_some()
    }

    /// Stops the timer task, if one runs.
    pub(super) fn stop_timer(&self) {
        if let Some(timer) = self.timer.lock().unwrap_or_else(|e| e.into_inner()).take() {
            timer.abort();
        }
    }
}
