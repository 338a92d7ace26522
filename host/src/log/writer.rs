//! Appending to the log: the [`RecordSink`] behind the runtime's record
//! queue. The queue hands it every batch that piled up while the last
//! fsync ran, so one `write` and one `fsync` serve many requests (group
//! commit); it returns only once they are durable, and a response that
//! acknowledges a change waits for that.
//!
//! Compaction: the sink keeps a shadow of every group (it applies each
//! record it writes, through the core's own `apply`). Once the log has
//! grown past [`COMPACTION_GROWTH_FACTOR`] times the last compacted size
//! (and [`COMPACTION_BYTES_MIN`]), it writes one `GroupSnapshot` per group
//! as a new segment (temporary file, fsync, rename, fsync of the folder)
//! and deletes every older segment, whose records those snapshots replace.
//! So the log's size tracks the live state, not the history.
//!
//! Metrics: each append's write and fsync durations, its size in records,
//! and the records appended (`assignd_log_*`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::frame::encode;
use super::segment::{
    LogError, SEGMENT_BYTES_MAX, io_error, list_segments, segment_path, sync_dir, temp_path,
};
use crate::protocol::core::Coordinator;
use crate::protocol::group::Record;
use crate::runtime::RecordSink;

/// When appended records are made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum FsyncPolicy {
    /// fsync before acknowledging (group-committed): nothing acknowledged is
    /// lost, even on power failure.
    Always,
    /// Leave flushing to the OS. Survives a crash of assignd (kill -9: the
    /// data is in the page cache) but not of the machine: after a power
    /// failure or kernel crash, changes acknowledged in the last seconds
    /// may be lost and epochs may go backwards.
    Never,
}

/// Compaction runs once the log is this many times its size after the
/// last compaction (and at least [`COMPACTION_BYTES_MIN`]).
pub const COMPACTION_GROWTH_FACTOR: u64 = 2;
pub const COMPACTION_BYTES_MIN: u64 = 4 << 20;

/// Figures for metrics and benchmarks.
#[derive(Debug, Default)]
pub struct LogStats {
    pub records: AtomicU64,
    pub fsyncs: AtomicU64,
    pub bytes_written: AtomicU64,
    /// Bytes in the segments on disk now.
    pub log_bytes: AtomicU64,
    /// Bytes of the log right after the last compaction.
    pub compacted_bytes: AtomicU64,
    pub compactions: AtomicU64,
    /// Duration of the last fsync.
    pub last_fsync_micros: AtomicU64,
    /// Time spent in fsyncs of appends, summed.
    pub fsync_micros: AtomicU64,
}

/// The record log, open for appending.
pub struct LogSink {
    inner: Mutex<Inner>,
    pub stats: LogStats,
}

struct Inner {
    dir: PathBuf,
    fsync: FsyncPolicy,
    file: File,
    number: u64,
    segment_bytes: u64,
    /// Every group as the log holds it, for compaction.
    shadow: Coordinator,
    buffer: Vec<u8>,
    /// A write, fsync or compaction failed: what the file holds is unknown
    /// (a partial frame, or pages an fsync failed to write and the kernel
    /// dropped), so nothing more is appended.
    failed: bool,
}

impl LogSink {
    /// Opens the log folder for appending after a scan (a torn tail already
    /// cut); `recovered` are the records that scan read.
    pub fn open(dir: &Path, fsync: FsyncPolicy, recovered: &[Record]) -> Result<Self, LogError> {
        let mut shadow = Coordinator::new(0);
        for record in recovered {
            shadow.apply(record);
        }
        Self::open_with_state(dir, fsync, shadow)
    }

    /// [`LogSink::open`] given the state the scanned records replay to
    /// (`assignd serve` hands it a clone of the core it recovered, which
    /// is cheaper than a second replay).
    pub fn open_with_state(
        dir: &Path,
        fsync: FsyncPolicy,
        shadow: Coordinator,
    ) -> Result<Self, LogError> {
        std::fs::create_dir_all(dir).map_err(io_error(format!("creating {}", dir.display())))?;
        let segments = list_segments(dir, true)?;
        let number = segments.last().map_or(0, |(n, _)| *n);
        let mut log_bytes = 0;
        for (_, path) in &segments {
            log_bytes += std::fs::metadata(path)
                .map_err(io_error(format!("reading {}", path.display())))?
                .len();
        }
        let path = segment_path(dir, number);
        let file = open_append(&path)?;
        let segment_bytes = file
            .metadata()
            .map_err(io_error(format!("reading {}", path.display())))?
            .len();
        sync_dir(dir)?;
        let stats = LogStats::default();
        stats.log_bytes.store(log_bytes, Ordering::Relaxed);
        stats.compacted_bytes.store(log_bytes, Ordering::Relaxed);
        Ok(LogSink {
            inner: Mutex::new(Inner {
                dir: dir.to_owned(),
                fsync,
                file,
                number,
                segment_bytes,
                shadow,
                buffer: Vec::new(),
                failed: false,
            }),
            stats,
        })
    }

