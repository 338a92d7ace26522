//! The threads guest calls run on: at most one per call slot, started as
//! needed, each at a lower CPU priority (a higher nice value) than the
//! host's own threads. Guests that burn the CPU, or fault in fresh memory
//! (whose zeroing the kernel charges to the faulting thread), then take
//! only the CPU the host's heartbeats, timers and record writes leave, and
//! a waking host thread preempts them at once rather than at the end of a
//! time slice: on 2 cores, 16 spinning guests would otherwise hold 16 of
//! every 18 runnable threads.
//!
//! Not tokio's blocking pool: its threads also persist records and run
//! `block_in_place` work, and a thread that lowered its priority cannot
//! raise it again without `CAP_SYS_NICE`. The cost is the guest's: its
//! wall-clock limit (the epoch deadline) runs on while it waits for the
//! CPU, so on a host saturated by its own work a guest gets less done
//! before its deadline.
//!
//! Shadow assignors run on a second pool of their own
//! ([`GuestThreads::for_shadows`]) whose threads take `SCHED_IDLE` on
//! Linux: they run only when no other thread of the machine wants the CPU,
//! the live guest threads at nice 19 included, so a spinning shadow never
//! slows a live call. Each shadow thread takes its instance slot from the
//! shadow slots (`sandbox::CallSlots`), never from the live calls'. Work
//! given to that pool beyond its threads is refused, not queued
//! ([`GuestThreads::try_run`]): a shadow's answer is worth nothing late.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Condvar, Mutex};

/// A guest thread's stack: the deepest wasm stack a guest may use, and
/// room for the host's frames around it (tokio's blocking threads have
/// 2 MiB).
const GUEST_THREAD_STACK_BYTES: usize = super::limits::WASM_STACK_MAX_BYTES + (2 << 20);

/// The highest nice value: the lowest priority a thread can take.
pub const GUEST_NICE_MAX: u8 = 19;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// Why work given to the guest threads did not finish.
#[derive(Debug, thiserror::Error)]
pub enum GuestThreadError {
    #[error("the guest call panicked: {0}")]
    Panicked(String),
    #[error("the guest threads stopped before the call ran")]
    Stopped,
}

/// The pool; dropping it lets its threads finish what is queued and end.
pub struct GuestThreads {
    shared: Arc<Shared>,
}

struct Shared {
    threads_max: usize,
    priority: Priority,
    state: Mutex<State>,
    queued: Condvar,
}

/// Where a pool's threads run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Priority {
    /// This many nice values below the host's.
    Niced(u8),
    /// `SCHED_IDLE`, or the highest nice value where it cannot be had:
    /// the shadow pool.
    Idle,
}

#[derive(Default)]
struct State {
    jobs: VecDeque<Job>,
    /// Threads started and not ended.
    started: usize,
    /// Threads waiting for a job.
    waiting: usize,
    /// Work [`GuestThreads::try_run`] took that has not finished.
    admitted: usize,
    closed: bool,
}

impl GuestThreads {
    /// A pool of at most `threads_max` threads, each `nice` nice values
    /// below the host's priority (0: at it), down to [`GUEST_NICE_MAX`].
    pub fn new(threads_max: u32, nice: u8) -> Self {
        assert!(nice <= GUEST_NICE_MAX, "nice {nice} is out of range");
        Self::with_priority(threads_max, Priority::Niced(nice))
    }

    /// The shadow assignors' pool: at most `threads_max` threads at
    /// `SCHED_IDLE` on Linux (where that is refused, and elsewhere, at the
    /// highest nice value), each holding a shadow instance slot while it
    /// runs a call.
    pub fn for_shadows(threads_max: u32) -> Self {
        Self::with_priority(threads_max, Priority::Idle)
    }

    fn with_priority(threads_max: u32, priority: Priority) -> Self {
        GuestThreads {
            shared: Arc::new(Shared {
                threads_max: usize::try_from(threads_max.max(1)).expect("u32 fits usize"),
                priority,
                state: Mutex::new(State::default()),
                queued: Condvar::new(),
            }),
        }
    }

