//! The protocol core of the coordinator: the pure, sans-IO state machine of
//! groups, members, epochs, timers, learners, standbys, drains and
//! probing. It never touches the clock, randomness, disk, network or wasm:
//! inputs carry the time, outputs are records (already applied through the
//! one `apply` path that replay also takes) and assignor calls for the
//! runtime to run off the request path. The HTTP runtime (`crate::runtime`,
//! `crate::api`) and the simulator (`crate::sim`) drive it from outside.
//!
//! - [`reconcile`]: incremental cooperative reconciliation of one member.
//! - [`group`]: a group's durable state, its records and `apply`, and its
//!   transient liveness.
//! - [`core`]: the coordinator: configure and bind, heartbeats (join,
//!   heartbeat, leave, drain), leases, assignor calls and their answers,
//!   learner safety, previews, tick.
//! - [`replay`]: whether a record read back from the log fits the state
//!   it is replayed onto (checked before `apply`).
//! - [`names`]: the characters no name may hold, wherever a name enters.
//! - [`splitmix`]: the seeded mixing function behind member ids.
//! - [`shard`]: which shard (one core, one log) owns a group.

pub mod core;
pub mod group;
pub mod names;
pub mod reconcile;
pub mod replay;
pub mod shard;
pub mod slot;
pub mod splitmix;

#[cfg(test)]
mod tests;
