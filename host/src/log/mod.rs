//! The record log: every record the protocol core emits, on disk, in
//! append-only segment files of CRC-framed, versioned records (the layout
//! is in docs/log-format.md). It owns the file format ([`frame`]), reading
//! a data dir back with torn-tail recovery and the proof that no segment
//! is missing ([`segment`]), reading frames
//! of older format versions (`legacy.rs`), and appending
//! with group commit and compaction ([`writer`]). It knows nothing of what
//! records mean: replaying them is the core's `apply`, after the core's
//! `check_replay` says each fits.

pub mod frame;
mod legacy;
pub mod segment;
pub mod shards;
pub mod writer;

pub use segment::{LogError, Scan, ScanMode, SegmentKind, lock, log_dir, recover, scan, scan_into};
pub use shards::{Opened, ShardedDir, shard_log_dir, shards_dir};
pub use writer::{FsyncPolicy, LogSink, LogStats, MAINTENANCE_STEPS};

#[cfg(test)]
mod tests;
