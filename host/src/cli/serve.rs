//! `assignd serve`: the coordinator over HTTP. Recovers the record log in
//! DIR/log (replaying it into the core), starts the plugin engine
//! (compiled assignors cached in DIR/cache), the module registry (uploaded
//! assignors in DIR/modules), the runtime and its ticker, finds the admin
//! token (flag, environment, or DIR/admin-token, generated at first start),
//! binds the listener, prints `listening on http://ADDR` (the real address,
//! so `--listen 127.0.0.1:0` works) and serves until SIGTERM or ctrl-c.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::admin_token;
use super::limits::LimitArgs;
use super::{EXIT_BAD_INPUT, Failure};
use crate::api::AdminToken;
use crate::log::{FsyncPolicy, LogSink, ScanMode, lock, log_dir, scan};
use crate::plugins::{EngineConfig, PluginEngine};
use crate::protocol::core::Coordinator;
use crate::registry::Registry;
use crate::runtime::{Clock, Runtime, RuntimeConfig, TICK_INTERVAL_MS};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7070")]
    listen: String,
    /// Where assignd keeps its files (created if missing): the record log
    /// in DIR/log, compiled assignors in DIR/cache, uploaded assignors in
    /// DIR/modules.
    #[arg(long, env = "ASSIGND_DATA_DIR", value_name = "DIR")]
    data_dir: PathBuf,
    /// When changes are made durable before they are acknowledged:
    /// `always` fsyncs (group-committed); `never` leaves it to the OS, which
    /// survives a crash of assignd but may lose the last seconds of
    /// acknowledged changes on power failure or kernel crash.
    #[arg(long, value_enum, default_value = "always")]
    fsync: FsyncPolicy,
    /// Assignor calls that may run at once (more wait for a slot).
    #[arg(long, value_name = "N", default_value_t = EngineConfig::default().concurrent_calls_max,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    concurrent_calls_max: u32,
    /// The admin token every route but the member heartbeat, /healthz and
    /// /v1/openapi.json requires (`Authorization: Bearer TOKEN`); 16 to
    /// 1024 visible ASCII characters. Neither this nor the variable given:
    /// DIR/admin-token, generated (mode 0600) at first start.
    #[arg(
        long,
        env = ADMIN_TOKEN_ENV,
        value_name = "TOKEN",
        hide_env_values = true
    )]
    admin_token: Option<String>,
    /// `GET /metrics` needs the admin token too (Prometheus sends it with
    /// `authorization` in its scrape config); without it /metrics is open.
    #[arg(long)]
    metrics_auth: bool,
    #[command(flatten)]
    limits: LimitArgs,
}

/// The environment variable `--admin-token` falls back to.
const ADMIN_TOKEN_ENV: &str = "ASSIGND_ADMIN_TOKEN";

fn failure(message: String) -> Failure {
    Failure {
        message,
        exit_code: EXIT_BAD_INPUT,
    }
}

/// How long shutdown waits for assignor calls still running.
const SHUTDOWN_GRACE_MS: u64 = 2_000;

