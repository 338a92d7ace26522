//! [`ClusterView`]: the live nodes and the shards' owners, read at one
//! revision: what every placement round plans from, what the directory
//! routes by, and what a leaving node watches for its successors.

use std::collections::BTreeMap;

use super::etcd::{Etcd, StoreError, prefix_end};
use super::keys;
use crate::protocol::shard::ShardId;

/// What a placement round read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterView {
    /// Live nodes and their advertised URLs.
    pub nodes: BTreeMap<String, String>,
    /// The shards' owners now.
    pub owners: BTreeMap<ShardId, String>,
    /// The revision both were read at.
    pub revision: i64,
}

impl ClusterView {
    /// Reads the live nodes and the shards' owners, at one revision.
    pub async fn read(etcd: &Etcd) -> Result<ClusterView, StoreError> {
        let nodes_prefix = etcd.key(keys::NODES);
        let (nodes, revision) = etcd
            .range(&nodes_prefix, &prefix_end(&nodes_prefix), 256)
            .await?;
        // At the revision of the nodes: one snapshot of the cluster.
        let owners_prefix = etcd.key(keys::OWNERS);
        let (owners, _) = etcd
            .range_at(&owners_prefix, &prefix_end(&owners_prefix), 1024, revision)
            .await?;
        Ok(ClusterView::from_pairs(nodes, owners, revision))
    }

    /// The view of the `nodes/` and `owners/` pairs read at `revision`.
    fn from_pairs(
        nodes: Vec<(Vec<u8>, Vec<u8>)>,
        owners: Vec<(Vec<u8>, Vec<u8>)>,
        revision: i64,
    ) -> ClusterView {
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        let name_of = |key: &[u8]| keys::last_segment(&text(key)).to_owned();
        ClusterView {
            nodes: nodes
                .into_iter()
                .map(|(key, url)| (name_of(&key), text(&url)))
                .collect(),
            owners: owners
                .into_iter()
                .filter_map(|(key, node)| Some((name_of(&key).parse().ok()?, text(&node))))
                .collect(),
            revision,
        }
    }
}
