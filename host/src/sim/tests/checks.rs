//! Hand-made states: each check must refuse a breach of its invariant.

use std::collections::{BTreeMap, BTreeSet};

use super::{task, tasks};
use crate::protocol::core::HeartbeatResponse;
use crate::protocol::group::{
    Group, GroupConfig, LearnerMode, Liveness, Member, Record, Slot, SlotTarget, Task, TopicConfig,
};
use crate::protocol::reconcile::{MemberAssignment, MemberState};
use crate::sim::check::{self, Belief};

pub(super) fn group_of(slots: &[&str]) -> Group {
    let config = GroupConfig {
        learners: LearnerMode::Host,
        acceptable_recovery_lag: 100,
        ..GroupConfig::with_topics(vec![TopicConfig {
            name: "t0".into(),
            partitions: 4,
        }])
    };
    let mut group = Group::new("g", config);
    for slot in slots {
        group.apply(&Record::MemberJoined {
            group: "g".into(),
            slot: (*slot).into(),
            member: Member {
                member_id: (*slot).into(),
                name: None,
                topics: ["t0".to_owned()].into(),
                rack: None,
                capacity: 1,
                away: false,
                draining: false,
                endpoint: None,
                metadata: Default::default(),
            },
        });
    }
    group
}

pub(super) fn hold(group: &mut Group, slot: &str, epoch: u64, active: &[u32], revoking: &[u32]) {
    group.apply(&Record::MemberReconciled {
        group: "g".into(),
        slot: slot.into(),
        assignment: assignment(epoch, active, revoking),
    });
}

fn assignment(epoch: u64, active: &[u32], revoking: &[u32]) -> MemberAssignment<Task> {
    MemberAssignment {
        state: if revoking.is_empty() {
            MemberState::Stable
        } else {
            MemberState::UnrevokedTasks
        },
        epoch,
        previous_epoch: 0,
        active: tasks(active),
        revoking: tasks(revoking),
    }
}

pub(super) fn install(group: &mut Group, epoch: u64, target: &[(&str, &[u32])]) {
    group.apply(&Record::GroupEpochBumped {
        group: "g".into(),
        epoch,
    });
    group.apply(&Record::TargetInstalled {
        group: "g".into(),
        epoch,
        target: target_of(target).into(),
    });
}

pub(super) fn target_of(target: &[(&str, &[u32])]) -> BTreeMap<Slot, SlotTarget> {
    target
        .iter()
        .map(|(slot, active)| {
            (
                Slot::from(*slot),
                SlotTarget {
                    active: tasks(active),
                    ..SlotTarget::default()
                },
            )
        })
        .collect()
}

#[test]
fn two_processes_owning_one_task_are_caught() {
    let mut group = group_of(&["a", "b"]);
    install(&mut group, 1, &[("a", &[0, 1]), ("b", &[2, 3])]);
    hold(&mut group, "a", 1, &[0, 1], &[]);
    hold(&mut group, "b", 1, &[2, 3], &[]);
    check::check_holdings(&group).unwrap();
    let (t0, t1, t2) = (task(0), task(1), task(2));
    let fine = [
        Belief {
            process: "p0",
            member_id: "a",
            lease_until_ms: Some(1_000),
            owns: vec![&t0, &t1],
        },
        Belief {
            process: "p1",
            member_id: "b",
            lease_until_ms: Some(1_000),
            owns: vec![&t2],
        },
    ];
    check::check_beliefs(&group, &fine).unwrap();
    // p1 still processes t0:1, which the host gave to a.
    let double = [
        fine[0].clone(),
        Belief {
            process: "p1",
            member_id: "b",
            lease_until_ms: Some(1_000),
            owns: vec![&t2, &t1],
        },
    ];
    let error = check::check_beliefs(&group, &double).unwrap_err();
    assert!(error.starts_with("invariant 1:"), "{error}");
    // A zombie (its member id is no longer in the group) is not live.
    let zombie = [
        fine[0].clone(),
        Belief {
            process: "p9",
            member_id: "m-fenced",
            lease_until_ms: Some(1_000),
            owns: vec![&t0],
        },
    ];
    check::check_beliefs(&group, &zombie).unwrap();
    // A task held by a slot that is not a member (no record makes that
    // state: `Group::apply` refuses it, so the holdings are set directly).
    let mut broken = group.clone();
    broken.holdings.remove("b");
    broken.holdings.set("ghost", assignment(1, &[3], &[]));
    assert!(check::check_holdings(&broken).is_err());
}

