//! The plugin runtime: turns component bytes into a checked, compiled
//! assignor and runs it in a sandbox. It owns the wasmtime `Engine`, the
//! cache of compiled components (by sha256 of their bytes, in memory and
//! optionally on disk), the per-call limits (fuel, wall time by epoch,
//! memory, output size) and the validation of every answer against its
//! input. It knows nothing of groups, HTTP or the record log: callers hand
//! it a `GroupInput` and get an `Assignment` or a [`PluginError`].

mod builtin;
mod call;
mod compile;
mod engine;
mod error;
mod guest_threads;
mod limits;
mod sandbox;

pub use builtin::{BUILTIN_NAMES, builtin_component};
pub use call::{CallOutcome, CallStats};
pub use compile::{COMPILE_SUBCOMMAND, compile_child};
pub use engine::{LoadedModule, ModuleId, PluginEngine, module_id};
pub use error::PluginError;
pub use guest_threads::{GUEST_NICE_MAX, GuestThreadError, GuestThreads};
pub use limits::{CompileBounds, EngineConfig, Limits};
pub use sandbox::GuestLogLine;

/// The interface every assignor component exports.
pub const WIT_ASSIGNOR_INTERFACE: &str = "assignd:assignor/assignor@0.1.0";

/// The only interface with functions an assignor component may import.
pub const WIT_LOG_INTERFACE: &str = "assignd:assignor/log@0.1.0";

/// The types-only interface the assignor interface uses; components import
/// it for its type definitions.
pub const WIT_TYPES_INTERFACE: &str = "assignd:assignor/types@0.1.0";

mod bindings {
    // Borrowing: the input a call lowers into the guest is a view of the
    // host's `GroupInput` (`&str`, `&[u32]`), not a copy of its 10,000
    // member ids made only to be lowered and dropped.
    wasmtime::component::bindgen!({
        path: "../guest-sdk/wit",
        world: "plugin",
        ownership: Borrowing { duplicate_if_necessary: true },
    });
}
