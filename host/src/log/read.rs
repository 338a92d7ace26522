//! Reading a log back: every segment the chain proves part of the log
//! (`chain.rs`), frame by frame, each record checked against the state
//! before it (the protocol's `check_replay`) and replayed into a core. It
//! applies the recovery rules:
//!
//! - unreadable bytes at the end of the last segment, with no valid record
//!   after them (a crash in the middle of a write), are cut off, with a
//!   warning;
//! - anything else — a bad record followed by valid ones, a sealed segment
//!   ending inside a frame, a whole frame this version cannot read, a
//!   record that does not fit the state before it, a missing segment —
//!   refuses to open, naming the file and offset; `assignd log check`
//!   shows it and `assignd log repair` cuts the log there.
//!
//! Segments written before headers existed (format versions 1 to 3 without
//! `HEAD`) are read as they are, frames from byte 0, with no continuity to
//! check; the writer migrates such a log at open (see `writer.rs`). The
//! files themselves (names, headers, `HEAD`) are `segment.rs`'s.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use super::chain::{Gap, chain};
use super::frame::{Decoded, RecordType, decode};
pub use super::problem::Problem;
use super::segment::{
    LogError, SEGMENT_HEADER_BYTES, SegmentHeader, SegmentKind, head_path, io_error, list_segments,
    read_head, read_header, sync_dir, write_head,
};
use crate::protocol::core::Coordinator;
use crate::protocol::group::Record;

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

