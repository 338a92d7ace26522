//! The contract checks, shared by the host and the native harness so both
//! judge an input and an answer the same way: [`check_input`] for the
//! structure of a [`GroupInput`], [`check_assignment`] for an assignor's
//! answer against the input it was given. Messages name topics, partitions
//! and member ids so that a plugin author can act on them.

use std::collections::HashSet;
use std::fmt;

use crate::model::{Assignment, GroupInput, NO_MEMBER, TaskMembers};

/// Bounds on everything in a [`GroupInput`] that can grow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InputLimits {
    pub topics_max: usize,
    pub members_max: usize,
    pub partitions_per_topic_max: u32,
    pub tasks_max: usize,
    /// Rows in each of learners, standbys and lags.
    pub rows_max: usize,
    pub name_len_max: usize,
    pub params_max: usize,
    pub param_len_max: usize,
}

impl Default for InputLimits {
    fn default() -> Self {
        Self {
            topics_max: 100_000,
            members_max: 100_000,
            partitions_per_topic_max: 1_000_000,
            tasks_max: 4_000_000,
            rows_max: 16_000_000,
            name_len_max: 255,
            params_max: 64,
            param_len_max: 1024,
        }
    }
}

/// A structurally invalid input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidInput(pub String);

impl fmt::Display for InvalidInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid input: {}", self.0)
    }
}

impl std::error::Error for InvalidInput {}

fn invalid<T>(message: String) -> Result<T, InvalidInput> {
    Err(InvalidInput(message))
}

