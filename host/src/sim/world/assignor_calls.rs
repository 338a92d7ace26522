//! The cores' assignor calls: each answered natively by a built-in
//! assignor after a drawn delay (sometimes failing on purpose), to the
//! shard's core on one host, or in cluster mode to the load of the shard
//! that asked, if its node still has it.

use assignd_guest_sdk::{Assignment, GroupInput};

use super::World;
use super::trace::describe_answer;
use crate::protocol::core::AssignorCall;
use crate::protocol::group::Millis;
use crate::sim::Violation;
use crate::sim::cluster::NodeState;

/// The built-in assignors, answered natively.
pub const ASSIGNORS: [&str; 4] = ["range", "round-robin", "sticky", "learner-aware"];

/// Probability that an assignor call fails on purpose (outside the quiet
/// phase): the group keeps its last target and retries.
const ASSIGNOR_FAILURE_P: f64 = 0.02;

/// Runs a built-in assignor through the SDK harness: input checked, called
/// natively, answer validated, as the host's sandbox would. The assignor of
/// the simulator and of the protocol core's tests.
pub fn assign_natively(assignor: &str, input: &GroupInput) -> Result<Assignment, String> {
    use assignd_guest_sdk::harness::run;
    match assignor {
        "range" => run::<assignor_range::Range>(input),
        "round-robin" => run::<assignor_round_robin::RoundRobin>(input),
        "sticky" => run::<assignor_sticky::Sticky>(input),
        "learner-aware" => run::<assignor_learner_aware::LearnerAware>(input),
        other => return Err(format!("no native assignor {other:?}")),
    }
    .map_err(|e| e.to_string())
}

/// Whether the built-in `assignor` balances load (its
/// `capabilities.load`): what the runtime tells the core of a module.
pub fn balances_load(assignor: &str) -> bool {
    use assignd_guest_sdk::Assignor;
    let info = match assignor {
        "range" => assignor_range::Range::info(),
        "round-robin" => assignor_round_robin::RoundRobin::info(),
        "sticky" => assignor_sticky::Sticky::info(),
        "learner-aware" => assignor_learner_aware::LearnerAware::info(),
        _ => return false,
    };
    info.capabilities.load
}

/// A pending answer to an assignor call of group `lane`.
pub(super) struct PendingCall {
    pub(super) due_ms: Millis,
    pub(super) lane: usize,
    pub(super) call: AssignorCall,
    /// In cluster mode, the load of the shard whose core asked (the answer
    /// goes back to it, or nowhere); 0 on one host.
    pub(super) incarnation: u64,
}

impl World {
    /// The calls half of [`Self::absorb`]: each answered after a drawn
    /// delay, to the load `incarnation` of its shard (cluster mode), and
    /// what it sees of the loads watched.
    pub(super) fn queue_calls(
        &mut self,
        calls: Vec<AssignorCall>,
        incarnation: u64,
    ) -> Result<(), Violation> {
        for call in calls {
            let lane = self.lane_named(&call.group);
            self.watch_call(lane, &call)?;
            let expansion = self.group(lane).config.expansion_timeout_ms;
            let delay = if self.quiet {
                self.rng.range(0, 20)
            } else {
                match self.rng.weighted(&[70, 25, 5]) {
                    0 => self.rng.range(0, 50),
                    1 => self.rng.range(0, 2 * expansion),
                    _ => self.rng.range(2 * expansion, 5 * expansion),
                }
            };
            self.note(|w| {
                let input = if w.trace_inputs {
                    format!(
                        " input: {}",
                        assignd_guest_sdk::json::input_to_json(&call.input)
                    )
                } else {
                    String::new()
                };
                format!(
                    "  assignor call {} epoch {} answered in {delay} ms{input}",
                    call.group, call.epoch
                )
            });
            self.calls.push(PendingCall {
                due_ms: self.now + delay,
                lane,
                call,
                incarnation,
            });
        }
        Ok(())
    }

    /// Delivers the answer to pending call `index` (or, in cluster mode,
    /// sets it aside: see [`Self::answering_node`]).
    pub(super) fn deliver(&mut self, index: usize) -> Result<(), Violation> {
        let pending = self.calls.remove(index);
        let Some((PendingCall { call, lane, .. }, node)) = self.answering_node(pending) else {
            return Ok(());
        };
        let shard = self.lanes[lane].shard;
        self.step += 1;
        let answer = self.answer(lane, &call)?;
        let now = self.now;
        if let Some(node) = node {
            let core = &mut self.cluster_served(node, shard).core;
            let out = core.assignment_computed(&call.group, call.epoch, answer, now);
            self.persist_output(node, shard, out)?;
            return self.check_step(Some(lane));
        }
        let out = self.shards[shard]
            .core
            .assignment_computed(&call.group, call.epoch, answer, now);
        self.absorb(shard, out)?;
        self.check_step(Some(lane))
    }

    /// Where the answer to `pending` goes: on one host, to the shard's core
    /// (`Some` with no node). Cluster mode: to the load that asked, if its
    /// node still has it (`Some` with that node); `None` if the answer is
    /// lost, or waits for a paused node to resume (requeued for then).
    fn answering_node(&mut self, pending: PendingCall) -> Option<(PendingCall, Option<usize>)> {
        let Some(cluster) = &self.cluster else {
            return Some((pending, None));
        };
        let shard = self.lanes[pending.lane].shard;
        let call = &pending.call;
        let Some(at) = cluster.node_of(shard, pending.incarnation) else {
            self.note(|_| {
                format!(
                    "answer {} epoch {}: its core is gone",
                    call.group, call.epoch
                )
            });
            return None;
        };
        if let NodeState::Paused { until_ms } = cluster.nodes[at].state {
            self.calls.push(PendingCall {
                due_ms: until_ms,
                ..pending
            });
            return None;
        }
        if cluster.serving(at, shard, self.now).is_none() {
            self.note(|_| {
                format!(
                    "answer {} epoch {}: n{at} no longer serves it",
                    call.group, call.epoch
                )
            });
            return None;
        }
        Some((pending, Some(at)))
    }

    /// The assignor's answer to `call` of group `lane`: computed natively,
    /// or (outside the quiet phase, now and then) a failure on purpose. An
    /// assignor that refuses the core's input is a violation.
    fn answer(
        &mut self,
        lane: usize,
        call: &AssignorCall,
    ) -> Result<Result<Assignment, String>, Violation> {
        if call.epoch != self.group(lane).group_epoch {
            self.stats.stale_answers += 1;
        }
        let injected = !self.quiet && self.rng.chance(ASSIGNOR_FAILURE_P);
        let answer = if injected {
            self.stats.assignor_failures += 1;
            Err("simulated guest failure".to_owned())
        } else {
            assign_natively(&call.assignor, &call.input)
        };
        if let (Err(error), false) = (&answer, injected) {
            return Err(self.violation(format!(
                "assignor {} refused the core's input for epoch {}: {error}",
                call.assignor, call.epoch
            )));
        }
        if let (Ok(answer), "sticky") = (&answer, call.assignor.as_str()) {
            crate::sim::load_check::check_answer_keeps_unknown(&call.input, answer)
                .map_err(|e| self.violation(format!("{e} (group {})", call.group)))?;
        }
        self.note(|w| {
            format!(
                "answer {} epoch {} (group epoch {}){}: {}",
                call.group,
                call.epoch,
                w.group(lane).group_epoch,
                if injected { " FAILED (injected)" } else { "" },
                answer
                    .as_ref()
                    .map(|a| describe_answer(&call.input, a))
                    .unwrap_or_default()
            )
        });
        Ok(answer)
    }
}
