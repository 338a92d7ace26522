//! The load balancer's state for one call: every task's load estimate and
//! target owner, every member's load and band, and each donor's movable
//! tasks sorted by load. It owns the moves and the lookups the phases
//! make; the phases (`place`, `greedy`, `exact`) decide which moves.

use std::collections::BTreeSet;

use assignd_guest_sdk::{GroupInput, NO_MEMBER};

/// A task in a donor's sorted set: its load's bits (a non-negative f64's
/// bits order as the number does) and its index.
type Entry = (u64, u32);

pub(super) fn key(load: f64) -> u64 {
    // `+ 0.0` turns -0.0 into 0.0; negative numbers never get here.
    (load.max(0.0) + 0.0).to_bits()
}

fn load_of(entry: Entry) -> f64 {
    f64::from_bits(entry.0)
}

/// One component being balanced: its members and topics, and whether
/// its members subscribe to different topic sets.
pub(super) struct Comp<'c> {
    pub members: &'c [u32],
    pub topics: &'c [u32],
    pub mixed: bool,
}

pub(super) struct State<'a> {
    pub input: &'a GroupInput,
    pub task_topic: Vec<u32>,
    /// Each task's load: its known load, or the mean known load.
    pub load: Vec<f64>,
    /// Whether a balancing move may take the task: its load is known and
    /// it is not a hot task kept on a member of its own.
    pub movable: Vec<bool>,
    pub owner: Vec<u32>,
    pub weight: Vec<f64>,
    /// Each member's load under `owner`.
    pub held: Vec<f64>,
    /// The member's share of its component's load by weight.
    pub share: Vec<f64>,
    /// The band the member's load must end in, and the inner band moves
    /// aim at when that costs no extra move.
    pub upper: Vec<f64>,
    pub lower: Vec<f64>,
    pub inner_upper: Vec<f64>,
    pub inner_lower: Vec<f64>,
    /// Per member: loads closer than this compare equal (float noise).
    pub tol: Vec<f64>,
    /// Per member: whether its tasks are bucketed by topic (mixed
    /// components) or kept in one bucket.
    mixed: Vec<bool>,
    /// Per member, per bucket, its movable tasks by load; built on the
    /// member's first use as a donor.
    sets: Vec<Vec<BTreeSet<Entry>>>,
    built: Vec<bool>,
    /// Tasks each member held when the sets began, and those it was given
    /// since, while its sets are not built.
    first_start: Vec<u32>,
    first_tasks: Vec<u32>,
    arrivals: Vec<Vec<u32>>,
}

impl<'a> State<'a> {
    pub(super) fn new(input: &'a GroupInput, load: Vec<f64>, movable: Vec<bool>) -> Self {
        let member_count = input.members.len();
        let offsets = input.topic_offsets();
        let mut task_topic = vec![0u32; load.len()];
        for t in 0..input.topics.len() {
            for task in offsets[t]..offsets[t + 1] {
                task_topic[task as usize] = t as u32;
            }
        }
        let zeros = vec![0.0; member_count];
        State {
            input,
            task_topic,
            load,
            movable,
            owner: vec![NO_MEMBER; offsets[offsets.len() - 1] as usize],
            weight: zeros.clone(),
            held: zeros.clone(),
            share: zeros.clone(),
            upper: zeros.clone(),
            lower: zeros.clone(),
            inner_upper: zeros.clone(),
            inner_lower: zeros.clone(),
            tol: zeros,
            mixed: vec![false; member_count],
            sets: vec![Vec::new(); member_count],
            built: vec![false; member_count],
            first_start: Vec::new(),
            first_tasks: Vec::new(),
            arrivals: vec![Vec::new(); member_count],
        }
    }

    /// Whether `m` subscribes to topic `t`.
    pub(super) fn subscribes(&self, m: u32, t: u32) -> bool {
        self.input.subscribes(&self.input.members[m as usize], t)
    }

    /// Gives `task` to `m` (from nobody or from its owner), keeping loads
    /// and sets current.
    pub(super) fn shift(&mut self, task: u32, m: u32) {
        let from = self.owner[task as usize];
        let load = self.load[task as usize];
        if from != NO_MEMBER {
            self.held[from as usize] -= load;
            if self.built[from as usize] && self.movable[task as usize] {
                let b = self.bucket(from, task);
                self.sets[from as usize][b].remove(&(key(load), task));
            }
        }
        self.owner[task as usize] = m;
        self.held[m as usize] += load;
        if self.movable[task as usize] {
            if self.built[m as usize] {
                let b = self.bucket(m, task);
                self.sets[m as usize][b].insert((key(load), task));
            } else if !self.first_start.is_empty() {
                self.arrivals[m as usize].push(task);
            }
        }
    }

    /// Keeps `comp`'s members' tasks in one bucket per topic if it is
    /// mixed (a receiver must subscribe to the task's topic), else in one.
    pub(super) fn set_layout(&mut self, comp: &Comp) {
        for &m in comp.members {
            self.mixed[m as usize] = comp.mixed;
        }
    }

