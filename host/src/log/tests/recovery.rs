//! Reading a written log back: the same state; a torn tail cut and
//! everything before it kept; corruption in the middle, a missing segment
//! or a damaged `HEAD` refused naming the file, reported by a check and
//! cut by a repair; a check changes nothing; one writer at a time.

use super::super::frame::{FRAME_HEADER_BYTES, encode};
use super::super::read::{ScanMode, scan};
use super::super::segment::{LogError, SEGMENT_HEADER_BYTES};
use super::super::writer::{FsyncPolicy, LogSink};
use super::fixtures::*;
use crate::protocol::core::Coordinator;
use crate::protocol::group::Record;

#[test]
fn a_written_history_replays_to_the_same_state_and_includes_a_stable_snapshot() {
    let records = history();
    assert!(
        records
            .iter()
            .any(|r| matches!(r, Record::GroupSnapshot { .. })),
        "a stable group writes its snapshot"
    );
    let dir = tempdir();
    write_log(dir.path(), &records);
    let read = scan(dir.path(), ScanMode::Open).unwrap();
    assert_eq!(read.records, records);
    assert!(read.torn_tail.is_none());
    let mut live = Coordinator::new(1);
    for record in &records {
        live.apply(record);
    }
    assert_eq!(groups(&replay(&read.records)), groups(&live));
}

#[test]
fn a_torn_tail_is_cut_and_everything_before_it_recovered() {
    let records = history();
    let dir = tempdir();
    write_log(dir.path(), &records);
    let file = only_segment(dir.path());
    let full = std::fs::read(&file).unwrap();
    let mut last_frame = Vec::new();
    encode(records.last().unwrap(), &mut last_frame);
    let before_last = full.len() - last_frame.len();
    // Cut anywhere inside the last record, or leave it whole but garbled at
    // its end (a write that reached the disk only in part).
    for cut in [before_last + 1, before_last + 9, full.len() - 1] {
        std::fs::write(&file, &full[..cut]).unwrap();
        let read = scan(dir.path(), ScanMode::Open).unwrap();
        assert_eq!(read.records, records[..records.len() - 1]);
        assert_eq!(read.torn_tail.as_ref().unwrap().offset, before_last as u64);
        assert_eq!(std::fs::metadata(&file).unwrap().len(), before_last as u64);
    }
    let mut garbled = full.clone();
    *garbled.last_mut().unwrap() ^= 0xff;
    std::fs::write(&file, &garbled).unwrap();
    let read = scan(dir.path(), ScanMode::Open).unwrap();
    assert_eq!(read.records, records[..records.len() - 1]);
    // Appending after recovery continues a readable log.
    let sink = LogSink::open(dir.path(), FsyncPolicy::Always, &read.records).unwrap();
    sink.append(std::slice::from_ref(records.last().unwrap()))
        .unwrap();
    assert_eq!(scan(dir.path(), ScanMode::Open).unwrap().records, records);
}

