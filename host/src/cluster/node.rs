//! [`Node`]: one node of a cluster at run time, the shell that runs the
//! node's decisions ([`NodeMachine`]) over etcd and the runtime. It joins
//! (takes a lease and registers `nodes/NAME` = its advertised URL under
//! it), then performs what the machine asks: it renews the lease, steps
//! down and joins again, reads the cluster's view every placement round
//! and unloads (flushes and releases) or loads (claims and replays) the
//! shards of the machine's plan, feeding each outcome back. What the
//! machine does not decide stays here: `/healthz`'s view of etcd, the
//! directory, the format level, compaction.
//!
//! A node stopped (SIGTERM) deregisters first, so the others plan
//! without it, then unloads every shard, which releases it at once for
//! the next owner, and revokes its lease.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::availability::{Availability, Call, Change};
use super::directory::Directory;
use super::etcd::{Claim, Etcd, StoreError};
use super::features::Features;
use super::joining::{
    check_cluster_settings, record_lease, register, take_over_last_lease, try_register,
};
use super::node_config::NodeConfig;
use super::node_machine::{
    HANDOVER_POLL_INTERVAL_MS, NodeMachine, Output, PlacementInput, Registration, Renewal,
    StepDownReason,
};
use super::store::{EtcdStore, owner_key};
use super::view::ClusterView;
use crate::protocol::group::Millis;
use crate::protocol::shard::ShardId;
use crate::runtime::Runtime;

