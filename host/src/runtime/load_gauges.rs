//! The per-group load figures of `GET /metrics?groups=true`: for each group
//! with a load unit, its total known load, its imbalance and whether every
//! load is known, from the core's load view (the one definition of shares
//! and imbalance the group view and the load trigger share). Scanned with
//! the other group figures (`observe::scan`) at the scrape, rendered on
//! demand like them; never held by the recorder, whose size must not grow
//! with the groups.

use std::fmt::Write;
use std::sync::Mutex;

use crate::protocol::core::{Coordinator, load_view};
use crate::protocol::group::Millis;

use super::observe::label_value;

/// One group's load figures.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadFigures {
    pub name: String,
    pub unit: String,
    pub total: f64,
    pub imbalance: Option<f64>,
    pub complete: bool,
}

/// The figures of every group of `core` that takes loads, at `now`.
pub fn scan(core: &Coordinator, now: Millis) -> Vec<LoadFigures> {
    core.groups()
        .filter_map(|group| {
            let view = load_view(group, core.liveness(&group.name)?, now)?;
            Some(LoadFigures {
                name: group.name.clone(),
                unit: view.unit,
                total: view.total,
                imbalance: view.imbalance,
                complete: view.complete,
            })
        })
        .collect()
}

/// The last scan, for [`render_groups`].
static LAST_SCAN: Mutex<Vec<LoadFigures>> = Mutex::new(Vec::new());

/// Keeps a scan (of every served shard) for [`render_groups`].
pub fn publish(mut figures: Vec<LoadFigures>) {
    figures.sort_by(|a, b| a.name.cmp(&b.name));
    *LAST_SCAN.lock().unwrap_or_else(|e| e.into_inner()) = figures;
}

/// The load families, rendered from the last scan in Prometheus' text
/// format. A group's imbalance is left out while no member has a share
/// (no load known yet).
pub fn render_groups(text: &mut String) {
    let last = LAST_SCAN.lock().unwrap_or_else(|e| e.into_inner());
    let family = |text: &mut String, name: &str, help: &str| {
        let _ = write!(text, "# HELP {name} {help}\n# TYPE {name} gauge\n");
    };
    family(
        text,
        "assignd_group_load",
        "The known load of a group's assigned tasks, in its load_unit (the unit label)",
    );
    for group in last.iter() {
        let _ = writeln!(
            text,
            "assignd_group_load{{group=\"{}\",unit=\"{}\"}} {}",
            label_value(&group.name),
            label_value(&group.unit),
            group.total
        );
    }
    family(
        text,
        "assignd_group_load_imbalance",
        "The largest ratio of a member's load to its share of a group's load (1 is perfect)",
    );
    for group in last.iter() {
        if let Some(imbalance) = group.imbalance {
            let _ = writeln!(
                text,
                "assignd_group_load_imbalance{{group=\"{}\"}} {imbalance}",
                label_value(&group.name)
            );
        }
    }
    family(
        text,
        "assignd_group_loads_complete",
        "1 when every assigned task of a group has a known load, else 0 (after a restart, until its members report)",
    );
    for group in last.iter() {
        let _ = writeln!(
            text,
            "assignd_group_loads_complete{{group=\"{}\"}} {}",
            label_value(&group.name),
            u8::from(group.complete)
        );
    }
}
