//! `assignd run` and `assignd info`: an assignor on a JSON file, offline,
//! with the same sandbox, limits and validation as a live group.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use assignd_guest_sdk::json::{assignment_to_json, merge_params, parse_input};
use assignd_guest_sdk::validate::InputLimits;
use clap::Args;
use serde_json::json;

use super::limits::LimitArgs;
use super::{EXIT_BAD_INPUT, Failure, default_cache_dir};
use crate::plugins::{
    BUILTIN_NAMES, CompileBounds, EngineConfig, Limits, LoadedModule, PluginEngine,
};

#[derive(Debug, Args)]
pub struct ModuleArgs {
    /// A built-in assignor (range, round-robin, sticky, learner-aware) or
    /// the path of a component file.
    #[arg(long, value_name = "NAME|FILE")]
    module: String,
    /// Cache compiled components here (default: $XDG_CACHE_HOME/assignd or
    /// ~/.cache/assignd).
    #[arg(long, env = "ASSIGND_CACHE_DIR", value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile every time; write nothing to disk.
    #[arg(long)]
    no_cache: bool,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    module: ModuleArgs,
    /// GroupInput JSON file, or - for standard input.
    #[arg(long, value_name = "FILE")]
    input: PathBuf,
    /// Set an assignor param, overriding the input's params.
    #[arg(long = "param", value_name = "KEY=VALUE")]
    params: Vec<String>,
    /// Print one line of costs on stderr:
    /// compile_ms=… instantiate_ms=… call_ms=… validate_ms=… fuel=…
    #[arg(long)]
    stats: bool,
    #[command(flatten)]
    limits: LimitArgs,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    #[command(flatten)]
    module: ModuleArgs,
}

fn bad_input(message: String) -> Failure {
    Failure {
        message,
        exit_code: EXIT_BAD_INPUT,
    }
}

/// Loads the module into an engine whose memory ceiling is
/// `memory_ceiling_bytes` (the run's own memory limit, so that the flag is
/// never silently capped).
fn load(
    args: &ModuleArgs,
    memory_ceiling_bytes: u64,
    compile_bounds: Option<CompileBounds>,
) -> Result<(PluginEngine, Arc<LoadedModule>), Failure> {
    let engine = new_engine(
        args.cache_dir.clone(),
        args.no_cache,
        memory_ceiling_bytes,
        compile_bounds,
    )?;
    let module = load_named(&engine, &args.module, "--module")?;
    Ok((engine, module))
}

/// An engine for offline calls, one at a time, caching compiled components
/// in `cache_dir` (or the default one) unless `no_cache`.
pub(super) fn new_engine(
    cache_dir: Option<PathBuf>,
    no_cache: bool,
    memory_ceiling_bytes: u64,
    compile_bounds: Option<CompileBounds>,
) -> Result<PluginEngine, Failure> {
    let cache_dir = if no_cache {
        None
    } else {
        cache_dir.or_else(default_cache_dir)
    };
    PluginEngine::new(EngineConfig {
        cache_dir,
        // One call at a time: a pool of two slots is plenty.
        concurrent_calls_max: 2,
        memory_ceiling_bytes,
        compile_bounds,
        // Nothing here to keep the compile from: the user waits for it.
        guest_nice: 0,
        ..EngineConfig::default()
    })
    .map_err(|e| bad_input(format!("cannot start the wasm engine: {e:#}")))
}

/// Loads `name`, a built-in assignor or a component file (a file of that
/// name wins); `flag` names the argument in the error.
pub(super) fn load_named(
    engine: &PluginEngine,
    name: &str,
    flag: &str,
) -> Result<Arc<LoadedModule>, Failure> {
    let path = Path::new(name);
    if BUILTIN_NAMES.contains(&name) && !path.exists() {
        Ok(engine.load_builtin(name)?)
    } else if path.exists() {
        Ok(engine.load_file(path)?)
    } else {
        Err(bad_input(format!(
            "{flag} {name:?} is neither a built-in assignor ({}) nor an existing file",
            BUILTIN_NAMES.join(", ")
        )))
    }
}

fn read_input(path: &Path) -> Result<String, Failure> {
    let mut text = String::new();
    let read = if path == Path::new("-") {
        std::io::stdin().read_to_string(&mut text).map(|_| ())
    } else {
        std::fs::read_to_string(path).map(|t| text = t)
    };
    read.map_err(|e| bad_input(format!("cannot read input {}: {e}", path.display())))?;
    Ok(text)
}

pub fn run(args: RunArgs) -> Result<(), Failure> {
    let text = read_input(&args.input)?;
    let mut input = parse_input(&text, &InputLimits::default())
        .map_err(|e| bad_input(format!("{}: {e}", args.input.display())))?;
    merge_params(&mut input.params, &args.params).map_err(|e| bad_input(e.to_string()))?;
    let limits = args.limits.limits();
    let (engine, module) = load(
        &args.module,
        limits.memory_max_bytes,
        args.limits.compile_bounds(),
    )?;
    let outcome = engine.assign(&module, &input, &limits)?;
    let doc = assignment_to_json(&input, &outcome.assignment);
    print_one_member_per_line(&doc);
    if args.stats {
        let s = outcome.stats;
        eprintln!(
            "compile_ms={:.3} instantiate_ms={:.3} call_ms={:.3} validate_ms={:.3} fuel={}",
            module.compile_ms, s.instantiate_ms, s.call_ms, s.validate_ms, s.fuel
        );
    }
    Ok(())
}

pub fn info(args: InfoArgs) -> Result<(), Failure> {
    let bounds = std::env::current_exe().ok().map(CompileBounds::new);
    let (_engine, module) = load(&args.module, Limits::default().memory_max_bytes, bounds)?;
    // The id first, then what the registry shows of `info()`.
    let mut doc = json!({ "id": module.id });
    if let (Some(doc), serde_json::Value::Object(info)) =
        (doc.as_object_mut(), crate::registry::info_json(&module))
    {
        doc.extend(info);
    }
    outln!(
        "{}",
        serde_json::to_string_pretty(&doc).expect("a JSON value always serializes")
    );
    Ok(())
}

/// Prints an Assignment document with one member per line: readable for a
/// handful of members, greppable for thousands, and still one JSON value.
fn print_one_member_per_line(doc: &serde_json::Value) {
    use std::io::Write;
    let members = doc
        .as_object()
        .expect("an Assignment document is an object");
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut write = || -> std::io::Result<()> {
        writeln!(out, "{{")?;
        for (i, (id, entry)) in members.iter().enumerate() {
            let separator = if i + 1 < members.len() { "," } else { "" };
            writeln!(
                out,
                "  {}: {}{separator}",
                serde_json::Value::from(id.as_str()),
                entry
            )?;
        }
        writeln!(out, "}}")?;
        out.flush()
    };
    // A closed stdout (`assignd run … | head`) is not an error worth a
    // panic; the answer was computed and validated either way.
    let _ = write();
}
