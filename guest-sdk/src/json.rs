//! The offline JSON contract of docs/design.md: a `GroupInput` document in, an
//! `Assignment` document out. Parsing turns names into the dense indices of
//! [`crate::model`] and refuses anything ambiguous with a message that names
//! the member, topic or partition at fault.

use std::collections::{BTreeMap, HashMap};

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::model::{Assignment, GroupInput, Member, NO_MEMBER, TaskLoads, TaskMembers, Topic};
use crate::validate::{InputLimits, InvalidInput, check_input};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InputDoc {
    topics: Map<String, Value>,
    members: Vec<MemberDoc>,
    #[serde(default)]
    params: Map<String, Value>,
    #[serde(default)]
    load_unit: Option<String>,
    /// Rows `[topic, partition, load]`.
    #[serde(default)]
    loads: Vec<(String, i64, f64)>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemberDoc {
    id: String,
    #[serde(default)]
    name: Option<String>,
    topics: Vec<String>,
    #[serde(default)]
    rack: Option<String>,
    #[serde(default)]
    capacity: Option<i64>,
    #[serde(default)]
    active: Vec<(String, i64)>,
    #[serde(default)]
    learner: Vec<(String, i64)>,
    #[serde(default)]
    standby: Vec<(String, i64)>,
    #[serde(default)]
    lags: Vec<(String, i64, i64)>,
    #[serde(default)]
    load_capacity: Option<f64>,
    #[serde(default)]
    utilisation: Option<f64>,
}

fn invalid<T>(message: String) -> Result<T, InvalidInput> {
    Err(InvalidInput(message))
}

/// Parses a GroupInput JSON document and checks it against `limits`.
pub fn parse_input(text: &str, limits: &InputLimits) -> Result<GroupInput, InvalidInput> {
    let doc: InputDoc = serde_json::from_str(text).map_err(|e| InvalidInput(e.to_string()))?;
    // Counts are checked by `check_input` at the end; only what sizes an
    // allocation here (partitions per topic, tasks in all) is checked first.
    let mut topics = Vec::with_capacity(doc.topics.len());
    for (name, count) in &doc.topics {
        let partitions = match count.as_i64() {
            Some(n) if n < 0 => {
                return invalid(format!("topic {name:?}: partition count {n} is negative"));
            }
            Some(n) if n > i64::from(limits.partitions_per_topic_max) => {
                return invalid(format!(
                    "topic {name:?}: partition count {n} is more than the limit of {}",
                    limits.partitions_per_topic_max
                ));
            }
            Some(n) => n as u32,
            None => {
                return invalid(format!(
                    "topic {name:?}: partition count must be a whole number, got {count}"
                ));
            }
        };
        topics.push(Topic {
            name: name.clone(),
            partitions,
        });
    }
    let topic_index: HashMap<&str, u32> = topics
        .iter()
        .enumerate()
        .map(|(i, t)| (t.name.as_str(), i as u32))
        .collect();
    let mut offsets = Vec::with_capacity(topics.len() + 1);
    let mut total = 0usize;
    for t in &topics {
        offsets.push(total as u32);
        total += t.partitions as usize;
        if total > limits.tasks_max {
            return invalid(format!(
                "more than the limit of {} tasks in all",
                limits.tasks_max
            ));
        }
    }
    // A task of a topic or partition that no longer exists is dropped, as
    // Kafka drops owned partitions of deleted topics: the member may not
    // have heard of the change yet.
    let task_of = |member: &str, field: &str, topic: &str, partition: i64| {
        if partition < 0 {
            return invalid(format!(
                "member {member:?}: {field} names partition {partition} of {topic:?}, which is negative"
            ));
        }
        let Some(&t) = topic_index.get(topic) else {
            return Ok(None);
        };
        if partition >= i64::from(topics[t as usize].partitions) {
            return Ok(None);
        }
        Ok(Some(offsets[t as usize] + partition as u32))
    };

    let mut input = GroupInput {
        active_owner: vec![NO_MEMBER; total],
        ..GroupInput::default()
    };
    let mut member_ids: HashMap<&str, u32> = HashMap::new();
    let mut subscription_sets: HashMap<Vec<u32>, u32> = HashMap::new();
    for (m, doc_member) in doc.members.iter().enumerate() {
        let m = m as u32;
        let id = doc_member.id.as_str();
        if member_ids.insert(id, m).is_some() {
            return invalid(format!("member id {id:?} appears twice"));
        }
        let mut subscribed: Vec<u32> = Vec::with_capacity(doc_member.topics.len());
        // A subscription is a wish: a topic not in `topics` gives nothing
        // until it exists.
        for name in &doc_member.topics {
            if let Some(&t) = topic_index.get(name.as_str()) {
                subscribed.push(t);
            }
        }
        subscribed.sort_unstable();
        subscribed.dedup();
        let capacity = match doc_member.capacity {
            None => 1,
            Some(c) if (1..=i64::from(u32::MAX)).contains(&c) => c as u32,
            Some(c) => {
                return invalid(format!(
                    "member {id:?}: capacity {c} must be a whole number of at least 1"
                ));
            }
        };
        for (topic, partition) in &doc_member.active {
            let Some(task) = task_of(id, "active", topic, *partition)? else {
                continue;
            };
            let owner = &mut input.active_owner[task as usize];
            if *owner != NO_MEMBER {
                return invalid(format!(
                    "task {topic}-{partition} is active on two members: {:?} and {id:?}",
                    doc.members[*owner as usize].id
                ));
            }
            *owner = m;
        }
        for (field, rows, out) in [
            ("learner", &doc_member.learner, &mut input.learners),
            ("standby", &doc_member.standby, &mut input.standbys),
        ] {
            for (topic, partition) in rows {
                if let Some(task) = task_of(id, field, topic, *partition)? {
                    out.push(task, m);
                }
            }
        }
        let mut seen_lags = std::collections::HashSet::new();
        for (topic, partition, lag) in &doc_member.lags {
            let Some(task) = task_of(id, "lags", topic, *partition)? else {
                continue;
            };
            if *lag < 0 {
                return invalid(format!(
                    "member {id:?}: lag {lag} for {topic}-{partition} is negative"
                ));
            }
            if !seen_lags.insert(task) {
                return invalid(format!(
                    "member {id:?}: lags give {topic}-{partition} more than once"
                ));
            }
            input.lags.push(task, m, *lag as u64);
        }
        let next_set = input.subscriptions.len() as u32;
        let subscription = *subscription_sets
            .entry(subscribed.clone())
            .or_insert(next_set);
        if subscription == next_set {
            input.subscriptions.push(subscribed);
        }
        input.members.push(Member {
            id: doc_member.id.clone(),
            name: doc_member.name.clone(),
            rack: doc_member.rack.clone(),
            capacity,
            subscription,
            load_capacity: doc_member.load_capacity,
            utilisation: doc_member.utilisation,
        });
    }
    input.topics = topics;
    input.load_unit = doc.load_unit;
    input.loads = parse_loads(&input, &doc.loads)?;
    for (key, value) in doc.params {
        let value = match value {
            Value::String(s) => s,
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            other => {
                return invalid(format!(
                    "param {key:?} must be a string, number or boolean, got {other}"
                ));
            }
        };
        input.params.insert(key, value);
    }
    check_input(&input, limits)?;
    Ok(input)
}

/// The `loads` rows `[topic, partition, load]` as task rows, in the order
/// given. A row of a topic or partition that does not exist is dropped (a
/// report may predate the change); the values are checked by
/// `check_input`.
fn parse_loads(input: &GroupInput, rows: &[(String, i64, f64)]) -> Result<TaskLoads, InvalidInput> {
    let offsets = input.topic_offsets();
    let mut loads = TaskLoads::default();
    for (topic, partition, load) in rows {
        if *partition < 0 {
            return invalid(format!(
                "loads: partition {partition} of {topic:?} is negative"
            ));
        }
        let Some(t) = input.topic_index(topic) else {
            continue;
        };
        if *partition < i64::from(input.topics[t as usize].partitions) {
            loads.push(offsets[t as usize] + *partition as u32, *load);
        }
    }
    Ok(loads)
}

/// Parses `key=value` command-line params, later ones overriding `base`.
pub fn merge_params(
    base: &mut BTreeMap<String, String>,
    pairs: &[String],
) -> Result<(), InvalidInput> {
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            return invalid(format!("param {pair:?} is not of the form KEY=VALUE"));
        };
        if key.is_empty() {
            return invalid(format!("param {pair:?} has an empty key"));
        }
        base.insert(key.to_owned(), value.to_owned());
    }
    Ok(())
}

