//! The greedy placement of a mixed component's unowned tasks, each to a
//! subscriber that is least loaded after taking it: interleaved over the
//! topics with one queue per class of members with equal subscriptions,
//! or topic by topic when there are too many classes for that to pay.
//! Touches only the unowned tasks of the component and the counts and
//! task lists of their new owners.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use assignd_guest_sdk::NO_MEMBER;

use super::class_queue::{ClassQueue, EqualCapacityKey, QueueKey};
use super::{Balancer, TaskLists};
use crate::loads::Receiver;

/// A topic still placing: its next task to look at, its end, and its
/// classes, `class_list[classes]`.
struct Pending {
    cursor: u32,
    end: u32,
    classes: std::ops::Range<u32>,
}

impl Balancer<'_> {
    /// Places unowned tasks in rounds, one task of every topic per round,
    /// each to the subscriber that is least loaded after taking it.
    /// Interleaving keeps every subscription class growing at the same pace;
    /// placing whole topics one after the other loads the members of the
    /// topics placed first and leaves the rest to the repair moves (27,000
    /// of them for 5,000 members in 3 overlapping classes). Within a round,
    /// topics with fewer subscribers choose first: they have fewer options.
    ///
    /// Members with the same subscriptions share one queue, so no key goes
    /// stale and a task looks at one queue front per class subscribing to
    /// its topic. Returns false, placing nothing, when that would cost more
    /// than placing topic by topic (many distinct subscription sets).
    pub(super) fn place_interleaved(
        &mut self,
        order: &[u32],
        unowned: u64,
        same_capacity: bool,
    ) -> bool {
        if unowned == 0 {
            return true;
        }
        // A task looks at one queue per class of its topic; topic by topic
        // it costs a heap of the topic's subscribers plus ~16 per task.
        let lookups: u64 = order
            .iter()
            .map(|&t| {
                self.sets_of_topic(t).len() as u64 * u64::from(self.topic_tasks(t).len() as u32)
            })
            .sum();
        let topic_by_topic_cost: u64 = order
            .iter()
            .map(|&t| u64::from(self.subscriber_count(t)))
            .sum::<u64>()
            + unowned * 16;
        if lookups > topic_by_topic_cost {
            return false;
        }

        // With one capacity in the whole component, loads compare as counts
        // and a queue key packs into one integer.
        if same_capacity {
            self.place_rounds::<EqualCapacityKey>(order);
        } else {
            self.place_rounds::<Receiver>(order);
        }
        true
    }

    /// The interleaved placement's rounds, with class queues keyed by `K`.
    fn place_rounds<K: QueueKey>(&mut self, order: &[u32]) {
        let (mut classes, class_list, mut pending) = self.classes_by_topic::<K>(order);
        let mut fronts: Vec<K> = classes.iter().map(ClassQueue::front).collect();
        let mut tasks = TaskLists {
            owner: &mut self.owner,
            count: &mut self.count,
            head: &mut self.head,
            next: &mut self.next,
        };
        while !pending.is_empty() {
            place_round(
                &mut pending,
                &class_list,
                &mut classes,
                &mut fronts,
                &mut tasks,
            );
        }
    }

    /// The queues of the component's classes (the sets of `order`'s
    /// topics, numbered in order of first appearance), every topic's class
    /// numbers in one list, and every topic as pending from its first task.
    fn classes_by_topic<K: QueueKey>(
        &self,
        order: &[u32],
    ) -> (Vec<ClassQueue<K>>, Vec<u32>, Vec<Pending>) {
        let mut class_of = vec![u32::MAX; self.input.subscriptions.len()];
        let mut classes: Vec<ClassQueue<K>> = Vec::new();
        let mut class_list = Vec::new();
        let mut pending = Vec::with_capacity(order.len());
        for &t in order {
            let first_class = class_list.len() as u32;
            for &s in self.sets_of_topic(t) {
                if class_of[s as usize] == u32::MAX {
                    class_of[s as usize] = classes.len() as u32;
                    let members = self.members_of_set(s);
                    classes.push(ClassQueue::new(
                        members.iter().map(|&m| self.receiver(m)).collect(),
                    ));
                }
                class_list.push(class_of[s as usize]);
            }
            let tasks = self.topic_tasks(t);
            pending.push(Pending {
                cursor: tasks.start,
                end: tasks.end,
                classes: first_class..class_list.len() as u32,
            });
        }
        (classes, class_list, pending)
    }

    /// Places unowned tasks one topic at a time, each to the subscriber
    /// that is least loaded after taking it; O(S + P log S) per topic.
    pub(super) fn place_topic_by_topic(&mut self, order: &[u32]) {
        for &t in order {
            let range = self.topic_tasks(t);
            if !self.owner[range.start as usize..range.end as usize].contains(&NO_MEMBER) {
                continue;
            }
            let mut heap: BinaryHeap<Reverse<Receiver>> = self
                .subscribers(t)
                .map(|m| Reverse(self.receiver(m)))
                .collect();
            for task in range {
                if self.owner[task as usize] != NO_MEMBER {
                    continue;
                }
                let mut top = heap.peek_mut().expect("a component topic has subscribers");
                let m = top.0.member;
                top.0.num += 1;
                drop(top);
                self.give(task, m);
            }
        }
    }
}

/// One round of interleaved placement: every pending topic places its next
/// unowned task on the front member of the least-loaded class subscribing
/// to it (`fronts[c]` is class `c`'s front); topics with nothing left to
/// place leave `pending`. Its own function with the state in locals, so
/// that the loop's values stay in registers in wasm.
#[inline(never)]
fn place_round<K: QueueKey>(
    pending: &mut Vec<Pending>,
    class_list: &[u32],
    classes: &mut [ClassQueue<K>],
    fronts: &mut [K],
    tasks: &mut TaskLists,
) {
    let classes = &mut classes[..fronts.len()];
    let owner = &mut *tasks.owner;
    let next = &mut tasks.next[..owner.len()];
    let count = &mut *tasks.count;
    let head = &mut tasks.head[..count.len()];
    let mut finished = false;
    for p in pending.iter_mut() {
        let (mut cursor, end) = (p.cursor, p.end);
        while cursor < end && owner[cursor as usize] != NO_MEMBER {
            cursor += 1;
        }
        if cursor == end {
            p.cursor = end;
            finished = true;
            continue;
        }
        // Fronts are distinct members, so the least is unique.
        let candidates = &class_list[p.classes.start as usize..p.classes.end as usize];
        let mut best = candidates[0] as usize;
        let mut front = fronts[best];
        for &c in &candidates[1..] {
            if fronts[c as usize] < front {
                best = c as usize;
                front = fronts[best];
            }
        }
        fronts[best] = classes[best].advance();
        let (task, m) = (cursor as usize, front.member());
        owner[task] = m;
        next[task] = head[m as usize];
        head[m as usize] = cursor;
        count[m as usize] += 1;
        p.cursor = cursor + 1;
    }
    if finished {
        pending.retain(|p| p.cursor < p.end);
    }
}
