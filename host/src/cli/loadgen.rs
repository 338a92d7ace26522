//! `assignd loadgen`'s flags: many simulated stateful members against a
//! running host, to measure what a fleet sees (`loadgen::measure` runs
//! it and says what it reports); and `assignd loadgen watchers`' flags:
//! many watchers of one group's routing table (`loadgen::watchers`).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::Failure;
use crate::loadgen::{self, LoadgenSettings, WatchersSettings};

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct LoadgenArgs {
    #[command(subcommand)]
    mode: Option<Box<LoadgenMode>>,
    /// The host's base URL; a cluster's nodes comma-separated (the
    /// groups are created through the first, and members start from each
    /// in turn, then follow their coordinator's redirects).
    #[arg(long, default_value = "http://127.0.0.1:7070")]
    host: String,
    /// Groups to create (named `{prefix}-0` …).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    groups: u32,
    /// Members per group at the start.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    members: u32,
    /// Tasks (partitions of one topic) per group.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    tasks: u32,
    /// How long to measure, in seconds, after every group settled.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Churn during the measurement, the same for every group:
    /// EVENT[,EVENT]..., EVENT = scale:FROM->TO@TIME (members join cold /
    /// the newest drain), kill:N@TIME (the newest N vanish without
    /// leaving), leave:N@TIME (they stop and leave); TIME = 10s, 2.5s,
    /// 500ms after measuring starts. E.g. scale:10->20@10s,scale:20->15@40s.
    #[arg(long, value_name = "SPEC")]
    churn: Option<String>,
    /// Heartbeat interval of the created groups, in ms; 0 makes every
    /// member beat as often as the client library allows (every 10 ms, or
    /// back to back when the host answers slower), for peak throughput.
    #[arg(long, default_value_t = 3_000)]
    interval_ms: u64,
    /// The groups' session timeout in ms (how long a killed member keeps
    /// its tasks); default: 10 heartbeat intervals, at least 10 s.
    #[arg(long)]
    session_timeout_ms: Option<u64>,
    /// The groups' expansion timeout in ms.
    #[arg(long, default_value_t = 500)]
    expansion_timeout_ms: u64,
    /// The group config's assignor.
    #[arg(long, default_value = "sticky")]
    assignor: String,
    /// An assignor param of the created groups, KEY=VALUE; repeat for
    /// more (e.g. `--param num_standby=3` for learner-aware).
    #[arg(long = "param", value_name = "KEY=VALUE", value_parser = parse_param)]
    params: Vec<(String, String)>,
    /// A shadow assignor set on every created group after its config
    /// (`PUT /v1/groups/{group}/shadow`): asked beside the live one on
    /// every rebalance, its answer only compared.
    #[arg(long, value_name = "REF")]
    shadow: Option<String>,
    /// A param of the shadow, KEY=VALUE; repeat for more.
    #[arg(long = "shadow-param", value_name = "KEY=VALUE", value_parser = parse_param, requires = "shadow")]
    shadow_params: Vec<(String, String)>,
    /// Who places learners: host, assignor or off.
    #[arg(long, default_value = "host", value_parser = ["host", "assignor", "off"])]
    learners: String,
    /// A learner at or under this lag (records) is caught up.
    #[arg(long, default_value_t = 1_000)]
    acceptable_recovery_lag: u64,
    /// The most learners in a group at once (default: the task count).
    #[arg(long)]
    max_learners: Option<u32>,
    /// Records per second a member replays (learners, restoring owners).
    #[arg(long, default_value_t = 20_000)]
    replay_rate: u64,
    /// Records per second an active task appends to its changelog.
    #[arg(long, default_value_t = 20)]
    process_rate: u64,
    /// Records in each changelog at the start: a cold member needs
    /// changelog-len / replay-rate seconds to catch up.
    #[arg(long, default_value_t = 40_000)]
    changelog_len: u64,
    /// Group name prefix.
    #[arg(long, default_value = "loadgen")]
    prefix: String,
    /// Write the figures as JSON here.
    #[arg(long, value_name = "FILE.json")]
    report: Option<PathBuf>,
    /// The host's admin token, to create and read the groups (sent as
    /// `Authorization: Bearer TOKEN`); the heartbeats need none.
    #[arg(
        long,
        env = "ASSIGND_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
    #[command(flatten)]
    load: LoadArgs,
}

