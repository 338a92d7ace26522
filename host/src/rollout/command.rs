//! What the machine asks the shell to do ([`Command`]) and what it is
//! told of each group when a rollout starts ([`GroupStart`]).
//!
//! Every command sets a group's binding or shadow to a value it names in
//! full, so performing one twice leaves the group as performing it once:
//! the shell may repeat any command after a restart.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::protocol::group::{BindingSpec, CallLimits};

/// A binding in full, as a group's config sets it (the serializable
/// mirror of [`BindingSpec`]): restoring one puts the group back exactly.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BindingRef {
    pub assignor: String,
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    #[serde(default)]
    pub limits: CallLimits,
    #[serde(default)]
    pub fallback: Option<String>,
}

impl From<BindingSpec> for BindingRef {
    fn from(spec: BindingSpec) -> Self {
        BindingRef {
            assignor: spec.assignor,
            params: spec.params,
            limits: spec.limits,
            fallback: spec.fallback,
        }
    }
}

impl From<BindingRef> for BindingSpec {
    fn from(binding: BindingRef) -> Self {
        BindingSpec {
            assignor: binding.assignor,
            params: binding.params,
            limits: binding.limits,
            fallback: binding.fallback,
        }
    }
}

/// One selected group as the shell found it when the rollout started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupStart {
    pub name: String,
    /// What a rollback restores.
    pub current_binding: BindingRef,
    /// The group's shadow, restored when the rollout's own is removed.
    pub current_shadow: Option<BindingRef>,
}

/// A command's id, unique within its rollout, increasing in issue order.
/// [`Rollout::command_done`](super::Rollout::command_done) takes it back.
pub type CommandId = u64;

/// One thing the shell does to one group, then reports with its id.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    pub id: CommandId,
    pub group: String,
    pub action: Action,
}

/// What a [`Command`] does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Action {
    /// Set the group's shadow to the module with these params (the
    /// group's binding is untouched).
    Shadow {
        module: String,
        params: BTreeMap<String, String>,
    },
    /// Remove the rollout's shadow: set the group's shadow to `restore`
    /// (the one it had before the rollout), or none.
    Unshadow { restore: Option<BindingRef> },
    /// Bind the group to `binding`: the module and params of the
    /// rollout, with the limits and fallback the group had.
    Bind { binding: BindingRef },
    /// Bind the group back to `binding`, exactly the one it had before
    /// the rollout.
    Restore { binding: BindingRef },
}

impl Action {
    /// The action's name, for logs and metric labels.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Shadow { .. } => "shadow",
            Action::Unshadow { .. } => "unshadow",
            Action::Bind { .. } => "bind",
            Action::Restore { .. } => "restore",
        }
    }
}
