//! How late the host runs: the facts the runtime measures about its own
//! lateness (a tick that fired after its deadline, a heartbeat that waited
//! before the core could take it), kept as one level that decays as the
//! host catches up. The core is handed the level with every tick and
//! heartbeat ([`HostLoad`]); it decides what follows (no expiry for the
//! host's own lateness, longer heartbeat intervals). Nothing here touches
//! the core.

use std::sync::Mutex;

use metrics::Unit;

use crate::protocol::core::HostLoad;
use crate::protocol::group::Millis;
use crate::telemetry::{Family, Kind};

/// Lateness under this is scheduling jitter, not a late host.
pub const LATE_MS_MIN: u64 = 20;
/// A lateness of L is still reported, decaying, for `L * LATE_DECAY_FACTOR`
/// after it was seen: the heartbeats queued behind a stall take about
/// that long to be served.
const LATE_DECAY_FACTOR: u64 = 2;

/// How late a timer ran that fired at `fired_ms` for `deadline_ms`, armed
/// at `armed_ms`. A deadline already past when the timer was armed counts
/// from the arming, not from its own time: the host was not behind a
/// deadline it did not know of yet. (A timer that has not started — a new
/// group's, a group just loaded from its records — is due at 0; a burst's
/// floor may have passed while the task ticked.) Measured from the
/// deadline itself, a host idle for a minute before its first group was
/// "a minute late".
pub fn timer_late_ms(deadline_ms: Millis, armed_ms: Millis, fired_ms: Millis) -> u64 {
    fired_ms.saturating_sub(deadline_ms.max(armed_ms))
}

/// The decaying lateness level.
#[derive(Debug, Default)]
pub struct Lateness {
    /// The level and the time it was last raised.
    level: Mutex<(Millis, Millis)>,
}

impl Lateness {
    /// Something ran `late_ms` after it should have, seen at `now`.
    pub fn observe(&self, late_ms: u64, now: Millis) {
        if late_ms < LATE_MS_MIN {
            return;
        }
        let mut level = self.level.lock().unwrap_or_else(|e| e.into_inner());
        let current = decayed(*level, now);
        if late_ms >= current {
            if current < LATE_MS_MIN {
                tracing::warn!(
                    late_ms,
                    "the host runs late: members are not expired for it, and are told to beat less often"
                );
                ::metrics::counter!("assignd_host_late_total").increment(1);
            }
            *level = (late_ms, now);
        }
    }

    /// How late the host runs now.
    pub fn late_ms(&self, now: Millis) -> u64 {
        let level = *self.level.lock().unwrap_or_else(|e| e.into_inner());
        decayed(level, now)
    }

    /// The load fact for a core call at `now`.
    pub fn load(&self, now: Millis) -> HostLoad {
        HostLoad {
            late_ms: self.late_ms(now),
        }
    }
}

/// The level `(late_ms, at)` at `now`: falls linearly to 0 over
/// `late_ms * LATE_DECAY_FACTOR`.
fn decayed((late_ms, at): (Millis, Millis), now: Millis) -> u64 {
    let elapsed = now.saturating_sub(at);
    late_ms.saturating_sub(elapsed / LATE_DECAY_FACTOR)
}

/// The host's lateness: the gauge set at the scrape (`gauges.rs`) and the
/// count of late runs this file records.
pub const LATENESS_FAMILIES: &[Family] = &[
    Family::new(
        "assignd_host_late_seconds",
        Kind::Gauge,
        Unit::Seconds,
        "how late the host runs at the scrape (a timer that fired after its deadline, a heartbeat that waited for its shard), decaying; members are told to beat less often meanwhile",
    ),
    Family::new(
        "assignd_host_late_total",
        Kind::Counter,
        Unit::Count,
        "times the host started running late (at least 20 ms behind; each a warn log line)",
    ),
];

/// Sets the lateness families to zero.
pub fn zero_lateness_series() {
    metrics::gauge!("assignd_host_late_seconds").set(0.0);
    metrics::counter!("assignd_host_late_total").absolute(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timer_is_late_only_after_its_deadline_was_due_and_armed() {
        // Armed at 1,000 for 1,500, fired at 1,700: 200 ms late.
        assert_eq!(timer_late_ms(1_500, 1_000, 1_700), 200);
        // On time.
        assert_eq!(timer_late_ms(1_500, 1_000, 1_500), 0);
        // A timer that has not started is due at 0: armed at 7,000 (the
        // host idle until then), fired at 7,001, it is not 7 s late.
        assert_eq!(timer_late_ms(0, 7_000, 7_001), 1);
        // Armed after its deadline, the timer is late from the arming.
        assert_eq!(timer_late_ms(5_000, 6_000, 9_000), 3_000);
    }

    #[test]
    fn a_lateness_is_reported_and_decays_to_nothing_over_twice_its_length() {
        let lateness = Lateness::default();
        lateness.observe(LATE_MS_MIN - 1, 0);
        assert_eq!(lateness.late_ms(0), 0, "jitter is not lateness");
        lateness.observe(1_000, 10_000);
        assert_eq!(lateness.late_ms(10_000), 1_000);
        assert_eq!(lateness.late_ms(11_000), 500);
        // A smaller lateness does not lower the level.
        lateness.observe(100, 11_000);
        assert_eq!(lateness.late_ms(11_000), 500);
        assert_eq!(lateness.late_ms(12_000), 0);
        assert_eq!(lateness.load(12_000), HostLoad { late_ms: 0 });
    }
}
