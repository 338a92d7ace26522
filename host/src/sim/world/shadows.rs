//! Shadow assignors in the schedules: with [`Options::shadows`](crate::sim::Options),
//! each group gets a shadow when it starts (a built-in, or a module no
//! host has, which fails every call), and every shadow call the core asks
//! for is answered natively after a drawn delay, or dropped. All of it draws
//! from its own generator, never from the schedule's, and a shadow's
//! answer changes no durable state: a schedule with shadows writes the
//! same records as without them, but the shadows' own bindings (the
//! simulator's tests compare the two).

use super::World;
use crate::protocol::core::{ShadowCall, ShadowSpec};
use crate::protocol::group::{CallLimits, CallStats, Millis};
use crate::sim::Violation;
use crate::sim::assign_natively;
use crate::sim::rng::Rng;

/// What the shadows' own generator is seeded with, besides the seed.
pub(super) const SHADOWS_SEED_SALT: u64 = 0x7368_6164_6f77_7321;

/// The shadows a group may get: the built-ins and a module no host has.
const SHADOW_ASSIGNORS: [&str; 5] = ["range", "round-robin", "sticky", "learner-aware", "absent"];

/// The chance that the runtime drops a shadow call rather than run it.
const SHADOW_DROPPED_P: f64 = 0.1;

/// A shadow call whose answer is due.
pub(super) struct PendingShadow {
    due_ms: Millis,
    lane: usize,
    call: ShadowCall,
    /// In cluster mode, the load of the shard whose core asked.
    incarnation: u64,
    /// Dropped by the runtime instead of answered (its shadow queue full).
    dropped: bool,
}

impl World {
    /// Binds a drawn shadow to group `lane`, when the schedule has
    /// shadows: on one host at its shard's core, in cluster mode at the
    /// node that serves the shard now (none: no shadow).
    pub(super) fn bind_drawn_shadow(&mut self, lane: usize) -> Result<(), Violation> {
        if !self.draw_shadows {
            return Ok(());
        }
        let assignor = *self.shadow_rng.pick(&SHADOW_ASSIGNORS);
        let spec = ShadowSpec {
            assignor: assignor.to_owned(),
            params: Default::default(),
            limits: CallLimits::default(),
        };
        let (name, shard, now) = (
            self.lanes[lane].name.clone(),
            self.lanes[lane].shard,
            self.now,
        );
        // Not a step of the schedule: its length (the chaos phase ends at
        // a step count) is the same with shadows and without.
        self.note(|_| format!("shadow {name}: {assignor}"));
        if self.cluster.is_some() {
            let Some(node) = self.serving_owner(shard) else {
                return Ok(());
            };
            let out = self
                .cluster_served(node, shard)
                .core
                .bind_shadow(&name, Some(spec), now);
            let out = out.map_err(|e| self.violation(format!("a shadow was refused: {e}")))?;
            self.persist_output(node, shard, out)?;
            return self.check_state();
        }
        let out = self.shards[shard].core.bind_shadow(&name, Some(spec), now);
        let out = out.map_err(|e| self.violation(format!("a shadow was refused: {e}")))?;
        self.absorb(shard, out)?;
        self.check_state()
    }

    /// Queues the shadow calls of a core's output, each answered after a
    /// drawn delay (or lost).
    pub(super) fn queue_shadow_calls(&mut self, calls: Vec<ShadowCall>, incarnation: u64) {
        for call in calls {
            let lane = self.lane_named(&call.group);
            let expansion = self.group(lane).config.expansion_timeout_ms;
            let rng = &mut self.shadow_rng;
            let dropped = rng.chance(SHADOW_DROPPED_P);
            let due_ms = self.now + rng.range(0, 3 * expansion.max(1));
            self.shadow_calls.push(PendingShadow {
                due_ms,
                lane,
                call,
                incarnation,
                dropped,
            });
        }
    }

    /// Answers every shadow call due by now, in the order they are due.
    /// Nothing else is scheduled by it: the schedule's own events come
    /// and go as without shadows.
    pub(super) fn deliver_due_shadows(&mut self) {
        let now = self.now;
        let mut due: Vec<PendingShadow> = Vec::new();
        let mut waiting = Vec::new();
        for pending in self.shadow_calls.drain(..) {
            if pending.due_ms <= now {
                due.push(pending);
            } else {
                waiting.push(pending);
            }
        }
        self.shadow_calls = waiting;
        due.sort_by_key(|p| p.due_ms);
        for pending in due {
            self.deliver_shadow(pending);
        }
    }

    fn deliver_shadow(&mut self, pending: PendingShadow) {
        let PendingShadow {
            lane,
            call,
            incarnation,
            dropped,
            ..
        } = pending;
        let shard = self.lanes[lane].shard;
        let now = self.now;
        let core = match &mut self.cluster {
            None => &mut self.shards[shard].core,
            Some(cluster) => {
                let Some(node) = cluster.node_of(shard, incarnation) else {
                    return;
                };
                match cluster.serving_mut(node, shard, now) {
                    Some(served) => &mut served.core,
                    None => return,
                }
            }
        };
        if dropped {
            core.shadow_dropped(&call.group, call.epoch);
            self.stats.shadow_calls_dropped += 1;
            return;
        }
        let answer = assign_natively(&call.assignor, &call.input);
        let stats = CallStats::default();
        core.shadow_computed(&call.group, call.epoch, &call.assignor, answer, stats, now);
        self.stats.shadow_answers += 1;
    }
}

/// The shadows' generator of a schedule.
pub(super) fn shadow_rng(seed: u64) -> Rng {
    Rng::new(seed ^ SHADOWS_SEED_SALT)
}
