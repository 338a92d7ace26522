//! Balancing by load within a band: the target active owner of every task
//! when the group reports its tasks' loads, each member's load kept
//! within `S·(1-b) ..= S·(1+b)` of its share `S` of its component's load
//! (by weight: `load_capacity` when every member declares one, else
//! `capacity`), with the fewest moves and the least moved load. Without
//! loads it is [`crate::balance`], the count balance, unchanged.
//!
//! Per component (topics linked by shared subscribers, as the count path):
//! 1. Valid owners keep their tasks. A task of unknown load never moves
//!    unless its owner left or no longer subscribes; it counts as the mean
//!    known load.
//! 2. Tasks without a valid owner are placed, heaviest first, where their
//!    load against the member's share ends lowest.
//! 3. A task heavier than the band of every member that could take it gets
//!    a member of its own, and the other members share the rest (water
//!    filling): the band is out of reach, and the worst ratio is then that
//!    task's.
//! 4. Members over their band shed and members under it gain, one task at
//!    a time (`greedy`); if the band stays out of reach, only moves that
//!    lower the larger load ratio of their two members by more than
//!    [`RATIO_EPSILON`] follow.
//! 5. In a component with at most `exact_leaves_max` placements of its
//!    movable tasks, the best in-band placement replaces the greedy one
//!    when it costs fewer moves, or lands inside the inner band (half the
//!    band) with as many, or moves less load (`exact`).
//!
//! Every tie is broken by member or task index: the answer is a pure
//! function of the input.

mod exact;
mod greedy;
mod place;
mod state;

use assignd_guest_sdk::{AssignError, GroupInput, load};

use crate::balancer::Components;
pub use greedy::RATIO_EPSILON;
use state::{Comp, State};

/// Placements of a component's movable tasks up to which the exact search
/// runs: 4 members × 8 tasks, or 2 × 16. A few milliseconds at most.
pub const EXACT_LEAVES_MAX: u64 = 1 << 16;

/// Rounds of band moves then lowering moves; each round but the last
/// moves a task, and a round rarely follows the third.
const ROUNDS_MAX: usize = 8;

/// How to balance by load.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoadOptions {
    /// The band, a fraction of the share (the `load_band` param).
    pub band: f64,
    /// Components with at most this many placements of their movable tasks
    /// are searched exactly; 0 leaves every component to the greedy moves.
    pub exact_leaves_max: u64,
}

impl LoadOptions {
    /// The options of `input`'s params: its `load_band`, and the exact
    /// search for tiny components.
    pub fn of(input: &GroupInput) -> Result<LoadOptions, AssignError> {
        Ok(LoadOptions {
            band: load::band(&input.params)?,
            exact_leaves_max: EXACT_LEAVES_MAX,
        })
    }
}

/// The target active owner of every task: by load within the band when
/// `input` has loads (a load unit and at least one valid load row), else
/// exactly [`crate::balance`].
pub fn balance_by_load(input: &GroupInput, options: LoadOptions) -> Vec<u32> {
    let Some((estimate, known)) = estimates(input) else {
        return crate::balance(input);
    };
    let mut state = State::new(input, estimate, known);
    state.weight = weights(input);
    let components = Components::new(input);
    let comps: Vec<Comp> = (0..components.count())
        .map(|c| Comp {
            members: components.members(c),
            topics: components.topics(c),
            mixed: !components.comp_uniform[c],
        })
        .filter(|comp| !comp.members.is_empty())
        .collect();
    let mut dedicated = Vec::with_capacity(comps.len());
    for comp in &comps {
        state.set_layout(comp);
        state.keep_valid_owners(comp);
        state.set_shares(comp);
        state.place_unowned(comp);
        dedicated.push(state.set_bands(comp, options.band));
    }
    state.begin_sets();
    for (comp, dedicated) in comps.iter().zip(dedicated) {
        // A lowering move can leave a member under its band that the
        // band's moves can fill, and a band move can give room to a member
        // the same pass gave up on: alternate until a round moves nothing,
        // so that balancing the answer again moves nothing either.
        for _ in 0..ROUNDS_MAX {
            let banded = state.balance_band(comp);
            let improved = state.improve(comp);
            if !banded && !improved {
                break;
            }
        }
        if !dedicated {
            state.exact(comp, options.exact_leaves_max);
        }
    }
    state.owner
}

/// Whether `input` is balanced by load: it has a load unit and a valid
/// load row.
pub fn uses_loads(input: &GroupInput) -> bool {
    estimates(input).is_some()
}

/// Each task's load as the balancer counts it (known, or the mean known
/// load), and each member's weight; `None` when `input` has no loads.
pub fn load_view(input: &GroupInput) -> Option<(Vec<f64>, Vec<f64>)> {
    let (estimate, _) = estimates(input)?;
    Some((estimate, weights(input)))
}

/// Each task's load (known, or the mean known load) and whether it is
/// known; `None` when the input has no load unit or no valid known load.
fn estimates(input: &GroupInput) -> Option<(Vec<f64>, Vec<bool>)> {
    input.load_unit.as_ref()?;
    let loads: Vec<Option<f64>> = input
        .task_loads()
        .into_iter()
        .map(|l| l.filter(|l| l.is_finite() && *l >= 0.0))
        .collect();
    let (sum, count) = loads
        .iter()
        .flatten()
        .fold((0.0, 0u64), |(s, c), l| (s + l, c + 1));
    if count == 0 {
        return None;
    }
    let mean = sum / count as f64;
    let known = loads.iter().map(Option::is_some).collect();
    Some((loads.iter().map(|l| l.unwrap_or(mean)).collect(), known))
}

/// Each member's weight: its `load_capacity` when every member declares
/// one, else its `capacity`.
fn weights(input: &GroupInput) -> Vec<f64> {
    let declared = |c: Option<f64>| c.filter(|c| c.is_finite() && *c > 0.0);
    let all_declared = input
        .members
        .iter()
        .all(|m| declared(m.load_capacity).is_some());
    input
        .members
        .iter()
        .map(|m| match declared(m.load_capacity) {
            Some(c) if all_declared => c,
            _ => f64::from(m.capacity.max(1)),
        })
        .collect()
}
