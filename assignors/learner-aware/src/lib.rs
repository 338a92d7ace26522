//! The `learner-aware` assignor: the high-availability strategy of Kafka's
//! KIP-441 (`HighAvailabilityTaskAssignor`). It owns the decisions the
//! balanced target alone cannot make: which member stays active while a
//! cold target warms up, which tasks get the limited learner slots, and
//! where standbys go.
//!
//! 1. The balanced sticky target comes from
//!    [`assignor_balance::balance_target`]: by load within the `load_band`
//!    param's band when the group reports loads, else by count.
//! 2. A task goes active to its target only if the target is caught up
//!    (lag ≤ `acceptable_recovery_lag`), or if no subscribed member is.
//!    Otherwise it stays on its caught-up current owner (or the least-loaded
//!    caught-up subscriber, by load when there are loads), and the target warms up as a learner — at most
//!    `max_learners` learners in the group, continuing learners first.
//! 3. `num_standby` standbys per task, away from the active owner's rack
//!    where racks allow, sticky, then on the members with fewest standbys.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

use assignd_guest_sdk::load::BAND_PARAM;
use assignd_guest_sdk::{
    AssignError, Assignment, Assignor, Capabilities, GroupIndex, GroupInput, Info, NO_MEMBER,
    TaskMembers,
};
use assignor_balance::load_less;

pub struct LearnerAware;

pub const ACCEPTABLE_RECOVERY_LAG: &str = "acceptable_recovery_lag";
pub const MAX_LEARNERS: &str = "max_learners";
pub const NUM_STANDBY: &str = "num_standby";

const ACCEPTABLE_RECOVERY_LAG_DEFAULT: u64 = 10_000;
const MAX_LEARNERS_DEFAULT: u64 = 2;
const NUM_STANDBY_DEFAULT: u64 = 0;

impl Assignor for LearnerAware {
    fn info() -> Info {
        Info::new(
            "learner-aware",
            "1.0.0",
            "KIP-441 high availability: balanced sticky target, actives only on caught-up members, \
             cold targets warm up as learners, rack-aware standbys; with loads, each member's \
             load within a band of its share",
        )
        .with_capabilities(Capabilities {
            learners: true,
            standbys: true,
            racks: true,
            load: true,
        })
        .with_param(
            ACCEPTABLE_RECOVERY_LAG,
            &ACCEPTABLE_RECOVERY_LAG_DEFAULT.to_string(),
            "a member whose lag on a task is at most this counts as caught up and may take it active",
        )
        .with_param(
            MAX_LEARNERS,
            &MAX_LEARNERS_DEFAULT.to_string(),
            "most learners (warming copies) in the whole group at once",
        )
        .with_param(
            NUM_STANDBY,
            &NUM_STANDBY_DEFAULT.to_string(),
            "standbys (hot copies for failover) per task",
        )
        .with_param(
            BAND_PARAM,
            "default",
            assignor_balance::LOAD_BAND_DESCRIPTION,
        )
    }

    fn assign(input: &GroupInput) -> Result<Assignment, AssignError> {
        let params = Params {
            acceptable_recovery_lag: input
                .param_u64(ACCEPTABLE_RECOVERY_LAG, ACCEPTABLE_RECOVERY_LAG_DEFAULT)?,
            max_learners: usize::try_from(input.param_u64(MAX_LEARNERS, MAX_LEARNERS_DEFAULT)?)
                .unwrap_or(usize::MAX),
            num_standby: usize::try_from(input.param_u64(NUM_STANDBY, NUM_STANDBY_DEFAULT)?)
                .unwrap_or(usize::MAX),
        };
        let index = GroupIndex::new(input);
        let target = assignor_balance::balance_target(input)?;
        let (active_owner, learners) = place_actives(input, &index, &target, &params);
        let standbys = place_standbys(input, &index, &active_owner, &learners, params.num_standby);
        Ok(Assignment {
            active_owner,
            learners,
            standbys,
        })
    }
}

struct Params {
    acceptable_recovery_lag: u64,
    max_learners: usize,
    num_standby: usize,
}

/// Members with a lag row for each task, as CSR: the lag rows of task `t`
/// are `members[start[t]..start[t + 1]]`, in input order.
fn lag_members_by_task(input: &GroupInput, task_count: usize) -> (Vec<u32>, Vec<u32>) {
    let mut start = vec![0u32; task_count + 1];
    for &task in &input.lags.task {
        start[task as usize + 1] += 1;
    }
    for t in 0..task_count {
        start[t + 1] += start[t];
    }
    let mut fill = start.clone();
    let mut members = vec![0u32; input.lags.len()];
    for (task, member, _) in input.lags.iter() {
        members[fill[task as usize] as usize] = member;
        fill[task as usize] += 1;
    }
    (start, members)
}

