//! Native timings of the benchmark shapes, printed only. Run with
//! `cargo test --release -p assignor-sticky --test timing -- --ignored --nocapture`.

use std::time::Instant;

use assignd_guest_sdk::testing::{
    GroupSpec, Subscriptions, add_member, group, moved_tasks, settle, spec_topics,
};
use assignd_guest_sdk::{Assignor, GroupInput};
use assignor_sticky::Sticky;

fn time(label: &str, input: &GroupInput) -> Vec<u32> {
    let mut best = f64::MAX;
    let mut out = None;
    for _ in 0..5 {
        let start = Instant::now();
        let answer = Sticky::assign(input).expect("sticky answers");
        best = best.min(start.elapsed().as_secs_f64() * 1e3);
        out = Some(answer.active_owner);
    }
    println!("{label}: {best:.2} ms (best of 5)");
    out.unwrap()
}

fn shape(members: u32, partitions: u32, topics: u32, subscriptions: Subscriptions) {
    let spec = GroupSpec {
        members,
        topics,
        partitions,
        subscriptions,
        racks: 0,
    };
    let full = group(&spec);
    let label =
        format!("{members} members x {partitions} partitions, {topics} topics, {subscriptions:?}");
    let owners = time(&format!("{label}: full"), &full);
    let mut settled = settle(&full, &full.empty_assignment());
    settled.active_owner = owners;
    // Subscribed like member index `members` would be.
    let grown = add_member(&settled, "newcomer", spec_topics(&spec, members));
    let after = time(&format!("{label}: incremental"), &grown);
    println!(
        "  moved {} tasks",
        moved_tasks(&settled.active_owner, &after)
    );
}

#[test]
#[ignore = "timing, run on demand in release mode"]
fn benchmark_shapes() {
    shape(10_000, 100_000, 100, Subscriptions::Homogeneous);
    shape(
        5_000,
        250_000,
        100,
        Subscriptions::Heterogeneous { groups: 3 },
    );
}
