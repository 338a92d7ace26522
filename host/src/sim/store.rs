//! A modelled lease store with etcd's semantics, in memory and
//! deterministic: the cluster layer's stand-in for etcd
//! (host/src/cluster/etcd.rs uses the same few operations).
//!
//! It owns the keys, the leases and the one revision counter: every
//! transaction that writes takes the next revision for all its writes;
//! a key keeps its create revision until it is deleted and takes the
//! writing revision as its mod revision; a lease ends `ttl_ms` after it
//! was granted or last kept alive, and its end deletes every key put
//! under it (in one revision, as a revoke does). Requests are applied one
//! at a time, atomically, in the order they are made: linearizable by
//! construction. Time is only what callers pass in; the store holds no
//! randomness. It knows nothing of nodes, shards or the network: whether a
//! request reaches it, or its answer gets back, is the caller's model
//! ([`super::cluster`]).

use std::collections::BTreeMap;

use crate::protocol::group::Millis;

/// A lease id; 0 is "no lease", as in etcd.
pub type LeaseId = i64;

/// One key's value and its revisions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    pub value: Vec<u8>,
    pub create_revision: i64,
    pub mod_revision: i64,
    pub lease: LeaseId,
}

/// A condition of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Compare {
    /// The key's create revision is this one (0: the key does not exist).
    Created { key: String, revision: i64 },
    /// The key exists and was last put at this revision.
    Modified { key: String, revision: i64 },
    /// The key exists and holds this value.
    Value { key: String, value: Vec<u8> },
    /// The key exists under this lease.
    Lease { key: String, lease: LeaseId },
}

/// One write of a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Puts `key` under `lease` (0: none); the lease must exist.
    Put {
        key: String,
        value: Vec<u8>,
        lease: LeaseId,
    },
    Delete {
        key: String,
    },
}

impl Op {
    pub fn key(&self) -> &str {
        match self {
            Op::Put { key, .. } | Op::Delete { key } => key,
        }
    }
}

/// A request the store refused as a whole (etcd answers an error, and
/// applies nothing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refused {
    LeaseNotFound(LeaseId),
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Lease {
    ttl_ms: u64,
    /// The lease ends at this time unless kept alive before.
    ends_at_ms: Millis,
}

/// The store: keys in key order, leases by id.
#[derive(Clone, Debug, Default)]
pub struct LeaseStore {
    revision: i64,
    keys: BTreeMap<String, KeyValue>,
    leases: BTreeMap<LeaseId, Lease>,
    leases_granted: i64,
    /// The latest time a request carried (time never goes back).
    now_ms: Millis,
    /// Leases ended by time so far (for statistics).
    pub leases_expired: u64,
}

impl LeaseStore {
    pub fn new() -> Self {
        LeaseStore::default()
    }

    /// The revision of the last write.
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// Brings the store to `now`: every lease whose end has come is
    /// revoked, in id order. Every request calls it first.
    pub fn advance(&mut self, now: Millis) {
        assert!(
            now >= self.now_ms,
            "the store's time went back: {now} after {}",
            self.now_ms
        );
        self.now_ms = now;
        let ended: Vec<LeaseId> = self
            .leases
            .iter()
            .filter(|(_, lease)| lease.ends_at_ms <= now)
            .map(|(&id, _)| id)
            .collect();
        for id in ended {
            self.leases_expired += 1;
            self.revoke_now(id);
        }
    }

    /// A new lease of `ttl_ms` from `now`.
    pub fn grant(&mut self, ttl_ms: u64, now: Millis) -> LeaseId {
        self.advance(now);
        self.leases_granted += 1;
        let id = self.leases_granted;
        self.leases.insert(
            id,
            Lease {
                ttl_ms,
                ends_at_ms: now + ttl_ms,
            },
        );
        id
    }

    /// Keeps `lease` alive from `now`: its TTL, or 0 if it is gone (as
    /// etcd's keep-alive answers).
    pub fn keep_alive(&mut self, lease: LeaseId, now: Millis) -> u64 {
        self.advance(now);
        match self.leases.get_mut(&lease) {
            Some(held) => {
                held.ends_at_ms = now + held.ttl_ms;
                held.ttl_ms
            }
            None => 0,
        }
    }

    /// Revokes `lease` (its keys are deleted at once); false if it was gone.
    pub fn revoke(&mut self, lease: LeaseId, now: Millis) -> bool {
        self.advance(now);
        self.revoke_now(lease)
    }

    fn revoke_now(&mut self, lease: LeaseId) -> bool {
        if self.leases.remove(&lease).is_none() {
            return false;
        }
        let before = self.keys.len();
        self.keys.retain(|_, kv| kv.lease != lease);
        if self.keys.len() != before {
            self.revision += 1;
        }
        true
    }

    /// Applies `ops` at one new revision if every compare holds; returns
    /// whether they held. A put under a lease that does not exist refuses
    /// the whole request (nothing is applied).
    pub fn txn(&mut self, compares: &[Compare], ops: &[Op], now: Millis) -> Result<bool, Refused> {
        self.advance(now);
        if !compares.iter().all(|c| self.holds(c)) {
            return Ok(false);
        }
        for op in ops {
            if let Op::Put { lease, .. } = op
                && *lease != 0
                && !self.leases.contains_key(lease)
            {
                return Err(Refused::LeaseNotFound(*lease));
            }
        }
        if ops.is_empty() {
            return Ok(true);
        }
        self.revision += 1;
        let revision = self.revision;
        for op in ops {
            match op {
                Op::Put { key, value, lease } => {
                    let create_revision =
                        self.keys.get(key).map_or(revision, |kv| kv.create_revision);
                    self.keys.insert(
                        key.clone(),
                        KeyValue {
                            value: value.clone(),
                            create_revision,
                            mod_revision: revision,
                            lease: *lease,
                        },
                    );
                }
                Op::Delete { key } => {
                    self.keys.remove(key);
                }
            }
        }
        Ok(true)
    }

