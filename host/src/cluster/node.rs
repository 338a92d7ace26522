//! [`Node`]: one node of a cluster at run time. It holds the node's lease
//! (renewed every [`NodeConfig::renew_interval`]), registers the node
//! under it (`nodes/NAME` = its advertised URL), and every placement round
//! ([`NodeConfig::placement_interval`])
//! reads the live nodes and the shards' owners, computes the
//! [`placement::plan`] and acts on its own part: it unloads (flushes and
//! releases) the shards the plan takes from it and loads (claims and
//! replays) the free shards the plan gives it.
//!
//! A node that cannot renew its lease before it ends steps down: it stops
//! serving every shard (its writes would be refused anyway: they are
//! guarded by claims under that lease), takes a new lease, registers
//! again and goes on. A node stopped (SIGTERM) deregisters first, so the
//! others plan without it, then unloads every shard, which releases it at
//! once for the next owner, and revokes its lease.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::availability::{Availability, Call, Change};
use super::directory::Directory;
use super::etcd::{Claim, Etcd, StoreError, prefix_end};
use super::features::Features;
use super::keys;
use super::last_lease::LastLease;
use super::placement;
use super::store::{EtcdStore, owner_key};
use crate::protocol::shard::ShardId;
use crate::runtime::Runtime;

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
    /// ([`LastLease`]): restarted after a kill -9, it revokes the lease
    /// its dead process left rather than wait for it to end.
    pub data_dir: PathBuf,
}

impl NodeConfig {
    /// The default lease TTL. etcd leases have whole seconds.
    pub const LEASE_TTL_DEFAULT: Duration = Duration::from_secs(5);

    /// The default compaction interval: Kubernetes' API server compacts
    /// its etcd as often.
    pub const COMPACTION_INTERVAL_DEFAULT: Duration = Duration::from_secs(300);

    /// How often the lease is renewed and placement runs: a third of the
    /// TTL, so that two renewals can fail before the lease ends.
    pub fn renew_interval(&self) -> Duration {
        self.lease_ttl / 3
    }

    /// How often placement runs: at most [`PLACEMENT_INTERVAL_MAX`], so
    /// that a shard released by a leaving node is taken soon whatever the
    /// TTL.
    pub fn placement_interval(&self) -> Duration {
        self.renew_interval().min(PLACEMENT_INTERVAL_MAX)
    }

    /// How long a leaving node keeps answering (redirecting) while its
    /// shards find successors: a few placement rounds and loads, and
    /// never past a lease TTL (a successor that needs longer is not
    /// coming soon).
    pub fn handover_wait(&self) -> Duration {
        (self.placement_interval() * 10).min(self.lease_ttl)
    }
}

/// The longest time between two placement rounds (two small range reads
/// each).
pub const PLACEMENT_INTERVAL_MAX: Duration = Duration::from_millis(500);

/// How often a leaving node reads whether its shards have successors.
const HANDOVER_POLL_INTERVAL: Duration = Duration::from_millis(50);

/// A node of a cluster.
pub struct Node {
    etcd: Etcd,
    config: NodeConfig,
    store: Arc<EtcdStore>,
    lease: i64,
    registration: Claim,
    /// When the lease ends unless renewed.
    lease_ends: Instant,
    /// What the API routes by: refreshed every placement round.
    directory: Arc<Directory>,
    /// Whether etcd answers, as the last of the node's calls found it:
    /// what `/healthz` and a refused write say.
    availability: Availability,
    /// The revision the next compaction goes up to, and when it was read:
    /// a compaction never drops what a read of the last interval may
    /// still ask for.
    compaction_mark: Option<(Instant, i64)>,
    /// The record format level this node writes at.
    features: Features,
}

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

