//! One routing table as a router holds it: the host's body, when the
//! request that got it was sent, and an index built once per table so that
//! a lookup is a few array reads (per topic, each partition's owner,
//! the member it moves to, its learners and standbys), never a scan of the
//! task lists. It owns reading a table; fetching one is `watch`'s.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use assignd_wire::{RouteOwner, RoutesBody, TaskRanges, partition_for_key};

/// A partition's entry in an owner array when nobody holds that role.
const NOBODY: u32 = u32::MAX;

/// Where a key or a partition goes, as one table says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub topic: Arc<str>,
    pub partition: u32,
    /// The member processing the task now; `None`: nobody (send nowhere,
    /// or wait for the next table).
    pub owner: Option<Arc<RouteOwner>>,
    /// The member the task moves to, while it moves.
    pub moving_to: Option<Arc<RouteOwner>>,
    /// Members warming the task up to take it over.
    pub learners: Vec<Arc<RouteOwner>>,
    /// Members keeping hot copies of the task.
    pub standbys: Vec<Arc<RouteOwner>>,
    /// The epoch of the table that said so.
    pub epoch: u64,
    /// Whether the table was within its ownership bound at the lookup
    /// (docs/routing.md, "The ownership bound"): nobody else owned the task
    /// then.
    pub fresh: bool,
    /// The end of that bound: after it the answer is probably still right,
    /// but without the host's promise.
    pub fresh_until: Instant,
}

/// Why a table cannot route a key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The router has no table yet (see `Router::ready`).
    #[error("no routing table yet")]
    NoTable,
    /// The group has no such topic in this table.
    #[error("the group has no topic {0:?}")]
    UnknownTopic(String),
    /// The topic has fewer partitions.
    #[error("topic {topic:?} has {partitions} partitions, not a partition {partition}")]
    PartitionOutOfRange {
        topic: String,
        partition: u32,
        partitions: u32,
    },
}

/// One topic's partitions: indices into the table's members.
#[derive(Debug)]
struct TopicIndex {
    name: Arc<str>,
    owners: Vec<u32>,
    moving_to: Vec<u32>,
    /// Only the partitions that have some (most have none).
    learners: HashMap<u32, Vec<u32>>,
    standbys: HashMap<u32, Vec<u32>>,
}

/// The parts of a table that depend only on its epoch: the body and its
/// index, shared by every copy of the table the same epoch confirms.
#[derive(Debug)]
struct Indexed {
    body: RoutesBody,
    members: Vec<Arc<RouteOwner>>,
    topics: HashMap<String, TopicIndex>,
}

/// A routing table: what the host answered, when its request was sent (by
/// the monotonic clock), and how long the host said the request waited
/// before it read the table.
#[derive(Clone, Debug)]
pub struct RouteTable {
    indexed: Arc<Indexed>,
    sent_at: Instant,
    waited: Duration,
}

impl RouteTable {
    /// `body`, answered to a request sent at `sent_at` that waited
    /// `waited` at the host before the table was read (its
    /// `Assignd-Routes-Waited-Ms`), indexed.
    pub fn new(body: RoutesBody, sent_at: Instant, waited: Duration) -> Self {
        RouteTable {
            indexed: Arc::new(Indexed::new(body)),
            sent_at,
            waited,
        }
    }

    /// The same table, confirmed by an answer to a request sent at
    /// `sent_at` that waited `waited`: the later of the two bounds holds;
    /// the index is shared.
    pub(crate) fn confirmed(&self, sent_at: Instant, waited: Duration) -> Self {
        let mut confirmed = RouteTable {
            indexed: Arc::clone(&self.indexed),
            sent_at,
            waited,
        };
        if confirmed.read_at() <= self.read_at() {
            confirmed.sent_at = self.sent_at;
            confirmed.waited = self.waited;
        }
        confirmed
    }

    /// The host's answer as it came.
    pub fn body(&self) -> &RoutesBody {
        &self.indexed.body
    }

