//! One frame on its own: every record type round-trips, arbitrary or
//! damaged bytes are never taken for a record, the documented bytes and
//! each type's numbers are pinned, and a frame's version is read and
//! written only within what the process supports.

use proptest::prelude::*;

use super::super::frame::{Decoded, FRAME_HEADER_BYTES, decode, encode};
use super::fixtures::*;
use crate::protocol::group::Record;

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
    // version 7, type 5; payload: variant 4, "g" (length 1), 300 as a varint.
    let body = [0x07, 0x05, 0x04, 0x01, b'g', 0xac, 0x02];
    let mut expected = (body.len() as u32).to_le_bytes().to_vec();
    expected.extend_from_slice(&crc32c::crc32c(&body).to_le_bytes());
    expected.extend_from_slice(&body);
    assert_eq!(bytes, expected);
    assert_eq!(
        bytes,
        [
            0x07, 0, 0, 0, 0x4e, 0x46, 0x22, 0x22, 0x07, 0x05, 0x04, 0x01, b'g', 0xac, 0x02
        ]
    );
}

/// The postcard payload starts with the variant's index in `Record`'s
/// declaration order, which is part of the format: reordering the enum's
/// variants would make old logs decode as other records (the type byte
/// check would refuse them).
#[test]
fn each_record_types_type_byte_and_variant_index_are_pinned() {
    let expected: [(u8, u8); 16] = [
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
        (14, 13), // MemberEndpointChanged
        (15, 14), // ShadowBound
    ];
    for (record, (type_byte, variant)) in every_record_type().iter().zip(expected) {
        let mut bytes = Vec::new();
        encode(record, &mut bytes);
        assert_eq!((bytes[9], bytes[10]), (type_byte, variant), "{record:?}");
    }
}

