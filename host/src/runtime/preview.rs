//! Previewing a candidate assignor: it runs on the group's current input
//! (on a guest thread, like a real call), and its answer goes through the
//! host's learner safety without anything being emitted or applied.

use std::collections::BTreeMap;
use std::sync::Arc;

use assignd_guest_sdk::Assignment;

use crate::plugins::PluginError;
use crate::protocol::core::{PreviewInput, ProtocolError};
use crate::protocol::group::{Slot, SlotTarget};

use super::{Runtime, RuntimeError};

/// A preview's answer: the candidate's raw answer to `prepared`, the
/// group's installed target now, and the target the host would install.
#[derive(Clone, Debug)]
pub struct Preview {
    pub prepared: PreviewInput,
    pub assignment: Assignment,
    pub before: BTreeMap<Slot, SlotTarget>,
    pub after: BTreeMap<Slot, SlotTarget>,
}

impl Runtime {
    /// Runs `module` with `params` (the group's bound ones if `None`) on the
    /// group's current input and returns what it would do. Changes nothing.
    pub async fn preview(
        self: &Arc<Self>,
        group: &str,
        module: &str,
        params: Option<BTreeMap<String, String>>,
    ) -> Result<Preview, RuntimeError> {
        let prepared = self
            .read(group, |core, _| core.preview_input(group, params))
            .await?
            .ok_or_else(|| ProtocolError::UnknownGroup(group.to_owned()))?;
        if self.registry.resolve(module).is_none() {
            return Err(RuntimeError::UnknownAssignor {
                name: module.to_owned(),
            });
        }
        if prepared.input.members.is_empty() {
            return Err(RuntimeError::EmptyGroup(group.to_owned()));
        }
        let registry = self.registry.clone();
        let limits = self.limits;
        let name = module.to_owned();
        let input = prepared.input.clone();
        let engine = registry.engine().clone();
        let result = engine
            .on_guest_thread(move || -> Result<Assignment, PluginError> {
                let module = registry.load(&name)?;
                Ok(registry
                    .engine()
                    .assign(&module, &input, &limits)?
                    .assignment)
            })
            .await;
        let assignment = match result {
            Ok(Ok(assignment)) => assignment,
            Ok(Err(error)) => {
                return Err(RuntimeError::AssignorFailed {
                    module: module.to_owned(),
                    message: error.to_string(),
                });
            }
            Err(unfinished) => {
                return Err(RuntimeError::AssignorFailed {
                    module: module.to_owned(),
                    message: unfinished.to_string(),
                });
            }
        };
        let (before, after) = self
            .read(group, |core, _| {
                let before = core.group(group).map(|g| (*g.target).clone());
                core.preview_target(group, &prepared, &assignment)
                    .map(|after| (before.unwrap_or_default(), after))
            })
            .await??;
        Ok(Preview {
            prepared,
            assignment,
            before,
            after,
        })
    }
}
