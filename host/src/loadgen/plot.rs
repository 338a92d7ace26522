//! `assignd plot`: draws the timelines of `assignd loadgen --report` files
//! on one SVG chart, to compare runs (e.g. a scale-up with learners and the
//! same without): per report, the tasks without an active owner (solid)
//! and the tasks whose new owner restores its state (dashed), summed over
//! the report's groups, against the seconds since one of its churn events.
//! It owns reading the reports and the chart; the report's fields are
//! `report`'s.

use std::path::Path;

use plotters::prelude::*;

use super::LoadTestError;
use super::ledger::Timeline;
use super::settings::PlotSettings;

/// One run's step series, with times relative to its event.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub label: String,
    /// (seconds since the event, tasks without an active owner).
    pub ownerless: Vec<(f64, f64)>,
    /// (seconds since the event, tasks restoring).
    pub restoring: Vec<(f64, f64)>,
}

impl Series {
    /// The step series of `timeline`, shifted so that `event_s` is 0.
    pub fn from_timeline(label: String, timeline: &Timeline, event_s: f64) -> Self {
        let steps = |values: &[u64]| {
            let mut points = Vec::with_capacity(values.len() * 2);
            for (i, (&t, &v)) in timeline.t_s.iter().zip(values).enumerate() {
                if i > 0 {
                    points.push((t - event_s, values[i - 1] as f64));
                }
                points.push((t - event_s, v as f64));
            }
            points
        };
        Series {
            label,
            ownerless: steps(&timeline.ownerless),
            restoring: steps(&timeline.restoring),
        }
    }
}

fn failure(message: String) -> LoadTestError {
    LoadTestError::Failed(message)
}

/// Reads the reports and draws their timelines.
pub fn plot(args: PlotSettings) -> Result<(), LoadTestError> {
    if !args.labels.is_empty() && args.labels.len() != args.reports.len() {
        return Err(failure(format!(
            "{} --label for {} reports: give one per report or none",
            args.labels.len(),
            args.reports.len()
        )));
    }
    let mut series = Vec::new();
    let mut default_title = None;
    for (i, path) in args.reports.iter().enumerate() {
        let text = std::fs::read_to_string(path)
            .map_err(|e| failure(format!("cannot read {}: {e}", path.display())))?;
        let report: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| failure(format!("{}: not JSON: {e}", path.display())))?;
        let timeline: Timeline =
            serde_json::from_value(report["timeline"].clone()).map_err(|e| {
                failure(format!(
                    "{}: no timeline (a report of an older loadgen?): {e}",
                    path.display()
                ))
            })?;
        let event = &report["events"][args.event as usize - 1];
        let at_s = event["at_s"].as_f64().ok_or_else(|| {
            failure(format!(
                "{}: has no churn event {}",
                path.display(),
                args.event
            ))
        })?;
        let group = &report["config"]["group"];
        let label = args.labels.get(i).cloned().unwrap_or_else(|| {
            format!(
                "{}, learners {}",
                group["assignor"].as_str().unwrap_or("?"),
                group["learners"].as_str().unwrap_or("?")
            )
        });
        default_title.get_or_insert_with(|| {
            format!(
                "{} in {} groups of {} tasks, heartbeats every {} ms",
                event["spec"].as_str().unwrap_or("?"),
                report["groups"],
                report["tasks_per_group"],
                report["interval_ms"]
            )
        });
        series.push(Series::from_timeline(label, &timeline, at_s));
    }
    let title = args
        .title
        .or(default_title)
        .unwrap_or_else(|| "scale-up".into());
    draw(&args.out, &title, &series, -args.before, args.after).map_err(failure)
}

/// The colours of the reports, in order.
const COLOURS: [RGBColor; 4] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
];

