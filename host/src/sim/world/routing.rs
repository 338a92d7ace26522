//! Cluster mode: how the world reaches the nodes that serve the shards. A
//! heartbeat goes through its process's network (down or flapping, for a
//! while) to the node it last reached and on through redirects to the
//! owner; an admin request goes to the node that serves the shard; a core's
//! output is persisted as the node's next batch before it is acknowledged;
//! and the nodes' own events and faults are inputs of their own.

use super::World;
use crate::protocol::core::{Heartbeat, HeartbeatResponse, Output, ProtocolError};
use crate::protocol::group::Millis;
use crate::sim::Violation;
use crate::sim::cluster::{NodeState, Persisted, Served};
use crate::sim::member::Reach;

/// What became of a member's heartbeat in cluster mode.
pub(super) enum Routed {
    /// A node that serves the group's shard answered (its records, if
    /// any, are durable and absorbed; its calls queued), from the load
    /// `incarnation` of the shard.
    Answered {
        result: Box<Result<(HeartbeatResponse, Output), ProtocolError>>,
        incarnation: u64,
    },
    /// No answer came back (why, for the trace), and whether a core may
    /// have handled the heartbeat.
    Unanswered { why: String, reach: Reach },
}

/// Cluster mode: a process's network is down (its interface, an egress
/// rule that rejects): every heartbeat it sends until `until_ms` fails
/// before it leaves, provably unreached, while the nodes serve on.
#[derive(Clone, Copy, Debug)]
pub(super) struct CutOff {
    pub(super) until_ms: Millis,
    /// It went down with a heartbeat in flight: that one reaches its node
    /// and its answer is lost.
    pub(super) in_flight: bool,
    /// It flaps: the first heartbeat once it is back up reaches its node
    /// and its answer is lost (sent on the unreached lease, perhaps told a
    /// revocation the host decided meanwhile).
    pub(super) flaps: bool,
}

impl World {
    /// Cluster mode: what becomes of a heartbeat of process `pid` whose
    /// network is down: no answer (`Some`), unless it was in flight when
    /// the network went down, or is the first after a flapping link is
    /// back: then it reaches its node and its answer is lost (`true`).
    pub(super) fn route_cut_off(&mut self, pid: usize, now: Millis) -> (Option<Routed>, bool) {
        let mut answer_cut = false;
        let routed = match self.cut_off.get_mut(&pid) {
            Some(cut) if now < cut.until_ms && cut.in_flight => {
                cut.in_flight = false;
                answer_cut = true;
                None
            }
            Some(cut) if now < cut.until_ms => Some(Routed::Unanswered {
                why: "its network is down".into(),
                reach: Reach::Unreached,
            }),
            Some(cut) if cut.flaps => {
                self.cut_off.remove(&pid);
                answer_cut = true;
                None
            }
            _ => None,
        };
        (routed, answer_cut)
    }

    /// Cluster mode: sends process `pid`'s heartbeat to the node it last
    /// reached; a node that does not serve the group's shard sends it on
    /// to the owner its directory names (the real 307), a node that does
    /// answers after its records are durable. Invariant 8 at every answer:
    /// only the node whose claim of the shard holds answers for it.
    pub(super) fn route_heartbeat(
        &mut self,
        pid: usize,
        shard: usize,
        request: &Heartbeat,
    ) -> Result<Routed, Violation> {
        let now = self.now;
        let load = self.host_load();
        let count = self.cluster.as_ref().expect("cluster mode").nodes.len();
        let mut node = *self.node_hints.entry(pid).or_insert(pid % count);
        for _hop in 0..3 {
            if let Some(unanswered) = self.node_unreachable(pid, node) {
                return Ok(unanswered);
            }
            let cluster = self.cluster.as_mut().expect("cluster mode");
            let Some(served) = cluster.serving_mut(node, shard, now) else {
                let Some(owner) = self.redirect(pid, node, shard) else {
                    return Ok(Routed::Unanswered {
                        why: format!(
                            "n{node} does not serve shard {shard} and knows no other owner (503 shard_unavailable)"
                        ),
                        reach: Reach::Unreached,
                    });
                };
                node = owner;
                continue;
            };
            let incarnation = served.incarnation;
            let result = served.core.heartbeat_loaded(request, now, load);
            return self.answer_from(node, shard, incarnation, result);
        }
        // Every hop was a redirect: no core handled it.
        Ok(Routed::Unanswered {
            why: "redirected too often".into(),
            reach: Reach::Unreached,
        })
    }

    /// Cluster mode: a heartbeat sent to `node` while it is down or paused
    /// gets no answer (`Some`); process `pid` tries the next node next.
    fn node_unreachable(&mut self, pid: usize, node: usize) -> Option<Routed> {
        let cluster = self.cluster.as_ref().expect("cluster mode");
        let count = cluster.nodes.len();
        let unanswered = match cluster.nodes[node].state {
            NodeState::Up => return None,
            // Its process is gone: the connection is refused.
            NodeState::Down { .. } => Routed::Unanswered {
                why: format!("n{node} is down (connection refused)"),
                reach: Reach::Unreached,
            },
            // The request waits in its socket: it may be handled when
            // the node resumes.
            NodeState::Paused { .. } => Routed::Unanswered {
                why: format!("n{node} does not answer (paused)"),
                reach: Reach::MaybeReached,
            },
        };
        self.node_hints.insert(pid, (node + 1) % count);
        Some(unanswered)
    }

