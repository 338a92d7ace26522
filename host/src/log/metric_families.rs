//! The record log's metric families, which `writer.rs` records: batch
//! writes and fsyncs timed, records per append, records appended, and
//! maintenance steps that failed. `crate::metric_catalog` gathers them.

use metrics::Unit;

use crate::telemetry::{Family, Kind};

/// The families `writer.rs` records.
pub const LOG_FAMILIES: &[Family] = &[
    Family::new(
        "assignd_log_write_seconds",
        Kind::Histogram,
        Unit::Seconds,
        "Duration of one batch write to the record log (before its fsync)",
    ),
    Family::new(
        "assignd_log_fsync_seconds",
        Kind::Histogram,
        Unit::Seconds,
        "Duration of one fsync of the record log",
    ),
    Family::new(
        "assignd_log_batch_records",
        Kind::Histogram,
        Unit::Count,
        "Records in one append to the record log (one group commit)",
    )
    .with_buckets(BATCH_BUCKETS),
    Family::new(
        "assignd_log_records_total",
        Kind::Counter,
        Unit::Count,
        "Records appended to the record log",
    ),
    Family::new(
        "assignd_log_maintenance_failures_total",
        Kind::Counter,
        Unit::Count,
        "Record log maintenance steps that failed and will be retried (compaction, roll: a new segment, head: updating HEAD); appends go on",
    ),
];

/// Histogram buckets for the records of one log append (a group commit).
const BATCH_BUCKETS: &[f64] = &[1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0];

/// Sets the log's series to zero: its histograms (registered without a
/// sample, rendered with zero counts), its record count and every
/// maintenance step's failures.
pub fn zero_log_series() {
    for name in [
        "assignd_log_write_seconds",
        "assignd_log_fsync_seconds",
        "assignd_log_batch_records",
    ] {
        let _ = metrics::histogram!(name);
    }
    metrics::counter!("assignd_log_records_total").absolute(0);
    for step in super::MAINTENANCE_STEPS {
        metrics::counter!("assignd_log_maintenance_failures_total", "step" => *step).absolute(0);
    }
}
