//! `assignd serve`: the coordinator over HTTP. Opens the data dir's shards
//! (one record log each in DIR/shards/NNNN, a data dir of one log migrated
//! on first start; `crate::log::shards`), recovers every shard's log
//! (replaying it into the shard's core), starts the plugin engine
//! (compiled assignors cached in DIR/cache), the module registry (uploaded
//! assignors in DIR/modules), the runtime and its ticker, finds the admin
//! token (flag, environment, or DIR/admin-token, generated at first start),
//! binds the listener, prints `listening on http://ADDR` (the real address,
//! so `--listen 127.0.0.1:0` works) and serves until SIGTERM or ctrl-c,
//! then drains for at most `--shutdown-drain-ms` ([`crate::api::server`]).
//! At start it raises its soft descriptor limit to the hard one and caps
//! connections below it, keeping [`DESCRIPTORS_RESERVED`] (and
//! [`DESCRIPTORS_PER_SHARD`] for each shard) for the logs, the module
//! store and the runtime.
//!
//! With `--etcd` it runs one node of a cluster instead ([`crate::cluster`]):
//! no local shard logs; the shards placement gives the node are loaded
//! from etcd and served, and on SIGTERM the node hands them over before
//! the listener drains.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use super::admin_token::{ADMIN_TOKEN_ENV, TokenArgs};
use super::limits::LimitArgs;
use super::{EXIT_BAD_INPUT, Failure};
use crate::api::server::ServerConfig;
use crate::cluster::store::EtcdStore;
use crate::cluster::{Etcd, EtcdConfig, EtcdModules, Node, NodeConfig};
use crate::log::shards::recorded_shard_count;
use crate::log::{FsyncPolicy, Opened, ShardedDir, lock};
use crate::plugins::{EngineConfig, GUEST_NICE_MAX, PluginEngine};
use crate::protocol::shard::{SHARD_COUNT_DEFAULT, SHARD_COUNT_MAX};
use crate::registry::{ModuleCaps, Registry};
use crate::rollout_runner::{RolloutStore, Rollouts};
use crate::runtime::{
    AdmissionPolicy, Clock, GROUPS_MAX_DEFAULT, Runtime, RuntimeConfig, TICK_INTERVAL_MS,
};

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7070")]
    listen: String,
    /// Where assignd keeps its files (created if missing): one record log
    /// per shard in DIR/shards/NNNN, compiled assignors in DIR/cache,
    /// uploaded assignors in DIR/modules.
    #[arg(long, env = "ASSIGND_DATA_DIR", value_name = "DIR")]
    data_dir: PathBuf,
    /// The shard count of a new data dir: its groups are spread over this
    /// many shards (by a hash of the group's name), each with its own core,
    /// lock, timers and record log, run concurrently. Fixed when the data
    /// dir is created (an existing one keeps its count; another value is
    /// refused). [default: 64]
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(SHARD_COUNT_MAX)))]
    shards: Option<u32>,
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
    /// Shadow assignor calls that may run at once, on threads of their own
    /// at `SCHED_IDLE` (below every live call) with instance slots of
    /// their own; a shadow call past them is not run and counts as
    /// skipped (docs/shadow.md). [default: one per core, at most 16]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    shadow_calls_max: Option<u32>,
    /// How many nice values below the host's own priority assignor calls,
    /// previews, upload self-tests, params checks and the compiles of
    /// uploaded components run: guests get the CPU the host's threads
    /// (heartbeats, timers, record writes) leave, and their wall-clock
    /// limits (a call's, a compile's) run on while they wait for it. 0
    /// runs them at the host's priority; nice 19 is the lowest any thread
    /// gets. Nice weighs against every process of the machine: where other
    /// busy work shares it, a lower value (10) keeps guests from starving.
    #[arg(long, value_name = "STEPS", default_value_t = EngineConfig::default().guest_nice,
          value_parser = clap::value_parser!(u8).range(0..=i64::from(GUEST_NICE_MAX)))]
    guest_nice: u8,
    #[command(flatten)]
    tokens: TokenArgs,
    /// Connections served at once; one more is answered 503
    /// `too_many_connections` and closed. Default: the descriptor limit
    /// (RLIMIT_NOFILE, raised to its hard limit) less 128, less 3 per
    /// shard, at most 10000; a value above the limit less that reserve is
    /// refused at start. The cap in force is printed on stderr at start.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    connections_max: Option<u64>,
    /// How long a request's head may take to arrive, counted from when the
    /// connection starts waiting for it: a kept-alive connection idle this
    /// long is closed too.
    #[arg(long, value_name = "MS", default_value_t = ServerConfig::default().header_read_timeout_ms,
          value_parser = clap::value_parser!(u64).range(1..))]
    header_read_timeout_ms: u64,
    /// How long a request's body may take to arrive after its head (then
    /// 408 `request_timeout`).
    #[arg(long, value_name = "MS", default_value_t = ServerConfig::default().body_read_timeout_ms,
          value_parser = clap::value_parser!(u64).range(1..))]
    body_read_timeout_ms: u64,
    /// On SIGTERM or ctrl-c: how long requests in flight may finish before
    /// the connections left are closed and the data dir is released.
    #[arg(long, value_name = "MS", default_value_t = ServerConfig::default().shutdown_drain_ms)]
    shutdown_drain_ms: u64,
    /// Require a member token of every group: a config without
    /// `member_token` is refused (400 `member_token_required`), and so is
    /// every heartbeat to a group without one (403, for groups created
    /// before).
    #[arg(long)]
    require_member_token: bool,
    /// Joins that add a member to a group without a member token: how many
    /// a group takes at once (then 429 `join_rate_limited` with
    /// `Retry-After`)...
    #[arg(long, value_name = "N", default_value_t = AdmissionPolicy::default().tokenless_join_burst_max)]
    tokenless_join_burst_max: u32,
    /// ...and how many per second after that.
    #[arg(long, value_name = "N", default_value_t = AdmissionPolicy::default().tokenless_join_rate_per_s,
          value_parser = clap::value_parser!(u32).range(1..))]
    tokenless_join_rate_per_s: u32,
    /// `GET /metrics` needs the admin token too (Prometheus sends it with
    /// `authorization` in its scrape config); without it /metrics is open.
    #[arg(long)]
    metrics_auth: bool,
    /// Groups this host serves at most: creating one more is refused (409
    /// `groups_max_reached`). In a cluster it counts the groups of the
    /// shards this node serves; a takeover may bring it past, and then no
    /// group is created on it until it is below again.
    #[arg(long, value_name = "N", default_value_t = GROUPS_MAX_DEFAULT)]
    groups_max: u64,
    /// Uploaded modules kept at most: one more is refused (409
    /// `modules_max_reached`). In a cluster it counts the cluster's
    /// modules (stored once for the cluster).
    #[arg(long, value_name = "N", default_value_t = ModuleCaps::default().modules_max)]
    modules_max: u64,
    /// The uploaded modules' bytes in total, at most: an upload past it is
    /// refused (409 `module_bytes_max_reached`). In a cluster it counts the
    /// cluster's modules, which etcd keeps.
    #[arg(long, value_name = "BYTES", default_value_t = ModuleCaps::default().module_bytes_max)]
    module_bytes_max: u64,
    /// Routes watchers (blocking queries waiting, event streams open)
    /// this host holds at most; one more is refused (503
    /// `too_many_watchers`, with `Retry-After`).
    #[arg(long, value_name = "N", default_value_t = crate::api::routes::ROUTES_WATCHERS_MAX_DEFAULT,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    routes_watchers_max: usize,
    /// How long a routes event stream may leave a table unread before it
    /// is closed (its reader reconnects with Last-Event-ID).
    #[arg(long, value_name = "MS", default_value_t = crate::api::routes::ROUTES_SLOW_READER_MS_DEFAULT,
          value_parser = clap::value_parser!(u64).range(1..))]
    routes_slow_reader_ms: u64,
    /// Cluster mode: the client URLs of the etcd cluster that keeps the
    /// cluster's shards (comma-separated). Shards are then owned by the
    /// cluster's live nodes under etcd leases, and their records are kept
    /// in etcd, not in DIR (which keeps only caches and modules).
    #[arg(long, value_name = "URLS", value_delimiter = ',')]
    etcd: Vec<String>,
    /// Cluster mode: this node's name, unique among the live nodes.
    #[arg(long, value_name = "NAME", requires = "etcd")]
    node: Option<String>,
    /// Cluster mode: the URL other nodes and clients reach this node at
    /// [default: http:// and the listening address].
    #[arg(long, value_name = "URL", requires = "etcd")]
    advertise: Option<String>,
    /// Cluster mode: the node's lease. A node that stops renewing it (it
    /// died, or is cut off from etcd) loses its shards to the others this
    /// long after its last renewal; it renews every third of it. Whole
    /// seconds (etcd's unit), rounded up.
    #[arg(long, value_name = "MS", default_value_t = 5_000, requires = "etcd",
          value_parser = clap::value_parser!(u64).range(1_000..=600_000))]
    lease_ttl_ms: u64,
    /// Cluster mode: how much longer than its plain lease (`lease_ms`) a
    /// member keeps its tasks while none of its heartbeats reaches the
    /// group's coordinator (refused, redirected, `shard_unavailable`):
    /// the time a dead node's shards may take to be taken over. Each
    /// answer carries the longer lease as `unreached_lease_ms`; it also
    /// delays, by as much, when a crashed static member's new incarnation
    /// gets its tasks [default: 2 × --lease-ttl-ms].
    #[arg(long, value_name = "MS", requires = "etcd",
          value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    unreached_grace_ms: Option<u64>,
    /// Cluster mode: every key of the cluster in etcd starts with it.
    #[arg(
        long,
        value_name = "PREFIX",
        default_value = "/assignd/",
        requires = "etcd"
    )]
    etcd_prefix: String,
    /// Cluster mode: how often etcd's history is compacted (by the live
    /// node of the lowest name), up to the revision of the compaction
    /// before: etcd keeps every revision until told, and its database
    /// would grow with every write.
    #[arg(long, value_name = "MS", default_value_t = NodeConfig::COMPACTION_INTERVAL_DEFAULT.as_millis() as u64, requires = "etcd",
          value_parser = clap::value_parser!(u64).range(1_000..))]
    etcd_compaction_interval_ms: u64,
    #[command(flatten)]
    limits: LimitArgs,
}

