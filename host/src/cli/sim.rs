//! `assignd sim`: runs seeded random schedules of the protocol core in the
//! deterministic simulator and checks docs/design.md's invariants after every
//! step. One summary line on stdout; the first violation on stderr and
//! exit code 1.

use std::path::PathBuf;

use clap::Args;

use super::{EXIT_BAD_INPUT, Failure};
use crate::sim::{self, Options};

#[derive(Debug, Args)]
pub struct SimArgs {
    /// The first schedule's seed; schedule i runs with seed + i.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// How many schedules to run.
    #[arg(long, default_value_t = 100)]
    schedules: u64,
    /// Steps of random events per schedule, before its quiet phase.
    #[arg(long, default_value_t = sim::DEFAULT_STEPS)]
    steps: u64,
    /// The simulated host's shard count; each schedule's groups go to the
    /// shards their names hash to, at least two of them on two shards.
    #[arg(long, default_value_t = sim::DEFAULT_SHARDS,
          value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::protocol::shard::SHARD_COUNT_MAX)))]
    shards: u32,
    /// One line per schedule.
    #[arg(long)]
    verbose: bool,
    /// Print every step of every schedule (use with --schedules 1).
    #[arg(long)]
    trace: bool,
    /// With --trace, print each assignor call's input as GroupInput JSON
    /// (replay one with `assignd run --input`).
    #[arg(long)]
    trace_inputs: bool,
    /// Threads to run schedules on (default: the available cores).
    #[arg(long)]
    threads: Option<usize>,
    /// Write the trace of the first failing schedule to this file.
    #[arg(long)]
    trace_failure: Option<PathBuf>,
    /// Serve the shards by a cluster of simulated nodes over a modelled
    /// lease store (etcd's semantics) with node crashes, pauses, partitions
    /// and graceful leaves, instead of one host.
    #[arg(long)]
    cluster: bool,
    /// Give every group a shadow assignor (a built-in, or a module no
    /// host has), answered or dropped after drawn delays.
    #[arg(long)]
    shadows: bool,
    /// Roll a built-in assignor out over every group while the chaos goes
    /// on (one host only), with the rollout core `assignd serve` runs.
    #[arg(long, conflicts_with = "cluster")]
    rollouts: bool,
    /// With --cluster, the number of nodes (default: drawn, 2 to 4).
    #[arg(long, requires = "cluster", value_parser = clap::value_parser!(u64).range(1..=16))]
    nodes: Option<u64>,
}

pub fn sim(args: SimArgs) -> Result<(), Failure> {
    let options = Options {
        steps: args.steps,
        trace: args.trace,
        trace_inputs: args.trace_inputs,
        fault: None,
        shards: args.shards,
        routers: sim::DEFAULT_ROUTERS,
        load_group_p: sim::DEFAULT_LOAD_GROUP_P,
        shadows: args.shadows,
        rollouts: args.rollouts,
    };
    let threads = args
        .threads
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from));
    let cluster = args.cluster.then(|| sim::ClusterOptions {
        nodes: args.nodes.map(|n| n as usize),
        fault: None,
    });
    let reports = sim::run_many_on(
        args.seed,
        args.schedules,
        &options,
        cluster.as_ref(),
        threads,
    );
    for report in &reports {
        print_report(&args, report);
    }
    println!("{}", sim::summary_line(&reports));
    note_unsettled(&reports);
    let Some(first) = reports.iter().find_map(|r| r.violation.as_ref()) else {
        return Ok(());
    };
    if let Some(path) = &args.trace_failure {
        write_trace(path, first.seed, &options, cluster.as_ref())?;
    }
    Err(violation(&args, first, cluster.as_ref()))
}

/// One schedule's trace (with `--trace`) and line (with `--verbose`).
fn print_report(args: &SimArgs, report: &sim::Report) {
    if args.trace {
        println!("== seed {}", report.seed);
        for line in &report.trace {
            println!("{line}");
        }
    }
    if args.verbose {
        let s = &report.stats;
        println!(
            "seed={} steps={} shard_groups={} shard_records={} targets={} learners_promoted={} drains={} fenced={} static_returns={} fingerprint={:016x} {}",
            report.seed,
            s.steps,
            sim::by_shard(&s.shard_groups),
            sim::by_shard(&s.shard_records),
            s.targets,
            s.learners_promoted,
            s.drains,
            s.fenced,
            s.static_returns,
            report.fingerprint,
            match &report.violation {
                Some(v) => format!("VIOLATION {}", v.description),
                None if s.unsettled > 0 => "ok, unsettled".into(),
                None => "ok".into(),
            }
        );
    }
}

/// A note on stderr naming the schedules that never stopped moving tasks.
fn note_unsettled(reports: &[sim::Report]) {
    let unsettled: Vec<String> = reports
        .iter()
        .filter(|r| r.stats.unsettled > 0)
        .map(|r| r.seed.to_string())
        .collect();
    if !unsettled.is_empty() {
        eprintln!(
            "note: {} schedules stayed stable and correct without churn but never stopped moving tasks through learners (seeds {}); see `--trace`",
            unsettled.len(),
            unsettled
                .iter()
                .take(10)
                .cloned()
                .collect::<Vec<_>>()
                .join(" ")
        );
    }
}

/// Runs the schedule of `seed` again with its trace on, into `path`.
fn write_trace(
    path: &std::path::Path,
    seed: u64,
    options: &Options,
    cluster: Option<&sim::ClusterOptions>,
) -> Result<(), Failure> {
    let traced = sim::run_schedule_on(
        seed,
        &Options {
            trace: true,
            ..options.clone()
        },
        cluster,
    );
    let text = traced.trace.join("\n") + "\n";
    std::fs::write(path, text).map_err(|e| Failure {
        message: format!("cannot write {}: {e}", path.display()),
        exit_code: EXIT_BAD_INPUT,
    })
}

/// The failure for the first violated invariant, with the command that
/// traces its schedule.
fn violation(
    args: &SimArgs,
    first: &sim::Violation,
    cluster: Option<&sim::ClusterOptions>,
) -> Failure {
    Failure {
        message: format!(
            "{first} (trace: assignd sim --seed {} --schedules 1 --steps {} --shards {}{} --trace)",
            first.seed,
            args.steps,
            args.shards,
            match (cluster, args.nodes) {
                (None, _) => String::new(),
                (Some(_), None) => " --cluster".into(),
                (Some(_), Some(n)) => format!(" --cluster --nodes {n}"),
            }
        ),
        exit_code: EXIT_SIM_VIOLATION,
    }
}

/// Exit code of a simulation that found a violated invariant.
pub const EXIT_SIM_VIOLATION: u8 = 1;
