//! Task lists in either of their two JSON forms, the writer and the reader
//! both sides use. A list is a JSON array whose items are tasks
//! `[topic, partition]` or, in the compact form, ranges `[topic, first,
//! last]` (partitions first to last, both included): a member of a
//! million tasks (10 topics × 100,000 partitions) sends and gets its lists
//! in a few hundred bytes instead of 17 MB.
//!
//! The writer writes pairs only, or each run of consecutive partitions of
//! a topic as one range (a lone task still as a pair). The reader takes
//! either form, item by item, and expands the ranges, refusing a list of
//! more than [`TASKS_PER_LIST_MAX`] tasks before it expands the range that
//! would pass it, and a range that ends before it starts.

use serde::de::{Error as _, IgnoredAny, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::{TASKS_PER_LIST_MAX, Task};

/// Writes `tasks` as `[topic, partition]` items or, with `ranges`, each
/// run of consecutive partitions of a topic as `[topic, first, last]`. Runs
/// are found in the order given, so sorted tasks give the fewest items.
pub fn write<S: Serializer>(
    tasks: &[Task],
    ranges: bool,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    if !ranges {
        return tasks.serialize(serializer);
    }
    let mut runs: Vec<(&str, u32, u32)> = Vec::new();
    for task in tasks {
        match runs.last_mut() {
            Some((topic, _, last))
                if *topic == task.topic && last.checked_add(1) == Some(task.partition) =>
            {
                *last = task.partition;
            }
            _ => runs.push((&task.topic, task.partition, task.partition)),
        }
    }
    let mut seq = serializer.serialize_seq(Some(runs.len()))?;
    for (topic, first, last) in runs {
        if first == last {
            seq.serialize_element(&(topic, first))?;
        } else {
            seq.serialize_element(&(topic, first, last))?;
        }
    }
    seq.end()
}

/// `tasks` written by [`write`]: a task list inside a body.
pub(crate) struct TaskList<'a> {
    pub tasks: &'a [Task],
    pub ranges: bool,
}

impl Serialize for TaskList<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        write(self.tasks, self.ranges, serializer)
    }
}

/// `serialize_with` of an optional list sent compact (`null` when absent).
pub(crate) fn write_optional_ranges<S: Serializer>(
    tasks: &Option<Vec<Task>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match tasks {
        Some(tasks) => write(tasks, true, serializer),
        None => serializer.serialize_none(),
    }
}

/// Reads a task list in either form, ranges expanded.
pub fn read<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Task>, D::Error> {
    Ok(read_optional(deserializer)?.unwrap_or_default())
}

/// Reads an optional task list in either form: `null` is `None`.
pub fn read_optional<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<Task>>, D::Error> {
    deserializer.deserialize_option(Items)
}

struct Items;

impl<'de> Visitor<'de> for Items {
    type Value = Option<Vec<Task>>;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a list of [topic, partition] or [topic, first, last]")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut tasks = Vec::new();
        while let Some(Item(topic, first, last)) = seq.next_element::<Item>()? {
            if first > last {
                return Err(A::Error::custom(format!(
                    "the range [{topic:?}, {first}, {last}] ends before it starts"
                )));
            }
            if tasks.len() as u64 + u64::from(last - first) + 1 > TASKS_PER_LIST_MAX {
                return Err(A::Error::custom(format!(
                    "more than {TASKS_PER_LIST_MAX} tasks in one list"
                )));
            }
            tasks.extend((first..=last).map(|partition| Task::new(topic.clone(), partition)));
        }
        Ok(Some(tasks))
    }
}

/// One item: `[topic, partition]` as `(topic, partition, partition)`, or
/// `[topic, first, last]`.
pub(crate) struct Item(pub String, pub u32, pub u32);

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ItemVisitor;
        impl<'de> Visitor<'de> for ItemVisitor {
            type Value = Item;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("[topic, partition] or [topic, first, last]")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Item, A::Error> {
                let topic: String = seq
                    .next_element()?
                    .ok_or_else(|| A::Error::invalid_length(0, &self))?;
                let first: u32 = seq
                    .next_element()?
                    .ok_or_else(|| A::Error::invalid_length(1, &self))?;
                let last: u32 = seq.next_element()?.unwrap_or(first);
                if seq.next_element::<IgnoredAny>()?.is_some() {
                    return Err(A::Error::invalid_length(4, &self));
                }
                Ok(Item(topic, first, last))
            }
        }
        deserializer.deserialize_seq(ItemVisitor)
    }
}
