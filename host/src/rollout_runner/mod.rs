//! The rollout runner: the shell around the decision core of
//! `crate::rollout`. It owns everything the core must not touch: the
//! clock (Unix ms, so that a stored rollout's times mean the same after a
//! restart or on another node), the store, the groups (through the host's
//! own HTTP API, in process: `client.rs`), the log lines and metrics.
//! It never touches the protocol core or the runtime but to ask whether
//! this node serves shard 0.
//!
//! One [`Rollouts`] per `assignd serve`, with one task (`runner.rs`).
//! The node that serves shard 0 coordinates every rollout (one host
//! always does; in a cluster, shard 0's lease holder, taken over with the
//! shard when its node dies). When it gains shard 0 it loads every rollout
//! from the store (`store.rs`) and performs each one's
//! [`Rollout::recover`](crate::rollout::Rollout::recover) commands again;
//! when it loses it, it forgets them (its store writes would be refused).
//!
//! For each input of a rollout (a start, a command's outcome, a sample,
//! a tick, an operator's pause, resume or abort: `operations.rs`), in
//! this order: the rollout is persisted (write-ahead), its events logged
//! and counted (`events.rs`), and its commands queued; the task performs
//! the queue, the commands of different groups at once. It samples each
//! group the rollout touched every pass (`sample.rs` turns a group view
//! into a sample, counting the view's soft counters into the rollout's
//! own), and ticks each rollout at its `poll_timeout`.

mod client;
pub mod events;
mod operations;
mod runner;
mod sample;
mod starting;
mod state;
pub mod store;

use std::sync::{Arc, OnceLock};

pub use operations::{RolloutList, RolloutSummary, StartRequest};
pub use sample::{Tally, sample};
pub use store::{RolloutRecord, RolloutStore};

use crate::rollout::{RolloutError, SpecError};
use crate::runtime::Runtime;

/// Finished rollouts kept (oldest forgotten first); running ones are
/// always kept.
pub const ROLLOUTS_KEPT_MAX: usize = 100;

/// Why an operator's request about rollouts is refused.
#[derive(Debug, thiserror::Error)]
pub enum RolloutRefusal {
    /// The spec does not parse, or a reason is too long.
    #[error("{0}")]
    Spec(#[from] SpecError),
    #[error("{0}")]
    Reason(RolloutError),
    #[error("no assignor module {0:?} on this host")]
    UnknownModule(String),
    #[error("no rollout {0:?}")]
    UnknownRollout(String),
    #[error("rollout {0:?} exists already")]
    Exists(String),
    #[error(
        "group {group:?} is in rollout {rollout:?}, which has not ended: one rollout per group at a time"
    )]
    GroupInRollout { group: String, rollout: String },
    #[error("the selector {0} matches no group")]
    EmptySelection(String),
    /// Pause, resume or abort in a phase that does not allow it.
    #[error("{0}")]
    Phase(RolloutError),
    /// This node does not serve shard 0 now (it is moving between nodes).
    #[error("this node does not coordinate rollouts now (shard 0 is moving between nodes); retry")]
    NotCoordinating,
    /// The groups could not be read, or the rollout not stored.
    #[error("{0}")]
    Unavailable(String),
}

impl From<RolloutError> for RolloutRefusal {
    fn from(error: RolloutError) -> Self {
        match error {
            RolloutError::ReasonTooLong(_) => RolloutRefusal::Reason(error),
            _ => RolloutRefusal::Phase(error),
        }
    }
}

/// The rollouts of one `assignd serve` and their runner.
pub struct Rollouts {
    runtime: Arc<Runtime>,
    store: RolloutStore,
    /// The host's own API, set once the router exists ([`Rollouts::serve`]).
    client: OnceLock<client::InProcess>,
    state: tokio::sync::Mutex<state::State>,
    /// Wakes the task: commands were queued.
    wake: tokio::sync::Notify,
}

impl std::fmt::Debug for Rollouts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rollouts")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl Rollouts {
    pub fn new(runtime: Arc<Runtime>, store: RolloutStore) -> Arc<Self> {
        Arc::new(Rollouts {
            runtime,
            store,
            client: OnceLock::new(),
            state: tokio::sync::Mutex::default(),
            wake: tokio::sync::Notify::new(),
        })
    }

    /// `app` with the rollout routes served by this runner, and the
    /// runner's task started over it (it sends its requests to `app`
    /// with `admin_token`). Call once, inside the async runtime.
    pub fn serve(self: &Arc<Self>, app: axum::Router, admin_token: &str) -> axum::Router {
        let app = app.layer(axum::Extension(self.clone()));
        let _ = self
            .client
            .set(client::InProcess::new(app.clone(), admin_token));
        tokio::spawn(self.clone().run());
        app
    }

    fn client(&self) -> Result<&client::InProcess, RolloutRefusal> {
        self.client.get().ok_or(RolloutRefusal::NotCoordinating)
    }
}

/// The machine's clock: Unix milliseconds.
fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
