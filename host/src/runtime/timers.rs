//! The shards' timers: one task per served shard sleeps until its core's
//! earliest deadline, ticks the shard, and measures how late it fired (the
//! host's [`super::Lateness`]).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::protocol::group::Millis;
use crate::protocol::shard::ShardId;

use super::execute::{Weight, lock_shard, lock_shard_aside};
use super::scope::Scope;
use super::{Runtime, RuntimeError, lateness, shard};

impl Runtime {
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
        self.execute_on(shard, Scope::Shard, Weight::Light, |served, now| {
            self.describe_assignors(&mut served.core);
            let output = served.core.tick_loaded(now, self.lateness.load(now));
            ::metrics::counter!("assignd_timer_ticks_total").increment(1);
            ::metrics::counter!("assignd_timer_groups_visited_total")
                .increment(served.core.groups_ticked_last() as u64);
            Ok(((), output))
        })
        .await
    }

    /// Tells the core whether each assignor its load trigger asked about
    /// balances load (its `capabilities.load`). A built-in is compiled at
    /// start (`preload_builtins`) and an upload is held in memory, so this
    /// is a lookup; a reference that does not resolve is asked about
    /// again at the next tick.
    fn describe_assignors(&self, core: &mut crate::protocol::core::Coordinator) {
        for reference in core.assignors_to_describe() {
            if let Ok(module) = self.registry.load(&reference) {
                core.describe_assignor_load(&reference, module.info.capabilities.load);
            }
        }
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

    /// Starts shard `shard`'s timer task, replacing (and aborting) any it
    /// had.
    pub(super) fn spawn_timers(self: &Arc<Self>, shard: &Arc<shard::Shard>, granularity: Duration) {
        let task = tokio::spawn(run_timers(Arc::downgrade(self), shard.clone(), granularity));
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

/// When a shard's timer task is to tick next, read under the shard's lock.
struct NextTick {
    /// The core's earliest deadline, not before the floor; `None`: no
    /// timer runs, so the task waits to be woken.
    sleep_until: Option<Millis>,
    /// The runtime clock when the deadline was read: a tick is late only
    /// from then ([`lateness::timer_late_ms`]).
    armed_ms: Millis,
    /// The clock's start; `None` for a manual clock, which a test ticks by
    /// hand.
    clock_start: Option<Instant>,
}

/// One shard's timer task: sleeps until the next tick is due (or until
/// woken for an earlier deadline), notes how late it fired, and ticks the
/// shard; ends when the shard is not served or the runtime is gone.
async fn run_timers(weak: Weak<Runtime>, shard: Arc<shard::Shard>, granularity: Duration) {
    let granularity_ms = u64::try_from(granularity.as_millis()).unwrap_or(u64::MAX);
    let mut failing = false;
    let mut last_tick_ms: Option<Millis> = None;
    loop {
        let Some(next) = next_tick(&weak, &shard, last_tick_ms, granularity_ms) else {
            return;
        };
        let Some(start) = next.clock_start else {
            // A manual clock: the test ticks by hand.
            return;
        };
        let Some(until) = sleep_until_due(&shard, start, next.sleep_until).await else {
            // Woken for an earlier deadline: compute it again.
            continue;
        };
        let Some(runtime) = weak.upgrade() else {
            return;
        };
        let now = runtime.clock.now();
        // A timer that fires after its deadline: the host runs late, but
        // only from when the deadline was due and the task knew of it (a
        // group's first timer is due at 0).
        runtime
            .lateness
            .observe(lateness::timer_late_ms(until, next.armed_ms, now), now);
        last_tick_ms = Some(now);
        match runtime.tick_shard(&shard).await {
            Ok(()) => failing = false,
            Err(RuntimeError::ShardNotServed { .. }) => return,
            Err(error) => {
                // Logged once per run of failures, not every tick.
                if !failing {
                    log_tick_failure(shard.id, &error);
                }
                failing = true;
            }
        }
    }
}

/// When to tick next: the core's earliest deadline, but not sooner than
/// one granularity after the last tick (a burst of changes costs one tick,
/// not one each). Also publishes both on the shard, for
/// [`shard::Shard::wake_before`]. `None` once the runtime is gone or the
/// shard is not served.
fn next_tick(
    weak: &Weak<Runtime>,
    shard: &shard::Shard,
    last_tick_ms: Option<Millis>,
    granularity_ms: u64,
) -> Option<NextTick> {
    let runtime = weak.upgrade()?;
    let mut state = lock_shard_aside(shard);
    let served = state.as_mut()?;
    let floor = last_tick_ms.map_or(0, |at| at.saturating_add(granularity_ms));
    shard.floor_ms.store(floor, Ordering::Release);
    let until = served
        .core
        .poll_timeout()
        .map(|deadline| deadline.max(floor));
    shard
        .sleeping_until_ms
        .store(until.unwrap_or(u64::MAX), Ordering::Release);
    Some(NextTick {
        sleep_until: until,
        armed_ms: runtime.clock.now(),
        clock_start: runtime.clock.start(),
    })
}

/// Sleeps until `sleep_until` (the runtime clock's ms from `start`), or
/// until the shard is woken; returns the deadline it slept for if it came,
/// `None` if woken first.
async fn sleep_until_due(
    shard: &shard::Shard,
    start: Instant,
    sleep_until: Option<Millis>,
) -> Option<Millis> {
    match sleep_until {
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
    }
}

/// A failed tick: an outage of the storage is a warning (it is reported
/// where it is seen and ends by itself), anything else an error.
fn log_tick_failure(shard: ShardId, error: &RuntimeError) {
    if error.is_storage_outage() {
        tracing::warn!(shard, %error, "tick failed");
    } else {
        tracing::error!(shard, %error, "tick failed");
    }
}
