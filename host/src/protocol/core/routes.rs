//! The routing table (docs/routing.md): what a member publishes for it
//! (its endpoint and metadata: the checks, and the record when they
//! change), the table itself as the group's state gives it, and the
//! promise each table carries. For `routes_valid_ms` after a table is
//! served, no task it shows unmoved gets another active owner. A new
//! target revokes nothing before the promise of every table served
//! earlier has run out (`Liveness::revocations_held_until_ms`): the owners
//! keep their tasks, and serve what those tables send them, meanwhile. A
//! member removed or replaced leaves its tasks ungranted until then
//! (`Liveness::grants_held_until_ms`). Both are honoured in
//! reconciliation, and the second in a new incarnation's handover too.

use std::collections::{BTreeMap, BTreeSet};

use assignd_wire::{
    ENDPOINT_BYTES_MAX, LookupBody, METADATA_KEY_BYTES_MAX, METADATA_PAIRS_MAX,
    METADATA_VALUE_BYTES_MAX, RouteMember, RouteMove, RouteOwner, RoutesBody, TaskRange,
    TaskRanges,
};

use super::{Coordinator, Heartbeat, Output, ProtocolError, invalid, refuse_invisible};
use crate::protocol::group::{Group, Millis, Record, Slot, SlotTarget, Task};

/// The longest `routes_valid_ms` a group may set.
pub const ROUTES_VALID_MS_MAX: u64 = 60_000;

/// Checks the endpoint and metadata a heartbeat publishes, before
/// anything changes.
pub(super) fn check_published(request: &Heartbeat) -> Result<(), ProtocolError> {
    if let Some(endpoint) = &request.endpoint {
        if endpoint.len() > ENDPOINT_BYTES_MAX {
            return invalid(format!(
                "endpoint must be at most {ENDPOINT_BYTES_MAX} bytes, got {}",
                endpoint.len()
            ));
        }
        if !endpoint.bytes().all(|b| b.is_ascii_graphic()) {
            return invalid(
                "endpoint must be visible ASCII characters only (a URL or host:port)".into(),
            );
        }
    }
    if let Some(metadata) = &request.metadata {
        if metadata.len() > METADATA_PAIRS_MAX {
            return invalid(format!(
                "metadata may hold at most {METADATA_PAIRS_MAX} pairs, got {}",
                metadata.len()
            ));
        }
        for (key, value) in metadata {
            if key.is_empty() || key.len() > METADATA_KEY_BYTES_MAX {
                return invalid(format!(
                    "metadata key {key:?} must be 1 to {METADATA_KEY_BYTES_MAX} bytes"
                ));
            }
            if value.len() > METADATA_VALUE_BYTES_MAX {
                return invalid(format!(
                    "metadata value of {key:?} must be at most {METADATA_VALUE_BYTES_MAX} bytes"
                ));
            }
            refuse_invisible("metadata key", key)?;
            if !value.is_empty() {
                refuse_invisible("metadata value", value)?;
            }
        }
    }
    Ok(())
}

impl Coordinator {
    /// Records a current member's new endpoint or metadata, if its
    /// heartbeat changes them (a join carries them in the member itself).
    pub(super) fn publish_endpoint(&mut self, request: &Heartbeat, slot: &Slot, out: &mut Output) {
        if request.endpoint.is_none() && request.metadata.is_none() {
            return;
        }
        let member = &self.group_at(&request.group).members[slot];
        let endpoint = match &request.endpoint {
            Some(endpoint) => Some(endpoint.clone()).filter(|e| !e.is_empty()),
            None => member.endpoint.clone(),
        };
        let metadata = request
            .metadata
            .clone()
            .unwrap_or_else(|| member.metadata.clone());
        if endpoint == member.endpoint && metadata == member.metadata {
            return;
        }
        self.emit(
            out,
            Record::MemberEndpointChanged {
                group: request.group.clone(),
                slot: slot.clone(),
                endpoint,
                metadata,
            },
        );
    }

    /// A routing table of `group_name` is served at `now`: it promises its
    /// unmoved owners for the group's `routes_valid_ms`. Returns that
    /// promise, in ms (0: none).
    pub fn routes_served(&mut self, group_name: &str, now: Millis) -> Option<u64> {
        self.observe_time(now);
        let valid_ms = self.group(group_name)?.config.routes_valid_ms;
        if valid_ms > 0 {
            let until = now.saturating_add(valid_ms);
            let liveness = self.liveness_mut(group_name);
            let promised = liveness.routes_promised_until_ms.get_or_insert(until);
            *promised = (*promised).max(until);
        }
        Some(valid_ms)
    }