    /// Cluster mode: `node` does not serve `shard`: the owner its directory
    /// names (now process `pid`'s hint), or `None` (a 503) when it knows
    /// none: the process tries the next node next.
    fn redirect(&mut self, pid: usize, node: usize, shard: usize) -> Option<usize> {
        let cluster = self.cluster.as_mut().expect("cluster mode");
        let count = cluster.nodes.len();
        let directed = cluster.nodes[node]
            .directed_to(shard)
            .and_then(|owner| cluster.nodes.iter().position(|n| n.name == owner));
        let Some(owner) = directed else {
            self.node_hints.insert(pid, (node + 1) % count);
            return None;
        };
        cluster.stats.redirects += 1;
        self.node_hints.insert(pid, owner);
        Some(owner)
    }

    /// Cluster mode: the core of load `incarnation` of `shard` on `node`
    /// handled a heartbeat: its records are persisted, and it answers once
    /// they are acknowledged, if its claim still holds (invariant 8).
    fn answer_from(
        &mut self,
        node: usize,
        shard: usize,
        incarnation: u64,
        result: Result<(HeartbeatResponse, Output), ProtocolError>,
    ) -> Result<Routed, Violation> {
        let now = self.now;
        let result = match result {
            Ok((response, out)) => match self.persist_output(node, shard, out)? {
                Some(out) => Ok((response, out)),
                None => {
                    // Handled by a core, its records perhaps durable.
                    return Ok(Routed::Unanswered {
                        why: format!("n{node}'s write of shard {shard} was not acknowledged"),
                        reach: Reach::MaybeReached,
                    });
                }
            },
            Err(error) => Err(error),
        };
        if !self
            .cluster
            .as_ref()
            .expect("cluster mode")
            .claim_holds(node, shard, now)
        {
            return Err(self.violation(format!(
                "invariant 8: n{node} answers for shard {shard}, whose claim it no longer holds"
            )));
        }
        Ok(Routed::Answered {
            result: Box::new(result),
            incarnation,
        })
    }

    /// Cluster mode: the node whose claim of `shard` holds, if it serves
    /// the shard now (up, within its lease).
    pub(super) fn serving_owner(&self, shard: usize) -> Option<usize> {
        let cluster = self.cluster.as_ref()?;
        cluster
            .owner(shard, self.now)
            .filter(|&node| cluster.serving(node, shard, self.now).is_some())
    }

    /// Cluster mode: the shard `node` serves now (which the caller knows).
    pub(super) fn cluster_served(&mut self, node: usize, shard: usize) -> &mut Served {
        let now = self.now;
        self.cluster
            .as_mut()
            .and_then(|c| c.serving_mut(node, shard, now))
            .expect("a shard the node serves")
    }

    /// Cluster mode: persists `out`'s records as `node`'s next batch of
    /// `shard`'s log, absorbs them if they landed, and if the node heard
    /// so, queues its calls and returns the output (with its records), so
    /// that the caller may answer. Records before acknowledgement: what a
    /// node acknowledges is never lost.
    pub(super) fn persist_output(
        &mut self,
        node: usize,
        shard: usize,
        out: Output,
    ) -> Result<Option<Output>, Violation> {
        let now = self.now;
        let cluster = self.cluster.as_mut().expect("cluster mode");
        let incarnation = cluster.nodes[node].served[&shard].incarnation;
        let persisted = if out.records.is_empty() {
            Persisted {
                landed: false,
                acked: true,
            }
        } else {
            cluster.persist(node, shard, &out.records, now)
        };
        if persisted.landed {
            // Checked against the liveness of the core that wrote them:
            // with its answer lost, the shard has no owner to ask.
            self.absorb_records(shard, out.records.clone(), Some(node))?;
        }
        if !persisted.acked {
            return Ok(None);
        }
        self.queue_shadow_calls(out.shadow_calls.clone(), incarnation);
        self.queue_calls(out.assignor_calls.clone(), incarnation)?;
        Ok(Some(out))
    }

    /// Cluster mode: what node `node` has due now (a renewal, a round, a
    /// resume, a restart).
    pub(super) fn node_event(&mut self, node: usize) -> Result<(), Violation> {
        self.step += 1;
        let now = self.now;
        let loaded = self
            .cluster
            .as_mut()
            .expect("cluster mode")
            .on_event(node, now);
        self.check_loaded(&loaded)?;
        self.check_state()
    }

    /// Cluster mode: a random fault of a node.
    pub(super) fn node_chaos(&mut self) -> Result<(), Violation> {
        let now = self.now;
        self.cluster.as_mut().expect("cluster mode").chaos(now);
        self.check_state()
    }
}
