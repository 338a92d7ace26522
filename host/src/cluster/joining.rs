//! Joining a cluster, before a node runs: the cluster settings every node
//! must agree on (shard count, admin token), taking over the lease a dead
//! process of this node left, recording each lease in the data dir, and
//! registering `nodes/NAME`. [`super::Node`] calls these; it owns the
//! node's lease and registration once they are taken.

use sha2::{Digest, Sha256};

use super::etcd::{Claim, Etcd, StoreError};
use super::keys;
use super::last_lease::LastLease;
use super::node_config::NodeConfig;

pub(super) async fn register(
    etcd: &Etcd,
    config: &NodeConfig,
    lease: i64,
) -> anyhow::Result<Claim> {
    match try_register(etcd, config, lease).await? {
        Some(claim) => Ok(claim),
        None => anyhow::bail!(
            "a live node is named {:?} already: give each node its own --node",
            config.name
        ),
    }
}

/// Registers the node under `lease`; `None`: a live node holds the name.
pub(super) async fn try_register(
    etcd: &Etcd,
    config: &NodeConfig,
    lease: i64,
) -> Result<Option<Claim>, StoreError> {
    let key = etcd.key(&keys::node(&config.name));
    let url = config.advertise.clone().into_bytes();
    if let Some(claim) = etcd.claim(key.clone(), url.clone(), lease).await? {
        return Ok(Some(claim));
    }
    // A claim tried again after its answer was lost finds its own key.
    etcd.reclaim(key, url, lease).await
}

