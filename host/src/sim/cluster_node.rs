//! The simulated node's shell: it performs the outputs of a node's
//! [`NodeMachine`] as requests to the lease store (each of which may not
//! reach it, or lose its answer) and feeds their outcomes back, as
//! host/src/cluster/node.rs does over etcd.

use std::collections::BTreeMap;

use super::{Claim, Cluster, Loaded, Reply, Served, decode_log};
use crate::cluster::keys;
use crate::cluster::node_machine::{
    NodeMachine, Output, PlacementInput, Registration, Renewal, StepDownReason,
};
use crate::protocol::core::Coordinator;
use crate::protocol::group::Millis;
use crate::protocol::shard::ShardId;
use crate::sim::store::{Compare, LeaseId, Op, Refused};

impl Cluster {
    /// Performs what `node`'s machine has due at `now`, feeding each
    /// outcome back, until nothing is left; returns the shards it loaded.
    pub(super) fn drive(&mut self, node: usize, now: Millis) -> Vec<Loaded> {
        let mut loaded = Vec::new();
        loop {
            self.nodes[node].machine.handle_timeout(now);
            let Some(output) = self.nodes[node].machine.poll_output() else {
                return loaded;
            };
            match output {
                Output::GrantLease => self.grant_lease(node, now),
                Output::Register => self.register(node, now),
                Output::RenewLease => self.renew(node, now),
                Output::ServeUntil(until_ms) => self.nodes[node].serve_until_ms = until_ms,
                Output::StepDown(why) => self.step_down(node, now, why),
                Output::DropFailedShards => self.drop_failed_shards(node, now),
                Output::ReadView => self.read_view(node, now),
                Output::ReleaseStaleClaim(shard) => {
                    // Its own claim of a shard it does not serve (the
                    // claim's answer was lost): nobody else may take the
                    // shard while it stands.
                    self.note(|| format!("n{node}: releases its stale claim of shard {shard}"));
                    self.release_own(node, &keys::owner(shard), now);
                }
                Output::HandOver { shard, .. } => {
                    let served = self.nodes[node].served.remove(&(shard as usize));
                    let served = served.expect("a shard handed over is served");
                    self.note(|| format!("n{node}: hands shard {shard} over"));
                    self.release(node, &served.claim, now);
                }
                Output::Load(shard) => loaded.extend(self.take(node, shard as usize, now)),
            }
        }
    }

    fn machine(&mut self, node: usize) -> &mut NodeMachine {
        &mut self.nodes[node].machine
    }

    fn grant_lease(&mut self, node: usize, now: Millis) {
        let ttl_ms = self.ttl_ms;
        let granted = match self.request(node, now, |s| s.grant(ttl_ms, now)) {
            Reply::Answered(lease) => {
                self.nodes[node].granted = Some(lease);
                true
            }
            _ => {
                self.note(|| format!("n{node}: taking a lease failed"));
                false
            }
        };
        self.machine(node).handle_lease_granted(now, granted);
    }

    /// Registers under the lease just granted, which becomes its lease.
    /// A registration of its earlier lease still alive (it crashed, or
    /// could not revoke it) holds the name: it tries again next time.
    fn register(&mut self, node: usize, now: Millis) {
        let lease = self.nodes[node]
            .granted
            .take()
            .expect("a lease just granted");
        let name = self.nodes[node].name.clone();
        let key = keys::node(&name);
        let registration = match self.claim(node, &key, name.as_bytes(), lease, now) {
            Ok(Some(claim)) => {
                self.note(|| format!("n{node}: joined under lease {lease}"));
                let n = &mut self.nodes[node];
                n.lease = Some(lease);
                n.registration = Some(claim);
                Registration::Registered
            }
            Ok(None) => {
                self.note(|| format!("n{node}: its name is still registered; joins later"));
                Registration::NameTaken
            }
            Err(why) => {
                self.note(|| format!("n{node}: registering failed: {why}"));
                Registration::Failed
            }
        };
        self.machine(node).handle_registered(registration);
    }

