//! The host's metrics recorder: the one process-wide Prometheus recorder
//! behind the `metrics` facade, and its text rendering for `GET /metrics`.
//! It owns no metric and knows none by name: each part of the host records
//! its own through the `metrics` macros (names `assignd_*`, seconds for
//! durations, `_total` for counters) and declares its families
//! ([`Family`]) next to the code that records them; `crate::metric_catalog`
//! gathers them and [`install`]s the recorder with them at start.

use std::sync::OnceLock;

use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Histogram buckets for durations (every family named `*_seconds`), in
/// seconds: 100 µs to 30 s.
const SECONDS_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
];

/// What kind of metric a family is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

impl Kind {
    /// The kind as Prometheus' `# TYPE` line names it.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Counter => "counter",
            Kind::Gauge => "gauge",
            Kind::Histogram => "histogram",
        }
    }
}

/// One metric family: its name, kind, unit and help line, and, for a
/// histogram that is not a duration, its buckets. Labels are bounded: a
/// state, a reason, a module (modules are limited), an HTTP method, route
/// template and status; never a group or a member id, so the recorder and
/// a default scrape stay the same size however many groups there are.
#[derive(Clone, Copy, Debug)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub unit: Unit,
    pub help: &'static str,
    /// Buckets of a histogram not in seconds; `None`: the default (the
    /// duration buckets for a `*_seconds` family).
    pub buckets: Option<&'static [f64]>,
}

impl Family {
    /// A family with the default buckets.
    pub const fn new(name: &'static str, kind: Kind, unit: Unit, help: &'static str) -> Self {
        Family {
            name,
            kind,
            unit,
            help,
            buckets: None,
        }
    }

    /// A histogram with its own buckets.
    pub const fn with_buckets(self, buckets: &'static [f64]) -> Self {
        Family {
            buckets: Some(buckets),
            ..self
        }
    }
}

/// The installed recorder's handle, and the families it describes.
struct Installed {
    handle: PrometheusHandle,
    families: &'static [&'static [Family]],
}

static INSTALLED: OnceLock<Installed> = OnceLock::new();

/// Installs the recorder, once: every family in `families` described (its
/// help line and unit) and given its buckets, then `zero_known_series`
/// run, which sets every series whose labels are known before its first
/// event to zero, so dashboards and alerts see them from the first scrape.
/// A later call, or one after [`handle`] installed a recorder without
/// families, changes nothing. If another recorder was installed first (a
/// test harness, an embedding program), metrics go there and this handle
/// renders only what it saw.
pub fn install(
    families: &'static [&'static [Family]],
    zero_known_series: fn(),
) -> &'static PrometheusHandle {
    &INSTALLED
        .get_or_init(|| {
            let mut builder = PrometheusBuilder::new()
                .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
                .expect("the bucket list is not empty");
            for family in families.iter().copied().flatten() {
                if let Some(buckets) = family.buckets {
                    builder = builder
                        .set_buckets_for_metric(Matcher::Full(family.name.into()), buckets)
                        .expect("a family's bucket list is not empty");
                }
            }
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            match metrics::set_global_recorder(recorder) {
                Ok(()) => {
                    describe(families);
                    zero_known_series();
                }
                Err(error) => {
                    tracing::warn!(%error, "another metrics recorder is installed; /metrics shows nothing")
                }
            }
            Installed { handle, families }
        })
        .handle
}

/// The recorder's handle, installing one without families on the first
/// call if [`install`] was not called: what is recorded from then on
/// reaches `GET /metrics`.
pub fn handle() -> &'static PrometheusHandle {
    install(&[], || {})
}

/// Every metric in Prometheus' text exposition format; an installed
/// family without a series yet still has its HELP and TYPE lines.
pub fn render() -> String {
    let handle = handle();
    handle.run_upkeep();
    let mut text = handle.render();
    let families = INSTALLED
        .get()
        .map_or(&[][..], |installed| installed.families);
    for family in families.iter().copied().flatten() {
        let name = family.name;
        if !text.contains(&format!("# TYPE {name} ")) {
            text.push_str(&format!(
                "# HELP {name} {}\n# TYPE {name} {}\n\n",
                family.help,
                family.kind.label()
            ));
        }
    }
    text
}

/// Every family's help line and unit, once, at install. (A family whose
/// labels are not known yet, HTTP latency, shows its HELP and TYPE lines
/// through [`render`].)
fn describe(families: &[&[Family]]) {
    for family in families.iter().copied().flatten() {
        let Family {
            name, unit, help, ..
        } = *family;
        match family.kind {
            Kind::Counter => describe_counter!(name, unit, help),
            Kind::Gauge => describe_gauge!(name, unit, help),
            Kind::Histogram => describe_histogram!(name, unit, help),
        }
    }
}
