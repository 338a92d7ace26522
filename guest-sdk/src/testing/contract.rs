//! The assignor contract as one check: what every assignor must keep
//! (answers the host accepts, the same answer for the same input, no
//! learners or standbys it did not declare), plus the promises some
//! assignors make on top ([`Promises`]: the members' order or the previous
//! assignment plays no part). An author runs [`check_contract`] from a
//! property test over their own random groups and keeps only the properties
//! of their strategy (contiguity, spread, stickiness) in their own tests.
//!
//! It owns no generator and does not depend on a property-testing crate:
//! the caller brings the inputs and a seed, so the check runs under any
//! test framework, natively and in wasm alike.

use std::collections::BTreeMap;
use std::fmt;

use crate::Assignor;
use crate::harness::{HarnessError, run};
use crate::model::{Assignment, GroupInput, NO_MEMBER, TaskLags, TaskMembers};

/// What an assignor promises beyond the contract every assignor keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Promises {
    /// Who gets what, by member id, does not depend on the order of the
    /// members in the input (an assignor that orders members by id or name,
    /// as Kafka's range and round-robin do).
    pub ignores_member_order: bool,
    /// The previous assignment (current actives, learners and standbys)
    /// plays no part in the answer (a stateless assignor).
    pub ignores_previous_assignment: bool,
}

impl Promises {
    /// No promise beyond the contract: a sticky or lag-aware assignor.
    pub const NONE: Promises = Promises {
        ignores_member_order: false,
        ignores_previous_assignment: false,
    };

    /// Both promises: a stateless assignor that orders members by their
    /// ids or names.
    pub const STATELESS: Promises = Promises {
        ignores_member_order: true,
        ignores_previous_assignment: true,
    };
}

/// How an assignor broke the contract on one input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ContractViolation {
    /// The harness refused the run: the input is invalid, the assignor
    /// refused it, or it answered what the host would refuse (a task of a
    /// subscribed topic unowned, a task on a member that does not subscribe
    /// to it, a duplicate row, too many rows, ...).
    Harness(HarnessError),
    /// The answer holds learner or standby rows though the assignor's
    /// `info()` does not declare the capability.
    Undeclared { role: &'static str, rows: usize },
    /// Two runs over the same input answered differently.
    NotDeterministic {
        first: Box<Assignment>,
        second: Box<Assignment>,
    },
    /// Reordering the members changed who gets what
    /// (`permutation[i]` is the old index of the new `i`-th member).
    MemberOrder { permutation: Vec<usize> },
    /// Clearing the previous assignment changed the answer.
    PreviousAssignment,
}

impl fmt::Display for ContractViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ContractViolation::Harness(e) => e.fmt(f),
            ContractViolation::Undeclared { role, rows } => write!(
                f,
                "{rows} {role} rows, but info() does not declare the {role} capability"
            ),
            ContractViolation::NotDeterministic { first, second } => write!(
                f,
                "not deterministic: the same input answered {first:?}, then {second:?}"
            ),
            ContractViolation::MemberOrder { permutation } => write!(
                f,
                "reordering the members by {permutation:?} changed who gets what"
            ),
            ContractViolation::PreviousAssignment => {
                write!(f, "clearing the previous assignment changed the answer")
            }
        }
    }
}

impl std::error::Error for ContractViolation {}

