//! Tiny groups with loads, and a brute-force oracle that tries every
//! assignment of them: the yardstick of the load balancing's property
//! tests (included by path from the assignors' `tests/`).
#![allow(dead_code)]

use assignd_guest_sdk::{GroupInput, Member, NO_MEMBER, Topic};

#[path = "../common/mod.rs"]
mod common;
pub use common::Rng;

/// The bands drawn: every preset, and two wider ones.
pub const BANDS: [f64; 5] = [0.05, 0.1, 0.25, 0.5, 1.0];

/// Zipf exponents drawn for the loads: 0 is uniform, 2 very skewed.
const SKEWS: [f64; 5] = [0.0, 0.5, 1.0, 1.5, 2.0];

/// A group of 1..=`members_max` members and at most `tasks_max` tasks
/// over one or two topics, mixed subscriptions half the time, random
/// capacities (and load capacities a third of the time), integer loads
/// `100 / rank^s` over shuffled ranks with a random skew `s`, about one
/// task in six of unknown load, random current owners; and a band.
pub fn tiny_group(seed: u64, members_max: u64, tasks_max: u64) -> (GroupInput, f64) {
    let mut rng = Rng(seed);
    let topic_count = 1 + rng.below(2) as u32;
    let mut left = 1 + rng.below(tasks_max);
    let mut input = GroupInput {
        load_unit: Some("records/s".into()),
        ..GroupInput::default()
    };
    for t in 0..topic_count {
        let partitions = if t + 1 == topic_count {
            left
        } else {
            rng.below(left + 1)
        };
        left -= partitions;
        input.topics.push(Topic {
            name: format!("topic-{t}"),
            partitions: partitions as u32,
        });
    }
    let member_count = 1 + rng.below(members_max) as u32;
    let mixed = rng.below(2) == 0;
    let load_capacities = rng.below(3) == 0;
    for m in 0..member_count {
        let topics: Vec<u32> = (0..topic_count)
            .filter(|_| !mixed || rng.below(3) != 0)
            .collect();
        let member = Member {
            id: format!("member-{m}"),
            name: None,
            rack: None,
            capacity: 1 + rng.below(3) as u32,
            subscription: input.intern_subscription(topics),
            load_capacity: load_capacities.then(|| 10.0 * (1 + rng.below(5)) as f64),
            utilisation: None,
        };
        input.members.push(member);
    }
    let task_count = input.task_count() as u32;
    let skew = SKEWS[rng.below(SKEWS.len() as u64) as usize];
    let mut ranks: Vec<u32> = (1..=task_count).collect();
    for i in (1..ranks.len()).rev() {
        ranks.swap(i, rng.below(i as u64 + 1) as usize);
    }
    for task in 0..task_count {
        if rng.below(6) != 0 {
            let load = (100.0 / f64::from(ranks[task as usize]).powf(skew)).round();
            input.loads.push(task, load);
        }
    }
    input.active_owner = (0..task_count)
        .map(|_| match rng.below(u64::from(member_count) + 1) as u32 {
            m if m == member_count => NO_MEMBER,
            m => m,
        })
        .collect();
    let band = BANDS[rng.below(BANDS.len() as u64) as usize];
    input.params.insert("load_band".into(), format!("{band}"));
    (input, band)
}

/// The group seen as the load balancer sees it: each task's load (known,
/// or the mean known load), whether it is known, each member's share of
/// its component and band tolerance.
pub struct View {
    pub load: Vec<f64>,
    pub known: Vec<bool>,
    pub share: Vec<f64>,
    pub tol: Vec<f64>,
    /// Component of every topic and member (`usize::MAX`: none).
    pub topic_comp: Vec<usize>,
    pub member_comp: Vec<usize>,
}

impl View {
    pub fn of(input: &GroupInput) -> Option<View> {
        let loads = input.task_loads();
        let known: Vec<bool> = loads.iter().map(Option::is_some).collect();
        let count = known.iter().filter(|k| **k).count();
        if count == 0 || input.load_unit.is_none() {
            return None;
        }
        let mean = loads.iter().flatten().sum::<f64>() / count as f64;
        let load: Vec<f64> = loads.iter().map(|l| l.unwrap_or(mean)).collect();
        let (topic_comp, member_comp) = components(input);
        let all_declared = input.members.iter().all(|m| m.load_capacity.is_some());
        let weight = |m: &Member| match m.load_capacity {
            Some(c) if all_declared => c,
            _ => f64::from(m.capacity.max(1)),
        };
        let comps = topic_comp
            .iter()
            .filter(|&&c| c != usize::MAX)
            .max()
            .map_or(0, |c| c + 1);
        let (mut total, mut weights, mut sizes) =
            (vec![0.0; comps], vec![0.0; comps], vec![0; comps]);
        let offsets = input.topic_offsets();
        for (t, &c) in topic_comp.iter().enumerate() {
            for task in offsets[t]..offsets[t + 1] {
                if c != usize::MAX {
                    total[c] += load[task as usize];
                }
            }
        }
        for (m, &c) in member_comp.iter().enumerate() {
            if c != usize::MAX {
                weights[c] += weight(&input.members[m]);
                sizes[c] += 1;
            }
        }
        let share_tol = |m: usize| {
            let c = member_comp[m];
            if c == usize::MAX {
                return (0.0, 0.0);
            }
            let share = total[c] * weight(&input.members[m]) / weights[c];
            (share, 1e-7 * total[c] / f64::from(sizes[c]))
        };
        let (share, tol) = (0..input.members.len()).map(share_tol).unzip();
        Some(View {
            load,
            known,
            share,
            tol,
            topic_comp,
            member_comp,
        })
    }