/// Descriptors kept out of the connection cap's reach: for the record log
/// (segments, compaction, the directory and its lock), the module store
/// and its cache, the listener, stdio and the runtime's own.
pub const DESCRIPTORS_RESERVED: u64 = 128;

/// Descriptors kept for each shard besides: its segment, its folder, and
/// compaction's new file.
pub const DESCRIPTORS_PER_SHARD: u64 = 3;

/// The connection cap when the descriptor limit allows more.
const CONNECTIONS_MAX_DEFAULT: u64 = 10_000;

fn failure(message: String) -> Failure {
    Failure {
        message,
        exit_code: EXIT_BAD_INPUT,
    }
}

/// How long shutdown waits for assignor calls still running.
const SHUTDOWN_GRACE_MS: u64 = 2_000;

pub fn serve(mut args: ServeArgs) -> Result<(), Failure> {
    // Before anything records: every family described, its known series
    // at zero.
    crate::metric_catalog::install();
    let (server, cap) = plan_connections(&args)?;
    make_data_dir(&args.data_dir)?;
    // Held until the process exits: no second host on this data dir.
    let _lock = lock(&args.data_dir).map_err(|e| failure(e.to_string()))?;
    if !args.etcd.is_empty() {
        return serve_cluster(args, server, &cap);
    }
    let (store, shard_count) = open_shards(&args)?;
    let (admin, token) = args
        .tokens
        .load_keeping(None, &args.data_dir)
        .map_err(failure)?;
    let admin = admin.guarding_metrics(args.metrics_auth);
    let started = std::time::Instant::now();
    let registry = open_registry(&args)?;
    let tokio = async_runtime()?;
    let result = tokio.block_on(async {
        let (listener, address) = bind(&args.listen).await?;
        let runtime = recover_shards(&args, store, shard_count, registry, started)?;
        runtime.spawn_ticker(Duration::from_millis(TICK_INTERVAL_MS));
        runtime.preload_builtins();
        let app = crate::api::app_with(runtime.clone(), admin, watchers(&args));
        let rollouts = RolloutStore::in_data_dir(&args.data_dir);
        let app = Rollouts::new(runtime.clone(), rollouts).serve(app, &token);
        let stop = shutdown_signal()?;
        log_started(&cap);
        print_address(address);
        tracing::info!(%address, data_dir = %args.data_dir.display(), shards = shard_count, "serving");
        log_connection_limits(&server);
        crate::api::server::serve(listener, app, server, stop).await;
        runtime.stop_timers();
        // Every shard flushed and its log released.
        runtime.unload_all().await;
        Ok(())
    });
    tokio.shutdown_timeout(Duration::from_millis(SHUTDOWN_GRACE_MS));
    result
}

