//! Segment files in a data dir and reading them back. A log is the files
//! `DIR/log/NNNNNNNNNNNNNNNNNNNN.seg`, numbered in write order; only the
//! last is ever appended to. Reading applies the recovery rules:
//!
//! - unreadable bytes at the end of the last segment, with no valid record
//!   after them (a crash in the middle of a write), are cut off, with a
//!   warning;
//! - anything else that does not decode — a bad record followed by valid
//!   ones, a sealed segment ending inside a frame — refuses to open, naming
//!   the file and offset; `assignd log check` shows it and `assignd log
//!   repair` cuts the log there.
//!
//! A serving host holds an advisory lock on `DIR/log/LOCK` ([`lock`]), so a
//! second host (or a repair) cannot write the same log at once.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use super::frame::{Decoded, RecordType, decode};
use crate::protocol::group::Record;

/// A segment is sealed and a new one started past this size.
pub const SEGMENT_BYTES_MAX: u64 = 64 << 20;

const SEGMENT_SUFFIX: &str = ".seg";
const LOCK_FILE: &str = "LOCK";
const TEMP_SUFFIX: &str = ".seg.tmp";

/// Why a log cannot be opened.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error(
        "the record log is corrupt in {file} at byte offset {offset}: {reason}; run `assignd log check --data-dir DIR` to inspect and `assignd log repair --data-dir DIR` to cut the log there (records from that point on are lost)"
    )]
    Corrupt {
        file: PathBuf,
        offset: u64,
        reason: String,
    },
    #[error(
        "the record log in {} is in use by another assignd (it holds {}); stop it first",
        .path.parent().map_or_else(|| path.display().to_string(), |p| p.display().to_string()),
        .path.display()
    )]
    Locked { path: PathBuf },
    #[error("an earlier write to the record log failed; nothing more is appended")]
    Failed,
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

pub(super) fn io_error(context: impl Into<String>) -> impl FnOnce(io::Error) -> LogError {
    let context = context.into();
    move |source| LogError::Io { context, source }
}

/// The folder of the segments inside a data dir.
pub fn log_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("log")
}

/// Takes the advisory lock of the log folder `dir` (creating both if
/// missing), held until the returned file is closed — by the process
/// exiting, too, whatever kills it. A second holder gets
/// [`LogError::Locked`]: two writers would interleave their appends and
/// delete each other's segments.
pub fn lock(dir: &Path) -> Result<File, LogError> {
    fs::create_dir_all(dir).map_err(io_error(format!("creating {}", dir.display())))?;
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(io_error(format!("opening {}", path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(fs::TryLockError::WouldBlock) => Err(LogError::Locked { path }),
        Err(fs::TryLockError::Error(e)) => Err(io_error(format!("locking {}", path.display()))(e)),
    }
}

pub(super) fn segment_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:020}{SEGMENT_SUFFIX}"))
}

pub(super) fn temp_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:020}{TEMP_SUFFIX}"))
}

/// The segments of a log folder, in order. With `remove_temps`, leftover
/// temporary files of an interrupted compaction are removed (only a writer
/// holding the lock may: a check run beside a live host must not delete
/// the file its compaction is writing).
pub(super) fn list_segments(
    dir: &Path,
    remove_temps: bool,
) -> Result<Vec<(u64, PathBuf)>, LogError> {
    let mut segments = Vec::new();
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(segments),
        Err(e) => return Err(io_error(format!("reading {}", dir.display()))(e)),
    };
    for entry in entries {
        let entry = entry.map_err(io_error(format!("reading {}", dir.display())))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(TEMP_SUFFIX) {
            if !remove_temps {
                continue;
            }
            fs::remove_file(entry.path())
                .map_err(io_error(format!("removing {}", entry.path().display())))?;
            continue;
        }
        if let Some(number) = name
            .strip_suffix(SEGMENT_SUFFIX)
            .filter(|n| n.len() == 20)
            .and_then(|n| n.parse::<u64>().ok())
        {
            segments.push((number, entry.path()));
        }
    }
    segments.sort();
    Ok(segments)
}

/// What reading a log found.
#[derive(Debug, Default)]
pub struct Scan {
    pub records: Vec<Record>,
    /// Each segment: number, path, valid bytes, record count.
    pub segments: Vec<SegmentInfo>,
    /// Records per type, for `log check`.
    pub records_by_type: std::collections::BTreeMap<&'static str, u64>,
    /// A torn tail that was (or, for a check, would be) cut off.
    pub torn_tail: Option<Problem>,
    /// Corruption before the tail (only a check or repair gets this far).
    pub corruption: Option<Problem>,
}

