//! The load part of `assignd loadgen`'s report: the members' load spread
//! at the start and the end of the measurement and over it, the time
//! outside the band, the rebalances (by reason) with the tasks and load
//! each moved, and the host's CPU and bytes per heartbeat when its
//! process was given. Over several groups a figure is the worst group's
//! (spreads), the sum (moves, rebalances) or the mean (time outside the
//! band); each group's own are in the JSON. It owns the lines and fields;
//! the sampler measures.

use serde_json::json;

use super::load_figures::GroupLoad;

/// The load figures of a run.
pub(super) struct LoadMeasured {
    /// The `--task-load` spec.
    pub task_load: String,
    /// Whether the members reported their loads (the group has a load unit).
    pub reported: bool,
    pub band: f64,
    pub groups: Vec<GroupLoad>,
}

/// The host's process over the measurement (`--host-pid`), and the
/// bytes the load generator itself sent.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct HostMeasured {
    /// CPU, % of one core.
    pub cpu_percent: Option<f64>,
    /// Bytes the host wrote through write calls (answers, its log, and the
    /// group views loadgen reads), per heartbeat. Socket reads are not
    /// counted by /proc, so what it received is measured at the sender.
    pub written_per_heartbeat: Option<f64>,
    /// Bytes loadgen wrote (the heartbeats' requests with their HTTP head,
    /// and its few view requests), per heartbeat.
    pub sent_per_heartbeat: Option<f64>,
}

/// Sums and worst cases over every group.
#[derive(Default)]
struct Totals {
    first_max: f64,
    last_max: f64,
    max_max: f64,
    mean_max: f64,
    outside_band_s: f64,
    /// Members outside the band at the last sample.
    outside_last: u32,
    rebalances: usize,
    load_rebalances: usize,
    tasks_moved: u64,
    load_moved: f64,
    load_rebalance_tasks: u64,
    load_rebalance_load: f64,
}

fn totals(groups: &[GroupLoad]) -> Totals {
    let mut t = Totals::default();
    for g in groups {
        t.first_max = t.first_max.max(g.first.max_over_mean);
        t.last_max = t.last_max.max(g.last.max_over_mean);
        t.max_max = t.max_max.max(g.max_over_mean_max);
        t.mean_max = t.mean_max.max(g.max_over_mean_mean);
        t.outside_band_s += g.outside_band_s / groups.len() as f64;
        t.outside_last += g.last.outside;
        t.rebalances += g.rebalances.len();
        t.load_rebalances += g.load_rebalances();
        t.tasks_moved += g.tasks_moved;
        t.load_moved += g.load_moved;
        for r in g.rebalances.iter().filter(|r| r.reason == "load") {
            t.load_rebalance_tasks += r.tasks_moved;
            t.load_rebalance_load += r.load_moved;
        }
    }
    t
}

/// `a / n`, or None when n is 0.
fn per(a: f64, n: usize) -> Option<f64> {
    (n > 0).then(|| a / n as f64)
}

impl LoadMeasured {
    pub fn json(&self) -> serde_json::Value {
        let t = totals(&self.groups);
        json!({
            "task_load": self.task_load,
            "reported": self.reported,
            "band": self.band,
            "max_over_mean": {
                "first": t.first_max,
                "last": t.last_max,
                "max": t.max_max,
                "mean": t.mean_max,
            },
            "outside_band_s": t.outside_band_s,
            "members_outside_band_last": t.outside_last,
            "rebalances": t.rebalances,
            "load_rebalances": t.load_rebalances,
            "tasks_moved": t.tasks_moved,
            "load_moved": t.load_moved,
            "tasks_moved_per_load_rebalance": per(t.load_rebalance_tasks as f64, t.load_rebalances),
            "load_moved_per_load_rebalance": per(t.load_rebalance_load, t.load_rebalances),
            "per_group": self.groups,
        })
    }

