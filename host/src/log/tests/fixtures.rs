//! What the log's tests build on: one record of every type, a realistic
//! history written by the core, temporary log folders, old frames framed
//! by hand, and the hooks that make the log's file creations fail.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use assignor_sticky::Sticky;

use super::super::frame::{Decoded, RecordType, decode};
use super::super::writer::{FsyncPolicy, LogSink};
use crate::protocol::core::{Coordinator, Heartbeat, Output};
use crate::protocol::group::{
    Binding, CallLimits, Group, GroupConfig, Member, Record, RemovalReason, ShadowBinding, Slot,
    SlotTarget, Task, TopicConfig,
};
use crate::protocol::reconcile::MemberAssignment;

pub(super) fn config() -> GroupConfig {
    GroupConfig {
        expansion_timeout_ms: 10,
        ..GroupConfig::with_topics(vec![TopicConfig {
            name: "orders".into(),
            partitions: 8,
        }])
    }
}

/// One record of every type, in type order, then a second snapshot with a
/// handover under way, load settings, labels and a shadow. The snapshot is
/// at index 9, the binding at 10, the epoch bump at 4, the endpoint change
/// at 14 and the shadow binding last.
pub(super) fn every_record_type() -> Vec<Record> {
    let state = snapshot_state();
    let mut waiting = state.clone();
    waiting.handovers.insert("static:a".into());
    waiting.config = with_labels(with_load_settings(waiting.config));
    waiting.shadow = Some(shadow());
    let mut records = vec![configured_with_every_option()];
    records.extend(member_and_target_records());
    records.push(Record::GroupSnapshot {
        group: "g".into(),
        state: Box::new(state),
    });
    records.push(bound_with_every_option());
    records.push(Record::HandoverStarted {
        group: "g".into(),
        slot: "static:a".into(),
    });
    records.push(Record::HandoverEnded {
        group: "g".into(),
        slot: "static:a".into(),
    });
    records.push(Record::GroupSnapshot {
        group: "g".into(),
        state: Box::new(waiting),
    });
    records.push(Record::MemberEndpointChanged {
        group: "g".into(),
        slot: "static:a".into(),
        endpoint: Some("http://10.0.0.5:8080".into()),
        metadata: [("zone".to_owned(), "a".to_owned())].into(),
    });
    records.push(Record::ShadowBound {
        group: "g".into(),
        shadow: Some(shadow()),
    });
    records
}

/// A `GroupConfigured` with the assignor limits, fallback, member token,
/// routes settings, load settings and labels set.
fn configured_with_every_option() -> Record {
    Record::GroupConfigured {
        group: "g".into(),
        config: GroupConfig {
            assignor_limits: CallLimits {
                fuel_max: Some(1_000_000),
                time_limit_ms: None,
                memory_max_mib: Some(64),
            },
            fallback_assignor: Some("sticky".into()),
            member_token_sha256: Some("ab".repeat(32)),
            routes_valid_ms: 500,
            reader_token_sha256: Some("cd".repeat(32)),
            ..with_labels(with_load_settings(config()))
        },
    }
}

/// `config` with two labels.
pub(super) fn with_labels(config: GroupConfig) -> GroupConfig {
    GroupConfig {
        labels: [
            ("team".to_owned(), "payments".to_owned()),
            ("tier".to_owned(), "1".to_owned()),
        ]
        .into(),
        ..config
    }
}

/// A shadow assignor with params and limits.
pub(super) fn shadow() -> ShadowBinding {
    ShadowBinding {
        assignor: "candidate@2.0".into(),
        params: [("k".to_owned(), "w".to_owned())].into(),
        limits: CallLimits {
            fuel_max: Some(500_000),
            time_limit_ms: None,
            memory_max_mib: Some(32),
        },
        epoch: 5,
        at_ms: 6_789,
    }
}

/// `config` with every load setting away from its default.
pub(super) fn with_load_settings(config: GroupConfig) -> GroupConfig {
    GroupConfig {
        load_unit: Some("records/s".into()),
        load_half_life_ms: 0,
        load_window_ms: 120_000,
        load_cooldown_ms: 600_000,
        frozen: true,
        ..config
    }
}

/// One record of each type from `MemberJoined` to `MemberDraining`.
fn member_and_target_records() -> Vec<Record> {
    let group = "g".to_owned();
    let mut target = BTreeMap::new();
    target.insert(
        Slot::named("a"),
        SlotTarget {
            active: [Task::new("orders", 1)].into(),
            learner: [Task::new("orders", 2)].into(),
            standby: BTreeSet::new(),
        },
    );
    vec![
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
                endpoint: Some("10.0.0.5:8080".into()),
                metadata: [("version".to_owned(), "1.4".to_owned())].into(),
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
                active: [Task::new("orders", 1)].into(),
                ..MemberAssignment::new()
            },
        },
        Record::NameMapDropped {
            group: group.clone(),
        },
        Record::MemberDraining {
            group,
            slot: "static:a".into(),
        },
    ]
}

/// The state a snapshot holds: group `g` at epoch 4 with one binding.
fn snapshot_state() -> Group {
    let mut state = Group::new("g", config());
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
    state
}

/// An `AssignorBound` with limits, a fallback and a rollback.
fn bound_with_every_option() -> Record {
    Record::AssignorBound {
        group: "g".into(),
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
    }
}

/// A realistic history: a group, three static members, a target, members
/// reconciled, one leaving; assignor calls answered natively.
pub(super) fn history() -> Vec<Record> {
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
pub(super) fn churn(times: usize) -> Vec<Record> {
    (0..times)
        .map(|_| Record::GroupConfigured {
            group: "g".into(),
            config: config(),
        })
        .collect()
}

pub(super) fn replay(records: &[Record]) -> Coordinator {
    let mut core = Coordinator::new(1);
    for record in records {
        core.apply(record);
    }
    core
}

pub(super) fn groups(core: &Coordinator) -> Vec<Group> {
    core.groups().cloned().collect()
}

pub(super) fn write_log(dir: &Path, records: &[Record]) {
    let sink = LogSink::open(dir, FsyncPolicy::Always, &[]).unwrap();
    // One append per record, as requests would.
    for record in records {
        sink.append(std::slice::from_ref(record)).unwrap();
    }
}

pub(super) fn only_segment(dir: &Path) -> PathBuf {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "seg"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.pop().unwrap()
}

pub(super) struct TempDir(PathBuf);

impl TempDir {
    pub(super) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub(super) fn tempdir() -> TempDir {
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
pub(super) fn old_frame(version: u8, kind: RecordType, payload: &[u8]) -> Vec<u8> {
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

pub(super) fn decoded(bytes: &[u8]) -> Record {
    match decode(bytes) {
        Decoded::Record { record, .. } => record,
        other => panic!("an old frame did not decode: {other:?}"),
    }
}

/// Runs `f` with this thread's next `n` file creations by the log failing
/// as if the process had no descriptor left (EMFILE).
pub(super) fn with_failed_creates<T>(n: u32, f: impl FnOnce() -> T) -> T {
    super::super::segment::FAIL_CREATES.with(|c| c.set(n));
    let out = f();
    super::super::segment::FAIL_CREATES.with(|c| c.set(0));
    out
}

/// Runs `f` letting this thread's next `ok` file creations through and
/// failing the one after.
pub(super) fn with_failed_creates_after<T>(ok: u32, f: impl FnOnce() -> T) -> T {
    super::super::segment::FAIL_AFTER.with(|c| c.set(Some(ok)));
    let out = f();
    super::super::segment::FAIL_AFTER.with(|c| c.set(None));
    out
}
