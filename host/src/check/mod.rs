//! `assignd check`'s engine: a module and a reference assignor run
//! offline on the same cases, in the same sandbox, limits and validation
//! as a live group (`crate::plugins`), each answer scored. It owns running
//! the cases (a churn sequence settles each step on the assignor's own
//! answer) and the report; the cases are `cases.rs`'s, the figures
//! `score.rs`'s, the report's fields `report.rs`'s. It knows nothing of
//! the command line: parsing and printing are `cli/check.rs`'s.

pub mod cases;
pub mod report;
pub mod score;

use assignd_guest_sdk::model::{Assignment, GroupInput};
use assignd_guest_sdk::testing::settle;

use crate::plugins::{Limits, LoadedModule, PluginEngine};
use cases::Case;
use report::{Row, Side};

/// One assignor to run: the engine it is loaded in, and its limits.
pub struct Assignor<'a> {
    pub engine: &'a PluginEngine,
    pub module: &'a LoadedModule,
    pub limits: Limits,
}

impl Assignor<'_> {
    /// One call on `input`: its side, and its answer if valid.
    fn call(&self, input: &GroupInput) -> (Side, Option<Assignment>) {
        match self.engine.assign(self.module, input, &self.limits) {
            Ok(outcome) => {
                let figures = score::figures(input, &outcome.assignment);
                let side = Side::answered(&outcome.stats, &figures);
                (side, Some(outcome.assignment))
            }
            Err(error) => (Side::failed(&error), None),
        }
    }

    /// Every call of `case`: its start, then each step on the settled
    /// previous input, edited. A step after one without an answer is
    /// skipped.
    pub fn run(&self, case: &Case) -> Vec<Side> {
        let (first, mut answer) = self.call(&case.start);
        let mut sides = vec![first];
        let mut input = case.start.clone();
        for step in &case.steps {
            let Some(previous) = answer.take() else {
                sides.push(Side::skipped());
                continue;
            };
            input = step.edit.apply(&settle(&input, &previous));
            let (side, next) = self.call(&input);
            sides.push(side);
            answer = next;
        }
        sides
    }
}

/// The name, tasks, members and whether it has loads of each call of
/// `case`, in the order [`Assignor::run`] makes them.
pub fn shapes(case: &Case) -> Vec<(String, usize, usize, bool)> {
    let loads = case.start.load_unit.is_some();
    let tasks = case.start.task_count();
    let mut shapes = vec![(case.name.clone(), tasks, case.start.members.len(), loads)];
    let mut input = case.start.clone();
    for step in &case.steps {
        input = step.edit.apply(&input);
        let name = format!("{}/{}", case.name, step.name);
        shapes.push((name, tasks, input.members.len(), loads));
    }
    shapes
}

/// The rows of `cases`, run on `module` and on `against`. The same
/// component on both sides runs once (a guest is a pure function of its
/// input).
pub fn run(module: &Assignor, against: &Assignor, cases: &[Case]) -> Vec<Row> {
    let same = module.module.id == against.module.id;
    let mut rows = Vec::new();
    for case in cases {
        let ours = module.run(case);
        let theirs = if same {
            ours.clone()
        } else {
            against.run(case)
        };
        for ((shape, ours), theirs) in shapes(case).into_iter().zip(ours).zip(theirs) {
            let (case, tasks, members, loads) = shape;
            rows.push(Row {
                case,
                tasks,
                members,
                loads,
                module: ours,
                against: theirs,
            });
        }
    }
    rows
}
