//! [`ClusterView`]: the live nodes and the shards' owners, read at one
//! revision: what every placement round plans from, what the directory
//! routes by, and what a leaving node watches for its successors.

use std::collections::BTreeMap;

use super::etcd::{Etcd, StoreError};
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
    /// Reads the live nodes and the shards' owners in one transaction:
    /// one snapshot, so every node that reads this revision plans from
    /// the same view.
    pub async fn read(etcd: &Etcd) -> Result<ClusterView, StoreError> {
        let prefixes = [etcd.key(keys::NODES), etcd.key(keys::OWNERS)];
        let (ranges, revision) = etcd.prefixes_at_once(&prefixes).await?;
        let [nodes, owners]: [_; 2] = ranges.try_into().map_err(|_| {
            StoreError::Corrupt("a transaction of two ranges answered otherwise".into())
        })?;
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