    fn holds(&self, compare: &Compare) -> bool {
        match compare {
            Compare::Created { key, revision } => {
                self.keys.get(key).map_or(0, |kv| kv.create_revision) == *revision
            }
            Compare::Modified { key, revision } => self
                .keys
                .get(key)
                .is_some_and(|kv| kv.mod_revision == *revision),
            Compare::Value { key, value } => {
                self.keys.get(key).is_some_and(|kv| kv.value == *value)
            }
            Compare::Lease { key, lease } => {
                self.keys.get(key).is_some_and(|kv| kv.lease == *lease)
            }
        }
    }

    /// Every key starting with `prefix`, in key order, with the revision
    /// they were read at (one snapshot).
    pub fn range(&mut self, prefix: &str, now: Millis) -> (Vec<(String, KeyValue)>, i64) {
        self.advance(now);
        (self.peek_range(prefix), self.revision)
    }

    /// [`Self::range`] without a request: what the store holds as last
    /// brought up to date, for the checks.
    pub fn peek_range(&self, prefix: &str) -> Vec<(String, KeyValue)> {
        self.keys
            .range(prefix.to_owned()..)
            .take_while(|(key, _)| key.starts_with(prefix))
            .map(|(key, kv)| (key.clone(), kv.clone()))
            .collect()
    }

    /// `key` as last brought up to date, for the checks.
    pub fn peek(&self, key: &str) -> Option<&KeyValue> {
        self.keys.get(key)
    }

    /// Whether `key` is still put at `mod_revision` at `now`: it exists at
    /// that revision and its lease (if any) has not ended by `now`. A
    /// query of the checks: it changes nothing.
    pub fn holds_at(&self, key: &str, mod_revision: i64, now: Millis) -> bool {
        self.keys.get(key).is_some_and(|kv| {
            kv.mod_revision == mod_revision
                && (kv.lease == 0
                    || self
                        .leases
                        .get(&kv.lease)
                        .is_some_and(|l| l.ends_at_ms > now))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &str, value: &str, lease: LeaseId) -> Op {
        Op::Put {
            key: key.into(),
            value: value.as_bytes().to_vec(),
            lease,
        }
    }

    #[test]
    fn a_claim_is_taken_once_and_fences_by_its_revision() {
        let mut store = LeaseStore::new();
        let lease = store.grant(1_000, 0);
        let absent = Compare::Created {
            key: "owners/0".into(),
            revision: 0,
        };
        assert_eq!(
            store.txn(
                std::slice::from_ref(&absent),
                &[put("owners/0", "a", lease)],
                1
            ),
            Ok(true)
        );
        let claim = store.peek("owners/0").unwrap().mod_revision;
        assert_eq!(claim, 1);
        assert_eq!(
            store.txn(&[absent], &[put("owners/0", "b", lease)], 2),
            Ok(false)
        );
        let guard = Compare::Modified {
            key: "owners/0".into(),
            revision: claim,
        };
        assert_eq!(
            store.txn(std::slice::from_ref(&guard), &[put("log/0", "r", 0)], 3),
            Ok(true)
        );
        assert_eq!(store.revision(), 2);
        // Put again: a new mod revision, the same create revision; the old
        // guard no longer holds.
        assert_eq!(store.txn(&[], &[put("owners/0", "a", lease)], 4), Ok(true));
        let kv = store.peek("owners/0").unwrap();
        assert_eq!((kv.create_revision, kv.mod_revision), (1, 3));
        assert_eq!(store.txn(&[guard], &[put("log/1", "r", 0)], 5), Ok(false));
        assert!(store.peek("log/1").is_none());
    }

    #[test]
    fn a_lease_not_kept_alive_ends_and_takes_its_keys() {
        let mut store = LeaseStore::new();
        let lease = store.grant(1_000, 0);
        store
            .txn(&[], &[put("nodes/a", "a", lease), put("keep", "x", 0)], 0)
            .unwrap();
        assert_eq!(store.keep_alive(lease, 900), 1_000);
        assert!(store.holds_at("nodes/a", 1, 1_899));
        assert!(!store.holds_at("nodes/a", 1, 1_900));
        let (keys, revision) = store.range("", 1_900);
        assert_eq!(keys.len(), 1, "{keys:?}");
        assert_eq!(revision, 2, "the expiry is one revision");
        assert_eq!(store.keep_alive(lease, 2_000), 0);
        assert_eq!(
            store.txn(&[], &[put("nodes/a", "a", lease)], 2_000),
            Err(Refused::LeaseNotFound(lease))
        );
        assert_eq!(store.leases_expired, 1);
    }

    #[test]
    fn ranges_read_one_prefix_in_key_order() {
        let mut store = LeaseStore::new();
        store
            .txn(
                &[],
                &[
                    put("s/1/log/2", "b", 0),
                    put("s/1/log/1", "a", 0),
                    put("s/10", "x", 0),
                ],
                0,
            )
            .unwrap();
        let (keys, _) = store.range("s/1/", 1);
        let names: Vec<&str> = keys.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["s/1/log/1", "s/1/log/2"]);
    }
}
