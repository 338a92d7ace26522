//! Segment files in a data dir and reading them back. A log is the files
//! `DIR/log/NNNNNNNNNNNNNNNNNNNN.seg`, numbered in write order, and
//! `DIR/log/HEAD`; only the last segment is ever appended to. Each segment
//! starts with a header ([`SegmentHeader`]) naming its number and whether
//! it starts the log (a base: a new log, or a compaction's snapshots) or
//! continues the segment numbered one lower; `HEAD` names the last segment
//! created. Together they prove the log is whole: from the last base on the
//! numbers run without a gap up to at least `HEAD`. Reading applies the
//! recovery rules:
//!
//! - unreadable bytes at the end of the last segment, with no valid record
//!   after them (a crash in the middle of a write), are cut off, with a
//!   warning;
//! - anything else — a bad record followed by valid ones, a sealed segment
//!   ending inside a frame, a whole frame this version cannot read, a
//!   record that does not fit the state before it (checked by the
//!   protocol's `check_replay`), a missing segment — refuses to open,
//!   naming the file and offset; `assignd log check` shows it and `assignd
//!   log repair` cuts the log there.
//!
//! Segments written before headers existed (format versions 1 to 3 without
//! `HEAD`) are read as they are, frames from byte 0, with no continuity to
//! check; the writer migrates such a log at open (see `writer.rs`).
//!
//! A serving host holds an advisory lock on `DIR/log/LOCK` ([`lock`]), so a
//! second host (or a repair) cannot write the same log at once.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use super::frame::{Decoded, RecordType, decode};
use crate::durable::{self, Folder};
use crate::protocol::core::Coordinator;
use crate::protocol::group::Record;
/// A segment is sealed and a new one started past this size.
pub const SEGMENT_BYTES_MAX: u64 = 64 << 20;

const SEGMENT_SUFFIX: &str = ".seg";
const LOCK_FILE: &str = "LOCK";
const TEMP_SUFFIX: &str = ".seg.tmp";
const HEAD_FILE: &str = "HEAD";
const HEAD_TEMP_FILE: &str = "HEAD.tmp";

/// The first bytes of every segment with a header. Read as a frame's
/// length (`u32` little-endian) they are 0x69737361, past the largest
/// frame, so no headerless segment of an older version starts with them.
pub const SEGMENT_MAGIC: &[u8; 8] = b"assignd\0";
/// The version of the segment header's layout.
pub const SEGMENT_HEADER_VERSION: u8 = 1;
/// Bytes of a segment header; the first frame starts right after it.
pub const SEGMENT_HEADER_BYTES: usize = 28;
/// The first bytes of `HEAD`.
pub const HEAD_MAGIC: &[u8; 8] = b"asgdhead";
/// Bytes of `HEAD`.
pub const HEAD_BYTES: usize = 20;

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
    let file = file_options()
        .truncate(false)
        .open(&path)
        .map_err(io_error(format!("opening {}", path.display())))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(fs::TryLockError::WouldBlock) => Err(LogError::Locked { path }),
        Err(fs::TryLockError::Error(e)) => Err(io_error(format!("locking {}", path.display()))(e)),
    }
}

/// How the log creates (or opens for writing) every file it makes: its
/// segments, `HEAD`, `LOCK`. The one place to set their permissions.
pub(super) fn file_options() -> OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    let mut options = OpenOptions::new();
    // The log holds every group's state: readable by its owner only.
    options.write(true).create(true).mode(0o600);
    options
}

#[cfg(test)]
thread_local! {
    /// Tests: how many of this thread's next [`new_file`] calls fail as if
    /// the process were out of file descriptors.
    pub(super) static FAIL_CREATES: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
    /// Tests: let this many [`new_file`] calls through, then fail them all.
    pub(super) static FAIL_AFTER: std::cell::Cell<Option<u32>> = const { std::cell::Cell::new(None) };
}

/// Creates (or empties) a file the log writes whole: a segment's temporary
/// file, `HEAD.tmp`.
pub(super) fn new_file(path: &Path) -> io::Result<File> {
    #[cfg(test)]
    if FAIL_CREATES.with(|n| n.replace(n.get().saturating_sub(1)) > 0)
        || FAIL_AFTER.with(|n| match n.get() {
            Some(0) => true,
            Some(ok) => {
                n.set(Some(ok - 1));
                false
            }
            None => false,
        })
    {
        return Err(io::Error::from_raw_os_error(24)); // EMFILE
    }
    file_options().truncate(true).open(path)
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

/// Whether a segment starts the log or continues the one before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentKind {
    /// The log starts here: the first segment of a new log, or a
    /// compaction's snapshots. Every lower-numbered segment is superseded.
    Base = 0,
    /// Continues the segment numbered one lower.
    Continuation = 1,
}

