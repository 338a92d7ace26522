//! Mixed components, where members subscribe to different topic sets:
//! valid current owners keep their tasks, [`placement`](super::placement)
//! places the rest, then single improving moves run topic by topic until
//! none is left. Touches only the answer, counts and task lists of the
//! component's members, and the load bounds of its sets.

use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, VecDeque};

use assignd_guest_sdk::NO_MEMBER;

use super::{Balancer, NIL};
use crate::loads::{Receiver, load_less};

/// Bounds on the loads of one set's members while moves settle: the
/// lowest load after taking one more task, `(count + 1) / cap`, and the
/// highest load, `count / cap`, each as `(num, cap)`. A topic whose
/// subscribers' lowest bound is not below their highest has no improving
/// move, whichever of them own its tasks.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct SetLoads {
    lightest: (u32, u32),
    heaviest: (u32, u32),
    /// Whether the bounds still hold: cleared when a member's count changes.
    fresh: bool,
}

impl Balancer<'_> {
    /// Keep valid owners, place unowned tasks greedily, then apply improving
    /// moves until none is left.
    pub(super) fn balance_mixed(&mut self, topics: &[u32]) {
        if self.next.is_empty() {
            self.head = vec![NIL; self.input.members.len()];
            self.next = vec![NIL; self.owner.len()];
            self.set_loads = vec![SetLoads::default(); self.input.subscriptions.len()];
        }
        self.keep_valid_owners(topics);

        let mut order = topics.to_vec();
        order.sort_by_key(|&t| (self.subscriber_count(t), t));
        if !self.place_interleaved(&order) {
            self.place_topic_by_topic(&order);
        }

        for &t in &order {
            for &s in &self.topic_sets[self.topic_set_start[t as usize] as usize
                ..self.topic_set_start[t as usize + 1] as usize]
            {
                self.set_loads[s as usize].fresh = false;
            }
        }
        let mut queued = vec![false; self.offsets.len() - 1];
        for &t in &order {
            queued[t as usize] = true;
        }
        let mut queue: VecDeque<u32> = order.into();
        while let Some(t) = queue.pop_front() {
            queued[t as usize] = false;
            self.settle_topic(t, &mut queue, &mut queued);
        }
    }

    /// Every task of `topics` whose current owner subscribes to its topic
    /// stays with that owner. A subscriber's set is one of the topic's
    /// sets, so a flag per set (not per member) answers the question.
    fn keep_valid_owners(&mut self, topics: &[u32]) {
        let input = self.input;
        let member_count = input.members.len() as u32;
        let mut set_flag = vec![false; input.subscriptions.len()];
        for &t in topics {
            for &s in self.sets_of_topic(t) {
                set_flag[s as usize] = true;
            }
            for task in self.topic_tasks(t) {
                let o = input.active_owner[task as usize];
                if o < member_count && set_flag[self.member_set[o as usize] as usize] {
                    self.give(task, o);
                }
            }
            for &s in self.sets_of_topic(t) {
                set_flag[s as usize] = false;
            }
        }
    }

    /// The load bounds of `set`'s members, recomputed if a count changed.
    fn set_loads(&mut self, set: u32) -> SetLoads {
        let loads = self.set_loads[set as usize];
        if loads.fresh {
            return loads;
        }
        let (count, capacity) = (&self.count, &self.capacity);
        let members = self.members_of_set(set);
        let first = members[0] as usize;
        let mut lightest = (count[first] + 1, capacity[first]);
        let mut heaviest = (count[first], capacity[first]);
        for &m in &members[1..] {
            let (num, cap) = (count[m as usize], capacity[m as usize]);
            if load_less(num + 1, cap, lightest.0, lightest.1) {
                lightest = (num + 1, cap);
            }
            if load_less(heaviest.0, heaviest.1, num, cap) {
                heaviest = (num, cap);
            }
        }
        let loads = SetLoads {
            lightest,
            heaviest,
            fresh: true,
        };
        self.set_loads[set as usize] = loads;
        loads
    }

    /// Whether topic `t` has an improving move: some owner of its tasks is
    /// more loaded than its least-loaded subscriber after taking one more.
    fn has_improving_move(&mut self, t: u32) -> bool {
        let (mut lightest, mut heaviest) = ((u32::MAX, 1), (0, 1));
        for i in self.topic_set_start[t as usize]..self.topic_set_start[t as usize + 1] {
            let loads = self.set_loads(self.topic_sets[i as usize]);
            if load_less(loads.lightest.0, loads.lightest.1, lightest.0, lightest.1) {
                lightest = loads.lightest;
            }
            if load_less(heaviest.0, heaviest.1, loads.heaviest.0, loads.heaviest.1) {
                heaviest = loads.heaviest;
            }
        }
        if !load_less(lightest.0, lightest.1, heaviest.0, heaviest.1) {
            return false;
        }
        let range = self.topic_tasks(t);
        let owners = &self.owner[range.start as usize..range.end as usize];
        any_heavier(owners, &self.count, &self.capacity, lightest)
    }

    /// Applies improving moves of topic `t`'s tasks until none is left, and
    /// queues the other topics of every member whose load changed (only
    /// their loads decide whether those topics have a move now).
    fn settle_topic(&mut self, t: u32, queue: &mut VecDeque<u32>, queued: &mut [bool]) {
        if !self.has_improving_move(t) {
            return;
        }
        let range = self.topic_tasks(t);

        // `scratch[m]` counts m's tasks of this topic while we move them.
        let mut donors = BinaryHeap::new();
        for task in range.clone() {
            let o = self.owner[task as usize];
            if self.scratch[o as usize] == 0 {
                donors.push(self.donor(o));
            }
            self.scratch[o as usize] += 1;
        }
        let mut receivers: BinaryHeap<Reverse<Receiver>> = self
            .subscribers(t)
            .map(|m| Reverse(self.receiver(m)))
            .collect();

        loop {
            // Entries go stale when a member's count changes; they are fixed
            // in place when they surface, and a fresh entry is pushed for
            // every member whose key dropped, so none stays buried.
            let to = loop {
                let mut top = receivers.peek_mut().expect("receivers never empty");
                let m = top.0.member;
                if top.0.num != self.count[m as usize] + 1 {
                    top.0.num = self.count[m as usize] + 1;
                    continue;
                }
                break m;
            };
            let from = loop {
                let Some(mut top) = donors.peek_mut() else {
                    break NIL;
                };
                let m = top.member;
                if self.scratch[m as usize] == 0 {
                    PeekMut::pop(top);
                    continue;
                }
                if top.num != self.count[m as usize] {
                    top.num = self.count[m as usize];
                    continue;
                }
                break m;
            };
            if from == NIL
                || !load_less(
                    self.count[to as usize] + 1,
                    self.capacity[to as usize],
                    self.count[from as usize],
                    self.capacity[from as usize],
                )
            {
                break;
            }
            let task = self.take(from, range.clone());
            self.give(task, to);
            self.scratch[from as usize] -= 1;
            self.scratch[to as usize] += 1;
            receivers.push(Reverse(self.receiver(from)));
            donors.push(self.donor(to));
            for m in [from, to] {
                self.set_loads[self.member_set[m as usize] as usize].fresh = false;
                for &other in self.input.topics_of(&self.input.members[m as usize]) {
                    if other != t && !queued[other as usize] {
                        queued[other as usize] = true;
                        queue.push_back(other);
                    }
                }
            }
        }
        for task in range {
            self.scratch[self.owner[task as usize] as usize] = 0;
        }
    }
}

/// Whether a member in `owners` is more loaded than `(num, cap)`. Its own
/// small function with slices in locals, so that the scan's bounds stay
/// in registers in wasm.
#[inline(never)]
fn any_heavier(owners: &[u32], count: &[u32], capacity: &[u32], (num, cap): (u32, u32)) -> bool {
    let capacity = &capacity[..count.len()];
    owners.iter().any(|&o| {
        debug_assert!(o != NO_MEMBER, "every task of a mixed component is placed");
        load_less(num, cap, count[o as usize], capacity[o as usize])
    })
}
