//! The request path: every core step (a heartbeat, an admin change, a
//! read, a tick, an assignor's answer) runs through [`Runtime::execute_on`],
//! which locks the shard, runs the step with the time, queues its records,
//! wakes the timers, starts its assignor calls and waits until its records
//! are durable.

use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};

use crate::protocol::core::{Coordinator, Heartbeat, HeartbeatResponse, Output};
use crate::protocol::group::{Millis, Record};

use super::scope::Scope;
use super::sink::Durable;
use super::{Runtime, RuntimeError, observe, shard};

impl Runtime {
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

    /// Runs `step` on a served shard's state, under its lock, with the
    /// current time; queues its records for persistence before the lock is
    /// released; wakes the shard's timers if the step brought a deadline
    /// forward; starts its assignor calls; and returns once its records
    /// (and all before them) are durable, or, if it wrote none, once the
    /// records of its `scope` it may show are (see
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
    pub(super) async fn execute_on<T>(
        self: &Arc<Self>,
        shard: &shard::Shard,
        scope: Scope<'_>,
        weight: Weight,
        step: impl FnOnce(&mut shard::Served, Millis) -> Result<(T, Output), RuntimeError>,
    ) -> Result<T, RuntimeError> {
        // Every step of a large group (and of its whole shard) may be
        // linear in the group, whatever the step: run it as heavy.
        let was_large = shard.large_groups.holds(scope);
        let weight = if was_large { Weight::Heavy } else { weight };
        let locked_step = || {
            let mut state = lock_for_step(shard)?;
            let _heavy = HeavyStep::mark(shard, weight);
            let served = servable(shard, &mut state, scope)?;
            let now = self.clock.now();
            self.check_within_lease(shard, scope, now)?;
            let (value, output) = step(served, now)?;
            if let Scope::Group(group) = scope {
                note_group_size(shard, served, group, was_large);
            }
            let durable = queue_records(shard, served, scope, output.records, now);
            let calls = (output.assignor_calls, output.shadow_calls);
            Ok::<_, RuntimeError>((value, durable, calls))
        };
        let (value, durable, (calls, shadow_calls)) = match weight {
            Weight::Light => locked_step(),
            Weight::Heavy => off_the_workers(locked_step),
        }?;
        self.start_assignor_calls(calls);
        self.start_shadow_calls(shadow_calls);
        durable.wait().await?;
        Ok(value)
    }

    /// Refuses a step at or past the time this host may serve until: a
    /// node paused past its lease answers nothing from the state it held,
    /// since another node may own the shard now.
    fn check_within_lease(
        &self,
        shard: &shard::Shard,
        scope: Scope<'_>,
        now: Millis,
    ) -> Result<(), RuntimeError> {
        if now >= self.serving_until_ms.load(Ordering::SeqCst) {
            return Err(RuntimeError::ShardNotServed {
                shard: shard.id,
                group: scope.group().map(str::to_owned),
            });
        }
        Ok(())
    }

