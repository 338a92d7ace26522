//! The runtime's gauges, set at the scrape: groups and members (from one
//! scan of every served shard, `observe`, `load_gauges`, `shadow_gauges`), timers by kind, the host's
//! lateness, and the shards the host has and serves.

use std::sync::atomic::Ordering;

use metrics::Unit;

use crate::protocol::core::TimerKind;
use crate::telemetry::{Family, Kind};

use super::execute::lock_shard;
use super::{Runtime, load_gauges, observe, shadow_gauges};

impl Runtime {
    /// Scans every served shard once (under its lock, one at a time) and
    /// sets the group and member gauges (after the locks). `GET /metrics`
    /// calls it, so the figures are those of the scrape and an idle host
    /// spends nothing on them between scrapes.
    pub fn refresh_gauges(&self) {
        let mut figures = Vec::new();
        let mut loads = Vec::new();
        let mut shadows = Vec::new();
        let now = self.clock.now();
        let mut served_count = 0;
        let mut timers = [0usize; TimerKind::ALL.len()];
        for shard in self.shards.iter() {
            if let Some(served) = lock_shard(shard).as_mut() {
                figures.extend(observe::scan(&served.core));
                loads.extend(load_gauges::scan(&served.core, now));
                shadows.extend(shadow_gauges::scan(&served.core));
                for (i, (_, n)) in served.core.timers_by_kind().into_iter().enumerate() {
                    timers[i] += n;
                }
                served_count += 1;
            }
        }
        for (kind, n) in TimerKind::ALL.iter().zip(timers) {
            ::metrics::gauge!("assignd_timers", "kind" => kind.name()).set(n as f64);
        }
        ::metrics::gauge!("assignd_host_late_seconds")
            .set(self.lateness.late_ms(self.clock.now()) as f64 / 1000.0);
        figures.sort_by(|a, b| a.name.cmp(&b.name));
        observe::publish(&figures);
        load_gauges::publish(loads);
        shadow_gauges::publish(shadows);
        self.publish_shard_counts(served_count);
    }

    /// Sets the shard gauges: how many shards the host has and serves.
    pub(super) fn publish_shards(&self) {
        let served = self
            .shards
            .iter()
            .filter(|shard| shard.served.load(Ordering::Acquire))
            .count();
        self.publish_shard_counts(served);
    }

    fn publish_shard_counts(&self, served: usize) {
        ::metrics::gauge!("assignd_shards").set(self.shard_count() as f64);
        ::metrics::gauge!("assignd_shards_served").set(served as f64);
    }
}

/// The shard families this file sets.
pub const SHARD_FAMILIES: &[Family] = &[
    Family::new(
        "assignd_shards",
        Kind::Gauge,
        Unit::Count,
        "shards the host's groups are spread over (fixed for its data dir)",
    ),
    Family::new(
        "assignd_shards_served",
        Kind::Gauge,
        Unit::Count,
        "shards this host serves now (loaded: their groups answer)",
    ),
];

/// The shards' timer tables: deadlines by kind (set here), ticks and
/// the groups they visit (`timers.rs`).
pub const TIMER_FAMILIES: &[Family] = &[
    Family::new(
        "assignd_timers",
        Kind::Gauge,
        Unit::Count,
        "deadlines in the served shards' timer tables, by kind (at the scrape)",
    ),
    Family::new(
        "assignd_timer_ticks_total",
        Kind::Counter,
        Unit::Count,
        "ticks of a shard: each at its earliest deadline, at most one per 50 ms",
    ),
    Family::new(
        "assignd_timer_groups_visited_total",
        Kind::Counter,
        Unit::Count,
        "groups the ticks visited (those due): an idle group is not visited",
    ),
];
