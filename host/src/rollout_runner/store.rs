//! Where rollouts are kept: one JSON document per rollout
//! ([`RolloutRecord`]). On one host, `DATA_DIR/rollouts/ID.json`, each
//! written whole or not at all (`crate::durable`). In a cluster, the etcd
//! key `rollouts/ID` (`cluster/keys.rs`), written in a transaction guarded
//! by this node's claim of shard 0 (as the shard's log is): a coordinator
//! that lost shard 0 can never overwrite what its successor writes.

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::cluster::etcd::{Write, prefix_end};
use crate::cluster::keys;
use crate::cluster::store::EtcdStore;
use crate::durable;
use crate::rollout::Rollout;

use super::sample::Tally;

/// The shard whose node coordinates every rollout.
pub const COORDINATOR_SHARD: u32 = 0;

/// The largest rollout document kept in etcd: under etcd's default
/// request limit (1.5 MiB), with room for the transaction around it.
pub const ETCD_ROLLOUT_BYTES_MAX: usize = 1 << 20;

/// Rollouts read by one etcd range request.
const ROLLOUTS_PER_PAGE: i64 = 16;

/// One rollout as stored: the machine, and the shell's counters of each
/// group it touched.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RolloutRecord {
    pub rollout: Rollout,
    #[serde(default)]
    pub tallies: std::collections::BTreeMap<String, Tally>,
}

/// Where this host keeps its rollouts.
#[derive(Clone)]
pub enum RolloutStore {
    /// `DATA_DIR/rollouts/`.
    Dir(PathBuf),
    /// The cluster's etcd, guarded by this node's claim of shard 0.
    Etcd(Arc<EtcdStore>),
}

impl std::fmt::Debug for RolloutStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RolloutStore::Dir(dir) => write!(f, "RolloutStore::Dir({})", dir.display()),
            RolloutStore::Etcd(_) => f.write_str("RolloutStore::Etcd"),
        }
    }
}

impl RolloutStore {
    /// The store of a single host's data dir.
    pub fn in_data_dir(data_dir: &std::path::Path) -> Self {
        RolloutStore::Dir(data_dir.join("rollouts"))
    }

    /// The largest document this store keeps, if it has a limit.
    pub fn document_bytes_max(&self) -> Option<usize> {
        match self {
            RolloutStore::Dir(_) => None,
            RolloutStore::Etcd(_) => Some(ETCD_ROLLOUT_BYTES_MAX),
        }
    }

    /// Every rollout kept. A document that does not read is skipped
    /// (and logged): one damaged rollout does not stop the others.
    pub async fn load_all(&self) -> Result<Vec<RolloutRecord>, String> {
        let documents = match self {
            RolloutStore::Dir(dir) => {
                let dir = dir.clone();
                blocking(move || read_dir(&dir)).await?
            }
            RolloutStore::Etcd(store) => {
                let etcd = store.etcd();
                let from = etcd.key(keys::ROLLOUTS);
                let to = prefix_end(&from);
                let (pairs, _) = etcd
                    .range(&from, &to, ROLLOUTS_PER_PAGE)
                    .await
                    .map_err(|e| format!("reading the rollouts from etcd: {e}"))?;
                pairs
                    .into_iter()
                    .map(|(key, value)| (String::from_utf8_lossy(&key).into_owned(), value))
                    .collect()
            }
        };
        let mut records = Vec::new();
        for (name, bytes) in documents {
            match serde_json::from_slice::<RolloutRecord>(&bytes) {
                Ok(record) => records.push(record),
                Err(error) => {
                    tracing::warn!(document = %name, %error, "a stored rollout does not read; skipped")
                }
            }
        }
        Ok(records)
    }

    /// Writes `bytes` as rollout `id`'s document, durably; in a cluster
    /// only while this node holds shard 0.
    pub async fn save(&self, id: &str, bytes: Vec<u8>) -> Result<(), String> {
        match self {
            RolloutStore::Dir(dir) => {
                let dir = dir.clone();
                let id = id.to_owned();
                blocking(move || write_document(&dir, &id, &bytes)).await
            }
            RolloutStore::Etcd(_) if bytes.len() > ETCD_ROLLOUT_BYTES_MAX => Err(format!(
                "rollout {id} is {} bytes, more than etcd keeps ({ETCD_ROLLOUT_BYTES_MAX})",
                bytes.len()
            )),
            RolloutStore::Etcd(store) => {
                let key = store.etcd().key(&keys::rollout(id));
                guarded(store, &[Write::Put { key, value: bytes }]).await
            }
        }
    }

    /// Forgets rollout `id` (a finished one past the number kept).
    pub async fn remove(&self, id: &str) -> Result<(), String> {
        match self {
            RolloutStore::Dir(dir) => {
                let path = dir.join(format!("{id}.json"));
                match std::fs::remove_file(&path) {
                    Ok(()) => Ok(()),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                    Err(e) => Err(format!("removing {}: {e}", path.display())),
                }
            }
            RolloutStore::Etcd(store) => {
                let from = store.etcd().key(&keys::rollout(id));
                let mut to = from.clone();
                to.push(0);
                guarded(store, &[Write::DeleteRange { from, to }]).await
            }
        }
    }
}

/// `work` on a blocking thread (file writes fsync).
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, String> + Send + 'static,
) -> Result<T, String> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| format!("a rollout store task failed: {e}"))?
}

/// `writes` applied if this node still holds shard 0's claim.
async fn guarded(store: &EtcdStore, writes: &[Write]) -> Result<(), String> {
    let claim = store
        .claim_held(COORDINATOR_SHARD)
        .ok_or_else(|| "this node does not hold shard 0, which coordinates rollouts".to_owned())?;
    store
        .etcd()
        .guarded(&claim, writes)
        .await
        .map(|_| ())
        .map_err(|e| format!("writing a rollout to etcd: {e}"))
}

fn read_dir(dir: &std::path::Path) -> Result<Vec<(String, Vec<u8>)>, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("reading {}: {e}", dir.display())),
    };
    let mut documents = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| format!("reading {}: {e}", dir.display()))?
            .path();
        if path.extension().is_some_and(|ext| ext == "json") {
            let bytes =
                std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
            documents.push((path.display().to_string(), bytes));
        }
    }
    Ok(documents)
}

fn write_document(dir: &std::path::Path, id: &str, bytes: &[u8]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let path = dir.join(format!("{id}.json"));
    let temp = dir.join(format!("{id}.json.tmp"));
    durable::write_file(
        &temp,
        &path,
        &[bytes],
        durable::private_file,
        durable::Folder::Path(dir),
    )
    .map(|_| ())
    .map_err(|e| format!("writing {}: {e}", path.display()))
}