pub fn serve(mut args: ServeArgs) -> Result<(), Failure> {
    std::fs::create_dir_all(&args.data_dir).map_err(|e| {
        failure(format!(
            "cannot create data directory {}: {e}",
            args.data_dir.display()
        ))
    })?;
    // Only this user may read the log, the modules, the cache and the
    // token: 0700 on the data dir covers everything in it, whatever mode
    // each part creates its files with.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&args.data_dir, std::fs::Permissions::from_mode(0o700)).map_err(
            |e| {
                failure(format!(
                    "cannot make data directory {} private (mode 0700): {e}",
                    args.data_dir.display()
                ))
            },
        )?;
    }
    let log = log_dir(&args.data_dir);
    // Held until the process exits: no second host on this data dir.
    let _lock = lock(&log).map_err(|e| failure(e.to_string()))?;
    let admin =
        admin_token(args.admin_token.take(), &args.data_dir)?.guarding_metrics(args.metrics_auth);
    let started = std::time::Instant::now();
    let recovered = scan(&log, ScanMode::Open).map_err(|e| failure(e.to_string()))?;
    // Member ids derive from the seed and each group's issued-id count
    // (which the log keeps); a fresh seed per process keeps ids from
    // repeating across hosts that share no log.
    let seed = {
        use std::hash::{BuildHasher, Hasher};
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    };
    // Replay moves each snapshot into the core; the writer's shadow (what
    // it compacts from) is a copy of the result.
    let records = recovered.records.len();
    let mut core = Coordinator::new(seed);
    for record in recovered.records {
        core.apply_owned(record);
    }
    let sink = LogSink::open_with_state(&log, args.fsync, core.clone())
        .map_err(|e| failure(e.to_string()))?;
    tracing::info!(
        records,
        groups = core.groups().count(),
        elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
        "recovered the record log"
    );
    let limits = args.limits.limits();
    let engine = PluginEngine::new(EngineConfig {
        cache_dir: Some(args.data_dir.join("cache")),
        concurrent_calls_max: args.concurrent_calls_max,
        memory_ceiling_bytes: limits.memory_max_bytes,
        ..EngineConfig::default()
    })
    .map_err(|e| failure(format!("cannot start the wasm engine: {e:#}")))?;
    let registry = Registry::open(Arc::new(engine), &args.data_dir.join("modules"))
        .map_err(|e| failure(format!("cannot open the module registry: {e:#}")))?;
    tracing::info!(
        modules = registry.list().len(),
        "opened the module registry"
    );
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("assignd-worker")
        .build()
        .map_err(|e| failure(format!("cannot start the async runtime: {e}")))?;
    let result = tokio.block_on(async {
        let listener = tokio::net::TcpListener::bind(&args.listen)
            .await
            .map_err(|e| failure(format!("cannot listen on {}: {e}", args.listen)))?;
        let address = listener
            .local_addr()
            .map_err(|e| failure(format!("cannot read the bound address: {e}")))?;
        let runtime = Runtime::recovered(
            RuntimeConfig { seed, limits },
            core,
            Clock::monotonic(),
            Arc::new(sink),
            Arc::new(registry),
        );
        let ticker = runtime.spawn_ticker(Duration::from_millis(TICK_INTERVAL_MS));
        runtime.preload_builtins();
        let app = crate::api::app(runtime, admin);
        {
            let mut stdout = std::io::stdout().lock();
            // The one line on stdout: scripts and tests read the address.
            let _ = writeln!(stdout, "listening on http://{address}");
            let _ = stdout.flush();
        }
        tracing::info!(%address, data_dir = %args.data_dir.display(), "serving");
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown_signal())
            .await
            .map_err(|e| failure(format!("serving failed: {e}")));
        ticker.abort();
        served
    });
    tokio.shutdown_timeout(Duration::from_millis(SHUTDOWN_GRACE_MS));
    result
}

/// The admin token (see [`admin_token::resolve`]); when it is the data
/// dir's file, its location goes to stderr for the operator and scripts:
/// `admin token in PATH`.
fn admin_token(given: Option<String>, data_dir: &Path) -> Result<AdminToken, Failure> {
    let (token, source) = admin_token::resolve(given, data_dir).map_err(failure)?;
    match source {
        admin_token::Source::Given => {
            tracing::info!("admin token from --admin-token or {ADMIN_TOKEN_ENV}");
        }
        admin_token::Source::File { path, generated } => {
            tracing::info!(path = %path.display(), generated, "admin token file");
            eprintln!("admin token in {}", path.display());
        }
    }
    AdminToken::new(&token).map_err(failure)
}

/// Resolves on ctrl-c or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for ctrl-c");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = terminate => {}
    }
    tracing::info!("shutting down");
}
