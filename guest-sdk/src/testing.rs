//! Group generators for tests and benchmarks, native and in wasm alike: the
//! grid of Kafka's `ServerSideAssignorBenchmark` (members × partitions per
//! member, homogeneous or heterogeneous subscriptions, full or incremental)
//! and the edits a property test needs (settle, add or remove a member);
//! and, in [`contract`], the assignor contract as one check
//! ([`check_contract`]) that any assignor's property test runs.

pub mod contract;

pub use contract::{ContractViolation, Promises, check_contract};

use crate::model::{Assignment, GroupInput, Member, NO_MEMBER, TaskLags, TaskMembers, Topic};

/// How members subscribe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subscriptions {
    /// Every member subscribes to every topic.
    Homogeneous,
    /// Members fall into `groups` subscription groups by index (`m % groups`);
    /// group `g` subscribes to every topic `t` with `t % groups != g`, so each
    /// topic is shared by all groups but one and the groups overlap (the
    /// mixed case a sticky assignor must balance topic by topic). With
    /// `groups == 1` this is the same as homogeneous.
    Heterogeneous { groups: u32 },
}

/// The shape of a generated group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupSpec {
    pub members: u32,
    pub topics: u32,
    /// Total partitions over all topics, spread as evenly as possible.
    pub partitions: u32,
    pub subscriptions: Subscriptions,
    /// Racks `rack-0 .. rack-{racks-1}`, assigned round-robin; 0 for none.
    pub racks: u32,
}

impl GroupSpec {
    /// Kafka's benchmark shape: `members` members, `partitions_per_member`
    /// partitions each, spread over `topics` topics.
    pub fn grid(
        members: u32,
        partitions_per_member: u32,
        topics: u32,
        subscriptions: Subscriptions,
    ) -> Self {
        GroupSpec {
            members,
            topics,
            partitions: members * partitions_per_member,
            subscriptions,
            racks: 0,
        }
    }
}

/// A group with no current assignment (the FULL case).
pub fn group(spec: &GroupSpec) -> GroupInput {
    let topics: Vec<Topic> = (0..spec.topics)
        .map(|t| Topic {
            name: format!("topic-{t}"),
            partitions: spec.partitions / spec.topics
                + u32::from(t < spec.partitions % spec.topics),
        })
        .collect();
    let task_count = topics.iter().map(|t| t.partitions as usize).sum();
    let mut input = GroupInput {
        topics,
        subscriptions: Vec::new(),
        members: Vec::new(),
        active_owner: vec![NO_MEMBER; task_count],
        learners: TaskMembers::default(),
        standbys: TaskMembers::default(),
        lags: TaskLags::default(),
        params: Default::default(),
        load_unit: None,
        loads: Default::default(),
    };
    for m in 0..spec.members {
        let member = spec_member(&mut input, spec, m);
        input.members.push(member);
    }
    input
}

/// Member `m` of a group shaped like `spec`, its subscription set interned
/// in `input`.
fn spec_member(input: &mut GroupInput, spec: &GroupSpec, m: u32) -> Member {
    Member {
        id: format!("member-{m}"),
        name: None,
        rack: (spec.racks > 0).then(|| format!("rack-{}", m % spec.racks)),
        capacity: 1,
        subscription: input.intern_subscription(spec_topics(spec, m)),
        load_capacity: None,
        utilisation: None,
    }
}

/// The topics member index `m` subscribes to in a group shaped like `spec`
/// (also for the member that joins next, `m == spec.members`).
pub fn spec_topics(spec: &GroupSpec, m: u32) -> Vec<u32> {
    match spec.subscriptions {
        Subscriptions::Homogeneous => (0..spec.topics).collect(),
        Subscriptions::Heterogeneous { groups } if groups <= 1 => (0..spec.topics).collect(),
        Subscriptions::Heterogeneous { groups } => {
            let g = m % groups;
            (0..spec.topics).filter(|t| t % groups != g).collect()
        }
    }
}

/// The input after every member took up `out`: its actives become the
/// current owners, its learners and standbys the current ones.
pub fn settle(input: &GroupInput, out: &Assignment) -> GroupInput {
    GroupInput {
        active_owner: out.active_owner.clone(),
        learners: out.learners.clone(),
        standbys: out.standbys.clone(),
        ..input.clone()
    }
}

/// The input with one more member `id` (capacity 1) subscribed to
/// `topics`, ascending (the INCREMENTAL case is `add_member(settle(..))`).
pub fn add_member(input: &GroupInput, id: &str, topics: Vec<u32>) -> GroupInput {
    let mut next = input.clone();
    let subscription = next.intern_subscription(topics);
    next.members.push(Member {
        id: id.to_owned(),
        name: None,
        rack: None,
        capacity: 1,
        subscription,
        load_capacity: None,
        utilisation: None,
    });
    next
}

/// Every topic of `input`, for a member that subscribes to all of them.
pub fn all_topics(input: &GroupInput) -> Vec<u32> {
    (0..input.topics.len() as u32).collect()
}

/// The input without member `m`: its tasks become unowned and member
/// indices above `m` shift down by one.
pub fn remove_member(input: &GroupInput, m: u32) -> GroupInput {
    let shift = |x: u32| if x > m { x - 1 } else { x };
    let mut next = input.clone();
    next.members.remove(m as usize);
    for owner in &mut next.active_owner {
        *owner = if *owner == m || *owner == NO_MEMBER {
            NO_MEMBER
        } else {
            shift(*owner)
        };
    }
    let keep = |rows: &TaskMembers| {
        let mut kept = TaskMembers::default();
        for (task, member) in rows.iter().filter(|&(_, member)| member != m) {
            kept.push(task, shift(member));
        }
        kept
    };
    next.learners = keep(&input.learners);
    next.standbys = keep(&input.standbys);
    let mut lags = TaskLags::default();
    for (task, member, lag) in input.lags.iter().filter(|&(_, member, _)| member != m) {
        lags.push(task, shift(member), lag);
    }
    next.lags = lags;
    next
}

/// Number of tasks whose active owner differs between two answers over the
/// same task set (a task that had no owner before is not counted).
pub fn moved_tasks(before: &[u32], after: &[u32]) -> usize {
    before
        .iter()
        .zip(after)
        .filter(|&(&b, &a)| b != NO_MEMBER && b != a)
        .count()
}
