//! The human form of `assignd check`'s report: a line of who against
//! whom, one aligned line per case with each figure as `module / against`,
//! the median and max lines, each failure with its reason, and a verdict.

use crate::check::report::{Outcome, Report, Row, Side, Subject, Total};

const HEADER: [&str; 10] = [
    "case", "tasks", "members", "result", "ms", "fuel", "spread", "max/mean", "load", "moved",
];

/// Prints `report` on stdout.
pub fn print(report: &Report) {
    outln!(
        "checking {} against {} (seed {}); each column: module / against",
        describe(&report.module),
        describe(&report.against),
        report.seed
    );
    let mut lines: Vec<Vec<String>> = vec![HEADER.iter().map(|h| h.to_string()).collect()];
    lines.extend(report.cases.iter().map(case_line));
    lines.extend(total_lines(&report.total.module, &report.total.against));
    for line in align(&lines) {
        outln!("{}", line.trim_end());
    }
    print_failures(report);
    outln!("{}", verdict(report));
}

fn describe(subject: &Subject) -> String {
    format!("{} ({} {})", subject.source, subject.name, subject.version)
}

fn case_line(row: &Row) -> Vec<String> {
    let (a, b) = (&row.module, &row.against);
    vec![
        row.case.clone(),
        row.tasks.to_string(),
        row.members.to_string(),
        pair(result(a), result(b)),
        pair(ms(a.call_ms), ms(b.call_ms)),
        pair(fuel(a.fuel), fuel(b.fuel)),
        pair(opt(a.count_spread), opt(b.count_spread)),
        pair(ratio(a.count_max_over_mean), ratio(b.count_max_over_mean)),
        pair(ratio(a.load_max_over_mean), ratio(b.load_max_over_mean)),
        pair(opt(a.tasks_moved), opt(b.tasks_moved)),
    ]
}

/// The median line (time and fuel) and the max line (every figure's
/// largest; moved is the sum).
fn total_lines(a: &Total, b: &Total) -> Vec<Vec<String>> {
    let median = |t: &Total| (t.call_ms.map(|m| m.median), t.fuel.map(|m| m.median));
    let max = |t: &Total| (t.call_ms.map(|m| m.max), t.fuel.map(|m| m.max));
    let (am, bm) = (median(a), median(b));
    let (ax, bx) = (max(a), max(b));
    let counts = |t: &Total| format!("{}/{} ok", t.ok, t.calls);
    let blank = String::new;
    vec![
        vec![
            "median".into(),
            blank(),
            blank(),
            blank(),
            pair(ms(am.0), ms(bm.0)),
            pair(fuel(am.1.map(|f| f as u64)), fuel(bm.1.map(|f| f as u64))),
            blank(),
            blank(),
            blank(),
            blank(),
        ],
        vec![
            format!("max (moved: sum), {} cases", a.calls),
            blank(),
            blank(),
            pair(counts(a), counts(b)),
            pair(ms(ax.0), ms(bx.0)),
            pair(fuel(ax.1.map(|f| f as u64)), fuel(bx.1.map(|f| f as u64))),
            pair(opt(a.count_spread_max), opt(b.count_spread_max)),
            pair(
                ratio(a.count_max_over_mean_max),
                ratio(b.count_max_over_mean_max),
            ),
            pair(
                ratio(a.load_max_over_mean_max),
                ratio(b.load_max_over_mean_max),
            ),
            pair(a.tasks_moved.to_string(), b.tasks_moved.to_string()),
        ],
    ]
}

fn pair(a: String, b: String) -> String {
    format!("{a} / {b}")
}

fn result(side: &Side) -> String {
    match (side.result, &side.code) {
        (Outcome::Ok, _) => "ok".into(),
        (Outcome::Skipped, _) => "skipped".into(),
        (_, Some(code)) => code.clone(),
        (outcome, None) => format!("{outcome:?}").to_lowercase(),
    }
}

fn opt<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".into(), |v| v.to_string())
}

fn ms(value: Option<f64>) -> String {
    value.map_or_else(|| "-".into(), |v| format!("{v:.2}"))
}

fn ratio(value: Option<f64>) -> String {
    value.map_or_else(|| "-".into(), |v| format!("{v:.2}"))
}

/// Fuel in units, thousands (k), millions (M) or billions (G).
fn fuel(value: Option<u64>) -> String {
    let Some(v) = value else {
        return "-".into();
    };
    let f = v as f64;
    match v {
        0..10_000 => v.to_string(),
        10_000..1_000_000 => format!("{:.0}k", f / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1}M", f / 1e6),
        _ => format!("{:.1}G", f / 1e9),
    }
}

/// The lines padded to their columns' widths: the case left, the
/// figures right.
fn align(lines: &[Vec<String>]) -> Vec<String> {
    let columns = HEADER.len();
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    lines
        .iter()
        .map(|line| {
            let cells: Vec<String> = line
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(c, (cell, &w))| match c {
                    0 => format!("{cell:<w$}"),
                    _ => format!("{cell:>w$}"),
                })
                .collect();
            cells.join("  ")
        })
        .collect()
}

fn print_failures(report: &Report) {
    let mut failures = Vec::new();
    for row in &report.cases {
        for (who, side) in [("module", &row.module), ("against", &row.against)] {
            if let (true, Some(reason)) = (side.is_failure(), &side.reason) {
                failures.push(format!("  {} ({who}): {reason}", row.case));
            }
        }
    }
    if !failures.is_empty() {
        outln!("failures:");
        for line in failures {
            outln!("{line}");
        }
    }
}

fn verdict(report: &Report) -> String {
    let against = &report.total.against;
    let against_note = if against.failed + against.invalid > 0 {
        format!(
            "; {} failed in {} case(s), which does not fail the check",
            report.against.source,
            against.failed + against.invalid
        )
    } else {
        String::new()
    };
    if report.passed {
        format!(
            "passed: {} answered all {} cases validly{against_note}",
            report.module.source,
            report.cases.len()
        )
    } else {
        format!(
            "FAILED: {} failed or answered invalidly in {} of {} cases: {}{against_note}",
            report.module.source,
            report.failed_cases.len(),
            report.cases.len(),
            report.failed_cases.join(", ")
        )
    }
}
