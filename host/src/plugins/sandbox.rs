//! The sandbox of one guest call: the store's state (the memory cap
//! across all of the call's memories, the guest's log lines kept under a
//! cap), the store itself (fuel, epoch deadline, resource limiter), the
//! call slots every store is made under, the mapping of wasmtime's errors
//! to [`PluginError`]. It knows nothing of the module cache (`engine.rs`),
//! of assignments (`call.rs`) or of the interface's versions (`world.rs`).

use std::sync::{Condvar, Mutex};
use std::time::Duration;

use assignd_guest_sdk::log::PANIC_PREFIX;
use wasmtime::{Engine, ResourceLimiter, Store, Trap};

use super::error::PluginError;
use super::limits::{EPOCH_TICK_MS, Limits};

/// One line a guest logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestLogLine {
    pub level: &'static str,
    pub message: String,
}

/// A counting semaphore over the pool's instance slots, in two lanes: the
/// live calls' and the shadow calls' (taken on a shadow pool's thread,
/// `guest_threads::on_shadow_thread`), so that a shadow never holds a slot
/// a live call waits for. A call holds a slot for as long as its `Store`
/// lives, and waits when all of its lane are taken. Every store runs
/// under a slot, so the epoch ticker runs only while one is held: a host
/// with no guest running spends nothing on it.
pub(super) struct CallSlots {
    count: u32,
    free: Mutex<FreeSlots>,
    released: Condvar,
    /// Told when a slot is taken: the ticker waits on it while all are free.
    taken: Condvar,
}

/// Free slots of each lane.
struct FreeSlots {
    live: u32,
    shadow: u32,
}

impl FreeSlots {
    fn total(&self) -> u32 {
        self.live + self.shadow
    }

    fn lane(&mut self, shadow: bool) -> &mut u32 {
        if shadow {
            &mut self.shadow
        } else {
            &mut self.live
        }
    }
}

/// A held slot and its lane; dropping it (after the `Store`) frees it.
pub(super) struct CallSlot<'a>(&'a CallSlots, bool);

impl CallSlots {
    /// `live` slots for the live calls, `shadow` for the shadows'.
    pub(super) fn new(live: u32, shadow: u32) -> Self {
        CallSlots {
            count: live + shadow,
            free: Mutex::new(FreeSlots { live, shadow }),
            released: Condvar::new(),
            taken: Condvar::new(),
        }
    }

    /// Waits up to `timeout` for a slot to be held; whether one is.
    pub(super) fn wait_until_taken(&self, timeout: Duration) -> bool {
        let free = self.free.lock().expect("call slots poisoned");
        let (free, _) = self
            .taken
            .wait_timeout_while(free, timeout, |free| free.total() == self.count)
            .expect("call slots poisoned");
        free.total() < self.count
    }

    /// A slot of the calling thread's lane, once one is free.
    pub(super) fn acquire(&self) -> CallSlot<'_> {
        let shadow = super::guest_threads::on_shadow_thread();
        let mut free = self.free.lock().expect("call slots poisoned");
        while *free.lane(shadow) == 0 {
            free = self.released.wait(free).expect("call slots poisoned");
        }
        *free.lane(shadow) -= 1;
        self.taken.notify_all();
        CallSlot(self, shadow)
    }
}

impl Drop for CallSlot<'_> {
    fn drop(&mut self) {
        *self
            .0
            .free
            .lock()
            .expect("call slots poisoned")
            .lane(self.1) += 1;
        // Both lanes wait on one condition: wake them all.
        self.0.released.notify_all();
    }
}

/// Per-store state: the memory cap and what the guest logged.
pub(super) struct GuestState {
    memory_max_bytes: u64,
    /// Bytes of all the store's linear memories together: the cap is the
    /// call's, not each memory's (a component may hold
    /// `MEMORIES_PER_CALL_MAX` of them).
    memory_bytes: u64,
    memory_denied_bytes: Option<u64>,
    pub(super) logs: Vec<GuestLogLine>,
    pub(super) logs_dropped: u64,
    log_lines_max: usize,
    log_line_len_max: usize,
    /// Bytes of the lines kept so far, against `log_bytes_max`.
    log_bytes: usize,
    log_bytes_max: usize,
    panic_message: Option<String>,
}

impl GuestState {
    fn new(limits: &Limits) -> Self {
        GuestState {
            memory_max_bytes: limits.memory_max_bytes,
            memory_bytes: 0,
            memory_denied_bytes: None,
            logs: Vec::new(),
            logs_dropped: 0,
            log_lines_max: limits.log_lines_max,
            log_line_len_max: limits.log_line_len_max,
            log_bytes: 0,
            log_bytes_max: limits.log_bytes_max,
            panic_message: None,
        }
    }
}

/// Tables beyond this many elements are refused (a guest's function
/// tables are small; this only stops a table bomb).
const TABLE_ELEMENTS_MAX: usize = 1 << 20;

impl ResourceLimiter for GuestState {
    /// Also called for each memory's initial size (from 0) when the
    /// instance is made, so `memory_bytes` counts every memory from the
    /// start.
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let total =
            (self.memory_bytes.saturating_sub(current as u64)).saturating_add(desired as u64);
        if total > self.memory_max_bytes {
            // Stop the guest right here, rather than let its allocator abort
            // with an anonymous `unreachable`: the error can then name the
            // size it asked for (all its memories together).
            self.memory_denied_bytes = Some(total);
            return Err(wasmtime::Error::msg("memory limit reached"));
        }
        self.memory_bytes = total;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= TABLE_ELEMENTS_MAX)
    }
}