/// The server's bounds, and the line that says how the connection cap was
/// chosen. Checked before anything is written: the shards the data dir
/// has, or will have, keep descriptors too.
fn plan_connections(args: &ServeArgs) -> Result<(ServerConfig, String), Failure> {
    let planned_shards = recorded_shard_count(&args.data_dir)
        .map_err(|e| failure(e.to_string()))?
        .or(args.shards)
        .unwrap_or(SHARD_COUNT_DEFAULT);
    let descriptors = raise_descriptor_limit();
    let server = server_config(
        args,
        descriptors,
        DESCRIPTORS_RESERVED + DESCRIPTORS_PER_SHARD * u64::from(planned_shards),
    )?;
    let cap = connection_cap_line(&server, args.connections_max, descriptors, planned_shards);
    Ok((server, cap))
}

/// Creates the data dir, readable by this user only: the log, the modules,
/// the cache and the token are private, and 0700 on the data dir covers
/// everything in it, whatever mode each part creates its files with.
fn make_data_dir(data_dir: &Path) -> Result<(), Failure> {
    std::fs::create_dir_all(data_dir).map_err(|e| {
        failure(format!(
            "cannot create data directory {}: {e}",
            data_dir.display()
        ))
    })?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(data_dir, std::fs::Permissions::from_mode(0o700)).map_err(
            |e| {
                failure(format!(
                    "cannot make data directory {} private (mode 0700): {e}",
                    data_dir.display()
                ))
            },
        )?;
    }
    Ok(())
}

