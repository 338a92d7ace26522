//! The load figures of `assignd loadgen --task-load`: every sample, each
//! member's load (the tasks the ledger says it holds, weighed with the
//! tasks' true loads at that time), the largest member's against the mean,
//! the time some member was outside the band, the tasks that changed owner
//! and the load they carried; and, from the host's group view, each
//! rebalance and its reason, with the moves that followed it. The members
//! all have capacity 1, so every share is the mean. It owns the sampling
//! and the figures' shape; the fleet sets the loads, the report prints.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

use super::ledger::Ledger;
use super::probe::Admin;
use super::task_load::RunLoads;

/// A member's load against the mean, one sample of one group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Spread {
    /// The most loaded member's load over the mean (1 is perfect).
    pub max_over_mean: f64,
    /// The least loaded member's load over the mean.
    pub min_over_mean: f64,
    /// Every member within the band of the mean.
    pub in_band: bool,
    /// Members outside it (a task bigger than a share keeps its member
    /// out whatever the assignor does).
    pub outside: u32,
}

/// The spread of `loads` (one per member, members holding nothing
/// included) in band `band`; None without load.
pub fn spread(loads: &[f64], band: f64) -> Option<Spread> {
    let total: f64 = loads.iter().sum();
    if loads.is_empty() || total <= 0.0 {
        return None;
    }
    let mean = total / loads.len() as f64;
    let max = loads.iter().copied().fold(f64::MIN, f64::max);
    let min = loads.iter().copied().fold(f64::MAX, f64::min);
    // A relative slack for float sums: a member exactly on the edge is in.
    let slack = 1e-9 * mean;
    let (low, high) = (mean * (1.0 - band) - slack, mean * (1.0 + band) + slack);
    let outside = loads.iter().filter(|&&l| l < low || l > high).count() as u32;
    Some(Spread {
        max_over_mean: max / mean,
        min_over_mean: min / mean,
        in_band: outside == 0,
        outside,
    })
}

/// The reason of a target that promotes learners that caught up: it
/// completes the moves of the rebalance that placed them.
const CAUGHT_UP: &str = "caught_up";
/// The reason of a load rebalance.
const LOAD: &str = "load";

/// A rebalance the host's view showed, and the moves after it until the
/// next one (the moves of the learners it placed included, when they
/// caught up).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Rebalance {
    /// Seconds after measuring started (when a sample first saw it).
    pub at_s: f64,
    pub epoch: u64,
    /// Its reason as the view gives it (`load`, `membership`, ...).
    pub reason: String,
    pub tasks_moved: u64,
    /// The load the moved tasks carried when they moved.
    pub load_moved: f64,
    /// The spread at the last sample before it.
    pub max_over_mean_before: f64,
}

/// One group's figures over the measurement.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GroupLoad {
    pub group: String,
    /// The spread at the first and the last sample.
    pub first: Spread,
    pub last: Spread,
    /// The largest max/mean of any sample.
    pub max_over_mean_max: f64,
    /// The time-weighted mean of max/mean over the samples.
    pub max_over_mean_mean: f64,
    /// Seconds some member was outside the band (between samples, as the
    /// earlier sample was).
    pub outside_band_s: f64,
    /// Tasks that changed owner, and the load they carried then.
    pub tasks_moved: u64,
    pub load_moved: f64,
    /// The rebalances seen, oldest first.
    pub rebalances: Vec<Rebalance>,
    /// The imbalance the host's view gave at the last sample, if any.
    pub host_imbalance: Option<f64>,
    #[serde(skip)]
    pub(super) weighted_sum: f64,
    #[serde(skip)]
    pub(super) sampled_s: f64,
}

impl GroupLoad {
    /// Rebalances whose reason is load.
    pub fn load_rebalances(&self) -> usize {
        self.rebalances
            .iter()
            .filter(|r| r.reason == "load")
            .count()
    }
}

/// What the sampler follows: the groups, their loads and members.
pub struct Sampled {
    pub ledger: Arc<Ledger>,
    pub loads: Arc<RunLoads>,
    /// Each group's name, for its view.
    pub names: Vec<String>,
    /// Each group's member count now (the churn changes it).
    pub members: Arc<Vec<AtomicU32>>,
    pub band: f64,
    pub every: Duration,
    /// Reads each group's view for its rebalances, if the group has a
    /// load unit (a view of a large group costs the host).
    pub admin: Option<Admin>,
}

/// One group's sampling state.
struct GroupSampler {
    figures: GroupLoad,
    /// Each partition's last owner (0: never owned).
    last_owner: Vec<u64>,
    last_epoch: Option<u64>,
    /// The last load rebalance the view showed (host ms).
    last_load_at: Option<u64>,
    /// Whether a view was seen (the first is the baseline).
    seen: bool,
    previous: Option<(f64, Spread)>,
    /// The rebalance the moves seen now belong to: the last one, unless
    /// that only promoted caught-up learners of an earlier one.
    moving: Option<usize>,
}

