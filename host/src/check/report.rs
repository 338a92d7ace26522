//! What `assignd check` found: each call's result and figures (a
//! [`Side`]), a case's row with the module's side next to the reference's,
//! and the totals of each. These are the fields of `assignd check --json`;
//! a rename is a change of that document.

use serde::Serialize;

use super::score::{Figures, MedianMax, max_of, median_max};
use crate::plugins::{CallStats, PluginError};

/// How one call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A valid answer.
    Ok,
    /// An answer the host's validation refused.
    Invalid,
    /// No answer: a trap, a limit, a refusal.
    Failed,
    /// Not run: an earlier step of its sequence had no answer.
    Skipped,
}

/// One call of one assignor on one case.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Side {
    pub result: Outcome,
    /// The failure's stable code (`panicked`, `out_of_fuel`,
    /// `invalid_assignment`, …), when it failed or answered invalidly.
    pub code: Option<String>,
    /// The failure's message, on one line.
    pub reason: Option<String>,
    /// The call itself, input in and answer out, in ms.
    pub call_ms: Option<f64>,
    pub fuel: Option<u64>,
    pub count_spread: Option<u32>,
    pub count_max_over_mean: Option<f64>,
    pub load_max_over_mean: Option<f64>,
    pub tasks_moved: Option<u64>,
}

impl Side {
    pub fn answered(stats: &CallStats, figures: &Figures) -> Side {
        Side {
            result: Outcome::Ok,
            code: None,
            reason: None,
            call_ms: Some(stats.call_ms),
            fuel: Some(stats.fuel),
            count_spread: Some(figures.count_spread),
            count_max_over_mean: figures.count_max_over_mean,
            load_max_over_mean: figures.load_max_over_mean,
            tasks_moved: Some(figures.tasks_moved),
        }
    }

    pub fn failed(error: &PluginError) -> Side {
        let invalid = matches!(
            error,
            PluginError::InvalidAssignment(_) | PluginError::OutputTooLarge(_)
        );
        let lines: Vec<String> = error
            .to_string()
            .lines()
            .map(|l| l.trim().to_owned())
            .collect();
        Side {
            result: if invalid {
                Outcome::Invalid
            } else {
                Outcome::Failed
            },
            code: Some(error.code().to_owned()),
            reason: Some(lines.join("; ")),
            ..Side::skipped()
        }
    }

    pub fn skipped() -> Side {
        Side {
            result: Outcome::Skipped,
            code: None,
            reason: None,
            call_ms: None,
            fuel: None,
            count_spread: None,
            count_max_over_mean: None,
            load_max_over_mean: None,
            tasks_moved: None,
        }
    }

    /// Whether this call failed the check: no valid answer, and run.
    pub fn is_failure(&self) -> bool {
        matches!(self.result, Outcome::Invalid | Outcome::Failed)
    }
}

/// One case: the module's call next to the reference's.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub case: String,
    pub tasks: usize,
    pub members: usize,
    /// Whether the input has a load unit.
    pub loads: bool,
    pub module: Side,
    pub against: Side,
}

/// One assignor's figures over every case.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Total {
    pub calls: usize,
    pub ok: usize,
    pub invalid: usize,
    pub failed: usize,
    pub skipped: usize,
    pub call_ms: Option<MedianMax<f64>>,
    pub fuel: Option<MedianMax<f64>>,
    pub count_spread_max: Option<u32>,
    pub count_max_over_mean_max: Option<f64>,
    pub load_max_over_mean_max: Option<f64>,
    pub tasks_moved: u64,
}

/// The totals of `sides`.
pub fn total<'a>(sides: impl Iterator<Item = &'a Side> + Clone) -> Total {
    let count = |outcome| sides.clone().filter(|s| s.result == outcome).count();
    let ms: Vec<f64> = sides.clone().filter_map(|s| s.call_ms).collect();
    let fuel: Vec<f64> = sides
        .clone()
        .filter_map(|s| s.fuel)
        .map(|f| f as f64)
        .collect();
    Total {
        calls: sides.clone().count(),
        ok: count(Outcome::Ok),
        invalid: count(Outcome::Invalid),
        failed: count(Outcome::Failed),
        skipped: count(Outcome::Skipped),
        call_ms: median_max(&ms),
        fuel: median_max(&fuel),
        count_spread_max: sides.clone().filter_map(|s| s.count_spread).max(),
        count_max_over_mean_max: max_of(sides.clone().map(|s| s.count_max_over_mean)),
        load_max_over_mean_max: max_of(sides.clone().map(|s| s.load_max_over_mean)),
        tasks_moved: sides.filter_map(|s| s.tasks_moved).sum(),
    }
}

/// Who was checked against whom.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Subject {
    /// As given on the command line (a built-in's name or a path).
    pub source: String,
    /// What its `info()` says.
    pub name: String,
    pub version: String,
    /// The sha256 of the component.
    pub id: String,
}

/// The whole check: `assignd check --json` prints this.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub module: Subject,
    pub against: Subject,
    pub seed: u64,
    pub cases: Vec<Row>,
    pub total: Totals,
    /// No call of the module failed or answered invalidly.
    pub passed: bool,
    /// The cases where it did, in order.
    pub failed_cases: Vec<String>,
}

/// The totals of both sides.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Totals {
    pub module: Total,
    pub against: Total,
}

impl Report {
    /// The report of `rows`.
    pub fn new(module: Subject, against: Subject, seed: u64, rows: Vec<Row>) -> Report {
        let failed_cases: Vec<String> = rows
            .iter()
            .filter(|r| r.module.is_failure())
            .map(|r| r.case.clone())
            .collect();
        let total = Totals {
            module: total(rows.iter().map(|r| &r.module)),
            against: total(rows.iter().map(|r| &r.against)),
        };
        Report {
            module,
            against,
            seed,
            passed: failed_cases.is_empty(),
            failed_cases,
            cases: rows,
            total,
        }
    }
}
