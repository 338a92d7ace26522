//! The per-call assignor limits as command-line flags, shared by `run` and
//! `serve`.

use clap::Args;

use crate::plugins::Limits;

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
}

impl LimitArgs {
    pub fn limits(&self) -> Limits {
        Limits {
            fuel_base: self.fuel_base,
            fuel_per_item: self.fuel_per_item,
            time_limit_ms: self.time_limit_ms,
            memory_max_bytes: self.memory_max_mib.saturating_mul(1 << 20),
            ..Limits::default()
        }
    }
}