/// Checks the structure of an input: limits, unique ids and names, topic and
/// member indices in range, columns of equal length, one active owner per
/// task.
pub fn check_input(input: &GroupInput, limits: &InputLimits) -> Result<(), InvalidInput> {
    if input.topics.len() > limits.topics_max {
        return invalid(format!(
            "{} topics, more than the limit of {}",
            input.topics.len(),
            limits.topics_max
        ));
    }
    if input.members.len() > limits.members_max {
        return invalid(format!(
            "{} members, more than the limit of {}",
            input.members.len(),
            limits.members_max
        ));
    }
    let mut topic_names = HashSet::with_capacity(input.topics.len());
    let mut task_count = 0usize;
    for topic in &input.topics {
        if topic.name.is_empty() || topic.name.len() > limits.name_len_max {
            return invalid(format!(
                "topic name {:?} must be 1 to {} bytes long",
                topic.name, limits.name_len_max
            ));
        }
        if !topic_names.insert(topic.name.as_str()) {
            return invalid(format!("topic {:?} appears twice", topic.name));
        }
        if topic.partitions > limits.partitions_per_topic_max {
            return invalid(format!(
                "topic {:?} has {} partitions, more than the limit of {}",
                topic.name, topic.partitions, limits.partitions_per_topic_max
            ));
        }
        task_count += topic.partitions as usize;
    }
    if task_count > limits.tasks_max {
        return invalid(format!(
            "{task_count} tasks in all, more than the limit of {}",
            limits.tasks_max
        ));
    }
    let mut ids = HashSet::with_capacity(input.members.len());
    let mut names = HashSet::new();
    for member in &input.members {
        if member.id.is_empty() || member.id.len() > limits.name_len_max {
            return invalid(format!(
                "member id {:?} must be 1 to {} bytes long",
                member.id, limits.name_len_max
            ));
        }
        if !ids.insert(member.id.as_str()) {
            return invalid(format!("member id {:?} appears twice", member.id));
        }
        if let Some(name) = &member.name {
            if name.is_empty() || name.len() > limits.name_len_max {
                return invalid(format!(
                    "member {:?}: name {name:?} must be 1 to {} bytes long",
                    member.id, limits.name_len_max
                ));
            }
            if !names.insert(name.as_str()) {
                return invalid(format!(
                    "member name {name:?} is used by two members (the second is {:?})",
                    member.id
                ));
            }
        }
        if let Some(rack) = &member.rack
            && rack.len() > limits.name_len_max
        {
            return invalid(format!(
                "member {:?}: rack name longer than {} bytes",
                member.id, limits.name_len_max
            ));
        }
        if member.capacity == 0 {
            return invalid(format!(
                "member {:?}: capacity must be at least 1",
                member.id
            ));
        }
        if member.subscription as usize >= input.subscriptions.len() {
            return invalid(format!(
                "member {:?} refers to subscription set {}, but there are {}",
                member.id,
                member.subscription,
                input.subscriptions.len()
            ));
        }
    }
    if input.subscriptions.len() > limits.members_max {
        return invalid(format!(
            "{} subscription sets, more than the limit of {}",
            input.subscriptions.len(),
            limits.members_max
        ));
    }
    let mut distinct = HashSet::with_capacity(input.subscriptions.len());
    for (i, topics) in input.subscriptions.iter().enumerate() {
        if topics.windows(2).any(|pair| pair[0] >= pair[1]) {
            return invalid(format!(
                "subscription set {i}: topic indices must be strictly ascending"
            ));
        }
        if let Some(&last) = topics.last()
            && last as usize >= input.topics.len()
        {
            return invalid(format!(
                "subscription set {i} names unknown topic index {last}"
            ));
        }
        if !distinct.insert(topics.as_slice()) {
            return invalid(format!(
                "subscription set {i} appears twice; sets must be distinct"
            ));
        }
    }
    if input.active_owner.len() != task_count {
        return invalid(format!(
            "active_owner has {} entries but the topics have {task_count} tasks",
            input.active_owner.len()
        ));
    }
    let member_count = input.members.len();
    // An owner is NO_MEMBER or a member index; adding 1 (wrapping) maps
    // both onto 0..=member_count, so one vectorized maximum clears them all
    // and only a bad input pays for finding its first bad task.
    let owner_bound = input
        .active_owner
        .iter()
        .fold(0, |max, &m| max.max(m.wrapping_add(1)));
    if owner_bound as usize > member_count
        && let Some(task) = input
            .active_owner
            .iter()
            .position(|&m| m != NO_MEMBER && m as usize >= member_count)
    {
        return invalid(format!(
            "active_owner of task {task} is member index {}, but there are {member_count} members",
            input.active_owner[task]
        ));
    }
    for (role, rows) in [("learners", &input.learners), ("standbys", &input.standbys)] {
        check_rows(
            role,
            &rows.task,
            &rows.member,
            task_count,
            member_count,
            limits,
        )?;
    }
    let lags = &input.lags;
    if lags.task.len() != lags.member.len() || lags.task.len() != lags.lag.len() {
        return invalid("lags columns have different lengths".into());
    }
    check_rows(
        "lags",
        &lags.task,
        &lags.member,
        task_count,
        member_count,
        limits,
    )?;
    if input.params.len() > limits.params_max {
        return invalid(format!(
            "{} params, more than the limit of {}",
            input.params.len(),
            limits.params_max
        ));
    }
    for (key, value) in &input.params {
        if key.is_empty() || key.len() > limits.name_len_max || value.len() > limits.param_len_max {
            return invalid(format!(
                "param {key:?}: keys must be 1 to {} bytes and values at most {} bytes",
                limits.name_len_max, limits.param_len_max
            ));
        }
    }
    check_loads(input, task_count, limits)
}

/// The loads: a unit of 1 to `LOAD_UNIT_LEN_MAX` visible ASCII bytes when
/// there are any, rows of existing tasks with finite loads from 0 to
/// `LOAD_MAX`, members' capacities above 0 and utilisations from 0 to
/// `UTILISATION_MAX`.
fn check_loads(
    input: &GroupInput,
    task_count: usize,
    limits: &InputLimits,
) -> Result<(), InvalidInput> {
    use crate::load::{LOAD_MAX, LOAD_UNIT_LEN_MAX, UTILISATION_MAX};
    match &input.load_unit {
        Some(unit) if !crate::load::is_load_unit(unit) => {
            return invalid(format!(
                "load_unit {unit:?} must be 1 to {LOAD_UNIT_LEN_MAX} bytes of visible ASCII"
            ));
        }
        None if !input.loads.is_empty() => {
            return invalid("loads are given but no load_unit".into());
        }
        _ => {}
    }
    let loads = &input.loads;
    if loads.task.len() != loads.load.len() {
        return invalid("loads columns have different lengths".into());
    }
    if loads.len() > limits.rows_max {
        return invalid(format!(
            "{} loads rows, more than the limit of {}",
            loads.len(),
            limits.rows_max
        ));
    }
    for (task, load) in loads.iter() {
        if task as usize >= task_count {
            return invalid(format!("loads: task {task} does not exist"));
        }
        if !(0.0..=LOAD_MAX).contains(&load) {
            return invalid(format!(
                "loads: task {task} has load {load}, not from 0 to {LOAD_MAX:e}"
            ));
        }
    }
    for member in &input.members {
        if let Some(c) = member.load_capacity
            && !(c > 0.0 && c <= LOAD_MAX)
        {
            return invalid(format!(
                "member {:?}: load_capacity {c} must be above 0 and at most {LOAD_MAX:e}",
                member.id
            ));
        }
        if let Some(u) = member.utilisation
            && !(0.0..=UTILISATION_MAX).contains(&u)
        {
            return invalid(format!(
                "member {:?}: utilisation {u} must be from 0 to {UTILISATION_MAX}",
                member.id
            ));
        }
    }
    Ok(())
}

