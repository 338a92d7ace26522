//! The proof that a log is whole: from the segments' headers and `HEAD`,
//! which segments make up the log and where the first gap is. It reads no
//! file itself (the caller hands it the headers and `HEAD`) and changes
//! nothing; what a gap means for an open, a check or a repair is the
//! reader's (`read.rs`).
//!
//! A log with headers is whole when, from its last base segment on, the
//! numbers run without a gap, every segment has a header, and they reach
//! at least the segment `HEAD` names. A log of the format before headers
//! (no header, no `HEAD`) has nothing to prove.

use std::path::{Path, PathBuf};

use super::problem::Problem;
use super::segment::{SegmentHeader, SegmentKind, head_path, segment_path};

/// Where the segments stop proving the log whole: the log is usable up to
/// (not including) segment index `from`.
pub(super) struct Gap {
    pub from: usize,
    pub problem: Problem,
}

/// Which segments make up the log, from the headers and `HEAD`: the index
/// of the first one to read, and the first gap, if any.
pub(super) fn chain(
    dir: &Path,
    segments: &[(u64, PathBuf)],
    headers: &[Option<SegmentHeader>],
    head: Option<u64>,
) -> (usize, Option<Gap>) {
    let base = headers
        .iter()
        .rposition(|h| h.is_some_and(|h| h.kind == SegmentKind::Base));
    let Some(start) = base else {
        return (0, without_base(dir, segments, headers, head));
    };
    let gap = first_break(dir, segments, headers, start)
        .or_else(|| unproven_end(dir, segments, start, head));
    (start, gap)
}

/// The gap of a log in which no segment starts the log: none for a log of
/// the format before headers, else the segment before the first with a
/// header, or the segments `HEAD` names beyond those there are.
fn without_base(
    dir: &Path,
    segments: &[(u64, PathBuf)],
    headers: &[Option<SegmentHeader>],
    head: Option<u64>,
) -> Option<Gap> {
    if let Some(first) = headers.iter().position(Option::is_some) {
        let number = segments[first].0;
        return Some(missing(
            dir,
            number.saturating_sub(1),
            0,
            format!(
                "{} continues it and no segment before it starts the log",
                file_name(&segments[first].1)
            ),
        ));
    }
    // A log of the format before headers: nothing to prove.
    let head = head?;
    let number = segments.last().map_or(head, |(n, _)| n + 1).min(head);
    Some(missing(
        dir,
        number,
        0,
        format!("HEAD says the log reaches segment {head}"),
    ))
}

/// The first segment after the base `start` that does not continue the
/// one before it: a number skipped, or a segment without a header.
fn first_break(
    dir: &Path,
    segments: &[(u64, PathBuf)],
    headers: &[Option<SegmentHeader>],
    start: usize,
) -> Option<Gap> {
    for index in start + 1..segments.len() {
        let (previous, _) = segments[index - 1];
        let (number, path) = &segments[index];
        if *number != previous + 1 {
            return Some(missing(
                dir,
                previous + 1,
                index,
                format!("{} continues it", file_name(path)),
            ));
        }
        let problem = match headers[index] {
            None => "the segment has no header, but an earlier one has".to_owned(),
            Some(h) if h.kind == SegmentKind::Base => unreachable!("the last base is at {start}"),
            Some(_) => continue,
        };
        return Some(Gap {
            from: index,
            problem: Problem {
                file: path.clone(),
                offset: 0,
                reason: problem,
                bytes_after: 0,
            },
        });
    }
    None
}

/// The gap at the end of an unbroken chain from the base `start`: segments
/// `HEAD` names that are not there, or no `HEAD` to prove where it ends.
fn unproven_end(
    dir: &Path,
    segments: &[(u64, PathBuf)],
    start: usize,
    head: Option<u64>,
) -> Option<Gap> {
    let last = segments[segments.len() - 1].0;
    match head {
        Some(head) if head > last => Some(missing(
            dir,
            last + 1,
            segments.len(),
            format!("HEAD says the log reaches segment {head}"),
        )),
        Some(_) => None,
        // Without HEAD only a base segment that is the last one can be
        // trusted to end the log: the writer creates it before HEAD (a new
        // log, or a migration from the format before headers).
        None if start == segments.len() - 1 => None,
        None => Some(Gap {
            from: segments.len(),
            problem: Problem {
                file: head_path(dir),
                offset: 0,
                reason: "HEAD is missing: nothing proves where the log ends".to_owned(),
                bytes_after: 0,
            },
        }),
    }
}

/// A gap at segment index `from`: segment `number` is missing, for `why`.
fn missing(dir: &Path, number: u64, from: usize, why: String) -> Gap {
    Gap {
        from,
        problem: Problem {
            file: segment_path(dir, number),
            offset: 0,
            reason: format!("this segment is missing ({why})"),
            bytes_after: 0,
        },
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}
