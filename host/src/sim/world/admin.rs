//! The admin's requests to a group: a config (the drawn one at the start,
//! a changed one in the chaos phase) and a drain of a member by id or
//! name. On one host they go to the shard's core; in cluster mode to the
//! node that serves the shard, if one does now.

use super::trace::describe_config;
use super::{Lane, World};
use crate::protocol::core::ProtocolError;
use crate::protocol::group::GroupConfig;
use crate::sim::Violation;

impl World {
    /// Configures group `lane` with `config`.
    pub(super) fn configure(&mut self, lane: usize, config: GroupConfig) -> Result<(), Violation> {
        self.step += 1;
        self.note(|w| describe_config(&w.lanes[lane].name, &config));
        let Lane { name, shard, .. } = &self.lanes[lane];
        let (name, shard, now) = (name.clone(), *shard, self.now);
        self.rollout_note_config(&name);
        if self.cluster.is_some() {
            // An admin request: forwarded to the node that serves the
            // shard, if one does now.
            let Some(node) = self.serving_owner(shard) else {
                self.note(|_| format!("  no node serves shard {shard}: the config waits"));
                return self.check_state();
            };
            let served = self.cluster_served(node, shard);
            let out = served
                .core
                .configure(&name, config, now)
                .map_err(|e| self.violation(format!("a drawn config was refused: {e}")))?;
            if self.persist_output(node, shard, out)?.is_some() {
                self.stats.configs += 1;
            }
            return self.check_state();
        }
        let out = self.shards[shard]
            .core
            .configure(&name, config, now)
            .map_err(|e| self.violation(format!("a drawn config was refused: {e}")))?;
        self.stats.configs += 1;
        self.absorb(shard, out)?;
        self.check_state()
    }

    /// The admin drains one of group `lane`'s joined processes (`joined`),
    /// by its static name now and then, else by its member id. A process
    /// the host has removed without its knowing is no longer a member.
    pub(super) fn admin_drain(&mut self, lane: usize, joined: &[usize]) -> Result<(), Violation> {
        let pid = *self.rng.pick(joined);
        let process = &self.processes[pid];
        let by_name =
            process.name.is_some() && !self.group(lane).dynamic_only && self.rng.chance(0.5);
        let member = if by_name {
            process.name.clone().expect("static")
        } else {
            process.member_id().to_owned()
        };
        self.step += 1;
        let Lane { name, shard, .. } = &self.lanes[lane];
        let (name, shard, now) = (name.clone(), *shard, self.now);
        let node = self.serving_owner(shard);
        if self.cluster.is_some() && node.is_none() {
            self.note(|_| format!("admin drains {member}: no node serves shard {shard}"));
            return self.check_state();
        }
        let result = match node {
            Some(node) => self
                .cluster_served(node, shard)
                .core
                .drain(&name, &member, now),
            None => self.shards[shard].core.drain(&name, &member, now),
        };
        self.note(|_| format!("admin drains {member}: {:?}", result.as_ref().err()));
        match result {
            Ok(out) => match node {
                Some(node) => {
                    self.persist_output(node, shard, out)?;
                }
                None => self.absorb(shard, out)?,
            },
            // A process may not know yet that it was removed.
            Err(ProtocolError::UnknownMember(..)) => {}
            Err(other) => {
                return Err(self.violation(format!("drain {member}: {other}")));
            }
        }
        self.check_state()
    }
}