/// The active owner of every task, and the learners warming the targets
/// that could not take their task yet.
fn place_actives(
    input: &GroupInput,
    index: &GroupIndex,
    target: &[u32],
    params: &Params,
) -> (Vec<u32>, TaskMembers) {
    let task_count = target.len();
    let caught_up = |task: u32, m: u32| {
        index
            .lag(input, task, m)
            .is_some_and(|lag| lag <= params.acceptable_recovery_lag)
    };
    let subscribes = |task: u32, m: u32| {
        input.subscribes(&input.members[m as usize], index.task_topic[task as usize])
    };
    let (lag_start, lag_members) = lag_members_by_task(input, task_count);
    // Every caught-up subscriber of a task has a lag row, except the
    // current owner, whose missing row counts as lag 0.
    let caught_up_subscribers = |task: u32| {
        let previous = input.active_owner[task as usize];
        let rows =
            &lag_members[lag_start[task as usize] as usize..lag_start[task as usize + 1] as usize];
        rows.iter()
            .copied()
            .chain((previous != NO_MEMBER).then_some(previous))
            .filter(move |&m| subscribes(task, m) && caught_up(task, m))
    };

    let mut active = vec![NO_MEMBER; task_count];
    // Tasks whose target is cold and whose current owner cannot keep them:
    // they go to the least-loaded caught-up subscriber once every other
    // task is placed, so loads are known.
    let mut homeless = Vec::new();
    for task in 0..task_count as u32 {
        let goal = target[task as usize];
        let previous = input.active_owner[task as usize];
        active[task as usize] = if goal == NO_MEMBER || caught_up(task, goal) {
            goal
        } else if previous != NO_MEMBER && subscribes(task, previous) && caught_up(task, previous) {
            previous
        } else if caught_up_subscribers(task).next().is_some() {
            homeless.push(task);
            NO_MEMBER
        } else {
            // Nobody is caught up: the target is as good as anyone.
            goal
        };
    }
    place_homeless(input, &homeless, &mut active, |task| {
        caught_up_subscribers(task).collect()
    });

    // Learner slots: continuing learners first, then the least lagging
    // target, then task order.
    let mut candidates: Vec<(bool, u64, u32)> = (0..task_count as u32)
        .filter(|&task| {
            let goal = target[task as usize];
            goal != NO_MEMBER && goal != active[task as usize]
        })
        .map(|task| {
            let goal = target[task as usize];
            let continuing = index.learners(task).contains(&goal);
            let lag = index.lag(input, task, goal).unwrap_or(u64::MAX);
            (!continuing, lag, task)
        })
        .collect();
    candidates.sort_unstable();
    let mut learners = TaskMembers::default();
    for &(_, _, task) in candidates.iter().take(params.max_learners) {
        learners.push(task, target[task as usize]);
    }
    (active, learners)
}

/// Gives each homeless task to its least-loaded caught-up subscriber
/// (`candidates`, never empty), in task order: by load for its weight when
/// the group reports loads, else by count for its capacity; ties by
/// index.
fn place_homeless(
    input: &GroupInput,
    homeless: &[u32],
    active: &mut [u32],
    candidates: impl Fn(u32) -> Vec<u32>,
) {
    if let Some((load, weight)) = assignor_balance::load_view(input) {
        let mut held = vec![0.0; input.members.len()];
        for (task, &owner) in active.iter().enumerate() {
            if owner != NO_MEMBER {
                held[owner as usize] += load[task];
            }
        }
        for &task in homeless {
            let after = |m: u32| (held[m as usize] + load[task as usize]) / weight[m as usize];
            let best = candidates(task)
                .into_iter()
                .min_by(|&a, &b| after(a).total_cmp(&after(b)).then(a.cmp(&b)))
                .expect("homeless tasks have a caught-up subscriber");
            active[task as usize] = best;
            held[best as usize] += load[task as usize];
        }
        return;
    }
    let mut count = vec![0u32; input.members.len()];
    for &owner in active.iter() {
        if owner != NO_MEMBER {
            count[owner as usize] += 1;
        }
    }
    let capacity = |m: u32| input.members[m as usize].capacity.max(1);
    for &task in homeless {
        let best = candidates(task)
            .into_iter()
            .reduce(|best, m| {
                let lighter = load_less(
                    count[m as usize] + 1,
                    capacity(m),
                    count[best as usize] + 1,
                    capacity(best),
                );
                let tie = !load_less(
                    count[best as usize] + 1,
                    capacity(best),
                    count[m as usize] + 1,
                    capacity(m),
                );
                if lighter || (tie && m < best) {
                    m
                } else {
                    best
                }
            })
            .expect("homeless tasks have a caught-up subscriber");
        active[task as usize] = best;
        count[best as usize] += 1;
    }
}

/// Subscribers of one rack as (standby count, member), fewest first.
type StandbyHeap = BinaryHeap<Reverse<(u32, u32)>>;

/// Interned rack of every member; `NO_RACK` for none.
const NO_RACK: u32 = u32::MAX;

