//! The balancer's state for one call: the input split into components,
//! the members of mixed components grouped by subscription set, the answer
//! being built with each member's count and task list. It owns the
//! component split and the task lists; [`uniform`] and [`mixed`] solve
//! the components, [`mixed`] with [`placement`] and its
//! [`class_queue`]s.

mod class_queue;
mod mixed;
mod placement;
mod uniform;

use assignd_guest_sdk::{GroupInput, NO_MEMBER};

use crate::loads::{Donor, Receiver};

/// End of a member's task list; also "no component".
pub(crate) const NIL: u32 = u32::MAX;

pub(crate) struct Balancer<'a> {
    input: &'a GroupInput,
    offsets: Vec<u32>,
    capacity: Vec<u32>,
    /// Each member's subscription set (an index into `input.subscriptions`).
    member_set: Vec<u32>,
    /// The sets members of mixed components use, each a *class* of members
    /// with equal subscriptions (the SDK's input check makes sets distinct,
    /// so equal subscriptions are one set): the members of set `s` are
    /// `set_members[set_member_start[s]..set_member_start[s + 1]]` and the
    /// sets subscribing to topic `t` are
    /// `topic_sets[topic_set_start[t]..topic_set_start[t + 1]]`, ascending.
    set_member_start: Vec<u32>,
    set_members: Vec<u32>,
    topic_set_start: Vec<u32>,
    topic_sets: Vec<u32>,
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
    /// Scratch per member, kept all-zero between uses.
    scratch: Vec<u32>,
    /// Mixed components only (allocated on first use): each member's tasks
    /// as a singly linked list through `next`, so a donor finds a task of a
    /// given topic without a vector per member.
    head: Vec<u32>,
    next: Vec<u32>,
    /// Mixed components only: per set, bounds on its members' loads while
    /// moves settle (see `mixed`).
    set_loads: Vec<mixed::SetLoads>,
}

impl<'a> Balancer<'a> {
    pub(crate) fn new(input: &'a GroupInput) -> Self {
        let offsets = input.topic_offsets();
        let task_count = *offsets.last().unwrap_or(&0) as usize;
        let member_count = input.members.len();
        let capacity: Vec<u32> = input.members.iter().map(|m| m.capacity.max(1)).collect();
        let member_set: Vec<u32> = input.members.iter().map(|m| m.subscription).collect();
        let Components {
            set_used,
            topic_comp,
            member_comp,
            comp_uniform,
            comp_topic_start,
            comp_topics,
            comp_member_start,
            comp_members,
        } = Components::new(input);
        let set_comp = |s: u32| {
            let topics = &input.subscriptions[s as usize];
            topics.first().map_or(NIL, |&t| topic_comp[t as usize])
        };

        // Classes, needed by mixed components only: a uniform component of
        // 10,000 members × 100 topics would spend more time building
        // subscriber lists than balancing.
        let set_mixed: Vec<bool> = (0..input.subscriptions.len() as u32)
            .map(|s| {
                let c = set_comp(s);
                set_used[s as usize] && c != NIL && !comp_uniform[c as usize]
            })
            .collect();
        let mixed_set_of: Vec<u32> = member_set
            .iter()
            .map(|&s| if set_mixed[s as usize] { s } else { NIL })
            .collect();
        let (set_member_start, set_members) =
            group_by(input.subscriptions.len() as u32, &mixed_set_of);
        let (topic_set_start, topic_sets) = topic_sets(input, &set_mixed);

        Balancer {
            input,
            offsets,
            capacity,
            member_set,
            set_member_start,
            set_members,
            topic_set_start,
            topic_sets,
            member_comp,
            comp_uniform,
            comp_topic_start,
            comp_topics,
            comp_member_start,
            comp_members,
            owner: vec![NO_MEMBER; task_count],
            count: vec![0; member_count],
            scratch: vec![0; member_count],
            head: Vec::new(),
            next: Vec::new(),
            set_loads: Vec::new(),
        }
    }

    /// Balances every component; the target owner of every task.
    pub(crate) fn run(mut self) -> Vec<u32> {
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
        self.owner
    }

    fn topic_tasks(&self, topic: u32) -> std::ops::Range<u32> {
        self.offsets[topic as usize]..self.offsets[topic as usize + 1]
    }

    /// The sets (classes) of a mixed component subscribing to `topic`.
    fn sets_of_topic(&self, topic: u32) -> &[u32] {
        &self.topic_sets[self.topic_set_start[topic as usize] as usize
            ..self.topic_set_start[topic as usize + 1] as usize]
    }

    /// The members of a mixed component's set `set`, ascending.
    fn members_of_set(&self, set: u32) -> &[u32] {
        &self.set_members[self.set_member_start[set as usize] as usize
            ..self.set_member_start[set as usize + 1] as usize]
    }

    /// How many members of a mixed component subscribe to `topic`.
    fn subscriber_count(&self, topic: u32) -> u32 {
        self.sets_of_topic(topic)
            .iter()
            .map(|&s| self.set_member_start[s as usize + 1] - self.set_member_start[s as usize])
            .sum()
    }

