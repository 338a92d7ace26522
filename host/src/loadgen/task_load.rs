//! The loads of simulated tasks (`assignd loadgen --task-load`): a
//! distribution over a group's partitions, parsed from its spec, and each
//! partition's load at a time of the run. Seeded and pure: the same spec,
//! task count and seed give the same loads, so two runs side by side (load
//! balancing against count balancing) see the same tasks. It knows nothing
//! of members or of the host; the fleet reports these loads, the load
//! figures weigh the members' holdings with them.

/// The grammar, for error messages and `--help`.
pub const TASK_LOAD_GRAMMAR: &str = "uniform[:MAX] (each task a load in (0, MAX], default 100), zipf[:S] (the k-th hottest task 1000/k^S, default S 1, ranks shuffled over the partitions), hot[:PERIOD_S] (every task 10, one hot task half a member's share that moves to another task every PERIOD_S seconds, default 60), step[:AT_S:FACTOR] (every task 10, a quarter of them FACTOR times that from AT_S seconds after measuring starts, default 30 and 4)";

/// The most a task's load may be (the heartbeat's bound is 1e15).
pub const TASK_LOAD_MAX: f64 = 1e12;
/// The longest time a spec may name, in seconds.
pub const TASK_LOAD_TIME_S_MAX: f64 = 86_400.0;
/// The largest Zipf exponent (beyond it every load but the first rounds
/// to nothing).
pub const ZIPF_S_MAX: f64 = 10.0;

/// The load every task carries under `hot` and `step`, before the change.
const BASE_LOAD: f64 = 10.0;
/// The hottest task's load under `zipf`.
const ZIPF_TOP: f64 = 1000.0;
/// The hot task's load under `hot`, in members' shares of the rest.
const HOT_SHARE: f64 = 0.5;
/// The part of the tasks a `step` multiplies.
const STEP_PART: f64 = 0.25;

/// A load distribution, as its spec says.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TaskLoad {
    /// Each task a fixed load drawn in (0, max].
    Uniform { max: f64 },
    /// The k-th hottest task (k from 1) carries `ZIPF_TOP / k^s`.
    Zipf { s: f64 },
    /// Every task `BASE_LOAD`, one task hot (half a member's share); the
    /// hot task changes every `period_s`.
    Hot { period_s: f64 },
    /// Every task `BASE_LOAD`; from `at_s` a quarter of them `factor`
    /// times that.
    Step { at_s: f64, factor: f64 },
}

impl TaskLoad {
    /// Parses a spec of [`TASK_LOAD_GRAMMAR`].
    pub fn parse(spec: &str) -> Result<TaskLoad, String> {
        let mut parts = spec.trim().split(':');
        let kind = parts.next().unwrap_or_default();
        let args: Vec<&str> = parts.collect();
        let arity = |n: usize| -> Result<(), String> {
            if args.len() > n {
                return Err(format!(
                    "{spec:?}: {kind} takes at most {n} argument(s) (expected {TASK_LOAD_GRAMMAR})"
                ));
            }
            Ok(())
        };
        let number = |i: usize, name: &str, default: f64, ok: &dyn Fn(f64) -> bool| {
            let Some(text) = args.get(i) else {
                return Ok(default);
            };
            match text.trim().parse::<f64>() {
                Ok(value) if value.is_finite() && ok(value) => Ok(value),
                _ => Err(format!("{spec:?}: {name} {text:?} is out of range")),
            }
        };
        let time = |t: f64| t > 0.0 && t <= TASK_LOAD_TIME_S_MAX;
        let load = match kind {
            "uniform" => {
                arity(1)?;
                TaskLoad::Uniform {
                    max: number(0, "MAX", 100.0, &|m| m > 0.0 && m <= TASK_LOAD_MAX)?,
                }
            }
            "zipf" => {
                arity(1)?;
                TaskLoad::Zipf {
                    s: number(0, "S", 1.0, &|s| s > 0.0 && s <= ZIPF_S_MAX)?,
                }
            }
            "hot" => {
                arity(1)?;
                TaskLoad::Hot {
                    period_s: number(0, "PERIOD_S", 60.0, &time)?,
                }
            }
            "step" => {
                arity(2)?;
                TaskLoad::Step {
                    at_s: number(0, "AT_S", 30.0, &time)?,
                    factor: number(1, "FACTOR", 4.0, &|f| {
                        f > 0.0 && f * BASE_LOAD <= TASK_LOAD_MAX
                    })?,
                }
            }
            _ => {
                return Err(format!(
                    "{spec:?}: unknown distribution {kind:?} (expected {TASK_LOAD_GRAMMAR})"
                ));
            }
        };
        Ok(load)
    }
}

/// SplitMix64's finaliser: a seeded draw per partition.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A draw in (0, 1] for `partition` under `seed`.
fn unit(seed: u64, partition: u64) -> f64 {
    ((mix(seed ^ mix(partition)) >> 11) + 1) as f64 / (1u64 << 53) as f64
}