/// One role's (task, member) rows, given as their two columns.
fn check_rows(
    role: &str,
    tasks: &[u32],
    members: &[u32],
    task_count: usize,
    member_count: usize,
    limits: &InputLimits,
) -> Result<(), InvalidInput> {
    if tasks.len() != members.len() {
        return invalid(format!("{role} columns have different lengths"));
    }
    if tasks.len() > limits.rows_max {
        return invalid(format!(
            "{} {role} rows, more than the limit of {}",
            tasks.len(),
            limits.rows_max
        ));
    }
    for (&task, &member) in tasks.iter().zip(members) {
        if task as usize >= task_count {
            return invalid(format!("{role}: task {task} does not exist"));
        }
        if member as usize >= member_count {
            return invalid(format!("{role}: member index {member} does not exist"));
        }
    }
    Ok(())
}

/// Why an assignor's answer cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InvalidAssignment {
    /// `active_owner` does not have one entry per task.
    WrongTaskCount { expected: usize, got: usize },
    /// Learner or standby columns of different lengths.
    ColumnLengthMismatch { role: Role },
    /// More learner or standby rows than the host accepts.
    TooManyRows { role: Role, rows: usize, max: usize },
    /// A member index that is not in the input.
    UnknownMember { role: Role, member: u32 },
    /// A task number that is not in the input.
    UnknownTask { role: Role, task: u32 },
    /// A task of a subscribed topic with no active owner.
    Unassigned { topic: String, partition: u32 },
    /// A task placed on a member that does not subscribe to its topic.
    NotSubscribed {
        role: Role,
        member: String,
        topic: String,
        partition: u32,
    },
    /// A learner or standby on the member that is active on the same task.
    OnActiveOwner {
        role: Role,
        member: String,
        topic: String,
        partition: u32,
    },
    /// The same member twice among a task's learners and standbys.
    Duplicate {
        role: Role,
        member: String,
        topic: String,
        partition: u32,
    },
}

/// Which part of an assignment a problem is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Active,
    Learner,
    Standby,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Active => "active",
            Role::Learner => "learner",
            Role::Standby => "standby",
        })
    }
}

impl fmt::Display for InvalidAssignment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use InvalidAssignment::*;
        match self {
            WrongTaskCount { expected, got } => write!(
                f,
                "active owners list has {got} entries, but the input has {expected} tasks \
                 (one entry per task, u32::MAX for none)"
            ),
            ColumnLengthMismatch { role } => {
                write!(f, "{role} task and member columns have different lengths")
            }
            TooManyRows { role, rows, max } => {
                write!(f, "{rows} {role} rows, more than the limit of {max}")
            }
            UnknownMember { role, member } => {
                write!(
                    f,
                    "{role} placement names member index {member}, which is not in the input"
                )
            }
            UnknownTask { role, task } => {
                write!(
                    f,
                    "{role} placement names task {task}, which is not in the input"
                )
            }
            Unassigned { topic, partition } => write!(
                f,
                "task {topic}-{partition} has no active owner, but members subscribe to {topic:?}"
            ),
            NotSubscribed {
                role,
                member,
                topic,
                partition,
            } => write!(
                f,
                "task {topic}-{partition} is {role} on member {member:?}, which does not subscribe to {topic:?}"
            ),
            OnActiveOwner {
                role,
                member,
                topic,
                partition,
            } => write!(
                f,
                "task {topic}-{partition} has a {role} on member {member:?}, which is also its active owner"
            ),
            Duplicate {
                role,
                member,
                topic,
                partition,
            } => write!(
                f,
                "task {topic}-{partition} is placed on member {member:?} more than once (again as {role})"
            ),
        }
    }
}

