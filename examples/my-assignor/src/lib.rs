//! pin-topics: give whole topics to dedicated members.
//!
//! `pin=payments:worker-c` puts every partition of `payments` on the member
//! named `worker-c` (a static member name, or a member id) and keeps that
//! member free of everything else. Several pins are separated by commas:
//! `pin=payments:worker-c,audit:worker-d`. Every other task is balanced over
//! the members that are not pinned, and stays on its current owner while
//! that owner has no more than its fair share. A pin whose member is not in
//! the group (or does not subscribe to the topic) is ignored with a
//! warning, so the topic's tasks are never left without an owner.

use assignd_guest_sdk::{
    AssignError, Assignment, Assignor, GroupIndex, GroupInput, Info, NO_MEMBER, log,
};

pub struct PinTopics;

impl Assignor for PinTopics {
    fn info() -> Info {
        Info::new(
            "pin-topics",
            "0.1.0",
            "whole topics on dedicated members (param pin=TOPIC:MEMBER,...); \
             the rest balanced over the other members, keeping current owners",
        )
        .with_param(
            "pin",
            "",
            "comma-separated TOPIC:MEMBER pairs; MEMBER is a member name or id",
        )
    }

    fn assign(input: &GroupInput) -> Result<Assignment, AssignError> {
        let index = GroupIndex::new(input);
        let mut out = input.empty_assignment();
        let mut load = vec![0u32; input.members.len()];

        // 1. The pins: topic index -> the member it is pinned to.
        let mut pinned_to = vec![NO_MEMBER; input.topics.len()];
        let mut dedicated = vec![false; input.members.len()];
        for pair in input.param("pin", "").split(',').map(str::trim) {
            if pair.is_empty() {
                continue;
            }
            let Some((topic_name, member_name)) = pair.split_once(':') else {
                return Err(AssignError::InvalidParam(format!(
                    "pin: expected TOPIC:MEMBER, got {pair:?}"
                )));
            };
            let topic = input.topic_index(topic_name);
            let member = input
                .members
                .iter()
                .position(|m| m.name.as_deref() == Some(member_name) || m.id == member_name);
            match (topic, member) {
                (Some(t), Some(m)) if input.subscribes(&input.members[m], t) => {
                    pinned_to[t as usize] = m as u32;
                    dedicated[m] = true;
                }
                _ => log::warn(&format!(
                    "pin {pair} ignored: {member_name:?} is not a member subscribed to \
                     {topic_name:?}; the topic is balanced instead"
                )),
            }
        }
        for (t, &m) in pinned_to.iter().enumerate() {
            if m != NO_MEMBER {
                for task in index.topic_tasks(t as u32) {
                    out.active_owner[task as usize] = m;
                    load[m as usize] += 1;
                }
            }
        }

        // 2. Who may take each other topic's tasks: its subscribers that are
        //    not dedicated (or all of them, if every one is).
        let candidates: Vec<Vec<u32>> = index
            .topic_subscribers
            .iter()
            .map(|subscribers| {
                let free: Vec<u32> = subscribers
                    .iter()
                    .copied()
                    .filter(|&m| !dedicated[m as usize])
                    .collect();
                if free.is_empty() {
                    subscribers.clone()
                } else {
                    free
                }
            })
            .collect();
        let rest: Vec<u32> = (0..index.task_count() as u32)
            .filter(|&task| {
                let t = index.task_topic[task as usize] as usize;
                pinned_to[t] == NO_MEMBER && !candidates[t].is_empty()
            })
            .collect();
        let free_members = dedicated.iter().filter(|&&d| !d).count().max(1);
        let fair_share = rest.len().div_ceil(free_members) as u32;

        // 3. Keep a task where it is while its owner is within its share;
        //    then give each remaining task to the least-loaded candidate.
        let mut moving = Vec::new();
        for task in rest {
            let t = index.task_topic[task as usize] as usize;
            let owner = input.active_owner[task as usize];
            if candidates[t].contains(&owner) && load[owner as usize] < fair_share {
                out.active_owner[task as usize] = owner;
                load[owner as usize] += 1;
            } else {
                moving.push(task);
            }
        }
        for &task in &moving {
            let t = index.task_topic[task as usize] as usize;
            let &m = candidates[t]
                .iter()
                .min_by_key(|&&m| (load[m as usize], m))
                .expect("rest holds only tasks with candidates");
            out.active_owner[task as usize] = m;
            load[m as usize] += 1;
        }

        let changed = (out.active_owner.iter())
            .zip(&input.active_owner)
            .filter(|(new, old)| new != old)
            .count();
        log::info(&format!(
            "{} topics pinned; {changed} of {} tasks change owner",
            pinned_to.iter().filter(|&&m| m != NO_MEMBER).count(),
            out.active_owner.len(),
        ));
        Ok(out)
    }
}

assignd_guest_sdk::export_assignor!(PinTopics);
