//! The moves that bring a component's members into their bands: members
//! over their band shed, then members under it gain, one task per move;
//! when the band stays out of reach, moves that lower the larger of two
//! members' load ratios. Touches only the component's tasks and members.
//!
//! Each move of a member that one move can settle is that move: the
//! lightest task that lands both sides inside the inner band, else the
//! lightest that lands them in the band. Only when no single task does
//! it does the member move its heaviest task that fits and look again, so
//! the moves of one member are the fewest that cover its excess (heaviest
//! first, the last one the lightest that finishes). A task moved once may
//! be moved on, which changes its destination, not the move count.

use super::state::{Comp, State};

/// Donors an under-loaded member looks at, most surplus first: enough to
/// find a task of the right size, few enough that a member joining a
/// group of thousands costs thousands of look-ups, not millions.
const GAIN_DONORS_MAX: usize = 16;

/// The least a move must lower the larger load ratio (load / share) of its
/// two members when the band is out of reach: float noise and loads too
/// small to matter never move a task.
pub const RATIO_EPSILON: f64 = 1e-6;

#[derive(Clone, Copy, Debug)]
struct Move {
    task: u32,
    load: f64,
    to: u32,
}

/// The candidate moves of one step, by tier: one that settles the member
/// inside the inner band, one that settles it in the band, one that only
/// takes it closer.
#[derive(Default)]
struct Best {
    inner: Option<Move>,
    single: Option<Move>,
    partial: Option<Move>,
}

impl Best {
    /// Keeps the lighter move (`lighter`) or the heavier, ties by task.
    fn offer(slot: &mut Option<Move>, candidate: Option<(f64, u32)>, to: u32, lighter: bool) {
        let Some((load, task)) = candidate else {
            return;
        };
        let better = slot.is_none_or(|best| {
            let order = if lighter {
                load.total_cmp(&best.load)
            } else {
                best.load.total_cmp(&load)
            };
            order.then(task.cmp(&best.task)).is_lt()
        });
        if better {
            *slot = Some(Move { task, load, to });
        }
    }

    fn pick(self) -> Option<Move> {
        self.inner.or(self.single).or(self.partial)
    }
}

