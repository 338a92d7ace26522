//! What the runner holds while it coordinates: every rollout as last
//! stored, and the commands to perform. One lock over all of it (a
//! `tokio` mutex: a store write is awaited under it, so that nothing
//! sees an input's outputs before the input is durable). Also the one
//! path every input's outputs take: persist, then log, then queue.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::rollout::{Command, Outputs, Phase};

use super::events;
use super::store::{RolloutRecord, RolloutStore};

/// A rollout whose outputs hold nothing new is still written this often
/// (its samples and counters), so that a restart loses little of them.
const QUIET_WRITE_INTERVAL: Duration = Duration::from_secs(5);

/// The runner's state.
#[derive(Default)]
pub struct State {
    /// Whether this node coordinates rollouts (serves shard 0) and has
    /// loaded them.
    pub coordinating: bool,
    pub kept: BTreeMap<String, Kept>,
    /// Commands to perform: the rollout's id and the command.
    pub queue: Vec<(String, Command)>,
}

/// How often a rollout's groups are sampled: a twentieth of its wait,
/// within these bounds (a rollout watched for minutes need not read every
/// group twice a second; an unhealthy group is still seen within
/// seconds).
const SAMPLE_INTERVAL_MIN: Duration = Duration::from_millis(500);
const SAMPLE_INTERVAL_MAX: Duration = Duration::from_secs(5);

/// One rollout and what was last written of it.
pub struct Kept {
    pub record: RolloutRecord,
    written: Vec<u8>,
    written_at: Instant,
    /// When its groups were last sampled (not stored: a restart samples
    /// at once).
    sampled_at: Option<Instant>,
}

impl Kept {
    /// A rollout read from the store (or just written).
    pub fn stored(record: RolloutRecord) -> Self {
        let written = serde_json::to_vec(&record).unwrap_or_default();
        Kept {
            record,
            written,
            written_at: Instant::now(),
            sampled_at: None,
        }
    }

    /// Whether its groups are due to be sampled now; if so, they count
    /// as sampled.
    pub fn sample_due(&mut self) -> bool {
        let spec = self.record.rollout.spec();
        let wait = Duration::from_millis(spec.every_ms.min(spec.shadow_ms) / 20);
        let interval = wait.clamp(SAMPLE_INTERVAL_MIN, SAMPLE_INTERVAL_MAX);
        let due = self
            .sampled_at
            .is_none_or(|at| at.elapsed() + Duration::from_millis(50) >= interval);
        if due {
            self.sampled_at = Some(Instant::now());
        }
        due
    }

    pub fn phase(&self) -> &Phase {
        self.record.rollout.phase()
    }

    /// The current step, 0 before the first; once it stops going
    /// forward, the highest step whose groups were bound.
    pub fn step(&self) -> usize {
        match self.phase() {
            Phase::Step { step } => *step,
            Phase::Shadowing => 0,
            _ => self
                .record
                .rollout
                .groups()
                .filter(|(_, run)| run.bind != crate::rollout::Side::Untouched)
                .map(|(_, run)| run.step)
                .max()
                .unwrap_or(0),
        }
    }
}

impl State {
    /// Forgets every rollout (this node no longer coordinates them).
    pub fn forget(&mut self) {
        self.coordinating = false;
        self.kept.clear();
        self.queue.clear();
    }

    /// Persists rollout `id` if `out` holds anything or its quiet
    /// interval passed, then logs `out`'s events and queues its
    /// commands. A write that fails leaves the outputs unperformed, and
    /// the caller steps down (the stored rollout is what the next
    /// coordinator recovers).
    pub async fn persist_and_absorb(
        &mut self,
        store: &RolloutStore,
        id: &str,
        out: Outputs,
    ) -> Result<(), String> {
        let Some(kept) = self.kept.get_mut(id) else {
            return Ok(());
        };
        let quiet = out.commands.is_empty() && out.events.is_empty();
        if !quiet || kept.written_at.elapsed() >= QUIET_WRITE_INTERVAL {
            let bytes = serde_json::to_vec(&kept.record)
                .map_err(|e| format!("a rollout that does not serialize: {e}"))?;
            if bytes != kept.written {
                store.save(id, bytes.clone()).await?;
                kept.written = bytes;
            }
            kept.written_at = Instant::now();
        }
        let step = kept.step();
        for event in &out.events {
            events::report(id, step, event);
        }
        self.queue
            .extend(out.commands.into_iter().map(|c| (id.to_owned(), c)));
        Ok(())
    }

    /// Forgets the oldest finished rollouts past `kept_max`, in the store
    /// too.
    pub async fn prune(&mut self, store: &RolloutStore, kept_max: usize) {
        let mut finished: Vec<(u64, String)> = self
            .kept
            .iter()
            .filter(|(_, kept)| kept.phase().is_terminal())
            .map(|(id, kept)| (kept.record.rollout.started_ms(), id.clone()))
            .collect();
        if finished.len() <= kept_max {
            return;
        }
        finished.sort();
        let excess = finished.len() - kept_max;
        for (_, id) in finished.into_iter().take(excess) {
            match store.remove(&id).await {
                Ok(()) => {
                    self.kept.remove(&id);
                    tracing::info!(rollout = %id, "rollout forgotten: more finished ones than kept");
                }
                Err(error) => {
                    tracing::warn!(rollout = %id, %error, "forgetting a finished rollout failed")
                }
            }
        }
    }

    /// The groups in a rollout that has not ended, and its id.
    pub fn active_group(&self, group: &str) -> Option<&str> {
        self.kept
            .iter()
            .filter(|(_, kept)| !kept.phase().is_terminal())
            .find(|(_, kept)| kept.record.rollout.group(group).is_some())
            .map(|(id, _)| id.as_str())
    }

    /// Sets the phase gauge.
    pub fn gauge(&self) {
        events::set_phases(self.kept.values().map(Kept::phase));
    }
}
