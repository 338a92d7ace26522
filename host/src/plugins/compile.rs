//! Compiling an untrusted component with the host's own work bounded
//! (invariant 7): Cranelift's time and memory grow with what a component
//! asks of it, not with its size (a crafted 174 KB module took 19.8 s and
//! 2.7 GB in process; two at once took the host to 6 GB and it kept
//! 1.9 GB after). So a component is compiled in a child process of the
//! host's own binary (`assignd compile-component`), under a cap on its
//! data memory (`RLIMIT_DATA`, set by the child before it compiles) and a
//! wall-clock limit (the parent kills it), below the host's CPU priority
//! (the guest threads' nice steps), with at most
//! [`CompileBounds::concurrent_max`] at once (past it: refused, not
//! queued). The child writes the precompiled artifact to stdout; the
//! parent reads at most [`CompileBounds::artifact_max_bytes`] of it and
//! loads it with `Component::deserialize`, so the host's memory holds only
//! the artifact, of a bounded size. The built-ins, which the host ships, compile
//! in process.
//!
//! It owns the child's protocol (component bytes on stdin, artifact on
//! stdout, one error line on stderr) and both of its ends.

use std::io::{Read, Write};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use wasmtime::{Config, Engine};

use super::error::PluginError;
use super::limits::{CompileBounds, WASM_STACK_MAX_BYTES};

/// The hidden subcommand the child runs.
pub const COMPILE_SUBCOMMAND: &str = "compile-component";

/// The child's exit code when a compile refuses the component.
const EXIT_REFUSED: i32 = 2;

/// Compiles running now, against [`CompileBounds::concurrent_max`].
#[derive(Debug, Default)]
pub(super) struct CompilesRunning(AtomicU32);

/// A compile's place among the running ones; dropping it frees it.
pub(super) struct CompilePermit<'a>(&'a CompilesRunning);

impl CompilesRunning {
    fn try_acquire(&self, max: u32) -> Option<CompilePermit<'_>> {
        self.0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()
            .map(|_| CompilePermit(self))
    }
}

impl Drop for CompilePermit<'_> {
    fn drop(&mut self) {
        self.0.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The engine settings compiled code depends on: the host's engine adds
/// its instance pool to them; the child compiles with them alone (the
/// pool changes nothing in the artifact, and would reserve address space
/// the child's memory cap must not pay for).
pub fn compile_config() -> Config {
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .consume_fuel(true)
        .epoch_interruption(true)
        .max_wasm_stack(WASM_STACK_MAX_BYTES)
        .cranelift_opt_level(wasmtime::OptLevel::Speed);
    config
}

/// Compiles `bytes` in a child process under `bounds`, `nice_steps` nice
/// values below the calling thread; returns the precompiled artifact.
pub(super) fn compile_in_child(
    bounds: &CompileBounds,
    running: &CompilesRunning,
    bytes: &[u8],
    nice_steps: u8,
) -> Result<Vec<u8>, PluginError> {
    let _permit = running
        .try_acquire(bounds.concurrent_max)
        .ok_or(PluginError::CompileBusy {
            running: bounds.concurrent_max,
        })?;
    let limit_ms = bounds.time_limit_ms(bytes.len());
    let mut child = spawn_compiler(bounds, nice_steps)?;
    let started = Instant::now();
    let deadline = started + Duration::from_millis(limit_ms);
    let mut stdin = child.stdin.take().expect("piped");
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let over_limit = &AtomicBool::new(false);
    std::thread::scope(|scope| {
        // A child that dies early closes its stdin: the write fails, and
        // its exit says why.
        scope.spawn(move || {
            let _ = stdin.write_all(bytes);
        });
        let artifact_max_bytes = bounds.artifact_max_bytes;
        let artifact =
            scope.spawn(move || read_artifact(&mut stdout, artifact_max_bytes, over_limit));
        let message = scope.spawn(move || {
            let mut out = String::new();
            let _ = stderr.read_to_string(&mut out);
            out
        });
        let status = wait_for_compiler(&mut child, deadline, limit_ms, over_limit)?;
        let artifact = artifact.join().expect("reader thread");
        let message = message.join().expect("reader thread");
        if over_limit.load(Ordering::SeqCst) {
            return Err(PluginError::CompileOutputTooLarge {
                limit_bytes: artifact_max_bytes,
            });
        }
        compiler_outcome(&status, artifact, message.trim(), bounds)
    })
}

/// Starts the compiler process: the host's own binary, its three streams
/// piped.
fn spawn_compiler(bounds: &CompileBounds, nice_steps: u8) -> Result<Child, PluginError> {
    Command::new(&bounds.exe)
        .arg(COMPILE_SUBCOMMAND)
        .arg("--memory-max-bytes")
        .arg(bounds.memory_max_bytes.to_string())
        .arg("--nice-steps")
        .arg(nice_steps.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            PluginError::Compile(format!(
                "cannot start the compiler process {}: {e}",
                bounds.exe.display()
            ))
        })
}

