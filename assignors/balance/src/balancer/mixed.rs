//! Mixed components, where members subscribe to different topic sets:
//! valid current owners keep their tasks, [`placement`](super::placement)
//! places the rest, then single improving moves run topic by topic until
//! none is left. Touches only the answer, counts and task lists of the
//! component's members, and the load bounds of its sets.

use std::cmp::Reverse;
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, VecDeque};

use super::{Balancer, NIL, TaskLists};
use crate::loads::{Receiver, load_less};

/// Improving moves of one topic found by scanning its subscribers' sets
/// and its owners; past this many, heaps take over. A scan costs about
/// as much as building the heaps, and a topic near balance (after the
/// interleaved placement, or in a settled group) rarely needs more than
/// one or two moves.
const SCANNED_MOVES_MAX: u32 = 4;

/// What moves need to know about one set's members while they settle: the
/// least loaded after taking one more task (exactly, as a receiver), and
/// a bound on the others, the highest load `count / cap` as `(num, cap)`.
/// A topic whose lightest subscriber is not below its subscribers' highest
/// load has no improving move, whichever of them own its tasks.
#[derive(Clone, Copy, Debug)]
pub(super) struct SetLoads {
    lightest: Receiver,
    heaviest: (u32, u32),
    /// Whether the fields still hold: cleared when a member's count changes.
    fresh: bool,
}

impl SetLoads {
    pub(super) const STALE: SetLoads = SetLoads {
        lightest: Receiver {
            num: 0,
            cap: 1,
            member: NIL,
        },
        heaviest: (0, 1),
        fresh: false,
    };
}

