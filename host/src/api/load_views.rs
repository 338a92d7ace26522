//! A group's loads on the wire: the group view's `loads` and each member's
//! `load`, rendered from the core's load view (`protocol::core::LoadView`,
//! the one definition of shares and imbalance). Only copies.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::protocol::core::{LoadView, MemberLoad};

/// The group's loads (absent when it has no `load_unit`). Soft state: a
/// restarted host (or a new coordinator) knows none until its members
/// report again, and is `complete` only once they all have.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct GroupLoadView {
    /// The unit of every load (the config's `load_unit`).
    pub unit: String,
    /// The known load of every task the target gives a member.
    pub total: f64,
    /// The largest ratio of a member's load to its share (1.0 is
    /// perfect); absent when no member has a share.
    pub imbalance: Option<f64>,
    /// Every active task of the target has a known load. Until then no
    /// load rebalance starts (an unknown load is not zero).
    pub complete: bool,
    /// The shares are weighed by the members' `load_capacity` (every
    /// member declared one), else by their `capacity`.
    pub by_load_capacity: bool,
}

/// A member's load against its share (absent when the group has no
/// `load_unit`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemberLoadView {
    /// The known loads of the tasks its target gives it, added up.
    pub load: f64,
    /// Its share of the group's load, by its weight.
    pub share: f64,
    /// `load / share` (absent when its share is 0).
    pub ratio: Option<f64>,
    /// Its target's tasks whose load is not known yet.
    pub unknown_tasks: u64,
    /// Its smoothed utilisation, as it measured it (1.0: fully used).
    pub utilisation: Option<f64>,
    /// The load it said it can carry.
    pub load_capacity: Option<f64>,
}

pub fn group_load_view(view: &LoadView) -> GroupLoadView {
    GroupLoadView {
        unit: view.unit.clone(),
        total: view.total,
        imbalance: view.imbalance,
        complete: view.complete,
        by_load_capacity: view.by_load_capacity,
    }
}

pub fn member_load_view(member: &MemberLoad) -> MemberLoadView {
    MemberLoadView {
        load: member.load,
        share: member.share,
        ratio: member.ratio,
        unknown_tasks: member.unknown_tasks,
        utilisation: member.utilisation,
        load_capacity: member.load_capacity,
    }
}
