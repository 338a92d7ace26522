//! The cluster's feature level: the record frame format version its nodes
//! write, so that a rolling upgrade never has a node write a frame some
//! live node cannot read (Kafka's `metadata.version`, for one feature).
//!
//! Keys, under the cluster's prefix:
//! - `features/format_version`: the level, in decimal, under no lease. A
//!   cluster made by a release before levels has none: it counts as that
//!   release's version, and the first node that joins writes it.
//! - `features/nodes/NAME`: the node's [`FormatSupport`] as JSON, put
//!   under the node's lease after `nodes/NAME`. A live node without one
//!   (a node of that release) counts as [`FormatSupport::PREVIOUS_RELEASE`].
//!
//! The level only rises, and only by a transaction that holds while no
//! node registered since the supports it was computed from were read; it
//! is never lowered, since records of the higher version may be stored.
//! A node that cannot write at the level refuses to join. It owns these
//! keys and that rule; which version a shard's records are framed at is
//! the store's (it reads the level this module keeps).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use etcdv3client::pb::{self, compare, request_op};

use super::etcd::{Etcd, StoreError, prefix_end};
use super::keys;
use crate::log::frame::{FORMAT_VERSION_MIN, FormatSupport};

/// The level a cluster without the level key writes at.
const LEVEL_WITHOUT_KEY: u8 = FormatSupport::PREVIOUS_RELEASE.write_max;

/// Live node registrations read per range request.
const NODES_PER_PAGE: i64 = 256;

/// The key of the cluster's level.
pub fn level_key(etcd: &Etcd) -> Vec<u8> {
    etcd.key(keys::FORMAT_VERSION)
}

fn support_key(etcd: &Etcd, name: &str) -> Vec<u8> {
    etcd.key(&keys::feature_support(name))
}

/// This node's support and the level it writes at (kept current every
/// placement round).
#[derive(Debug)]
pub struct Features {
    support: FormatSupport,
    level: Arc<AtomicU8>,
    /// The live nodes that cannot read or write the level, as the last
    /// round read them: no shard is placed on them.
    unfit: std::sync::Mutex<BTreeSet<String>>,
}

/// The cluster's level and every live node's support, read at one
/// revision.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ClusterFeatures {
    /// The frame format version nodes write.
    pub format_version: u8,
    /// Each live node's support; `registered` is false for a node of a
    /// release before levels (counted as that release's).
    pub nodes: BTreeMap<String, NodeSupport>,
    /// The revision `nodes` was read at.
    #[serde(skip)]
    pub revision: i64,
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct NodeSupport {
    #[serde(flatten)]
    pub support: FormatSupport,
    pub registered: bool,
}

impl ClusterFeatures {
    /// The highest version every live node reads and writes (`None` if
    /// no version is, or no node is live).
    pub fn highest_safe(&self) -> Option<u8> {
        let supports = self.nodes.values().map(|n| n.support);
        let top = supports
            .clone()
            .map(|s| s.read_max.min(s.write_max))
            .min()?;
        let bottom = supports.map(|s| s.write_min).max()?;
        (bottom <= top).then_some(top)
    }

    /// Why the level cannot be set to `to`, if it cannot.
    pub fn refuse(&self, to: u8) -> Option<String> {
        if self.nodes.is_empty() && to != self.format_version {
            // Nothing to check it against: a level above what the nodes
            // to come read would shut every one of them out, for good.
            return Some(
                "no node is live: a level is set only against the nodes that will write it".into(),
            );
        }
        if to < self.format_version {
            return Some(format!(
                "the cluster writes format version {} already, and a level is never lowered: records of it may be stored",
                self.format_version
            ));
        }
        self.nodes.iter().find_map(|(name, node)| {
            let s = node.support;
            (to > s.read_max || !s.writes(to)).then(|| {
                format!(
                    "node {name} reads format versions {FORMAT_VERSION_MIN} to {} and writes {} to {}: upgrade it first",
                    s.read_max, s.write_min, s.write_max
                )
            })
        })
    }
}

impl Features {
    pub fn new(support: FormatSupport) -> Self {
        Features {
            support,
            level: Arc::new(AtomicU8::new(LEVEL_WITHOUT_KEY)),
            unfit: std::sync::Mutex::default(),
        }
    }

