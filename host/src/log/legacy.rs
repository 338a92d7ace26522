//! Reading frames of older format versions: the shapes those versions gave
//! the records whose payload has changed since, and their conversion to
//! today's records. It owns nothing else; a record type whose payload never
//! changed decodes as today's.
//!
//! - Version 1: `Group` had no `bindings`.
//! - Version 2: `GroupConfig` had no `assignor_limits`, `fallback_assignor`
//!   or `member_token_sha256`, and `Binding` no `limits` or `fallback`.
//! - Version 3: `Group` had no `handovers`.
//!
//! Postcard is not self-describing, so each old shape is spelled out field
//! for field, in order. An enum variant is written as its index (a varint,
//! as a `u32`), which the `variant` fields read and check.

use std::collections::{BTreeMap, VecDeque};

use serde::Deserialize;

use super::record_type::RecordType;
use crate::protocol::group::{
    Binding, CallLimits, Group, GroupConfig, LearnerMode, Member, Millis, Record, Slot, SlotTarget,
    Task, TopicConfig, holdings_by_slot,
};
use crate::protocol::reconcile::Holdings;

/// Decodes the payload of a frame of format `version` (older than today's)
/// holding a record of type `kind`.
pub(super) fn decode(
    version: u8,
    kind: RecordType,
    payload: &[u8],
) -> postcard::Result<(Record, &[u8])> {
    match (version, kind) {
        (1 | 2, RecordType::GroupConfigured) => {
            let (old, rest) = postcard::take_from_bytes::<ConfiguredV2>(payload)?;
            if old.variant != GROUP_CONFIGURED_VARIANT {
                return Err(postcard::Error::DeserializeBadEnum);
            }
            let record = Record::GroupConfigured {
                group: old.group,
                config: old.config.into(),
            };
            Ok((record, rest))
        }
        (1, RecordType::GroupSnapshot) => {
            let (old, rest) = postcard::take_from_bytes::<SnapshotV1>(payload)?;
            snapshot(old.variant, old.group, old.state.into(), rest)
        }
        (2, RecordType::GroupSnapshot) => {
            let (old, rest) = postcard::take_from_bytes::<SnapshotV2>(payload)?;
            snapshot(old.variant, old.group, old.state.into(), rest)
        }
        (3, RecordType::GroupSnapshot) => {
            let (old, rest) = postcard::take_from_bytes::<SnapshotV3>(payload)?;
            snapshot(old.variant, old.group, old.state.into(), rest)
        }
        (2, RecordType::AssignorBound) => {
            let (old, rest) = postcard::take_from_bytes::<BoundV2>(payload)?;
            if old.variant != ASSIGNOR_BOUND_VARIANT {
                return Err(postcard::Error::DeserializeBadEnum);
            }
            let record = Record::AssignorBound {
                group: old.group,
                binding: old.binding.into(),
            };
            Ok((record, rest))
        }
        _ => postcard::take_from_bytes::<Record>(payload),
    }
}

/// The variant index postcard writes for `GroupConfigured`, `GroupSnapshot`
/// and `AssignorBound` (their place in `Record`).
const GROUP_CONFIGURED_VARIANT: u32 = 0;
const GROUP_SNAPSHOT_VARIANT: u32 = 9;
const ASSIGNOR_BOUND_VARIANT: u32 = 10;

