//! A test guest whose `assign` returns a well-formed but invalid answer,
//! one that the host's output validation
//! (`assignd_guest_sdk::validate::check_assignment`) must refuse.
//!
//! It exists so the host's end-to-end tests can show that an invalid answer
//! is never installed (invariant 7 of docs/design.md): the group keeps its last
//! good assignment and the validation error is visible. The group param
//! `mode` picks which rule to break, so that each validation error can be
//! triggered on purpose:
//!
//! | `mode` | answer | error |
//! |---|---|---|
//! | `unsubscribed` (default) | every task active on member 0; if member 0 subscribes to every topic with tasks, one task on another member that does not subscribe to its topic; if every member subscribes to every such topic, task 0 unowned instead | `NotSubscribed`, or `Unassigned` |
//! | `unassigned` | a valid answer with the first task of a subscribed topic (task 0 when its topic has subscribers) left without owner | `Unassigned` |
//! | `wrong-length` | a valid answer with `active_owner` one entry short (one entry too long when there are no tasks) | `WrongTaskCount` |
//! | `unknown-member` | a valid answer with task 0 on member index `members.len()` | `UnknownMember` |
//! | `learner-on-owner` | a valid answer plus a learner row on the active owner of the first owned task | `OnActiveOwner` |
//!
//! When the input cannot show the chosen error (no tasks, no members, no
//! subscribed topic), `assign` refuses with `UnsupportedInput` rather than
//! break a different rule, so a test never sees an error it did not ask
//! for. An unknown `mode` is an `InvalidParam`.

use assignd_guest_sdk::{AssignError, Assignment, Assignor, GroupInput, Info, NO_MEMBER};

/// The values of the `mode` param, default first.
pub const MODES: [&str; 5] = [
    "unsubscribed",
    "unassigned",
    "wrong-length",
    "unknown-member",
    "learner-on-owner",
];

pub struct InvalidOutput;

impl Assignor for InvalidOutput {
    fn info() -> Info {
        Info::new(
            "invalid-output",
            "0.1.0",
            "test guest: assign answers something the host must refuse, to exercise output \
             validation",
        )
        .with_param(
            "mode",
            MODES[0],
            "which rule to break: unsubscribed, unassigned, wrong-length, unknown-member or \
             learner-on-owner",
        )
    }

    fn assign(input: &GroupInput) -> Result<Assignment, AssignError> {
        match input.param("mode", MODES[0]) {
            "unsubscribed" => unsubscribed(input),
            "unassigned" => unassigned(input),
            "wrong-length" => Ok(wrong_length(input)),
            "unknown-member" => unknown_member(input),
            "learner-on-owner" => learner_on_owner(input),
            other => Err(AssignError::InvalidParam(format!(
                "mode {other:?} is not one of {}",
                MODES.join(", ")
            ))),
        }
    }
}

fn unsupported(mode: &str, needs: &str) -> Result<Assignment, AssignError> {
    Err(AssignError::UnsupportedInput(format!(
        "invalid-output mode {mode} needs {needs}"
    )))
}

/// A valid answer to build each defect on, so that the defect is the only
/// thing wrong: every task on its topic's first subscriber.
fn valid(input: &GroupInput) -> Assignment {
    let offsets = input.topic_offsets();
    let mut out = input.empty_assignment();
    for t in 0..input.topics.len() {
        if let Some(first) = input
            .members
            .iter()
            .position(|m| input.subscribes(m, t as u32))
        {
            out.active_owner[offsets[t] as usize..offsets[t + 1] as usize].fill(first as u32);
        }
    }
    out
}

fn unsubscribed(input: &GroupInput) -> Result<Assignment, AssignError> {
    if input.members.is_empty() || input.task_count() == 0 {
        return unsupported("unsubscribed", "at least one member and one task");
    }
    let offsets = input.topic_offsets();
    let with_tasks: Vec<u32> = (0..input.topics.len() as u32)
        .filter(|&t| input.topics[t as usize].partitions > 0)
        .collect();
    let mut out = Assignment {
        active_owner: vec![0; input.task_count()],
        ..Assignment::default()
    };
    if with_tasks
        .iter()
        .any(|&t| !input.subscribes(&input.members[0], t))
    {
        return Ok(out);
    }
    // Member 0 may hold everything; find a member missing a topic instead.
    for (m, member) in input.members.iter().enumerate().skip(1) {
        if let Some(&t) = with_tasks.iter().find(|&&t| !input.subscribes(member, t)) {
            out.active_owner[offsets[t as usize] as usize] = m as u32;
            return Ok(out);
        }
    }
    // Everybody subscribes to everything: no placement can be unsubscribed,
    // so leave a task of a subscribed topic without owner instead.
    out.active_owner[0] = NO_MEMBER;
    Ok(out)
}

