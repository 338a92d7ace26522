//! Random schedules: thousands keep every invariant on one shard or many
//! (routers reading most groups' tables), a seed replays exactly, and a
//! deliberately broken member is caught.

use std::time::Instant;

use crate::sim::{
    Fault, Options, run_many, run_schedule, summary_line, summed_stats, violation_lines,
};

/// Schedules the main test runs: thousands, so rare interleavings (a crash
/// during a handoff, a restart under a lease) come up in every run.
const SCHEDULES: u64 = 2_000;

#[test]
fn two_thousand_random_schedules_keep_every_invariant() {
    let started = Instant::now();
    let reports = run_many(1, SCHEDULES, &Options::default(), 2);
    let failed: Vec<String> = violation_lines(&reports);
    println!("{} in {:?}", summary_line(&reports), started.elapsed());
    assert!(
        failed.is_empty(),
        "{} violations; replay one with `assignd sim --seed S --schedules 1 --trace`:\n{}",
        failed.len(),
        failed.join("\n")
    );
    let stats = summed_stats(&reports);
    // The schedules reach what they are meant to exercise.
    assert_eq!(stats.schedules, SCHEDULES);
    for (what, count) in [
        ("targets", stats.targets),
        ("learners promoted", stats.learners_promoted),
        ("drains", stats.drains),
        ("fenced", stats.fenced),
        ("expired", stats.expired),
        ("drain timeouts", stats.drain_timeouts),
        ("static returns", stats.static_returns),
        ("second processes with one name", stats.duplicates),
        ("stale answers", stats.stale_answers),
        ("assignor failures", stats.assignor_failures),
        ("lost responses", stats.lost_responses),
        ("joins retried after a lost answer", stats.lost_joins),
        ("host stalls", stats.host_stalls),
        ("host restarts", stats.host_restarts),
        ("lapsed leases", stats.leases_lapsed),
        ("config changes", stats.configs - stats.schedules),
        ("routing tables read", stats.routes_read),
        ("keys routed", stats.keys_routed),
        ("keys routed across moves", stats.keys_routed_across_moves),
        ("keys held back for a fresh table", stats.keys_deferred),
    ] {
        assert!(count >= SCHEDULES / 20, "too few {what}: {count}");
    }
    // Every schedule runs groups of more than one shard, and every shard
    // of the host serves groups and keeps records.
    assert_eq!(stats.multi_shard_schedules, SCHEDULES);
    let shards = crate::sim::DEFAULT_SHARDS as usize;
    assert!(shards > 1);
    assert_eq!(stats.shard_groups.len(), shards);
    assert!(
        stats
            .shard_groups
            .iter()
            .all(|&groups| groups >= SCHEDULES / 10),
        "groups by shard: {:?}",
        stats.shard_groups
    );
    assert!(
        stats.shard_records.iter().all(|&records| records > 0),
        "records by shard: {:?}",
        stats.shard_records
    );
}

/// One shard holds every group of a schedule in one core; many shards
/// spread them. Both keep every invariant, and a seed gives the same run.
#[test]
fn one_shard_or_many_keep_every_invariant() {
    for shards in [1, 16] {
        let options = Options {
            shards,
            ..Options::default()
        };
        let reports = run_many(100, 40, &options, 2);
        let failed: Vec<String> = violation_lines(&reports);
        assert!(failed.is_empty(), "{shards} shards:\n{}", failed.join("\n"));
        let stats = summed_stats(&reports);
        assert_eq!(stats.shard_groups.len(), shards as usize);
        let spanning = if shards == 1 { 0 } else { 40 };
        assert_eq!(stats.multi_shard_schedules, spanning, "{shards} shards");
        let again = run_schedule(reports[0].seed, &options);
        assert_eq!(again.fingerprint, reports[0].fingerprint, "{shards} shards");
        assert_eq!(again.stats, reports[0].stats);
    }
}

#[test]
fn a_seed_replays_exactly() {
    let options = Options {
        trace: true,
        ..Options::default()
    };
    for seed in [5, 77, 1_000_003] {
        let a = run_schedule(seed, &options);
        let b = run_schedule(seed, &options);
        assert_eq!(a.trace, b.trace, "seed {seed}");
        assert_eq!(a.fingerprint, b.fingerprint);
        assert_eq!(a.stats, b.stats);
        assert!(a.trace.len() > 300, "a trace has every step");
    }
    let c = run_schedule(6, &options);
    assert_ne!(run_schedule(5, &options).fingerprint, c.fingerprint);
}

#[test]
fn a_member_that_keeps_processing_released_tasks_is_caught() {
    let options = Options {
        fault: Some(Fault::KeepRevoked),
        ..Options::default()
    };
    let reports = run_many(1, 40, &options, 2);
    let caught: Vec<&str> = reports
        .iter()
        .filter_map(|r| r.violation.as_ref())
        .map(|v| v.description.as_str())
        .collect();
    assert!(
        caught.len() >= 10,
        "the broken member was caught in only {} of 40 schedules",
        caught.len()
    );
    assert!(
        caught.iter().all(|d| d.starts_with("invariant 1")),
        "{caught:#?}"
    );
}
