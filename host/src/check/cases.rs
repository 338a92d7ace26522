//! The inputs of `assignd check`, drawn from a seed: fresh groups of
//! several shapes, a churn sequence, skewed subscriptions, loads and a
//! large group, built with the guest SDK's generators
//! (`assignd_guest_sdk::testing`). It owns the shapes and the churn edits;
//! running them is the runner's (`super`).

use assignd_guest_sdk::model::GroupInput;
use assignd_guest_sdk::testing::{GroupSpec, Subscriptions, add_member, group, remove_member};

use crate::loadgen::offline::{InputSettings, generate};
use crate::protocol::splitmix;

/// The load unit of the cases with loads.
const LOAD_UNIT: &str = "records/s";

/// One case: an input, then edits of the input settled on each answer.
#[derive(Clone, Debug)]
pub struct Case {
    pub name: String,
    pub start: GroupInput,
    /// Each step's input is the previous input settled on the assignor's
    /// own answer (its actives are the current assignment), then edited.
    pub steps: Vec<Step>,
}

/// One step of a churn sequence.
#[derive(Clone, Debug)]
pub struct Step {
    pub name: String,
    pub edit: Edit,
}

/// What changes in a group between two steps.
#[derive(Clone, Debug, PartialEq)]
pub enum Edit {
    /// `count` new members, subscribed to every topic, join.
    Join { count: u32 },
    /// The member at index `member` leaves; its tasks are unowned.
    Leave { member: u32 },
    /// A static member comes back (after its registration timeout, so the
    /// assignor sees it): a new member id, its old name and topics.
    Return {
        id: String,
        name: String,
        topics: Vec<u32>,
    },
}

impl Edit {
    /// `input` (already settled) with this edit made.
    pub fn apply(&self, input: &GroupInput) -> GroupInput {
        match self {
            Edit::Join { count } => {
                let mut next = input.clone();
                let topics: Vec<u32> = (0..input.topics.len() as u32).collect();
                for i in 0..*count {
                    next = add_member(&next, &format!("joiner-{i}"), topics.clone());
                }
                next
            }
            Edit::Leave { member } => remove_member(input, *member),
            Edit::Return { id, name, topics } => {
                let mut next = add_member(input, id, topics.clone());
                if let Some(member) = next.members.last_mut() {
                    member.name = Some(name.clone());
                }
                next
            }
        }
    }
}

/// The size of the large case; no large case with 0 members or tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LargeSize {
    pub members: u32,
    pub tasks: u32,
}

/// The generated cases: `rounds` rounds of every shape, each round drawn
/// from its own seed, named `shape` (round 1) or `shape#N`.
pub fn generated(seed: u64, rounds: u32, large: LargeSize) -> Vec<Case> {
    let mut cases = Vec::new();
    for round in 0..rounds {
        let mut rng = seed ^ u64::from(round).wrapping_mul(splitmix::GAMMA);
        let suffix = if round == 0 {
            String::new()
        } else {
            format!("#{}", round + 1)
        };
        for (name, start, steps) in round_cases(&mut rng, large) {
            cases.push(Case {
                name: format!("{name}{suffix}"),
                start,
                steps,
            });
        }
    }
    cases
}

/// A number in `low ..= high` drawn from `rng`.
fn draw(rng: &mut u64, low: u32, high: u32) -> u32 {
    low + (splitmix::next(rng) % u64::from(high - low + 1)) as u32
}