    /// Takes a snapshot of every member's tasks: the sets are built from it
    /// (and from later arrivals) on a member's first use as a donor.
    pub(super) fn begin_sets(&mut self) {
        let member_count = self.input.members.len();
        let mut start = vec![0u32; member_count + 1];
        for &o in &self.owner {
            if o != NO_MEMBER {
                start[o as usize + 1] += 1;
            }
        }
        for m in 0..member_count {
            start[m + 1] += start[m];
        }
        let mut fill = start.clone();
        let mut tasks = vec![0u32; start[member_count] as usize];
        for (task, &o) in self.owner.iter().enumerate() {
            if o != NO_MEMBER {
                tasks[fill[o as usize] as usize] = task as u32;
                fill[o as usize] += 1;
            }
        }
        self.first_start = start;
        self.first_tasks = tasks;
    }

    /// How many buckets `m`'s tasks are kept in.
    pub(super) fn buckets(&self, m: u32) -> usize {
        if self.mixed[m as usize] {
            self.input.topics_of(&self.input.members[m as usize]).len()
        } else {
            1
        }
    }

    /// The topic of `m`'s bucket `b` (any topic of the component when it is
    /// not mixed: `None`).
    pub(super) fn bucket_topic(&self, m: u32, b: usize) -> Option<u32> {
        self.mixed[m as usize].then(|| self.input.topics_of(&self.input.members[m as usize])[b])
    }

    /// The bucket of `m`'s that holds `task`.
    pub(super) fn bucket(&self, m: u32, task: u32) -> usize {
        if !self.mixed[m as usize] {
            return 0;
        }
        let topic = self.task_topic[task as usize];
        self.input
            .topics_of(&self.input.members[m as usize])
            .binary_search(&topic)
            .expect("a member holds only tasks of its topics")
    }

    /// The bucket of `m` for `topic` (`None` when `m` does not subscribe).
    pub(super) fn bucket_of_topic(&self, m: u32, topic: Option<u32>) -> Option<usize> {
        match topic {
            None => Some(0),
            Some(t) if !self.mixed[m as usize] => self.subscribes(m, t).then_some(0),
            Some(t) => self
                .input
                .topics_of(&self.input.members[m as usize])
                .binary_search(&t)
                .ok(),
        }
    }

    fn ensure_sets(&mut self, m: u32) {
        if self.built[m as usize] {
            return;
        }
        let mut sets = vec![BTreeSet::new(); self.buckets(m)];
        let range =
            self.first_start[m as usize] as usize..self.first_start[m as usize + 1] as usize;
        let arrivals = std::mem::take(&mut self.arrivals[m as usize]);
        for &task in self.first_tasks[range].iter().chain(&arrivals) {
            if self.owner[task as usize] == m && self.movable[task as usize] {
                let b = self.bucket(m, task);
                sets[b].insert((key(self.load[task as usize]), task));
            }
        }
        self.sets[m as usize] = sets;
        self.built[m as usize] = true;
    }

    /// `m`'s lightest movable task in bucket `b` with a load in `lo..=hi`.
    pub(super) fn smallest_in(&mut self, m: u32, b: usize, lo: f64, hi: f64) -> Option<(f64, u32)> {
        if hi < lo || hi <= 0.0 {
            return None;
        }
        self.ensure_sets(m);
        let set = &self.sets[m as usize][b];
        set.range((key(lo), 0)..=(key(hi), u32::MAX))
            .next()
            .map(|&e| (load_of(e), e.1))
    }

    /// `m`'s heaviest movable task in bucket `b` with a load at most `hi`
    /// and more than `above`.
    pub(super) fn largest_upto(
        &mut self,
        m: u32,
        b: usize,
        above: f64,
        hi: f64,
    ) -> Option<(f64, u32)> {
        if hi <= above {
            return None;
        }
        self.ensure_sets(m);
        let set = &self.sets[m as usize][b];
        set.range(..=(key(hi), u32::MAX))
            .next_back()
            .filter(|&&e| load_of(e) > above)
            .map(|&e| (load_of(e), e.1))
    }

    /// The movable task of `m`'s bucket `b` nearest to `target` from
    /// below and from above.
    pub(super) fn around(&mut self, m: u32, b: usize, target: f64) -> [Option<(f64, u32)>; 2] {
        self.ensure_sets(m);
        let set = &self.sets[m as usize][b];
        let k = key(target);
        let below = set.range(..(k, 0)).next_back();
        let above = set.range((k, 0)..).next();
        [below, above].map(|e| e.map(|&e| (load_of(e), e.1)))
    }

    pub(super) fn over(&self, m: u32) -> bool {
        self.held[m as usize] > self.upper[m as usize] + self.tol[m as usize]
    }

    pub(super) fn under(&self, m: u32) -> bool {
        self.held[m as usize] < self.lower[m as usize] - self.tol[m as usize]
    }

    pub(super) fn in_band(&self, members: &[u32]) -> bool {
        members.iter().all(|&m| !self.over(m) && !self.under(m))
    }
}
