//! The sticky, capacity-weighted, topic-aware balancing shared by the
//! `sticky` and `learner-aware` assignors: given a [`GroupInput`], the
//! target active owner of every task.
//!
//! Topics that share a subscriber are balanced together (a *component*);
//! components are independent, so each is solved on its own:
//!
//! - In a *uniform* component every member subscribes to every topic of the
//!   component. Each member gets an exact weighted quota
//!   (`floor(T·c/C)`, plus one of the remainder slots), keeps its current
//!   tasks up to that quota, and the rest go to members under quota. This is
//!   the fewest moves any assignment within one of the weighted shares can
//!   make, and runs in O(T + M).
//! - In a *mixed* component members subscribe to different topic sets.
//!   Valid current owners keep their tasks, unowned tasks go topic by topic
//!   to the least-loaded subscriber, then single tasks move from a more
//!   loaded to a less loaded subscriber of their topic while that strictly
//!   lowers the pair's larger load, until no such move exists anywhere
//!   ([`find_improving_move`] is `None`).
//!
//! Loads are `count / capacity`, compared exactly by cross multiplication.
//! Every tie is broken by member or task index, so the answer is a pure
//! function of the input.

use std::cmp::{Ordering, Reverse};
use std::collections::binary_heap::PeekMut;
use std::collections::{BinaryHeap, VecDeque};

use assignd_guest_sdk::{GroupInput, NO_MEMBER};

/// Whether `count_a / cap_a < count_b / cap_b`, exactly.
#[inline]
pub fn load_less(count_a: u32, cap_a: u32, count_b: u32, cap_b: u32) -> bool {
    u64::from(count_a) * u64::from(cap_b) < u64::from(count_b) * u64::from(cap_a)
}

/// The target active owner of every task of `input`: [`NO_MEMBER`] for the
/// tasks of topics nobody subscribes to, otherwise a subscribed member.
///
/// Sticky: a task stays on its current owner (`input.active_owner`) unless
/// balance requires a move or the owner no longer subscribes to its topic.
/// Balanced: in a component where all members subscribe to the same topics,
/// each member's count is within one of its weighted share `T·c/C`; in
/// a mixed component no single task move to a subscribed member strictly
/// lowers the larger load of the two members involved.
pub fn balance(input: &GroupInput) -> Vec<u32> {
    let mut balancer = Balancer::new(input);
    balancer.run();
    balancer.owner
}

/// A single task move that would strictly improve balance: `to` subscribes
/// to the task's topic and `(count(to) + 1) / cap(to) < count(from) / cap(from)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ImprovingMove {
    pub task: u32,
    pub from: u32,
    pub to: u32,
}

/// An improving move in `owners` (one entry per task of `input`), if any;
/// the balance criterion of mixed components. O(subscriptions + tasks).
pub fn find_improving_move(input: &GroupInput, owners: &[u32]) -> Option<ImprovingMove> {
    let offsets = input.topic_offsets();
    let mut counts = vec![0u32; input.members.len()];
    for &owner in owners {
        if owner != NO_MEMBER {
            counts[owner as usize] += 1;
        }
    }
    let cap = |m: u32| input.members[m as usize].capacity.max(1);
    let mut subscribers: Vec<Vec<u32>> = vec![Vec::new(); input.topics.len()];
    for (m, member) in input.members.iter().enumerate() {
        for &t in input.topics_of(member) {
            subscribers[t as usize].push(m as u32);
        }
    }
    for (t, subs) in subscribers.iter().enumerate() {
        let Some(to) = subs.iter().copied().min_by(|&a, &b| {
            ratio_cmp(
                counts[a as usize] + 1,
                cap(a),
                counts[b as usize] + 1,
                cap(b),
            )
        }) else {
            continue;
        };
        let mut heaviest: Option<(u32, u32)> = None;
        for task in offsets[t]..offsets[t + 1] {
            let from = owners[task as usize];
            if from == NO_MEMBER {
                continue;
            }
            let heavier = heaviest.is_none_or(|(_, h)| {
                load_less(counts[h as usize], cap(h), counts[from as usize], cap(from))
            });
            if heavier {
                heaviest = Some((task, from));
            }
        }
        if let Some((task, from)) = heaviest
            && load_less(
                counts[to as usize] + 1,
                cap(to),
                counts[from as usize],
                cap(from),
            )
        {
            return Some(ImprovingMove { task, from, to });
        }
    }
    None
}

