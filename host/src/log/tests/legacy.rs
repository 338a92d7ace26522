//! Frames of older format versions, framed here from the shapes those
//! versions gave their records (`legacy.rs` spells them out field by
//! field), still read: configs and bindings with no limits, fallback or
//! member token; version 1 snapshots with an empty binding history;
//! version 3 snapshots with no handover; version 5 configs and snapshots
//! with the default load settings; version 6 configs with no labels and
//! snapshots with no shadow; every other record as it always was. A
//! `ShadowBound` frame of a version before it existed is refused. The
//! bytes real old writers wrote are pinned by `golden.rs`.

use super::super::frame::{Decoded, FORMAT_VERSION, RecordType, decode};
use super::super::legacy::{
    BindingV2, BoundV2, ConfiguredV2, ConfiguredV5, ConfiguredV6, GroupConfigV2, GroupV1, GroupV2,
    GroupV3, SnapshotV1, SnapshotV2, SnapshotV3, SnapshotV5, SnapshotV6,
};
use super::fixtures::*;
use crate::protocol::group::{Binding, CallLimits, Group, GroupConfig, Record};

/// [`config`] as versions 1 and 2 wrote it.
fn old_config(today: &GroupConfig) -> GroupConfigV2 {
    GroupConfigV2 {
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
    }
}

/// `b` as version 2 wrote it.
fn old_binding(b: &Binding) -> BindingV2 {
    BindingV2 {
        seq: b.seq,
        assignor: b.assignor.clone(),
        params: b.params.clone(),
        epoch: b.epoch,
        at_ms: b.at_ms,
        rollback_to: b.rollback_to,
    }
}

/// The state of [`every_record_type`]'s first snapshot: its config is
/// [`config`], which every old version can hold.
fn snapshot_state() -> Group {
    let Record::GroupSnapshot { state, .. } = every_record_type().remove(9) else {
        unreachable!()
    };
    assert_eq!(state.config, config());
    *state
}