    /// `record` publishes a move (a new target; a member removed or
    /// replaced): what it revokes, or what it frees, waits for every
    /// table served before it.
    pub(super) fn hold_moves_for_served_tables(&mut self, record: &Record) {
        let revocations = match record {
            Record::TargetInstalled { .. } => true,
            Record::MemberRemoved { .. } | Record::MemberJoined { .. } => false,
            _ => return,
        };
        let Some(entry) = self.groups.get_mut(record.group()) else {
            return;
        };
        let liveness = &mut entry.liveness;
        let Some(promised) = liveness.routes_promised_until_ms else {
            return;
        };
        let held = if revocations {
            &mut liveness.revocations_held_until_ms
        } else {
            &mut liveness.grants_held_until_ms
        };
        let held = held.get_or_insert(promised);
        *held = (*held).max(promised);
    }

    /// Whether revocations (`revocations`) or grants of `group_name` wait
    /// at `now` for tables served before the last move.
    pub(super) fn moves_held(&self, group_name: &str, now: Millis, revocations: bool) -> bool {
        self.liveness(group_name).is_some_and(|l| {
            let until = if revocations {
                l.revocations_held_until_ms
            } else {
                l.grants_held_until_ms
            };
            until.is_some_and(|until| until > now)
        })
    }

    /// The routing table of `group_name` as its state is now.
    pub fn routes(&self, group_name: &str) -> Option<RoutesBody> {
        let group = self.group(group_name)?;
        let withheld = self.withheld_by_handovers(group_name);
        Some(routes_of(group, &withheld))
    }

    /// Where `key` of `topic` goes in `group_name` (Kafka's partitioner),
    /// and who has that task now; `None` if the group has no such topic.
    /// The group exists (the caller checked).
    pub fn lookup(&self, group_name: &str, topic: &str, key: &[u8]) -> Option<LookupBody> {
        let group = self.group_at(group_name);
        let partitions = group
            .config
            .topics
            .iter()
            .find(|t| t.name == topic)?
            .partitions;
        let task = Task::new(topic, assignd_wire::partition_for_key(key, partitions));
        let withheld = self.withheld_by_handovers(group_name);
        let owner_of = |slot: &Slot| {
            let member = &group.members[slot];
            RouteOwner {
                member_id: member.member_id.clone(),
                member_name: member.name.clone(),
                endpoint: member.endpoint.clone(),
                metadata: member.metadata.clone(),
            }
        };
        let owner = group
            .holdings
            .holder(&task)
            .filter(|slot| !withheld.get(*slot).is_some_and(|w| w.contains(&task)));
        let target_owner = group
            .target
            .iter()
            .find(|(_, target)| target.active.contains(&task))
            .map(|(slot, _)| slot);
        let with = |pick: fn(&SlotTarget) -> &BTreeSet<Task>| {
            group
                .target
                .iter()
                .filter(|(slot, target)| {
                    group.members.contains_key(*slot) && pick(target).contains(&task)
                })
                .map(|(slot, _)| owner_of(slot))
                .collect()
        };
        Some(LookupBody {
            topic: topic.to_owned(),
            partition: task.partition,
            epoch: group.routes_epoch,
            valid_ms: group.config.routes_valid_ms,
            owner: owner.map(owner_of),
            moving_to: target_owner
                .filter(|to| Some(*to) != owner && group.members.contains_key(*to))
                .map(owner_of),
            learners: with(|t| &t.learner),
            standbys: with(|t| &t.standby),
        })
    }

