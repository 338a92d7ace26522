//! Schedules with a rollout: the rollout core rolls a built-in out over
//! every group while the chaos goes on (members joining, crashing and
//! draining, configs changing, the host stalling and restarting), its
//! commands performed at the shards' cores. Every invariant holds, and each
//! rollout that ended left the groups where it says (`check_rollout`):
//! some complete, some roll back.

use crate::sim::{Options, run_many, summary_line, summed_stats, violation_lines};

#[test]
fn schedules_with_a_rollout_keep_every_invariant_and_end_where_they_say() {
    let options = Options {
        rollouts: true,
        ..Options::default()
    };
    let reports = run_many(300, 40, &options, 2);
    let failed = violation_lines(&reports);
    assert!(failed.is_empty(), "{failed:#?}");
    let stats = summed_stats(&reports);
    let line = summary_line(&reports);
    assert!(stats.rollouts_completed > 0, "{line}");
    assert!(stats.rollouts_rolled_back > 0, "{line}");
    assert!(stats.rollout_commands > 100, "{line}");
}