/// A node of a cluster.
pub struct Node {
    etcd: Etcd,
    config: NodeConfig,
    store: Arc<EtcdStore>,
    lease: i64,
    /// A lease granted after a step-down, until the node registers under
    /// it (then it is the node's lease) or fails to (then it is left to
    /// end).
    granted: Option<i64>,
    registration: Claim,
    /// The node's decisions.
    machine: NodeMachine,
    /// The machine's clock starts here (just before the first grant).
    epoch: Instant,
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

impl Node {
    /// Joins the cluster: checks (or sets, for the cluster's first node)
    /// its shard count and admin token, takes a lease and registers.
    pub async fn join(
        etcd: Etcd,
        config: NodeConfig,
        admin_token: &str,
    ) -> anyhow::Result<(Self, Arc<EtcdStore>)> {
        check_cluster_settings(&etcd, &config, admin_token).await?;
        take_over_last_lease(&etcd, &config).await?;
        // Counted from before the grant was sent: etcd starts the lease
        // later, never earlier.
        let epoch = Instant::now();
        let lease = etcd.grant_lease(config.lease_ttl).await?;
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
        let now = epoch.elapsed().as_millis() as Millis;
        let machine = NodeMachine::joined(
            config.name.clone(),
            config.shard_count,
            config.timing(),
            0,
            now,
        );
        Ok((
            Node {
                etcd,
                config,
                store: store.clone(),
                lease,
                granted: None,
                registration,
                machine,
                epoch,
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
        ClusterView::read(&self.etcd).await
    }

    /// Now, by the machine's clock.
    fn now_ms(&self) -> Millis {
        self.epoch.elapsed().as_millis() as Millis
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

    /// Runs the node until `stop` resolves, then leaves the cluster
    /// gracefully.
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
        let mut stop = std::pin::pin!(stop);
        loop {
            self.drive(&runtime).await;
            let wait = self.machine.poll_timeout().saturating_sub(self.now_ms());
            tokio::select! {
                _ = &mut stop => break,
                _ = tokio::time::sleep(Duration::from_millis(wait)) => {}
            }
        }
        self.leave(&runtime).await;
    }

    /// Performs what the machine has due, feeding each outcome back, until
    /// nothing is left.
    async fn drive(&mut self, runtime: &Arc<Runtime>) {
        loop {
            self.machine.handle_timeout(self.now_ms());
            let Some(output) = self.machine.poll_output() else {
                return;
            };
            match output {
                Output::GrantLease => self.grant_lease(runtime).await,
                Output::Register => self.register_again().await,
                Output::RenewLease => self.renew(runtime).await,
                Output::ServeUntil(until_ms) => {
                    let left = until_ms.saturating_sub(self.now_ms());
                    runtime.serve_until(runtime.now_ms() + left);
                }
                Output::StepDown(why) => self.step_down(runtime, why).await,
                Output::DropFailedShards => drop_failed_shards(runtime).await,
                Output::ReadView => self.read_view(runtime).await,
                Output::ReleaseStaleClaim(shard) => self.release_stale_claim(shard).await,
                Output::HandOver { shard, to } => self.hand_over(runtime, shard, to).await,
                Output::Load(shard) => load(runtime, shard).await,
            }
        }
    }

    /// Takes in the outcome of an etcd `call`: while etcd does not answer
    /// (whichever call found it first), `/healthz` says
    /// `storage_unavailable` and so does every write refused for it.
    fn observe<T>(&mut self, runtime: &Runtime, call: Call, outcome: &Result<T, StoreError>) {
        let node = self.config.name.as_str();
        match self.availability.observe(Instant::now(), call, outcome) {
            Change::None => return,
            // An outage of etcd ends by itself (and is etcd's operator's to
            // see); what needs a person is a lease that ended, logged as
            // ERROR where it happens.
            Change::WentSilent { call, why } => tracing::warn!(
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

    /// Renews the lease: the machine moves the lease's end (counted from
    /// before the renewal was sent) or steps down.
    async fn renew(&mut self, runtime: &Arc<Runtime>) {
        let renewed = self.etcd.renew_lease(self.lease).await;
        self.observe(runtime, Call::LeaseRenewal, &renewed);
        let renewal = match renewed {
            Ok(ttl) if ttl > 0 => {
                metrics::counter!("assignd_cluster_lease_renewals_total").increment(1);
                Renewal::Renewed {
                    ttl_ms: ttl as u64 * 1000,
                }
            }
            Ok(_) | Err(StoreError::LeaseExpired(_)) => Renewal::LeaseGone,
            Err(e) => {
                metrics::counter!("assignd_cluster_lease_renewal_failures_total").increment(1);
                tracing::warn!(node = self.config.name, error = %e, "renewing the lease failed");
                Renewal::Failed
            }
        };
        self.machine.handle_renewed(self.now_ms(), renewal);
    }

    /// Stepping down: nothing this node serves can be written any more.
    /// Its claims are void with the lease: none is released (each release
    /// would wait on an etcd that may not answer), and the lease is
    /// revoked if etcd answers, so that the others need not wait for it to
    /// end.
    async fn step_down(&mut self, runtime: &Arc<Runtime>, why: StepDownReason) {
        let node = self.config.name.as_str();
        match why {
            StepDownReason::LeaseGone => tracing::error!(
                node,
                "the node's lease has expired (etcd answered that it no longer knows it)"
            ),
            StepDownReason::LeaseEndedUnrenewed => {
                tracing::error!(node, "the lease ended unrenewed")
            }
        }
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

    /// After a step-down: takes a new lease, the one the node's claims and
    /// its next registration go under.
    async fn grant_lease(&mut self, runtime: &Arc<Runtime>) {
        let sent_ms = self.now_ms();
        let granted = self.etcd.grant_lease(self.config.lease_ttl).await;
        self.observe(runtime, Call::LeaseGrant, &granted);
        let lease = match granted {
            Ok(lease) => lease,
            Err(e) => {
                tracing::error!(error = %e, "taking a new lease failed");
                return self.machine.handle_lease_granted(sent_ms, false);
            }
        };
        if let Err(e) = record_lease(&self.etcd, &self.config, lease) {
            tracing::warn!(error = %format!("{e:#}"), "a restart of this node would wait for the new lease to end");
        }
        self.granted = Some(lease);
        self.machine.handle_lease_granted(sent_ms, true);
    }

    /// Registers again under the lease just granted, which becomes the
    /// node's lease; failing, the node keeps its old lease (the next
    /// renewal finds it gone and steps down again).
    async fn register_again(&mut self) {
        let lease = self.granted.take().expect("a lease just granted");
        let registration = match try_register(&self.etcd, &self.config, lease).await {
            Ok(Some(claim)) => {
                self.lease = lease;
                self.store.set_lease(lease);
                self.registration = claim;
                if let Err(e) = self
                    .features
                    .announce(&self.etcd, &self.config.name, self.lease)
                    .await
                {
                    tracing::warn!(error = %e, "announcing the node's format support failed: it counts as the previous release's");
                }
                tracing::warn!(
                    node = self.config.name,
                    lease = self.lease,
                    "stepped down and joined again"
                );
                Registration::Registered
            }
            Ok(None) => {
                tracing::error!(
                    node = self.config.name,
                    "registering again failed: the name is still registered"
                );
                Registration::NameTaken
            }
            Err(e) => {
                tracing::error!(error = %e, "registering again failed");
                Registration::Failed
            }
        };
        self.machine.handle_registered(registration);
    }

    /// A placement round's read: refreshes the directory, the format
    /// level and compaction from it, and gives the machine the placeable
    /// nodes, the owners and what the runtime serves.
    async fn read_view(&mut self, runtime: &Arc<Runtime>) {
        let view = self.view().await;
        self.observe(runtime, Call::PlacementRead, &view);
        let view = match view {
            Ok(view) => view,
            Err(e) => {
                tracing::debug!(error = %e, "placement: cannot read the cluster");
                return self.machine.handle_view(None);
            }
        };
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
        self.compact(&view).await;
        let input = PlacementInput {
            nodes: self.features.placeable(view.nodes.keys()),
            served: (0..self.config.shard_count)
                .filter(|&shard| runtime.serves(shard))
                .collect(),
            owners: view.owners,
        };
        self.machine.handle_view(Some(&input));
    }

    /// Releases this node's claim of a shard it does not serve.
    async fn release_stale_claim(&self, shard: ShardId) {
        let me = &self.config.name;
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
    }

    /// Unloads a shard the plan gives to `to`, and routes to `to` at once.
    async fn hand_over(&self, runtime: &Arc<Runtime>, shard: ShardId, to: Option<String>) {
        tracing::info!(shard, to, "handing the shard over");
        metrics::counter!("assignd_cluster_shards_handed_over_total").increment(1);
        match runtime.unload_shard(u64::from(shard)).await {
            Ok(_) => {
                if let Some(to) = &to {
                    self.directory.hand_over(shard, to);
                }
            }
            Err(e) => tracing::warn!(shard, error = %e, "unloading the shard failed"),
        }
    }

    /// Leaves the cluster: deregisters, hands every shard over, revokes
    /// the lease, then waits (at most [`super::node_machine::Timing::handover_wait_ms`]) until
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
        let mut interval = tokio::time::interval(Duration::from_millis(HANDOVER_POLL_INTERVAL_MS));
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
            if started.elapsed() >= Duration::from_millis(self.machine.timing().handover_wait_ms())
            {
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

/// Unloads every shard whose last write went unanswered (or was
/// refused): its core may be ahead of what landed, and loading it again
/// replays exactly that.
async fn drop_failed_shards(runtime: &Arc<Runtime>) {
    for shard in runtime.failed_shards() {
        tracing::warn!(
            shard,
            "a write of the shard did not land: loading it again from etcd"
        );
        // Its flush fails, as its last write did.
        let _ = runtime.unload_shard(u64::from(shard)).await;
    }
}

/// Loads (claims and replays) a shard the plan gives this node.
async fn load(runtime: &Arc<Runtime>, shard: ShardId) {
    match runtime.load_shard(u64::from(shard)).await {
        Ok(_) => {
            // A takeover or a share taken is news to an operator, not an
            // error; its requests refused meanwhile (`shard_unavailable`)
            // are DEBUG.
            tracing::info!(shard, "serving the shard");
            metrics::counter!("assignd_cluster_shards_taken_total").increment(1);
        }
        Err(e) => tracing::info!(shard, error = %e, "cannot take the shard yet"),
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