fn ratio_cmp(num_a: u32, cap_a: u32, num_b: u32, cap_b: u32) -> Ordering {
    (u64::from(num_a) * u64::from(cap_b)).cmp(&(u64::from(num_b) * u64::from(cap_a)))
}

/// A member's load `count / cap` for a max-heap: most loaded first, then
/// lowest index.
#[derive(Clone, Copy, Debug)]
struct Donor {
    num: u32,
    cap: u32,
    member: u32,
}

impl Ord for Donor {
    fn cmp(&self, other: &Self) -> Ordering {
        ratio_cmp(self.num, self.cap, other.num, other.cap).then(other.member.cmp(&self.member))
    }
}

impl PartialOrd for Donor {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Donor {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Donor {}

/// A member's load after receiving one more task, `(count + 1) / cap`, for a
/// min-heap (`Reverse<Receiver>`): least loaded first, then lowest index.
#[derive(Clone, Copy, Debug)]
struct Receiver {
    num: u32,
    cap: u32,
    member: u32,
}

impl Ord for Receiver {
    fn cmp(&self, other: &Self) -> Ordering {
        ratio_cmp(self.num, self.cap, other.num, other.cap).then(self.member.cmp(&other.member))
    }
}

impl PartialOrd for Receiver {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for Receiver {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Receiver {}

/// The members of one subscription class, least loaded (after taking one
/// more task) first.
///
/// A binary heap costs ~70 ns per pick in a class of thousands. When all
/// members have the same capacity and counts within one of each other, a
/// queue in (count, index) order stays in that order by rotation: the front
/// takes a task and goes to the back, behind the members already one ahead.
/// Placing many tasks reaches that state quickly, so the heap turns into a
/// queue as soon as it does.
struct ClassQueue {
    heap: BinaryHeap<Reverse<Receiver>>,
    queue: VecDeque<Receiver>,
    same_capacity: bool,
    max_num: u32,
}

impl ClassQueue {
    fn new(members: Vec<Receiver>) -> Self {
        debug_assert!(!members.is_empty());
        let same_capacity = members.iter().all(|r| r.cap == members[0].cap);
        let max_num = members.iter().map(|r| r.num).max().unwrap_or(0);
        let mut class = ClassQueue {
            heap: members.into_iter().map(Reverse).collect(),
            queue: VecDeque::new(),
            same_capacity,
            max_num,
        };
        class.maybe_rotate();
        class
    }

    fn front(&self) -> Receiver {
        match self.queue.front() {
            Some(&r) => r,
            None => self.heap.peek().expect("classes are not empty").0,
        }
    }

    /// The least-loaded member, counted as holding one more task.
    fn take_front(&mut self) -> u32 {
        if let Some(mut r) = self.queue.pop_front() {
            r.num += 1;
            self.queue.push_back(r);
            return r.member;
        }
        let mut top = self.heap.peek_mut().expect("classes are not empty");
        let m = top.0.member;
        top.0.num += 1;
        self.max_num = self.max_num.max(top.0.num);
        drop(top);
        self.maybe_rotate();
        m
    }

