//! Segments of older format versions, committed as bytes (in `golden/`,
//! whose README says how each was made), read back to the exact records.
//! Unlike `legacy.rs`, nothing here frames old records with the reader's
//! own structs: version 4's segments are what the previous release's
//! `assignd serve` wrote, version 5's and 6's what the last builds whose
//! newest format is 5 and 6 wrote, and versions 1 to 3's are written by
//! [`old_segment`] with plain byte arithmetic from the layout
//! docs/log-format.md documents (postcard varints, length-prefixed
//! strings, fields in declaration order), as the writers of those
//! versions framed them: no segment header, no `HEAD`.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};

use super::super::read::{Scan, ScanMode, scan};
use super::super::segment::SegmentKind;
use super::fixtures::tempdir;
use crate::protocol::group::{
    Binding, CallLimits, Group, GroupConfig, LearnerMode, Member, Record, Slot, SlotTarget, Task,
    TopicConfig,
};
use crate::protocol::reconcile::{Holdings, MemberAssignment, MemberState};

fn golden_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src/log/tests/golden")
        .join(name)
}

/// Reads a copy of the golden log `name` (a scan may migrate or cut; the
/// committed bytes must stay as they are), refusing any problem.
fn read_golden(name: &str) -> Scan {
    let dir = tempdir();
    for entry in std::fs::read_dir(golden_dir(name)).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
    }
    let read = scan(dir.path(), ScanMode::Check).unwrap();
    assert!(read.corruption.is_none(), "{:?}", read.corruption);
    assert!(read.torn_tail.is_none(), "{:?}", read.torn_tail);
    read
}

// ---- Versions 1 to 3: the documented layout, byte by byte ----