impl std::error::Error for InvalidAssignment {}

/// Learner or standby rows an answer may hold per task, by default: more
/// than any placement strategy uses (Kafka Streams runs one or two
/// standbys per task; KIP-1071 caps them at 2 unless the operator raises
/// it), and few enough that what the host builds from an answer stays
/// proportional to the group's tasks.
pub const ROWS_PER_TASK_MAX: usize = 8;

/// The most learner rows, and the most standby rows, an answer to `input`
/// may hold: `rows_per_task_max` per task (fewer when the group has fewer
/// other members to place them on), and never more than `rows_max`.
/// Small inputs may always have 1,024, so that an answer with a misplaced
/// row gets the error that names it rather than `TooManyRows`.
pub fn rows_max_for(input: &GroupInput, rows_per_task_max: usize, rows_max: usize) -> usize {
    let per_task = rows_per_task_max.min(input.members.len().saturating_sub(1));
    input
        .task_count()
        .saturating_mul(per_task)
        .max(1024)
        .min(rows_max)
}

/// Checks an answer against the input it answers: every task of a subscribed
/// topic active exactly once and only on a subscribed member; learners and
/// standbys only on subscribed members, never on the task's active owner and
/// never twice; no unknown members or tasks; at most `rows_max` learner and
/// standby rows each (the caller caps it by the input: [`rows_max_for`]).
///
/// Its cost is linear in the tasks and rows, with no allocation per row:
/// the host runs it on every answer, and its time counts against the call's.
/// An answer without learner or standby rows costs one pass over the active
/// owners; rows grouped by task (as assignors emit them) need no table
/// sized by the task count.
///
/// `input` must have passed [`check_input`].
pub fn check_assignment(
    input: &GroupInput,
    out: &Assignment,
    rows_max: usize,
) -> Result<(), InvalidAssignment> {
    let offsets = input.topic_offsets();
    let task_count = *offsets.last().unwrap_or(&0) as usize;
    if out.active_owner.len() != task_count {
        return Err(InvalidAssignment::WrongTaskCount {
            expected: task_count,
            got: out.active_owner.len(),
        });
    }
    let readers = Readers::new(input);
    check_active_owners(input, &offsets, &readers, &out.active_owner)?;
    let roles = [
        (Role::Learner, &out.learners),
        (Role::Standby, &out.standbys),
    ];
    for (role, rows) in roles {
        if rows.task.len() != rows.member.len() {
            return Err(InvalidAssignment::ColumnLengthMismatch { role });
        }
        if rows.len() > rows_max {
            return Err(InvalidAssignment::TooManyRows {
                role,
                rows: rows.len(),
                max: rows_max,
            });
        }
    }
    if out.learners.is_empty() && out.standbys.is_empty() {
        return Ok(());
    }
    for (role, rows) in roles {
        check_placements(input, &offsets, &readers, &out.active_owner, role, rows)?;
    }
    let duplicate = if out.learners.task.is_sorted() && out.standbys.task.is_sorted() {
        first_duplicate_grouped(&out.learners, &out.standbys)
    } else {
        first_duplicate_counted(&out.learners, &out.standbys, task_count)
    };
    match duplicate {
        Some(Placement { role, task, member }) => {
            let (topic, partition) = locate(input, &offsets, task);
            Err(InvalidAssignment::Duplicate {
                role,
                member: input.members[member as usize].id.clone(),
                topic,
                partition,
            })
        }
        None => Ok(()),
    }
}

/// Who subscribes to what, in the shapes the checks read once per task or
/// row.
struct Readers {
    topic_count: usize,
    /// `by_set[set * topic_count + topic]`: one flag per (subscription set,
    /// topic), so that a check is O(1) however many topics a member reads.
    by_set: Vec<bool>,
    /// Every member's subscription set, so that a row's check does not go
    /// through the member records.
    member_set: Vec<u32>,
    /// Per topic: some member subscribes to it.
    by_some: Vec<bool>,
    /// Per topic: every member subscribes to it.
    by_all: Vec<bool>,
}

