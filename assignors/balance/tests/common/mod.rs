//! Random groups for the property tests of the balance crate and of the
//! assignors built on it (included by path from their `tests/`).
#![allow(dead_code)]

use assignd_guest_sdk::{GroupInput, Member, NO_MEMBER, TaskLags, TaskMembers, Topic};
use proptest::prelude::*;

/// Deterministic generator state from a proptest seed (SplitMix64): cheap,
/// and a failing case is reproduced by its seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n.max(1)
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub members: u32,
    pub topics: u32,
    pub max_partitions: u32,
    /// Every member subscribes to every topic.
    pub homogeneous: bool,
    pub max_capacity: u32,
    /// Racks, lags, current learners and standbys.
    pub extras: bool,
    pub seed: u64,
}

/// Random group shapes: 1..=40 members, 1..=6 topics of 0..=60 partitions.
pub fn shapes(max_capacity: u32, extras: bool) -> impl Strategy<Value = Shape> {
    (1u32..=40, 1u32..=6, 0u32..=60, any::<bool>(), any::<u64>()).prop_map(
        move |(members, topics, max_partitions, homogeneous, seed)| Shape {
            members,
            topics,
            max_partitions,
            homogeneous,
            max_capacity,
            extras,
            seed,
        },
    )
}

/// A group of `topics` topics `topic-0…` of 0 to `max_partitions`
/// partitions each, and nothing else yet.
pub fn random_topics(rng: &mut Rng, topics: u32, max_partitions: u32) -> GroupInput {
    let topics = (0..topics)
        .map(|t| Topic {
            name: format!("topic-{t}"),
            partitions: rng.below(u64::from(max_partitions) + 1) as u32,
        })
        .collect();
    GroupInput {
        topics,
        ..GroupInput::default()
    }
}

pub fn build(shape: &Shape) -> GroupInput {
    let mut rng = Rng(shape.seed);
    let mut input = random_topics(&mut rng, shape.topics, shape.max_partitions);
    for m in 0..shape.members {
        let rack = (shape.extras && rng.below(4) != 0).then(|| format!("rack-{}", rng.below(3)));
        let capacity = 1 + rng.below(u64::from(shape.max_capacity)) as u32;
        let subscribed = (0..shape.topics)
            .filter(|_| shape.homogeneous || rng.below(2) == 0)
            .collect();
        let member = Member {
            id: format!("member-{m}"),
            name: None,
            rack,
            capacity,
            subscription: input.intern_subscription(subscribed),
            load_capacity: None,
            utilisation: None,
        };
        input.members.push(member);
    }
    let topics = &input.topics;
    let task_count: u32 = topics.iter().map(|t| t.partitions).sum();
    let member_count = u64::from(shape.members);
    // Any member, subscribed or not, or nobody.
    let active_owner = (0..task_count)
        .map(|_| match rng.below(member_count + 1) as u32 {
            m if m == shape.members => NO_MEMBER,
            m => m,
        })
        .collect();
    let mut learners = TaskMembers::default();
    let mut standbys = TaskMembers::default();
    let mut lags = TaskLags::default();
    if shape.extras {
        for task in 0..task_count {
            for m in 0..shape.members {
                if rng.below(4) == 0 {
                    lags.push(task, m, rng.below(25_000));
                }
            }
            if rng.below(10) == 0 {
                learners.push(task, rng.below(member_count) as u32);
            }
            if rng.below(5) == 0 {
                standbys.push(task, rng.below(member_count) as u32);
            }
        }
    }
    GroupInput {
        active_owner,
        learners,
        standbys,
        lags,
        ..input
    }
}

/// Every member subscribes to the same topics (all of them or none).
pub fn is_homogeneous(input: &GroupInput) -> bool {
    input
        .members
        .iter()
        .all(|m| input.topics_of(m).len() == input.topics.len())
}

pub fn counts(input: &GroupInput, owners: &[u32]) -> Vec<u32> {
    let mut counts = vec![0u32; input.members.len()];
    for &o in owners {
        if o != NO_MEMBER {
            counts[o as usize] += 1;
        }
    }
    counts
}

/// Each member's count is within one of its weighted share T·c/C:
/// |count·C − T·c| < C.
pub fn within_one_of_weighted_share(input: &GroupInput, owners: &[u32]) -> Result<(), String> {
    let tasks = owners.len() as i64;
    let total: i64 = input.members.iter().map(|m| i64::from(m.capacity)).sum();
    for (m, &count) in counts(input, owners).iter().enumerate() {
        let c = i64::from(input.members[m].capacity);
        if (i64::from(count) * total - tasks * c).abs() >= total {
            return Err(format!(
                "member {m} (capacity {c}) has {count} of {tasks} tasks; share is {:.2}",
                (tasks * c) as f64 / total as f64
            ));
        }
    }
    Ok(())
}

/// Each topic's component label (the lowest topic index among the topics
/// linked to it by shared subscribers).
pub fn topic_labels(input: &GroupInput) -> Vec<usize> {
    let mut label: Vec<usize> = (0..input.topics.len()).collect();
    let mut changed = true;
    while changed {
        changed = false;
        for member in &input.members {
            let topics = input.topics_of(member);
            let Some(low) = topics.iter().map(|&t| label[t as usize]).min() else {
                continue;
            };
            for &t in topics {
                if label[t as usize] != low {
                    label[t as usize] = low;
                    changed = true;
                }
            }
        }
    }
    label
}

/// Whether each topic belongs to a mixed component: topics linked by
/// shared subscribers where not every subscriber takes every topic.
pub fn mixed_topics(input: &GroupInput) -> Vec<bool> {
    let label = topic_labels(input);
    (0..input.topics.len())
        .map(|t| {
            let comp_size = label.iter().filter(|&&l| l == label[t]).count();
            input
                .members
                .iter()
                .any(|m| input.subscribes(m, t as u32) && input.topics_of(m).len() != comp_size)
        })
        .collect()
}

/// Naive O(T·M) search, over the tasks of mixed components, for a task
/// that a subscribed member could take from its owner and strictly lower
/// the larger of the two loads.
pub fn naive_improving_move(input: &GroupInput, owners: &[u32]) -> Option<(u32, u32, u32)> {
    let counts = counts(input, owners);
    let offsets = input.topic_offsets();
    let mixed = mixed_topics(input);
    for (t, _) in input.topics.iter().enumerate().filter(|&(t, _)| mixed[t]) {
        for task in offsets[t]..offsets[t + 1] {
            let from = owners[task as usize];
            if from == NO_MEMBER {
                continue;
            }
            for (to, member) in input.members.iter().enumerate() {
                if !input.subscribes(member, t as u32) {
                    continue;
                }
                let lhs =
                    u64::from(counts[to] + 1) * u64::from(input.members[from as usize].capacity);
                let rhs = u64::from(counts[from as usize]) * u64::from(member.capacity);
                if lhs < rhs {
                    return Some((task, from, to as u32));
                }
            }
        }
    }
    None
}

/// A homogeneous group of `members` capacity-1 members and `tasks` tasks
/// over `topics` topics.
pub fn uniform_group(members: u32, topics: u32, tasks: u32) -> GroupInput {
    assignd_guest_sdk::testing::group(&assignd_guest_sdk::testing::GroupSpec {
        members,
        topics,
        partitions: tasks,
        subscriptions: assignd_guest_sdk::testing::Subscriptions::Homogeneous,
        racks: 0,
    })
}
