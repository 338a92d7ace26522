//! What `assignd demo` shows on stdout as it runs: a line per churn
//! event saying what it does, and every second the group's epoch and
//! state with each worker's active tasks, restores and learners. It reads
//! the fleet and the group's view; it changes nothing.

use std::collections::BTreeSet;
use std::io::Write;
use std::time::Instant;

use assignd_client::Task;

use super::churn::ChurnKind;
use super::fleet::Fleet;
use crate::api::wire::GroupView;

fn workers(n: u32) -> String {
    if n == 1 {
        "worker".to_owned()
    } else {
        format!("{n} workers")
    }
}

pub(super) fn describe(kind: ChurnKind) -> String {
    match kind {
        ChurnKind::Scale { from, to } if to > from => format!(
            "{} join cold; tasks move to them once their learners caught up",
            workers(to - from)
        ),
        ChurnKind::Scale { from, to } => format!(
            "the newest {} drain: their tasks move once the new owners are warm, then they leave",
            workers(from - to)
        ),
        ChurnKind::Kill(n) => format!(
            "kill -9 of the newest {}: no leave, so the tasks it held have no owner until the host notices at the session timeout",
            workers(n)
        ),
        ChurnKind::Leave(n) => format!(
            "the newest {} stop and leave: the tasks they held go to others at once",
            workers(n)
        ),
    }
}

/// The once-a-second report.
pub(super) fn show(fleet: &Fleet, view: Option<&GroupView>, begun: Instant) {
    let holding = fleet.ledger.holding(0);
    let mut text = String::new();
    match view {
        Some(view) => {
            let mut moving: BTreeSet<Task> = BTreeSet::new();
            for learner in &view.learners {
                moving.insert(Task::new(
                    learner.task.topic.clone(),
                    learner.task.partition,
                ));
            }
            for member in &view.members {
                for task in &member.target.active {
                    if !member.active.contains(task) {
                        moving.insert(Task::new(task.topic.clone(), task.partition));
                    }
                }
            }
            text.push_str(&format!(
                "[{:>5.1}s] epoch {} members {} {:<11} moving {:<2} without owner {:<2} restoring {:<2} double ownership {}\n",
                begun.elapsed().as_secs_f64(),
                view.group_epoch,
                view.members.len(),
                format!("{:?}", view.state).to_lowercase(),
                moving.len(),
                holding.ownerless,
                holding.restoring,
                holding.doubled,
            ));
        }
        None => text.push_str(&format!(
            "[{:>5.1}s] (the group view is not available)\n",
            begun.elapsed().as_secs_f64()
        )),
    }
    for (number, worker) in fleet.views(0) {
        let mut line = format!("    worker-{number:<2} active {:>2}", worker.active.len());
        if worker.draining {
            line.push_str("  draining");
        }
        if !worker.restoring.is_empty() {
            line.push_str(&format!("  restoring {}", lags(&worker.restoring)));
        }
        if !worker.learners.is_empty() {
            line.push_str(&format!(
                "  learners {} {}",
                worker.learners.len(),
                lags(&worker.learners)
            ));
        }
        text.push_str(&line);
        text.push('\n');
    }
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// `p3:1200 p7:900`, at most six, then `…`.
fn lags(tasks: &[(Task, u64)]) -> String {
    let mut parts: Vec<String> = tasks
        .iter()
        .take(6)
        .map(|(task, lag)| format!("p{}:{lag}", task.partition))
        .collect();
    if tasks.len() > 6 {
        parts.push("…".to_owned());
    }
    format!("(lag {})", parts.join(" "))
}

pub(super) fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