#[derive(Debug, Clone)]
pub struct SegmentInfo {
    pub number: u64,
    pub path: PathBuf,
    pub valid_bytes: u64,
    pub records: u64,
}

/// Where a log stops being readable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    pub offset: u64,
    pub reason: String,
    /// Bytes from `offset` to the end of that file.
    pub bytes_after: u64,
}

/// How a scan treats what it finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanMode {
    /// Start-up: cut a torn tail, refuse corruption.
    Open,
    /// Report only; change nothing.
    Check,
    /// Cut the log at the first unreadable record, wherever it is.
    Repair,
}

/// Reads every segment of `dir` under `mode`'s rules.
pub fn scan(dir: &Path, mode: ScanMode) -> Result<Scan, LogError> {
    let segments = list_segments(dir, mode != ScanMode::Check)?;
    let mut scan = Scan::default();
    let last = segments.len().saturating_sub(1);
    for (index, (number, path)) in segments.iter().enumerate() {
        let bytes = fs::read(path).map_err(io_error(format!("reading {}", path.display())))?;
        let mut offset = 0usize;
        let mut records = 0u64;
        let problem = loop {
            if offset == bytes.len() {
                break None;
            }
            match decode(&bytes[offset..]) {
                Decoded::Record {
                    record,
                    frame_bytes,
                } => {
                    *scan
                        .records_by_type
                        .entry(RecordType::of(&record).name())
                        .or_default() += 1;
                    scan.records.push(record);
                    records += 1;
                    offset += frame_bytes;
                }
                Decoded::Incomplete => break Some("the file ends inside a record".to_owned()),
                Decoded::Corrupt { reason, .. } => break Some(reason),
            }
        };
        scan.segments.push(SegmentInfo {
            number: *number,
            path: path.clone(),
            valid_bytes: offset as u64,
            records,
        });
        let Some(reason) = problem else {
            continue;
        };
        let problem = Problem {
            file: path.clone(),
            offset: offset as u64,
            reason,
            bytes_after: (bytes.len() - offset) as u64,
        };
        // A crash mid-write leaves the end of the last segment unreadable
        // and nothing valid after it. A valid record after the bad bytes
        // means they are damage inside the log (a flipped length field can
        // make a frame look as if it ran past the end of the file): cutting
        // there would silently drop acknowledged records.
        let torn_tail = index == last && !valid_record_after(&bytes, offset);
        match (mode, torn_tail) {
            (ScanMode::Check, true) => scan.torn_tail = Some(problem),
            (ScanMode::Check, false) => {
                scan.corruption = Some(problem);
                return Ok(scan);
            }
            (ScanMode::Open, true) | (ScanMode::Repair, true) => {
                tracing::warn!(
                    file = %path.display(),
                    offset,
                    dropped_bytes = problem.bytes_after,
                    reason = %problem.reason,
                    "cutting a torn record off the end of the log (a crash during a write)"
                );
                truncate(path, offset as u64)?;
                scan.torn_tail = Some(problem);
            }
            (ScanMode::Open, false) => {
                return Err(LogError::Corrupt {
                    file: problem.file,
                    offset: problem.offset,
                    reason: problem.reason,
                });
            }
            (ScanMode::Repair, false) => {
                truncate(path, offset as u64)?;
                for (_, later) in &segments[index + 1..] {
                    fs::remove_file(later)
                        .map_err(io_error(format!("removing {}", later.display())))?;
                }
                sync_dir(dir)?;
                scan.corruption = Some(problem);
                return Ok(scan);
            }
        }
    }
    Ok(scan)
}

/// Whether a whole, valid record starts anywhere after `offset`.
fn valid_record_after(bytes: &[u8], offset: usize) -> bool {
    (offset + 1..bytes.len()).any(|at| matches!(decode(&bytes[at..]), Decoded::Record { .. }))
}

fn truncate(path: &Path, len: u64) -> Result<(), LogError> {
    let file = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io_error(format!("opening {}", path.display())))?;
    file.set_len(len)
        .and_then(|()| file.sync_all())
        .map_err(io_error(format!("truncating {}", path.display())))
}

/// Makes renames and removals in `dir` durable.
pub(super) fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error(format!("syncing {}", dir.display())))
}
