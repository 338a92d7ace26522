//! Cluster mode: several nodes serve one cluster's shards, with etcd as
//! the one place where ownership and records are kept.
//!
//! - `etcd`: the few etcd operations it is built from, each bounded by a
//!   timeout ([`Etcd`]: leases, claims, ranges, guarded transactions);
//! - `store`: [`EtcdStore`], the [`crate::runtime::ShardStore`] that keeps
//!   a shard's records in etcd, written only under its owner's claim;
//! - `local_etcd`: an etcd cluster on loopback for the tests.
//!
//! What is here so far is the storage layer; placement of shards over
//! nodes and the routing of requests are still to come (docs/architecture.md,
//! "Cluster mode").

pub mod etcd;
pub mod local_etcd;
pub mod store;

pub use etcd::{Claim, Etcd, EtcdConfig, StoreError, Write};
pub use store::{EtcdStore, ReadLog};

#[cfg(test)]
mod tests;
