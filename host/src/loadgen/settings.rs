//! The settings each load-test command runs with: its command line's
//! flags by the same names, parsed in `cli` and handed over as they are.
//! The commands check them; nothing here does.

use std::path::PathBuf;

/// What `assignd loadgen` runs: its command line's flags, by the same names.
#[derive(Clone, Debug)]
pub struct LoadgenSettings {
    /// The host's base URL; a cluster's nodes comma-separated.
    pub host: String,
    pub groups: u32,
    /// Members per group at the start.
    pub members: u32,
    /// Tasks per group.
    pub tasks: u32,
    /// How long to measure after every group settled.
    pub duration_s: f64,
    /// The churn spec, in [`super::churn::CHURN_GRAMMAR`].
    pub churn: Option<String>,
    pub interval_ms: u64,
    pub session_timeout_ms: Option<u64>,
    pub expansion_timeout_ms: u64,
    pub assignor: String,
    pub params: Vec<(String, String)>,
    /// The shadow assignor set on every created group, if any.
    pub shadow: Option<String>,
    /// The shadow's params.
    pub shadow_params: Vec<(String, String)>,
    pub learners: String,
    pub acceptable_recovery_lag: u64,
    pub max_learners: Option<u32>,
    pub replay_rate: u64,
    pub process_rate: u64,
    pub changelog_len: u64,
    /// Group name prefix.
    pub prefix: String,
    /// Where to write the figures as JSON.
    pub report: Option<PathBuf>,
    /// The host's admin token.
    pub token: Option<String>,
    /// The tasks' loads, what loadgen weighs the members' holdings with.
    pub load: LoadSettings,
}

/// The load flags of `assignd loadgen`: the tasks' loads (`--task-load`,
/// in [`super::task_load::TASK_LOAD_GRAMMAR`]) and the load config of the
/// created groups; with no `load_unit` the members report no loads and the
/// group balances counts, but the figures still weigh them.
#[derive(Clone, Debug, Default)]
pub struct LoadSettings {
    pub task_load: Option<String>,
    /// The seed of the loads' draws.
    pub load_seed: u64,
    pub load_unit: Option<String>,
    /// The `load_band` assignor param (a preset or a number).
    pub load_band: Option<String>,
    pub load_window_ms: Option<u64>,
    pub load_cooldown_ms: Option<u64>,
    pub load_half_life_ms: Option<u64>,
    /// How often the figures sample the members' loads, in ms.
    pub load_sample_ms: u64,
    /// The host's process id, for its CPU and the bytes it reads from
    /// /proc (same machine); without it those figures are left out.
    pub host_pid: Option<u32>,
}

/// What `assignd demo` runs: its command line's flags, by the same names.
#[derive(Clone, Debug)]
pub struct DemoSettings {
    /// Address to listen on; if it is taken, a free port on the same host.
    pub listen: String,
    /// How long the schedule runs once the group first settled.
    pub duration_s: u64,
    /// Tasks in the demo group.
    pub tasks: u32,
    pub assignor: String,
    pub learners: String,
    /// The schedule, in [`super::churn::CHURN_GRAMMAR`] (default: fitted to
    /// the duration).
    pub churn: Option<String>,
    /// Where compiled assignors are cached.
    pub cache_dir: Option<PathBuf>,
}

/// What `assignd plot` draws: its command line's arguments, by the same
/// names.
#[derive(Clone, Debug)]
pub struct PlotSettings {
    /// The loadgen reports to draw, one colour each.
    pub reports: Vec<PathBuf>,
    /// Where to write the chart.
    pub out: PathBuf,
    /// The churn event (1 = the first) whose time is 0 on the x axis.
    pub event: u32,
    /// Seconds drawn before the event.
    pub before: f64,
    /// Seconds drawn after the event (default: to the end of the longest
    /// report).
    pub after: Option<f64>,
    /// The chart's title (default: the first report's event and shape).
    pub title: Option<String>,
    /// A legend label per report, in order (default: assignor and
    /// learners from each report's config).
    pub labels: Vec<String>,
}

/// What `assignd loadgen watchers` runs: its command line's flags, by the
/// same names.
#[derive(Clone, Debug)]
pub struct WatchersSettings {
    /// The host's base URL (one node).
    pub host: String,
    /// Blocking queries kept open on the group's routing table.
    pub watchers: u32,
    /// Members of the watched group (each with an endpoint).
    pub members: u32,
    /// Tasks (partitions of one topic) of the watched group.
    pub tasks: u32,
    /// The group's `routes_valid_ms`.
    pub routes_valid_ms: u64,
    /// The longest a watcher's blocking query waits, as a router's
    /// configured wait (it waits half the table's `valid_ms` if shorter).
    pub wait_ms: u64,
    /// Seconds of each idle window (the host's CPU without and with the
    /// watchers).
    pub idle_s: f64,
    /// Table changes made, one at a time.
    pub changes: u32,
    /// The pause after each change's last watcher was told, in ms.
    pub change_gap_ms: u64,
    /// The host's process id, for its CPU and RSS from /proc (same
    /// machine); without it those figures are left out.
    pub host_pid: Option<u32>,
    /// The watched group's name.
    pub group: String,
    /// Where to write the figures as JSON.
    pub report: Option<PathBuf>,
    /// The host's admin token, to create the group.
    pub token: Option<String>,
}
