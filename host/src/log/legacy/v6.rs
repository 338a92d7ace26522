//! Format version 6's shapes, read and written: `GroupConfig` had no
//! `labels` and `Group` no `shadow`, so `GroupConfigured` and
//! `GroupSnapshot` payloads differ from today's, and there was no
//! `ShadowBound`; every other record is as today.
//!
//! A cluster whose feature level is still 6 (a rolling upgrade under way)
//! frames today's records in these shapes ([`encode_v6`]), which its
//! older nodes read. The runtime refuses labels and shadows below level 7
//! (`runtime::execute`, `FORMAT_WITH_SHADOWS`), so nothing is dropped;
//! [`assert_nothing_of_v7`] holds every older writer to that.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use serde::{Deserialize, Serialize};

use super::{GROUP_CONFIGURED_VARIANT, GROUP_SNAPSHOT_VARIANT, snapshot};
use crate::log::record_type::RecordType;
use crate::protocol::group::{
    Binding, CallLimits, Group, GroupConfig, LearnerMode, Member, Record, Slot, SlotTarget, Task,
    TopicConfig, holdings_by_slot,
};
use crate::protocol::reconcile::Holdings;

/// Decodes the payload of a version 6 frame holding a record of type
/// `kind` (never a `ShadowBound`: the caller refuses it).
pub(in crate::log) fn decode(
    kind: RecordType,
    payload: &[u8],
) -> postcard::Result<(Record, &[u8])> {
    match kind {
        RecordType::GroupConfigured => {
            let (old, rest) = postcard::take_from_bytes::<ConfiguredV6>(payload)?;
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
            let (old, rest) = postcard::take_from_bytes::<SnapshotV6>(payload)?;
            snapshot(old.variant, old.group, old.state.into(), rest)
        }
        _ => postcard::take_from_bytes::<Record>(payload),
    }
}

/// Writes `record`'s payload as format version 6 did. Labels, a shadow
/// and a `ShadowBound` record have no version 6 shape: the runtime
/// refuses them while a cluster is at level 6, so meeting one here is a
/// bug.
pub(in crate::log) fn encode_v6<W: std::io::Write>(record: &Record, out: W) -> postcard::Result<W> {
    assert_nothing_of_v7(record, 6);
    match record {
        Record::GroupConfigured { group, config } => {
            let old = ConfiguredV6 {
                variant: GROUP_CONFIGURED_VARIANT,
                group: group.clone(),
                config: config.clone().into(),
            };
            postcard::to_io(&old, out)
        }
        Record::GroupSnapshot { group, state } => {
            let old = SnapshotV6 {
                variant: GROUP_SNAPSHOT_VARIANT,
                group: group.clone(),
                state: (&**state).into(),
            };
            postcard::to_io(&old, out)
        }
        record => postcard::to_io(record, out),
    }
}

/// Panics if `record`, about to be written at format `version` (6 or
/// older), holds what version 7 added: a `ShadowBound` record, labels or
/// a shadow. The runtime refuses them below level 7, so this is a bug.
pub(in crate::log) fn assert_nothing_of_v7(record: &Record, version: u8) {
    let config = match record {
        Record::ShadowBound { .. } => panic!("a ShadowBound record at format level {version}"),
        Record::GroupConfigured { config, .. } => config,
        Record::GroupSnapshot { state, .. } => {
            assert!(state.shadow.is_none(), "a shadow at format level {version}");
            &state.config
        }
        _ => return,
    };
    assert!(config.labels.is_empty(), "labels at format level {version}");
}

#[derive(Deserialize, Serialize)]
pub(in crate::log) struct ConfiguredV6 {
    pub variant: u32,
    pub group: String,
    pub config: GroupConfigV6,
}

#[derive(Deserialize, Serialize)]
pub(in crate::log) struct SnapshotV6 {
    pub variant: u32,
    pub group: String,
    pub state: GroupV6,
}

/// `GroupConfig` as format version 6 wrote it: no labels.
#[derive(Clone, Deserialize, Serialize)]
pub(in crate::log) struct GroupConfigV6 {
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
    pub load_unit: Option<String>,
    pub load_half_life_ms: u64,
    pub load_window_ms: u64,
    pub load_cooldown_ms: u64,
    pub frozen: bool,
}

impl From<GroupConfigV6> for GroupConfig {
    /// With no labels.
    fn from(old: GroupConfigV6) -> Self {
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
            load_unit: old.load_unit,
            load_half_life_ms: old.load_half_life_ms,
            load_window_ms: old.load_window_ms,
            load_cooldown_ms: old.load_cooldown_ms,
            frozen: old.frozen,
            labels: BTreeMap::new(),
        }
    }
}

impl From<GroupConfig> for GroupConfigV6 {
    /// Without the labels, which a cluster at level 6 refuses to set.
    fn from(config: GroupConfig) -> Self {
        GroupConfigV6 {
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
            load_unit: config.load_unit,
            load_half_life_ms: config.load_half_life_ms,
            load_window_ms: config.load_window_ms,
            load_cooldown_ms: config.load_cooldown_ms,
            frozen: config.frozen,
        }
    }
}

/// `Group` as format version 6 wrote it: no `shadow`, and its config in
/// the version 6 shape.
#[derive(Deserialize, Serialize)]
pub(in crate::log) struct GroupV6 {
    pub name: String,
    pub config: GroupConfigV6,
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

impl From<GroupV6> for Group {
    /// With no shadow.
    fn from(old: GroupV6) -> Self {
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

impl From<&Group> for GroupV6 {
    /// Without the shadow, which a cluster at level 6 refuses to bind.
    fn from(group: &Group) -> Self {
        GroupV6 {
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
