//! Reading frames of older format versions: the shapes those versions gave
//! the records whose payload has changed since, and their conversion to
//! today's records. It owns nothing else; a record type whose payload never
//! changed decodes as today's.
//!
//! - Version 1: `Group` had no `bindings`.
//! - Version 2: `GroupConfig` had no `assignor_limits`, `fallback_assignor`
//!   or `member_token_sha256`, and `Binding` no `limits` or `fallback`.
//! - Version 3: `Group` had no `handovers`.
//! - Version 4: `Member` had no `endpoint` or `metadata`, `GroupConfig` no
//!   `routes_valid_ms` or `reader_token_sha256`, `Group` no
//!   `routes_epoch`, and there was no `MemberEndpointChanged`.
//! - Version 5: `GroupConfig` had no load settings (`v5.rs`).
//! - Version 6: `GroupConfig` had no `labels`, `Group` no `shadow`, and
//!   there was no `ShadowBound` (`v6.rs`).
//!
//! It also writes versions 4 ([`encode_v4`]), 5 (`v5::encode_v5`) and 6
//! (`v6::encode_v6`): a cluster whose feature level is still one of them
//! (a rolling upgrade under way) frames today's records in that version's
//! shapes, which its older nodes read.
//!
//! Postcard is not self-describing, so each old shape is spelled out field
//! for field, in order. An enum variant is written as its index (a varint,
//! as a `u32`), which the `variant` fields read and check.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::record_type::RecordType;
use crate::protocol::group::{
    Binding, CallLimits, Group, GroupConfig, LearnerMode, Member, Millis, Record, Slot, SlotTarget,
    Task, TopicConfig, defaults, holdings_by_slot,
};
use crate::protocol::reconcile::Holdings;

mod v5;
mod v6;

#[cfg(test)]
pub(super) use v5::{ConfiguredV5, SnapshotV5};
pub(super) use v5::{GroupConfigV5, encode_v5};
pub(super) use v6::encode_v6;
#[cfg(test)]
pub(super) use v6::{ConfiguredV6, SnapshotV6};

