//! Limits on one assignor call, on the engine and on compiling a
//! component from outside. Every limit carries its unit last in its name;
//! defaults are sized for the largest inputs the contract allows on a
//! 2-core machine.

use std::path::PathBuf;

/// Per-call limits. A group binding may lower them; host-wide ceilings cap
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Fuel for a call on an empty input; the budget grows with the input
    /// because a full assignment costs fuel per task (about 150 units per
    /// task for Rust's sticky on 100,000 tasks, 500 for C's, 6,000 to
    /// 11,000 for the JavaScript example's, 9,000 for Python's). Fuel is the
    /// backstop: a call is judged by `time_limit_ms` first, and 100,000
    /// per item lets an interpreted guest doing honest work finish within
    /// it.
    pub fuel_base: u64,
    /// Additional fuel per task and per member of the input.
    pub fuel_per_item: u64,
    /// The most fuel a call may burn, however large its input.
    pub fuel_max: u64,
    /// Wall-clock limit of one call, enforced by epoch interruption.
    pub time_limit_ms: u64,
    /// The most linear memory a call may hold: all of its component's
    /// memories together (at most `MEMORIES_PER_CALL_MAX`).
    pub memory_max_bytes: u64,
    /// Learner rows, and standby rows, an answer may hold per task of its
    /// input: what the host builds from an answer (the target, its
    /// record, the members' views) then stays proportional to the group.
    pub output_rows_per_task_max: usize,
    /// Largest number of learner rows, and of standby rows, in an answer,
    /// however large its input.
    pub output_rows_max: usize,
    /// Log lines kept per call; the rest are counted and dropped.
    pub log_lines_max: usize,
    /// Longest log line kept, in bytes; longer lines are cut.
    pub log_line_len_max: usize,
    /// Bytes of log lines kept per call, all lines together; the lines
    /// past it are counted and dropped.
    pub log_bytes_max: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            fuel_base: 1_000_000_000,
            fuel_per_item: 100_000,
            fuel_max: u64::MAX,
            time_limit_ms: 10_000,
            memory_max_bytes: 512 << 20,
            output_rows_per_task_max: assignd_guest_sdk::validate::ROWS_PER_TASK_MAX,
            output_rows_max: 16_000_000,
            log_lines_max: 100,
            log_line_len_max: 4096,
            log_bytes_max: 64 << 10,
        }
    }
}

impl Limits {
    /// The fuel budget of a call on an input with `tasks` tasks and
    /// `members` members.
    pub fn fuel_for(&self, tasks: usize, members: usize) -> u64 {
        self.fuel_base
            .saturating_add(self.fuel_per_item.saturating_mul((tasks + members) as u64))
            .min(self.fuel_max)
    }

    /// These limits lowered by a group binding's own (never raised: each
    /// of `self` is a ceiling).
    pub fn lowered_by(
        &self,
        fuel_max: Option<u64>,
        time_limit_ms: Option<u64>,
        memory_max_bytes: Option<u64>,
    ) -> Limits {
        Limits {
            fuel_max: fuel_max.map_or(self.fuel_max, |f| f.min(self.fuel_max)),
            time_limit_ms: time_limit_ms.map_or(self.time_limit_ms, |t| t.min(self.time_limit_ms)),
            memory_max_bytes: memory_max_bytes
                .map_or(self.memory_max_bytes, |m| m.min(self.memory_max_bytes)),
            ..*self
        }
    }
}

/// How a component from outside is compiled.
#[derive(Clone, Debug)]
pub struct CompileBounds {
    /// The `assignd` binary the child runs (the host's own).
    pub exe: PathBuf,
    /// Wall-clock limit of a compile: this much, plus
    /// `time_per_mib_ms` per MiB of the component.
    pub time_base_ms: u64,
    pub time_per_mib_ms: u64,
    /// The child's data memory (heap and private mappings).
    pub memory_max_bytes: u64,
    /// Compiles running at once; one more is refused `compile_busy`.
    pub concurrent_max: u32,
    /// The largest artifact the host reads back from the child.
    pub artifact_max_bytes: u64,
}

