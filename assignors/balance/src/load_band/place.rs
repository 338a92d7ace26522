//! A component's starting point before any balancing move: valid owners
//! keep their tasks, each member's band is set (after giving every task
//! too big for any member's band a member of its own), and tasks without
//! a valid owner are placed. Touches only the component's tasks and
//! members.

use std::collections::BinaryHeap;

use assignd_guest_sdk::NO_MEMBER;

use super::state::{Comp, State, key};

/// Loads closer than this part of a mean share compare equal.
const TOLERANCE: f64 = 1e-9;

impl State<'_> {
    /// Every task of `comp` whose current owner is in the component and
    /// subscribes to its topic stays with it; the others are unowned.
    pub(super) fn keep_valid_owners(&mut self, comp: &Comp) {
        let input = self.input;
        let offsets = input.topic_offsets();
        for &t in comp.topics {
            for task in offsets[t as usize]..offsets[t as usize + 1] {
                let o = input.active_owner[task as usize];
                let valid = (o as usize) < input.members.len()
                    && comp.members.binary_search(&o).is_ok()
                    && self.subscribes(o, t);
                if valid {
                    self.shift(task, o);
                }
            }
        }
    }

    /// The component's load and weight.
    fn totals(&self, comp: &Comp) -> (f64, f64) {
        let offsets = self.input.topic_offsets();
        let total: f64 = comp
            .topics
            .iter()
            .flat_map(|&t| offsets[t as usize]..offsets[t as usize + 1])
            .map(|task| self.load[task as usize])
            .sum();
        let weight: f64 = comp.members.iter().map(|&m| self.weight[m as usize]).sum();
        (total, weight)
    }

    /// Sets every member's share of the component's load by weight, and
    /// the float noise its loads compare with.
    pub(super) fn set_shares(&mut self, comp: &Comp) {
        let (total, weight) = self.totals(comp);
        let tol = TOLERANCE * total / comp.members.len() as f64;
        for &m in comp.members {
            self.share[m as usize] = total * self.weight[m as usize] / weight;
            self.tol[m as usize] = tol;
        }
    }

    /// Sets every member's band, once every task has an owner; returns
    /// whether some task got a member of its own (the band is then out of
    /// reach).
    pub(super) fn set_bands(&mut self, comp: &Comp, band: f64) -> bool {
        let (total, weight) = self.totals(comp);
        let (pool_total, pool_weight, fixed) = self.dedicate(comp, band, total, weight);
        for &m in comp.members {
            let i = m as usize;
            let (low, high, inner_low, inner_high) = match fixed[i] {
                Some(f) => (f, f, f, f),
                None => {
                    let share = pool_total * self.weight[i] / pool_weight;
                    (
                        share * (1.0 - band),
                        share * (1.0 + band),
                        share * (1.0 - band / 2.0),
                        share * (1.0 + band / 2.0),
                    )
                }
            };
            self.lower[i] = low;
            self.upper[i] = high;
            self.inner_lower[i] = inner_low;
            self.inner_upper[i] = inner_high;
        }
        fixed.iter().any(Option::is_some)
    }

    /// Gives each task heavier on its own than the band of every member
    /// that could take it a member of its own, heaviest first, and takes both out of
    /// the pool whose load the other members share (water filling). The
    /// task goes to the member of the pool where it weighs least for the
    /// member's weight (with the tasks of unknown load it keeps), its
    /// owner among equals. Returns the pool's load and
    /// weight, and each dedicated member's fixed load (its task plus those
    /// of unknown load it keeps).
    fn dedicate(
        &mut self,
        comp: &Comp,
        band: f64,
        total: f64,
        weight: f64,
    ) -> (f64, f64, Vec<Option<f64>>) {
        let offsets = self.input.topic_offsets();
        let mut fixed: Vec<Option<f64>> = vec![None; self.input.members.len()];
        let mut pinned = vec![0.0; self.input.members.len()];
        let mut candidates = BinaryHeap::new();
        for &t in comp.topics {
            for task in offsets[t as usize]..offsets[t as usize + 1] {
                let o = self.owner[task as usize];
                if !self.movable[task as usize] {
                    if o != NO_MEMBER {
                        pinned[o as usize] += self.load[task as usize];
                    }
                } else {
                    candidates.push((key(self.load[task as usize]), std::cmp::Reverse(task)));
                }
            }
        }
        let (mut pool_total, mut pool_weight, mut pool_size) = (total, weight, comp.members.len());
        while let Some((_, std::cmp::Reverse(task))) = candidates.pop() {
            let load = self.load[task as usize];
            let topic = self.task_topic[task as usize];
            let unit = pool_total / pool_weight;
            let owner = self.owner[task as usize];
            // What the task would weigh on a member, with the tasks of
            // unknown load that stay on it.
            let ratio = |m: u32| (pinned[m as usize] + load) / self.weight[m as usize];
            // The lowest ratio, then the current owner, then the lowest index.
            let holder = comp
                .members
                .iter()
                .copied()
                .filter(|&m| fixed[m as usize].is_none() && self.subscribes(m, topic))
                .min_by(|&a, &b| {
                    ratio(a)
                        .total_cmp(&ratio(b))
                        .then((b == owner).cmp(&(a == owner)))
                        .then(a.cmp(&b))
                });
            let Some(holder) = holder else {
                break;
            };
            // Hot: heavier on its own than the band of the pool's
            // heaviest subscriber.
            let heaviest = comp
                .members
                .iter()
                .filter(|&&m| fixed[m as usize].is_none() && self.subscribes(m, topic))
                .map(|&m| self.weight[m as usize])
                .fold(0.0, f64::max);
            let fits = load <= unit * heaviest * (1.0 + band) + self.tol[holder as usize];
            if fits || pool_size < 2 {
                break;
            }
            self.movable[task as usize] = false;
            if owner != holder {
                self.shift(task, holder);
            }
            let kept = load + pinned[holder as usize];
            fixed[holder as usize] = Some(kept);
            pool_total -= kept;
            pool_weight -= self.weight[holder as usize];
            pool_size -= 1;
        }
        (pool_total.max(0.0), pool_weight, fixed)
    }

    /// Places `comp`'s unowned tasks, heaviest first, each on the
    /// subscriber whose load after taking it is lowest against its share
    /// (then the fewest tasks for its weight, then the lowest
    /// index): the greedy order of scheduling on machines of different
    /// speeds.
    pub(super) fn place_unowned(&mut self, comp: &Comp) {
        let offsets = self.input.topic_offsets();
        let mut unowned: Vec<u32> = comp
            .topics
            .iter()
            .flat_map(|&t| offsets[t as usize]..offsets[t as usize + 1])
            .filter(|&task| self.owner[task as usize] == NO_MEMBER)
            .collect();
        if unowned.is_empty() {
            return;
        }
        unowned.sort_by(|&a, &b| {
            self.load[b as usize]
                .total_cmp(&self.load[a as usize])
                .then(a.cmp(&b))
        });
        let mut count = vec![0u32; self.input.members.len()];
        for &o in &self.owner {
            if o != NO_MEMBER {
                count[o as usize] += 1;
            }
        }
        for task in unowned {
            let topic = self.task_topic[task as usize];
            let load = self.load[task as usize];
            // The load after taking the task against the member's share
            // of the whole component (a member of a hot task's own too).
            let fill = |m: usize| {
                let after = self.held[m] + load;
                match self.share[m] {
                    share if share > 0.0 => after / share,
                    _ if after > 0.0 => f64::INFINITY,
                    _ => 0.0,
                }
            };
            let per_weight = |m: usize| f64::from(count[m] + 1) / self.weight[m];
            let best = comp
                .members
                .iter()
                .copied()
                .filter(|&m| self.subscribes(m, topic))
                .min_by(|&a, &b| {
                    let (a, b) = (a as usize, b as usize);
                    fill(a)
                        .total_cmp(&fill(b))
                        .then(per_weight(a).total_cmp(&per_weight(b)))
                        .then(a.cmp(&b))
                })
                .expect("a component topic has subscribers");
            count[best as usize] += 1;
            self.shift(task, best);
        }
    }
}