/// Runs `A` on `input` through the [harness](crate::harness) and checks the
/// assignor contract, returning the answer for the caller's own checks:
///
/// - the input passes the host's checks and the answer is one the host
///   accepts: every task of a topic someone subscribes to active exactly
///   once, on a member that subscribes to it; every task of a topic nobody
///   subscribes to unowned; learners and standbys only on subscribers,
///   never on the task's active owner, never twice, within the host's row
///   limits ([`validate::check_assignment`](crate::validate::check_assignment));
/// - no learner rows unless `A::info()` declares learners, and no standby
///   rows unless it declares standbys;
/// - a second run over the same input gives the same answer;
/// - with [`Promises::ignores_member_order`], the members shuffled by
///   `seed` get the same tasks, by member id, in every role;
/// - with [`Promises::ignores_previous_assignment`], the same input with
///   no current actives, learners or standbys gets the same answer.
///
/// `seed` only picks the shuffle; a property test passes a random one.
pub fn check_contract<A: Assignor>(
    input: &GroupInput,
    promises: Promises,
    seed: u64,
) -> Result<Assignment, ContractViolation> {
    let first = run::<A>(input).map_err(ContractViolation::Harness)?;
    let capabilities = A::info().capabilities;
    let roles = [
        ("learner", capabilities.learners, &first.learners),
        ("standby", capabilities.standbys, &first.standbys),
    ];
    for (role, declared, rows) in roles {
        if !declared && !rows.is_empty() {
            let rows = rows.len();
            return Err(ContractViolation::Undeclared { role, rows });
        }
    }
    let second = run::<A>(input).map_err(ContractViolation::Harness)?;
    if second != first {
        return Err(ContractViolation::NotDeterministic {
            first: Box::new(first),
            second: Box::new(second),
        });
    }
    if promises.ignores_member_order {
        let permutation = shuffled(input.members.len(), seed);
        let shuffled_input = permute_members(input, &permutation);
        let answer = run::<A>(&shuffled_input).map_err(ContractViolation::Harness)?;
        if by_member_id(&shuffled_input, &answer) != by_member_id(input, &first) {
            return Err(ContractViolation::MemberOrder { permutation });
        }
    }
    if promises.ignores_previous_assignment {
        let fresh = GroupInput {
            active_owner: vec![NO_MEMBER; input.task_count()],
            learners: TaskMembers::default(),
            standbys: TaskMembers::default(),
            ..input.clone()
        };
        if run::<A>(&fresh).map_err(ContractViolation::Harness)? != first {
            return Err(ContractViolation::PreviousAssignment);
        }
    }
    Ok(first)
}

/// The input with its members reordered: `permutation[i]` is the old index
/// of the new `i`-th member. Every member index in the input (actives,
/// learners, standbys, lags) follows its member.
pub fn permute_members(input: &GroupInput, permutation: &[usize]) -> GroupInput {
    let mut new_index = vec![0u32; permutation.len()];
    for (new, &old) in permutation.iter().enumerate() {
        new_index[old] = new as u32;
    }
    let renumber = |m: u32| {
        if m == NO_MEMBER {
            NO_MEMBER
        } else {
            new_index[m as usize]
        }
    };
    let renumber_rows = |rows: &TaskMembers| {
        let mut renumbered = TaskMembers::default();
        for (task, member) in rows.iter() {
            renumbered.push(task, renumber(member));
        }
        renumbered
    };
    let mut lags = TaskLags::default();
    for (task, member, lag) in input.lags.iter() {
        lags.push(task, renumber(member), lag);
    }
    GroupInput {
        members: permutation
            .iter()
            .map(|&old| input.members[old].clone())
            .collect(),
        active_owner: input.active_owner.iter().map(|&m| renumber(m)).collect(),
        learners: renumber_rows(&input.learners),
        standbys: renumber_rows(&input.standbys),
        lags,
        ..input.clone()
    }
}

/// A permutation of `0..len` picked by `seed` (Fisher-Yates over
/// SplitMix64), so that a failing case is reproduced by its seed.
pub fn shuffled(len: usize, seed: u64) -> Vec<usize> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut permutation: Vec<usize> = (0..len).collect();
    for i in (1..len).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        permutation.swap(i, j);
    }
    permutation
}

/// Per member id: its active, learner and standby tasks, each sorted.
type TasksById = BTreeMap<String, [Vec<u32>; 3]>;