    fn maybe_rotate(&mut self) {
        let min_num = self.heap.peek().expect("classes are not empty").0.num;
        if self.same_capacity && self.max_num <= min_num + 1 {
            let mut sorted: Vec<Receiver> = std::mem::take(&mut self.heap)
                .into_iter()
                .map(|r| r.0)
                .collect();
            sorted.sort_unstable();
            self.queue = sorted.into();
        }
    }
}

/// End of a member's task list.
const NIL: u32 = u32::MAX;

struct Balancer<'a> {
    input: &'a GroupInput,
    offsets: Vec<u32>,
    capacity: Vec<u32>,
    /// Subscribers of topic `t` of a mixed component:
    /// `subs[sub_start[t]..sub_start[t + 1]]`, ascending.
    sub_start: Vec<u32>,
    subs: Vec<u32>,
    /// Component of every member (`NIL` for a member subscribed to nothing).
    member_comp: Vec<u32>,
    /// Whether every member of the component subscribes to all its topics.
    comp_uniform: Vec<bool>,
    /// Topics of component `c`: `comp_topics[comp_topic_start[c]..]`, ascending;
    /// likewise members.
    comp_topic_start: Vec<u32>,
    comp_topics: Vec<u32>,
    comp_member_start: Vec<u32>,
    comp_members: Vec<u32>,
    /// The answer being built.
    owner: Vec<u32>,
    /// Tasks assigned to each member so far.
    count: Vec<u32>,
    /// Scratch per member, kept all-zero / all-false between uses.
    scratch: Vec<u32>,
    flag: Vec<bool>,
    /// Mixed components only (allocated on first use): each member's tasks
    /// as a singly linked list through `next`, so a donor finds a task of a
    /// given topic without a vector per member.
    head: Vec<u32>,
    next: Vec<u32>,
}

impl<'a> Balancer<'a> {
    fn new(input: &'a GroupInput) -> Self {
        let offsets = input.topic_offsets();
        let task_count = *offsets.last().unwrap_or(&0) as usize;
        let topic_count = input.topics.len();
        let member_count = input.members.len();
        let capacity: Vec<u32> = input.members.iter().map(|m| m.capacity.max(1)).collect();

        // Union-find over topics, always linking to the smaller root so that
        // a component's root is its lowest topic. Only the subscription sets
        // members use matter, each once: members sharing a set (the common
        // case) add nothing new.
        let mut parent: Vec<u32> = (0..topic_count as u32).collect();
        let mut set_used = vec![false; input.subscriptions.len()];
        for member in &input.members {
            set_used[member.subscription as usize] = true;
        }
        let used_sets = input
            .subscriptions
            .iter()
            .zip(&set_used)
            .filter(|(_, used)| **used);
        for (topics, _) in used_sets {
            if let Some((&first, rest)) = topics.split_first() {
                for &t in rest {
                    let (a, b) = (find(&mut parent, first), find(&mut parent, t));
                    if a != b {
                        parent[a.max(b) as usize] = a.min(b);
                    }
                }
            }
        }
        let mut topic_comp = vec![NIL; topic_count];
        let mut comp_count = 0u32;
        for t in 0..topic_count as u32 {
            let root = find(&mut parent, t);
            if root == t {
                topic_comp[t as usize] = comp_count;
                comp_count += 1;
            } else {
                topic_comp[t as usize] = topic_comp[root as usize];
            }
        }
        let member_comp: Vec<u32> = input
            .members
            .iter()
            .map(|m| {
                input
                    .topics_of(m)
                    .first()
                    .map_or(NIL, |&t| topic_comp[t as usize])
            })
            .collect();
        let (comp_topic_start, comp_topics) = group_by(comp_count, &topic_comp);
        let (comp_member_start, comp_members) = group_by(comp_count, &member_comp);
        let mut comp_uniform = vec![true; comp_count as usize];
        for (member, &c) in input.members.iter().zip(&member_comp) {
            if c != NIL {
                let topics_in_comp =
                    comp_topic_start[c as usize + 1] - comp_topic_start[c as usize];
                comp_uniform[c as usize] &= input.topics_of(member).len() as u32 == topics_in_comp;
            }
        }

        // Subscriber lists, needed by mixed components only: a uniform
        // component of 10,000 members × 100 topics would spend more time
        // building them than balancing.
        let in_mixed = |m: usize| member_comp[m] != NIL && !comp_uniform[member_comp[m] as usize];
        let mut sub_start = vec![0u32; topic_count + 1];
        for (m, member) in input.members.iter().enumerate() {
            if in_mixed(m) {
                for &t in input.topics_of(member) {
                    sub_start[t as usize + 1] += 1;
                }
            }
        }
        for t in 0..topic_count {
            sub_start[t + 1] += sub_start[t];
        }
        let mut fill = sub_start.clone();
        let mut subs = vec![0u32; sub_start[topic_count] as usize];
        for (m, member) in input.members.iter().enumerate() {
            if in_mixed(m) {
                for &t in input.topics_of(member) {
                    subs[fill[t as usize] as usize] = m as u32;
                    fill[t as usize] += 1;
                }
            }
        }

        Balancer {
            input,
            offsets,
            capacity,
            sub_start,
            subs,
            member_comp,
            comp_uniform,
            comp_topic_start,
            comp_topics,
            comp_member_start,
            comp_members,
            owner: vec![NO_MEMBER; task_count],
            count: vec![0; member_count],
            scratch: vec![0; member_count],
            flag: vec![false; member_count],
            head: Vec::new(),
            next: Vec::new(),
        }
    }