impl Readers {
    fn new(input: &GroupInput) -> Self {
        let topic_count = input.topics.len();
        let mut by_set = vec![false; input.subscriptions.len() * topic_count];
        for (set, topics) in input.subscriptions.iter().enumerate() {
            for &t in topics {
                by_set[set * topic_count + t as usize] = true;
            }
        }
        let member_set: Vec<u32> = input.members.iter().map(|m| m.subscription).collect();
        let mut set_used = vec![false; input.subscriptions.len()];
        for &set in &member_set {
            set_used[set as usize] = true;
        }
        let sets_used = set_used.iter().filter(|used| **used).count();
        let mut set_count = vec![0usize; topic_count];
        for (topics, _) in input
            .subscriptions
            .iter()
            .zip(&set_used)
            .filter(|(_, used)| **used)
        {
            for &t in topics {
                set_count[t as usize] += 1;
            }
        }
        Readers {
            topic_count,
            by_set,
            member_set,
            by_some: set_count.iter().map(|&n| n > 0).collect(),
            by_all: set_count.iter().map(|&n| n == sets_used).collect(),
        }
    }

    /// Whether `member` (an index in range) subscribes to `topic`.
    fn subscribes(&self, member: u32, topic: u32) -> bool {
        let set = self.member_set[member as usize] as usize;
        self.by_set[set * self.topic_count + topic as usize]
    }

    /// Whether every member subscribes to every topic.
    fn all_read_everything(&self) -> bool {
        self.by_all.iter().all(|&all| all)
    }
}

/// The topic index of `task`, which must be in range.
fn topic_of(offsets: &[u32], task: u32) -> u32 {
    offsets.partition_point(|&o| o <= task) as u32 - 1
}

/// The topic name and partition of `task`, for an error message.
fn locate(input: &GroupInput, offsets: &[u32], task: u32) -> (String, u32) {
    let topic = topic_of(offsets, task) as usize;
    (input.topics[topic].name.clone(), task - offsets[topic])
}

/// Every task of a subscribed topic has an active owner, and every owner is
/// a member that subscribes to the task's topic; the first task that breaks
/// this, in task order, is the error.
fn check_active_owners(
    input: &GroupInput,
    offsets: &[u32],
    readers: &Readers,
    active_owner: &[u32],
) -> Result<(), InvalidAssignment> {
    let member_count = input.members.len() as u32;
    for (t, topic) in input.topics.iter().enumerate() {
        let owners = &active_owner[offsets[t] as usize..offsets[t + 1] as usize];
        // When every member reads the topic, an owner is valid exactly when
        // it is a member index (NO_MEMBER is not one): one pass that the
        // compiler vectorizes. Otherwise, or when it fails, the task-by-task
        // loop below finds the first bad task and its error.
        if readers.by_all[t] && owners.iter().fold(0, |max, &o| max.max(o)) < member_count {
            continue;
        }
        for (partition, &owner) in owners.iter().enumerate() {
            if owner == NO_MEMBER {
                if readers.by_some[t] {
                    return Err(InvalidAssignment::Unassigned {
                        topic: topic.name.clone(),
                        partition: partition as u32,
                    });
                }
                continue;
            }
            if owner >= member_count {
                return Err(InvalidAssignment::UnknownMember {
                    role: Role::Active,
                    member: owner,
                });
            }
            if !readers.subscribes(owner, t as u32) {
                return Err(InvalidAssignment::NotSubscribed {
                    role: Role::Active,
                    member: input.members[owner as usize].id.clone(),
                    topic: topic.name.clone(),
                    partition: partition as u32,
                });
            }
        }
    }
    Ok(())
}

