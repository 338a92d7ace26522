//! Tests of the coordinator core with explicit times, one file a concern.
//! Each drives a [`harness::Harness`]: assignor calls answered natively,
//! and after every input the invariants checked and every record so far
//! replayed into a fresh coordinator, which must give the same group.

mod assignor_calls;
mod bad_requests;
mod bindings;
mod drains;
mod expiry;
mod freeze;
mod harness;
mod heartbeats;
mod joins;
mod learners;
mod leases;
mod load_trigger;
mod loads;
mod name_map;
mod records;
mod routes;
mod shadows;
mod static_members;
mod timer_table;
