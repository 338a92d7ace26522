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
//! as a new base segment (temporary file, fsync, rename, fsync of the
//! folder), points `HEAD` at it and deletes every older segment, whose
//! records those snapshots replace. So the log's size tracks the live
//! state, not the history.
//!
//! Maintenance — compaction, starting the next segment, updating `HEAD` —
//! is not needed for the records just written to be durable, and each of
//! its steps leaves a log that reads back whole if it fails. So a failure
//! there (typically: no file descriptor left to create a file) is logged,
//! counted (`assignd_log_maintenance_failures_total`) and retried after a
//! backoff, while appends go on to the current segment; the batch already
//! appended is acknowledged. Only a failed write or fsync of records (or of
//! the folder, which leaves a rename's fate unknown) stops the writer.
//!
//! Opening: a log of the format before segment headers (no `HEAD`) is
//! migrated by a compaction at once; otherwise a new process starts a new
//! segment when the last one holds records, so a segment is only ever
//! appended to by one process and a torn tail is always cut before the
//! segment is sealed.
//!
//! Metrics: each append's write and fsync durations, its size in records,
//! and the records appended (`assignd_log_*`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::frame::encode;
use super::segment::{
    LogError, SEGMENT_BYTES_MAX, SEGMENT_HEADER_BYTES, SegmentHeader, SegmentKind, io_error,
    list_segments, new_file, read_head, read_header, segment_path, temp_path, write_head,
};
use crate::durable::{self, Folder};
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
/// The wait before retrying failed maintenance, doubled after each failure
/// in a row up to [`MAINTENANCE_BACKOFF_MAX`].
pub const MAINTENANCE_BACKOFF_MIN: Duration = Duration::from_secs(1);
pub const MAINTENANCE_BACKOFF_MAX: Duration = Duration::from_secs(60);

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
    /// Compactions, segment starts and `HEAD` updates that failed (and are
    /// retried later).
    pub maintenance_failures: AtomicU64,
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
    /// The log folder, open for its fsyncs: they need no new descriptor.
    dir_handle: File,
    fsync: FsyncPolicy,
    file: File,
    number: u64,
    segment_bytes: u64,
    /// The segment `HEAD` names.
    head: u64,
    /// Every group as the log holds it, for compaction.
    shadow: Coordinator,
    buffer: Vec<u8>,
    /// A write or fsync failed: what the file holds is unknown (a partial
    /// frame, or pages an fsync failed to write and the kernel dropped), so
    /// nothing more is appended.
    failed: bool,
    /// After failed maintenance: not before this, and the wait after the
    /// next failure.
    retry_at: Option<Instant>,
    backoff: Duration,
    compaction_bytes_min: u64,
}

/// The maintenance steps, as `assignd_log_maintenance_failures_total`'s
/// `step` label names them: a compaction, a roll to a new segment, and an
/// update of HEAD.
pub const MAINTENANCE_STEPS: &[&str] = &["compaction", "roll", "head"];