fn unassigned(input: &GroupInput) -> Result<Assignment, AssignError> {
    let mut out = valid(input);
    let Some(task) = out.active_owner.iter().position(|&o| o != NO_MEMBER) else {
        return unsupported(
            "unassigned",
            "a task of a topic that a member subscribes to",
        );
    };
    out.active_owner[task] = NO_MEMBER;
    Ok(out)
}

fn wrong_length(input: &GroupInput) -> Assignment {
    let mut out = valid(input);
    if out.active_owner.pop().is_none() {
        // No tasks: one short is impossible, one too many is as wrong.
        out.active_owner.push(NO_MEMBER);
    }
    out
}

fn unknown_member(input: &GroupInput) -> Result<Assignment, AssignError> {
    let mut out = valid(input);
    let Some(owner) = out.active_owner.first_mut() else {
        return unsupported("unknown-member", "at least one task");
    };
    *owner = input.members.len() as u32;
    Ok(out)
}

fn learner_on_owner(input: &GroupInput) -> Result<Assignment, AssignError> {
    let mut out = valid(input);
    let Some(task) = out.active_owner.iter().position(|&o| o != NO_MEMBER) else {
        return unsupported(
            "learner-on-owner",
            "a task of a topic that a member subscribes to",
        );
    };
    out.learners.push(task as u32, out.active_owner[task]);
    Ok(out)
}

assignd_guest_sdk::export_assignor!(InvalidOutput);

#[cfg(test)]
mod tests {
    use assignd_guest_sdk::harness::rows_max;
    use assignd_guest_sdk::testing::{GroupSpec, Subscriptions, group};
    use assignd_guest_sdk::validate::{InvalidAssignment, Role, check_assignment, check_input};
    use assignd_guest_sdk::{Member, Topic};

    use super::*;

    fn with_mode(input: &GroupInput, mode: Option<&str>) -> GroupInput {
        let mut input = input.clone();
        if let Some(mode) = mode {
            input.params.insert("mode".into(), mode.into());
        }
        check_input(&input, &Default::default()).unwrap();
        input
    }

    fn rejection(input: &GroupInput) -> InvalidAssignment {
        let out = InvalidOutput::assign(input).expect("the guest answers");
        check_assignment(input, &out, rows_max(input)).expect_err("the answer is invalid")
    }