/// What a segment's first [`SEGMENT_HEADER_BYTES`] say (docs/log-format.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentHeader {
    pub kind: SegmentKind,
    pub number: u64,
}

impl SegmentHeader {
    pub fn encode(&self) -> [u8; SEGMENT_HEADER_BYTES] {
        let mut out = [0u8; SEGMENT_HEADER_BYTES];
        out[0..8].copy_from_slice(SEGMENT_MAGIC);
        out[8] = SEGMENT_HEADER_VERSION;
        out[9] = self.kind as u8;
        out[16..24].copy_from_slice(&self.number.to_le_bytes());
        let crc = crc32c::crc32c(&out[0..24]);
        out[24..28].copy_from_slice(&crc.to_le_bytes());
        out
    }

    /// The header at the start of a segment's bytes: `Ok(None)` if it has
    /// none (a segment of the format before headers), `Err` if it is
    /// damaged.
    pub fn decode(bytes: &[u8]) -> Result<Option<SegmentHeader>, String> {
        if !bytes.starts_with(SEGMENT_MAGIC) {
            return Ok(None);
        }
        if bytes.len() < SEGMENT_HEADER_BYTES {
            return Err(format!(
                "the segment header is {} bytes, not {SEGMENT_HEADER_BYTES}",
                bytes.len()
            ));
        }
        let stored = u32::from_le_bytes(bytes[24..28].try_into().expect("4 bytes"));
        let actual = crc32c::crc32c(&bytes[0..24]);
        if stored != actual {
            return Err(format!(
                "segment header CRC32C mismatch: stored {stored:08x}, computed {actual:08x}"
            ));
        }
        if bytes[8] != SEGMENT_HEADER_VERSION {
            return Err(format!(
                "segment header version {} is not {SEGMENT_HEADER_VERSION} (written by a newer assignd?)",
                bytes[8]
            ));
        }
        let kind = match bytes[9] {
            0 => SegmentKind::Base,
            1 => SegmentKind::Continuation,
            other => return Err(format!("unknown segment kind {other}")),
        };
        let number = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
        Ok(Some(SegmentHeader { kind, number }))
    }
}

/// Reads the header of the segment at `path` (see [`SegmentHeader::decode`]).
pub(super) fn read_header(path: &Path) -> Result<Option<SegmentHeader>, LogError> {
    use std::io::Read;
    let mut bytes = Vec::with_capacity(SEGMENT_HEADER_BYTES);
    File::open(path)
        .and_then(|f| f.take(SEGMENT_HEADER_BYTES as u64).read_to_end(&mut bytes))
        .map_err(io_error(format!("reading {}", path.display())))?;
    SegmentHeader::decode(&bytes).map_err(|reason| LogError::Corrupt {
        file: path.to_owned(),
        offset: 0,
        reason,
    })
}

pub(super) fn head_path(dir: &Path) -> PathBuf {
    dir.join(HEAD_FILE)
}

/// The segment number `DIR/log/HEAD` names, if there is one.
pub(super) fn read_head(dir: &Path) -> Result<Option<u64>, LogError> {
    let path = head_path(dir);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(format!("reading {}", path.display()))(e)),
    };
    let corrupt = |reason: String| LogError::Corrupt {
        file: path.clone(),
        offset: 0,
        reason,
    };
    if bytes.len() != HEAD_BYTES || !bytes.starts_with(HEAD_MAGIC) {
        return Err(corrupt(format!(
            "not a HEAD file ({} bytes, expected {HEAD_BYTES} starting with \"asgdhead\")",
            bytes.len()
        )));
    }
    let stored = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes"));
    let actual = crc32c::crc32c(&bytes[0..16]);
    if stored != actual {
        return Err(corrupt(format!(
            "CRC32C mismatch: stored {stored:08x}, computed {actual:08x}"
        )));
    }
    Ok(Some(u64::from_le_bytes(
        bytes[8..16].try_into().expect("8 bytes"),
    )))
}