/// Samples until `stop`, from `started` (time 0 of the loads); one
/// [`GroupLoad`] per group.
pub async fn sample(sampled: Sampled, started: Instant, stop: Arc<AtomicBool>) -> Vec<GroupLoad> {
    let tasks = sampled.loads.loads.tasks() as usize;
    let mut groups: Vec<GroupSampler> = sampled
        .names
        .iter()
        .map(|name| GroupSampler {
            figures: GroupLoad {
                group: name.clone(),
                ..GroupLoad::default()
            },
            last_owner: vec![0; tasks],
            last_epoch: None,
            last_load_at: None,
            seen: false,
            previous: None,
            moving: None,
        })
        .collect();
    // The owners when measuring starts are nobody's moves.
    for (g, group) in groups.iter_mut().enumerate() {
        for (partition, member) in sampled.ledger.owners(g) {
            if let Some(owner) = group.last_owner.get_mut(partition as usize) {
                *owner = member;
            }
        }
    }
    let mut next = Instant::now();
    loop {
        let last = stop.load(Ordering::Relaxed);
        let t_s = started.elapsed().as_secs_f64();
        for (g, group) in groups.iter_mut().enumerate() {
            let view = match &sampled.admin {
                Some(admin) => admin.group_json(&sampled.names[g]).await.ok(),
                None => None,
            };
            group.sample(&sampled, g, t_s, view.as_ref());
        }
        if last {
            break;
        }
        next += sampled.every;
        tokio::time::sleep_until(next.into()).await;
    }
    groups.into_iter().map(|g| g.finish()).collect()
}

impl GroupSampler {
    fn sample(&mut self, sampled: &Sampled, g: usize, t_s: f64, view: Option<&serde_json::Value>) {
        if let Some(view) = view {
            self.see_view(view, t_s);
        }
        let members = sampled.members[g].load(Ordering::Relaxed) as usize;
        let mut per_member: HashMap<u64, f64> = HashMap::new();
        for (partition, member) in sampled.ledger.owners(g) {
            let load = sampled.loads.loads.load(partition, t_s);
            *per_member.entry(member).or_default() += load;
            let Some(last) = self.last_owner.get_mut(partition as usize) else {
                continue;
            };
            if *last != 0 && *last != member {
                self.figures.tasks_moved += 1;
                self.figures.load_moved += load;
                if let Some(r) = self.moving.and_then(|i| self.figures.rebalances.get_mut(i)) {
                    r.tasks_moved += 1;
                    r.load_moved += load;
                }
            }
            *last = member;
        }
        let mut loads: Vec<f64> = per_member.into_values().collect();
        // Members holding nothing weigh in at zero.
        loads.resize(loads.len().max(members), 0.0);
        let Some(spread) = spread(&loads, sampled.band) else {
            return;
        };
        self.add(t_s, spread);
    }

    fn add(&mut self, t_s: f64, spread: Spread) {
        let figures = &mut self.figures;
        match self.previous {
            None => figures.first = spread,
            Some((t0, before)) => {
                let dt = t_s - t0;
                figures.sampled_s += dt;
                figures.weighted_sum += before.max_over_mean * dt;
                if !before.in_band {
                    figures.outside_band_s += dt;
                }
            }
        }
        figures.last = spread;
        figures.max_over_mean_max = figures.max_over_mean_max.max(spread.max_over_mean);
        self.previous = Some((t_s, spread));
    }

    /// Notes a new installed target in the host's view (its
    /// `last_rebalance`) as a rebalance, and a new load rebalance (its
    /// `load_trigger`) as one of reason load: the learners it places
    /// install targets of their own as they catch up, often before the
    /// next sample.
    fn see_view(&mut self, view: &serde_json::Value, t_s: f64) {
        self.figures.host_imbalance = view
            .pointer("/loads/imbalance")
            .and_then(serde_json::Value::as_f64);
        let load_at = view
            .pointer("/load_trigger/last_load_rebalance_ms")
            .and_then(serde_json::Value::as_u64);
        let last = view.get("last_rebalance");
        let epoch = last
            .and_then(|l| l.get("epoch"))
            .and_then(serde_json::Value::as_u64);
        let reason = last
            .and_then(|l| l.get("reason"))
            .and_then(serde_json::Value::as_str)
            .unwrap_or("unknown");
        let first = !self.seen;
        self.seen = true;
        let new_load = load_at.is_some() && load_at != self.last_load_at;
        self.last_load_at = load_at;
        let new_epoch = epoch.is_some_and(|e| self.last_epoch.is_none_or(|seen| seen < e));
        if epoch.is_some() {
            self.last_epoch = epoch;
        }
        // The first view's targets are the baseline's.
        if first {
            return;
        }
        if new_load {
            self.push(t_s, epoch.unwrap_or(0), LOAD);
        } else if new_epoch {
            self.push(t_s, epoch.unwrap_or(0), reason);
        }
    }