impl Node {
    /// Joins the cluster: checks (or sets, for the cluster's first node)
    /// its shard count and admin token, takes a lease and registers.
    pub async fn join(
        etcd: Etcd,
        config: NodeConfig,
        admin_token: &str,
    ) -> anyhow::Result<(Self, Arc<EtcdStore>)> {
        check_cluster_setting(
            &etcd,
            keys::SHARD_COUNT,
            config.shard_count.to_string().as_bytes(),
            "shard count",
        )
        .await?;
        let token_digest = hex(&Sha256::digest(admin_token.as_bytes()));
        check_cluster_setting(
            &etcd,
            keys::ADMIN_TOKEN_SHA256,
            token_digest.as_bytes(),
            "admin token",
        )
        .await
        .map_err(|e| {
            anyhow::anyhow!("{e:#}: every node of a cluster takes the same --admin-token")
        })?;
        take_over_last_lease(&etcd, &config).await?;
        // Counted from before the grant was sent: etcd starts the lease
        // later, never earlier.
        let asked = Instant::now();
        let lease = etcd.grant_lease(config.lease_ttl).await?;
        let lease_ends = asked + config.lease_ttl;
        record_lease(&etcd, &config, lease)?;
        let registration = register(&etcd, &config, lease).await?;
        let features = Features::new(crate::log::frame::FormatSupport::current());
        if let Err(e) = features.join(&etcd, &config.name, lease).await {
            let _ = etcd.release(&registration).await;
            let _ = etcd.revoke_lease(lease).await;
            return Err(e);
        }
        let store = Arc::new(
            EtcdStore::new(
                etcd.clone(),
                &config.name,
                lease,
                tokio::runtime::Handle::current(),
                config.lease_ttl,
            )
            .with_format_level(features.level()),
        );
        tracing::info!(
            node = config.name,
            advertise = config.advertise,
            lease,
            "joined the cluster"
        );
        let directory = Arc::new(Directory::new(config.name.clone()));
        Ok((
            Node {
                etcd,
                config,
                store: store.clone(),
                lease,
                registration,
                lease_ends,
                directory,
                availability: Availability::default(),
                compaction_mark: None,
                features,
            },
            store,
        ))
    }

    /// The directory this node's placement rounds keep up to date.
    pub fn directory(&self) -> Arc<Directory> {
        self.directory.clone()
    }

    /// Reads the live nodes and the shards' owners, at one revision.
    pub async fn view(&self) -> Result<ClusterView, StoreError> {
        let etcd = &self.etcd;
        let nodes_prefix = etcd.key(keys::NODES);
        let (nodes, revision) = etcd
            .range(&nodes_prefix, &prefix_end(&nodes_prefix), 256)
            .await?;
        // At the revision of the nodes: one snapshot of the cluster.
        let owners_prefix = etcd.key(keys::OWNERS);
        let (owners, _) = etcd
            .range_at(&owners_prefix, &prefix_end(&owners_prefix), 1024, revision)
            .await?;
        let name_of = |key: &[u8]| {
            String::from_utf8_lossy(key.rsplit(|&b| b == b'/').next().unwrap_or_default())
                .into_owned()
        };
        let owners = owners
            .into_iter()
            .filter_map(|(key, node)| {
                let shard = name_of(&key).parse::<ShardId>().ok()?;
                Some((shard, String::from_utf8_lossy(&node).into_owned()))
            })
            .collect();
        Ok(ClusterView {
            nodes: nodes
                .into_iter()
                .map(|(key, url)| (name_of(&key), String::from_utf8_lossy(&url).into_owned()))
                .collect(),
            owners,
            revision,
        })
    }

    /// Compacts etcd's history if this node is the live node of the
    /// lowest name and an interval has passed since the mark, up to the
    /// mark; then marks the revision just read.
    async fn compact(&mut self, view: &ClusterView) {
        let first = view.nodes.keys().next() == Some(&self.config.name);
        let Some((marked, revision)) = self.compaction_mark else {
            self.compaction_mark = Some((Instant::now(), view.revision));
            return;
        };
        if marked.elapsed() < self.config.compaction_interval {
            return;
        }
        if first {
            match self.etcd.compact(revision).await {
                Ok(()) => {
                    metrics::counter!("assignd_cluster_etcd_compactions_total").increment(1);
                    tracing::info!(revision, "compacted etcd's history");
                }
                Err(e) => {
                    tracing::warn!(revision, error = %e, "compacting etcd's history failed; retrying");
                    return;
                }
            }
        }
        self.compaction_mark = Some((Instant::now(), view.revision));
    }