    /// Per slot, the tasks a replaced incarnation may still process: not
    /// the new incarnation's yet.
    fn withheld_by_handovers(&self, group_name: &str) -> BTreeMap<Slot, BTreeSet<Task>> {
        self.liveness(group_name)
            .map(|l| {
                l.handover
                    .iter()
                    .map(|(slot, handover)| (slot.clone(), handover.tasks.clone()))
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// The table of `group`, `withheld`: per slot, tasks it holds that a
/// replaced incarnation may still process (shown moving to it from
/// nobody the table can name).
fn routes_of(group: &Group, withheld: &BTreeMap<Slot, BTreeSet<Task>>) -> RoutesBody {
    let mut body = RoutesBody {
        group: group.name.clone(),
        epoch: group.routes_epoch,
        group_epoch: group.group_epoch,
        valid_ms: group.config.routes_valid_ms,
        topics: group
            .config
            .topics
            .iter()
            .map(|t| (t.name.clone(), t.partitions))
            .collect(),
        members: group
            .members
            .values()
            .map(|m| {
                let member = RouteMember {
                    member_name: m.name.clone(),
                    endpoint: m.endpoint.clone(),
                    metadata: m.metadata.clone(),
                };
                (m.member_id.clone(), member)
            })
            .collect(),
        ..RoutesBody::default()
    };
    let id = |slot: &Slot| group.members[slot].member_id.clone();
    let mut unsteady = Vec::new();
    for (slot, held) in group.holdings.members() {
        let waiting = withheld.get(slot);
        let steady = waiting.is_none()
            && held.revoking.is_empty()
            && held.epoch == group.target_epoch
            && held.active.len() == group.target_of(slot).active.len();
        let processing = held
            .held()
            .filter(|t| !waiting.is_some_and(|w| w.contains(*t)));
        let ranges = TaskRanges::from_tasks(processing);
        if !ranges.is_empty() {
            body.active.insert(id(slot), ranges);
        }
        if !steady {
            unsteady.push(slot);
        }
    }
    let members_with_target = group
        .target
        .iter()
        .filter(|(slot, _)| group.members.contains_key(*slot));
    for (slot, target) in members_with_target {
        if !target.learner.is_empty() {
            body.learner
                .insert(id(slot), TaskRanges::from_tasks(&target.learner));
        }
        if !target.standby.is_empty() {
            body.standby
                .insert(id(slot), TaskRanges::from_tasks(&target.standby));
        }
        if group.holdings.member(slot).is_none() && !target.active.is_empty() {
            unsteady.push(slot);
        }
    }
    if !unsteady.is_empty() {
        body.moving = moves(group, &unsteady, withheld);
    }
    body.unowned = unowned(group, withheld);
    body
}

/// The tasks whose owner is about to change: those the `unsteady` slots
/// hold but their target does not give them, and those their target gives
/// them but they do not process yet.
fn moves(
    group: &Group,
    unsteady: &[&Slot],
    withheld: &BTreeMap<Slot, BTreeSet<Task>>,
) -> Vec<RouteMove> {
    let id = |slot: &Slot| group.members[slot].member_id.clone();
    let target_owner: std::collections::HashMap<&Task, &Slot> = group
        .target
        .iter()
        .flat_map(|(slot, target)| target.active.iter().map(move |task| (task, slot)))
        .collect();
    let processor = |task: &Task| {
        group
            .holdings
            .holder(task)
            .filter(|slot| !withheld.get(*slot).is_some_and(|w| w.contains(task)))
    };
    let mut moving: BTreeMap<(Option<String>, Option<String>), BTreeSet<Task>> = BTreeMap::new();
    for slot in unsteady {
        let holds = group.holdings.member(slot);
        let held = holds.into_iter().flat_map(|h| h.held());
        for task in held.chain(&group.target_of(slot).active) {
            let from = processor(task);
            let to = target_owner.get(task).copied();
            // A task being released moves even if a newer target gives
            // it back to the same member: the release may complete, and
            // then the task is free for a later target.
            let releasing = holds.is_some_and(|h| h.revoking.contains(task));
            if from != to || releasing {
                moving
                    .entry((from.map(id), to.map(id)))
                    .or_default()
                    .insert(task.clone());
            }
        }
    }
    moving
        .into_iter()
        .map(|((from, to), tasks)| RouteMove {
            from,
            to,
            tasks: TaskRanges::from_tasks(&tasks),
        })
        .collect()
}

/// Every task of the group's topics that no member processes now, found
/// by marking what is processed (no task is built for a processed one).
fn unowned(group: &Group, withheld: &BTreeMap<Slot, BTreeSet<Task>>) -> TaskRanges {
    let mut processed: BTreeMap<&str, Vec<bool>> = group
        .config
        .topics
        .iter()
        .map(|t| (t.name.as_str(), vec![false; t.partitions as usize]))
        .collect();
    for (slot, held) in group.holdings.members() {
        let waiting = withheld.get(slot);
        for task in held
            .held()
            .filter(|t| !waiting.is_some_and(|w| w.contains(*t)))
        {
            if let Some(marks) = processed.get_mut(task.topic.as_str())
                && let Some(mark) = marks.get_mut(task.partition as usize)
            {
                *mark = true;
            }
        }
    }
    let mut ranges = Vec::new();
    for (topic, marks) in processed {
        let mut partition = 0;
        while partition < marks.len() {
            if marks[partition] {
                partition += 1;
                continue;
            }
            let first = partition;
            while partition < marks.len() && !marks[partition] {
                partition += 1;
            }
            ranges.push(TaskRange {
                topic: topic.to_owned(),
                first: first as u32,
                last: (partition - 1) as u32,
            });
        }
    }
    TaskRanges(ranges)
}
