//! A test guest of the assignor interface 0.2 that shows what loads it was
//! given, for the host's tests of the versions it runs:
//!
//! - by default every task goes to the subscriber of its topic with the
//!   largest `load_capacity` (members without one count as 0; the first of
//!   equals wins), so an answer shows which capacities arrived;
//! - with `echo=yes`, on an input with a load unit, it refuses, its message
//!   [`echo`] naming the unit, the known loads as `topic-partition=load` and
//!   the members' capacities and utilisations, so a test can read what the
//!   host sent. (Without a unit it answers as by default: the host checks
//!   params at bind on an input of its own, without loads.)

use assignd_guest_sdk::{
    AssignError, Assignment, Assignor, Capabilities, GroupIndex, GroupInput, Info,
};

pub struct LoadEcho;

impl Assignor for LoadEcho {
    fn info() -> Info {
        Info::new(
            "load-echo",
            "0.2.0",
            "every task to the subscriber with the largest load capacity; echo=yes: refuses naming the loads it got",
        )
        .with_capabilities(Capabilities {
            load: true,
            ..Capabilities::default()
        })
        .with_param("echo", "no", "yes: refuse with a message naming the loads")
    }

    fn assign(input: &GroupInput) -> Result<Assignment, AssignError> {
        if input.param("echo", "no") == "yes" && input.load_unit.is_some() {
            return Err(AssignError::Failed(echo(input)));
        }
        let index = GroupIndex::new(input);
        let capacity = |m: u32| input.members[m as usize].load_capacity.unwrap_or(0.0);
        let mut out = input.empty_assignment();
        for (topic, subscribers) in index.topic_subscribers.iter().enumerate() {
            // The first of the largest: `max_by` keeps the last of equals.
            let Some(&best) = subscribers
                .iter()
                .rev()
                .max_by(|&&a, &&b| capacity(a).total_cmp(&capacity(b)))
            else {
                continue;
            };
            for task in index.topic_tasks(topic as u32) {
                out.active_owner[task as usize] = best;
            }
        }
        Ok(out)
    }
}

/// `load_unit=U loads=[orders-0=1.5 …] members=[a:cap=500:util=0.7 …]`:
/// the loads in task order, the members in input order (`-` for none).
pub fn echo(input: &GroupInput) -> String {
    let offsets = input.topic_offsets();
    let mut loads: Vec<(u32, f64)> = input.loads.iter().collect();
    loads.sort_by_key(|row| row.0);
    let loads: Vec<String> = loads
        .into_iter()
        .map(|(task, load)| {
            let topic = offsets.partition_point(|&o| o <= task) - 1;
            let partition = task - offsets[topic];
            format!("{}-{partition}={load}", input.topics[topic].name)
        })
        .collect();
    let shown = |value: Option<f64>| value.map_or("-".to_owned(), |v| v.to_string());
    let members: Vec<String> = input
        .members
        .iter()
        .map(|m| {
            format!(
                "{}:cap={}:util={}",
                m.id,
                shown(m.load_capacity),
                shown(m.utilisation)
            )
        })
        .collect();
    format!(
        "load_unit={} loads=[{}] members=[{}]",
        input.load_unit.as_deref().unwrap_or("-"),
        loads.join(" "),
        members.join(" ")
    )
}

assignd_guest_sdk::export_assignor!(LoadEcho);

#[cfg(test)]
mod tests {
    use super::*;
    use assignd_guest_sdk::harness;
    use assignd_guest_sdk::testing::{GroupSpec, Subscriptions, group};

    fn input() -> GroupInput {
        let mut input = group(&GroupSpec::grid(3, 2, 2, Subscriptions::Homogeneous));
        input.load_unit = Some("records/s".into());
        input.members[1].load_capacity = Some(500.0);
        input.members[2].load_capacity = Some(500.0);
        input.members[2].utilisation = Some(0.25);
        input.loads.push(4, 2.5);
        input.loads.push(0, 120.0);
        input
    }

    #[test]
    fn every_task_goes_to_the_first_largest_capacity() {
        let out = harness::run::<LoadEcho>(&input()).unwrap();
        assert_eq!(out.active_owner, vec![1; 6]);
    }

    #[test]
    fn echo_names_the_loads_in_task_order() {
        assert_eq!(
            echo(&input()),
            "load_unit=records/s loads=[topic-0-0=120 topic-1-1=2.5] \
             members=[member-0:cap=-:util=- member-1:cap=500:util=- member-2:cap=500:util=0.25]"
        );
    }
}