    /// Each member's load under `owners`.
    pub fn held(&self, owners: &[u32], members: usize) -> Vec<f64> {
        let mut held = vec![0.0; members];
        for (task, &o) in owners.iter().enumerate() {
            if o != NO_MEMBER {
                held[o as usize] += self.load[task];
            }
        }
        held
    }

    /// Whether every member of a component is within `band` of its share.
    pub fn in_band(&self, held: &[f64], band: f64) -> bool {
        (0..held.len()).all(|m| {
            self.member_comp[m] == usize::MAX
                || (held[m] <= self.share[m] * (1.0 + band) + self.tol[m]
                    && held[m] >= self.share[m] * (1.0 - band) - self.tol[m])
        })
    }

    /// The largest load ratio `held / share` over members with a share.
    pub fn worst_ratio(&self, held: &[f64]) -> f64 {
        (0..held.len())
            .filter(|&m| self.share[m] > 0.0)
            .map(|m| held[m] / self.share[m])
            .fold(0.0, f64::max)
    }

    /// Tasks whose owner differs from the previous one, and their load.
    pub fn moves(&self, input: &GroupInput, owners: &[u32]) -> (u32, f64) {
        let mut moves = (0, 0.0);
        for (task, &o) in owners.iter().enumerate() {
            if o != input.active_owner[task] {
                moves.0 += 1;
                moves.1 += self.load[task];
            }
        }
        moves
    }
}

/// Topics linked by shared subscribers, numbered; members by their topics.
fn components(input: &GroupInput) -> (Vec<usize>, Vec<usize>) {
    let label = common::topic_labels(input);
    let subscribed = |t: usize| input.members.iter().any(|m| input.subscribes(m, t as u32));
    let topic_comp: Vec<usize> = (0..input.topics.len())
        .map(|t| if subscribed(t) { label[t] } else { usize::MAX })
        .collect();
    let member_comp = input
        .members
        .iter()
        .map(|m| {
            input
                .topics_of(m)
                .first()
                .map_or(usize::MAX, |&t| topic_comp[t as usize])
        })
        .collect();
    (topic_comp, member_comp)
}

/// What the best assignments achieve, over every assignment that keeps
/// tasks of unknown load on their valid owners.
#[derive(Clone, Debug, Default)]
pub struct Optimum {
    /// Some assignment is in band.
    pub reachable: bool,
    /// In band: the fewest moves, and the least moved load with them.
    pub moves: u32,
    pub moved_load: f64,
    /// In band and inside the inner band with that many moves: the least
    /// moved load (None: no such assignment).
    pub inner_moved_load: Option<f64>,
    /// The lowest worst ratio of any assignment.
    pub worst_ratio: f64,
}

/// Tries every assignment of `input`'s tasks to subscribers of their
/// topics (tasks of unknown load on a valid owner stay).
pub fn optimum(input: &GroupInput, view: &View, band: f64) -> Optimum {
    let offsets = input.topic_offsets();
    let task_count = input.task_count();
    let mut choices: Vec<Vec<u32>> = Vec::with_capacity(task_count);
    for t in 0..input.topics.len() {
        let subscribers: Vec<u32> = (0..input.members.len() as u32)
            .filter(|&m| input.subscribes(&input.members[m as usize], t as u32))
            .collect();
        for task in offsets[t]..offsets[t + 1] {
            let previous = input.active_owner[task as usize];
            let choice = if subscribers.is_empty() {
                vec![NO_MEMBER]
            } else if !view.known[task as usize] && subscribers.contains(&previous) {
                vec![previous]
            } else {
                subscribers.clone()
            };
            choices.push(choice);
        }
    }
    let mut best = Optimum {
        worst_ratio: f64::INFINITY,
        moves: u32::MAX,
        ..Optimum::default()
    };
    let mut index = vec![0usize; task_count];
    let mut owners: Vec<u32> = choices.iter().map(|c| c[0]).collect();
    loop {
        record(input, view, band, &owners, &mut best);
        // Next assignment, odometer style.
        let mut i = 0;
        while i < task_count {
            index[i] += 1;
            if index[i] < choices[i].len() {
                owners[i] = choices[i][index[i]];
                break;
            }
            index[i] = 0;
            owners[i] = choices[i][0];
            i += 1;
        }
        if i == task_count {
            return best;
        }
    }
}

fn record(input: &GroupInput, view: &View, band: f64, owners: &[u32], best: &mut Optimum) {
    let held = view.held(owners, input.members.len());
    best.worst_ratio = best.worst_ratio.min(view.worst_ratio(&held));
    if !view.in_band(&held, band) {
        return;
    }
    let (moves, load) = view.moves(input, owners);
    let inner = view.in_band(&held, band / 2.0);
    if !best.reachable || moves < best.moves {
        best.reachable = true;
        best.moves = moves;
        best.moved_load = load;
        best.inner_moved_load = inner.then_some(load);
    } else if moves == best.moves {
        best.moved_load = best.moved_load.min(load);
        if inner {
            best.inner_moved_load = Some(best.inner_moved_load.map_or(load, |l| l.min(load)));
        }
    }
}
