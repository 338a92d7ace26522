//! [`Availability`]: whether etcd answers, as the node's own etcd calls
//! find it — its lease renewals, its placement reads, and the revoke,
//! grant and registration of a step-down — whichever of them fails
//! first. The node turns it into the signals an operator and a client
//! see: `/healthz`'s `storage_unavailable` and the code a refused write
//! gets. Sans-IO: the node feeds it each call's outcome and acts on the
//! [`Change`] it returns; nothing here calls etcd or reads a clock.
//!
//! Only [`StoreError::Unavailable`] means etcd did not answer. A refusal
//! etcd answered (a lease it no longer knows, a lost claim, corrupt
//! state) shows etcd available, whatever it says of this node.

use std::time::{Duration, Instant};

use super::etcd::StoreError;

/// The etcd call an outcome is of, named in the log line that says etcd
/// went silent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    LeaseRenewal,
    PlacementRead,
    LeaseRevoke,
    LeaseGrant,
    Registration,
}

impl Call {
    pub fn name(self) -> &'static str {
        match self {
            Call::LeaseRenewal => "renewing the lease",
            Call::PlacementRead => "reading the cluster",
            Call::LeaseRevoke => "revoking the old lease",
            Call::LeaseGrant => "taking a new lease",
            Call::Registration => "registering",
        }
    }
}

/// What an outcome changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    None,
    /// etcd stopped answering: `call` failed first, for `why`.
    WentSilent {
        call: Call,
        why: String,
    },
    /// etcd answers again after `silent_for`.
    AnswersAgain {
        silent_for: Duration,
    },
}

/// Whether etcd answers, from the last outcome of any of the node's
/// calls.
#[derive(Debug, Default)]
pub struct Availability {
    /// While etcd does not answer: since when, and why (the first
    /// failure's error).
    silent: Option<(Instant, String)>,
}

impl Availability {
    /// Takes in the outcome of `call`, made (or answered) at `now`.
    pub fn observe<T>(
        &mut self,
        now: Instant,
        call: Call,
        outcome: &Result<T, StoreError>,
    ) -> Change {
        match (outcome, &self.silent) {
            (Err(StoreError::Unavailable(_)), Some(_)) => Change::None,
            (Err(error @ StoreError::Unavailable(_)), None) => {
                let why = error.to_string();
                self.silent = Some((now, why.clone()));
                Change::WentSilent { call, why }
            }
            (_, Some((since, _))) => {
                let silent_for = now.saturating_duration_since(*since);
                self.silent = None;
                Change::AnswersAgain { silent_for }
            }
            (_, None) => Change::None,
        }
    }

    /// Why etcd does not answer, while it does not.
    pub fn unavailable(&self) -> Option<&str> {
        self.silent.as_ref().map(|(_, why)| why.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unavailable() -> Result<(), StoreError> {
        Err(StoreError::Unavailable("no answer within 3000 ms".into()))
    }

    /// Feeds `calls` in order (`true`: answered) and returns whether etcd
    /// counted as unavailable after each.
    fn run(calls: &[(Call, bool)]) -> Vec<bool> {
        let start = Instant::now();
        let mut availability = Availability::default();
        calls
            .iter()
            .enumerate()
            .map(|(i, &(call, answered))| {
                let outcome = if answered { Ok(()) } else { unavailable() };
                let now = start + Duration::from_millis(100 * i as u64);
                availability.observe(now, call, &outcome);
                availability.unavailable().is_some()
            })
            .collect()
    }

    #[test]
    fn a_lost_quorum_shows_whichever_call_fails_first() {
        use Call::*;
        // The renewal fails first, then the step-down's revoke and grant,
        // and only then a placement read.
        let renewal_first = run(&[
            (PlacementRead, true),
            (LeaseRenewal, false),
            (LeaseRenewal, false),
            (LeaseRevoke, false),
            (LeaseGrant, false),
            (PlacementRead, false),
        ]);
        assert_eq!(renewal_first, [false, true, true, true, true, true]);
        // A placement read fails first, the renewal after it.
        let read_first = run(&[
            (LeaseRenewal, true),
            (PlacementRead, false),
            (LeaseRenewal, false),
            (LeaseRevoke, false),
            (LeaseGrant, false),
        ]);
        assert_eq!(read_first, [false, true, true, true, true]);
        // The quorum back: the first call answered says so, whichever.
        for call in [LeaseRenewal, PlacementRead, LeaseGrant, Registration] {
            assert_eq!(
                run(&[(PlacementRead, false), (call, true)]),
                [true, false],
                "{call:?}"
            );
        }
    }

    #[test]
    fn a_refusal_etcd_answered_is_not_unavailability() {
        let mut availability = Availability::default();
        let now = Instant::now();
        for answered in [
            StoreError::LeaseExpired("revoking the lease: [LeaseNotFound]".into()),
            StoreError::Fenced("the claim is gone".into()),
        ] {
            let change = availability.observe(now, Call::LeaseRevoke, &Err::<(), _>(answered));
            assert_eq!(change, Change::None);
            assert_eq!(availability.unavailable(), None);
        }
        let change = availability.observe(now, Call::LeaseRenewal, &unavailable());
        assert_eq!(
            change,
            Change::WentSilent {
                call: Call::LeaseRenewal,
                why: "etcd is unavailable: no answer within 3000 ms".into()
            }
        );
        // Said once, not again while it lasts.
        let later = now + Duration::from_secs(2);
        assert_eq!(
            availability.observe(later, Call::PlacementRead, &unavailable()),
            Change::None
        );
        let expired = Err::<(), _>(StoreError::LeaseExpired("[LeaseNotFound]".into()));
        assert_eq!(
            availability.observe(later, Call::LeaseRevoke, &expired),
            Change::AnswersAgain {
                silent_for: Duration::from_secs(2)
            }
        );
        assert_eq!(availability.unavailable(), None);
    }
}
