//! Kafka's `RangeAssignor` as an assignd assignor.
//!
//! Each topic is handled on its own: its subscribers are put in Kafka's
//! member order and its partitions are cut into contiguous ranges, `n / m`
//! partitions each for `n` partitions and `m` subscribers, the first `n % m`
//! subscribers taking one extra. So with two members and topics `t0`, `t1` of
//! three partitions each, `C0` gets `t0p0, t0p1, t1p0, t1p1` and `C1` gets
//! `t0p2, t1p2`. It exists so that groups migrating from Kafka get the
//! assignment they already know, and because co-partitioned topics (same
//! partition count, same subscribers) land partition-aligned on the same
//! member, which joins across topics rely on.
//!
//! Member order follows Kafka's `MemberInfo.compareTo`: static members (with
//! a member `name`, Kafka's group instance id) come first, ordered by name;
//! dynamic members follow, ordered by member `id`. Strings compare by bytes
//! (Unicode code points); Java compares UTF-16 code units, which differs only
//! between characters above U+FFFF and those in U+E000..=U+FFFF.
//!
//! Like Kafka's assignor it is not sticky: it ignores the previous assignment
//! (and lags), so any membership change may move many tasks; the host's
//! learner machinery still keeps moves to cold members safe. It also ignores
//! member `capacity` (every subscriber gets an equal share of a topic, as in
//! Kafka, which has no notion of weight) and racks (Kafka's rack-aware range
//! needs partition racks, which assignd does not have). It places no learners
//! or standbys.
//!
//! The work is linear in tasks plus subscriptions (plus the member sort), on
//! flat vectors only, because it runs inside wasm on groups of 10,000
//! members and 500,000 partitions.

use assignd_guest_sdk::index::{kafka_member_order, subscriber_ranks_by_topic};
use assignd_guest_sdk::{AssignError, Assignment, Assignor, GroupInput, Info};

/// The range assignor. See the crate documentation.
pub struct Range;

impl Assignor for Range {
    fn info() -> Info {
        Info::new(
            "range",
            "1.0.0",
            "Kafka's RangeAssignor: per topic, contiguous partition ranges over the \
             subscribers in Kafka's member order (static by name, then dynamic by id); \
             ignores capacity and the previous assignment",
        )
    }

    fn assign(input: &GroupInput) -> Result<Assignment, AssignError> {
        let offsets = input.topic_offsets();
        let order = kafka_member_order(&input.members);
        let (starts, ranks) = subscriber_ranks_by_topic(input, &order);
        let mut out = input.empty_assignment();
        for topic in 0..input.topics.len() {
            let subscribers = &ranks[starts[topic]..starts[topic + 1]];
            if subscribers.is_empty() {
                // Nobody subscribes: the tasks stay NO_MEMBER, as the
                // contract requires.
                continue;
            }
            let owners =
                &mut out.active_owner[offsets[topic] as usize..offsets[topic + 1] as usize];
            let share = owners.len() / subscribers.len();
            let extra = owners.len() % subscribers.len();
            let mut next = 0;
            for (i, &rank) in subscribers.iter().enumerate() {
                let len = share + usize::from(i < extra);
                if len == 0 {
                    // Fewer partitions than subscribers: the rest get nothing.
                    break;
                }
                owners[next..next + len].fill(order[rank as usize]);
                next += len;
            }
        }
        Ok(out)
    }
}

assignd_guest_sdk::export_assignor!(Range);

// A call's heap lives only as long as its instance: a bump allocator
// makes each allocation a pointer increment and each free nearly nothing.
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: assignd_guest_sdk::arena::CallArena = assignd_guest_sdk::arena::CallArena;