/// How a maintenance step failed.
enum Step {
    /// The log is whole as it is: go on appending, retry later.
    Retry(LogError),
    /// The log's state on disk is unknown: stop appending.
    Fatal(LogError),
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
        let dir_handle = File::open(dir).map_err(io_error(format!("opening {}", dir.display())))?;
        let segments = list_segments(dir, true)?;
        let head = read_head(dir)?;
        let last = match segments.last() {
            Some((number, path)) => Some((*number, path.clone(), read_header(path)?)),
            None => None,
        };
        let fatal = |step: Step| match step {
            Step::Retry(e) | Step::Fatal(e) => e,
        };
        let mut buffer = Vec::new();
        let (file, number, segment_bytes) =
            start_segment(dir, &dir_handle, head, last, &shadow, &mut buffer)?;
        let head = number;
        let base = last_base_up_to(&segments, number)?;
        remove_before(dir, &dir_handle, base).map_err(fatal)?;
        let log_bytes = log_bytes(dir)?;
        let stats = LogStats::default();
        stats.log_bytes.store(log_bytes, Ordering::Relaxed);
        stats.compacted_bytes.store(log_bytes, Ordering::Relaxed);
        Ok(LogSink {
            inner: Mutex::new(Inner {
                dir: dir.to_owned(),
                dir_handle,
                fsync,
                file,
                number,
                segment_bytes,
                head,
                shadow,
                buffer,
                failed: false,
                retry_at: None,
                backoff: MAINTENANCE_BACKOFF_MIN,
                compaction_bytes_min: COMPACTION_BYTES_MIN,
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
        let result = self
            .append_locked(inner, records)
            .and_then(|()| self.maintain(inner));
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
        self.stats.log_bytes.fetch_add(written, Ordering::Relaxed);
        Ok(())
    }

    /// After an append: compacts, starts the next segment or brings `HEAD`
    /// up to date, whichever is due, unless a failure's backoff runs. A
    /// failure that leaves the log whole is logged, counted and retried
    /// later; only one that leaves it unknown is an error.
    fn maintain(&self, inner: &mut Inner) -> Result<(), LogError> {
        if inner.retry_at.is_some_and(|at| Instant::now() < at) {
            return Ok(());
        }
        let log_bytes = self.stats.log_bytes.load(Ordering::Relaxed);
        let compacted = self.stats.compacted_bytes.load(Ordering::Relaxed);
        let (step, result) = if log_bytes
            > inner
                .compaction_bytes_min
                .max(compacted.saturating_mul(COMPACTION_GROWTH_FACTOR))
        {
            (MAINTENANCE_STEPS[0], self.compact(inner))
        } else if inner.segment_bytes >= SEGMENT_BYTES_MAX {
            (MAINTENANCE_STEPS[1], self.roll(inner))
        } else if inner.head != inner.number {
            (
                MAINTENANCE_STEPS[2],
                update_head(inner).map_err(Step::Retry),
            )
        } else {
            return Ok(());
        };
        match result {
            Ok(()) => {
                inner.retry_at = None;
                inner.backoff = MAINTENANCE_BACKOFF_MIN.min(inner.backoff);
                Ok(())
            }
            Err(Step::Retry(e)) => {
                let wait = inner.backoff;
                inner.retry_at = Some(Instant::now() + wait);
                inner.backoff = (wait * 2).min(MAINTENANCE_BACKOFF_MAX).max(wait);
                self.stats
                    .maintenance_failures
                    .fetch_add(1, Ordering::Relaxed);
                metrics::counter!("assignd_log_maintenance_failures_total", "step" => step)
                    .increment(1);
                tracing::warn!(
                    step,
                    error = %e,
                    retry_in_ms = wait.as_millis() as u64,
                    "record log maintenance failed; the log is intact and appends go on, retrying later"
                );
                Ok(())
            }
            Err(Step::Fatal(e)) => Err(e),
        }
    }

    /// Compacts now (tests and benchmarks; appends compact on their own).
    /// A failure that leaves the log whole is an error here, but the log
    /// stays open for appends.
    pub fn compact_now(&self) -> Result<(), LogError> {
        let mut inner = self.inner.lock().expect("the log writer panicked");
        if inner.failed {
            return Err(LogError::Failed);
        }
        match self.compact(&mut inner) {
            Ok(()) => Ok(()),
            Err(Step::Retry(e)) => Err(e),
            Err(Step::Fatal(e)) => {
                inner.failed = true;
                Err(e)
            }
        }
    }

    /// Seals the current segment and continues in the next one.
    fn roll(&self, inner: &mut Inner) -> Result<(), Step> {
        let number = inner.number + 1;
        inner.file = create_segment(
            &inner.dir,
            &inner.dir_handle,
            number,
            SegmentKind::Continuation,
            &[],
        )?;
        inner.number = number;
        inner.segment_bytes = SEGMENT_HEADER_BYTES as u64;
        self.stats
            .log_bytes
            .fetch_add(SEGMENT_HEADER_BYTES as u64, Ordering::Relaxed);
        update_head(inner).map_err(Step::Retry)
    }

    /// Writes a snapshot of every group as a new base segment, then removes
    /// every older segment.
    fn compact(&self, inner: &mut Inner) -> Result<(), Step> {
        inner.buffer.clear();
        encode_snapshots(&inner.shadow, &mut inner.buffer);
        let number = inner.number + 1;
        inner.file = create_segment(
            &inner.dir,
            &inner.dir_handle,
            number,
            SegmentKind::Base,
            &inner.buffer,
        )?;
        // From here on the snapshots are the log's start and appends go
        // after them. What follows may fail and be retried: a stale `HEAD`
        // still names a segment that exists, and older segments left behind
        // are superseded by the base (and removed at the next compaction or
        // start).
        inner.number = number;
        let size = (SEGMENT_HEADER_BYTES + inner.buffer.len()) as u64;
        inner.segment_bytes = size;
        self.stats.log_bytes.store(size, Ordering::Relaxed);
        self.stats.compacted_bytes.store(size, Ordering::Relaxed);
        self.stats.compactions.fetch_add(1, Ordering::Relaxed);
        tracing::info!(bytes = size, "compacted the record log");
        update_head(inner).map_err(Step::Retry)?;
        remove_before(&inner.dir, &inner.dir_handle, number)
    }
}

/// Tests: the writer's maintenance thresholds, and where it appends.
#[cfg(test)]
impl LogSink {
    /// Sets the compaction threshold and the next backoff, and lets a
    /// running backoff end now.
    pub(super) fn set_maintenance_for_tests(&self, compaction_bytes_min: u64, backoff: Duration) {
        let mut inner = self.inner.lock().unwrap();
        inner.compaction_bytes_min = compaction_bytes_min;
        inner.backoff = backoff;
        inner.retry_at = None;
    }

    /// The segment appended to.
    pub(super) fn current_segment(&self) -> u64 {
        self.inner.lock().unwrap().number
    }
}

impl RecordSink for LogSink {
    fn persist(&self, records: &[Record]) -> anyhow::Result<()> {
        Ok(self.append(records)?)
    }
}

fn update_head(inner: &mut Inner) -> Result<(), LogError> {
    write_head(&inner.dir, &inner.dir_handle, inner.number)?;
    inner.head = inner.number;
    Ok(())
}

/// One `GroupSnapshot` per group of `shadow`, framed, into `out`.
fn encode_snapshots(shadow: &Coordinator, out: &mut Vec<u8>) {
    for group in shadow.groups() {
        let snapshot = Record::GroupSnapshot {
            group: group.name.clone(),
            state: Box::new(group.clone()),
        };
        encode(&snapshot, out);
    }
}

/// The segment a process appends to, as it opens the log: a new
/// continuation after a segment with records in a log with headers (a new
/// process, a new segment), that segment if it holds only its header, or
/// else (a new log, or one of the format before headers) a new base
/// segment of `shadow`'s snapshots, framed in `buffer`. `HEAD` names it.
/// Returns the file, its number and its size.
fn start_segment(
    dir: &Path,
    dir_handle: &File,
    head: Option<u64>,
    last: Option<(u64, PathBuf, Option<SegmentHeader>)>,
    shadow: &Coordinator,
    buffer: &mut Vec<u8>,
) -> Result<(File, u64, u64), LogError> {
    let fatal = |step: Step| match step {
        Step::Retry(e) | Step::Fatal(e) => e,
    };
    match (head, last) {
        (Some(head), Some((number, path, Some(_)))) => {
            let bytes = std::fs::metadata(&path)
                .map_err(io_error(format!("reading {}", path.display())))?
                .len();
            let (file, number, bytes) = if bytes > SEGMENT_HEADER_BYTES as u64 {
                // A new process, a new segment.
                let file =
                    create_segment(dir, dir_handle, number + 1, SegmentKind::Continuation, &[])
                        .map_err(fatal)?;
                (file, number + 1, SEGMENT_HEADER_BYTES as u64)
            } else {
                (open_append(&path)?, number, bytes)
            };
            if head != number {
                write_head(dir, dir_handle, number)?;
            }
            Ok((file, number, bytes))
        }
        (_, last) => {
            // A new log, or one of the format before segment headers:
            // start it with a base segment of snapshots.
            let number = last.map_or(0, |(n, _, _)| n + 1);
            encode_snapshots(shadow, buffer);
            let file = create_segment(dir, dir_handle, number, SegmentKind::Base, buffer)
                .map_err(fatal)?;
            write_head(dir, dir_handle, number)?;
            let bytes = (SEGMENT_HEADER_BYTES + buffer.len()) as u64;
            Ok((file, number, bytes))
        }
    }
}

/// The last base segment numbered `number` or lower (`number` itself if
/// none is): segments before it are superseded by its snapshots, what an
/// interrupted compaction (or the migration) left.
fn last_base_up_to(segments: &[(u64, PathBuf)], number: u64) -> Result<u64, LogError> {
    for (n, path) in segments.iter().rev() {
        if *n <= number && read_header(path)?.is_some_and(|h| h.kind == SegmentKind::Base) {
            return Ok(*n);
        }
    }
    Ok(number)
}

/// The bytes of every segment in `dir`.
fn log_bytes(dir: &Path) -> Result<u64, LogError> {
    let mut log_bytes = 0;
    for (_, path) in list_segments(dir, false)? {
        log_bytes += std::fs::metadata(&path)
            .map_err(io_error(format!("reading {}", path.display())))?
            .len();
    }
    Ok(log_bytes)
}

/// Creates segment `number` holding its header and `frames`, whole or not
/// at all ([`durable::write_file`]: a temporary file, fsynced, renamed into
/// place, the folder fsynced), and returns it open for appending after them.
fn create_segment(
    dir: &Path,
    dir_handle: &File,
    number: u64,
    kind: SegmentKind,
    frames: &[u8],
) -> Result<File, Step> {
    let temp = temp_path(dir, number);
    let path = segment_path(dir, number);
    let header = SegmentHeader { kind, number }.encode();
    durable::write_file(
        &temp,
        &path,
        &[&header, frames],
        new_file,
        Folder::Open(dir_handle),
    )
    .map_err(|e| {
        let context = match e.step {
            durable::Step::Create => format!("creating {}", temp.display()),
            durable::Step::Write => format!("writing {}", temp.display()),
            durable::Step::Rename => format!("renaming {}", temp.display()),
            // Whether the rename is durable is unknown: appending to either
            // segment could be lost.
            durable::Step::SyncFolder => {
                return Step::Fatal(io_error(format!("syncing {}", dir.display()))(e.source));
            }
        };
        Step::Retry(io_error(context)(e.source))
    })
}

/// Removes every segment numbered below `number`, newest first, each
/// removal made durable before the next. A crash at any point leaves a
/// prefix of the history before the base `number`, which the base
/// supersedes.
fn remove_before(dir: &Path, dir_handle: &File, number: u64) -> Result<(), Step> {
    let mut older = list_segments(dir, false).map_err(Step::Retry)?;
    older.retain(|(old, _)| *old < number);
    for (_, old_path) in older.iter().rev() {
        std::fs::remove_file(old_path)
            .map_err(|e| Step::Retry(io_error(format!("removing {}", old_path.display()))(e)))?;
        dir_handle
            .sync_all()
            .map_err(|e| Step::Retry(io_error(format!("syncing {}", dir.display()))(e)))?;
    }
    Ok(())
}

fn open_append(path: &Path) -> Result<File, LogError> {
    OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(io_error(format!("opening {}", path.display())))
}
