//! The sticky, capacity-weighted, topic-aware balancing shared by the
//! `sticky` and `learner-aware` assignors: given a [`GroupInput`], the
//! target active owner of every task.
//!
//! Topics that share a subscriber are balanced together (a *component*);
//! components are independent, so each is solved on its own:
//!
//! - In a *uniform* component every member subscribes to every topic of the
//!   component. Each member gets an exact weighted quota
//!   (`floor(T·c/C)`, plus one of the remainder slots), keeps its current
//!   tasks up to that quota, and the rest go to members under quota. This is
//!   the fewest moves any assignment within one of the weighted shares can
//!   make, and runs in O(T + M).
//! - In a *mixed* component members subscribe to different topic sets.
//!   Valid current owners keep their tasks, unowned tasks go topic by topic
//!   to the least-loaded subscriber, then single tasks move from a more
//!   loaded to a less loaded subscriber of their topic while that strictly
//!   lowers the pair's larger load, until no such move exists anywhere
//!   ([`find_improving_move`] is `None`).
//!
//! Loads are `count / capacity`, compared exactly by cross multiplication.
//! Every tie is broken by member or task index, so the answer is a pure
//! function of the input.
//!
//! When the group reports its tasks' loads, [`balance_by_load`] keeps each
//! member's load within a band of its share instead (`load_band`), and
//! falls back to this count balance when there are none.
//!
//! This file holds the public entry points and the balance criterion;
//! `balancer` solves the components, `loads` orders members by count,
//! `load_band` balances by load.

mod balancer;
mod load_band;
mod loads;

use assignd_guest_sdk::{AssignError, GroupInput, NO_MEMBER};

pub use load_band::{
    EXACT_LEAVES_MAX, LoadOptions, RATIO_EPSILON, balance_by_load, load_view, uses_loads,
};
pub use loads::load_less;
use loads::ratio_cmp;

/// The target active owner of every task of `input`: [`NO_MEMBER`] for the
/// tasks of topics nobody subscribes to, otherwise a subscribed member.
///
/// Sticky: a task stays on its current owner (`input.active_owner`) unless
/// balance requires a move or the owner no longer subscribes to its topic.
/// Balanced: in a component where all members subscribe to the same topics,
/// each member's count is within one of its weighted share `T·c/C`; in
/// a mixed component no single task move to a subscribed member strictly
/// lowers the larger load of the two members involved.
pub fn balance(input: &GroupInput) -> Vec<u32> {
    balancer::Balancer::new(input).run()
}

/// The target active owner of every task for the built-in assignors: by
/// load within the `load_band` param's band when `input` has loads, else
/// [`balance`]. Fails only on a `load_band` param that is not a band.
pub fn balance_target(input: &GroupInput) -> Result<Vec<u32>, AssignError> {
    Ok(balance_by_load(input, LoadOptions::of(input)?))
}

/// The `load_band` param as the built-in assignors declare it.
pub const LOAD_BAND_DESCRIPTION: &str = "how far a member's load may stray from its share of \
     the load (by load_capacity when every member declares one, else capacity) when the group \
     reports loads: tight (5 %), default (10 %), loose (25 %) or a fraction in (0, 1]; moves \
     are the fewest that bring every member inside, tasks of unknown load stay";

/// A single task move that would strictly improve balance: `to` subscribes
/// to the task's topic and `(count(to) + 1) / cap(to) < count(from) / cap(from)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImprovingMove {
    pub task: u32,
    pub from: u32,
    pub to: u32,
}

/// An improving move in `owners` (one entry per task of `input`), if any;
/// the balance criterion of mixed components. O(subscriptions + tasks).
pub fn find_improving_move(input: &GroupInput, owners: &[u32]) -> Option<ImprovingMove> {
    let offsets = input.topic_offsets();
    let mut counts = vec![0u32; input.members.len()];
    for &owner in owners {
        if owner != NO_MEMBER {
            counts[owner as usize] += 1;
        }
    }
    let cap = |m: u32| input.members[m as usize].capacity.max(1);
    let mut subscribers: Vec<Vec<u32>> = vec![Vec::new(); input.topics.len()];
    for (m, member) in input.members.iter().enumerate() {
        for &t in input.topics_of(member) {
            subscribers[t as usize].push(m as u32);
        }
    }
    for (t, subs) in subscribers.iter().enumerate() {
        let Some(to) = subs.iter().copied().min_by(|&a, &b| {
            ratio_cmp(
                counts[a as usize] + 1,
                cap(a),
                counts[b as usize] + 1,
                cap(b),
            )
        }) else {
            continue;
        };
        let mut heaviest: Option<(u32, u32)> = None;
        for task in offsets[t]..offsets[t + 1] {
            let from = owners[task as usize];
            if from == NO_MEMBER {
                continue;
            }
            let heavier = heaviest.is_none_or(|(_, h)| {
                load_less(counts[h as usize], cap(h), counts[from as usize], cap(from))
            });
            if heavier {
                heaviest = Some((task, from));
            }
        }
        if let Some((task, from)) = heaviest
            && load_less(
                counts[to as usize] + 1,
                cap(to),
                counts[from as usize],
                cap(from),
            )
        {
            return Some(ImprovingMove { task, from, to });
        }
    }
    None
}
