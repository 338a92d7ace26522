//! `assignd log check|repair --data-dir DIR [--shard N]`: the operator's
//! tools for the record logs, one per shard (a data dir not yet migrated
//! to shards has one log, checked as it is). `check` reads every segment
//! and replays it as `serve` would (each record checked against the state
//! before it), and reports what it holds and where it stops being usable,
//! changing nothing; `repair` cuts the log there so the host can start
//! (the records from there on are lost, and it says how many bytes and
//! which segments). Every shard's lines start `shard N:`.

use std::path::{Path, PathBuf};

use clap::{Args, Subcommand};

use super::{EXIT_BAD_INPUT, Failure};
use crate::log::shards::recorded_shard_count;
use crate::log::{Scan, ScanMode, SegmentKind, lock, log_dir, scan, shard_log_dir};

#[derive(Debug, Subcommand)]
pub enum LogCommand {
    /// Read and replay the whole log as `serve` would, and report its
    /// segments, records by type, and any torn tail, corruption, record that
    /// does not fit or missing segment; change nothing. Exits 1 on any but a
    /// torn tail.
    Check(LogArgs),
    /// Cut the log where it stops being usable (a torn tail, corruption, a
    /// record that does not fit, a missing segment), dropping everything
    /// after it and saying what, so the host can start.
    Repair(LogArgs),
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// The data directory given to `assignd serve`.
    #[arg(long, env = "ASSIGND_DATA_DIR", value_name = "DIR")]
    data_dir: PathBuf,
    /// Only this shard's log (default: every shard's).
    #[arg(long, value_name = "N")]
    shard: Option<u32>,
}

fn bad_input(message: String) -> Failure {
    Failure {
        message,
        exit_code: EXIT_BAD_INPUT,
    }
}

pub fn log(command: LogCommand) -> Result<(), Failure> {
    let (args, mode) = match command {
        LogCommand::Check(args) => (args, ScanMode::Check),
        LogCommand::Repair(args) => (args, ScanMode::Repair),
    };
    let count = recorded_shard_count(&args.data_dir).map_err(|e| bad_input(e.to_string()))?;
    // (prefix, folder) of each log to read.
    let logs: Vec<(String, PathBuf)> = match (count, args.shard) {
        (Some(count), Some(shard)) if shard >= count => {
            return Err(bad_input(format!(
                "there is no shard {shard}: {} has shards 0 to {}",
                args.data_dir.display(),
                count - 1
            )));
        }
        (Some(_), Some(shard)) => vec![(
            format!("shard {shard}: "),
            shard_log_dir(&args.data_dir, shard),
        )],
        (Some(count), None) => (0..count)
            .map(|shard| {
                (
                    format!("shard {shard}: "),
                    shard_log_dir(&args.data_dir, shard),
                )
            })
            .collect(),
        (None, Some(_)) => {
            return Err(bad_input(format!(
                "{} has no shards (a data dir of one log, from before shards): leave out --shard",
                args.data_dir.display()
            )));
        }
        (None, None) => {
            let dir = log_dir(&args.data_dir);
            if !dir.is_dir() {
                return Err(bad_input(format!(
                    "no record log in {} (expected {} or {})",
                    args.data_dir.display(),
                    crate::log::shards_dir(&args.data_dir).display(),
                    dir.display()
                )));
            }
            vec![(String::new(), dir)]
        }
    };
    // A repair writes: not while a host serves this data dir. A check only
    // reads, and may run beside a live host.
    let _lock = match mode {
        ScanMode::Check => None,
        _ => Some(lock(&args.data_dir).map_err(|e| bad_input(e.to_string()))?),
    };
    let mut failures = Vec::new();
    for (prefix, dir) in &logs {
        if let Err(failure) = check_one(dir, mode, prefix) {
            failures.push(format!("{prefix}{}", failure.message));
        }
    }
    if failures.is_empty() {
        outln!("ok");
        Ok(())
    } else {
        Err(bad_input(failures.join("; ")))
    }
}

/// Checks or repairs one log folder, each line of its report starting
/// with `prefix`.
fn check_one(dir: &Path, mode: ScanMode, prefix: &str) -> Result<(), Failure> {
    let scan = scan(dir, mode).map_err(|e| Failure {
        message: e.to_string(),
        exit_code: EXIT_BAD_INPUT,
    })?;
    print_scan(&scan, mode, prefix);
    outcome(&scan, mode, prefix)
}

/// What the scan found: each segment, the head, the records by type and
/// any torn tail, each line starting with `prefix`.
fn print_scan(scan: &Scan, mode: ScanMode, prefix: &str) {
    for segment in &scan.superseded {
        outln!(
            "{prefix}segment {} superseded by a later base segment (not read)",
            segment.display()
        );
    }
    for segment in &scan.segments {
        let kind = match segment.kind {
            Some(SegmentKind::Base) => "base",
            Some(SegmentKind::Continuation) => "continuation",
            None => "no-header",
        };
        outln!(
            "{prefix}segment {} kind={kind} records={} valid_bytes={}",
            segment.path.display(),
            segment.records,
            segment.valid_bytes
        );
    }
    if let Some(head) = scan.head {
        outln!("{prefix}head={head}");
    }
    let by_type: Vec<String> = scan
        .records_by_type
        .iter()
        .map(|(kind, n)| format!("{kind}={n}"))
        .collect();
    outln!(
        "{prefix}records={} {}",
        scan.records_read,
        by_type.join(" ")
    );
    let verb = if mode == ScanMode::Check {
        "would cut"
    } else {
        "cut"
    };
    if let Some(torn) = &scan.torn_tail {
        outln!(
            "{prefix}torn tail: {} at offset {}: {} ({verb} {} bytes)",
            torn.file.display(),
            torn.offset,
            torn.reason,
            torn.bytes_after
        );
    }
}

/// A check's verdict on a corrupt log, or a repair's report of what it cut.
fn outcome(scan: &Scan, mode: ScanMode, prefix: &str) -> Result<(), Failure> {
    // A problem inside a segment that was read is cut at its offset; any
    // other (a missing segment or HEAD) ends the log before it.
    let inside = |bad: &crate::log::read::Problem| scan.segments.iter().any(|s| s.path == bad.file);
    match (&scan.corruption, mode) {
        (Some(bad), ScanMode::Check) => Err(Failure {
            message: format!(
                "the record log is corrupt in {} at byte offset {}: {}; `assignd log repair` would {}",
                bad.file.display(),
                bad.offset,
                bad.reason,
                if inside(bad) {
                    format!(
                        "cut the log there, dropping {} bytes of that file and every later segment",
                        bad.bytes_after
                    )
                } else {
                    "end the log before it, removing every later segment".to_owned()
                }
            ),
            exit_code: EXIT_BAD_INPUT,
        }),
        (Some(bad), _) => {
            if inside(bad) {
                outln!(
                    "{prefix}repaired: cut {} at offset {} ({}), dropping {} bytes and every later segment",
                    bad.file.display(),
                    bad.offset,
                    bad.reason,
                    bad.bytes_after
                );
            } else {
                outln!(
                    "{prefix}repaired: {}: {}; the log now ends before it",
                    bad.file.display(),
                    bad.reason
                );
            }
            for removed in &scan.removed {
                outln!("{prefix}removed {}", removed.display());
            }
            Ok(())
        }
        (None, _) => Ok(()),
    }
}
