//! Cluster mode: several nodes serve one cluster's shards, with etcd as
//! the one place where ownership and records are kept.
//!
//! - `keys`: the etcd keyspace, every key spelled once, the layout drawn
//!   in its doc;
//! - `etcd`: the few etcd operations it is built from, each bounded by a
//!   timeout ([`Etcd`]: leases, claims, ranges, guarded transactions);
//! - `store`: [`EtcdStore`], the [`crate::runtime::ShardStore`] that keeps
//!   a shard's records in etcd, written only under its owner's claim;
//! - `placement`: which node should own which shard ([`placement::plan`],
//!   balanced and sticky);
//! - `directory`: [`Directory`], who owns which shard as last read, for
//!   routing requests to the owner;
//! - `node_machine`: a node's decisions, sans-IO ([`node_machine::NodeMachine`]:
//!   when to renew, step down, join again and run a placement round, and
//!   what a round claims, releases, loads and hands over); the simulator
//!   runs the same machine;
//! - `node`: a node at run time ([`Node`]: the shell that runs the machine
//!   over etcd and the runtime, and leaves gracefully);
//! - `node_config`: [`NodeConfig`], a node's settings;
//! - `joining`: what a node checks and takes before it runs (the cluster
//!   settings, its last lease, its registration);
//! - `view`: [`ClusterView`], the live nodes and the owners read at one
//!   revision;
//! - `availability`: whether etcd answers, from whichever of the node's
//!   calls fails first ([`availability::Availability`], sans-IO);
//! - `last_lease`: the lease a node last took, kept in its data dir so
//!   that a restart after a kill -9 takes over its own registration;
//! - `features`: [`features::Features`], the cluster's record format
//!   level: what version nodes write, raised once every live node reads it;
//! - `modules`: [`EtcdModules`], the cluster's uploaded modules, stored
//!   once in etcd and copied into every node's registry;
//! - `local_etcd`: an etcd cluster on loopback for the tests.

pub mod availability;
pub mod directory;
pub mod etcd;
pub mod features;
mod joining;
pub mod keys;
pub mod last_lease;
pub mod local_etcd;
pub mod metric_families;
pub mod modules;
pub mod node;
pub mod node_config;
pub mod node_machine;
pub mod placement;
pub mod store;
pub mod view;

pub use directory::{Directory, NodeAddress};
pub use etcd::{Claim, Etcd, EtcdConfig, StoreError, Write};
pub use modules::EtcdModules;
pub use node::Node;
pub use node_config::NodeConfig;
pub use store::{EtcdStore, ReadLog};
pub use view::ClusterView;

#[cfg(test)]
mod tests;
