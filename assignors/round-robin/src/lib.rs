//! Kafka's `RoundRobinAssignor` as an assignd assignor.
//!
//! All tasks of subscribed topics are taken in (topic name, partition) order
//! and dealt to the members in Kafka's member order through one circular
//! iterator; for each task the iterator advances to the next member that
//! subscribes to the task's topic. So with two members and topics `t0`, `t1`
//! of three partitions each, `C0` gets `t0p0, t0p2, t1p1` and `C1` gets
//! `t0p1, t1p0, t1p2`. With identical subscriptions every member ends up
//! with the same number of tasks, give or take one, which a per-topic range
//! split cannot promise. It exists so that groups migrating from Kafka get
//! the assignment they already know.
//!
//! Member order follows Kafka's `MemberInfo.compareTo`: static members (with
//! a member `name`, Kafka's group instance id) come first, ordered by name;
//! dynamic members follow, ordered by member `id`. Strings (member names,
//! ids and topic names) compare by bytes (Unicode code points); Java compares
//! UTF-16 code units, which differs only between characters above U+FFFF and
//! those in U+E000..=U+FFFF.
//!
//! Like Kafka's assignor it is not sticky: it ignores the previous
//! assignment (and lags), ignores member `capacity` (Kafka has no weights)
//! and racks, and places no learners or standbys.
//!
//! Kafka advances the iterator one member at a time, which costs up to one
//! step per member for every task when few members subscribe to a topic
//! (5 * 10^9 steps at 10,000 members and 500,000 partitions). This version
//! gives the same answer in time linear in tasks plus subscriptions: within
//! one topic the iterator visits exactly that topic's subscribers in order,
//! so only the first subscriber at or after the iterator's position needs a
//! search (a binary search over the topic's subscriber ranks), and the rest
//! of the topic is dealt cyclically from there.

use assignd_guest_sdk::index::{kafka_member_order, subscriber_ranks_by_topic};
use assignd_guest_sdk::{AssignError, Assignment, Assignor, GroupInput, Info};

/// The round-robin assignor. See the crate documentation.
pub struct RoundRobin;

impl Assignor for RoundRobin {
    fn info() -> Info {
        Info::new(
            "round-robin",
            "1.0.0",
            "Kafka's RoundRobinAssignor: all tasks in (topic name, partition) order dealt \
             through one circular iterator over the members in Kafka's member order \
             (static by name, then dynamic by id), skipping members not subscribed to the \
             task's topic; ignores capacity and the previous assignment",
        )
    }

    fn assign(input: &GroupInput) -> Result<Assignment, AssignError> {
        let offsets = input.topic_offsets();
        let order = kafka_member_order(&input.members);
        let (starts, ranks) = subscriber_ranks_by_topic(input, &order);
        let mut topic_order: Vec<u32> = (0..input.topics.len() as u32).collect();
        topic_order.sort_unstable_by(|&a, &b| {
            input.topics[a as usize]
                .name
                .cmp(&input.topics[b as usize].name)
        });
        let mut out = input.empty_assignment();
        // Rank (position in `order`) of the member the circular iterator
        // points at; Kafka's iterator starts at the first member.
        let mut cursor = 0u32;
        for topic in topic_order {
            let topic = topic as usize;
            let ranks = &ranks[starts[topic]..starts[topic + 1]];
            let owners =
                &mut out.active_owner[offsets[topic] as usize..offsets[topic + 1] as usize];
            if ranks.is_empty() || owners.is_empty() {
                // Kafka never sees these tasks, so the iterator does not
                // move; nobody-subscribed tasks stay NO_MEMBER.
                continue;
            }
            let mut i = ranks.partition_point(|&r| r < cursor);
            if i == ranks.len() {
                i = 0;
            }
            for owner in owners.iter_mut() {
                *owner = order[ranks[i] as usize];
                cursor = ranks[i] + 1;
                i += 1;
                if i == ranks.len() {
                    i = 0;
                }
            }
            // A cursor one past the last member finds no rank at or after
            // it and wraps to the first subscriber, as the circular
            // iterator does.
        }
        Ok(out)
    }
}

assignd_guest_sdk::export_assignor!(RoundRobin);

// A call's heap lives only as long as its instance: a bump allocator
// makes each allocation a pointer increment and each free nearly nothing.
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: assignd_guest_sdk::arena::CallArena = assignd_guest_sdk::arena::CallArena;
