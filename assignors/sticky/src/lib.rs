//! The `sticky` assignor: cooperative-sticky assignment in the manner of
//! Kafka's `CooperativeStickyAssignor` / KIP-848 uniform assignor, with
//! member capacities. It owns only the glue between the guest SDK and
//! [`assignor_balance::balance_target`], which does the work: tasks stay on
//! their current owner unless balance or a lost subscription moves them.
//! Balance is by load within the `load_band` param's band when the group
//! reports loads, else by count.
//!
//! It places no learners or standbys; the host turns any move to a cold
//! member into a learner first.

use assignd_guest_sdk::load::BAND_PARAM;
use assignd_guest_sdk::{
    AssignError, Assignment, Assignor, Capabilities, GroupInput, Info, TaskMembers,
};

pub struct Sticky;

impl Assignor for Sticky {
    fn info() -> Info {
        Info::new(
            "sticky",
            "1.0.0",
            "keeps every task it can on its current owner; balanced within one task of each \
             member's capacity-weighted share among members with the same subscriptions; \
             topic-aware for mixed subscriptions; with loads, each member's load within a band \
             of its share, with the fewest moves",
        )
        .with_capabilities(Capabilities {
            load: true,
            ..Capabilities::default()
        })
        .with_param(
            BAND_PARAM,
            "default",
            assignor_balance::LOAD_BAND_DESCRIPTION,
        )
    }

    fn assign(input: &GroupInput) -> Result<Assignment, AssignError> {
        Ok(Assignment {
            active_owner: assignor_balance::balance_target(input)?,
            learners: TaskMembers::default(),
            standbys: TaskMembers::default(),
        })
    }
}

assignd_guest_sdk::export_assignor!(Sticky);

// A call's heap lives only as long as its instance: a bump allocator
// makes each allocation a pointer increment and each free nearly nothing.
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: assignd_guest_sdk::arena::CallArena = assignd_guest_sdk::arena::CallArena;