/// The data dir's shards (created or migrated on first start), and how
/// many there are.
fn open_shards(args: &ServeArgs) -> Result<(ShardedDir, u32), Failure> {
    let (store, opened) =
        ShardedDir::open(&args.data_dir, args.shards, SHARD_COUNT_DEFAULT, args.fsync)
            .map_err(|e| failure(e.to_string()))?;
    let shard_count = store.shard_count();
    match opened {
        Opened::Existing => {}
        Opened::Created => tracing::info!(shards = shard_count, "created the data dir's shards"),
        Opened::Migrated { groups, kept } => tracing::warn!(
            shards = shard_count,
            groups,
            kept = %kept.display(),
            "migrated the data dir's single record log into shards; the old log is kept and may be removed"
        ),
    }
    Ok((store, shard_count))
}

/// The runtime over `store`, every shard's log recovered (several at
/// once) before the first request.
fn recover_shards(
    args: &ServeArgs,
    store: ShardedDir,
    shard_count: u32,
    registry: Registry,
    started: std::time::Instant,
) -> Result<Arc<Runtime>, Failure> {
    let runtime = Runtime::start(
        runtime_config(args, shard_count, 0),
        Clock::monotonic(),
        Arc::new(store),
        Arc::new(registry),
    )
    .map_err(|e| failure(e.to_string()))?;
    runtime.group_cap().set_max(args.groups_max);
    let statuses = runtime.shard_statuses();
    tracing::info!(
        shards = shard_count,
        groups = statuses.iter().map(|s| s.groups).sum::<u64>(),
        elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
        "recovered every shard's record log"
    );
    Ok(runtime)
}

