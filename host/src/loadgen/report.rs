//! The report of `assignd loadgen`: the summary line and one line per
//! churn event on stdout, and the figures as JSON in `--report` (what
//! `assignd plot` reads). It owns the figures' shape, the report's lines
//! and fields; the measured run fills in the figures.

use std::sync::atomic::Ordering;

use serde_json::json;

use super::churn::{ChurnEvent, ChurnKind};
use super::fleet::Beats;
use super::ledger::{Timeline, Window};
use super::load_report::{HostMeasured, LoadMeasured};
use super::probe::Settled;
use super::settings::LoadgenSettings;
use super::{LoadTestError, out_line};

/// The figures of one churn event over every group; the first is the
/// baseline, before any event.
pub(super) struct EventFigures {
    pub event: Option<ChurnEvent>,
    pub members_after: u32,
    /// The ledger's window that starts at the event.
    pub window: usize,
    /// Probes every group from the event to the next (none for the
    /// baseline).
    pub probe: Option<tokio::task::JoinHandle<Vec<Settled>>>,
    pub settled: Vec<Settled>,
    pub windows: Vec<Window>,
}

/// What the measured part of a run saw.
pub(super) struct Measured {
    pub elapsed_s: f64,
    pub figures: Vec<EventFigures>,
    pub double_ownership: u64,
    pub lease_lapses: u64,
    pub timeline: Timeline,
    /// The members' loads, with `--task-load`.
    pub load: Option<LoadMeasured>,
    /// The host's CPU and bytes, with `--host-pid`.
    pub host: Option<HostMeasured>,
}

/// A measured run with what it was asked to do.
pub(super) struct Report<'a> {
    pub settings: &'a LoadgenSettings,
    pub churn: &'a [ChurnEvent],
    /// The host the groups were created on.
    pub host: &'a str,
    /// The config of the created groups.
    pub config: &'a serde_json::Value,
    pub names: &'a [String],
    pub measured: Measured,
}

/// The heartbeats seen while measuring.
struct Heartbeats {
    ok: u64,
    errors: u64,
    latencies: hdrhistogram::Histogram<u64>,
}

impl Heartbeats {
    /// The latency at quantile `q`, in ms.
    fn ms(&self, q: f64) -> f64 {
        self.latencies.value_at_quantile(q) as f64 / 1e3
    }
}

impl Report<'_> {
    /// Prints the summary and the events' lines, and writes `--report`.
    pub fn finish(&self, beats: &Beats) -> Result<(), LoadTestError> {
        let heartbeats = Heartbeats {
            ok: beats.ok.load(Ordering::Relaxed),
            errors: beats.errors.load(Ordering::Relaxed),
            latencies: beats.latencies(),
        };
        let report = self.json(&heartbeats);
        out_line(&self.summary_line(&heartbeats));
        for figure in self.measured.figures.iter().skip(1) {
            out_line(&event_line(figure));
        }
        if let Some(load) = &self.measured.load {
            out_line(&load.line());
        }
        if let Some(host) = &self.measured.host {
            out_line(&host.line());
        }
        if let Some(path) = &self.settings.report {
            let text = serde_json::to_string_pretty(&report).expect("JSON");
            std::fs::write(path, text).map_err(|e| {
                LoadTestError::Failed(format!("cannot write {}: {e}", path.display()))
            })?;
        }
        Ok(())
    }

    /// Members over every group.
    fn members(&self) -> u64 {
        u64::from(self.settings.groups) * u64::from(self.settings.members)
    }

    fn summary_line(&self, beats: &Heartbeats) -> String {
        let measured = &self.measured;
        format!(
            "members={} groups={} heartbeats_per_s={:.0} p50_ms={:.2} p99_ms={:.2} p999_ms={:.2} errors={} double_ownership={} lease_lapses={}",
            self.members(),
            self.settings.groups,
            beats.ok as f64 / measured.elapsed_s,
            beats.ms(0.5),
            beats.ms(0.99),
            beats.ms(0.999),
            beats.errors,
            measured.double_ownership,
            measured.lease_lapses,
        )
    }

    fn json(&self, beats: &Heartbeats) -> serde_json::Value {
        let (settings, measured) = (self.settings, &self.measured);
        json!({
            "config": {
                "host": self.host,
                "groups": settings.groups,
                "members_per_group": settings.members,
                "tasks_per_group": settings.tasks,
                "churn": self.churn.iter().map(|e| e.spec.clone()).collect::<Vec<_>>(),
                "duration_s": settings.duration_s,
                "replay_rate": settings.replay_rate,
                "process_rate": settings.process_rate,
                "changelog_len": settings.changelog_len,
                "group": self.config,
            },
            "groups": settings.groups,
            "members": self.members(),
            "tasks_per_group": settings.tasks,
            "interval_ms": settings.interval_ms,
            "duration_s": measured.elapsed_s,
            "heartbeats": beats.ok,
            "heartbeats_per_s": beats.ok as f64 / measured.elapsed_s,
            "latency_ms": {"p50": beats.ms(0.5), "p99": beats.ms(0.99), "p999": beats.ms(0.999), "max": beats.latencies.max() as f64 / 1e3},
            "errors": beats.errors,
            "double_ownership": measured.double_ownership,
            "lease_lapses": measured.lease_lapses,
            "baseline": window_json(&measured.figures[0].windows),
            "events": measured.figures.iter().skip(1).map(|f| event_json(f, self.names)).collect::<Vec<_>>(),
            "timeline": measured.timeline,
            "load": measured.load.as_ref().map(LoadMeasured::json),
            "host": measured.host.as_ref().map(HostMeasured::json),
        })
    }
}

