//! A test guest that answers a plain round-robin assignment (each topic's
//! partition `p` on the `p mod n`-th of its `n` subscribers, in input order;
//! so that it passes the registry's self-test and can be uploaded) unless
//! the group binds it with a param that tells it to go wrong:
//!
//! - `spin=yes`: `assign` loops forever, logging a line first, until the
//!   host's fuel or time limit stops it;
//! - `trap=yes`: `assign` panics with [`TRAP_MESSAGE`] (the SDK's panic hook
//!   logs the message, then the guest traps);
//! - `standbys=N`: the round-robin answer plus, for each task, standbys on
//!   the `N` subscribers after its owner (as many as there are): a valid
//!   answer of any size, for the host's cap on rows per task.
//!
//! It exists so the host's end-to-end tests can bind a group to a guest
//! that goes wrong only once live, and check that the failure is visible on
//! the group while another group keeps being served; its round-robin answer
//! also serves as an uploaded assignor distinct from the built-ins.

use assignd_guest_sdk::{AssignError, Assignment, Assignor, GroupInput, Info, NO_MEMBER};

/// The panic message of `trap=yes`, for tests that look for it.
pub const TRAP_MESSAGE: &str = "spin-when-told: told to trap";

pub struct SpinWhenTold;

impl Assignor for SpinWhenTold {
    fn info() -> Info {
        Info::new(
            "spin-when-told",
            "0.1.0",
            "test guest: round-robin, an endless loop with spin=yes, a panic with trap=yes, \
             N standbys per task with standbys=N",
        )
    }

    fn assign(input: &GroupInput) -> Result<Assignment, AssignError> {
        if input.param("trap", "no") == "yes" {
            panic!("{TRAP_MESSAGE}");
        }
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
        let mut out = Assignment {
            active_owner,
            ..Assignment::default()
        };
        let standbys = input.param_u64("standbys", 0)? as usize;
        for (topic, &offset) in offsets.iter().enumerate().take(input.topics.len()) {
            let subscribers: Vec<u32> = (0..input.members.len() as u32)
                .filter(|&m| input.subscribes(&input.members[m as usize], topic as u32))
                .collect();
            for p in 0..input.topics[topic].partitions as usize {
                for k in 1..=standbys.min(subscribers.len().saturating_sub(1)) {
                    let member = subscribers[(p + k) % subscribers.len()];
                    out.standbys.push(offset + p as u32, member);
                }
            }
        }
        Ok(out)
    }
}

assignd_guest_sdk::export_assignor!(SpinWhenTold);
