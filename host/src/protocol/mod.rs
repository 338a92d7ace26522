//! The protocol core of the coordinator (issue 3, in progress): the pure,
//! sans-IO state machine of groups, members, epochs, timers and learners.
//! It never touches the clock, randomness, disk, network or wasm: inputs
//! carry the time, outputs are records (already applied through the one
//! `apply` path that replay also takes) and assignor calls for the runtime
//! to run off the request path.
//!
//! - [`reconcile`]: incremental cooperative reconciliation of one member.
//! - [`group`]: a group's durable state, its records and `apply`.
//! - [`core`]: the coordinator: configure, heartbeat (join, heartbeat,
//!   leave), assignment computed, tick.
//! - [`replay`]: whether a record read back from the log fits the state
//!   it is replayed onto (checked before `apply`).
//!
//! Not yet here: host-side learner safety, standbys, drains, probing, the
//! HTTP runtime and the simulator (the rest of issue 3).

pub mod core;
pub mod group;
pub mod reconcile;
pub mod replay;

#[cfg(test)]
mod tests;
