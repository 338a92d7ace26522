//! `assignd log check|repair --data-dir DIR`: the operator's tools for the
//! record log. `check` reads every segment and reports what it holds and
//! where it stops being readable, changing nothing; `repair` cuts the log
//! at the first unreadable record so the host can start (the records from
//! there on are lost, and it says how many bytes).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::{EXIT_BAD_INPUT, Failure};
use crate::log::{ScanMode, lock, log_dir, scan};

#[derive(Debug, Subcommand)]
pub enum LogCommand {
    /// Read the whole log and report its segments, records by type, and any
    /// torn tail or corruption; change nothing. Exits 1 on corruption.
    Check(LogArgs),
    /// Cut the log at its first unreadable record (a torn tail or
    /// corruption), dropping everything after it, so the host can start.
    Repair(LogArgs),
}

#[derive(Debug, Args)]
pub struct LogArgs {
    /// The data directory given to `assignd serve`.
    #[arg(long, env = "ASSIGND_DATA_DIR", value_name = "DIR")]
    data_dir: PathBuf,
}

pub fn log(command: LogCommand) -> Result<(), Failure> {
    let (args, mode) = match command {
        LogCommand::Check(args) => (args, ScanMode::Check),
        LogCommand::Repair(args) => (args, ScanMode::Repair),
    };
    let dir = log_dir(&args.data_dir);
    if !dir.is_dir() {
        return Err(Failure {
            message: format!(
                "no record log in {} (expected {})",
                args.data_dir.display(),
                dir.display()
            ),
            exit_code: EXIT_BAD_INPUT,
        });
    }
    // A repair writes: not while a host serves this log. A check only
    // reads, and may run beside a live host.
    let _lock = match mode {
        ScanMode::Check => None,
        _ => Some(lock(&dir).map_err(|e| Failure {
            message: e.to_string(),
            exit_code: EXIT_BAD_INPUT,
        })?),
    };
    let scan = scan(&dir, mode).map_err(|e| Failure {
        message: e.to_string(),
        exit_code: EXIT_BAD_INPUT,
    })?;
    for segment in &scan.segments {
        outln!(
            "segment {} records={} valid_bytes={}",
            segment.path.display(),
            segment.records,
            segment.valid_bytes
        );
    }
    let by_type: Vec<String> = scan
        .records_by_type
        .iter()
        .map(|(kind, n)| format!("{kind}={n}"))
        .collect();
    outln!("records={} {}", scan.records.len(), by_type.join(" "));
    let verb = if mode == ScanMode::Check {
        "would cut"
    } else {
        "cut"
    };
    if let Some(torn) = &scan.torn_tail {
        outln!(
            "torn tail: {} at offset {}: {} ({verb} {} bytes)",
            torn.file.display(),
            torn.offset,
            torn.reason,
            torn.bytes_after
        );
    }
    match (&scan.corruption, mode) {
        (Some(bad), ScanMode::Check) => Err(Failure {
            message: format!(
                "corrupt record in {} at offset {}: {}; `assignd log repair` would cut the log there, dropping {} bytes of that file and every later segment",
                bad.file.display(),
                bad.offset,
                bad.reason,
                bad.bytes_after
            ),
            exit_code: EXIT_BAD_INPUT,
        }),
        (Some(bad), _) => {
            outln!(
                "repaired: cut {} at offset {} ({}), dropping {} bytes and every later segment",
                bad.file.display(),
                bad.offset,
                bad.reason,
                bad.bytes_after
            );
            Ok(())
        }
        (None, _) => {
            outln!("ok");
            Ok(())
        }
    }
}