    fn renew(&mut self, node: usize, now: Millis) {
        let Some(lease) = self.nodes[node].lease else {
            panic!("a node renews only a lease it holds");
        };
        let renewal = match self.request(node, now, |s| s.keep_alive(lease, now)) {
            Reply::Answered(ttl_ms) if ttl_ms > 0 => Renewal::Renewed { ttl_ms },
            Reply::Answered(_) => Renewal::LeaseGone,
            _ => {
                self.note(|| format!("n{node}: renewing failed"));
                Renewal::Failed
            }
        };
        self.machine(node).handle_renewed(now, renewal);
    }

    /// Drops every shard (their claims are void with the lease) and
    /// revokes the lease if the store answers (keeping it, as the node
    /// does, until it registers under a new one).
    fn step_down(&mut self, node: usize, now: Millis, why: StepDownReason) {
        self.stats.step_downs += 1;
        let why = match why {
            StepDownReason::LeaseGone => "its lease has ended",
            StepDownReason::LeaseEndedUnrenewed => "its lease ended unrenewed",
        };
        self.note(|| format!("n{node} steps down: {why}"));
        let n = &mut self.nodes[node];
        n.served.clear();
        n.registration = None;
        if let Some(lease) = n.lease {
            let _ = self.request(node, now, |s| s.revoke(lease, now));
        }
    }

    fn drop_failed_shards(&mut self, node: usize, now: Millis) {
        let failed: Vec<usize> = self.nodes[node]
            .served
            .iter()
            .filter(|(_, s)| s.failed)
            .map(|(&shard, _)| shard)
            .collect();
        for shard in failed {
            let served = self.nodes[node].served.remove(&shard).expect("listed");
            self.note(|| format!("n{node}: shard {shard}'s last write did not land: drops it"));
            self.release(node, &served.claim, now);
        }
    }

    /// Reads the live nodes and the owners at one revision (one request),
    /// refreshes the directory and hands the machine its round's input.
    fn read_view(&mut self, node: usize, now: Millis) {
        let view = self.request(node, now, |s| {
            let (nodes, _revision) = s.range(keys::NODES, now);
            let owners = s.peek_range(keys::OWNERS);
            (nodes, owners)
        });
        let Reply::Answered((nodes, owners)) = view else {
            self.note(|| format!("n{node}: placement cannot read the cluster"));
            return self.machine(node).handle_view(None);
        };
        let owners: BTreeMap<ShardId, String> = owners
            .iter()
            .filter_map(|(key, kv)| {
                let shard = keys::last_segment(key).parse().ok()?;
                Some((shard, String::from_utf8_lossy(&kv.value).into_owned()))
            })
            .collect();
        let n = &mut self.nodes[node];
        n.directory = owners
            .iter()
            .map(|(&shard, owner)| (shard as usize, owner.clone()))
            .collect();
        let input = PlacementInput {
            nodes: nodes
                .iter()
                .map(|(key, _)| keys::last_segment(key).to_owned())
                .collect(),
            owners,
            served: n.served.keys().map(|&shard| shard as ShardId).collect(),
        };
        n.machine.handle_view(Some(&input));
    }

    /// Loads `shard` for the machine's plan; the load, for the world's
    /// checks, if it succeeded.
    fn take(&mut self, node: usize, shard: usize, now: Millis) -> Option<Loaded> {
        if let Err(why) = self.load(node, shard, now) {
            self.note(|| format!("n{node}: cannot take shard {shard}: {why}"));
            return None;
        }
        let previous = self.last_owner[shard].replace(node);
        if previous.is_some_and(|p| p != node) {
            self.stats.takeovers += 1;
        }
        Some(Loaded {
            node,
            shard,
            previous,
        })
    }

