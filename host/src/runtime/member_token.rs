//! A group's member token as the runtime sees it: the sha256 (lowercase
//! hex) kept in the group's config, a config change that sets, removes or
//! keeps it, and the check of a heartbeat's token, made under the core's
//! lock with the heartbeat itself. It also owns the host's policy for
//! groups without a member token ([`Admission`]): refused outright
//! (`serve --require-member-token`), or their member-creating joins
//! limited by a token bucket per group. Hashing the plaintext is the API's
//! business; nothing here sees it.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::protocol::core::{Heartbeat, JOIN_EPOCH};
use crate::protocol::group::{Group, Millis};

use super::RuntimeError;

/// How the host treats groups without a member token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdmissionPolicy {
    /// Refuse a config without a member token, and every heartbeat to a
    /// group without one.
    pub member_token_required: bool,
    /// Member-creating joins a group without a member token takes at
    /// once (the token bucket's size)…
    pub tokenless_join_burst_max: u32,
    /// … and per second after that (the bucket's refill), at least 1.
    pub tokenless_join_rate_per_s: u32,
}

impl Default for AdmissionPolicy {
    fn default() -> Self {
        AdmissionPolicy {
            member_token_required: false,
            tokenless_join_burst_max: 1_000,
            tokenless_join_rate_per_s: 100,
        }
    }
}

impl AdmissionPolicy {
    /// Refuses a config without a member token (`token_sha256`: the one
    /// it will have) when the host requires one.
    pub(super) fn check_config(
        &self,
        group: &str,
        token_sha256: Option<&str>,
    ) -> Result<(), RuntimeError> {
        if self.member_token_required && token_sha256.is_none() {
            return Err(RuntimeError::ConfigWithoutMemberToken(group.to_owned()));
        }
        Ok(())
    }
}

/// A bucket's level is kept in thousandths of a join: one millisecond at
/// R joins per second adds R of them.
const MILLI: u64 = 1_000;

/// One group's token bucket of member-creating joins.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    level_milli: u64,
    refilled_at: Millis,
}

/// The [`AdmissionPolicy`] in force, and the join buckets of the groups
/// without a member token (one per such group that has had a join; at
/// most one per group).
#[derive(Debug)]
pub(super) struct Admission {
    policy: AdmissionPolicy,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl Admission {
    pub(super) fn new(policy: AdmissionPolicy) -> Self {
        Admission {
            policy,
            buckets: Mutex::default(),
        }
    }

    /// Admits a heartbeat to `group` (none: the core answers
    /// `unknown_group`) or refuses it: the member token check
    /// ([`check`]); for a group without a member token, refused if the
    /// host requires one, and a join that would create a member takes one
    /// from the group's bucket (`JoinRateLimited` when it is empty).
    pub(super) fn admit(
        &self,
        group: Option<&Group>,
        request: &Heartbeat,
        presented: Option<&str>,
        now: Millis,
    ) -> Result<(), RuntimeError> {
        check(group, presented)?;
        let Some(group) = group else {
            return Ok(());
        };
        if group.config.member_token_sha256.is_some() {
            return Ok(());
        }
        if self.policy.member_token_required {
            return Err(RuntimeError::MemberTokenRequired(group.name.clone()));
        }
        if !creates_member(group, request) {
            return Ok(());
        }
        let mut buckets = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let capacity = u64::from(self.policy.tokenless_join_burst_max) * MILLI;
        let rate = u64::from(self.policy.tokenless_join_rate_per_s).max(1);
        let bucket = buckets.entry(group.name.clone()).or_insert(Bucket {
            level_milli: capacity,
            refilled_at: now,
        });
        let elapsed = now.saturating_sub(bucket.refilled_at);
        bucket.level_milli = bucket
            .level_milli
            .saturating_add(elapsed.saturating_mul(rate))
            .min(capacity);
        bucket.refilled_at = now;
        if bucket.level_milli >= MILLI {
            bucket.level_milli -= MILLI;
            return Ok(());
        }
        Err(RuntimeError::JoinRateLimited {
            group: group.name.clone(),
            retry_after_ms: (MILLI - bucket.level_milli).div_ceil(rate),
        })
    }
}

/// Whether `request` is a join that adds a slot to `group`: not a static
/// member's restart, which takes over its slot, nor a join retried with the
/// member id the member chose, which is the member it already is.
fn creates_member(group: &Group, request: &Heartbeat) -> bool {
    if request.member_epoch != JOIN_EPOCH {
        return false;
    }
    let slot = group.join_slot(request.member_name.as_deref(), &request.member_id);
    slot.is_empty() || !group.members.contains_key(&slot)
}

/// What a config change does to one of the group's tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TokenChange {
    /// The group keeps the token it has (none for a new group).
    Keep,
    /// The token becomes this sha256 (lowercase hex), or none.
    Set(Option<String>),
}

impl TokenChange {
    /// The digest a token has after the change; `current`: the one it has.
    pub(super) fn apply(self, current: Option<&String>) -> Option<String> {
        match self {
            TokenChange::Keep => current.cloned(),
            TokenChange::Set(digest) => digest,
        }
    }
}

