//! The invariants of docs/design.md as pure checks over the core's state and
//! what the simulated members believe. Each returns a description of the
//! first breach it finds; none of them changes anything, so a test can feed
//! them hand-made states to prove that they do catch a breach.

use std::collections::{BTreeMap, BTreeSet};

use crate::protocol::core::HeartbeatResponse;
use crate::protocol::group::{
    Group, LearnerMode, Liveness, Millis, Record, Slot, SlotTarget, Task,
};
use crate::protocol::reconcile::MemberAssignment;

/// What one running simulated process believes it owns: the tasks it
/// processes and the revoked ones it has not released yet.
#[derive(Clone, Debug)]
pub struct Belief<'a> {
    /// The simulator's name for the process (`p3`), for messages.
    pub process: &'a str,
    /// The member id it sends (empty before its join was answered).
    pub member_id: &'a str,
    /// When the lease it honours ends (`None` before any answer): its
    /// last answer's plain lease, or its unreached lease while every
    /// heartbeat since provably reached no coordinator (while one is in
    /// flight, no later than its send time plus the answer's
    /// `unreached_flight_ms`). Past it, the process no longer acts on
    /// `owns`.
    pub lease_until_ms: Option<Millis>,
    pub owns: Vec<&'a Task>,
}

/// A compact rendering of a task set for messages: `t0:1,2 t1:0`.
pub fn tasks_str<'a>(tasks: impl IntoIterator<Item = &'a Task>) -> String {
    let mut by_topic: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for task in tasks {
        by_topic
            .entry(task.topic.as_str())
            .or_default()
            .push(task.partition);
    }
    let parts: Vec<String> = by_topic
        .into_iter()
        .map(|(topic, mut ps)| {
            ps.sort_unstable();
            let ps: Vec<String> = ps.iter().map(u32::to_string).collect();
            format!("{topic}:{}", ps.join(","))
        })
        .collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(" ")
    }
}

/// Invariant 1 in the core: no task is held (active or revoking) by two
/// slots, and only member slots hold anything.
pub fn check_holdings(group: &Group) -> Result<(), String> {
    // Each held task must name its slot in the holder index, which has one
    // holder per task: a task held by two slots fails at one of them.
    for (slot, assignment) in group.holdings.members() {
        if !group.members.contains_key(slot) {
            return Err(format!(
                "slot {slot} holds {} but is not a member",
                tasks_str(assignment.held())
            ));
        }
        for task in assignment.held() {
            let holder = group.holdings.holder(task);
            if holder != Some(slot) {
                return Err(format!(
                    "invariant 1: {task:?} is held by {slot} and by {holder:?}"
                ));
            }
        }
    }
    Ok(())
}

