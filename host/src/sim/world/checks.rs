//! The checks after every step: each group's holdings, the processes'
//! beliefs and their leases, the replay of the records against the live
//! group, its load invariants (10 and 12, in `loads`), and in cluster mode the cluster's own checks, epochs that never
//! go back and the state a takeover loads; at the end, each shard's whole
//! log replayed. The checks themselves are pure ([`crate::sim::check`]);
//! this is where the world feeds them.

use super::trace::first_difference;
use super::{Lane, World, shard_seed};
use crate::protocol::core::Coordinator;
use crate::sim::Violation;
use crate::sim::check;
use crate::sim::cluster::Loaded;

impl World {
    /// Invariant 1 at the processes after every step (among the ones the
    /// host knows, and among all whose leases have not passed); invariant 1
    /// in the host and replay after every step that emitted records. (A step
    /// without records must leave the group as it was; a change made
    /// without a record would show at the next comparison, or in the final
    /// replay of the whole log.) Every group of every shard, each against
    /// its own shard's replica.
    pub(super) fn check_state(&mut self) -> Result<(), Violation> {
        for lane in 0..self.lanes.len() {
            self.check_group(lane)?;
            self.check_loads(lane)?;
        }
        self.compared();
        self.check_cluster()
    }

    /// [`Self::check_state`] after a step that changed nothing outside
    /// group `touched` but what its records show: the groups of the shards
    /// that appended records, and `touched` (whose processes may have
    /// changed their beliefs). A group whose state and processes did not
    /// change still passes (a lease only ends with time).
    pub(super) fn check_step(&mut self, touched: Option<usize>) -> Result<(), Violation> {
        for lane in 0..self.lanes.len() {
            let shard = &self.shards[self.lanes[lane].shard];
            if touched == Some(lane) || shard.log.len() != shard.log_compared {
                self.check_group(lane)?;
                self.check_loads(lane)?;
            }
        }
        self.compared();
        self.check_cluster()
    }

    /// Cluster mode, after every step: the cluster's own checks (fencing,
    /// nothing durable lost), and no group's epoch goes back across
    /// takeovers (invariant 6).
    fn check_cluster(&mut self) -> Result<(), Violation> {
        let Some(cluster) = &mut self.cluster else {
            return Ok(());
        };
        let checked = cluster.check();
        if let Err(e) = checked {
            return Err(self.violation(e));
        }
        for lane in 0..self.lanes.len() {
            let Lane { name, shard, .. } = &self.lanes[lane];
            let Some(epoch) = self.core(*shard).group(name).map(|g| g.group_epoch) else {
                continue;
            };
            if epoch < self.epochs_seen[lane] {
                return Err(self.violation(format!(
                    "invariant 6: group {name}'s epoch went back from {} to {epoch}",
                    self.epochs_seen[lane]
                )));
            }
            self.epochs_seen[lane] = epoch;
        }
        self.flush_cluster_notes();
        Ok(())
    }

    /// Invariant 8 at each load: the node that takes a shard over recovers
    /// exactly the last durable state (what the records that landed replay
    /// to).
    pub(super) fn check_loaded(&mut self, loaded: &[Loaded]) -> Result<(), Violation> {
        let cluster = self.cluster.as_ref().expect("cluster mode");
        for Loaded {
            node,
            shard,
            previous,
        } in loaded
        {
            let core = &cluster.nodes[*node].served[shard].core;
            if !core.groups().eq(self.shards[*shard].replica.groups()) {
                let from = previous.map_or("nobody".to_owned(), |p| format!("n{p}"));
                return Err(self.violation(format!(
                    "invariant 8: n{node} took shard {shard} over from {from}, but its groups are not the last durable state"
                )));
            }
        }
        Ok(())
    }

    fn compared(&mut self) {
        for shard in &mut self.shards {
            shard.log_compared = shard.log.len();
        }
    }

    fn check_group(&self, lane: usize) -> Result<(), Violation> {
        let Lane { name, shard, .. } = &self.lanes[lane];
        let core = self.core(*shard);
        let shard = &self.shards[*shard];
        let Some(group) = core.group(name) else {
            // Not configured yet.
            return Ok(());
        };
        let changed = shard.log.len() != shard.log_compared;
        if changed {
            check::check_holdings(group)
                .map_err(|e| self.violation(format!("{e} (group {name})")))?;
        }
        let beliefs = self.beliefs(lane);
        check::check_beliefs(group, &beliefs)
            .map_err(|e| self.violation(format!("{e} (group {name})")))?;
        check::check_leased_beliefs(&beliefs, self.now)
            .map_err(|e| self.violation(format!("{e} (group {name})")))?;
        if changed && shard.replica.group(name) != Some(group) {
            return Err(self.violation(format!(
                "replaying the records gives a different group {name}: {}",
                first_difference(shard.replica.group(name), group)
            )));
        }
        Ok(())
    }

    /// At the end of a schedule: each shard's whole log, replayed into a
    /// fresh coordinator, gives the groups the shard has (and in cluster
    /// mode, the log in the store is the log that landed).
    pub(super) fn check_logs(&self) -> Result<(), Violation> {
        for (number, shard) in self.shards.iter().enumerate() {
            if let Some(cluster) = &self.cluster {
                let durable = cluster
                    .durable_records(number)
                    .map_err(|e| self.violation(e))?;
                if durable != shard.log {
                    return Err(self.violation(format!(
                        "invariant 6: shard {number}'s log in the store ({} records) is not the log that landed ({} records)",
                        durable.len(),
                        shard.log.len()
                    )));
                }
            }
            let mut fresh = Coordinator::new(shard_seed(self.seed, number));
            for record in &shard.log {
                fresh.apply(record);
            }
            if !fresh.groups().eq(self.core(number).groups()) {
                return Err(self.violation(format!(
                    "replaying shard {number}'s whole log gives different groups"
                )));
            }
        }
        Ok(())
    }
}