    /// The nodes of `nodes` shards may be placed on: those the last round
    /// found able to read and write the level. A node of an older release
    /// that joined a cluster whose level it does not read (it does not
    /// check) gets no shard: it would refuse to load each one.
    pub fn placeable<'a>(&self, nodes: impl Iterator<Item = &'a String>) -> Vec<String> {
        let unfit = self.unfit.lock().unwrap_or_else(|e| e.into_inner());
        nodes.filter(|n| !unfit.contains(*n)).cloned().collect()
    }

    /// Keeps which live nodes of `cluster` cannot serve at its level, and
    /// says so when that changes.
    fn note_unfit(&self, cluster: &ClusterFeatures) {
        let level = cluster.format_version;
        let unfit: BTreeSet<String> = cluster
            .nodes
            .iter()
            .filter(|(_, n)| level > n.support.read_max || !n.support.writes(level))
            .map(|(name, _)| name.clone())
            .collect();
        let mut held = self.unfit.lock().unwrap_or_else(|e| e.into_inner());
        if *held != unfit {
            if !unfit.is_empty() {
                tracing::warn!(
                    level,
                    nodes = ?unfit,
                    "live nodes cannot read or write the cluster's record format version: no shard is placed on them; upgrade them"
                );
            }
            *held = unfit;
        }
    }

    /// The level this node writes at, as the store reads it.
    pub fn level(&self) -> Arc<AtomicU8> {
        self.level.clone()
    }

    /// Once registered: announces this node's support, reads the level
    /// (writing it if the cluster has none) and refuses a level this node
    /// cannot write. Checked after registering: a raise computed without
    /// this node's registration cannot land after it.
    pub async fn join(&self, etcd: &Etcd, name: &str, lease: i64) -> anyhow::Result<()> {
        self.announce(etcd, name, lease).await?;
        let key = level_key(etcd);
        let initial = LEVEL_WITHOUT_KEY.to_string().into_bytes();
        // Under no lease: the level outlives every node.
        etcd.claim(key, initial, 0).await?;
        let level = read_level(etcd).await?;
        self.check(level)?;
        self.level.store(level, Ordering::SeqCst);
        Ok(())
    }

    /// Puts this node's support under its lease (again, after a new
    /// lease).
    pub async fn announce(&self, etcd: &Etcd, name: &str, lease: i64) -> Result<(), StoreError> {
        let value = serde_json::to_vec(&self.support).expect("a support serializes");
        let request = pb::TxnRequest {
            compare: vec![],
            success: vec![put(&support_key(etcd, name), value, lease)],
            failure: vec![],
        };
        etcd.txn("announcing the node's format support", request)
            .await
            .map(|_| ())
    }

    fn check(&self, level: u8) -> anyhow::Result<()> {
        let s = self.support;
        if level > s.read_max {
            anyhow::bail!(
                "this cluster writes record format version {level}, newer than this assignd reads ({FORMAT_VERSION_MIN} to {}): run a release that reads it (a cluster's level is never lowered)",
                s.read_max
            );
        }
        if !s.writes(level) {
            anyhow::bail!(
                "this cluster writes record format version {level}, which this assignd no longer writes ({} to {}): upgrade through a release that writes both",
                s.write_min,
                s.write_max
            );
        }
        Ok(())
    }

    /// A placement round's part: reads the level and the live nodes'
    /// supports at the round's revision and writes at the level from now
    /// on; if `raise` (one node does it), raises the level to the highest
    /// every live node reads and writes.
    pub async fn refresh(
        &self,
        etcd: &Etcd,
        nodes: &BTreeMap<String, String>,
        revision: i64,
        raise: bool,
    ) -> Result<(), StoreError> {
        let cluster = read_at(etcd, nodes.keys().cloned(), revision).await?;
        let level = cluster.format_version;
        self.note_unfit(&cluster);
        if self.check(level).is_err() {
            // Unreachable by the rules (a raise and `--set` count this
            // node, a join checks): were it reached, this node is among
            // the unfit just logged, places no shard on itself, and
            // keeps writing what every node reads.
            return Ok(());
        }
        self.level.store(level, Ordering::SeqCst);
        if let Some(to) = cluster.highest_safe().filter(|&to| to > level)
            && raise
            && set_level(etcd, &cluster, to).await?
        {
            tracing::info!(
                from = level,
                to,
                "raised the cluster's record format version: every live node reads it"
            );
            self.level.store(to, Ordering::SeqCst);
        }
        Ok(())
    }
}