    /// A member `id` subscribed to `topics`, to be added by `with_members`.
    fn member<'a>(id: &'a str, topics: &'a [u32]) -> (&'a str, &'a [u32]) {
        (id, topics)
    }

    /// `input` plus the given members, each with its subscription set.
    fn with_members(mut input: GroupInput, members: Vec<(&str, &[u32])>) -> GroupInput {
        for (id, topics) in members {
            let subscription = input.intern_subscription(topics.to_vec());
            input.members.push(Member {
                id: id.into(),
                name: None,
                rack: None,
                capacity: 1,
                subscription,
                load_capacity: None,
                utilisation: None,
            });
        }
        input
    }

    /// Topics `a` (0 partitions), `b` (3), `c` (2); members as given.
    fn input_of(members: Vec<(&str, &[u32])>) -> GroupInput {
        let topics = GroupInput {
            topics: [("a", 0), ("b", 3), ("c", 2)]
                .map(|(name, partitions)| Topic {
                    name: name.into(),
                    partitions,
                })
                .to_vec(),
            active_owner: vec![NO_MEMBER; 5],
            ..GroupInput::default()
        };
        with_members(topics, members)
    }

    fn homogeneous() -> GroupInput {
        group(&GroupSpec::grid(3, 4, 2, Subscriptions::Homogeneous))
    }

    fn heterogeneous() -> GroupInput {
        group(&GroupSpec::grid(
            4,
            3,
            3,
            Subscriptions::Heterogeneous { groups: 2 },
        ))
    }

    #[test]
    fn default_mode_puts_a_task_on_member_0_when_it_does_not_subscribe() {
        let input = with_mode(
            &input_of(vec![member("m0", &[1]), member("m1", &[1, 2])]),
            None,
        );
        assert!(matches!(
            rejection(&input),
            InvalidAssignment::NotSubscribed { role: Role::Active, ref member, ref topic, partition: 0 }
                if member == "m0" && topic == "c"
        ));
        // An explicit `mode=unsubscribed` is the same.
        let explicit = with_mode(&input, Some("unsubscribed"));
        assert_eq!(rejection(&explicit), rejection(&input));
    }

    #[test]
    fn unsubscribed_uses_another_member_when_member_0_subscribes_to_all() {
        // Topic a has no tasks, so m0 lacking it does not count.
        let input = with_mode(
            &input_of(vec![
                member("m0", &[1, 2]),
                member("m1", &[0, 1, 2]),
                member("m2", &[0, 1]),
            ]),
            None,
        );
        assert!(matches!(
            rejection(&input),
            InvalidAssignment::NotSubscribed { role: Role::Active, ref member, ref topic, partition: 0 }
                if member == "m2" && topic == "c"
        ));
        assert!(matches!(
            rejection(&with_mode(&heterogeneous(), None)),
            InvalidAssignment::NotSubscribed {
                role: Role::Active,
                ..
            }
        ));
    }

    #[test]
    fn unsubscribed_falls_back_to_unassigned_when_all_subscribe() {
        assert!(matches!(
            rejection(&with_mode(&homogeneous(), None)),
            InvalidAssignment::Unassigned { partition: 0, .. }
        ));
    }

    #[test]
    fn unassigned() {
        for base in [homogeneous(), heterogeneous()] {
            assert!(matches!(
                rejection(&with_mode(&base, Some("unassigned"))),
                InvalidAssignment::Unassigned { partition: 0, .. }
            ));
        }
        // Task 0's topic has no subscriber: the first subscribed task instead.
        let input = input_of(vec![member("m0", &[2])]);
        assert_eq!(
            rejection(&with_mode(&input, Some("unassigned"))),
            InvalidAssignment::Unassigned {
                topic: "c".into(),
                partition: 0
            }
        );
    }

    #[test]
    fn wrong_length() {
        let input = with_mode(&heterogeneous(), Some("wrong-length"));
        let tasks = input.task_count();
        assert_eq!(
            rejection(&input),
            InvalidAssignment::WrongTaskCount {
                expected: tasks,
                got: tasks - 1
            }
        );
        let no_tasks = with_mode(
            &with_members(GroupInput::default(), vec![member("m0", &[])]),
            Some("wrong-length"),
        );
        assert_eq!(
            rejection(&no_tasks),
            InvalidAssignment::WrongTaskCount {
                expected: 0,
                got: 1
            }
        );
    }

    #[test]
    fn unknown_member() {
        for base in [homogeneous(), heterogeneous()] {
            let input = with_mode(&base, Some("unknown-member"));
            assert_eq!(
                rejection(&input),
                InvalidAssignment::UnknownMember {
                    role: Role::Active,
                    member: input.members.len() as u32
                }
            );
        }
    }

    #[test]
    fn learner_on_owner() {
        for base in [
            homogeneous(),
            heterogeneous(),
            input_of(vec![member("m0", &[2])]),
        ] {
            assert!(matches!(
                rejection(&with_mode(&base, Some("learner-on-owner"))),
                InvalidAssignment::OnActiveOwner {
                    role: Role::Learner,
                    ..
                }
            ));
        }
    }

    #[test]
    fn refuses_what_it_cannot_show() {
        let nobody = with_mode(&input_of(vec![]), None);
        for mode in ["unsubscribed", "unassigned", "learner-on-owner"] {
            assert!(matches!(
                InvalidOutput::assign(&with_mode(&nobody, Some(mode))),
                Err(AssignError::UnsupportedInput(_))
            ));
        }
        assert!(matches!(
            InvalidOutput::assign(&with_mode(&GroupInput::default(), Some("unknown-member"))),
            Err(AssignError::UnsupportedInput(_))
        ));
        assert!(matches!(
            InvalidOutput::assign(&with_mode(&homogeneous(), Some("no-such-mode"))),
            Err(AssignError::InvalidParam(_))
        ));
    }

    #[test]
    fn info_declares_the_mode_param() {
        let info = InvalidOutput::info();
        assert_eq!(info.name, "invalid-output");
        assert_eq!(info.params.len(), 1);
        assert_eq!(
            (
                info.params[0].name.as_str(),
                info.params[0].default_value.as_str()
            ),
            ("mode", "unsubscribed")
        );
    }
}
