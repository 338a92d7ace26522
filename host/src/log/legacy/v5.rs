//! Format version 5's shapes, read and written: `GroupConfig` had no load
//! settings (`load_unit`, `load_half_life_ms`, `load_window_ms`,
//! `load_cooldown_ms`, `frozen`), so `GroupConfigured` and `GroupSnapshot`
//! payloads differ from today's; every other record is as today.
//!
//! A cluster whose feature level is still 5 (a rolling upgrade under way)
//! frames today's records in these shapes ([`encode_v5`]), which its
//! older nodes read. The runtime refuses load settings other than the
//! defaults (and what version 7 added) at that level, so nothing is
//! dropped.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::{GROUP_CONFIGURED_VARIANT, GROUP_SNAPSHOT_VARIANT, snapshot};
use crate::log::record_type::RecordType;
use crate::protocol::group::{
    Binding, CallLimits, Group, GroupConfig, LearnerMode, Member, Record, Slot, SlotTarget, Task,
    TopicConfig, defaults, holdings_by_slot,
};
use crate::protocol::reconcile::Holdings;

/// Decodes the payload of a version 5 frame holding a record of type
/// `kind`.
pub(in crate::log) fn decode(
    kind: RecordType,
    payload: &[u8],
) -> postcard::Result<(Record, &[u8])> {
    match kind {
        RecordType::GroupConfigured => {
            let (old, rest) = postcard::take_from_bytes::<ConfiguredV5>(payload)?;
            if old.variant != GROUP_CONFIGURED_VARIANT {
                return Err(postcard::Error::DeserializeBadEnum);
            }
            let record = Record::GroupConfigured {
                group: old.group,
                config: old.config.into(),
            };
            Ok((record, rest))
        }
        RecordType::GroupSnapshot => {
            let (old, rest) = postcard::take_from_bytes::<SnapshotV5>(payload)?;
            snapshot(old.variant, old.group, old.state.into(), rest)
        }
        _ => postcard::take_from_bytes::<Record>(payload),
    }
}

/// Writes `record`'s payload as format version 5 did. Load settings other
/// than the defaults, labels, a shadow and a `ShadowBound` record have no
/// version 5 shape: the runtime refuses them while a cluster is at level
/// 5, so meeting one here is a bug.
pub(in crate::log) fn encode_v5<W: std::io::Write>(record: &Record, out: W) -> postcard::Result<W> {
    super::v6::assert_nothing_of_v7(record, 5);
    match record {
        Record::GroupConfigured { group, config } => {
            assert!(
                config.load_settings_default(),
                "load settings at format level 5"
            );
            let old = ConfiguredV5 {
                variant: GROUP_CONFIGURED_VARIANT,
                group: group.clone(),
                config: config.clone().into(),
            };
            postcard::to_io(&old, out)
        }
        Record::GroupSnapshot { group, state } => {
            let old = SnapshotV5 {
                variant: GROUP_SNAPSHOT_VARIANT,
                group: group.clone(),
                state: (&**state).into(),
            };
            postcard::to_io(&old, out)
        }
        record => postcard::to_io(record, out),
    }
}

#[derive(Deserialize, Serialize)]
pub(in crate::log) struct ConfiguredV5 {
    pub variant: u32,
    pub group: String,
    pub config: GroupConfigV5,
}

#[derive(Deserialize, Serialize)]
pub(in crate::log) struct SnapshotV5 {
    pub variant: u32,
    pub group: String,
    pub state: GroupV5,
}

/// `GroupConfig` as format version 5 wrote it: no load settings.
#[derive(Clone, Deserialize, Serialize)]
pub(in crate::log) struct GroupConfigV5 {
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
    pub routes_valid_ms: u64,
    pub reader_token_sha256: Option<String>,
}

impl From<GroupConfigV5> for GroupConfig {
    /// With the load settings' defaults: no load unit, not frozen.
    fn from(old: GroupConfigV5) -> Self {
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
            assignor_limits: old.assignor_limits,
            fallback_assignor: old.fallback_assignor,
            member_token_sha256: old.member_token_sha256,
            routes_valid_ms: old.routes_valid_ms,
            reader_token_sha256: old.reader_token_sha256,
            load_unit: None,
            load_half_life_ms: defaults::load_half_life_ms(),
            load_window_ms: defaults::load_window_ms(),
            load_cooldown_ms: defaults::load_cooldown_ms(),
            frozen: false,
            labels: BTreeMap::new(),
        }
    }
}

impl From<GroupConfig> for GroupConfigV5 {
    /// Without the load settings, which a cluster at level 5 keeps at
    /// their defaults.
    fn from(config: GroupConfig) -> Self {
        GroupConfigV5 {
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
            routes_valid_ms: config.routes_valid_ms,
            reader_token_sha256: config.reader_token_sha256,
        }
    }
}

/// `Group` as format version 5 wrote it: today's, with its config in the
/// version 5 shape.
#[derive(Deserialize, Serialize)]
pub(in crate::log) struct GroupV5 {
    pub name: String,
    pub config: GroupConfigV5,
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
    pub handovers: BTreeSet<Slot>,
    pub routes_epoch: u64,
}

impl From<GroupV5> for Group {
    fn from(old: GroupV5) -> Self {
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
            bindings: old.bindings,
            handovers: old.handovers,
            routes_epoch: old.routes_epoch,
            shadow: None,
        }
    }
}

impl From<&Group> for GroupV5 {
    fn from(group: &Group) -> Self {
        GroupV5 {
            name: group.name.clone(),
            config: group.config.clone().into(),
            group_epoch: group.group_epoch,
            target_epoch: group.target_epoch,
            members: group.members.clone(),
            target: (*group.target).clone(),
            holdings: group.holdings.clone(),
            fenced_member_ids: group.fenced_member_ids.clone(),
            member_ids_issued: group.member_ids_issued,
            dynamic_only: group.dynamic_only,
            snapshot_epoch: group.snapshot_epoch,
            bindings: group.bindings.clone(),
            handovers: group.handovers.clone(),
            routes_epoch: group.routes_epoch,
        }
    }
}
