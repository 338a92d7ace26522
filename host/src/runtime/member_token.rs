//! A group's member token as the runtime sees it: the sha256 (lowercase
//! hex) kept in the group's config, a config change that sets, removes or
//! keeps it, and the check of a heartbeat's token, made under the core's
//! lock with the heartbeat itself. Hashing the plaintext is the API's
//! business; nothing here sees it.

use crate::protocol::group::Group;

use super::RuntimeError;

/// What a config change does to the group's member token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MemberTokenChange {
    /// The group keeps its member token (none for a new group).
    Keep,
    /// The group's member token becomes this sha256 (lowercase hex), or
    /// none.
    Set(Option<String>),
}

impl MemberTokenChange {
    /// The member token digest `group` (if it exists) has after the change.
    pub(super) fn apply(self, group: Option<&Group>) -> Option<String> {
        match self {
            MemberTokenChange::Keep => group.and_then(|g| g.config.member_token_sha256.clone()),
            MemberTokenChange::Set(digest) => digest,
        }
    }
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
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |diff, (x, y)| diff | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_compare_whole() {
        assert!(same("ab", "ab"));
        assert!(!same("ab", "ac"));
        assert!(!same("ab", "abc"));
    }
}
