//! The cluster node's metric families, which `node.rs` records: live
//! nodes, etcd's availability, lease renewals and step-downs, shards taken
//! and handed over, etcd compactions. Absent on one host but for their
//! HELP and TYPE lines. `crate::metric_catalog` gathers them.

use metrics::Unit;

use crate::telemetry::{Family, Kind};

/// The families the node records.
pub const CLUSTER_FAMILIES: &[Family] = &[
    Family::new(
        "assignd_cluster_nodes",
        Kind::Gauge,
        Unit::Count,
        "live nodes of the cluster, as the last placement round read them",
    ),
    Family::new(
        "assignd_cluster_etcd_available",
        Kind::Gauge,
        Unit::Count,
        "1 while etcd answered the node's last call (a lease renewal, a placement read, a step-down's revoke or new lease), 0 from the first of them it does not answer (writes are refused as storage_unavailable)",
    ),
    Family::new(
        "assignd_cluster_lease_renewals_total",
        Kind::Counter,
        Unit::Count,
        "renewals of the node's lease that etcd answered",
    ),
    Family::new(
        "assignd_cluster_lease_renewal_failures_total",
        Kind::Counter,
        Unit::Count,
        "renewals of the node's lease that failed (the lease holds until its TTL ends)",
    ),
    Family::new(
        "assignd_cluster_step_downs_total",
        Kind::Counter,
        Unit::Count,
        "times the node's lease ended unrenewed and it stopped serving every shard",
    ),
    Family::new(
        "assignd_cluster_shards_taken_total",
        Kind::Counter,
        Unit::Count,
        "shards this node claimed and loaded (a join's share, a takeover, a reload after an unanswered write)",
    ),
    Family::new(
        "assignd_cluster_shards_handed_over_total",
        Kind::Counter,
        Unit::Count,
        "shards this node unloaded and released for another node (placement moved them)",
    ),
    Family::new(
        "assignd_cluster_etcd_compactions_total",
        Kind::Counter,
        Unit::Count,
        "compactions of etcd's history this node made (the live node of the lowest name makes them)",
    ),
];
