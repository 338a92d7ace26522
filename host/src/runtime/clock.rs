//! The runtime's clock: milliseconds since the process started, read only
//! here and passed into every core call. Tests use a manual clock they
//! advance by hand, so that timeouts are exact.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use crate::protocol::group::Millis;

/// A monotonic clock in [`Millis`].
#[derive(Debug)]
pub enum Clock {
    /// Milliseconds since `Instant` (the process start, in practice).
    Monotonic(Instant),
    /// A clock that moves only when told to (tests).
    Manual(AtomicU64),
}

impl Clock {
    /// The real clock, starting at 0 now.
    pub fn monotonic() -> Self {
        Clock::Monotonic(Instant::now())
    }

    /// A manual clock starting at `start_ms`.
    pub fn manual(start_ms: Millis) -> Self {
        Clock::Manual(AtomicU64::new(start_ms))
    }

    pub fn now(&self) -> Millis {
        match self {
            Clock::Monotonic(start) => {
                u64::try_from(start.elapsed().as_millis()).unwrap_or(Millis::MAX)
            }
            Clock::Manual(now) => now.load(Ordering::SeqCst),
        }
    }

    /// When the clock read 0, for a real clock (timers sleep until
    /// `start + deadline`); `None` for a manual one.
    pub fn start(&self) -> Option<Instant> {
        match self {
            Clock::Monotonic(start) => Some(*start),
            Clock::Manual(_) => None,
        }
    }

    /// Moves a manual clock forward by `ms`; a monotonic clock cannot be
    /// moved (a bug if asked).
    pub fn advance(&self, ms: Millis) {
        match self {
            Clock::Monotonic(_) => panic!("the monotonic clock cannot be advanced by hand"),
            Clock::Manual(now) => {
                now.fetch_add(ms, Ordering::SeqCst);
            }
        }
    }
}