/// The one line on stdout: scripts and tests read the address.
fn print_address(address: std::net::SocketAddr) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "listening on http://{address}");
    let _ = stdout.flush();
}

fn log_connection_limits(server: &ServerConfig) {
    tracing::info!(
        connections_max = server.connections_max,
        header_read_timeout_ms = server.header_read_timeout_ms,
        body_read_timeout_ms = server.body_read_timeout_ms,
        shutdown_drain_ms = server.shutdown_drain_ms,
        "connection limits"
    );
}

/// The engine (compiled assignors cached in DIR/cache) and the module
/// registry (DIR/modules).
fn open_registry(args: &ServeArgs) -> Result<Registry, Failure> {
    let limits = args.limits.limits();
    let engine = PluginEngine::new(EngineConfig {
        cache_dir: Some(args.data_dir.join("cache")),
        concurrent_calls_max: args.concurrent_calls_max,
        shadow_calls_max: args
            .shadow_calls_max
            .unwrap_or_else(crate::plugins::shadow_calls_default),
        memory_ceiling_bytes: limits.memory_max_bytes,
        compile_bounds: args.limits.compile_bounds(),
        guest_nice: args.guest_nice,
        ..EngineConfig::default()
    })
    .map_err(|e| failure(format!("cannot start the wasm engine: {e:#}")))?;
    let registry = Registry::open(Arc::new(engine), &args.data_dir.join("modules"))
        .map_err(|e| failure(format!("cannot open the module registry: {e:#}")))?
        .with_caps(ModuleCaps {
            modules_max: args.modules_max,
            module_bytes_max: args.module_bytes_max,
        });
    tracing::info!(
        modules = registry.list().len(),
        "opened the module registry"
    );
    Ok(registry)
}

/// The listener on `listen`, and the address it got (`:0` picks a port).
async fn bind(listen: &str) -> Result<(tokio::net::TcpListener, std::net::SocketAddr), Failure> {
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|e| failure(format!("cannot listen on {listen}: {e}")))?;
    let address = listener
        .local_addr()
        .map_err(|e| failure(format!("cannot read the bound address: {e}")))?;
    Ok((listener, address))
}

fn async_runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("assignd-worker")
        .build()
        .map_err(|e| failure(format!("cannot start the async runtime: {e}")))
}

/// `unreached_grace_ms`: see [`RuntimeConfig::unreached_grace_ms`].
fn runtime_config(args: &ServeArgs, shard_count: u32, unreached_grace_ms: u64) -> RuntimeConfig {
    // Member ids derive from the seed and each group's issued-id count
    // (which the log keeps); a fresh seed per process keeps ids from
    // repeating across hosts that share no log.
    let seed = {
        use std::hash::{BuildHasher, Hasher};
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    };
    RuntimeConfig {
        seed,
        limits: args.limits.limits(),
        admission: AdmissionPolicy {
            member_token_required: args.require_member_token,
            tokenless_join_burst_max: args.tokenless_join_burst_max,
            tokenless_join_rate_per_s: args.tokenless_join_rate_per_s,
        },
        shard_count,
        unreached_grace_ms,
    }
}

/// Copies the cluster's modules this node lacks into its registry (off
/// the async threads: each copy compiles).
/// `failing`: whether the last copy failed (a run of failures is logged
/// once).
async fn copy_modules(runtime: &Arc<Runtime>, failing: &mut bool) {
    let copier = runtime.clone();
    match tokio::task::spawn_blocking(move || copier.copy_missing_modules()).await {
        Ok(Ok(_)) => *failing = false,
        Ok(Err(error)) if !*failing => {
            *failing = true;
            tracing::warn!(error = %format!("{error:#}"), "copying the cluster's modules failed; retrying");
        }
        Ok(Err(_)) => {}
        Err(_) => tracing::error!("copying the cluster's modules panicked"),
    }
}

