//! The per-group shadow figures of `GET /metrics?groups=true`: for each
//! group with a shadow assignor (or comparisons left from one), the totals
//! of its comparisons since this host took it (`group::ShadowTotals`).
//! Scanned with the other group figures at the scrape (`gauges.rs`),
//! rendered on demand like them; never held by the recorder, whose size
//! must not grow with the groups.

use std::fmt::Write;
use std::sync::Mutex;

use crate::protocol::core::Coordinator;
use crate::protocol::group::ShadowTotals;

use super::observe::label_value;

/// One group's shadow totals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShadowFigures {
    pub name: String,
    pub totals: ShadowTotals,
}

/// The figures of every group of `core` with a shadow or comparisons.
pub fn scan(core: &Coordinator) -> Vec<ShadowFigures> {
    core.groups()
        .filter_map(|group| {
            let totals = core.liveness(&group.name)?.shadows.totals;
            (group.shadow.is_some() || totals != ShadowTotals::default()).then(|| ShadowFigures {
                name: group.name.clone(),
                totals,
            })
        })
        .collect()
}

/// The last scan, for [`render_groups`].
static LAST_SCAN: Mutex<Vec<ShadowFigures>> = Mutex::new(Vec::new());

/// Keeps a scan (of every served shard) for [`render_groups`].
pub fn publish(mut figures: Vec<ShadowFigures>) {
    figures.sort_by(|a, b| a.name.cmp(&b.name));
    *LAST_SCAN.lock().unwrap_or_else(|e| e.into_inner()) = figures;
}

/// The per-group shadow families, rendered from the last scan in
/// Prometheus' text format.
pub fn render_groups(text: &mut String) {
    let last = LAST_SCAN.lock().unwrap_or_else(|e| e.into_inner());
    let gauge = |text: &mut String, name: &str, help: &str, value: fn(&ShadowTotals) -> u64| {
        let _ = write!(text, "# HELP {name} {help}\n# TYPE {name} gauge\n");
        for group in last.iter() {
            let _ = writeln!(
                text,
                "{name}{{group=\"{}\"}} {}",
                label_value(&group.name),
                value(&group.totals)
            );
        }
    };
    for (name, help, value) in GAUGES {
        gauge(text, name, help, *value);
    }
    let moved = "assignd_group_shadow_moved";
    let _ = write!(
        text,
        "# HELP {moved} Tasks the live answers moved (side=live) and the shadow's would have (side=shadow), over the compared calls\n# TYPE {moved} gauge\n"
    );
    for group in last.iter() {
        let name = label_value(&group.name);
        let totals = &group.totals;
        let _ = writeln!(
            text,
            "{moved}{{group=\"{name}\",side=\"live\"}} {}",
            totals.live_moved
        );
        let _ = writeln!(
            text,
            "{moved}{{group=\"{name}\",side=\"shadow\"}} {}",
            totals.shadow_moved
        );
    }
}

/// The families with one series per group: name, help, value.
type Gauge = (&'static str, &'static str, fn(&ShadowTotals) -> u64);

const GAUGES: &[Gauge] = &[
    (
        "assignd_group_shadow_compared",
        "Live calls compared with their shadow's since this host took the group",
        |t| t.compared,
    ),
    (
        "assignd_group_shadow_disagreements",
        "Comparisons whose two answers disagreed on some task's owner",
        |t| t.disagreements,
    ),
    (
        "assignd_group_shadow_failures",
        "Shadow calls that failed (a trap, a limit, an invalid answer, the guest's own error)",
        |t| t.shadow_failures,
    ),
];
