//! A test guest that answers a plain round-robin assignment (so that it
//! passes the registry's self-test and can be uploaded) unless the group
//! binds it with the param `spin=yes`: then `assign` loops forever, logging
//! a line first, until the host's fuel or time limit stops it.
//!
//! It exists so the host's end-to-end tests can bind a group to a guest
//! that goes wrong only once live, and check that the failure is visible on
//! the group while another group keeps being served.

use assignd_guest_sdk::{AssignError, Assignment, Assignor, GroupInput, Info, NO_MEMBER};

pub struct SpinWhenTold;

impl Assignor for SpinWhenTold {
    fn info() -> Info {
        Info::new(
            "spin-when-told",
            "0.1.0",
            "test guest: round-robin, or an endless loop with the param spin=yes",
        )
    }

    fn assign(input: &GroupInput) -> Result<Assignment, AssignError> {
        if input.param("spin", "no") == "yes" {
            assignd_guest_sdk::log::warn("told to spin");
            let mut counter = 0u64;
            loop {
                counter = std::hint::black_box(counter).wrapping_add(1);
            }
        }
        let offsets = input.topic_offsets();
        let mut active_owner = vec![NO_MEMBER; input.task_count()];
        for (topic, &offset) in offsets.iter().enumerate().take(input.topics.len()) {
            let subscribers: Vec<u32> = (0..input.members.len() as u32)
                .filter(|&m| input.subscribes(&input.members[m as usize], topic as u32))
                .collect();
            if subscribers.is_empty() {
                continue;
            }
            let partitions = input.topics[topic].partitions;
            for p in 0..partitions {
                active_owner[(offset + p) as usize] = subscribers[p as usize % subscribers.len()];
            }
        }
        Ok(Assignment {
            active_owner,
            ..Assignment::default()
        })
    }
}

assignd_guest_sdk::export_assignor!(SpinWhenTold);
