//! `assignd check`: a module's check before an upload, offline. Its
//! arguments, the `--input` files read and checked, and the report printed
//! as a table or as JSON; running the cases is `crate::check`'s.

use std::path::PathBuf;

use assignd_guest_sdk::json::{merge_params, parse_input};
use assignd_guest_sdk::validate::{InputLimits, check_input};
use clap::Args;

use super::limits::LimitArgs;
use super::run::{load_named, new_engine};
use super::{EXIT_BAD_INPUT, EXIT_GUEST_FAILED, Failure};
use crate::check::cases::{Case, LargeSize, generated};
use crate::check::report::{Report, Subject};
use crate::check::{Assignor, run};
use crate::plugins::LoadedModule;

const AFTER_HELP: &str = "\
Cases: fresh/small (3 members, 2 topics of 12 partitions), fresh/racks, fresh/capacities,
churn (static members settle on the module's own answer, then churn/join-2, churn/leave-1,
churn/static-return, each on the previous answer), skew/subsets, skew/hot-topic, loads/fresh and
loads/count-balanced (Zipf loads in records/s), large (--large-members x --large-tasks), and each
--input file. Every case runs on MODULE and on the --against assignor.

Columns (each `module / against`): result (ok, or the failure's code: invalid_assignment, panicked,
out_of_fuel, timeout, ...), ms (the call), fuel, spread (most minus fewest active tasks of a member),
max/mean (most active tasks over the mean), load (most loaded member over the mean, with loads),
moved (active tasks whose owner changed against the input's current assignment).

--json prints one document: {module, against: {source, name, version, id}, seed, cases: [{case,
tasks, members, loads, module, against}], total: {module, against}, passed, failed_cases}. Each
side of a case: {result: ok|invalid|failed|skipped, code, reason, call_ms, fuel, count_spread,
count_max_over_mean, load_max_over_mean, tasks_moved} (null where there is no figure; a churn step
after one without an answer is skipped). Each total: {calls, ok, invalid, failed, skipped, call_ms:
{median, max}, fuel: {median, max}, count_spread_max, count_max_over_mean_max,
load_max_over_mean_max, tasks_moved}.

Exit status, as `assignd run`'s: 0 when the module answered every case validly; 3 when it failed
or answered invalidly in some case (the summary names them); 1 on bad input (a module that does not
load, an unreadable or invalid --input file, a malformed --param); 2 on bad usage. A failure of the --against assignor is reported but does not
fail the check.";

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct CheckArgs {
    /// A built-in assignor (range, round-robin, sticky, learner-aware) or
    /// the path of a component file.
    #[arg(value_name = "MODULE")]
    module: String,
    /// The assignor to compare with: a built-in or a component file.
    #[arg(long, value_name = "NAME|FILE", default_value = "sticky")]
    against: String,
    /// A GroupInput JSON file (e.g. captured with GET
    /// /v1/groups/{group}/assignor-input) to run as a case of its own.
    #[arg(long = "input", value_name = "FILE")]
    inputs: Vec<PathBuf>,
    /// Set an assignor param in every case, for both assignors,
    /// overriding an --input file's params.
    #[arg(long = "param", value_name = "KEY=VALUE")]
    params: Vec<String>,
    /// The seed the generated cases are drawn from.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Rounds of generated cases, each drawn from its own seed (0: only
    /// the --input files).
    #[arg(long, value_name = "N", default_value_t = 1)]
    cases: u32,
    /// Members of the large case (0: no large case).
    #[arg(long, value_name = "N", default_value_t = 1_000)]
    large_members: u32,
    /// Tasks of the large case, over 10 topics (0: no large case).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    large_tasks: u32,
    /// Print the report as one JSON document.
    #[arg(long)]
    json: bool,
    /// Cache compiled components here (default: $XDG_CACHE_HOME/assignd or
    /// ~/.cache/assignd).
    #[arg(long, env = "ASSIGND_CACHE_DIR", value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile every time; write nothing to disk.
    #[arg(long)]
    no_cache: bool,
    #[command(flatten)]
    limits: LimitArgs,
}

fn bad_input(message: String) -> Failure {
    Failure {
        message,
        exit_code: EXIT_BAD_INPUT,
    }
}

pub fn check(args: CheckArgs) -> Result<(), Failure> {
    let mut cases = generated(
        args.seed,
        args.cases,
        LargeSize {
            members: args.large_members,
            tasks: args.large_tasks,
        },
    );
    for path in &args.inputs {
        cases.push(input_case(path)?);
    }
    for case in &mut cases {
        merge_params(&mut case.start.params, &args.params).map_err(|e| bad_input(e.to_string()))?;
    }
    let limits = args.limits.limits();
    let usage_of = |f: Failure| bad_input(f.message);
    let engine = new_engine(
        args.cache_dir.clone(),
        args.no_cache,
        limits.memory_max_bytes,
        args.limits.compile_bounds(),
    )
    .map_err(usage_of)?;
    let module = load_named(&engine, &args.module, "MODULE").map_err(usage_of)?;
    let against = load_named(&engine, &args.against, "--against").map_err(usage_of)?;
    let assignor = |module| Assignor {
        engine: &engine,
        module,
        limits,
    };
    let rows = run(&assignor(&module), &assignor(&against), &cases);
    let report = Report::new(
        subject(&args.module, &module),
        subject(&args.against, &against),
        args.seed,
        rows,
    );
    if args.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&report).expect("a report always serializes")
        );
    } else {
        super::check_table::print(&report);
    }
    if report.passed {
        Ok(())
    } else {
        Err(Failure {
            message: format!(
                "{} failed or answered invalidly in {} case(s): {}",
                args.module,
                report.failed_cases.len(),
                report.failed_cases.join(", ")
            ),
            exit_code: EXIT_GUEST_FAILED,
        })
    }
}

fn subject(source: &str, module: &LoadedModule) -> Subject {
    Subject {
        source: source.to_owned(),
        name: module.info.name.clone(),
        version: module.info.version.clone(),
        id: module.id.clone(),
    }
}

/// The case of an `--input` file, named by its path; an unreadable or
/// invalid file is a usage error.
fn input_case(path: &PathBuf) -> Result<Case, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| bad_input(format!("cannot read input {}: {e}", path.display())))?;
    let limits = InputLimits::default();
    let input =
        parse_input(&text, &limits).map_err(|e| bad_input(format!("{}: {e}", path.display())))?;
    check_input(&input, &limits).map_err(|e| bad_input(format!("{}: {e}", path.display())))?;
    Ok(Case {
        name: path.display().to_string(),
        start: input,
        steps: Vec::new(),
    })
}
