//! The runner's task: every pass it follows shard 0 (loads and recovers
//! every rollout when this node gains it, forgets them when it loses
//! it), performs the queued commands, samples the groups of the rollouts
//! that go forward, and ticks the rollouts whose time came.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;

use crate::rollout::{Command, Outputs};

use super::events::count_command;
use super::sample::sample;
use super::state::Kept;
use super::store::COORDINATOR_SHARD;
use super::{ROLLOUTS_KEPT_MAX, Rollouts, now_ms};

/// The longest wait between two passes.
const PASS_INTERVAL: Duration = Duration::from_millis(500);
/// Rounds of commands one pass performs (each round's outcomes may issue
/// the next commands of their groups).
const COMMAND_ROUNDS_MAX: usize = 8;
/// Requests the runner has in flight at once.
const REQUESTS_IN_FLIGHT_MAX: usize = 16;

impl Rollouts {
    /// The task: passes until the process ends.
    pub(super) async fn run(self: Arc<Self>) {
        loop {
            self.follow_shard_zero().await;
            if self.state.lock().await.coordinating {
                self.perform_queued().await;
                self.sample_groups().await;
                self.tick().await;
                self.state.lock().await.gauge();
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(PASS_INTERVAL) => {}
            }
        }
    }

    /// Loads and recovers every rollout when this node starts serving
    /// shard 0; forgets them when it stops.
    async fn follow_shard_zero(&self) {
        let serves = self.runtime.serves(COORDINATOR_SHARD);
        let mut state = self.state.lock().await;
        if serves == state.coordinating {
            return;
        }
        if !serves {
            tracing::info!(
                "shard 0 is no longer served here: this node stops coordinating rollouts"
            );
            state.forget();
            state.gauge();
            return;
        }
        let records = match self.store.load_all().await {
            Ok(records) => records,
            Err(error) => {
                tracing::warn!(%error, "loading the rollouts failed; retrying");
                return;
            }
        };
        let now = now_ms();
        let mut resumed = 0;
        for record in records {
            let id = record.rollout.spec().id.clone();
            if !record.rollout.phase().is_terminal() {
                resumed += 1;
                let commands = record.rollout.recover(now);
                state
                    .queue
                    .extend(commands.into_iter().map(|c| (id.clone(), c)));
            }
            state.kept.insert(id, Kept::stored(record));
        }
        state.coordinating = true;
        state.gauge();
        tracing::info!(
            rollouts = state.kept.len(),
            resumed,
            "coordinating rollouts (this node serves shard 0)"
        );
    }

    /// Performs the queue, in rounds: each round's commands at once (the
    /// machine has at most one per group in flight), then their outcomes.
    async fn perform_queued(&self) {
        let Some(client) = self.client.get() else {
            return;
        };
        for _ in 0..COMMAND_ROUNDS_MAX {
            let batch = std::mem::take(&mut self.state.lock().await.queue);
            if batch.is_empty() {
                return;
            }
            let mut done: Vec<(String, Command, Result<(), String>)> = Vec::new();
            let mut tasks = JoinSet::new();
            for (id, command) in batch {
                if tasks.len() >= REQUESTS_IN_FLIGHT_MAX {
                    done.extend(tasks.join_next().await.and_then(Result::ok));
                }
                let client = client.clone();
                tasks.spawn(async move {
                    let result = client.perform(&command).await;
                    (id, command, result)
                });
            }
            while let Some(joined) = tasks.join_next().await {
                done.extend(joined.ok());
            }
            let now = now_ms();
            let mut outs: BTreeMap<String, Outputs> = BTreeMap::new();
            let mut state = self.state.lock().await;
            for (id, command, result) in done {
                count_command(command.action.name(), result.is_ok());
                let Some(kept) = state.kept.get_mut(&id) else {
                    continue;
                };
                let out = kept.record.rollout.command_done(command.id, result, now);
                merge(outs.entry(id).or_default(), out);
            }
            if !self.take_in(&mut state, outs).await {
                return;
            }
        }
    }

    /// Samples every group touched by a rollout that goes forward.
    async fn sample_groups(&self) {
        let Some(client) = self.client.get() else {
            return;
        };
        let mut targets: Vec<(String, String)> = Vec::new();
        for (id, kept) in self.state.lock().await.kept.iter_mut() {
            if !kept.phase().is_advancing() || !kept.sample_due() {
                continue;
            }
            let touched = kept.record.rollout.groups();
            targets.extend(
                touched
                    .filter(|(_, run)| run.shadow.touched())
                    .map(|(group, _)| (id.clone(), group.to_owned())),
            );
        }
        let mut views = Vec::new();
        let mut tasks = JoinSet::new();
        for (id, group) in targets {
            if tasks.len() >= REQUESTS_IN_FLIGHT_MAX {
                views.extend(tasks.join_next().await.and_then(Result::ok));
            }
            let client = client.clone();
            tasks.spawn(async move {
                let view = client.group(&group).await;
                (id, group, view)
            });
        }
        while let Some(joined) = tasks.join_next().await {
            views.extend(joined.ok());
        }
        let mut outs: BTreeMap<String, Outputs> = BTreeMap::new();
        let mut state = self.state.lock().await;
        for (id, group, view) in views {
            let view = match view {
                Ok(Some(view)) => view,
                // Deleted: its next command says so.
                Ok(None) => continue,
                Err(error) => {
                    tracing::debug!(rollout = %id, group, %error, "a group could not be sampled");
                    continue;
                }
            };
            let Some(kept) = state.kept.get_mut(&id) else {
                continue;
            };
            let now = now_ms();
            let record = &mut kept.record;
            let module = record.rollout.spec().module.clone();
            let tally = record.tallies.entry(group.clone()).or_default();
            let health = sample(&view, &module, tally, now);
            let out = record.rollout.observed(&group, health, now);
            merge(outs.entry(id).or_default(), out);
        }
        self.take_in(&mut state, outs).await;
    }

    /// Ticks every rollout whose time came.
    async fn tick(&self) {
        let now = now_ms();
        let mut state = self.state.lock().await;
        let mut outs: BTreeMap<String, Outputs> = BTreeMap::new();
        for (id, kept) in state.kept.iter_mut() {
            if kept
                .record
                .rollout
                .poll_timeout()
                .is_some_and(|at| at <= now)
            {
                outs.insert(id.clone(), kept.record.rollout.tick(now));
            }
        }
        self.take_in(&mut state, outs).await;
    }

    /// Persists and takes in each rollout's outputs; `false` if a write
    /// failed (and every rollout was forgotten).
    async fn take_in(
        &self,
        state: &mut super::state::State,
        outs: BTreeMap<String, Outputs>,
    ) -> bool {
        let mut ended = false;
        for (id, out) in outs {
            if let Err(error) = state.persist_and_absorb(&self.store, &id, out).await {
                tracing::warn!(rollout = %id, %error, "a rollout could not be stored; loading every rollout again");
                state.forget();
                return false;
            }
            ended |= state.kept.get(&id).is_some_and(|k| k.phase().is_terminal());
        }
        if ended {
            state.prune(&self.store, ROLLOUTS_KEPT_MAX).await;
        }
        true
    }
}

fn merge(into: &mut Outputs, out: Outputs) {
    into.commands.extend(out.commands);
    into.events.extend(out.events);
}