/// An answer keyed by member ids, so that answers to differently ordered
/// inputs compare (task numbers do not depend on the members' order).
fn by_member_id(input: &GroupInput, out: &Assignment) -> TasksById {
    let mut rows: Vec<[Vec<u32>; 3]> = vec![Default::default(); input.members.len()];
    for (task, &owner) in out.active_owner.iter().enumerate() {
        if owner != NO_MEMBER {
            rows[owner as usize][0].push(task as u32);
        }
    }
    for (role, placed) in [(1, &out.learners), (2, &out.standbys)] {
        for (task, member) in placed.iter() {
            rows[member as usize][role].push(task);
        }
    }
    input
        .members
        .iter()
        .zip(rows)
        .map(|(member, mut tasks)| {
            tasks.iter_mut().for_each(|t| t.sort_unstable());
            (member.id.clone(), tasks)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AssignError, Info};
    use crate::testing::{GroupSpec, Subscriptions, group};

    /// Every task to the member listed first: valid and deterministic, but
    /// the answer follows the members' order.
    struct FirstListed;

    impl Assignor for FirstListed {
        fn info() -> Info {
            Info::new("first-listed", "0.1.0", "every task to the first member")
        }

        fn assign(input: &GroupInput) -> Result<Assignment, AssignError> {
            let mut out = input.empty_assignment();
            out.active_owner.fill(0);
            Ok(out)
        }
    }

    /// Keeps every current owner, else the first member: depends on the
    /// previous assignment.
    struct KeepOrFirst;

    impl Assignor for KeepOrFirst {
        fn info() -> Info {
            Info::new(
                "keep-or-first",
                "0.1.0",
                "current owner, else the first member",
            )
        }

        fn assign(input: &GroupInput) -> Result<Assignment, AssignError> {
            let owners = input.active_owner.iter();
            let active_owner = owners
                .map(|&m| if m == NO_MEMBER { 0 } else { m })
                .collect();
            Ok(Assignment {
                active_owner,
                ..input.empty_assignment()
            })
        }
    }

    /// Places a learner without declaring the capability.
    struct UndeclaredLearner;

    impl Assignor for UndeclaredLearner {
        fn info() -> Info {
            Info::new(
                "undeclared-learner",
                "0.1.0",
                "a learner it did not declare",
            )
        }

        fn assign(input: &GroupInput) -> Result<Assignment, AssignError> {
            let mut out = FirstListed::assign(input)?;
            out.learners.push(0, 1);
            Ok(out)
        }
    }

    fn three_members() -> GroupInput {
        group(&GroupSpec::grid(3, 2, 1, Subscriptions::Homogeneous))
    }

    #[test]
    fn an_assignor_that_follows_the_member_order_keeps_only_the_basic_contract() {
        let input = three_members();
        let out = check_contract::<FirstListed>(&input, Promises::NONE, 7).unwrap();
        assert_eq!(out.active_owner, vec![0; 6]);
        let broken = check_contract::<FirstListed>(&input, Promises::STATELESS, 7);
        assert!(matches!(broken, Err(ContractViolation::MemberOrder { .. })));
    }

    #[test]
    fn an_assignor_that_keeps_owners_breaks_the_stateless_promise() {
        let mut input = three_members();
        input.active_owner = vec![2; 6];
        let promises = Promises {
            ignores_previous_assignment: true,
            ..Promises::NONE
        };
        assert_eq!(
            check_contract::<KeepOrFirst>(&input, promises, 0),
            Err(ContractViolation::PreviousAssignment)
        );
    }

    #[test]
    fn undeclared_learners_break_the_contract() {
        let broken = check_contract::<UndeclaredLearner>(&three_members(), Promises::NONE, 0);
        let expected = ContractViolation::Undeclared {
            role: "learner",
            rows: 1,
        };
        assert_eq!(broken, Err(expected));
    }

    #[test]
    fn a_permutation_renumbers_every_member_index() {
        let mut input = three_members();
        input.active_owner = vec![0, 1, 2, NO_MEMBER, 0, 1];
        input.learners.push(0, 2);
        input.lags.push(1, 0, 5);
        let permuted = permute_members(&input, &[2, 0, 1]);
        assert_eq!(permuted.members[0].id, "member-2");
        assert_eq!(permuted.active_owner, vec![1, 2, 0, NO_MEMBER, 1, 2]);
        assert_eq!(permuted.learners.iter().collect::<Vec<_>>(), [(0, 0)]);
        assert_eq!(permuted.lags.iter().collect::<Vec<_>>(), [(1, 1, 5)]);
    }

    #[test]
    fn a_seed_picks_a_permutation() {
        let mut permutation = shuffled(10, 42);
        assert_eq!(permutation, shuffled(10, 42));
        permutation.sort_unstable();
        assert_eq!(permutation, (0..10).collect::<Vec<_>>());
    }
}