/// Each row of one role on its own: a known task and member, a member that
/// subscribes to the task's topic and is not its active owner. The first
/// row that breaks this, in row order, is the error.
fn check_placements(
    input: &GroupInput,
    offsets: &[u32],
    readers: &Readers,
    active_owner: &[u32],
    role: Role,
    rows: &TaskMembers,
) -> Result<(), InvalidAssignment> {
    let member_count = input.members.len() as u32;
    let task_count = active_owner.len();
    // With every member reading every topic, no row needs its topic.
    let all_read_everything = readers.all_read_everything();
    for (task, member) in rows.iter() {
        if task as usize >= task_count {
            return Err(InvalidAssignment::UnknownTask { role, task });
        }
        if member >= member_count {
            return Err(InvalidAssignment::UnknownMember { role, member });
        }
        let subscribed = all_read_everything || readers.subscribes(member, topic_of(offsets, task));
        if subscribed && active_owner[task as usize] != member {
            continue;
        }
        let (topic, partition) = locate(input, offsets, task);
        let member = input.members[member as usize].id.clone();
        return Err(if subscribed {
            InvalidAssignment::OnActiveOwner {
                role,
                member,
                topic,
                partition,
            }
        } else {
            InvalidAssignment::NotSubscribed {
                role,
                member,
                topic,
                partition,
            }
        });
    }
    Ok(())
}

/// A learner or standby row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Placement {
    role: Role,
    task: u32,
    member: u32,
}

/// Which placement is the duplicate: the lowest task with one, in it the
/// lowest member placed twice, and the role of that member's second
/// placement (learners before standbys). The rows of one task are entries
/// `member << 1 | role`, learner 0 and standby 1, which this sorts.
fn duplicate_in(task: u32, placements: &mut [u64]) -> Option<Placement> {
    if placements.len() < 2 {
        return None;
    }
    placements.sort_unstable();
    let pair = placements.windows(2).find(|p| p[0] >> 1 == p[1] >> 1)?;
    Some(Placement {
        role: if pair[1] & 1 == 0 {
            Role::Learner
        } else {
            Role::Standby
        },
        task,
        member: (pair[1] >> 1) as u32,
    })
}

/// The duplicate ([`duplicate_in`]) when the learners and the standbys are
/// each in ascending task order: both are walked together, a task at a
/// time, with no table sized by the task count.
fn first_duplicate_grouped(learners: &TaskMembers, standbys: &TaskMembers) -> Option<Placement> {
    let run_end = |tasks: &[u32], from: usize, task: u32| {
        from + tasks[from..].iter().take_while(|&&t| t == task).count()
    };
    let mut placements = Vec::new();
    let (mut l, mut s) = (0, 0);
    while l < learners.len() || s < standbys.len() {
        let task = match (learners.task.get(l), standbys.task.get(s)) {
            (Some(&a), Some(&b)) => a.min(b),
            (Some(&a), None) => a,
            (None, Some(&b)) => b,
            (None, None) => unreachable!("the loop stops when both are done"),
        };
        let (l_end, s_end) = (
            run_end(&learners.task, l, task),
            run_end(&standbys.task, s, task),
        );
        if l_end - l + s_end - s >= 2 {
            placements.clear();
            let learners = learners.member[l..l_end].iter().map(|&m| u64::from(m) << 1);
            let standbys = standbys.member[s..s_end]
                .iter()
                .map(|&m| u64::from(m) << 1 | 1);
            placements.extend(learners.chain(standbys));
            if let Some(duplicate) = duplicate_in(task, &mut placements) {
                return Some(duplicate);
            }
        }
        (l, s) = (l_end, s_end);
    }
    None
}

/// The duplicate ([`duplicate_in`]) for rows in any order: a counting sort
/// by task, so no hash set of every row. Every row's task must be below
/// `task_count`.
fn first_duplicate_counted(
    learners: &TaskMembers,
    standbys: &TaskMembers,
    task_count: usize,
) -> Option<Placement> {
    let roles = [learners, standbys];
    // ends[task]: one past the task's last slot in `by_task`. Filling each
    // task's slots from the back leaves ends[task] at its first slot.
    let mut ends = vec![0usize; task_count + 1];
    for rows in roles {
        for &task in &rows.task {
            ends[task as usize] += 1;
        }
    }
    let mut total = 0;
    for end in &mut ends {
        total += *end;
        *end = total;
    }
    let mut by_task = vec![0u64; total];
    for (role_bit, rows) in roles.into_iter().enumerate() {
        for (task, member) in rows.iter() {
            let end = &mut ends[task as usize];
            *end -= 1;
            by_task[*end] = u64::from(member) << 1 | role_bit as u64;
        }
    }
    (0..task_count)
        .find_map(|task| duplicate_in(task as u32, &mut by_task[ends[task]..ends[task + 1]]))
}

#[cfg(test)]
mod tests;
