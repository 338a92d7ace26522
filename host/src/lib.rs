//! assignd: a group coordinator whose assignment strategies are sandboxed
//! WebAssembly components.
//!
//! - [`plugins`]: the wasm runtime (compile, cache, sandboxed calls,
//!   validation of answers) and the built-in assignors.
//! - [`cli`]: the `assignd` command line.
//! - [`cluster`]: cluster mode on etcd: shards' records kept in etcd and
//!   written only under their owner's claim.
//! - [`protocol`]: the sans-IO coordinator core: groups, members, epochs,
//!   timers, learners, reconciliation; records out, one `apply` path.
//! - [`loadgen`]: the load-test product behind `assignd loadgen`, `demo`
//!   and `plot`: fleets of simulated members and their figures.
//! - [`check`]: `assignd check`, a module against a reference assignor
//!   on generated cases, offline, before an upload.
//! - [`log`]: the binary record log (CRC-framed segments, group commit,
//!   compaction, recovery).
//! - [`runtime`]: the core at run time: clock, timers, persistence order,
//!   assignor calls off the request path.
//! - [`sim`]: the deterministic simulator of the core (`assignd sim`).
//! - [`registry`]: uploaded assignor modules, stored by content hash.
//! - [`rollout`]: the decision core of a rollout (binding a module to a
//!   growing share of groups, judged by their health), sans-IO.
//! - [`rollout_runner`]: its shell: the store, the runner task on the
//!   node serving shard 0, commands and samples through the host's own API.
//! - [`api`]: the HTTP routes of `assignd serve` and their OpenAPI document.
//! - [`telemetry`]: the Prometheus recorder behind the `metrics` facade.
//! - [`metric_catalog`]: every metric family, gathered from the modules
//!   that declare them, and the recorder's install with them.
//! - `durable`: writing a whole file crash-safely (temporary file, fsync,
//!   rename, fsync of the folder), for the log, the registry and the admin
//!   token.
//!
//! docs/architecture.md describes how they fit together.

pub mod api;
pub mod check;
pub mod cli;
pub mod cluster;
pub(crate) mod durable;
pub mod loadgen;
pub mod log;
pub mod metric_catalog;
pub mod plugins;
pub mod protocol;
pub mod registry;
pub mod rollout;
pub mod rollout_runner;
pub mod runtime;
pub mod sim;
pub mod telemetry;