fn task_pair(input: &GroupInput, offsets: &[u32], task: u32) -> Value {
    let topic = offsets.partition_point(|&o| o <= task) - 1;
    json!([input.topics[topic].name, task - offsets[topic]])
}

/// Renders an assignment as the Assignment document: every member of the
/// input present, in input order, each list in task order.
pub fn assignment_to_json(input: &GroupInput, out: &Assignment) -> Value {
    let offsets = input.topic_offsets();
    let mut per_member: Vec<[Vec<u32>; 3]> = vec![Default::default(); input.members.len()];
    for (task, &owner) in out.active_owner.iter().enumerate() {
        if let Some(lists) = per_member.get_mut(owner as usize) {
            lists[0].push(task as u32);
        }
    }
    for (slot, rows) in [(1, &out.learners), (2, &out.standbys)] {
        for (task, member) in rows.iter() {
            if let Some(lists) = per_member.get_mut(member as usize) {
                lists[slot].push(task);
            }
        }
    }
    let mut doc = Map::with_capacity(input.members.len());
    for (member, mut lists) in input.members.iter().zip(per_member) {
        let mut entry = Map::new();
        for (key, tasks) in ["active", "learner", "standby"]
            .into_iter()
            .zip(lists.iter_mut())
        {
            tasks.sort_unstable();
            let pairs = tasks
                .iter()
                .map(|&t| task_pair(input, &offsets, t))
                .collect();
            entry.insert(key.to_owned(), Value::Array(pairs));
        }
        doc.insert(member.id.clone(), Value::Object(entry));
    }
    Value::Object(doc)
}

