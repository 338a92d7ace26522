//! assignd: a group coordinator whose assignment strategies are sandboxed
//! WebAssembly components.
//!
//! - [`plugins`]: the wasm runtime (compile, cache, sandboxed calls,
//!   validation of answers) and the built-in assignors.
//! - [`cli`]: the `assignd` command line.
//! - [`protocol`]: the sans-IO coordinator core (in progress: reconciliation).
//! - [`runtime`]: the core at run time: clock, timers, persistence order,
//!   assignor calls off the request path.
//! - [`sim`]: the deterministic simulator of the core (`assignd sim`).
//! - [`registry`]: uploaded assignor modules, stored by content hash.
//! - [`api`]: the HTTP routes of `assignd serve` and their OpenAPI document.
//!
//! The membership protocol, record log and HTTP API arrive with the
//! coordinator and durability issues; see docs/architecture.md.

pub mod api;
pub mod cli;
pub mod log;
pub mod plugins;
pub mod protocol;
pub mod registry;
pub mod runtime;
pub mod sim;
