//! The module registry's metric families, which `mod.rs` sets
//! (`publish_gauges`): modules and their bytes kept, and the caps.
//! `crate::metric_catalog` gathers them.

use metrics::Unit;

use crate::telemetry::{Family, Kind};

/// The families the registry sets.
pub const MODULE_FAMILIES: &[Family] = &[
    Family::new(
        "assignd_modules",
        Kind::Gauge,
        Unit::Count,
        "Uploaded modules kept (in a cluster: the cluster's, of which this node has a copy)",
    ),
    Family::new(
        "assignd_modules_max",
        Kind::Gauge,
        Unit::Count,
        "Uploaded modules kept at most (serve --modules-max)",
    ),
    Family::new(
        "assignd_module_bytes",
        Kind::Gauge,
        Unit::Bytes,
        "The uploaded modules' bytes in total",
    ),
    Family::new(
        "assignd_module_bytes_max",
        Kind::Gauge,
        Unit::Bytes,
        "The uploaded modules' bytes in total at most (serve --module-bytes-max)",
    ),
];
