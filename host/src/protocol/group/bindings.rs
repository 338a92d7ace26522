//! The assignor [`Binding`]s a group keeps: each binding as recorded, and
//! how many of them a group remembers for rollback.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{BindingSpec, CallLimits, Millis};

/// One assignor binding of a group, as kept in its history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// 1 for the group's first binding, one more for each later one.
    pub seq: u64,
    /// The assignor reference as written (built-in name, module id, or
    /// `name@version`).
    pub assignor: String,
    pub params: BTreeMap<String, String>,
    /// Limits on the binding's calls, under the host's ceilings.
    pub limits: CallLimits,
    /// The assignor that answers when this one fails.
    pub fallback: Option<String>,
    /// The group epoch the binding took effect at.
    pub epoch: u64,
    /// The runtime's clock when it was bound (milliseconds since that
    /// host process started: comparable within one run only).
    pub at_ms: Millis,
    /// The `seq` of the binding this one rolled back to, if it is a
    /// rollback.
    pub rollback_to: Option<u64>,
}

impl Binding {
    /// What this binding set.
    pub fn spec(&self) -> BindingSpec {
        BindingSpec {
            assignor: self.assignor.clone(),
            params: self.params.clone(),
            limits: self.limits,
            fallback: self.fallback.clone(),
        }
    }
}

/// Bindings kept per group; the oldest are forgotten past this.
pub const BINDINGS_MAX: usize = 32;

/// A group's shadow: an assignor asked beside the bound one on the same
/// input every time the bound one is asked, whose answers are compared
/// and never installed (`core::shadows`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShadowBinding {
    /// The assignor reference as written.
    pub assignor: String,
    pub params: BTreeMap<String, String>,
    /// Limits on the shadow's calls, under the host's ceilings.
    pub limits: CallLimits,
    /// The group epoch when it was bound.
    pub epoch: u64,
    /// The runtime's clock when it was bound.
    pub at_ms: Millis,
}