    /// [`Runtime::execute_on`] the shard of `group`, given its core.
    pub(super) async fn execute<T>(
        self: &Arc<Self>,
        group: &str,
        weight: Weight,
        step: impl FnOnce(&mut Coordinator, Millis) -> Result<(T, Output), RuntimeError>,
    ) -> Result<T, RuntimeError> {
        let shard = self.shards[self.shard_of(group) as usize].clone();
        self.execute_on(&shard, Scope::Group(group), weight, |served, now| {
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
                .execute_on(shard, Scope::Shard, Weight::Light, |served, now| {
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
        if request.endpoint.is_some() || request.metadata.is_some() {
            self.check_format_level("a member endpoint", FORMAT_WITH_ROUTES)?;
        }
        let shard = self.shards[self.shard_of(&request.group) as usize].clone();
        self.execute_on(
            &shard,
            Scope::Group(&request.group),
            Weight::Light,
            |served, now| {
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
            },
        )
        .await
        .map_err(|error| self.as_told(error))
    }
}

/// The first record format (`log::frame`) that keeps member endpoints,
/// reader tokens and the routes promise.
pub(super) const FORMAT_WITH_ROUTES: u8 = 5;
/// The first record format that keeps a group's load settings.
pub(super) const FORMAT_WITH_LOADS: u8 = 6;
/// The first record format that keeps a group's labels and its shadow
/// assignor (`Group::shadow`, the `ShadowBound` record).
pub(crate) const FORMAT_WITH_SHADOWS: u8 = 7;

impl Runtime {
    /// Refuses `what` while the store writes a format older than `needs`,
    /// the first that keeps it (one of the `FORMAT_WITH_*` constants):
    /// checked before anything is written, since a record of an older
    /// format has no place for it.
    pub(crate) fn check_format_level(
        &self,
        what: &'static str,
        needs: u8,
    ) -> Result<(), RuntimeError> {
        if let Some(level) = self.store.format_level()
            && level < needs
        {
            return Err(RuntimeError::FormatLevelTooLow { what, needs, level });
        }
        Ok(())
    }
}

/// How many times a step or a timer pass tries a busy shard's lock before
/// it waits for it [`off_the_workers`]. A light step holds the lock for microseconds, so
/// the holder is usually done within a few tries; handing the worker over
/// instead (`block_in_place`) costs a thread switch, tens of microseconds.
const LOCK_TRIES_MAX: u32 = 12;

/// The tries of [`LOCK_TRIES_MAX`] that spin before those that yield the
/// thread (the holder may be waiting for this core).
const LOCK_SPIN_TRIES: u32 = 6;

/// The shard's state for a step: at once if the lock is free, after a
/// short spin if a light step holds it, else waited for
/// [`off_the_workers`] (a heavy step holds it: a large group's work).
fn lock_for_step(
    shard: &shard::Shard,
) -> Result<MutexGuard<'_, Option<shard::Served>>, RuntimeError> {
    let poisoned = |_| RuntimeError::Internal("a shard's core panicked earlier");
    match lock_briefly(shard) {
        Some(locked) => locked.map_err(poisoned),
        None => off_the_workers(|| shard.state.lock()).map_err(poisoned),
    }
}

/// The shard's lock if it comes free within [`LOCK_TRIES_MAX`] tries while
/// no heavy step holds it; `None` if the caller has to wait longer.
fn lock_briefly(
    shard: &shard::Shard,
) -> Option<std::sync::LockResult<MutexGuard<'_, Option<shard::Served>>>> {
    for attempt in 0..LOCK_TRIES_MAX {
        match shard.state.try_lock() {
            Ok(state) => return Some(Ok(state)),
            Err(std::sync::TryLockError::Poisoned(e)) => return Some(Err(e)),
            Err(std::sync::TryLockError::WouldBlock) => {
                if shard.heavy_step.load(Ordering::Relaxed) {
                    return None;
                }
                if attempt < LOCK_SPIN_TRIES {
                    for _ in 0..(4u32 << attempt) {
                        std::hint::spin_loop();
                    }
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }
    None
}

/// Marks a shard's lock as held by a heavy step while it lives.
struct HeavyStep<'a>(&'a std::sync::atomic::AtomicBool);

impl<'a> HeavyStep<'a> {
    fn mark(shard: &'a shard::Shard, weight: Weight) -> Option<Self> {
        (weight == Weight::Heavy).then(|| {
            shard.heavy_step.store(true, Ordering::Relaxed);
            HeavyStep(&shard.heavy_step)
        })
    }
}

impl Drop for HeavyStep<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Relaxed);
    }
}

/// The shard's served state, if a step may run on it: the shard is served
/// and its persisting has not failed.
fn servable<'a>(
    shard: &shard::Shard,
    state: &'a mut Option<shard::Served>,
    scope: Scope<'_>,
) -> Result<&'a mut shard::Served, RuntimeError> {
    let served = state.as_mut().ok_or_else(|| RuntimeError::ShardNotServed {
        shard: shard.id,
        group: scope.group().map(str::to_owned),
    })?;
    if let Some(failure) = served.queue.failure() {
        return Err(failure.clone().into());
    }
    Ok(served)
}

/// Notes `group` as large, or no longer large, if a step moved its task
/// count across [`shard::LARGE_GROUP_TASKS`].
fn note_group_size(shard: &shard::Shard, served: &shard::Served, group: &str, was_large: bool) {
    let tasks = served
        .core
        .group(group)
        .map_or(0, |g| g.config.task_count());
    if (tasks >= shard::LARGE_GROUP_TASKS) != was_large {
        shard.large_groups.note(group, tasks);
    }
}

/// Hands a step's records on, under the shard's lock: to the rebalance
/// timings, then to the shard's queue (so the sink sees them in apply
/// order); wakes the shard's timers first if its earliest deadline moved
/// forward. Returns what the step's answer waits for.
fn queue_records(
    shard: &shard::Shard,
    served: &mut shard::Served,
    scope: Scope<'_>,
    records: Vec<Record>,
    now: Millis,
) -> Durable {
    if !records.is_empty() {
        let core = &served.core;
        served
            .rebalances
            .observe(&records, now, |event| observe::record(event, core));
    }
    if let Some(deadline) = served.core.poll_timeout() {
        shard.wake_before(deadline);
    }
    let core = &served.core;
    shard
        .route_watches
        .notify(&records, |group| core.group(group).map(|g| g.routes_epoch));
    served.queue.submit_for(scope, records)
}

/// How much work a core step may be, for [`Runtime::execute_on`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Weight {
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
/// is free or comes free within a few tries ([`lock_briefly`]), else waited
/// for [`off_the_workers`] (a large group's step may hold it for hundreds
/// of ms, and the worker's other tasks would wait).
pub(super) fn lock_shard_aside(shard: &shard::Shard) -> MutexGuard<'_, Option<shard::Served>> {
    match lock_briefly(shard) {
        Some(locked) => locked.unwrap_or_else(|e| e.into_inner()),
        None => off_the_workers(|| lock_shard(shard)),
    }
}

/// A shard's state under its lock; a panic while it was held is a bug
/// already reported, and the state is still what `apply` left.
pub(super) fn lock_shard(shard: &shard::Shard) -> MutexGuard<'_, Option<shard::Served>> {
    shard.state.lock().unwrap_or_else(|e| e.into_inner())
}