/// Makes `HEAD` name segment `number`, durably ([`durable::write_file`]):
/// `HEAD.tmp` written and fsynced, renamed over `HEAD`, the folder fsynced
/// (`dir_handle`).
pub(super) fn write_head(dir: &Path, dir_handle: &File, number: u64) -> Result<(), LogError> {
    let mut bytes = [0u8; HEAD_BYTES];
    bytes[0..8].copy_from_slice(HEAD_MAGIC);
    bytes[8..16].copy_from_slice(&number.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[0..16]);
    bytes[16..20].copy_from_slice(&crc.to_le_bytes());
    let path = head_path(dir);
    durable::write_file(
        &dir.join(HEAD_TEMP_FILE),
        &path,
        &[&bytes],
        new_file,
        Folder::Open(dir_handle),
    )
    .map(drop)
    .map_err(|e| match e.step {
        durable::Step::SyncFolder => io_error(format!("syncing {}", dir.display()))(e.source),
        _ => io_error(format!("writing {}", path.display()))(e.source),
    })
}

/// What reading a log found.
#[derive(Debug, Default)]
pub struct Scan {
    /// The records read, in order (none from [`recover`]).
    pub records: Vec<Record>,
    pub records_read: u64,
    /// The state the records replay to (each checked first).
    pub core: Coordinator,
    /// Each segment: number, path, valid bytes, record count.
    pub segments: Vec<SegmentInfo>,
    /// Segments before the last base segment: an interrupted compaction's
    /// leftovers, superseded by its snapshots and not read.
    pub superseded: Vec<PathBuf>,
    /// The segment `HEAD` names (none in a log of the format before
    /// headers).
    pub head: Option<u64>,
    /// Records per type, for `log check`.
    pub records_by_type: std::collections::BTreeMap<&'static str, u64>,
    /// A torn tail that was (or, for a check, would be) cut off.
    pub torn_tail: Option<Problem>,
    /// Where the log stops being usable before its tail (only a check or
    /// repair gets this far).
    pub corruption: Option<Problem>,
    /// Segments a repair removed.
    pub removed: Vec<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct SegmentInfo {
    pub number: u64,
    pub path: PathBuf,
    /// `None`: a segment of the format before headers.
    pub kind: Option<SegmentKind>,
    pub valid_bytes: u64,
    pub records: u64,
}

/// Where a log stops being readable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: PathBuf,
    pub offset: u64,
    pub reason: String,
    /// Bytes from `offset` to the end of that file (0 for a missing file).
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

/// Reads every segment of `dir` under `mode`'s rules, replaying the records
/// into a fresh core.
pub fn scan(dir: &Path, mode: ScanMode) -> Result<Scan, LogError> {
    scan_into(dir, mode, Coordinator::new(0))
}

/// Where the segments stop proving the log whole: the log is usable up to
/// (not including) segment index `from`.
struct Gap {
    from: usize,
    problem: Problem,
}

/// Which segments make up the log, from the headers and `HEAD`: the index
/// of the first one to read, and the first gap, if any.
fn chain(
    dir: &Path,
    segments: &[(u64, PathBuf)],
    headers: &[Option<SegmentHeader>],
    head: Option<u64>,
) -> (usize, Option<Gap>) {
    let missing = |number: u64, from: usize, why: String| Gap {
        from,
        problem: Problem {
            file: segment_path(dir, number),
            offset: 0,
            reason: format!("this segment is missing ({why})"),
            bytes_after: 0,
        },
    };
    let name = |index: usize| {
        segments[index]
            .1
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    };
    let base = headers
        .iter()
        .rposition(|h| h.is_some_and(|h| h.kind == SegmentKind::Base));
    let Some(start) = base else {
        if let Some(first) = headers.iter().position(Option::is_some) {
            let number = segments[first].0;
            return (
                0,
                Some(missing(
                    number.saturating_sub(1),
                    0,
                    format!(
                        "{} continues it and no segment before it starts the log",
                        name(first)
                    ),
                )),
            );
        }
        return match head {
            // A log of the format before headers: nothing to prove.
            None => (0, None),
            Some(head) => {
                let number = segments.last().map_or(head, |(n, _)| n + 1).min(head);
                (
                    0,
                    Some(missing(
                        number,
                        0,
                        format!("HEAD says the log reaches segment {head}"),
                    )),
                )
            }
        };
    };
    for index in start + 1..segments.len() {
        let (previous, _) = segments[index - 1];
        let (number, path) = &segments[index];
        if *number != previous + 1 {
            return (
                start,
                Some(missing(
                    previous + 1,
                    index,
                    format!("{} continues it", name(index)),
                )),
            );
        }
        let problem = match headers[index] {
            None => "the segment has no header, but an earlier one has".to_owned(),
            Some(h) if h.kind == SegmentKind::Base => unreachable!("the last base is at {start}"),
            Some(_) => continue,
        };
        return (
            start,
            Some(Gap {
                from: index,
                problem: Problem {
                    file: path.clone(),
                    offset: 0,
                    reason: problem,
                    bytes_after: 0,
                },
            }),
        );
    }
    let last = segments[segments.len() - 1].0;
    match head {
        Some(head) if head > last => (
            start,
            Some(missing(
                last + 1,
                segments.len(),
                format!("HEAD says the log reaches segment {head}"),
            )),
        ),
        Some(_) => (start, None),
        // Without HEAD only a base segment that is the last one can be
        // trusted to end the log: the writer creates it before HEAD (a new
        // log, or a migration from the format before headers).
        None if start == segments.len() - 1 => (start, None),
        None => (
            start,
            Some(Gap {
                from: segments.len(),
                problem: Problem {
                    file: head_path(dir),
                    offset: 0,
                    reason: "HEAD is missing: nothing proves where the log ends".to_owned(),
                    bytes_after: 0,
                },
            }),
        ),
    }
}

/// [`scan`], replaying into `core` (given the host's seed).
pub fn scan_into(dir: &Path, mode: ScanMode, core: Coordinator) -> Result<Scan, LogError> {
    scan_with(dir, mode, core, true)
}

/// Start-up: [`scan_into`] in [`ScanMode::Open`] that keeps no copy of the
/// records (`Scan::records` stays empty): each is moved into `core` as it
/// is read, a snapshot's state included.
pub fn recover(dir: &Path, core: Coordinator) -> Result<Scan, LogError> {
    scan_with(dir, ScanMode::Open, core, false)
}

fn scan_with(
    dir: &Path,
    mode: ScanMode,
    core: Coordinator,
    keep_records: bool,
) -> Result<Scan, LogError> {
    let all = list_segments(dir, mode != ScanMode::Check)?;
    let mut scan = Scan {
        core,
        ..Scan::default()
    };
    let head = read_head(dir);
    let mut headers = Vec::with_capacity(all.len());
    let mut first_bad_header = None;
    for (index, (number, path)) in all.iter().enumerate() {
        let header = match read_header(path) {
            Ok(Some(h)) if h.number != *number => Err(LogError::Corrupt {
                file: path.clone(),
                offset: 0,
                reason: format!("the segment header says segment {}", h.number),
            }),
            other => other,
        };
        match header {
            Ok(h) => headers.push(h),
            Err(LogError::Corrupt {
                file,
                offset,
                reason,
            }) => {
                first_bad_header.get_or_insert((
                    index,
                    Problem {
                        file,
                        offset,
                        reason,
                        bytes_after: 0,
                    },
                ));
                headers.push(None);
            }
            Err(e) => return Err(e),
        }
    }
    let head = match head {
        Ok(head) => head,
        Err(LogError::Corrupt { .. }) if mode == ScanMode::Repair => {
            // A repair cannot know where the log ended: it drops the damaged
            // HEAD, and the scan below makes the last segment kept the end.
            tracing::warn!("removing a damaged HEAD");
            remove_if_there(&head_path(dir))?;
            None
        }
        Err(LogError::Corrupt {
            file,
            offset,
            reason,
        }) => {
            // A damaged HEAD is a gap at the end: the log's end is unproven.
            return finish_gap(
                dir,
                mode,
                scan,
                &all,
                0,
                Gap {
                    from: all.len(),
                    problem: Problem {
                        file,
                        offset,
                        reason,
                        bytes_after: 0,
                    },
                },
                None,
            );
        }
        Err(e) => return Err(e),
    };
    scan.head = head;
    let (start, mut gap) = chain(dir, &all, &headers, head);
    if let Some((index, problem)) = first_bad_header
        && gap.as_ref().is_none_or(|g| index <= g.from)
        && index >= start
    {
        gap = Some(Gap {
            from: index,
            problem,
        });
    }
    scan.superseded = all[..start].iter().map(|(_, p)| p.clone()).collect();
    let end = gap.as_ref().map_or(all.len(), |g| g.from);
    let segments = &all[start..end];
    let last = all.len().saturating_sub(1);
    for (index, (number, path)) in segments.iter().enumerate() {
        let index = start + index;
        let bytes = fs::read(path).map_err(io_error(format!("reading {}", path.display())))?;
        let header_bytes = if headers[index].is_some() {
            SEGMENT_HEADER_BYTES
        } else {
            0
        };
        let mut offset = header_bytes;
        let mut records = 0u64;
        // (the reason, whether a torn write can explain it)
        let problem = loop {
            if offset == bytes.len() {
                break None;
            }
            match decode(&bytes[offset..]) {
                Decoded::Record {
                    record,
                    frame_bytes,
                } => {
                    if let Err(reason) = scan.core.check_replay(&record) {
                        break Some((
                            format!("the record does not fit the log before it: {reason}"),
                            false,
                        ));
                    }
                    *scan
                        .records_by_type
                        .entry(RecordType::of(&record).name())
                        .or_default() += 1;
                    if keep_records {
                        scan.core.apply(&record);
                        scan.records.push(record);
                    } else {
                        scan.core.apply_owned(record);
                    }
                    scan.records_read += 1;
                    records += 1;
                    offset += frame_bytes;
                }
                Decoded::Incomplete => {
                    break Some(("the file ends inside a record".to_owned(), true));
                }
                Decoded::Corrupt { reason, .. } => break Some((reason, true)),
                Decoded::Unreadable { reason, .. } => break Some((reason, false)),
            }
        };
        scan.segments.push(SegmentInfo {
            number: *number,
            path: path.clone(),
            kind: headers[index].map(|h| h.kind),
            valid_bytes: offset as u64,
            records,
        });
        let Some((reason, tearable)) = problem else {
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
        // there would silently drop acknowledged records. So would cutting a
        // whole frame whose CRC matches.
        let torn_tail = tearable && index == last && !valid_record_after(&bytes, offset);
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
                let gap = Gap {
                    from: index + 1,
                    problem,
                };
                return finish_gap(dir, mode, scan, &all, start, gap, headers[index]);
            }
        }
    }
    match gap {
        Some(gap) => {
            let kept = gap
                .from
                .checked_sub(1)
                .filter(|&k| k >= start)
                .and_then(|k| headers[k]);
            finish_gap(dir, mode, scan, &all, start, gap, kept)
        }
        None => Ok(scan),
    }
}