fn member_racks(input: &GroupInput) -> Vec<u32> {
    let mut ids: BTreeMap<&str, u32> = BTreeMap::new();
    input
        .members
        .iter()
        .map(|m| match &m.rack {
            None => NO_RACK,
            Some(rack) => {
                let next = ids.len() as u32;
                *ids.entry(rack.as_str()).or_insert(next)
            }
        })
        .collect()
}

/// `num_standby` standbys per active task: never on the active owner, its
/// learner or twice on one member; a member on a rack not yet used by the
/// task first, then a previous standby of the task, then the member with
/// the fewest standbys so far, then the lowest index.
fn place_standbys(
    input: &GroupInput,
    index: &GroupIndex,
    active: &[u32],
    learners: &TaskMembers,
    num_standby: usize,
) -> TaskMembers {
    let mut standbys = TaskMembers::default();
    if num_standby == 0 {
        return standbys;
    }
    let rack = member_racks(input);
    let mut learner_of = vec![NO_MEMBER; active.len()];
    for (task, member) in learners.iter() {
        learner_of[task as usize] = member;
    }
    let mut standby_count = vec![0u32; input.members.len()];
    let mut chosen: Vec<u32> = Vec::with_capacity(num_standby.min(input.members.len()));
    let mut used_racks: Vec<u32> = Vec::new();
    let mut set_aside: Vec<(usize, Reverse<(u32, u32)>)> = Vec::new();
    for (topic, subscribers) in index.topic_subscribers.iter().enumerate() {
        if subscribers.len() < 2 {
            // A standby needs a subscriber other than the active owner.
            continue;
        }
        // One heap of (standby count, member) per rack, so a pick looks at
        // one candidate per rack instead of every subscriber. Counts only
        // grow while the topic is placed, so a stale entry is too small: it
        // surfaces early and is fixed in place.
        let mut by_rack: Vec<u32> = subscribers.clone();
        by_rack.sort_by_key(|&m| (rack[m as usize], m));
        let mut buckets: Vec<(u32, StandbyHeap)> = Vec::new();
        for &m in &by_rack {
            let r = rack[m as usize];
            if buckets.last().is_none_or(|(last, _)| *last != r) {
                buckets.push((r, BinaryHeap::new()));
            }
            let bucket = &mut buckets.last_mut().expect("pushed above").1;
            bucket.push(Reverse((standby_count[m as usize], m)));
        }
        for task in index.topic_tasks(topic as u32) {
            let owner = active[task as usize];
            if owner == NO_MEMBER {
                continue;
            }
            let learner = learner_of[task as usize];
            chosen.clear();
            used_racks.clear();
            if rack[owner as usize] != NO_RACK {
                used_racks.push(rack[owner as usize]);
            }
            let previous = index.standbys(task);
            while chosen.len() < num_standby {
                let eligible =
                    |m: u32, chosen: &[u32]| m != owner && m != learner && !chosen.contains(&m);
                // Smallest key wins: (not on a new rack, not sticky, standby count, member).
                let key = |m: u32, used_racks: &[u32], standby_count: &[u32]| {
                    let new_rack =
                        rack[m as usize] != NO_RACK && !used_racks.contains(&rack[m as usize]);
                    (
                        !new_rack,
                        !previous.contains(&m),
                        standby_count[m as usize],
                        m,
                    )
                };
                let mut best: Option<(bool, bool, u32, u32)> = None;
                for &m in previous {
                    if eligible(m, &chosen)
                        && input.subscribes(&input.members[m as usize], topic as u32)
                    {
                        let k = key(m, &used_racks, &standby_count);
                        best = Some(best.map_or(k, |b| b.min(k)));
                    }
                }
                for (b, (_, bucket)) in buckets.iter_mut().enumerate() {
                    while let Some(mut top) = bucket.peek_mut() {
                        let (count, m) = top.0;
                        if count != standby_count[m as usize] {
                            top.0.0 = standby_count[m as usize];
                            continue;
                        }
                        if !eligible(m, &chosen) {
                            set_aside.push((b, std::collections::binary_heap::PeekMut::pop(top)));
                            continue;
                        }
                        let k = key(m, &used_racks, &standby_count);
                        best = Some(best.map_or(k, |b| b.min(k)));
                        break;
                    }
                }
                for (b, entry) in set_aside.drain(..) {
                    buckets[b].1.push(entry);
                }
                let Some((_, _, _, m)) = best else {
                    break;
                };
                chosen.push(m);
                standby_count[m as usize] += 1;
                if rack[m as usize] != NO_RACK {
                    used_racks.push(rack[m as usize]);
                }
                standbys.push(task, m);
            }
        }
    }
    standbys
}

assignd_guest_sdk::export_assignor!(LearnerAware);

// A call's heap lives only as long as its instance: a bump allocator
// makes each allocation a pointer increment and each free nearly nothing.
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: assignd_guest_sdk::arena::CallArena = assignd_guest_sdk::arena::CallArena;
