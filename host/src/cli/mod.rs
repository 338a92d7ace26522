//! The `assignd` command line: argument parsing, logging set-up, and the
//! one place where errors become an `error: …` line and an exit code.

/// `println!` for command output that a closed stdout (`assignd … | head`)
/// ends quietly instead of with a panic: what was asked is done either way.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

mod admin_token;
mod check;
mod check_table;
mod cluster;
mod component;
mod demo;
mod limits;
mod loadgen;
mod log;
mod plot;
mod remote;
mod run;
mod serve;
mod sim;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// assignd: a group coordinator with WebAssembly assignor plugins.
#[derive(Debug, Parser)]
#[command(name = "assignd", version, about)]
pub struct Cli {
    /// How log lines are written on stderr: `text` for people, `json` (one
    /// object per line, with the fields of every enclosing span) for log
    /// collectors. Levels come from RUST_LOG (default `warn`).
    #[arg(
        long,
        global = true,
        value_enum,
        default_value_t = LogFormat::Text,
        env = "ASSIGND_LOG_FORMAT"
    )]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// The format of the log lines on stderr.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Watch the protocol work: a coordinator in process, a group of
    /// simulated stateful workers scaled up and down on a schedule, and a
    /// live summary every second.
    Demo(demo::DemoArgs),
    /// Run an assignor offline on a GroupInput JSON file and print the
    /// Assignment JSON (the offline contract of docs/design.md).
    Run(run::RunArgs),
    /// Check a module before an upload: run it offline, in the sandbox of a
    /// live group, on generated cases (fresh groups, churn, skew, loads, a
    /// large group) and --input files, next to a reference assignor; exit 1
    /// if it failed or answered invalidly.
    Check(check::CheckArgs),
    /// Print what an assignor says about itself (name, version,
    /// capabilities, params and their defaults) as JSON.
    Info(run::InfoArgs),
    /// Run seeded random schedules of the protocol core in the
    /// deterministic simulator, checking the invariants after every step.
    Sim(sim::SimArgs),
    /// Run the coordinator: the HTTP API for members and admins.
    Serve(serve::ServeArgs),
    /// Inspect or repair the record log of a data directory.
    #[command(subcommand)]
    Log(log::LogCommand),
    /// Run many simulated members against a running host and report
    /// heartbeat throughput, latency and double ownership.
    Loadgen(loadgen::LoadgenArgs),
    /// Draw the timelines of loadgen reports (tasks without an active
    /// owner, tasks restoring) on one SVG chart.
    Plot(plot::PlotArgs),
    /// The assignor registry of a running host: upload, list, show, delete.
    Assignor(remote::AssignorArgs),
    /// The groups of a running host: create, show, list, drain.
    Group(remote::GroupArgs),
    /// Rollouts on a running host: start (a module bound to a growing
    /// share of groups, rolled back by itself), status, list, pause,
    /// resume, abort.
    Rollout(remote::RolloutArgs),
    /// Make an uploadable component of a guest crate's core module.
    Component(component::ComponentArgs),
    /// A cluster's settings in etcd: its record format level.
    Cluster(cluster::ClusterArgs),
    /// The host's own bounded compiler: a component on stdin, its
    /// precompiled artifact on stdout (run by `serve` and `run`).
    #[command(name = "compile-component", hide = true)]
    CompileComponent(CompileComponentArgs),
}

#[derive(Debug, clap::Args)]
pub struct CompileComponentArgs {
    /// The cap on the process's data memory.
    #[arg(long)]
    memory_max_bytes: u64,
    /// How many nice values below its parent's priority it compiles.
    #[arg(long, default_value_t = 0)]
    nice_steps: u8,
}

/// Exit code of a run that failed on bad input or an unusable module.
pub const EXIT_BAD_INPUT: u8 = 1;
/// Exit code of a run whose guest failed (trap, limit, refusal, invalid answer).
pub const EXIT_GUEST_FAILED: u8 = 3;

/// Where compiled components are cached by default:
/// `$XDG_CACHE_HOME/assignd` or `~/.cache/assignd`.
pub fn default_cache_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .map(|base| base.join("assignd"))
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::CompileComponent(args) = &cli.command {
        // Its stdout is the artifact and its stderr one line: no logs.
        let code = crate::plugins::compile_child(args.memory_max_bytes, args.nice_steps);
        return ExitCode::from(u8::try_from(code).unwrap_or(1));
    }
    init_logs(cli.log_format);
    let result = match cli.command {
        Command::Demo(args) => demo::demo(args),
        Command::Run(args) => run::run(args),
        Command::Info(args) => run::info(args),
        Command::Check(args) => check::check(args),
        Command::Sim(args) => sim::sim(args),
        Command::Serve(args) => serve::serve(args),
        Command::Log(command) => log::log(command),
        Command::Loadgen(args) => loadgen::loadgen(args),
        Command::Plot(args) => plot::plot(args),
        Command::Assignor(args) => remote::assignor(args),
        Command::Group(args) => remote::group(args),
        Command::Rollout(args) => remote::rollout(args),
        Command::Component(args) => component::component(args),
        Command::Cluster(args) => cluster::cluster(args),
        Command::CompileComponent(_) => unreachable!("handled above"),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            // One line, always: a trap's message may carry a multi-line
            // wasm backtrace.
            let one_line: Vec<&str> = failure.message.lines().map(str::trim).collect();
            eprintln!("error: {}", one_line.join("; "));
            ExitCode::from(failure.exit_code)
        }
    }
}

/// The target of the lines a command logs once it has started (`serve`'s
/// connection cap), which the default filter shows at INFO.
pub const START_LOG_TARGET: &str = "assignd::start";

/// Logs go to stderr (stdout is each command's output), filtered by
/// RUST_LOG (default `warn`, and [`START_LOG_TARGET`] at `info`).
fn init_logs(format: LogFormat) {
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new(format!("warn,{START_LOG_TARGET}=info"))
            }),
        );
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().with_current_span(false).init(),
    }
}

/// A failed command: one line for the user and the exit code.
#[derive(Debug)]
pub struct Failure {
    pub message: String,
    pub exit_code: u8,
}

/// Exit code of a command line that asks for something impossible (clap's).
const EXIT_USAGE: u8 = 2;

impl From<crate::loadgen::LoadTestError> for Failure {
    fn from(error: crate::loadgen::LoadTestError) -> Self {
        match error {
            crate::loadgen::LoadTestError::Usage(message) => Failure {
                message,
                exit_code: EXIT_USAGE,
            },
            crate::loadgen::LoadTestError::Failed(message) => Failure {
                message,
                exit_code: EXIT_BAD_INPUT,
            },
        }
    }
}

impl From<crate::plugins::PluginError> for Failure {
    fn from(error: crate::plugins::PluginError) -> Self {
        Failure {
            exit_code: if error.is_guest_failure() {
                EXIT_GUEST_FAILED
            } else {
                EXIT_BAD_INPUT
            },
            message: error.to_string(),
        }
    }
}