/// The log is usable only up to segment index `gap.from`: refuse (open),
/// report (check), or remove every segment from there and make `HEAD` name
/// the last one kept, `kept` (repair).
fn finish_gap(
    dir: &Path,
    mode: ScanMode,
    mut scan: Scan,
    all: &[(u64, PathBuf)],
    start: usize,
    gap: Gap,
    kept: Option<SegmentHeader>,
) -> Result<Scan, LogError> {
    match mode {
        ScanMode::Open => Err(LogError::Corrupt {
            file: gap.problem.file,
            offset: gap.problem.offset,
            reason: gap.problem.reason,
        }),
        ScanMode::Check => {
            scan.corruption = Some(gap.problem);
            Ok(scan)
        }
        ScanMode::Repair => {
            let dir_handle =
                File::open(dir).map_err(io_error(format!("opening {}", dir.display())))?;
            let from = gap.from.max(start);
            for (_, later) in all[from..].iter().rev() {
                fs::remove_file(later)
                    .map_err(io_error(format!("removing {}", later.display())))?;
                sync_dir(dir)?;
                scan.removed.push(later.clone());
            }
            scan.removed.reverse();
            match kept {
                // A log with headers ends at the last segment kept.
                Some(header) => write_head(dir, &dir_handle, header.number)?,
                None if from == start && scan.head.is_some() => {
                    // Nothing usable is left: an empty log, as if new.
                    for (_, older) in &all[..start] {
                        fs::remove_file(older)
                            .map_err(io_error(format!("removing {}", older.display())))?;
                        scan.removed.push(older.clone());
                    }
                    remove_if_there(&head_path(dir))?;
                    sync_dir(dir)?;
                }
                None => {}
            }
            scan.corruption = Some(gap.problem);
            Ok(scan)
        }
    }
}

fn remove_if_there(path: &Path) -> Result<(), LogError> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            Err(io_error(format!("removing {}", path.display()))(e))
        }
        _ => Ok(()),
    }
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
