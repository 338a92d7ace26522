//! [`NodeConfig`]: a cluster node's settings, and the intervals they
//! derive ([`Timing`]). Read by the steps of joining and by the running
//! node alike.

use std::path::PathBuf;
use std::time::Duration;

use super::node_machine::Timing;

/// A cluster node's settings.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// The node's name, unique among live nodes.
    pub name: String,
    /// The URL other nodes and clients reach this node at.
    pub advertise: String,
    /// The node's lease: a node that stops renewing it loses its shards
    /// this long after its last renewal.
    pub lease_ttl: Duration,
    /// The cluster's shard count (fixed when the cluster is created).
    pub shard_count: u32,
    /// How often etcd's history is compacted (by the live node of the
    /// lowest name), up to the revision read one interval before.
    pub compaction_interval: Duration,
    /// The node's data dir, where it records each lease it takes
    /// ([`super::last_lease::LastLease`]): restarted after a kill -9, it revokes the lease
    /// its dead process left rather than wait for it to end.
    pub data_dir: PathBuf,
}

impl NodeConfig {
    /// The default lease TTL. etcd leases have whole seconds.
    pub const LEASE_TTL_DEFAULT: Duration = Duration::from_secs(5);

    /// The default compaction interval: Kubernetes' API server compacts
    /// its etcd as often.
    pub const COMPACTION_INTERVAL_DEFAULT: Duration = Duration::from_secs(300);

    /// The node's intervals ([`Timing`]: renewals, placement rounds, the
    /// handover wait), from its lease TTL.
    pub fn timing(&self) -> Timing {
        Timing {
            lease_ttl_ms: self.lease_ttl.as_millis() as u64,
        }
    }
}