    /// Writes `records` and makes them durable (per the fsync policy).
    pub fn append(&self, records: &[Record]) -> Result<(), LogError> {
        let mut inner = self.inner.lock().expect("the log writer panicked");
        let inner = &mut *inner;
        if inner.failed {
            return Err(LogError::Failed);
        }
        let result = self.append_locked(inner, records);
        inner.failed = result.is_err();
        result
    }

    fn append_locked(&self, inner: &mut Inner, records: &[Record]) -> Result<(), LogError> {
        inner.buffer.clear();
        for record in records {
            encode(record, &mut inner.buffer);
            inner.shadow.apply(record);
        }
        let started = Instant::now();
        inner
            .file
            .write_all(&inner.buffer)
            .map_err(io_error("writing the record log"))?;
        metrics::histogram!("assignd_log_write_seconds").record(started.elapsed().as_secs_f64());
        metrics::histogram!("assignd_log_batch_records").record(records.len() as f64);
        metrics::counter!("assignd_log_records_total").increment(records.len() as u64);
        if inner.fsync == FsyncPolicy::Always {
            let started = Instant::now();
            inner
                .file
                .sync_data()
                .map_err(io_error("fsync of the record log"))?;
            let elapsed = started.elapsed();
            metrics::histogram!("assignd_log_fsync_seconds").record(elapsed.as_secs_f64());
            self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
            let micros = elapsed.as_micros() as u64;
            self.stats
                .last_fsync_micros
                .store(micros, Ordering::Relaxed);
            self.stats.fsync_micros.fetch_add(micros, Ordering::Relaxed);
        }
        let written = inner.buffer.len() as u64;
        inner.segment_bytes += written;
        self.stats
            .records
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        self.stats
            .bytes_written
            .fetch_add(written, Ordering::Relaxed);
        let log_bytes = self.stats.log_bytes.fetch_add(written, Ordering::Relaxed) + written;
        let compacted = self.stats.compacted_bytes.load(Ordering::Relaxed);
        if log_bytes > COMPACTION_BYTES_MIN.max(compacted.saturating_mul(COMPACTION_GROWTH_FACTOR))
        {
            self.compact(inner)?;
        } else if inner.segment_bytes >= SEGMENT_BYTES_MAX {
            inner.number += 1;
            inner.file = open_append(&segment_path(&inner.dir, inner.number))?;
            inner.segment_bytes = 0;
            sync_dir(&inner.dir)?;
        }
        Ok(())
    }

    /// Compacts now (tests and benchmarks; appends compact on their own).
    pub fn compact_now(&self) -> Result<(), LogError> {
        let mut inner = self.inner.lock().expect("the log writer panicked");
        if inner.failed {
            return Err(LogError::Failed);
        }
        let result = self.compact(&mut inner);
        inner.failed = result.is_err();
        result
    }

    /// Writes a snapshot of every group as a new segment, then removes
    /// every older segment.
    fn compact(&self, inner: &mut Inner) -> Result<(), LogError> {
        inner.buffer.clear();
        for group in inner.shadow.groups() {
            let snapshot = Record::GroupSnapshot {
                group: group.name.clone(),
                state: Box::new(group.clone()),
            };
            encode(&snapshot, &mut inner.buffer);
        }
        let number = inner.number + 1;
        let temp = temp_path(&inner.dir, number);
        let path = segment_path(&inner.dir, number);
        let mut file =
            File::create(&temp).map_err(io_error(format!("creating {}", temp.display())))?;
        file.write_all(&inner.buffer)
            .and_then(|()| file.sync_all())
            .map_err(io_error(format!("writing {}", temp.display())))?;
        std::fs::rename(&temp, &path).map_err(io_error(format!("renaming {}", temp.display())))?;
        sync_dir(&inner.dir)?;
        // From here on the snapshots are the log's start; the older
        // segments go newest first, each removal made durable before the
        // next. A crash at any point leaves a prefix of the history followed
        // by the snapshots, which replays to the same state (each snapshot
        // replaces its group). Oldest first could leave a later segment
        // whose groups' first records are gone: a log that cannot replay.
        let mut older = list_segments(&inner.dir, true)?;
        older.retain(|(old, _)| *old < number);
        for (_, old_path) in older.iter().rev() {
            std::fs::remove_file(old_path)
                .map_err(io_error(format!("removing {}", old_path.display())))?;
            sync_dir(&inner.dir)?;
        }
        inner.file = open_append(&path)?;
        inner.number = number;
        let size = inner.buffer.len() as u64;
        inner.segment_bytes = size;
        self.stats.log_bytes.store(size, Ordering::Relaxed);
        self.stats.compacted_bytes.store(size, Ordering::Relaxed);
        self.stats.compactions.fetch_add(1, Ordering::Relaxed);
        tracing::info!(bytes = size, "compacted the record log");
        Ok(())
    }
}

impl RecordSink for LogSink {
    fn persist(&self, records: &[Record]) -> anyhow::Result<()> {
        Ok(self.append(records)?)
    }
}

fn open_append(path: &Path) -> Result<File, LogError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io_error(format!("opening {}", path.display())))
}
