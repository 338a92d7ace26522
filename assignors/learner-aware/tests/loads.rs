//! `learner-aware` with loads: its target is the balance crate's load
//! balance, and its learner placement works on top of it.

#[path = "../../balance/tests/load_oracle/mod.rs"]
mod load_oracle;

use assignd_guest_sdk::harness::{run, run_json};
use assignd_guest_sdk::testing::{Promises, check_contract};
use assignor_balance::{LoadOptions, balance_by_load};
use assignor_learner_aware::LearnerAware;
use load_oracle::*;
use proptest::prelude::*;

proptest! {
    #[test]
    fn keeps_the_contract_with_loads(seed in any::<u64>()) {
        let (input, _) = tiny_group(seed, 4, 8);
        check_contract::<LearnerAware>(&input, Promises::NONE, seed)?;
    }

    /// With every member caught up on every task, the actives are the
    /// load balance and nobody learns.
    #[test]
    fn caught_up_members_take_the_load_balance(seed in any::<u64>()) {
        let (mut input, _) = tiny_group(seed, 4, 8);
        for task in 0..input.task_count() as u32 {
            for m in 0..input.members.len() as u32 {
                input.lags.push(task, m, 0);
            }
        }
        let out = run::<LearnerAware>(&input).unwrap();
        let options = LoadOptions::of(&input).unwrap();
        prop_assert_eq!(out.active_owner, balance_by_load(&input, options));
        prop_assert!(out.learners.is_empty());
    }
}

#[test]
fn a_move_for_load_to_a_cold_member_warms_it_up_first() {
    // m1 holds the hot orders-0 and a cold task; the load balance gives
    // orders-1 to m2, which has no state for it: m1 keeps it active and
    // m2 learns it.
    let doc = r#"{
        "topics": {"orders": 3},
        "load_unit": "records/s",
        "members": [
            {"id": "m1", "topics": ["orders"], "active": [["orders", 0], ["orders", 1]]},
            {"id": "m2", "topics": ["orders"], "active": [["orders", 2]]}
        ],
        "loads": [["orders", 0, 100], ["orders", 1, 10], ["orders", 2, 10]]
    }"#;
    let out = run_json::<LearnerAware>(doc, &[]).unwrap();
    let expected = concat!(
        r#"{"m1":{"active":[["orders",0],["orders",1]],"learner":[],"standby":[]},"#,
        r#""m2":{"active":[["orders",2]],"learner":[["orders",1]],"standby":[]}}"#
    );
    assert_eq!(out.to_string(), expected);
}

#[test]
fn a_homeless_task_goes_to_the_least_loaded_caught_up_member() {
    // orders-2's owner left; m1 and m2 are caught up on it, and the load
    // balance's target for it is m4, which is not. m1 carries 100, m2 10:
    // by load, m2 takes it active while m4 learns it.
    let doc = r#"{
        "topics": {"orders": 3},
        "load_unit": "records/s",
        "members": [
            {"id": "m1", "topics": ["orders"], "active": [["orders", 0]], "lags": [["orders", 2, 0]]},
            {"id": "m2", "topics": ["orders"], "active": [["orders", 1]], "lags": [["orders", 2, 0]]},
            {"id": "m4", "topics": ["orders"]}
        ],
        "loads": [["orders", 0, 100], ["orders", 1, 10], ["orders", 2, 10]]
    }"#;
    let out = run_json::<LearnerAware>(doc, &[]).unwrap();
    let text = out.to_string();
    assert!(
        text.contains(r#""m2":{"active":[["orders",1],["orders",2]]"#),
        "{text}"
    );
}
