//! The loads of a schedule's tasks: each group that takes loads draws a
//! [`LoadPlan`] (a shape and a salt), and a task's load at a virtual time
//! is a pure function of the plan, the task, its topic's partition count
//! and the time, so a seed names every load exactly and the simulated
//! application can ask for any task's load whenever it reports. It knows
//! nothing of members, of the host or of the checks; the world feeds these
//! loads to the members' machines ([`super::world`]).

use crate::protocol::group::{Millis, Task};
use crate::protocol::splitmix::splitmix;
use crate::sim::rng::Rng;

/// The ranks a Zipf plan spreads its tasks over: a task's rank is drawn
/// from its hash in `1..=ZIPF_RANKS`.
const ZIPF_RANKS: u64 = 64;

/// How much hotter than the others a drifting hot task is.
const HOT_FACTOR: f64 = 20.0;

/// How a group's task loads are shaped.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LoadShape {
    /// Each task a fixed load drawn uniformly in `[base/2, 3 base/2)`.
    Uniform,
    /// Each task `base * ZIPF_RANKS / rank^s` for a rank its hash draws in
    /// `1..=ZIPF_RANKS`: a few hot tasks, a long cold tail.
    Zipf { s: f64 },
    /// Uniform loads, and in each topic one task `HOT_FACTOR` (20) times
    /// hotter; the hot partition changes every `period_ms`.
    HotDrift { period_ms: Millis },
    /// Zipf loads (s = 1) until `at_ms`, every one times `factor` from then.
    Step { at_ms: Millis, factor: f64 },
}

/// One group's loads: a shape, the scale of a typical task's load and the
/// salt its hashes take.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoadPlan {
    pub shape: LoadShape,
    pub base: f64,
    pub salt: u64,
    /// From then on the loads stand still (the quiet phase): the group may
    /// settle on them.
    pub frozen_at_ms: Option<Millis>,
}

impl LoadPlan {
    /// A plan for a schedule that starts at `now`: its shape, scale and
    /// salt drawn from `rng`.
    pub fn draw(rng: &mut Rng, now: Millis) -> Self {
        let shape = match rng.below(4) {
            0 => LoadShape::Uniform,
            1 => LoadShape::Zipf {
                s: *rng.pick(&[0.8, 1.0, 1.2]),
            },
            2 => LoadShape::HotDrift {
                period_ms: rng.range(2_000, 8_000),
            },
            _ => LoadShape::Step {
                at_ms: now + rng.range(1_000, 10_000),
                factor: *rng.pick(&[0.25, 3.0, 10.0]),
            },
        };
        LoadPlan {
            shape,
            base: *rng.pick(&[1.0, 100.0, 25_000.0]),
            salt: rng.next_u64(),
            frozen_at_ms: None,
        }
    }

    /// The load of `task` (of a topic of `partitions` partitions) at `now`:
    /// finite and at least 0.
    pub fn load(&self, task: &Task, partitions: u32, now: Millis) -> f64 {
        let now = self.frozen_at_ms.map_or(now, |at| now.min(at));
        let hash = self.hash(task);
        match self.shape {
            LoadShape::Uniform => self.base * (0.5 + unit(hash)),
            LoadShape::Zipf { s } => self.zipf(hash, s),
            LoadShape::HotDrift { period_ms } => {
                let uniform = self.base * (0.5 + unit(hash));
                let period = now / period_ms.max(1);
                let hot = splitmix(self.salt ^ topic_hash(&task.topic) ^ splitmix(period))
                    % u64::from(partitions.max(1));
                if u64::from(task.partition) == hot {
                    uniform * HOT_FACTOR
                } else {
                    uniform
                }
            }
            LoadShape::Step { at_ms, factor } => {
                let zipf = self.zipf(hash, 1.0);
                if now >= at_ms { zipf * factor } else { zipf }
            }
        }
    }

    fn zipf(&self, hash: u64, s: f64) -> f64 {
        let rank = 1 + (unit(hash) * ZIPF_RANKS as f64) as u64;
        self.base * ZIPF_RANKS as f64 / (rank as f64).powf(s) / 8.0
    }

    fn hash(&self, task: &Task) -> u64 {
        splitmix(self.salt ^ topic_hash(&task.topic) ^ splitmix(u64::from(task.partition)))
    }
}

/// A topic name's hash (FNV-1a).
fn topic_hash(topic: &str) -> u64 {
    topic.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// A hash as a number in `[0, 1)`.
fn unit(hash: u64) -> f64 {
    (hash >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(shape: LoadShape) -> LoadPlan {
        LoadPlan {
            shape,
            base: 100.0,
            salt: 7,
            frozen_at_ms: None,
        }
    }

    fn loads(plan: &LoadPlan, partitions: u32, now: Millis) -> Vec<f64> {
        (0..partitions)
            .map(|p| plan.load(&Task::new("t0", p), partitions, now))
            .collect()
    }

    #[test]
    fn uniform_loads_are_fixed_and_within_their_range() {
        let plan = plan(LoadShape::Uniform);
        let first = loads(&plan, 32, 0);
        assert_eq!(first, loads(&plan, 32, 99_000));
        assert!(
            first.iter().all(|&l| (50.0..150.0).contains(&l)),
            "{first:?}"
        );
        let distinct: std::collections::BTreeSet<u64> = first.iter().map(|l| l.to_bits()).collect();
        assert!(distinct.len() > 30);
    }

    #[test]
    fn zipf_loads_are_skewed() {
        let plan = plan(LoadShape::Zipf { s: 1.0 });
        let mut all = loads(&plan, 64, 0);
        all.sort_by(f64::total_cmp);
        let (min, max) = (all[0], all[63]);
        assert!(max / min > 8.0, "{min} .. {max}");
        assert!(all.iter().all(|l| l.is_finite() && *l > 0.0));
    }

    #[test]
    fn a_hot_task_drifts_and_stands_still_once_frozen() {
        let mut plan = plan(LoadShape::HotDrift { period_ms: 1_000 });
        let hottest = |plan: &LoadPlan, now| {
            let all = loads(plan, 16, now);
            (0..16).max_by(|&a, &b| all[a].total_cmp(&all[b])).unwrap()
        };
        let hot: std::collections::BTreeSet<usize> =
            (0..20).map(|k| hottest(&plan, k * 1_000)).collect();
        assert!(hot.len() > 3, "the hot task moved only among {hot:?}");
        plan.frozen_at_ms = Some(5_500);
        assert_eq!(loads(&plan, 16, 5_000), loads(&plan, 16, 60_000));
    }

    #[test]
    fn a_step_multiplies_every_load_at_its_instant() {
        let plan = plan(LoadShape::Step {
            at_ms: 3_000,
            factor: 3.0,
        });
        let before = loads(&plan, 8, 2_999);
        let after = loads(&plan, 8, 3_000);
        for (b, a) in before.iter().zip(&after) {
            assert!((a - 3.0 * b).abs() < 1e-9 * a, "{b} -> {a}");
        }
    }
}