/// Invariant 1 at the processes: no two live processes (running, with a
/// member id the group still knows) believe they own the same task, and a
/// live process owns only tasks the host counts as held by its slot (else
/// the host could grant them to someone else while it still processes
/// them). A process whose member id was fenced or removed is a zombie the
/// protocol refuses; it is not live.
pub fn check_beliefs(group: &Group, beliefs: &[Belief<'_>]) -> Result<(), String> {
    // Each live belief must lie within its own slot's holdings, which are
    // disjoint (check_holdings): so two live processes of distinct slots
    // never share a task. The pairwise search runs only to name a breach.
    let mut live: BTreeMap<&str, &Belief<'_>> = BTreeMap::new();
    for belief in beliefs {
        let Some(slot) = group.slot_of(belief.member_id) else {
            continue;
        };
        if let Some(other) = live.insert(slot, belief) {
            return Err(format!(
                "processes {} and {} both act as slot {slot}",
                other.process, belief.process
            ));
        }
        for &task in &belief.owns {
            let holder = group.holdings.holder(task);
            if holder == Some(slot) {
                continue;
            }
            let also = beliefs
                .iter()
                .filter(|b| !std::ptr::eq(*b, belief) && group.slot_of(b.member_id).is_some())
                .find(|b| b.owns.contains(&task));
            return Err(match also {
                Some(other) => format!(
                    "invariant 1: live processes {} and {} both believe they own {task:?} (the host says {holder:?} holds it)",
                    other.process, belief.process
                ),
                None => format!(
                    "invariant 1: {} ({}, slot {slot}) processes {task:?}, which the host does not count as held by it (holder: {holder:?})",
                    belief.process, belief.member_id
                ),
            });
        }
    }
    Ok(())
}

/// Invariant 1 under leases, as the members see it: no two running
/// processes whose leases have not passed at `now` believe they own the
/// same task, whether or not the host still knows them. A process the host
/// fenced or expired without its knowing is a zombie that `check_beliefs`
/// skips; this check counts it until its lease ends, so it holds only if
/// the host never grants a task before its previous owner's lease is over.
/// A process with no lease (no answer yet) or a passed one owns nothing.
pub fn check_leased_beliefs(beliefs: &[Belief<'_>], now: Millis) -> Result<(), String> {
    let mut owner: BTreeMap<&Task, (&Belief<'_>, Millis)> = BTreeMap::new();
    for belief in beliefs {
        let Some(until) = belief.lease_until_ms.filter(|&until| now < until) else {
            continue;
        };
        for &task in &belief.owns {
            if let Some((other, other_until)) = owner.insert(task, (belief, until)) {
                let id = |b: &Belief<'_>| {
                    if b.member_id.is_empty() {
                        "no member id".to_owned()
                    } else {
                        b.member_id.to_owned()
                    }
                };
                return Err(format!(
                    "invariant 1 (leases): processes {} ({}, lease until {other_until}) and {} ({}, lease until {until}) both believe they own {task:?} at t={now}",
                    other.process,
                    id(other),
                    belief.process,
                    id(belief)
                ));
            }
        }
    }
    Ok(())
}

/// A key a router sent by its routing table: the task, the owner the table
/// gives it (active, not moving), and the table's promise.
#[derive(Clone, Debug)]
pub struct Routed<'a> {
    /// The simulator's name for the router (`g12/r0`), for messages.
    pub router: &'a str,
    pub task: &'a Task,
    /// The member id the table names as the task's owner.
    pub member_id: &'a str,
    /// The table's epoch.
    pub epoch: u64,
    /// When the router sent the read that got the table.
    pub sent_ms: Millis,
    /// The end of the table's promise as the router counts it: its send
    /// time, plus the wait the host reported, plus `valid_ms`.
    pub valid_until_ms: Millis,
}

/// Invariant 9 (docs/routing.md, "The ownership bound"), at each key a
/// router sends by a table within its promise (`now` before its
/// `valid_until_ms`): the member it goes to processes the task, or no live
/// member does (its owner died, or it is between owners). `processing` is
/// what each running process of the group processes as its own machine
/// has it, with the lease it honours: a process whose lease has passed
/// processes nothing. A key sent by a stale table carries no promise.
pub fn check_routed(
    routed: &Routed<'_>,
    processing: &[Belief<'_>],
    now: Millis,
) -> Result<(), String> {
    let Routed {
        router,
        task,
        member_id,
        epoch,
        sent_ms,
        valid_until_ms: valid_until,
    } = routed;
    if now >= *valid_until {
        return Ok(());
    }
    let live = |b: &&Belief<'_>| b.lease_until_ms.is_some_and(|until| now < until);
    let mut processors = processing
        .iter()
        .filter(live)
        .filter(|b| b.owns.contains(task));
    let Some(other) = processors.clone().find(|b| b.member_id != *member_id) else {
        return Ok(());
    };
    if processors.any(|b| b.member_id == *member_id) {
        return Ok(());
    }
    let routed_to = match processing.iter().find(|b| b.member_id == *member_id) {
        None => "no running process".to_owned(),
        Some(b) if !live(&b) => {
            format!("{}, whose lease ended at {:?}", b.process, b.lease_until_ms)
        }
        Some(b) => format!("{}, which does not hold it", b.process),
    };
    Err(format!(
        "invariant 9 (routes): router {router} sends a key of {task:?} to {member_id} ({routed_to}) by its table of epoch {epoch} (read sent at t={sent_ms}, valid until t={valid_until}), while {} ({}) processes it",
        other.process, other.member_id
    ))
}

/// Invariant 4, at each reconciliation of `slot` (checked against the
/// state `before` it): a task the installed target still gives the slot is
/// never revoked, nor taken out of its active set (paused).
pub fn check_reconciled(
    before: &Group,
    slot: &str,
    next: &MemberAssignment<Task>,
) -> Result<(), String> {
    let target = before.target.get(slot);
    let empty = SlotTarget::default();
    let target = target.unwrap_or(&empty);
    let previous = before.holdings.member(slot).cloned().unwrap_or_default();
    for task in next.revoking.difference(&previous.revoking) {
        if target.active.contains(task) {
            return Err(format!(
                "invariant 4: {slot} is asked to revoke {task:?}, which the target (epoch {}) keeps on it",
                before.target_epoch
            ));
        }
    }
    for task in previous.active.intersection(&target.active) {
        if !next.active.contains(task) {
            return Err(format!(
                "invariant 4: {slot} stops processing {task:?}, which the target (epoch {}) keeps on it",
                before.target_epoch
            ));
        }
    }
    Ok(())
}

/// Invariant 5, when a target is installed in a group with host learner
/// safety: an active task the target moves away from its holder goes only
/// to a member that reported a lag at or under the acceptable recovery lag
/// for it, unless the holder is draining and past its scale-down timeout.
pub fn check_installed(
    before: &Group,
    liveness: &Liveness,
    target: &BTreeMap<Slot, SlotTarget>,
    now: Millis,
) -> Result<(), String> {
    if before.config.learners != LearnerMode::Host {
        return Ok(());
    }
    let acceptable = before.config.acceptable_recovery_lag;
    for (to, slot_target) in target {
        for task in &slot_target.active {
            let Some(from) = before.holdings.holder(task) else {
                continue;
            };
            if from == to || liveness.caught_up(to, task, acceptable) {
                continue;
            }
            let forced = before.members.get(from).is_some_and(|m| m.draining)
                && liveness.draining_since_ms.get(from).is_some_and(|&since| {
                    now >= since.saturating_add(before.config.scale_down_timeout_ms)
                });
            if !forced {
                let lag = liveness.lags.get(to.as_str()).and_then(|l| l.get(task));
                return Err(format!(
                    "invariant 5: the target moves {task:?} from its holder {from} to {to}, whose reported lag is {lag:?} (acceptable: {acceptable})"
                ));
            }
        }
    }
    Ok(())
}

/// Invariant 3, at the join of a new incarnation of a static member whose
/// slot still exists with the same subscription: the join starts no new
/// target (unless its lag report shows a learner of the slot's target
/// caught up, as any heartbeat's would), changes nobody else's assignment,
/// and the member gets its slot's tasks back (plus only free tasks its
/// target gives it; tasks the target moved away before the restart come
/// back as revoking, or are released if the join reports them not owned).
pub fn check_static_return(
    before: &Group,
    after: &Group,
    slot: &str,
    response: &HeartbeatResponse,
    records: &[Record],
    owned: Option<&[Task]>,
    lags: Option<&[(Task, u64)]>,
) -> Result<(), String> {
    check_return_kept_the_rest(before, after, slot, records, lags)?;
    check_return_gave_its_tasks_back(before, after, slot, response, owned)
}

/// The first half of [`check_static_return`]: the return started no new
/// target (a caught-up learner's promotion aside), left the target as it
/// was, and changed no other member's assignment.
fn check_return_kept_the_rest(
    before: &Group,
    after: &Group,
    slot: &str,
    records: &[Record],
    lags: Option<&[(Task, u64)]>,
) -> Result<(), String> {
    // The join reports lags as every heartbeat does (the client's machine
    // sends them): one that shows a learner of the slot's target caught
    // up starts the new target that promotes it, as any heartbeat's
    // would. That is progress, not the return.
    let acceptable = before.config.acceptable_recovery_lag;
    let learner_caught_up = lags.is_some_and(|lags| {
        lags.iter()
            .any(|(t, lag)| *lag <= acceptable && before.target_of(slot).learner.contains(t))
    });
    if let Some(bump) = records
        .iter()
        .find(|r| matches!(r, Record::GroupEpochBumped { .. }))
        .filter(|_| !learner_caught_up)
    {
        return Err(format!(
            "invariant 3: the return of {slot} within its registration timeout started a new target: {bump:?}"
        ));
    }
    if before.target != after.target {
        return Err(format!(
            "invariant 3: the return of {slot} changed the target"
        ));
    }
    for (other, assignment) in before.holdings.members() {
        if other != slot && after.holdings.member(other) != Some(assignment) {
            return Err(format!(
                "invariant 3: the return of {slot} changed the assignment of {other}"
            ));
        }
    }
    Ok(())
}

/// The second half of [`check_static_return`]: the member got its slot's
/// tasks back, and nothing more than free tasks of its target.
fn check_return_gave_its_tasks_back(
    before: &Group,
    after: &Group,
    slot: &str,
    response: &HeartbeatResponse,
    owned: Option<&[Task]>,
) -> Result<(), String> {
    // Its tasks back: everything the slot held, still held. The target may
    // have moved some of them before the restart (the old incarnation had
    // not heard yet): those come back as revoking, as they would have to
    // the old incarnation; and a free task of its target may be granted.
    // While the old incarnation's last lease runs (it may be alive: two
    // processes with one name) a task is withheld: still the slot's, and
    // listed as a learner of the new one until that lease ends (or, if it
    // is moving away, not shown: the old one releases it).
    let previous = before.holdings.member(slot).cloned().unwrap_or_default();
    let target = before.target_of(slot);
    let kept = after.holdings.member(slot).cloned().unwrap_or_default();
    let withheld = |t: &Task| {
        kept.held().any(|k| k == t) && (response.learner.contains(t) || !target.active.contains(t))
    };
    // A task being revoked from the slot is released by a join that
    // reports it not owned (a new incarnation holds nothing): it was
    // leaving this member anyway; every task it keeps must come back.
    let released =
        |t: &Task| previous.revoking.contains(t) && owned.is_some_and(|owned| !owned.contains(t));
    if let Some(lost) = previous.held().find(|t| {
        !response.active.contains(*t)
            && !response.revoking.contains(*t)
            && !withheld(t)
            && !released(t)
    }) {
        return Err(format!(
            "invariant 3: {slot} came back without {lost:?} (held {}, back with {} active, {} revoking)",
            tasks_str(previous.held()),
            tasks_str(&response.active),
            tasks_str(&response.revoking)
        ));
    }
    if let Some(extra) = response
        .active
        .iter()
        .find(|t| !previous.active.contains(*t) && !target.active.contains(*t))
    {
        return Err(format!(
            "invariant 3: {slot} came back with {extra:?}, neither held before nor in its target"
        ));
    }
    if let Some(revoked) = response
        .revoking
        .iter()
        .find(|t| !previous.held().any(|h| h == *t) || target.active.contains(*t))
    {
        return Err(format!(
            "invariant 3: {slot} came back revoking {revoked:?}, which it did not hold or its target keeps on it"
        ));
    }
    Ok(())
}

/// Invariant 2, once the group has settled: the group is stable, and every
/// task of a topic that a live member subscribes to is active on exactly
/// one live member subscribed to its topic (in the host's holdings and in
/// what the processes believe); nothing else is held.
pub fn check_settled(group: &Group, beliefs: &[Belief<'_>]) -> Result<(), String> {
    if !group.is_stable() {
        return Err(format!(
            "invariant 2: the group is not stable (group epoch {}, target epoch {})",
            group.group_epoch, group.target_epoch
        ));
    }
    let mut live_slots = BTreeSet::new();
    let mut believed: BTreeMap<&Task, Vec<&str>> = BTreeMap::new();
    for belief in beliefs {
        if let Some(slot) = group.slot_of(belief.member_id) {
            live_slots.insert(slot);
            for &task in &belief.owns {
                believed.entry(task).or_default().push(slot);
            }
        }
    }
    let subscribed: BTreeSet<&str> = live_slots
        .iter()
        .flat_map(|slot| group.members[*slot].topics.iter().map(String::as_str))
        .collect();
    let tasks: BTreeSet<Task> = group.tasks().collect();
    for task in &tasks {
        if !subscribed.contains(task.topic.as_str()) {
            continue;
        }
        let owners = believed.get(task).map(Vec::as_slice).unwrap_or_default();
        let [owner] = owners else {
            return Err(format!(
                "invariant 2: {task:?} is owned by {} live members ({owners:?}) once settled",
                owners.len()
            ));
        };
        if !group.members[*owner].topics.contains(&task.topic) {
            return Err(format!(
                "invariant 2: {task:?} is active on {owner}, which does not subscribe to {}",
                task.topic
            ));
        }
        let held_active = group
            .holdings
            .member(owner)
            .is_some_and(|a| a.active.contains(task));
        if !held_active {
            return Err(format!(
                "invariant 2: {owner} believes it owns {task:?} but the host does not hold it active there"
            ));
        }
    }
    for (task, owners) in &believed {
        if !tasks.contains(*task) || !subscribed.contains(task.topic.as_str()) {
            return Err(format!(
                "invariant 2: {task:?} (no longer a task, or of a topic no live member subscribes to) is still owned by {owners:?}"
            ));
        }
    }
    for (slot, assignment) in group.holdings.members() {
        if !live_slots.contains(slot) && assignment.held().next().is_some() {
            return Err(format!(
                "invariant 2: slot {slot}, which no live process holds, still holds {}",
                tasks_str(assignment.held())
            ));
        }
    }
    Ok(())
}