type Shape = (&'static str, GroupInput, Vec<Step>);

fn round_cases(rng: &mut u64, large: LargeSize) -> Vec<Shape> {
    let fresh = |spec: GroupSpec| group(&spec);
    let mut shapes: Vec<Shape> = vec![
        ("fresh/small", fresh(spec(3, 2, 24, 0)), Vec::new()),
        (
            "fresh/racks",
            fresh(spec(draw(rng, 6, 9), 2, 48, 3)),
            Vec::new(),
        ),
        ("fresh/capacities", capacities(rng), Vec::new()),
    ];
    let (base, steps) = churn(rng);
    shapes.push(("churn", base, steps));
    shapes.push(("skew/subsets", subsets(rng), Vec::new()));
    shapes.push(("skew/hot-topic", hot_topic(rng), Vec::new()));
    let loaded = loads(rng);
    let mut fresh_loaded = loaded.clone();
    fresh_loaded.active_owner.fill(assignd_guest_sdk::NO_MEMBER);
    shapes.push(("loads/fresh", fresh_loaded, Vec::new()));
    shapes.push(("loads/count-balanced", loaded, Vec::new()));
    if large.members > 0 && large.tasks > 0 {
        let topics = 10.min(large.tasks);
        let input = fresh(spec(large.members, topics, large.tasks, 0));
        shapes.push(("large", input, Vec::new()));
    }
    shapes
}

fn spec(members: u32, topics: u32, partitions: u32, racks: u32) -> GroupSpec {
    GroupSpec {
        members,
        topics,
        partitions,
        subscriptions: Subscriptions::Homogeneous,
        racks,
    }
}

/// Members of capacities 1 to 4.
fn capacities(rng: &mut u64) -> GroupInput {
    let mut input = group(&spec(5, 2, 60, 0));
    for member in &mut input.members {
        member.capacity = draw(rng, 1, 4);
    }
    input
}

/// Static members (each with a name) that settle, then two join, one
/// leaves and comes back under its name.
fn churn(rng: &mut u64) -> (GroupInput, Vec<Step>) {
    let mut base = group(&spec(draw(rng, 6, 10), 3, 96, 0));
    for (i, member) in base.members.iter_mut().enumerate() {
        member.name = Some(format!("worker-{i}"));
    }
    let leaver = draw(rng, 0, base.members.len() as u32 - 1);
    let left = &base.members[leaver as usize];
    let back = Edit::Return {
        id: format!("{}-again", left.id),
        name: left.name.clone().unwrap_or_default(),
        topics: base.topics_of(left).to_vec(),
    };
    let step = |name: &str, edit| Step {
        name: name.to_owned(),
        edit,
    };
    let steps = vec![
        step("join-2", Edit::Join { count: 2 }),
        step("leave-1", Edit::Leave { member: leaver }),
        step("static-return", back),
    ];
    (base, steps)
}

/// Members in overlapping subscription groups, each topic shared by all
/// groups but one.
fn subsets(rng: &mut u64) -> GroupInput {
    group(&GroupSpec {
        subscriptions: Subscriptions::Heterogeneous {
            groups: draw(rng, 2, 4),
        },
        ..spec(9, 6, 120, 0)
    })
}

/// One hot topic of many partitions that two thirds of the members take,
/// and three small topics.
fn hot_topic(rng: &mut u64) -> GroupInput {
    let mut input = group(&spec(10, 4, 12, 0));
    input.topics[0].partitions = draw(rng, 100, 300);
    input.active_owner = vec![assignd_guest_sdk::NO_MEMBER; input.task_count()];
    for m in 0..input.members.len() {
        let topics = match m % 3 {
            0 => vec![0, 1],
            1 => vec![0, 2, 3],
            _ => vec![1, 2, 3],
        };
        input.set_topics(m, topics);
    }
    compact_subscriptions(&mut input);
    input
}

/// Drops subscription sets no member uses (the input format keeps only
/// the members' own sets).
fn compact_subscriptions(input: &mut GroupInput) {
    let used: Vec<Vec<u32>> = input
        .members
        .iter()
        .map(|m| input.topics_of(m).to_vec())
        .collect();
    input.subscriptions.clear();
    for (m, topics) in used.into_iter().enumerate() {
        input.set_topics(m, topics);
    }
}

/// One topic whose tasks carry Zipf loads, every member holding an equal
/// count of them (a group balanced by counts before its loads are known).
fn loads(rng: &mut u64) -> GroupInput {
    let settings = InputSettings {
        members: draw(rng, 12, 20),
        tasks: 240,
        task_load: "zipf".to_owned(),
        load_seed: splitmix::next(rng),
        load_unit: Some(LOAD_UNIT.to_owned()),
        load_band: None,
        out: None,
    };
    generate(&settings).expect("a valid load spec")
}

#[cfg(test)]
mod tests {
    use super::*;
    use assignd_guest_sdk::validate::{InputLimits, check_input};

    #[test]
    fn every_generated_input_is_valid_and_a_seed_names_them() {
        let large = LargeSize {
            members: 50,
            tasks: 500,
        };
        let cases = generated(7, 2, large);
        assert_eq!(cases.len(), 2 * 9);
        assert_eq!(cases[0].name, "fresh/small");
        assert_eq!(cases[9].name, "fresh/small#2");
        for case in &cases {
            check_input(&case.start, &InputLimits::default())
                .unwrap_or_else(|e| panic!("{}: {e}", case.name));
        }
        let again = generated(7, 2, large);
        let starts = |cases: &[Case]| cases.iter().map(|c| c.start.clone()).collect::<Vec<_>>();
        assert_eq!(starts(&cases), starts(&again));
        assert_ne!(starts(&cases), starts(&generated(8, 2, large)));
    }

    #[test]
    fn a_static_member_returns_under_its_name_with_a_new_id() {
        let (base, steps) = churn(&mut 1);
        let Edit::Leave { member } = steps[1].edit else {
            panic!("{steps:?}")
        };
        let left = base.members[member as usize].clone();
        let joined = steps[0].edit.apply(&base);
        assert_eq!(joined.members.len(), base.members.len() + 2);
        let gone = steps[1].edit.apply(&joined);
        assert!(gone.member_index(&left.id).is_none());
        let back = steps[2].edit.apply(&gone);
        let returned = back.members.last().unwrap();
        assert_eq!(returned.name, left.name);
        assert_ne!(returned.id, left.id);
        assert_eq!(back.topics_of(returned), base.topics_of(&left));
    }
}
