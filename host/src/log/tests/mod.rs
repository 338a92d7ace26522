//! The record log against its promises: every record type round-trips;
//! arbitrary bytes never panic the decoder; a torn tail is cut and
//! everything before it recovered; corruption in the middle refuses to
//! open with the file and offset, `check` reports it, `repair` cuts there;
//! compaction keeps the state and shrinks the log to the live snapshots.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use assignor_sticky::Sticky;
use proptest::prelude::*;

use super::frame::{Decoded, FRAME_HEADER_BYTES, decode, encode};
use super::read::{ScanMode, scan};
use super::segment::{LogError, SEGMENT_HEADER_BYTES};
use super::writer::{FsyncPolicy, LogSink};
use crate::protocol::core::{Coordinator, Heartbeat, Output};
use crate::protocol::group::{
    Binding, CallLimits, GroupConfig, Member, Record, RemovalReason, Slot, SlotTarget, TaskRef,
    TopicConfig,
};
use crate::protocol::reconcile::MemberAssignment;

fn config() -> GroupConfig {
    GroupConfig {
        expansion_timeout_ms: 10,
        ..GroupConfig::with_topics(vec![TopicConfig {
            name: "orders".into(),
            partitions: 8,
        }])
    }
}

/// One record of every type.
fn every_record_type() -> Vec<Record> {
    let group = "g".to_owned();
    let mut target = BTreeMap::new();
    target.insert(
        Slot::named("a"),
        SlotTarget {
            active: [TaskRef::new("orders", 1)].into(),
            learner: [TaskRef::new("orders", 2)].into(),
            standby: BTreeSet::new(),
        },
    );
    let mut state = crate::protocol::group::Group::new("g", config());
    state.group_epoch = 4;
    state.bindings.push_back(Binding {
        seq: 1,
        assignor: "sticky".into(),
        params: BTreeMap::new(),
        limits: CallLimits::default(),
        fallback: None,
        epoch: 1,
        at_ms: 0,
        rollback_to: None,
    });
    let mut waiting = state.clone();
    waiting.handovers.insert("static:a".into());
    vec![
        Record::GroupConfigured {
            group: group.clone(),
            config: GroupConfig {
                assignor_limits: CallLimits {
                    fuel_max: Some(1_000_000),
                    time_limit_ms: None,
                    memory_max_mib: Some(64),
                },
                fallback_assignor: Some("sticky".into()),
                member_token_sha256: Some("ab".repeat(32)),
                ..config()
            },
        },
        Record::MemberJoined {
            group: group.clone(),
            slot: "static:a".into(),
            member: Member {
                member_id: "m-1".into(),
                name: Some("a".into()),
                topics: ["orders".to_owned()].into(),
                rack: Some("az-1".into()),
                capacity: 2,
                away: false,
                draining: false,
            },
        },
        Record::MemberAway {
            group: group.clone(),
            slot: "static:a".into(),
            away: true,
        },
        Record::MemberRemoved {
            group: group.clone(),
            slot: "m-2".into(),
            reason: RemovalReason::DrainTimedOut,
        },
        Record::GroupEpochBumped {
            group: group.clone(),
            epoch: 7,
        },
        Record::TargetInstalled {
            group: group.clone(),
            epoch: 7,
            target: target.into(),
        },
        Record::MemberReconciled {
            group: group.clone(),
            slot: "static:a".into(),
            assignment: MemberAssignment {
                active: [TaskRef::new("orders", 1)].into(),
                ..MemberAssignment::new()
            },
        },
        Record::NameMapDropped {
            group: group.clone(),
        },
        Record::MemberDraining {
            group: group.clone(),
            slot: "static:a".into(),
        },
        Record::GroupSnapshot {
            group: group.clone(),
            state: Box::new(state),
        },
        Record::AssignorBound {
            group,
            binding: Binding {
                seq: 3,
                assignor: "mine@1.0".into(),
                params: [("k".to_owned(), "v".to_owned())].into(),
                limits: CallLimits {
                    fuel_max: None,
                    time_limit_ms: Some(250),
                    memory_max_mib: None,
                },
                fallback: Some("range".into()),
                epoch: 9,
                at_ms: 12_345,
                rollback_to: Some(1),
            },
        },
        Record::HandoverStarted {
            group: "g".into(),
            slot: "static:a".into(),
        },
        Record::HandoverEnded {
            group: "g".into(),
            slot: "static:a".into(),
        },
        Record::GroupSnapshot {
            group: "g".into(),
            state: Box::new(waiting),
        },
    ]
}