    fn subscribers(&self, topic: u32) -> &[u32] {
        &self.subs
            [self.sub_start[topic as usize] as usize..self.sub_start[topic as usize + 1] as usize]
    }

    fn topic_tasks(&self, topic: u32) -> std::ops::Range<u32> {
        self.offsets[topic as usize]..self.offsets[topic as usize + 1]
    }

    fn run(&mut self) {
        for comp in 0..self.comp_topic_start.len() - 1 {
            let topics = self.comp_topics
                [self.comp_topic_start[comp] as usize..self.comp_topic_start[comp + 1] as usize]
                .to_vec();
            let members = self.comp_members
                [self.comp_member_start[comp] as usize..self.comp_member_start[comp + 1] as usize]
                .to_vec();
            if members.is_empty() {
                // Topics nobody subscribes to: their tasks stay NO_MEMBER.
                continue;
            }
            if self.comp_uniform[comp] {
                self.balance_uniform(comp as u32, &topics, &members);
            } else {
                self.balance_mixed(&topics, &members);
            }
        }
    }

    /// Exact weighted quotas; every member keeps its current tasks up to its
    /// quota and the surplus goes to members under quota.
    fn balance_uniform(&mut self, comp: u32, topics: &[u32], members: &[u32]) {
        let input = self.input;
        let member_comp = &self.member_comp[..];
        // Whether current owner `o` is a member of this component; `get`
        // also rejects NO_MEMBER and stale indices with one check.
        let in_comp = |o: u32| member_comp.get(o as usize) == Some(&comp);
        let held = &mut self.scratch[..];
        let mut task_count = 0u64;
        for &t in topics {
            let range = self.offsets[t as usize] as usize..self.offsets[t as usize + 1] as usize;
            task_count += range.len() as u64;
            for &o in &input.active_owner[range] {
                if in_comp(o) {
                    held[o as usize] += 1;
                }
            }
        }
        let total_capacity: u64 = members
            .iter()
            .map(|&m| u64::from(self.capacity[m as usize]))
            .sum();
        let mut quota: Vec<u32> = members
            .iter()
            .map(|&m| (task_count * u64::from(self.capacity[m as usize]) / total_capacity) as u32)
            .collect();
        let mut remainder = task_count - quota.iter().map(|&q| u64::from(q)).sum::<u64>();
        debug_assert!(remainder < members.len() as u64);
        // Only a member with a fractional share may round up, so every count
        // is strictly within one of its share. The slots go first to such
        // members already holding more than their floor quota (each slot
        // saves a move, and a settled group is a fixed point), then to
        // those whose load after rounding up is lowest (the highest-averages
        // order, which avoids loads a single move could improve), then by
        // lower index.
        let fractional = |i: usize| {
            !(task_count * u64::from(self.capacity[members[i] as usize]))
                .is_multiple_of(total_capacity)
        };
        let mut has_slot = vec![false; members.len()];
        for (i, &m) in members.iter().enumerate() {
            if remainder == 0 {
                break;
            }
            if held[m as usize] > quota[i] && fractional(i) {
                quota[i] += 1;
                has_slot[i] = true;
                remainder -= 1;
            }
        }
        if remainder > 0 {
            let mut rest: Vec<usize> = (0..members.len())
                .filter(|&i| !has_slot[i] && fractional(i))
                .collect();
            let same_capacity = members
                .iter()
                .all(|&m| self.capacity[m as usize] == self.capacity[members[0] as usize]);
            if !same_capacity {
                rest.sort_by(|&i, &j| {
                    let (ci, cj) = (
                        self.capacity[members[i] as usize],
                        self.capacity[members[j] as usize],
                    );
                    ratio_cmp(quota[i] + 1, ci, quota[j] + 1, cj).then(i.cmp(&j))
                });
            }
            debug_assert!(rest.len() as u64 >= remainder);
            for &i in rest.iter().take(remainder as usize) {
                quota[i] += 1;
            }
        }
        for &m in members {
            held[m as usize] = 0;
        }

        // Quota per member index for the task walk. The walk is the hot
        // loop (every task of the component): it works on local slices so
        // that the compiler keeps their bounds in registers, which matters
        // most inside wasm.
        let quota_of = &mut self.scratch[..];
        for (i, &m) in members.iter().enumerate() {
            quota_of[m as usize] = quota[i];
        }
        let owner = &mut self.owner[..];
        let count = &mut self.count[..];
        let mut surplus = vec![0u32; task_count as usize];
        let mut surplus_len = 0;
        for &t in topics {
            let first = self.offsets[t as usize];
            let range = first as usize..self.offsets[t as usize + 1] as usize;
            surplus_len += keep_within_quota(
                Walk {
                    first_task: first,
                    current: &input.active_owner[range.clone()],
                    member_comp,
                    comp,
                },
                &mut owner[range],
                count,
                quota_of,
                &mut surplus[surplus_len..],
            );
        }
        hand_out(&surplus[..surplus_len], members, owner, count, quota_of);
    }

