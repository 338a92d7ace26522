//! The limits of a rollout's spec, named `<noun>_<unit>_max`, and
//! [`SpecError`], the refusal every part of a spec's parsing answers.

/// The most groups one rollout takes.
pub const ROLLOUT_GROUPS_MAX: usize = 10_000;
/// The most steps one rollout has.
pub const STEPS_MAX: usize = 20;
/// The shortest wait between steps (and shadow period): tests use it.
pub const EVERY_MS_MIN: u64 = 1_000;
/// The longest wait between steps (and shadow period): a day.
pub const EVERY_MS_MAX: u64 = 86_400_000;
/// The wait between steps when none is given: five minutes.
pub const EVERY_MS_DEFAULT: u64 = 300_000;
/// The longest rollout id, in bytes of `[A-Za-z0-9._-]`.
pub const ROLLOUT_ID_LEN_MAX: usize = 64;
/// The most `--abort-on` rules one rollout has.
pub const ABORT_RULES_MAX: usize = 8;

/// Why a request is refused: the field (as the CLI flag names it, without
/// dashes) and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct SpecError {
    pub field: &'static str,
    pub message: String,
}

impl SpecError {
    pub fn new(field: &'static str, message: impl Into<String>) -> Self {
        SpecError {
            field,
            message: message.into(),
        }
    }
}