#[test]
fn every_record_type_round_trips() {
    for record in every_record_type() {
        let mut bytes = Vec::new();
        encode(&record, &mut bytes);
        match decode(&bytes) {
            Decoded::Record {
                record: back,
                frame_bytes,
            } => {
                assert_eq!(back, record);
                assert_eq!(frame_bytes, bytes.len());
            }
            other => panic!("{record:?} did not round-trip: {other:?}"),
        }
        // Every prefix is incomplete, never a wrong record.
        for cut in 0..bytes.len() {
            assert!(
                !matches!(decode(&bytes[..cut]), Decoded::Record { .. }),
                "a prefix of {cut} bytes decoded"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    #[test]
    fn arbitrary_bytes_never_panic_the_decoder(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode(&bytes);
    }

    #[test]
    fn a_flipped_byte_is_never_taken_for_a_valid_record(index in 0usize..10_000, bit in 0u8..8) {
        let records = every_record_type();
        let record = &records[index % records.len()];
        let mut bytes = Vec::new();
        encode(record, &mut bytes);
        let at = index % bytes.len();
        bytes[at] ^= 1 << bit;
        match decode(&bytes) {
            // A flip in the length field may make the frame look longer
            // (incomplete) or shorter (then its CRC fails).
            Decoded::Record { .. } => prop_assert!(false, "a corrupted frame decoded"),
            // The CRC catches every one-bit flip: never taken for a whole
            // frame that only this version cannot read (which is never cut
            // as a torn write).
            Decoded::Unreadable { .. } => prop_assert!(false, "a corrupted frame passed its CRC"),
            Decoded::Incomplete | Decoded::Corrupt { .. } => {}
        }
    }

    #[test]
    fn a_length_field_claiming_gigabytes_allocates_nothing(len in (1u32 << 28)..u32::MAX) {
        let mut bytes = len.to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0; FRAME_HEADER_BYTES]);
        let decoded_a_record = matches!(decode(&bytes), Decoded::Record { .. });
        prop_assert!(!decoded_a_record);
    }
}

/// A realistic history: a group, three static members, a target, members
/// reconciled, one leaving; assignor calls answered natively.
fn history() -> Vec<Record> {
    let mut core = Coordinator::new(1);
    let mut records = Vec::new();
    let absorb = |core: &mut Coordinator, out: Output, now, records: &mut Vec<Record>| {
        records.extend(out.records);
        for call in out.assignor_calls {
            let answer =
                assignd_guest_sdk::harness::run::<Sticky>(&call.input).map_err(|e| e.to_string());
            let more = core.assignment_computed(&call.group, call.epoch, answer, now);
            records.extend(more.records);
        }
    };
    let out = core.configure("g", config(), 0).unwrap();
    absorb(&mut core, out, 0, &mut records);
    let mut responses = Vec::new();
    for name in ["a", "b", "c"] {
        let request = Heartbeat::join("g", Some(name), vec!["orders".into()]);
        let (response, out) = core.heartbeat(&request, 0).unwrap();
        absorb(&mut core, out, 0, &mut records);
        responses.push(response);
    }
    let out = core.tick(20);
    absorb(&mut core, out, 20, &mut records);
    for _ in 0..3 {
        for response in &mut responses {
            let request = Heartbeat {
                member_id: response.member_id.clone(),
                member_epoch: response.member_epoch as i64,
                owned: Some(response.active.iter().cloned().collect()),
                ..Heartbeat::join("g", None, vec![])
            };
            let request = Heartbeat {
                topics: None,
                ..request
            };
            let (next, out) = core.heartbeat(&request, 30).unwrap();
            absorb(&mut core, out, 30, &mut records);
            *response = next;
        }
    }
    records
}

/// What follows [`history`] as a log grows: the group's config written
/// again `times` times (as an operator's repeated `PUT`s would). Unlike the
/// history itself, it may follow any state: replaying the same history
/// twice is refused (an epoch would go back).
fn churn(times: usize) -> Vec<Record> {
    (0..times)
        .map(|_| Record::GroupConfigured {
            group: "g".into(),
            config: config(),
        })
        .collect()
}

fn replay(records: &[Record]) -> Coordinator {
    let mut core = Coordinator::new(1);
    for record in records {
        core.apply(record);
    }
    core
}

fn groups(core: &Coordinator) -> Vec<crate::protocol::group::Group> {
    core.groups().cloned().collect()
}

fn write_log(dir: &Path, records: &[Record]) {
    let sink = LogSink::open(dir, FsyncPolicy::Always, &[]).unwrap();
    // One append per record, as requests would.
    for record in records {
        sink.append(std::slice::from_ref(record)).unwrap();
    }
}

fn only_segment(dir: &Path) -> std::path::PathBuf {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.pop().unwrap()
}

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

/// The bytes docs/log-format.md shows: a change of the format must change
/// this test (and the format version) on purpose.
#[test]
fn the_documented_example_frame_is_what_encode_writes() {
    let record = Record::GroupEpochBumped {
        group: "g".into(),
        epoch: 300,
    };
    let mut bytes = Vec::new();
    encode(&record, &mut bytes);
    // version 4, type 5; payload: variant 4, "g" (length 1), 300 as a varint.
    let body = [0x04, 0x05, 0x04, 0x01, b'g', 0xac, 0x02];
    let mut expected = (body.len() as u32).to_le_bytes().to_vec();
    expected.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    expected.extend_from_slice(&body);
    assert_eq!(bytes, expected);
    assert_eq!(
        bytes,
        [
            0x07, 0, 0, 0, 0x16, 0x33, 0x27, 0x9a, 0x04, 0x05, 0x04, 0x01, b'g', 0xac, 0x02
        ]
    );
}

/// The postcard payload starts with the variant's index in `Record`'s
/// declaration order, which is part of the format: reordering the enum's
/// variants would make old logs decode as other records (the type byte
/// check would refuse them).
#[test]
fn each_record_types_type_byte_and_variant_index_are_pinned() {
    let expected: [(u8, u8); 14] = [
        (1, 0),   // GroupConfigured
        (2, 1),   // MemberJoined
        (3, 2),   // MemberAway
        (4, 3),   // MemberRemoved
        (5, 4),   // GroupEpochBumped
        (6, 5),   // TargetInstalled
        (7, 7),   // MemberReconciled
        (8, 8),   // NameMapDropped
        (9, 6),   // MemberDraining
        (10, 9),  // GroupSnapshot
        (11, 10), // AssignorBound
        (12, 11), // HandoverStarted
        (13, 12), // HandoverEnded
        (10, 9),  // GroupSnapshot, with a handover under way
    ];
    for (record, (type_byte, variant)) in every_record_type().iter().zip(expected) {
        let mut bytes = Vec::new();
        encode(record, &mut bytes);
        assert_eq!((bytes[9], bytes[10]), (type_byte, variant), "{record:?}");
    }
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
    let held = super::lock(dir.path()).unwrap();
    match super::lock(dir.path()) {
        Err(e @ LogError::Locked { .. }) => {
            assert!(e.to_string().contains("in use by another assignd"), "{e}");
        }
        other => panic!("expected the lock to be held: {other:?}"),
    }
    drop(held);
    super::lock(dir.path()).unwrap();
}

struct TempDir(std::path::PathBuf);

impl TempDir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempdir() -> TempDir {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "assignd-log-test-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    TempDir(dir)
}

/// Frames `payload` as format `version` holding a record of type `kind`.
fn old_frame(version: u8, kind: super::frame::RecordType, payload: &[u8]) -> Vec<u8> {
    let mut bytes = vec![0; 8];
    bytes.push(version);
    bytes.push(kind as u8);
    bytes.extend_from_slice(payload);
    let length = (bytes.len() - 8) as u32;
    bytes[0..4].copy_from_slice(&length.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[8..]);
    bytes[4..8].copy_from_slice(&crc.to_le_bytes());
    bytes
}

fn decoded(bytes: &[u8]) -> Record {
    match decode(bytes) {
        Decoded::Record { record, .. } => record,
        other => panic!("an old frame did not decode: {other:?}"),
    }
}

/// Frames of format versions 1 and 2, written in the shapes those versions
/// gave their records (spelled out here field by field), still read:
/// configs and bindings with no limits, fallback or member token; version
/// 1 snapshots with an empty binding history; every other record as it
/// always was.
#[test]
fn frames_of_older_versions_are_still_read() {
    use super::frame::RecordType;
    use super::legacy::{
        BindingV2, BoundV2, ConfiguredV2, GroupConfigV2, GroupV1, GroupV2, GroupV3, SnapshotV1,
        SnapshotV2, SnapshotV3,
    };
    let today = config();
    let old_config = GroupConfigV2 {
        topics: today.topics.clone(),
        assignor: today.assignor.clone(),
        params: today.params.clone(),
        session_timeout_ms: today.session_timeout_ms,
        registration_timeout_ms: today.registration_timeout_ms,
        expansion_timeout_ms: today.expansion_timeout_ms,
        heartbeat_interval_ms: today.heartbeat_interval_ms,
        learners: today.learners,
        acceptable_recovery_lag: today.acceptable_recovery_lag,
        max_learners: today.max_learners,
        probing_interval_ms: today.probing_interval_ms,
        scale_down_timeout_ms: today.scale_down_timeout_ms,
    };
    for version in [1, 2] {
        let configured = ConfiguredV2 {
            variant: 0,
            group: "g".into(),
            config: old_config.clone(),
        };
        let bytes = old_frame(
            version,
            RecordType::GroupConfigured,
            &postcard::to_allocvec(&configured).unwrap(),
        );
        assert_eq!(
            decoded(&bytes),
            Record::GroupConfigured {
                group: "g".into(),
                config: today.clone(),
            }
        );
        let bumped = every_record_type().remove(4);
        let bytes = old_frame(
            version,
            RecordType::GroupEpochBumped,
            &postcard::to_allocvec(&bumped).unwrap(),
        );
        assert_eq!(decoded(&bytes), bumped);
    }

    let Record::GroupSnapshot { state, .. } = every_record_type().remove(9) else {
        unreachable!()
    };
    let state = *state;
    assert_eq!(state.config, today);
    let old_binding = |b: &Binding| BindingV2 {
        seq: b.seq,
        assignor: b.assignor.clone(),
        params: b.params.clone(),
        epoch: b.epoch,
        at_ms: b.at_ms,
        rollback_to: b.rollback_to,
    };
    let v2 = SnapshotV2 {
        variant: 9,
        group: "g".into(),
        state: GroupV2 {
            name: state.name.clone(),
            config: old_config.clone(),
            group_epoch: state.group_epoch,
            target_epoch: state.target_epoch,
            members: state.members.clone(),
            target: (*state.target).clone(),
            holdings: state.holdings.clone(),
            fenced_member_ids: state.fenced_member_ids.clone(),
            member_ids_issued: state.member_ids_issued,
            dynamic_only: state.dynamic_only,
            snapshot_epoch: state.snapshot_epoch,
            bindings: state.bindings.iter().map(old_binding).collect(),
        },
    };
    let bytes = old_frame(
        2,
        RecordType::GroupSnapshot,
        &postcard::to_allocvec(&v2).unwrap(),
    );
    assert_eq!(
        decoded(&bytes),
        Record::GroupSnapshot {
            group: "g".into(),
            state: Box::new(state.clone()),
        }
    );
    let v3 = SnapshotV3 {
        variant: 9,
        group: "g".into(),
        state: GroupV3 {
            name: state.name.clone(),
            config: state.config.clone(),
            group_epoch: state.group_epoch,
            target_epoch: state.target_epoch,
            members: state.members.clone(),
            target: (*state.target).clone(),
            holdings: state.holdings.clone(),
            fenced_member_ids: state.fenced_member_ids.clone(),
            member_ids_issued: state.member_ids_issued,
            dynamic_only: state.dynamic_only,
            snapshot_epoch: state.snapshot_epoch,
            bindings: state.bindings.clone(),
        },
    };
    let bytes = old_frame(
        3,
        RecordType::GroupSnapshot,
        &postcard::to_allocvec(&v3).unwrap(),
    );
    assert!(state.handovers.is_empty());
    assert_eq!(
        decoded(&bytes),
        Record::GroupSnapshot {
            group: "g".into(),
            state: Box::new(state.clone()),
        }
    );
    let v1 = SnapshotV1 {
        variant: 9,
        group: "g".into(),
        state: GroupV1 {
            name: state.name.clone(),
            config: old_config,
            group_epoch: state.group_epoch,
            target_epoch: state.target_epoch,
            members: state.members.clone(),
            target: (*state.target).clone(),
            holdings: state.holdings.clone(),
            fenced_member_ids: state.fenced_member_ids.clone(),
            member_ids_issued: state.member_ids_issued,
            dynamic_only: state.dynamic_only,
            snapshot_epoch: state.snapshot_epoch,
        },
    };
    let bytes = old_frame(
        1,
        RecordType::GroupSnapshot,
        &postcard::to_allocvec(&v1).unwrap(),
    );
    let mut no_history = state;
    no_history.bindings.clear();
    assert_eq!(
        decoded(&bytes),
        Record::GroupSnapshot {
            group: "g".into(),
            state: Box::new(no_history),
        }
    );

    let Record::AssignorBound { binding, .. } = every_record_type().remove(10) else {
        unreachable!()
    };
    let bound = BoundV2 {
        variant: 10,
        group: "g".into(),
        binding: old_binding(&binding),
    };
    let bytes = old_frame(
        2,
        RecordType::AssignorBound,
        &postcard::to_allocvec(&bound).unwrap(),
    );
    assert_eq!(
        decoded(&bytes),
        Record::AssignorBound {
            group: "g".into(),
            binding: Binding {
                limits: CallLimits::default(),
                fallback: None,
                ..binding
            },
        }
    );
    // A version this build does not know is refused, not a guess.
    let bytes = old_frame(
        super::frame::FORMAT_VERSION + 1,
        RecordType::GroupEpochBumped,
        &postcard::to_allocvec(&every_record_type().remove(4)).unwrap(),
    );
    assert!(matches!(decode(&bytes), Decoded::Unreadable { .. }));
}

/// Runs `f` with this thread's next `n` file creations by the log failing
/// as if the process had no descriptor left (EMFILE).
fn with_failed_creates<T>(n: u32, f: impl FnOnce() -> T) -> T {
    super::segment::FAIL_CREATES.with(|c| c.set(n));
    let out = f();
    super::segment::FAIL_CREATES.with(|c| c.set(0));
    out
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
        super::segment::read_head(dir.path()).unwrap(),
        Some(before + 1)
    );
    drop(sink);
    let read = scan(dir.path(), ScanMode::Open).unwrap();
    assert!(read.core.group("later").is_some());
}

