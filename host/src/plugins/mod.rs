//! The plugin runtime: turns component bytes into a checked, compiled
//! assignor and runs it in a sandbox. It owns the wasmtime `Engine`, the
//! cache of compiled components (by sha256 of their bytes, in memory and
//! optionally on disk), the per-call limits (fuel, wall time by epoch,
//! memory, output size) and the validation of every answer against its
//! input. It runs components of every version of the assignor interface
//! it knows (`world.rs`). It knows nothing of groups, HTTP or the record
//! log: callers hand it a `GroupInput` and get an `Assignment` or a
//! [`PluginError`].

mod builtin;
mod call;
mod compile;
mod engine;
mod error;
mod guest_threads;
mod limits;
mod sandbox;
mod world;

pub use builtin::{BUILTIN_NAMES, builtin_component};
pub use call::{CallOutcome, CallStats};
pub use compile::{COMPILE_SUBCOMMAND, compile_child};
pub use engine::{LoadedModule, ModuleId, PluginEngine, module_id};
pub use error::PluginError;
pub use guest_threads::{GUEST_NICE_MAX, GuestThreadError, GuestThreads};
pub use limits::{CompileBounds, EngineConfig, Limits, shadow_calls_default};
pub use sandbox::GuestLogLine;
pub use world::WitVersion;