/// Reads the artifact from the child's stdout, at most
/// `artifact_max_bytes` of it; sets `over_limit` for one more.
fn read_artifact(
    stdout: &mut ChildStdout,
    artifact_max_bytes: u64,
    over_limit: &AtomicBool,
) -> std::io::Result<Vec<u8>> {
    // One byte past the limit tells an artifact over it; the child, its
    // output unread from then on, blocks until killed.
    let mut out = Vec::new();
    let read = stdout
        .take(artifact_max_bytes.saturating_add(1))
        .read_to_end(&mut out);
    if out.len() as u64 > artifact_max_bytes {
        over_limit.store(true, Ordering::SeqCst);
    }
    read.map(|_| out)
}

/// Waits for the compiler process to exit: kills it at `deadline` (a
/// timeout) or once its artifact is over the limit (then its status).
fn wait_for_compiler(
    child: &mut Child,
    deadline: Instant,
    limit_ms: u64,
    over_limit: &AtomicBool,
) -> Result<ExitStatus, PluginError> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ok(status),
            Ok(None) if over_limit.load(Ordering::SeqCst) => {
                let _ = child.kill();
                return child.wait().map_err(|e| {
                    PluginError::Compile(format!("waiting for the compiler process: {e}"))
                });
            }
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(PluginError::CompileTimeout { limit_ms });
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(PluginError::Compile(format!(
                    "waiting for the compiler process: {e}"
                )));
            }
        }
    }
}

/// What a compiler process that exited within its limits produced: the
/// artifact it wrote, or why it failed (a crash logged as an error).
fn compiler_outcome(
    status: &ExitStatus,
    artifact: std::io::Result<Vec<u8>>,
    message: &str,
    bounds: &CompileBounds,
) -> Result<Vec<u8>, PluginError> {
    if status.success() {
        return artifact
            .map_err(|e| PluginError::Compile(format!("reading the compiler's output: {e}")));
    }
    let error = child_failure(status, message, bounds.memory_max_bytes);
    if let PluginError::CompileCrashed { detail } = &error {
        // Not the component's limits doing their job: a bug in the
        // compiler, or the machine short of memory.
        tracing::error!(%detail, "the compiler process crashed");
    }
    Err(error)
}