/// Runs `f` letting this thread's next `ok` file creations through and
/// failing the one after.
fn with_failed_creates_after<T>(ok: u32, f: impl FnOnce() -> T) -> T {
    super::segment::FAIL_AFTER.with(|c| c.set(Some(ok)));
    let out = f();
    super::segment::FAIL_AFTER.with(|c| c.set(None));
    out
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
    let segments = super::segment::list_segments(dir.path(), false).unwrap();
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

/// A frame of a version above what a process reads is refused with the
/// versions it reads, and read by one that reads it: the test-only
/// version 5 is version 4's payload under the next number.
#[test]
fn a_frame_version_is_read_only_up_to_the_readers_maximum() {
    use super::frame::{RecordType, TEST_FORMAT_VERSION, decode_up_to};
    let record = every_record_type().remove(4);
    let bytes = old_frame(
        TEST_FORMAT_VERSION,
        RecordType::of(&record),
        &postcard::to_allocvec(&record).unwrap(),
    );
    match decode_up_to(&bytes, 4) {
        Decoded::Unreadable { reason, .. } => assert!(
            reason.starts_with("format version 5 is newer than this assignd reads (1 to 4)"),
            "{reason}"
        ),
        other => panic!("{other:?}"),
    }
    match decode_up_to(&bytes, TEST_FORMAT_VERSION) {
        Decoded::Record { record: read, .. } => assert_eq!(read, record),
        other => panic!("{other:?}"),
    }
}

#[test]
#[should_panic(expected = "format version 5 is not one this process writes")]
fn a_version_this_process_does_not_write_is_never_written() {
    let mut out = Vec::new();
    super::frame::encode_at(&every_record_type().remove(4), 5, &mut out);
}