/// The cluster's level (the value without the key if it has none).
async fn read_level(etcd: &Etcd) -> Result<u8, StoreError> {
    match etcd.get(&level_key(etcd)).await? {
        None => Ok(LEVEL_WITHOUT_KEY),
        Some((text, _)) => parse_level(&text),
    }
}

fn parse_level(text: &[u8]) -> Result<u8, StoreError> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse().ok())
        .ok_or_else(|| {
            StoreError::Corrupt(format!(
                "the format version {:?} is not a number",
                String::from_utf8_lossy(text)
            ))
        })
}

/// Reads the live nodes, the level and their supports at one revision.
pub async fn read(etcd: &Etcd) -> Result<ClusterFeatures, StoreError> {
    let prefix = etcd.key(keys::NODES);
    let (nodes, revision) = etcd
        .range(&prefix, &prefix_end(&prefix), NODES_PER_PAGE)
        .await?;
    let names = nodes.into_iter().map(|(key, _)| last_segment(&key));
    read_at(etcd, names, revision).await
}

/// The level and the supports of `nodes` (live at `revision`), read at
/// `revision`.
async fn read_at(
    etcd: &Etcd,
    nodes: impl Iterator<Item = String>,
    revision: i64,
) -> Result<ClusterFeatures, StoreError> {
    let prefix = etcd.key(keys::FEATURES);
    let (keys, _) = etcd
        .range_at(&prefix, &prefix_end(&prefix), NODES_PER_PAGE, revision)
        .await?;
    let level_key = level_key(etcd);
    let mut format_version = LEVEL_WITHOUT_KEY;
    let mut announced = BTreeMap::new();
    for (key, value) in keys {
        if key == level_key {
            format_version = parse_level(&value)?;
        } else if let Ok(support) = serde_json::from_slice::<FormatSupport>(&value) {
            announced.insert(last_segment(&key), support);
        }
    }
    let nodes = nodes
        .map(|name| {
            let node = match announced.get(&name) {
                Some(&support) => NodeSupport {
                    support,
                    registered: true,
                },
                None => NodeSupport {
                    support: FormatSupport::PREVIOUS_RELEASE,
                    registered: false,
                },
            };
            (name, node)
        })
        .collect();
    Ok(ClusterFeatures {
        format_version,
        nodes,
        revision,
    })
}

/// Sets the level from `cluster.format_version` to `to` if it still is
/// that and no node has registered since `cluster` was read; returns
/// whether it did. The caller checked `to` against `cluster`.
pub async fn set_level(etcd: &Etcd, cluster: &ClusterFeatures, to: u8) -> Result<bool, StoreError> {
    let key = level_key(etcd);
    let nodes = etcd.key(keys::NODES);
    let request = pb::TxnRequest {
        compare: vec![
            pb::Compare {
                result: compare::CompareResult::Equal as i32,
                target: compare::CompareTarget::Value as i32,
                key: key.clone(),
                range_end: vec![],
                target_union: Some(compare::TargetUnion::Value(
                    cluster.format_version.to_string().into_bytes(),
                )),
            },
            // Every registration was created by the read: over a range a
            // compare holds if it holds for every key.
            pb::Compare {
                result: compare::CompareResult::Less as i32,
                target: compare::CompareTarget::Create as i32,
                key: nodes.clone(),
                range_end: prefix_end(&nodes),
                target_union: Some(compare::TargetUnion::CreateRevision(cluster.revision + 1)),
            },
        ],
        success: vec![put(&key, to.to_string().into_bytes(), 0)],
        failure: vec![],
    };
    Ok(etcd
        .txn("raising the format version", request)
        .await?
        .succeeded)
}

fn put(key: &[u8], value: Vec<u8>, lease: i64) -> pb::RequestOp {
    pb::RequestOp {
        request: Some(request_op::Request::RequestPut(pb::PutRequest {
            key: key.to_vec(),
            value,
            lease,
            ..Default::default()
        })),
    }
}

fn last_segment(key: &[u8]) -> String {
    String::from_utf8_lossy(key.rsplit(|&b| b == b'/').next().unwrap_or_default()).into_owned()
}

#[cfg(test)]
mod tests;
