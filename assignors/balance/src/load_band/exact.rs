//! The exact answer for tiny components: every placement of the movable
//! tasks is tried, and the one in band with the fewest moves, then inside
//! the inner band, then with the least moved load wins over the greedy
//! answer when it is better; when no placement is in band, the one with
//! the lowest worst load ratio, then the fewest moves, then the least
//! moved load, if its worst ratio is lower by more than [`RATIO_EPSILON`]
//! or as low with less moving. Small groups are where a greedy choice
//! shows most (a swap of two tasks, one task too big to move first), and
//! a few tasks cost a few thousand placements. Touches only the
//! component's tasks.

use assignd_guest_sdk::NO_MEMBER;

use super::greedy::RATIO_EPSILON;
use super::state::{Comp, State};

/// What an answer costs, compared in this order: moves, whether some
/// member is outside the inner band, moved load.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Cost {
    moves: u32,
    outside_inner: bool,
    moved_load: f64,
}

/// The best placement out of band: its worst ratio, moves, moved load.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Fallback {
    worst_ratio: f64,
    moves: u32,
    moved_load: f64,
}

impl Fallback {
    fn less(&self, other: &Fallback) -> bool {
        self.worst_ratio < other.worst_ratio - RATIO_EPSILON
            || (self.worst_ratio <= other.worst_ratio + RATIO_EPSILON
                && (self.moves < other.moves
                    || (self.moves == other.moves && self.moved_load < other.moved_load)))
    }
}

impl Cost {
    fn less(&self, other: &Cost, tol: f64) -> bool {
        (self.moves, self.outside_inner) < (other.moves, other.outside_inner)
            || ((self.moves, self.outside_inner) == (other.moves, other.outside_inner)
                && self.moved_load < other.moved_load - tol)
    }
}

struct Search<'s> {
    /// Per enumerated task: (task, load, its choices as member indices in
    /// the component, its previous owner's index or `NO_MEMBER`).
    tasks: Vec<(u32, f64, Vec<u32>, u32)>,
    members: &'s [u32],
    lower: Vec<f64>,
    upper: Vec<f64>,
    inner_lower: Vec<f64>,
    inner_upper: Vec<f64>,
    share: Vec<f64>,
    tol: f64,
    held: Vec<f64>,
    choice: Vec<u32>,
    best: Option<(Cost, Vec<u32>)>,
    fallback: Option<(Fallback, Vec<u32>)>,
}

