//! The cap on groups ([`GroupCap`]): how many groups the shards this host
//! serves hold, counted as shards load and unload and as groups are
//! created, and the refusal of a new group past `groups_max`. It counts
//! what this host serves: in a cluster, each node's groups (a takeover
//! may bring a node past its cap; the groups it took are served, and no
//! new one is created there until it is below again).

use std::sync::atomic::{AtomicU64, Ordering};

use metrics::Unit;

use crate::telemetry::{Family, Kind};

use super::RuntimeError;

/// The default `groups_max`: ten thousand groups of a thousand tasks each
/// fit in a few GiB.
pub const GROUPS_MAX_DEFAULT: u64 = 10_000;

/// The groups this host serves, and how many it may.
#[derive(Debug)]
pub struct GroupCap {
    groups: AtomicU64,
    max: AtomicU64,
}

impl Default for GroupCap {
    fn default() -> Self {
        GroupCap {
            groups: AtomicU64::new(0),
            max: AtomicU64::new(GROUPS_MAX_DEFAULT),
        }
    }
}

impl GroupCap {
    pub fn set_max(&self, max: u64) {
        self.max.store(max, Ordering::Relaxed);
        ::metrics::gauge!("assignd_groups_max").set(max as f64);
    }

    pub fn max(&self) -> u64 {
        self.max.load(Ordering::Relaxed)
    }

    /// The groups of the served shards.
    pub fn groups(&self) -> u64 {
        self.groups.load(Ordering::Relaxed)
    }

    /// Takes a place for a new group, or refuses it at the cap; a creation
    /// that fails after gives the place back ([`Self::release`]). Two
    /// creations at once on two shards cannot both take the last place.
    pub fn admit(&self) -> Result<(), RuntimeError> {
        let max = self.max();
        self.groups
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .map(drop)
            .map_err(|_| RuntimeError::GroupsMaxReached { max })
    }

    pub fn release(&self) {
        self.unloaded(1);
    }

    /// A shard of `groups` groups is served from now on.
    pub fn loaded(&self, groups: u64) {
        self.groups.fetch_add(groups, Ordering::AcqRel);
    }

    /// A shard of `groups` groups is no longer served.
    pub fn unloaded(&self, groups: u64) {
        let _ = self
            .groups
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                Some(n.saturating_sub(groups))
            });
    }
}

/// The cap on groups, as this file sets it.
pub const GROUP_CAP_FAMILIES: &[Family] = &[Family::new(
    "assignd_groups_max",
    Kind::Gauge,
    Unit::Count,
    "Groups this host serves at most (serve --groups-max; assignd_groups counts them)",
)];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_past_the_cap_is_refused_until_a_place_is_free() {
        let cap = GroupCap::default();
        cap.set_max(3);
        cap.loaded(2);
        assert!(cap.admit().is_ok());
        assert!(matches!(
            cap.admit(),
            Err(RuntimeError::GroupsMaxReached { max: 3 })
        ));
        cap.release();
        assert!(cap.admit().is_ok());
        cap.unloaded(3);
        assert_eq!(cap.groups(), 0);
        // A takeover may bring the count past the cap: nothing is created
        // until it is below again.
        cap.loaded(5);
        assert!(cap.admit().is_err());
    }
}