    /// Runs placement rounds until `stop` resolves, then leaves the
    /// cluster gracefully.
    pub async fn run(mut self, runtime: Arc<Runtime>, stop: impl Future<Output = ()>) {
        // The runtime installed the metrics recorder: every series from
        // the first scrape.
        for counter in [
            "assignd_cluster_lease_renewals_total",
            "assignd_cluster_lease_renewal_failures_total",
            "assignd_cluster_step_downs_total",
            "assignd_cluster_shards_taken_total",
            "assignd_cluster_shards_handed_over_total",
            "assignd_cluster_redirects_total",
            "assignd_cluster_forwards_total",
            "assignd_cluster_etcd_compactions_total",
        ] {
            metrics::counter!(counter).absolute(0);
        }
        metrics::gauge!("assignd_cluster_etcd_available").set(1.0);
        // The lease was granted at most its TTL ago.
        let left = self.lease_ends.saturating_duration_since(Instant::now());
        runtime.serve_until(runtime.now_ms() + left.as_millis() as u64);
        let mut stop = std::pin::pin!(stop);
        let mut interval = tokio::time::interval(self.config.placement_interval());
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut renewed = Instant::now();
        loop {
            tokio::select! {
                _ = &mut stop => break,
                _ = interval.tick() => {}
            }
            if renewed.elapsed() >= self.config.renew_interval() {
                renewed = Instant::now();
                self.renew(&runtime).await;
            }
            let view = self.view().await;
            self.observe(&runtime, Call::PlacementRead, &view);
            match view {
                Ok(view) => {
                    metrics::gauge!("assignd_cluster_nodes").set(view.nodes.len() as f64);
                    self.directory.update(view.clone());
                    let first = view.nodes.keys().next() == Some(&self.config.name);
                    if let Err(e) = self
                        .features
                        .refresh(&self.etcd, &view.nodes, view.revision, first)
                        .await
                    {
                        tracing::warn!(error = %e, "reading the cluster's record format level failed");
                    }
                    self.place(&runtime, &view).await;
                    self.compact(&view).await;
                }
                Err(e) => tracing::debug!(error = %e, "placement: cannot read the cluster"),
            }
        }
        self.leave(&runtime).await;
    }

    /// Takes in the outcome of an etcd `call`: while etcd does not answer
    /// (whichever call found it first), `/healthz` says
    /// `storage_unavailable` and so does every write refused for it.
    fn observe<T>(&mut self, runtime: &Runtime, call: Call, outcome: &Result<T, StoreError>) {
        let node = self.config.name.as_str();
        match self.availability.observe(Instant::now(), call, outcome) {
            Change::None => return,
            Change::WentSilent { call, why } => tracing::error!(
                node,
                failed = call.name(),
                error = why,
                "etcd does not answer; writes are refused as storage_unavailable until it does"
            ),
            Change::AnswersAgain { silent_for } => tracing::warn!(
                node,
                silent_ms = silent_for.as_millis() as u64,
                "etcd answers again"
            ),
        }
        let why = self.availability.unavailable();
        runtime.set_storage_unavailable(why.map(str::to_owned));
        let available = if why.is_some() { 0.0 } else { 1.0 };
        metrics::gauge!("assignd_cluster_etcd_available").set(available);
    }

    /// Renews the lease; past its end, steps down and joins again. The
    /// runtime serves requests only until the lease may end: counted from
    /// before the renewal was sent, so never later than etcd ends it.
    async fn renew(&mut self, runtime: &Arc<Runtime>) {
        let sent = Instant::now();
        let sent_ms = runtime.now_ms();
        let renewed = self.etcd.renew_lease(self.lease).await;
        self.observe(runtime, Call::LeaseRenewal, &renewed);
        match renewed {
            Ok(ttl) if ttl > 0 => {
                metrics::counter!("assignd_cluster_lease_renewals_total").increment(1);
                let ttl = Duration::from_secs(ttl as u64);
                self.lease_ends = sent + ttl;
                runtime.serve_until(sent_ms + ttl.as_millis() as u64);
                return;
            }
            Ok(_) | Err(StoreError::LeaseExpired(_)) => tracing::error!(
                node = self.config.name,
                "the node's lease has expired (etcd answered that it no longer knows it)"
            ),
            Err(e) if Instant::now() < self.lease_ends => {
                metrics::counter!("assignd_cluster_lease_renewal_failures_total").increment(1);
                tracing::warn!(node = self.config.name, error = %e, "renewing the lease failed; retrying");
                return;
            }
            Err(e) => {
                metrics::counter!("assignd_cluster_lease_renewal_failures_total").increment(1);
                tracing::error!(node = self.config.name, error = %e, "the lease ended unrenewed")
            }
        }
        self.step_down(runtime).await;
        self.join_again(runtime).await;
    }

