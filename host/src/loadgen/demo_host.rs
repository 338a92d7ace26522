//! The host `assignd demo` runs in its own process: the same runtime and
//! router `assignd serve` runs, in memory (nothing written), on the
//! address asked for or a free port beside it, with a fresh admin token.
//! It knows nothing of the demo's group or workers.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::LoadTestError;
use crate::api::AdminToken;
use crate::plugins::{EngineConfig, Limits, PluginEngine};
use crate::protocol::shard::SHARD_COUNT_DEFAULT;
use crate::runtime::{Clock, CountingSink, Runtime, RuntimeConfig, TICK_INTERVAL_MS};

/// A fresh admin token: 32 random bytes as hex.
pub(super) fn new_token() -> Result<String, LoadTestError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| LoadTestError::Failed(format!("cannot read random bytes: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Binds `listen`, or a free port on its host if it is taken.
async fn bind(listen: &str) -> Result<tokio::net::TcpListener, LoadTestError> {
    match tokio::net::TcpListener::bind(listen).await {
        Ok(listener) => Ok(listener),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            let mut address: SocketAddr = listen
                .parse()
                .map_err(|_| LoadTestError::Failed(format!("cannot listen on {listen}: {e}")))?;
            address.set_port(0);
            tokio::net::TcpListener::bind(address)
                .await
                .map_err(|e| LoadTestError::Failed(format!("cannot listen on {address}: {e}")))
        }
        Err(e) => Err(LoadTestError::Failed(format!(
            "cannot listen on {listen}: {e}"
        ))),
    }
}

/// Starts the coordinator in process; returns its base URL, and a sender
/// that stops it.
pub(super) async fn start_host(
    listen: &str,
    cache_dir: Option<PathBuf>,
    token: &str,
) -> Result<(String, tokio::sync::oneshot::Sender<()>), LoadTestError> {
    // Before anything records, as `serve` does.
    crate::metric_catalog::install();
    let engine = PluginEngine::new(EngineConfig {
        cache_dir,
        ..EngineConfig::default()
    })
    .map_err(|e| LoadTestError::Failed(format!("cannot start the wasm engine: {e:#}")))?;
    let seed = {
        use std::hash::{BuildHasher, Hasher};
        std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish()
    };
    let runtime = Runtime::new(
        RuntimeConfig {
            seed,
            limits: Limits::default(),
            admission: Default::default(),
            shard_count: SHARD_COUNT_DEFAULT,
            unreached_grace_ms: 0,
        },
        Clock::monotonic(),
        Arc::new(CountingSink::default()),
        Arc::new(engine),
    );
    runtime.spawn_ticker(Duration::from_millis(TICK_INTERVAL_MS));
    runtime.preload_builtins();
    let admin = AdminToken::new(token).map_err(LoadTestError::Failed)?;
    let app = crate::api::app(runtime.clone(), admin);
    let listener = bind(listen).await?;
    let address = listener
        .local_addr()
        .map_err(|e| LoadTestError::Failed(format!("cannot read the bound address: {e}")))?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let served = axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await;
        if let Err(e) = served {
            tracing::error!(error = %e, "serving failed");
        }
        runtime.stop_timers();
    });
    Ok((format!("http://{address}"), stop))
}
