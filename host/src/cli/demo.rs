//! `assignd demo`'s flags: the protocol at work within a minute, in one
//! process (`loadgen::demo` runs it and says what it shows).

use clap::Args;

use super::{Failure, default_cache_dir};
use crate::loadgen::{self, DemoSettings};

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Address to listen on; if it is taken, a free port on the same host.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7070")]
    listen: String,
    /// How long the schedule runs, in seconds, once the group first
    /// settled and its workers restored their state (ctrl-c ends the demo
    /// earlier).
    #[arg(long, default_value_t = 90, value_parser = clap::value_parser!(u64).range(5..=86_400))]
    duration: u64,
    /// Tasks in the demo group.
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u32).range(1..=1_000))]
    tasks: u32,
    /// The group's assignor.
    #[arg(long, default_value = "learner-aware")]
    assignor: String,
    /// Who places learners: host, assignor or off.
    #[arg(long, default_value = "host", value_parser = ["host", "assignor", "off"])]
    learners: String,
    /// The schedule, in `assignd loadgen --churn`'s grammar, starting from
    /// 3 workers, times from when the group is first stable (default:
    /// scale:3->6, scale:6->4, kill:1, scale:3->5, scale:5->3 at 8, 28, 48,
    /// 66 and 84 % of --duration).
    #[arg(long, value_name = "SPEC")]
    churn: Option<String>,
    /// Cache compiled assignors here (default: $XDG_CACHE_HOME/assignd or
    /// ~/.cache/assignd).
    #[arg(long, env = "ASSIGND_CACHE_DIR", value_name = "DIR")]
    cache_dir: Option<std::path::PathBuf>,
}

pub fn demo(args: DemoArgs) -> Result<(), Failure> {
    loadgen::demo(DemoSettings {
        listen: args.listen,
        duration_s: args.duration,
        tasks: args.tasks,
        assignor: args.assignor,
        learners: args.learners,
        churn: args.churn,
        cache_dir: args.cache_dir.or_else(default_cache_dir),
    })
    .map_err(Failure::from)
}