/// The sums of a window over every group.
fn sums(windows: &[Window]) -> Window {
    let mut sum = Window::default();
    for w in windows {
        sum.moved += w.moved;
        sum.ownerless_task_s += w.ownerless_task_s;
        sum.restoring_task_s += w.restoring_task_s;
        sum.double_ownership += w.double_ownership;
        sum.lease_lapses += w.lease_lapses;
        sum.ownerless_max = sum.ownerless_max.max(w.ownerless_max);
    }
    sum
}

fn window_json(windows: &[Window]) -> serde_json::Value {
    let sum = sums(windows);
    json!({
        "tasks_moved": sum.moved,
        "ownerless_task_s": sum.ownerless_task_s,
        "ownerless_max": sum.ownerless_max,
        "restoring_task_s": sum.restoring_task_s,
        "double_ownership": sum.double_ownership,
        "lease_lapses": sum.lease_lapses,
    })
}

/// The largest and the mean of some times, if any.
fn spread(times: impl Iterator<Item = Option<f64>>) -> (usize, Option<f64>, Option<f64>) {
    let times: Vec<f64> = times.flatten().collect();
    let max = times.iter().copied().reduce(f64::max);
    let mean = (!times.is_empty()).then(|| times.iter().sum::<f64>() / times.len() as f64);
    (times.len(), max, mean)
}

fn event_json(figure: &EventFigures, names: &[String]) -> serde_json::Value {
    let event = figure.event.as_ref().expect("events have one");
    let (settled, settled_max, settled_mean) = spread(figure.settled.iter().map(|s| s.settled_s));
    let (stable, stable_max, stable_mean) = spread(figure.settled.iter().map(|s| s.stable_s));
    let (kind, from, to) = match event.kind {
        ChurnKind::Scale { from, to } => ("scale", from, to),
        ChurnKind::Kill(n) => ("kill", figure.members_after + n, figure.members_after),
        ChurnKind::Leave(n) => ("leave", figure.members_after + n, figure.members_after),
    };
    let mut value = window_json(&figure.windows);
    let object = value.as_object_mut().expect("an object");
    let extra = json!({
        "spec": event.spec,
        "kind": kind,
        "at_s": event.at.as_secs_f64(),
        "members_before": from,
        "members_after": to,
        "groups": names.len(),
        "groups_stable": stable,
        "groups_settled": settled,
        "all_settled": settled == names.len(),
        "stable_s": {"max": stable_max, "mean": stable_mean},
        "settled_s": {"max": settled_max, "mean": settled_mean},
        "per_group": per_group_json(figure, names),
    });
    let serde_json::Value::Object(extra) = extra else {
        unreachable!("an object")
    };
    let mut merged = extra;
    merged.extend(std::mem::take(object));
    serde_json::Value::Object(merged)
}

/// Each group's figures of one event.
fn per_group_json(figure: &EventFigures, names: &[String]) -> Vec<serde_json::Value> {
    names
        .iter()
        .enumerate()
        .map(|(g, name)| {
            let s = figure.settled.get(g).copied().unwrap_or_default();
            let w = figure.windows.get(g).cloned().unwrap_or_default();
            json!({
                "group": name,
                "stable_s": s.stable_s,
                "settled_s": s.settled_s,
                "tasks_moved": w.moved,
                "ownerless_task_s": w.ownerless_task_s,
                "restoring_task_s": w.restoring_task_s,
                "double_ownership": w.double_ownership,
                "lease_lapses": w.lease_lapses,
            })
        })
        .collect()
}

fn event_line(figure: &EventFigures) -> String {
    let event = figure.event.as_ref().expect("events have one");
    let groups = figure.windows.len();
    let (settled, settled_max, _) = spread(figure.settled.iter().map(|s| s.settled_s));
    let sum = sums(&figure.windows);
    let seconds = |t: Option<f64>| t.map_or_else(|| "-".to_owned(), |t| format!("{t:.2}"));
    format!(
        "event={} settled={settled}/{groups} settled_s_max={} tasks_moved={} ownerless_task_s={:.2} restoring_task_s={:.2} double_ownership={} lease_lapses={}",
        event.spec,
        seconds(settled_max),
        sum.moved,
        sum.ownerless_task_s,
        sum.restoring_task_s,
        sum.double_ownership,
        sum.lease_lapses,
    )
}
