//! The simulator's own tests, by concern: [`schedules`] runs thousands
//! of schedules without a violation, replays a seed exactly and catches a
//! deliberately broken member; [`checks`] feeds each invariant check a
//! hand-made breach; [`member_leases`] drives one simulated member's
//! lease by hand; [`core_fixes`] holds the regression tests of the core
//! fixes the simulator led to; [`routers`] runs schedules whose groups
//! all have routers; [`loads`] feeds the load invariants' checks
//! hand-made breaches and runs schedules with loads; [`shadows`] and
//! [`rollouts`] run schedules with shadow assignors and with a rollout.

use std::collections::BTreeSet;

use crate::protocol::group::Task;

mod checks;
mod core_fixes;
mod loads;
mod member_leases;
mod rollouts;
mod routers;
mod schedules;
pub(crate) mod shadows;

fn task(p: u32) -> Task {
    Task::new("t0", p)
}

fn tasks(ps: &[u32]) -> BTreeSet<Task> {
    ps.iter().map(|&p| task(p)).collect()
}
