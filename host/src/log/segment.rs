//! Segment files in a data dir: their names, their headers, `HEAD` and the
//! lock. A log is the files `DIR/log/NNNNNNNNNNNNNNNNNNNN.seg`, numbered in
//! write order, and `DIR/log/HEAD`; only the last segment is ever appended
//! to. Each segment starts with a header ([`SegmentHeader`]) naming its
//! number and whether it starts the log (a base: a new log, or a
//! compaction's snapshots) or continues the segment numbered one lower;
//! `HEAD` names the last segment created. Together they prove the log is
//! whole (`chain.rs` checks it); reading the frames back, with the
//! recovery rules, is `read.rs`'s, appending `writer.rs`'s.
//!
//! Segments written before headers existed (format versions 1 to 3 without
//! `HEAD`) start with their first frame at byte 0.
//!
//! A serving host holds an advisory lock on `DIR/log/LOCK` ([`lock`]), so a
//! second host (or a repair) cannot write the same log at once.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use crate::durable::{self, Folder};

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

/// Makes renames and removals in `dir` durable.
pub(super) fn sync_dir(dir: &Path) -> Result<(), LogError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_error(format!("syncing {}", dir.display())))
}