    /// [`Self::run`] only if a thread is free for `work` now (no more work
    /// taken this way runs or waits than the pool has threads); `None`
    /// otherwise, and `work` is dropped. A pool given work both ways
    /// counts only this way's.
    pub fn try_run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Option<impl Future<Output = Result<T, GuestThreadError>> + Send + 'static> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let shared = self.shared.clone();
        let job: Job = Box::new(move || {
            let result = run_caught(work);
            // Free before the answer: whoever awaits it may try again.
            shared
                .state
                .lock()
                .expect("guest threads poisoned")
                .admitted -= 1;
            let _ = answer.send(result);
        });
        let mut state = self.shared.state.lock().expect("guest threads poisoned");
        if state.admitted >= self.shared.threads_max {
            return None;
        }
        state.admitted += 1;
        self.push_locked(state, job);
        Some(async move { answered.await.unwrap_or(Err(GuestThreadError::Stopped)) })
    }

    /// Runs `work` on a guest thread (in the order given, once a thread is
    /// free) and resolves to its result.
    pub fn run<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> impl Future<Output = Result<T, GuestThreadError>> + Send + 'static {
        let (answer, answered) = tokio::sync::oneshot::channel();
        self.push(Box::new(move || {
            // Nobody waits for the answer any more (the caller was
            // dropped, at shutdown): nothing to do with it.
            let _ = answer.send(run_caught(work));
        }));
        async move { answered.await.unwrap_or(Err(GuestThreadError::Stopped)) }
    }

    /// [`Self::run`] for a caller that may block (a registry check on
    /// tokio's blocking pool): waits for the result. Called on a guest
    /// thread, it runs `work` there and then, since that thread is already
    /// below the host's priority and waiting for another could wait for
    /// itself.
    pub fn run_blocking<T: Send + 'static>(
        &self,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, GuestThreadError> {
        if ON_GUEST_THREAD.get() {
            return run_caught(work);
        }
        let (answer, answered) = std::sync::mpsc::sync_channel(1);
        self.push(Box::new(move || {
            let _ = answer.send(run_caught(work));
        }));
        answered.recv().unwrap_or(Err(GuestThreadError::Stopped))
    }

    fn push(&self, job: Job) {
        let state = self.shared.state.lock().expect("guest threads poisoned");
        self.push_locked(state, job);
    }

    /// Queues `job` under the pool's lock (released here), starting a
    /// thread for it if none waits and the pool has room.
    fn push_locked(&self, mut state: std::sync::MutexGuard<'_, State>, job: Job) {
        let shared = &self.shared;
        state.jobs.push_back(job);
        // Each waiting thread takes one job; start a thread for a job no
        // waiting thread will take, while under the maximum.
        if state.jobs.len() > state.waiting && state.started < shared.threads_max {
            let worker = shared.clone();
            let spawned = std::thread::Builder::new()
                .name(match shared.priority {
                    Priority::Niced(_) => "assignd-guest".to_owned(),
                    Priority::Idle => "assignd-shadow".to_owned(),
                })
                .stack_size(GUEST_THREAD_STACK_BYTES)
                .spawn(move || worker.serve());
            match spawned {
                Ok(_) => state.started += 1,
                // The job waits for a running thread; with none, for the
                // next push's try.
                Err(error) => tracing::error!(%error, "cannot start a guest thread"),
            }
        }
        drop(state);
        shared.queued.notify_one();
    }

    /// Threads started and not ended.
    pub fn started(&self) -> usize {
        self.shared
            .state
            .lock()
            .expect("guest threads poisoned")
            .started
    }
}

impl Drop for GuestThreads {
    fn drop(&mut self) {
        self.shared
            .state
            .lock()
            .expect("guest threads poisoned")
            .closed = true;
        self.shared.queued.notify_all();
    }
}