/// The node lease: whole seconds (etcd's unit), rounded up.
fn lease_ttl(lease_ttl_ms: u64) -> Duration {
    Duration::from_millis(lease_ttl_ms.div_ceil(1000) * 1000)
}

/// A takeover ends within two node lease TTLs: the dead node's lease runs
/// out (one TTL after its last renewal), a survivor's next placement round
/// claims the shard and replays it.
fn unreached_grace_ms(args: &ServeArgs) -> u64 {
    args.unreached_grace_ms
        .unwrap_or_else(|| 2 * lease_ttl(args.lease_ttl_ms).as_millis() as u64)
}

/// Cluster mode (`--etcd`): joins the cluster, serves the shards placement
/// gives this node, and on SIGTERM or ctrl-c leaves (deregisters, hands
/// every shard over) before the listener drains.
fn serve_cluster(mut args: ServeArgs, server: ServerConfig, cap: &str) -> Result<(), Failure> {
    let (name, token) = cluster_identity(&mut args)?;
    let admin = args.tokens.load(Some(token.clone()), &args.data_dir);
    let admin = admin.map_err(failure)?.guarding_metrics(args.metrics_auth);
    let registry = open_registry(&args)?;
    let tokio = async_runtime()?;
    let result = tokio.block_on(async {
        let (listener, address) = bind(&args.listen).await?;
        let (node, runtime, shard_count, store) =
            join_cluster(&args, name, &token, address, registry).await?;
        keep_modules_copied(&runtime).await;
        runtime.spawn_ticker(Duration::from_millis(TICK_INTERVAL_MS));
        runtime.preload_builtins();
        let stopped = stop_on_signal()?;
        let app =
            crate::api::cluster_app(runtime.clone(), admin, node.directory(), watchers(&args));
        let app = Rollouts::new(runtime.clone(), RolloutStore::Etcd(store)).serve(app, &token);
        // The API keeps answering (redirecting to the successors) until
        // the node has handed its shards over.
        let (placement, has_left) = spawn_placement(node, &runtime, stopped);
        log_started(cap);
        print_address(address);
        tracing::info!(%address, shards = shard_count, etcd = ?args.etcd, "serving as a cluster node");
        let served = crate::api::server::serve(listener, app, server, async {
            // The node hands its shards over first; the listener drains
            // after.
            let _ = has_left.await;
        });
        let (_, left) = tokio::join!(served, placement);
        if left.is_err() {
            tracing::error!("the placement task panicked");
        }
        runtime.stop_timers();
        runtime.unload_all().await;
        Ok(())
    });
    tokio.shutdown_timeout(Duration::from_millis(SHUTDOWN_GRACE_MS));
    result
}

/// The node's name and the cluster's admin token: a cluster node needs
/// both.
fn cluster_identity(args: &mut ServeArgs) -> Result<(String, String), Failure> {
    let name = args.node.clone().ok_or_else(|| {
        failure("--etcd needs --node NAME: each node of a cluster has its own".into())
    })?;
    let token = args.tokens.admin_token.take().ok_or_else(|| {
        failure(format!(
            "--etcd needs --admin-token (or {ADMIN_TOKEN_ENV}): every node of a cluster takes the cluster's one"
        ))
    })?;
    Ok((name, token))
}