impl State<'_> {
    /// Replaces the component's answer by the best placement of its
    /// movable tasks when there are at most `leaves_max` placements and
    /// one is in band at a lower cost than the current answer.
    pub(super) fn exact(&mut self, comp: &Comp, leaves_max: u64) {
        let Some(mut search) = self.search(comp, leaves_max) else {
            return;
        };
        search.descend(0, 0, 0.0);
        let choice = if let Some((cost, choice)) = search.best {
            if self.in_band(comp.members) && !cost.less(&self.cost(comp), search.tol) {
                return;
            }
            choice
        } else if let Some((fallback, choice)) = search.fallback {
            let cost = self.cost(comp);
            let current = Fallback {
                worst_ratio: worst_ratio(
                    comp.members
                        .iter()
                        .map(|&m| (self.held[m as usize], self.share[m as usize])),
                ),
                moves: cost.moves,
                moved_load: cost.moved_load,
            };
            if !fallback.less(&current) {
                return;
            }
            choice
        } else {
            return;
        };
        for (i, &(task, _, _, _)) in search.tasks.iter().enumerate() {
            self.shift(task, comp.members[choice[i] as usize]);
        }
    }

    /// The search over `comp`'s movable tasks (and those without a valid
    /// owner), or `None` when it has more than `leaves_max` placements.
    fn search<'c>(&self, comp: &Comp<'c>, leaves_max: u64) -> Option<Search<'c>> {
        let input = self.input;
        let offsets = input.topic_offsets();
        let local = |m: u32| comp.members.binary_search(&m).ok().map(|i| i as u32);
        let mut held = vec![0.0; comp.members.len()];
        let mut tasks = Vec::new();
        let mut leaves = 1u64;
        for &t in comp.topics {
            let choices: Vec<u32> = (0..comp.members.len() as u32)
                .filter(|&i| self.subscribes(comp.members[i as usize], t))
                .collect();
            for task in offsets[t as usize]..offsets[t as usize + 1] {
                let previous = input.active_owner[task as usize];
                let kept = local(previous).filter(|&i| choices.contains(&i));
                let load = self.load[task as usize];
                if kept.is_some() && !self.movable[task as usize] {
                    held[kept.unwrap_or_default() as usize] += load;
                    continue;
                }
                leaves = leaves.saturating_mul(choices.len() as u64);
                if leaves > leaves_max {
                    return None;
                }
                // The previous owner first: ties keep tasks where they are.
                let mut ordered: Vec<u32> = kept.into_iter().collect();
                ordered.extend(choices.iter().copied().filter(|&i| Some(i) != kept));
                tasks.push((task, load, ordered, kept.unwrap_or(NO_MEMBER)));
            }
        }
        let pick = |v: &[f64]| comp.members.iter().map(|&m| v[m as usize]).collect();
        Some(Search {
            choice: vec![0; tasks.len()],
            tasks,
            members: comp.members,
            lower: pick(&self.lower),
            upper: pick(&self.upper),
            inner_lower: pick(&self.inner_lower),
            inner_upper: pick(&self.inner_upper),
            share: pick(&self.share),
            tol: comp.members.first().map_or(0.0, |&m| self.tol[m as usize]),
            held,
            best: None,
            fallback: None,
        })
    }

    /// The current answer's cost over `comp`.
    fn cost(&self, comp: &Comp) -> Cost {
        let offsets = self.input.topic_offsets();
        let mut cost = Cost {
            moves: 0,
            outside_inner: false,
            moved_load: 0.0,
        };
        for &t in comp.topics {
            for task in offsets[t as usize]..offsets[t as usize + 1] {
                if self.owner[task as usize] != self.input.active_owner[task as usize] {
                    cost.moves += 1;
                    cost.moved_load += self.load[task as usize];
                }
            }
        }
        cost.outside_inner = comp.members.iter().any(|&m| {
            let (i, held) = (m as usize, self.held[m as usize]);
            held > self.inner_upper[i] + self.tol[i] || held < self.inner_lower[i] - self.tol[i]
        });
        cost
    }
}

impl Search<'_> {
    fn descend(&mut self, next: usize, moves: u32, moved_load: f64) {
        if self
            .best
            .as_ref()
            .is_some_and(|(best, _)| moves > best.moves)
        {
            return;
        }
        let Some((_, load, choices, previous)) = self.tasks.get(next) else {
            self.leaf(moves, moved_load);
            return;
        };
        let (load, previous) = (*load, *previous);
        for k in 0..choices.len() {
            let m = self.tasks[next].2[k];
            let moved = m != previous;
            self.held[m as usize] += load;
            self.choice[next] = m;
            self.descend(
                next + 1,
                moves + u32::from(moved),
                moved_load + if moved { load } else { 0.0 },
            );
            self.held[m as usize] -= load;
        }
    }

    fn leaf(&mut self, moves: u32, moved_load: f64) {
        let tol = self.tol;
        let mut outside_inner = false;
        for i in 0..self.members.len() {
            let held = self.held[i];
            if held > self.upper[i] + tol || held < self.lower[i] - tol {
                self.out_of_band(moves, moved_load);
                return;
            }
            outside_inner |= held > self.inner_upper[i] + tol || held < self.inner_lower[i] - tol;
        }
        let cost = Cost {
            moves,
            outside_inner,
            moved_load,
        };
        if self
            .best
            .as_ref()
            .is_none_or(|(best, _)| cost.less(best, tol))
        {
            self.best = Some((cost, self.choice.clone()));
        }
    }

    fn out_of_band(&mut self, moves: u32, moved_load: f64) {
        if self.best.is_some() {
            return;
        }
        let candidate = Fallback {
            worst_ratio: worst_ratio(self.held.iter().copied().zip(self.share.iter().copied())),
            moves,
            moved_load,
        };
        if self
            .fallback
            .as_ref()
            .is_none_or(|(best, _)| candidate.less(best))
        {
            self.fallback = Some((candidate, self.choice.clone()));
        }
    }
}

/// The largest `held / share` of (held, share) pairs with a share.
fn worst_ratio(members: impl Iterator<Item = (f64, f64)>) -> f64 {
    members
        .filter(|&(_, share)| share > 0.0)
        .map(|(held, share)| held / share)
        .fold(0.0, f64::max)
}