impl Balancer<'_> {
    /// Keep valid owners, place unowned tasks greedily, then apply improving
    /// moves until none is left.
    pub(super) fn balance_mixed(&mut self, topics: &[u32], members: &[u32]) {
        if self.next.is_empty() {
            self.head = vec![NIL; self.input.members.len()];
            self.next = vec![NIL; self.owner.len()];
            self.set_loads = vec![SetLoads::STALE; self.input.subscriptions.len()];
        }
        let unowned = self.keep_valid_owners(topics);

        let mut order = topics.to_vec();
        order.sort_by_key(|&t| (self.subscriber_count(t), t));
        let capacity = &self.capacity;
        let same_capacity = members
            .iter()
            .all(|&m| capacity[m as usize] == capacity[members[0] as usize]);
        if !self.place_interleaved(&order, unowned, same_capacity) {
            self.place_topic_by_topic(&order);
        }

        self.settle(order);
    }

    /// Applies improving moves topic by topic, `order` first, until no
    /// topic has one.
    fn settle(&mut self, order: Vec<u32>) {
        // Counts changed since any set's loads were computed.
        for &t in &order {
            let sets = self.topic_set_start[t as usize]..self.topic_set_start[t as usize + 1];
            for &s in &self.topic_sets[sets.start as usize..sets.end as usize] {
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
    /// stays with that owner; how many tasks are left unowned. A
    /// subscriber's set is one of the topic's sets, so a flag per set (not
    /// per member) answers the question.
    fn keep_valid_owners(&mut self, topics: &[u32]) -> u64 {
        let input = self.input;
        let mut set_flag = vec![false; input.subscriptions.len()];
        let (mut tasks_seen, mut kept) = (0, 0);
        for &t in topics {
            let range = self.topic_tasks(t);
            for &s in self.sets_of_topic(t) {
                set_flag[s as usize] = true;
            }
            let mut tasks = TaskLists {
                owner: &mut self.owner,
                count: &mut self.count,
                head: &mut self.head,
                next: &mut self.next,
            };
            let current = &input.active_owner[range.start as usize..range.end as usize];
            for (task, &o) in (range.start..).zip(current) {
                // `get` also rejects NO_MEMBER and stale indices.
                if let Some(&s) = self.member_set.get(o as usize)
                    && set_flag[s as usize]
                {
                    tasks.give(task, o);
                    kept += 1;
                }
            }
            tasks_seen += current.len() as u64;
            for &s in self.sets_of_topic(t) {
                set_flag[s as usize] = false;
            }
        }
        tasks_seen - kept
    }

    /// The loads of `set`'s members, recomputed if a count changed.
    fn set_loads(&mut self, set: u32) -> SetLoads {
        let loads = self.set_loads[set as usize];
        if loads.fresh {
            return loads;
        }
        let members = self.members_of_set(set);
        let mut lightest = self.receiver(members[0]);
        let mut heaviest = (self.count[members[0] as usize], lightest.cap);
        for &m in &members[1..] {
            let receiver = self.receiver(m);
            if receiver < lightest {
                lightest = receiver;
            }
            if load_less(heaviest.0, heaviest.1, receiver.num - 1, receiver.cap) {
                heaviest = (receiver.num - 1, receiver.cap);
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

    /// The improving move of topic `t` that the balance criterion takes
    /// first, as `(from, to)`: from its most loaded owner (lowest index
    /// first) to its least loaded subscriber after taking one more.
    fn improving_move(&mut self, t: u32) -> Option<(u32, u32)> {
        let mut lightest: Option<Receiver> = None;
        let mut heaviest = (0, 1);
        for i in self.topic_set_start[t as usize]..self.topic_set_start[t as usize + 1] {
            let loads = self.set_loads(self.topic_sets[i as usize]);
            if lightest.is_none_or(|l| loads.lightest < l) {
                lightest = Some(loads.lightest);
            }
            if load_less(heaviest.0, heaviest.1, loads.heaviest.0, loads.heaviest.1) {
                heaviest = loads.heaviest;
            }
        }
        let to = lightest.expect("a component topic has subscribers");
        if !load_less(to.num, to.cap, heaviest.0, heaviest.1) {
            return None;
        }
        let range = self.topic_tasks(t);
        let owners = &self.owner[range.start as usize..range.end as usize];
        let from = heaviest_owner(owners, &self.count, &self.capacity)?;
        let (count, cap) = (self.count[from as usize], self.capacity[from as usize]);
        load_less(to.num, to.cap, count, cap).then_some((from, to.member))
    }

    /// Applies improving moves of topic `t`'s tasks until none is left, and
    /// queues the other topics of every member whose load changed (only
    /// their loads decide whether those topics have a move now).
    fn settle_topic(&mut self, t: u32, queue: &mut VecDeque<u32>, queued: &mut [bool]) {
        for _ in 0..SCANNED_MOVES_MAX {
            let Some((from, to)) = self.improving_move(t) else {
                return;
            };
            // If the same two members would still have a move after this
            // one, the topic is far from balance: many moves, heaps pay.
            let (count, capacity) = (&self.count, &self.capacity);
            if load_less(
                count[to as usize] + 2,
                capacity[to as usize],
                count[from as usize] - 1,
                capacity[from as usize],
            ) {
                self.settle_topic_with_heaps(t, queue, queued);
                return;
            }
            self.move_task(t, from, to, queue, queued);
        }
        if self.improving_move(t).is_some() {
            self.settle_topic_with_heaps(t, queue, queued);
        }
    }

    /// Moves one of `from`'s tasks of topic `t` to `to` and queues the
    /// other topics of both.
    fn move_task(
        &mut self,
        t: u32,
        from: u32,
        to: u32,
        queue: &mut VecDeque<u32>,
        queued: &mut [bool],
    ) {
        let task = self.take(from, self.topic_tasks(t));
        self.give(task, to);
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

    /// [`Self::settle_topic`] for a topic with many moves: the same moves,
    /// each found from a heap of its subscribers and one of its owners.
    fn settle_topic_with_heaps(&mut self, t: u32, queue: &mut VecDeque<u32>, queued: &mut [bool]) {
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
            self.move_task(t, from, to, queue, queued);
            self.scratch[from as usize] -= 1;
            self.scratch[to as usize] += 1;
            receivers.push(Reverse(self.receiver(from)));
            donors.push(self.donor(to));
        }
        for task in range {
            self.scratch[self.owner[task as usize] as usize] = 0;
        }
    }
}

/// The most loaded member of `owners` (lowest index first among equals),
/// `None` if there are none. Its own small function with slices in
/// locals, so that the scan's bounds stay in registers in wasm.
#[inline(never)]
fn heaviest_owner(owners: &[u32], count: &[u32], capacity: &[u32]) -> Option<u32> {
    let capacity = &capacity[..count.len()];
    let (&first, rest) = owners.split_first()?;
    let (mut best, mut best_count, mut best_cap) = (
        first,
        u64::from(count[first as usize]),
        u64::from(capacity[first as usize]),
    );
    for &o in rest {
        let (o_count, o_cap) = (
            u64::from(count[o as usize]),
            u64::from(capacity[o as usize]),
        );
        let (o_load, best_load) = (o_count * best_cap, best_count * o_cap);
        if o_load > best_load || (o_load == best_load && o < best) {
            (best, best_count, best_cap) = (o, o_count, o_cap);
        }
    }
    Some(best)
}
