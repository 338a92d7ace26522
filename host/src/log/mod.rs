//! The record log: every record the protocol core emits, on disk, in
//! append-only segment files of CRC-framed, versioned records (the layout
//! is in docs/log-format.md). It owns the file format ([`frame`], with the
//! type byte in `record_type.rs` and the payloads of older format versions
//! in `legacy.rs`), the segment files, their headers and `HEAD`
//! ([`segment`]), the proof that no segment is missing (`chain.rs`), where
//! a log stops being readable (`problem.rs`), reading a data dir back with
//! torn-tail recovery ([`read`]), and appending with group commit and
//! compaction ([`writer`]). It knows
//! nothing of what records mean: replaying them is the core's `apply`,
//! after the core's `check_replay` says each fits.

mod chain;
pub mod frame;
mod legacy;
pub mod metric_families;
mod problem;
pub mod read;
mod record_type;
pub mod segment;
pub mod shards;
pub mod writer;

pub use read::{Scan, ScanMode, recover, scan, scan_into};
pub use segment::{LogError, SegmentKind, lock, log_dir};
pub use shards::{Opened, ShardedDir, shard_log_dir, shards_dir};
pub use writer::{FsyncPolicy, LogSink, LogStats, MAINTENANCE_STEPS};

#[cfg(test)]
mod tests;