/// The tasks' loads and the created groups' load config.
#[derive(Debug, Args)]
struct LoadArgs {
    /// The tasks' loads: uniform[:MAX], zipf[:S], hot[:PERIOD_S] (a hot
    /// task that moves every PERIOD_S seconds) or step[:AT_S:FACTOR]; the
    /// members report them when the group has --load-unit, and the report
    /// weighs the members' holdings with them either way.
    #[arg(long, value_name = "DIST")]
    task_load: Option<String>,
    /// The seed of --task-load's draws (the same seed, the same loads).
    #[arg(long, default_value_t = 1)]
    load_seed: u64,
    /// The created groups' load_unit (e.g. records/s): their members
    /// report load and the assignor balances it. Needs --task-load.
    #[arg(long, value_name = "UNIT")]
    load_unit: Option<String>,
    /// The created groups' load_band param: tight, default, loose or a
    /// number in (0, 1].
    #[arg(long, value_name = "BAND")]
    load_band: Option<String>,
    /// The created groups' load_window_ms (default: the host's).
    #[arg(long, value_name = "MS")]
    load_window_ms: Option<u64>,
    /// The created groups' load_cooldown_ms (default: the host's).
    #[arg(long, value_name = "MS")]
    load_cooldown_ms: Option<u64>,
    /// The created groups' load_half_life_ms (default: the host's).
    #[arg(long, value_name = "MS")]
    load_half_life_ms: Option<u64>,
    /// How often the report samples every member's load, in ms.
    #[arg(long, default_value_t = 500, value_parser = clap::value_parser!(u64).range(10..=60_000))]
    load_sample_ms: u64,
    /// The host's process id, for its CPU and the bytes it reads per
    /// heartbeat, from /proc (the host on this machine); without it those
    /// figures are left out.
    #[arg(long, value_name = "PID")]
    host_pid: Option<u32>,
}

fn parse_param(arg: &str) -> Result<(String, String), String> {
    match arg.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err(format!("{arg:?} is not KEY=VALUE")),
    }
}

/// What else `assignd loadgen` runs than a fleet of members.
#[derive(Debug, Subcommand)]
enum LoadgenMode {
    /// Many watchers of one group's routing table (blocking queries, each
    /// asked again at once after its answer, as the client routers do):
    /// the host's CPU and RSS without and with them, and the time from a
    /// change of the table to each watcher's answer with it.
    Watchers(WatchersArgs),
    /// Writes a GroupInput (`assignd run`'s format) of one topic whose
    /// tasks carry --task-load's loads, every member holding an equal
    /// count of them: load-aware assignment offline, for groups too large
    /// for a fleet on one machine.
    Input(InputArgs),
    /// Weighs an input's current owners and an assignor's answer with the
    /// input's loads: max/mean load before and after, in band or not,
    /// tasks and load moved.
    Score(ScoreArgs),
}