    /// Stepping down: nothing this node serves can be written any more.
    /// Its claims are void with the lease: none is released (each release
    /// would wait on an etcd that may not answer), and the lease is
    /// revoked if etcd answers, so that the others need not wait for it to
    /// end.
    async fn step_down(&mut self, runtime: &Arc<Runtime>) {
        metrics::counter!("assignd_cluster_step_downs_total").increment(1);
        self.store.forget_claims();
        for id in served(runtime) {
            if let Err(e) = runtime.unload_shard(u64::from(id)).await {
                tracing::warn!(shard = id, error = %e, "stepping down: the shard's last writes were refused");
            }
        }
        let revoked = self.etcd.revoke_lease(self.lease).await;
        self.observe(runtime, Call::LeaseRevoke, &revoked);
        match revoked {
            Ok(()) => {}
            Err(StoreError::LeaseExpired(_)) => tracing::info!(
                node = self.config.name,
                lease = self.lease,
                "stepping down: the old lease had expired already (etcd answered that it no longer knows it); nothing to revoke"
            ),
            Err(e) => tracing::warn!(
                error = %e,
                "stepping down: revoking the old lease failed; it ends by itself"
            ),
        }
    }

    /// After a step-down: takes a new lease and registers again under it.
    async fn join_again(&mut self, runtime: &Arc<Runtime>) {
        let (asked, asked_ms) = (Instant::now(), runtime.now_ms());
        let granted = self.etcd.grant_lease(self.config.lease_ttl).await;
        self.observe(runtime, Call::LeaseGrant, &granted);
        let lease = match granted {
            Ok(lease) => lease,
            Err(e) => return tracing::error!(error = %e, "taking a new lease failed"),
        };
        if let Err(e) = record_lease(&self.etcd, &self.config, lease) {
            tracing::warn!(error = %format!("{e:#}"), "a restart of this node would wait for the new lease to end");
        }
        match register(&self.etcd, &self.config, lease).await {
            Ok(registration) => {
                self.lease = lease;
                self.lease_ends = asked + self.config.lease_ttl;
                runtime.serve_until(asked_ms + self.config.lease_ttl.as_millis() as u64);
                self.registration = registration;
                self.store.set_lease(lease);
                if let Err(e) = self
                    .features
                    .announce(&self.etcd, &self.config.name, lease)
                    .await
                {
                    tracing::warn!(error = %e, "announcing the node's format support failed: it counts as the previous release's");
                }
                tracing::warn!(
                    node = self.config.name,
                    lease,
                    "stepped down and joined again"
                );
            }
            Err(e) => tracing::error!(error = %e, "registering again failed"),
        }
    }

    /// Acts on this node's part of the plan. A shard whose last write
    /// went unanswered (or was refused) is unloaded first: its core may be
    /// ahead of what landed, and loading it again replays exactly that.
    async fn place(&self, runtime: &Arc<Runtime>, view: &ClusterView) {
        for shard in runtime.failed_shards() {
            tracing::warn!(
                shard,
                "a write of the shard did not land: loading it again from etcd"
            );
            // Its flush fails, as its last write did.
            let _ = runtime.unload_shard(u64::from(shard)).await;
        }
        let nodes: Vec<String> = self.features.placeable(view.nodes.keys());
        let plan = placement::plan(self.config.shard_count, &nodes, &view.owners);
        let me = &self.config.name;
        for (&shard, owner) in &view.owners {
            if owner == me && plan.get(&shard) != Some(me) && !runtime.serves(shard) {
                // A claim this node holds without serving the shard: its
                // answer was lost, or the load after it failed. Nobody
                // else may take the shard while it stands, and no unload
                // would release it.
                let key = owner_key(&self.etcd, shard);
                match self
                    .etcd
                    .release_own(key, me.as_bytes().to_vec(), self.lease)
                    .await
                {
                    Ok(released) => {
                        tracing::info!(shard, released, "releasing a claim of a shard not served")
                    }
                    Err(e) => tracing::warn!(shard, error = %e, "releasing a claim failed"),
                }
                continue;
            }
            if owner == me && plan.get(&shard) != Some(me) {
                tracing::info!(
                    shard,
                    to = plan.get(&shard).map(String::as_str),
                    "handing the shard over"
                );
                metrics::counter!("assignd_cluster_shards_handed_over_total").increment(1);
                match runtime.unload_shard(u64::from(shard)).await {
                    Ok(_) => {
                        if let Some(to) = plan.get(&shard) {
                            self.directory.hand_over(shard, to);
                        }
                    }
                    Err(e) => tracing::warn!(shard, error = %e, "unloading the shard failed"),
                }
            }
        }
        for (&shard, owner) in &plan {
            // Free, or this node's own claim of a shard it does not serve
            // now (see above, and a step-down that kept its lease).
            let claimable = view.owners.get(&shard).is_none_or(|held| held == me);
            if owner == me && claimable && !runtime.serves(shard) {
                match runtime.load_shard(u64::from(shard)).await {
                    Ok(_) => {
                        // A takeover or a share taken is news to an
                        // operator, not an error; its requests refused
                        // meanwhile (`shard_unavailable`) are DEBUG.
                        tracing::info!(shard, "serving the shard");
                        metrics::counter!("assignd_cluster_shards_taken_total").increment(1);
                    }
                    Err(e) => tracing::info!(shard, error = %e, "cannot take the shard yet"),
                }
            }
        }
    }

