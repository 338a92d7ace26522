//! Lookups a strategy needs, built once from a [`GroupInput`]: task → topic,
//! topic → subscribers, member → current tasks, (task, member) → lag, and
//! task → learners / standbys. Everything is a flat vector indexed by task or
//! member so that building the index is linear in the input.

use std::collections::HashMap;

use std::cmp::Ordering;

use crate::model::{GroupInput, Member, NO_MEMBER, TaskId};

/// Read-only indexes over one [`GroupInput`].
#[derive(Clone, Debug)]
pub struct GroupIndex {
    /// `topic_offsets[t]` is the first task of topic `t`; the last entry is
    /// the task count.
    pub topic_offsets: Vec<u32>,
    /// Topic index of every task.
    pub task_topic: Vec<u32>,
    /// Subscribed member indices of every topic, ascending.
    pub topic_subscribers: Vec<Vec<u32>>,
    /// Current active tasks of every member, ascending.
    pub member_active: Vec<Vec<u32>>,
    /// Current learner members of every task.
    task_learners: Vec<Vec<u32>>,
    /// Current standby members of every task.
    task_standbys: Vec<Vec<u32>>,
    /// Reported lags by (task, member).
    lags: HashMap<(u32, u32), u64>,
}

impl GroupIndex {
    pub fn new(input: &GroupInput) -> Self {
        let topic_offsets = input.topic_offsets();
        let task_count = *topic_offsets.last().unwrap_or(&0) as usize;
        let mut task_topic = Vec::with_capacity(task_count);
        for (t, topic) in input.topics.iter().enumerate() {
            task_topic.extend(std::iter::repeat_n(t as u32, topic.partitions as usize));
        }
        let mut topic_subscribers = vec![Vec::new(); input.topics.len()];
        for (m, member) in input.members.iter().enumerate() {
            for &t in input.topics_of(member) {
                if let Some(subs) = topic_subscribers.get_mut(t as usize) {
                    subs.push(m as u32);
                }
            }
        }
        let mut member_active = vec![Vec::new(); input.members.len()];
        for (task, &owner) in input.active_owner.iter().enumerate() {
            if let Some(tasks) = member_active.get_mut(owner as usize) {
                tasks.push(task as u32);
            }
        }
        let per_task = |rows: &crate::model::TaskMembers| {
            let mut by_task = vec![Vec::new(); task_count];
            for (task, member) in rows.iter() {
                if let Some(members) = by_task.get_mut(task as usize) {
                    members.push(member);
                }
            }
            by_task
        };
        let lags = input.lags.iter().map(|(t, m, l)| ((t, m), l)).collect();
        GroupIndex {
            task_learners: per_task(&input.learners),
            task_standbys: per_task(&input.standbys),
            topic_offsets,
            task_topic,
            topic_subscribers,
            member_active,
            lags,
        }
    }

    pub fn task_count(&self) -> usize {
        self.task_topic.len()
    }

    /// The tasks of topic `topic`.
    pub fn topic_tasks(&self, topic: u32) -> std::ops::Range<u32> {
        self.topic_offsets[topic as usize]..self.topic_offsets[topic as usize + 1]
    }

    /// (topic, partition) of a task.
    pub fn task_id(&self, task: u32) -> TaskId {
        let topic = self.task_topic[task as usize];
        TaskId {
            topic,
            partition: task - self.topic_offsets[topic as usize],
        }
    }

    /// Task number of (topic, partition).
    pub fn task(&self, id: TaskId) -> u32 {
        self.topic_offsets[id.topic as usize] + id.partition
    }

    /// The lag `member` reported for `task`, if it has state for it. The
    /// current active owner counts as fully caught up (lag 0) unless it
    /// reported otherwise.
    pub fn lag(&self, input: &GroupInput, task: u32, member: u32) -> Option<u64> {
        match self.lags.get(&(task, member)) {
            Some(&lag) => Some(lag),
            None if input.active_owner.get(task as usize) == Some(&member)
                && member != NO_MEMBER =>
            {
                Some(0)
            }
            None => None,
        }
    }