/// Decodes the payload of a frame of format `version` (older than today's)
/// holding a record of type `kind`.
pub(super) fn decode(
    version: u8,
    kind: RecordType,
    payload: &[u8],
) -> postcard::Result<(Record, &[u8])> {
    match (version, kind) {
        (_, RecordType::ShadowBound) => Err(postcard::Error::DeserializeBadEnum),
        (6, kind) => v6::decode(kind, payload),
        (5, kind) => v5::decode(kind, payload),
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
        (3 | 4, RecordType::GroupConfigured) => {
            let (old, rest) = postcard::take_from_bytes::<ConfiguredV4>(payload)?;
            if old.variant != GROUP_CONFIGURED_VARIANT {
                return Err(postcard::Error::DeserializeBadEnum);
            }
            let record = Record::GroupConfigured {
                group: old.group,
                config: old.config.into(),
            };
            Ok((record, rest))
        }
        (_, RecordType::MemberJoined) => {
            let (old, rest) = postcard::take_from_bytes::<JoinedV4>(payload)?;
            if old.variant != MEMBER_JOINED_VARIANT {
                return Err(postcard::Error::DeserializeBadEnum);
            }
            let record = Record::MemberJoined {
                group: old.group,
                slot: old.slot,
                member: old.member.into(),
            };
            Ok((record, rest))
        }
        (_, RecordType::MemberEndpointChanged) => Err(postcard::Error::DeserializeBadEnum),
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
        (4, RecordType::GroupSnapshot) => {
            let (old, rest) = postcard::take_from_bytes::<SnapshotV4>(payload)?;
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

/// The variant index postcard writes for `GroupConfigured`, `MemberJoined`,
/// `GroupSnapshot` and `AssignorBound` (their place in `Record`).
pub(super) const GROUP_CONFIGURED_VARIANT: u32 = 0;
const MEMBER_JOINED_VARIANT: u32 = 1;
pub(super) const GROUP_SNAPSHOT_VARIANT: u32 = 9;
const ASSIGNOR_BOUND_VARIANT: u32 = 10;

pub(super) fn snapshot(
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
        GroupConfigV4 {
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
        .into()
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
    pub members: BTreeMap<Slot, MemberV4>,
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
    pub members: BTreeMap<Slot, MemberV4>,
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
    pub config: GroupConfigV4,
    pub group_epoch: u64,
    pub target_epoch: u64,
    pub members: BTreeMap<Slot, MemberV4>,
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
        GroupV4 {
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
            bindings: old.bindings,
            handovers: Default::default(),
        }
        .into()
    }
}

impl From<GroupV2> for Group {
    fn from(old: GroupV2) -> Self {
        GroupV3 {
            name: old.name,
            config: GroupConfigV4::from(GroupConfig::from(old.config)),
            group_epoch: old.group_epoch,
            target_epoch: old.target_epoch,
            members: old.members,
            target: old.target,
            holdings: old.holdings,
            fenced_member_ids: old.fenced_member_ids,
            member_ids_issued: old.member_ids_issued,
            dynamic_only: old.dynamic_only,
            snapshot_epoch: old.snapshot_epoch,
            bindings: old.bindings.into_iter().map(Binding::from).collect(),
        }
        .into()
    }
}

#[derive(Deserialize, Serialize)]
pub(super) struct ConfiguredV4 {
    pub variant: u32,
    pub group: String,
    pub config: GroupConfigV4,
}

#[derive(Deserialize, Serialize)]
pub(super) struct JoinedV4 {
    pub variant: u32,
    pub group: String,
    pub slot: Slot,
    pub member: MemberV4,
}

#[derive(Deserialize, Serialize)]
pub(super) struct SnapshotV4 {
    pub variant: u32,
    pub group: String,
    pub state: GroupV4,
}

/// `Member` as format versions 1 to 4 wrote it: no endpoint or metadata.
#[derive(Clone, Deserialize, Serialize)]
pub(super) struct MemberV4 {
    pub member_id: String,
    pub name: Option<String>,
    pub topics: std::collections::BTreeSet<String>,
    pub rack: Option<String>,
    pub capacity: u32,
    pub away: bool,
    pub draining: bool,
}

impl From<MemberV4> for Member {
    fn from(old: MemberV4) -> Self {
        Member {
            member_id: old.member_id,
            name: old.name,
            topics: old.topics,
            rack: old.rack,
            capacity: old.capacity,
            away: old.away,
            draining: old.draining,
            endpoint: None,
            metadata: BTreeMap::new(),
        }
    }
}

impl From<&Member> for MemberV4 {
    /// Version 4 has no place for the endpoint and metadata: a cluster at
    /// that level refuses them before any record carries them.
    fn from(member: &Member) -> Self {
        MemberV4 {
            member_id: member.member_id.clone(),
            name: member.name.clone(),
            topics: member.topics.clone(),
            rack: member.rack.clone(),
            capacity: member.capacity,
            away: member.away,
            draining: member.draining,
        }
    }
}

/// `GroupConfig` as format versions 3 and 4 wrote it: no routes promise or
/// reader token.
#[derive(Clone, Deserialize, Serialize)]
pub(super) struct GroupConfigV4 {
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
    pub assignor_limits: CallLimits,
    pub fallback_assignor: Option<String>,
    pub member_token_sha256: Option<String>,
}

impl From<GroupConfigV4> for GroupConfig {
    fn from(old: GroupConfigV4) -> Self {
        GroupConfigV5 {
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
            assignor_limits: old.assignor_limits,
            fallback_assignor: old.fallback_assignor,
            member_token_sha256: old.member_token_sha256,
            routes_valid_ms: defaults::routes_valid_ms(),
            reader_token_sha256: None,
        }
        .into()
    }
}

impl From<GroupConfig> for GroupConfigV4 {
    /// Without the routes promise and the reader token, which a cluster at
    /// level 4 refuses to set.
    fn from(config: GroupConfig) -> Self {
        GroupConfigV4 {
            topics: config.topics,
            assignor: config.assignor,
            params: config.params,
            session_timeout_ms: config.session_timeout_ms,
            registration_timeout_ms: config.registration_timeout_ms,
            expansion_timeout_ms: config.expansion_timeout_ms,
            heartbeat_interval_ms: config.heartbeat_interval_ms,
            learners: config.learners,
            acceptable_recovery_lag: config.acceptable_recovery_lag,
            max_learners: config.max_learners,
            probing_interval_ms: config.probing_interval_ms,
            scale_down_timeout_ms: config.scale_down_timeout_ms,
            assignor_limits: config.assignor_limits,
            fallback_assignor: config.fallback_assignor,
            member_token_sha256: config.member_token_sha256,
        }
    }
}

/// `Group` as format version 4 wrote it: no `routes_epoch`, and its
/// members and config in their version 4 shapes.
#[derive(Deserialize, Serialize)]
pub(super) struct GroupV4 {
    pub name: String,
    pub config: GroupConfigV4,
    pub group_epoch: u64,
    pub target_epoch: u64,
    pub members: BTreeMap<Slot, MemberV4>,
    pub target: BTreeMap<Slot, SlotTarget>,
    #[serde(with = "holdings_by_slot")]
    pub holdings: Holdings<Task>,
    pub fenced_member_ids: VecDeque<String>,
    pub member_ids_issued: u64,
    pub dynamic_only: bool,
    pub snapshot_epoch: u64,
    pub bindings: VecDeque<Binding>,
    pub handovers: std::collections::BTreeSet<Slot>,
}

impl From<GroupV4> for Group {
    /// With the routing table's epoch at 0: a watcher that held a later
    /// one takes the table it is answered (docs/routing.md).
    fn from(old: GroupV4) -> Self {
        Group {
            name: old.name,
            config: old.config.into(),
            group_epoch: old.group_epoch,
            target_epoch: old.target_epoch,
            members: old
                .members
                .into_iter()
                .map(|(s, m)| (s, m.into()))
                .collect(),
            target: old.target.into(),
            holdings: old.holdings,
            fenced_member_ids: old.fenced_member_ids,
            member_ids_issued: old.member_ids_issued,
            dynamic_only: old.dynamic_only,
            snapshot_epoch: old.snapshot_epoch,
            bindings: old.bindings,
            handovers: old.handovers,
            routes_epoch: 0,
            shadow: None,
        }
    }
}

impl From<&Group> for GroupV4 {
    fn from(group: &Group) -> Self {
        GroupV4 {
            name: group.name.clone(),
            config: group.config.clone().into(),
            group_epoch: group.group_epoch,
            target_epoch: group.target_epoch,
            members: group
                .members
                .iter()
                .map(|(slot, member)| (slot.clone(), member.into()))
                .collect(),
            target: (*group.target).clone(),
            holdings: group.holdings.clone(),
            fenced_member_ids: group.fenced_member_ids.clone(),
            member_ids_issued: group.member_ids_issued,
            dynamic_only: group.dynamic_only,
            snapshot_epoch: group.snapshot_epoch,
            bindings: group.bindings.clone(),
            handovers: group.handovers.clone(),
        }
    }
}

/// Writes `record`'s payload as format version 4 did. A
/// `MemberEndpointChanged` or `ShadowBound`, and an endpoint, metadata,
/// routes promise, reader token, load settings, labels or a shadow, have
/// no version 4 shape: the runtime refuses them while a cluster is at
/// level 4, so meeting one here is a bug.
pub(super) fn encode_v4<W: std::io::Write>(record: &Record, out: W) -> postcard::Result<W> {
    v6::assert_nothing_of_v7(record, 4);
    match record {
        Record::GroupConfigured { group, config } => {
            assert!(
                config.reader_token_sha256.is_none(),
                "a reader token at format level 4"
            );
            assert!(
                config.load_settings_default(),
                "load settings at format level 4"
            );
            let old = ConfiguredV4 {
                variant: GROUP_CONFIGURED_VARIANT,
                group: group.clone(),
                config: config.clone().into(),
            };
            postcard::to_io(&old, out)
        }
        Record::MemberJoined {
            group,
            slot,
            member,
        } => {
            assert!(
                member.endpoint.is_none() && member.metadata.is_empty(),
                "an endpoint at format level 4"
            );
            let old = JoinedV4 {
                variant: MEMBER_JOINED_VARIANT,
                group: group.clone(),
                slot: slot.clone(),
                member: member.into(),
            };
            postcard::to_io(&old, out)
        }
        Record::GroupSnapshot { group, state } => {
            let old = SnapshotV4 {
                variant: GROUP_SNAPSHOT_VARIANT,
                group: group.clone(),
                state: (&**state).into(),
            };
            postcard::to_io(&old, out)
        }
        Record::MemberEndpointChanged { .. } => {
            panic!("a MemberEndpointChanged record at format level 4")
        }
        record => postcard::to_io(record, out),
    }
}
