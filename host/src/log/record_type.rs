//! The record type byte of a frame: which [`Record`] variant its payload
//! holds. Both the frame codec (`frame.rs`) and the readers of older
//! payload shapes (`legacy.rs`) name records by it; it depends on neither.

use crate::protocol::group::Record;

/// The record type byte: which [`Record`] variant the payload holds. Stable
/// numbers; never reuse one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum RecordType {
    GroupConfigured = 1,
    MemberJoined = 2,
    MemberAway = 3,
    MemberRemoved = 4,
    GroupEpochBumped = 5,
    TargetInstalled = 6,
    MemberReconciled = 7,
    NameMapDropped = 8,
    MemberDraining = 9,
    GroupSnapshot = 10,
    AssignorBound = 11,
    HandoverStarted = 12,
    HandoverEnded = 13,
    MemberEndpointChanged = 14,
    ShadowBound = 15,
}

impl RecordType {
    pub fn of(record: &Record) -> Self {
        match record {
            Record::GroupConfigured { .. } => RecordType::GroupConfigured,
            Record::MemberJoined { .. } => RecordType::MemberJoined,
            Record::MemberAway { .. } => RecordType::MemberAway,
            Record::MemberRemoved { .. } => RecordType::MemberRemoved,
            Record::GroupEpochBumped { .. } => RecordType::GroupEpochBumped,
            Record::TargetInstalled { .. } => RecordType::TargetInstalled,
            Record::MemberReconciled { .. } => RecordType::MemberReconciled,
            Record::NameMapDropped { .. } => RecordType::NameMapDropped,
            Record::MemberDraining { .. } => RecordType::MemberDraining,
            Record::GroupSnapshot { .. } => RecordType::GroupSnapshot,
            Record::AssignorBound { .. } => RecordType::AssignorBound,
            Record::HandoverStarted { .. } => RecordType::HandoverStarted,
            Record::HandoverEnded { .. } => RecordType::HandoverEnded,
            Record::MemberEndpointChanged { .. } => RecordType::MemberEndpointChanged,
            Record::ShadowBound { .. } => RecordType::ShadowBound,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            RecordType::GroupConfigured => "GroupConfigured",
            RecordType::MemberJoined => "MemberJoined",
            RecordType::MemberAway => "MemberAway",
            RecordType::MemberRemoved => "MemberRemoved",
            RecordType::GroupEpochBumped => "GroupEpochBumped",
            RecordType::TargetInstalled => "TargetInstalled",
            RecordType::MemberReconciled => "MemberReconciled",
            RecordType::NameMapDropped => "NameMapDropped",
            RecordType::MemberDraining => "MemberDraining",
            RecordType::GroupSnapshot => "GroupSnapshot",
            RecordType::AssignorBound => "AssignorBound",
            RecordType::HandoverStarted => "HandoverStarted",
            RecordType::HandoverEnded => "HandoverEnded",
            RecordType::MemberEndpointChanged => "MemberEndpointChanged",
            RecordType::ShadowBound => "ShadowBound",
        }
    }

    pub(super) fn from_byte(byte: u8) -> Option<Self> {
        Some(match byte {
            1 => RecordType::GroupConfigured,
            2 => RecordType::MemberJoined,
            3 => RecordType::MemberAway,
            4 => RecordType::MemberRemoved,
            5 => RecordType::GroupEpochBumped,
            6 => RecordType::TargetInstalled,
            7 => RecordType::MemberReconciled,
            8 => RecordType::NameMapDropped,
            9 => RecordType::MemberDraining,
            10 => RecordType::GroupSnapshot,
            11 => RecordType::AssignorBound,
            12 => RecordType::HandoverStarted,
            13 => RecordType::HandoverEnded,
            14 => RecordType::MemberEndpointChanged,
            15 => RecordType::ShadowBound,
            _ => return None,
        })
    }
}
