//! The figures of `assignd check`: how one valid answer balances (active
//! tasks per member, and load per member when the input has loads) and
//! what it moved against the input's current assignment; and the totals
//! over many calls. Pure arithmetic on the SDK's model; the load spread
//! is loadgen's (`spread`), the moves the SDK's (`moved_tasks`).

use assignd_guest_sdk::load::BAND_DEFAULT;
use assignd_guest_sdk::model::{Assignment, GroupInput, NO_MEMBER};
use assignd_guest_sdk::testing::moved_tasks;
use serde::Serialize;

use crate::loadgen::load_figures::spread;

/// The figures of one valid answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Figures {
    /// The most active tasks of a member minus the fewest.
    pub count_spread: u32,
    /// The most active tasks of a member over the mean; None without tasks
    /// or members.
    pub count_max_over_mean: Option<f64>,
    /// The most loaded member's load over the mean, when the input has a
    /// load unit and some known load (a task of unknown load counts as the
    /// mean of the known ones).
    pub load_max_over_mean: Option<f64>,
    /// Active tasks whose owner the answer changed (tasks without an owner
    /// in the input not counted).
    pub tasks_moved: u64,
}

/// The figures of `answer`, a valid answer to `input`.
pub fn figures(input: &GroupInput, answer: &Assignment) -> Figures {
    let counts = answer.active_counts(input.members.len());
    let (min, max) = (
        counts.iter().copied().min().unwrap_or(0),
        counts.iter().copied().max().unwrap_or(0),
    );
    let total: u64 = counts.iter().map(|&c| u64::from(c)).sum();
    let count_max_over_mean =
        (total > 0).then(|| f64::from(max) * counts.len() as f64 / total as f64);
    Figures {
        count_spread: max - min,
        count_max_over_mean,
        load_max_over_mean: load_max_over_mean(input, &answer.active_owner),
        tasks_moved: moved_tasks(&input.active_owner, &answer.active_owner) as u64,
    }
}

/// Each member's load under `owners`, weighed with `input`'s loads.
fn load_max_over_mean(input: &GroupInput, owners: &[u32]) -> Option<f64> {
    input.load_unit.as_ref()?;
    let loads = input.task_loads();
    let known: Vec<f64> = loads.iter().flatten().copied().collect();
    if known.is_empty() {
        return None;
    }
    let unknown = known.iter().sum::<f64>() / known.len() as f64;
    let mut per_member = vec![0.0; input.members.len()];
    for (task, &owner) in owners.iter().enumerate() {
        if owner != NO_MEMBER {
            per_member[owner as usize] += loads[task].unwrap_or(unknown);
        }
    }
    spread(&per_member, BAND_DEFAULT).map(|s| s.max_over_mean)
}

/// The median and the largest of some values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct MedianMax<T> {
    pub median: T,
    pub max: T,
}

/// The median (the mean of the two middle values of an even count) and
/// the largest of `values`; None when there are none.
pub fn median_max(values: &[f64]) -> Option<MedianMax<f64>> {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let median = match n {
        0 => return None,
        _ if n % 2 == 1 => sorted[n / 2],
        _ => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    };
    Some(MedianMax {
        median,
        max: sorted[n - 1],
    })
}

/// The largest of some optional figures, if any is there.
pub fn max_of(values: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    values.flatten().reduce(f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;
    use assignd_guest_sdk::testing::{GroupSpec, Subscriptions, group};

    /// One topic of `owners.len()` tasks held as `owners` says, `members`
    /// members.
    fn input(members: u32, owners: Vec<u32>) -> GroupInput {
        let mut input = group(&GroupSpec {
            members,
            topics: 1,
            partitions: owners.len() as u32,
            subscriptions: Subscriptions::Homogeneous,
            racks: 0,
        });
        input.active_owner = owners;
        input
    }

    fn answer(owners: Vec<u32>) -> Assignment {
        Assignment {
            active_owner: owners,
            ..Assignment::default()
        }
    }

    #[test]
    fn counts_spread_and_moves_of_a_tiny_answer() {
        // Before: m0 holds 0..=2, task 3 and 4 unowned; after: 3, 1, 1.
        let before = input(3, vec![0, 0, 0, NO_MEMBER, NO_MEMBER]);
        let f = figures(&before, &answer(vec![0, 1, 0, 2, 0]));
        assert_eq!(f.count_spread, 2);
        assert_eq!(f.count_max_over_mean, Some(3.0 * 3.0 / 5.0));
        // Task 1 moved; tasks 3 and 4 had no owner.
        assert_eq!(f.tasks_moved, 1);
        assert_eq!(f.load_max_over_mean, None, "no load unit");
        let empty = figures(&input(2, vec![]), &answer(vec![]));
        assert_eq!((empty.count_spread, empty.count_max_over_mean), (0, None));
    }

    #[test]
    fn load_balance_weighs_known_loads_and_unknown_ones_as_their_mean() {
        let mut loaded = input(2, vec![NO_MEMBER; 4]);
        loaded.load_unit = Some("u".into());
        for (task, load) in [(0, 30.0), (1, 10.0), (2, 20.0)] {
            loaded.loads.push(task, load);
        }
        // Task 3 unknown: 20, the mean. m0 = 30 + 20 = 50, m1 = 10 + 20 = 30.
        let f = figures(&loaded, &answer(vec![0, 1, 1, 0]));
        assert_eq!(f.load_max_over_mean, Some(50.0 / 40.0));
        assert_eq!(f.count_spread, 0);
        assert_eq!(f.count_max_over_mean, Some(1.0));
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(
            median_max(&[3.0, 1.0, 2.0]),
            Some(MedianMax {
                median: 2.0,
                max: 3.0
            })
        );
        assert_eq!(median_max(&[4.0, 1.0, 2.0, 8.0]).unwrap().median, 3.0);
        assert_eq!(median_max(&[]), None);
        assert_eq!(max_of([None, Some(1.5), Some(0.5)].into_iter()), Some(1.5));
        assert_eq!(max_of([None].into_iter()), None);
    }
}