/// The scan: which segments make up the log, then each of them read in
/// order until the first problem, which `mode` settles.
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
    let (headers, first_bad_header) = read_headers(&all)?;
    let head = match settle_head(dir, mode, head)? {
        Head::Read(head) => head,
        Head::Damaged(problem) => {
            // A damaged HEAD is a gap at the end: the log's end is unproven.
            let gap = Gap {
                from: all.len(),
                problem,
            };
            return finish_gap(dir, mode, scan, &all, 0, gap, None);
        }
    };
    scan.head = head;
    let (start, gap) = chain(dir, &all, &headers, head);
    let gap = earliest_gap(gap, first_bad_header, start);
    scan.superseded = all[..start].iter().map(|(_, p)| p.clone()).collect();
    let end = gap.as_ref().map_or(all.len(), |g| g.from);
    for index in start..end {
        let (number, path) = &all[index];
        let read = read_segment(&mut scan, path, headers[index].is_some(), keep_records)?;
        scan.segments.push(SegmentInfo {
            number: *number,
            path: path.clone(),
            kind: headers[index].map(|h| h.kind),
            valid_bytes: read.valid_bytes as u64,
            records: read.records,
        });
        let is_last = index == all.len().saturating_sub(1);
        match settle_problem(mode, &mut scan, path, read, is_last)? {
            Next::Read => {}
            Next::Done => return Ok(scan),
            Next::Cut(problem) => {
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

/// A damaged segment header: the segment's index and what is wrong.
type BadHeader = (usize, Problem);

/// Each segment's header (`None` for a segment without one, or with a
/// damaged one), and the first damaged one.
fn read_headers(
    all: &[(u64, PathBuf)],
) -> Result<(Vec<Option<SegmentHeader>>, Option<BadHeader>), LogError> {
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
    Ok((headers, first_bad_header))
}

/// What `HEAD` says, as a scan in some mode takes it.
enum Head {
    /// The segment it names (none without `HEAD`).
    Read(Option<u64>),
    /// It is damaged: nothing proves where the log ends.
    Damaged(Problem),
}

/// What reading `HEAD` gave, settled by `mode`: a repair drops a damaged
/// `HEAD`, every other mode sees the log's end unproven.
fn settle_head(
    dir: &Path,
    mode: ScanMode,
    head: Result<Option<u64>, LogError>,
) -> Result<Head, LogError> {
    match head {
        Ok(head) => Ok(Head::Read(head)),
        Err(LogError::Corrupt { .. }) if mode == ScanMode::Repair => {
            // A repair cannot know where the log ended: it drops the damaged
            // HEAD, and the scan makes the last segment kept the end.
            tracing::warn!("removing a damaged HEAD");
            remove_if_there(&head_path(dir))?;
            Ok(Head::Read(None))
        }
        Err(LogError::Corrupt {
            file,
            offset,
            reason,
        }) => Ok(Head::Damaged(Problem {
            file,
            offset,
            reason,
            bytes_after: 0,
        })),
        Err(e) => Err(e),
    }
}

/// The chain's gap, or the first damaged header if that comes no later
/// and within the log (from the base `start` on).
fn earliest_gap(
    gap: Option<Gap>,
    first_bad_header: Option<BadHeader>,
    start: usize,
) -> Option<Gap> {
    if let Some((index, problem)) = first_bad_header
        && gap.as_ref().is_none_or(|g| index <= g.from)
        && index >= start
    {
        return Some(Gap {
            from: index,
            problem,
        });
    }
    gap
}

/// What reading one segment found.
struct SegmentRead {
    bytes: Vec<u8>,
    /// Bytes up to the end of the last record read.
    valid_bytes: usize,
    records: u64,
    /// Why reading stopped before the end, and whether a torn write can
    /// explain it.
    problem: Option<(String, bool)>,
}

/// Reads the segment at `path` frame by frame, from after its header (if
/// `has_header`), replaying each record into `scan` until the end or the
/// first problem.
fn read_segment(
    scan: &mut Scan,
    path: &Path,
    has_header: bool,
    keep_records: bool,
) -> Result<SegmentRead, LogError> {
    let bytes = fs::read(path).map_err(io_error(format!("reading {}", path.display())))?;
    let mut offset = if has_header { SEGMENT_HEADER_BYTES } else { 0 };
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
                if let Err(reason) = scan.replay(record, keep_records) {
                    break Some((
                        format!("the record does not fit the log before it: {reason}"),
                        false,
                    ));
                }
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
    Ok(SegmentRead {
        bytes,
        valid_bytes: offset,
        records,
        problem,
    })
}

impl Scan {
    /// Replays one record read, if it fits the state before it (else why
    /// not), keeping a copy if `keep_records`.
    fn replay(&mut self, record: Record, keep_records: bool) -> Result<(), String> {
        self.core.check_replay(&record)?;
        *self
            .records_by_type
            .entry(RecordType::of(&record).name())
            .or_default() += 1;
        if keep_records {
            self.core.apply(&record);
            self.records.push(record);
        } else {
            self.core.apply_owned(record);
        }
        self.records_read += 1;
        Ok(())
    }
}

/// What the scan does after a segment.
enum Next {
    /// Reads the next segment.
    Read,
    /// Stops, with what it found (a check that found corruption).
    Done,
    /// Ends the log here (a repair), after the segment just read, whose
    /// problem this is.
    Cut(Problem),
}

/// Settles the problem (if any) that ended reading the segment at `path`,
/// the log's last if `is_last`, under `mode`: a torn tail is cut (or, by a
/// check, reported); anything else refuses to open, stops a check, or
/// ends a repair's log there.
fn settle_problem(
    mode: ScanMode,
    scan: &mut Scan,
    path: &Path,
    read: SegmentRead,
    is_last: bool,
) -> Result<Next, LogError> {
    let Some((reason, tearable)) = read.problem else {
        return Ok(Next::Read);
    };
    let offset = read.valid_bytes;
    let problem = Problem {
        file: path.to_owned(),
        offset: offset as u64,
        reason,
        bytes_after: (read.bytes.len() - offset) as u64,
    };
    // A crash mid-write leaves the end of the last segment unreadable
    // and nothing valid after it. A valid record after the bad bytes
    // means they are damage inside the log (a flipped length field can
    // make a frame look as if it ran past the end of the file): cutting
    // there would silently drop acknowledged records. So would cutting a
    // whole frame whose CRC matches.
    let torn_tail = tearable && is_last && !valid_record_after(&read.bytes, offset);
    match (mode, torn_tail) {
        (ScanMode::Check, true) => scan.torn_tail = Some(problem),
        (ScanMode::Check, false) => {
            scan.corruption = Some(problem);
            return Ok(Next::Done);
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
            return Ok(Next::Cut(problem));
        }
    }
    Ok(Next::Read)
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
            repair_gap(dir, &mut scan, all, start, gap.from, kept)?;
            scan.corruption = Some(gap.problem);
            Ok(scan)
        }
    }
}

/// A repair's end of the log before segment index `from`: every segment
/// from there removed (last first), and `HEAD` naming the last one kept,
/// `kept`; with nothing usable left, an empty log, as if new.
fn repair_gap(
    dir: &Path,
    scan: &mut Scan,
    all: &[(u64, PathBuf)],
    start: usize,
    from: usize,
    kept: Option<SegmentHeader>,
) -> Result<(), LogError> {
    let dir_handle = File::open(dir).map_err(io_error(format!("opening {}", dir.display())))?;
    let from = from.max(start);
    for (_, later) in all[from..].iter().rev() {
        fs::remove_file(later).map_err(io_error(format!("removing {}", later.display())))?;
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
    Ok(())
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
