//! `assignd plot`'s arguments: loadgen reports' timelines on one SVG
//! chart (`loadgen::plot` reads and draws them).

use std::path::PathBuf;

use clap::Args;

use super::Failure;
use crate::loadgen::{self, PlotSettings};

#[derive(Debug, Args)]
pub struct PlotArgs {
    /// The loadgen reports (`--report FILE.json`) to draw, one colour each.
    #[arg(required = true, value_name = "REPORT.json")]
    reports: Vec<PathBuf>,
    /// Where to write the chart.
    #[arg(long, short, value_name = "FILE.svg")]
    out: PathBuf,
    /// The churn event (1 = the first) whose time is 0 on the x axis.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    event: u32,
    /// Seconds drawn before the event.
    #[arg(long, default_value_t = 2.0)]
    before: f64,
    /// Seconds drawn after the event (default: to the end of the longest
    /// report).
    #[arg(long)]
    after: Option<f64>,
    /// The chart's title (default: the first report's event and shape).
    #[arg(long)]
    title: Option<String>,
    /// A legend label per report, in order (default: assignor and
    /// learners from each report's config).
    #[arg(long = "label", value_name = "LABEL")]
    labels: Vec<String>,
}

pub fn plot(args: PlotArgs) -> Result<(), Failure> {
    loadgen::plot(PlotSettings {
        reports: args.reports,
        out: args.out,
        event: args.event,
        before: args.before,
        after: args.after,
        title: args.title,
        labels: args.labels,
    })
    .map_err(Failure::from)
}