/// `message` cut to `len_max` bytes (at a char boundary) and marked so.
/// A cut message is a fresh copy of the kept prefix: `String::truncate`
/// would keep the whole allocation, and a guest's 64 MiB line would hold
/// 64 MiB of host memory for as long as the line is kept.
pub(super) fn truncate(message: String, len_max: usize) -> String {
    if message.len() <= len_max {
        return message;
    }
    let mut cut = len_max;
    while !message.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut kept = String::with_capacity(cut + '…'.len_utf8());
    kept.push_str(&message[..cut]);
    kept.push('…');
    kept
}

impl GuestState {
    /// A line the guest logged at `level` (the log import of every
    /// version ends here).
    pub(super) fn log_line(&mut self, level: &'static str, message: String) {
        if level == "error"
            && let Some(panic) = message.strip_prefix(PANIC_PREFIX)
        {
            // Rust renders a panic as "panicked at FILE:LINE:COL:\nMESSAGE";
            // it becomes the call's error, on one line, rather than a log line.
            let one_line = panic.lines().collect::<Vec<_>>().join(" ");
            self.panic_message = Some(truncate(one_line, self.log_line_len_max));
            return;
        }
        let message = truncate(message, self.log_line_len_max);
        if self.logs.len() >= self.log_lines_max
            || self.log_bytes + message.len() > self.log_bytes_max
        {
            self.logs_dropped += 1;
            return;
        }
        self.log_bytes += message.len();
        self.logs.push(GuestLogLine { level, message });
    }
}

/// A call's limits with its memory cap lowered to the engine's ceiling
/// (the pool's slot size).
pub(super) fn capped(memory_ceiling_bytes: u64, limits: &Limits) -> Limits {
    Limits {
        memory_max_bytes: limits.memory_max_bytes.min(memory_ceiling_bytes),
        ..*limits
    }
}

/// A store for one call; the caller holds a call slot for as long as the
/// store lives.
pub(super) fn new_store(engine: &Engine, limits: &Limits, fuel: u64) -> Store<GuestState> {
    let mut store = Store::new(engine, GuestState::new(limits));
    store.limiter(|state| state);
    store
        .set_fuel(fuel)
        .expect("fuel metering is enabled on the engine");
    // One tick more than the limit: the current tick may be about to end.
    store.set_epoch_deadline(limits.time_limit_ms.div_ceil(EPOCH_TICK_MS) + 1);
    store.epoch_deadline_trap();
    store
}

/// Maps a wasmtime error from instantiating or calling a guest to the
/// failure it stands for.
pub(super) fn classify(
    error: wasmtime::Error,
    store: &Store<GuestState>,
    limits: &Limits,
    fuel: u64,
) -> PluginError {
    let state = store.data();
    if let Some(requested_bytes) = state.memory_denied_bytes {
        return PluginError::MemoryLimit {
            requested_bytes,
            limit_bytes: limits.memory_max_bytes,
        };
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::OutOfFuel) => PluginError::OutOfFuel { fuel },
        Some(Trap::Interrupt) => PluginError::Timeout {
            limit_ms: limits.time_limit_ms,
        },
        Some(Trap::StackOverflow) => PluginError::StackOverflow,
        Some(Trap::UnreachableCodeReached) if state.panic_message.is_some() => {
            PluginError::Panicked {
                message: state.panic_message.clone().unwrap_or_default(),
            }
        }
        _ => PluginError::Trapped {
            message: format!("{error:#}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cut line keeps only its prefix's memory: `String::truncate`
    /// alone kept the whole allocation (a 5 KB guest held 3.2 GiB).
    #[test]
    fn a_cut_line_keeps_only_the_memory_of_its_prefix() {
        let long = "x".repeat(1 << 20);
        let cut = truncate(long, 4096);
        assert_eq!(cut.len(), 4096 + '…'.len_utf8());
        assert!(cut.capacity() < 8192, "capacity {}", cut.capacity());
        let short = truncate("ünïcode".to_owned(), 2);
        assert_eq!(short, "ü…");
    }

    /// The memory cap is the call's: two memories of a component share
    /// it (each had the whole cap, so a call could hold twice it).
    #[test]
    fn the_memory_cap_counts_every_memory_of_the_call() {
        let mib = 1 << 20;
        let limits = Limits {
            memory_max_bytes: 512 * mib,
            ..Limits::default()
        };
        let mut state = GuestState::new(&limits);
        let (first, second) = (300 * mib as usize, 200 * mib as usize);
        assert!(state.memory_growing(0, first, None).unwrap());
        assert!(state.memory_growing(0, second, None).unwrap());
        // The first memory grows by 12 MiB: 512 MiB in all, at the cap.
        assert!(
            state
                .memory_growing(first, first + 12 * mib as usize, None)
                .unwrap()
        );
        assert!(state.memory_growing(second, second + 1, None).is_err());
        assert_eq!(state.memory_denied_bytes, Some(512 * mib + 1));
    }

    /// A call keeps at most `log_bytes_max` bytes of lines, whatever their
    /// count; the rest are counted.
    #[test]
    fn a_call_keeps_at_most_its_log_bytes() {
        let limits = Limits::default();
        let mut state = GuestState::new(&limits);
        for _ in 0..limits.log_lines_max {
            state.log_line("info", "y".repeat(10 << 20));
        }
        let kept: usize = state.logs.iter().map(|l| l.message.len()).sum();
        assert!(kept <= limits.log_bytes_max, "{kept} bytes kept");
        assert!(!state.logs.is_empty());
        assert_eq!(
            state.logs.len() as u64 + state.logs_dropped,
            limits.log_lines_max as u64
        );
        assert!(state.logs.iter().all(|l| l.message.capacity() < 8192));
    }
}