/// The partitions in a seeded order, from the hottest (Zipf's ranks, the
/// hot task's path, the stepped quarter).
fn shuffled(tasks: u32, seed: u64) -> Vec<u32> {
    let mut order: Vec<u32> = (0..tasks).collect();
    order.sort_by_key(|&p| mix(seed ^ mix(u64::from(p) + 1)));
    order
}

/// One group's task loads over a run: `tasks` partitions of one topic,
/// `members` at the start (the hot task's size is a share of theirs).
#[derive(Clone, Debug)]
pub struct TaskLoads {
    kind: TaskLoad,
    /// The load of each partition when it does not change with time.
    fixed: Vec<f64>,
    /// The partitions in their seeded order.
    order: Vec<u32>,
    /// Whether a `step` multiplies each partition.
    stepped: Vec<bool>,
    /// The hot task's load (`hot` only).
    hot: f64,
}

impl TaskLoads {
    pub fn new(kind: TaskLoad, tasks: u32, members: u32, seed: u64) -> Self {
        let order = shuffled(tasks, seed);
        let mut fixed = vec![BASE_LOAD; tasks as usize];
        match kind {
            TaskLoad::Uniform { max } => {
                for (p, load) in fixed.iter_mut().enumerate() {
                    *load = max * unit(seed, p as u64);
                }
            }
            TaskLoad::Zipf { s } => {
                for (rank, &p) in order.iter().enumerate() {
                    fixed[p as usize] = ZIPF_TOP / ((rank + 1) as f64).powf(s);
                }
            }
            TaskLoad::Hot { .. } | TaskLoad::Step { .. } => {}
        }
        let mut stepped = vec![false; tasks as usize];
        let part = (f64::from(tasks) * STEP_PART).ceil() as usize;
        for &p in &order[..part] {
            stepped[p as usize] = true;
        }
        let rest = BASE_LOAD * f64::from(tasks.saturating_sub(1));
        TaskLoads {
            kind,
            fixed,
            order,
            stepped,
            hot: HOT_SHARE * rest / f64::from(members.max(1)),
        }
    }

    pub fn tasks(&self) -> u32 {
        self.fixed.len() as u32
    }

    /// The hot task at `t_s` seconds after measuring started (`hot` only).
    pub fn hot_task(&self, t_s: f64) -> Option<u32> {
        let TaskLoad::Hot { period_s } = self.kind else {
            return None;
        };
        let turn = (t_s.max(0.0) / period_s).floor() as usize;
        self.order.get(turn % self.order.len().max(1)).copied()
    }

    /// `partition`'s load at `t_s` seconds after measuring started.
    pub fn load(&self, partition: u32, t_s: f64) -> f64 {
        let Some(&fixed) = self.fixed.get(partition as usize) else {
            return 0.0;
        };
        match self.kind {
            TaskLoad::Uniform { .. } | TaskLoad::Zipf { .. } => fixed,
            TaskLoad::Hot { .. } => {
                if self.hot_task(t_s) == Some(partition) {
                    self.hot
                } else {
                    fixed
                }
            }
            TaskLoad::Step { at_s, factor } => {
                if t_s >= at_s && self.stepped[partition as usize] {
                    fixed * factor
                } else {
                    fixed
                }
            }
        }
    }

    /// Every partition's load at `t_s`.
    pub fn loads(&self, t_s: f64) -> Vec<f64> {
        (0..self.tasks()).map(|p| self.load(p, t_s)).collect()
    }

    /// The next time after `t_s` at which some load changes, if any: the
    /// fleet sets the members' loads again then.
    pub fn next_change(&self, t_s: f64) -> Option<f64> {
        match self.kind {
            TaskLoad::Uniform { .. } | TaskLoad::Zipf { .. } => None,
            TaskLoad::Hot { period_s } => {
                Some(((t_s.max(0.0) / period_s).floor() + 1.0) * period_s)
            }
            TaskLoad::Step { at_s, .. } => (t_s < at_s).then_some(at_s),
        }
    }
}

/// A group's task loads in a run: their time 0 is when measuring starts
/// (before that, the loads of time 0).
#[derive(Debug)]
pub struct RunLoads {
    pub loads: TaskLoads,
    started: std::sync::OnceLock<std::time::Instant>,
}

impl RunLoads {
    pub fn new(loads: TaskLoads) -> Self {
        RunLoads {
            loads,
            started: std::sync::OnceLock::new(),
        }
    }

    /// Starts the loads' clock (once; later calls change nothing).
    pub fn start(&self, at: std::time::Instant) {
        let _ = self.started.set(at);
    }

    /// Seconds since measuring started (0 before).
    pub fn t_s(&self) -> f64 {
        self.started
            .get()
            .map_or(0.0, |started| started.elapsed().as_secs_f64())
    }