/// p0 (member a) owns `t0` and `t1` with a lease until 2,000; p9, which
/// the host removed (member id m-fenced) without it hearing yet, still
/// believes it owns `t0`, with a lease until 1,500.
fn owner_and_stalled<'a>(t0: &'a Task, t1: &'a Task) -> (Belief<'a>, Belief<'a>) {
    let owner = Belief {
        process: "p0",
        member_id: "a",
        lease_until_ms: Some(2_000),
        owns: vec![t0, t1],
    };
    let stalled = Belief {
        process: "p9",
        member_id: "m-fenced",
        lease_until_ms: Some(1_500),
        owns: vec![t0],
    };
    (owner, stalled)
}

#[test]
fn a_zombie_processing_a_task_within_its_lease_is_caught() {
    // The host removed p9 (member id m-fenced) and gave t0:0 to a, but p9
    // has not heard yet and its lease runs until 1,500.
    let mut group = group_of(&["a"]);
    install(&mut group, 2, &[("a", &[0, 1])]);
    hold(&mut group, "a", 2, &[0, 1], &[]);
    let (t0, t1) = (task(0), task(1));
    let (owner, zombie) = owner_and_stalled(&t0, &t1);
    let both = [owner.clone(), zombie.clone()];
    // Invariant 1 among the members the host knows cannot see it.
    check::check_beliefs(&group, &both).unwrap();
    let error = check::check_leased_beliefs(&both, 1_499).unwrap_err();
    assert!(error.starts_with("invariant 1 (leases):"), "{error}");
    for part in [
        "p0 (a, lease until 2000)",
        "p9 (m-fenced, lease until 1500)",
        "partition: 0",
    ] {
        assert!(error.contains(part), "{part:?} in {error}");
    }
    // Two processes the host knows, both within their leases, likewise.
    let b = Belief {
        process: "p1",
        member_id: "b",
        ..zombie.clone()
    };
    assert!(check::check_leased_beliefs(&[owner.clone(), b], 0).is_err());
}

#[test]
fn a_process_past_its_lease_or_without_one_owns_nothing() {
    let (t0, t1) = (task(0), task(1));
    let (owner, stalled) = owner_and_stalled(&t0, &t1);
    // At its lease's end the stalled process has stopped, acted or not.
    check::check_leased_beliefs(&[owner.clone(), stalled.clone()], 1_500).unwrap();
    check::check_leased_beliefs(&[stalled.clone(), owner.clone()], 9_999).unwrap();
    // No answered heartbeat yet: no lease, nothing held.
    let unanswered = Belief {
        lease_until_ms: None,
        ..stalled
    };
    check::check_leased_beliefs(&[owner, unanswered], 0).unwrap();
}

#[test]
fn revoking_a_task_the_target_keeps_is_caught() {
    let mut group = group_of(&["a", "b"]);
    install(&mut group, 1, &[("a", &[0, 1]), ("b", &[2, 3])]);
    hold(&mut group, "a", 1, &[0, 1], &[]);
    install(&mut group, 2, &[("a", &[0]), ("b", &[1, 2, 3])]);
    let moves = MemberAssignment {
        state: MemberState::UnrevokedTasks,
        epoch: 1,
        previous_epoch: 0,
        active: tasks(&[0]),
        revoking: tasks(&[1]),
    };
    check::check_reconciled(&group, "a", &moves).unwrap();
    let revokes_kept = MemberAssignment {
        revoking: tasks(&[0, 1]),
        active: tasks(&[]),
        ..moves.clone()
    };
    let error = check::check_reconciled(&group, "a", &revokes_kept).unwrap_err();
    assert!(error.starts_with("invariant 4:"), "{error}");
    let pauses_kept = MemberAssignment {
        active: tasks(&[]),
        ..moves
    };
    assert!(check::check_reconciled(&group, "a", &pauses_kept).is_err());
}

#[test]
fn a_move_to_a_cold_member_is_caught() {
    let mut group = group_of(&["a", "b"]);
    install(&mut group, 1, &[("a", &[0, 1, 2, 3])]);
    hold(&mut group, "a", 1, &[0, 1, 2, 3], &[]);
    let mut liveness = Liveness::default();
    liveness
        .lags
        .insert("b".into(), [(task(2), 50), (task(3), 5_000)].into());
    let warm = target_of(&[("a", &[0, 1, 3]), ("b", &[2])]);
    check::check_installed(&group, &liveness, &warm, 10).unwrap();
    let cold = target_of(&[("a", &[0, 1]), ("b", &[2, 3])]);
    let error = check::check_installed(&group, &liveness, &cold, 10).unwrap_err();
    assert!(error.starts_with("invariant 5:"), "{error}");
    // A draining holder past its scale-down timeout may lose it cold.
    group.apply(&Record::MemberDraining {
        group: "g".into(),
        slot: "a".into(),
    });
    liveness.draining_since_ms.insert("a".into(), 0);
    let timeout = group.config.scale_down_timeout_ms;
    assert!(check::check_installed(&group, &liveness, &cold, timeout - 1).is_err());
    check::check_installed(&group, &liveness, &cold, timeout).unwrap();
    // Other learner modes are not checked.
    group.config.learners = LearnerMode::Assignor;
    check::check_installed(&group, &liveness, &target_of(&[("b", &[0])]), 10).unwrap();
}