impl CompileBounds {
    /// The defaults, for the binary `exe`: 10 s plus 4 s per MiB (a
    /// 12 MB JavaScript guest compiles in 16.5 s on a debug build here,
    /// and may take 58 s; the crafted 174 KB module is stopped after
    /// 10.7 s), 2 GiB of memory (the JavaScript and Python guests peak
    /// near 0.4 GB), two at once (a core each on a 2-core machine), and
    /// artifacts of up to 256 MiB (the JavaScript guest's is 43 MB, the
    /// Python guest's 40 MB, 2.2 to 3.6 times the component).
    pub fn new(exe: PathBuf) -> Self {
        CompileBounds {
            exe,
            time_base_ms: 10_000,
            time_per_mib_ms: 4_000,
            memory_max_bytes: 2 << 30,
            concurrent_max: 2,
            artifact_max_bytes: 256 << 20,
        }
    }

    /// The time limit of compiling `len` bytes.
    pub fn time_limit_ms(&self, len: usize) -> u64 {
        let per_byte = self.time_per_mib_ms as f64 / f64::from(1_u32 << 20);
        self.time_base_ms + (len as f64 * per_byte).ceil() as u64
    }
}

/// Engine-wide settings.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// Where compiled components are cached across processes; none keeps
    /// the cache in memory only.
    pub cache_dir: Option<PathBuf>,
    /// Guest instances alive at once (calls in flight, `info()` included).
    /// Instances come from a pool of this many slots; a call waits for a
    /// free slot rather than fail.
    pub concurrent_calls_max: u32,
    /// Shadow assignor calls that may run at once, on threads and
    /// instance slots of their own below the live calls' (a call past
    /// them is not run).
    pub shadow_calls_max: u32,
    /// The host-wide ceiling on a guest's memory: the pool's slot size.
    /// A call's `Limits::memory_max_bytes` above it is capped to it.
    pub memory_ceiling_bytes: u64,
    /// Memory a pool slot keeps mapped between calls (zeroed, not
    /// unmapped), so the next instance does not pay first-touch page faults
    /// on it.
    pub memory_keep_resident_bytes: u64,
    /// How components from outside are compiled: in a bounded child
    /// process, or (`None`: tests and the built-ins-only demo) in process.
    pub compile_bounds: Option<CompileBounds>,
    /// How many nice values below the host's own priority guest calls run
    /// (`super::GuestThreads`), and so the self-tests and params checks,
    /// and the compiler processes of uploads: 0 runs them at it; 19 at
    /// the lowest.
    pub guest_nice: u8,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            cache_dir: None,
            concurrent_calls_max: 16,
            shadow_calls_max: shadow_calls_default(),
            memory_ceiling_bytes: Limits::default().memory_max_bytes,
            memory_keep_resident_bytes: 16 << 20,
            compile_bounds: None,
            guest_nice: GUEST_NICE_DEFAULT,
        }
    }
}

/// Shadow calls at once by default: one per core. Shadow threads run at
/// `SCHED_IDLE`, on the CPU nothing else wants, so one per core can use
/// all of it; more would only split the same idle time and push each
/// shadow past its wall-clock limit (and each reserves a pool slot).
pub fn shadow_calls_default() -> u32 {
    std::thread::available_parallelism()
        .map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
        .clamp(1, SHADOW_CALLS_DEFAULT_MAX)
}

/// The most shadow calls at once the default gives, however many cores.
const SHADOW_CALLS_DEFAULT_MAX: u32 = 16;

/// How far below the host's priority guest calls run by default: to the
/// lowest. Measured with 16 groups' guests spinning at once on 2 cores
/// (docs/benchmarks.md, "Hostile guests"): a bystander's heartbeat p99 was
/// 10.5 and 20.8 ms with guests at the host's priority, 14.0 and 15.8 ms
/// at 10 below (16 threads at nice 10 still weigh 1.7 times one at 0),
/// 4.2 and 6.7 ms at 19.
pub const GUEST_NICE_DEFAULT: u8 = 19;

/// Core instances, memories and tables one assignor component may hold:
/// wit-component links the guest module with small shim modules.
/// These are counts: a pool slot's memory does not grow with them.
/// 64: componentize-py's components hold 38 (CPython, libc, the WASI
/// stubs of `--stub-wasi`, glue), componentize-js's a handful, Rust's and
/// C's 2 to 4.
pub const CORE_INSTANCES_PER_CALL_MAX: u32 = 64;
pub const MEMORIES_PER_CALL_MAX: u32 = 2;
pub const TABLES_PER_CALL_MAX: u32 = 4;

/// How often the epoch ticker advances: the resolution of the wall-time
/// limit.
pub const EPOCH_TICK_MS: u64 = 5;

/// Largest wasm stack a guest may use.
pub const WASM_STACK_MAX_BYTES: usize = 1 << 20;