    /// Every member of a mixed component subscribing to `topic`, set by set.
    fn subscribers(&self, topic: u32) -> impl Iterator<Item = u32> + '_ {
        self.sets_of_topic(topic)
            .iter()
            .flat_map(|&s| self.members_of_set(s).iter().copied())
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
        TaskLists {
            owner: &mut self.owner,
            count: &mut self.count,
            head: &mut self.head,
            next: &mut self.next,
        }
        .give(task, m);
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
}

/// The input split into components: topics linked by shared subscribers,
/// with their members; shared by the count and the load balancers.
pub(crate) struct Components {
    /// Whether some member uses subscription set `s`.
    pub set_used: Vec<bool>,
    /// Component of every topic.
    pub topic_comp: Vec<u32>,
    /// Component of every member (`NIL` for a member subscribed to nothing).
    pub member_comp: Vec<u32>,
    /// Whether every member of the component subscribes to all its topics.
    pub comp_uniform: Vec<bool>,
    /// Topics of component `c`: `comp_topics[comp_topic_start[c]..]`,
    /// ascending; likewise members.
    pub comp_topic_start: Vec<u32>,
    pub comp_topics: Vec<u32>,
    pub comp_member_start: Vec<u32>,
    pub comp_members: Vec<u32>,
}

impl Components {
    pub(crate) fn new(input: &GroupInput) -> Self {
        let mut set_used = vec![false; input.subscriptions.len()];
        for m in &input.members {
            set_used[m.subscription as usize] = true;
        }
        let (topic_comp, comp_count) = topic_components(input, &set_used);
        let set_comp = |s: u32| {
            let topics = &input.subscriptions[s as usize];
            topics.first().map_or(NIL, |&t| topic_comp[t as usize])
        };
        let member_comp: Vec<u32> = input
            .members
            .iter()
            .map(|m| set_comp(m.subscription))
            .collect();
        let (comp_topic_start, comp_topics) = group_by(comp_count, &topic_comp);
        let (comp_member_start, comp_members) = group_by(comp_count, &member_comp);
        let mut comp_uniform = vec![true; comp_count as usize];
        for (s, topics) in input.subscriptions.iter().enumerate() {
            let c = set_comp(s as u32);
            if set_used[s] && c != NIL {
                let topics_in_comp =
                    comp_topic_start[c as usize + 1] - comp_topic_start[c as usize];
                comp_uniform[c as usize] &= topics.len() as u32 == topics_in_comp;
            }
        }
        Components {
            set_used,
            topic_comp,
            member_comp,
            comp_uniform,
            comp_topic_start,
            comp_topics,
            comp_member_start,
            comp_members,
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.comp_topic_start.len() - 1
    }

    pub(crate) fn topics(&self, c: usize) -> &[u32] {
        &self.comp_topics[self.comp_topic_start[c] as usize..self.comp_topic_start[c + 1] as usize]
    }

    pub(crate) fn members(&self, c: usize) -> &[u32] {
        &self.comp_members
            [self.comp_member_start[c] as usize..self.comp_member_start[c + 1] as usize]
    }
}

/// The answer and each member's task list, borrowed apart from the rest of
/// the balancer for a hot loop.
struct TaskLists<'a> {
    owner: &'a mut [u32],
    count: &'a mut [u32],
    head: &'a mut [u32],
    next: &'a mut [u32],
}

impl TaskLists<'_> {
    /// Assigns `task` to `m` and links it into `m`'s task list.
    #[inline]
    fn give(&mut self, task: u32, m: u32) {
        self.owner[task as usize] = m;
        self.count[m as usize] += 1;
        self.next[task as usize] = self.head[m as usize];
        self.head[m as usize] = task;
    }
}

/// The component of every topic (`0..`, numbered in order of each
/// component's lowest topic), and how many there are. Union-find over topics, always linking to
/// the smaller root so that a component's root is its lowest topic. Only
/// the subscription sets members use matter, each once: members sharing a
/// set (the common case) add nothing new.
fn topic_components(input: &GroupInput, set_used: &[bool]) -> (Vec<u32>, u32) {
    let topic_count = input.topics.len();
    let mut parent: Vec<u32> = (0..topic_count as u32).collect();
    let used_sets = input
        .subscriptions
        .iter()
        .zip(set_used)
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
    (topic_comp, comp_count)
}

/// The sets in `set_mixed` that subscribe to each topic, in CSR form
/// (`sets[start[t]..start[t + 1]]`, ascending).
fn topic_sets(input: &GroupInput, set_mixed: &[bool]) -> (Vec<u32>, Vec<u32>) {
    let topic_count = input.topics.len();
    let mixed_sets = || {
        input
            .subscriptions
            .iter()
            .enumerate()
            .filter(|&(s, _)| set_mixed[s])
    };
    let mut start = vec![0u32; topic_count + 1];
    for (_, topics) in mixed_sets() {
        for &t in topics {
            start[t as usize + 1] += 1;
        }
    }
    for t in 0..topic_count {
        start[t + 1] += start[t];
    }
    let mut fill = start.clone();
    let mut sets = vec![0u32; start[topic_count] as usize];
    for (s, topics) in mixed_sets() {
        for &t in topics {
            sets[fill[t as usize] as usize] = s as u32;
            fill[t as usize] += 1;
        }
    }
    (start, sets)
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