fn snapshot(
    variant: u32,
    group: String,
    state: Group,
    rest: &[u8],
) -> postcard::Result<(Record, &[u8])> {
    if variant != GROUP_SNAPSHOT_VARIANT {
        return Err(postcard::Error::DeserializeBadEnum);
    }
    Ok((
        Record::GroupSnapshot {
            group,
            state: Box::new(state),
        },
        rest,
    ))
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub(super) struct ConfiguredV2 {
    pub variant: u32,
    pub group: String,
    pub config: GroupConfigV2,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub(super) struct SnapshotV1 {
    pub variant: u32,
    pub group: String,
    pub state: GroupV1,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub(super) struct SnapshotV2 {
    pub variant: u32,
    pub group: String,
    pub state: GroupV2,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub(super) struct SnapshotV3 {
    pub variant: u32,
    pub group: String,
    pub state: GroupV3,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub(super) struct BoundV2 {
    pub variant: u32,
    pub group: String,
    pub binding: BindingV2,
}

/// `GroupConfig` as format versions 1 and 2 wrote it.
#[derive(Clone, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub(super) struct GroupConfigV2 {
    pub topics: Vec<TopicConfig>,
    pub assignor: String,
    pub params: BTreeMap<String, String>,
    pub session_timeout_ms: u64,
    pub registration_timeout_ms: u64,
    pub expansion_timeout_ms: u64,
    pub heartbeat_interval_ms: u64,
    pub learners: LearnerMode,
    pub acceptable_recovery_lag: u64,
    pub max_learners: u32,
    pub probing_interval_ms: u64,
    pub scale_down_timeout_ms: u64,
}

impl From<GroupConfigV2> for GroupConfig {
    fn from(old: GroupConfigV2) -> Self {
        GroupConfig {
            topics: old.topics,
            assignor: old.assignor,
            params: old.params,
            session_timeout_ms: old.session_timeout_ms,
            registration_timeout_ms: old.registration_timeout_ms,
            expansion_timeout_ms: old.expansion_timeout_ms,
            heartbeat_interval_ms: old.heartbeat_interval_ms,
            learners: old.learners,
            acceptable_recovery_lag: old.acceptable_recovery_lag,
            max_learners: old.max_learners,
            probing_interval_ms: old.probing_interval_ms,
            scale_down_timeout_ms: old.scale_down_timeout_ms,
            assignor_limits: CallLimits::default(),
            fallback_assignor: None,
            member_token_sha256: None,
        }
    }
}

/// `Binding` as format version 2 wrote it.
#[derive(Clone, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub(super) struct BindingV2 {
    pub seq: u64,
    pub assignor: String,
    pub params: BTreeMap<String, String>,
    pub epoch: u64,
    pub at_ms: Millis,
    pub rollback_to: Option<u64>,
}

impl From<BindingV2> for Binding {
    fn from(old: BindingV2) -> Self {
        Binding {
            seq: old.seq,
            assignor: old.assignor,
            params: old.params,
            limits: CallLimits::default(),
            fallback: None,
            epoch: old.epoch,
            at_ms: old.at_ms,
            rollback_to: old.rollback_to,
        }
    }
}

/// `Group` as format version 1 wrote it: no `bindings`.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub(super) struct GroupV1 {
    pub name: String,
    pub config: GroupConfigV2,
    pub group_epoch: u64,
    pub target_epoch: u64,
    pub members: BTreeMap<Slot, Member>,
    pub target: BTreeMap<Slot, SlotTarget>,
    #[serde(with = "holdings_by_slot")]
    pub holdings: Holdings<Task>,
    pub fenced_member_ids: VecDeque<String>,
    pub member_ids_issued: u64,
    pub dynamic_only: bool,
    pub snapshot_epoch: u64,
}

/// `Group` as format version 2 wrote it.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub(super) struct GroupV2 {
    pub name: String,
    pub config: GroupConfigV2,
    pub group_epoch: u64,
    pub target_epoch: u64,
    pub members: BTreeMap<Slot, Member>,
    pub target: BTreeMap<Slot, SlotTarget>,
    #[serde(with = "holdings_by_slot")]
    pub holdings: Holdings<Task>,
    pub fenced_member_ids: VecDeque<String>,
    pub member_ids_issued: u64,
    pub dynamic_only: bool,
    pub snapshot_epoch: u64,
    pub bindings: VecDeque<BindingV2>,
}

impl From<GroupV1> for Group {
    /// With an empty binding history: the next bind records the current
    /// binding first.
    fn from(old: GroupV1) -> Self {
        GroupV2 {
            name: old.name,
            config: old.config,
            group_epoch: old.group_epoch,
            target_epoch: old.target_epoch,
            members: old.members,
            target: old.target,
            holdings: old.holdings,
            fenced_member_ids: old.fenced_member_ids,
            member_ids_issued: old.member_ids_issued,
            dynamic_only: old.dynamic_only,
            snapshot_epoch: old.snapshot_epoch,
            bindings: VecDeque::new(),
        }
        .into()
    }
}

/// `Group` as format version 3 wrote it: no `handovers`.
#[derive(Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
pub(super) struct GroupV3 {
    pub name: String,
    pub config: GroupConfig,
    pub group_epoch: u64,
    pub target_epoch: u64,
    pub members: BTreeMap<Slot, Member>,
    pub target: BTreeMap<Slot, SlotTarget>,
    #[serde(with = "holdings_by_slot")]
    pub holdings: Holdings<Task>,
    pub fenced_member_ids: VecDeque<String>,
    pub member_ids_issued: u64,
    pub dynamic_only: bool,
    pub snapshot_epoch: u64,
    pub bindings: VecDeque<Binding>,
}

impl From<GroupV3> for Group {
    /// With no handover under way: version 3 did not log them.
    fn from(old: GroupV3) -> Self {
        Group {
            name: old.name,
            config: old.config,
            group_epoch: old.group_epoch,
            target_epoch: old.target_epoch,
            members: old.members,
            target: old.target.into(),
            holdings: old.holdings,
            fenced_member_ids: old.fenced_member_ids,
            member_ids_issued: old.member_ids_issued,
            dynamic_only: old.dynamic_only,
            snapshot_epoch: old.snapshot_epoch,
            bindings: old.bindings,
            handovers: Default::default(),
        }
    }
}

impl From<GroupV2> for Group {
    fn from(old: GroupV2) -> Self {
        Group {
            name: old.name,
            config: old.config.into(),
            group_epoch: old.group_epoch,
            target_epoch: old.target_epoch,
            members: old.members,
            target: old.target.into(),
            holdings: old.holdings,
            fenced_member_ids: old.fenced_member_ids,
            member_ids_issued: old.member_ids_issued,
            dynamic_only: old.dynamic_only,
            snapshot_epoch: old.snapshot_epoch,
            bindings: old.bindings.into_iter().map(Binding::from).collect(),
            handovers: Default::default(),
        }
    }
}