/// Why the compiler process ended without an artifact, from its exit
/// status and its stderr: a refusal of the component (exit 2, one line);
/// its memory cap (an allocation past `RLIMIT_DATA` aborts the child
/// with `memory allocation of N bytes failed`, or a mapping fails with
/// ENOMEM); or a crash of the compiler itself (a panic, a signal, another
/// exit), quoted by the line that explains it, not by Rust's hint about
/// backtraces that follows it.
fn child_failure(status: &ExitStatus, stderr: &str, memory_max_bytes: u64) -> PluginError {
    let lines: Vec<&str> = stderr.lines().map(str::trim_end).collect();
    let out_of_memory = lines.iter().find(|line| {
        (line.starts_with("memory allocation of ") && line.ends_with(" failed"))
            || line.contains("Cannot allocate memory (os error 12)")
    });
    if let Some(line) = out_of_memory {
        return PluginError::CompileMemoryLimit {
            limit_bytes: memory_max_bytes,
            detail: (*line).to_owned(),
        };
    }
    if status.code() == Some(EXIT_REFUSED) {
        return PluginError::Compile(stderr.trim().to_owned());
    }
    let panic = lines
        .iter()
        .position(|line| line.starts_with("thread '") && line.contains("' panicked at "))
        .map(|at| {
            let place = lines[at];
            // `thread 'main' panicked at FILE:LINE:COL:` then the message.
            let message = lines.get(at + 1).filter(|next| is_explanation(next));
            match message {
                Some(message) => format!("the compiler panicked: {message} ({place})"),
                None => format!("the compiler panicked: {place}"),
            }
        });
    let last = lines.iter().rev().find(|line| is_explanation(line));
    let detail = match (panic, exit_signal(status), last) {
        (Some(panic), _, _) => panic,
        (None, Some(signal), last) => {
            let mut detail = format!("the compiler process was killed by signal {signal}");
            if signal == libc::SIGKILL {
                // The parent kills it only past its time or artifact
                // limit, both told apart before this.
                detail.push_str(" (by the system's out-of-memory killer, most likely)");
            }
            if let Some(last) = last {
                detail.push_str(&format!(": {last}"));
            }
            detail
        }
        (None, None, Some(last)) => format!("the compiler process {status}: {last}"),
        (None, None, None) => format!("the compiler process {status}"),
    };
    PluginError::CompileCrashed { detail }
}

/// Whether a line of the child's stderr says something about the failure:
/// not blank, not a backtrace frame, not Rust's notes about backtraces.
fn is_explanation(line: &&str) -> bool {
    !line.trim().is_empty()
        && !line.starts_with(char::is_whitespace)
        && !line.starts_with("note: ")
        && !line.starts_with("stack backtrace:")
        && !line.starts_with("skipping backtrace printing")
}

#[cfg(unix)]
fn exit_signal(status: &std::process::ExitStatus) -> Option<i32> {
    std::os::unix::process::ExitStatusExt::signal(status)
}

#[cfg(not(unix))]
fn exit_signal(_status: &std::process::ExitStatus) -> Option<i32> {
    None
}