/// Draws every series from `from` seconds to `to` (or the last point) on
/// one chart, written as SVG to `out`.
pub fn draw(
    out: &Path,
    title: &str,
    series: &[Series],
    from: f64,
    to: Option<f64>,
) -> Result<(), String> {
    let (to, top) = bounds(series, from, to);
    let in_range = |points: &[(f64, f64)]| within(points, from, to);
    let error = |e: &dyn std::fmt::Display| format!("cannot draw {}: {e}", out.display());
    let root = SVGBackend::new(out, (960, 540)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| error(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(from..to, 0.0..top)
        .map_err(|e| error(&e))?;
    chart
        .configure_mesh()
        .x_desc("seconds since the event")
        .y_desc("tasks (all groups)")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(|e| error(&e))?;
    for (i, s) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(
                in_range(&s.ownerless),
                colour.stroke_width(2),
            ))
            .map_err(|e| error(&e))?
            .label(format!("{}: without an active owner", s.label))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        chart
            .draw_series(DashedLineSeries::new(
                in_range(&s.restoring),
                6,
                4,
                colour.stroke_width(1),
            ))
            .map_err(|e| error(&e))?
            .label(format!("{}: restoring", s.label))
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(1))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()
        .map_err(|e| error(&e))?;
    root.present().map_err(|e| error(&e))?;
    Ok(())
}

/// The points of `points` from `from` to `to` seconds.
fn within(points: &[(f64, f64)], from: f64, to: f64) -> Vec<(f64, f64)> {
    points
        .iter()
        .filter(|p| p.0 >= from && p.0 <= to)
        .copied()
        .collect()
}

/// The chart's right end (`to`, or the last point) and its top: the
/// highest point drawn, with room for the legend above the lines.
fn bounds(series: &[Series], from: f64, to: Option<f64>) -> (f64, f64) {
    let last = series
        .iter()
        .flat_map(|s| s.ownerless.iter().chain(&s.restoring))
        .map(|p| p.0)
        .fold(from + 1.0, f64::max);
    let to = to.unwrap_or(last).max(from + 1.0);
    let top = series
        .iter()
        .flat_map(|s| {
            within(&s.ownerless, from, to)
                .into_iter()
                .chain(within(&s.restoring, from, to))
        })
        .map(|p| p.1)
        .fold(1.0, f64::max)
        * 1.4; // room for the legend above the lines
    (to, top)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeline_becomes_steps_relative_to_its_event() {
        let timeline = Timeline {
            t_s: vec![0.0, 10.5, 11.0],
            ownerless: vec![0, 3, 0],
            restoring: vec![0, 0, 3],
        };
        let series = Series::from_timeline("x".into(), &timeline, 10.0);
        assert_eq!(
            series.ownerless,
            vec![(-10.0, 0.0), (0.5, 0.0), (0.5, 3.0), (1.0, 3.0), (1.0, 0.0)]
        );
        assert_eq!(series.restoring.last(), Some(&(1.0, 3.0)));
    }

    #[test]
    fn two_runs_are_drawn_as_one_svg_with_both_series_and_a_legend() {
        let dir = std::env::temp_dir().join(format!("assignd-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join("chart.svg");
        let with = Timeline {
            t_s: vec![0.0, 5.0, 5.01, 9.0],
            ownerless: vec![0, 7, 0, 0],
            restoring: vec![0, 0, 0, 0],
        };
        let without = Timeline {
            t_s: vec![0.0, 5.5, 6.0, 8.0],
            ownerless: vec![0, 40, 0, 0],
            restoring: vec![0, 0, 40, 0],
        };
        let series = [
            Series::from_timeline("learner-aware, learners host".into(), &with, 5.0),
            Series::from_timeline("sticky, learners off".into(), &without, 5.0),
        ];
        draw(&out, "scale:10->20@5s", &series, -2.0, None).unwrap();
        let svg = std::fs::read_to_string(&out).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("scale:10-&gt;20@5s"), "the title");
        for label in ["learner-aware, learners host", "sticky, learners off"] {
            assert!(svg.contains(&format!("{label}: without an active owner")));
            assert!(svg.contains(&format!("{label}: restoring")));
        }
        // Each run's two colours: a solid series, its dashes and legend.
        for colour in ["#1F77B4", "#D62728"] {
            assert!(
                svg.matches(colour).count() >= 4,
                "{colour}: {}",
                svg.matches(colour).count()
            );
        }
        // The ownerless peak of the second run sets the y axis (40 × 1.4).
        assert!(svg.contains("\n40\n"), "a y label at 40");
    }
}