    pub fn epoch(&self) -> u64 {
        self.indexed.body.epoch
    }

    pub fn group(&self) -> &str {
        &self.indexed.body.group
    }

    /// When the request that got (or last confirmed) this table was sent.
    pub fn sent_at(&self) -> Instant {
        self.sent_at
    }

    /// How long that request waited at the host before the table was read.
    pub fn waited(&self) -> Duration {
        self.waited
    }

    /// No sooner than when the host read the table: the send time plus the
    /// wait the host reported. The promise counts from here.
    fn read_at(&self) -> Instant {
        self.sent_at + self.waited
    }

    /// The end of the ownership bound: the send time, plus how long the
    /// request waited at the host, plus `valid_ms`.
    pub fn fresh_until(&self) -> Instant {
        self.read_at() + Duration::from_millis(self.indexed.body.valid_ms)
    }

    /// Whether the table is within its ownership bound at `now`.
    pub fn is_fresh_at(&self, now: Instant) -> bool {
        now < self.fresh_until()
    }

    pub fn is_fresh(&self) -> bool {
        self.is_fresh_at(Instant::now())
    }

    /// How long ago the request that got (or last confirmed) it was sent.
    pub fn age(&self) -> Duration {
        self.sent_at.elapsed()
    }

    /// The partition count of `topic`, if the table has it.
    pub fn partitions(&self, topic: &str) -> Option<u32> {
        self.indexed.body.topics.get(topic).copied()
    }

    /// Where `key` of `topic` goes: its partition as Kafka's default
    /// partitioner picks it, then that partition's route.
    pub fn owner_of(&self, topic: &str, key: impl AsRef<[u8]>) -> Result<Route, RouteError> {
        self.owner_of_at(topic, key, Instant::now())
    }

    /// [`owner_of`](RouteTable::owner_of), its freshness judged at `now`.
    pub fn owner_of_at(
        &self,
        topic: &str,
        key: impl AsRef<[u8]>,
        now: Instant,
    ) -> Result<Route, RouteError> {
        let index = self.topic(topic)?;
        let partitions = index.owners.len() as u32;
        if partitions == 0 {
            return Err(RouteError::PartitionOutOfRange {
                topic: topic.to_owned(),
                partition: 0,
                partitions,
            });
        }
        let partition = partition_for_key(key.as_ref(), partitions);
        Ok(self.route(index, partition, now))
    }

    /// The route of one partition of `topic`.
    pub fn owner_of_partition(&self, topic: &str, partition: u32) -> Result<Route, RouteError> {
        self.owner_of_partition_at(topic, partition, Instant::now())
    }

    /// [`owner_of_partition`](RouteTable::owner_of_partition), its
    /// freshness judged at `now`.
    pub fn owner_of_partition_at(
        &self,
        topic: &str,
        partition: u32,
        now: Instant,
    ) -> Result<Route, RouteError> {
        let index = self.topic(topic)?;
        let partitions = index.owners.len() as u32;
        if partition >= partitions {
            return Err(RouteError::PartitionOutOfRange {
                topic: topic.to_owned(),
                partition,
                partitions,
            });
        }
        Ok(self.route(index, partition, now))
    }

    fn topic(&self, topic: &str) -> Result<&TopicIndex, RouteError> {
        self.indexed
            .topics
            .get(topic)
            .ok_or_else(|| RouteError::UnknownTopic(topic.to_owned()))
    }