/// What a config change does to the group's member and reader tokens
/// (`member_token`, `reader_token`), which the API takes as plaintext and
/// the config keeps as digests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenChanges {
    pub member: TokenChange,
    pub reader: TokenChange,
}

impl TokenChanges {
    /// Both tokens kept.
    pub const KEEP: TokenChanges = TokenChanges {
        member: TokenChange::Keep,
        reader: TokenChange::Keep,
    };
}

/// Checks a heartbeat's token digest (`presented`: the sha256 of its
/// bearer token, lowercase hex; none without one) against `group`'s
/// member token. A group without one, or one that does not exist (the
/// core answers `unknown_group`), takes any heartbeat.
pub(super) fn check(group: Option<&Group>, presented: Option<&str>) -> Result<(), RuntimeError> {
    let Some(group) = group else {
        return Ok(());
    };
    let Some(expected) = group.config.member_token_sha256.as_deref() else {
        return Ok(());
    };
    match presented {
        None => Err(RuntimeError::MemberTokenMissing(group.name.clone())),
        Some(presented) if same(presented, expected) => Ok(()),
        Some(_) => Err(RuntimeError::MemberTokenWrong(group.name.clone())),
    }
}

/// Whether two digests are equal, looking at every byte whatever the
/// first difference.
pub(super) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |diff, (x, y)| diff | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::protocol::core::Coordinator;

    const DIGEST: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

    /// A core with group `g` (with a member token if `token`) and the
    /// static member `a` in it.
    fn core(token: bool) -> Coordinator {
        let mut core = Coordinator::new(1);
        let mut config: crate::protocol::group::GroupConfig =
            serde_json::from_value(serde_json::json!({"topics": [{"name": "t", "partitions": 1}]}))
                .unwrap();
        config.member_token_sha256 = token.then(|| DIGEST.to_owned());
        core.configure("g", config, 0).unwrap();
        core.heartbeat(&Heartbeat::join("g", Some("a"), vec!["t".into()]), 0)
            .unwrap();
        core
    }

    fn policy(required: bool) -> AdmissionPolicy {
        AdmissionPolicy {
            member_token_required: required,
            tokenless_join_burst_max: 2,
            tokenless_join_rate_per_s: 4,
        }
    }

    #[test]
    fn new_members_of_a_group_without_a_token_come_at_the_bucket_rate() {
        let core = core(false);
        let admission = Admission::new(policy(false));
        let new = Heartbeat::join("g", None, vec!["t".into()]);
        let restart = Heartbeat::join("g", Some("a"), vec!["t".into()]);
        let admit = |request: &Heartbeat, now| admission.admit(core.group("g"), request, None, now);
        assert!(admit(&new, 0).is_ok());
        assert!(admit(&new, 0).is_ok());
        let refused = admit(&new, 100);
        assert!(
            matches!(
                refused,
                Err(RuntimeError::JoinRateLimited {
                    retry_after_ms: 150,
                    ..
                })
            ),
            "{refused:?}"
        );
        // A static member's restart takes no token.
        assert!(admit(&restart, 100).is_ok());
        assert!(admit(&new, 250).is_ok(), "one join refilled after 250 ms");
        assert!(admit(&new, 250).is_err());
        // A join retried with the id the member chose (its answer was
        // lost) is the member it already is: it takes no token either.
        let mut core = core;
        let chosen = Heartbeat {
            member_id: "member-7".into(),
            ..new.clone()
        };
        core.heartbeat(&chosen, 250).unwrap();
        let admit = |request: &Heartbeat, now| admission.admit(core.group("g"), request, None, now);
        assert!(
            admit(&chosen, 250).is_ok(),
            "a retried join is no new member"
        );
        assert!(admit(&new, 250).is_err());
        // The bucket holds at most its burst.
        assert!(admit(&new, 60_000).is_ok());
        assert!(admit(&new, 60_000).is_ok());
        assert!(admit(&new, 60_000).is_err());
    }

    #[test]
    fn a_group_with_a_token_is_neither_limited_nor_refused() {
        let core = core(true);
        let admission = Admission::new(policy(true));
        let new = Heartbeat::join("g", None, vec!["t".into()]);
        for _ in 0..10 {
            assert!(
                admission
                    .admit(core.group("g"), &new, Some(DIGEST), 0)
                    .is_ok()
            );
        }
        assert!(admission.policy.check_config("g", Some(DIGEST)).is_ok());
    }

    #[test]
    fn a_host_that_requires_tokens_refuses_groups_without_one() {
        let core = core(false);
        let admission = Admission::new(policy(true));
        let beat = Heartbeat::join("g", Some("a"), vec!["t".into()]);
        assert!(matches!(
            admission.admit(core.group("g"), &beat, None, 0),
            Err(RuntimeError::MemberTokenRequired(_))
        ));
        assert!(matches!(
            admission.policy.check_config("g", None),
            Err(RuntimeError::ConfigWithoutMemberToken(_))
        ));
    }

    #[test]
    fn digests_compare_whole() {
        assert!(same("ab", "ab"));
        assert!(!same("ab", "ac"));
        assert!(!same("ab", "abc"));
    }
}