/// Joins the cluster through etcd and starts the node's runtime, serving
/// no shard yet (placement loads them); the node, the runtime, the
/// cluster's shard count and the node's store (rollouts go in its etcd).
async fn join_cluster(
    args: &ServeArgs,
    name: String,
    token: &str,
    address: std::net::SocketAddr,
    registry: Registry,
) -> Result<(Node, Arc<Runtime>, u32, Arc<EtcdStore>), Failure> {
    let etcd = Etcd::connect(EtcdConfig::new(args.etcd.clone(), &args.etcd_prefix))
        .await
        .map_err(|e| failure(format!("cannot reach etcd: {e}")))?;
    let config = NodeConfig {
        name,
        advertise: args
            .advertise
            .clone()
            .unwrap_or_else(|| format!("http://{address}")),
        lease_ttl: lease_ttl(args.lease_ttl_ms),
        shard_count: args.shards.unwrap_or(SHARD_COUNT_DEFAULT),
        compaction_interval: Duration::from_millis(args.etcd_compaction_interval_ms),
        data_dir: args.data_dir.clone(),
    };
    let shard_count = config.shard_count;
    let modules = EtcdModules::new(etcd.clone(), tokio::runtime::Handle::current());
    let (node, store) = Node::join(etcd, config, token)
        .await
        .map_err(|e| failure(format!("cannot join the cluster: {e:#}")))?;
    let runtime = Runtime::start_serving(
        runtime_config(args, shard_count, unreached_grace_ms(args)),
        Clock::monotonic(),
        store.clone(),
        Arc::new(registry),
        &[],
    )
    .map_err(|e| failure(e.to_string()))?;
    runtime.group_cap().set_max(args.groups_max);
    runtime.share_modules(Arc::new(modules));
    Ok((node, runtime, shard_count, store))
}

/// Copies the cluster's modules now, before any shard (a group a node
/// loads finds the module it is bound to), and again every
/// `SYNC_INTERVAL` for as long as the runtime lives.
async fn keep_modules_copied(runtime: &Arc<Runtime>) {
    let mut failing = false;
    copy_modules(runtime, &mut failing).await;
    tokio::spawn({
        let runtime = Arc::downgrade(runtime);
        async move {
            let mut interval = tokio::time::interval(crate::cluster::modules::SYNC_INTERVAL);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let Some(runtime) = runtime.upgrade() else {
                    return;
                };
                copy_modules(&runtime, &mut failing).await;
            }
        }
    });
}

/// A flag set on SIGTERM or ctrl-c.
fn stop_on_signal() -> Result<tokio::sync::watch::Receiver<bool>, Failure> {
    let (stopping, stopped) = tokio::sync::watch::channel(false);
    let stop = shutdown_signal()?;
    tokio::spawn(async move {
        stop.await;
        let _ = stopping.send(true);
    });
    Ok(stopped)
}

/// Runs the node's placement until `stopped` is set and the node has
/// left; the task, and a receiver told once the node has handed every
/// shard over.
fn spawn_placement(
    node: Node,
    runtime: &Arc<Runtime>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) -> (
    tokio::task::JoinHandle<()>,
    tokio::sync::oneshot::Receiver<()>,
) {
    let (left, has_left) = tokio::sync::oneshot::channel::<()>();
    let runtime = runtime.clone();
    let stop = async move {
        let _ = stopped.wait_for(|&stop| stop).await;
    };
    let placement = tokio::spawn(async move {
        node.run(runtime, stop).await;
        let _ = left.send(());
    });
    (placement, has_left)
}

/// The server's bounds from the flags; the connection cap must leave
/// `reserved` (the host's own and its shards') of the `descriptors` limit
/// free.
fn server_config(
    args: &ServeArgs,
    descriptors: u64,
    reserved: u64,
) -> Result<ServerConfig, Failure> {
    let available = descriptors.saturating_sub(reserved);
    let connections_max = match args.connections_max {
        Some(n) if n > available => {
            return Err(failure(format!(
                "--connections-max {n} leaves fewer than {reserved} of the {descriptors} file descriptors (RLIMIT_NOFILE) in reserve (the host's own and its shards'); at most {available} fit"
            )));
        }
        Some(n) => n,
        None if available == 0 => {
            return Err(failure(format!(
                "the file descriptor limit (RLIMIT_NOFILE) is {descriptors}: more than {reserved} are needed (the host's own and its shards')"
            )));
        }
        None => available.min(CONNECTIONS_MAX_DEFAULT),
    };
    Ok(ServerConfig {
        connections_max: usize::try_from(connections_max).unwrap_or(usize::MAX),
        header_read_timeout_ms: args.header_read_timeout_ms,
        body_read_timeout_ms: args.body_read_timeout_ms,
        shutdown_drain_ms: args.shutdown_drain_ms,
    })
}