    /// Members currently warming `task` as learners.
    pub fn learners(&self, task: u32) -> &[u32] {
        &self.task_learners[task as usize]
    }

    /// Members currently holding `task` as a standby.
    pub fn standbys(&self, task: u32) -> &[u32] {
        &self.task_standbys[task as usize]
    }
}

/// Member indices in Kafka's `MemberInfo` order: static members (with a
/// name) first, by name, then dynamic members by id. Names and ids are
/// unique in a checked input, so the order is total and does not depend on
/// the members' positions in the input; the id tie-break only keeps an
/// unchecked input deterministic.
pub fn kafka_member_order(members: &[Member]) -> Vec<u32> {
    let mut order: Vec<u32> = (0..members.len() as u32).collect();
    let cmp = |x: &String, y: &String| cmp_bytes(x.as_bytes(), y.as_bytes());
    order.sort_unstable_by(|&a, &b| {
        let (a, b) = (&members[a as usize], &members[b as usize]);
        match (&a.name, &b.name) {
            (Some(x), Some(y)) => cmp(x, y).then_with(|| cmp(&a.id, &b.id)),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => cmp(&a.id, &b.id),
        }
    });
    order
}

/// The ranks (positions in `order`) of every topic's subscribers, ascending,
/// as one flat vector: topic `t`'s are `ranks[starts[t]..starts[t + 1]]`.
/// Ranks rather than member indices so that a position in the order can be
/// found by binary search; `order[rank]` is the member. One flat vector
/// instead of a `Vec` per topic keeps the allocation count independent of
/// the topic count.
pub fn subscriber_ranks_by_topic(input: &GroupInput, order: &[u32]) -> (Vec<usize>, Vec<u32>) {
    let topic_count = input.topics.len();
    let mut starts = vec![0usize; topic_count + 1];
    for member in &input.members {
        for &t in input.topics_of(member) {
            starts[t as usize + 1] += 1;
        }
    }
    for t in 0..topic_count {
        starts[t + 1] += starts[t];
    }
    let mut fill = starts[..topic_count].to_vec();
    let mut ranks = vec![0u32; starts[topic_count]];
    for (rank, &m) in order.iter().enumerate() {
        for &t in input.topics_of(&input.members[m as usize]) {
            ranks[fill[t as usize]] = rank as u32;
            fill[t as usize] += 1;
        }
    }
    (starts, ranks)
}

/// `a.cmp(b)` for byte strings, eight bytes at a time. Inside wasm
/// `memcmp` is a byte-by-byte loop (there is no vector compare), and member
/// ids tend to share long prefixes (`worker-…`): sorting 1,000 members by
/// id cost ~3,800 fuel per member that way.
pub fn cmp_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let common = a.len().min(b.len());
    let mut i = 0;
    while i + 8 <= common {
        let word = |s: &[u8]| u64::from_be_bytes(s[i..i + 8].try_into().expect("eight bytes"));
        let (x, y) = (word(a), word(b));
        if x != y {
            return x.cmp(&y);
        }
        i += 8;
    }
    a[i..].cmp(&b[i..])
}

#[cfg(test)]
mod tests {
    use super::cmp_bytes;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn cmp_bytes_matches_slice_order_on_shared_prefixes(
            prefix in proptest::collection::vec(any::<u8>(), 0..40),
            a in proptest::collection::vec(0u8..4, 0..12),
            b in proptest::collection::vec(0u8..4, 0..12),
        ) {
            let (a, b) = ([&prefix[..], &a].concat(), [&prefix[..], &b].concat());
            prop_assert_eq!(cmp_bytes(&a, &b), a.cmp(&b));
        }
    }

    #[test]
    fn cmp_bytes_orders_like_slices() {
        let words: [&[u8]; 10] = [
            b"",
            b"a",
            b"member-1",
            b"member-10",
            b"member-100000000",
            b"member-100000001",
            b"member-2",
            b"member-",
            b"\xff\x00",
            b"\x00\xff",
        ];
        for a in words {
            for b in words {
                assert_eq!(cmp_bytes(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }
}
