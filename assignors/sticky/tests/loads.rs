//! `sticky` with loads: the load balance of the balance crate, through the
//! SDK harness, on tiny groups the balance crate's oracle also judges.

#[path = "../../balance/tests/load_oracle/mod.rs"]
mod load_oracle;

use assignd_guest_sdk::harness::{run, run_json};
use assignd_guest_sdk::testing::{Promises, check_contract};
use assignd_guest_sdk::{AssignError, Assignor};
use assignor_balance::{LoadOptions, balance_by_load};
use assignor_sticky::Sticky;
use load_oracle::*;
use proptest::prelude::*;

proptest! {
    /// Valid, deterministic answers with loads, and the balance crate's
    /// load balance exactly; in band with the oracle's fewest moves when
    /// the band is reachable.
    #[test]
    fn keeps_the_contract_and_balances_by_load(seed in any::<u64>()) {
        let (input, band) = tiny_group(seed, 4, 8);
        let out = check_contract::<Sticky>(&input, Promises::NONE, seed)?;
        let options = LoadOptions::of(&input).unwrap();
        prop_assert_eq!(&out.active_owner, &balance_by_load(&input, options));
        if let Some(view) = View::of(&input) {
            let best = optimum(&input, &view, band);
            let held = view.held(&out.active_owner, input.members.len());
            if best.reachable {
                prop_assert!(view.in_band(&held, band));
                prop_assert_eq!(view.moves(&input, &out.active_owner).0, best.moves);
            }
        }
    }
}

#[test]
fn a_bad_band_is_refused() {
    let (mut input, _) = tiny_group(7, 4, 8);
    input.params.insert("load_band".into(), "wide".into());
    match Sticky::assign(&input) {
        Err(AssignError::InvalidParam(message)) => assert!(message.contains("load_band")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_hot_partition_moves_the_cold_ones_off_its_member() {
    // Counts are balanced (2 each) but m1 carries 100 of 130: its cold
    // task goes to m2, and nothing else moves.
    let doc = r#"{
        "topics": {"orders": 4},
        "load_unit": "records/s",
        "members": [
            {"id": "m1", "topics": ["orders"], "active": [["orders", 0], ["orders", 1]]},
            {"id": "m2", "topics": ["orders"], "active": [["orders", 2], ["orders", 3]]}
        ],
        "loads": [["orders", 0, 100], ["orders", 1, 10], ["orders", 2, 10], ["orders", 3, 10]]
    }"#;
    let out = run_json::<Sticky>(doc, &[]).unwrap();
    let expected = concat!(
        r#"{"m1":{"active":[["orders",0]],"learner":[],"standby":[]},"#,
        r#""m2":{"active":[["orders",1],["orders",2],["orders",3]],"learner":[],"standby":[]}}"#
    );
    assert_eq!(out.to_string(), expected);
}

#[test]
fn without_loads_the_answer_is_the_count_balance() {
    let (mut input, _) = tiny_group(11, 4, 8);
    input.loads = Default::default();
    let out = run::<Sticky>(&input).unwrap();
    assert_eq!(out.active_owner, assignor_balance::balance(&input));
}