    /// Keep valid owners, place unowned tasks greedily, then apply improving
    /// moves until none is left.
    fn balance_mixed(&mut self, topics: &[u32], members: &[u32]) {
        let input = self.input;
        let member_count = input.members.len() as u32;
        if self.next.is_empty() {
            self.head = vec![NIL; input.members.len()];
            self.next = vec![NIL; self.owner.len()];
        }

        for &t in topics {
            let subs = self.sub_start[t as usize] as usize..self.sub_start[t as usize + 1] as usize;
            for &m in &self.subs[subs.clone()] {
                self.flag[m as usize] = true;
            }
            for task in self.topic_tasks(t) {
                let o = input.active_owner[task as usize];
                if o < member_count && self.flag[o as usize] {
                    self.give(task, o);
                }
            }
            for &m in &self.subs[subs] {
                self.flag[m as usize] = false;
            }
        }

        let mut order = topics.to_vec();
        order.sort_by_key(|&t| {
            (
                self.sub_start[t as usize + 1] - self.sub_start[t as usize],
                t,
            )
        });
        if !self.place_interleaved(&order, members) {
            self.place_topic_by_topic(&order);
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

    /// Places unowned tasks in rounds, one task of every topic per round,
    /// each to the subscriber that is least loaded after taking it.
    /// Interleaving keeps every subscription class growing at the same pace;
    /// placing whole topics one after the other loads the members of the
    /// topics placed first and leaves the rest to the repair moves (27,000
    /// of them for 5,000 members in 3 overlapping classes). Within a round,
    /// topics with fewer subscribers choose first: they have fewer options.
    ///
    /// Members with the same subscriptions share one heap, so no heap key
    /// goes stale and a task looks at one heap top per class subscribing to
    /// its topic. Returns false, placing nothing, when that would cost more
    /// than placing topic by topic (many distinct subscription sets).
    fn place_interleaved(&mut self, order: &[u32], members: &[u32]) -> bool {
        let input = self.input;
        let unowned: u64 = order
            .iter()
            .map(|&t| {
                let range = self.topic_tasks(t);
                self.owner[range.start as usize..range.end as usize]
                    .iter()
                    .filter(|&&o| o == NO_MEMBER)
                    .count() as u64
            })
            .sum();
        if unowned == 0 {
            return true;
        }
        let mut by_topics = members.to_vec();
        // Classes are members with equal subscriptions, ordered by their
        // topic lists; sets are distinct, so equal sets have equal indices
        // and only different sets need their lists compared.
        let set_of = |m: u32| input.members[m as usize].subscription;
        by_topics.sort_by(|&a, &b| {
            let (sa, sb) = (set_of(a), set_of(b));
            if sa == sb {
                a.cmp(&b)
            } else {
                input.subscriptions[sa as usize].cmp(&input.subscriptions[sb as usize])
            }
        });
        let mut classes: Vec<ClassQueue> = Vec::new();
        let mut class_topics: Vec<&[u32]> = Vec::new();
        let mut class_members = Vec::new();
        for (i, &m) in by_topics.iter().enumerate() {
            let topics = input.subscriptions[set_of(m) as usize].as_slice();
            class_members.push(self.receiver(m));
            let class_ends = by_topics.get(i + 1).is_none_or(|&n| set_of(n) != set_of(m));
            if class_ends {
                class_topics.push(topics);
                classes.push(ClassQueue::new(std::mem::take(&mut class_members)));
            }
        }
        let mut topic_classes: Vec<Vec<u32>> = vec![Vec::new(); self.offsets.len() - 1];
        for (c, topics) in class_topics.iter().enumerate() {
            for &t in *topics {
                topic_classes[t as usize].push(c as u32);
            }
        }
        let lookups: u64 = order
            .iter()
            .map(|&t| {
                topic_classes[t as usize].len() as u64
                    * u64::from(self.offsets[t as usize + 1] - self.offsets[t as usize])
            })
            .sum();
        let topic_by_topic_cost: u64 = order
            .iter()
            .map(|&t| u64::from(self.sub_start[t as usize + 1] - self.sub_start[t as usize]))
            .sum::<u64>()
            + unowned * 16;
        if lookups > topic_by_topic_cost {
            return false;
        }

        // (topic, next task to look at)
        let mut pending: Vec<(u32, u32)> = order
            .iter()
            .map(|&t| (t, self.offsets[t as usize]))
            .collect();
        while !pending.is_empty() {
            pending.retain_mut(|(t, cursor)| {
                let end = self.offsets[*t as usize + 1];
                while *cursor < end && self.owner[*cursor as usize] != NO_MEMBER {
                    *cursor += 1;
                }
                if *cursor == end {
                    return false;
                }
                let best = topic_classes[*t as usize]
                    .iter()
                    .map(|&c| c as usize)
                    .min_by_key(|&c| classes[c].front())
                    .expect("a component topic has subscribers");
                let m = classes[best].take_front();
                self.give(*cursor, m);
                *cursor += 1;
                true
            });
        }
        true
    }

    /// Places unowned tasks one topic at a time, each to the subscriber
    /// that is least loaded after taking it; O(S + P log S) per topic.
    fn place_topic_by_topic(&mut self, order: &[u32]) {
        for &t in order {
            let range = self.topic_tasks(t);
            if !self.owner[range.start as usize..range.end as usize].contains(&NO_MEMBER) {
                continue;
            }
            let mut heap: BinaryHeap<Reverse<Receiver>> = self
                .subscribers(t)
                .iter()
                .map(|&m| Reverse(self.receiver(m)))
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

    fn receiver(&self, m: u32) -> Receiver {
        Receiver {
            num: self.count[m as usize] + 1,
            cap: self.capacity[m as usize],
            member: m,
        }
    }

    fn donor(&self, m: u32) -> Donor {
        Donor {
            num: self.count[m as usize],
            cap: self.capacity[m as usize],
            member: m,
        }
    }

    /// Assigns `task` to `m` and links it into `m`'s task list.
    fn give(&mut self, task: u32, m: u32) {
        self.owner[task as usize] = m;
        self.count[m as usize] += 1;
        self.next[task as usize] = self.head[m as usize];
        self.head[m as usize] = task;
    }

    /// Unlinks and returns one of `m`'s tasks in `range`, preferring one
    /// that `m` did not hold before this run: moving it costs no
    /// stickiness.
    fn take(&mut self, m: u32, range: std::ops::Range<u32>) -> u32 {
        let mut found = (NIL, NIL);
        let (mut prev, mut task) = (NIL, self.head[m as usize]);
        while task != NIL {
            if range.contains(&task) {
                let fresh = self.input.active_owner[task as usize] != m;
                if found.1 == NIL || fresh {
                    found = (prev, task);
                }
                if fresh {
                    break;
                }
            }
            prev = task;
            task = self.next[task as usize];
        }
        let (prev, task) = found;
        debug_assert!(task != NIL, "donor {m} owns a task of the topic");
        let after = self.next[task as usize];
        if prev == NIL {
            self.head[m as usize] = after;
        } else {
            self.next[prev as usize] = after;
        }
        self.owner[task as usize] = NO_MEMBER;
        self.count[m as usize] -= 1;
        task
    }

    /// Applies improving moves of topic `t`'s tasks until none is left, and
    /// queues the other topics of every member whose load changed (only
    /// their loads decide whether those topics have a move now).
    fn settle_topic(&mut self, t: u32, queue: &mut VecDeque<u32>, queued: &mut [bool]) {
        let range = self.topic_tasks(t);
        let count = &self.count;
        let capacity = &self.capacity;
        let lightest = self
            .subscribers(t)
            .iter()
            .copied()
            .min_by(|&a, &b| {
                ratio_cmp(
                    count[a as usize] + 1,
                    capacity[a as usize],
                    count[b as usize] + 1,
                    capacity[b as usize],
                )
            })
            .expect("a component topic has subscribers");
        let mut heaviest = NIL;
        for task in range.clone() {
            let o = self.owner[task as usize];
            if heaviest == NIL
                || load_less(
                    count[heaviest as usize],
                    capacity[heaviest as usize],
                    count[o as usize],
                    capacity[o as usize],
                )
            {
                heaviest = o;
            }
        }
        if heaviest == NIL
            || !load_less(
                count[lightest as usize] + 1,
                capacity[lightest as usize],
                count[heaviest as usize],
                capacity[heaviest as usize],
            )
        {
            return;
        }

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
            .iter()
            .map(|&m| Reverse(self.receiver(m)))
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

/// The tasks of one topic in a uniform component's walk, with what says
/// whether their current owners belong to the component.
struct Walk<'a> {
    first_task: u32,
    current: &'a [u32],
    member_comp: &'a [u32],
    comp: u32,
}

/// Keeps each task of `walk` on its current owner while that owner is a
/// member of the component under its quota; writes the other tasks to the
/// front of `surplus`, in task order, and returns how many. Its own small
/// function: inlined into the whole balancer, the loop's few values did not
/// stay in registers in wasm (Cranelift spilled them on every task).
#[inline(never)]
fn keep_within_quota(
    walk: Walk,
    owner: &mut [u32],
    count: &mut [u32],
    quota_of: &[u32],
    surplus: &mut [u32],
) -> usize {
    let member_count = count.len();
    let (quota_of, member_comp) = (&quota_of[..member_count], &walk.member_comp[..member_count]);
    let owner = &mut owner[..walk.current.len()];
    let mut kept_out = 0;
    for (i, &o) in walk.current.iter().enumerate() {
        let m = o as usize;
        if m < member_count && member_comp[m] == walk.comp && count[m] < quota_of[m] {
            owner[i] = o;
            count[m] += 1;
        } else {
            surplus[kept_out] = walk.first_task + i as u32;
            kept_out += 1;
        }
    }
    kept_out
}

/// Members under quota take the `surplus` tasks in member order, each up to
/// its quota; every member's count ends at its quota and its `quota_of`
/// entry is cleared.
#[inline(never)]
fn hand_out(
    surplus: &[u32],
    members: &[u32],
    owner: &mut [u32],
    count: &mut [u32],
    quota_of: &mut [u32],
) {
    let mut next = 0;
    for &m in members {
        let m_index = m as usize;
        let missing = (quota_of[m_index] - count[m_index]) as usize;
        for &task in &surplus[next..next + missing] {
            owner[task as usize] = m;
        }
        next += missing;
        count[m_index] = quota_of[m_index];
        quota_of[m_index] = 0;
    }
    debug_assert_eq!(next, surplus.len(), "quotas sum to the task count");
}

fn find(parent: &mut [u32], mut x: u32) -> u32 {
    while parent[x as usize] != x {
        let grandparent = parent[parent[x as usize] as usize];
        parent[x as usize] = grandparent;
        x = grandparent;
    }
    x
}

/// Groups the indices `0..keys.len()` by key (`NIL` keys left out) into
/// CSR form: the indices with key `k` are `items[start[k]..start[k + 1]]`,
/// ascending.
fn group_by(key_count: u32, keys: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let mut start = vec![0u32; key_count as usize + 1];
    for &k in keys {
        if k != NIL {
            start[k as usize + 1] += 1;
        }
    }
    for k in 0..key_count as usize {
        start[k + 1] += start[k];
    }
    let mut fill = start.clone();
    let mut items = vec![0u32; start[key_count as usize] as usize];
    for (i, &k) in keys.iter().enumerate() {
        if k != NIL {
            items[fill[k as usize] as usize] = i as u32;
            fill[k as usize] += 1;
        }
    }
    (start, items)
}
