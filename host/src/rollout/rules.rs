//! [`AbortRule`]s (`--abort-on`): what makes a group unhealthy under the
//! rolled-out module, as the CLI spells them. `health.rs` judges a group
//! by them.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::limits::SpecError;
use crate::protocol::core::{TASKS_PER_GROUP_MAX, TIMEOUT_MS_MAX};

/// The largest ratio `moves>Rx` takes.
pub const MOVES_RATIO_MAX: u64 = 1_000;

/// One rule; any rule that fires on a group rolls the rollout back. In
/// JSON, its text form (`moves>1.5x`). Decimal numbers are kept in
/// thousandths so that every comparison is exact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum AbortRule {
    /// `failures`: any failure of the module on a group it touched, live
    /// (bound) or shadow.
    Failures,
    /// `moves>X`: the mean active tasks moved per rebalance since binding
    /// exceeds the group's baseline mean by more than X (in thousandths:
    /// `moves>1.5` is 1500).
    MovesAbove { excess_milli: u64 },
    /// `moves>Rx`: the mean since binding exceeds R times the baseline
    /// mean (in thousandths: `moves>1.5x` is 1500); R is 1 to
    /// [`MOVES_RATIO_MAX`].
    MovesRatio { ratio_milli: u64 },
    /// `rebalance_ms>Y`: a rebalance since binding took more than Y ms
    /// from its new target to settled.
    RebalanceMsAbove { ms: u64 },
}

/// The rules when none are given: failures only.
pub fn default_abort_rules() -> Vec<AbortRule> {
    vec![AbortRule::Failures]
}

fn refused(message: String) -> SpecError {
    SpecError::new("abort-on", message)
}

/// A decimal with at most three digits after the point, in thousandths.
fn parse_milli(text: &str) -> Option<u64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) || fraction.len() > 3 {
        return None;
    }
    if text.ends_with('.') {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let fraction: u64 = format!("{fraction:0<3}").parse().ok()?;
    whole.checked_mul(1_000)?.checked_add(fraction)
}

/// Thousandths as the shortest decimal (`1500` is `1.5`).
pub fn milli_text(milli: u64) -> String {
    let (whole, fraction) = (milli / 1_000, milli % 1_000);
    if fraction == 0 {
        format!("{whole}")
    } else {
        let fraction = format!("{fraction:03}");
        format!("{whole}.{}", fraction.trim_end_matches('0'))
    }
}

fn parse_moves(limit: &str) -> Result<AbortRule, SpecError> {
    if let Some(ratio) = limit.strip_suffix('x') {
        return match parse_milli(ratio) {
            Some(r) if (1_000..=MOVES_RATIO_MAX * 1_000).contains(&r) => {
                Ok(AbortRule::MovesRatio { ratio_milli: r })
            }
            _ => Err(refused(format!(
                "moves>{limit}: a ratio is 1x to {MOVES_RATIO_MAX}x (e.g. moves>1.5x)"
            ))),
        };
    }
    match parse_milli(limit) {
        Some(x) if x <= TASKS_PER_GROUP_MAX * 1_000 => {
            Ok(AbortRule::MovesAbove { excess_milli: x })
        }
        _ => Err(refused(format!(
            "moves>{limit}: a count of tasks is 0 to {TASKS_PER_GROUP_MAX}, at most 3 decimals (e.g. moves>2 or moves>0.5)"
        ))),
    }
}

impl FromStr for AbortRule {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Self, SpecError> {
        if text == "failures" {
            return Ok(AbortRule::Failures);
        }
        if let Some(limit) = text.strip_prefix("moves>") {
            return parse_moves(limit);
        }
        if let Some(limit) = text.strip_prefix("rebalance_ms>") {
            return match limit.parse::<u64>() {
                Ok(ms) if ms <= TIMEOUT_MS_MAX => Ok(AbortRule::RebalanceMsAbove { ms }),
                _ => Err(refused(format!(
                    "rebalance_ms>{limit}: a whole number of ms, at most {TIMEOUT_MS_MAX}"
                ))),
            };
        }
        Err(refused(format!(
            "{text:?} is none of failures, moves>X, moves>Rx or rebalance_ms>Y"
        )))
    }
}

impl fmt::Display for AbortRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            AbortRule::Failures => write!(f, "failures"),
            AbortRule::MovesAbove { excess_milli } => {
                write!(f, "moves>{}", milli_text(excess_milli))
            }
            AbortRule::MovesRatio { ratio_milli } => {
                write!(f, "moves>{}x", milli_text(ratio_milli))
            }
            AbortRule::RebalanceMsAbove { ms } => write!(f, "rebalance_ms>{ms}"),
        }
    }
}

impl TryFrom<String> for AbortRule {
    type Error = SpecError;

    fn try_from(text: String) -> Result<Self, SpecError> {
        text.parse()
    }
}

impl From<AbortRule> for String {
    fn from(rule: AbortRule) -> String {
        rule.to_string()
    }
}
