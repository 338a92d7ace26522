//! The load-test product behind `assignd loadgen`, `assignd demo` and
//! `assignd plot`: fleets of simulated stateful members driven against a
//! host, and the figures of what they saw.
//!
//! - [`churn`]: the churn grammar (`scale:A->B@T`, `kill:N@T`,
//!   `leave:N@T`), parsed and checked.
//! - [`fleet`]: the simulated members of each group, and the churn
//!   applied to them.
//! - [`ledger`]: what the members hold, turned into figures (tasks moved,
//!   task-seconds without an owner or restoring, double ownership, lease
//!   lapses) and a timeline.
//! - [`probe`]: the host's admin API: creating groups, telling when one
//!   settled.
//! - [`measure`] and `report`: `assignd loadgen`, a measured run and its
//!   report.
//! - [`demo`](mod@demo), with `demo_host` and `demo_screen`: `assignd demo`, a host
//!   in process and a group scaled on a schedule, shown every second.
//! - [`plot`](mod@plot): `assignd plot`, loadgen reports' timelines on one SVG chart.
//! - [`watchers`](mod@watchers), with `watcher_fleet`, `watcher_http` and `tagger`:
//!   `assignd loadgen watchers`, many blocking queries on one group's
//!   routing table, what they cost the host and how fast a change reaches
//!   them.
//! - [`task_load`]: the simulated tasks' loads (`--task-load`), and
//!   `load_figures`: the members' loads, the band and the load
//!   rebalances over a run.
//! - [`offline`]: `assignd loadgen input` and `score`, load-aware
//!   assignment offline on a generated input.
//! - [`host_process`]: the host's CPU, memory and bytes from /proc.
//! - [`settings`]: what each command runs with, by its flags' names.
//!
//! The command line's flags are parsed in `cli`, which hands each command
//! its settings; nothing here parses arguments or knows exit codes.

pub mod churn;
pub mod demo;
mod demo_host;
mod demo_screen;
pub mod fleet;
pub mod host_process;
pub mod ledger;
pub mod load_figures;
mod load_report;
pub mod measure;
pub mod offline;
pub mod plot;
pub mod probe;
mod report;
pub mod settings;
mod tagger;
pub mod task_load;
mod watcher_fleet;
mod watcher_http;
pub mod watchers;

use std::sync::{Mutex, MutexGuard};

pub use demo::demo;
pub use measure::loadgen;
pub use plot::plot;
pub use settings::{DemoSettings, LoadSettings, LoadgenSettings, PlotSettings, WatchersSettings};
pub use watchers::watchers;

/// Why a load-test command failed.
#[derive(Debug)]
pub enum LoadTestError {
    /// The settings ask for something impossible (a bad command line).
    Usage(String),
    /// The run failed: the host, the network, a file.
    Failed(String),
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// A multi-threaded Tokio runtime for a command's run.
fn new_runtime() -> Result<tokio::runtime::Runtime, LoadTestError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| LoadTestError::Failed(format!("cannot start the async runtime: {e}")))
}

/// Writes one line of command output on stdout; a closed stdout
/// (`assignd … | head`) ends it quietly instead of with a panic.
fn out_line(line: &str) {
    use std::io::Write as _;
    let _ = writeln!(std::io::stdout().lock(), "{line}");
}