    fn route(&self, index: &TopicIndex, partition: u32, now: Instant) -> Route {
        let members = &self.indexed.members;
        let member = |i: u32| (i != NOBODY).then(|| Arc::clone(&members[i as usize]));
        let all = |map: &HashMap<u32, Vec<u32>>| -> Vec<Arc<RouteOwner>> {
            map.get(&partition)
                .map(|found| found.iter().filter_map(|&i| member(i)).collect())
                .unwrap_or_default()
        };
        let slot = partition as usize;
        Route {
            topic: Arc::clone(&index.name),
            partition,
            owner: member(index.owners[slot]),
            moving_to: member(index.moving_to[slot]),
            learners: all(&index.learners),
            standbys: all(&index.standbys),
            epoch: self.epoch(),
            fresh: self.is_fresh_at(now),
            fresh_until: self.fresh_until(),
        }
    }
}

impl Indexed {
    fn new(body: RoutesBody) -> Self {
        let mut members = Members::new(&body);
        let mut topics: HashMap<String, TopicIndex> = body
            .topics
            .iter()
            .map(|(name, &partitions)| (name.clone(), TopicIndex::new(name, partitions)))
            .collect();
        for (id, tasks) in &body.active {
            let member = members.index(id);
            each_partition(&mut topics, tasks, |index, p| {
                index.owners[p as usize] = member;
            });
        }
        for moving in &body.moving {
            let to = moving.to.as_deref().map_or(NOBODY, |id| members.index(id));
            each_partition(&mut topics, &moving.tasks, |index, p| {
                index.moving_to[p as usize] = to;
            });
        }
        for (id, tasks) in &body.learner {
            let member = members.index(id);
            each_partition(&mut topics, tasks, |index, p| {
                index.learners.entry(p).or_default().push(member);
            });
        }
        for (id, tasks) in &body.standby {
            let member = members.index(id);
            each_partition(&mut topics, tasks, |index, p| {
                index.standbys.entry(p).or_default().push(member);
            });
        }
        Indexed {
            body,
            members: members.all,
            topics,
        }
    }
}

/// Calls `put` for every partition of `ranges` that the table's topics
/// have. A task past what `topics` says is dropped: no lookup reaches it.
fn each_partition(
    topics: &mut HashMap<String, TopicIndex>,
    ranges: &TaskRanges,
    mut put: impl FnMut(&mut TopicIndex, u32),
) {
    for range in &ranges.0 {
        let Some(index) = topics.get_mut(&range.topic) else {
            continue;
        };
        let Some(last) = (index.owners.len() as u32).checked_sub(1) else {
            continue;
        };
        for partition in range.first..=range.last.min(last) {
            put(index, partition);
        }
    }
}

/// The table's members, each once, by index.
struct Members {
    all: Vec<Arc<RouteOwner>>,
    by_id: HashMap<String, u32>,
}

impl Members {
    fn new(body: &RoutesBody) -> Self {
        let mut members = Members {
            all: Vec::with_capacity(body.members.len()),
            by_id: HashMap::with_capacity(body.members.len()),
        };
        for (id, member) in &body.members {
            members.add(RouteOwner {
                member_id: id.clone(),
                member_name: member.member_name.clone(),
                endpoint: member.endpoint.clone(),
                metadata: member.metadata.clone(),
            });
        }
        members
    }

    fn add(&mut self, owner: RouteOwner) -> u32 {
        let i = self.all.len() as u32;
        self.by_id.insert(owner.member_id.clone(), i);
        self.all.push(Arc::new(owner));
        i
    }

    /// The index of member `id`. One that a task list names but the member
    /// list does not (never from a host that keeps its word) still routes,
    /// without an endpoint.
    fn index(&mut self, id: &str) -> u32 {
        match self.by_id.get(id) {
            Some(&i) => i,
            None => self.add(RouteOwner {
                member_id: id.to_owned(),
                member_name: None,
                endpoint: None,
                metadata: Default::default(),
            }),
        }
    }
}

impl TopicIndex {
    fn new(name: &str, partitions: u32) -> Self {
        TopicIndex {
            name: Arc::from(name),
            owners: vec![NOBODY; partitions as usize],
            moving_to: vec![NOBODY; partitions as usize],
            learners: HashMap::new(),
            standbys: HashMap::new(),
        }
    }
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