/// The child's side: caps its data memory at `memory_max_bytes`, lowers
/// its priority by `nice_steps` (first, so that any thread it starts
/// inherits it: a crafted component keeps a core busy for its whole time
/// limit, and `--compiles-max` of them every core of a 2-core host),
/// reads a component on stdin, writes its precompiled artifact on stdout.
/// A component that does not compile is one line on stderr and exit 2.
pub fn compile_child(memory_max_bytes: u64, nice_steps: u8) -> i32 {
    super::guest_threads::lower_priority(nice_steps);
    let limit = libc::rlimit {
        rlim_cur: memory_max_bytes as libc::rlim_t,
        rlim_max: memory_max_bytes as libc::rlim_t,
    };
    // SAFETY: setrlimit reads the struct it is given and nothing else.
    if unsafe { libc::setrlimit(libc::RLIMIT_DATA, &limit) } != 0 {
        eprintln!(
            "cannot cap the compiler's memory: {}",
            std::io::Error::last_os_error()
        );
        return 1;
    }
    let mut bytes = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut bytes) {
        eprintln!("cannot read the component: {e}");
        return 1;
    }
    let engine = match Engine::new(&compile_config()) {
        Ok(engine) => engine,
        Err(e) => {
            eprintln!("cannot start the wasm engine: {e:#}");
            return 1;
        }
    };
    match engine.precompile_component(&bytes) {
        Ok(artifact) => match std::io::stdout().lock().write_all(&artifact) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("cannot write the artifact: {e}");
                1
            }
        },
        Err(e) => {
            eprintln!("{}", format!("{e:#}").replace('\n', " "));
            EXIT_REFUSED
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn compiles_past_the_cap_are_refused_and_a_permit_frees_its_place() {
        let running = CompilesRunning::default();
        let first = running.try_acquire(2).expect("one");
        let second = running.try_acquire(2).expect("two");
        assert!(running.try_acquire(2).is_none(), "a third is refused");
        drop(first);
        let third = running.try_acquire(2).expect("a place again");
        drop((second, third));
        assert_eq!(running.0.load(Ordering::SeqCst), 0);
    }

    fn exited(code: i32) -> std::process::ExitStatus {
        std::os::unix::process::ExitStatusExt::from_raw(code << 8)
    }

    fn killed(signal: i32) -> std::process::ExitStatus {
        std::os::unix::process::ExitStatusExt::from_raw(signal)
    }

    const HINT: &str =
        "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace";

    #[test]
    fn an_allocation_past_the_cap_quotes_its_line_not_the_backtrace_hint() {
        let stderr = format!("memory allocation of 81920 bytes failed\n{HINT}\n");
        let error = child_failure(&killed(libc::SIGABRT), &stderr, 1 << 20);
        assert_eq!(error.code(), "compile_memory_limit");
        assert_eq!(
            error.to_string(),
            "compiling the component needed more than its memory limit of 1048576 bytes \
             (memory allocation of 81920 bytes failed)"
        );
        // With RUST_BACKTRACE set, a second allocation fails while the
        // backtrace is printed.
        let stderr = "memory allocation of 81920 bytes failed\nstack backtrace:\n\
                      memory allocation of 98304 bytes failed\n\
                      skipping backtrace printing to avoid potential recursion\n";
        let error = child_failure(&killed(libc::SIGABRT), stderr, 1 << 20);
        assert!(
            error
                .to_string()
                .ends_with("(memory allocation of 81920 bytes failed)"),
            "{error}"
        );
        let stderr = "failed to compile: Cannot allocate memory (os error 12)";
        let error = child_failure(&exited(EXIT_REFUSED), stderr, 1 << 20);
        assert_eq!(error.code(), "compile_memory_limit");
    }

    #[test]
    fn a_panic_of_the_compiler_quotes_its_message() {
        let stderr = format!(
            "thread 'main' panicked at cranelift/src/x.rs:10:5:\nindex out of bounds\n{HINT}\n"
        );
        let error = child_failure(&killed(libc::SIGABRT), &stderr, 1 << 20);
        assert_eq!(error.code(), "compile_crashed");
        assert_eq!(
            error.to_string(),
            "the compiler process crashed: the compiler panicked: index out of bounds \
             (thread 'main' panicked at cranelift/src/x.rs:10:5:)"
        );
        let error = child_failure(&exited(101), &stderr, 1 << 20);
        assert_eq!(error.code(), "compile_crashed");
    }

    #[test]
    fn a_signal_or_an_exit_of_the_compiler_says_which() {
        let error = child_failure(&killed(libc::SIGSEGV), "", 1 << 20);
        assert_eq!(error.code(), "compile_crashed");
        assert!(error.to_string().contains("killed by signal 11"), "{error}");
        let error = child_failure(&killed(libc::SIGKILL), HINT, 1 << 20);
        assert!(
            error
                .to_string()
                .ends_with("(by the system's out-of-memory killer, most likely)"),
            "{error}"
        );
        let error = child_failure(
            &exited(1),
            "cannot read the component: broken pipe\n",
            1 << 20,
        );
        assert_eq!(error.code(), "compile_crashed");
        assert!(
            error
                .to_string()
                .ends_with("exit status: 1: cannot read the component: broken pipe"),
            "{error}"
        );
        let error = child_failure(&exited(EXIT_REFUSED), "invalid wasm\n", 1 << 20);
        assert_eq!(
            (error.code(), error.to_string().as_str()),
            (
                "compile_failed",
                "the component does not compile: invalid wasm"
            )
        );
    }

    #[test]
    fn the_time_limit_grows_with_the_size() {
        let bounds = CompileBounds::new(PathBuf::from("assignd"));
        assert_eq!(bounds.time_limit_ms(0), 10_000);
        assert_eq!(bounds.time_limit_ms(1 << 20), 14_000);
        assert_eq!(bounds.time_limit_ms(12 << 20), 58_000);
    }
}
