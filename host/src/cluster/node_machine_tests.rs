//! The node machine's decisions, as the exact ordered outputs each input
//! gives.

use super::*;

const TTL_MS: u64 = 900;

fn timing() -> Timing {
    Timing {
        lease_ttl_ms: TTL_MS,
    }
}

fn drain(machine: &mut NodeMachine) -> Vec<Output> {
    std::iter::from_fn(|| machine.poll_output()).collect()
}

fn joined(now: Millis) -> NodeMachine {
    let mut machine = NodeMachine::joined("a".into(), 4, timing(), now, now);
    assert_eq!(drain(&mut machine), [Output::ServeUntil(now + TTL_MS)]);
    machine
}

#[test]
fn intervals_derive_from_the_ttl() {
    assert_eq!(timing().renew_interval_ms(), 300);
    assert_eq!(timing().placement_interval_ms(), 300);
    assert_eq!(timing().handover_wait_ms(), 900);
    let long = Timing {
        lease_ttl_ms: 5_000,
    };
    assert_eq!(long.placement_interval_ms(), PLACEMENT_INTERVAL_MS_MAX);
    assert_eq!(long.handover_wait_ms(), 5_000);
}

#[test]
fn a_joining_node_takes_a_lease_registers_and_then_places() {
    let mut machine = NodeMachine::new("a".into(), 2, timing());
    machine.set_timers(300, 0);
    machine.handle_timeout(0);
    assert_eq!(drain(&mut machine), [Output::GrantLease]);
    machine.handle_lease_granted(0, true);
    assert_eq!(drain(&mut machine), [Output::Register]);
    machine.handle_registered(Registration::Registered);
    assert_eq!(
        drain(&mut machine),
        [
            Output::ServeUntil(TTL_MS),
            Output::DropFailedShards,
            Output::ReadView
        ]
    );
    let view = PlacementInput {
        nodes: vec!["a".into()],
        ..PlacementInput::default()
    };
    machine.handle_view(Some(&view));
    assert_eq!(drain(&mut machine), [Output::Load(0), Output::Load(1)]);
    assert_eq!(machine.poll_timeout(), 300);
}

#[test]
fn a_renewal_moves_the_lease_end_from_its_send_time() {
    let mut machine = joined(0);
    machine.handle_timeout(300);
    assert_eq!(drain(&mut machine), [Output::RenewLease]);
    machine.handle_renewed(350, Renewal::Renewed { ttl_ms: TTL_MS });
    assert_eq!(drain(&mut machine), [Output::ServeUntil(300 + TTL_MS)]);
}

#[test]
fn a_failed_renewal_retries_within_the_lease_and_steps_down_past_it() {
    let mut machine = joined(0);
    machine.handle_timeout(300);
    drain(&mut machine);
    machine.handle_renewed(300, Renewal::Failed);
    assert_eq!(drain(&mut machine), []);
    machine.handle_timeout(900);
    drain(&mut machine);
    machine.handle_renewed(900, Renewal::Failed);
    assert_eq!(
        drain(&mut machine),
        [
            Output::StepDown(StepDownReason::LeaseEndedUnrenewed),
            Output::GrantLease
        ]
    );
    assert!(!machine.registered());
}

#[test]
fn a_node_that_cannot_join_again_keeps_its_old_lease_and_steps_down_again() {
    let mut machine = joined(0);
    machine.handle_timeout(300);
    drain(&mut machine);
    machine.handle_renewed(300, Renewal::LeaseGone);
    assert_eq!(
        drain(&mut machine),
        [
            Output::StepDown(StepDownReason::LeaseGone),
            Output::GrantLease
        ]
    );
    machine.handle_lease_granted(300, true);
    assert_eq!(drain(&mut machine), [Output::Register]);
    machine.handle_registered(Registration::NameTaken);
    assert_eq!(drain(&mut machine), []);
    // Its rounds go on; its next renewal renews the old lease, finds it
    // gone and steps down again.
    machine.handle_timeout(300);
    assert_eq!(
        drain(&mut machine),
        [Output::DropFailedShards, Output::ReadView]
    );
    machine.handle_view(None);
    machine.handle_timeout(600);
    assert_eq!(drain(&mut machine), [Output::RenewLease]);
    machine.handle_renewed(600, Renewal::LeaseGone);
    assert_eq!(
        drain(&mut machine),
        [
            Output::StepDown(StepDownReason::LeaseGone),
            Output::GrantLease
        ]
    );
    machine.handle_lease_granted(600, true);
    drain(&mut machine);
    machine.handle_registered(Registration::Registered);
    assert_eq!(drain(&mut machine), [Output::ServeUntil(600 + TTL_MS)]);
    assert!(machine.registered());
}

#[test]
fn a_round_releases_claims_not_served_and_hands_over_what_the_plan_takes() {
    let mut machine = joined(0);
    machine.handle_timeout(0);
    assert_eq!(
        drain(&mut machine),
        [Output::DropFailedShards, Output::ReadView]
    );
    let view = PlacementInput {
        nodes: vec!["a".into(), "b".into()],
        owners: (0..4).map(|shard| (shard, "a".to_owned())).collect(),
        served: [0, 1, 2].into(),
    };
    let plan = placement::plan(4, &view.nodes, &view.owners);
    machine.handle_view(Some(&view));
    let expected: Vec<Output> = (0..4)
        .filter(|shard| plan[shard] != "a")
        .map(|shard| match shard {
            3 => Output::ReleaseStaleClaim(3),
            _ => Output::HandOver {
                shard,
                to: Some("b".into()),
            },
        })
        .chain((3..4).filter(|shard| plan[shard] == "a").map(Output::Load))
        .collect();
    assert_eq!(plan.values().filter(|n| *n == "a").count(), 2);
    assert_eq!(drain(&mut machine), expected);
}