    fn push(&mut self, t_s: f64, epoch: u64, reason: &str) {
        if reason != CAUGHT_UP || self.moving.is_none() {
            self.moving = Some(self.figures.rebalances.len());
        }
        self.figures.rebalances.push(Rebalance {
            at_s: t_s,
            epoch,
            reason: reason.to_owned(),
            tasks_moved: 0,
            load_moved: 0.0,
            max_over_mean_before: self.previous.map_or(0.0, |(_, s)| s.max_over_mean),
        });
    }

    fn finish(mut self) -> GroupLoad {
        let figures = &mut self.figures;
        figures.max_over_mean_mean = if figures.sampled_s > 0.0 {
            figures.weighted_sum / figures.sampled_s
        } else {
            figures.last.max_over_mean
        };
        self.figures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_compares_every_member_with_the_mean() {
        let s = spread(&[10.0, 10.0, 10.0], 0.1).unwrap();
        assert_eq!(
            (s.max_over_mean, s.min_over_mean, s.in_band),
            (1.0, 1.0, true)
        );
        let s = spread(&[11.0, 9.0], 0.1).unwrap();
        assert!(s.in_band, "the edge is inside: {s:?}");
        let s = spread(&[12.0, 8.0], 0.1).unwrap();
        assert!(!s.in_band);
        assert!((s.max_over_mean - 1.2).abs() < 1e-12);
        // A member holding nothing is outside any band below 1.
        let s = spread(&[15.0, 15.0, 0.0], 0.5).unwrap();
        assert!(!s.in_band);
        assert_eq!(s.outside, 1);
        assert_eq!(spread(&[], 0.1), None);
        assert_eq!(spread(&[0.0, 0.0], 0.1), None);
    }

    #[test]
    fn time_outside_the_band_counts_until_the_next_sample() {
        let mut sampler = GroupSampler {
            figures: GroupLoad::default(),
            last_owner: Vec::new(),
            last_epoch: None,
            last_load_at: None,
            seen: false,
            previous: None,
            moving: None,
        };
        let out = spread(&[20.0, 10.0], 0.1).unwrap();
        let inside = spread(&[10.0, 10.0], 0.1).unwrap();
        sampler.add(0.0, out);
        sampler.add(2.0, inside);
        sampler.add(5.0, inside);
        let figures = sampler.finish();
        assert_eq!(figures.outside_band_s, 2.0);
        assert_eq!(figures.first, out);
        assert_eq!(figures.last, inside);
        let expected = (out.max_over_mean * 2.0 + 3.0) / 5.0;
        assert!((figures.max_over_mean_mean - expected).abs() < 1e-12);
    }

    #[test]
    fn a_new_target_is_a_rebalance_and_caught_up_learners_complete_the_last() {
        let mut sampler = GroupSampler {
            figures: GroupLoad::default(),
            last_owner: Vec::new(),
            last_epoch: None,
            last_load_at: None,
            seen: false,
            previous: None,
            moving: None,
        };
        let view = |epoch: u64, reason: &str, load_at: Option<u64>| {
            serde_json::json!({
                "last_rebalance": {"epoch": epoch, "reason": reason, "at_ms": 1},
                "load_trigger": {"last_load_rebalance_ms": load_at},
            })
        };
        sampler.see_view(&view(3, "join", None), 0.0);
        sampler.see_view(&view(3, "join", None), 1.0);
        // A load rebalance whose learners already caught up by the sample.
        sampler.see_view(&view(9, "caught_up", Some(1500)), 2.0);
        sampler.see_view(&view(9, "caught_up", Some(1500)), 3.0);
        // More of its learners caught up: their moves are the load
        // rebalance's.
        sampler.see_view(&view(10, "caught_up", Some(1500)), 4.0);
        assert_eq!(sampler.moving, Some(0));
        sampler.see_view(&view(11, "join", Some(1500)), 5.0);
        assert_eq!(sampler.moving, Some(2));
        let figures = sampler.finish();
        assert_eq!(figures.rebalances.len(), 3, "{:?}", figures.rebalances);
        assert_eq!(figures.rebalances[0].reason, "load");
        assert_eq!(figures.rebalances[0].at_s, 2.0);
        assert_eq!(figures.load_rebalances(), 1);
    }
}
