//! Random groups for the property tests, and answers keyed by names so that
//! two runs over differently ordered inputs can be compared.

#![allow(dead_code)]

use std::collections::BTreeMap;

use assignd_guest_sdk::{Assignment, GroupInput, Member, NO_MEMBER, Topic};
use proptest::prelude::*;

/// One generated member: which topics it subscribes to, whether it is
/// static, and a salt that makes its id (and name) sort in a random place.
#[derive(Clone, Debug)]
pub struct MemberSpec {
    pub subscribes: Vec<bool>,
    pub is_static: bool,
    pub salt: u16,
}

/// Random groups: 1..=6 topics of 0..=60 partitions whose names sort in a
/// random order, 1..=40 members, static and dynamic mixed, with random
/// subscriptions (or every member subscribing to everything when
/// `homogeneous`), and a random previous assignment that assignors must
/// ignore.
pub fn groups(homogeneous: bool) -> impl Strategy<Value = GroupInput> {
    (1usize..=6, 1usize..=40)
        .prop_flat_map(move |(topic_count, member_count)| {
            let member = (
                proptest::collection::vec(
                    if homogeneous {
                        Just(true).boxed()
                    } else {
                        any::<bool>().boxed()
                    },
                    topic_count,
                ),
                any::<bool>(),
                any::<u16>(),
            )
                .prop_map(|(subscribes, is_static, salt)| MemberSpec {
                    subscribes,
                    is_static,
                    salt,
                });
            (
                proptest::collection::vec(0u32..=60, topic_count),
                Just((0..topic_count).collect::<Vec<_>>()).prop_shuffle(),
                proptest::collection::vec(member, member_count),
                proptest::collection::vec(any::<u32>(), 6 * 60),
            )
        })
        .prop_map(|(partitions, names, members, previous)| {
            build(&partitions, &names, &members, &previous)
        })
}

fn build(
    partitions: &[u32],
    names: &[usize],
    members: &[MemberSpec],
    previous: &[u32],
) -> GroupInput {
    let topics: Vec<Topic> = partitions
        .iter()
        .zip(names)
        .map(|(&partitions, name)| Topic {
            name: format!("topic-{name}"),
            partitions,
        })
        .collect();
    let mut input = GroupInput {
        topics,
        ..GroupInput::default()
    };
    for (i, spec) in members.iter().enumerate() {
        let subscribed = (0..input.topics.len() as u32)
            .filter(|&t| spec.subscribes[t as usize])
            .collect();
        let member = Member {
            id: format!("member-{:05}-{i}", spec.salt),
            name: spec
                .is_static
                .then(|| format!("static-{:05}-{i}", spec.salt.rotate_left(7))),
            rack: None,
            capacity: 1 + u32::from(spec.salt % 3),
            subscription: input.intern_subscription(subscribed),
            load_capacity: None,
            utilisation: None,
        };
        input.members.push(member);
    }
    let members = &input.members;
    let task_count: usize = partitions.iter().map(|&p| p as usize).sum();
    let choices = members.len() as u32 + 1;
    let active_owner = previous[..task_count]
        .iter()
        .map(|&r| match r % choices {
            0 => NO_MEMBER,
            m => m - 1,
        })
        .collect();
    GroupInput {
        active_owner,
        ..input
    }
}

/// Active tasks per member id as sorted (topic name, partition) pairs; every
/// member present, owned tasks only.
pub type ByMember = BTreeMap<String, Vec<(String, u32)>>;

pub fn by_member(input: &GroupInput, out: &Assignment) -> ByMember {
    let offsets = input.topic_offsets();
    let mut map: ByMember = input
        .members
        .iter()
        .map(|m| (m.id.clone(), Vec::new()))
        .collect();
    for (t, topic) in input.topics.iter().enumerate() {
        for p in 0..topic.partitions {
            let owner = out.active_owner[(offsets[t] + p) as usize];
            if owner != NO_MEMBER {
                map.get_mut(&input.members[owner as usize].id)
                    .unwrap()
                    .push((topic.name.clone(), p));
            }
        }
    }
    for tasks in map.values_mut() {
        tasks.sort();
    }
    map
}

/// Kafka's `MemberInfo.compareTo` written as a sort key: static members
/// first by group instance id, then dynamic members by member id.
pub fn kafka_key(member: &Member) -> (bool, &str) {
    match &member.name {
        Some(name) => (false, name.as_str()),
        None => (true, member.id.as_str()),
    }
}

/// A small input from names: topics with partition counts, and members as
/// (id, name, subscribed topic names).
pub fn input_of(topics: &[(&str, u32)], members: &[(&str, Option<&str>, &[&str])]) -> GroupInput {
    let topics: Vec<Topic> = topics
        .iter()
        .map(|&(name, partitions)| Topic {
            name: name.to_owned(),
            partitions,
        })
        .collect();
    let task_count = topics.iter().map(|t| t.partitions as usize).sum();
    let mut input = GroupInput {
        topics,
        active_owner: vec![NO_MEMBER; task_count],
        ..GroupInput::default()
    };
    for &(id, name, subscribed) in members {
        let mut indices: Vec<u32> = subscribed
            .iter()
            .map(|s| input.topics.iter().position(|t| t.name == *s).unwrap() as u32)
            .collect();
        indices.sort_unstable();
        let member = Member {
            id: id.to_owned(),
            name: name.map(str::to_owned),
            rack: None,
            capacity: 1,
            subscription: input.intern_subscription(indices),
            load_capacity: None,
            utilisation: None,
        };
        input.members.push(member);
    }
    input
}

/// Expected answer from (member id, [(topic, partition)]) rows.
pub fn expected(rows: &[(&str, &[(&str, u32)])]) -> ByMember {
    rows.iter()
        .map(|&(id, tasks)| {
            let mut tasks: Vec<(String, u32)> =
                tasks.iter().map(|&(t, p)| (t.to_owned(), p)).collect();
            tasks.sort();
            (id.to_owned(), tasks)
        })
        .collect()
}