#[test]
fn corruption_in_the_middle_refuses_to_open_check_reports_it_and_repair_cuts_there() {
    let records = history();
    let dir = tempdir();
    write_log(dir.path(), &records);
    let file = only_segment(dir.path());
    let mut bytes = std::fs::read(&file).unwrap();
    let mut first = Vec::new();
    encode(&records[0], &mut first);
    let offset = SEGMENT_HEADER_BYTES + first.len();
    bytes[offset + FRAME_HEADER_BYTES + 1] ^= 0x40;
    std::fs::write(&file, &bytes).unwrap();

    match scan(dir.path(), ScanMode::Open) {
        Err(LogError::Corrupt {
            file: bad,
            offset: at,
            reason,
        }) => {
            assert_eq!(bad, file);
            assert_eq!(at, offset as u64);
            assert!(reason.contains("CRC32C"), "{reason}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    assert_eq!(
        std::fs::read(&file).unwrap(),
        bytes,
        "opening changed nothing"
    );

    let checked = scan(dir.path(), ScanMode::Check).unwrap();
    assert_eq!(checked.corruption.unwrap().offset, offset as u64);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        bytes,
        "check changed nothing"
    );

    let repaired = scan(dir.path(), ScanMode::Repair).unwrap();
    assert_eq!(repaired.records, records[..1]);
    assert_eq!(std::fs::metadata(&file).unwrap().len(), offset as u64);
    assert_eq!(
        scan(dir.path(), ScanMode::Open).unwrap().records,
        records[..1]
    );
}

/// Flipping the top bit of a length field in the middle of the last
/// segment makes that frame claim to run past the end of the file, as a
/// torn write would: it must still be corruption (the records after it
/// are acknowledged), not a tail to cut.
#[test]
fn a_damaged_length_field_in_the_middle_is_corruption_not_a_torn_tail() {
    let records = history();
    let dir = tempdir();
    write_log(dir.path(), &records);
    let file = only_segment(dir.path());
    let mut bytes = std::fs::read(&file).unwrap();
    let mut first = Vec::new();
    encode(&records[0], &mut first);
    let offset = SEGMENT_HEADER_BYTES + first.len();
    bytes[offset + 3] ^= 0x80;
    std::fs::write(&file, &bytes).unwrap();
    match scan(dir.path(), ScanMode::Open) {
        Err(LogError::Corrupt { offset: at, .. }) => assert_eq!(at, offset as u64),
        other => panic!("expected corruption, got {other:?}"),
    }
    assert_eq!(std::fs::read(&file).unwrap(), bytes, "nothing was cut");
}

/// A crash can leave the end of the file zero-filled (the size reached the
/// disk, the data did not): with no valid record after the zeros, that is
/// a torn tail.
#[test]
fn a_zero_filled_tail_is_cut_like_a_torn_write() {
    let records = history();
    let dir = tempdir();
    write_log(dir.path(), &records);
    let file = only_segment(dir.path());
    let mut bytes = std::fs::read(&file).unwrap();
    let len = bytes.len();
    bytes.extend_from_slice(&[0; 4096]);
    std::fs::write(&file, &bytes).unwrap();
    let read = scan(dir.path(), ScanMode::Open).unwrap();
    assert_eq!(read.records, records);
    assert_eq!(read.torn_tail.unwrap().offset, len as u64);
    assert_eq!(std::fs::metadata(&file).unwrap().len(), len as u64);
}

/// Recovery moves snapshots into the core instead of cloning them; the
/// state is the same.
#[test]
fn replaying_owned_records_builds_the_same_state() {
    let mut records = history();
    let live = replay(&records);
    for group in live.groups() {
        records.push(Record::GroupSnapshot {
            group: group.name.clone(),
            state: Box::new(group.clone()),
        });
    }
    records.extend(churn(3));
    let by_reference = replay(&records);
    let mut owned = Coordinator::new(1);
    for record in records {
        owned.apply_owned(record);
    }
    assert_eq!(groups(&owned), groups(&by_reference));
}

#[test]
fn a_check_changes_nothing_not_even_a_compactions_temporary_file() {
    let records = history();
    let dir = tempdir();
    write_log(dir.path(), &records);
    let temp = dir.path().join(format!("{:020}.seg.tmp", 1));
    std::fs::write(&temp, b"a compaction in progress").unwrap();
    let checked = scan(dir.path(), ScanMode::Check).unwrap();
    assert_eq!(checked.records, records);
    assert!(temp.exists());
}

#[test]
fn a_second_writer_cannot_lock_the_log() {
    let dir = tempdir();
    let held = super::super::lock(dir.path()).unwrap();
    match super::super::lock(dir.path()) {
        Err(e @ LogError::Locked { .. }) => {
            assert!(e.to_string().contains("in use by another assignd"), "{e}");
        }
        other => panic!("expected the lock to be held: {other:?}"),
    }
    drop(held);
    super::super::lock(dir.path()).unwrap();
}

/// A log written by the writer: each process continues in a new segment,
/// a missing one anywhere is refused naming it, and a repair ends the log
/// before the gap.
#[test]
fn a_missing_segment_is_refused_naming_it_and_repair_ends_the_log_before_it() {
    let records = history();
    let dir = tempdir();
    let third = records.len() / 3;
    for part in [
        &records[..third],
        &records[third..2 * third],
        &records[2 * third..],
    ] {
        let read = scan(dir.path(), ScanMode::Open).unwrap();
        let sink = LogSink::open(dir.path(), FsyncPolicy::Never, &read.records).unwrap();
        sink.append(part).unwrap();
    }
    let segments = super::super::segment::list_segments(dir.path(), false).unwrap();
    assert_eq!(segments.len(), 3, "{segments:?}");
    assert_eq!(scan(dir.path(), ScanMode::Open).unwrap().records, records);
    let copy = |skip: usize| {
        let to = tempdir();
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let path = entry.unwrap().path();
            if path != segments[skip].1 {
                std::fs::copy(&path, to.path().join(path.file_name().unwrap())).unwrap();
            }
        }
        to
    };
    for (skip, (_, path)) in segments.iter().enumerate() {
        let damaged = copy(skip);
        let missing = damaged.path().join(path.file_name().unwrap());
        match scan(damaged.path(), ScanMode::Open) {
            Err(LogError::Corrupt {
                file,
                offset: 0,
                reason,
            }) => {
                assert_eq!(file, missing, "{reason}");
                assert!(reason.contains("is missing"), "{reason}");
            }
            other => panic!("segment {skip} missing: expected a refusal, got {other:?}"),
        }
        let repaired = scan(damaged.path(), ScanMode::Repair).unwrap();
        let kept = match skip {
            0 => 0,
            1 => third,
            _ => 2 * third,
        };
        assert_eq!(repaired.records.len(), kept, "segment {skip} missing");
        let read = scan(damaged.path(), ScanMode::Open).unwrap();
        assert_eq!(
            read.records,
            records[..kept],
            "after repairing a missing {skip}"
        );
    }
}

/// A damaged `HEAD` is refused naming it (the log's end is unproven); a
/// repair rewrites it to name the last segment there.
#[test]
fn a_damaged_head_is_refused_naming_it_and_repair_rewrites_it() {
    let records = history();
    let dir = tempdir();
    for part in [&records[..2], &records[2..]] {
        let read = scan(dir.path(), ScanMode::Open).unwrap();
        let sink = LogSink::open(dir.path(), FsyncPolicy::Never, &read.records).unwrap();
        sink.append(part).unwrap();
    }
    let head = dir.path().join("HEAD");
    let mut bytes = std::fs::read(&head).unwrap();
    bytes[9] ^= 1;
    std::fs::write(&head, &bytes).unwrap();
    match scan(dir.path(), ScanMode::Open) {
        Err(LogError::Corrupt {
            file,
            offset: 0,
            reason,
        }) => {
            assert_eq!(file, head);
            assert!(reason.contains("CRC32C"), "{reason}");
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
    let checked = scan(dir.path(), ScanMode::Check).unwrap();
    assert_eq!(checked.corruption.unwrap().file, head);
    scan(dir.path(), ScanMode::Repair).unwrap();
    let read = scan(dir.path(), ScanMode::Open).unwrap();
    assert_eq!(read.records, records);
}
