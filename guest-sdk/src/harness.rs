//! The native harness: runs an [`Assignor`] in-process exactly as the host
//! would judge it (input checked, answer validated), so an author can unit
//! test, property test and benchmark the same code that ships as a
//! component.

use std::fmt;

use crate::Assignor;
use crate::model::{AssignError, Assignment, GroupInput};
use crate::validate::{
    InputLimits, InvalidAssignment, InvalidInput, ROWS_PER_TASK_MAX, check_assignment, check_input,
    rows_max_for,
};

/// Why a harness run failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HarnessError {
    /// The input breaks the contract; the assignor was not called.
    Input(InvalidInput),
    /// The assignor refused.
    Assign(AssignError),
    /// The assignor answered something the host would refuse.
    Invalid(InvalidAssignment),
}

impl fmt::Display for HarnessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HarnessError::Input(e) => e.fmt(f),
            HarnessError::Assign(e) => e.fmt(f),
            HarnessError::Invalid(e) => write!(f, "invalid assignment: {e}"),
        }
    }
}

impl std::error::Error for HarnessError {}

/// Rows of learners or standbys an answer to `input` may hold under the
/// host's default limits; see [`rows_max_for`].
pub fn rows_max(input: &GroupInput) -> usize {
    rows_max_for(input, ROWS_PER_TASK_MAX, usize::MAX)
}

/// Checks `input`, runs `A` on it natively and validates the answer.
pub fn run<A: Assignor>(input: &GroupInput) -> Result<Assignment, HarnessError> {
    check_input(input, &InputLimits::default()).map_err(HarnessError::Input)?;
    let out = A::assign(input).map_err(HarnessError::Assign)?;
    check_assignment(input, &out, rows_max(input)).map_err(HarnessError::Invalid)?;
    Ok(out)
}

/// Runs `A` on a GroupInput JSON document with extra `KEY=VALUE` params and
/// returns the Assignment document, as `assignd run` would print it.
#[cfg(feature = "json")]
pub fn run_json<A: Assignor>(text: &str, params: &[&str]) -> Result<serde_json::Value, String> {
    let mut input =
        crate::json::parse_input(text, &InputLimits::default()).map_err(|e| e.to_string())?;
    let pairs: Vec<String> = params.iter().map(|p| (*p).to_owned()).collect();
    crate::json::merge_params(&mut input.params, &pairs).map_err(|e| e.to_string())?;
    let out = run::<A>(&input).map_err(|e| e.to_string())?;
    Ok(crate::json::assignment_to_json(&input, &out))
}
