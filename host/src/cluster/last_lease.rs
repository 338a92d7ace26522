//! [`LastLease`]: the lease a cluster node last took, kept in its data
//! dir (`DIR/node-lease.json`), so that the same node restarted after a
//! kill -9 or a crash knows the registration and shard claims its dead
//! process left in etcd for its own, and revokes that lease instead of
//! waiting for it to end (or taking its own name for another node's).
//!
//! Only a dead process's lease is ever revoked this way: `serve` holds
//! the data dir's lock for as long as it runs, so the process that wrote
//! the file before this one has exited. A different live process with
//! the same `--node` has another data dir, another lease, and is still
//! refused. This module only reads and writes the file.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The file's name in the data dir.
pub const FILE: &str = "node-lease.json";

/// A node's lease in one cluster.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LastLease {
    /// The cluster's key prefix in etcd (`serve --etcd-prefix`).
    pub etcd_prefix: String,
    /// The node's name (`serve --node`).
    pub node: String,
    /// etcd's id of the lease.
    pub lease: i64,
}

impl LastLease {
    fn path(data_dir: &Path) -> PathBuf {
        data_dir.join(FILE)
    }

    /// The lease last recorded in `data_dir`, if any. A file that does
    /// not parse counts as none: the worst it costs is waiting for the
    /// old lease to end.
    pub fn read(data_dir: &Path) -> Option<LastLease> {
        let bytes = std::fs::read(Self::path(data_dir)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Records `self` in `data_dir`, replacing what was there at once
    /// (written aside, synced, renamed over).
    pub fn write(&self, data_dir: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = Self::path(data_dir);
        let aside = data_dir.join(format!("{FILE}.new"));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&aside)?;
        file.write_all(&serde_json::to_vec(self).map_err(std::io::Error::other)?)?;
        file.sync_all()?;
        std::fs::rename(&aside, &path)
    }

    /// Whether this is the lease of node `node` of the cluster at
    /// `etcd_prefix`.
    pub fn is_of(&self, etcd_prefix: &str, node: &str) -> bool {
        self.etcd_prefix == etcd_prefix && self.node == node
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_lease_written_is_read_back_and_damage_reads_as_none() {
        let dir = std::env::temp_dir().join(format!("assignd-last-lease-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temp dir");
        assert_eq!(LastLease::read(&dir), None);
        let lease = LastLease {
            etcd_prefix: "/c/".into(),
            node: "n3".into(),
            lease: 7_587_883_392_147_000_001,
        };
        lease.write(&dir).expect("written");
        assert_eq!(LastLease::read(&dir), Some(lease.clone()));
        assert!(lease.is_of("/c/", "n3"));
        assert!(!lease.is_of("/c/", "n4"));
        assert!(!lease.is_of("/d/", "n3"));
        let next = LastLease { lease: 2, ..lease };
        next.write(&dir).expect("written again");
        assert_eq!(LastLease::read(&dir), Some(next));
        std::fs::write(dir.join(FILE), b"{\"lease\":").expect("damaged");
        assert_eq!(LastLease::read(&dir), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