#[test]
fn a_static_return_that_moves_anything_is_caught() {
    let mut before = group_of(&["static:w1", "b"]);
    install(&mut before, 1, &[("static:w1", &[0, 1]), ("b", &[2, 3])]);
    hold(&mut before, "static:w1", 1, &[0, 1], &[]);
    hold(&mut before, "b", 1, &[2, 3], &[]);
    let back = HeartbeatResponse {
        member_id: "m-new".into(),
        member_epoch: 1,
        heartbeat_interval_ms: 1_000,
        active: tasks(&[0, 1]),
        revoking: BTreeSet::new(),
        learner: BTreeSet::new(),
        standby: BTreeSet::new(),
        draining: false,
        drained: false,
        lease_ms: 45_000,
        unreached_lease_ms: 45_000,
        unreached_flight_ms: 45_000,
        load_report: assignd_wire::LoadReport::None,
    };
    let after = before.clone();
    check::check_static_return(&before, &after, "static:w1", &back, &[], None, None).unwrap();
    let bump = Record::GroupEpochBumped {
        group: "g".into(),
        epoch: 2,
    };
    assert!(
        check::check_static_return(&before, &after, "static:w1", &back, &[bump], None, None)
            .is_err()
    );
    let short = HeartbeatResponse {
        active: tasks(&[0]),
        ..back.clone()
    };
    let error = check::check_static_return(&before, &after, "static:w1", &short, &[], None, None)
        .unwrap_err();
    assert!(error.starts_with("invariant 3:"), "{error}");
    let mut moved = after.clone();
    hold(&mut moved, "b", 1, &[2], &[]);
    assert!(
        check::check_static_return(&before, &moved, "static:w1", &back, &[], None, None).is_err()
    );
}

#[test]
fn an_unowned_or_doubly_owned_task_once_settled_is_caught() {
    let mut group = group_of(&["a", "b"]);
    install(&mut group, 1, &[("a", &[0, 1]), ("b", &[2, 3])]);
    hold(&mut group, "a", 1, &[0, 1], &[]);
    hold(&mut group, "b", 1, &[2, 3], &[]);
    let all: Vec<Task> = (0..4).map(task).collect();
    let beliefs = [
        Belief {
            process: "p0",
            member_id: "a",
            lease_until_ms: Some(1_000),
            owns: vec![&all[0], &all[1]],
        },
        Belief {
            process: "p1",
            member_id: "b",
            lease_until_ms: Some(1_000),
            owns: vec![&all[2], &all[3]],
        },
    ];
    check::check_settled(&group, &beliefs).unwrap();
    let missing = [
        beliefs[0].clone(),
        Belief {
            owns: vec![&all[2]],
            ..beliefs[1].clone()
        },
    ];
    let error = check::check_settled(&group, &missing).unwrap_err();
    assert!(error.starts_with("invariant 2:"), "{error}");
    // Not stable: b has not reached the target.
    let mut unstable = group.clone();
    hold(&mut unstable, "b", 1, &[2], &[]);
    assert!(check::check_settled(&unstable, &beliefs).is_err());
}

#[test]
fn a_key_sent_away_from_the_member_processing_its_task_is_caught() {
    let t0 = task(0);
    let routed = check::Routed {
        router: "g/r0",
        task: &t0,
        member_id: "a",
        epoch: 3,
        sent_ms: 100,
        valid_until_ms: 2_100,
    };
    let a = Belief {
        process: "p0",
        member_id: "a",
        lease_until_ms: Some(1_000),
        owns: vec![&t0],
    };
    let b = Belief {
        process: "p1",
        member_id: "b",
        lease_until_ms: Some(3_000),
        owns: vec![&t0],
    };
    let b_idle = Belief {
        owns: Vec::new(),
        ..b.clone()
    };
    // The table's owner processes it.
    check::check_routed(&routed, &[a.clone(), b_idle.clone()], 500).unwrap();
    // Its owner stopped (its lease ended) and nobody took the task over:
    // the key reaches nobody who processes it, but nobody else does.
    check::check_routed(&routed, &[a.clone(), b_idle], 1_500).unwrap();
    // Another member processes it within the table's bound.
    for processing in [vec![a.clone(), b.clone()], vec![b.clone()]] {
        let breach = check::check_routed(&routed, &processing, 1_500).unwrap_err();
        assert!(breach.starts_with("invariant 9 (routes)"), "{breach}");
    }
    // Past the bound the table promises nothing.
    check::check_routed(&routed, &[a, b], 2_100).unwrap();
}
