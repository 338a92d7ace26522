//! Schedules with shadow assignors: every group shadowed from its start
//! (by a built-in, or by a module no host has, which fails every call),
//! shadow calls answered late or dropped. A shadow changes nothing
//! durable: on one host, a schedule writes the same records with and
//! without shadows but for the shadows' bindings; and with shadows every
//! invariant holds on one host and in a cluster.

use crate::protocol::group::Record;
use crate::sim::{
    ClusterOptions, Options, World, run_many, run_many_on, summary_line, summed_stats,
    violation_lines,
};

fn with_shadows() -> Options {
    Options {
        shadows: true,
        ..Options::default()
    }
}

/// A shard's records but the shadows' bindings, its snapshots without
/// their shadow (the protocol's tests use it too).
pub(crate) fn without_shadows(log: &[Record]) -> Vec<Record> {
    log.iter()
        .filter(|r| !matches!(r, Record::ShadowBound { .. }))
        .map(|record| match record {
            Record::GroupSnapshot { group, state } => {
                let mut state = state.clone();
                state.shadow = None;
                Record::GroupSnapshot {
                    group: group.clone(),
                    state,
                }
            }
            other => other.clone(),
        })
        .collect()
}

#[test]
fn a_schedule_writes_the_same_records_with_shadows_but_their_bindings() {
    let mut compared = 0;
    for seed in 900..912 {
        let mut plain = World::new(seed, &Options::default());
        plain.run().unwrap_or_else(|v| panic!("{v}"));
        let mut shadowed = World::new(seed, &with_shadows());
        shadowed.run().unwrap_or_else(|v| panic!("{v}"));
        let (plain_logs, shadowed_logs) = (plain.shard_logs(), shadowed.shard_logs());
        for (shard, (a, b)) in plain_logs.iter().zip(&shadowed_logs).enumerate() {
            let b = without_shadows(b);
            if let Some(i) = (0..a.len().max(b.len())).find(|&i| a.get(i) != b.get(i)) {
                panic!(
                    "seed {seed} shard {shard}: record {i} differs:\n  without shadows: {:?}\n  with shadows:    {:?}",
                    a.get(i),
                    b.get(i)
                );
            }
            compared += a.len();
        }
        let bindings = shadowed_logs
            .iter()
            .flat_map(|log| log.iter())
            .filter(|r| matches!(r, Record::ShadowBound { .. }))
            .count();
        assert!(bindings > 0, "seed {seed}: no shadow was bound");
    }
    assert!(compared > 1_000, "{compared} records compared");
}

#[test]
fn schedules_with_shadows_keep_every_invariant() {
    let reports = run_many(40, 30, &with_shadows(), 2);
    let failed = violation_lines(&reports);
    assert!(failed.is_empty(), "{failed:#?}");
    let stats = summed_stats(&reports);
    assert!(stats.shadow_answers > 100, "{}", summary_line(&reports));
    assert!(stats.shadow_calls_dropped > 0, "{}", summary_line(&reports));
}

#[test]
fn cluster_schedules_with_shadows_keep_every_invariant() {
    let cluster = ClusterOptions {
        nodes: None,
        fault: None,
    };
    let reports = run_many_on(70, 16, &with_shadows(), Some(&cluster), 2);
    let failed = violation_lines(&reports);
    assert!(failed.is_empty(), "{failed:#?}");
    let stats = summed_stats(&reports);
    assert!(stats.shadow_answers > 0, "{}", summary_line(&reports));
}
