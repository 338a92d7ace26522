//! A rollout's [`Step`]s (`--steps 1,10%,50%,100%`): how many of the
//! selected groups are bound after each step, as counts or shares, and
//! their resolution against the number of groups selected
//! ([`resolve_steps`]).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::limits::{ROLLOUT_GROUPS_MAX, STEPS_MAX, SpecError};

/// How many groups are bound once a step is done (counting the earlier
/// steps' groups). In JSON, its text form (`3` or `10%`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Step {
    /// This many groups, 1 to [`ROLLOUT_GROUPS_MAX`].
    Count(usize),
    /// This share of the groups, 1 to 100 percent.
    Percent(u8),
}

impl Step {
    /// The number of groups this step reaches out of `total`: a count as
    /// it is, a share rounded up and at least 1 (`10%` of 5 is 1, of 15
    /// is 2).
    pub fn resolve(self, total: usize) -> usize {
        match self {
            Step::Count(count) => count,
            Step::Percent(percent) => (total * usize::from(percent)).div_ceil(100).max(1),
        }
    }
}

fn refused(message: String) -> SpecError {
    SpecError::new("steps", message)
}

impl FromStr for Step {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Self, SpecError> {
        if let Some(percent) = text.strip_suffix('%') {
            return match percent.parse::<u8>() {
                Ok(p @ 1..=100) => Ok(Step::Percent(p)),
                _ => Err(refused(format!(
                    "{text:?}: a share is 1% to 100%, in whole percent"
                ))),
            };
        }
        match text.parse::<usize>() {
            Ok(count @ 1..=ROLLOUT_GROUPS_MAX) => Ok(Step::Count(count)),
            _ => Err(refused(format!(
                "{text:?} is neither a count of groups (1 to {ROLLOUT_GROUPS_MAX}) nor a share (like 10%)"
            ))),
        }
    }
}

/// Parses `--steps`: 1 to [`STEPS_MAX`] steps, separated by commas. What
/// can be checked without the number of groups is: shares strictly grow,
/// counts strictly grow, nothing follows `100%`, and the last step is
/// `100%` or a count (which [`resolve_steps`] holds to the total).
pub fn parse_steps(text: &str) -> Result<Vec<Step>, SpecError> {
    let steps: Vec<Step> = text.split(',').map(str::parse).collect::<Result<_, _>>()?;
    if steps.len() > STEPS_MAX {
        return Err(refused(format!(
            "at most {STEPS_MAX} steps, got {}",
            steps.len()
        )));
    }
    let mut last_count = 0;
    let mut last_percent = 0;
    for step in &steps {
        match *step {
            Step::Count(count) if count <= last_count => {
                return Err(refused(format!(
                    "counts must grow: {count} after {last_count}"
                )));
            }
            Step::Count(count) => last_count = count,
            Step::Percent(percent) if percent <= last_percent => {
                return Err(refused(format!(
                    "shares must grow: {percent}% after {last_percent}%"
                )));
            }
            Step::Percent(percent) => last_percent = percent,
        }
    }
    if last_percent == 100 && steps.last() != Some(&Step::Percent(100)) {
        return Err(refused("nothing may follow 100%".into()));
    }
    if matches!(steps.last(), Some(Step::Percent(p)) if *p < 100) {
        return Err(refused(format!(
            "the last step must take every group: 100% (or the number of groups), got {}",
            steps.last().expect("one step at least")
        )));
    }
    Ok(steps)
}

/// The number of groups bound after each step, out of `total` selected
/// groups: the rollout's steps as it runs them. Sizes must not shrink
/// and the last must be `total`. A step that resolves to the same size as
/// the one before is dropped rather than refused: with few groups, shares
/// collapse (`1,10%` of 5 groups is 1 and 1), and the default steps must
/// work for any number of groups.
pub fn resolve_steps(steps: &[Step], total: usize) -> Result<Vec<usize>, SpecError> {
    let mut sizes: Vec<usize> = Vec::with_capacity(steps.len());
    for step in steps {
        let size = step.resolve(total);
        if size > total {
            return Err(refused(format!(
                "step {step} takes {size} groups, but the selector matched {total}"
            )));
        }
        match sizes.last() {
            Some(&before) if size < before => {
                return Err(refused(format!(
                    "step {step} takes {size} groups, fewer than the {before} before it (of {total})"
                )));
            }
            Some(&before) if size == before => {}
            _ => sizes.push(size),
        }
    }
    if sizes.last() != Some(&total) {
        return Err(refused(format!(
            "the last step must take every one of the {total} groups selected"
        )));
    }
    Ok(sizes)
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Count(count) => write!(f, "{count}"),
            Step::Percent(percent) => write!(f, "{percent}%"),
        }
    }
}

impl TryFrom<String> for Step {
    type Error = SpecError;

    fn try_from(text: String) -> Result<Self, SpecError> {
        text.parse()
    }
}

impl From<Step> for String {
    fn from(step: Step) -> String {
        step.to_string()
    }
}