#[test]
fn configs_of_versions_1_and_2_read_with_no_limits_fallback_or_token() {
    let today = config();
    for version in [1, 2] {
        let configured = ConfiguredV2 {
            variant: 0,
            group: "g".into(),
            config: old_config(&today),
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
    }
}

#[test]
fn records_whose_payload_never_changed_read_as_today_in_versions_1_and_2() {
    for version in [1, 2] {
        let bumped = every_record_type().remove(4);
        let bytes = old_frame(
            version,
            RecordType::GroupEpochBumped,
            &postcard::to_allocvec(&bumped).unwrap(),
        );
        assert_eq!(decoded(&bytes), bumped);
    }
}

#[test]
fn a_version_1_snapshot_reads_with_an_empty_binding_history() {
    let state = snapshot_state();
    let v1 = SnapshotV1 {
        variant: 9,
        group: "g".into(),
        state: GroupV1 {
            name: state.name.clone(),
            config: old_config(&state.config),
            group_epoch: state.group_epoch,
            target_epoch: state.target_epoch,
            members: state
                .members
                .iter()
                .map(|(s, m)| (s.clone(), m.into()))
                .collect(),
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
}

#[test]
fn a_version_2_snapshot_reads_with_its_config_and_bindings_widened() {
    let state = snapshot_state();
    let v2 = SnapshotV2 {
        variant: 9,
        group: "g".into(),
        state: GroupV2 {
            name: state.name.clone(),
            config: old_config(&state.config),
            group_epoch: state.group_epoch,
            target_epoch: state.target_epoch,
            members: state
                .members
                .iter()
                .map(|(s, m)| (s.clone(), m.into()))
                .collect(),
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
            state: Box::new(state),
        }
    );
}

#[test]
fn a_version_3_snapshot_reads_with_no_handover() {
    let state = snapshot_state();
    let v3 = SnapshotV3 {
        variant: 9,
        group: "g".into(),
        state: GroupV3 {
            name: state.name.clone(),
            config: state.config.clone().into(),
            group_epoch: state.group_epoch,
            target_epoch: state.target_epoch,
            members: state
                .members
                .iter()
                .map(|(s, m)| (s.clone(), m.into()))
                .collect(),
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
            state: Box::new(state),
        }
    );
}

#[test]
fn a_version_2_binding_reads_with_no_limits_or_fallback() {
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
}

#[test]
fn a_version_5_config_and_snapshot_read_with_the_default_load_settings() {
    let today = config();
    let configured = ConfiguredV5 {
        variant: 0,
        group: "g".into(),
        config: today.clone().into(),
    };
    let bytes = old_frame(
        5,
        RecordType::GroupConfigured,
        &postcard::to_allocvec(&configured).unwrap(),
    );
    assert_eq!(
        decoded(&bytes),
        Record::GroupConfigured {
            group: "g".into(),
            config: today,
        }
    );

    let state = snapshot_state();
    let v5 = SnapshotV5 {
        variant: 9,
        group: "g".into(),
        state: (&state).into(),
    };
    let bytes = old_frame(
        5,
        RecordType::GroupSnapshot,
        &postcard::to_allocvec(&v5).unwrap(),
    );
    assert_eq!(
        decoded(&bytes),
        Record::GroupSnapshot {
            group: "g".into(),
            state: Box::new(state),
        }
    );
}

/// A version 5 frame of a record whose payload did not change in version
/// 6 reads as today's, endpoints included.
#[test]
fn records_whose_payload_did_not_change_read_as_today_in_version_5() {
    for record in [
        every_record_type().remove(1),
        every_record_type().remove(14),
    ] {
        let bytes = old_frame(
            5,
            RecordType::of(&record),
            &postcard::to_allocvec(&record).unwrap(),
        );
        assert_eq!(decoded(&bytes), record);
    }
}

#[test]
fn a_version_6_config_and_snapshot_read_with_no_labels_or_shadow() {
    let today = with_load_settings(config());
    let configured = ConfiguredV6 {
        variant: 0,
        group: "g".into(),
        config: today.clone().into(),
    };
    let bytes = old_frame(
        6,
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

    let mut state = snapshot_state();
    state.config = today;
    state.routes_epoch = 3;
    let v6 = SnapshotV6 {
        variant: 9,
        group: "g".into(),
        state: (&state).into(),
    };
    let bytes = old_frame(
        6,
        RecordType::GroupSnapshot,
        &postcard::to_allocvec(&v6).unwrap(),
    );
    assert_eq!(
        decoded(&bytes),
        Record::GroupSnapshot {
            group: "g".into(),
            state: Box::new(state),
        }
    );
}

/// A version 6 frame of a record whose payload did not change in version
/// 7 reads as today's, endpoints and bindings included.
#[test]
fn records_whose_payload_did_not_change_read_as_today_in_version_6() {
    for record in [
        every_record_type().remove(1),
        every_record_type().remove(10),
        every_record_type().remove(14),
    ] {
        let bytes = old_frame(
            6,
            RecordType::of(&record),
            &postcard::to_allocvec(&record).unwrap(),
        );
        assert_eq!(decoded(&bytes), record);
    }
}

/// No version before 7 had a `ShadowBound` record: a frame that claims
/// one is refused, not read as today's.
#[test]
fn a_shadow_binding_framed_at_a_version_before_7_is_refused() {
    let record = every_record_type().pop().unwrap();
    assert!(matches!(record, Record::ShadowBound { .. }));
    for version in 1..=6 {
        let bytes = old_frame(
            version,
            RecordType::ShadowBound,
            &postcard::to_allocvec(&record).unwrap(),
        );
        match decode(&bytes) {
            Decoded::Unreadable { reason, .. } => {
                assert!(reason.starts_with("payload does not decode"), "{reason}")
            }
            other => panic!("version {version}: {other:?}"),
        }
    }
}

/// A version this build does not know is refused, not a guess.
#[test]
fn a_version_newer_than_this_build_is_refused() {
    let bytes = old_frame(
        FORMAT_VERSION + 1,
        RecordType::GroupEpochBumped,
        &postcard::to_allocvec(&every_record_type().remove(4)).unwrap(),
    );
    assert!(matches!(decode(&bytes), Decoded::Unreadable { .. }));
}
