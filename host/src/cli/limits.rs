//! The per-call assignor limits as command-line flags, shared by `run` and
//! `serve`.

use clap::Args;

use crate::plugins::{CompileBounds, Limits};

#[derive(Debug, Args)]
pub struct LimitArgs {
    /// Fuel for a call on an empty input; the budget grows by
    /// --fuel-per-item for every task and member.
    #[arg(long, value_name = "UNITS", default_value_t = Limits::default().fuel_base)]
    fuel_base: u64,
    #[arg(long, value_name = "UNITS", default_value_t = Limits::default().fuel_per_item)]
    fuel_per_item: u64,
    /// Wall-clock limit of a call.
    #[arg(long, value_name = "MS", default_value_t = Limits::default().time_limit_ms)]
    time_limit_ms: u64,
    /// Largest memory a guest may grow to (1 to 4096).
    #[arg(long, value_name = "MIB", default_value_t = Limits::default().memory_max_bytes >> 20,
          value_parser = clap::value_parser!(u64).range(1..=4096))]
    memory_max_mib: u64,
    /// Learner rows, and standby rows, an answer may hold per task; an
    /// answer with more is refused (output_too_large).
    #[arg(long, value_name = "N", default_value_t = Limits::default().output_rows_per_task_max as u32,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    output_rows_per_task_max: u32,
    /// Wall-clock limit of compiling an uploaded component: this, plus
    /// --compile-time-per-mib-ms per MiB of it. Compiling runs in a child
    /// process that is stopped at the limit.
    #[arg(long, value_name = "MS", default_value_t = default_bounds().time_base_ms)]
    compile_time_base_ms: u64,
    #[arg(long, value_name = "MS", default_value_t = default_bounds().time_per_mib_ms)]
    compile_time_per_mib_ms: u64,
    /// Memory the compiler process may use for one component (1 to 65536).
    #[arg(long, value_name = "MIB", default_value_t = default_bounds().memory_max_bytes >> 20,
          value_parser = clap::value_parser!(u64).range(1..=65536))]
    compile_memory_max_mib: u64,
    /// Components compiled at once; one more is refused (503 compile_busy).
    #[arg(long, value_name = "N", default_value_t = default_bounds().concurrent_max,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    compiles_max: u32,
    /// The largest compiled artifact the host takes back from the compiler
    /// process (1 to 4096); a larger one is refused
    /// (compile_output_too_large).
    #[arg(long, value_name = "MIB", default_value_t = default_bounds().artifact_max_bytes >> 20,
          value_parser = clap::value_parser!(u64).range(1..=4096))]
    compile_artifact_max_mib: u64,
}

fn default_bounds() -> CompileBounds {
    CompileBounds::new(std::path::PathBuf::new())
}

impl LimitArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            fuel_base: self.fuel_base,
            fuel_per_item: self.fuel_per_item,
            time_limit_ms: self.time_limit_ms,
            memory_max_bytes: self.memory_max_mib.saturating_mul(1 << 20),
            output_rows_per_task_max: self.output_rows_per_task_max as usize,
            ..Limits::default()
        }
    }

    /// Components from outside are compiled by a child process of this
    /// binary under these bounds; `None` if this binary's path is unknown
    /// (then in process).
    pub fn compile_bounds(&self) -> Option<CompileBounds> {
        let exe = std::env::current_exe().ok()?;
        Some(CompileBounds {
            exe,
            time_base_ms: self.compile_time_base_ms,
            time_per_mib_ms: self.compile_time_per_mib_ms,
            memory_max_bytes: self.compile_memory_max_mib.saturating_mul(1 << 20),
            concurrent_max: self.compiles_max,
            artifact_max_bytes: self.compile_artifact_max_mib.saturating_mul(1 << 20),
        })
    }
}