/// Revokes the lease this node's previous process took (recorded in the
/// data dir) if it is still live: that process is dead (this one holds
/// the data dir's lock), and its registration and shard claims go with
/// the lease at once, so the node restarted after a kill -9 joins again
/// instead of finding its own name taken until the lease ends.
pub(super) async fn take_over_last_lease(etcd: &Etcd, config: &NodeConfig) -> anyhow::Result<()> {
    let Some(last) = LastLease::read(&config.data_dir) else {
        return Ok(());
    };
    if !last.is_of(&etcd.config().prefix, &config.name) {
        return Ok(());
    }
    match etcd.revoke_lease(last.lease).await {
        Ok(()) => tracing::warn!(
            node = config.name,
            lease = last.lease,
            "this node's previous process on this data dir did not leave the cluster (killed or crashed): revoked its lease, so its registration and shards are released now, not when the lease would end"
        ),
        // It left, or its lease ended: nothing of it is left.
        Err(StoreError::LeaseExpired(_)) => {}
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

/// Records `lease` as the node's last in its data dir, before anything is
/// put under it.
pub(super) fn record_lease(etcd: &Etcd, config: &NodeConfig, lease: i64) -> anyhow::Result<()> {
    let last = LastLease {
        etcd_prefix: etcd.config().prefix.clone(),
        node: config.name.clone(),
        lease,
    };
    last.write(&config.data_dir).map_err(|e| {
        anyhow::anyhow!(
            "cannot record the node's lease in {}: {e}",
            config.data_dir.join(super::last_lease::FILE).display()
        )
    })
}

/// Checks (or sets, for the cluster's first node) the cluster's shard
/// count and admin token against this node's.
pub(super) async fn check_cluster_settings(
    etcd: &Etcd,
    config: &NodeConfig,
    admin_token: &str,
) -> anyhow::Result<()> {
    check_cluster_setting(
        etcd,
        keys::SHARD_COUNT,
        config.shard_count.to_string().as_bytes(),
        "shard count",
    )
    .await?;
    let token_digest = hex(&Sha256::digest(admin_token.as_bytes()));
    check_cluster_setting(
        etcd,
        keys::ADMIN_TOKEN_SHA256,
        token_digest.as_bytes(),
        "admin token",
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e:#}: every node of a cluster takes the same --admin-token"))
}

/// Sets the cluster setting `name` to `value` if the cluster has none yet,
/// else checks that it is `value`.
async fn check_cluster_setting(
    etcd: &Etcd,
    name: &str,
    value: &[u8],
    what: &str,
) -> anyhow::Result<()> {
    let key = etcd.key(name);
    // Claimed without a lease: it outlives every node.
    if etcd.claim(key.clone(), value.to_vec(), 0).await?.is_some() {
        return Ok(());
    }
    match etcd.get(&key).await? {
        Some((held, _)) if held == value => Ok(()),
        Some((held, _)) => anyhow::bail!(
            "this cluster's {what} is another one ({}; this node has {})",
            String::from_utf8_lossy(&held),
            String::from_utf8_lossy(value)
        ),
        None => anyhow::bail!("the cluster's {what} vanished while it was read"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    use super::*;
    use crate::cluster::availability::{Availability, Call};
    use crate::cluster::local_etcd::LocalEtcd;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir()
            .join("assignd-node-tests")
            .join(format!("{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch folder");
        dir
    }

    fn config(name: &str, data_dir: PathBuf) -> NodeConfig {
        NodeConfig {
            name: name.to_owned(),
            advertise: format!("http://{name}"),
            lease_ttl: Duration::from_secs(60),
            shard_count: 8,
            compaction_interval: NodeConfig::COMPACTION_INTERVAL_DEFAULT,
            data_dir,
        }
    }

    /// A lease etcd no longer knows is etcd's answer: revoking it again,
    /// claiming a key under it or renewing it says the lease expired, and
    /// etcd counts as available.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lease_etcd_no_longer_knows_is_expired_not_etcd_unavailable() {
        let cluster = LocalEtcd::start(&scratch("expired-etcd"), 1)
            .await
            .expect("etcd");
        let etcd = Etcd::connect(cluster.config("/expired/"))
            .await
            .expect("connect");
        let lease = etcd
            .grant_lease(Duration::from_secs(60))
            .await
            .expect("a lease");
        etcd.revoke_lease(lease).await.expect("revoked");
        let again = etcd.revoke_lease(lease).await;
        assert!(
            matches!(again, Err(StoreError::LeaseExpired(_))),
            "{again:?}"
        );
        let claimed = etcd.claim(etcd.key("k"), b"v".to_vec(), lease).await;
        assert!(
            matches!(claimed, Err(StoreError::LeaseExpired(_))),
            "{claimed:?}"
        );
        let renewed = etcd.renew_lease(lease).await;
        assert!(
            matches!(renewed, Ok(0) | Err(StoreError::LeaseExpired(_))),
            "{renewed:?}"
        );
        let mut availability = Availability::default();
        availability.observe(Instant::now(), Call::LeaseRevoke, &again);
        assert_eq!(availability.unavailable(), None);
    }

    /// A node's restart on its data dir revokes the lease it recorded
    /// there and registers again; a lease recorded for another name is
    /// left alone, and that name's live holder still refuses the node.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restart_takes_over_only_its_own_registration() {
        let cluster = LocalEtcd::start(&scratch("takeover-etcd"), 1)
            .await
            .expect("etcd");
        let etcd = Etcd::connect(cluster.config("/takeover/"))
            .await
            .expect("connect");
        let b = config("b", scratch("takeover-b"));
        let first = etcd.grant_lease(b.lease_ttl).await.expect("a lease");
        record_lease(&etcd, &b, first).expect("recorded");
        register(&etcd, &b, first).await.expect("b registers");
        // b's process dies; started again on its data dir.
        take_over_last_lease(&etcd, &b).await.expect("taken over");
        let second = etcd.grant_lease(b.lease_ttl).await.expect("a lease");
        record_lease(&etcd, &b, second).expect("recorded");
        register(&etcd, &b, second)
            .await
            .expect("b registers again");
        // The same data dir under another name: b's lease is not its own.
        let c = config("c", b.data_dir.clone());
        take_over_last_lease(&etcd, &c)
            .await
            .expect("nothing to take over");
        let other = config("b", scratch("takeover-other"));
        let third = etcd.grant_lease(b.lease_ttl).await.expect("a lease");
        let refused = register(&etcd, &other, third).await.expect_err("refused");
        assert!(
            refused
                .to_string()
                .contains("a live node is named \"b\" already"),
            "{refused:#}"
        );
        assert_eq!(etcd.renew_lease(second).await.expect("renewed"), 60);
    }
}
