//! Compaction: it keeps the state and shrinks the log to the snapshots;
//! every point a crash can stop it at replays to the same state; a step
//! that fails leaves a log that reads back whole and is retried.

use super::super::frame::encode;
use super::super::read::{ScanMode, scan};
use super::super::writer::{FsyncPolicy, LogSink};
use super::fixtures::*;
use crate::protocol::core::Coordinator;
use crate::protocol::group::Record;

#[test]
fn compaction_keeps_the_state_and_shrinks_the_log_to_the_snapshots() {
    let records = history();
    let more = churn(50 * records.len());
    let dir = tempdir();
    let sink = LogSink::open(dir.path(), FsyncPolicy::Never, &[]).unwrap();
    // The history, then many more records of the group.
    sink.append(&records).unwrap();
    for chunk in more.chunks(records.len()) {
        sink.append(chunk).unwrap();
    }
    let before = sink
        .stats
        .log_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    sink.compact_now().unwrap();
    let after = sink
        .stats
        .log_bytes
        .load(std::sync::atomic::Ordering::Relaxed);
    assert!(after * 10 < before, "{after} bytes after, {before} before");
    let read = scan(dir.path(), ScanMode::Open).unwrap();
    assert_eq!(read.records.len(), 1, "one snapshot for the one group");
    let live = replay(&[records.clone(), more].concat());
    assert_eq!(groups(&replay(&read.records)), groups(&live));
    assert_eq!(only_segment(dir.path()).metadata().unwrap().len(), after);
    // Appends after compaction land after the snapshots.
    sink.append(&records[..2]).unwrap();
    assert_eq!(scan(dir.path(), ScanMode::Open).unwrap().records.len(), 3);
}

/// Every state a crash during compaction can leave — the snapshots in
/// place, and some of the older segments removed newest first — replays
/// to the same state; a leftover temporary file is ignored.
#[test]
fn every_crash_point_of_a_compaction_replays_to_the_same_state() {
    let records = history();
    let mid = records.len() / 2;
    let mut live = Coordinator::new(1);
    for record in &records {
        live.apply(record);
    }
    let mut snapshots = Vec::new();
    for group in live.groups() {
        encode(
            &Record::GroupSnapshot {
                group: group.name.clone(),
                state: Box::new(group.clone()),
            },
            &mut snapshots,
        );
    }
    let segment = |records: &[Record]| {
        let mut bytes = Vec::new();
        for record in records {
            encode(record, &mut bytes);
        }
        bytes
    };
    // Segments 0 and 1 hold the history, 2 the snapshots; the removal of
    // 1, then of 0, may each not have happened.
    for kept in [&[0, 1][..], &[0], &[]] {
        let dir = tempdir();
        for &n in kept {
            let part = if n == 0 {
                &records[..mid]
            } else {
                &records[mid..]
            };
            std::fs::write(dir.path().join(format!("{n:020}.seg")), segment(part)).unwrap();
        }
        std::fs::write(dir.path().join(format!("{:020}.seg", 2)), &snapshots).unwrap();
        std::fs::write(dir.path().join(format!("{:020}.seg.tmp", 3)), b"partial").unwrap();
        let read = scan(dir.path(), ScanMode::Open).unwrap();
        assert_eq!(
            groups(&replay(&read.records)),
            groups(&live),
            "kept {kept:?}"
        );
        assert!(!dir.path().join(format!("{:020}.seg.tmp", 3)).exists());
    }
}

/// A compaction that cannot create its file (out of file descriptors,
/// say) must leave the log as it is and be retried, not stop the writer
/// (every request answered 503 until a restart, the batch that triggered
/// it included, though it was saved).
#[test]
fn a_compaction_that_cannot_create_its_file_leaves_the_log_whole_and_is_retried_later() {
    use std::sync::atomic::Ordering::Relaxed;
    let records = history();
    let dir = tempdir();
    let sink = LogSink::open(dir.path(), FsyncPolicy::Never, &[]).unwrap();
    // Every append is past the compaction threshold; a failure waits an hour.
    sink.set_maintenance_for_tests(1, std::time::Duration::from_secs(3600));
    let (first, rest) = records.split_at(records.len() / 2);
    with_failed_creates(1, || sink.append(first)).expect("the batch was written: acknowledged");
    assert_eq!(sink.stats.compactions.load(Relaxed), 0);
    assert_eq!(sink.stats.maintenance_failures.load(Relaxed), 1);
    assert_eq!(scan(dir.path(), ScanMode::Check).unwrap().records, first);
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // Appends go on; within the backoff nothing is retried.
    sink.append(&rest[..1]).unwrap();
    assert_eq!(sink.stats.compactions.load(Relaxed), 0);
    // Once it has passed, the compaction is retried and succeeds.
    sink.set_maintenance_for_tests(1, std::time::Duration::ZERO);
    sink.append(&rest[1..2]).unwrap();
    sink.append(&rest[2..]).unwrap();
    assert!(sink.stats.compactions.load(Relaxed) >= 1);
    let read = scan(dir.path(), ScanMode::Open).unwrap();
    assert!(read.torn_tail.is_none() && read.corruption.is_none());
    assert_eq!(groups(&read.core), groups(&replay(&records)));
}

/// Every later step of a compaction (after its segment is in place) and
/// of starting a segment may fail too — `HEAD` not updated, old segments
/// not removed — and the log still reads back whole and is fixed later.
#[test]
fn a_failed_head_update_after_a_compaction_leaves_a_log_that_reads_back_whole() {
    let records = history();
    let dir = tempdir();
    let sink = LogSink::open(dir.path(), FsyncPolicy::Never, &[]).unwrap();
    sink.append(&records).unwrap();
    let before = sink.current_segment();
    // The segment's temporary file is created; HEAD.tmp is not.
    let result = with_failed_creates_after(1, || sink.compact_now());
    assert!(result.is_err(), "the HEAD update failed");
    assert_eq!(
        sink.current_segment(),
        before + 1,
        "appends go after the snapshots"
    );
    let read = scan(dir.path(), ScanMode::Check).unwrap();
    assert!(read.corruption.is_none(), "{:?}", read.corruption);
    assert_eq!(groups(&read.core), groups(&replay(&records)));
    // The next append brings HEAD up to date, and the log is whole.
    sink.append(std::slice::from_ref(&Record::GroupConfigured {
        group: "later".into(),
        config: config(),
    }))
    .unwrap();
    assert_eq!(
        super::super::segment::read_head(dir.path()).unwrap(),
        Some(before + 1)
    );
    drop(sink);
    let read = scan(dir.path(), ScanMode::Open).unwrap();
    assert!(read.core.group("later").is_some());
}
