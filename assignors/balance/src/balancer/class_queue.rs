//! The members of one subscription class in the order the interleaved
//! placement hands them tasks: least loaded after taking one more first,
//! then lowest index. Owns only the queue; the placement owns the answer.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::loads::Receiver;

/// A class member's place in its queue, ordered as [`Receiver`]s are.
pub(super) trait QueueKey: Ord + Copy {
    fn of(receiver: Receiver) -> Self;
    fn member(self) -> u32;
    /// The member's count after one more task (the load's numerator).
    fn num(self) -> u32;
    /// The same member after `tasks` more tasks.
    fn plus(self, tasks: u32) -> Self;
}

impl QueueKey for Receiver {
    fn of(receiver: Receiver) -> Self {
        receiver
    }

    fn member(self) -> u32 {
        self.member
    }

    fn num(self) -> u32 {
        self.num
    }

    fn plus(self, tasks: u32) -> Self {
        Receiver {
            num: self.num + tasks,
            ..self
        }
    }
}

/// A receiver packed as `num << 32 | member`: when every member of the
/// component has the same capacity this is the receivers' order, compared
/// as one integer instead of two products and an index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct EqualCapacityKey(u64);

impl QueueKey for EqualCapacityKey {
    fn of(receiver: Receiver) -> Self {
        EqualCapacityKey(u64::from(receiver.num) << 32 | u64::from(receiver.member))
    }

    fn member(self) -> u32 {
        self.0 as u32
    }

    fn num(self) -> u32 {
        (self.0 >> 32) as u32
    }

    fn plus(self, tasks: u32) -> Self {
        EqualCapacityKey(self.0 + (u64::from(tasks) << 32))
    }
}

/// The members of one subscription class, least loaded (after taking one
/// more task) first.
///
/// A binary heap costs ~70 ns per pick in a class of thousands. When all
/// members have the same capacity and counts within one of each other, a
/// queue in (count, index) order stays in that order by rotation: the front
/// takes a task and goes to the back, behind the members already one ahead.
/// Placing many tasks reaches that state quickly, so the heap turns into a
/// ring as soon as it does.
pub(super) struct ClassQueue<K> {
    /// Until the class rotates: its members by load.
    heap: BinaryHeap<Reverse<K>>,
    /// Once it rotates: its members in (count, index) order as they were
    /// then. `ring[next]` is the front; since then every member has taken
    /// `laps` tasks, and those before `next` one more.
    ring: Vec<K>,
    next: usize,
    laps: u32,
    same_capacity: bool,
    max_num: u32,
}

impl<K: QueueKey> ClassQueue<K> {
    pub(super) fn new(members: Vec<Receiver>) -> Self {
        debug_assert!(!members.is_empty());
        let same_capacity = members.iter().all(|r| r.cap == members[0].cap);
        let max_num = members.iter().map(|r| r.num).max().unwrap_or(0);
        let mut class = ClassQueue {
            heap: members.into_iter().map(|r| Reverse(K::of(r))).collect(),
            ring: Vec::new(),
            next: 0,
            laps: 0,
            same_capacity,
            max_num,
        };
        class.maybe_rotate();
        class
    }

    pub(super) fn front(&self) -> K {
        match self.ring.get(self.next) {
            Some(&key) => key.plus(self.laps),
            None => self.heap.peek().expect("classes are not empty").0,
        }
    }

    /// Counts the front member as holding one more task; the new front.
    #[inline]
    pub(super) fn advance(&mut self) -> K {
        if let Some(&key) = self.ring.get(self.next + 1) {
            self.next += 1;
            return key.plus(self.laps);
        }
        if !self.ring.is_empty() {
            self.next = 0;
            self.laps += 1;
            return self.front();
        }
        let mut top = self.heap.peek_mut().expect("classes are not empty");
        top.0 = top.0.plus(1);
        self.max_num = self.max_num.max(top.0.num());
        drop(top);
        self.maybe_rotate();
        self.front()
    }

    fn maybe_rotate(&mut self) {
        let min_num = self.heap.peek().expect("classes are not empty").0.num();
        if self.same_capacity && self.max_num <= min_num + 1 {
            let mut sorted: Vec<K> = std::mem::take(&mut self.heap)
                .into_iter()
                .map(|r| r.0)
                .collect();
            sorted.sort_unstable();
            self.ring = sorted;
        }
    }
}