    pub fn line(&self) -> String {
        let t = totals(&self.groups);
        let or_dash = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"));
        format!(
            "task_load={} reported={} band={} max_over_mean_first={:.3} max_over_mean_last={:.3} max_over_mean_max={:.3} max_over_mean_mean={:.3} outside_band_s={:.1} members_outside_band_last={} rebalances={} load_rebalances={} tasks_moved={} load_moved={:.1} tasks_per_load_rebalance={} load_per_load_rebalance={}",
            self.task_load,
            self.reported,
            self.band,
            t.first_max,
            t.last_max,
            t.max_max,
            t.mean_max,
            t.outside_band_s,
            t.outside_last,
            t.rebalances,
            t.load_rebalances,
            t.tasks_moved,
            t.load_moved,
            or_dash(per(t.load_rebalance_tasks as f64, t.load_rebalances)),
            or_dash(per(t.load_rebalance_load, t.load_rebalances)),
        )
    }
}

impl HostMeasured {
    pub fn json(&self) -> serde_json::Value {
        json!({
            "cpu_percent": self.cpu_percent,
            "written_bytes_per_heartbeat": self.written_per_heartbeat,
            "sent_bytes_per_heartbeat": self.sent_per_heartbeat,
        })
    }

    pub fn line(&self) -> String {
        let or_dash = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"));
        format!(
            "host_cpu_percent={} sent_bytes_per_heartbeat={} host_written_bytes_per_heartbeat={}",
            or_dash(self.cpu_percent),
            or_dash(self.sent_per_heartbeat),
            or_dash(self.written_per_heartbeat),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loadgen::load_figures::{Rebalance, Spread};

    fn group(first: f64, last: f64, rebalances: Vec<Rebalance>) -> GroupLoad {
        let spread = |m: f64| Spread {
            max_over_mean: m,
            min_over_mean: 1.0,
            in_band: m <= 1.1,
            outside: u32::from(m > 1.1),
        };
        GroupLoad {
            group: "g".into(),
            first: spread(first),
            last: spread(last),
            max_over_mean_max: first.max(last),
            max_over_mean_mean: (first + last) / 2.0,
            outside_band_s: 4.0,
            tasks_moved: rebalances.iter().map(|r| r.tasks_moved).sum(),
            load_moved: rebalances.iter().map(|r| r.load_moved).sum(),
            rebalances,
            ..GroupLoad::default()
        }
    }

    fn rebalance(reason: &str, tasks: u64, load: f64) -> Rebalance {
        Rebalance {
            reason: reason.into(),
            tasks_moved: tasks,
            load_moved: load,
            ..Rebalance::default()
        }
    }

    #[test]
    fn figures_over_groups_are_worst_sums_and_means() {
        let measured = LoadMeasured {
            task_load: "zipf".into(),
            reported: true,
            band: 0.1,
            groups: vec![
                group(
                    2.0,
                    1.05,
                    vec![rebalance("load", 4, 40.0), rebalance("membership", 9, 1.0)],
                ),
                group(
                    1.5,
                    1.08,
                    vec![rebalance("load", 2, 20.0), rebalance("load", 0, 0.0)],
                ),
            ],
        };
        let json = measured.json();
        assert_eq!(json["max_over_mean"]["first"], 2.0);
        assert_eq!(json["max_over_mean"]["last"], 1.08);
        assert_eq!(json["load_rebalances"], 3);
        assert_eq!(json["rebalances"], 4);
        assert_eq!(json["tasks_moved"], 15);
        assert_eq!(json["tasks_moved_per_load_rebalance"], 2.0);
        assert_eq!(json["load_moved_per_load_rebalance"], 20.0);
        assert_eq!(json["outside_band_s"], 4.0);
        let line = measured.line();
        assert!(line.contains("load_rebalances=3 tasks_moved=15"), "{line}");
        assert!(line.contains("tasks_per_load_rebalance=2.0"), "{line}");
    }

    #[test]
    fn no_load_rebalance_gives_no_figure_per_rebalance() {
        let measured = LoadMeasured {
            task_load: "zipf".into(),
            reported: false,
            band: 0.1,
            groups: vec![group(2.0, 2.0, Vec::new())],
        };
        assert_eq!(
            measured.json()["tasks_moved_per_load_rebalance"],
            serde_json::Value::Null
        );
        assert!(measured.line().contains("tasks_per_load_rebalance=-"));
    }
}