impl State<'_> {
    /// Sheds from members over their band and gives to members under it
    /// until every member is in band or none of them can move a task.
    /// Returns whether it moved a task: a member found stuck may have room
    /// or a donor after later moves, so a pass that moved must be followed
    /// by one that does not before the answer is final.
    pub(super) fn balance_band(&mut self, comp: &Comp) -> bool {
        let mut stuck = vec![false; comp.members.len()];
        let mut any = false;
        // Every step moves a task or gives up on a member; each move
        // lowers the total distance out of band, this bound is a backstop.
        let mut steps = 4 * self.load.len() + comp.members.len();
        while steps > 0 {
            steps -= 1;
            if let Some(i) = self.worst(comp, &stuck, true) {
                let moved = self.shed(comp, comp.members[i]);
                stuck[i] |= !moved;
                any |= moved;
            } else if let Some(i) = self.worst(comp, &stuck, false) {
                let m = comp.members[i] as usize;
                if !self.gain(comp, comp.members[i]) {
                    stuck[i] = true;
                    continue;
                }
                any = true;
                if self.held[m] - self.lower[m] > self.tol[m] {
                    // It reached its band: it can give now, so the members
                    // that found no donor look again (once per member).
                    stuck.fill(false);
                }
            } else {
                break;
            }
        }
        any
    }

    /// The member furthest over its band (`over`) or under it, by the
    /// ratio of its load to the band's edge; ties by index.
    fn worst(&self, comp: &Comp, stuck: &[bool], over: bool) -> Option<usize> {
        let mut best: Option<(usize, f64)> = None;
        for (i, &m) in comp.members.iter().enumerate() {
            let out = if over { self.over(m) } else { self.under(m) };
            if stuck[i] || !out {
                continue;
            }
            let (held, edge) = if over {
                (self.held[m as usize], self.upper[m as usize])
            } else {
                (self.lower[m as usize], self.held[m as usize])
            };
            // held / edge, with a zero edge the furthest out.
            let ratio = if edge > 0.0 {
                held / edge
            } else {
                f64::INFINITY
            };
            if best.is_none_or(|(_, r)| ratio > r) {
                best = Some((i, ratio));
            }
        }
        best.map(|(i, _)| i)
    }

    /// The subscriber of `topic` (any member when `None`) other than
    /// `except` with the most room under its band; ties by index.
    fn roomiest(&self, comp: &Comp, topic: Option<u32>, except: u32) -> Option<u32> {
        let room = |m: u32| self.upper[m as usize] - self.held[m as usize];
        comp.members
            .iter()
            .copied()
            .filter(|&m| m != except && topic.is_none_or(|t| self.subscribes(m, t)))
            .fold(None, |best: Option<u32>, m| match best {
                Some(b) if room(b) >= room(m) => Some(b),
                _ => Some(m),
            })
    }

    /// One move off over-loaded `a`; false when none fits anywhere.
    fn shed(&mut self, comp: &Comp, a: u32) -> bool {
        let i = a as usize;
        let tol = self.tol[i];
        let need = self.held[i] - self.upper[i];
        let inner_need = self.held[i] - self.inner_upper[i];
        let most = self.held[i] - self.lower[i];
        let inner_most = self.held[i] - self.inner_lower[i];
        let mut best = Best::default();
        for b in 0..self.buckets(a) {
            let topic = self.bucket_topic(a, b);
            let Some(r) = self.roomiest(comp, topic, a) else {
                continue;
            };
            let room = self.upper[r as usize] - self.held[r as usize];
            let inner_room = self.inner_upper[r as usize] - self.held[r as usize];
            let cap = most.min(room) + tol;
            let inner = self.smallest_in(a, b, inner_need - tol, inner_most.min(inner_room) + tol);
            Best::offer(&mut best.inner, inner, r, true);
            let single = self.smallest_in(a, b, need - tol, cap);
            Best::offer(&mut best.single, single, r, true);
            let partial = self.largest_upto(a, b, tol, cap);
            Best::offer(&mut best.partial, partial, r, false);
        }
        self.apply(best.pick())
    }

    /// One move onto under-loaded `m`; false when no donor has a task
    /// that fits.
    fn gain(&mut self, comp: &Comp, m: u32) -> bool {
        let i = m as usize;
        let tol = self.tol[i];
        let deficit = self.lower[i] - self.held[i];
        let inner_deficit = self.inner_lower[i] - self.held[i];
        let most = self.upper[i] - self.held[i];
        let inner_most = self.inner_upper[i] - self.held[i];
        let mut best = Best::default();
        for b in 0..self.buckets(m) {
            let topic = self.bucket_topic(m, b);
            for a in self.donors(comp, topic, m) {
                let Some(ab) = self.bucket_of_topic(a, topic) else {
                    continue;
                };
                let surplus = self.held[a as usize] - self.lower[a as usize];
                let inner_surplus = self.held[a as usize] - self.inner_lower[a as usize];
                let cap = most.min(surplus) + tol;
                let inner_cap = inner_most.min(inner_surplus) + tol;
                let inner = self.smallest_in(a, ab, inner_deficit - tol, inner_cap);
                Best::offer(&mut best.inner, inner, m, true);
                let single = self.smallest_in(a, ab, deficit - tol, cap);
                Best::offer(&mut best.single, single, m, true);
                let partial = self.largest_upto(a, ab, tol, cap);
                Best::offer(&mut best.partial, partial, m, false);
            }
        }
        self.apply(best.pick())
    }

    /// The members that may give `m` a task of `topic`: subscribers above
    /// their band's floor, at most [`GAIN_DONORS_MAX`] of them, the most
    /// surplus first, ties by index.
    fn donors(&self, comp: &Comp, topic: Option<u32>, m: u32) -> Vec<u32> {
        let surplus = |a: u32| self.held[a as usize] - self.lower[a as usize];
        let mut donors: Vec<u32> = comp
            .members
            .iter()
            .copied()
            .filter(|&a| a != m && surplus(a) > self.tol[a as usize])
            .filter(|&a| topic.is_none_or(|t| self.subscribes(a, t)))
            .collect();
        let order = |a: &u32, b: &u32| surplus(*b).total_cmp(&surplus(*a)).then(a.cmp(b));
        if donors.len() > GAIN_DONORS_MAX {
            donors.select_nth_unstable_by(GAIN_DONORS_MAX, order);
            donors.truncate(GAIN_DONORS_MAX);
        }
        donors.sort_by(order);
        donors
    }

    fn apply(&mut self, chosen: Option<Move>) -> bool {
        match chosen {
            Some(mv) => {
                self.shift(mv.task, mv.to);
                true
            }
            None => false,
        }
    }

    /// When the band is out of reach: while a member over its band can
    /// move a task to the subscriber with the lowest load ratio and lower
    /// the larger ratio of the two by more than [`RATIO_EPSILON`], the move
    /// that lowers it most, the most loaded member first.
    /// Returns whether it moved a task.
    pub(super) fn improve(&mut self, comp: &Comp) -> bool {
        let mut steps = self.load.len() + comp.members.len();
        let mut any = false;
        while steps > 0 && !self.in_band(comp.members) {
            steps -= 1;
            let mut over: Vec<u32> = comp
                .members
                .iter()
                .copied()
                .filter(|&m| self.over(m) && self.share[m as usize] > 0.0)
                .collect();
            over.sort_by(|&a, &b| self.ratio(b).total_cmp(&self.ratio(a)).then(a.cmp(&b)));
            let moved = over.into_iter().any(|a| {
                let chosen = self.lowering_move(comp, a);
                self.apply(chosen)
            });
            if !moved {
                break;
            }
            any = true;
        }
        any
    }

    fn ratio(&self, m: u32) -> f64 {
        self.held[m as usize] / self.share[m as usize]
    }

    /// The move off `a` that lowers the larger ratio of `a` and its
    /// receiver most, if by more than [`RATIO_EPSILON`].
    fn lowering_move(&mut self, comp: &Comp, a: u32) -> Option<Move> {
        let ratio_a = self.ratio(a);
        let mut best: Option<(f64, Move)> = None;
        for b in 0..self.buckets(a) {
            let topic = self.bucket_topic(a, b);
            let lightest = comp
                .members
                .iter()
                .copied()
                .filter(|&r| r != a && self.share[r as usize] > 0.0)
                .filter(|&r| topic.is_none_or(|t| self.subscribes(r, t)))
                .min_by(|&x, &y| self.ratio(x).total_cmp(&self.ratio(y)).then(x.cmp(&y)));
            let Some(r) = lightest else {
                continue;
            };
            let (sa, sr) = (self.share[a as usize], self.share[r as usize]);
            let (ha, hr) = (self.held[a as usize], self.held[r as usize]);
            // The load that would leave both at one ratio.
            let even = (ha * sr - hr * sa) / (sa + sr);
            for (load, task) in self.around(a, b, even).into_iter().flatten() {
                let after = ((ha - load) / sa).max((hr + load) / sr);
                let better = best
                    .is_none_or(|(ratio, mv)| after < ratio || (after == ratio && task < mv.task));
                if load > self.tol[a as usize] && after < ratio_a - RATIO_EPSILON && better {
                    best = Some((after, Move { task, load, to: r }));
                }
            }
        }
        best.map(|(_, mv)| mv)
    }
}