/// Renders an input as the GroupInput document; `parse_input` of the result
/// gives back an equal input (up to row order).
pub fn input_to_json(input: &GroupInput) -> Value {
    let offsets = input.topic_offsets();
    let topics: Map<String, Value> = input
        .topics
        .iter()
        .map(|t| (t.name.clone(), json!(t.partitions)))
        .collect();
    let mut active = vec![Vec::new(); input.members.len()];
    for (task, &owner) in input.active_owner.iter().enumerate() {
        if let Some(tasks) = active.get_mut(owner as usize) {
            tasks.push(task_pair(input, &offsets, task as u32));
        }
    }
    let rows_of = |rows: &TaskMembers| {
        let mut per_member = vec![Vec::new(); input.members.len()];
        let mut sorted = rows.clone();
        sorted.sort();
        for (task, member) in sorted.iter() {
            per_member[member as usize].push(task_pair(input, &offsets, task));
        }
        per_member
    };
    let learners = rows_of(&input.learners);
    let standbys = rows_of(&input.standbys);
    let mut lags = vec![Vec::new(); input.members.len()];
    let mut lag_rows: Vec<(u32, u32, u64)> = input.lags.iter().collect();
    lag_rows.sort_unstable();
    for (task, member, lag) in lag_rows {
        let Value::Array(mut pair) = task_pair(input, &offsets, task) else {
            unreachable!("task_pair returns an array")
        };
        pair.push(json!(lag));
        lags[member as usize].push(Value::Array(pair));
    }
    let members: Vec<Value> = input
        .members
        .iter()
        .enumerate()
        .map(|(m, member)| {
            let mut doc = Map::new();
            doc.insert("id".into(), json!(member.id));
            if let Some(name) = &member.name {
                doc.insert("name".into(), json!(name));
            }
            let topic_names: Vec<&str> = input
                .topics_of(member)
                .iter()
                .map(|&t| input.topics[t as usize].name.as_str())
                .collect();
            doc.insert("topics".into(), json!(topic_names));
            if let Some(rack) = &member.rack {
                doc.insert("rack".into(), json!(rack));
            }
            doc.insert("capacity".into(), json!(member.capacity));
            if let Some(load_capacity) = member.load_capacity {
                doc.insert("load_capacity".into(), json!(load_capacity));
            }
            if let Some(utilisation) = member.utilisation {
                doc.insert("utilisation".into(), json!(utilisation));
            }
            doc.insert(
                "active".into(),
                Value::Array(std::mem::take(&mut active[m])),
            );
            doc.insert("learner".into(), Value::Array(learners[m].clone()));
            doc.insert("standby".into(), Value::Array(standbys[m].clone()));
            doc.insert("lags".into(), Value::Array(std::mem::take(&mut lags[m])));
            Value::Object(doc)
        })
        .collect();
    let mut doc = json!({"topics": topics, "members": members, "params": input.params});
    if let Some(unit) = &input.load_unit {
        doc["load_unit"] = json!(unit);
    }
    if !input.loads.is_empty() {
        doc["loads"] = loads_to_json(input, &offsets);
    }
    doc
}