#[derive(Debug, Args)]
struct InputArgs {
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    members: u32,
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    tasks: u32,
    /// The tasks' loads: uniform[:MAX], zipf[:S], hot[:PERIOD_S] or
    /// step[:AT_S:FACTOR], at time 0.
    #[arg(long, value_name = "DIST", default_value = "zipf")]
    task_load: String,
    /// The seed of --task-load's draws.
    #[arg(long, default_value_t = 1)]
    load_seed: u64,
    /// The input's load_unit; without it the input has no loads (a group
    /// balancing counts).
    #[arg(long, value_name = "UNIT")]
    load_unit: Option<String>,
    /// The input's load_band param.
    #[arg(long, value_name = "BAND")]
    load_band: Option<String>,
    /// Write it here (default: standard output).
    #[arg(long, value_name = "FILE.json")]
    out: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct ScoreArgs {
    /// The GroupInput with loads (its current assignment is "before").
    #[arg(long, value_name = "FILE.json")]
    input: PathBuf,
    /// An assignor's answer (`assignd run`'s output) to that group, with or
    /// without its loads.
    #[arg(long, value_name = "FILE.json")]
    assignment: PathBuf,
}

#[derive(Debug, Args)]
struct WatchersArgs {
    /// The host's base URL (one node).
    #[arg(long, default_value = "http://127.0.0.1:7070")]
    host: String,
    /// Blocking queries kept open on the group's table (the host holds at
    /// most `serve --routes-watchers-max`).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    watchers: u32,
    /// Members of the watched group, each with an endpoint.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    members: u32,
    /// Tasks (partitions of one topic) of the watched group.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    tasks: u32,
    /// The group's `routes_valid_ms` (the host's default 2000; 0: no
    /// promise, so the watchers wait `--wait-ms`).
    #[arg(long, default_value_t = 2_000)]
    routes_valid_ms: u64,
    /// A watcher's configured wait in ms, as a router's: it asks with
    /// half the table's `valid_ms` if that is shorter.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..=20_000))]
    wait_ms: u64,
    /// Seconds of each idle window: the host's CPU without the watchers,
    /// then with them.
    #[arg(long, default_value_t = 20.0)]
    idle_s: f64,
    /// Changes of the table to time, one at a time (a member's heartbeat
    /// with new metadata).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    changes: u32,
    /// The pause after each change reached every watcher, in ms.
    #[arg(long, default_value_t = 2_000)]
    change_gap_ms: u64,
    /// The host's process id, for its CPU and RSS from /proc (the host on
    /// this machine); without it those figures are left out.
    #[arg(long, value_name = "PID")]
    host_pid: Option<u32>,
    /// The watched group's name (created, or its config replaced).
    #[arg(long, default_value = "watched")]
    group: String,
    /// Write the figures as JSON here.
    #[arg(long, value_name = "FILE.json")]
    report: Option<PathBuf>,
    /// The host's admin token, to create the group.
    #[arg(
        long,
        env = "ASSIGND_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
}

pub fn loadgen(mut args: LoadgenArgs) -> Result<(), Failure> {
    match args.mode.take().map(|mode| *mode) {
        Some(LoadgenMode::Input(a)) => input_run(a),
        Some(LoadgenMode::Score(a)) => loadgen::offline::score(loadgen::offline::ScoreSettings {
            input: a.input,
            assignment: a.assignment,
        })
        .map_err(Failure::from),
        Some(LoadgenMode::Watchers(watchers)) => watchers_run(watchers),
        None => fleet_run(args),
    }
}

fn input_run(a: InputArgs) -> Result<(), Failure> {
    loadgen::offline::input(loadgen::offline::InputSettings {
        members: a.members,
        tasks: a.tasks,
        task_load: a.task_load,
        load_seed: a.load_seed,
        load_unit: a.load_unit,
        load_band: a.load_band,
        out: a.out,
    })
    .map_err(Failure::from)
}

fn fleet_run(args: LoadgenArgs) -> Result<(), Failure> {
    loadgen::loadgen(LoadgenSettings {
        host: args.host,
        groups: args.groups,
        members: args.members,
        tasks: args.tasks,
        duration_s: args.duration,
        churn: args.churn,
        interval_ms: args.interval_ms,
        session_timeout_ms: args.session_timeout_ms,
        expansion_timeout_ms: args.expansion_timeout_ms,
        assignor: args.assignor,
        params: args.params,
        shadow: args.shadow,
        shadow_params: args.shadow_params,
        learners: args.learners,
        acceptable_recovery_lag: args.acceptable_recovery_lag,
        max_learners: args.max_learners,
        replay_rate: args.replay_rate,
        process_rate: args.process_rate,
        changelog_len: args.changelog_len,
        prefix: args.prefix,
        report: args.report,
        token: args.token,
        load: loadgen::LoadSettings {
            task_load: args.load.task_load,
            load_seed: args.load.load_seed,
            load_unit: args.load.load_unit,
            load_band: args.load.load_band,
            load_window_ms: args.load.load_window_ms,
            load_cooldown_ms: args.load.load_cooldown_ms,
            load_half_life_ms: args.load.load_half_life_ms,
            load_sample_ms: args.load.load_sample_ms,
            host_pid: args.load.host_pid,
        },
    })
    .map_err(Failure::from)
}

fn watchers_run(watchers: WatchersArgs) -> Result<(), Failure> {
    loadgen::watchers(WatchersSettings {
        host: watchers.host,
        watchers: watchers.watchers,
        members: watchers.members,
        tasks: watchers.tasks,
        routes_valid_ms: watchers.routes_valid_ms,
        wait_ms: watchers.wait_ms,
        idle_s: watchers.idle_s,
        changes: watchers.changes,
        change_gap_ms: watchers.change_gap_ms,
        host_pid: watchers.host_pid,
        group: watchers.group,
        report: watchers.report,
        token: watchers.token,
    })
    .map_err(Failure::from)
}
