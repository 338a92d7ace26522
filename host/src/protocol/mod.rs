//! The protocol core of the coordinator (issue 3, in progress): the pure,
//! sans-IO state machine of groups, members, epochs, timers and learners.
//! It never touches the clock, randomness, disk, network or wasm: inputs
//! carry the time, outputs are responses, records and assignor calls.
//!
//! What exists so far is [`reconcile`], the incremental cooperative
//! reconciliation every member goes through; the group state machine that
//! drives it comes next.

pub mod reconcile;