/// A postcard varint (LEB128, 7 bits a byte, low first).
fn varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(value as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn string(out: &mut Vec<u8>, text: &str) {
    varint(out, text.len() as u64);
    out.extend_from_slice(text.as_bytes());
}

fn option_u64(out: &mut Vec<u8>, value: Option<u64>) {
    match value {
        None => out.push(0),
        Some(value) => {
            out.push(1);
            varint(out, value);
        }
    }
}

fn option_string(out: &mut Vec<u8>, value: Option<&str>) {
    match value {
        None => out.push(0),
        Some(value) => {
            out.push(1);
            string(out, value);
        }
    }
}

/// A frame: length (u32 LE, of what follows the CRC), CRC32C of the rest,
/// version, type byte, payload.
fn frame(out: &mut Vec<u8>, version: u8, type_byte: u8, payload: &[u8]) {
    let mut body = vec![version, type_byte];
    body.extend_from_slice(payload);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    out.extend_from_slice(&body);
}

/// `GroupConfig`: one topic `orders` of 4 partitions, assignor `range`,
/// the default timeouts but a 100 ms expansion and 500 ms heartbeats;
/// from version 3 on a fuel and memory limit and a fallback, no token.
fn config_bytes(out: &mut Vec<u8>, version: u8) {
    varint(out, 1); // topics
    string(out, "orders");
    varint(out, 4);
    string(out, "range");
    varint(out, 0); // params
    for timeout_ms in [45_000, 120_000, 100, 500] {
        varint(out, timeout_ms);
    }
    varint(out, 0); // learners: Host
    varint(out, 10_000); // acceptable_recovery_lag
    varint(out, 2); // max_learners
    varint(out, 60_000); // probing_interval_ms
    varint(out, 300_000); // scale_down_timeout_ms
    if version >= 3 {
        option_u64(out, Some(1_000_000));
        option_u64(out, None);
        option_u64(out, Some(64));
        option_string(out, Some("sticky"));
        option_string(out, None); // member_token_sha256
    }
}

/// `Member` `worker-a-1`, named `a`, subscribed to `orders`.
fn member_bytes(out: &mut Vec<u8>) {
    string(out, "worker-a-1");
    option_string(out, Some("a"));
    varint(out, 1);
    string(out, "orders");
    option_string(out, None); // rack
    varint(out, 1); // capacity
    out.extend_from_slice(&[0, 0]); // away, draining
}

/// `Binding` 1: `range` at epoch 1, 5 ms after the host started.
fn binding_bytes(out: &mut Vec<u8>, version: u8) {
    varint(out, 1); // seq
    string(out, "range");
    varint(out, 0); // params
    if version >= 3 {
        for limit in [Some(1_000_000), None, Some(64)] {
            option_u64(out, limit);
        }
        option_string(out, Some("sticky"));
    }
    varint(out, 1); // epoch
    varint(out, 5); // at_ms
    option_u64(out, None); // rollback_to
}

/// `Group` `g` at epoch 1 with member `static:a`, no target, no holdings;
/// its binding history from version 2 on.
fn group_bytes(out: &mut Vec<u8>, version: u8) {
    string(out, "g");
    config_bytes(out, version);
    varint(out, 1); // group_epoch
    varint(out, 0); // target_epoch
    varint(out, 1); // members
    string(out, "static:a");
    member_bytes(out);
    varint(out, 0); // target
    varint(out, 0); // holdings
    varint(out, 0); // fenced_member_ids
    varint(out, 0); // member_ids_issued
    out.push(0); // dynamic_only
    varint(out, 0); // snapshot_epoch
    if version >= 2 {
        varint(out, 1);
        binding_bytes(out, version);
    }
}

/// A segment as a version 1 to 3 writer framed it: group `g` configured,
/// `static:a` joined, the epoch bumped, (from version 2) its binding, and
/// a snapshot of the group.
fn old_segment(version: u8) -> Vec<u8> {
    let mut out = Vec::new();
    let mut payload = vec![0]; // GroupConfigured
    string(&mut payload, "g");
    config_bytes(&mut payload, version);
    frame(&mut out, version, 1, &payload);
    let mut payload = vec![1]; // MemberJoined
    string(&mut payload, "g");
    string(&mut payload, "static:a");
    member_bytes(&mut payload);
    frame(&mut out, version, 2, &payload);
    let mut payload = vec![4]; // GroupEpochBumped
    string(&mut payload, "g");
    varint(&mut payload, 1);
    frame(&mut out, version, 5, &payload);
    if version >= 2 {
        let mut payload = vec![10]; // AssignorBound
        string(&mut payload, "g");
        binding_bytes(&mut payload, version);
        frame(&mut out, version, 11, &payload);
    }
    let mut payload = vec![9]; // GroupSnapshot
    string(&mut payload, "g");
    group_bytes(&mut payload, version);
    frame(&mut out, version, 10, &payload);
    out
}

/// Writes the hand-made segments into `golden/` (run on purpose, with
/// `--ignored`, only to make them again).
#[test]
#[ignore = "writes the committed golden files"]
fn write_the_hand_made_golden_segments() {
    for version in 1..=3 {
        let dir = golden_dir(&format!("v{version}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("00000000000000000000.seg"), old_segment(version)).unwrap();
    }
}

#[test]
fn the_hand_made_golden_segments_are_the_committed_ones() {
    for version in 1..=3 {
        let path = golden_dir(&format!("v{version}")).join("00000000000000000000.seg");
        assert_eq!(
            std::fs::read(&path).unwrap(),
            old_segment(version),
            "{}",
            path.display()
        );
    }
}

// ---- What they hold, in today's records ----

/// The config of the hand-made segments, as today's reader gives it.
fn expected_config(version: u8) -> GroupConfig {
    let (assignor_limits, fallback_assignor) = limits_and_fallback(version);
    GroupConfig {
        topics: vec![TopicConfig {
            name: "orders".into(),
            partitions: 4,
        }],
        assignor: "range".into(),
        params: BTreeMap::new(),
        session_timeout_ms: 45_000,
        registration_timeout_ms: 120_000,
        expansion_timeout_ms: 100,
        heartbeat_interval_ms: 500,
        learners: LearnerMode::Host,
        acceptable_recovery_lag: 10_000,
        max_learners: 2,
        probing_interval_ms: 60_000,
        scale_down_timeout_ms: 300_000,
        assignor_limits,
        fallback_assignor,
        member_token_sha256: None,
        routes_valid_ms: 2_000,
        reader_token_sha256: None,
        load_unit: None,
        load_half_life_ms: 30_000,
        load_window_ms: 60_000,
        load_cooldown_ms: 300_000,
        labels: BTreeMap::new(),
        frozen: false,
    }
}

/// Version 3 wrote a fuel and memory limit and a fallback; before it,
/// none: they read as the defaults.
fn limits_and_fallback(version: u8) -> (CallLimits, Option<String>) {
    if version >= 3 {
        let limits = CallLimits {
            fuel_max: Some(1_000_000),
            time_limit_ms: None,
            memory_max_mib: Some(64),
        };
        (limits, Some("sticky".into()))
    } else {
        (CallLimits::default(), None)
    }
}

fn expected_member() -> Member {
    Member {
        member_id: "worker-a-1".into(),
        name: Some("a".into()),
        topics: ["orders".to_owned()].into(),
        rack: None,
        capacity: 1,
        away: false,
        draining: false,
        endpoint: None,
        metadata: Default::default(),
    }
}

fn expected_binding(version: u8) -> Binding {
    let (limits, fallback) = limits_and_fallback(version);
    Binding {
        seq: 1,
        assignor: "range".into(),
        params: BTreeMap::new(),
        limits,
        fallback,
        epoch: 1,
        at_ms: 5,
        rollback_to: None,
    }
}

/// The records of [`old_segment`]`(version)` as today's reader gives them:
/// version 1's snapshot with an empty binding history, every snapshot
/// with no handover.
fn expected_records(version: u8) -> Vec<Record> {
    let bindings: VecDeque<Binding> = if version >= 2 {
        [expected_binding(version)].into()
    } else {
        VecDeque::new()
    };
    let state = Group {
        name: "g".into(),
        config: expected_config(version),
        group_epoch: 1,
        target_epoch: 0,
        members: [(Slot::named("a"), expected_member())].into(),
        target: Default::default(),
        holdings: Default::default(),
        fenced_member_ids: VecDeque::new(),
        member_ids_issued: 0,
        dynamic_only: false,
        snapshot_epoch: 0,
        bindings,
        handovers: Default::default(),
        routes_epoch: 0,
        shadow: None,
    };
    let mut records = vec![
        Record::GroupConfigured {
            group: "g".into(),
            config: expected_config(version),
        },
        Record::MemberJoined {
            group: "g".into(),
            slot: Slot::named("a"),
            member: expected_member(),
        },
        Record::GroupEpochBumped {
            group: "g".into(),
            epoch: 1,
        },
    ];
    if version >= 2 {
        records.push(Record::AssignorBound {
            group: "g".into(),
            binding: expected_binding(version),
        });
    }
    records.push(Record::GroupSnapshot {
        group: "g".into(),
        state: Box::new(state),
    });
    records
}

fn assert_reads_as_written(version: u8) {
    let read = read_golden(&format!("v{version}"));
    assert_eq!(read.head, None, "a log of the format before headers");
    assert_eq!(read.segments.len(), 1);
    assert_eq!(read.segments[0].kind, None, "no segment header");
    assert_eq!(read.records, expected_records(version));
}

#[test]
fn a_version_1_segment_reads_with_an_empty_binding_history() {
    assert_reads_as_written(1);
}

#[test]
fn a_version_2_segment_reads_with_no_limits_fallback_or_token() {
    assert_reads_as_written(2);
}

#[test]
fn a_version_3_segment_reads_with_no_handover() {
    assert_reads_as_written(3);
}

// ---- Version 4: written by the previous release ----

/// All four tasks of `orders`.
fn orders_0_to_3() -> BTreeSet<Task> {
    (0..4).map(|p| Task::new("orders", p)).collect()
}

/// What v0.1.0 held after `static:a` reconciled: epoch 2, all four tasks.
fn reconciled() -> MemberAssignment<Task> {
    MemberAssignment {
        state: MemberState::Stable,
        epoch: 2,
        previous_epoch: 0,
        active: orders_0_to_3(),
        revoking: BTreeSet::new(),
    }
}

/// The group v0.1.0's second run snapshotted: `static:a` holding all
/// four tasks at epoch 2.
fn v4_snapshot_state(binding: &Binding, target: &BTreeMap<Slot, SlotTarget>) -> Group {
    let mut holdings = Holdings::default();
    holdings.set("static:a", reconciled());
    Group {
        name: "g".into(),
        config: expected_config(2),
        group_epoch: 2,
        target_epoch: 2,
        members: [(Slot::named("a"), expected_member())].into(),
        target: target.clone().into(),
        holdings,
        fenced_member_ids: VecDeque::new(),
        member_ids_issued: 1,
        dynamic_only: false,
        snapshot_epoch: 2,
        bindings: [binding.clone()].into(),
        handovers: Default::default(),
        routes_epoch: 0,
        shadow: None,
    }
}

/// The records v0.1.0 wrote (see golden/README.md), in order: the first
/// run's in segment 0, the second run's in segment 1.
fn expected_v4_records() -> Vec<Record> {
    let g = || "g".to_owned();
    // Bound 3,003 ms after the first run started.
    let binding = Binding {
        at_ms: 3_003,
        ..expected_binding(2)
    };
    let target: BTreeMap<Slot, SlotTarget> = [(
        Slot::named("a"),
        SlotTarget {
            active: orders_0_to_3(),
            learner: BTreeSet::new(),
            standby: BTreeSet::new(),
        },
    )]
    .into();
    let state = v4_snapshot_state(&binding, &target);
    vec![
        Record::GroupConfigured {
            group: g(),
            config: expected_config(2),
        },
        Record::AssignorBound {
            group: g(),
            binding,
        },
        Record::GroupEpochBumped {
            group: g(),
            epoch: 1,
        },
        Record::MemberJoined {
            group: g(),
            slot: Slot::named("a"),
            member: expected_member(),
        },
        Record::GroupEpochBumped {
            group: g(),
            epoch: 2,
        },
        Record::TargetInstalled {
            group: g(),
            epoch: 2,
            target: target.into(),
        },
        Record::MemberReconciled {
            group: g(),
            slot: Slot::named("a"),
            assignment: reconciled(),
        },
        Record::GroupSnapshot {
            group: g(),
            state: Box::new(state),
        },
    ]
}

#[test]
fn a_version_4_log_of_the_previous_release_reads_back_exactly() {
    let read = read_golden("v4");
    assert_eq!(read.head, Some(1));
    let kinds: Vec<_> = read.segments.iter().map(|s| s.kind).collect();
    assert_eq!(
        kinds,
        [Some(SegmentKind::Base), Some(SegmentKind::Continuation)]
    );
    let per_segment: Vec<u64> = read.segments.iter().map(|s| s.records).collect();
    assert_eq!(per_segment, [6, 2]);
    assert_eq!(read.records, expected_v4_records());
}

// ---- Version 5: written by the last build whose newest format is 5 ----

/// What the format 5 build wrote (see golden/README.md), in order: the
/// first run's records in segment 0, the second run's in segment 1. The
/// config has a routes promise and the member an endpoint and metadata;
/// both read back with the default load settings.
fn expected_v5_records() -> Vec<Record> {
    let g = || "g".to_owned();
    let config = GroupConfig {
        routes_valid_ms: 500,
        ..expected_config(2)
    };
    let member = Member {
        endpoint: Some("10.0.0.5:8080".into()),
        metadata: [("zone".to_owned(), "a".to_owned())].into(),
        ..expected_member()
    };
    // Bound 430 ms after the first run started.
    let binding = Binding {
        at_ms: 430,
        ..expected_binding(2)
    };
    let target: BTreeMap<Slot, SlotTarget> = [(
        Slot::named("a"),
        SlotTarget {
            active: orders_0_to_3(),
            learner: BTreeSet::new(),
            standby: BTreeSet::new(),
        },
    )]
    .into();
    let state = Group {
        config: config.clone(),
        members: [(Slot::named("a"), member.clone())].into(),
        routes_epoch: 4,
        ..v4_snapshot_state(&binding, &target)
    };
    vec![
        Record::GroupConfigured { group: g(), config },
        Record::AssignorBound {
            group: g(),
            binding,
        },
        Record::GroupEpochBumped {
            group: g(),
            epoch: 1,
        },
        Record::MemberJoined {
            group: g(),
            slot: Slot::named("a"),
            member,
        },
        Record::GroupEpochBumped {
            group: g(),
            epoch: 2,
        },
        Record::TargetInstalled {
            group: g(),
            epoch: 2,
            target: target.into(),
        },
        Record::MemberReconciled {
            group: g(),
            slot: Slot::named("a"),
            assignment: reconciled(),
        },
        Record::GroupSnapshot {
            group: g(),
            state: Box::new(state),
        },
    ]
}

#[test]
fn a_version_5_log_of_the_format_5_build_reads_back_exactly() {
    let read = read_golden("v5");
    assert_eq!(read.head, Some(1));
    let kinds: Vec<_> = read.segments.iter().map(|s| s.kind).collect();
    assert_eq!(
        kinds,
        [Some(SegmentKind::Base), Some(SegmentKind::Continuation)]
    );
    let per_segment: Vec<u64> = read.segments.iter().map(|s| s.records).collect();
    assert_eq!(per_segment, [5, 3]);
    assert_eq!(read.records, expected_v5_records());
}

// ---- Version 6: written by the last build whose newest format is 6 ----

/// What the format 6 build wrote (see golden/README.md), in the same
/// order as version 5's: its config has load settings as well as a routes
/// promise, and reads back with no labels; the snapshot with no shadow.
fn expected_v6_records() -> Vec<Record> {
    let config = GroupConfig {
        load_unit: Some("records/s".into()),
        load_half_life_ms: 10_000,
        ..expected_config(2)
    };
    // Bound 124 ms after the first run started.
    let binding = Binding {
        at_ms: 124,
        ..expected_binding(2)
    };
    let mut records = expected_v5_records();
    for record in &mut records {
        match record {
            Record::GroupConfigured { config: c, .. } => {
                *c = GroupConfig {
                    routes_valid_ms: c.routes_valid_ms,
                    ..config.clone()
                }
            }
            Record::AssignorBound { binding: b, .. } => *b = binding.clone(),
            Record::GroupSnapshot { state, .. } => {
                state.config = GroupConfig {
                    routes_valid_ms: state.config.routes_valid_ms,
                    ..config.clone()
                };
                state.bindings = [binding.clone()].into();
            }
            _ => {}
        }
    }
    records
}

#[test]
fn a_version_6_log_of_the_format_6_build_reads_back_exactly() {
    let read = read_golden("v6");
    assert_eq!(read.head, Some(1));
    let kinds: Vec<_> = read.segments.iter().map(|s| s.kind).collect();
    assert_eq!(
        kinds,
        [Some(SegmentKind::Base), Some(SegmentKind::Continuation)]
    );
    let per_segment: Vec<u64> = read.segments.iter().map(|s| s.records).collect();
    assert_eq!(per_segment, [5, 3]);
    let expected = expected_v6_records();
    assert_eq!(read.records, expected);
    let Some(Record::GroupSnapshot { state, .. }) = expected.last() else {
        unreachable!("the second run ends with a snapshot")
    };
    assert!(state.config.labels.is_empty() && state.shadow.is_none());
    assert_eq!(state.config.routes_valid_ms, 500);
}