/// A frame of a version above what a process reads is refused with the
/// versions it reads, and read by one that reads it: the test-only
/// version 8 is version 7's payload under the next number.
#[test]
fn a_frame_version_is_read_only_up_to_the_readers_maximum() {
    use super::super::frame::{RecordType, TEST_FORMAT_VERSION, decode_up_to};
    let record = every_record_type().remove(4);
    let bytes = old_frame(
        TEST_FORMAT_VERSION,
        RecordType::of(&record),
        &postcard::to_allocvec(&record).unwrap(),
    );
    match decode_up_to(&bytes, 7) {
        Decoded::Unreadable { reason, .. } => assert!(
            reason.starts_with("format version 8 is newer than this assignd reads (1 to 7)"),
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
#[should_panic(expected = "format version 8 is not one this process writes")]
fn a_version_this_process_does_not_write_is_never_written() {
    let mut out = Vec::new();
    super::super::frame::encode_at(&every_record_type().remove(4), 8, &mut out);
}

/// `record` as a cluster at level 6 may hold it: no labels, no shadow;
/// `None` for a `ShadowBound`, which version 6 does not have.
fn as_at_level_6(record: &Record) -> Option<Record> {
    let mut record = record.clone();
    match &mut record {
        Record::ShadowBound { .. } => return None,
        Record::GroupConfigured { config, .. } => config.labels.clear(),
        Record::GroupSnapshot { state, .. } => {
            state.config.labels.clear();
            state.shadow = None;
        }
        _ => {}
    }
    Some(record)
}

/// Today's records at `version` (4 to 6), none of which have a
/// `ShadowBound`, framed at that version and read back as they were.
fn assert_written_at_version_read_back(records: Vec<Record>, version: u8) {
    assert!(records.len() < every_record_type().len());
    for record in records {
        let mut bytes = Vec::new();
        super::super::frame::encode_at(&record, version, &mut bytes);
        assert_eq!(bytes[8], version, "framed as version {version}: {record:?}");
        match decode(&bytes) {
            Decoded::Record { record: read, .. } => assert_eq!(read, record),
            other => panic!("{record:?}: {other:?}"),
        }
    }
}

/// A cluster still at level 6 (a rolling upgrade under way) writes
/// today's records in version 6's shapes, load settings included: framed
/// as version 6, and read back as they were.
#[test]
fn records_written_at_version_6_read_back_as_they_were() {
    let records: Vec<Record> = every_record_type()
        .iter()
        .filter_map(as_at_level_6)
        .collect();
    assert_eq!(records.len(), every_record_type().len() - 1);
    assert!(matches!(&records[0], Record::GroupConfigured { config, .. } if config.frozen));
    assert_written_at_version_read_back(records, 6);
}

/// Versions 4 to 6 have no place for labels, a shadow or a `ShadowBound`
/// record: the runtime refuses them below level 7, so writing one there
/// is a bug, whichever of them it is and whatever the older version.
#[test]
fn labels_and_shadows_are_never_written_below_version_7() {
    let records = every_record_type();
    let cases = [
        (&records[0], "labels"),
        (&records[13], "a shadow"),
        (&records[15], "a ShadowBound record"),
    ];
    let mut labels_only = records[13].clone();
    if let Record::GroupSnapshot { state, .. } = &mut labels_only {
        state.shadow = None;
    }
    for version in [4, 5, 6] {
        for (record, what) in cases.iter().copied().chain([(&labels_only, "labels")]) {
            let panicked = std::panic::catch_unwind(|| {
                super::super::frame::encode_at(record, version, &mut Vec::new())
            })
            .expect_err("a bug, caught");
            let message = panicked
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_default();
            assert_eq!(message, format!("{what} at format level {version}"));
        }
    }
}

/// `record` as a cluster at level 5 may hold it: nothing of version 7, no
/// load settings but the defaults.
fn as_at_level_5(record: &Record) -> Option<Record> {
    let mut record = as_at_level_6(record)?;
    match &mut record {
        Record::GroupConfigured { config, .. } => strip_load_settings(config),
        Record::GroupSnapshot { state, .. } => strip_load_settings(&mut state.config),
        _ => {}
    }
    Some(record)
}

fn strip_load_settings(config: &mut crate::protocol::group::GroupConfig) {
    let defaults = crate::protocol::group::GroupConfig::with_topics(Vec::new());
    config.load_unit = None;
    config.load_half_life_ms = defaults.load_half_life_ms;
    config.load_window_ms = defaults.load_window_ms;
    config.load_cooldown_ms = defaults.load_cooldown_ms;
    config.frozen = false;
}

/// A cluster still at level 5 (a rolling upgrade under way) writes
/// today's records in version 5's shapes: framed as version 5, and read
/// back as they were.
#[test]
fn records_written_at_version_5_read_back_as_they_were() {
    let records: Vec<Record> = every_record_type()
        .iter()
        .filter_map(as_at_level_5)
        .collect();
    assert_eq!(records.len(), every_record_type().len() - 1);
    assert_written_at_version_read_back(records, 5);
}

/// Version 5 has no place for load settings: the runtime refuses them
/// while the cluster is at level 5, so writing one there is a bug.
#[test]
#[should_panic(expected = "load settings at format level 5")]
fn load_settings_are_never_written_at_version_5() {
    let mut out = Vec::new();
    let configured = as_at_level_6(&every_record_type()[0]).unwrap();
    super::super::frame::encode_at(&configured, 5, &mut out);
}

/// `record` as a cluster at level 4 may hold it: none of what version 4
/// has no place for (an endpoint, metadata, a reader token, a routes
/// promise other than the default, the routes epoch, load settings,
/// labels, a shadow); `None` for a record type version 4 does not have.
fn as_at_level_4(record: &Record) -> Option<Record> {
    use crate::protocol::group::defaults;
    let strip_config = |config: &mut crate::protocol::group::GroupConfig| {
        config.reader_token_sha256 = None;
        config.routes_valid_ms = defaults::routes_valid_ms();
        strip_load_settings(config);
    };
    let strip_member = |member: &mut crate::protocol::group::Member| {
        member.endpoint = None;
        member.metadata.clear();
    };
    let mut record = as_at_level_6(record)?;
    match &mut record {
        Record::MemberEndpointChanged { .. } => return None,
        Record::GroupConfigured { config, .. } => strip_config(config),
        Record::MemberJoined { member, .. } => strip_member(member),
        Record::GroupSnapshot { state, .. } => {
            strip_config(&mut state.config);
            state.members.values_mut().for_each(strip_member);
            state.routes_epoch = 0;
        }
        _ => {}
    }
    Some(record)
}

/// A cluster still at level 4 (a rolling upgrade under way) writes
/// today's records in version 4's shapes: framed as version 4, and read
/// back (by this build, as by the previous release, whose shapes
/// `legacy.rs` spells) as they were.
#[test]
fn records_written_at_version_4_read_back_as_they_were() {
    let records: Vec<Record> = every_record_type()
        .iter()
        .filter_map(as_at_level_4)
        .collect();
    assert_eq!(records.len(), every_record_type().len() - 2);
    assert_written_at_version_read_back(records, 4);
}

/// Version 4 has no `MemberEndpointChanged`: the runtime refuses an
/// endpoint while the cluster is at level 4, so writing one there is a bug.
#[test]
#[should_panic(expected = "a MemberEndpointChanged record at format level 4")]
fn an_endpoint_change_is_never_written_at_version_4() {
    let mut out = Vec::new();
    let change = every_record_type().remove(14);
    super::super::frame::encode_at(&change, 4, &mut out);
}