impl Shared {
    /// A guest thread's life: lower its priority, then run jobs until the
    /// pool is dropped and nothing is queued.
    fn serve(&self) {
        match self.priority {
            Priority::Niced(nice) => lower_priority(nice),
            Priority::Idle => {
                idle_priority();
                ON_SHADOW_THREAD.set(true);
            }
        }
        ON_GUEST_THREAD.set(true);
        let mut state = self.state.lock().expect("guest threads poisoned");
        loop {
            if let Some(job) = state.jobs.pop_front() {
                drop(state);
                job();
                state = self.state.lock().expect("guest threads poisoned");
            } else if state.closed {
                state.started -= 1;
                self.queued.notify_all();
                return;
            } else {
                state.waiting += 1;
                state = self.queued.wait(state).expect("guest threads poisoned");
                state.waiting -= 1;
            }
        }
    }
}

thread_local! {
    /// Whether this thread is one of the guest threads.
    static ON_GUEST_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    /// Whether this thread is one of the shadow pool's.
    static ON_SHADOW_THREAD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is one of a shadow pool's: its guest calls
/// take the shadow instance slots.
pub(super) fn on_shadow_thread() -> bool {
    ON_SHADOW_THREAD.get()
}

/// Runs `work`, its panic turned into an error.
fn run_caught<T>(work: impl FnOnce() -> T) -> Result<T, GuestThreadError> {
    catch_unwind(AssertUnwindSafe(work))
        .map_err(|panic| GuestThreadError::Panicked(panic_message(&*panic)))
}

/// Lowers the calling thread's priority by `steps` nice values, to at most
/// [`GUEST_NICE_MAX`] (Linux keeps a nice value per thread; a new thread
/// starts with its creator's).
#[cfg(target_os = "linux")]
pub(super) fn lower_priority(steps: u8) {
    if steps == 0 {
        return;
    }
    // SAFETY: gettid, getpriority and setpriority only read their
    // arguments.
    let (thread, nice, set) = unsafe {
        let thread = libc::id_t::try_from(libc::gettid()).expect("thread ids are positive");
        // -1 is a valid nice value as well as the error return; reading
        // our own thread's cannot fail.
        let own = libc::getpriority(libc::PRIO_PROCESS, thread);
        let nice = (own + libc::c_int::from(steps)).min(libc::c_int::from(GUEST_NICE_MAX));
        (
            thread,
            nice,
            libc::setpriority(libc::PRIO_PROCESS, thread, nice),
        )
    };
    if set != 0 {
        tracing::warn!(
            thread,
            nice,
            error = %std::io::Error::last_os_error(),
            "cannot lower a guest thread's priority: guests compete with the host's threads as equals"
        );
    }
}

#[cfg(not(target_os = "linux"))]
pub(super) fn lower_priority(_nice: u8) {}

/// Puts the calling thread in the `SCHED_IDLE` class (Linux lets an
/// unprivileged thread take it, not leave it): it runs only on a CPU no
/// other thread wants. Where that is refused, the highest nice value.
#[cfg(target_os = "linux")]
fn idle_priority() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` outlives the call.
    let set = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if set != 0 {
        tracing::warn!(
            error = %std::io::Error::last_os_error(),
            "cannot put a shadow guest thread at SCHED_IDLE: it runs at nice 19 instead"
        );
        lower_priority(GUEST_NICE_MAX);
    }
}

#[cfg(not(target_os = "linux"))]
fn idle_priority() {
    lower_priority(GUEST_NICE_MAX);
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;

    use super::*;

    /// The calling thread's nice value.
    fn own_nice() -> i32 {
        // SAFETY: as in `lower_priority`.
        unsafe {
            libc::getpriority(
                libc::PRIO_PROCESS,
                libc::id_t::try_from(libc::gettid()).expect("positive"),
            )
        }
    }

    #[tokio::test]
    async fn work_runs_at_the_lowered_priority_and_the_caller_keeps_its_own() {
        let mine = own_nice();
        let threads = GuestThreads::new(2, 10);
        let theirs = threads.run(own_nice).await.expect("ran");
        assert_eq!(theirs, (mine + 10).min(19), "a guest thread is niced");
        assert_eq!(own_nice(), mine, "the caller's thread is not");
        let unchanged = GuestThreads::new(1, 0).run(own_nice).await.expect("ran");
        assert_eq!(unchanged, mine);
    }

    #[tokio::test]
    async fn no_more_threads_than_the_maximum_run_at_once_and_the_rest_queue() {
        let threads = GuestThreads::new(2, 0);
        // Two jobs hold both threads until a third party lets them go:
        // a third job queues behind them and runs after.
        let release = Arc::new(Barrier::new(3));
        let holding: Vec<_> = (0..2)
            .map(|i| {
                let release = release.clone();
                threads.run(move || {
                    release.wait();
                    i
                })
            })
            .collect();
        let queued = threads.run(|| "after");
        assert_eq!(threads.started(), 2, "capped at the maximum");
        release.wait();
        let mut answers = Vec::new();
        for job in holding {
            answers.push(job.await.expect("ran"));
        }
        assert_eq!(answers, [0, 1]);
        assert_eq!(queued.await.expect("ran"), "after");
        assert_eq!(threads.started(), 2);
    }

    #[test]
    fn a_blocking_caller_waits_for_a_guest_thread_and_one_on_it_runs_in_place() {
        let mine = own_nice();
        let threads = Arc::new(GuestThreads::new(1, 10));
        let theirs = threads.run_blocking(own_nice).expect("ran");
        assert_eq!(theirs, (mine + 10).min(19), "ran on a guest thread");
        assert_eq!(own_nice(), mine, "the caller's thread is not niced");
        // From the pool's only thread: queued, it would wait for itself.
        let inner = threads.clone();
        let nested = threads
            .run_blocking(move || {
                let outer = std::thread::current().id();
                inner.run_blocking(move || std::thread::current().id() == outer)
            })
            .expect("ran");
        assert!(nested.expect("ran"), "ran in place, on the same thread");
        let failed = threads.run_blocking(|| -> u32 { panic!("self-test blew up") });
        assert!(
            matches!(&failed, Err(GuestThreadError::Panicked(m)) if m == "self-test blew up"),
            "{failed:?}"
        );
        assert_eq!(threads.started(), 1);
    }

    #[tokio::test]
    async fn a_panic_is_an_error_and_the_thread_serves_on() {
        let threads = GuestThreads::new(1, 0);
        let failed = threads.run(|| -> u32 { panic!("guest blew up") }).await;
        assert!(
            matches!(&failed, Err(GuestThreadError::Panicked(m)) if m == "guest blew up"),
            "{failed:?}"
        );
        assert_eq!(threads.run(|| 7).await.expect("ran"), 7);
        assert_eq!(threads.started(), 1);
    }

    #[tokio::test]
    async fn the_shadow_pool_runs_idle_and_refuses_work_past_its_threads() {
        let threads = GuestThreads::for_shadows(1);
        // SAFETY: reads the calling thread's policy.
        let policy = threads
            .try_run(|| (unsafe { libc::sched_getscheduler(0) }, on_shadow_thread()))
            .expect("a free thread")
            .await
            .expect("ran");
        assert_eq!(policy, (libc::SCHED_IDLE, true));
        assert!(!on_shadow_thread(), "the caller is no shadow thread");
        let release = Arc::new(Barrier::new(2));
        let held = release.clone();
        let holding = threads
            .try_run(move || {
                held.wait();
            })
            .expect("a free thread");
        assert!(threads.try_run(|| ()).is_none(), "refused, not queued");
        release.wait();
        holding.await.expect("ran");
        assert!(threads.try_run(|| ()).is_some(), "free again");
    }

    #[test]
    fn dropping_the_pool_lets_queued_work_finish_and_its_threads_end() {
        let threads = GuestThreads::new(1, 0);
        let shared = threads.shared.clone();
        let (sent, received) = std::sync::mpsc::channel();
        for i in 0..3 {
            let sent = sent.clone();
            drop(threads.run(move || sent.send(i).expect("receiver lives")));
        }
        drop(threads);
        let done: Vec<i32> = (0..3).map(|_| received.recv().expect("ran")).collect();
        assert_eq!(done, [0, 1, 2]);
        // The thread ends once nothing is queued.
        let state = shared.state.lock().expect("not poisoned");
        let state = shared
            .queued
            .wait_timeout_while(state, std::time::Duration::from_secs(10), |s| s.started > 0)
            .expect("not poisoned")
            .0;
        assert_eq!(state.started, 0);
    }
}
