//! What lands in each shard's log: a core's records, each checked against
//! the state before it (invariants 4 and 5, a target's load invariants 11
//! and 13, and in cluster mode that it follows from the last durable
//! state), applied to the shard's replica and counted; and the assignor
//! calls of a core's output, queued.

use super::World;
use super::trace::describe_record;
use crate::protocol::core::Output;
use crate::protocol::group::{Liveness, Record, RemovalReason};
use crate::sim::Violation;
use crate::sim::check;

impl World {
    /// Keeps the records of shard `shard`'s output in its log (checking
    /// each against the state before it and applying it to the shard's
    /// replica) and queues the assignor calls.
    pub(super) fn absorb(&mut self, shard: usize, out: Output) -> Result<(), Violation> {
        self.absorb_records(shard, out.records, None)?;
        self.queue_shadow_calls(out.shadow_calls, 0);
        self.queue_calls(out.assignor_calls, 0)
    }

    /// The records half of [`Self::absorb`]; in cluster mode, `writer` is
    /// the node whose core made them.
    pub(super) fn absorb_records(
        &mut self,
        shard: usize,
        records: Vec<Record>,
        writer: Option<usize>,
    ) -> Result<(), Violation> {
        for record in records {
            assert_eq!(
                self.lanes[self.lane_named(record.group())].shard,
                shard,
                "a record of another shard's group"
            );
            if self.cluster.is_some()
                && let Err(e) = self.shards[shard].replica.check_replay(&record)
            {
                // A node wrote from a state that is not the last durable
                // one: what a takeover replays no longer fits together.
                return Err(self.violation(format!(
                    "invariant 8: a record written to shard {shard}'s log does not follow from its last durable state: {e}"
                )));
            }
            self.check_record(shard, &record, writer)?;
            self.shards[shard].replica.apply(&record);
            self.note(|_| format!("  {}", describe_record(&record)));
            self.shards[shard].log.push(record);
        }
        Ok(())
    }

    /// Invariants 4 and 5 at the record that could break them, against the
    /// state before it; and the statistics.
    fn check_record(
        &mut self,
        shard_index: usize,
        record: &Record,
        writer: Option<usize>,
    ) -> Result<(), Violation> {
        let shard = &self.shards[shard_index];
        let Some(before) = shard.replica.group(record.group()) else {
            return Ok(());
        };
        match record {
            Record::TargetInstalled { target, epoch, .. } => {
                self.stats.targets += 1;
                for (slot, t) in target.iter() {
                    if let Some(previous) = before.target.get(slot) {
                        self.stats.learners_promoted +=
                            previous.learner.intersection(&t.active).count() as u64;
                    }
                }
                let empty = Liveness::default();
                let core = match (&self.cluster, writer) {
                    (Some(cluster), Some(node)) => &cluster.nodes[node].served[&shard_index].core,
                    _ => self.core(shard_index),
                };
                let liveness = core.liveness(record.group()).unwrap_or(&empty);
                check::check_installed(before, liveness, target, self.now)
                    .map_err(|e| self.violation(e))?;
                let (before, liveness) = (before.clone(), liveness.clone());
                let lane = self.lane_named(record.group());
                self.watch_target(lane, &before, &liveness, *epoch, target)?;
            }
            Record::MemberReconciled {
                slot, assignment, ..
            } => {
                check::check_reconciled(before, slot, assignment).map_err(|e| self.violation(e))?;
            }
            Record::MemberDraining { .. } => self.stats.drains += 1,
            Record::MemberRemoved { reason, .. } => match reason {
                RemovalReason::Fenced => self.stats.fenced += 1,
                RemovalReason::Expired => self.stats.expired += 1,
                RemovalReason::DrainTimedOut => self.stats.drain_timeouts += 1,
                RemovalReason::Left => {}
            },
            _ => {}
        }
        Ok(())
    }
}