/// Logs `cap` (the [`connection_cap_line`]) once the host has started,
/// under [`crate::cli::START_LOG_TARGET`], which the default log filter
/// shows: the operator sees the cap the descriptor limit gave.
fn log_started(cap: &str) {
    tracing::info!(target: crate::cli::START_LOG_TARGET, "{cap}");
}

/// The line `serve` logs at start: the connection cap, and where it
/// comes from (`connections_max` is the flag, if given).
fn connection_cap_line(
    server: &ServerConfig,
    connections_max: Option<u64>,
    descriptors: u64,
    shards: u32,
) -> String {
    let formula = format!(
        "the descriptor limit {descriptors} less {DESCRIPTORS_RESERVED}, less \
         {DESCRIPTORS_PER_SHARD} per shard for {shards} shards, at most {CONNECTIONS_MAX_DEFAULT}"
    );
    match connections_max {
        Some(_) => format!(
            "connection cap {} (--connections-max; the default would be {formula})",
            server.connections_max
        ),
        None => format!("connection cap {}: {formula}", server.connections_max),
    }
}

/// Raises the soft RLIMIT_NOFILE to the hard one (where the kernel allows)
/// and returns the soft limit in force.
#[cfg(unix)]
fn raise_descriptor_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit through a valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        tracing::warn!(error = %std::io::Error::last_os_error(), "cannot read the descriptor limit");
        return CONNECTIONS_MAX_DEFAULT + DESCRIPTORS_RESERVED;
    }
    if limit.rlim_cur < limit.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit through a valid pointer.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            tracing::info!(
                from = limit.rlim_cur,
                to = raised.rlim_cur,
                "raised the descriptor limit"
            );
            limit = raised;
        } else {
            // An unlimited hard limit may be above what the kernel takes.
            tracing::warn!(
                soft = limit.rlim_cur,
                hard = limit.rlim_max,
                error = %std::io::Error::last_os_error(),
                "cannot raise the descriptor limit to the hard one"
            );
        }
    }
    // `rlim_t` is u64 on Linux but not on every unix.
    #[allow(clippy::useless_conversion)]
    u64::try_from(limit.rlim_cur).unwrap_or(u64::MAX)
}

#[cfg(not(unix))]
fn raise_descriptor_limit() -> u64 {
    CONNECTIONS_MAX_DEFAULT + DESCRIPTORS_RESERVED
}

/// A future that resolves on ctrl-c or SIGTERM. The handlers are
/// installed here, not when the future is first polled: a signal sent
/// as soon as the `listening on` line is out would otherwise find the
/// default action in place and kill the process before it flushed.
fn shutdown_signal() -> Result<impl std::future::Future<Output = ()>, Failure> {
    #[cfg(unix)]
    let (mut interrupt, mut terminate) = {
        use tokio::signal::unix::{SignalKind, signal};
        let listen = |kind: SignalKind, name: &str| {
            signal(kind).map_err(|e| failure(format!("cannot listen for {name}: {e}")))
        };
        (
            listen(SignalKind::interrupt(), "SIGINT")?,
            listen(SignalKind::terminate(), "SIGTERM")?,
        )
    };
    Ok(async move {
        #[cfg(unix)]
        tokio::select! {
            _ = interrupt.recv() => {}
            _ = terminate.recv() => {}
        }
        #[cfg(not(unix))]
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "cannot listen for ctrl-c");
            std::future::pending::<()>().await;
        }
        tracing::info!("shutting down");
    })
}

/// The host's cap on routes watchers, from its flags.
fn watchers(args: &ServeArgs) -> std::sync::Arc<crate::api::routes::Watchers> {
    std::sync::Arc::new(crate::api::routes::Watchers::new(
        args.routes_watchers_max,
        Duration::from_millis(args.routes_slow_reader_ms),
    ))
}