    /// Claims `key` for `value` under `lease`, or claims it again if it is
    /// held so already (a claim whose answer was lost): as
    /// host/src/cluster's `claim` then `reclaim`.
    fn claim(
        &mut self,
        node: usize,
        key: &str,
        value: &[u8],
        lease: LeaseId,
        now: Millis,
    ) -> Result<Option<Claim>, String> {
        let put = Op::Put {
            key: key.to_owned(),
            value: value.to_vec(),
            lease,
        };
        let attempts = [
            vec![Compare::Created {
                key: key.to_owned(),
                revision: 0,
            }],
            vec![
                Compare::Value {
                    key: key.to_owned(),
                    value: value.to_vec(),
                },
                Compare::Lease {
                    key: key.to_owned(),
                    lease,
                },
            ],
        ];
        for compares in attempts {
            let reply = self.request(node, now, |s| {
                s.txn(&compares, std::slice::from_ref(&put), now)
                    .map(|ok| ok.then(|| s.revision()))
            });
            match reply {
                Reply::Answered(Ok(Some(revision))) => {
                    return Ok(Some(Claim {
                        key: key.to_owned(),
                        revision,
                    }));
                }
                Reply::Answered(Ok(None)) => {}
                Reply::Answered(Err(Refused::LeaseNotFound(_))) => return Err("lease gone".into()),
                Reply::Lost(_) => return Err("the answer was lost".into()),
                Reply::Unreached => return Err("the store is unreachable".into()),
            }
        }
        Ok(None)
    }

    /// Deletes `claim`'s key if the claim still holds.
    pub(super) fn release(&mut self, node: usize, claim: &Claim, now: Millis) {
        let compares = [Compare::Modified {
            key: claim.key.clone(),
            revision: claim.revision,
        }];
        let ops = [Op::Delete {
            key: claim.key.clone(),
        }];
        let _ = self.request(node, now, |s| s.txn(&compares, &ops, now));
    }

    /// Deletes `key` if it holds this node's name under its lease, as
    /// host/src/cluster's `release_own`.
    fn release_own(&mut self, node: usize, key: &str, now: Millis) {
        let Some(lease) = self.nodes[node].lease else {
            return;
        };
        let compares = [
            Compare::Value {
                key: key.to_owned(),
                value: self.nodes[node].name.as_bytes().to_vec(),
            },
            Compare::Lease {
                key: key.to_owned(),
                lease,
            },
        ];
        let ops = [Op::Delete {
            key: key.to_owned(),
        }];
        let _ = self.request(node, now, |s| s.txn(&compares, &ops, now));
    }

    /// Claims `shard`, reads its log and replays it into a fresh core.
    fn load(&mut self, node: usize, shard: usize, now: Millis) -> Result<(), String> {
        let lease = self.nodes[node].lease.ok_or("no lease")?;
        let name = self.nodes[node].name.clone();
        let claim = self
            .claim(
                node,
                &keys::owner(shard as ShardId),
                name.as_bytes(),
                lease,
                now,
            )?
            .ok_or("held by another node")?;
        let prefix = keys::log_prefix(shard as ShardId);
        let chunks = match self.request(node, now, |s| s.range(&prefix, now).0) {
            Reply::Answered(chunks) => chunks,
            _ => {
                self.release(node, &claim, now);
                return Err("reading its log failed".into());
            }
        };
        let (records, next_index) = decode_log(shard, &chunks)?;
        let mut core = Coordinator::new(self.shard_seeds[shard]);
        for record in records {
            core.check_replay(&record)
                .map_err(|e| format!("a record of shard {shard} does not fit the log: {e}"))?;
            core.apply_owned(record);
        }
        // As the runtime loads a shard: the grace first, so that the
        // leases a restart assumes include it (members of the previous
        // owner may count on it while nobody serves the shard).
        core.set_unreached_grace_ms(self.unreached_grace_ms);
        core.restarted(now);
        let incarnation = self.next_incarnation;
        self.next_incarnation += 1;
        self.note(|| {
            format!(
                "n{node} loads shard {shard} (claim at revision {}, {next_index} batches)",
                claim.revision
            )
        });
        self.nodes[node].served.insert(
            shard,
            Served {
                core,
                claim,
                next_index,
                failed: false,
                incarnation,
            },
        );
        Ok(())
    }
}