    /// `partition`'s load now.
    pub fn load_now(&self, partition: u32) -> f64 {
        self.loads.load(partition, self.t_s())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_their_defaults() {
        assert_eq!(
            TaskLoad::parse("uniform"),
            Ok(TaskLoad::Uniform { max: 100.0 })
        );
        assert_eq!(
            TaskLoad::parse("uniform:5"),
            Ok(TaskLoad::Uniform { max: 5.0 })
        );
        assert_eq!(TaskLoad::parse("zipf"), Ok(TaskLoad::Zipf { s: 1.0 }));
        assert_eq!(TaskLoad::parse("zipf:1.2"), Ok(TaskLoad::Zipf { s: 1.2 }));
        assert_eq!(TaskLoad::parse("hot"), Ok(TaskLoad::Hot { period_s: 60.0 }));
        assert_eq!(
            TaskLoad::parse("hot:5"),
            Ok(TaskLoad::Hot { period_s: 5.0 })
        );
        assert_eq!(
            TaskLoad::parse("step"),
            Ok(TaskLoad::Step {
                at_s: 30.0,
                factor: 4.0
            })
        );
        assert_eq!(
            TaskLoad::parse("step:10:2.5"),
            Ok(TaskLoad::Step {
                at_s: 10.0,
                factor: 2.5
            })
        );
    }

    #[test]
    fn bad_specs_are_refused_naming_the_part() {
        for (spec, needle) in [
            ("pareto", "unknown distribution"),
            ("uniform:0", "MAX"),
            ("uniform:1e13", "MAX"),
            ("uniform:1:2", "at most 1"),
            ("zipf:-1", "S"),
            ("zipf:11", "S"),
            ("zipf:nan", "S"),
            ("hot:0", "PERIOD_S"),
            ("hot:86401", "PERIOD_S"),
            ("step:10:0", "FACTOR"),
            ("step:x", "AT_S"),
            ("step:1:2:3", "at most 2"),
        ] {
            let error = TaskLoad::parse(spec).expect_err(spec);
            assert!(error.contains(needle), "{spec}: {error}");
        }
    }

    #[test]
    fn zipf_gives_each_rank_once_over_shuffled_partitions() {
        let loads = TaskLoads::new(TaskLoad::Zipf { s: 1.0 }, 100, 4, 7).loads(0.0);
        let mut sorted = loads.clone();
        sorted.sort_by(|a, b| b.total_cmp(a));
        for (k, load) in sorted.iter().enumerate() {
            assert!((load - 1000.0 / (k + 1) as f64).abs() < 1e-9);
        }
        // The hottest is not simply partition 0, and a seed decides where.
        let again = TaskLoads::new(TaskLoad::Zipf { s: 1.0 }, 100, 4, 7).loads(0.0);
        let other = TaskLoads::new(TaskLoad::Zipf { s: 1.0 }, 100, 4, 8).loads(0.0);
        assert_eq!(loads, again);
        assert_ne!(loads, other);
    }

    #[test]
    fn uniform_loads_are_in_range_and_spread() {
        let loads = TaskLoads::new(TaskLoad::Uniform { max: 50.0 }, 1000, 4, 1).loads(0.0);
        assert!(loads.iter().all(|&l| l > 0.0 && l <= 50.0));
        let mean = loads.iter().sum::<f64>() / loads.len() as f64;
        assert!((mean - 25.0).abs() < 2.5, "{mean}");
    }

    #[test]
    fn the_hot_task_is_half_a_share_and_moves_every_period() {
        let loads = TaskLoads::new(TaskLoad::Hot { period_s: 10.0 }, 61, 6, 3);
        let first = loads.hot_task(0.0).unwrap();
        assert_eq!(loads.hot_task(9.9), Some(first));
        let second = loads.hot_task(10.0).unwrap();
        assert_ne!(first, second);
        assert_eq!(loads.load(first, 5.0), 0.5 * 600.0 / 6.0);
        assert_eq!(loads.load(first, 15.0), 10.0);
        assert_eq!(loads.load(second, 15.0), 50.0);
        let total: f64 = loads.loads(15.0).iter().sum();
        assert_eq!(total, 600.0 + 50.0);
        assert_eq!(loads.next_change(15.0), Some(20.0));
    }

    #[test]
    fn a_step_multiplies_a_quarter_of_the_tasks_from_its_time() {
        let loads = TaskLoads::new(
            TaskLoad::Step {
                at_s: 5.0,
                factor: 3.0,
            },
            40,
            4,
            9,
        );
        assert!(loads.loads(4.9).iter().all(|&l| l == 10.0));
        let after = loads.loads(5.0);
        assert_eq!(after.iter().filter(|&&l| l == 30.0).count(), 10);
        assert_eq!(after.iter().filter(|&&l| l == 10.0).count(), 30);
        assert_eq!(loads.next_change(1.0), Some(5.0));
        assert_eq!(loads.next_change(5.0), None);
    }

    #[test]
    fn a_partition_outside_the_topic_has_no_load() {
        let loads = TaskLoads::new(TaskLoad::Zipf { s: 1.0 }, 10, 2, 0);
        assert_eq!(loads.load(10, 0.0), 0.0);
    }
}