    /// Leaves the cluster: deregisters, hands every shard over, revokes
    /// the lease, then waits (at most [`NodeConfig::handover_wait`]) until
    /// every shard it served has a new owner, refreshing the directory
    /// meanwhile: the API, still up, redirects members to the successors
    /// rather than leave them to find one.
    async fn leave(self, runtime: &Arc<Runtime>) {
        if let Err(e) = self.etcd.release(&self.registration).await {
            tracing::warn!(error = %e, "deregistering failed");
        }
        let handed: Vec<ShardId> = served(runtime);
        runtime.unload_all().await;
        if let Err(e) = self.etcd.revoke_lease(self.lease).await {
            tracing::warn!(error = %e, "revoking the lease failed; it ends by itself");
        }
        let started = Instant::now();
        let mut interval = tokio::time::interval(HANDOVER_POLL_INTERVAL);
        loop {
            interval.tick().await;
            let view = match self.view().await {
                Ok(view) => view,
                Err(e) => {
                    tracing::warn!(error = %e, "leaving: cannot read the successors");
                    break;
                }
            };
            let taken = handed.iter().all(|shard| {
                view.owners
                    .get(shard)
                    .is_some_and(|owner| *owner != self.config.name)
            });
            let others = view.nodes.keys().any(|name| *name != self.config.name);
            self.directory.update(view);
            if taken || !others {
                break;
            }
            if started.elapsed() >= self.config.handover_wait() {
                tracing::warn!(
                    waited_ms = started.elapsed().as_millis() as u64,
                    "leaving: not every shard has a successor yet"
                );
                break;
            }
        }
        tracing::info!(
            node = self.config.name,
            shards = handed.len(),
            handover_ms = started.elapsed().as_millis() as u64,
            "left the cluster"
        );
    }
}

/// The shards `runtime` serves.
fn served(runtime: &Runtime) -> Vec<ShardId> {
    runtime
        .shard_statuses()
        .into_iter()
        .filter(|s| s.served)
        .map(|s| s.shard)
        .collect()
}

async fn register(etcd: &Etcd, config: &NodeConfig, lease: i64) -> anyhow::Result<Claim> {
    let key = etcd.key(&keys::node(&config.name));
    let url = config.advertise.clone().into_bytes();
    if let Some(claim) = etcd.claim(key.clone(), url.clone(), lease).await? {
        return Ok(claim);
    }
    // A claim tried again after its answer was lost finds its own key.
    match etcd.reclaim(key, url, lease).await? {
        Some(claim) => Ok(claim),
        None => anyhow::bail!(
            "a live node is named {:?} already: give each node its own --node",
            config.name
        ),
    }
}

/// Revokes the lease this node's previous process took (recorded in the
/// data dir) if it is still live: that process is dead (this one holds
/// the data dir's lock), and its registration and shard claims go with
/// the lease at once, so the node restarted after a kill -9 joins again
/// instead of finding its own name taken until the lease ends.
async fn take_over_last_lease(etcd: &Etcd, config: &NodeConfig) -> anyhow::Result<()> {
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
fn record_lease(etcd: &Etcd, config: &NodeConfig, lease: i64) -> anyhow::Result<()> {
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
    use super::*;
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