/// The `loads` rows `[topic, partition, load]`, in task order.
fn loads_to_json(input: &GroupInput, offsets: &[u32]) -> Value {
    let mut rows: Vec<(u32, f64)> = input.loads.iter().collect();
    rows.sort_by_key(|row| row.0);
    rows.into_iter()
        .map(|(task, load)| {
            let Value::Array(mut row) = task_pair(input, offsets, task) else {
                unreachable!("task_pair returns an array")
            };
            row.push(json!(load));
            Value::Array(row)
        })
        .collect()
}

/// Parses an Assignment document against the input it answers (the inverse
/// of [`assignment_to_json`]); useful for tests that read `assignd run`
/// output.
pub fn parse_assignment(input: &GroupInput, text: &str) -> Result<Assignment, InvalidInput> {
    let doc: Map<String, Value> =
        serde_json::from_str(text).map_err(|e| InvalidInput(e.to_string()))?;
    let offsets = input.topic_offsets();
    let mut out = input.empty_assignment();
    for (id, entry) in &doc {
        let Some(m) = input.member_index(id) else {
            return invalid(format!("assignment names unknown member {id:?}"));
        };
        let lists: HashMap<String, Vec<(String, u32)>> = serde_json::from_value(entry.clone())
            .map_err(|e| InvalidInput(format!("member {id:?}: {e}")))?;
        for (field, pairs) in lists {
            for (topic, partition) in pairs {
                let Some(t) = input.topic_index(&topic) else {
                    return invalid(format!("member {id:?}: unknown topic {topic:?}"));
                };
                if partition >= input.topics[t as usize].partitions {
                    return invalid(format!("member {id:?}: no partition {topic}-{partition}"));
                }
                let task = offsets[t as usize] + partition;
                match field.as_str() {
                    "active" => out.active_owner[task as usize] = m,
                    "learner" => out.learners.push(task, m),
                    "standby" => out.standbys.push(task, m),
                    other => return invalid(format!("member {id:?}: unknown list {other:?}")),
                }
            }
        }
    }
    out.normalize();
    Ok(out)
}
