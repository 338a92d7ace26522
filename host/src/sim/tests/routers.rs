//! Routers in random schedules: every group read by two or three routers
//! that route keys by their tables while fresh. No key goes to a member
//! that does not process its task while another does (invariant 9), and
//! the schedules send keys right across moves, on the tables' promise
//! alone: without the core's grant hold they would find a breach.

use crate::sim::{Options, run_many, summary_line, summed_stats, violation_lines};

/// Schedules of the test: enough that keys sent across moves number in
/// the thousands.
const SCHEDULES: u64 = 200;

#[test]
fn routers_that_honour_the_bound_never_send_a_key_away_from_its_processor() {
    let options = Options {
        routers: (2, 3),
        ..Options::default()
    };
    let reports = run_many(7_000, SCHEDULES, &options, 2);
    println!("{}", summary_line(&reports));
    let failed: Vec<String> = violation_lines(&reports);
    assert!(
        failed.is_empty(),
        "{} violations; replay one with `assignd sim --seed S --schedules 1 --trace`:\n{}",
        failed.len(),
        failed.join("\n")
    );
    let stats = summed_stats(&reports);
    assert!(stats.routes_read >= SCHEDULES * 20, "{stats:?}");
    assert!(stats.keys_routed >= SCHEDULES * 100, "{stats:?}");
    assert!(stats.keys_deferred > 0, "{stats:?}");
    assert!(stats.keys_unowned > 0, "{stats:?}");
    // The promise carries keys across moves: the grant hold is what keeps
    // them right.
    assert!(stats.keys_routed_across_moves >= SCHEDULES * 5, "{stats:?}");
}

/// Three schedules that route keys across the cases the promise needs
/// beyond a plain move: a restarted host's new incarnation of a name
/// (seed 412), a revocation of no more tasks than the one it replaces
/// (seed 317), and a task being released that a newer target gives back
/// to its member, then a later one elsewhere (seed 27853).
#[test]
fn routing_across_a_restart_a_smaller_revocation_and_a_release_given_back_keeps_the_promise() {
    for seed in [412, 317, 27_853] {
        let report = crate::sim::run_schedule(seed, &Options::default());
        assert!(
            report.violation.is_none(),
            "seed {seed}: {}",
            report
                .violation
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_default()
        );
    }
}
